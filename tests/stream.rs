//! The property that defines the engine: for every job, the same input data
//! gives the same final output as `kappa run` on files and as `kappa stream`
//! over the log — whatever the split into epochs and produce chunks, the
//! worker count, and however many times the stream process is killed with
//! SIGKILL and restarted.

use std::fmt::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use kappa::value::Value;

use crate::common::{Rng, World};

/// Events: `user,user_id,ts,page,amount` with nulls and repeats.
pub(crate) fn events(rng: &mut Rng, n: usize) -> Vec<String> {
    let mut ts = 1000;
    (0..n)
        .map(|_| {
            ts += rng.below(40);
            let user = format!("u{}", rng.below(25));
            let page = ["/", "/a", "/b", "/c"][rng.below(4) as usize];
            let amount = if rng.below(9) == 0 {
                String::new()
            } else {
                rng.below(500).to_string()
            };
            format!("{user},{user},{ts},{page},{amount}")
        })
        .collect()
}

/// Users changelog: `user_id,country`, with later updates of the same keys.
pub(crate) fn users(rng: &mut Rng) -> Vec<String> {
    let mut rows: Vec<String> = (0..20)
        .map(|u| format!("u{u},{}", ["fr", "de", "jp"][u % 3]))
        .collect();
    for _ in 0..15 {
        rows.push(format!(
            "u{},{}",
            rng.below(20),
            ["fr", "de", "jp", "br"][rng.below(4) as usize]
        ));
    }
    rows
}

/// Splits `rows` into a random number of chunks (at least one row each).
pub(crate) fn chunks(rng: &mut Rng, rows: &[String], max_chunks: u64) -> Vec<Vec<String>> {
    let n = 1 + rng.below(max_chunks) as usize;
    let mut cuts: Vec<usize> = (0..n - 1)
        .map(|_| 1 + rng.below(rows.len() as u64 - 1) as usize)
        .collect();
    cuts.sort();
    cuts.dedup();
    let mut out = Vec::new();
    let mut start = 0;
    for cut in cuts.into_iter().chain([rows.len()]) {
        out.push(rows[start..cut].to_vec());
        start = cut;
    }
    out
}

/// The live table of `output`, as sorted CSV lines (a row repeated by its multiplicity).
pub(crate) fn table_csv(w: &World, output: &str) -> String {
    let store = w.store();
    let d = store.find_by_output(output, None).unwrap();
    let index = d.output_index(output).unwrap();
    let rows = store.read_rows(&d.table(index)).unwrap();
    let mut text = String::new();
    writeln!(text, "{}", d.outputs[index].columns.join(",")).unwrap();
    for (row, n) in rows {
        let fields: Vec<String> = row.iter().map(csv_field).collect();
        for _ in 0..n {
            writeln!(text, "{}", fields.join(",")).unwrap();
        }
    }
    text
}

fn csv_field(v: &Value) -> String {
    v.to_string()
}

pub(crate) struct StreamJob {
    pub job: &'static str,
    pub output: &'static str,
    pub inputs: &'static [(&'static str, &'static str)],
    pub params: &'static [&'static str],
}

pub(crate) const JOBS: &[StreamJob] = &[
    StreamJob {
        job: "group-by",
        output: "groups",
        inputs: &[("input", "events")],
        params: &[
            "key=user",
            "agg=count,sum:amount,max:ts,avg:amount,count_distinct:page",
        ],
    },
    StreamJob {
        job: "sessionize",
        output: "sessions",
        inputs: &[("events", "events")],
        params: &["gap=60"],
    },
    StreamJob {
        job: "join",
        output: "joined",
        inputs: &[("left", "events"), ("right", "users")],
        params: &["on=user_id", "kind=left"],
    },
    StreamJob {
        job: "page-views",
        output: "page_views",
        inputs: &[("views", "events"), ("users", "users")],
        params: &["attr=country"],
    },
];

/// Waits (bounded) until the live deployment of `output` has committed offsets.
pub(crate) fn wait_for_commit(w: &World, output: &str) {
    wait_for_commit_unless(w, output, &mut || None)
}

