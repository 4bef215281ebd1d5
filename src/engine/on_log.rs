//! A job over log topics into a deployment's tables: plan it, pick the
//! deployment it drives (the live one it resumes or creates, a building
//! version beside it, a retired one to roll back to), and run it.
//! `kappa stream`, `kappa reprocess` and `kappa table rollback` are these
//! steps and their messages.
//!
//! Invariant: a deployment is driven only by the job, version, parameters
//! and inputs that created it ([`OnLog::matches`]), and only while holding
//! its lock ([`Started`]).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::EngineError;
use super::batch::check_input_names;
use crate::job::{Job, NoData, Params, Plan, plan_job};
use crate::registry::Registry;
use crate::runner::WorkerConfig;
use crate::runner::stream::{CatchUp, Claim, EpochConfig, StreamResult, StreamRun};
use crate::source::ReadOptions;
use crate::source::inputs::Sources;
use crate::source::topic::TopicInput;
use crate::table::{
    Deployment, DeploymentLock, DeploymentState, NewDeployment, StoreAddr, TableError, TableStore,
    TableVersion,
};

/// How a stream run ended: records applied, bad records skipped, and
/// whether its version was retired (swapped out) while it ran.
pub type StreamSummary = StreamResult;

/// A job planned over log topics.
pub struct OnLog {
    /// The job.
    pub job: Arc<dyn Job>,
    /// Its parameters, resolved.
    pub params: Params,
    /// Its inputs, resolved to topics, in spec order.
    pub inputs: Vec<TopicInput>,
    /// The plan.
    pub plan: Plan,
}

/// A deployment this process drives: it holds the deployment's lock.
#[derive(Debug)]
pub struct Started {
    /// The deployment.
    pub deployment: Deployment,
    /// Whether this process created it (just now).
    pub created: bool,
    lock: DeploymentLock,
}

/// How a job runs over the log, besides the job and its deployment.
#[derive(Clone, Debug)]
pub struct StreamSettings {
    /// The table store.
    pub table_db: StoreAddr,
    /// The workers to run on.
    pub workers: WorkerConfig,
    /// How fields are read: the null marker and the bad-record policy.
    pub options: ReadOptions,
    /// How epochs are cut.
    pub epochs: EpochConfig,
    /// Stop once every input partition has been read to its end.
    pub until_caught_up: bool,
    /// No progress lines on stderr.
    pub quiet: bool,
    /// Set (by a signal handler, or another thread) to stop at the next
    /// epoch boundary.
    pub stop: Arc<AtomicBool>,
    /// Where the committer records its metrics (process 0 only).
    pub metrics: Option<Arc<crate::metrics::StreamMetrics>>,
    /// Changelog sinks of outputs (`--sink`; sent by process 0).
    pub sinks: Vec<crate::sink::changelog::SinkTarget>,
    /// How often the checkpointed state is merged into a full checkpoint
    /// (`None`: no state is kept; restarts replay the log). See
    /// [`crate::runner::checkpoint`].
    pub checkpoints: Option<std::time::Duration>,
}

impl StreamSettings {
    /// Defaults for a table store: a worker per core, epochs of at most
    /// 100 ms, bad records fail the run, checkpoints merged every minute,
    /// runs until stopped.
    pub fn new(table_db: impl Into<StoreAddr>) -> StreamSettings {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        StreamSettings {
            table_db: table_db.into(),
            workers: WorkerConfig::threads(threads),
            options: ReadOptions::default(),
            epochs: EpochConfig::default(),
            until_caught_up: false,
            quiet: true,
            stop: Arc::new(AtomicBool::new(false)),
            metrics: None,
            sinks: Vec::new(),
            checkpoints: Some(std::time::Duration::from_secs(60)),
        }
    }
}

