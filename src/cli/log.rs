//! `kappa log ...`: the retained log from the command line, with the habits
//! of Kafka's console tools (`kafka-topics`, `kafka-console-producer`,
//! `kafka-console-consumer`, `kafka-consumer-groups`).
//!
//! The log directory is `--log-dir DIR`, else `$KAPPA_LOG_DIR`, else
//! `./kappa-data/log`. Tables and records go to stdout; what the log
//! repaired on open (torn tails truncated, interrupted compactions finished
//! or rolled back) and warnings (unknown files) go to stderr, as does the
//! summary of produce (its stdout carries `--ack` lines). Subcommands live in `log/`:
//! `show.rs` (list, describe), `produce.rs` (with `input.rs`), `consume.rs`,
//! `admin.rs` (delete, alter, groups).

mod admin;
mod consume;
mod input;
mod produce;
mod show;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use crate::log::{DeleteReason, Log, OpenReport, TopicConfig, TopicWriter};

#[derive(Debug, Args)]
pub struct LogArgs {
    /// The log directory (created if missing).
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        env = "KAPPA_LOG_DIR",
        default_value = "kappa-data/log"
    )]
    log_dir: PathBuf,
    #[command(subcommand)]
    command: LogCommand,
}

#[derive(Debug, Subcommand)]
enum LogCommand {
    /// Create a topic.
    Create(CreateArgs),
    /// List the topics with their partitions, records and bytes.
    List,
    /// Show a topic: configuration, columns, partitions, consumer groups and their lag.
    Describe(TopicArg),
    /// Append rows (CSV with a header, or JSON lines) from stdin or a file.
    Produce(produce::ProduceArgs),
    /// Print records as CSV or JSON lines.
    Consume(consume::ConsumeArgs),
    /// Compact a compacted topic now: keep only the latest record per key.
    Compact(CompactArgs),
    /// Apply the topic's retention now: delete whole segments past its limits.
    Retain(TopicArg),
    /// Delete a topic with its records and groups (refused while a deployment reads it).
    Delete(admin::DeleteArgs),
    /// Change a topic's retention settings.
    Alter(admin::AlterArgs),
    /// Consumer groups: list them with their lag, delete one, or reset its offsets.
    Groups(admin::GroupsArgs),
}

#[derive(Debug, Args)]
struct TopicArg {
    /// The topic.
    topic: String,
}

#[derive(Debug, Args)]
struct CreateArgs {
    /// The topic name (ASCII letters, digits, '.', '_', '-').
    topic: String,
    /// Number of partitions; keyed records go to crc32c(key) % N.
    #[arg(long, short, value_name = "N", default_value_t = 1)]
    partitions: u32,
    /// Delete sealed segments whose newest record is older than this (ms).
    #[arg(long, value_name = "MS")]
    retention_ms: Option<i64>,
    /// Keep each partition under this many bytes by deleting its oldest segments.
    #[arg(long, value_name = "BYTES")]
    retention_bytes: Option<u64>,
    /// Compact the topic by key (a changelog): `kappa log compact` keeps the latest record per key.
    #[arg(long)]
    compact: bool,
    /// Roll a new segment once the active one would grow past this.
    #[arg(long, value_name = "BYTES", default_value_t = TopicConfig::default().segment_bytes)]
    segment_bytes: u64,
    /// How long compaction keeps a tombstone (an empty value) after it was appended (ms).
    #[arg(long, value_name = "MS", default_value_t = TopicConfig::default().delete_retention_ms)]
    delete_retention_ms: i64,
}

#[derive(Debug, Args)]
struct CompactArgs {
    /// The topic.
    topic: String,
    /// Pause this long before every step of the segment swap (crash tests).
    #[arg(long, value_name = "MS", hide = true)]
    step_pause_ms: Option<u64>,
}

