//! How fast does a stream's source turn a topic's records into rows?
//!
//! Reads every partition of `KAPPA_BENCH_TOPIC` (default `fact`) in the log
//! at `KAPPA_LOG_DIR`, start to end, through `PartitionSource::read` (the
//! frames, their CRCs, the binary row values, the typing of each column):
//! what a `kappa stream` or `kappa reprocess` worker does per record before
//! the dataflow sees a row. One thread; every column read as `any`; the
//! rows are dropped after a checksum of their ints, so nothing is optimised
//! away. Best of `KAPPA_BENCH_RUNS` (default 5), segments in the page cache.
//!
//! Run with: `KAPPA_LOG_DIR=... cargo bench --bench topic_read`, e.g. the
//! log `benches/stream/run.sh` leaves in `benches/stream/work/log` (2M
//! records); the figures in benches/README.md are of benches/reprocess's
//! 10M-record topic (`kappa log produce fact --file fact.csv --key key`).

use std::time::Instant;

use anyhow::Context;
use kappa::log::Log;
use kappa::schema::{ColumnType, Projection};
use kappa::source::topic::{PartitionSource, TopicInput};
use kappa::source::{BadRows, ReadOptions};
use kappa::value::Value;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let dir = std::env::var("KAPPA_LOG_DIR")
        .context("set KAPPA_LOG_DIR to a log directory holding the topic")?;
    let topic = std::env::var("KAPPA_BENCH_TOPIC").unwrap_or_else(|_| "fact".into());
    let runs: usize = std::env::var("KAPPA_BENCH_RUNS").map_or(Ok(5), |s| s.parse())?;
    let log = Log::open(&dir)?;
    let input = TopicInput::resolve(&log, "input", &topic)?;
    let columns = input.schema.columns.len();
    let partitions = log.topic(&topic)?.partitions.len() as u32;
    let mut best = f64::MAX;
    let mut records = 0;
    for _ in 0..runs {
        let start = Instant::now();
        let (mut n, mut sum) = (0usize, 0i64);
        for partition in 0..partitions {
            let projection = Projection {
                input: "input".into(),
                columns: (0..columns).map(|c| (c, ColumnType::Any)).collect(),
                late: None,
                rules: Vec::new(),
            };
            let mut source = PartitionSource::open(&input, partition, projection)?;
            let mut bad = BadRows::default();
            loop {
                let read = source.read(
                    1 << 14,
                    None,
                    &ReadOptions::default(),
                    &mut bad,
                    &mut |row, diff| {
                        for v in row.iter() {
                            if let Value::Int(i) = v {
                                sum = sum.wrapping_add(*i * diff as i64);
                            }
                        }
                    },
                )?;
                if read == 0 {
                    break;
                }
                n += read;
            }
        }
        let secs = start.elapsed().as_secs_f64();
        best = best.min(secs);
        records = n;
        eprintln!(
            "{n} records in {secs:.3} s ({:.1} M/s), checksum {sum}",
            n as f64 / secs / 1e6
        );
    }
    println!(
        "topic {topic}: {records} records, best {best:.3} s, {:.0} ns a record",
        best * 1e9 / records as f64
    );
    Ok(())
}
