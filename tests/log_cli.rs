//! `kappa log ...` end to end: the real binary on a fresh log directory per
//! test. Helpers here are shared with `log_crash.rs`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub(crate) const KAPPA: &str = env!("CARGO_BIN_EXE_kappa");

/// A temporary directory holding a log directory and input files.
pub(crate) struct LogDir {
    pub tmp: tempfile::TempDir,
}

impl LogDir {
    pub fn new() -> Self {
        LogDir {
            tmp: tempfile::tempdir().unwrap(),
        }
    }
    pub fn log(&self) -> PathBuf {
        self.tmp.path().join("log")
    }
    pub fn file(&self, name: &str, text: &str) -> String {
        let path = self.tmp.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }
    /// `kappa log ARGS --log-dir DIR`, with `stdin` fed in.
    pub fn run(&self, args: &[&str], stdin: &str) -> Output {
        let mut child = Command::new(KAPPA)
            .arg("log")
            .args(args)
            .arg("--log-dir")
            .arg(self.log())
            .env("RUST_LOG", "warn")
            .env_remove("KAPPA_LOG_DIR")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kappa");
        let mut input = child.stdin.take().unwrap();
        // The child may fail before reading everything; a broken pipe is fine.
        let _ = input.write_all(stdin.as_bytes());
        drop(input);
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !err.contains("panicked"),
            "kappa log {args:?} panicked: {err}"
        );
        out
    }
    /// Runs, expecting success; returns stdout.
    pub fn ok(&self, args: &[&str], stdin: &str) -> String {
        let out = self.run(args, stdin);
        assert!(
            out.status.success(),
            "kappa log {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
    /// Runs, expecting failure; returns stderr.
    pub fn fails(&self, args: &[&str], stdin: &str) -> String {
        let out = self.run(args, stdin);
        assert!(!out.status.success(), "kappa log {args:?} succeeded");
        String::from_utf8(out.stderr).unwrap()
    }
}

fn sorted_lines(text: &str) -> Vec<&str> {
    let mut v: Vec<&str> = text.lines().collect();
    v.sort();
    v
}

const ORDERS: &str =
    "id,status,amount\n1,open,10.5\n2,paid,007\n3,open,\n4,\"said \"\"hi\"\", ok\",3\n5,paid,-2\n";

#[test]
fn csv_round_trip_with_list_and_describe() {
    let d = LogDir::new();
    d.ok(&["create", "orders", "--partitions", "3"], "");
    d.ok(&["produce", "orders", "--key", "id"], ORDERS);
    let out = d.ok(&["consume", "orders", "--from-beginning"], "");
    let (head, rows) = out.split_once('\n').unwrap();
    assert_eq!(head, "id,status,amount");
    let want: Vec<&str> = ORDERS.lines().skip(1).collect();
    assert_eq!(sorted_lines(rows), sorted_lines(&want.join("\n")));
    // Keys route by crc32c: the same key always lands in the same partition.
    let meta = d.ok(&["consume", "orders", "--show-meta"], "");
    assert!(meta.starts_with("_partition,_offset,_key,_event_time,id,status,amount\n"));
    for line in meta.lines().skip(1) {
        let cells: Vec<&str> = line.split(',').collect();
        let p: u32 = cells[0].parse().unwrap();
        let key = cells[2];
        assert_eq!(
            p,
            kappa::log::partition_for_key(key.as_bytes(), 3),
            "{line}"
        );
        assert_eq!(cells[4], key);
    }
    // JSON output types CSV text the way a CSV file is read.
    let json = d.ok(
        &["consume", "orders", "--format", "jsonl", "--partition", "0"],
        "",
    );
    for line in json.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v["id"].is_i64(), "{line}");
        if v["id"] == 2 {
            assert_eq!(v["amount"], "007");
        }
        if v["id"] == 3 {
            assert!(v["amount"].is_null());
        }
    }
    let list = d.ok(&["list"], "");
    assert!(list.starts_with("TOPIC"), "{list}");
    let row = list.lines().nth(1).unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cells[..3], ["orders", "3", "5"], "{list}");
    let desc = d.ok(&["describe", "orders"], "");
    for needle in [
        "id,status,amount",
        "row format",
        "csv",
        "PARTITION",
        "no consumer groups",
    ] {
        assert!(desc.contains(needle), "{needle} missing in {desc}");
    }
}