pub fn run(args: LogArgs) -> anyhow::Result<()> {
    let log = Log::open(&args.log_dir)
        .with_context(|| format!("cannot open log directory {}", args.log_dir.display()))?;
    for warning in log.warnings() {
        say!("warning: {warning}");
    }
    match args.command {
        LogCommand::Create(a) => create(&log, a),
        LogCommand::List => show::list(&log),
        LogCommand::Describe(a) => show::describe(&log, &a.topic),
        LogCommand::Produce(a) => produce::produce(&log, a),
        LogCommand::Consume(a) => consume::consume(&log, a),
        LogCommand::Compact(a) => compact(&log, a),
        LogCommand::Retain(a) => retain(&log, &a.topic),
        LogCommand::Delete(a) => admin::delete(&log, a),
        LogCommand::Alter(a) => admin::alter(&log, a),
        LogCommand::Groups(a) => admin::groups(&log, a),
    }
}

fn create(log: &Log, a: CreateArgs) -> anyhow::Result<()> {
    let config = TopicConfig {
        partitions: a.partitions,
        retention_ms: a.retention_ms,
        retention_bytes: a.retention_bytes,
        compact: a.compact,
        delete_retention_ms: a.delete_retention_ms,
        segment_bytes: a.segment_bytes,
        ..TopicConfig::default()
    };
    log.create_topic(&a.topic, config)
        .with_context(|| format!("cannot create topic '{}'", a.topic))?;
    say!(
        "created topic '{}' with {} in {}",
        a.topic,
        crate::english::count(a.partitions.into(), "partition"),
        log.root().display()
    );
    Ok(())
}

/// Opens the topic's single writer and reports what opening repaired.
pub(super) fn open_writer(
    log: &Log,
    topic: &str,
    opts: crate::log::WriterOptions,
) -> anyhow::Result<TopicWriter> {
    let writer = log
        .writer_with(topic, opts)
        .with_context(|| format!("cannot open topic '{topic}' for writing"))?;
    report_open(writer.open_report());
    Ok(writer)
}

fn report_open(report: &OpenReport) {
    for r in &report.recoveries {
        say!("recovered: {r}");
    }
    for w in &report.warnings {
        say!("warning: {w}");
    }
}

fn now_ms() -> i64 {
    (crate::log::system_clock())()
}

fn compact(log: &Log, a: CompactArgs) -> anyhow::Result<()> {
    let mut w = open_writer(log, &a.topic, Default::default())?;
    if !w.config().compact {
        bail!(
            "topic '{}' is not compacted (create it with --compact)",
            a.topic
        );
    }
    let pause = Duration::from_millis(a.step_pause_ms.unwrap_or(0));
    let reports = w
        .compact_paced(now_ms(), pause)
        .with_context(|| format!("compaction of topic '{}' failed", a.topic))?;
    for r in reports {
        outln!(
            "partition {}: removed {}; {} rewritten, {} deleted; {} -> {}",
            r.partition,
            crate::english::count(r.records_removed, "record"),
            crate::english::count(r.segments_rewritten as u64, "segment"),
            r.segments_deleted,
            show::human_bytes(r.bytes_before),
            show::human_bytes(r.bytes_after),
        )?;
    }
    Ok(())
}

fn retain(log: &Log, topic: &str) -> anyhow::Result<()> {
    let mut w = open_writer(log, topic, Default::default())?;
    let deleted = w
        .retain(now_ms())
        .with_context(|| format!("retention of topic '{topic}' failed"))?;
    if deleted.is_empty() {
        outln!("topic '{topic}': nothing past its retention limits")?;
    }
    for d in deleted {
        let why = match d.reason {
            DeleteReason::Age => "older than retention-ms",
            DeleteReason::Size => "over retention-bytes",
        };
        outln!(
            "partition {}: deleted segment at offset {} ({}, {why})",
            d.partition,
            d.base_offset,
            show::human_bytes(d.bytes)
        )?;
    }
    Ok(())
}
