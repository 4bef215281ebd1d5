//! `kappa log produce TOPIC`: rows from stdin or a file appended to a topic
//! in batches.
//!
//! A batch ends at `--batch` records or ~1 MiB of values, whichever comes
//! first, and is one `TopicWriter::append`: under the default `--fsync
//! batch` it is durable when the append returns, and only then is it
//! acknowledged (`--ack` prints `ack P:OFFSET ...`, the last offset written
//! to each partition the batch touched). A bad row fails the command; the
//! batch it belongs to is dropped whole, the batches before it stay (they
//! were acknowledged), and the error says which lines those were.
//!
//! The first produce into a topic records its columns (the CSV header or
//! the first object's keys) and the row format; later producers must match.

use std::cell::Cell;
use std::io::{BufReader, IsTerminal, Read, Write};
use std::ops::Range;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

use super::input::{InputError, RowReader, RowSpec};
use crate::log::{FsyncPolicy, KeyColumn, Log, RecordIn, RowFormat, TopicWriter, WriterOptions};

/// A batch also ends once its values reach this size.
const BATCH_BYTES: usize = 1 << 20;
/// Inputs larger than this get a progress bar (when stderr is a terminal).
const PROGRESS_MIN_BYTES: u64 = 4 << 20;

#[derive(Debug, Args)]
pub struct ProduceArgs {
    /// The topic (see `kappa log create`).
    topic: String,
    /// Column whose text is the record key (routing: crc32c(key) % partitions; compaction keeps the latest per key).
    #[arg(long, value_name = "COL")]
    key: Option<String>,
    /// Column holding the event time: epoch milliseconds or RFC 3339 (2024-05-01T12:00:00.5Z).
    #[arg(long, value_name = "COL")]
    time: Option<String>,
    /// Input format [default: from the --file extension: .jsonl/.ndjson/.json, else csv].
    #[arg(long, value_enum)]
    format: Option<FormatArg>,
    /// Read rows from this file instead of stdin.
    #[arg(long, short, value_name = "PATH")]
    file: Option<PathBuf>,
    /// A null marker besides the empty field (e.g. NA, NULL, \N).
    #[arg(long, value_name = "STR")]
    null: Option<String>,
    /// Records per append (a batch also ends at 1 MiB of values).
    #[arg(long, value_name = "N", default_value_t = 4096)]
    batch: usize,
    /// When appends reach the disk: after every batch, never (at exit), or at most every MS ms.
    #[arg(long, value_name = "batch|never|interval:MS", default_value = "batch", value_parser = parse_fsync)]
    fsync: FsyncPolicy,
    /// After each append returns, print `ack P:OFFSET ...` to stdout: the last offset per partition.
    #[arg(long)]
    ack: bool,
    /// Delete: each row appends a tombstone (an empty value) for its --key
    /// instead of the row; the other fields are not stored. For changelog
    /// (compacted) topics, where a tombstone removes the key's row.
    #[arg(long, requires = "key")]
    delete: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum FormatArg {
    Csv,
    Jsonl,
}

fn parse_fsync(s: &str) -> Result<FsyncPolicy, String> {
    match s {
        "batch" => Ok(FsyncPolicy::EveryBatch),
        "never" => Ok(FsyncPolicy::Never),
        _ => s
            .strip_prefix("interval:")
            .and_then(|ms| ms.parse().ok())
            .map(FsyncPolicy::IntervalMs)
            .ok_or_else(|| format!("expected batch, never or interval:MS, got {s:?}")),
    }
}

/// The rows of the current batch: values back to back, and per row its
/// value's range, key and event time.
#[derive(Default)]
struct Batch {
    values: Vec<u8>,
    rows: Vec<(Range<usize>, Option<String>, Option<i64>)>,
    first_line: u64,
    last_line: u64,
}

/// What has been appended so far.
#[derive(Default)]
struct Stats {
    records: u64,
    /// Per partition: (first, last) offset written.
    offsets: Vec<Option<(u64, u64)>>,
    lines: Option<(u64, u64)>,
}

struct Producer {
    writer: TopicWriter,
    batch: Batch,
    max_records: usize,
    stats: Stats,
    ack: bool,
    source: String,
}

pub fn produce(log: &Log, args: ProduceArgs) -> anyhow::Result<()> {
    if args.batch == 0 {
        bail!("--batch must be at least 1");
    }
    let format = match (args.format, &args.file) {
        (Some(FormatArg::Jsonl), _) => RowFormat::Jsonl,
        (Some(FormatArg::Csv), _) => RowFormat::Csv,
        (None, Some(path)) if is_jsonl_path(path) => RowFormat::Jsonl,
        (None, _) => RowFormat::Csv,
    };
    let (input, total, source) = open_input(args.file.as_ref())?;
    let read = Rc::new(Cell::new(0u64));
    let counted = Counting {
        inner: input,
        read: read.clone(),
    };
    let mut rows = RowReader::new(format, Box::new(BufReader::with_capacity(1 << 16, counted)));
    let opts = WriterOptions { fsync: args.fsync };
    let mut writer = super::open_writer(log, &args.topic, opts)?;
    if args.delete && !writer.config().compact {
        bail!(
            "--delete appends tombstones, which only a compacted topic (a changelog, \
             `kappa log create --compact`) reads as deletions; '{}' is not compacted",
            args.topic
        );
    }
    let started = Instant::now();
    let Some(spec) = prepare(&mut rows, &mut writer, &args, format, &source)? else {
        say!("kappa log produce {}: {source} is empty", args.topic);
        return Ok(());
    };
    let mut p = Producer {
        writer,
        batch: Batch::default(),
        max_records: args.batch,
        stats: Stats::default(),
        ack: args.ack,
        source,
    };
    let mut progress = Progress::new(total);
    loop {
        let start = p.batch.values.len();
        let row = match rows.next_row(&spec, &mut p.batch.values) {
            Ok(Some(row)) => row,
            Ok(None) => break,
            Err(InputError::Bad { line, problem }) => return Err(p.bad_row(line, &problem)),
            Err(InputError::Io(e)) => {
                return Err(e).with_context(|| format!("cannot read {}", p.source));
            }
        };
        if p.batch.rows.is_empty() {
            p.batch.first_line = row.line;
        }
        p.batch.last_line = row.line;
        if args.delete {
            if row.key.is_none() {
                return Err(p.bad_row(row.line, "--delete needs a key, and this row's key is null"));
            }
            p.batch.values.truncate(start);
        }
        let end = p.batch.values.len();
        p.batch.rows.push((start..end, row.key, row.event_ts));
        if p.batch.rows.len() >= p.max_records || end >= BATCH_BYTES {
            p.flush()?;
            progress.update(read.get());
        }
    }
    p.flush()?;
    p.writer.sync().context("final sync failed")?;
    progress.finish();
    say!("{}", p.summary(&args.topic, read.get(), started.elapsed()));
    Ok(())
}

fn is_jsonl_path(path: &std::path::Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("jsonl" | "ndjson" | "json")
    )
}