impl OnLog {
    /// Plans `job` with `params` over `inputs` (input name, topic: a topic
    /// of the embedded log or a `kafka://` URL).
    pub fn plan(
        job: Arc<dyn Job>,
        params: &[(String, String)],
        inputs: &[(String, String)],
        sources: &Sources,
    ) -> Result<OnLog, EngineError> {
        let spec = job.spec();
        let params = Params::resolve(&spec, params).map_err(EngineError::plan(spec.name))?;
        check_input_names(&spec, inputs.iter().map(|(n, _)| n.as_str()))?;
        let inputs = spec
            .inputs
            .iter()
            .map(|i| {
                let mut given = inputs.iter().filter(|(n, _)| n == i.name);
                match (given.next(), given.next()) {
                    (Some((_, topic)), None) => {
                        let declared: Vec<&str> = i.columns.iter().map(|(c, _)| *c).collect();
                        Ok(sources.resolve(i.name, topic, &declared)?)
                    }
                    (None, _) => Err(EngineError::MissingInput {
                        name: i.name.to_string(),
                        what: "TOPIC",
                        about: i.about.to_string(),
                    }),
                    (Some(_), Some(_)) => Err(EngineError::DuplicateInput(i.name.to_string())),
                }
            })
            .collect::<Result<Vec<_>, EngineError>>()?;
        let schemas = inputs.iter().map(|i| i.schema.clone()).collect();
        let plan =
            plan_job(&*job, &params, schemas, &NoData).map_err(EngineError::plan(spec.name))?;
        Ok(OnLog {
            job,
            params,
            inputs,
            plan,
        })
    }

    /// Names the only output's table `table` (`--table`).
    pub fn rename_table(&mut self, table: &str) -> Result<(), EngineError> {
        match self.plan.outputs.as_mut_slice() {
            [only] => {
                only.name = table.to_string();
                Ok(())
            }
            outputs => Err(EngineError::TableRename {
                job: self.job.spec().name.to_string(),
                outputs: outputs.len(),
            }),
        }
    }

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

    /// The live deployment of these outputs when it runs exactly this job
    /// (the same job version, parameters and inputs, reading nulls the same
    /// way) and nothing is being built beside it: a reprocess would build a
    /// copy of it.
    pub fn same_as_live(
        &self,
        store: &dyn TableStore,
        options: &ReadOptions,
    ) -> Result<Option<Deployment>, EngineError> {
        let outputs = self.output_names();
        let building = store.deployments()?.into_iter().any(|d| {
            d.state == DeploymentState::Building
                && d.outputs.iter().any(|o| outputs.contains(&o.name))
        });
        let Some(live) = store.live_for_job(self.job.spec().name, &outputs)? else {
            return Ok(None);
        };
        let same_nulls =
            super::reading::recorded(&live)?.is_none_or(|was| was.null == options.null);
        Ok((!building && same_nulls && self.matches(&live)).then_some(live))
    }

    /// The live deployment of these outputs, resumed, or a new live one.
    /// Refused when the live one was built by another job version,
    /// parameters or inputs (`kappa reprocess` builds those). Two processes
    /// starting at once may both find none: the second's creation is
    /// refused, and it resumes the first's deployment (whose lock then
    /// tells it that another process drives it).
    pub fn start_live(&self, store: &mut dyn TableStore) -> Result<Started, EngineError> {
        let outputs = self.output_names();
        let name = self.job.spec().name;
        let (deployment, created) = match store.live_for_job(name, &outputs)? {
            Some(d) if self.matches(&d) => (d, false),
            Some(d) => return Err(EngineError::Refused(self.changed(&d))),
            None => match store.create_deployment(&self.new_deployment(DeploymentState::Live)) {
                Ok(d) => (d, true),
                Err(TableError::LiveConflict { .. }) => match store.live_for_job(name, &outputs)? {
                    Some(d) if self.matches(&d) => (d, false),
                    _ => {
                        return Err(EngineError::Refused(format!(
                            "{} got a live deployment from another process while this one started; run again",
                            outputs.join(",")
                        )));
                    }
                },
                Err(e) => return Err(e.into()),
            },
        };
        Started::claim(store, deployment, created)
    }

