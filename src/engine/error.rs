//! The errors of the orchestration layer: those of the layers below, with
//! what this layer itself refuses (inputs that do not match the job, a
//! deployment the command may not touch).

use thiserror::Error;

use crate::job::PlanError;
use crate::log::LogError;
use crate::registry::{DeployedJobError, UnknownJob};
use crate::runner::RunError;
use crate::sink::files::SinkError;
use crate::source::SourceError;
use crate::table::TableError;

/// Why a batch run, a stream or a verification could not be done.
#[derive(Debug, Error)]
pub enum EngineError {
    /// The job is not in the registry.
    #[error(transparent)]
    UnknownJob(#[from] UnknownJob),
    /// The job of a deployment cannot be had.
    #[error(transparent)]
    DeployedJob(#[from] DeployedJobError),
    /// The job refused its parameters or inputs.
    #[error("cannot plan job {job}")]
    Plan {
        /// The job.
        job: String,
        /// Why.
        #[source]
        source: PlanError,
    },
    /// An input given that the job does not have.
    #[error("job {job} has no input {name:?} (its inputs: {known})")]
    UnknownInput {
        /// The job.
        job: String,
        /// The name given.
        name: String,
        /// The job's inputs.
        known: String,
    },
    /// A job input with nothing given for it.
    #[error("missing input: --input {name}={what} ({about})")]
    MissingInput {
        /// The input.
        name: String,
        /// What to give: `PATH` or `TOPIC`.
        what: &'static str,
        /// The input's description.
        about: String,
    },
    /// An input given twice.
    #[error("input {0} given more than once")]
    DuplicateInput(String),
    /// `--table` on a job with several outputs.
    #[error("--table names the output of a job with one output; {job} has {outputs}")]
    TableRename {
        /// The job.
        job: String,
        /// Its number of outputs.
        outputs: usize,
    },
    /// The deployment (or the command) refuses to go on: the message says
    /// why and what to do instead.
    #[error("{0}")]
    Refused(String),
    /// Reading an input failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// Committing the outputs failed.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// The log failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The table store failed.
    #[error(transparent)]
    Table(#[from] TableError),
    /// The run failed.
    #[error(transparent)]
    Run(#[from] RunError),
}

impl EngineError {
    /// A [`EngineError::Plan`] of job `job`.
    pub(crate) fn plan(job: &str) -> impl FnOnce(PlanError) -> EngineError + '_ {
        move |source| EngineError::Plan {
            job: job.to_string(),
            source,
        }
    }
}
