//! `kappa run JOB --input NAME=PATH ... --output DIR`: a job over files.

use crate::english::count;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use clap::{Args, CommandFactory, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

use super::pipes::{PipeCopies, StdoutTarget, is_dash};
use super::workers::WorkerArgs;
use crate::engine::{Batch, BatchReport};
use crate::job::Job;
use crate::registry::Registry;
use crate::source::{BadRowPolicy, Format, InputFiles, ReadOptions};

/// Inputs larger than this get a progress bar (when stderr is a terminal).
const PROGRESS_MIN_BYTES: u64 = 4 << 20;

#[derive(Debug, Args)]
#[command(disable_help_flag = true)]
pub struct RunArgs {
    /// The job to run (see `kappa jobs`), or --sql.
    job: Option<String>,
    #[command(flatten)]
    sql: super::sql::SqlArgs,
    /// An input of the job: NAME=PATH, PATH a file or a directory of part
    /// files, or - for stdin (CSV, or --format).
    #[arg(short, long, value_name = "NAME=PATH", value_parser = name_value::<PathBuf>)]
    input: Vec<(String, PathBuf)>,
    /// Output directory: one NAME.csv per output, then _SUCCESS; or - to
    /// write a job's one output to stdout as CSV, once the run succeeded.
    #[arg(short, long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// A job parameter: K=V (see `kappa run JOB --help`).
    #[arg(short, long, value_name = "K=V", value_parser = name_value::<String>)]
    param: Vec<(String, String)>,
    /// Input format [default: from the file extension: .jsonl/.ndjson/.json, .txt, else CSV].
    #[arg(long, value_enum)]
    format: Option<FormatArg>,
    /// A null marker besides the empty field (e.g. NA, NULL, \N).
    #[arg(long, value_name = "STR")]
    null: Option<String>,
    /// What to do with a row that does not fit: fail the run, or skip and count it.
    #[arg(long, value_enum, default_value_t = OnBadRow::Fail)]
    on_bad_row: OnBadRow,
    /// Replace the outputs in an existing output directory.
    #[arg(long)]
    overwrite: bool,
    /// Output rows held in memory before the rest are sorted in temporary
    /// files (anonymous, beside the output directory): e.g. 512M, 2G.
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = parse_size)]
    sort_memory: usize,
    /// After the run, print per exchange (each join side and group-by) the
    /// records each worker received and the imbalance (max / mean).
    #[arg(long)]
    stats: bool,
    #[command(flatten)]
    late: LateArgs,
    #[command(flatten)]
    workers: WorkerArgs,
    /// Print help (with the job's parameters when a job is given).
    #[arg(short, long)]
    help: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum FormatArg {
    Csv,
    Jsonl,
    Text,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(super) enum OnBadRow {
    Fail,
    Skip,
}

impl OnBadRow {
    /// How sources read fields under this policy, with an extra null marker.
    pub(super) fn read_options(self, null: Option<String>) -> ReadOptions {
        let on_bad_row = match self {
            OnBadRow::Fail => BadRowPolicy::Fail,
            OnBadRow::Skip => BadRowPolicy::Skip,
        };
        ReadOptions { null, on_bad_row }
    }
}

/// Parses a size: `123`, `512K`, `32M`, `1G`.
fn parse_size(s: &str) -> Result<usize, String> {
    crate::ops::skew::parse_bytes(s)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| format!("expected a size such as 512M or 2G, got {s:?}"))
}

/// Parses `NAME=VALUE`.
pub(super) fn name_value<T: std::str::FromStr>(s: &str) -> Result<(String, T), String>
where
    T::Err: std::fmt::Display,
{
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=VALUE, got {s:?}"))?;
    if name.is_empty() {
        return Err(format!("empty name in {s:?}"));
    }
    Ok((
        name.to_string(),
        value.parse().map_err(|e: T::Err| e.to_string())?,
    ))
}

pub fn run(registry: &Registry, args: RunArgs) -> anyhow::Result<()> {
    let mut pipes = None;
    let result = run_job(registry, args, &mut pipes);
    match (&pipes, result) {
        (Some(pipes), Err(e)) if !super::is_broken_pipe(&e) => {
            Err(anyhow!(pipes.rename(&format!("{e:#}"))))
        }
        (_, result) => result,
    }
}

