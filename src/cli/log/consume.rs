//! `kappa log consume TOPIC`: records printed as CSV (header = the topic's
//! columns) or JSON lines on stdout.
//!
//! Where each partition starts: `--offset N` (every selected partition),
//! `--from-beginning`, else with `--group G` the group's committed offset
//! (the earliest retained offset where it has none), else the beginning —
//! unlike Kafka's console consumer, which defaults to the end: on an
//! embedded log, looking at what is there is the common case; `--follow`
//! then waits for more. Without `--follow`, partitions are printed one
//! after the other, each to its end as of when it is reached; with it,
//! partitions are interleaved as records arrive until `--max` or Ctrl-C.
//! With `--group`, offsets are committed after the records were written to
//! stdout (at least once: a crash in between prints them again).
//!
//! Values are decoded as rows (`crate::log::rows`): CSV fields are written
//! as their raw text, JSON output types CSV text like a CSV file would be
//! read (`42` becomes a number). A tombstone (empty value) prints as a row
//! of nulls. A topic without columns prints each value as text in a column
//! `value`. `--show-meta` prepends `_partition,_offset,_key,_event_time`.

use crate::cli::is_broken_pipe;
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use serde_json::{Map, Value as Json};

use crate::log::rows::{decode_fields, field_text, typed_json};
use crate::log::{Log, LogError, PartitionReader, Record, RowFormat, Start};

/// How long `--follow` waits on each partition per round when all are idle.
const FOLLOW_WAIT: Duration = Duration::from_millis(100);
const META: [&str; 4] = ["_partition", "_offset", "_key", "_event_time"];

#[derive(Debug, Args)]
pub struct ConsumeArgs {
    /// The topic.
    topic: String,
    /// Start at the earliest retained offset (the default without --group).
    #[arg(long, conflicts_with = "offset")]
    from_beginning: bool,
    /// Start at this offset in every selected partition.
    #[arg(long, value_name = "N")]
    offset: Option<u64>,
    /// Read only this partition.
    #[arg(long, short, value_name = "P")]
    partition: Option<u32>,
    /// Consumer group: start at its committed offsets, commit after printing.
    #[arg(long, short, value_name = "G")]
    group: Option<String>,
    /// Keep waiting for new records (until --max or Ctrl-C).
    #[arg(long, short)]
    follow: bool,
    /// Stop after this many records.
    #[arg(long, value_name = "N")]
    max: Option<u64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutFormat::Csv)]
    format: OutFormat,
    /// Add the columns _partition, _offset, _key and _event_time (ms).
    #[arg(long)]
    show_meta: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum OutFormat {
    Csv,
    Jsonl,
}

/// Turns records into output lines.
struct Printer {
    columns: Vec<String>,
    /// `None`: the topic holds no rows; values print as text.
    rows: Option<RowFormat>,
    format: OutFormat,
    meta: bool,
    csv: csv::Writer<Vec<u8>>,
}

pub fn consume(log: &Log, args: ConsumeArgs) -> anyhow::Result<()> {
    let info = log
        .topic(&args.topic)
        .with_context(|| format!("cannot consume topic '{}'", args.topic))?;
    let partitions: Vec<u32> = match args.partition {
        Some(p) => vec![p],
        None => (0..info.config.partitions).collect(),
    };
    let mut readers = open_readers(log, &args, &partitions)?;
    let c = &info.config;
    let (columns, rows) = match c.row_format {
        Some(f) => (c.columns.clone(), Some(f)),
        None => (vec!["value".to_string()], None),
    };
    let mut printer = Printer {
        columns,
        rows,
        format: args.format,
        meta: args.show_meta,
        csv: csv::Writer::from_writer(Vec::new()),
    };
    let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let result = pump(&args, &mut readers, &mut printer, &mut out, log);
    match result {
        Err(e) if is_broken_pipe(&e) => Ok(()),
        other => other,
    }
}

fn open_readers(
    log: &Log,
    args: &ConsumeArgs,
    partitions: &[u32],
) -> anyhow::Result<Vec<PartitionReader>> {
    let committed = match (&args.group, args.from_beginning || args.offset.is_some()) {
        (Some(g), false) => log
            .fetch_offsets(&args.topic, g)
            .with_context(|| format!("cannot read the offsets of group '{g}'"))?,
        _ => BTreeMap::new(),
    };
    partitions
        .iter()
        .map(|&p| {
            let (start, from) = match (args.offset, committed.get(&p)) {
                (Some(n), _) => (Start::Offset(n), format!("offset {n}")),
                (None, Some(&n)) => (
                    Start::Offset(n),
                    format!("the group's committed offset {n}"),
                ),
                (None, None) => (Start::Earliest, "the beginning".to_string()),
            };
            log.reader(&args.topic, p, start).map_err(|e| {
                let hint = match e {
                    LogError::OffsetOutOfRange { .. } => {
                        " (--from-beginning starts at the earliest)"
                    }
                    _ => "",
                };
                anyhow::Error::new(e).context(format!(
                    "cannot read topic '{}' partition {p} from {from}{hint}",
                    args.topic
                ))
            })
        })
        .collect()
}

