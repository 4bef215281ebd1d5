//! The PostgreSQL table store end to end, with the real binary and a real
//! server: the stream and reprocess suites of the SQLite store run again
//! with `--table-db postgresql://...`, a reader on its own connection never
//! sees half an epoch, the server restarted under a stream, a second writer
//! refused, and the password never printed.
//!
//! Each test gets a database of its own on the server `KAPPA_TEST_POSTGRES`
//! names (`.ci/run` starts one); the restart test starts a private cluster
//! from `KAPPA_TEST_PGBIN`, since it stops the server. Without them a test
//! is skipped with a printed reason, or fails under
//! `KAPPA_REQUIRE_SERVICES=1` (CI).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use postgres::{Client, NoTls};

use crate::common::{Rng, World};
use crate::stream::{stream_with_kills_equals_batch, table_csv};

#[test]
fn stream_with_kills_equals_batch_on_postgres() {
    let Some(w) = World::on_postgres() else {
        return;
    };
    stream_with_kills_equals_batch(&w, || {
        let mut c = Client::connect(&w.table_db, NoTls).unwrap();
        c.execute(
            "UPDATE groups__v1 SET count = count + 1 WHERE \"user\" = 'u3'",
            &[],
        )
        .unwrap();
    });
}

#[test]
fn reprocess_swap_and_rollback_on_postgres() {
    let Some(w) = World::on_postgres() else {
        return;
    };
    crate::reprocess::walkthrough(&w);
    // What psql sees is what kappa shows.
    let mut c = Client::connect(&w.table_db, NoTls).unwrap();
    let mut seen: Vec<String> = c
        .query("SELECT trim(both '()' from s::text) FROM sessions s", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    seen.sort();
    let shown = w.ok(&["table", "show", "sessions", "--csv", "--limit", "1000000"]);
    let mut shown: Vec<&str> = shown
        .lines()
        .skip(1)
        .filter(|l| !l.contains(" distinct rows"))
        .collect();
    shown.sort();
    assert_eq!(seen, shown);
}

/// A reader on its own connection polls the view and the committed offsets
/// in one statement (one snapshot) while the stream runs.
#[test]
fn a_reader_never_sees_half_an_epoch() {
    let Some(w) = World::on_postgres() else {
        return;
    };
    let mut c = Client::connect(&w.table_db, NoTls).unwrap();
    crate::stream::a_reader_never_sees_half_an_epoch(&w, || {
        let r = c
            .query_opt(
                "SELECT (SELECT coalesce(sum(count), 0)::bigint FROM counts), \
                 (SELECT coalesce(sum(next_offset), 0)::bigint FROM kappa.offsets)",
                &[],
            )
            .ok()??;
        Some((r.get(0), r.get(1)))
    });
}

/// A stream of counts by key over a small topic `clicks`.
const COUNT_CLICKS: [&str; 7] = [
    "stream",
    "count-by",
    "-i",
    "input=clicks",
    "-p",
    "key=key",
    "-q",
];

/// Makes topic `clicks`, starts [`COUNT_CLICKS`] on it with its stderr
/// to `stderr`, and waits for its first commit.
fn count_clicks(w: &World, stderr: Stdio) -> std::process::Child {
    w.ok(&["log", "create", "clicks"]);
    let file = w.write("c.csv", "key,n\na,1\nb,2\n");
    w.ok(&["log", "produce", "clicks", "--file", &file]);
    let child = w
        .kappa(&COUNT_CLICKS)
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    crate::stream::wait_for_commit(w, "counts");
    child
}

/// Waits up to 20 s for `done`, failing at once if `child` exits (with
/// `log`, what it wrote) that the stream did not `what`.
fn wait_while_running(
    child: &mut std::process::Child,
    what: &str,
    log: &dyn Fn() -> String,
    mut done: impl FnMut() -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(
            Instant::now() < deadline && child.try_wait().unwrap().is_none(),
            "the stream did not {what}: {}",
            log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A first `kappa stream` that fails leaves the database as it found it:
/// the `kappa` schema it made is gone, and so is an output schema it made,
/// but a schema the user made stays.
#[test]
fn a_failed_first_stream_removes_what_it_created_and_nothing_else() {
    let Some(w) = World::on_postgres() else {
        return;
    };
    w.ok(&["log", "create", "mixed"]);
    // One key column with an integer and a text: PostgreSQL refuses it.
    let file = w.write("m.csv", "key\n1\nx\n");
    w.ok(&["log", "produce", "mixed", "--file", &file]);
    let mut c = Client::connect(&w.table_db, NoTls).unwrap();
    let mut schemas = || -> String {
        c.query_one(
            "SELECT coalesce(string_agg(nspname, ',' ORDER BY nspname), '') FROM pg_namespace \
             WHERE nspname IN ('kappa', 'reports', 'mine')",
            &[],
        )
        .unwrap()
        .get(0)
    };
    let in_schema = |name: &str| {
        let join = if w.table_db.contains('?') { '&' } else { '?' };
        format!("{}{join}schema={name}", w.table_db)
    };
    let stream = |url: &str| {
        let out = w
            .kappa(&[
                "stream",
                "count-by",
                "-i",
                "input=mixed",
                "-p",
                "key=key",
                "--until-caught-up",
            ])
            .env("KAPPA_TABLE_DB", url)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(err.contains("a PostgreSQL column has one type"), "{err}");
    };
    stream(&w.table_db);
    assert_eq!(schemas(), "");
    stream(&in_schema("reports"));
    assert_eq!(schemas(), "");
    Client::connect(&w.table_db, NoTls)
        .unwrap()
        .batch_execute("CREATE SCHEMA mine; CREATE TABLE mine.t (x int)")
        .unwrap();
    stream(&in_schema("mine"));
    assert_eq!(schemas(), "mine");
    // A stream that commits keeps its catalog.
    let file = w.write("n.csv", "key\na\nb\n");
    w.ok(&["log", "create", "letters"]);
    w.ok(&["log", "produce", "letters", "--file", &file]);
    w.ok(&[
        "stream",
        "count-by",
        "-i",
        "input=letters",
        "-p",
        "key=key",
        "--until-caught-up",
    ]);
    assert_eq!(schemas(), "kappa,mine");
}

/// The deployment lock lives on a connection of its own. When that
/// connection is lost (ended by an administrator, or by the server's
/// `idle_session_timeout`), the driving process takes the lock again before
/// its next commit, so a second process is still refused.
#[test]
fn the_deployment_lock_is_taken_again_when_its_connection_is_lost() {
    let Some(w) = World::on_postgres() else {
        return;
    };
    let mut admin = Client::connect(&w.table_db, NoTls).unwrap();
    // Every new session of this database ends after 2 s idle.
    admin
        .batch_execute(
            "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET idle_session_timeout = ''2s''', \
             current_database()); END $$",
        )
        .unwrap();
    let stderr = w.path("first.err");
    let mut first = count_clicks(&w, std::fs::File::create(&stderr).unwrap().into());
    // Idle for several timeouts: the lock's session is kept from idling.
    std::thread::sleep(Duration::from_secs(5));
    // A second stream that is not refused takes the deployment over and
    // runs on: it is killed and the test fails.
    let second = Duration::from_secs(60);
    let err = w.fails_within(&COUNT_CLICKS, second);
    assert!(err.contains("counts v1 is already driven by"), "{err}");
    // An administrator ends the lock's session.
    let ended: i64 = admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = current_database() AND application_name = 'kappa deployment lock'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(ended, 1, "the stream holds its lock on one connection");
    let log = || std::fs::read_to_string(&stderr).unwrap();
    wait_while_running(&mut first, "take its lock again", &log, || {
        log().contains("was lost with its connection")
    });
    let err = w.fails_within(&COUNT_CLICKS, second);
    assert!(err.contains("counts v1 is already driven by"), "{err}");
    // It still streams.
    let more = w.write("d.csv", "key,n\nc,3\n");
    w.ok(&["log", "produce", "clicks", "--file", &more]);
    wait_while_running(&mut first, "apply records after it", &log, || {
        table_csv(&w, "counts").contains("c,1")
    });
    first.kill().unwrap();
    first.wait().unwrap();
}

#[test]
fn a_second_writer_is_refused_and_passwords_are_never_printed() {
    let Some(w) = World::on_postgres() else {
        return;
    };
    let mut first = count_clicks(&w, Stdio::null());
    let err = w.fails(&COUNT_CLICKS);
    assert!(err.contains("counts v1 is already driven by"), "{err}");
    first.kill().unwrap();
    first.wait().unwrap();
    // The password is in the URL (trust authentication ignores it); no output,
    // error or catalog field may show it.
    let with_password = w.table_db.replacen("postgres@", "postgres:hunter2@", 1);
    for args in [
        &["table", "status"][..],
        &["table", "show", "nope"][..],
        &[
            "stream",
            "count-by",
            "-i",
            "input=clicks",
            "-p",
            "key=key",
            "--until-caught-up",
        ][..],
    ] {
        let out = w
            .kappa(args)
            .env("KAPPA_TABLE_DB", &with_password)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.contains("hunter2"), "{args:?}: {text}");
    }
    let bad = with_password.replacen("/kappa", "/no_such_db_", 1);
    let out = w
        .kappa(&["table", "status"])
        .env("KAPPA_TABLE_DB", &bad)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("postgres:***@") && !err.contains("hunter2"),
        "{err}"
    );
    let mut c = Client::connect(&w.table_db, NoTls).unwrap();
    let catalog: String = c
        .query_one(
            "SELECT string_agg(d::text, ' ') FROM kappa.deployments d",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(!catalog.contains("hunter2"), "{catalog}");
}

/// A private cluster, stopped (and its files removed) when dropped.
struct Cluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    /// Extra server settings (`-c NAME=VALUE ...`).
    settings: String,
}

impl Cluster {
    fn start() -> Option<Cluster> {
        Cluster::start_with(|_| String::new())
    }

    /// A cluster; `configure` may write files into its directory (before
    /// the server starts) and returns extra server settings.
    fn start_with(configure: impl FnOnce(&Path) -> String) -> Option<Cluster> {
        let Ok(bin) = std::env::var("KAPPA_TEST_PGBIN") else {
            let why = "no PostgreSQL binaries: set KAPPA_TEST_PGBIN (.ci/run sets it)";
            assert!(std::env::var("KAPPA_REQUIRE_SERVICES").is_err(), "{why}");
            eprintln!("SKIPPED: {why}");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut c = Cluster {
            bin: bin.into(),
            dir,
            port,
            settings: String::new(),
        };
        c.as_postgres(&format!("chown postgres {}", c.dir.path().display()), true);
        c.as_postgres(
            &format!(
                "{}/initdb -D {}/data -A trust -U postgres",
                c.bin.display(),
                c.dir.path().display()
            ),
            false,
        );
        c.settings = configure(c.dir.path());
        c.as_postgres(
            &format!("chown -R postgres {}", c.dir.path().display()),
            true,
        );
        c.pg_ctl("start");
        Some(c)
    }

    fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn pg_ctl(&self, action: &str) {
        let d = self.dir.path().display();
        self.as_postgres(
            &format!(
                "{}/pg_ctl -D {d}/data -l {d}/log -w -m fast {action} \
                 -o '-p {} -k {d} -c listen_addresses=127.0.0.1 -c fsync=off {}'",
                self.bin.display(),
                self.port,
                self.settings
            ),
            false,
        );
    }

    /// Runs `cmd` as the postgres user (initdb refuses root), or as root.
    fn as_postgres(&self, cmd: &str, root: bool) {
        let status = if root {
            Command::new("sh").args(["-c", cmd]).status()
        } else {
            Command::new("su")
                .args(["postgres", "-c", cmd])
                .stdout(Stdio::null())
                .status()
        }
        .unwrap();
        assert!(status.success(), "{cmd}");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let d = self.dir.path().display();
        let _ = Command::new("su")
            .args([
                "postgres",
                "-c",
                &format!(
                    "{}/pg_ctl -D {d}/data -m immediate stop",
                    self.bin.display()
                ),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The server restarts (`pg_ctl restart`) twice while a stream runs: the
/// stream reports the lost connection, reconnects, redoes the open epoch,
/// and its table ends equal to a batch run.
#[test]
fn the_server_restarts_under_a_stream() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let mut w = World::new();
    w.table_db = cluster.url();
    let mut rng = Rng(5);
    w.ok(&["log", "create", "clicks", "--partitions", "2"]);
    let rows: Vec<String> = (0..3000)
        .map(|i| format!("k{},{}", rng.below(50), i % 13))
        .collect();
    let all = w.write("all.csv", &format!("key,n\n{}\n", rows.join("\n")));
    let first = w.write("c0.csv", &format!("key,n\n{}\n", rows[..500].join("\n")));
    w.ok(&["log", "produce", "clicks", "--file", &first]);
    let stderr = w.path("stream.err");
    let mut stream = w
        .kappa(&[
            "stream",
            "group-by",
            "-i",
            "input=clicks",
            "-p",
            "key=key",
            "-p",
            "agg=count,sum:n",
            "--max-batch",
            "50",
            "-q",
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let producer = w.produce_in_background(
        "clicks",
        "key,n",
        rows[500..].to_vec(),
        250,
        Duration::from_millis(100),
    );
    crate::stream::wait_for_commit(&w, "groups");
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(300));
        cluster.pg_ctl("restart");
    }
    producer.join().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while applied(&w.table_db) < 3000 {
        assert!(
            Instant::now() < deadline && stream.try_wait().unwrap().is_none(),
            "the stream did not apply everything after the restarts: {}",
            std::fs::read_to_string(&stderr).unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The lock was lost with the server's restarts and taken again. Until
    // the stream notices the restart, nothing holds it (a process started
    // then takes it, and the first stops with "already driven by"): wait
    // until it is held before the second stream tries.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !deployment_lock_held(&w.table_db) {
        assert!(
            Instant::now() < deadline && stream.try_wait().unwrap().is_none(),
            "the stream did not take its lock again after the restarts: {}",
            std::fs::read_to_string(&stderr).unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let second = w.fails(&[
        "stream",
        "group-by",
        "-i",
        "input=clicks",
        "-p",
        "key=key",
        "-p",
        "agg=count,sum:n",
    ]);
    assert!(
        second.contains("groups v1 is already driven by"),
        "{second}"
    );
    stream.kill().unwrap();
    stream.wait().unwrap();
    let log = std::fs::read_to_string(&stderr).unwrap();
    assert!(
        log.contains("reconnecting") && log.contains("reconnected"),
        "{log}"
    );
    assert!(log.contains("was lost with its connection"), "{log}");
    let out = w.path("batch");
    w.ok(&[
        "run",
        "group-by",
        "-i",
        &format!("input={all}"),
        "-p",
        "key=key",
        "-p",
        "agg=count,sum:n",
        "-o",
        out.to_str().unwrap(),
    ]);
    let batch = std::fs::read_to_string(out.join("groups.csv"))
        .unwrap()
        .replace('"', "");
    assert_eq!(table_csv(&w, "groups"), batch);
    let verify = w.ok(&["table", "verify", "groups"]);
    assert!(verify.contains(": identical ("), "{verify}");
}

/// Whether a session holds a deployment lock (kappa's advisory locks of
/// class 'kapq').
fn deployment_lock_held(url: &str) -> bool {
    Client::connect(url, NoTls)
        .ok()
        .and_then(|mut c| {
            c.query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted \
                 AND classid::bigint = 1801547889",
                &[],
            )
            .ok()
        })
        .is_some_and(|r| r.get::<_, i64>(0) > 0)
}

/// Records the live deployment has applied (0 while the server is down).
fn applied(url: &str) -> i64 {
    Client::connect(url, NoTls)
        .ok()
        .and_then(|mut c| {
            c.query_one(
                "SELECT coalesce(sum(next_offset), 0)::bigint FROM kappa.offsets",
                &[],
            )
            .ok()
        })
        .map_or(0, |r| r.get(0))
}

/// A server that accepts only TLS connections: `sslmode=require` and
/// `verify-full` with the server's root certificate connect; no TLS, or a
/// certificate that cannot be checked, is a clear error.
#[test]
fn tls_is_used_when_the_url_asks_for_it() {
    let Some(cluster) = Cluster::start_with(|dir| {
        let status = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args([
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ])
            .arg("-keyout")
            .arg(dir.join("key.pem"))
            .arg("-out")
            .arg(dir.join("cert.pem"))
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "openssl req");
        std::fs::write(
            dir.join("hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 reject\n",
        )
        .unwrap();
        Command::new("chmod")
            .arg("600")
            .arg(dir.join("key.pem"))
            .status()
            .unwrap();
        format!(
            "-c ssl=on -c ssl_cert_file={d}/cert.pem -c ssl_key_file={d}/key.pem -c hba_file={d}/hba.conf",
            d = dir.display()
        )
    }) else {
        return;
    };
    let mut w = World::new();
    w.ok(&["log", "create", "clicks"]);
    let file = w.write("c.csv", "key,n\na,1\nb,2\na,3\n");
    w.ok(&["log", "produce", "clicks", "--file", &file]);
    let stream = [
        "stream",
        "count-by",
        "-i",
        "input=clicks",
        "-p",
        "key=key",
        "--until-caught-up",
        "-q",
    ];
    let cert = cluster.dir.path().join("cert.pem");
    let base = cluster.url();
    w.table_db = format!("{base}?sslmode=disable");
    let err = w.fails(&stream);
    assert!(
        err.contains("no encryption") || err.contains("rejects connection"),
        "{err}"
    );
    w.table_db = format!("{base}?sslmode=verify-full");
    let err = w.fails(&stream);
    assert!(err.contains("certificate"), "{err}");
    w.table_db = format!("{base}?sslmode=require");
    w.ok(&stream);
    w.table_db = format!("{base}?sslmode=verify-full&sslrootcert={}", cert.display());
    w.ok(&stream);
    assert_eq!(table_csv(&w, "counts"), "key,count\na,2\nb,1\n");
}
