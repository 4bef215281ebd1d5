//! The faults that break exactly-once unless the engine refuses them: two
//! owners of one deployment, a log that lost what was applied, a segment
//! missing in the middle of a partition; and output that ends quietly when
//! its reader goes away.
//!
//! - A second `stream` of a deployment that a live process drives is
//!   refused (the OS lock), and the table stays exactly right.
//! - When the lock cannot see the first owner (here: its lock file removed,
//!   as on a store shared by hosts), the second process takes over and the
//!   first is fenced off by the compare-and-set on the generation: it exits
//!   non-zero without writing, and the table stays exactly right.
//! - A log whose tail was cut after a deployment applied it, or whose offset
//!   was then reused for another record, is refused on resume.
//! - A hole between segments of a plain topic is an error for readers,
//!   writers, `describe` and streams alike, naming the missing offsets.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::World;

/// Produces `n` rows `v` = 0..n (all distinct) into a new 2-partition topic `t`.
fn distinct_rows(w: &World, n: usize) {
    w.ok(&["log", "create", "t", "--partitions", "2"]);
    let mut text = String::from("v\n");
    for i in 0..n {
        text.push_str(&format!("{i}\n"));
    }
    let file = w.write("rows.csv", &text);
    w.ok(&["log", "produce", "t", "--file", &file]);
}

/// `kappa stream count-by` over topic `t` into table `c`.
const COUNT_BY: &[&str] = &[
    "stream", "count-by", "-i", "input=t", "-p", "key=v", "--table", "c",
];

/// `COUNT_BY` followed by `extra`.
fn count_by_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let base: &[&'a str] = COUNT_BY;
    base.iter().chain(extra).copied().collect()
}

