//! `kappa nexmark gen`: Nexmark events (persons, auctions, bids, mixed
//! 1:3:46) from the `nexmark` crate's generator, into three log topics or
//! three CSV files, for the `nexmark-qN` jobs and `benches/nexmark`.
//!
//! Determinism: the generator derives every event from its number and the
//! configuration alone; the configuration's only wall-clock input, the base
//! time, is fixed here (`--base-time`, default 2023-11-14T22:13:20Z), so the
//! same flags give the same events, byte for byte, in files and topics.
//! Event time is `date_time` (epoch ms), a data column, and also the log
//! record's event time.
//!
//! Topics `{prefix}-person`, `{prefix}-auction`, `{prefix}-bid` are created
//! when missing (`--partitions`) and must be empty: generating twice into a
//! topic would repeat every event. Records are keyed by the person id, the
//! auction id and the bid's auction, and encoded as `kappa log produce`
//! encodes CSV rows (`log::rows`), so `kappa stream` reads exactly the rows
//! the CSV files hold. Files are committed like batch outputs: written to
//! hidden temporaries, fsynced, renamed, the directory fsynced.

use std::fs::{self, File};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use nexmark::config::NexmarkConfig;
use nexmark::event::Event;

use super::stream::LogDirArg;
use crate::jobs::nexmark::{AUCTION, BID, PERSON};
use crate::log::rows::encode_csv_row;
use crate::log::{
    FsyncPolicy, KeyColumn, Log, RecordIn, RowFormat, TopicConfig, TopicWriter, WriterOptions,
};

/// Records per log append.
const BATCH: usize = 8192;

#[derive(Debug, Args)]
pub struct NexmarkArgs {
    #[command(subcommand)]
    command: NexmarkCommand,
}

#[derive(Debug, Subcommand)]
enum NexmarkCommand {
    /// Generate events into log topics (default) or CSV files (--output).
    Gen(GenArgs),
}

#[derive(Debug, Args)]
struct GenArgs {
    /// Number of events (all kinds together).
    #[arg(long, value_name = "N")]
    events: u64,
    /// Write the topics {PREFIX}-person, {PREFIX}-auction and {PREFIX}-bid.
    #[arg(
        long,
        value_name = "PREFIX",
        default_value = "nexmark",
        conflicts_with = "output"
    )]
    topic_prefix: String,
    /// Write DIR/person.csv, DIR/auction.csv and DIR/bid.csv instead of topics.
    #[arg(long, short, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Replace the CSV files of an existing --output directory.
    #[arg(long)]
    overwrite: bool,
    /// Partitions of topics that do not exist yet.
    #[arg(long, value_name = "N", default_value_t = 2, conflicts_with = "output")]
    partitions: u32,
    /// Event time of the first event (epoch ms).
    #[arg(long, value_name = "MS", default_value_t = 1_700_000_000_000)]
    base_time: u64,
    /// Events per second of event time (the generator's default: 10000).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    rate: usize,
    #[command(flatten)]
    log: LogDirArg,
}

pub fn run(args: NexmarkArgs) -> anyhow::Result<()> {
    match args.command {
        NexmarkCommand::Gen(a) => gen_events(a),
    }
}

/// The three event kinds, in the order of [`Sinks`].
const KINDS: [&str; 3] = ["person", "auction", "bid"];

fn kind_index(e: &Event) -> usize {
    match e {
        Event::Person(_) => 0,
        Event::Auction(_) => 1,
        Event::Bid(_) => 2,
    }
}

fn gen_events(args: GenArgs) -> anyhow::Result<()> {
    if args.rate == 0 {
        bail!("--rate must be at least 1");
    }
    let config = NexmarkConfig {
        base_time: args.base_time,
        first_rate: args.rate,
        next_rate: args.rate,
        ..NexmarkConfig::default()
    };
    let started = Instant::now();
    let mut sink: Box<dyn Sink> = match &args.output {
        Some(dir) => Box::new(CsvSink::create(dir, args.overwrite)?),
        None => Box::new(LogSink::open(&args)?),
    };
    let mut counts = [0u64; 3];
    let mut fields: Vec<String> = Vec::with_capacity(10);
    let (mut first, mut last) = (u64::MAX, 0);
    for event in nexmark::EventGenerator::new(config).take(args.events as usize) {
        let kind = kind_index(&event);
        counts[kind] += 1;
        first = first.min(event.timestamp());
        last = last.max(event.timestamp());
        fields.clear();
        event_fields(&event, &mut fields);
        sink.write(kind, &fields, event.timestamp() as i64)?;
    }
    let target = sink.finish()?;
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    say!(
        "kappa nexmark gen: {} events ({} person, {} auction, {} bid), event time {}..{} ms, \
         into {target} in {secs:.2} s ({:.0} events/s)",
        args.events,
        counts[0],
        counts[1],
        counts[2],
        if args.events == 0 { 0 } else { first },
        last,
        args.events as f64 / secs
    );
    Ok(())
}

