//! A job over files: resolve its inputs, plan it with what the files tell
//! (sizes, a sample of keys), run it on timely workers, and commit its
//! outputs to a directory. `kappa run` is this and a summary.
//!
//! Two ways to take the outputs: [`Batch::run`] hands them over in memory
//! (to read, or to [`BatchOutput::commit`]); [`Batch::run_into`] commits
//! them as it merges them, holding at most [`Batch::sort_memory`] of rows
//! and sorting the rest in runs on disk, for outputs larger than memory.
//! Both write the same bytes.
//!
//! ```no_run
//! # fn main() -> Result<(), kappa::engine::EngineError> {
//! let job = kappa::Registry::builtin().find("count-by")?;
//! let output = kappa::Batch::new(job)
//!     .input("input", "events.csv")
//!     .param("key", "user")
//!     .run()?;
//! let counts = output.output("counts");
//! output.commit("out".as_ref(), false)?;
//!
//! let job = kappa::Registry::builtin().find("count-by")?;
//! let batch = kappa::Batch::new(job).input("input", "events.csv").param("key", "user");
//! let planned = batch.plan()?;
//! let report = batch.run_into(planned, "out2".as_ref(), false)?;
//! # Ok(()) }
//! ```

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::EngineError;
use crate::job::{DataContext, Job, KeySample, Params, Plan, plan_job};
use crate::runner::WorkerConfig;
use crate::runner::batch::{BatchRun, Finish};
use crate::runner::spill::{SortedOutput, Spill};
use crate::schema::{ColumnType, OutputSchema};
use crate::sink::files;
use crate::source::{BadRows, Format, InputFiles, ReadOptions};
use crate::value::Row;

/// A job over files, to be planned and run.
pub struct Batch {
    job: Arc<dyn Job>,
    inputs: Vec<(String, PathBuf)>,
    params: Vec<(String, String)>,
    format: Option<Format>,
    options: ReadOptions,
    workers: WorkerConfig,
    progress: Option<Arc<dyn Fn(u64) + Send + Sync>>,
    stats: Option<Arc<crate::stats::Recorder>>,
    sort_memory: usize,
}

/// A planned batch run, before it runs.
pub struct BatchPlan {
    /// The plan.
    pub plan: Plan,
    /// The inputs, resolved, in spec order.
    pub inputs: Vec<InputFiles>,
    /// The choices the planner made (strategies, hot keys).
    pub decisions: Vec<String>,
}

/// What a batch run produced, in memory ([`Batch::run`]).
#[derive(Debug)]
pub struct BatchOutput {
    /// Per output: its schema, and its rows sorted, with their (positive)
    /// multiplicities.
    pub outputs: Vec<(OutputSchema, Vec<(Row, isize)>)>,
    /// What the run read, wrote and decided.
    pub report: BatchReport,
}

/// What a batch run read, wrote and decided.
#[derive(Clone, Debug)]
pub struct BatchReport {
    /// Per input (spec order): its name and the rows read.
    pub rows_in: Vec<(String, u64)>,
    /// Per output (plan order): its name and its rows, each counted as
    /// many times as its multiplicity (as the output file has lines).
    pub rows_out: Vec<(String, u64)>,
    /// Per input: the bad rows skipped (under [`crate::source::BadRowPolicy::Skip`]).
    pub bad_rows: Vec<BadRows>,
    /// Per input: the late events dropped (under the `drop` policy).
    pub late_dropped: Vec<u64>,
    /// The choices the planner made.
    pub decisions: Vec<String>,
    /// This process holds the outputs: a one-process run, or the first
    /// process of a cluster run (the only one that may commit them; the
    /// others' outputs are empty).
    pub holds_outputs: bool,
    /// How long the run took: to its outputs in memory ([`Batch::run`]),
    /// or committed ([`Batch::run_into`]).
    pub elapsed: Duration,
}

impl Batch {
    /// What [`Batch::run_into`] holds of the output rows unless told
    /// otherwise: bounds a stateless query's memory well under 300 MiB
    /// (Nexmark q0: under 200 MiB, as fast as holding all 9.2M rows).
    pub const SORT_MEMORY: usize = 64 << 20;

