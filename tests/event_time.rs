//! Event time end to end, through the real binary: windows of every kind,
//! the three stream joins (interval, stream-table in both semantics,
//! table-table) and the late-event policies give the same tables when
//! streamed over the log — events out of order and late, produced in random
//! chunks interleaved across topics, with updates and deletions in the
//! changelogs, streamed by repeated runs with varying workers and epoch
//! sizes — as `kappa run` gives over the files; and `kappa table verify`
//! agrees.

use std::collections::BTreeMap;

use crate::common::{Rng, World};
use crate::stream::table_csv;

/// `k,ts,v`: times mostly rising, often late (up to 200 behind), some on
/// window boundaries, with repeats.
pub fn events(rng: &mut Rng, n: usize) -> Vec<String> {
    let mut base = 1_000i64;
    (0..n)
        .map(|_| {
            base += rng.below(25) as i64;
            let ts = match rng.below(10) {
                0..=5 => base - rng.below(20) as i64,
                6..=7 => base - rng.below(200) as i64,
                8 => base / 100 * 100,
                _ => base,
            };
            let v = match rng.below(8) {
                0 => String::new(),
                _ => rng.below(100).to_string(),
            };
            format!("k{},{ts},{v}", rng.below(6))
        })
        .collect()
}

/// Splits `rows` into `n` consecutive chunks at random cuts.
fn chunks(rng: &mut Rng, rows: &[String], n: usize) -> Vec<Vec<String>> {
    let mut cuts: Vec<usize> = (0..n - 1)
        .map(|_| rng.below(rows.len() as u64) as usize)
        .collect();
    cuts.sort();
    let mut out = Vec::new();
    let mut start = 0;
    for cut in cuts.into_iter().chain([rows.len()]) {
        out.push(rows[start..cut].to_vec());
        start = cut;
    }
    out
}

/// A topic's data: its rows in log order (a row starting with `-` deletes
/// the key that follows), the CSV header, and how it is created.
struct Topic {
    name: &'static str,
    header: &'static str,
    rows: Vec<String>,
    partitions: &'static str,
    /// Compacted, keyed by this column.
    key: Option<&'static str>,
}

impl Topic {
    /// The batch input: every row, or for a changelog its final content.
    fn file_rows(&self) -> Vec<String> {
        let Some(key) = self.key else {
            return self.rows.clone();
        };
        let at = self.header.split(',').position(|c| c == key).unwrap();
        let mut latest: BTreeMap<String, Option<String>> = BTreeMap::new();
        for row in &self.rows {
            match row.strip_prefix('-') {
                Some(deleted) => latest.insert(deleted.split(',').nth(at).unwrap().into(), None),
                None => latest.insert(row.split(',').nth(at).unwrap().into(), Some(row.clone())),
            };
        }
        latest.into_values().flatten().collect()
    }
}

struct StreamJob {
    job: &'static str,
    table: &'static str,
    output: &'static str,
    inputs: &'static [(&'static str, &'static str)],
    params: &'static [&'static str],
}

const JOBS: &[StreamJob] = &[
    StreamJob {
        job: "window-agg",
        table: "tumbling",
        output: "windows",
        inputs: &[("input", "events")],
        params: &[
            "time=ts",
            "window=tumbling:100",
            "key=k",
            "agg=count,sum:v,max:v",
        ],
    },
    StreamJob {
        job: "window-agg",
        table: "hopping",
        output: "windows",
        inputs: &[("input", "events")],
        params: &[
            "time=ts",
            "window=hopping:100/25",
            "key=k",
            "agg=count,min:v",
        ],
    },
    StreamJob {
        job: "window-agg",
        table: "sliding",
        output: "windows",
        inputs: &[("input", "events")],
        params: &["time=ts", "window=sliding:50", "key=k", "agg=count,avg:v"],
    },
    StreamJob {
        job: "window-agg",
        table: "sessions",
        output: "windows",
        inputs: &[("input", "events")],
        params: &[
            "time=ts",
            "window=session:15",
            "key=k",
            "agg=count,count_distinct:v",
        ],
    },
    StreamJob {
        job: "ad-clicks",
        table: "attributed",
        output: "attributed",
        inputs: &[("impressions", "impressions"), ("clicks", "clicks")],
        params: &["key=k", "within=60"],
    },
    StreamJob {
        job: "enrich",
        table: "enriched",
        output: "enriched",
        inputs: &[("events", "events"), ("table", "users")],
        params: &["key=k", "kind=left"],
    },
    StreamJob {
        job: "enrich",
        table: "enriched_as_of",
        output: "enriched",
        inputs: &[("events", "events"), ("table", "user_history")],
        params: &["key=k", "as_of=ts:valid_from"],
    },
    StreamJob {
        job: "join",
        table: "order_view",
        output: "joined",
        inputs: &[("left", "orders"), ("right", "users")],
        params: &["on=k"],
    },
];