/// An event's fields as text, in the column order of its kind.
fn event_fields(event: &Event, out: &mut Vec<String>) {
    match event {
        Event::Person(p) => out.extend([
            p.id.to_string(),
            p.name.clone(),
            p.email_address.clone(),
            p.credit_card.clone(),
            p.city.clone(),
            p.state.clone(),
            p.date_time.to_string(),
            p.extra.clone(),
        ]),
        Event::Auction(a) => out.extend([
            a.id.to_string(),
            a.item_name.clone(),
            a.description.clone(),
            a.initial_bid.to_string(),
            a.reserve.to_string(),
            a.date_time.to_string(),
            a.expires.to_string(),
            a.seller.to_string(),
            a.category.to_string(),
            a.extra.clone(),
        ]),
        Event::Bid(b) => out.extend([
            b.auction.to_string(),
            b.bidder.to_string(),
            b.price.to_string(),
            b.channel.clone(),
            b.url.clone(),
            b.date_time.to_string(),
            b.extra.clone(),
        ]),
    }
}

fn columns(kind: usize) -> &'static [&'static str] {
    [PERSON, AUCTION, BID][kind]
}

/// Where generated events go.
trait Sink {
    /// One event of `kind` (index into [`KINDS`]); the first field is its key.
    fn write(&mut self, kind: usize, fields: &[String], time: i64) -> anyhow::Result<()>;
    /// Makes everything durable; says where it went.
    fn finish(self: Box<Self>) -> anyhow::Result<String>;
}

/// Three CSV files, committed atomically.
struct CsvSink {
    dir: PathBuf,
    files: Vec<(PathBuf, csv::Writer<BufWriter<File>>)>,
}

impl CsvSink {
    fn create(dir: &Path, overwrite: bool) -> anyhow::Result<CsvSink> {
        if dir.exists() && !overwrite {
            bail!(
                "output directory {} already exists (use --overwrite to replace its files)",
                dir.display()
            );
        }
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut files = Vec::new();
        for (kind, name) in KINDS.iter().enumerate() {
            let tmp = dir.join(format!(".{name}.csv.tmp"));
            let file =
                File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
            let mut w = csv::Writer::from_writer(BufWriter::with_capacity(1 << 20, file));
            w.write_record(columns(kind))
                .with_context(|| format!("cannot write {}", tmp.display()))?;
            files.push((tmp, w));
        }
        Ok(CsvSink {
            dir: dir.to_path_buf(),
            files,
        })
    }
}

impl Sink for CsvSink {
    fn write(&mut self, kind: usize, fields: &[String], _time: i64) -> anyhow::Result<()> {
        let (path, w) = &mut self.files[kind];
        w.write_record(fields)
            .with_context(|| format!("cannot write {}", path.display()))
    }

    fn finish(self: Box<Self>) -> anyhow::Result<String> {
        let mut done = Vec::new();
        for (tmp, w) in self.files {
            let ctx = || format!("cannot write {}", tmp.display());
            let file = w
                .into_inner()
                .map_err(|e| e.into_error())
                .with_context(ctx)?
                .into_inner()
                .map_err(|e| e.into_error())
                .with_context(ctx)?;
            file.sync_all().with_context(ctx)?;
            done.push(tmp);
        }
        for (tmp, name) in done.iter().zip(KINDS) {
            let target = self.dir.join(format!("{name}.csv"));
            fs::rename(tmp, &target)
                .with_context(|| format!("cannot rename to {}", target.display()))?;
        }
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("cannot sync {}", self.dir.display()))?;
        Ok(self.dir.display().to_string())
    }
}

/// Three topics, appended in batches.
struct LogSink {
    topics: Vec<TopicBatch>,
}

struct TopicBatch {
    writer: TopicWriter,
    values: Vec<u8>,
    /// Per record: key range and value range in `values`, and event time.
    records: Vec<(std::ops::Range<usize>, std::ops::Range<usize>, i64)>,
}

