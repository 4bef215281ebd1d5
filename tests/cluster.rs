//! Batch runs across processes: timely's cluster mode over TCP on
//! 127.0.0.1, started by `kappa cluster` or by hand with a host file. Every
//! built-in job must give byte-identical outputs on 1, 2 and 3 processes;
//! processes that disagree, fail, die or never start must end every
//! process non-zero, promptly, with nothing committed.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{KAPPA, Rng};

fn kappa(args: &[String]) -> Output {
    Command::new(KAPPA)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

fn ok(args: &[String]) -> String {
    let out = kappa(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "kappa {args:?} failed:\n{err}");
    err
}

fn fails(args: &[String]) -> String {
    let out = kappa(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "kappa {args:?} succeeded:\n{err}");
    err
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn repo(path: &str) -> String {
    format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))
}

/// Every file of an output directory, by name.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut all: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    all.sort();
    all
}

/// A host file of `n` addresses on 127.0.0.1 whose ports were free.
pub(crate) fn hostfile(dir: &Path, n: usize) -> PathBuf {
    let listeners: Vec<_> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let text: String = listeners
        .iter()
        .map(|l| format!("{}\n", l.local_addr().unwrap()))
        .collect();
    let path = dir.join(format!("hosts-{n}"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Each built-in job with arguments that give it data (`NX` is the
/// directory of generated Nexmark CSV files).
fn cases(nexmark: &Path) -> Vec<(String, Vec<String>)> {
    let d = |f: &str| repo(&format!("data/{f}"));
    let mut cases: Vec<(&str, Vec<String>)> = vec![
        (
            "group-by",
            vec![
                "-i".into(),
                format!("input={}", d("orders.csv")),
                "-p".into(),
                "key=status".into(),
                "-p".into(),
                "agg=count,sum:amount,max:amount".into(),
            ],
        ),
        (
            "count-by",
            vec![
                "-i".into(),
                format!("input={}", d("orders.csv")),
                "-p".into(),
                "key=customer".into(),
            ],
        ),
        (
            "join",
            vec![
                "-i".into(),
                format!("left={}", d("orders.csv")),
                "-i".into(),
                format!("right={}", d("customers.csv")),
                "-p".into(),
                "on=customer".into(),
                "-p".into(),
                "kind=left".into(),
            ],
        ),
        (
            "distinct",
            vec!["-i".into(), format!("input={}", d("customers.csv"))],
        ),
        (
            "top-k",
            vec![
                "-i".into(),
                format!("input={}", d("orders.csv")),
                "-p".into(),
                "key=status".into(),
                "-p".into(),
                "by=amount".into(),
                "-p".into(),
                "k=2".into(),
            ],
        ),
        (
            "wordcount",
            vec!["-i".into(), format!("text={}", d("words.txt"))],
        ),
        (
            "sessionize",
            vec!["-i".into(), format!("events={}", d("events.csv"))],
        ),
        (
            "page-views",
            vec![
                "-i".into(),
                format!("views={}", d("views.csv")),
                "-i".into(),
                format!("users={}", d("users.csv")),
            ],
        ),
        (
            "followers",
            vec![
                "-i".into(),
                format!("follows={}", d("follows.csv")),
                "-i".into(),
                format!("posts={}", d("posts.csv")),
                "-p".into(),
                "strategy=skew".into(),
            ],
        ),
        (
            "window-agg",
            vec![
                "-i".into(),
                format!("input={}", d("clicks.csv")),
                "-p".into(),
                "time=ts".into(),
                "-p".into(),
                "unit=s".into(),
                "-p".into(),
                "window=tumbling:10m".into(),
                "-p".into(),
                "key=ad_id".into(),
                "--late".into(),
                "drop".into(),
                "--allowed-lateness".into(),
                "5m".into(),
            ],
        ),
        (
            "ad-clicks",
            vec![
                "-i".into(),
                format!("impressions={}", d("impressions.csv")),
                "-i".into(),
                format!("clicks={}", d("clicks.csv")),
                "-p".into(),
                "unit=s".into(),
                "-p".into(),
                "within=10m".into(),
            ],
        ),
        (
            "enrich",
            vec![
                "-i".into(),
                format!("events={}", d("views.csv")),
                "-i".into(),
                format!("table={}", d("user_history.csv")),
                "-p".into(),
                "as_of=ts:valid_from".into(),
                "-p".into(),
                "unit=s".into(),
            ],
        ),
    ];
    let queries: &[(&str, &[&str])] = &[
        ("q0", &["bid"]),
        ("q1", &["bid"]),
        ("q2", &["bid"]),
        ("q3", &["person", "auction"]),
        ("q4", &["auction", "bid"]),
        ("q5", &["bid"]),
        ("q7", &["bid"]),
        ("q8", &["person", "auction"]),
        ("q9", &["auction", "bid"]),
    ];
    let mut all: Vec<(String, Vec<String>)> =
        cases.drain(..).map(|(j, a)| (j.to_string(), a)).collect();
    for (q, inputs) in queries {
        let args = inputs
            .iter()
            .flat_map(|i| {
                [
                    "-i".to_string(),
                    format!("{i}={}/{i}.csv", nexmark.display()),
                ]
            })
            .collect();
        all.push((format!("nexmark-{q}"), args));
    }
    all
}

/// The jobs `kappa jobs` lists.
fn listed_jobs() -> BTreeSet<String> {
    let out = kappa(&strings(&["jobs"]));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with(' ') && l.contains(" (v"))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect()
}

#[test]
fn every_builtin_job_gives_byte_identical_outputs_on_one_two_and_three_processes() {
    let dir = tempfile::tempdir().unwrap();
    let nx = dir.path().join("nexmark");
    ok(&strings(&[
        "nexmark",
        "gen",
        "--events",
        "6000",
        "--rate",
        "300",
        "--output",
        nx.to_str().unwrap(),
    ]));
    let cases = cases(&nx);
    let covered: BTreeSet<String> = cases.iter().map(|(j, _)| j.clone()).collect();
    assert_eq!(
        covered,
        listed_jobs(),
        "every built-in job has a cluster case"
    );
    for (job, args) in &cases {
        let out = |name: &str| dir.path().join(format!("{job}-{name}"));
        let run = |name: &str, workers: &str| {
            let mut a = strings(&[
                "run",
                job,
                "-o",
                out(name).to_str().unwrap(),
                "--workers",
                workers,
            ]);
            a.extend(args.iter().cloned());
            a
        };
        ok(&run("one", "2"));
        let mut two = strings(&["cluster", "--processes", "2", "--"]);
        two.extend(run("two", "1"));
        let summary = ok(&two);
        assert!(
            summary.contains("[p0] kappa run") && summary.contains("[p1] kappa run"),
            "{summary}"
        );
        let mut three = strings(&["cluster", "-n", "3", "--"]);
        three.extend(run("three", "2"));
        ok(&three);
        let one = files(&out("one"));
        assert!(one.iter().any(|(n, _)| n == "_SUCCESS"), "{job}: {one:?}");
        assert!(
            one.iter()
                .any(|(n, b)| n.ends_with(".csv") && b.split(|c| *c == b'\n').count() > 2),
            "{job}: empty output"
        );
        assert_eq!(
            files(&out("two")),
            one,
            "{job}: 2 processes x 1 worker differ from 1 process"
        );
        assert_eq!(
            files(&out("three")),
            one,
            "{job}: 3 processes x 2 workers differ from 1 process"
        );
    }
}

/// A CSV of `rows` `key,value` rows, with a bad row at `bad` if given.
fn write_csv(path: &Path, rows: usize, bad: Option<usize>) {
    use std::io::Write;
    let mut rng = Rng(7);
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(f, "key,value").unwrap();
    for i in 0..rows {
        if Some(i) == bad {
            writeln!(f, "this row has one field").unwrap();
        }
        writeln!(f, "k{},{}", rng.below(50_000), i).unwrap();
    }
}

/// `kappa ARGS --processes N --process I --hostfile F`, started in the background.
fn start(args: &[String], processes: usize, process: usize, hosts: &Path) -> Child {
    Command::new(KAPPA)
        .args(args)
        .args([
            "--processes",
            &processes.to_string(),
            "--process",
            &process.to_string(),
        ])
        .arg("--hostfile")
        .arg(hosts)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(child: Child) -> (bool, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn processes_that_disagree_are_refused_by_every_process() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = hostfile(dir.path(), 2);
    let input = format!("input={}", repo("data/orders.csv"));
    let out = dir.path().join("out");
    let run = |key: &str| {
        strings(&[
            "run",
            "count-by",
            "-i",
            &input,
            "-p",
            key,
            "-o",
            out.to_str().unwrap(),
            "-w",
            "1",
        ])
    };
    let p0 = start(&run("key=customer"), 2, 0, &hosts);
    let p1 = start(&run("key=status"), 2, 1, &hosts);
    for (ok, err) in [finish(p0), finish(p1)] {
        assert!(!ok, "{err}");
        assert!(
            err.contains("process 1 was started with another job, parameters, inputs or worker count than process 0")
                && err.contains("process 0 has `param key=customer`, process 1 has `param key=status`"),
            "{err}"
        );
    }
    assert!(!out.exists(), "a refused run wrote its output");
}

#[test]
fn a_bad_row_read_by_any_process_fails_every_process_alike_and_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("bad.csv");
    // Near the end of the file: read by the last process' worker.
    write_csv(&csv, 60_000, Some(59_000));
    let out = dir.path().join("out");
    let args = strings(&[
        "cluster",
        "-n",
        "2",
        "--",
        "run",
        "count-by",
        "-i",
        &format!("input={}", csv.display()),
        "-p",
        "key=key",
        "-o",
        out.to_str().unwrap(),
        "-w",
        "1",
    ]);
    let err = fails(&args);
    let line = format!("{}: line 59002: expected 2 fields, found 1", csv.display());
    // The process that read the row reports it; the other names that process.
    let reader = (0..2)
        .find(|p| err.contains(&format!("[p{p}] error: job count-by failed: {line}")))
        .unwrap_or_else(|| panic!("no process reports the row itself:\n{err}"));
    let other = 1 - reader;
    let named = format!("[p{other}] error: job count-by failed: process {reader} failed: {line}");
    assert!(err.contains(&named), "{err}");
    assert!(!out.exists(), "a failed run wrote its output");
    // One process reports the same error, as it would have without a cluster.
    let one = fails(&strings(&[
        "run",
        "count-by",
        "-i",
        &format!("input={}", csv.display()),
        "-p",
        "key=key",
        "-o",
        out.to_str().unwrap(),
        "-w",
        "2",
    ]));
    assert!(one.contains(&line), "{one}");
}

/// Process 0 sorts and commits the outputs of a cluster run; when it fails
/// to (its temporary files, or the output directory, cannot be written),
/// the other processes report its failure and exit non-zero, rather than
/// saying their part is done.
#[test]
fn a_commit_that_fails_on_process_0_fails_every_process() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("in.csv");
    write_csv(&csv, 2_000, None);
    let out = "/proc/kappa-cluster-commit-test-out";
    let run = |extra: &[&str]| {
        let input = format!("input={}", csv.display());
        let args = [
            &["cluster", "-n", "2", "--", "run", "count-by", "-i", &input][..],
            &["-p", "key=key", "-o", out, "-w", "1"],
            extra,
        ]
        .concat();
        fails(&strings(&args))
    };
    let spill = "cannot sort output rows in temporary files in /proc";
    let commit = "/proc/kappa-cluster-commit-test-out";
    for (extra, cause) in [(&["--sort-memory", "1"][..], spill), (&[][..], commit)] {
        let err = run(extra);
        assert!(
            err.contains("[p0] error: job count-by failed: ") && err.contains(cause),
            "{err}"
        );
        assert!(
            err.contains("[p1] error: job count-by failed: process 0 failed: "),
            "{err}"
        );
        assert!(!err.contains("process 0 committed the outputs"), "{err}");
        assert!(!Path::new(out).exists());
    }
}

#[test]
fn a_killed_process_ends_the_others_promptly_with_nothing_committed() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("big.csv");
    // Big enough that a process is still reading well after the pause below
    // (a group-by of 1.5M rows once ran in 0.3 s, before the pause ended).
    write_csv(&csv, 4_000_000, None);
    let hosts = hostfile(dir.path(), 2);
    let out = dir.path().join("out");
    let run = strings(&[
        "run",
        "group-by",
        "-i",
        &format!("input={}", csv.display()),
        "-p",
        "key=key",
        "-p",
        "agg=count,sum:value",
        "-o",
        out.to_str().unwrap(),
        "-w",
        "1",
    ]);
    let p0 = start(&run, 2, 0, &hosts);
    let mut p1 = start(&run, 2, 1, &hosts);
    // Stopped as soon as it runs, so it cannot finish before it is killed;
    // by then the two are connected (that takes milliseconds).
    std::thread::sleep(Duration::from_millis(200));
    let pid = p1.id().to_string();
    let stop = Command::new("kill").args(["-STOP", &pid]).status().unwrap();
    assert!(stop.success());
    assert!(
        p1.try_wait().unwrap().is_none(),
        "process 1 ended before it could be killed"
    );
    std::thread::sleep(Duration::from_millis(200));
    p1.kill().unwrap();
    let killed = Instant::now();
    let (ok, err) = finish(p0);
    assert!(!ok, "{err}");
    assert!(
        killed.elapsed() < Duration::from_secs(10),
        "process 0 took {:?} to stop",
        killed.elapsed()
    );
    assert!(
        err.contains("lost process 1 (127.0.0.1:")
            && err.contains("nothing of the current epoch was committed"),
        "{err}"
    );
    assert!(
        !err.contains("panicked"),
        "the loss is reported as panics:\n{err}"
    );
    assert!(!out.exists(), "a failed run wrote its output");
    let _ = p1.wait();
}

#[test]
fn a_process_that_never_starts_is_named_after_the_connect_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = hostfile(dir.path(), 2);
    let out = dir.path().join("out");
    let input = format!("input={}", repo("data/orders.csv"));
    let run = strings(&[
        "run",
        "count-by",
        "-i",
        &input,
        "-p",
        "key=customer",
        "-o",
        out.to_str().unwrap(),
        "-w",
        "1",
        "--connect-timeout",
        "1",
    ]);
    let started = Instant::now();
    let (ok, err) = finish(start(&run, 2, 0, &hosts));
    assert!(!ok && started.elapsed() < Duration::from_secs(10), "{err}");
    assert!(
        err.contains("process 1 (127.0.0.1:")
            && err.contains("did not connect to process 0 within 1s"),
        "{err}"
    );
    let (ok, err) = finish(start(&run, 2, 1, &hosts));
    assert!(!ok, "{err}");
    assert!(
        err.contains("process 1 cannot reach process 0 at 127.0.0.1:"),
        "{err}"
    );
}