#[test]
fn jsonl_round_trip_and_env_log_dir() {
    let d = LogDir::new();
    let input = "{\"user\":\"a\",\"n\":1,\"ts\":\"2024-01-01T00:00:00Z\"}\n\n{\"n\":2.5,\"user\":\"b\",\"ts\":1000}\n{\"user\":\"c\",\"ts\":null}\n";
    let file = d.file("in.jsonl", input);
    let out = Command::new(KAPPA)
        .args(["log", "create", "ev"])
        .env("KAPPA_LOG_DIR", d.log())
        .output()
        .unwrap();
    assert!(out.status.success());
    d.ok(&["produce", "ev", "--file", &file, "--time", "ts"], "");
    let json = d.ok(&["consume", "ev", "--format", "jsonl", "--show-meta"], "");
    let lines: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["_event_time"], 1_704_067_200_000_i64);
    assert_eq!(lines[0]["n"], 1);
    assert_eq!(lines[1]["n"], 2.5);
    assert_eq!(lines[1]["_event_time"], 1000);
    assert!(lines[2]["n"].is_null() && lines[2]["_event_time"].is_null());
    let csv = d.ok(&["consume", "ev"], "");
    assert_eq!(csv.lines().next(), Some("user,n,ts"));
    assert!(csv.contains("b,2.5,1000\n"), "{csv}");
    // A later JSON producer may omit keys.
    d.ok(
        &["produce", "ev", "--format", "jsonl"],
        "{\"user\":\"d\"}\n",
    );
    // An unknown key in the first object is a columns mismatch, later a bad row.
    let jsonl = ["produce", "ev", "--format", "jsonl"];
    let err = d.fails(&jsonl, "{\"user\":\"e\",\"x\":1}\n");
    assert!(
        err.contains("carries columns") && err.contains("\"x\""),
        "{err}"
    );
    let err = d.fails(&jsonl, "{\"user\":\"e\"}\n{\"user\":\"f\",\"x\":1}\n");
    assert!(err.contains("line 2: key \"x\" is not a column"), "{err}");
    assert!(err.contains("batch (from line 1) was not written"), "{err}");
}

#[test]
fn columns_and_format_mismatches_are_clear_errors() {
    let d = LogDir::new();
    d.ok(&["create", "t"], "");
    d.ok(&["produce", "t"], "a,b\n1,2\n");
    let err = d.fails(&["produce", "t"], "a,c\n1,2\n");
    assert!(err.contains("columns") && err.contains("\"c\""), "{err}");
    let err = d.fails(
        &["produce", "t", "--format", "jsonl"],
        "{\"a\":1,\"b\":2}\n",
    );
    assert!(err.contains("holds csv rows"), "{err}");
    let err = d.fails(&["produce", "t", "--key", "nope"], "a,b\n1,2\n");
    assert!(err.contains("--key nope: no such column"), "{err}");
    assert_eq!(d.ok(&["consume", "t"], ""), "a,b\n1,2\n");
}

#[test]
fn every_producer_of_a_topic_keys_it_alike() {
    let d = LogDir::new();
    d.ok(&["create", "t", "--partitions", "4"], "");
    d.ok(&["produce", "t", "--key", "a"], "a,b\n1,2\n");
    let err = d.fails(&["produce", "t", "--key", "b"], "a,b\n3,4\n");
    assert!(
        err.contains("first produced with --key a, this producer uses --key b"),
        "{err}"
    );
    let err = d.fails(&["produce", "t"], "a,b\n3,4\n");
    assert!(err.contains("this producer uses no --key"), "{err}");
    d.ok(&["produce", "t", "--key", "a"], "a,b\n3,4\n");
    assert!(
        d.ok(&["describe", "t"], "")
            .contains("key                  column a")
    );
    // An unkeyed topic stays unkeyed.
    d.ok(&["create", "u"], "");
    d.ok(&["produce", "u"], "a,b\n1,2\n");
    let err = d.fails(&["produce", "u", "--key", "a"], "a,b\n3,4\n");
    assert!(err.contains("first produced with no --key"), "{err}");
}

