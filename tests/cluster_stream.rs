//! Streams across processes (timely's cluster mode on 127.0.0.1): one
//! committer on process 0, every process reading its share of the
//! partitions. The tables must equal a batch run over the same records and
//! verify, whatever the process count, also when it changes between
//! restarts and after a process is killed.

use std::path::PathBuf;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use crate::cluster::hostfile;
use crate::common::{Rng, World, output_within};
use crate::stream::{JOBS, StreamJob, events, stream_args, table_csv, users, wait_for_commit_of};

const EVENTS_HEADER: &str = "user,user_id,ts,page,amount";
const USERS_HEADER: &str = "user_id,country";

/// `kappa cluster -n N -- ARGS` in `w`, bounded at 120 s.
fn cluster_run(w: &World, n: usize, args: &[&str]) -> Output {
    let mut all = vec![
        "cluster".to_string(),
        "-n".into(),
        n.to_string(),
        "--".into(),
    ];
    all.extend(args.iter().map(|a| a.to_string()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    output_within(&mut w.kappa(&all), Duration::from_secs(120))
        .unwrap_or_else(|| panic!("kappa {all:?} ran for more than 120 s"))
}

/// `kappa cluster -n N -- ARGS` in `w`, expecting success; its stderr.
fn cluster_ok(w: &World, n: usize, args: &[String]) -> String {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = cluster_run(w, n, &args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "kappa cluster {args:?} failed:\n{err}"
    );
    err
}

/// `kappa table verify OUTPUT ARGS` on `n` processes: whether it
/// succeeded, its stdout and its stderr.
fn cluster_verify(w: &World, n: usize, output: &str, extra: &[&str]) -> (bool, String, String) {
    let mut args = vec!["table", "verify", output];
    args.extend(extra);
    let out = cluster_run(w, n, &args);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// Process `process` of `processes` of `kappa ARGS`, in the background.
fn start(w: &World, args: &[String], processes: usize, process: usize, hosts: &PathBuf) -> Child {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    w.kappa(&args)
        .args(["--processes", &processes.to_string()])
        .args(["--process", &process.to_string()])
        .arg("--hostfile")
        .arg(hosts)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `child` at most `limit`; its output (`None`: still running, killed).
fn wait_within(child: Child, limit: Duration) -> Option<Output> {
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output().unwrap());
    let started = Instant::now();
    while !waiter.is_finished() {
        if started.elapsed() > limit {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            waiter.join().unwrap();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(waiter.join().unwrap())
}

/// The topics of the stream tests' jobs, and their rows in two halves.
struct Data {
    events: Vec<String>,
    users: Vec<String>,
}

impl Data {
    fn new(w: &World, seed: u64, n: usize) -> Data {
        let mut rng = Rng(seed);
        w.ok(&["log", "create", "events", "--partitions", "3"]);
        w.ok(&["log", "create", "users", "--partitions", "2", "--compact"]);
        Data {
            events: events(&mut rng, n),
            users: users(&mut rng),
        }
    }

    /// Produces half `half` (0 or 1) of both topics.
    fn produce(&self, w: &World, half: usize) {
        for (topic, rows, header) in [
            ("events", &self.events, EVENTS_HEADER),
            ("users", &self.users, USERS_HEADER),
        ] {
            let mid = rows.len() / 2;
            let part = if half == 0 {
                &rows[..mid]
            } else {
                &rows[mid..]
            };
            let file = w.write(
                &format!("{topic}-{half}.csv"),
                &format!("{header}\n{}\n", part.join("\n")),
            );
            let mut args = vec!["log", "produce", topic, "--file", &file];
            if topic == "users" {
                args.extend(["--key", "user_id"]);
            }
            w.ok(&args);
        }
    }

    /// `job` over all the rows as files, as `kappa run` writes its output.
    fn batch(&self, w: &World, job: &StreamJob) -> String {
        let events = w.write(
            "all-events.csv",
            &format!("{EVENTS_HEADER}\n{}\n", self.events.join("\n")),
        );
        let mut latest = std::collections::BTreeMap::new();
        for u in &self.users {
            latest.insert(u.split(',').next().unwrap().to_string(), u.clone());
        }
        let rows: Vec<&str> = latest.values().map(String::as_str).collect();
        let users = w.write(
            "all-users.csv",
            &format!("{USERS_HEADER}\n{}\n", rows.join("\n")),
        );
        let out = w.path(&format!("batch-{}", job.job));
        let mut run = vec![
            "run".to_string(),
            job.job.to_string(),
            "--overwrite".into(),
            "-o".into(),
            out.display().to_string(),
        ];
        for (name, topic) in job.inputs {
            let file = if *topic == "events" { &events } else { &users };
            run.extend(["-i".into(), format!("{name}={file}")]);
        }
        for p in job.params {
            run.extend(["-p".into(), p.to_string()]);
        }
        w.ok(&run.iter().map(String::as_str).collect::<Vec<_>>());
        std::fs::read_to_string(out.join(format!("{}.csv", job.output)))
            .unwrap()
            .replace('"', "")
    }
}

/// The table of `job` equals the batch run over all rows, and verifies.
fn assert_table_is_batch(w: &World, data: &Data, job: &StreamJob, how: &str) {
    assert_eq!(
        table_csv(w, job.output),
        data.batch(w, job),
        "job {}: the table streamed {how} differs from batch",
        job.job
    );
    let out = w.kappa(&["table", "verify", job.output]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains(": identical ("),
        "verify {} after {how}: {text}",
        job.output
    );
    // The same check as one run across two processes.
    let (ok, out, err) = cluster_verify(w, 2, job.output, &["-w", "2"]);
    assert!(
        ok && out.contains(": identical ("),
        "cluster verify {}: {out}\n{err}",
        job.output
    );
    assert!(
        err.contains("[p1] kappa: process 1 of 2 recomputes its share"),
        "{err}"
    );
}

fn until_caught_up(job: &StreamJob, workers: usize) -> Vec<String> {
    let mut args = stream_args(job);
    args.extend([
        "--until-caught-up".into(),
        "--workers".into(),
        workers.to_string(),
        "--max-batch".into(),
        "100".into(),
    ]);
    args
}

#[test]
fn streams_across_processes_equal_batch_also_when_the_process_count_changes() {
    let w = World::new();
    let data = Data::new(&w, 0x51ab, 1200);
    data.produce(&w, 0);
    for job in JOBS {
        let err = cluster_ok(&w, 2, &until_caught_up(job, 1));
        assert!(err.contains("[p0] kappa stream: created"), "{err}");
        assert!(
            err.contains("[p1] kappa: process 1 of 2 reads its share"),
            "{err}"
        );
    }
    data.produce(&w, 1);
    for job in JOBS {
        // Three processes of two workers resume what two of one built.
        let err = cluster_ok(&w, 3, &until_caught_up(job, 2));
        assert!(err.contains("[p0] kappa stream: resuming"), "{err}");
        assert_table_is_batch(&w, &data, job, "on 2 then 3 processes");
    }
    // And back to one process, with nothing new: nothing changes.
    let job = &JOBS[0];
    let args = until_caught_up(job, 2);
    w.ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_table_is_batch(&w, &data, job, "on 2, 3, then 1 process");
    // A verify across processes notices a table that no longer matches the log.
    let conn = rusqlite::Connection::open(w.path("tables.db")).unwrap();
    let changed = conn
        .execute(
            "UPDATE kappa_rows__groups__v1 SET count = count + 1 WHERE user = 'u3'",
            [],
        )
        .unwrap();
    assert_eq!(changed, 1);
    let (ok, out, err) = cluster_verify(&w, 3, "groups", &["-w", "2"]);
    assert!(
        !ok && out.contains("DIFFERS") && out.contains("only in table (1x): u3,"),
        "{out}\n{err}"
    );
}

#[test]
fn a_killed_stream_process_ends_the_others_and_a_restart_resumes_exactly_once() {
    let w = World::new();
    let data = Data::new(&w, 0xdead, 1500);
    data.produce(&w, 0);
    let job = &JOBS[0];
    let mut args = stream_args(job);
    args.extend([
        "--workers".into(),
        "1".into(),
        "--max-batch".into(),
        "50".into(),
    ]);
    let hosts = hostfile(w.dir.path(), 2);
    let mut p0 = start(&w, &args, 2, 0, &hosts);
    let mut p1 = start(&w, &args, 2, 1, &hosts);
    wait_for_commit_of(&w, job.output, &mut p0);
    p1.kill().unwrap(); // SIGKILL
    p1.wait().unwrap();
    let out =
        wait_within(p0, Duration::from_secs(30)).expect("process 0 went on after process 1 died");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("lost process 1 (127.0.0.1:"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    data.produce(&w, 1);
    cluster_ok(&w, 3, &until_caught_up(job, 1));
    assert_table_is_batch(&w, &data, job, "after a SIGKILL, on 3 processes");
}

#[test]
fn stream_processes_that_disagree_are_refused_and_leave_no_deployment() {
    let w = World::new();
    let data = Data::new(&w, 7, 100);
    data.produce(&w, 0);
    let hosts = hostfile(w.dir.path(), 2);
    let args = |key: &str| {
        let mut a = stream_args(&JOBS[0]);
        let at = a.iter().position(|p| p.starts_with("key=")).unwrap();
        a[at] = format!("key={key}");
        a.push("--until-caught-up".into());
        a.extend(["--workers".into(), "1".into()]);
        a
    };
    let p0 = start(&w, &args("user"), 2, 0, &hosts);
    let p1 = start(&w, &args("page"), 2, 1, &hosts);
    for (i, p) in [p0, p1].into_iter().enumerate() {
        let out = wait_within(p, Duration::from_secs(60)).expect("a refused process hung");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "process {i}: {err}");
        assert!(
            err.contains("process 1 was started with another job, parameters")
                && err.contains("process 0 has `param key=user`, process 1 has `param key=page`"),
            "process {i}: {err}"
        );
    }
    assert!(
        !w.path("tables.db").exists(),
        "a refused stream left its table store"
    );
}

/// A key whose records go to partition `partition` of 2 (crc32c routing).
fn key_in_partition(partition: u32) -> String {
    (0..)
        .map(|i| format!("k{i}"))
        .find(|k| crc32c::crc32c(k.as_bytes()) % 2 == partition)
        .unwrap()
}

#[test]
fn a_bad_record_read_by_another_process_fails_every_process_or_is_counted_by_the_committer() {
    let w = World::new();
    w.ok(&["log", "create", "ev", "--partitions", "2"]);
    let (k0, k1) = (key_in_partition(0), key_in_partition(1));
    // Worker 1 (process 1) reads partition 1, where the bad record is.
    let rows = format!("user,ts\n{k0},10\n{k1},20\n{k1},x\n{k0},30\n");
    let file = w.write("ev.csv", &rows);
    w.ok(&["log", "produce", "ev", "--file", &file, "--key", "user"]);
    let args = |extra: &[&str]| {
        let mut a: Vec<String> = [
            "stream",
            "sessionize",
            "-i",
            "events=ev",
            "--until-caught-up",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(["--workers".into(), "1".into()]);
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let mut all = vec!["cluster", "-n", "2", "--"];
    let failing = args(&[]);
    all.extend(failing.iter().map(String::as_str));
    let out = w.kappa(&all).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let at = "topic ev, partition 1, offset 1, column 2 (ts): expected an integer, found \"x\"";
    assert!(
        err.lines().any(|l| l.starts_with("[p1]") && l.contains(at)),
        "{err}"
    );
    assert!(
        err.lines()
            .any(|l| l.starts_with("[p0]") && l.contains("process 1 failed") && l.contains(at)),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    cluster_ok(&w, 2, &args(&["--on-bad-row", "skip"]));
    let out = w.kappa(&["table", "status", "--csv"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let row: Vec<&str> = text.lines().nth(1).unwrap().split(',').collect();
    let bad = header
        .iter()
        .position(|h| h.eq_ignore_ascii_case("bad_rows"))
        .unwrap();
    assert_eq!(row[bad], "1", "{text}");
    // The same rows as files, in one process, skipping the same record.
    let out = w.path("batch");
    w.ok(&[
        "run",
        "sessionize",
        "-i",
        &format!("events={file}"),
        "--on-bad-row",
        "skip",
        "-o",
        out.to_str().unwrap(),
    ]);
    let batch = std::fs::read_to_string(out.join("sessions.csv")).unwrap();
    assert_eq!(table_csv(&w, "sessions"), batch);
    // verify across processes meets the record on process 1 too: it skips
    // it as the deployment's runs did, or fails every process when told to.
    let (ok, out, err) = cluster_verify(&w, 2, "sessions", &["-w", "1"]);
    assert!(ok && out.contains(": identical ("), "{out}\n{err}");
    assert!(
        out.contains("(1 bad record skipped, as the deployment's runs skipped them)"),
        "{out}"
    );
    let (ok, out, err) = cluster_verify(&w, 2, "sessions", &["-w", "1", "--on-bad-row", "fail"]);
    assert!(
        !ok && err.lines().any(|l| l.starts_with("[p1]") && l.contains(at)),
        "{out}\n{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn reprocess_and_rollback_across_processes_swap_whole_versions() {
    const V1: StreamJob = StreamJob {
        job: "group-by",
        output: "groups",
        inputs: &[("input", "events")],
        params: &["key=user", "agg=count,max:ts"],
    };
    let v2 = &JOBS[0];
    assert_eq!((v2.job, v2.output), (V1.job, V1.output));
    let w = World::new();
    let data = Data::new(&w, 0xab1e, 800);
    data.produce(&w, 0);
    cluster_ok(&w, 2, &until_caught_up(&V1, 1));
    let mut reprocess = until_caught_up(v2, 1);
    reprocess[0] = "reprocess".into();
    let err = cluster_ok(&w, 2, &reprocess);
    assert!(err.contains("[p0] kappa: swapped groups to v2"), "{err}");
    data.produce(&w, 1);
    let rollback: Vec<String> = ["table", "rollback", "groups", "--until-caught-up", "-q"]
        .iter()
        .map(|s| s.to_string())
        .chain(["--workers".into(), "2".into()])
        .collect();
    let err = cluster_ok(&w, 3, &rollback);
    assert!(err.contains("[p0] kappa: swapped groups to v1"), "{err}");
    assert_table_is_batch(&w, &data, &V1, "rolled back on 3 processes");
}

#[test]
fn sigterm_to_the_launcher_stops_every_process_of_a_stream_cleanly() {
    let w = World::new();
    let data = Data::new(&w, 0x7e, 600);
    data.produce(&w, 0);
    let job = &JOBS[0];
    let mut args = vec!["cluster".to_string(), "-n".into(), "2".into(), "--".into()];
    args.extend(stream_args(job));
    args.extend(["--workers".into(), "1".into()]);
    let mut launcher = w
        .kappa(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_commit_of(&w, job.output, &mut launcher);
    let status = std::process::Command::new("kill")
        .args(["-TERM", &launcher.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = wait_within(launcher, Duration::from_secs(30)).expect("the stream did not stop");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("[p0] kappa stream: process 0 of 2 stopped"),
        "{err}"
    );
    assert!(
        err.contains("[p1] kappa stream: process 1 of 2 stopped"),
        "{err}"
    );
    // What was committed is a consistent prefix: a restart on one process
    // catches up to exactly the batch result.
    data.produce(&w, 1);
    let args = until_caught_up(job, 2);
    w.ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_table_is_batch(&w, &data, job, "after a SIGTERM to the launcher");
}

/// Two network namespaces joined by a veth pair, removed when dropped.
struct Namespaces {
    names: [String; 2],
    addresses: [String; 2],
    veths: [String; 2],
}

impl Namespaces {
    /// `None` (with the reason) where namespaces cannot be made here.
    fn new() -> Result<Namespaces, String> {
        // Tests of one binary run at once: each pair has its own names and
        // subnet.
        static PAIRS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let pair = PAIRS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let id = format!("{}x{pair}", std::process::id());
        let names = [format!("kappa-a-{id}"), format!("kappa-b-{id}")];
        let net = format!("10.{}.{}", 213 + pair % 40, std::process::id() % 250);
        let (va, vb) = (format!("kva{id}"), format!("kvb{id}"));
        let ns = Namespaces {
            addresses: [format!("{net}.1"), format!("{net}.2")],
            names,
            veths: [va.clone(), vb.clone()],
        };
        let [a, b] = &ns.names;
        let steps: Vec<Vec<String>> = vec![
            vec!["netns".into(), "add".into(), a.clone()],
            vec!["netns".into(), "add".into(), b.clone()],
            ["link", "add", &va, "type", "veth", "peer", "name", &vb]
                .map(String::from)
                .to_vec(),
            ["link", "set", &va, "netns", a].map(String::from).to_vec(),
            ["link", "set", &vb, "netns", b].map(String::from).to_vec(),
        ];
        for step in steps {
            ip(None, &step)?;
        }
        for (name, (veth, addr)) in ns
            .names
            .iter()
            .zip([(&va, &ns.addresses[0]), (&vb, &ns.addresses[1])])
        {
            ip(
                Some(name),
                &["addr", "add", &format!("{addr}/24"), "dev", veth].map(String::from),
            )?;
            ip(Some(name), &["link", "set", veth, "up"].map(String::from))?;
            ip(Some(name), &["link", "set", "lo", "up"].map(String::from))?;
        }
        Ok(ns)
    }
}

impl Namespaces {
    /// Namespaces, or (without `KAPPA_REQUIRE_SERVICES`) `None` with the
    /// test's skip reported.
    fn for_test(test: &str) -> Option<Namespaces> {
        match Namespaces::new() {
            Ok(ns) => Some(ns),
            Err(why) => {
                assert!(
                    std::env::var("KAPPA_REQUIRE_SERVICES").is_err(),
                    "{test}: cannot create network namespaces ({why})"
                );
                eprintln!("SKIPPED {test}: cannot create network namespaces here ({why})");
                None
            }
        }
    }

    /// Takes the link between the namespaces down (`up` false) or up: a
    /// partition that closes no socket.
    fn link(&self, up: bool) {
        for (name, veth) in self.names.iter().zip(&self.veths) {
            let state = if up { "up" } else { "down" };
            ip(Some(name), &["link", "set", veth, state].map(String::from)).unwrap();
        }
    }

    /// Process `process` of 2 of `kappa ARGS`, run in its namespace.
    fn start(&self, w: &World, hosts: &PathBuf, process: usize, args: &[String]) -> Child {
        std::process::Command::new("ip")
            .args(["netns", "exec", &self.names[process], crate::common::KAPPA])
            .args(args)
            .args(["--processes", "2", "--process", &process.to_string()])
            .arg("--hostfile")
            .arg(hosts)
            .env("KAPPA_LOG_DIR", w.path("log"))
            .env("KAPPA_TABLE_DB", w.path("tables.db"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// A host file with one address per namespace, on `port`.
    fn hostfile(&self, w: &World, port: u16) -> PathBuf {
        let hosts = w.path(&format!("hosts-netns-{port}"));
        let text: String = self
            .addresses
            .iter()
            .map(|a| format!("{a}:{port}\n"))
            .collect();
        std::fs::write(&hosts, text).unwrap();
        hosts
    }

    /// Runs `kappa ARGS` as both processes, which must succeed.
    fn both(&self, w: &World, hosts: &PathBuf, args: &[String]) {
        let p1 = self.start(w, hosts, 1, args);
        let p0 = self.start(w, hosts, 0, args);
        for (i, p) in [p0, p1].into_iter().enumerate() {
            let out = wait_within(p, Duration::from_secs(120)).expect("a process hung");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "process {i}: {err}");
        }
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = ip(None, &["netns".into(), "del".into(), name.clone()]);
        }
    }
}

/// `ip ARGS`, in namespace `ns` if given.
fn ip(ns: Option<&str>, args: &[String]) -> Result<(), String> {
    let mut cmd = std::process::Command::new("ip");
    if let Some(ns) = ns {
        cmd.args(["netns", "exec", ns, "ip"]);
    }
    let out = cmd.args(args).output().map_err(|e| format!("ip: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

#[test]
fn processes_in_separate_network_namespaces_stream_and_run_as_one() {
    let Some(ns) =
        Namespaces::for_test("processes_in_separate_network_namespaces_stream_and_run_as_one")
    else {
        return;
    };
    let w = World::new();
    let hosts = ns.hostfile(&w, 24301);
    let data = Data::new(&w, 0x4e7, 900);
    data.produce(&w, 0);
    data.produce(&w, 1);
    let both = |args: &[String]| ns.both(&w, &hosts, args);
    let job = &JOBS[0];
    both(&until_caught_up(job, 1));
    assert_table_is_batch(&w, &data, job, "across two network namespaces");
    // A batch run over the same rows as a file, across the namespaces.
    let file = w.write(
        "ns-events.csv",
        &format!("{EVENTS_HEADER}\n{}\n", data.events.join("\n")),
    );
    let out = w.path("ns-batch");
    let mut run: Vec<String> = vec!["run".into(), job.job.into(), "-o".into()];
    run.push(out.display().to_string());
    run.extend([
        "-i".into(),
        format!("input={file}"),
        "--workers".into(),
        "1".into(),
    ]);
    for p in job.params {
        run.extend(["-p".into(), p.to_string()]);
    }
    both(&run);
    let batch = std::fs::read_to_string(out.join(format!("{}.csv", job.output))).unwrap();
    assert_eq!(batch.replace('"', ""), data.batch(&w, job));
}

/// A partition (the link between the namespaces goes down, closing no
/// socket) ends both processes of a live stream within the peer timeout,
/// each naming the other; after the link heals, a restart equals batch.
#[test]
fn a_network_partition_ends_every_process_within_the_peer_timeout() {
    let Some(ns) =
        Namespaces::for_test("a_network_partition_ends_every_process_within_the_peer_timeout")
    else {
        return;
    };
    let w = World::new();
    let hosts = ns.hostfile(&w, 24302);
    let data = Data::new(&w, 0x9a7, 900);
    data.produce(&w, 0);
    let job = &JOBS[0];
    let mut args = stream_args(job);
    args.extend(["--workers", "1", "--max-batch", "50", "--peer-timeout", "3"].map(String::from));
    let p1 = ns.start(&w, &hosts, 1, &args);
    let mut p0 = ns.start(&w, &hosts, 0, &args);
    wait_for_commit_of(&w, job.output, &mut p0);
    ns.link(false);
    let cut = Instant::now();
    let waiters: Vec<_> = [p0, p1]
        .into_iter()
        .map(|p| std::thread::spawn(move || wait_within(p, Duration::from_secs(60))))
        .collect();
    for (process, waiter) in waiters.into_iter().enumerate() {
        let out = waiter
            .join()
            .unwrap()
            .expect("a process hung in the partition");
        let err = String::from_utf8_lossy(&out.stderr);
        let other = 1 - process;
        assert!(!out.status.success(), "process {process}: {err}");
        assert!(
            err.contains(&format!(
                "lost process {other} ({}:24302): no heartbeat for 3 s",
                ns.addresses[other]
            )) && err.contains("nothing of the current epoch was committed"),
            "process {process}: {err}"
        );
        assert!(!err.contains("panicked"), "process {process}: {err}");
    }
    // Both waits ran at once: the later exit is within the timeout and
    // the time to notice and stop.
    assert!(
        cut.elapsed() < Duration::from_secs(3 + 7),
        "the processes took {:?} to end after the partition",
        cut.elapsed()
    );
    ns.link(true);
    data.produce(&w, 1);
    ns.both(&w, &hosts, &until_caught_up(job, 1));
    assert_table_is_batch(&w, &data, job, "after a network partition");
}
