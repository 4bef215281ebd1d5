//! The real `kappa` binary on real files, in fresh temporary directories.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const KAPPA: &str = env!("CARGO_BIN_EXE_kappa");

fn kappa(args: &[&str]) -> Output {
    Command::new(KAPPA)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run kappa")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs kappa, expecting success; returns stderr.
fn ok(args: &[&str]) -> String {
    let out = kappa(args);
    assert!(
        out.status.success(),
        "kappa {args:?} failed: {}",
        stderr(&out)
    );
    stderr(&out)
}

/// Runs kappa, expecting failure; returns stderr.
fn fails(args: &[&str]) -> String {
    let out = kappa(args);
    assert!(!out.status.success(), "kappa {args:?} succeeded");
    stderr(&out)
}

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(path)
        .display()
        .to_string()
}

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path.as_ref())
        .unwrap_or_else(|e| panic!("{}: {e}", path.as_ref().display()))
}

struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Dir {
        Dir(tempfile::tempdir().unwrap())
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
    fn s(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
    fn write(&self, name: &str, text: &str) -> String {
        std::fs::write(self.path(name), text).unwrap();
        self.s(name)
    }
}

#[test]
fn every_builtin_job_runs_on_the_sample_data() {
    let d = Dir::new();
    let runs: &[(&str, &[&str], &str)] = &[
        (
            "group-by",
            &[
                "-i",
                "input=data/orders.csv",
                "-p",
                "key=status",
                "-p",
                "agg=count,sum:amount",
            ],
            "groups",
        ),
        (
            "count-by",
            &["-i", "input=data/orders.csv", "-p", "key=customer"],
            "counts",
        ),
        (
            "join",
            &[
                "-i",
                "left=data/orders.csv",
                "-i",
                "right=data/customers.csv",
                "-p",
                "on=customer",
            ],
            "joined",
        ),
        ("distinct", &["-i", "input=data/customers.csv"], "distinct"),
        (
            "top-k",
            &[
                "-i",
                "input=data/orders.csv",
                "-p",
                "key=status",
                "-p",
                "by=amount",
                "-p",
                "k=2",
            ],
            "top",
        ),
        ("wordcount", &["-i", "text=data/words.txt"], "counts"),
        ("sessionize", &["-i", "events=data/events.csv"], "sessions"),
        (
            "page-views",
            &["-i", "views=data/views.csv", "-i", "users=data/users.csv"],
            "page_views",
        ),
        (
            "followers",
            &[
                "-i",
                "follows=data/follows.csv",
                "-i",
                "posts=data/posts.csv",
            ],
            "timeline",
        ),
    ];
    for (job, args, output) in runs {
        let out = d.s(job);
        let mut all = vec!["run", job, "-o", &out];
        let fixed: Vec<String> = args
            .iter()
            .map(|a| a.replace("=data/", &format!("={}/", repo("data"))))
            .collect();
        all.extend(fixed.iter().map(String::as_str));
        let summary = ok(&all);
        assert!(summary.contains(&format!("kappa run {job}:")), "{summary}");
        assert!(d.path(job).join("_SUCCESS").exists(), "{job}: no _SUCCESS");
        let text = read(d.path(job).join(format!("{output}.csv")));
        assert!(text.lines().count() > 1, "{job}: empty output");
    }
    // Spot checks against numbers computed here from the files.
    let orders = read(repo("data/orders.csv"));
    let mut per_customer: BTreeMap<&str, usize> = BTreeMap::new();
    for line in orders.lines().skip(1) {
        *per_customer
            .entry(line.split(',').nth(1).unwrap())
            .or_default() += 1;
    }
    let mut expected = String::from("customer,count\n");
    for (c, n) in per_customer {
        writeln!(expected, "{c},{n}").unwrap();
    }
    assert_eq!(read(d.path("count-by").join("counts.csv")), expected);
    let words = read(d.path("wordcount").join("counts.csv"));
    assert!(
        words.contains("\nthe,5\n") && words.contains("\njob,3\n"),
        "{words}"
    );
}

/// A CSV big enough to be split across workers, with quoted fields holding
/// commas, quotes and newlines, nulls, and a hot key. Returns its text.
fn big_csv() -> String {
    let mut text = String::from("key,value,note\n");
    let mut x: u64 = 12345;
    while text.len() < 6 << 20 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let key = if x.is_multiple_of(3) {
            0
        } else {
            (x >> 20) % 500
        };
        let value = if x.is_multiple_of(17) {
            String::new()
        } else {
            ((x >> 33) % 1000).to_string()
        };
        let note = match (x >> 40) % 4 {
            0 => "\"multi\nline, \"\"quoted\"\"\"".to_string(),
            1 => "plain".to_string(),
            2 => String::new(),
            _ => "\"a,b\"".to_string(),
        };
        writeln!(text, "{key},{value},{note}").unwrap();
    }
    text
}