impl LogSink {
    fn open(args: &GenArgs) -> anyhow::Result<LogSink> {
        let log = Log::open(&args.log.log_dir)
            .with_context(|| format!("cannot open log directory {}", args.log.log_dir.display()))?;
        let mut topics = Vec::new();
        for (kind, name) in KINDS.iter().enumerate() {
            let topic = topic_name(&args.topic_prefix, name);
            topics.push(TopicBatch {
                writer: empty_topic(&log, &topic, args.partitions, columns(kind))?,
                values: Vec::with_capacity(BATCH * 256),
                records: Vec::with_capacity(BATCH),
            });
        }
        Ok(LogSink { topics })
    }
}

/// `PREFIX-KIND`, or just `KIND` for an empty prefix.
fn topic_name(prefix: &str, kind: &str) -> String {
    if prefix.is_empty() {
        kind.to_string()
    } else {
        format!("{prefix}-{kind}")
    }
}

/// The writer of `topic`, created if missing, checked to be empty, with its columns set.
fn empty_topic(
    log: &Log,
    topic: &str,
    partitions: u32,
    columns: &[&str],
) -> anyhow::Result<TopicWriter> {
    if !log.list_topics()?.iter().any(|t| t == topic) {
        let config = TopicConfig {
            partitions,
            ..TopicConfig::default()
        };
        log.create_topic(topic, config)
            .with_context(|| format!("cannot create topic '{topic}'"))?;
    }
    let info = log.topic(topic)?;
    if info.partitions.iter().any(|p| p.latest > 0) {
        bail!(
            "topic '{topic}' already has records: generating again would repeat every event (use another --topic-prefix)"
        );
    }
    // Durability comes from one sync at the end (the events can be generated again).
    let opts = WriterOptions {
        fsync: FsyncPolicy::Never,
    };
    let mut writer = log
        .writer_with(topic, opts)
        .with_context(|| format!("cannot open topic '{topic}' for writing"))?;
    let columns: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
    writer
        .ensure_columns(&columns, RowFormat::Csv)
        .with_context(|| format!("topic '{topic}' has other columns"))?;
    // Each event is keyed by its first field.
    writer.ensure_key(KeyColumn::Column(columns[0].clone()))?;
    Ok(writer)
}

impl TopicBatch {
    fn flush(&mut self) -> anyhow::Result<()> {
        if self.records.is_empty() {
            return Ok(());
        }
        let recs: Vec<RecordIn<'_>> = self
            .records
            .iter()
            .map(|(key, value, time)| RecordIn {
                key: Some(&self.values[key.clone()]),
                value: &self.values[value.clone()],
                event_ts: Some(*time),
            })
            .collect();
        self.writer
            .append(&recs)
            .with_context(|| format!("cannot append to topic '{}'", self.writer.name()))?;
        self.values.clear();
        self.records.clear();
        Ok(())
    }
}

impl Sink for LogSink {
    fn write(&mut self, kind: usize, fields: &[String], time: i64) -> anyhow::Result<()> {
        let t = &mut self.topics[kind];
        let start = t.values.len();
        t.values.extend_from_slice(fields[0].as_bytes());
        let key_end = t.values.len();
        encode_csv_row(fields.iter().map(|f| Some(f.as_str())), &mut t.values);
        t.records
            .push((start..key_end, key_end..t.values.len(), time));
        if t.records.len() >= BATCH {
            t.flush()?;
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> anyhow::Result<String> {
        let mut names = Vec::new();
        for t in &mut self.topics {
            t.flush()?;
            t.writer
                .sync()
                .with_context(|| format!("cannot sync topic '{}'", t.writer.name()))?;
            names.push(format!("'{}'", t.writer.name()));
        }
        Ok(format!("topics {}", names.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_and_mixed_1_3_46() {
        let config = || NexmarkConfig {
            base_time: 1_700_000_000_000,
            ..NexmarkConfig::default()
        };
        let a: Vec<Event> = nexmark::EventGenerator::new(config()).take(500).collect();
        let b: Vec<Event> = nexmark::EventGenerator::new(config()).take(500).collect();
        assert_eq!(a, b);
        let mut counts = [0; 3];
        for e in &a {
            counts[kind_index(e)] += 1;
        }
        assert_eq!(counts, [10, 30, 460]);
        let mut fields = Vec::new();
        for e in &a {
            fields.clear();
            event_fields(e, &mut fields);
            assert_eq!(fields.len(), columns(kind_index(e)).len());
        }
    }
}
