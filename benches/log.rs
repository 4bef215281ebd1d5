//! How fast does the retained log produce and consume, next to the disk's
//! floor (`benches/log_floor.sh`: `dd ... conv=fdatasync` and a warm `cat`)?
//!
//! Data: `KAPPA_BENCH_LOG_MB` (default 1024) MB of 100-byte values, keyless,
//! into one partition with the default 64 MiB segments, appended in batches
//! of ~1 MiB. Values are slices of a buffer filled by a fixed-seed xorshift,
//! so every run writes the same bytes. Three measurements:
//! - produce with `FsyncPolicy::EveryBatch` (fdatasync after every batch);
//! - produce with `FsyncPolicy::Never` (the writer syncs once when dropped,
//!   which is timed — the same work as dd's final `conv=fdatasync`);
//! - consume everything from the start with a `PartitionReader` while the
//!   segments are in the page cache (read once untimed to warm it).
//!
//! MB/s is given for the value bytes and for the bytes on disk (frames
//! included, 29 bytes per record), the latter being what `dd` writes.
//! The log lives under `KAPPA_BENCH_DIR` (default: the system temp dir).
//!
//! Run with: `cargo bench --bench log` (or `cargo run --release --bench log`).

use std::path::Path;
use std::time::Instant;

use kappa::log::{FsyncPolicy, Log, RecordIn, Start, TopicConfig, WriterOptions};

// The allocator of the `kappa` binary (src/main.rs), which is what runs the
// log in production: a consumed record owns its key and value buffers, so
// the allocator is on the consume path (with glibc's malloc, consume ran
// ~25% slower here).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const VALUE_LEN: usize = 100;
const BATCH_BYTES: usize = 1 << 20;

struct Figures {
    records: u64,
    value_bytes: u64,
    disk_bytes: u64,
    secs: f64,
}

impl Figures {
    fn print(&self, what: &str) {
        let mb = |b: u64| b as f64 / 1e6 / self.secs;
        println!(
            "{what:<28} {:>7.2} s  {:>10.0} records/s  {:>7.1} MB/s values  {:>7.1} MB/s on disk",
            self.secs,
            self.records as f64 / self.secs,
            mb(self.value_bytes),
            mb(self.disk_bytes),
        );
    }
}

fn main() -> anyhow::Result<()> {
    let mb: u64 = std::env::var("KAPPA_BENCH_LOG_MB")
        .ok()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1024);
    let records = mb * 1_000_000 / VALUE_LEN as u64;
    let base = std::env::var_os("KAPPA_BENCH_DIR").map_or_else(std::env::temp_dir, Into::into);
    let dir = tempfile::tempdir_in(base)?;
    let log = Log::open(dir.path())?;
    let pool = value_pool(4 << 20);
    println!(
        "{records} records of {VALUE_LEN} bytes ({mb} MB of values) in {}",
        dir.path().display()
    );

    let synced = produce(&log, "synced", FsyncPolicy::EveryBatch, records, &pool)?;
    synced.print("produce, fsync every batch");
    std::fs::remove_dir_all(dir.path().join("synced"))?;
    let unsynced = produce(&log, "unsynced", FsyncPolicy::Never, records, &pool)?;
    unsynced.print("produce, no fsync");
    consume(&log, "unsynced")?; // warm the page cache
    consume(&log, "unsynced")?.print("consume (page cache)");
    Ok(())
}

/// Pseudo-random bytes (xorshift64, fixed seed) to slice values from.
fn value_pool(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn produce(
    log: &Log,
    topic: &str,
    fsync: FsyncPolicy,
    records: u64,
    pool: &[u8],
) -> anyhow::Result<Figures> {
    log.create_topic(topic, TopicConfig::default())?;
    let per_batch = BATCH_BYTES / (VALUE_LEN + 29);
    let start = Instant::now();
    let mut w = log.writer_with(topic, WriterOptions { fsync })?;
    let mut batch = Vec::with_capacity(per_batch);
    let mut done = 0u64;
    while done < records {
        batch.clear();
        let n = per_batch.min((records - done) as usize);
        for i in 0..n {
            let at = (done as usize + i) * 7 % (pool.len() - VALUE_LEN);
            batch.push(RecordIn::new(None, &pool[at..at + VALUE_LEN]));
        }
        w.append(&batch)?;
        done += n as u64;
    }
    drop(w); // syncs whatever is not yet durable
    let secs = start.elapsed().as_secs_f64();
    Ok(Figures {
        records,
        value_bytes: records * VALUE_LEN as u64,
        disk_bytes: dir_bytes(&log.root().join(topic))?,
        secs,
    })
}

fn consume(log: &Log, topic: &str) -> anyhow::Result<Figures> {
    let start = Instant::now();
    let mut reader = log.reader(topic, 0, Start::Earliest)?;
    let (mut records, mut value_bytes) = (0u64, 0u64);
    loop {
        let batch = reader.next_batch(4096)?;
        if batch.is_empty() {
            break;
        }
        records += batch.len() as u64;
        value_bytes += batch.iter().map(|r| r.value.len() as u64).sum::<u64>();
    }
    let secs = start.elapsed().as_secs_f64();
    Ok(Figures {
        records,
        value_bytes,
        disk_bytes: dir_bytes(&log.root().join(topic))?,
        secs,
    })
}

/// Bytes of the segment files of a topic (indexes and metadata excluded).
fn dir_bytes(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir.join("partition-0"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "log") {
            total += std::fs::metadata(&path)?.len();
        }
    }
    Ok(total)
}
