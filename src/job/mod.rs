//! The job contract: what every runner (batch, stream, reprocess, cluster)
//! needs from a job, and nothing about how its inputs arrive.
//!
//! A job is written once. It declares a [`JobSpec`] (name, version, inputs,
//! parameters with defaults and help, outputs) and, given parameter values and
//! the columns its inputs actually have, makes a [`Plan`]: which columns of
//! each input it reads (and as which types), the schema of each output, and a
//! [`Dataflow`] that builds the differential computation from input
//! collections to output collections.
//!
//! Invariant (rule 1 of the engine): the contents of the output collections
//! are a function of the contents of the input collections only — never of
//! arrival order, epoch boundaries, worker count or the wall clock. Jobs keep
//! event time in the data, and anything order-sensitive (float sums, ties)
//! is computed over sorted, consolidated values.

mod io;
mod params;
mod plan;

use differential_dataflow::VecCollection;
use thiserror::Error;

pub use io::{BuildError, Inputs, Outputs, Schemas, Typed};
pub use params::Params;
pub use plan::{Dataflow, Plan, RowInput, WatermarkInput, plan_job};

use crate::schema::ColumnType;
use crate::value::Row;

/// Logical time of the dataflows: an epoch (a batch run uses one epoch; a
/// stream run one per committed batch of log records). Never event time.
pub type Time = u64;

/// A collection of rows in a dataflow scope.
pub type Rows<'s> = VecCollection<'s, Time, Row>;

/// The file format a job requires for an input, overriding detection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputFormat {
    /// Plain text: one row per line, with one column `line`.
    Text,
}

/// A declared input.
#[derive(Clone, Debug)]
pub struct InputSpec {
    /// The input's name (`--input NAME=...`, [`Inputs::take`]).
    pub name: &'static str,
    /// Columns the job needs (name and type); empty means "any columns".
    pub columns: &'static [(&'static str, ColumnType)],
    /// A file format the input must be read as, whatever its extension.
    pub format: Option<InputFormat>,
    /// One line for `kappa jobs` and `--help`.
    pub about: &'static str,
}

impl InputSpec {
    /// An input read as the struct `T` ([`crate::typed`]): its columns are
    /// the struct's fields, with their types. (A type that cannot be a
    /// record declares no columns here; planning it with
    /// [`Schemas::project_as`] says why.)
    pub fn typed<T: crate::typed::Record>(name: &'static str, about: &'static str) -> InputSpec {
        InputSpec {
            name,
            columns: T::columns().map_or(&[], |c| c.declared),
            format: None,
            about,
        }
    }
}

/// A declared parameter.
#[derive(Clone, Debug)]
pub struct ParamSpec {
    /// The parameter's name (`--param NAME=...`).
    pub name: &'static str,
    /// `None` means required.
    pub default: Option<&'static str>,
    /// One line for `kappa jobs` and `--help`.
    pub help: &'static str,
}

/// The late-event parameters of jobs with an event-time column (see
/// [`crate::source::late`]); `kappa run|stream|reprocess --late` and
/// `--allowed-lateness` set them.
pub const LATE_PARAMS: [ParamSpec; 2] = [
    ParamSpec {
        name: "late",
        default: Some("correct"),
        help: "late events: correct (update their windows; stream == batch) or drop \
               (drop events older than the partition's watermark minus allowed_lateness)",
    },
    ParamSpec {
        name: "allowed_lateness",
        default: Some("0"),
        help: "with late=drop: how far behind the watermark an event may be (e.g. 10m)",
    },
];

/// A declared output (its columns may depend on the parameters and inputs;
/// the plan fixes them).
#[derive(Clone, Debug)]
pub struct OutputSpec {
    /// The output's name: its file (`NAME.csv`), its table, and the name
    /// the dataflow gives it under ([`Outputs`]).
    pub name: &'static str,
    /// One line for `kappa jobs` and `--help`.
    pub about: &'static str,
}

/// What a job declares about itself.
#[derive(Clone, Debug)]
pub struct JobSpec {
    /// The job's name on the command line (`kappa run NAME`).
    pub name: &'static str,
    /// The version of the job's code: a deployment built by another
    /// version is not resumed (`kappa reprocess` builds the new one).
    pub version: u32,
    /// One line for `kappa jobs`.
    pub about: &'static str,
    /// The inputs, in the order the runners hold them.
    pub inputs: Vec<InputSpec>,
    /// The parameters.
    pub params: Vec<ParamSpec>,
    /// The outputs.
    pub outputs: Vec<OutputSpec>,
}

/// A job: a spec and a planner. The built-in ones live in `jobs/`; a
/// user's crate implements this trait for its own and hands them to
/// [`crate::App`].
pub trait Job: Send + Sync {
    /// What the job declares about itself: name, version, inputs,
    /// parameters and outputs.
    fn spec(&self) -> JobSpec;

    /// Plans the job for these parameters (already validated against the
    /// spec and filled with defaults) and input schemas, with what the
    /// runner knows about the data before it runs (input sizes, a sample of
    /// keys), so that the plan can pick a physical strategy (a broadcast or
    /// salted join, two-phase grouping). The output must not depend on
    /// `data`. Runners call it through [`plan_job`], which checks the plan
    /// against the spec.
    fn plan(
        &self,
        params: &Params,
        inputs: &Schemas,
        data: &dyn DataContext,
    ) -> Result<Plan, PlanError>;
}

