//! The `kappa` command line (clap derive). Raw arguments are turned into
//! validated configurations here, so runners never see clap; errors get
//! their context here (anyhow) and are printed as a chain.

/// `print!` and `println!` that return the write's `io::Result` instead of
/// panicking: a closed pipe (`kappa table show t | head -1`) becomes an
/// error that [`main`] ends quietly on, as `cat` would.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)
    }};
}
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

mod cluster;
mod jobs;
mod log;
mod nexmark;
mod pipes;
mod reprocess;
mod run;
mod sources;
mod sql;
mod stream;
mod table;
mod ui;
mod verify;
mod workers;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::registry::Registry;

/// kappa: one dataflow job, the same answer in batch, stream and replay.
#[derive(Debug, Parser)]
#[command(name = "kappa", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a job over files (CSV, JSON lines or text) and commit its outputs to a directory.
    Run(run::RunArgs),
    /// List the jobs with their inputs, parameters and outputs.
    Jobs(jobs::JobsArgs),
    /// The retained log: create, list, describe, produce, consume, compact, retain topics.
    Log(log::LogArgs),
    /// Run a job over log topics, keeping its outputs as tables (exactly once).
    Stream(stream::StreamArgs),
    /// Replay the log into the next table version beside the live one; swap when caught up.
    Reprocess(reprocess::ReprocessArgs),
    /// Output tables: list, show, status, swap and drop versions.
    Table(table::TableArgs),
    /// Nexmark benchmark events: `gen` writes persons, auctions and bids to topics or CSV files.
    Nexmark(nexmark::NexmarkArgs),
    /// Start the processes of one cluster run on this host: `kappa cluster -n 2 -- run JOB ...`.
    Cluster(cluster::ClusterArgs),
    /// Serve the status page of every deployment in a table store (no job runs).
    Ui(ui::UiArgs),
    /// SQL scripts: `explain` prints the plan of one (run them with `run|stream|reprocess --sql`).
    Sql(sql::SqlCommandArgs),
}

/// Runs the command line `args` (the first is the program name) over the
/// jobs of `registry`; the process exit code.
pub fn main<I, T>(registry: &Registry, args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    init_logging();
    let cli = Cli::parse_from(args);
    let result = match cli.command {
        Command::Run(args) => run::run(registry, args),
        Command::Jobs(args) => jobs::list(registry, args),
        Command::Log(args) => log::run(args),
        Command::Stream(args) => stream::stream(registry, args),
        Command::Reprocess(args) => reprocess::reprocess(registry, args),
        Command::Table(args) => table::run(registry, args),
        Command::Nexmark(args) => nexmark::run(args),
        Command::Ui(args) => ui::run(args),
        Command::Sql(args) => sql::run(args),
        Command::Cluster(args) => match cluster::cluster(args) {
            Ok(code) => return code,
            Err(e) => Err(e),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of our output went away (`| head`): nothing is wrong.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            say!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Whether an error is, at its root, a write to a closed pipe.
pub(crate) fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Logs go to stderr through tracing; the level comes from `RUST_LOG` (default: warnings).
fn init_logging() {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init()
        .ok();
}
