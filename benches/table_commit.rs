//! What an epoch commit costs in each table store, and how soon a reader
//! on another connection sees it, next to the floor: a plain `COPY` of the
//! same rows into a PostgreSQL table with no key, no catalog and no offsets.
//!
//! Workload (per store): an output `counts (k text, n bigint)` keyed by `k`;
//! `KAPPA_BENCH_ROWS` (default 200k) keys inserted, then each updated (a
//! retraction and an insertion), then deleted, in epochs of
//! `KAPPA_BENCH_EPOCH` (default 20k) rows. Changes/s counts every retraction
//! and insertion. Then latency: 200 epochs of 1,000 updates each, one every
//! 5 ms; a reader on its own connection polls the view for the epoch's
//! marker row (a `max` over the updated keys) and the time from the start
//! of `commit_epoch` to the first read that sees it is recorded.
//!
//! Stores: SQLite in `KAPPA_BENCH_DIR` (default: the temp dir), and the
//! PostgreSQL database `KAPPA_BENCH_POSTGRES` names (skipped when unset).
//! `benches/postgres/run.sh` starts a durable server (fsync on) for it.
//!
//! Run with: `cargo bench --bench table_commit`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use kappa::schema::OutputSchema;
use kappa::table::{
    DeploymentState, EpochStats, InputOffset, Lease, NewDeployment, StoreAddr, TableStore,
};
use kappa::value::{Row, Value};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn env(name: &str, default: i64) -> i64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn key(i: i64) -> Value {
    Value::str(&format!("key-{i:08}"))
}

/// Each measurement writes an output of its own.
static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

struct Bench {
    store: Box<dyn TableStore>,
    lease: Lease,
    epoch: u64,
}

impl Bench {
    fn new(addr: &StoreAddr) -> Bench {
        let mut store = kappa::table::open(addr).unwrap();
        let d = store
            .create_deployment(&NewDeployment {
                job: "bench".into(),
                job_version: 1,
                params: vec![("run".into(), format!("{:?}", Instant::now()))],
                inputs: vec![("events".into(), "clicks".into())],
                outputs: vec![OutputSchema {
                    name: format!(
                        "counts_{}_{}",
                        std::process::id(),
                        RUN.fetch_add(1, Ordering::Relaxed)
                    ),
                    columns: vec!["k".into(), "n".into()],
                    key: vec![0],
                }],
                state: DeploymentState::Live,
                note: None,
            })
            .unwrap();
        let lease = store.take_over(d.id, "bench").unwrap();
        Bench {
            store,
            lease,
            epoch: 0,
        }
    }

    fn commit(&mut self, rows: Vec<(Row, isize)>) {
        self.epoch += 1;
        let offsets = [InputOffset {
            input: "events".into(),
            topic: "clicks".into(),
            partition: 0,
            next: self.epoch,
            last: None,
        }];
        let stats = EpochStats {
            records: rows.len() as u64,
            ..EpochStats::default()
        };
        self.store
            .commit_epoch(&self.lease, &[rows], &offsets, &stats)
            .unwrap();
    }

    fn view(&self) -> String {
        self.store
            .deployment(self.lease.deployment)
            .unwrap()
            .outputs[0]
            .name
            .clone()
    }
}

/// Changes/s of inserts, updates and deletes, in that order.
fn throughput(addr: &StoreAddr, n: i64, per: i64) -> [f64; 3] {
    let mut b = Bench::new(addr);
    let mut rates = [0.0; 3];
    for (phase, rate) in rates.iter_mut().enumerate() {
        let t = Instant::now();
        let mut changes = 0;
        for e in 0..n / per {
            let mut rows: Vec<(Row, isize)> = Vec::new();
            for i in e * per..(e + 1) * per {
                match phase {
                    0 => rows.push((vec![key(i), Value::Int(1)], 1)),
                    1 => {
                        rows.push((vec![key(i), Value::Int(1)], -1));
                        rows.push((vec![key(i), Value::Int(2)], 1));
                    }
                    _ => rows.push((vec![key(i), Value::Int(2)], -1)),
                }
            }
            changes += rows.len();
            b.commit(rows);
        }
        *rate = changes as f64 / t.elapsed().as_secs_f64();
    }
    rates
}

/// What the reader thread shares with the writer: the newest marker it has
/// seen, and when to stop.
#[derive(Default)]
struct Shared {
    seen: AtomicI64,
    stop: AtomicBool,
}

