//! `kappa table list|show|status|swap|drop`: the real binary on a table
//! store made through the library (a stream run fills tables the same way).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kappa::schema::OutputSchema;
use kappa::table::{
    DeploymentState, EpochStats, InputOffset, NewDeployment, PartitionLag, SqliteStore, TableStore,
    TableVersion,
};
use kappa::value::{Row, Value};

const KAPPA: &str = env!("CARGO_BIN_EXE_kappa");

fn kappa(db: &Path, args: &[&str]) -> Output {
    Command::new(KAPPA)
        .arg("table")
        .args(args)
        .env("KAPPA_TABLE_DB", db)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run kappa")
}

/// Runs `kappa table ARGS`, expecting success; returns (stdout, stderr).
fn ok(db: &Path, args: &[&str]) -> (String, String) {
    let out = kappa(db, args);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    assert!(
        out.status.success(),
        "kappa table {args:?} failed: {}",
        text(&out.stderr)
    );
    (text(&out.stdout), text(&out.stderr))
}

/// Runs `kappa table ARGS`, expecting failure; returns stderr.
fn fails(db: &Path, args: &[&str]) -> String {
    let out = kappa(db, args);
    assert!(!out.status.success(), "kappa table {args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn csv_records(text: &str) -> Vec<Vec<String>> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(text.as_bytes())
        .records()
        .map(|r| r.unwrap().iter().map(str::to_string).collect())
        .collect()
}

fn schema(name: &str, columns: &[&str], key: &[usize]) -> OutputSchema {
    OutputSchema {
        name: name.into(),
        columns: columns.iter().map(|c| c.to_string()).collect(),
        key: key.to_vec(),
    }
}

fn deployment(outputs: Vec<OutputSchema>, gap: &str, state: DeploymentState) -> NewDeployment {
    NewDeployment {
        job: "page-views".into(),
        job_version: 2,
        params: vec![("gap".into(), gap.into())],
        inputs: vec![("events".into(), "clicks".into())],
        outputs,
        state,
        note: None,
    }
}

fn pv(page: Value, views: i64) -> (Row, isize) {
    (vec![page, Value::Int(views)], 1)
}

/// pageviews v1 live (3 rows, one with a null page), pairs v1 live (a bag),
/// pageviews v2 building with lag 1000 over two partitions at 100 rec/s.
fn fixture() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("data/tables.db");
    let mut store = SqliteStore::open(&db).unwrap();
    let pageviews = || schema("pageviews", &["page", "views"], &[0]);
    let v1 = store
        .create_deployment(&deployment(vec![pageviews()], "30m", DeploymentState::Live))
        .unwrap();
    let rows = vec![
        pv(Value::str("home"), 3),
        pv(Value::str("about, us"), 1),
        pv(Value::Null, 2),
    ];
    let offsets = [InputOffset {
        input: "events".into(),
        topic: "clicks".into(),
        partition: 0,
        next: 6,
        last: None,
    }];
    let stats = EpochStats {
        records: 6,
        epoch_ms: 4,
        records_per_sec: 1500.0,
        ..EpochStats::default()
    };
    let lease = store.take_over(v1.id, "test").unwrap();
    store
        .commit_epoch(&lease, &[rows], &offsets, &stats)
        .unwrap();
    let pairs = store
        .create_deployment(&deployment(
            vec![schema("pairs", &["l", "r"], &[0, 1])],
            "30m",
            DeploymentState::Live,
        ))
        .unwrap();
    let bag = vec![(vec![Value::Int(1), Value::str("x")], 2)];
    let lease = store.take_over(pairs.id, "test").unwrap();
    store.commit_epoch(&lease, &[bag], &[], &stats).unwrap();
    let v2 = store
        .create_deployment(&deployment(
            vec![pageviews()],
            "10m",
            DeploymentState::Building,
        ))
        .unwrap();
    assert_eq!(v2.version, TableVersion(2));
    let lease = store.take_over(v2.id, "test").unwrap();
    store
        .commit_epoch(&lease, &[vec![pv(Value::str("home"), 2)]], &[], &stats)
        .unwrap();
    let lag = |partition, lag| PartitionLag {
        topic: "clicks".into(),
        partition,
        lag,
    };
    let progress = EpochStats {
        bad_rows_total: 3,
        records_per_sec: 100.0,
        lag: vec![lag(0, 600), lag(1, 400)],
        ..EpochStats::default()
    };
    store.set_progress(&lease, &progress).unwrap();
    (dir, db)
}

#[test]
fn commands_fail_clearly_without_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("none/tables.db");
    for args in [
        &["status"][..],
        &["list"],
        &["show", "x"],
        &["swap", "x", "--version", "2"],
    ] {
        let err = fails(&db, args);
        assert!(err.contains("no table store at"), "{err}");
    }
    assert!(!db.exists(), "reading commands create nothing");
}