fn stream_args(job: &StreamJob, extra: &[String]) -> Vec<String> {
    let mut args = vec![
        "stream".to_string(),
        job.job.into(),
        "--quiet".into(),
        "--table".into(),
        job.table.into(),
        "--until-caught-up".into(),
    ];
    for (name, topic) in job.inputs {
        args.extend(["-i".into(), format!("{name}={topic}")]);
    }
    for p in job.params {
        args.extend(["-p".into(), p.to_string()]);
    }
    args.extend(extra.iter().cloned());
    args
}

fn produce(w: &World, topic: &Topic, rows: &[String], step: usize) {
    let (deletes, upserts): (Vec<&String>, Vec<&String>) =
        rows.iter().partition(|r| r.starts_with('-'));
    for (kind, rows) in [("upsert", upserts), ("delete", deletes)] {
        if rows.is_empty() {
            continue;
        }
        let body: Vec<&str> = rows.iter().map(|r| r.trim_start_matches('-')).collect();
        let file = w.write(
            &format!("{}-{step}-{kind}.csv", topic.name),
            &format!("{}\n{}\n", topic.header, body.join("\n")),
        );
        let mut args = vec!["log", "produce", topic.name, "--file", &file];
        if let Some(key) = topic.key {
            args.extend(["--key", key]);
        }
        if kind == "delete" {
            args.push("--delete");
        }
        w.ok(&args);
    }
}

#[test]
fn event_time_jobs_stream_equals_batch() {
    let w = World::new();
    let mut rng = Rng(0x005e_ed0f_e7e7);
    let events = events(&mut rng, 700);
    let tiers = ["gold", "silver", "free"];
    let mut users: Vec<String> = (0..5).map(|k| format!("k{k},{}", tiers[k % 3])).collect();
    for _ in 0..12 {
        let k = rng.below(7);
        match rng.below(4) {
            0 => users.push(format!("-k{k},")),
            _ => users.push(format!("k{k},{}", tiers[rng.below(3) as usize])),
        }
    }
    let history: Vec<String> = (0..30)
        .map(|_| {
            let t = 900 + rng.below(900);
            format!("k{},{t},{}", rng.below(6), tiers[rng.below(3) as usize])
        })
        .collect();
    let mut orders: Vec<String> = Vec::new();
    for i in 0..60 {
        let o = if i > 20 && rng.below(3) == 0 {
            rng.below(20)
        } else {
            i
        };
        match rng.below(10) {
            0 => orders.push(format!("-o{o},,")),
            _ => orders.push(format!("o{o},k{},{}", rng.below(7), rng.below(500))),
        }
    }
    let impressions = crate::event_time::events(&mut rng, 300);
    let clicks = crate::event_time::events(&mut rng, 300);
    let topics = [
        Topic {
            name: "events",
            header: "k,ts,v",
            rows: events,
            partitions: "3",
            key: None,
        },
        Topic {
            name: "users",
            header: "k,tier",
            rows: users,
            partitions: "2",
            key: Some("k"),
        },
        Topic {
            name: "user_history",
            header: "k,valid_from,tier",
            rows: history,
            partitions: "2",
            key: None,
        },
        Topic {
            name: "orders",
            header: "order_id,k,amount",
            rows: orders,
            partitions: "2",
            key: Some("order_id"),
        },
        Topic {
            name: "impressions",
            header: "k,ts,v",
            rows: impressions,
            partitions: "2",
            key: None,
        },
        Topic {
            name: "clicks",
            header: "k,ts,v",
            rows: clicks,
            partitions: "1",
            key: None,
        },
    ];
    for t in &topics {
        let mut args = vec!["log", "create", t.name, "--partitions", t.partitions];
        if t.key.is_some() {
            args.push("--compact");
        }
        w.ok(&args);
    }
    // Produce every topic in chunks, interleaved; now and then bring some
    // of the streams up to date.
    let steps = 4;
    let parts: Vec<Vec<Vec<String>>> = topics
        .iter()
        .map(|t| chunks(&mut rng, &t.rows, steps))
        .collect();
    for step in 0..steps {
        for (topic, parts) in topics.iter().zip(&parts) {
            produce(&w, topic, &parts[step], step);
        }
        for job in JOBS {
            if rng.below(2) == 0 {
                let extra = [
                    "--workers".to_string(),
                    (1 + rng.below(2)).to_string(),
                    "--max-batch".into(),
                    (20 + rng.below(200)).to_string(),
                ];
                w.ok(&stream_args(job, &extra)
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>());
            }
        }
    }
    let files: BTreeMap<&str, String> = topics
        .iter()
        .map(|t| {
            let path = w.write(
                &format!("{}.csv", t.name),
                &format!("{}\n{}\n", t.header, t.file_rows().join("\n")),
            );
            (t.name, path)
        })
        .collect();
    for job in JOBS {
        w.ok(&stream_args(job, &[])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>());
        let out = w.path(&format!("batch-{}", job.table));
        let mut run = vec![
            "run".to_string(),
            job.job.into(),
            "-o".into(),
            out.display().to_string(),
        ];
        for (name, topic) in job.inputs {
            run.extend(["-i".into(), format!("{name}={}", files[topic])]);
        }
        for p in job.params {
            run.extend(["-p".into(), p.to_string()]);
        }
        w.ok(&run.iter().map(String::as_str).collect::<Vec<_>>());
        let batch = std::fs::read_to_string(out.join(format!("{}.csv", job.output))).unwrap();
        let streamed = table_csv(&w, job.table);
        assert!(
            batch.lines().count() > 5,
            "{}: too few rows to test anything",
            job.table
        );
        assert_eq!(
            streamed, batch,
            "{}: stream table differs from batch",
            job.table
        );
        let verified = w.ok(&["table", "verify", job.table]);
        assert!(verified.contains(": identical ("), "{verified}");
    }
}

