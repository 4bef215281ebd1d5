//! The crate's own binary, a `main.rs` of three lines, through every
//! command a user runs: batch over files, a stream over the log into a
//! table, verify, a changed parameter refused and then reprocessed and
//! swapped in, rollback — and the library path a program takes.

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_own-job");

/// A directory with this test's log and table store.
struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        World {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env("KAPPA_LOG_DIR", self.path("log"))
            .env("KAPPA_TABLE_DB", self.path("tables.db"))
            .env("RUST_LOG", "warn");
        cmd
    }

    /// Runs the binary, expecting success: stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.command(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "own-job {args:?}: {stderr}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs the binary, expecting failure: stderr.
    fn fails(&self, args: &[&str]) -> String {
        let out = self.command(args).output().unwrap();
        assert!(!out.status.success(), "own-job {args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn write(&self, name: &str, text: &str) -> String {
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }
}

fn data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data")
        .join(name)
        .display()
        .to_string()
}

/// `card-risk` over the files as a batch run: the rows of `risk.csv`.
fn batch(w: &World, payments: &str, param: &str) -> String {
    let out = w.path(&format!("out-{param}"));
    let out = out.display().to_string();
    w.ok(&[
        "run",
        "card-risk",
        "-i",
        &format!("payments={payments}"),
        "-i",
        &format!("blocked={}", data("blocked.csv")),
        "-p",
        param,
        "-o",
        &out,
        "--overwrite",
    ]);
    std::fs::read_to_string(Path::new(&out).join("risk.csv")).unwrap()
}

#[test]
fn lists_and_describes_its_own_job_only() {
    let w = World::new();
    let jobs = w.ok(&["jobs"]);
    assert!(jobs.starts_with("card-risk (v1)"), "{jobs}");
    assert!(!jobs.contains("count-by"), "built-ins are opt-in: {jobs}");
    let help = w.ok(&["run", "card-risk", "--help"]);
    assert!(
        help.contains("input  payments") && help.contains("amount (an integer)"),
        "{help}"
    );
    let unknown = w.fails(&["run", "count-by"]);
    assert!(
        unknown.contains("unknown job \"count-by\" (jobs: card-risk, card-risk-rows)"),
        "{unknown}"
    );
}

#[test]
fn batch_stream_verify_reprocess_and_rollback() {
    let w = World::new();
    let expected = "card,payments,total,blocked\nc1,3,800,2\nc2,2,950,1\nc3,1,300,0\nc4,1,2000,1\n";
    assert_eq!(batch(&w, &data("payments.csv"), "min_amount=0"), expected);

    w.ok(&["log", "create", "payments", "--partitions", "2"]);
    w.ok(&["log", "create", "blocked"]);
    w.ok(&[
        "log",
        "produce",
        "payments",
        "--key",
        "card",
        "--file",
        &data("payments.csv"),
    ]);
    w.ok(&["log", "produce", "blocked", "--file", &data("blocked.csv")]);
    let stream = [
        "stream",
        "card-risk",
        "-i",
        "payments=payments",
        "-i",
        "blocked=blocked",
    ];
    w.ok(&[&stream[..], &["--until-caught-up", "--quiet"]].concat());
    assert_eq!(w.ok(&["table", "show", "risk", "--csv"]), expected);
    assert!(
        w.ok(&["table", "verify", "risk"])
            .contains("risk v1: identical")
    );

    // More payments arrive; the stream resumes from its offsets.
    let more = w.write("more.csv", "card,merchant,amount\nc3,m2,700\nc5,m1,10\n");
    w.ok(&[
        "log", "produce", "payments", "--key", "card", "--file", &more,
    ]);
    w.ok(&[&stream[..], &["--until-caught-up", "--quiet"]].concat());
    let all = w.write(
        "all.csv",
        &(std::fs::read_to_string(data("payments.csv")).unwrap() + "c3,m2,700\nc5,m1,10\n"),
    );
    let live = w.ok(&["table", "show", "risk", "--csv"]);
    assert_eq!(live, batch(&w, &all, "min_amount=0"));
    assert!(w.ok(&["table", "verify", "risk"]).contains("identical"));

    // A changed parameter is not resumed: it is reprocessed beside the live version.
    let changed = [
        &stream[..],
        &["-p", "min_amount=200", "--until-caught-up", "--quiet"],
    ]
    .concat();
    let refused = w.fails(&changed);
    assert!(refused.contains("kappa reprocess"), "{refused}");
    let mut reprocess = changed.clone();
    reprocess[0] = "reprocess";
    w.ok(&reprocess);
    let v2 = w.ok(&["table", "show", "risk", "--csv"]);
    assert_eq!(v2, batch(&w, &all, "min_amount=200"));
    assert!(!v2.contains("c5"), "c5 paid only 10 cents: {v2}");
    assert!(
        w.ok(&["table", "verify", "risk"])
            .contains("risk v2: identical")
    );
    let status = w.ok(&["table", "status"]);
    assert!(status.contains("card-risk"), "{status}");

    // Roll back to v1, which catches up and goes live again.
    w.ok(&["table", "rollback", "risk", "--until-caught-up", "--quiet"]);
    assert_eq!(w.ok(&["table", "show", "risk", "--csv"]), live);
    assert!(
        w.ok(&["table", "verify", "risk"])
            .contains("risk v1: identical")
    );
}