/// Percentiles (p50, p90, p99, max) of commit-to-visible, in ms.
fn latency(
    addr: &StoreAddr,
    reader: impl FnOnce(String, Arc<Shared>) + Send + 'static,
) -> [f64; 4] {
    let mut b = Bench::new(addr);
    let rows: Vec<(Row, isize)> = (0..1000)
        .map(|i| (vec![key(i), Value::Int(0)], 1))
        .collect();
    b.commit(rows);
    let shared = Arc::new(Shared::default());
    let view = b.view();
    let handle = {
        let shared = shared.clone();
        std::thread::spawn(move || reader(view, shared))
    };
    let mut lat = Vec::new();
    for v in 1..=200i64 {
        let mut rows: Vec<(Row, isize)> = Vec::with_capacity(2000);
        for i in 0..1000 {
            rows.push((vec![key(i), Value::Int(v - 1)], -1));
            rows.push((vec![key(i), Value::Int(v)], 1));
        }
        let t = Instant::now();
        b.commit(rows);
        while shared.seen.load(Ordering::Acquire) < v {
            std::thread::sleep(Duration::from_micros(50));
        }
        lat.push(t.elapsed().as_secs_f64() * 1e3);
        std::thread::sleep(Duration::from_millis(5));
    }
    shared.stop.store(true, Ordering::Release);
    handle.join().unwrap();
    lat.sort_by(f64::total_cmp);
    let p = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize];
    [p(0.5), p(0.9), p(0.99), lat[lat.len() - 1]]
}

/// Polls the view's largest `n` with `read` until told to stop.
fn poll(shared: &Shared, mut read: impl FnMut() -> Option<i64>) {
    while !shared.stop.load(Ordering::Acquire) {
        if let Some(n) = read() {
            shared.seen.fetch_max(n, Ordering::AcqRel);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The floor: the same rows `COPY`ed into a plain table, one transaction
/// per epoch (inserts only: `COPY` has no update or delete).
fn copy_floor(url: &str, n: i64, per: i64) -> f64 {
    let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
    c.batch_execute(
        "DROP TABLE IF EXISTS bench_floor; CREATE TABLE bench_floor (k text, n bigint)",
    )
    .unwrap();
    let t = Instant::now();
    for e in 0..n / per {
        let mut tx = c.transaction().unwrap();
        let mut w = tx.copy_in("COPY bench_floor (k, n) FROM STDIN").unwrap();
        let mut text = String::new();
        for i in e * per..(e + 1) * per {
            text.push_str(&format!("key-{i:08}\t1\n"));
        }
        std::io::Write::write_all(&mut w, text.as_bytes()).unwrap();
        w.finish().unwrap();
        tx.commit().unwrap();
    }
    n as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    let n = env("KAPPA_BENCH_ROWS", 200_000);
    let per = env("KAPPA_BENCH_EPOCH", 20_000);
    let dir = std::env::var("KAPPA_BENCH_DIR").map_or_else(|_| std::env::temp_dir(), Into::into);
    let tmp = tempfile::tempdir_in(dir).unwrap();
    let sqlite = tmp.path().join("tables.db");
    let sqlite_addr = StoreAddr::Sqlite(sqlite.clone());
    println!(
        "| store | insert (changes/s) | update (changes/s) | delete (changes/s) | visible p50 / p90 / p99 / max (ms) |"
    );
    println!("|---|---:|---:|---:|---:|");
    let row = |name: &str, t: [f64; 3], l: Option<[f64; 4]>| {
        let l = l.map_or("—".to_string(), |l| {
            format!("{:.1} / {:.1} / {:.1} / {:.1}", l[0], l[1], l[2], l[3])
        });
        let rate = |r: f64| {
            if r.is_nan() {
                "—".to_string()
            } else {
                format!("{:.0}k", r / 1e3)
            }
        };
        println!(
            "| {name} | {} | {} | {} | {l} |",
            rate(t[0]),
            rate(t[1]),
            rate(t[2])
        );
    };
    let t = throughput(&sqlite_addr, n, per);
    let l = latency(&sqlite_addr, move |view, shared| {
        let c = rusqlite::Connection::open_with_flags(
            &sqlite,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        let sql = format!("SELECT max(n) FROM \"{view}\"");
        poll(&shared, || c.query_row(&sql, [], |r| r.get(0)).ok());
    });
    row("SQLite (synchronous=FULL)", t, Some(l));
    let Ok(url) = std::env::var("KAPPA_BENCH_POSTGRES") else {
        println!("(PostgreSQL skipped: set KAPPA_BENCH_POSTGRES, or run benches/postgres/run.sh)");
        return;
    };
    let pg_addr: StoreAddr = url.parse().unwrap();
    let t = throughput(&pg_addr, n, per);
    let reader_url = url.clone();
    let l = latency(&pg_addr, move |view, shared| {
        let mut c = postgres::Client::connect(&reader_url, postgres::NoTls).unwrap();
        let sql = format!("SELECT max(n) FROM \"{view}\"");
        poll(&shared, || {
            c.query_one(&sql, &[]).ok().and_then(|r| r.get(0))
        });
    });
    row("PostgreSQL", t, Some(l));
    let floor = copy_floor(&url, n, per);
    row(
        "floor: plain COPY into PostgreSQL",
        [floor, f64::NAN, f64::NAN],
        None,
    );
}