    /// `job` over files, with default settings: inputs and parameters to be
    /// given, formats from the file names, bad rows fail the run, a worker
    /// per core.
    pub fn new(job: Arc<dyn Job>) -> Batch {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Batch {
            job,
            inputs: Vec::new(),
            params: Vec::new(),
            format: None,
            options: ReadOptions::default(),
            workers: WorkerConfig::threads(threads),
            progress: None,
            stats: None,
            sort_memory: Batch::SORT_MEMORY,
        }
    }

    /// Input `name` read from `path` (a file, or a directory of part files).
    pub fn input(mut self, name: &str, path: impl Into<PathBuf>) -> Batch {
        self.inputs.push((name.to_string(), path.into()));
        self
    }

    /// Parameter `name` set to `value`.
    pub fn param(mut self, name: &str, value: &str) -> Batch {
        self.params.push((name.to_string(), value.to_string()));
        self
    }

    /// Parameters, as `(name, value)` pairs.
    pub fn params(mut self, params: &[(String, String)]) -> Batch {
        self.params.extend_from_slice(params);
        self
    }

    /// Every input read in this format, whatever its extension.
    pub fn format(mut self, format: Option<Format>) -> Batch {
        self.format = format;
        self
    }

    /// How fields are read: the null marker and the bad-row policy.
    pub fn read_options(mut self, options: ReadOptions) -> Batch {
        self.options = options;
        self
    }

    /// The workers to run on.
    pub fn workers(mut self, workers: WorkerConfig) -> Batch {
        self.workers = workers;
        self
    }

    /// Called with the bytes read, from any worker (a progress bar).
    pub fn on_progress(mut self, progress: Arc<dyn Fn(u64) + Send + Sync>) -> Batch {
        self.progress = Some(progress);
        self
    }

    /// Counts records per worker at each exchange into `stats`.
    pub fn stats(mut self, stats: Arc<crate::stats::Recorder>) -> Batch {
        self.stats = Some(stats);
        self
    }

    /// How many bytes of output rows [`Batch::run_into`] holds in this
    /// process before it sorts them to disk in runs (about: see
    /// [`crate::runner::spill::held_bytes`]). Memory for the job's own
    /// state (a join's tables, a group-by's groups) is apart.
    pub fn sort_memory(mut self, bytes: usize) -> Batch {
        self.sort_memory = bytes;
        self
    }

    /// Resolves the inputs and plans the job.
    pub fn plan(&self) -> Result<BatchPlan, EngineError> {
        let spec = self.job.spec();
        let params = Params::resolve(&spec, &self.params).map_err(EngineError::plan(spec.name))?;
        let inputs = self.resolve_inputs()?;
        let schemas = inputs.iter().map(|i| i.schema.clone()).collect();
        let data = FilesContext {
            inputs: &inputs,
            options: &self.options,
            decisions: RefCell::default(),
        };
        let plan =
            plan_job(&*self.job, &params, schemas, &data).map_err(EngineError::plan(spec.name))?;
        let decisions = data.decisions.into_inner();
        Ok(BatchPlan {
            plan,
            inputs,
            decisions,
        })
    }

    /// Plans and runs the job to completion; the outputs are in memory,
    /// ready to [`BatchOutput::commit`].
    pub fn run(self) -> Result<BatchOutput, EngineError> {
        let planned = self.plan()?;
        self.run_planned(planned)
    }

    /// Runs a plan made by [`Batch::plan`], its outputs into memory.
    pub fn run_planned(self, planned: BatchPlan) -> Result<BatchOutput, EngineError> {
        let started = Instant::now();
        let (schemas, sorted, mut report) = self.execute(planned, None, None)?;
        let mut outputs = Vec::new();
        for (schema, sorted) in schemas.into_iter().zip(sorted) {
            let rows = sorted.into_rows(&schema.name)?;
            report
                .rows_out
                .push((schema.name.clone(), files::line_count(&rows)));
            outputs.push((schema, rows));
        }
        report.elapsed = started.elapsed();
        Ok(BatchOutput { outputs, report })
    }

