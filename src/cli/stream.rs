//! `kappa stream JOB --input NAME=TOPIC ...`: a job over log topics, its
//! outputs kept as tables, exactly once.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use clap::Args;

use super::run::{LateArgs, OnBadRow, find_job, name_value};
use super::workers::WorkerArgs;
use crate::job::{Job, Params, Plan};
use crate::log::Log;
use crate::runner::RunError;
use crate::runner::stream::{CatchUp, Claim, EpochConfig, StreamRun};
use crate::source::topic::TopicInput;
use crate::table::{
    Deployment, DeploymentLock, DeploymentState, NewDeployment, TableError, TableStore,
};

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

/// Where the log and the tables live (shared by stream, reprocess, table).
#[derive(Debug, Args)]
pub struct StoreArgs {
    #[command(flatten)]
    pub log: LogDirArg,
    /// The table store (a SQLite database).
    #[arg(
        long,
        value_name = "PATH",
        env = "KAPPA_TABLE_DB",
        default_value = "kappa-data/tables.db"
    )]
    pub table_db: PathBuf,
}

/// Arguments shared by `stream` and `reprocess`.
#[derive(Debug, Args)]
pub struct JobOnLogArgs {
    /// The job to run (see `kappa jobs`).
    pub job: String,
    /// An input of the job: NAME=TOPIC.
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
    /// No progress lines on stderr.
    #[arg(short, long)]
    pub quiet: bool,
    #[command(flatten)]
    pub workers: WorkerArgs,
}

impl StoreArgs {
    /// Opens the log and the table store.
    pub fn open(&self) -> anyhow::Result<(Log, TableStore)> {
        Ok((self.open_log()?, self.open_store()?))
    }

    /// Opens the log.
    pub fn open_log(&self) -> anyhow::Result<Log> {
        let dir = &self.log.log_dir;
        Log::open(dir).with_context(|| format!("cannot open log directory {}", dir.display()))
    }

    /// Opens the table store, creating it if missing: only once the job is
    /// planned, so that a command refused for its inputs leaves no store.
    pub fn open_store(&self) -> anyhow::Result<TableStore> {
        TableStore::open(&self.table_db)
            .with_context(|| format!("cannot open table store {}", self.table_db.display()))
    }
}

#[derive(Debug, Args)]
pub struct StreamArgs {
    #[command(flatten)]
    pub job: JobOnLogArgs,
}

/// A job planned over topics.
pub struct Planned {
    pub job: &'static dyn Job,
    pub params: Params,
    pub inputs: Vec<TopicInput>,
    pub plan: Plan,
}

/// Resolves the job, its parameters and topics, and plans it.
pub fn plan_on_log(args: &JobOnLogArgs, log: &Log) -> anyhow::Result<Planned> {
    let spec = find_job(&args.job)?.spec();
    let params = args.late.with_params(&spec, &args.param)?;
    let mut planned = plan_job(&args.job, &params, &args.input, log)?;
    if let Some(table) = &args.table {
        match planned.plan.outputs.as_mut_slice() {
            [only] => only.name = table.clone(),
            _ => bail!(
                "--table names the output of a job with one output; {} has {}",
                args.job,
                planned.plan.outputs.len()
            ),
        }
    }
    Ok(planned)
}