#[test]
fn outputs_are_byte_identical_for_any_worker_count_and_match_a_reference() {
    let d = Dir::new();
    let text = big_csv();
    let input = d.write("big.csv", &text);
    let mut outputs = Vec::new();
    // Sort memory of one byte spills every row; a few KiB spill some.
    let runs = [
        ("1", "64M"),
        ("2", "64M"),
        ("3", "64M"),
        ("2", "1"),
        ("3", "4K"),
    ];
    for (i, (workers, memory)) in runs.into_iter().enumerate() {
        let out = d.s(&format!("out{i}"));
        let arg = format!("input={input}");
        ok(&[
            "run",
            "group-by",
            "-i",
            &arg,
            "-p",
            "key=key",
            "-p",
            "agg=count,sum:value,count_distinct:note",
            "-o",
            &out,
            "-w",
            workers,
            "--sort-memory",
            memory,
        ]);
        outputs.push(read(d.path(&format!("out{i}")).join("groups.csv")));
    }
    for (output, run) in outputs.iter().zip(runs) {
        assert!(*output == outputs[0], "{run:?} differs from {:?}", runs[0]);
    }
    // The spilled runs' files had no names: nothing is left beside the outputs.
    let left: Vec<_> = std::fs::read_dir(d.0.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1 + runs.len(), "{left:?}");
    // Reference: parse with the csv crate here and aggregate in a map.
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let mut groups: BTreeMap<i64, (i64, i64, std::collections::BTreeSet<String>)> = BTreeMap::new();
    for record in reader.records() {
        let record = record.unwrap();
        let g = groups.entry(record[0].parse().unwrap()).or_default();
        g.0 += 1;
        g.1 += record[1].parse::<i64>().unwrap_or(0);
        if !record[2].is_empty() {
            g.2.insert(record[2].to_string());
        }
    }
    let mut expected = String::from("key,count,sum_value,count_distinct_note\n");
    for (k, (n, s, notes)) in groups {
        writeln!(expected, "{k},{n},{s},{}", notes.len()).unwrap();
    }
    assert_eq!(outputs[0], expected);
}

/// Output rows that cannot be sorted on disk fail the run, naming the
/// directory of the temporary files, and commit nothing. (/proc takes no
/// new files, even from root.)
#[test]
fn a_spill_that_cannot_be_written_fails_the_run_and_commits_nothing() {
    let d = Dir::new();
    let input = d.write("in.csv", "k\na\nb\nc\na\n");
    let arg = format!("input={input}");
    let out = "/proc/kappa-spill-test-out";
    let args = ["run", "count-by", "-i", &arg, "-p", "key=k", "-o", out];
    let err = fails(&[&args[..], &["--sort-memory", "1"]].concat());
    assert!(
        err.contains("cannot sort output rows in temporary files in /proc"),
        "{err}"
    );
    assert!(!Path::new(out).exists());
    // With the default sort memory nothing spills, and the same run only
    // fails where it commits.
    let err = fails(&args);
    assert!(!err.contains("temporary files"), "{err}");
}

#[test]
fn bad_rows_fail_with_their_location_and_leave_nothing() {
    let d = Dir::new();
    let input = d.write("bad.csv", "a,b\n1,2\n3,x\n4\n");
    let out = d.s("out");
    let arg = format!("input={input}");
    let err = fails(&[
        "run",
        "group-by",
        "-i",
        &arg,
        "-p",
        "key=a",
        "-p",
        "agg=sum:b",
        "-o",
        &out,
    ]);
    assert!(
        err.contains("bad.csv: line 3, column 2 (b): expected a number, found \"x\""),
        "{err}"
    );
    assert!(
        !d.path("out").exists(),
        "a failed run created its output directory"
    );

    let summary = ok(&[
        "run",
        "group-by",
        "-i",
        &arg,
        "-p",
        "key=a",
        "-p",
        "agg=sum:b",
        "-o",
        &out,
        "--on-bad-row",
        "skip",
    ]);
    assert!(
        summary.contains("skipped 2 bad rows in input 'input'"),
        "{summary}"
    );
    assert!(
        summary.contains("line 3, column 2 (b)")
            && summary.contains("line 4: expected 2 fields, found 1"),
        "{summary}"
    );
    assert_eq!(read(d.path("out").join("groups.csv")), "a,sum_b\n1,2\n");
}