/// The `--stats` table: the lines from the `exchange` header on, without
/// the `[pI] ` prefix the launcher adds.
fn stats_table(stderr: &str) -> Vec<String> {
    let lines: Vec<&str> = stderr
        .lines()
        .map(|l| l.strip_prefix("[p0] ").unwrap_or(l))
        .collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("exchange"))
        .unwrap_or_else(|| panic!("no --stats table in:\n{stderr}"));
    lines[start..]
        .iter()
        .take_while(|l| !l.is_empty() && !l.starts_with("[p"))
        .map(|l| l.to_string())
        .collect()
}

#[test]
fn stats_count_the_exchanges_of_every_process() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, workers: &str| {
        strings(&[
            "run",
            "followers",
            "-i",
            &format!("follows={}", repo("data/follows.csv")),
            "-i",
            &format!("posts={}", repo("data/posts.csv")),
            "-p",
            "strategy=skew",
            "--stats",
            "--workers",
            workers,
            "-o",
            dir.path().join(name).to_str().unwrap(),
        ])
    };
    let one = stats_table(&ok(&run("one", "2")));
    let mut two = strings(&["cluster", "-n", "2", "--"]);
    two.extend(run("two", "1"));
    let two = stats_table(&ok(&two));
    assert!(one.len() > 2, "{one:?}");
    assert_eq!(two, one, "2 processes x 1 worker count like 1 x 2");
}