/// Plans job `name` with `params` over `inputs` (input name, topic).
pub fn plan_job(
    name: &str,
    params: &[(String, String)],
    inputs: &[(String, String)],
    log: &Log,
) -> anyhow::Result<Planned> {
    let job = find_job(name)?;
    let spec = job.spec();
    let params = Params::resolve(&spec, params)?;
    for (name, _) in inputs {
        if !spec.inputs.iter().any(|i| i.name == name) {
            bail!("job {} has no input {name:?}", spec.name);
        }
    }
    let inputs = spec
        .inputs
        .iter()
        .map(|i| {
            let topic = inputs
                .iter()
                .find(|(n, _)| n == i.name)
                .map(|(_, t)| t.as_str());
            let topic = topic
                .ok_or_else(|| anyhow!("missing input: --input {}=TOPIC ({})", i.name, i.about))?;
            Ok(TopicInput::resolve(log, i.name, topic)?)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let schemas: Vec<_> = inputs.iter().map(|i| i.schema.clone()).collect();
    let plan = job
        .plan(&params, &schemas)
        .with_context(|| format!("cannot plan job {}", spec.name))?;
    Ok(Planned {
        job,
        params,
        inputs,
        plan,
    })
}

impl Planned {
    /// The names of the planned outputs (the tables' view names).
    pub fn output_names(&self) -> Vec<String> {
        self.plan.outputs.iter().map(|o| o.name.clone()).collect()
    }

    /// Names the outputs as deployment `d` named them (`--table` renames
    /// them at creation; resuming or verifying must use the same names).
    pub fn name_outputs_as(&mut self, d: &Deployment) {
        for (out, built) in self.plan.outputs.iter_mut().zip(&d.outputs) {
            out.name = built.name.clone();
        }
    }
    /// The deployment description of this job.
    pub fn new_deployment(&self, state: DeploymentState) -> NewDeployment {
        let spec = self.job.spec();
        NewDeployment {
            job: spec.name.to_string(),
            job_version: spec.version,
            params: self
                .params
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            inputs: self
                .inputs
                .iter()
                .map(|i| (i.schema.name.clone(), i.topic.clone()))
                .collect(),
            outputs: self.plan.outputs.clone(),
            state,
            note: None,
        }
    }

    /// Whether `d` was built by this job, version, parameters and inputs.
    pub fn matches(&self, d: &Deployment) -> bool {
        let new = self.new_deployment(d.state);
        d.job == new.job
            && d.job_version == new.job_version
            && d.params == new.params
            && d.inputs == new.inputs
    }

    /// Runs the job over the log into `deployment`'s tables; a building
    /// deployment goes live as `catch_up` says.
    pub fn run(
        self,
        args: &StreamOptions,
        store: &StoreArgs,
        claim: Claim,
        catch_up: Option<CatchUp>,
    ) -> anyhow::Result<()> {
        let stop = Arc::new(AtomicBool::new(false));
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(signal, stop.clone())
                .context("cannot install signal handler")?;
        }
        let run = StreamRun {
            plan: self.plan,
            inputs: self.inputs,
            log_dir: store.log.log_dir.clone(),
            table_db: store.table_db.clone(),
            claim,
            workers: args.workers.config()?,
            options: args.on_bad_row.read_options(args.null.clone()),
            epochs: EpochConfig {
                max_latency: Duration::from_millis(args.max_latency_ms),
                max_records: args.max_batch,
            },
            until_caught_up: args.until_caught_up,
            stop,
            quiet: args.quiet,
            catch_up,
        };
        let result = run.run().map_err(|e| match e {
            RunError::Table(e) => {
                anyhow::Error::new(e).context(format!("table store {}", store.table_db.display()))
            }
            other => other.into(),
        });
        let result = result.context("stream failed")?;
        eprintln!("kappa stream: stopped after {} records", result.records);
        if result.bad_rows.count > 0 {
            eprintln!("skipped {} bad records; first ones:", result.bad_rows.count);
            for (at, problem) in &result.bad_rows.examples {
                eprintln!("  {at}: {problem}");
            }
        }
        if result.retired {
            eprintln!(
                "kappa stream: this version was retired (another version is live now); exiting"
            );
        }
        Ok(())
    }
}

pub fn stream(args: StreamArgs) -> anyhow::Result<()> {
    let args = args.job;
    let log = args.store.open_log()?;
    let planned = plan_on_log(&args, &log)?;
    // A store this command creates is removed again if it fails before
    // anything is committed to it.
    let fresh = !args.store.table_db.exists();
    let result = open_and_stream(&args, planned);
    if result.is_err()
        && fresh
        && let Ok(store) = TableStore::open_existing(&args.store.table_db)
    {
        let _ = store.remove_if_empty();
    }
    result
}

fn open_and_stream(args: &JobOnLogArgs, planned: Planned) -> anyhow::Result<()> {
    let mut store = args.store.open_store()?;
    let outputs = planned.output_names();
    let (deployment, created) = live_or_create(&mut store, &planned)?;
    let lock = DeploymentLock::acquire(store.path(), &deployment)?;
    if created {
        eprintln!(
            "kappa stream: created {} {}",
            outputs.join(","),
            deployment.version
        );
    } else {
        eprintln!(
            "kappa stream: resuming {} {} from its committed offsets",
            outputs.join(","),
            deployment.version
        );
    }
    drop(store);
    let claim = Claim {
        deployment: deployment.id,
        lock,
        created,
    };
    planned.run(&args.options, &args.store, claim, None)
}

/// The live deployment this job resumes, or a new live one (and whether it
/// was created). Two processes starting at once may both find none: the
/// second's creation is refused, and it resumes the first's deployment
/// (whose lock then tells it that another process drives it).
fn live_or_create(store: &mut TableStore, planned: &Planned) -> anyhow::Result<(Deployment, bool)> {
    let outputs = planned.output_names();
    let live = store.live_for_job(planned.job.spec().name, &outputs)?;
    match live {
        Some(d) if planned.matches(&d) => Ok((d, false)),
        Some(d) => bail!(
            "{} {} was built by {} v{} with {} on {}; to change the job, its parameters or inputs, \
             use `kappa reprocess` (it builds the next version beside the live one)",
            outputs.join(","),
            d.version,
            d.job,
            d.job_version,
            describe_pairs("params", &d.params),
            describe_pairs("inputs", &d.inputs),
        ),
        None => match store.create_deployment(&planned.new_deployment(DeploymentState::Live)) {
            Ok(d) => Ok((d, true)),
            Err(TableError::LiveConflict { .. }) => {
                match store.live_for_job(planned.job.spec().name, &outputs)? {
                    Some(d) if planned.matches(&d) => Ok((d, false)),
                    _ => bail!(
                        "{} got a live deployment from another process while this one started; run again",
                        outputs.join(",")
                    ),
                }
            }
            Err(e) => Err(e.into()),
        },
    }
}

/// `params key=status, agg=count` (or `no params`), for messages.
pub fn describe_pairs(what: &str, pairs: &[(String, String)]) -> String {
    if pairs.is_empty() {
        return format!("no {what}");
    }
    let pairs: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{what} {}", pairs.join(", "))
}
