//! A crash campaign: SIGKILLs at random moments across `log produce`,
//! `stream`, `reprocess` (during the replay and around the swap), `table
//! rollback`, `log compact` and `log retain`, while a reader polls the view.
//! At the end:
//! - every acknowledged record is in the log exactly once (killed producers
//!   may have appended some of their rows, never one twice);
//! - every table version equals `kappa table verify`'s recomputation;
//! - the reader never saw a partial epoch or a partial swap (the view's
//!   counts always equal the live version's committed offsets);
//! - no lock outlived its process (the final runs are never refused);
//! - the compacted topic keeps every key's latest acknowledged value, and
//!   the retained topic stays readable.
//!
//! Many rounds end before the kill (a refused reprocess while two versions
//! are building, a rollback with nothing to roll back to, a quick compact):
//! those are counted apart. `KAPPA_CRASH_ROUNDS` (default 300, about 130
//! of them kills) and `KAPPA_CRASH_SEED` run a longer
//! or different campaign by hand.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kappa::table::{DeploymentState, SqliteStore, TableStore};

use crate::common::{Rng, World};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The view `t` and the offsets of its live version, read in one transaction.
fn snapshot(db: &std::path::Path) -> Option<(i64, i64)> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .ok()?;
    conn.query_row(
        "SELECT (SELECT coalesce(sum(count), 0) FROM t), \
         (SELECT coalesce(sum(next_offset), 0) FROM kappa_offsets WHERE input = 'input' AND deployment = \
            (SELECT d.id FROM kappa_deployments d JOIN kappa_outputs o ON o.deployment = d.id \
             WHERE o.output = 't' AND d.state = 'live'))",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .ok()
}

const V1: &[&str] = &[
    "group-by",
    "-i",
    "input=ev",
    "-p",
    "key=k",
    "-p",
    "agg=count",
    "--table",
    "t",
];
const V2: &[&str] = &[
    "group-by",
    "-i",
    "input=ev",
    "-p",
    "key=k",
    "-p",
    "agg=count,sum:id",
    "--table",
    "t",
];

/// The job of `t`'s live version (V1 before any deployment).
fn live_job(db: &std::path::Path) -> &'static [&'static str] {
    let live = SqliteStore::open_existing(db)
        .ok()
        .and_then(|store| store.find_by_output("t", None).ok());
    match live {
        Some(d)
            if d.params
                .iter()
                .any(|(k, v)| k == "agg" && v.contains("sum")) =>
        {
            V2
        }
        _ => V1,
    }
}

/// Checks that every version of `t` not dropped equals `kappa table
/// verify`'s recomputation; returns their numbers.
fn verify_every_version(w: &World, db: &std::path::Path) -> Vec<u32> {
    let store = SqliteStore::open(db).unwrap();
    let versions: Vec<u32> = store
        .deployments_of("t")
        .unwrap()
        .into_iter()
        .filter(|d| d.state != DeploymentState::Dropped)
        .map(|d| d.version.0)
        .collect();
    drop(store);
    for v in &versions {
        let out = w.ok(&["table", "verify", "t", "--version", &v.to_string()]);
        assert!(out.contains(": identical ("), "{out}");
    }
    versions
}