fn open_input(file: Option<&PathBuf>) -> anyhow::Result<(Box<dyn Read>, Option<u64>, String)> {
    let Some(path) = file else {
        return Ok((Box::new(std::io::stdin().lock()), None, "stdin".into()));
    };
    let f = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let len = f.metadata().ok().map(|m| m.len());
    Ok((Box::new(f), len, path.display().to_string()))
}

/// Reads the header, resolves `--key`/`--time`, and records or checks the
/// topic's columns; `None` for an empty input.
fn prepare(
    rows: &mut RowReader,
    writer: &mut TopicWriter,
    args: &ProduceArgs,
    format: RowFormat,
    source: &str,
) -> anyhow::Result<Option<RowSpec>> {
    let header = match rows.read_header() {
        Ok(Some(h)) => h,
        Ok(None) => return Ok(None),
        Err(InputError::Bad { line, problem }) => bail!("{source}: line {line}: {problem}"),
        Err(InputError::Io(e)) => return Err(e).with_context(|| format!("cannot read {source}")),
    };
    if let Some(i) = header.iter().position(|c| c.is_empty()) {
        bail!("{source}: column {} has an empty name in the header", i + 1);
    }
    let dup = (1..header.len()).find(|&i| header[..i].contains(&header[i]));
    if let Some(i) = dup {
        bail!(
            "{source}: column {:?} appears twice in the header",
            header[i]
        );
    }
    let topic = writer.config();
    // JSON objects may omit keys: a JSON topic keeps its columns when the
    // first object's keys are among them; unknown keys are caught per row.
    let columns = if format == RowFormat::Jsonl
        && topic.row_format == Some(RowFormat::Jsonl)
        && header.iter().all(|k| topic.columns.contains(k))
    {
        topic.columns.clone()
    } else {
        header
    };
    let find = |flag: &str, col: &Option<String>| -> anyhow::Result<Option<usize>> {
        col.as_ref()
            .map(|c| {
                columns.iter().position(|x| x == c).ok_or_else(|| {
                    anyhow!(
                        "{flag} {c}: no such column (columns: {})",
                        columns.join(",")
                    )
                })
            })
            .transpose()
    };
    let spec = RowSpec {
        key: find("--key", &args.key)?,
        time: find("--time", &args.time)?,
        null: args.null.clone(),
    };
    writer
        .ensure_columns(&columns, format)
        .with_context(|| format!("{source} does not fit topic '{}'", args.topic))?;
    let key = args
        .key
        .clone()
        .map_or(KeyColumn::Unkeyed, KeyColumn::Column);
    writer.ensure_key(key)?;
    rows.use_columns(&columns);
    Ok(Some(spec))
}

