//! `kappa reprocess`: replay the log into the next table version beside the
//! live one, and swap the views when it has caught up; and the rollback
//! that runs the same path backwards (`kappa table rollback`).

use std::path::Path;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};

use super::stream::{JobOnLogArgs, LogDirArg, StoreArgs, StreamOptions, plan_job, plan_on_log};
use crate::log::Log;
use crate::runner::stream::{CatchUp, Claim};
use crate::table::{Deployment, DeploymentLock, DeploymentState, TableStore};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SwapMode {
    /// Swap the views as soon as the new version has caught up.
    Auto,
    /// Wait for `kappa table swap NAME --version N`.
    Manual,
}

/// When and how a building version goes live.
#[derive(Debug, Args)]
pub struct SwapArgs {
    /// Swap automatically on catch-up, or wait for `kappa table swap`.
    #[arg(long, value_enum, default_value_t = SwapMode::Auto)]
    pub swap: SwapMode,
    /// Caught up when the total lag behind the log end is at most this [default: one epoch, --max-batch].
    #[arg(long, value_name = "N")]
    pub max_lag: Option<u64>,
    /// Retired versions to keep after the swap; older ones are dropped.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub keep: usize,
}

impl SwapArgs {
    fn catch_up(&self, options: &StreamOptions) -> CatchUp {
        CatchUp {
            max_lag: self.max_lag.unwrap_or(options.max_batch as u64),
            swap: self.swap == SwapMode::Auto,
            keep: self.keep,
        }
    }
}

#[derive(Debug, Args)]
pub struct ReprocessArgs {
    #[command(flatten)]
    pub job: JobOnLogArgs,
    #[command(flatten)]
    pub swap: SwapArgs,
    /// Go on even though retention has deleted the start of a (non-compacted) input topic.
    #[arg(long)]
    pub from_earliest_available: bool,
}

pub fn reprocess(args: ReprocessArgs) -> anyhow::Result<()> {
    let options = &args.job.options;
    let log = args.job.store.open_log()?;
    let planned = plan_on_log(&args.job, &log)?;
    let mut store = args.job.store.open_store()?;
    let outputs = planned.output_names();
    let building: Vec<Deployment> = store
        .deployments()?
        .into_iter()
        .filter(|d| {
            d.state == DeploymentState::Building
                && d.outputs.iter().any(|o| outputs.contains(&o.name))
        })
        .collect();
    let (deployment, created) = match building.as_slice() {
        [d] if planned.matches(d) => {
            eprintln!(
                "kappa reprocess: resuming the build of {} {} from its committed offsets",
                outputs.join(","),
                d.version
            );
            (d.clone(), false)
        }
        [] => {
            check_retention(&log, &planned.inputs, args.from_earliest_available)?;
            let d = store.create_deployment(&planned.new_deployment(DeploymentState::Building))?;
            eprintln!(
                "kappa reprocess: building {} {} beside the live version",
                outputs.join(","),
                d.version
            );
            (d, true)
        }
        [d, ..] => bail!(
            "{} {} is already being built by another job version, parameters or inputs; \
             drop it first (kappa table drop {} --version {})",
            outputs.join(","),
            d.version,
            outputs[0],
            d.version.0
        ),
    };
    let lock = DeploymentLock::acquire(store.path(), &deployment)?;
    drop(store);
    let claim = Claim {
        deployment: deployment.id,
        lock,
        created,
    };
    let catch_up = args.swap.catch_up(options);
    planned.run(options, &args.job.store, claim, Some(catch_up))
}

/// Refuses to replay a plain topic whose start was deleted, unless asked.
fn check_retention(
    log: &Log,
    inputs: &[crate::source::topic::TopicInput],
    allowed: bool,
) -> anyhow::Result<()> {
    for input in inputs.iter().filter(|i| !i.compacted) {
        let info = log.topic(&input.topic)?;
        for p in info.partitions.iter().filter(|p| p.earliest > 0) {
            if !allowed {
                bail!(
                    "topic {} partition {}: retention has deleted offsets below {}, so a replay would not see all \
                     history; pass --from-earliest-available to reprocess from what is left",
                    input.topic,
                    p.partition,
                    p.earliest
                );
            }
            eprintln!(
                "warning: topic {} partition {} starts at offset {}: replaying what is left",
                input.topic, p.partition, p.earliest
            );
        }
    }
    Ok(())
}

/// `kappa table rollback NAME`.
#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// The output (view) to roll back.
    pub name: String,
    /// The retired version to resume (3 or v3) [default: the one that was live before the live one].
    #[arg(long, value_name = "N")]
    pub version: Option<crate::table::TableVersion>,
    #[command(flatten)]
    pub swap: SwapArgs,
    #[command(flatten)]
    pub options: StreamOptions,
    #[command(flatten)]
    pub log: LogDirArg,
}

/// Resumes the previous version of `NAME` from its own offsets, lets it
/// catch up with what arrived since it was retired, and swaps it back in.
pub fn rollback(args: RollbackArgs, table_db: &Path) -> anyhow::Result<()> {
    let paths = StoreArgs {
        log: args.log,
        table_db: table_db.to_path_buf(),
    };
    let (log, mut store) = paths.open()?;
    let live = store.find_by_output(&args.name, None)?;
    let previous = match args.version {
        Some(v) => store.find_by_output(&args.name, Some(v.0))?,
        None => previous_version(&store, &args.name, &live)?,
    };
    if previous.state != DeploymentState::Retired {
        bail!(
            "{} {} is {}: only a retired version can be resumed",
            args.name,
            previous.version,
            previous.state
        );
    }
    let job = super::run::find_job(&previous.job)?;
    if job.spec().version != previous.job_version {
        bail!(
            "{} was built by {} v{}, but this kappa has v{}: it cannot be resumed with different code",
            previous.version,
            previous.job,
            previous.job_version,
            job.spec().version
        );
    }
    let mut planned = plan_job(&previous.job, &previous.params, &previous.inputs, &log)?;
    planned.name_outputs_as(&previous);
    let lock = DeploymentLock::acquire(store.path(), &previous)?;
    store
        .reopen(previous.id)
        .with_context(|| format!("cannot reopen {}", previous.version))?;
    eprintln!(
        "kappa table rollback: resuming {} {} from its committed offsets; it goes live once caught up",
        args.name, previous.version
    );
    drop(store);
    let catch_up = args.swap.catch_up(&args.options);
    let claim = Claim {
        deployment: previous.id,
        lock,
        created: false,
    };
    planned.run(&args.options, &paths, claim, Some(catch_up))
}

/// The retired version of `output` that was live most recently (the one the
/// live version replaced), whatever its number.
fn previous_version(
    store: &TableStore,
    output: &str,
    live: &Deployment,
) -> anyhow::Result<Deployment> {
    let mut retired: Vec<Deployment> = store
        .deployments_of(output)?
        .into_iter()
        .filter(|d| d.state == DeploymentState::Retired && d.swapped_at.is_some())
        .collect();
    retired.sort_by_key(|d| (d.swapped_at, d.version));
    retired.pop().with_context(|| {
        format!(
            "{output} has no retired version before {} to roll back to",
            live.version
        )
    })
}