/// Reads, prints and commits until the partitions are drained (or `--max`;
/// with `--follow`, forever).
fn pump(
    args: &ConsumeArgs,
    readers: &mut [PartitionReader],
    printer: &mut Printer,
    out: &mut impl Write,
    log: &Log,
) -> anyhow::Result<()> {
    printer.header(out)?;
    let mut left = args.max.unwrap_or(u64::MAX);
    let mut done = vec![false; readers.len()];
    while left > 0 {
        let mut progress = Vec::new();
        for (i, r) in readers.iter_mut().enumerate() {
            // Without --follow, drain one partition before the next.
            if done[i] || (!args.follow && i > 0 && !done[i - 1]) {
                continue;
            }
            let batch = r
                .next_batch(left.min(1024) as usize)
                .with_context(|| format!("cannot read partition {}", r.partition()))?;
            if batch.is_empty() {
                done[i] = !args.follow;
                continue;
            }
            for rec in &batch {
                if let Err(e) = printer.record(out, r.partition(), rec) {
                    printer.drain_csv(out)?; // the valid records before it
                    out.flush()?;
                    return Err(e);
                }
            }
            printer.drain_csv(out)?;
            left -= batch.len() as u64;
            progress.push((r.partition(), batch.last().map_or(0, |rec| rec.offset + 1)));
            if left == 0 {
                break;
            }
        }
        if !progress.is_empty() {
            out.flush()?;
            commit(log, args, &progress)?;
        } else if args.follow {
            let each = FOLLOW_WAIT / readers.len() as u32;
            for r in readers.iter_mut() {
                if r.wait_for(each)? {
                    break;
                }
            }
        } else if done.iter().all(|&d| d) {
            break;
        }
    }
    out.flush()?;
    Ok(())
}

fn commit(log: &Log, args: &ConsumeArgs, progress: &[(u32, u64)]) -> anyhow::Result<()> {
    if let Some(g) = &args.group {
        log.commit_offsets(&args.topic, g, progress)
            .with_context(|| format!("cannot commit the offsets of group '{g}'"))?;
    }
    Ok(())
}

impl Printer {
    fn header(&mut self, out: &mut impl Write) -> anyhow::Result<()> {
        if self.format == OutFormat::Csv {
            let meta = if self.meta { &META[..] } else { &[] };
            let names = meta
                .iter()
                .copied()
                .chain(self.columns.iter().map(String::as_str));
            self.csv.write_record(names)?;
            self.drain_csv(out)?;
        }
        Ok(())
    }

    fn record(&mut self, out: &mut impl Write, partition: u32, rec: &Record) -> anyhow::Result<()> {
        let fields = self
            .fields(rec)
            .with_context(|| format!("partition {partition}, offset {}", rec.offset))?;
        match self.format {
            OutFormat::Csv => {
                let meta = self.meta.then(|| meta_text(partition, rec));
                let meta = meta.iter().flatten().map(|m| m.as_deref().unwrap_or(""));
                let texts: Vec<_> = fields.iter().map(field_text).collect();
                let cells = meta.chain(texts.iter().map(|t| t.as_deref().unwrap_or("")));
                self.csv.write_record(cells)?;
                Ok(())
            }
            OutFormat::Jsonl => {
                let mut object = Map::new();
                if self.meta {
                    let values = [
                        Json::from(partition),
                        Json::from(rec.offset),
                        rec.key.as_ref().map_or(Json::Null, |k| {
                            Json::String(String::from_utf8_lossy(k).into_owned())
                        }),
                        rec.event_ts.map_or(Json::Null, Json::from),
                    ];
                    object.extend(META.iter().map(|m| m.to_string()).zip(values));
                }
                let format = self.rows.unwrap_or(RowFormat::Jsonl);
                let typed = fields.into_iter().map(|f| typed_json(f, format));
                object.extend(self.columns.iter().cloned().zip(typed));
                serde_json::to_writer(&mut *out, &object)?;
                out.write_all(b"\n")?;
                Ok(())
            }
        }
    }

    /// The record's elements, one per column.
    fn fields(&self, rec: &Record) -> anyhow::Result<Vec<Json>> {
        let Some(format) = self.rows else {
            return Ok(vec![Json::String(
                String::from_utf8_lossy(&rec.value).into_owned(),
            )]);
        };
        if rec.is_tombstone() {
            return Ok(vec![Json::Null; self.columns.len()]);
        }
        match decode_fields(&rec.value, format, self.columns.len()) {
            Ok(f) => Ok(f),
            Err(e) => bail!("the value is not a row of this topic: {e}"),
        }
    }

    /// Moves what the CSV writer buffered to `out` (once per batch: the
    /// csv crate's writer offers no way to clear its buffer in place).
    fn drain_csv(&mut self, out: &mut impl Write) -> anyhow::Result<()> {
        let fresh = csv::Writer::from_writer(Vec::new());
        let bytes = std::mem::replace(&mut self.csv, fresh)
            .into_inner()
            .map_err(|e| e.into_error())?;
        out.write_all(&bytes)?;
        Ok(())
    }
}

fn meta_text(partition: u32, rec: &Record) -> [Option<String>; 4] {
    [
        Some(partition.to_string()),
        Some(rec.offset.to_string()),
        rec.key
            .as_ref()
            .map(|k| String::from_utf8_lossy(k).into_owned()),
        rec.event_ts.map(|t| t.to_string()),
    ]
}