#[test]
fn user_errors_are_clear_and_non_zero() {
    let d = Dir::new();
    let input = d.write("in.csv", "a,b\n1,2\n");
    let arg = format!("input={input}");
    let out = d.s("out");
    let cases: &[(&[&str], &str)] = &[
        (&["run", "nope", "-o", &out], "unknown job \"nope\""),
        (
            &[
                "run",
                "group-by",
                "-i",
                "input=/no/such.csv",
                "-p",
                "key=a",
                "-o",
                &out,
            ],
            "/no/such.csv does not exist",
        ),
        (
            &["run", "group-by", "-i", &arg, "-p", "key=zz", "-o", &out],
            "has no column \"zz\" (its columns: a,b)",
        ),
        (
            &[
                "run", "group-by", "-i", &arg, "-p", "key=a", "-p", "x=1", "-o", &out,
            ],
            "has no parameter \"x\"",
        ),
        (
            &[
                "run",
                "group-by",
                "-i",
                &arg,
                "-p",
                "key=a",
                "-p",
                "agg=median:b",
                "-o",
                &out,
            ],
            "unknown aggregate \"median\"",
        ),
        (
            &["run", "group-by", "-i", &arg, "-o", &out],
            "needs --param key=",
        ),
        (
            &["run", "join", "-i", "left=", "-p", "on=a", "-o", &out],
            "does not exist",
        ),
        (
            &[
                "run",
                "join",
                "-i",
                &format!("left={input}"),
                "-p",
                "on=a",
                "-o",
                &out,
            ],
            "missing input: --input right=PATH",
        ),
        (
            &[
                "run",
                "group-by",
                "-i",
                &format!("other={input}"),
                "-p",
                "key=a",
                "-o",
                &out,
            ],
            "has no input \"other\"",
        ),
        (
            &[
                "run", "top-k", "-i", &arg, "-p", "by=a", "-p", "k=many", "-o", &out,
            ],
            "bad value \"many\" for parameter k",
        ),
    ];
    for (args, expected) in cases {
        let err = fails(args);
        assert!(
            err.contains(expected),
            "kappa {args:?}: expected {expected:?} in {err:?}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    assert!(!d.path("out").exists());
}

#[test]
fn existing_output_is_refused_unless_overwrite() {
    let d = Dir::new();
    let arg = format!("input={}", d.write("in.csv", "a\n1\n1\n"));
    let out = d.s("out");
    ok(&["run", "count-by", "-i", &arg, "-p", "key=a", "-o", &out]);
    let err = fails(&["run", "count-by", "-i", &arg, "-p", "key=a", "-o", &out]);
    assert!(err.contains("already exists"), "{err}");
    d.write("in.csv", "a\n2\n");
    ok(&[
        "run",
        "count-by",
        "-i",
        &arg,
        "-p",
        "key=a",
        "-o",
        &out,
        "--overwrite",
    ]);
    assert_eq!(read(d.path("out").join("counts.csv")), "a,count\n2,1\n");
    assert!(d.path("out").join("_SUCCESS").exists());
}

#[test]
fn null_markers_jsonl_and_part_directories() {
    let d = Dir::new();
    let csv = d.write("na.csv", "k,v\nx,NA\nx,3\nNA,4\n");
    let out = d.s("o1");
    ok(&[
        "run",
        "group-by",
        "-i",
        &format!("input={csv}"),
        "-p",
        "key=k",
        "-p",
        "agg=count,sum:v",
        "--null",
        "NA",
        "-o",
        &out,
    ]);
    assert_eq!(
        read(d.path("o1").join("groups.csv")),
        "k,count,sum_v\n,1,4\nx,2,3\n"
    );

    let jsonl = d.write(
        "e.jsonl",
        "{\"k\":\"x\",\"v\":1.5}\n\n{\"k\":\"y\",\"v\":null}\n{\"v\":2,\"k\":\"x\"}\n",
    );
    let out = d.s("o2");
    ok(&[
        "run",
        "group-by",
        "-i",
        &format!("input={jsonl}"),
        "-p",
        "key=k",
        "-p",
        "agg=sum:v",
        "-o",
        &out,
    ]);
    assert_eq!(
        read(d.path("o2").join("groups.csv")),
        "k,sum_v\nx,3.5\ny,\n"
    );
    let bad = d.write("bad.jsonl", "{\"k\":\"x\"}\n{\"k\":\"y\",\"z\":1}\n");
    let err = fails(&[
        "run",
        "distinct",
        "-i",
        &format!("input={bad}"),
        "-o",
        &d.s("o3"),
    ]);
    assert!(
        err.contains("bad.jsonl: line 2: key \"z\" is not a column"),
        "{err}"
    );

    std::fs::create_dir(d.path("parts")).unwrap();
    d.write("parts/part-0.csv", "k\na\nb\n");
    d.write("parts/part-1.csv", "k\na\n");
    d.write("parts/_SUCCESS", "");
    let out = d.s("o4");
    ok(&[
        "run",
        "count-by",
        "-i",
        &format!("input={}", d.s("parts")),
        "-p",
        "key=k",
        "-o",
        &out,
        "-w",
        "2",
    ]);
    assert_eq!(read(d.path("o4").join("counts.csv")), "k,count\na,2\nb,1\n");
    d.write("parts/part-2.csv", "other\nz\n");
    let err = fails(&[
        "run",
        "count-by",
        "-i",
        &format!("input={}", d.s("parts")),
        "-p",
        "key=k",
        "-o",
        &d.s("o5"),
    ]);
    assert!(
        err.contains("part-2.csv: columns [other] differ from [k]"),
        "{err}"
    );
}

#[test]
fn jobs_and_job_help_show_parameters() {
    let out = kappa(&["jobs"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for job in [
        "group-by",
        "count-by",
        "join",
        "distinct",
        "top-k",
        "wordcount",
        "sessionize",
        "page-views",
    ] {
        assert!(
            text.contains(&format!("{job} (v1)")),
            "{job} missing from: {text}"
        );
    }
    let out = kappa(&["run", "join", "--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("param  on") && text.contains("param  kind") && text.contains("--workers"),
        "{text}"
    );
}

/// A left side with one key on half the rows, and a right side with one
/// row per key.
fn skewed_pair(d: &Dir) -> (String, String) {
    let mut left = String::from("k,v\n");
    let mut x: u64 = 99;
    for i in 0..40_000u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let key = if i % 2 == 0 { 0 } else { (x >> 33) % 1000 };
        writeln!(left, "{key},{i}").unwrap();
    }
    let mut right = String::from("k,name\n");
    for k in 0..1000 {
        writeln!(right, "{k},n{k}").unwrap();
    }
    (d.write("left.csv", &left), d.write("right.csv", &right))
}

/// The `max/mean` figure of the stats row starting with `name`.
fn imbalance_of(stats: &str, name: &str) -> f64 {
    let line = stats
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_else(|| panic!("no {name:?} row in:\n{stats}"));
    // After the name: records, max/mean, then the per-worker counts.
    line[name.len()..]
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("bad stats row {line:?}"))
}

#[test]
fn strategies_give_one_output_and_stats_show_the_balance() {
    let d = Dir::new();
    let (left, right) = skewed_pair(&d);
    let run = |name: &str, extra: &[&str]| {
        let out = d.s(name);
        let (l, r) = (format!("left={left}"), format!("right={right}"));
        let mut args = vec![
            "run",
            "join",
            "-i",
            &l,
            "-i",
            &r,
            "-p",
            "on=k",
            "-o",
            &out,
            "--workers",
            "2",
        ];
        args.extend_from_slice(extra);
        let stderr = ok(&args);
        (read(d.path(name).join("joined.csv")), stderr)
    };
    let (shuffle, s_shuffle) = run("shuffle", &["-p", "strategy=shuffle", "--stats"]);
    let (skew, s_skew) = run("skew", &["-p", "strategy=skew", "--stats"]);
    let (broadcast, _) = run("broadcast", &["-p", "strategy=broadcast"]);
    let (auto, s_auto) = run("auto", &["-p", "broadcast_limit=0"]);
    assert_eq!(shuffle.lines().count(), 40_001);
    assert!(shuffle == skew && shuffle == broadcast && shuffle == auto);
    // The hot key holds half the rows: a shuffle puts them on one worker.
    assert!(
        imbalance_of(&s_shuffle, "join left (shuffle)") > 1.4,
        "{s_shuffle}"
    );
    assert!(imbalance_of(&s_skew, "join left (skew)") < 1.1, "{s_skew}");
    assert!(
        s_skew.contains("strategy skew") && s_skew.contains("1 hot keys"),
        "{s_skew}"
    );
    assert!(
        s_auto.contains("strategy skew (auto:") && !s_auto.contains("max/mean"),
        "{s_auto}"
    );
    let bad = fails(&[
        "run",
        "join",
        "-i",
        &format!("left={left}"),
        "-i",
        &format!("right={right}"),
        "-p",
        "on=k",
        "-p",
        "strategy=fast",
        "-o",
        &d.s("bad"),
    ]);
    assert!(bad.contains("strategy"), "{bad}");
}

/// Runs kappa with `input` on stdin; returns the output.
fn kappa_piped(args: &[&str], input: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(KAPPA)
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kappa");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// `-i NAME=-` reads stdin (CSV, or --format), `-o -` writes the one output
/// to stdout: the same bytes as a run over files. A bad row names `stdin`;
/// several outputs, or two inputs from stdin, are refused.
#[test]
fn stdin_and_stdout_pipe_a_run() {
    let d = Dir::new();
    let rows = "k,v\na,1\nb,2\na,3\nc,4\n";
    let file = d.write("in.csv", rows);
    ok(&[
        "run",
        "count-by",
        "-i",
        &format!("input={file}"),
        "-p",
        "key=k",
        "-o",
        &d.s("out"),
    ]);
    let expected = read(d.path("out/counts.csv"));
    let out = kappa_piped(
        &["run", "count-by", "-i", "input=-", "-p", "key=k", "-o", "-"],
        rows,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
    assert!(stderr(&out).contains("-> stdout"), "{}", stderr(&out));
    // A stdin input into a directory, and JSON lines by --format.
    let jsonl = "{\"k\":\"a\",\"v\":1}\n{\"k\":\"b\",\"v\":2}\n{\"k\":\"a\",\"v\":3}\n{\"k\":\"c\",\"v\":4}\n";
    let args = [
        "run", "count-by", "-i", "input=-", "-p", "key=k", "--format", "jsonl",
    ];
    let out = kappa_piped(&[&args[..], &["-o", &d.s("json")]].concat(), jsonl);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read(d.path("json/counts.csv")), expected);
    // Errors name stdin, and leave stdout empty.
    let sum = [
        "run",
        "group-by",
        "-i",
        "input=-",
        "-p",
        "key=k",
        "-p",
        "agg=sum:v",
        "-o",
        "-",
    ];
    let out = kappa_piped(&sum, "k,v\na,1\nb,x\n");
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = stderr(&out);
    assert!(err.contains("stdin: line 3, column 2 (v)"), "{err}");
    assert!(!err.contains("kappa-stdin-"), "{err}");
    // A named pipe (as `<(command)` gives) is copied the same way.
    let fifo = d.path("rows.fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let writer = {
        let (fifo, rows) = (fifo.clone(), rows.to_string());
        std::thread::spawn(move || std::fs::write(fifo, rows).unwrap())
    };
    let fifo_arg = format!("input={}", fifo.display());
    let out = kappa(&[
        "run",
        "count-by",
        "-i",
        &fifo_arg,
        "-p",
        "key=k",
        "-o",
        &d.s("fifo"),
    ]);
    writer.join().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read(d.path("fifo/counts.csv")), expected);
    // Refusals.
    let follows = repo("data/follows.csv");
    let out = kappa_piped(
        &[
            "run",
            "followers",
            "-i",
            &format!("follows={follows}"),
            "-i",
            &format!("posts={}", repo("data/posts.csv")),
            "-o",
            "-",
        ],
        "",
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("-o - writes one output to stdout"),
        "{}",
        stderr(&out)
    );
    let out = kappa_piped(
        &[
            "run", "join", "-i", "left=-", "-i", "right=-", "-p", "on=k", "-o", "-",
        ],
        rows,
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out)
            .contains("only one input can be read from stdin, and left and right are given as -"),
        "{}",
        stderr(&out)
    );
}