#[test]
fn bad_rows_name_the_line_and_keep_acknowledged_batches() {
    let d = LogDir::new();
    d.ok(&["create", "t"], "");
    let input = "a,b\n1,x\n2,x\n3,x\n4,x\n5,x\n6\n7,x\n";
    let err = d.fails(&["produce", "t", "--batch", "2"], input);
    assert!(err.contains("line 7: expected 2 fields"), "{err}");
    assert!(err.contains("batch (from line 6) was not written"), "{err}");
    assert!(
        err.contains("the 4 records before it were appended"),
        "{err}"
    );
    assert_eq!(d.ok(&["consume", "t"], "").lines().count(), 5);
    let err = d.fails(
        &["produce", "t", "--time", "b"],
        "a,b\n1,2024-02-30T00:00:00Z\n",
    );
    assert!(
        err.contains("line 2: time:") && err.contains("nothing was written"),
        "{err}"
    );
    d.ok(&["create", "j"], "");
    let err = d.fails(
        &["produce", "j", "--format", "jsonl"],
        "{\"a\":1}\n{\"a\":\n",
    );
    assert!(err.contains("line 2: bad JSON"), "{err}");
}

#[test]
fn second_writer_gets_a_clear_error() {
    let d = LogDir::new();
    d.ok(&["create", "t", "--compact"], "");
    let log = kappa::log::Log::open(d.log()).unwrap();
    let writer = log.writer("t").unwrap();
    for args in [&["produce", "t"][..], &["compact", "t"], &["retain", "t"]] {
        let err = d.fails(args, "a\n1\n");
        assert!(err.contains("locked by another writer"), "{args:?}: {err}");
    }
    // Readers never take the lock.
    d.ok(&["describe", "t"], "");
    d.ok(&["consume", "t"], "");
    drop(writer);
    d.ok(&["produce", "t"], "a\n1\n");
}

#[test]
fn consumer_group_commits_and_resumes() {
    let d = LogDir::new();
    d.ok(&["create", "t"], "");
    let rows: String = (0..10).map(|i| format!("{i}\n")).collect();
    d.ok(&["produce", "t"], &format!("n\n{rows}"));
    let first = d.ok(&["consume", "t", "--group", "g", "--max", "4"], "");
    assert_eq!(first, "n\n0\n1\n2\n3\n");
    let rest = d.ok(&["consume", "t", "--group", "g"], "");
    assert_eq!(rest, "n\n4\n5\n6\n7\n8\n9\n");
    assert_eq!(d.ok(&["consume", "t", "--group", "g"], ""), "n\n");
    d.ok(&["produce", "t"], "n\n10\n11\n");
    let desc = d.ok(&["describe", "t"], "");
    let group_row = desc.lines().find(|l| l.starts_with("g ")).expect(&desc);
    let cells: Vec<&str> = group_row.split_whitespace().collect();
    assert_eq!(cells, ["g", "0", "10", "12", "2"], "{desc}");
    // --from-beginning ignores (and then moves) the committed offset.
    let all = d.ok(&["consume", "t", "--group", "g", "--from-beginning"], "");
    assert_eq!(all.lines().count(), 13);
    assert_eq!(d.ok(&["consume", "t", "--group", "g"], ""), "n\n");
}

#[test]
fn deleted_offsets_give_the_earliest_available() {
    let d = LogDir::new();
    d.ok(
        &[
            "create",
            "t",
            "--segment-bytes",
            "200",
            "--retention-bytes",
            "400",
        ],
        "",
    );
    let rows: String = (0..40).map(|i| format!("{i},payload-{i}\n")).collect();
    d.ok(&["produce", "t", "--batch", "1"], &format!("n,p\n{rows}"));
    let removed = d.ok(&["retain", "t"], "");
    assert!(removed.contains("deleted segment at offset 0"), "{removed}");
    let err = d.fails(&["consume", "t", "--offset", "0"], "");
    assert!(err.contains("earliest available offset is"), "{err}");
    assert!(err.contains("--from-beginning"), "{err}");
    let out = d.ok(&["consume", "t", "--show-meta"], "");
    let first: u64 = out
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(first > 0 && err.contains(&format!("earliest available offset is {first}")));
    assert!(out.ends_with("39,payload-39\n"), "{out}");
}