impl Producer {
    /// Appends the pending batch as one append (durable under `--fsync batch`).
    fn flush(&mut self) -> anyhow::Result<()> {
        if self.batch.rows.is_empty() {
            return Ok(());
        }
        let b = &self.batch;
        let recs: Vec<RecordIn<'_>> = b
            .rows
            .iter()
            .map(|(range, key, ts)| RecordIn {
                key: key.as_deref().map(str::as_bytes),
                value: &b.values[range.clone()],
                event_ts: *ts,
            })
            .collect();
        let placed = self.writer.append(&recs).with_context(|| {
            format!(
                "appending the batch from line {} of {} failed; {}",
                b.first_line,
                self.source,
                self.written()
            )
        })?;
        self.record(&placed)?;
        self.batch.values.clear();
        self.batch.rows.clear();
        Ok(())
    }

    /// Updates the statistics and prints the acknowledgement.
    fn record(&mut self, placed: &[(u32, u64)]) -> anyhow::Result<()> {
        let parts = self.writer.config().partitions as usize;
        self.stats.offsets.resize(parts, None);
        let mut last_in_batch = vec![None; parts];
        for &(p, off) in placed {
            let slot = &mut self.stats.offsets[p as usize];
            *slot = Some(slot.map_or((off, off), |(first, _)| (first, off)));
            last_in_batch[p as usize] = Some(off);
        }
        self.stats.records += placed.len() as u64;
        let first = self.stats.lines.map_or(self.batch.first_line, |l| l.0);
        self.stats.lines = Some((first, self.batch.last_line));
        if self.ack {
            let acks: Vec<String> = last_in_batch
                .iter()
                .enumerate()
                .filter_map(|(p, o)| o.map(|o| format!("{p}:{o}")))
                .collect();
            let mut out = std::io::stdout().lock();
            writeln!(out, "ack {}", acks.join(" ")).context("cannot write to stdout")?;
            out.flush().context("cannot write to stdout")?;
        }
        Ok(())
    }

    fn written(&self) -> String {
        match self.stats.records {
            0 => "nothing was written".to_string(),
            n => format!("the {n} records before it were appended and stay in the topic"),
        }
    }

    fn bad_row(&self, line: u64, problem: &str) -> anyhow::Error {
        let dropped = if self.batch.rows.is_empty() {
            String::new()
        } else {
            format!(
                "its batch (from line {}) was not written; ",
                self.batch.first_line
            )
        };
        anyhow!(
            "{}: line {line}: {problem} ({dropped}{})",
            self.source,
            self.written()
        )
    }

    fn summary(&self, topic: &str, bytes: u64, elapsed: Duration) -> String {
        let secs = elapsed.as_secs_f64().max(1e-9);
        let mut parts: Vec<String> = self
            .stats
            .offsets
            .iter()
            .enumerate()
            .filter_map(|(p, o)| o.map(|(a, b)| format!("p{p} {a}-{b}")))
            .collect();
        let touched = parts.len();
        if touched > 8 {
            parts.truncate(8);
            parts.push("...".into());
        }
        let lines = self
            .stats
            .lines
            .map_or(String::new(), |(a, b)| format!(", lines {a}-{b}"));
        format!(
            "kappa log produce {topic}: {} ({}{lines}) into {} \
             (offsets {}), {} in {secs:.2} s, {:.1} MB/s",
            crate::english::count(self.stats.records, "record"),
            self.source,
            crate::english::count(touched as u64, "partition"),
            parts.join(", "),
            super::show::human_bytes(bytes),
            bytes as f64 / 1e6 / secs,
        )
    }
}

/// Counts the bytes read, for the progress bar and the summary.
struct Counting {
    inner: Box<dyn Read>,
    read: Rc<Cell<u64>>,
}

impl Read for Counting {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

/// A bar (file of known size) or a spinner (stdin) on stderr, shown only
/// when stderr is a terminal and once the input turned out to be large.
struct Progress {
    total: Option<u64>,
    bar: Option<ProgressBar>,
    enabled: bool,
}

impl Progress {
    fn new(total: Option<u64>) -> Self {
        Progress {
            total,
            bar: None,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    fn update(&mut self, read: u64) {
        let large = self.total.unwrap_or(read) >= PROGRESS_MIN_BYTES;
        if self.bar.is_none() && self.enabled && large {
            let (bar, template) = match self.total {
                Some(n) => (
                    ProgressBar::new(n),
                    "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
                ),
                None => (
                    ProgressBar::no_length(),
                    "{spinner} [{elapsed_precise}] {bytes} {binary_bytes_per_sec}",
                ),
            };
            bar.set_style(ProgressStyle::with_template(template).expect("valid template"));
            bar.enable_steady_tick(Duration::from_millis(200));
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(read);
        }
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
