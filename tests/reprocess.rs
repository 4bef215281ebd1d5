//! Reprocessing end to end, as the README walks through it: stream sessions
//! with one gap, keep producing, reprocess with another gap into the next
//! version, swap on catch-up, roll back and forward — every table checked
//! against `kappa run` on the same data. Plus the guarantees: a killed
//! reprocess leaves the live version untouched and resumes; the old stream
//! process exits by itself once retired.

use std::process::Stdio;
use std::time::{Duration, Instant};

use kappa::table::DeploymentState;

use crate::common::World;

impl World {
    /// Produces `rows` (CSV lines without header) into `events`, and appends them to `all`.
    fn produce(&self, all: &mut Vec<String>, rows: &[String]) {
        let file = self.path("chunk.csv");
        std::fs::write(&file, format!("user,ts,page\n{}\n", rows.join("\n"))).unwrap();
        self.ok(&["log", "produce", "events", "--file", file.to_str().unwrap()]);
        all.extend(rows.iter().cloned());
    }
    /// `kappa run sessionize` with `gap` over `rows`: the expected table.
    fn batch(&self, rows: &[String], gap: &str) -> String {
        let file = self.path("all.csv");
        std::fs::write(&file, format!("user,ts,page\n{}\n", rows.join("\n"))).unwrap();
        let out = self.path(&format!("batch-{gap}"));
        let input = format!("events={}", file.display());
        let param = format!("gap={gap}");
        self.ok(&[
            "run",
            "sessionize",
            "-i",
            &input,
            "-p",
            &param,
            "-o",
            out.to_str().unwrap(),
            "--overwrite",
        ]);
        std::fs::read_to_string(out.join("sessions.csv")).unwrap()
    }
    /// The view `sessions` as `kappa table show --csv` prints it.
    fn view(&self) -> String {
        let out = self
            .kappa(&["table", "show", "sessions", "--csv", "--limit", "1000000"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
    fn states(&self) -> Vec<(u32, DeploymentState)> {
        let store = self.store();
        let mut v: Vec<_> = store
            .deployments_of("sessions")
            .unwrap()
            .into_iter()
            .map(|d| (d.version.0, d.state))
            .collect();
        v.sort();
        v
    }
}

/// Asserts two CSV texts are equal, showing only the first difference.
#[track_caller]
fn same(got: &str, want: &str, what: &str) {
    if got != want {
        let diff = got
            .lines()
            .zip(want.lines())
            .enumerate()
            .find(|(_, (a, b))| a != b);
        panic!(
            "{what}: {} lines vs {} expected; first difference: {diff:?}",
            got.lines().count(),
            want.lines().count()
        );
    }
}

fn events(from: usize, n: usize) -> Vec<String> {
    (from..from + n)
        .map(|i| {
            format!(
                "u{},{},/p{}",
                i % 7,
                1000 + i * 97 % 5000 + (i / 7) * 400,
                i % 3
            )
        })
        .collect()
}

const STREAM: &[&str] = &[
    "stream",
    "sessionize",
    "-i",
    "events=events",
    "--until-caught-up",
    "-q",
];

#[test]
fn walkthrough_stream_reprocess_swap_rollback_forward() {
    walkthrough(&World::new());
}

/// Stream, reprocess with another parameter and swap, stream on, roll back
/// and forward: the view always equals `kappa run` over what was produced.
pub(crate) fn walkthrough(w: &World) {
    use DeploymentState::*;
    let mut all = Vec::new();
    w.ok(&["log", "create", "events", "--partitions", "2"]);
    w.produce(&mut all, &events(0, 300));
    w.ok(&[STREAM, &["-p", "gap=1800"]].concat());
    same(&w.view(), &w.batch(&all, "1800"), "view");

    w.produce(&mut all, &events(300, 200));
    let err = w.fails(&[STREAM, &["-p", "gap=600"]].concat());
    assert!(err.contains("use `kappa reprocess`"), "{err}");
    let reprocess_600 = [
        "reprocess",
        "sessionize",
        "-i",
        "events=events",
        "-p",
        "gap=600",
        "--until-caught-up",
        "-q",
    ];
    let out = w.ok(&reprocess_600);
    assert!(out.contains("swapped sessions to v2"), "{out}");
    assert_eq!(w.states(), vec![(1, Retired), (2, Live)]);
    same(&w.view(), &w.batch(&all, "600"), "view");

    // The live v2 streams on; then roll back to v1, which catches up on
    // everything produced since it was retired.
    w.produce(&mut all, &events(500, 150));
    w.ok(&[STREAM, &["-p", "gap=600"]].concat());
    same(&w.view(), &w.batch(&all, "600"), "view");
    w.produce(&mut all, &events(650, 50));
    let out = w.ok(&["table", "rollback", "sessions", "--until-caught-up", "-q"]);
    assert!(out.contains("swapped sessions to v1"), "{out}");
    assert_eq!(w.states(), vec![(1, Live), (2, Retired)]);
    same(&w.view(), &w.batch(&all, "1800"), "view");

    // Roll forward to v2 the same way.
    w.ok(&[
        "table",
        "rollback",
        "sessions",
        "--version",
        "2",
        "--until-caught-up",
        "-q",
    ]);
    assert_eq!(w.states(), vec![(1, Retired), (2, Live)]);
    same(&w.view(), &w.batch(&all, "600"), "view");
    // Reprocessing with exactly the live version's job, parameters and
    // inputs would build a copy of it: nothing is built.
    let out = w.ok(&reprocess_600);
    assert!(
        out.contains("nothing changed: sessions v2 is live and runs sessionize v1"),
        "{out}"
    );
    assert_eq!(w.states(), vec![(1, Retired), (2, Live)]);
    let status = w.ok(&["table", "status"]);
    assert!(
        status.contains("gap=1800") && status.contains("gap=600"),
        "{status}"
    );
    // `--force` builds the copy anyway.
    let out = w.ok(&[&reprocess_600[..], &["--force"]].concat());
    assert!(out.contains("swapped sessions to v3"), "{out}");
    assert_eq!(w.states().last(), Some(&(3, Live)));
    same(&w.view(), &w.batch(&all, "600"), "view");
}

#[test]
fn killed_reprocess_leaves_live_untouched_and_resumes() {
    /// Records applied so far by a building version (0 if there is none).
    fn building_applied(w: &World) -> i64 {
        rusqlite::Connection::open(w.path("tables.db"))
            .and_then(|c| {
                c.query_row(
                    "SELECT coalesce(sum(o.next_offset), 0) FROM kappa_offsets o JOIN kappa_deployments d \
                     ON d.id = o.deployment WHERE d.state = 'building'",
                    [],
                    |r| r.get(0),
                )
            })
            .unwrap_or(0)
    }
    let w = World::new();
    let mut all = Vec::new();
    w.ok(&["log", "create", "events", "--partitions", "3"]);
    w.produce(&mut all, &events(0, 40000));
    w.ok(&[STREAM, &["-p", "gap=1800"]].concat());
    let live_before = w.view();
    let mut mid_build = 0;
    for (i, delay) in [300u64, 300, 300, 300].into_iter().enumerate() {
        let applied_before = building_applied(&w);
        let mut child = w
            .kappa(&[
                "reprocess",
                "sessionize",
                "-i",
                "events=events",
                "-p",
                "gap=300",
                "--max-batch",
                "97",
                "--workers",
                &(1 + i % 2).to_string(),
                "-q",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Kill as soon as this attempt has committed progress of its own
        // (or after `delay` if it has not), so that kills land mid-build.
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(delay)
            && building_applied(&w) <= applied_before
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let states = w.states();
        let live: Vec<_> = states
            .iter()
            .filter(|(_, s)| *s == DeploymentState::Live)
            .collect();
        assert_eq!(live.len(), 1, "{states:?}");
        if live[0].0 == 1 {
            same(
                &w.view(),
                &live_before,
                "the live version changed before the swap",
            );
            mid_build += states.iter().any(|(_, s)| *s == DeploymentState::Building) as usize;
        }
    }
    assert!(
        mid_build >= 2,
        "only {mid_build} kills landed before the swap"
    );
    w.ok(&[
        "reprocess",
        "sessionize",
        "-i",
        "events=events",
        "-p",
        "gap=300",
        "--until-caught-up",
        "-q",
    ]);
    same(&w.view(), &w.batch(&all, "300"), "view");
}

/// A replay's large epoch is written in pieces, so that the live version's
/// commits get the database in between. A replay killed between two pieces
/// leaves its version half-written, invisible and unswappable; the next
/// `kappa reprocess` rebuilds it from the log, and it verifies.
#[test]
fn a_replay_killed_between_pieces_of_an_epoch_is_rebuilt() {
    fn half_written(w: &World) -> Option<i64> {
        rusqlite::Connection::open(w.path("tables.db"))
            .and_then(|c| {
                c.query_row(
                    "SELECT half_written FROM kappa_deployments WHERE state = 'building'",
                    [],
                    |r| r.get(0),
                )
            })
            .ok()
    }
    let w = World::new();
    w.ok(&["log", "create", "clicks", "--partitions", "2"]);
    // 60k groups: one epoch of the replay is about 15 pieces.
    let rows: Vec<String> = (0..60_000).map(|i| format!("k{i},{i}")).collect();
    let file = w.write("clicks.csv", &format!("key,n\n{}\n", rows.join("\n")));
    w.ok(&["log", "produce", "clicks", "--file", &file]);
    let input = ["-i", "input=clicks", "--table", "counts"];
    w.ok(&[
        &[
            "stream",
            "count-by",
            "-p",
            "key=key",
            "--until-caught-up",
            "-q",
        ],
        &input[..],
    ]
    .concat());
    let live_before = w.ok(&["table", "show", "counts", "--csv", "--limit", "1000000"]);
    let reprocess = [
        &[
            "reprocess",
            "group-by",
            "-p",
            "key=key",
            "-p",
            "agg=count,sum:n",
        ][..],
        &input[..],
        &[
            "--max-batch",
            "1000000",
            "--swap",
            "manual",
            "--until-caught-up",
        ][..],
    ]
    .concat();
    let mut child = w
        .kappa(&reprocess)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while half_written(&w) != Some(1) {
        assert!(
            started.elapsed() < Duration::from_secs(60) && child.try_wait().unwrap().is_none(),
            "the replay never wrote an epoch in pieces"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(half_written(&w), Some(1), "the kill landed after the epoch");
    let status = w.ok(&["table", "status"]);
    assert!(status.contains("building (half-written)"), "{status}");
    let live = w.ok(&["table", "show", "counts", "--csv", "--limit", "1000000"]);
    same(&live, &live_before, "the live version changed");
    let refused = w.kappa(&["table", "swap", "counts", "2"]).output().unwrap();
    assert!(!refused.status.success());

    let resumed = w.kappa(&reprocess).output().unwrap();
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{stderr}");
    assert!(stderr.contains("rebuilding this version"), "{stderr}");
    assert!(
        stderr.contains("v2 caught up (lag 0); waiting for `kappa table swap counts --version 2`"),
        "{stderr}"
    );
    assert_eq!(half_written(&w), Some(0));
    let status = w.ok(&["table", "status"]);
    assert!(
        status.contains("building, caught up: waiting for a swap"),
        "{status}"
    );
    let verify = w.ok(&["table", "verify", "counts", "--version", "2"]);
    assert!(verify.contains("identical (60000 rows"), "{verify}");
}

#[test]
fn retired_stream_process_exits_by_itself() {
    let w = World::new();
    let mut all = Vec::new();
    w.ok(&["log", "create", "events", "--partitions", "1"]);
    w.produce(&mut all, &events(0, 100));
    let mut old = w
        .kappa(&[
            "stream",
            "sessionize",
            "-i",
            "events=events",
            "-p",
            "gap=1800",
            "-q",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until v1 exists and is live.
    let started = Instant::now();
    while !w.path("tables.db").exists() || w.states().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "stream never created v1"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    w.ok(&[
        "reprocess",
        "sessionize",
        "-i",
        "events=events",
        "-p",
        "gap=600",
        "--until-caught-up",
        "-q",
    ]);
    let waited = Instant::now();
    loop {
        if let Some(status) = old.try_wait().unwrap() {
            assert!(status.success(), "old stream exited with {status}");
            break;
        }
        assert!(
            waited.elapsed() < Duration::from_secs(20),
            "old stream still running after its version was retired"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut stderr = String::new();
    std::io::Read::read_to_string(old.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("retired"), "{stderr}");
}

/// Reads the view and the live version's applied offsets in one snapshot:
/// `(sum of counts in the view, records applied by the live version, live version)`.
fn snapshot(db: &std::path::Path) -> Option<(i64, i64, i64)> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .ok()?;
    conn.query_row(
        "SELECT (SELECT coalesce(sum(count), 0) FROM t), \
                (SELECT coalesce(sum(o.next_offset), 0) FROM kappa_offsets o JOIN kappa_deployments d \
                   ON d.id = o.deployment WHERE d.state = 'live'), \
                (SELECT version FROM kappa_deployments WHERE state = 'live')",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .ok()
}

/// While a reprocess builds and swaps, with events still being produced, a
/// reader polling the view always sees one whole version: the counts in the
/// view are exactly the records that version has applied — never an empty,
/// partial or mixed table. Afterwards both versions verify against their own
/// offsets, and the new one holds every event.
#[test]
fn readers_see_whole_versions_across_the_swap() {
    let w = World::new();
    w.ok(&["log", "create", "clicks", "--partitions", "2"]);
    let rows: Vec<String> = (0..6000)
        .map(|i| format!("k{},{}", i % 13, i % 100))
        .collect();
    let file = w.path("c0.csv");
    std::fs::write(&file, format!("key,n\n{}\n", rows[..3000].join("\n"))).unwrap();
    w.ok(&["log", "produce", "clicks", "--file", file.to_str().unwrap()]);
    let v1 = ["-i", "input=clicks", "--table", "t", "-p", "key=key", "-q"];
    let mut old = w
        .kappa(&[&["stream", "group-by", "-p", "agg=count"][..], &v1].concat())
        .stderr(std::fs::File::create(w.path("old-stream.log")).unwrap())
        .spawn()
        .unwrap();
    let db = w.path("tables.db");
    let started = Instant::now();
    while snapshot(&db).is_none_or(|(_, applied, _)| applied < 3000) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "v1 never caught up"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut seen = std::collections::BTreeSet::new();
            // Polls until told to stop and v2 was seen (bounded): the swap is
            // observed however the threads are scheduled.
            let deadline = Instant::now() + Duration::from_secs(60);
            while !(stop.load(std::sync::atomic::Ordering::Relaxed) && seen.contains(&2))
                && Instant::now() < deadline
            {
                if let Some((counted, applied, version)) = snapshot(&db) {
                    assert_eq!(
                        counted, applied,
                        "v{version}: the view holds {counted} events but that version applied {applied}"
                    );
                    assert!(
                        applied >= 3000,
                        "v{version}: an incomplete version is visible ({applied} applied)"
                    );
                    seen.insert(version);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            seen
        })
    };
    let producer = w.produce_in_background(
        "clicks",
        "key,n",
        rows[3000..].to_vec(),
        300,
        Duration::from_millis(15),
    );
    let v2 = [
        &["group-by", "-p", "agg=count,sum:n", "--max-batch", "40"][..],
        &v1,
    ]
    .concat();
    w.ok(&[&["reprocess"][..], &v2, &["--until-caught-up"]].concat());
    producer.join().unwrap();
    // The old stream exits by itself once retired.
    let waited = Instant::now();
    while old.try_wait().unwrap().is_none() {
        if waited.elapsed() > Duration::from_secs(20) {
            let _ = old.kill();
            let log = std::fs::read_to_string(w.path("old-stream.log")).unwrap_or_default();
            let status = w.ok(&["table", "status"]);
            panic!("the retired stream did not exit within 20 s; its stderr:\n{log}\n{status}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    w.ok(&[&["stream"][..], &v2, &["--until-caught-up"]].concat());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = reader.join().unwrap();
    assert!(
        seen.contains(&1) && seen.contains(&2),
        "the reader saw versions {seen:?}"
    );
    assert_eq!(snapshot(&db).unwrap(), (6000, 6000, 2));
    for version in ["1", "2"] {
        let out = w.ok(&["table", "verify", "t", "--version", version]);
        assert!(out.contains(": identical ("), "{out}");
    }
}

#[test]
fn reprocess_refuses_a_log_whose_start_was_deleted() {
    let w = World::new();
    let mut all = Vec::new();
    w.ok(&[
        "log",
        "create",
        "events",
        "--partitions",
        "1",
        "--segment-bytes",
        "2000",
        "--retention-bytes",
        "4000",
    ]);
    w.produce(&mut all, &events(0, 300));
    w.ok(&["log", "retain", "events"]);
    let err = w.fails(&[
        "reprocess",
        "sessionize",
        "-i",
        "events=events",
        "--until-caught-up",
        "-q",
    ]);
    assert!(
        err.contains("retention has deleted offsets below")
            && err.contains("--from-earliest-available"),
        "{err}"
    );
    w.ok(&[
        "reprocess",
        "sessionize",
        "-i",
        "events=events",
        "--until-caught-up",
        "-q",
        "--from-earliest-available",
    ]);
}

/// `(user,start)` → the row, from a `sessions.csv` of `kappa run`.
fn sessions_by_key(csv: &str) -> std::collections::BTreeMap<(String, String), String> {
    csv.lines()
        .skip(1)
        .map(|line| {
            let mut f = line.split(',');
            let key = (f.next().unwrap().to_string(), f.next().unwrap().to_string());
            (key, line.to_string())
        })
        .collect()
}

#[test]
fn diff_then_swap_auto_if() {
    use DeploymentState::*;
    let w = World::new();
    let mut all = Vec::new();
    w.ok(&["log", "create", "events", "--partitions", "2"]);
    w.produce(&mut all, &events(0, 400));
    w.ok(&[STREAM, &["-p", "gap=1800"]].concat());

    // The rule is checked before anything is made.
    let reprocess = |gap: &str, rule: &str| {
        let param = format!("gap={gap}");
        let args = [
            "reprocess",
            "sessionize",
            "-i",
            "events=events",
            "-p",
            &param,
        ];
        let rest = ["--until-caught-up", "--swap", "auto-if", rule];
        w.kappa(&[&args[..], &rest[..]].concat()).output().unwrap()
    };
    let bad = reprocess("600", "moved <= 1");
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("unknown count 'moved'"), "{err}");
    assert_eq!(w.states(), vec![(1, Live)]);

    // gap=600 splits sessions: the rule 'different = 0' keeps v2 waiting.
    let out = reprocess("600", "different = 0");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("not swapping v2 in: sessions v2 against v1: different"),
        "{err}"
    );
    assert_eq!(w.states(), vec![(1, Live), (2, Building)]);

    // The diff, against a plain comparison of the two batch outputs.
    let (old, new) = (
        sessions_by_key(&w.batch(&all, "1800")),
        sessions_by_key(&w.batch(&all, "600")),
    );
    let mut want: Vec<(String, String, String)> = Vec::new();
    for (k, row) in &new {
        match old.get(k) {
            None => want.push(("added".into(), "v2".into(), row.clone())),
            Some(o) if o != row => {
                want.push(("changed".into(), "v1".into(), o.clone()));
                want.push(("changed".into(), "v2".into(), row.clone()));
            }
            Some(_) => {}
        }
    }
    for (k, row) in &old {
        if !new.contains_key(k) {
            want.push(("removed".into(), "v1".into(), row.clone()));
        }
    }
    assert!(
        !want.is_empty(),
        "the two gaps must give different sessions"
    );
    let out = w
        .kappa(&["table", "diff", "sessions", "--csv", "--limit", "100000"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut got: Vec<(String, String, String)> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let mut f = l.splitn(3, ',');
            let (a, b, c) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
            (a.to_string(), b.to_string(), c.to_string())
        })
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    let summary = String::from_utf8_lossy(&out.stderr);
    let added = want.iter().filter(|r| r.0 == "added").count();
    assert!(
        summary.contains(&format!("added     {added} (")),
        "{summary}"
    );
    assert!(
        summary.contains(&format!("{} -> {} keys", old.len(), new.len())),
        "{summary}"
    );

    // Reviewed: swap by hand. Then a rule that holds swaps by itself.
    w.ok(&["table", "swap", "sessions", "--version", "2"]);
    let out = reprocess("1800", "different <= 100000");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("within 'different <= 100000'"), "{err}");
    assert!(err.contains("swapped sessions to v3"), "{err}");
    assert_eq!(w.states(), vec![(1, Dropped), (2, Retired), (3, Live)]);
    same(&w.view(), &w.batch(&all, "1800"), "view");
}

/// A reprocess that adds a column is reviewed on the columns both versions
/// have (`table diff` lists the added one, and `auto-if` swaps it in); one
/// keyed differently cannot be reviewed, so it waits, as `manual` does, and
/// says why instead of failing.
#[test]
fn auto_if_reviews_an_added_column_and_waits_on_another_key() {
    use DeploymentState::*;
    let w = World::new();
    w.ok(&["log", "create", "orders", "--partitions", "2"]);
    let mut rows = String::from("id,status,amount\n");
    for i in 0..60 {
        let status = ["open", "paid", "sent"][i % 3];
        rows.push_str(&format!("{i},{status},{}\n", 10 + i % 7));
    }
    let file = w.write("orders.csv", &rows);
    w.ok(&["log", "produce", "orders", "--file", &file]);
    let sql = |select: &str, by: &str| format!("SELECT {select} FROM orders GROUP BY {by}");
    let deploy = |verb: &str, sql: &str, rest: &[&str]| {
        let args = [
            &[
                verb,
                "--sql-text",
                sql,
                "--table",
                "bystatus",
                "-i",
                "orders=orders",
            ][..],
            &["--until-caught-up"][..],
            rest,
        ]
        .concat();
        w.kappa(&args).output().unwrap()
    };
    let base = "status, count(*) AS n, sum(amount) AS total";
    assert!(deploy("stream", &sql(base, "status"), &[]).status.success());
    let states = || -> Vec<(u32, DeploymentState)> {
        let mut v: Vec<_> = w
            .store()
            .deployments_of("bystatus")
            .unwrap()
            .into_iter()
            .map(|d| (d.version.0, d.state))
            .collect();
        v.sort();
        v
    };

    let added = sql(&format!("{base}, max(amount) AS top"), "status");
    let out = deploy("reprocess", &added, &["--swap", "auto-if changed = 0"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("bystatus v2 against v1 on the columns both have (it adds top): 0 added, 0 removed, 0 changed of 3 keys"),
        "{err}"
    );
    assert_eq!(states(), vec![(1, Retired), (2, Live)]);
    let diff = w.ok(&["table", "diff", "bystatus", "--from", "1", "--to", "2"]);
    assert!(
        diff.contains("columns added in v2: top (rows are compared on the 3 columns both have)"),
        "{diff}"
    );
    assert!(diff.contains("unchanged 3"), "{diff}");

    let rekeyed = sql("status, amount, count(*) AS n", "status, amount");
    let out = deploy("reprocess", &rekeyed, &["--swap", "auto-if changed <= 10%"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("not swapping v3 in: the rule cannot be evaluated: cannot compare bystatus v2 with v3: v2 is keyed by (status), v3 by (status,amount)"),
        "{err}"
    );
    assert_eq!(states(), vec![(1, Retired), (2, Live), (3, Building)]);
    let err = w.fails(&["table", "diff", "bystatus", "--to", "3"]);
    assert!(err.contains("so their rows do not pair up"), "{err}");
}

/// `kappa table swap` refuses a building version that has not caught up
/// (unless `--force`), and drops retired versions beyond `--keep` as a
/// reprocess swap does.
#[test]
fn table_swap_refuses_a_version_behind_the_log_and_keeps_what_keep_says() {
    let w = World::new();
    let mut all = Vec::new();
    w.ok(&["log", "create", "events", "--partitions", "1"]);
    w.produce(&mut all, &events(0, 3000));
    let stream = [
        "stream",
        "sessionize",
        "-i",
        "events=events",
        "-p",
        "gap=1800",
    ];
    w.ok(&[&stream[..], &["--until-caught-up", "-q"]].concat());
    // A reprocess killed after its first epochs: v2 is building, behind.
    let mut child = w
        .kappa(&[
            "reprocess",
            "sessionize",
            "-i",
            "events=events",
            "-p",
            "gap=900",
            "--max-batch",
            "1",
            "--swap",
            "manual",
            "-q",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let applied = |w: &World| {
        let store = w.store();
        let v2 = store.deployments_of("sessions").unwrap();
        v2.iter()
            .find(|d| d.version.0 == 2)
            .map_or(0, |d| d.progress.records_applied)
    };
    while applied(&w) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(60) && child.try_wait().unwrap().is_none(),
            "the reprocess committed no epoch"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        applied(&w) < 3000,
        "the reprocess caught up before the kill"
    );
    let refused = w.fails(&["table", "swap", "sessions", "--version", "2"]);
    assert!(
        refused.contains("not swapping sessions v2 in: v2 has not caught up yet (lag ")
            && refused.contains("or pass --force"),
        "{refused}"
    );
    assert_eq!(
        w.states(),
        vec![(1, DeploymentState::Live), (2, DeploymentState::Building)]
    );
    // Forced: v2 is live, v1 retired and kept (--keep 1).
    let out = w.ok(&["table", "swap", "sessions", "--version", "2", "--force"]);
    assert!(out.contains("sessions: v2 is live (retired v1)"), "{out}");
    // Back to v1 keeping none: v2 is dropped at once.
    let out = w.ok(&["table", "swap", "sessions", "--version", "1", "--keep", "0"]);
    assert!(
        out.contains("sessions: v1 is live (retired v2; dropped v2 (--keep 0))"),
        "{out}"
    );
    assert_eq!(
        w.states(),
        vec![(1, DeploymentState::Live), (2, DeploymentState::Dropped)]
    );
    same(
        &w.view(),
        &w.batch(&all, "1800"),
        "the view after swapping back",
    );
}