/// A reference to a job with a static lifetime is a job (`&MY_JOB`).
impl<J: Job + ?Sized> Job for &'static J {
    fn spec(&self) -> JobSpec {
        (**self).spec()
    }

    fn plan(
        &self,
        params: &Params,
        inputs: &Schemas,
        data: &dyn DataContext,
    ) -> Result<Plan, PlanError> {
        (**self).plan(params, inputs, data)
    }
}

/// What a runner can tell a planner about the data before it runs. Plans
/// use it only to choose how to compute (never what): a wrong or missing
/// answer may cost time, never change an output.
pub trait DataContext {
    /// Bytes of the input named `input`, when known (files).
    fn input_bytes(&self, input: &str) -> Option<u64> {
        let _ = input;
        None
    }
    /// Counts of the values of `columns` (input column indices, each read
    /// as its type) over a sample of about `rate` of the rows of the input
    /// named `input`, when it can be read.
    fn sample_keys(
        &self,
        input: &str,
        columns: &[(usize, ColumnType)],
        rate: f64,
    ) -> Option<KeySample> {
        let _ = (input, columns, rate);
        None
    }
    /// Records a choice the planner made (a strategy, hot keys), for the
    /// run's summary and logs.
    fn decide(&self, note: String) {
        tracing::info!("{note}");
    }
}

/// No knowledge of the data (streams, tests): planners fall back on their
/// parameters.
pub struct NoData;

impl DataContext for NoData {}

/// Key counts over a sample of an input's rows.
#[derive(Clone, Debug, Default)]
pub struct KeySample {
    /// Rows sampled.
    pub rows: u64,
    /// Sampled rows per key (typed as the dataflow sees them).
    pub counts: std::collections::HashMap<Row, u64>,
}

/// A watermark announcement: `(epoch, input, worker, low)`. After `epoch`
/// (the time it is sent at), every event the worker will still admit from its partitions of
/// `input` (under the `drop` late-event policy) has a time of at least
/// `low`. It informs state release only, never results.
pub type Watermark = (Time, usize, usize, i64);

/// What a runner offers a dataflow besides its inputs.
#[derive(Clone)]
pub struct BuildContext<'s> {
    /// Watermark announcements from every worker (a stream runner sends
    /// them each epoch; other runners close it at once, so nothing is released).
    pub watermarks: timely::dataflow::StreamVec<'s, Time, Watermark>,
    /// What kind of changes the inputs carry.
    pub updates: Updates,
    /// What the operators that release state under watermarks hold.
    pub held: Held,
}

/// Counts of the state held by operators that release it under watermarks,
/// over all workers of the process (the stream runner serves them as
/// metrics).
#[derive(Clone, Debug, Default)]
pub struct Held {
    /// Windows open (see [`crate::ops::closing_window`]).
    pub windows: std::sync::Arc<std::sync::atomic::AtomicI64>,
    /// Rows kept by interval joins (see [`crate::ops::closing_interval_join`]).
    pub join_rows: std::sync::Arc<std::sync::atomic::AtomicI64>,
}

/// The kind of changes a runner feeds into a dataflow's inputs. It informs
/// how operators compute (what state they must keep), never what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Updates {
    /// Rows only arrive, never leave (a batch run over files): an operator
    /// may keep only what insertions can change, such as the extremes of
    /// `min` and `max`.
    InsertOnly,
    /// Rows may also be retracted (changelog topics, streams in general).
    Any,
}

/// Why a job could not be planned: a user error in parameters or inputs.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PlanError {
    /// A parameter the job does not declare.
    #[error("job {job} has no parameter {name:?} (its parameters: {known})")]
    UnknownParam {
        /// The job.
        job: String,
        /// The name given.
        name: String,
        /// The names there are.
        known: String,
    },
    /// A required parameter without a value.
    #[error("job {job} needs --param {name}=... ({help})")]
    MissingParam {
        /// The job.
        job: String,
        /// The name given.
        name: String,
        /// What it is for.
        help: String,
    },
    /// A parameter value that does not parse or make sense.
    #[error("bad value {value:?} for parameter {name}: {reason}")]
    BadParam {
        /// The name given.
        name: String,
        /// The value given.
        value: String,
        /// Why it does not fit.
        reason: String,
    },
    /// An input name the job does not declare.
    #[error("job {job} has no input {name:?} (its inputs: {known})")]
    UnknownInput {
        /// The job.
        job: String,
        /// The name given.
        name: String,
        /// The names there are.
        known: String,
    },
    /// A plan that does not fit its job's spec: a bug in the job.
    #[error("job {job} is inconsistent: {problem}")]
    JobBug {
        /// The job.
        job: String,
        /// What does not fit.
        problem: String,
    },
    /// A column named by a parameter or required by the job is not in the input.
    #[error(transparent)]
    UnknownColumn(#[from] crate::schema::UnknownColumn),
    /// A SQL job's query does not bind to its inputs.
    #[error(transparent)]
    Sql(Box<crate::sql::SqlError>),
}
