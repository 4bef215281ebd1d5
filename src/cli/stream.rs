//! `kappa stream JOB --input NAME=TOPIC ...`: a job over log topics, its
//! outputs kept as tables, exactly once.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use super::run::{LateArgs, OnBadRow, name_value};
use super::sources::SourceArgs;
use super::workers::WorkerArgs;
use crate::engine::{EngineError, OnLog, Started, StreamSettings};
use crate::english::count;
use crate::metrics::StreamMetrics;
use crate::registry::Registry;
use crate::runner::RunError;
use crate::runner::stream::{CatchUp, EpochConfig};
use crate::sink::changelog::SinkTarget;
use crate::source::inputs::Sources;
use crate::status::StatusServer;
use crate::table::{StoreAddr, TableStore};

/// The log directory flag (shared by every command that reads the log).
#[derive(Debug, Args)]
pub struct LogDirArg {
    /// The log directory.
    #[arg(
        long,
        value_name = "DIR",
        env = "KAPPA_LOG_DIR",
        default_value = "kappa-data/log"
    )]
    pub log_dir: PathBuf,
}

/// Where the inputs and the tables live (shared by stream, reprocess, table).
#[derive(Debug, Args)]
pub struct StoreArgs {
    #[command(flatten)]
    pub sources: SourceArgs,
    /// The table store: a SQLite file, or a PostgreSQL database
    /// (`postgresql://USER@HOST:PORT/DB[?schema=NAME]`).
    #[arg(
        long,
        value_name = "PATH|URL",
        env = "KAPPA_TABLE_DB",
        default_value = crate::table::DEFAULT_PATH
    )]
    pub table_db: StoreAddr,
}

/// Arguments shared by `stream` and `reprocess`.
#[derive(Debug, Args)]
pub struct JobOnLogArgs {
    /// The job to run (see `kappa jobs`), or --sql.
    pub job: Option<String>,
    #[command(flatten)]
    pub sql: super::sql::SqlArgs,
    /// An input of the job: NAME=TOPIC (a topic of the log) or
    /// NAME=kafka://HOST:PORT/TOPIC[?format=json|csv&columns=..&changelog=true&time=COL].
    #[arg(short, long, value_name = "NAME=TOPIC", value_parser = name_value::<String>, required = true)]
    pub input: Vec<(String, String)>,
    /// A job parameter: K=V (see `kappa run JOB --help`).
    #[arg(short, long, value_name = "K=V", value_parser = name_value::<String>)]
    pub param: Vec<(String, String)>,
    /// Name of the output table (for a job with one output) [default: the output's name].
    #[arg(long, value_name = "NAME")]
    pub table: Option<String>,
    #[command(flatten)]
    pub late: LateArgs,
    #[command(flatten)]
    pub options: StreamOptions,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// How a job runs over the log (shared by stream, reprocess and rollback).
#[derive(Debug, Args)]
pub struct StreamOptions {
    /// Longest wait before an epoch is closed (ms).
    #[arg(long, value_name = "MS", default_value_t = 100)]
    pub max_latency_ms: u64,
    /// Most records one worker puts in one epoch.
    #[arg(long, value_name = "N", default_value_t = 100_000,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1 << 31))]
    pub max_batch: usize,
    /// A null marker besides the empty field (e.g. NA, NULL, \N).
    #[arg(long, value_name = "STR")]
    pub null: Option<String>,
    /// What to do with a record that does not fit: fail, or skip and count it.
    #[arg(long, value_enum, default_value_t = OnBadRow::Fail)]
    pub on_bad_row: OnBadRow,
    /// Stop once every input partition has been read to its end.
    #[arg(long)]
    pub until_caught_up: bool,
    /// Checkpoints: every commit stores the state its records changed, and
    /// at most every DURATION (and on a clean stop), once what was stored
    /// since is a quarter of the state, it is merged into one full
    /// checkpoint; a restart reads the log only after the committed offsets.
    /// `off`: no state is kept, and a restart replays the log.
    #[arg(long, value_name = "DURATION|off", default_value = "1m",
          value_parser = parse_checkpoint_interval)]
    pub checkpoint_interval: CheckpointInterval,
    /// No progress lines on stderr.
    #[arg(short, long)]
    pub quiet: bool,
    /// Serve Prometheus metrics (/metrics) and the status page (/) here:
    /// HOST:PORT, or :PORT for 127.0.0.1 (on process 0 of a cluster run).
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<String>,
    #[command(flatten)]
    pub workers: WorkerArgs,
}