#[test]
fn compact_keeps_the_latest_value_per_key() {
    let d = LogDir::new();
    d.ok(&["create", "kv", "--compact", "--segment-bytes", "256"], "");
    let rows: String = (0..60).map(|i| format!("k{},{i}\n", i % 5)).collect();
    d.ok(
        &["produce", "kv", "--key", "k", "--batch", "3"],
        &format!("k,v\n{rows}"),
    );
    let report = d.ok(&["compact", "kv"], "");
    assert!(report.contains("removed"), "{report}");
    let out = d.ok(&["consume", "kv"], "");
    let mut latest = std::collections::BTreeMap::new();
    for line in out.lines().skip(1) {
        let (k, v) = line.split_once(',').unwrap();
        latest.insert(k.to_string(), v.parse::<u32>().unwrap());
    }
    let want: std::collections::BTreeMap<String, u32> =
        (55..60).map(|i| (format!("k{}", i % 5), i)).collect();
    assert_eq!(latest, want);
    assert!(out.lines().count() < 30, "nothing was compacted: {out}");
    let err = d.fails(&["compact", "missing"], "");
    assert!(err.contains("does not exist"), "{err}");
    d.ok(&["create", "plain"], "");
    assert!(d.fails(&["compact", "plain"], "").contains("not compacted"));
}

#[test]
fn follow_prints_records_as_they_arrive() {
    let d = LogDir::new();
    d.ok(&["create", "t", "--partitions", "2"], "");
    d.ok(&["produce", "t"], "n\n0\n");
    let follower = Command::new(KAPPA)
        .args(["log", "consume", "t", "--follow", "--max", "4", "--log-dir"])
        .arg(d.log())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    d.ok(&["produce", "t"], "n\n1\n2\n3\n");
    let out = follower.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(sorted_lines(&text), ["0", "1", "2", "3", "n"], "{text}");
}