    /// Runs a plan made by [`Batch::plan`] and commits its outputs to
    /// `dir` as [`BatchOutput::commit`] does (an existing directory is
    /// replaced only if `overwrite`), merging the workers' sorted runs
    /// into the files as they are written. Output rows past
    /// [`Batch::sort_memory`] are sorted to disk, in anonymous temporary
    /// files in the nearest existing directory at or above `dir`. In a
    /// cluster run only the first process commits; the others return once
    /// their part is done.
    pub fn run_into(
        self,
        planned: BatchPlan,
        dir: &Path,
        overwrite: bool,
    ) -> Result<BatchReport, EngineError> {
        files::check_target(dir, overwrite)?;
        let spill = Spill {
            dir: existing_ancestor(dir),
            memory: self.sort_memory,
        };
        let started = Instant::now();
        // The commit runs inside the run (runner::batch::Finish), so that in
        // a cluster run the other processes wait for it and fail with it.
        let schemas = planned.plan.outputs.clone();
        let committed: Arc<std::sync::Mutex<Option<Committed>>> = Arc::default();
        let into = committed.clone();
        let dir_owned = dir.to_path_buf();
        let finish: Finish = Box::new(move |sorted: Vec<SortedOutput>| {
            let merges = schemas.iter().zip(sorted).map(|(schema, sorted)| {
                let merge = sorted.merge(&schema.name, files::CHUNK_ROWS);
                (schema, merge.map(|chunk| chunk.map_err(EngineError::from)))
            });
            let result = files::commit(&dir_owned, merges);
            let message = result.as_ref().err().map(ToString::to_string);
            *into.lock().unwrap() = Some(result);
            message.map_or(Ok(()), Err)
        });
        let ran = self.execute(planned, Some(spill), Some(finish));
        // This process' own commit error, with its type, before the run's.
        let committed = committed.lock().unwrap().take();
        if let Some(Err(e)) = committed {
            return Err(e);
        }
        let (schemas, _, mut report) = ran?;
        if let Some(Ok(written)) = committed {
            let names = schemas.into_iter().map(|s| s.name);
            report.rows_out = names.zip(written).collect();
        }
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// Runs the plan: per output its schema and its sorted runs, and what
    /// the run read.
    fn execute(
        self,
        planned: BatchPlan,
        spill: Option<Spill>,
        finish: Option<Finish>,
    ) -> Result<(Vec<OutputSchema>, Vec<SortedOutput>, BatchReport), EngineError> {
        let BatchPlan {
            plan,
            inputs,
            decisions,
        } = planned;
        let names = inputs.iter().map(|i| i.schema.name.clone());
        let fingerprint = self.fingerprint(&decisions);
        let run = BatchRun {
            plan: plan.clone(),
            inputs: inputs.clone(),
            options: self.options,
            workers: self.workers,
            progress: self.progress,
            stats: self.stats,
            fingerprint,
            spill,
            finish: finish.map(|f| std::sync::Mutex::new(Some(f))),
        };
        let result = run.run()?;
        let report = BatchReport {
            rows_in: names.zip(result.rows_in).collect(),
            rows_out: Vec::new(),
            bad_rows: result.bad_rows,
            late_dropped: result.late_dropped,
            decisions,
            holds_outputs: result.holds_outputs,
            elapsed: Duration::ZERO,
        };
        Ok((plan.outputs, result.outputs, report))
    }

    /// What this process is about to run, for the runner's check that
    /// every process of a cluster run runs the same: the job, its version,
    /// the parameters as given, the read options and the planner's choices.
    fn fingerprint(&self, decisions: &[String]) -> String {
        let mut lines = describe_job(&*self.job, &self.params);
        lines.push(format!(
            "format {:?}, read options {:?}",
            self.format, self.options
        ));
        lines.extend(decisions.iter().map(|d| format!("decided {d}")));
        lines.join("\n")
    }

    /// The given inputs matched to the job's, in spec order, headers read.
    fn resolve_inputs(&self) -> Result<Vec<InputFiles>, EngineError> {
        let spec = self.job.spec();
        check_input_names(&spec, self.inputs.iter().map(|(n, _)| n.as_str()))?;
        spec.inputs
            .iter()
            .map(|input| {
                let given: Vec<_> = self
                    .inputs
                    .iter()
                    .filter(|(n, _)| n == input.name)
                    .collect();
                match given.as_slice() {
                    [] => Err(EngineError::MissingInput {
                        name: input.name.to_string(),
                        what: "PATH",
                        about: input.about.to_string(),
                    }),
                    [(_, path)] => Ok(InputFiles::resolve(
                        input.name,
                        path,
                        self.format,
                        input.format,
                    )?),
                    _ => Err(EngineError::DuplicateInput(input.name.to_string())),
                }
            })
            .collect()
    }
}

/// Refuses input names the job does not declare.
pub(super) fn check_input_names<'a>(
    spec: &crate::job::JobSpec,
    given: impl IntoIterator<Item = &'a str>,
) -> Result<(), EngineError> {
    for name in given {
        if !spec.inputs.iter().any(|i| i.name == name) {
            let known: Vec<_> = spec.inputs.iter().map(|i| i.name).collect();
            return Err(EngineError::UnknownInput {
                job: spec.name.to_string(),
                name: name.to_string(),
                known: known.join(", "),
            });
        }
    }
    Ok(())
}