#[test]
fn sigkills_everywhere_lose_nothing_and_count_nothing_twice() {
    let rounds = env_u64("KAPPA_CRASH_ROUNDS", 300);
    let mut rng = Rng(env_u64("KAPPA_CRASH_SEED", 0x5eed_c0ffee) | 1);
    let w = World::new();
    w.ok(&[
        "log",
        "create",
        "ev",
        "--partitions",
        "2",
        "--segment-bytes",
        "4000",
    ]);
    w.ok(&[
        "log",
        "create",
        "kv",
        "--compact",
        "--segment-bytes",
        "2000",
    ]);
    w.ok(&[
        "log",
        "create",
        "old",
        "--segment-bytes",
        "2000",
        "--retention-bytes",
        "6000",
    ]);
    let db = w.path("tables.db");
    let (stop, reads) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let reader = {
        let (db, stop, reads) = (db.clone(), stop.clone(), reads.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some((counted, applied)) = snapshot(&db) {
                    assert_eq!(counted, applied, "a reader saw a partial epoch or swap");
                    reads.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let (mut next_id, mut acked) = (0u64, BTreeSet::new());
    let mut latest_kv: BTreeMap<String, String> = BTreeMap::new();
    let (mut kills, mut by_command) = (0, BTreeMap::<&str, u32>::new());
    let started = Instant::now();
    for round in 0..rounds {
        let kind = [
            "produce",
            "stream",
            "reprocess",
            "rollback",
            "compact",
            "retain",
        ][rng.below(6) as usize];
        // Rows for ev: a small acknowledged batch, or a large one to kill a
        // producer in the middle of.
        let n = if kind == "produce" {
            500 + rng.below(2500)
        } else {
            20 + rng.below(200)
        };
        let ids: Vec<u64> = (next_id..next_id + n).collect();
        next_id += n;
        let csv: String = std::iter::once("id,k".to_string())
            .chain(ids.iter().map(|i| format!("{i},k{}", i % 17)))
            .collect::<Vec<_>>()
            .join("\n");
        let file = w.write(&format!("ev{round}.csv"), &(csv + "\n"));
        let args: Vec<String> = match kind {
            "produce" => vec![
                "log".into(),
                "produce".into(),
                "ev".into(),
                "--file".into(),
                file.clone(),
                "--batch".into(),
                "7".into(),
            ],
            "stream" => [&["stream"][..], live_job(&db), &["-q", "--max-batch", "50"]]
                .concat()
                .iter()
                .map(|s| s.to_string())
                .collect(),
            "reprocess" => [
                &["reprocess"][..],
                V2,
                &["-q", "--max-batch", "50", "--keep", "3"],
            ]
            .concat()
            .iter()
            .map(|s| s.to_string())
            .collect(),
            "rollback" => ["table", "rollback", "t", "-q", "--keep", "3"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            "compact" => {
                let kv: String = (0..30)
                    .map(|i| {
                        let (k, v) = (format!("k{}", rng.below(9)), format!("v{round}x{i}"));
                        latest_kv.insert(k.clone(), v.clone());
                        format!("{k},{v}\n")
                    })
                    .collect();
                let kv_file = w.write(&format!("kv{round}.csv"), &format!("k,v\n{kv}"));
                w.ok(&["log", "produce", "kv", "--file", &kv_file, "--key", "k"]);
                vec!["log".into(), "compact".into(), "kv".into()]
            }
            _ => {
                let old = w.write(
                    &format!("old{round}.csv"),
                    &format!(
                        "a\n{}\n",
                        (0..80)
                            .map(|i| i.to_string())
                            .collect::<Vec<_>>()
                            .join("\n")
                    ),
                );
                w.ok(&["log", "produce", "old", "--file", &old]);
                vec!["log".into(), "retain".into(), "old".into()]
            }
        };
        if kind != "produce" {
            w.ok(&["log", "produce", "ev", "--file", &file]);
            acked.extend(ids.iter().copied());
        }
        let mut child = w.spawn_silent(&args);
        // Quick commands are killed early, long-running ones at any moment.
        let window = if matches!(kind, "stream" | "reprocess" | "rollback") {
            300
        } else {
            40
        };
        std::thread::sleep(Duration::from_millis(rng.below(window)));
        let exited = child.try_wait().unwrap();
        child.kill().unwrap(); // SIGKILL (a no-op if it already exited)
        let status = child.wait().unwrap();
        if exited.is_none() {
            kills += 1;
            *by_command.entry(kind).or_default() += 1;
        } else if kind == "produce" && status.success() {
            acked.extend(ids.iter().copied());
        }
    }
    assert!(
        kills as u64 >= (rounds / 3).min(100),
        "only {kills} of {rounds} rounds killed a running process: {by_command:?}"
    );
    // No stale lock: the live version resumes and catches up.
    let live = w.ok(&[&["stream"][..], live_job(&db), &["--until-caught-up"]].concat());
    assert!(live.contains("stopped after"), "{live}");
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    assert!(
        reads.load(Ordering::Relaxed) > 0,
        "the reader never saw the view"
    );
    // Every acknowledged record is in the log, none twice.
    let consumed = w.ok(&["log", "consume", "ev"]);
    let mut seen = BTreeSet::new();
    let ids = consumed
        .lines()
        .filter_map(|l| l.split_once(','))
        .filter_map(|(id, k)| k.starts_with('k').then(|| id.parse::<u64>().ok())?);
    for id in ids {
        assert!(seen.insert(id), "record {id} is in the log twice");
    }
    let lost: Vec<_> = acked.difference(&seen).take(5).collect();
    assert!(
        lost.is_empty(),
        "acknowledged records missing from the log: {lost:?}"
    );
    let versions = verify_every_version(&w, &db);
    // The changelog kept each key's latest value; the retained topic reads.
    let kv = w.ok(&["log", "consume", "kv"]);
    let mut got = BTreeMap::new();
    for (k, v) in kv.lines().filter_map(|l| l.split_once(',')) {
        if k != "k" && k.starts_with('k') {
            got.insert(k.to_string(), v.to_string());
        }
    }
    assert_eq!(got, latest_kv);
    w.ok(&["log", "consume", "old"]);
    eprintln!(
        "crash campaign: {rounds} rounds, {kills} SIGKILLs {by_command:?}, {} records acknowledged, \
         {} in the log, 0 lost, 0 duplicated, {} versions verified, {:.0} s",
        acked.len(),
        seen.len(),
        versions.len(),
        started.elapsed().as_secs_f64()
    );
}

/// The live version of `t`: its number.
fn live_version(db: &std::path::Path) -> u32 {
    let store = SqliteStore::open_existing(db).unwrap();
    store.find_by_output("t", None).unwrap().version.0
}

/// Starts `kappa ARGS` with its swap paused inside its transaction, and
/// waits until it says so.
fn start_paused_in_swap(w: &World, args: &[&str]) -> std::process::Child {
    use std::io::BufRead;
    let mut child = w
        .kappa(args)
        .env("KAPPA_TEST_SWAP_PAUSE_MS", "600000")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut said = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains("pausing inside the swap's transaction") => return child,
            Ok(line) => said.push(line),
            Err(_) => {
                let _ = child.kill();
                panic!("kappa {args:?} never reached its swap: {}", said.join("\n"));
            }
        }
    }
}

/// Rounds aimed at the swap window: a reprocess, and a rollback, killed
/// inside the swap's transaction, after its writes and before its commit.
/// Meanwhile and after the kill, readers see the old version whole (the
/// view's counts equal its committed offsets), and it is still the live
/// one; running the command again finishes the swap, and every version
/// equals its recomputation.
#[test]
fn kills_inside_the_swap_leave_the_old_version_whole_and_a_rerun_swaps() {
    let w = World::new();
    w.ok(&["log", "create", "ev", "--partitions", "2"]);
    let db = w.path("tables.db");
    let mut next = 0u64;
    let mut produce = |w: &World, n: u64| {
        let rows: String = (next..next + n)
            .map(|i| format!("{i},k{}\n", i % 17))
            .collect();
        next += n;
        let file = w.write(&format!("ev{next}.csv"), &format!("id,k\n{rows}"));
        w.ok(&["log", "produce", "ev", "--file", &file]);
    };
    produce(&w, 400);
    w.ok(&[&["stream"][..], V1, &["--until-caught-up"]].concat());
    let consistent = || {
        let (counted, applied) = snapshot(&db).expect("the view reads");
        assert_eq!(counted, applied, "a reader saw a partial swap");
    };
    for round in 0..4 {
        produce(&w, 200);
        let other = if live_job(&db) == V1 { V2 } else { V1 };
        let args: Vec<&str> = if round % 2 == 0 {
            [
                &["reprocess"][..],
                other,
                &["--until-caught-up", "--keep", "5"],
            ]
            .concat()
        } else {
            vec!["table", "rollback", "t", "--until-caught-up", "--keep", "5"]
        };
        let before = live_version(&db);
        let mut child = start_paused_in_swap(&w, &args);
        consistent();
        assert_eq!(
            live_version(&db),
            before,
            "{args:?}: swapped before its commit"
        );
        child.kill().unwrap(); // SIGKILL, inside the transaction
        child.wait().unwrap();
        consistent();
        assert_eq!(
            live_version(&db),
            before,
            "{args:?}: a killed swap took effect"
        );
        let out = w.ok(&args);
        assert_ne!(
            live_version(&db),
            before,
            "{args:?} again did not swap: {out}"
        );
        consistent();
    }
    let versions = verify_every_version(&w, &db);
    assert!(versions.len() >= 2, "{versions:?}");
}