#[test]
fn user_errors_are_clear_and_non_zero() {
    let d = LogDir::new();
    let cases: &[(&[&str], &str)] = &[
        (&["describe", "nope"], "does not exist"),
        (&["consume", "nope"], "does not exist"),
        (&["produce", "nope"], "does not exist"),
        (&["create", "bad/name"], "invalid topic name"),
        (&["create", "t", "--partitions", "0"], "partitions must be"),
        (
            &["produce", "t", "--fsync", "sometimes"],
            "expected batch, never or interval:MS",
        ),
    ];
    d.ok(&["create", "t"], "");
    d.ok(&["produce", "t"], "a\n1\n");
    for (args, needle) in cases {
        let err = d.fails(args, "a\n1\n");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let err = d.fails(&["consume", "t", "--offset", "5"], "");
    assert!(
        err.contains("out of range") && err.contains("next offset to be written is 1"),
        "{err}"
    );
    let err = d.fails(&["consume", "t", "--partition", "3"], "");
    assert!(err.contains("partition 3 does not exist"), "{err}");
    let err = d.fails(&["create", "t"], "");
    assert!(err.contains("already exists"), "{err}");
}

/// Reads a whole partition with the library (what the crash tests check with).
pub(crate) fn read_partition(log: &Path, topic: &str, p: u32) -> Vec<kappa::log::Record> {
    let log = kappa::log::Log::open(log).unwrap();
    let mut r = log.reader(topic, p, kappa::log::Start::Earliest).unwrap();
    let mut out = Vec::new();
    loop {
        let batch = r.next_batch(1000).unwrap();
        if batch.is_empty() {
            return out;
        }
        out.extend(batch);
    }
}

#[test]
fn groups_are_listed_reset_and_deleted_as_kafka_tools_do() {
    let d = LogDir::new();
    d.ok(&["create", "t", "--partitions", "2"], "");
    let rows: String = (0..10).map(|i| format!("{i},{i}\n")).collect();
    d.ok(&["produce", "t", "--key", "k"], &format!("k,n\n{rows}"));
    // Three records of partition 0 read and committed; partition 1 never.
    d.ok(&["consume", "t", "--group", "g", "--max", "3"], "");
    let reset = |to: &[&str]| {
        d.ok(
            &[&["groups", "reset", "g", "--topic", "t"], to].concat(),
            "",
        )
    };
    let consumed = || d.ok(&["consume", "t", "--group", "g"], "").lines().count() - 1;
    let total_lag = |args: &[&str]| {
        let list = d.ok(args, "");
        let cells: Vec<String> = list
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .map(str::to_string)
            .collect();
        assert_eq!(cells[..2], ["g", "t"], "{list}");
        cells[3].clone()
    };
    // The partition the group never committed on lags by all of it.
    assert_eq!(total_lag(&["groups"]), "7");

    let dry = reset(&["--to-earliest", "--dry-run"]);
    assert!(dry.lines().skip(1).all(|l| l.ends_with(" 0")), "{dry}");
    assert_eq!(total_lag(&["groups", "t"]), "7", "a dry run moves nothing");
    reset(&["--to-earliest"]);
    assert_eq!(consumed(), 10);
    reset(&["--to-offset", "1000"]);
    let desc = d.ok(&["describe", "t"], "");
    let group_rows = desc.lines().filter(|l| l.starts_with("g "));
    assert!(
        group_rows.clone().count() == 2 && group_rows.clone().all(|l| l.ends_with(" 0")),
        "{desc}"
    );
    // The epoch start: the beginning; a time after every append: the end.
    reset(&["--to-time", "0"]);
    assert_eq!(consumed(), 10);
    reset(&["--to-time", "2999-01-01T00:00:00Z"]);
    assert_eq!(consumed(), 0);

    let err = d.fails(&["groups", "reset", "g", "--topic", "t"], "");
    assert!(err.contains("--to-earliest"), "{err}");
    // A misspelt group is refused, not created; --create makes it.
    let err = d.fails(
        &["groups", "reset", "gg", "--topic", "t", "--to-latest"],
        "",
    );
    assert!(
        err.contains("topic 't' has no group 'gg' (its groups: g); pass --create to make it"),
        "{err}"
    );
    d.ok(
        &[
            "groups",
            "reset",
            "gg",
            "--topic",
            "t",
            "--to-latest",
            "--create",
        ],
        "",
    );
    assert!(d.ok(&["groups", "t"], "").contains("gg "));
    d.ok(&["groups", "delete", "gg", "--topic", "t"], "");
    d.ok(&["groups", "delete", "g", "--topic", "t"], "");
    let err = d.fails(&["groups", "delete", "g", "--topic", "t"], "");
    assert!(
        err.contains("group 'g' has no offsets on topic 't'"),
        "{err}"
    );
}

#[test]
fn topics_are_altered_and_deleted() {
    let d = LogDir::new();
    d.ok(&["create", "t", "--retention-ms", "1000"], "");
    let out = d.ok(
        &[
            "alter",
            "t",
            "--retention-ms",
            "-1",
            "--retention-bytes",
            "4096",
        ],
        "",
    );
    assert!(out.contains("retention_ms     1000  none"), "{out}");
    assert!(out.contains("retention_bytes  none  4096"), "{out}");
    let desc = d.ok(&["describe", "t"], "");
    assert!(desc.contains("4096"), "{desc}");
    let err = d.fails(&["alter", "t", "--delete-retention-ms", "-5"], "");
    assert!(
        err.contains("--delete-retention-ms must be a number of milliseconds from 0 up, not -5"),
        "{err}"
    );
    // Every limit names itself and its range.
    for (flag, unit) in [
        ("--retention-bytes", "bytes"),
        ("--retention-ms", "milliseconds"),
    ] {
        let err = d.fails(&["alter", "t", flag, "-5"], "");
        assert!(
            err.contains(&format!(
                "{flag} must be -1 (no limit) or a number of {unit} from 0 up, not -5"
            )),
            "{err}"
        );
    }
    assert!(d.fails(&["alter", "t"], "").contains("nothing to alter"));

    // A topic a deployment reads is kept unless --force.
    d.ok(&["produce", "t"], "user,ts,page\nu1,1,/a\n");
    let db = d.tmp.path().join("tables.db");
    let out = Command::new(KAPPA)
        .args([
            "stream",
            "sessionize",
            "-i",
            "events=t",
            "--until-caught-up",
            "-q",
        ])
        .arg("--log-dir")
        .arg(d.log())
        .arg("--table-db")
        .arg(&db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table_db = format!("--table-db={}", db.display());
    let err = d.fails(&["delete", "t", &table_db], "");
    assert!(
        err.contains("topic 't' is read by sessions v1 (live)"),
        "{err}"
    );
    d.ok(&["delete", "t", &table_db, "--force"], "");
    assert!(!d.ok(&["list"], "").contains('t'));
    assert!(d.fails(&["describe", "t"], "").contains("does not exist"));
}