/// With `late=drop`, a batch run over a file and a stream over a
/// one-partition topic produced from it drop the same events (the watermark
/// is the partition's, in log order), kills and restarts notwithstanding;
/// the dropped counts agree; and over a three-partition topic, the stream
/// and its recomputation (`verify`) agree.
#[test]
fn late_drop_agrees_between_batch_and_stream() {
    let w = World::new();
    let mut rng = Rng(0xd0_7a7e);
    let rows = events(&mut rng, 900);
    let file = w.write("events.csv", &format!("k,ts,v\n{}\n", rows.join("\n")));
    w.ok(&["log", "create", "one", "--partitions", "1"]);
    w.ok(&["log", "create", "three", "--partitions", "3"]);
    // (topic, table, window): both window kinds that release closed
    // windows under drop, over one partition and over three.
    let streams = [
        ("one", "dropped1", "tumbling:100"),
        ("one", "hopping1", "hopping:100/40"),
        ("three", "dropped3", "tumbling:100"),
    ];
    let params = |window: &str| -> Vec<String> {
        [
            "-p",
            "time=ts",
            "-p",
            &format!("window={window}"),
            "-p",
            "key=k",
            "-p",
            "agg=count,sum:v",
            "--late",
            "drop",
            "--allowed-lateness",
            "30",
        ]
        .map(String::from)
        .to_vec()
    };
    let stream_args = |topic: &str, table: &str, window: &str, extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = ["stream", "window-agg", "-q", "--table", table]
            .map(String::from)
            .to_vec();
        args.extend(["-i".into(), format!("input={topic}")]);
        args.extend(params(window));
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    for (i, part) in chunks(&mut rng, &rows, 5).iter().enumerate() {
        let chunk = w.write(
            &format!("c{i}.csv"),
            &format!("k,ts,v\n{}\n", part.join("\n")),
        );
        w.ok(&["log", "produce", "one", "--file", &chunk]);
        w.ok(&["log", "produce", "three", "--key", "k", "--file", &chunk]);
        for (topic, table, window) in streams {
            let batch = (10 + rng.below(100)).to_string();
            let args = stream_args(topic, table, window, &["--max-batch", &batch]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            // Killed after a random moment, or run until caught up.
            if rng.below(2) == 0 {
                let mut child = w
                    .kappa(&args)
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap();
                std::thread::sleep(std::time::Duration::from_millis(rng.below(200)));
                child.kill().unwrap();
                child.wait().unwrap();
            } else {
                let mut args = args;
                args.push("--until-caught-up");
                w.ok(&args);
            }
        }
    }
    for (topic, table, window) in streams {
        let args = stream_args(topic, table, window, &["--until-caught-up"]);
        w.ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let verified = w.ok(&["table", "verify", table]);
        assert!(verified.contains(": identical ("), "{verified}");
    }
    // The hopping stream over one partition equals the batch run too.
    let hop_out = w.path("batch-hop");
    let input = format!("input={file}");
    let mut run: Vec<String> = [
        "run",
        "window-agg",
        "-i",
        &input,
        "-o",
        hop_out.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    run.extend(params("hopping:100/40"));
    w.ok(&run.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(
        table_csv(&w, "hopping1"),
        std::fs::read_to_string(hop_out.join("windows.csv")).unwrap()
    );
    let out = w.path("batch");
    let mut run: Vec<String> = [
        "run",
        "window-agg",
        "-i",
        &input,
        "-o",
        out.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    run.extend(params("tumbling:100"));
    let summary = w.ok(&run.iter().map(String::as_str).collect::<Vec<_>>());
    let batch = std::fs::read_to_string(out.join("windows.csv")).unwrap();
    assert_eq!(table_csv(&w, "dropped1"), batch);
    let dropped: u64 = summary
        .lines()
        .find(|l| l.ends_with("late events in input 'input' (late=drop)"))
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no late count in the summary: {summary}"));
    assert!(
        dropped > 20,
        "only {dropped} late events: the test data is not late enough"
    );
    let status = w.ok(&["table", "status"]);
    assert!(status.contains(&format!("input={dropped} ")), "{status}");
    // Without drop, the same events give other windows.
    let all = w.path("all");
    w.ok(&[
        "run",
        "window-agg",
        "-i",
        &input,
        "-o",
        all.to_str().unwrap(),
        "-p",
        "time=ts",
        "-p",
        "window=tumbling:100",
        "-p",
        "key=k",
        "-p",
        "agg=count,sum:v",
    ]);
    assert_ne!(
        std::fs::read_to_string(all.join("windows.csv")).unwrap(),
        batch
    );
}

/// Window parameters and event times at the limits of 64-bit time: a clear
/// parameter error before any data is read, or a bad row naming the file,
/// line and column, never an abort, a wrapped bound or a silent empty result.
#[test]
fn windows_at_the_limits_of_time_fail_clearly() {
    let w = World::new();
    let events = w.write("e.csv", "k,t\na,1\n");
    let run = |window: &str, file: &str, extra: &[&str]| {
        let out = w.path(&format!("out-{}", w.dir.path().read_dir().unwrap().count()));
        let mut args = vec![
            "run".to_string(),
            "window-agg".into(),
            "-i".into(),
            format!("input={file}"),
            "-p".into(),
            "time=t".into(),
            "-p".into(),
            format!("window={window}"),
            "-p".into(),
            "unit=s".into(),
            "-o".into(),
            out.display().to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        (
            w.kappa(&args.iter().map(String::as_str).collect::<Vec<_>>())
                .output()
                .unwrap(),
            out,
        )
    };
    for window in ["hopping:365d/1s", "hopping:9223372036854775807/2"] {
        let (out, _) = run(window, &events, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("windows, more than the limit of 1000"),
            "{err}"
        );
    }
    // The limit is a parameter.
    let (out, dir) = run("hopping:2000s/1s", &events, &["-p", "max_windows=2000"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = std::fs::read_to_string(dir.join("windows.csv")).unwrap();
    assert_eq!(rows.lines().count(), 1 + 2000);
    // A time whose window end does not fit is a bad row, or skipped and counted.
    let edge = w.write("edge.csv", "k,t\na,9223372036854775800\nb,5\n");
    let (out, _) = run("tumbling:100s", &edge, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("edge.csv: line 2, column 2 (t): timestamp 9223372036854775800"),
        "{err}"
    );
    let (out, dir) = run("tumbling:100s", &edge, &["--on-bad-row", "skip"]);
    assert!(out.status.success());
    let rows = std::fs::read_to_string(dir.join("windows.csv")).unwrap();
    assert_eq!(rows, "window_start,window_end,count\n0,100,1\n");
    // Sessions never merge times whose difference overflows.
    let far = w.write("far.csv", "user,ts\nu,-9223372036854775808\nu,0\n");
    let dir = w.path("sessions");
    w.ok(&[
        "run",
        "sessionize",
        "-i",
        &format!("events={far}"),
        "-p",
        "gap=30m",
        "-o",
        dir.to_str().unwrap(),
    ]);
    let rows = std::fs::read_to_string(dir.join("sessions.csv")).unwrap();
    assert_eq!(
        rows,
        "user,start,end,events\nu,-9223372036854775808,-9223372036854775808,1\nu,0,0,1\n"
    );
}
