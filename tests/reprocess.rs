//! Reprocessing end to end, as the README walks through it: stream sessions
//! with one gap, keep producing, reprocess with another gap into the next
//! version, swap on catch-up, roll back and forward — every table checked
//! against `kappa run` on the same data. Plus the guarantees: a killed
//! reprocess leaves the live version untouched and resumes; the old stream
//! process exits by itself once retired.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kappa::table::{DeploymentState, TableStore};

const KAPPA: &str = env!("CARGO_BIN_EXE_kappa");

struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        World { dir: tempfile::tempdir().unwrap() }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn kappa(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(KAPPA);
        cmd.args(args)
            .env("KAPPA_LOG_DIR", self.path("log"))
            .env("KAPPA_TABLE_DB", self.path("tables.db"))
            .env("RUST_LOG", "warn");
        cmd
    }
    fn ok(&self, args: &[&str]) -> String {
        let out = self.kappa(args).output().unwrap();
        assert!(out.status.success(), "kappa {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    }
    fn fails(&self, args: &[&str]) -> String {
        let out = self.kappa(args).output().unwrap();
        assert!(!out.status.success(), "kappa {args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
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
        self.ok(&["run", "sessionize", "-i", &input, "-p", &param, "-o", out.to_str().unwrap(), "--overwrite"]);
        std::fs::read_to_string(out.join("sessions.csv")).unwrap()
    }
    /// The view `sessions` as `kappa table show --csv` prints it.
    fn view(&self) -> String {
        let out = self.kappa(&["table", "show", "sessions", "--csv", "--limit", "1000000"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }
    fn states(&self) -> Vec<(u32, DeploymentState)> {
        let store = TableStore::open(&self.path("tables.db")).unwrap();
        let mut v: Vec<_> = store.deployments_of("sessions").unwrap().into_iter().map(|d| (d.version.0, d.state)).collect();
        v.sort();
        v
    }
}

/// Asserts two CSV texts are equal, showing only the first difference.
#[track_caller]
fn same(got: &str, want: &str, what: &str) {
    if got != want {
        let diff = got.lines().zip(want.lines()).enumerate().find(|(_, (a, b))| a != b);
        panic!(
            "{what}: {} lines vs {} expected; first difference: {diff:?}",
            got.lines().count(),
            want.lines().count()
        );
    }
}

fn events(from: usize, n: usize) -> Vec<String> {
    (from..from + n).map(|i| format!("u{},{},/p{}", i % 7, 1000 + i * 97 % 5000 + (i / 7) * 400, i % 3)).collect()
}

const STREAM: &[&str] = &["stream", "sessionize", "-i", "events=events", "--until-caught-up", "-q"];

#[test]
fn walkthrough_stream_reprocess_swap_rollback_forward() {
    use DeploymentState::*;
    let w = World::new();
    let mut all = Vec::new();
    w.ok(&["log", "create", "events", "--partitions", "2"]);
    w.produce(&mut all, &events(0, 300));
    w.ok(&[STREAM, &["-p", "gap=1800"]].concat());
    same(&w.view(), &w.batch(&all, "1800"), "view");

    w.produce(&mut all, &events(300, 200));
    let err = w.fails(&[STREAM, &["-p", "gap=600"]].concat());
    assert!(err.contains("use `kappa reprocess`"), "{err}");
    let out = w.ok(&["reprocess", "sessionize", "-i", "events=events", "-p", "gap=600", "--until-caught-up", "-q"]);
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
    w.ok(&["table", "rollback", "sessions", "--version", "2", "--until-caught-up", "-q"]);
    assert_eq!(w.states(), vec![(1, Retired), (2, Live)]);
    same(&w.view(), &w.batch(&all, "600"), "view");
    let status = w.ok(&["table", "status"]);
    assert!(status.contains("gap=1800") && status.contains("gap=600"), "{status}");
}

#[test]
fn killed_reprocess_leaves_live_untouched_and_resumes() {
    let w = World::new();
    let mut all = Vec::new();
    w.ok(&["log", "create", "events", "--partitions", "3"]);
    w.produce(&mut all, &events(0, 20000));
    w.ok(&[STREAM, &["-p", "gap=1800"]].concat());
    let live_before = w.view();
    let mut mid_build = 0;
    for (i, delay) in [30u64, 90, 10, 150].into_iter().enumerate() {
        let mut child = w
            .kappa(&["reprocess", "sessionize", "-i", "events=events", "-p", "gap=300", "--max-batch", "97", "--workers", &(1 + i % 2).to_string(), "-q"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().unwrap();
        child.wait().unwrap();
        let states = w.states();
        let live: Vec<_> = states.iter().filter(|(_, s)| *s == DeploymentState::Live).collect();
        assert_eq!(live.len(), 1, "{states:?}");
        if live[0].0 == 1 {
            same(&w.view(), &live_before, "the live version changed before the swap");
            mid_build += states.iter().any(|(_, s)| *s == DeploymentState::Building) as usize;
        }
    }
    assert!(mid_build >= 2, "only {mid_build} kills landed before the swap");
    w.ok(&["reprocess", "sessionize", "-i", "events=events", "-p", "gap=300", "--until-caught-up", "-q"]);
    same(&w.view(), &w.batch(&all, "300"), "view");
}

#[test]
fn retired_stream_process_exits_by_itself() {
    let w = World::new();
    let mut all = Vec::new();
    w.ok(&["log", "create", "events", "--partitions", "1"]);
    w.produce(&mut all, &events(0, 100));
    let mut old = w.kappa(&["stream", "sessionize", "-i", "events=events", "-p", "gap=1800", "-q"]).stderr(Stdio::piped()).spawn().unwrap();
    // Wait until v1 exists and is live.
    let started = Instant::now();
    while !w.path("tables.db").exists() || w.states().is_empty() {
        assert!(started.elapsed() < Duration::from_secs(20), "stream never created v1");
        std::thread::sleep(Duration::from_millis(20));
    }
    w.ok(&["reprocess", "sessionize", "-i", "events=events", "-p", "gap=600", "--until-caught-up", "-q"]);
    let waited = Instant::now();
    loop {
        if let Some(status) = old.try_wait().unwrap() {
            assert!(status.success(), "old stream exited with {status}");
            break;
        }
        assert!(waited.elapsed() < Duration::from_secs(20), "old stream still running after its version was retired");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut stderr = String::new();
    std::io::Read::read_to_string(old.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("retired"), "{stderr}");
}