fn format_of(f: FormatArg) -> Format {
    match f {
        FormatArg::Csv => Format::Csv,
        FormatArg::Jsonl => Format::Jsonl,
        FormatArg::Text => Format::Text,
    }
}

/// The run; `pipes` gets the copies of piped inputs (made once the job
/// and its flags are known good, so a mistake does not wait for stdin).
fn run_job(
    registry: &Registry,
    mut args: RunArgs,
    pipes: &mut Option<PipeCopies>,
) -> anyhow::Result<()> {
    let has_sql = args.sql.sql.is_some() || args.sql.sql_text.is_some();
    let job = match (&args.job, has_sql) {
        (None, false) => None,
        (name, _) => {
            let inputs: Vec<&str> = args.input.iter().map(|(n, _)| n.as_str()).collect();
            Some(args.sql.job_or(registry, name.as_deref(), &inputs)?)
        }
    };
    let job = match job {
        Some(job) if !args.help => job,
        _ => return help(job.as_deref(), args.help),
    };
    let spec = job.spec();
    let given = args
        .output
        .clone()
        .ok_or_else(|| anyhow!("--output DIR is required"))?;
    let params = args.late.with_params(&spec, &args.param)?;
    let workers = args.workers.config()?;
    let threads = workers.total_workers();
    let (process, processes) = (workers.process, workers.processes);
    let stdout = is_dash(&given)
        .then(|| StdoutTarget::new(&spec, processes))
        .transpose()?;
    let output = stdout.as_ref().map_or(given.clone(), StdoutTarget::dir);
    let format = args.format.map(format_of);
    *pipes = PipeCopies::take(&mut args.input, format, processes)?;
    let mut batch = Batch::new(job)
        .params(&params)
        .format(format)
        .read_options(args.on_bad_row.read_options(args.null.clone()))
        .workers(workers)
        .sort_memory(args.sort_memory);
    for (name, path) in &args.input {
        batch = batch.input(name, path);
    }
    let planned = batch.plan()?;
    let total_bytes: u64 = planned.inputs.iter().map(InputFiles::bytes).sum();
    let bar = progress_bar(total_bytes);
    if let Some(bar) = bar.clone() {
        let shown = given.clone();
        batch = batch.on_progress(Arc::new(move |n: u64| {
            bar.inc(n);
            if bar.position() >= total_bytes && bar.length() == Some(total_bytes) {
                // Read: the rest (exchanges, arrangements, sorting) has no
                // byte count, so the bar turns into a spinner that says so.
                phase(
                    &bar,
                    &format!(
                        "inputs read; computing, sorting and writing the outputs to {}",
                        shown.display()
                    ),
                );
            }
        }));
    }
    let stats = args.stats.then(Arc::<crate::stats::Recorder>::default);
    if let Some(stats) = &stats {
        batch = batch.stats(stats.clone());
    }
    let result = batch.run_into(planned, &output, args.overwrite);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let result = result.with_context(|| format!("job {} failed", spec.name))?;
    if !result.holds_outputs {
        let rows_in: u64 = result.rows_in.iter().map(|(_, n)| n).sum();
        say!(
            "kappa run {}: process {} of {} done ({rows_in} rows in over all processes); process 0 committed the outputs to {}",
            spec.name,
            process,
            processes,
            output.display()
        );
        return Ok(());
    }
    tracing::info!(elapsed = ?result.elapsed, "outputs committed");
    if let Some(stdout) = &stdout {
        stdout.copy_out()?;
    }
    eprint!("{}", summary(spec.name, threads, &result, &given));
    for d in &result.decisions {
        say!("  {d}");
    }
    if let Some(stats) = stats {
        eprint!("{}", stats.table());
    }
    Ok(())
}

/// `kappa run --help` (with the job's parameters when one is named), or
/// the same text and an error when no job is given.
fn help(job: Option<&dyn Job>, asked: bool) -> anyhow::Result<()> {
    let mut help = super::Cli::command()
        .find_subcommand_mut("run")
        .expect("run command")
        .render_help()
        .to_string();
    if let Some(job) = job {
        help.push_str("\nJob:\n");
        help.push_str(&super::jobs::describe(&job.spec()));
    }
    print!("{help}");
    if asked {
        Ok(())
    } else {
        Err(anyhow!("no job given (see `kappa jobs`)"))
    }
}