impl StoreArgs {
    /// Opens the log and the table store.
    pub fn open(&self) -> anyhow::Result<(Sources, Box<dyn TableStore>)> {
        Ok((self.sources.open()?, self.open_store()?))
    }

    /// Opens the table store, creating it if missing: only once the job is
    /// planned, so that a command refused for its inputs leaves no store.
    pub fn open_store(&self) -> anyhow::Result<Box<dyn TableStore>> {
        crate::table::open(&self.table_db)
            .with_context(|| format!("cannot open table store {}", self.table_db.display()))
    }
}

/// `--checkpoint-interval`: how often the state is merged (`None`: off).
#[derive(Clone, Copy, Debug)]
pub struct CheckpointInterval(pub Option<Duration>);

fn parse_checkpoint_interval(text: &str) -> Result<CheckpointInterval, String> {
    if text == "off" {
        return Ok(CheckpointInterval(None));
    }
    let ms = crate::time::parse_duration(text, crate::time::TimeUnit::Millis)?;
    if ms <= 0 {
        return Err(format!(
            "{text:?}: give a positive duration (e.g. 30s, 1m), or off"
        ));
    }
    Ok(CheckpointInterval(Some(Duration::from_millis(ms as u64))))
}

#[derive(Debug, Args)]
pub struct StreamArgs {
    #[command(flatten)]
    pub job: JobOnLogArgs,
    /// Send each committed epoch's changes of output OUTPUT on to a Kafka
    /// topic as an upsert changelog (key: the output key; value: the row as
    /// a JSON object, null when deleted): OUTPUT=kafka://HOST:PORT/TOPIC.
    #[arg(long, value_name = "OUTPUT=URL", value_parser = name_value::<String>)]
    pub sink: Vec<(String, String)>,
}

/// Plans the job named on the command line over its topics (`--table` renames its output).
pub fn plan_on_log(
    registry: &Registry,
    args: &JobOnLogArgs,
    sources: &Sources,
) -> anyhow::Result<OnLog> {
    let inputs: Vec<&str> = args.input.iter().map(|(n, _)| n.as_str()).collect();
    let job = args.sql.job_or(registry, args.job.as_deref(), &inputs)?;
    let params = args.late.with_params(&job.spec(), &args.param)?;
    let mut on_log = OnLog::plan(job, &params, &args.input, sources)?;
    if let Some(table) = &args.table {
        on_log.rename_table(table)?;
    }
    Ok(on_log)
}

impl StreamOptions {
    /// Whether this is the first process of its run (or the only one):
    /// the one that opens the table store and commits. The others only
    /// read their partitions and never touch the store.
    pub fn first_process(&self) -> anyhow::Result<bool> {
        let workers = self.workers.config()?;
        if !workers.is_first_process() {
            say!(
                "kappa: process {} of {} reads its share of the partitions; process 0 commits",
                workers.process,
                workers.processes
            );
        }
        Ok(workers.is_first_process())
    }

    /// The settings of a run over the log and table store of `store`,
    /// stopped by SIGINT or SIGTERM at the next epoch boundary.
    pub fn settings(&self, store: &StoreArgs) -> anyhow::Result<StreamSettings> {
        let stop = Arc::new(AtomicBool::new(false));
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(signal, stop.clone())
                .context("cannot install signal handler")?;
        }
        let workers = self.workers.config()?;
        Ok(StreamSettings {
            table_db: store.table_db.clone(),
            workers,
            options: self.on_bad_row.read_options(self.null.clone()),
            epochs: EpochConfig {
                max_latency: Duration::from_millis(self.max_latency_ms),
                max_records: self.max_batch,
            },
            until_caught_up: self.until_caught_up,
            quiet: self.quiet,
            stop,
            metrics: None,
            sinks: Vec::new(),
            checkpoints: self.checkpoint_interval.0,
        })
    }
}