    /// The version of these outputs being built beside the live one,
    /// resumed, or a new one (replaying the inputs from their start, which
    /// retention must not have deleted unless `from_earliest_available`).
    pub fn start_building(
        &self,
        store: &mut dyn TableStore,
        from_earliest_available: bool,
    ) -> Result<Started, EngineError> {
        let outputs = self.output_names();
        let building: Vec<Deployment> = store
            .deployments()?
            .into_iter()
            .filter(|d| {
                d.state == DeploymentState::Building
                    && d.outputs.iter().any(|o| outputs.contains(&o.name))
            })
            .collect();
        let (deployment, created) = match building.as_slice() {
            [d] if self.matches(d) => (d.clone(), false),
            [] => {
                check_retention(&self.inputs, from_earliest_available)?;
                let new = self.new_deployment(DeploymentState::Building);
                (store.create_deployment(&new)?, true)
            }
            [d, ..] => {
                return Err(EngineError::Refused(format!(
                    "{} {} is already being built by another job version, parameters or inputs; \
                     drop it first (kappa table drop {} --version {})",
                    outputs.join(","),
                    d.version,
                    outputs[0],
                    d.version.0
                )));
            }
        };
        Started::claim(store, deployment, created)
    }

    /// Resumes the retired version `version` of `output` (by default the
    /// one the live version replaced) with the job that built it, reopened
    /// to catch up and go live again.
    pub fn start_rollback(
        registry: &Registry,
        store: &mut dyn TableStore,
        sources: &Sources,
        output: &str,
        version: Option<TableVersion>,
        options: &ReadOptions,
    ) -> Result<(OnLog, Started), EngineError> {
        let live = store.find_by_output(output, None)?;
        let previous = match version {
            Some(v) => store.find_by_output(output, Some(v.0))?,
            None => previous_version(store, output, &live)?,
        };
        // A building version that was live once is a rollback that stopped
        // before its swap committed (killed, or stopped): it goes on.
        let interrupted =
            previous.state == DeploymentState::Building && previous.swapped_at.is_some();
        if previous.state != DeploymentState::Retired && !interrupted {
            return Err(EngineError::Refused(format!(
                "{output} {} is {}: only a retired version can be resumed",
                previous.version, previous.state
            )));
        }
        let on_log = OnLog::for_deployment(registry, &previous, sources)?;
        // Refused before the version is reopened, so a retry finds it retired.
        super::reading::agree(&mut *store, &previous, options)?;
        let started = Started::claim(store, previous, false)?;
        if !interrupted {
            store.reopen(started.deployment.id)?;
        }
        Ok((on_log, started))
    }

    /// The job [`OnLog::start_rollback`] resumes, as the other processes of
    /// a cluster run find it, reading the catalog only: the version given,
    /// else the one swapped out last, retired or (if process 0 was first)
    /// reopened already. Process 0 checks the rest; the startup agreement
    /// refuses the run if they found different jobs.
    pub fn rollback_plan(
        registry: &Registry,
        store: &dyn TableStore,
        sources: &Sources,
        output: &str,
        version: Option<TableVersion>,
    ) -> Result<OnLog, EngineError> {
        let d = match version {
            Some(v) => store.find_by_output(output, Some(v.0))?,
            None => store
                .deployments_of(output)?
                .into_iter()
                .filter(|d| {
                    matches!(
                        d.state,
                        DeploymentState::Retired | DeploymentState::Building
                    ) && d.swapped_at.is_some()
                })
                .max_by_key(|d| (d.swapped_at, d.version))
                .ok_or_else(|| {
                    EngineError::Refused(format!("{output} has no retired version to roll back to"))
                })?,
        };
        OnLog::for_deployment(registry, &d, sources)
    }

    /// The job that built `d`, planned as it was: refused when this program
    /// has another version of that job's code.
    pub fn for_deployment(
        registry: &Registry,
        d: &Deployment,
        sources: &Sources,
    ) -> Result<OnLog, EngineError> {
        let job = registry.find_deployed(&d.job, &d.params)?;
        let version = job.spec().version;
        if version != d.job_version {
            return Err(EngineError::Refused(format!(
                "{} was built by {} v{}, but this program has v{version}: it cannot be resumed or \
                 recomputed with different code",
                d.version, d.job, d.job_version
            )));
        }
        let mut on_log = OnLog::plan(job, &d.params, &d.inputs, sources)?;
        on_log.name_outputs_as(d);
        Ok(on_log)
    }