/// Turns the bar into a spinner for a phase that has no byte count.
fn phase(bar: &ProgressBar, what: &str) {
    bar.set_length(0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            .expect("valid template"),
    );
    bar.set_message(what.to_string());
}

fn progress_bar(total: u64) -> Option<ProgressBar> {
    if total < PROGRESS_MIN_BYTES || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}")
            .expect("valid template"),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    Some(bar)
}

/// The late-event policy flags, shorthands for the parameters `late` and
/// `allowed_lateness` of jobs with an event-time column.
#[derive(Debug, Args)]
pub struct LateArgs {
    /// Late events, for jobs with an event-time column: correct them (update
    /// their windows; stream == batch), or drop those older than their
    /// partition's watermark minus --allowed-lateness (bounded state).
    #[arg(long, value_enum, value_name = "POLICY")]
    late: Option<LatePolicyArg>,
    /// With --late drop: how far behind the watermark an event may be (e.g. 10m, 30s, 500ms).
    #[arg(long, value_name = "DURATION")]
    allowed_lateness: Option<String>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LatePolicyArg {
    Correct,
    Drop,
}

impl LateArgs {
    /// `params` with the flags added as the job's late-event parameters.
    pub fn with_params(
        &self,
        spec: &crate::job::JobSpec,
        params: &[(String, String)],
    ) -> anyhow::Result<Vec<(String, String)>> {
        let mut params = params.to_vec();
        let flags = [
            ("late", self.late.map(|p| format!("{p:?}").to_lowercase())),
            ("allowed_lateness", self.allowed_lateness.clone()),
        ];
        for (name, value) in flags {
            let Some(value) = value else { continue };
            if spec.name == crate::sql::JOB_NAME {
                bail!(
                    "a SQL job declares its late-event policy in the script: \
                     CREATE TABLE t (..., WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE) drops \
                     rows of t more than 5 minutes behind the latest ts (--{} does not apply)",
                    name.replace('_', "-")
                );
            }
            if !spec.params.iter().any(|p| p.name == name) {
                bail!(
                    "job {} has no event-time column: --{} applies to jobs that have one \
                     (their parameters include {name})",
                    spec.name,
                    name.replace('_', "-")
                );
            }
            params.push((name.to_string(), value));
        }
        Ok(params)
    }
}

/// The end-of-run summary for stderr.
fn summary(job: &str, workers: usize, result: &BatchReport, dir: &std::path::Path) -> String {
    let rows_in: u64 = result.rows_in.iter().map(|(_, n)| n).sum();
    let rows_out: u64 = result.rows_out.iter().map(|(_, n)| n).sum();
    let secs = result.elapsed.as_secs_f64();
    let ins: Vec<String> = result
        .rows_in
        .iter()
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    let outs: Vec<String> = result
        .rows_out
        .iter()
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    let mut s = format!(
        "kappa run {job}: {} in ({}), {} out ({}), {secs:.2} s on {}, {:.0} rows/s -> {}\n",
        count(rows_in, "row"),
        ins.join(", "),
        count(rows_out, "row"),
        outs.join(", "),
        count(workers as u64, "worker"),
        rows_in as f64 / secs.max(1e-9),
        if is_dash(dir) {
            "stdout".into()
        } else {
            dir.display().to_string()
        }
    );
    for ((input, _), n) in result.rows_in.iter().zip(&result.late_dropped) {
        if *n > 0 {
            s.push_str(&format!(
                "dropped {} in input '{input}' (late=drop)\n",
                count(*n, "late event")
            ));
        }
    }
    for ((input, _), bad) in result.rows_in.iter().zip(&result.bad_rows) {
        if bad.count > 0 {
            s.push_str(&format!(
                "skipped {} in input '{input}'; first ones:\n",
                count(bad.count, "bad row")
            ));
            for (at, problem) in &bad.examples {
                s.push_str(&format!("  {at}: {problem}\n"));
            }
        }
    }
    s
}