/// Runs `on_log` into `started`'s tables and reports how it ended.
pub fn run_and_report(
    on_log: OnLog,
    started: Option<Started>,
    options: &StreamOptions,
    store: &StoreArgs,
    catch_up: Option<CatchUp>,
    sinks: Vec<SinkTarget>,
) -> anyhow::Result<()> {
    let mut settings = options.settings(store)?;
    settings.sinks = sinks;
    // Process 0 drives the deployment and alone serves its metrics.
    let _server = match (&options.metrics_addr, &started) {
        (Some(addr), Some(started)) => {
            let metrics = Arc::new(StreamMetrics::new(&started.deployment));
            settings.metrics = Some(metrics.clone());
            Some(serve_status(addr, &store.table_db, Some(metrics))?)
        }
        _ => None,
    };
    let result = on_log
        .run(started, &settings, catch_up)
        .map_err(|e| match e {
            EngineError::Run(RunError::Table(e)) | EngineError::Table(e) => {
                anyhow::Error::new(e).context(format!("table store {}", store.table_db.display()))
            }
            other => other.into(),
        });
    let result = result.context("stream failed")?;
    let workers = &settings.workers;
    // Bad records are counted as read, as `kappa table verify` counts the
    // offsets a deployment applied.
    let read = match result.bad_rows.count {
        0 => count(result.records, "record"),
        bad => format!(
            "{} ({} skipped)",
            count(result.records + bad, "record"),
            count(bad, "bad record")
        ),
    };
    match workers.processes {
        1 => say!("kappa stream: stopped after {read}"),
        n => say!(
            "kappa stream: process {} of {n} stopped after reading {read}",
            workers.process
        ),
    }
    if result.bad_rows.count > 0 {
        say!(
            "skipped {}; first ones:",
            count(result.bad_rows.count, "bad record")
        );
        for (at, problem) in &result.bad_rows.examples {
            say!("  {at}: {problem}");
        }
    }
    if result.retired {
        say!("kappa stream: this version was retired (another version is live now); exiting");
    }
    Ok(())
}

/// Starts the metrics and status page server on `addr` and says where.
pub fn serve_status(
    addr: &str,
    table_db: &StoreAddr,
    metrics: Option<Arc<StreamMetrics>>,
) -> anyhow::Result<StatusServer> {
    let addr = crate::status::parse_addr(addr)?;
    let with_metrics = metrics.is_some();
    let server = StatusServer::start(addr, table_db.clone(), metrics)?;
    let at = server.addr();
    match with_metrics {
        true => say!("kappa: status page on http://{at}/, metrics on http://{at}/metrics"),
        false => say!("kappa: status page on http://{at}/"),
    }
    Ok(server)
}

pub fn stream(registry: &Registry, args: StreamArgs) -> anyhow::Result<()> {
    let StreamArgs { job: args, sink } = args;
    let sources = args.store.sources.open()?;
    let on_log = plan_on_log(registry, &args, &sources)?;
    let sinks = sink
        .iter()
        .map(|(output, url)| SinkTarget::new(output, url, sources.kafka.clone()))
        .collect::<Result<Vec<_>, String>>()
        .map_err(anyhow::Error::msg)?;
    if let Some(twice) = crate::table::ident::first_duplicate(sink.iter().map(|(o, _)| o.as_str()))
    {
        anyhow::bail!("--sink {twice}=... is given twice: one changelog sink per output");
    }
    if !args.options.first_process()? {
        return run_and_report(on_log, None, &args.options, &args.store, None, Vec::new());
    }
    // A store this command creates is removed again if it fails before
    // anything is committed to it.
    let new_store = crate::table::NewStore::find(&args.store.table_db);
    let result = open_and_stream(&args, on_log, sinks);
    if let (Err(_), Some(new_store)) = (&result, new_store) {
        let _ = new_store.remove_if_unused();
    }
    result
}

fn open_and_stream(
    args: &JobOnLogArgs,
    on_log: OnLog,
    sinks: Vec<SinkTarget>,
) -> anyhow::Result<()> {
    let mut store = args.store.open_store()?;
    let outputs = on_log.output_names().join(",");
    let started = on_log.start_live(&mut *store)?;
    let version = started.deployment.version;
    match started.created {
        true => say!("kappa stream: created {outputs} {version}"),
        false => say!("kappa stream: resuming {outputs} {version} from its committed offsets"),
    }
    drop(store);
    run_and_report(
        on_log,
        Some(started),
        &args.options,
        &args.store,
        None,
        sinks,
    )
}
