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

use std::collections::BTreeMap;
use std::sync::Arc;

use differential_dataflow::VecCollection;
use thiserror::Error;

use crate::schema::{ColumnType, InputSchema, OutputSchema, Projection};
use crate::source::late::LateRule;
use crate::time::{TimeUnit, parse_duration};
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
    pub name: &'static str,
    /// Columns the job needs (name and type); empty means "any columns".
    pub columns: &'static [(&'static str, ColumnType)],
    pub format: Option<InputFormat>,
    pub about: &'static str,
}

/// A declared parameter.
#[derive(Clone, Debug)]
pub struct ParamSpec {
    pub name: &'static str,
    /// `None` means required.
    pub default: Option<&'static str>,
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
    pub name: &'static str,
    pub about: &'static str,
}

/// What a job declares about itself.
#[derive(Clone, Debug)]
pub struct JobSpec {
    pub name: &'static str,
    pub version: u32,
    pub about: &'static str,
    pub inputs: Vec<InputSpec>,
    pub params: Vec<ParamSpec>,
    pub outputs: Vec<OutputSpec>,
}

/// A job: a spec and a planner. Implementations live in `jobs/`.
pub trait Job: Sync {
    fn spec(&self) -> JobSpec;
    /// Plans the job for these parameters (already validated against the
    /// spec and filled with defaults) and input schemas (in spec order).
    fn plan(&self, params: &Params, inputs: &[InputSchema]) -> Result<Plan, PlanError>;

    /// As [`Job::plan`], with what the runner knows about the data before it
    /// runs (input sizes, a sample of keys), so that the plan can pick a
    /// physical strategy (a broadcast or salted join, two-phase grouping).
    /// The output must not depend on `data`. By default `data` is ignored.
    fn plan_with(
        &self,
        params: &Params,
        inputs: &[InputSchema],
        data: &dyn DataContext,
    ) -> Result<Plan, PlanError> {
        let _ = data;
        self.plan(params, inputs)
    }
}

/// What a runner can tell a planner about the data before it runs. Plans
/// use it only to choose how to compute (never what): a wrong or missing
/// answer may cost time, never change an output.
pub trait DataContext {
    /// Bytes of input `input` (spec order), when known (files).
    fn input_bytes(&self, input: usize) -> Option<u64> {
        let _ = input;
        None
    }
    /// Counts of the values of `columns` (input column indices) over a
    /// sample of about `rate` of input `input`'s rows, when it can be read.
    fn sample_keys(&self, input: usize, columns: &[usize], rate: f64) -> Option<KeySample> {
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

/// The dataflow of a planned job. `build` is called once per worker, inside
/// that worker's dataflow scope.
pub trait Dataflow: Send + Sync {
    /// Builds the computation: `inputs` in spec order, holding projected rows;
    /// returns the output collections in plan order.
    fn build<'s>(&self, inputs: Vec<Rows<'s>>) -> Vec<Rows<'s>>;

    /// As [`Dataflow::build`], with what the runner offers besides the
    /// inputs. Jobs that can use it (to release state) override this one.
    fn build_in<'s>(&self, inputs: Vec<Rows<'s>>, _context: &BuildContext<'s>) -> Vec<Rows<'s>> {
        self.build(inputs)
    }
}

/// A watermark announcement: `(epoch, input, worker, low)`. After `epoch`
/// (the time it is sent at), every event the worker will still admit from its partitions of
/// `input` (under the `drop` late-event policy) has a time of at least
/// `low`. It informs state release only, never results.
pub type Watermark = (Time, usize, usize, i64);

/// What a runner offers a dataflow besides its inputs.
pub struct BuildContext<'s> {
    /// Watermark announcements from every worker (a stream runner sends
    /// them each epoch; other runners close it at once, so nothing is released).
    pub watermarks: timely::dataflow::StreamVec<'s, Time, Watermark>,
    /// What kind of changes the inputs carry.
    pub updates: Updates,
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

/// A planned job, ready to run.
#[derive(Clone)]
pub struct Plan {
    /// Per input (spec order): the columns read and their types.
    pub inputs: Vec<Projection>,
    pub outputs: Vec<OutputSchema>,
    pub dataflow: Arc<dyn Dataflow>,
}

/// An input session feeding one of a plan's input collections.
pub type RowInput = differential_dataflow::input::InputSession<Time, Row, isize>;

/// The input through which a runner announces [`Watermark`]s.
pub type WatermarkInput = timely::dataflow::InputHandleVec<Time, Watermark>;

impl Plan {
    /// Creates the plan's input collections in `scope` and builds its
    /// dataflow on them: the input sessions (spec order) and the output
    /// collections (plan order). Every runner starts here.
    pub fn instantiate<'s>(
        &self,
        scope: timely::dataflow::Scope<'s, Time>,
        updates: Updates,
    ) -> (Vec<RowInput>, Vec<Rows<'s>>) {
        // Dropping the watermark input closes it: nothing is announced.
        let (sessions, _watermarks, outputs) = self.instantiate_with_watermarks(scope, updates);
        (sessions, outputs)
    }