    /// Runs the job over the log into `started`'s tables; a building
    /// deployment goes live as `catch_up` says. In a cluster run only the
    /// first process has started the deployment (the others pass `None`
    /// and never open the table store).
    pub fn run(
        self,
        started: Option<Started>,
        settings: &StreamSettings,
        catch_up: Option<CatchUp>,
    ) -> Result<StreamSummary, EngineError> {
        let fingerprint = self.fingerprint();
        if let Some(started) = &started {
            let mut store = crate::table::open(&settings.table_db)?;
            super::reading::agree(&mut *store, &started.deployment, &settings.options)?;
        }
        let run = StreamRun {
            plan: self.plan,
            inputs: self.inputs,
            table_db: settings.table_db.clone(),
            claim: started.map(|started| Claim {
                deployment: started.deployment.id,
                lock: std::sync::Arc::new(started.lock),
                created: started.created,
            }),
            fingerprint,
            workers: settings.workers.clone(),
            options: settings.options.clone(),
            epochs: settings.epochs,
            until_caught_up: settings.until_caught_up,
            stop: settings.stop.clone(),
            quiet: settings.quiet,
            catch_up,
            metrics: settings.metrics.clone(),
            sinks: settings.sinks.clone(),
            checkpoints: settings.checkpoints,
        };
        Ok(run.run()?)
    }

    /// The job, its version and parameters, one fact per line: what every
    /// process of a cluster run must agree on.
    pub fn fingerprint(&self) -> String {
        let params = self.new_deployment(DeploymentState::Live).params;
        super::batch::describe_job(&*self.job, &params).join("\n")
    }

    /// Why the live deployment `d` cannot be resumed by this job.
    fn changed(&self, d: &Deployment) -> String {
        format!(
            "{} {} was built by {} v{} with {} on {}; to change the job, its version, parameters \
             or inputs, use `kappa reprocess` (it builds the next version beside the live one)",
            self.output_names().join(","),
            d.version,
            d.job,
            d.job_version,
            describe_pairs("params", &d.params),
            describe_pairs("inputs", &d.inputs),
        )
    }
}

impl Started {
    /// Takes `deployment`'s lock.
    fn claim(
        store: &dyn TableStore,
        deployment: Deployment,
        created: bool,
    ) -> Result<Started, EngineError> {
        let lock = store.lock(&deployment)?;
        Ok(Started {
            deployment,
            created,
            lock,
        })
    }
}

/// Refuses to replay a plain topic whose start was deleted, unless asked.
fn check_retention(inputs: &[TopicInput], allowed: bool) -> Result<(), EngineError> {
    for input in inputs.iter().filter(|i| !i.compacted) {
        for partition in 0..input.partitions {
            let earliest = input.log.bounds(partition)?.earliest;
            if earliest == 0 {
                continue;
            }
            let topic = input.log.name();
            if !allowed {
                return Err(EngineError::Refused(format!(
                    "topic {topic} partition {partition}: retention has deleted offsets below {earliest}, so a \
                     replay would not see all history; pass --from-earliest-available to reprocess from what is left",
                )));
            }
            tracing::warn!(
                "topic {topic} partition {partition} starts at offset {earliest}: replaying what is left",
            );
        }
    }
    Ok(())
}

/// The retired version of `output` that was live most recently (the one the
/// live version replaced), whatever its number; or the one a rollback that
/// did not reach its swap reopened (building, and live once).
fn previous_version(
    store: &dyn TableStore,
    output: &str,
    live: &Deployment,
) -> Result<Deployment, EngineError> {
    let mut retired: Vec<Deployment> = store
        .deployments_of(output)?
        .into_iter()
        .filter(|d| {
            matches!(
                d.state,
                DeploymentState::Retired | DeploymentState::Building
            ) && d.swapped_at.is_some()
        })
        .collect();
    retired.sort_by_key(|d| (d.swapped_at, d.version));
    retired.pop().ok_or_else(|| {
        EngineError::Refused(format!(
            "{output} has no retired version before {} to roll back to",
            live.version
        ))
    })
}

/// `params key=status, agg=count` (or `no params`), for messages.
pub fn describe_pairs(what: &str, pairs: &[(String, String)]) -> String {
    if pairs.is_empty() {
        return format!("no {what}");
    }
    let pairs: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{what} {}", pairs.join(", "))
}
