//! Operating a running stream: `--metrics-addr` serves Prometheus metrics
//! and the status page, `kappa ui` serves the page from the catalog alone,
//! an idle stream says so, and a real browser (headless Chromium, which
//! `.ci/run` installs) renders the page while the lag rises and falls to 0.
//! Without Chromium the browser test fails, saying why: it never passes
//! silently.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{World, output_within};

/// A running kappa process whose stderr is collected line by line.
struct Running {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Running {
    fn start(w: &World, args: &[&str]) -> Running {
        let mut child = w
            .kappa(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (stderr, sink) = (child.stderr.take().unwrap(), lines.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Running { child, lines }
    }

    fn text(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Waits for a stderr line containing `what`; returns it.
    fn wait_for(&self, what: &str, limit: Duration) -> String {
        let start = Instant::now();
        loop {
            if let Some(l) = self.lines.lock().unwrap().iter().find(|l| l.contains(what)) {
                return l.clone();
            }
            assert!(
                start.elapsed() < limit,
                "no line with '{what}' within {limit:?}:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The `http://HOST:PORT` it serves on, from its startup line.
    fn url(&self) -> String {
        let line = self.wait_for("status page on http://", Duration::from_secs(30));
        let at = line.find("http://").unwrap();
        let rest = &line[at + "http://".len()..];
        format!("http://{}", &rest[..rest.find('/').unwrap()])
    }

    fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
    }

    fn stop(mut self) -> String {
        self.signal(libc::SIGTERM);
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}:\n{}", self.text());
        std::thread::sleep(Duration::from_millis(100));
        self.text()
    }
}

/// `GET path` over plain HTTP/1.0: the status code and the body.
fn get(url: &str, path: &str) -> (u16, String) {
    let host = url.strip_prefix("http://").unwrap();
    let mut s = TcpStream::connect(host).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    (code, body.to_string())
}

/// The value of the first metric line starting with `prefix`.
fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Polls `/metrics` at `url` until `applied` records are applied and the
/// gauge whose line starts with `gauge` is at most `limit` (a state that
/// shrinks once the watermark passes); returns the gauge's value then.
/// Fails after 30 s with the last page.
fn wait_for_gauge(url: &str, applied: f64, gauge: &str, limit: f64) -> f64 {
    let start = Instant::now();
    loop {
        let (code, text) = get(url, "/metrics");
        assert_eq!(code, 200);
        let done = metric(&text, "kappa_records_applied_total{");
        let value = metric(&text, gauge).expect("the gauge is served");
        if done == Some(applied) && value <= limit {
            return value;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{applied} records applied and {gauge} at most {limit} expected:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The lag cell of deployment `id` on the status page.
fn page_lag(html: &str, id: i64) -> Option<u64> {
    let row = &html[html.find(&format!("<tr id=\"d{id}\""))?..];
    let cell = &row[row.find("class=\"n lag\">")? + "class=\"n lag\">".len()..];
    cell[..cell.find('<')?].parse().ok()
}

/// The stream every test here runs.
const SESSIONIZE: &[&str] = &[
    "stream",
    "sessionize",
    "-i",
    "events=events",
    "-p",
    "gap=60",
];

fn events(n: usize) -> String {
    let mut csv = String::from("user,ts,page\n");
    for i in 0..n {
        csv.push_str(&format!("u{},{},/p{}\n", i % 50, 1_000 + i * 7, i % 3));
    }
    csv
}

fn chromium() -> PathBuf {
    for p in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    panic!(
        "headless Chromium is needed for the status page test and is not installed: \
         `apt-get install chromium` (.ci/run does)"
    );
}

/// Chromium's DOM of `url` (`--dump-dom`), or its screenshot into `png`.
fn browse(url: &str, png: Option<&Path>) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--window-size=1400,900",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()));
    match png {
        Some(png) => cmd.arg(format!("--screenshot={}", png.display())),
        None => cmd.arg("--dump-dom"),
    };
    cmd.arg(url);
    let out = output_within(&mut cmd, Duration::from_secs(90)).expect("chromium hung");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn metrics_and_heartbeat_of_a_running_stream() {
    let w = World::new();
    w.ok(&["log", "create", "events", "--partitions", "2"]);
    let file = w.write("a.csv", &events(500));
    w.ok(&["log", "produce", "events", "--file", &file, "--time", "ts"]);
    let stream = Running::start(
        &w,
        &[SESSIONIZE, &["--metrics-addr", "127.0.0.1:0"]].concat(),
    );
    let url = stream.url();
    let labels = r#"{deployment="1",job="sessionize",version="v1",outputs="sessions"}"#;
    let applied = format!("kappa_records_applied_total{labels}");
    let wait_applied = |n: f64| {
        let start = Instant::now();
        loop {
            let (code, text) = get(&url, "/metrics");
            assert_eq!(code, 200);
            if metric(&text, &applied) == Some(n) {
                return text;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "{text}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let text = wait_applied(500.0);
    assert_eq!(
        metric(&text, &format!("kappa_deployment_live{labels}")),
        Some(1.0)
    );
    assert!(
        metric(&text, "process_resident_memory_bytes").unwrap() > 1e6,
        "{text}"
    );
    // More records: the counter moves on and the lag of both partitions is 0 again.
    let file = w.write("b.csv", &events(300));
    w.ok(&["log", "produce", "events", "--file", &file]);
    let text = wait_applied(800.0);
    for p in 0..2 {
        let lag = format!(
            r#"kappa_lag_records{{deployment="1",job="sessionize",version="v1",outputs="sessions",input="events",topic="events",partition="{p}"}}"#
        );
        assert_eq!(metric(&text, &lag), Some(0.0), "{text}");
    }
    let count = format!("kappa_commit_latency_seconds_count{labels}");
    assert!(metric(&text, &count).unwrap() >= 2.0, "{text}");
    let visible = format!("kappa_append_to_visible_seconds_count{labels}");
    assert!(metric(&text, &visible).unwrap() >= 2.0, "{text}");
    // Event times of 1970 (the records' `ts`, given with --time): decades behind.
    let event_lag = r#"kappa_lag_event_time_seconds{deployment="1",job="sessionize",version="v1",outputs="sessions",input="events",topic="events",partition="0"}"#;
    assert!(metric(&text, event_lag).unwrap() > 1e9, "{text}");
    // sessionize keeps its events arranged by user.
    let arranged = format!("kappa_arranged_records{labels}");
    assert!(metric(&text, &arranged).unwrap() >= 800.0, "{text}");
    assert_eq!(get(&url, "/nothing").0, 404);
    let (code, html) = get(&url, "/");
    assert_eq!(code, 200);
    assert_eq!(page_lag(&html, 1), Some(0), "{html}");
    // Idle: the stream says so at the progress interval.
    stream.wait_for(
        "kappa stream: idle, lag 0, last record ",
        Duration::from_secs(20),
    );
    stream.stop();
}

/// A SQL grouping by `TUMBLE` windows over an input under a `WATERMARK`
/// releases each window once the watermark passes its end: after 200 hours
/// of events only the last hours' windows are held (`kappa_windows_open`),
/// and the table is still the one a batch run computes (`table verify`).
#[test]
fn sql_windows_under_a_watermark_release_their_state() {
    let w = World::new();
    w.ok(&["log", "create", "events", "--partitions", "1"]);
    let mut csv = String::from("user,ts,page\n");
    for i in 0..2400i64 {
        // Every seventh event comes 400 s late: within the allowed 600.
        let late = if i % 7 == 3 { 400 } else { 0 };
        let ts = 3_600 + i * 300 - late;
        csv.push_str(&format!("u{},{ts},/p{}\n", i % 50, i % 3));
    }
    let file = w.write("a.csv", &csv);
    w.ok(&["log", "produce", "events", "--file", &file]);
    let sql = "CREATE TABLE events (user TEXT, page TEXT, ts BIGINT, WATERMARK FOR ts AS ts - 600);\n\
               WITH e AS (SELECT page, to_timestamp(ts) AS t FROM events)\n\
               SELECT window_start, page, count(*) AS views\n\
               FROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(t), INTERVAL '1' HOUR))\n\
               GROUP BY window_start, page";
    let stream = Running::start(
        &w,
        &[
            "stream",
            "--sql-text",
            sql,
            "--table",
            "hourly",
            "-i",
            "events=events",
            "--max-batch",
            "100",
            "--metrics-addr",
            "127.0.0.1:0",
        ],
    );
    // Announcements follow their epoch's data: wait for both.
    let open = wait_for_gauge(&stream.url(), 2400.0, "kappa_windows_open{", 6.0);
    assert!(open >= 1.0, "the last hour's windows are still open");
    stream.stop();
    let verify = w.ok(&["table", "verify", "hourly"]);
    assert!(verify.contains(": identical (600 rows"), "{verify}");
}

/// An interval join of two inputs under a `WATERMARK` keeps only the rows
/// that rows still to come could match (`kappa_interval_join_rows`), says
/// so in `explain`, and its table is still the one a batch run computes.
#[test]
fn sql_interval_join_of_watermarked_inputs_releases_rows() {
    let w = World::new();
    let (mut imps, mut clicks) = (String::from("id,ts\n"), Vec::new());
    for i in 0..2000i64 {
        let ts = 1_000 + 10 * i;
        imps.push_str(&format!("{i},{ts}\n"));
        if i % 3 == 0 {
            clicks.push((ts + i * 37 % 500, i));
        }
    }
    clicks.sort();
    let clicks: String = clicks
        .iter()
        .map(|(ts, id)| format!("{id},{ts}\n"))
        .collect();
    for (topic, rows) in [("imps", imps), ("clicks", format!("id,ts\n{clicks}"))] {
        w.ok(&["log", "create", topic, "--partitions", "1"]);
        let file = w.write(&format!("{topic}.csv"), &rows);
        w.ok(&["log", "produce", topic, "--file", &file]);
    }
    let sql = "CREATE TABLE imps (id BIGINT, ts BIGINT, WATERMARK FOR ts AS ts - 60);\n\
               CREATE TABLE clicks (id BIGINT, ts BIGINT, WATERMARK FOR ts AS ts - 60);\n\
               SELECT i.id, i.ts AS shown, c.ts AS clicked FROM imps i JOIN clicks c\n\
               ON i.id = c.id AND c.ts BETWEEN i.ts AND i.ts + 600";
    let plan = w.ok(&["sql", "explain", "--sql-text", sql]);
    assert!(
        plan.contains("interval: right.#1 - left.#1 in [0, 600]; streamed, a row is released"),
        "{plan}"
    );
    let stream = Running::start(
        &w,
        &[
            "stream",
            "--sql-text",
            sql,
            "--table",
            "clicked",
            "-i",
            "imps=imps",
            "-i",
            "clicks=clicks",
            "--max-batch",
            "100",
            "--metrics-addr",
            "127.0.0.1:0",
        ],
    );
    // 2667 rows in all; at the end only the last minutes' are kept.
    let held = wait_for_gauge(&stream.url(), 2667.0, "kappa_interval_join_rows{", 150.0);
    assert!(held >= 1.0, "the last impressions are still kept");
    stream.stop();
    let verify = w.ok(&["table", "verify", "clicked"]);
    assert!(verify.contains(": identical (667 rows"), "{verify}");
}

#[test]
fn the_status_page_in_a_browser_shows_the_lag_fall_to_zero() {
    let w = World::new();
    w.ok(&["log", "create", "events", "--partitions", "2"]);
    let file = w.write("a.csv", &events(100));
    w.ok(&["log", "produce", "events", "--file", &file]);
    w.ok(&[SESSIONIZE, &["--until-caught-up"]].concat());
    assert!(
        w.fails(&["ui", "--table-db", "/nonexistent/t.db"])
            .contains("no table store")
    );
    let ui = Running::start(&w, &["ui", "--addr", "127.0.0.1:0"]);
    let url = ui.url();
    assert_eq!(get(&url, "/metrics").0, 404, "kappa ui runs no job");

    // A backlog read in small epochs: the catalog's lag rises, then falls.
    let file = w.write("b.csv", &events(60_000));
    w.ok(&["log", "produce", "events", "--file", &file]);
    let stream = Running::start(&w, &[SESSIONIZE, &["--max-batch", "1", "-q"]].concat());
    // Hold the stream still while its lag is above 0, so the browser sees it.
    let start = Instant::now();
    loop {
        if page_lag(&get(&url, "/").1, 1).is_some_and(|lag| lag > 0) {
            stream.signal(libc::SIGSTOP);
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the lag never rose"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let dom = browse(&format!("{url}/"), None);
    let lag = page_lag(&dom, 1).expect("the page has deployment 1's lag");
    assert!(lag > 0, "{dom}");
    assert!(dom.contains("<td class=\"outputs\">sessions</td>"), "{dom}");
    assert!(dom.contains("<td class=\"state live\">live</td>"), "{dom}");
    assert!(dom.contains("id=\"chart-d1\""), "{dom}");
    stream.signal(libc::SIGCONT);

    let start = Instant::now();
    let dom = loop {
        let dom = browse(&format!("{url}/"), None);
        if page_lag(&dom, 1) == Some(0) && dom.contains("<td class=\"n records\">60100</td>") {
            break dom;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the lag never fell to 0: {dom}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        dom.contains("v1 went live") && dom.contains("v1 caught up"),
        "{dom}"
    );
    let artifacts = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let png = artifacts.join("status-page.png");
    let _ = std::fs::remove_file(&png);
    browse(&format!("{url}/"), Some(&png));
    let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 10_000,
        "no screenshot at {} ({size} bytes)",
        png.display()
    );
    stream.stop();
    ui.stop();
}