    /// As [`Plan::instantiate`], also returning the input through which the
    /// runner announces watermarks (see [`BuildContext`]).
    pub fn instantiate_with_watermarks<'s>(
        &self,
        scope: timely::dataflow::Scope<'s, Time>,
        updates: Updates,
    ) -> (Vec<RowInput>, WatermarkInput, Vec<Rows<'s>>) {
        use differential_dataflow::input::Input;
        use timely::dataflow::operators::Input as _;
        let (sessions, collections): (Vec<_>, Vec<_>) = self
            .inputs
            .iter()
            .map(|_| scope.new_collection::<Row, isize>())
            .unzip();
        let (watermark_input, watermarks) = scope.new_input::<Vec<Watermark>>();
        let context = BuildContext {
            watermarks,
            updates,
        };
        let outputs = self.dataflow.build_in(collections, &context);
        assert_eq!(
            outputs.len(),
            self.outputs.len(),
            "job built a different number of outputs than it planned"
        );
        (sessions, watermark_input, outputs)
    }
}

/// Parameter values after validation: every declared parameter has a value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Params(BTreeMap<String, String>);

impl Params {
    /// Checks `given` against `spec`: unknown names and missing required
    /// parameters are errors; absent ones take their defaults.
    pub fn resolve(spec: &JobSpec, given: &[(String, String)]) -> Result<Params, PlanError> {
        let mut values = BTreeMap::new();
        for (k, v) in given {
            if !spec.params.iter().any(|p| p.name == k) {
                return Err(PlanError::UnknownParam {
                    job: spec.name.to_string(),
                    name: k.clone(),
                    known: spec
                        .params
                        .iter()
                        .map(|p| p.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
            if values.insert(k.clone(), v.clone()).is_some() {
                return Err(PlanError::BadParam {
                    name: k.clone(),
                    value: v.clone(),
                    reason: "given more than once".into(),
                });
            }
        }
        for p in &spec.params {
            if !values.contains_key(p.name) {
                match p.default {
                    Some(d) => {
                        values.insert(p.name.to_string(), d.to_string());
                    }
                    None => {
                        return Err(PlanError::MissingParam {
                            job: spec.name.to_string(),
                            name: p.name.to_string(),
                            help: p.help.to_string(),
                        });
                    }
                }
            }
        }
        Ok(Params(values))
    }

    /// Builds parameters directly (tests, and jobs that call other jobs).
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Params {
        Params(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    /// The value of a declared parameter.
    pub fn get(&self, name: &str) -> &str {
        self.0.get(name).map(String::as_str).unwrap_or("")
    }

    /// A comma-separated list, empty items removed.
    pub fn list(&self, name: &str) -> Vec<String> {
        self.get(name)
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    }

    /// A parameter parsed with `FromStr`, or a `BadParam` error.
    pub fn parse<T: std::str::FromStr>(&self, name: &str) -> Result<T, PlanError>
    where
        T::Err: std::fmt::Display,
    {
        let v = self.get(name);
        v.parse().map_err(|e: T::Err| PlanError::BadParam {
            name: name.into(),
            value: v.into(),
            reason: e.to_string(),
        })
    }

    /// A parameter that must be a positive integer (a count, a size).
    pub fn positive(&self, name: &str) -> Result<u64, PlanError> {
        match self.get(name).trim().parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(self.bad(name, "expected a positive integer")),
        }
    }

    /// The late-event rule the parameters of [`LATE_PARAMS`] ask for, for an
    /// event-time column at `column` (projected) in `unit`: `None` under the
    /// default policy `correct`.
    pub fn late_rule(&self, column: usize, unit: TimeUnit) -> Result<Option<LateRule>, PlanError> {
        let bad = |name: &str, reason: String| self.bad(name, reason);
        let lateness = parse_duration(self.get("allowed_lateness"), unit)
            .map_err(|e| bad("allowed_lateness", e))?;
        match self.get("late") {
            // A lateness without the drop policy would be silently ignored.
            "correct" if lateness != 0 => Err(bad(
                "allowed_lateness",
                "applies only with late=drop (--late drop); late=correct keeps every event".into(),
            )),
            "correct" => Ok(None),
            "drop" => Ok(Some(LateRule { column, lateness })),
            other => Err(bad(
                "late",
                format!("unknown policy {other:?} (correct or drop)"),
            )),
        }
    }

    /// A `BadParam` error for parameter `name`, with its value and `reason`.
    pub fn bad(&self, name: &str, reason: impl Into<String>) -> PlanError {
        PlanError::BadParam {
            name: name.into(),
            value: self.get(name).into(),
            reason: reason.into(),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        self.0.iter()
    }
}

/// Why a job could not be planned: a user error in parameters or inputs.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PlanError {
    /// A parameter the job does not declare.
    #[error("job {job} has no parameter {name:?} (its parameters: {known})")]
    UnknownParam {
        job: String,
        name: String,
        known: String,
    },
    /// A required parameter without a value.
    #[error("job {job} needs --param {name}=... ({help})")]
    MissingParam {
        job: String,
        name: String,
        help: String,
    },
    /// A parameter value that does not parse or make sense.
    #[error("bad value {value:?} for parameter {name}: {reason}")]
    BadParam {
        name: String,
        value: String,
        reason: String,
    },
    /// A column named by a parameter or required by the job is not in the input.
    #[error("input {input} has no column {column:?} (its columns: {available})")]
    UnknownColumn {
        input: String,
        column: String,
        available: String,
    },
}