#[test]
fn bad_rows_name_the_file_line_and_column() {
    let w = World::new();
    let bad = w.write("bad.csv", "card,merchant,amount\nc1,m1,500\nc2,m2,lots\n");
    let out = w.path("out").display().to_string();
    let blocked = format!("blocked={}", data("blocked.csv"));
    let err = w.fails(&[
        "run",
        "card-risk",
        "-i",
        &format!("payments={bad}"),
        "-i",
        &blocked,
        "-o",
        &out,
    ]);
    assert!(err.contains("bad.csv") && err.contains("line 3"), "{err}");
    assert!(!Path::new(&out).exists(), "nothing half-written");
}

/// A new version of the job's code (`version: 2`): the same job otherwise.
struct CardRiskV2;

impl kappa::prelude::Job for CardRiskV2 {
    fn spec(&self) -> kappa::prelude::JobSpec {
        kappa::prelude::JobSpec {
            version: 2,
            ..own_job::CardRisk.spec()
        }
    }

    fn plan(
        &self,
        params: &kappa::prelude::Params,
        inputs: &kappa::prelude::Schemas,
        data: &dyn kappa::prelude::DataContext,
    ) -> Result<kappa::prelude::Plan, kappa::prelude::PlanError> {
        own_job::CardRisk.plan(params, inputs, data)
    }
}

#[test]
fn a_new_job_version_is_refused_by_stream_and_verify() {
    use std::sync::Arc;

    use kappa::prelude::Job;
    let w = World::new();
    w.ok(&["log", "create", "payments"]);
    w.ok(&["log", "create", "blocked"]);
    w.ok(&[
        "log",
        "produce",
        "payments",
        "--file",
        &data("payments.csv"),
    ]);
    w.ok(&["log", "produce", "blocked", "--file", &data("blocked.csv")]);
    w.ok(&[
        "stream",
        "card-risk",
        "-i",
        "payments=payments",
        "-i",
        "blocked=blocked",
        "--until-caught-up",
        "--quiet",
    ]);

    // The library path: plan the new version over the same topics.
    let log = kappa::log::Log::open(w.path("log")).unwrap();
    let sources = kappa::source::inputs::Sources::new(log);
    let mut store = kappa::table::open(&w.path("tables.db").into()).unwrap();
    let inputs =
        [("payments", "payments"), ("blocked", "blocked")].map(|(a, b)| (a.into(), b.into()));
    let v2 = kappa::OnLog::plan(Arc::new(CardRiskV2), &[], &inputs, &sources).unwrap();
    let refused = v2.start_live(&mut *store).unwrap_err().to_string();
    assert!(
        refused.contains("card-risk v1") && refused.contains("kappa reprocess"),
        "{refused}"
    );

    let mut registry = kappa::Registry::new();
    registry.add(Arc::new(CardRiskV2));
    let options = Default::default();
    let workers = kappa::runner::WorkerConfig::threads(1);
    let err = kappa::engine::verify(
        &registry, &*store, &sources, "risk", None, &options, &workers,
    )
    .unwrap_err();
    assert!(err.to_string().contains("this program has v2"), "{err}");
    assert_eq!(CardRiskV2.spec().name, "card-risk");
}

#[test]
fn a_program_runs_the_job_in_batch_without_the_cli() {
    let output = kappa::Batch::new(std::sync::Arc::new(own_job::CardRisk))
        .input("payments", data("payments.csv"))
        .input("blocked", data("blocked.csv"))
        .param("min_amount", "1000")
        .run()
        .unwrap();
    let risk = output.output("risk").unwrap();
    assert_eq!(risk.len(), 1, "{risk:?}");
    assert_eq!(risk[0].0[0].to_string(), "c4");
    let missing = kappa::Batch::new(std::sync::Arc::new(own_job::CardRisk))
        .input("payments", data("payments.csv"))
        .run()
        .unwrap_err();
    assert!(
        missing
            .to_string()
            .contains("missing input: --input blocked=PATH"),
        "{missing}"
    );
}