/// What the commit inside a run gave: the rows written per output.
type Committed = Result<Vec<u64>, EngineError>;

impl BatchOutput {
    /// Writes every output to `dir/NAME.csv`, then `dir/_SUCCESS`,
    /// atomically (see [`crate::sink::files`]); an existing output
    /// directory is replaced only if `overwrite`.
    /// Only the process that [holds the outputs](BatchOutput::holds_outputs)
    /// may commit them.
    pub fn commit(&self, dir: &Path, overwrite: bool) -> Result<(), EngineError> {
        if !self.report.holds_outputs {
            return Err(EngineError::Refused(
                "this process of a cluster run does not hold the outputs: process 0 commits them"
                    .into(),
            ));
        }
        files::check_target(dir, overwrite)?;
        let outputs = self.outputs.iter();
        files::commit(
            dir,
            outputs.map(|(schema, rows)| (schema, files::in_chunks(rows))),
        )?;
        Ok(())
    }

    /// The rows of output `name`, sorted, with their multiplicities.
    pub fn output(&self, name: &str) -> Option<&[(Row, isize)]> {
        self.outputs
            .iter()
            .find(|(schema, _)| schema.name == name)
            .map(|(_, rows)| rows.as_slice())
    }
}

/// `dir`, or the nearest directory above it that exists (where a run that
/// will create `dir` may put its temporary files); the working directory
/// if none does.
fn existing_ancestor(dir: &Path) -> PathBuf {
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let found = absolute.ancestors().find(|d| d.is_dir());
    found.map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// What the planner may know of file inputs: their sizes and a sample of
/// their keys; records the planner's choices.
struct FilesContext<'a> {
    inputs: &'a [InputFiles],
    options: &'a ReadOptions,
    decisions: RefCell<Vec<String>>,
}

impl FilesContext<'_> {
    fn files(&self, input: &str) -> Option<&InputFiles> {
        self.inputs.iter().find(|f| f.schema.name == input)
    }
}

impl DataContext for FilesContext<'_> {
    fn input_bytes(&self, input: &str) -> Option<u64> {
        self.files(input).map(InputFiles::bytes)
    }

    fn sample_keys(
        &self,
        input: &str,
        columns: &[(usize, ColumnType)],
        rate: f64,
    ) -> Option<KeySample> {
        let index = self.inputs.iter().position(|f| f.schema.name == input)?;
        let files = &self.inputs[index];
        let started = std::time::Instant::now();
        match crate::source::sample::sample_keys(files, index, columns, rate, self.options) {
            Ok(sample) => {
                tracing::info!(input, rows = sample.rows, elapsed = ?started.elapsed(), "sampled keys");
                Some(sample)
            }
            Err(e) => {
                // The run reads the input again and reports the error properly.
                tracing::warn!("cannot sample input {}: {e}", files.schema.name);
                None
            }
        }
    }

    fn decide(&self, note: String) {
        tracing::info!("{note}");
        self.decisions.borrow_mut().push(note);
    }
}

/// The job, its version and its parameters, a line each: what every process
/// of a cluster run must run alike.
pub(super) fn describe_job(job: &dyn Job, params: &[(String, String)]) -> Vec<String> {
    let spec = job.spec();
    let mut lines = vec![format!("job {} version {}", spec.name, spec.version)];
    lines.extend(params.iter().map(|(n, v)| format!("param {n}={v}")));
    lines
}