#[test]
fn list_shows_outputs_live_versions_and_history() {
    let (_dir, db) = fixture();
    let (out, _) = ok(&db, &["list"]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("OUTPUT     LIVE  ROWS"), "{out}");
    assert!(lines[1].starts_with("pageviews  v1    3  "), "{out}");
    assert!(lines[1].contains("v1 live, v2 building"), "{out}");
    assert!(lines[2].contains("l,r (bag)"), "{out}");
    let (csv, _) = ok(&db, &["list", "--csv"]);
    let records = csv_records(&csv);
    assert_eq!(
        records[0],
        [
            "output", "live", "rows", "columns", "key", "versions", "job"
        ]
    );
    assert_eq!(
        records[1][..5],
        ["pageviews", "v1", "3", "page,views", "page"]
    );
    assert_eq!(records[2][2], "2", "rows count multiplicities");
}

#[test]
fn show_prints_sorted_rows_of_a_version() {
    let (dir, db) = fixture();
    let (out, err) = ok(&db, &["show", "pageviews"]);
    assert_eq!(
        out,
        "PAGE       VIEWS\nNULL       2\nabout, us  1\nhome       3\n"
    );
    assert!(
        err.contains("pageviews__v1 (live, job page-views v2): 3 of 3"),
        "{err}"
    );
    let (csv, _) = ok(&db, &["--csv", "show", "pageviews", "--limit", "2"]);
    assert_eq!(csv, "page,views\n,2\n\"about, us\",1\n");
    let (v2, err) = ok(&db, &["show", "pageviews", "--version", "v2"]);
    assert_eq!(v2, "PAGE  VIEWS\nhome  2\n");
    assert!(err.contains("building"), "{err}");
    let (bag, _) = ok(&db, &["show", "pairs", "--csv"]);
    assert_eq!(bag, "l,r,kappa_count\n1,x,2\n");
    // The flag wins over the environment.
    let other = dir.path().join("other.db");
    let out = Command::new(KAPPA)
        .args(["table", "list", "--table-db"])
        .arg(&db)
        .env("KAPPA_TABLE_DB", &other)
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = fails(&db, &["show", "pageviews", "--version", "9"]);
    assert!(
        err.contains("output 'pageviews' has no v9 deployment"),
        "{err}"
    );
}

#[test]
fn status_shows_progress_lag_and_eta() {
    let (_dir, db) = fixture();
    let (out, _) = ok(&db, &["status"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[0].starts_with("ID  OUTPUTS    VERSION  JOB"), "{out}");
    let building = lines[3];
    for needle in [
        "pageviews",
        "v2",
        "page-views v2",
        "gap=10m",
        "building",
        "events=1000 (0:600 1:400)",
        "10s",
    ] {
        assert!(building.contains(needle), "{needle} not in {building}");
    }
    let (csv, _) = ok(&db, &["status", "--csv"]);
    let records = csv_records(&csv);
    let header = &records[0];
    let field =
        |row: &Vec<String>, name: &str| row[header.iter().position(|h| h == name).unwrap()].clone();
    let live = &records[1];
    assert_eq!(field(live, "state"), "live");
    assert_eq!(field(live, "records"), "6");
    assert_eq!(field(live, "rate"), "1500/s");
    assert_eq!(field(live, "eta"), "-");
    assert_ne!(field(live, "swapped"), "-");
    let building = &records[3];
    assert_eq!(field(building, "params"), "gap=10m");
    assert_eq!(field(building, "lag"), "1000");
    assert_eq!(field(building, "bad_rows"), "3");
    assert_eq!(field(building, "eta"), "10s");
    assert_eq!(field(building, "swapped"), "-");
}

#[test]
fn swap_and_drop_versions() {
    let (_dir, db) = fixture();
    let err = fails(&db, &["drop", "pageviews", "--version", "1"]);
    assert!(
        err.contains("swap another in first") && err.contains("is live"),
        "{err}"
    );
    // v2 never caught up: swapping it in would serve a table behind the log.
    let err = fails(&db, &["swap", "pageviews", "--version", "2"]);
    assert!(
        err.contains("not swapping pageviews v2 in: v2 has not caught up yet"),
        "{err}"
    );
    let (out, _) = ok(&db, &["swap", "pageviews", "--version", "2", "--force"]);
    assert_eq!(out, "pageviews: v2 is live (retired v1)\n");
    let (rows, _) = ok(&db, &["show", "pageviews", "--csv"]);
    assert_eq!(rows, "page,views\nhome,2\n");
    let (again, _) = ok(&db, &["swap", "pageviews", "--version", "v2"]);
    assert_eq!(again, "pageviews: v2 is already live\n");
    let (out, _) = ok(&db, &["drop", "pageviews", "--version", "1"]);
    assert_eq!(out, "dropped pageviews__v1\n");
    let err = fails(&db, &["swap", "pageviews", "--version", "1"]);
    assert!(err.contains("dropped"), "{err}");
    let (list, _) = ok(&db, &["list", "--csv"]);
    assert_eq!(
        csv_records(&list)[1],
        [
            "pageviews",
            "v2",
            "1",
            "page,views",
            "page",
            "v2 live",
            "page-views v2"
        ]
    );
    let store = SqliteStore::open(&db).unwrap();
    assert_eq!(
        store.find_by_output("pageviews", None).unwrap().version,
        TableVersion(2)
    );
}