/// As [`wait_for_commit`], but fails at once, saying why, when `child`
/// (the process that should commit) has exited: with its status and what
/// it wrote to its stderr, if that is piped.
pub(crate) fn wait_for_commit_of(w: &World, output: &str, child: &mut std::process::Child) {
    wait_for_commit_unless(w, output, &mut || {
        let status = child.try_wait().unwrap()?;
        let mut err = String::new();
        if let Some(mut stderr) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut stderr, &mut err);
        }
        Some(format!(
            "the process exited ({status}) before committing: {err}"
        ))
    })
}

/// Waits (bounded) until `output` has committed offsets, failing at once
/// when `gone` says why it never will.
fn wait_for_commit_unless(w: &World, output: &str, gone: &mut dyn FnMut() -> Option<String>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let committed = kappa::table::open_existing(&w.addr()).is_ok_and(|store| {
            store.find_by_output(output, None).is_ok_and(|d| {
                store
                    .offsets(d.id)
                    .is_ok_and(|o| o.values().any(|&n| n > 0))
            })
        });
        if committed {
            return;
        }
        if let Some(why) = gone() {
            panic!("{output}: {why}");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{output}: the stream committed nothing within 60 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `kappa run` of `job` over the events and users files: its output CSV,
/// unquoted (the test's data holds no quotes or commas in fields), as
/// [`table_csv`] prints a table.
pub(crate) fn batch_output(w: &World, job: &StreamJob, events: &str, users: &str) -> String {
    let out = w.path(&format!("batch-{}", job.job));
    let mut run = vec!["run".to_string(), job.job.to_string()];
    run.extend(["-o".into(), out.display().to_string()]);
    for (name, topic) in job.inputs {
        let file = if *topic == "events" { events } else { users };
        run.extend(["-i".into(), format!("{name}={file}")]);
    }
    for p in job.params {
        run.extend(["-p".into(), p.to_string()]);
    }
    w.ok(&run.iter().map(String::as_str).collect::<Vec<_>>());
    let batch = std::fs::read_to_string(out.join(format!("{}.csv", job.output))).unwrap();
    batch.replace('"', "")
}

pub(crate) fn stream_args(job: &StreamJob) -> Vec<String> {
    let mut args = vec!["stream".to_string(), job.job.to_string(), "--quiet".into()];
    for (name, topic) in job.inputs {
        args.push("-i".into());
        args.push(format!("{name}={topic}"));
    }
    for p in job.params {
        args.push("-p".into());
        args.push(p.to_string());
    }
    args
}

#[test]
fn stream_with_kills_equals_batch_for_every_job() {
    let w = World::new();
    stream_with_kills_equals_batch(&w, || {
        let conn = rusqlite::Connection::open(w.path("tables.db")).unwrap();
        conn.execute(
            "UPDATE kappa_rows__groups__v1 SET count = count + 1 WHERE user = 'u3'",
            [],
        )
        .unwrap();
    });
}

/// Every job of [`JOBS`] streamed with SIGKILLs and restarts in between
/// ends with the table a batch run writes, and `table verify` says so; then
/// `tamper` adds 1 to u3's count in `groups`, and `verify` must notice.
pub(crate) fn stream_with_kills_equals_batch(w: &World, tamper: impl FnOnce()) {
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let events = events(&mut rng, 1500);
    let users = users(&mut rng);
    w.ok(&["log", "create", "events", "--partitions", "3"]);
    w.ok(&["log", "create", "users", "--partitions", "2", "--compact"]);
    // Batch inputs: all events; the users changelog as the table it ends as.
    let ev_file = w.write(
        "events.csv",
        &format!("user,user_id,ts,page,amount\n{}\n", events.join("\n")),
    );
    let mut latest: std::collections::BTreeMap<String, String> = Default::default();
    for u in &users {
        latest.insert(u.split(',').next().unwrap().to_string(), u.clone());
    }
    let final_users: Vec<&String> = latest.values().collect();
    let users_file = w.write(
        "users.csv",
        &format!(
            "user_id,country\n{}\n",
            final_users
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        ),
    );
    // Produce in random chunks, interleaved, killing stream processes in between.
    let mut plan: Vec<(&str, Vec<String>, &str)> = Vec::new();
    for c in chunks(&mut rng, &events, 6) {
        plan.push(("events", c, "user,user_id,ts,page,amount"));
    }
    for (i, c) in chunks(&mut rng, &users, 4).into_iter().enumerate() {
        plan.insert((2 * i + 1).min(plan.len()), ("users", c, "user_id,country"));
    }
    let mut kills = 0;
    for (i, (topic, rows, header)) in plan.iter().enumerate() {
        let file = w.write(
            &format!("chunk{i}.csv"),
            &format!("{header}\n{}\n", rows.join("\n")),
        );
        let mut produce = vec!["log", "produce", topic, "--file", &file];
        if *topic == "users" {
            produce.extend(["--key", "user_id"]);
        }
        w.ok(&produce);
        for job in JOBS {
            let workers = (1 + rng.below(3)).to_string();
            let mut args = stream_args(job);
            args.extend([
                "--workers".into(),
                workers,
                "--max-batch".into(),
                (50 + rng.below(300)).to_string(),
            ]);
            let mut child = w.spawn_silent(&args);
            if i + 1 == plan.len() {
                // The last kill of each job (when all its topics have rows)
                // comes after a commit, so every job's resume path is exercised.
                wait_for_commit(w, job.output);
            }
            std::thread::sleep(Duration::from_millis(rng.below(250)));
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            kills += 1;
        }
    }
    assert!(kills >= 12);
    // The kills must have hit running streams after some commits, or the
    // resume path would go untested.
    let store = w.store();
    let resumed = JOBS
        .iter()
        .filter(|job| {
            let d = store.find_by_output(job.output, None).unwrap();
            store.offsets(d.id).unwrap().values().any(|&o| o > 0)
        })
        .count();
    assert_eq!(
        resumed,
        JOBS.len(),
        "only {resumed} jobs committed anything before the final run"
    );
    drop(store);
    for job in JOBS {
        let mut args = stream_args(job);
        args.push("--until-caught-up".into());
        w.ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let batch = batch_output(w, job, &ev_file, &users_file);
        assert_eq!(
            table_csv(w, job.output),
            batch,
            "job {}: stream table differs from batch",
            job.job
        );
        let out = w.kappa(&["table", "verify", job.output]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains(": identical ("),
            "verify {}: {text}",
            job.output
        );
    }
    // verify notices a table that no longer matches the log.
    tamper();
    let out = w.kappa(&["table", "verify", "groups"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success()
            && text.contains("DIFFERS")
            && text.contains("only in table (1x): u3,"),
        "{text}"
    );
}

/// A reader polling the view while the stream runs: in every snapshot the
/// counts in the table add up to exactly the records the committed offsets
/// cover — an epoch's changes and its offsets are never seen apart.
#[test]
fn readers_never_see_half_an_epoch() {
    let w = World::new();
    let db = w.path("tables.db");
    a_reader_never_sees_half_an_epoch(&w, || {
        let conn =
            rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .ok()?;
        conn.query_row(
            "SELECT (SELECT coalesce(sum(count), 0) FROM counts), \
             (SELECT coalesce(sum(next_offset), 0) FROM kappa_offsets)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .ok()
    });
}

/// Streams `count-by` while 6,000 records are produced, calling `snapshot`
/// (the table's total count and the committed offsets' total, read in one
/// snapshot by another client) until everything is applied: the two must
/// always agree, and the reader must have seen states in between.
pub(crate) fn a_reader_never_sees_half_an_epoch(
    w: &World,
    mut snapshot: impl FnMut() -> Option<(i64, i64)>,
) {
    let mut rng = Rng(7);
    w.ok(&["log", "create", "clicks", "--partitions", "2"]);
    let rows: Vec<String> = (0..6000)
        .map(|i| format!("k{},{i}", rng.below(40)))
        .collect();
    let first = w.write("c0.csv", &format!("key,n\n{}\n", rows[..2000].join("\n")));
    w.ok(&["log", "produce", "clicks", "--file", &first]);
    let stream = [
        "stream",
        "count-by",
        "-i",
        "input=clicks",
        "-p",
        "key=key",
        "--max-batch",
        "37",
        "-q",
    ];
    let mut stream = w
        .kappa(&stream)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Chunks far enough apart that the stream drains each before the
    // next: a stream far behind merges its epochs into a commit a second.
    let producer = w.produce_in_background(
        "clicks",
        "key,n",
        rows[2000..].to_vec(),
        500,
        Duration::from_millis(150),
    );
    let started = std::time::Instant::now();
    let (mut states, mut last) = (std::collections::BTreeSet::new(), 0);
    while last < 6000 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "stream stalled at {last} records"
        );
        if let Some((counted, applied)) = snapshot() {
            assert_eq!(
                counted, applied,
                "a reader saw table changes without their offsets (or the reverse)"
            );
            states.insert(applied);
            last = applied;
        }
        std::thread::sleep(Duration::from_millis(3));
    }
    producer.join().unwrap();
    stream.kill().unwrap();
    stream.wait().unwrap();
    // The reader must have looked while the stream was writing: several
    // states between the first chunk and the end.
    let between = states.iter().filter(|&&a| a > 0 && a < 6000).count();
    assert!(between >= 2, "the reader saw only the states {states:?}");
}

/// Records that do not fit the job's input columns: a clear error naming the
/// topic, partition and offset (and a non-zero exit), or with `skip`, counted
/// and shown by `kappa table status`.
#[test]
fn bad_records_fail_clearly_or_are_counted() {
    let w = World::new();
    w.ok(&["log", "create", "ev", "--partitions", "1"]);
    let file = w.write("ev.csv", "user,ts\na,10\nb,x\nc,30\nd,\n");
    w.ok(&["log", "produce", "ev", "--file", &file]);
    let out = w
        .kappa(&[
            "stream",
            "sessionize",
            "-i",
            "events=ev",
            "--until-caught-up",
            "-q",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(
            "topic ev, partition 0, offset 1, column 2 (ts): expected an integer, found \"x\""
        ),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let out = w
        .kappa(&[
            "stream",
            "sessionize",
            "-i",
            "events=ev",
            "--until-caught-up",
            "-q",
            "--on-bad-row",
            "skip",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("skipped 1 bad record;"), "{err}");
    let status = w.ok(&["table", "status", "--csv"]);
    let out = w.kappa(&["table", "status", "--csv"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let row: Vec<&str> = text.lines().nth(1).unwrap().split(',').collect();
    let bad = header
        .iter()
        .position(|h| h.eq_ignore_ascii_case("bad_rows"))
        .expect("a bad_rows column");
    assert_eq!(row[bad], "1", "{status}");
    let table = table_csv(&w, "sessions");
    assert_eq!(
        table,
        "user,start,end,events\na,10,10,1\nc,30,30,1\nd,,,1\n"
    );
    assert!(
        err.contains("kappa stream: stopped after 4 records (1 bad record skipped)"),
        "{err}"
    );
    // Verify reads as the deployment's runs did, and counts alike.
    let verify = w.ok(&["table", "verify", "sessions"]);
    assert!(
        verify.contains(
            "identical (3 rows, digest"
        ) && verify.contains(
            "over the 4 records it applied (1 bad record skipped, as the deployment's runs skipped them)"
        ),
        "{verify}"
    );
    let err = w.fails(&["table", "verify", "sessions", "--on-bad-row", "fail"]);
    assert!(err.contains("offset 1, column 2 (ts)"), "{err}");
    // The null marker is part of what the tables mean: a restart with
    // another one is refused.
    let err = w.fails(&[
        "stream",
        "sessionize",
        "-i",
        "events=ev",
        "--until-caught-up",
        "--null",
        "x",
    ]);
    assert!(
        err.contains(
            "was built reading only empty fields as null; this run reads empty fields and 'x'"
        ),
        "{err}"
    );
}

/// SIGTERM stops a stream at an epoch boundary: exit 0, everything read so
/// far committed, and a restart goes on from there.
#[test]
fn sigterm_stops_cleanly() {
    let w = World::new();
    w.ok(&["log", "create", "ev", "--partitions", "2"]);
    let rows: Vec<String> = (0..500).map(|i| format!("k{},{i}", i % 9)).collect();
    let file = w.write("ev.csv", &format!("key,n\n{}\n", rows.join("\n")));
    w.ok(&["log", "produce", "ev", "--file", &file]);
    let child = w
        .kappa(&[
            "stream", "count-by", "-i", "input=ev", "-p", "key=key", "-q",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let db = w.path("tables.db");
    let started = std::time::Instant::now();
    loop {
        let applied: i64 = rusqlite::Connection::open(&db)
            .and_then(|c| {
                c.query_row(
                    "SELECT coalesce(sum(next_offset), 0) FROM kappa_offsets",
                    [],
                    |r| r.get(0),
                )
            })
            .unwrap_or(0);
        if applied == 500 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "stream never caught up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("stopped after"));
    let sum: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT sum(count) FROM counts", [], |r| r.get(0))
        .unwrap();
    assert_eq!(sum, 500);
}

/// The skew strategies in a stream (many small epochs, resumed once): each
/// table equals a batch `shuffle` run over the same records, and verifies.
#[test]
fn skew_strategies_in_streams_equal_batch_shuffle() {
    let w = World::new();
    let mut rng = Rng(0x5eed);
    // u0 is a hot key: a third of the events.
    let events: Vec<String> = (0..1200u64)
        .map(|i| {
            let user = if i % 3 == 0 { 0 } else { rng.below(25) };
            let page = ["/", "/a", "/b", "/c"][rng.below(4) as usize];
            let amount = if rng.below(9) == 0 {
                String::new()
            } else {
                rng.below(500).to_string()
            };
            format!("u{user},u{user},{},{page},{amount}", 1000 + i * 7)
        })
        .collect();
    let users: Vec<String> = (0..20)
        .map(|u| format!("u{u},{}", ["fr", "de", "jp"][u % 3]))
        .collect();
    w.ok(&["log", "create", "events", "--partitions", "2"]);
    w.ok(&["log", "create", "users", "--partitions", "1"]);
    let header = "user,user_id,ts,page,amount";
    let ev_file = w.write("events.csv", &format!("{header}\n{}\n", events.join("\n")));
    let users_file = w.write(
        "users.csv",
        &format!("user_id,country\n{}\n", users.join("\n")),
    );
    let half = w.write(
        "half.csv",
        &format!("{header}\n{}\n", events[..600].join("\n")),
    );
    let rest = w.write(
        "rest.csv",
        &format!("{header}\n{}\n", events[600..].join("\n")),
    );
    w.ok(&["log", "produce", "users", "--file", &users_file]);
    let deployments: &[(&str, &str, &[&str])] = &[
        (
            "join",
            "j_skew",
            &[
                "on=user_id",
                "kind=left",
                "strategy=skew",
                "hot=u0,u1",
                "salts=3",
            ],
        ),
        (
            "join",
            "j_bcast",
            &["on=user_id", "kind=anti", "strategy=broadcast"],
        ),
        (
            "group-by",
            "g_skew",
            &[
                "key=user",
                "agg=count,sum:amount,min:ts,avg:amount,count_distinct:page",
                "strategy=skew",
                "hot=u0",
            ],
        ),
    ];
    for file in [&half, &rest] {
        w.ok(&["log", "produce", "events", "--file", file]);
        for (job, table, params) in deployments {
            let mut args = vec![
                "stream",
                job,
                "--table",
                table,
                "-q",
                "--until-caught-up",
                "--max-batch",
                "97",
                "--workers",
                "2",
            ];
            if *job == "join" {
                args.extend(["-i", "left=events", "-i", "right=users"]);
            } else {
                args.extend(["-i", "input=events"]);
            }
            for p in *params {
                args.extend(["-p", p]);
            }
            w.ok(&args);
        }
    }
    for (job, table, params) in deployments {
        let out = w.path(&format!("batch-{table}"));
        let out_s = out.display().to_string();
        let (l, r, i) = (
            format!("left={ev_file}"),
            format!("right={users_file}"),
            format!("input={ev_file}"),
        );
        let mut args = vec!["run", job, "-o", &out_s, "-p", "strategy=shuffle"];
        if *job == "join" {
            args.extend(["-i", &l, "-i", &r]);
        } else {
            args.extend(["-i", &i]);
        }
        for p in params.iter().filter(|p| {
            !p.starts_with("strategy=") && !p.starts_with("hot=") && !p.starts_with("salts=")
        }) {
            args.extend(["-p", p]);
        }
        w.ok(&args);
        let output = if *job == "join" { "joined" } else { "groups" };
        let batch = std::fs::read_to_string(out.join(format!("{output}.csv"))).unwrap();
        assert_eq!(table_csv(&w, table), batch.replace('"', ""), "{table}");
        let verify = w.ok(&["table", "verify", table]);
        assert!(verify.contains(": identical ("), "{verify}");
    }
}

/// A topic written before the binary row encoding (each value a JSON array
/// of field texts), then produced to by this version: `kappa stream` reads
/// the two kinds of record as `kappa run` reads the same rows from a file
/// (`7` an integer key, `007` a text one, quotes, commas and tabs kept),
/// and `kappa log consume` prints them alike.
#[test]
fn topics_of_json_rows_stay_readable() {
    let w = World::new();
    w.ok(&["log", "create", "ev", "--partitions", "2"]);
    let keys = ["7", "007", "a \"q\",b", "tab\there", "é", "-0", "1.5", "x"];
    let rows: Vec<[String; 2]> = (0..400)
        .map(|i| {
            let n = match i % 11 {
                0 => String::new(),
                1 => "2.5".into(),
                _ => i.to_string(),
            };
            [keys[i % keys.len()].to_string(), n]
        })
        .collect();
    let (old, new) = rows.split_at(200);
    // Version 0, as the log held rows before: written with the library.
    let log = kappa::log::Log::open(w.path("log")).unwrap();
    let mut writer = log.writer("ev").unwrap();
    let columns = ["key".to_string(), "n".to_string()];
    writer
        .ensure_columns(&columns, kappa::log::RowFormat::Csv)
        .unwrap();
    let values: Vec<Vec<u8>> = old
        .iter()
        .map(|[k, n]| serde_json::to_vec(&[Some(k), (!n.is_empty()).then_some(n)]).unwrap())
        .collect();
    let records: Vec<kappa::log::RecordIn> = values
        .iter()
        .map(|v| kappa::log::RecordIn::new(None, v))
        .collect();
    writer.append(&records).unwrap();
    drop(writer);
    let csv = |rows: &[[String; 2]]| {
        let mut out = csv::Writer::from_writer(Vec::new());
        out.write_record(["key", "n"]).unwrap();
        for row in rows {
            out.write_record(row).unwrap();
        }
        String::from_utf8(out.into_inner().unwrap()).unwrap()
    };
    let file = w.write("new.csv", &csv(new));
    w.ok(&["log", "produce", "ev", "--file", &file]);
    let all = w.write("all.csv", &csv(&rows));

    let sorted = |text: &str| {
        let mut rows: Vec<csv::StringRecord> = csv::Reader::from_reader(text.as_bytes())
            .records()
            .map(Result::unwrap)
            .collect();
        rows.sort_by(|a, b| a.iter().cmp(b.iter()));
        rows
    };
    let consumed = w.ok(&["log", "consume", "ev"]);
    assert_eq!(sorted(&consumed), sorted(&csv(&rows)));

    let params = ["-p", "key=key", "-p", "agg=count,sum:n"];
    let out = w.path("batch");
    let mut run = vec!["run", "group-by", "-i"];
    let input = format!("input={all}");
    run.extend([input.as_str(), "-o", out.to_str().unwrap()]);
    w.ok(&[run, params.to_vec()].concat());
    let batch = std::fs::read_to_string(out.join("groups.csv")).unwrap();
    let stream = [
        "stream",
        "group-by",
        "-i",
        "input=ev",
        "--until-caught-up",
        "-q",
    ];
    w.ok(&[stream.to_vec(), params.to_vec()].concat());
    let d = w.store().find_by_output("groups", None).unwrap();
    let table = w.store().read_rows(&d.table(0)).unwrap();
    let mut text = csv::Writer::from_writer(Vec::new());
    text.write_record(&d.outputs[0].columns).unwrap();
    for (row, n) in table {
        assert_eq!(n, 1);
        let fields: Vec<String> = row.iter().map(Value::to_string).collect();
        text.write_record(&fields).unwrap();
    }
    let table = String::from_utf8(text.into_inner().unwrap()).unwrap();
    assert_eq!(sorted(&table), sorted(&batch));
    assert_eq!(sorted(&batch).len(), keys.len(), "{batch}");
}

/// A backlog read in small epochs: a keyed output's epochs are merged into
/// a few commits (each group written once a commit, not once an epoch),
/// while a bag as large as its input is committed epoch by epoch; both
/// tables equal `table verify`'s recomputation.
#[test]
fn a_backlog_of_groups_is_committed_in_a_few_transactions() {
    let w = World::new();
    w.ok(&["log", "create", "clicks", "--partitions", "2"]);
    let rows: Vec<String> = (0..20_000).map(|i| format!("k{},{i}", i % 50)).collect();
    let file = w.write("clicks.csv", &format!("key,n\n{}\n", rows.join("\n")));
    w.ok(&["log", "produce", "clicks", "--file", &file]);
    let small = [
        "-i",
        "input=clicks",
        "--max-batch",
        "50",
        "--until-caught-up",
        "-q",
    ];
    w.ok(&[&["stream", "count-by", "-p", "key=key"], &small[..]].concat());
    w.ok(&[&["stream", "distinct"], &small[..]].concat());
    let commits = |output: &str| {
        let d = w.store().find_by_output(output, None).unwrap();
        (d.progress.epochs, d.progress.records_applied)
    };
    let (counts, applied) = commits("counts");
    assert_eq!(applied, 20_000);
    // Epochs of 50 to 800 records a worker: at least 13 of them.
    assert!(counts <= 3, "count-by committed {counts} epochs");
    let (distinct, _) = commits("distinct");
    assert!(distinct >= 13, "distinct committed only {distinct} epochs");
    for output in ["counts", "distinct"] {
        let verify = w.ok(&["table", "verify", output]);
        assert!(verify.contains("identical"), "{verify}");
    }
}

/// `kappa log groups` lists the deployments reading a topic beside its
/// consumer groups, with their committed partitions and lag, as Kafka's
/// tools list a Streams application's group.
#[test]
fn log_groups_lists_the_deployments_reading_a_topic() {
    let w = World::new();
    w.ok(&["log", "create", "ev", "--partitions", "2"]);
    let rows = |from: usize, n: usize| {
        let body: Vec<String> = (from..from + n)
            .map(|i| format!("k{},{i}", i % 3))
            .collect();
        format!("key,n\n{}\n", body.join("\n"))
    };
    let file = w.write("a.csv", &rows(0, 40));
    w.ok(&["log", "produce", "ev", "--file", &file]);
    let none = w.kappa(&["log", "groups", "ev"]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&none.stderr)
            .contains("no consumer groups, and no deployment reads the topics")
    );
    w.ok(&[
        "stream",
        "count-by",
        "-i",
        "input=ev",
        "-p",
        "key=key",
        "--until-caught-up",
        "-q",
    ]);
    let file = w.write("b.csv", &rows(40, 7));
    w.ok(&["log", "produce", "ev", "--file", &file]);
    let groups = w.ok(&["log", "groups", "ev"]);
    let line = groups
        .lines()
        .find(|l| l.starts_with("counts v1 (live deployment)"))
        .unwrap_or_else(|| panic!("no deployment in:\n{groups}"));
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cells[cells.len() - 3..], ["ev", "2/2", "7"], "{groups}");
}