/// Starts `COUNT_BY` quietly, with `extra` arguments.
fn count_by(w: &World, extra: &[&str]) -> Child {
    let mut args = count_by_args(&["--quiet"]);
    args.extend(extra);
    w.kappa(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits (bounded) until the store's lock file of deployment 1 names its holder.
fn wait_for_lock(w: &World) -> PathBuf {
    let lock = w.path("tables.db.locks/deployment-1.lock");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&lock).map_or(true, |s| s.trim().is_empty()) {
        assert!(
            Instant::now() < deadline,
            "the first stream never took its lock"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    lock
}

/// Waits (bounded) until deployment 1 has committed at least one epoch.
fn wait_for_epoch(db: &Path) {
    use kappa::table::TableStore;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let committed = kappa::table::SqliteStore::open_existing(db)
            .is_ok_and(|store| store.deployment(1).is_ok_and(|d| d.progress.epochs > 0));
        if committed {
            return;
        }
        assert!(Instant::now() < deadline, "no epoch was committed");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn stderr_of(child: Child) -> (bool, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_second_stream_of_a_driven_deployment_is_refused() {
    let w = World::new();
    distinct_rows(&w, 60_000);
    let first = count_by(&w, &["--max-batch", "500", "--until-caught-up"]);
    wait_for_lock(&w);
    let second = w.fails(&count_by_args(&[
        "--max-batch",
        "100000",
        "--until-caught-up",
    ]));
    let pid = first.id().to_string();
    assert!(
        second.contains("c v1 is already driven by another process") && second.contains(&pid),
        "{second}"
    );
    let (ok, err) = stderr_of(first);
    assert!(ok, "{err}");
    let verify = w.ok(&["table", "verify", "c"]);
    assert!(verify.contains("identical (60000 rows"), "{verify}");
    // The lock died with its holder: the next stream resumes.
    w.ok(&count_by_args(&["--until-caught-up"]));
}

#[test]
fn a_process_that_was_taken_over_is_fenced_off() {
    let w = World::new();
    distinct_rows(&w, 60_000);
    // The first owner commits small epochs for a while.
    let first = count_by(&w, &["--max-batch", "100", "--max-latency-ms", "5"]);
    let lock = wait_for_lock(&w);
    wait_for_epoch(&w.path("tables.db"));
    // The lock no longer reaches the first owner (as across hosts): the
    // second process takes the deployment over.
    std::fs::remove_file(&lock).unwrap();
    let second = count_by(&w, &["--until-caught-up"]);
    let (ok, err) = stderr_of(first);
    assert!(!ok, "the fenced-off owner exited 0: {err}");
    assert!(
        err.contains("c v1 was taken over by another process (pid"),
        "{err}"
    );
    let (ok, err) = stderr_of(second);
    assert!(ok, "{err}");
    let verify = w.ok(&["table", "verify", "c"]);
    assert!(verify.contains("identical (60000 rows"), "{verify}");
}

/// The last segment file of partition `p` of topic `t`.
fn last_segment(w: &World, p: u32) -> PathBuf {
    let dir = w.path(&format!("log/t/partition-{p}"));
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs.pop().unwrap()
}

#[test]
fn a_log_that_lost_or_rewrote_applied_records_is_refused() {
    let w = World::new();
    w.ok(&["log", "create", "t", "--partitions", "1"]);
    let rows = w.write("rows.csv", "v\na\nb\nc\n");
    // One append a record: a torn tail then loses the last record only
    // (the records of one append share a batch, and are lost together).
    w.ok(&["log", "produce", "t", "--file", &rows, "--batch", "1"]);
    let stream = count_by_args(&["--until-caught-up"]);
    w.ok(&stream);
    // A torn tail (or a power loss under --fsync never): the last record is gone.
    let segment = last_segment(&w, 0);
    let len = std::fs::metadata(&segment).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap()
        .set_len(len - 7)
        .unwrap();
    let err = w.fails(&stream);
    assert!(
        err.contains("topic t partition 0: the log lost data that c v1 applied")
            && err.contains("committed offset 3, log end 2"),
        "{err}"
    );
    // The next producer cuts the torn record and reuses its offset.
    let more = w.write("more.csv", "v\nz\n");
    w.ok(&["log", "produce", "t", "--file", &more]);
    let err = w.fails(&stream);
    assert!(
        err.contains("the record at offset 2 is not the one that was applied"),
        "{err}"
    );
    // Nothing was written meanwhile: the table still holds what was applied.
    let table = w.ok(&["table", "show", "c", "--csv"]);
    assert!(table.contains("c,1") && !table.contains("z,1"), "{table}");
}

#[test]
fn a_group_offset_past_the_log_end_is_an_error() {
    let w = World::new();
    w.ok(&["log", "create", "t", "--partitions", "1"]);
    let rows = w.write("rows.csv", "v\na\nb\nc\n");
    w.ok(&["log", "produce", "t", "--file", &rows, "--batch", "1"]);
    w.ok(&["log", "consume", "t", "--group", "g"]);
    let segment = last_segment(&w, 0);
    let len = std::fs::metadata(&segment).unwrap().len();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap();
    file.set_len(len - 7).unwrap();
    let err = w.fails(&["log", "consume", "t", "--group", "g"]);
    assert!(
        err.contains("from the group's committed offset 3")
            && err.contains("next offset to be written is 2"),
        "{err}"
    );
}

/// Every command that prints ends quietly when its reader goes away
/// (`| head -1`): exit 0, no panic about a broken pipe.
#[test]
fn printing_commands_end_quietly_on_a_closed_pipe() {
    use std::io::{BufRead, BufReader};
    let w = World::new();
    distinct_rows(&w, 60_000);
    w.ok(&count_by_args(&["--until-caught-up"]));
    for args in [
        &["table", "show", "c", "--limit", "60000"][..],
        &["table", "show", "c", "--limit", "60000", "--csv"],
        &["log", "consume", "t"],
    ] {
        let mut child = w
            .kappa(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(!first.is_empty(), "kappa {args:?} printed nothing");
        // The pipe's reading end is closed here, as `head -1` does.
        let (ok, err) = stderr_of(child);
        assert!(ok && !err.contains("panicked"), "kappa {args:?}: {err}");
    }
}

#[test]
fn a_missing_middle_segment_is_an_error_everywhere() {
    let w = World::new();
    w.ok(&["log", "create", "t", "--segment-bytes", "50000"]);
    let mut text = String::from("v\n");
    for i in 0..20_000 {
        text.push_str(&format!("{i}\n"));
    }
    let file = w.write("rows.csv", &text);
    w.ok(&["log", "produce", "t", "--file", &file]);
    let dir = w.path("log/t/partition-0");
    let mut segments: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    segments.sort();
    assert!(segments.len() >= 4, "{segments:?}");
    let hole = &segments[2];
    let next_base: u64 = segments[3]
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let base: u64 = hole.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    std::fs::remove_file(hole).unwrap();
    std::fs::remove_file(hole.with_extension("index")).unwrap();
    let missing = format!(
        "topic 't' partition 0 is missing offsets {base} to {}",
        next_base - 1
    );
    let seven = (base + 10).to_string();
    for args in [
        &["log", "consume", "t"][..],
        &["log", "consume", "t", "--offset", &seven],
        &["log", "describe", "t"],
        &["log", "produce", "t", "--file", &file],
        &[
            "stream",
            "count-by",
            "-i",
            "input=t",
            "-p",
            "key=v",
            "--until-caught-up",
        ],
    ] {
        let err = w.fails(args);
        assert!(err.contains(&missing), "kappa {args:?}: {err}");
        // The cause is said once.
        assert_eq!(err.matches("is missing offsets").count(), 1, "{err}");
    }
    // Retention deleting the oldest segment is not a hole.
    std::fs::remove_file(&segments[0]).unwrap();
    std::fs::remove_file(segments[0].with_extension("index")).unwrap();
    let err = w.fails(&["log", "describe", "t"]);
    assert!(err.contains(&missing), "{err}");
}

/// CRLF files get the same line numbers as LF files, from `run` and from
/// `produce` (errors and the summary alike).
#[test]
fn crlf_files_are_located_by_their_real_lines() {
    let w = World::new();
    for (name, eol) in [("lf.csv", "\n"), ("crlf.csv", "\r\n")] {
        let bad = w.write(name, &["a,b", "1,2", "\"q", "q\",2", "x,y,z", ""].join(eol));
        let out = w.path(&format!("out-{name}"));
        let err = w.fails(&[
            "run",
            "count-by",
            "-i",
            &format!("input={bad}"),
            "-p",
            "key=a",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(
            err.contains(&format!("{name}: line 5: expected 2 fields, found 3")),
            "{err}"
        );
        w.ok(&["log", "create", name.trim_end_matches(".csv")]);
        let err = w.fails(&[
            "log",
            "produce",
            name.trim_end_matches(".csv"),
            "--file",
            &bad,
        ]);
        assert!(
            err.contains(&format!("{name}: line 5: expected 2 fields")),
            "{err}"
        );
        let good = w.write(
            &format!("good-{name}"),
            &["a,b", "1,2", "3,4", ""].join(eol),
        );
        let summary = w.ok(&[
            "log",
            "produce",
            name.trim_end_matches(".csv"),
            "--file",
            &good,
        ]);
        assert!(summary.contains("lines 2-3"), "{summary}");
    }
}

/// The same text is the same value in every format: an integer literal too
/// large for an i64 stays that text in JSON lines, as it does in CSV.
#[test]
fn a_number_is_typed_by_its_text_in_json_as_in_csv() {
    let w = World::new();
    let json = w.write(
        "big.jsonl",
        "{\"a\":99999999999999999999}\n{\"a\":1.50}\n{\"a\":7}\n",
    );
    let csv = w.write("big.csv", "a\n99999999999999999999\n1.50\n7\n");
    let mut outputs = Vec::new();
    for file in [json, csv] {
        let out = w.path(&format!("out-{}", outputs.len()));
        w.ok(&[
            "run",
            "count-by",
            "-i",
            &format!("input={file}"),
            "-p",
            "key=a",
            "-o",
            out.to_str().unwrap(),
        ]);
        outputs.push(std::fs::read_to_string(out.join("counts.csv")).unwrap());
    }
    assert_eq!(outputs[0], outputs[1]);
    assert!(
        outputs[0].contains("99999999999999999999,1"),
        "{}",
        outputs[0]
    );
    let csv = w.path("big.csv").display().to_string();
    let out = w.path("top").display().to_string();
    let err = w.fails(&[
        "run",
        "top-k",
        "-i",
        &format!("input={csv}"),
        "-p",
        "by=a",
        "-p",
        "k=abc",
        "-o",
        &out,
    ]);
    assert!(
        err.contains("parameter k: expected a positive integer"),
        "{err}"
    );
}

/// Flags and paths that would have no effect, or the wrong one, are refused
/// with a clear error before anything is read.
#[test]
fn ineffective_flags_and_wrong_paths_are_refused() {
    let w = World::new();
    let events = w.write("e.csv", "k,t\na,1\n");
    let file = w.write("a-file", "x");
    let input = format!("input={events}");
    let window_agg = [
        "run",
        "window-agg",
        "-i",
        &input,
        "-p",
        "time=t",
        "-p",
        "window=tumbling:10",
    ];
    let err = w.fails(&[&window_agg[..], &["--allowed-lateness", "10", "-o", "out1"]].concat());
    assert!(err.contains("applies only with late=drop"), "{err}");
    let err = w.fails(&[&window_agg[..], &["-o", &file]].concat());
    assert!(err.contains("is a file, not a directory"), "{err}");
    let err = w.fails(&[
        "nexmark",
        "gen",
        "--events",
        "10",
        "--topic-prefix",
        "x",
        "-o",
        "nx",
    ]);
    assert!(err.contains("cannot be used with"), "{err}");
    let empty = w.write("empty-col.csv", "a,,c\n1,2,3\n");
    w.ok(&["log", "create", "ec"]);
    let err = w.fails(&["log", "produce", "ec", "--file", &empty]);
    assert!(err.contains("column 2 has an empty name"), "{err}");
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Flips a byte inside the first record of topic `topic`'s partition 0,
/// whose records must have been produced one an append (else the damage is
/// in the last batch, which is a torn tail: not yet visible).
fn corrupt_first_record(w: &World, topic: &str) {
    let segment = w.path(&format!("log/{topic}/partition-0/00000000000000000000.log"));
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes[30] ^= 0x5a;
    std::fs::write(&segment, bytes).unwrap();
}

#[test]
fn a_run_that_fails_before_its_first_commit_leaves_nothing_behind() {
    let w = World::new();
    let rows = w.write("rows.csv", "v\na\nb\n");
    for topic in ["bad", "good"] {
        w.ok(&["log", "create", topic]);
        w.ok(&["log", "produce", topic, "--file", &rows, "--batch", "1"]);
    }
    corrupt_first_record(&w, "bad");
    let stream = |input: &str, table: &str| -> Vec<String> {
        [
            "stream", "count-by", "-i", input, "-p", "key=v", "--table", table,
        ]
        .into_iter()
        .chain(["--until-caught-up", "--quiet"])
        .map(String::from)
        .collect()
    };

    // A new store: neither a corrupt input nor a refused table name leaves
    // a database, a deployment or a lock directory.
    let err = w.fails(&args(&stream("input=bad", "c")));
    assert!(err.contains("crc mismatch"), "{err}");
    let err = w.fails(&args(&stream("input=good", "bad name")));
    assert!(err.contains("invalid output name"), "{err}");
    for leftover in ["tables.db", "tables.db-wal", "tables.db.locks"] {
        assert!(!w.path(leftover).exists(), "{leftover} was left behind");
    }

    // An existing store keeps what it had, and gains no empty version: not
    // from a new stream, not from a reprocess that fails on the same input.
    w.ok(&args(&stream("input=good", "c")));
    w.fails(&args(&stream("input=bad", "d")));
    let mut reprocess = stream("input=bad", "c");
    reprocess[0] = "reprocess".into();
    w.fails(&args(&reprocess));
    let status = w.ok(&["table", "status", "--csv"]);
    assert_eq!(
        status.lines().count(),
        2,
        "one deployment expected:\n{status}"
    );
    assert!(
        status
            .lines()
            .nth(1)
            .unwrap()
            .contains(",c,v1,count-by v1,key=v,live,"),
        "{status}"
    );
    assert!(w.ok(&["table", "verify", "c"]).contains("identical"));
    // The number of the version that was never committed is the next one
    // built for real (`--force`: it is the live version's job and inputs).
    reprocess[3] = "input=good".into();
    reprocess.push("--force".into());
    let out = w.ok(&args(&reprocess));
    assert!(out.contains("building c v2"), "{out}");
}
