//! The batch runner: a planned job over bounded files, run to completion on
//! timely workers, with the outputs gathered, sorted and consolidated.
//!
//! Every row is inserted at one logical time (epoch 0); the job's output is
//! the accumulated output collection once all inputs are closed. Files are
//! cut into chunks ([`crate::source::split`]) and chunk `i` is read by worker
//! `i % workers`, so parsing is parallel. The smaller inputs are read first,
//! and each worker closes an input as soon as it has read its chunks of it:
//! operators that wait for a whole side (the hash join's table) get it
//! before the big input streams through. Each worker collects the output
//! updates that land on it and sorts and consolidates them, in runs on
//! disk past its share of the sort memory ([`super::spill`]); the caller
//! merges the workers' sorted runs. The result is a function of the input
//! collections only, hence byte-identical for every worker count and
//! sort memory.
//!
//! Invariant: a read error on any worker makes the whole run fail with the
//! error at the smallest location (so the message does not depend on which
//! worker got there first), and no output is produced.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::cluster;
use super::combine::Combiner;
use super::outputs::collect_outputs;
use super::spill::{SortedOutput, Spill, Spiller};
use super::{RunError, WorkerConfig};
use crate::job::{Plan, RowInput, Time, Updates};
use crate::source::late::LateFilter;
use crate::source::{self, BadRows, Chunk, InputFiles, ReadOptions, RowLocation, SourceError};

/// Rows between two steps of the dataflow while reading, so that exchange
/// buffers do not grow with the whole input.
const STEP_EVERY: u64 = 1 << 16;

/// A batch job, ready to run.
pub struct BatchRun {
    /// The job's plan: what each input is read as, the dataflow, the outputs.
    pub plan: Plan,
    /// Resolved inputs, in the job's spec order.
    pub inputs: Vec<InputFiles>,
    /// How fields are read: the null marker and the bad-row policy.
    pub options: ReadOptions,
    /// The workers to run on.
    pub workers: WorkerConfig,
    /// Called with bytes read, from any worker (a progress bar).
    pub progress: Option<Arc<dyn Fn(u64) + Send + Sync>>,
    /// Counts records per worker at each exchange (`--stats`); `None`
    /// builds no counting step.
    pub stats: Option<Arc<crate::stats::Recorder>>,
    /// What the caller planned, one fact per line (job, version,
    /// parameters, the planner's decisions): in a cluster run, every
    /// process must plan the same, and the runner checks it.
    pub fingerprint: String,
    /// Where outputs past a memory budget are sorted to disk; `None`: they
    /// are held in memory, however large.
    pub spill: Option<Spill>,
    /// What the first process does with the gathered outputs before the
    /// run ends (see [`Finish`]); `None`: they are handed back in
    /// [`BatchResult::outputs`].
    pub finish: Option<std::sync::Mutex<Option<Finish>>>,
}

/// The first process' last step of a run, given every output's sorted runs
/// (plan order): merging and committing the output files. It runs on the
/// first process' first worker while every worker of the run waits, so
/// that its failure fails every process of a cluster run alike: the others
/// report it and exit non-zero rather than saying that their part is done.
/// Its error is the message the other processes report; the caller keeps
/// the error itself.
pub type Finish = Box<dyn FnOnce(Vec<SortedOutput>) -> Result<(), String> + Send>;

/// What a batch run produced.
pub struct BatchResult {
    /// Per output (plan order): its rows in sorted runs, to be merged
    /// ([`SortedOutput::into_rows`], [`SortedOutput::merge`]).
    pub outputs: Vec<SortedOutput>,
    /// Rows read per input.
    pub rows_in: Vec<u64>,
    /// Bad rows skipped per input (only under `--on-bad-row skip`).
    pub bad_rows: Vec<BadRows>,
    /// Late events dropped per input (only under the `drop` policy).
    pub late_dropped: Vec<u64>,
    /// This process holds the outputs (a one-process run, or the first
    /// process of a cluster run; the others' `outputs` are empty).
    pub holds_outputs: bool,
}

/// What one worker tells every other at the end of a run: what it read,
/// and why it failed, if it did.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct WorkerReport {
    rows_in: Vec<u64>,
    bad_rows: Vec<BadRows>,
    late_dropped: Vec<u64>,
    /// The failure's place among all workers' failures (see
    /// [`failure_order`]) and its message.
    failure: Option<(FailureOrder, String)>,
    /// Under `--stats`, from the first worker of each process: the
    /// process' exchange counts ([`crate::stats::Recorder::received`]).
    exchanges: Vec<Vec<u64>>,
}

/// Failures are reported in this order, so that the message does not
/// depend on which worker got there first: errors other than bad rows
/// first, then bad rows by location.
type FailureOrder = (bool, Option<RowLocation>);

fn failure_order(e: &SourceError) -> FailureOrder {
    match e {
        SourceError::BadRow { at, .. } => (true, Some(at.clone())),
        _ => (false, None),
    }
}

/// What one worker hands back to its process.
struct WorkerResult {
    /// The output changes gathered on this worker, in sorted, consolidated
    /// runs (on every worker of a one-process run; on the first process'
    /// workers of a cluster run, the others hold none).
    outputs: Vec<SortedOutput>,
    /// This worker's own failure.
    failure: Option<SourceError>,
    /// Every worker's report, in worker order.
    reports: Vec<WorkerReport>,
}

impl BatchRun {
    /// Runs the job to completion (this process' part of it, in a cluster
    /// run: the outputs are gathered on the first process).
    pub fn run(self) -> Result<BatchResult, RunError> {
        let started = Instant::now();
        let chunks = plan_chunks(&self.inputs, &self.plan, self.workers.total_workers())?;
        let threads = self.workers.threads;
        let shared = Arc::new(Shared {
            run: self,
            chunks,
            abort: AtomicBool::new(false),
            started,
            handoff: std::sync::Mutex::new((0..threads).map(|_| None).collect()),
            handed: std::sync::Condvar::new(),
        });
        let worker_shared = shared.clone();
        let mut results = Vec::new();
        for result in shared
            .run
            .workers
            .run(move |worker| worker_shared.work(worker))?
        {
            // A build or agreement error is every worker's alike.
            results.push(result?);
        }
        let reports = results
            .first()
            .map(|r| r.reports.clone())
            .unwrap_or_default();
        shared.fail_as_one(&mut results, &reports)?;
        let n_inputs = shared.run.inputs.len();
        let mut result = BatchResult {
            outputs: Vec::new(),
            rows_in: vec![0; n_inputs],
            bad_rows: vec![BadRows::default(); n_inputs],
            late_dropped: vec![0; n_inputs],
            holds_outputs: shared.run.workers.is_first_process(),
        };
        shared.absorb_stats(&reports);
        for r in reports {
            for i in 0..n_inputs {
                result.rows_in[i] += r.rows_in[i];
                result.bad_rows[i].merge(r.bad_rows[i].clone());
                result.late_dropped[i] += r.late_dropped[i];
            }
        }
        result.outputs = shared.gather_outputs(results.into_iter().map(|r| r.outputs));
        tracing::info!(elapsed = ?started.elapsed(), "outputs gathered");
        Ok(result)
    }
}

impl Shared {
    /// Fails the run, in every process alike, with the first failure of
    /// any worker (in [`failure_order`]): this process' own error if the
    /// worker is here, else the other process' message.
    fn fail_as_one(
        &self,
        results: &mut [WorkerResult],
        reports: &[WorkerReport],
    ) -> Result<(), RunError> {
        let first = reports
            .iter()
            .enumerate()
            .filter_map(|(w, r)| {
                r.failure
                    .as_ref()
                    .map(|(order, message)| (order, w, message))
            })
            .min();
        let Some((_, worker, message)) = first else {
            return Ok(());
        };
        let threads = self.run.workers.threads;
        let here = self.run.workers.process * threads;
        let local = worker.checked_sub(here).and_then(|w| results.get_mut(w));
        match local.and_then(|r| r.failure.take()) {
            Some(e) => Err(RunError::Source(e)),
            None => Err(RunError::Peer {
                process: worker / threads,
                message: message.clone(),
            }),
        }
    }

    /// Adds the other processes' exchange counts to this process' recorder,
    /// so that `--stats` shows every worker of a cluster run.
    fn absorb_stats(&self, reports: &[WorkerReport]) {
        let (Some(stats), w) = (&self.run.stats, &self.run.workers) else {
            return;
        };
        for (worker, report) in reports.iter().enumerate() {
            if worker / w.threads != w.process {
                stats.absorb(&report.exchanges);
            }
        }
    }

    /// Per output, every worker's runs of it (the merge that puts them in
    /// order, and finds a negative count, is the caller's).
    fn gather_outputs(
        &self,
        parts: impl IntoIterator<Item = Vec<SortedOutput>>,
    ) -> Vec<SortedOutput> {
        let mut outputs: Vec<SortedOutput> = self
            .run
            .plan
            .outputs
            .iter()
            .map(|_| SortedOutput::default())
            .collect();
        for part in parts {
            for (all, part) in outputs.iter_mut().zip(part) {
                all.absorb(part);
            }
        }
        outputs
    }

    /// What this worker is about to run, one fact per line: every process
    /// of a cluster run must say the same.
    fn fingerprint(&self) -> String {
        use std::fmt::Write;
        let mut text = self.run.fingerprint.clone();
        let w = &self.run.workers;
        let _ = write!(text, "\nworkers {} x {} processes", w.threads, w.processes);
        for p in &self.run.plan.inputs {
            let _ = write!(text, "\nreads {p:?}");
        }
        for o in &self.run.plan.outputs {
            let _ = write!(text, "\nwrites {o:?}");
        }
        for (i, input) in self.run.inputs.iter().enumerate() {
            for f in &input.files {
                let _ = write!(text, "\ninput {i} file {}", f.display());
            }
        }
        for c in &self.chunks {
            let _ = write!(text, "\nchunk {c:?}");
        }
        text
    }
}

/// Cuts every input file into about `workers` chunks. Files of an input
/// under the `drop` late-event policy are read whole, in order, by one
/// worker each: the rule depends on the order of a file's rows. Chunks come
/// input by input, the smallest input first.
fn plan_chunks(inputs: &[InputFiles], plan: &Plan, workers: usize) -> Result<Vec<Chunk>, RunError> {
    let mut chunks = Vec::new();
    let mut input_bytes = vec![0u64; inputs.len()];
    for (input, files) in inputs.iter().enumerate() {
        let pieces = match plan.inputs[input].late {
            Some(_) => 1,
            None => workers,
        };
        for (file, path) in files.files.iter().enumerate() {
            let ranges = source::split::split_file(path, files.format, pieces)
                .map_err(|e| RunError::Source(SourceError::io(path, e)))?;
            for (start, end) in ranges {
                input_bytes[input] += end - start;
                chunks.push(Chunk {
                    input,
                    file,
                    start,
                    end,
                    header: start == 0,
                });
            }
        }
    }
    // Within an input, big chunks first, so that round-robin assignment
    // spreads the bytes.
    chunks.sort_by_key(|c| {
        (
            input_bytes[c.input],
            c.input,
            std::cmp::Reverse(c.end - c.start),
        )
    });
    Ok(chunks)
}

/// What all workers share.
struct Shared {
    run: BatchRun,
    chunks: Vec<Chunk>,
    /// Set by a worker whose read failed, so the others stop reading.
    abort: AtomicBool,
    started: Instant,
    /// Under [`BatchRun::finish`], the first process' workers' outputs,
    /// handed to its first worker: one slot per worker of the process,
    /// `Some(None)` from a worker that failed to sort its share.
    handoff: std::sync::Mutex<Vec<Option<Option<Vec<SortedOutput>>>>>,
    handed: std::sync::Condvar,
}

/// What one worker read of its chunks, per input.
struct WorkerReads {
    rows_in: Vec<u64>,
    bad_rows: Vec<BadRows>,
    late_dropped: Vec<u64>,
    /// The read that failed, if one did (the worker stopped reading there).
    failure: Option<SourceError>,
}

impl Shared {
    fn work(&self, worker: &mut timely::worker::Worker) -> Result<WorkerResult, RunError> {
        let index = worker.index();
        let plan = &self.run.plan;
        cluster::agree(worker, &self.fingerprint(), self.run.workers.threads)?;
        // Across processes, the outputs go to the first process' workers.
        let gather = (self.run.workers.processes > 1).then_some(self.run.workers.threads);
        let (sessions, collected) = worker.dataflow::<Time, _, _>(|scope| {
            let _stats = self.run.stats.clone().map(crate::stats::install);
            let (sessions, outputs) = plan.instantiate(scope, Updates::InsertOnly)?;
            let into = Spiller::new(outputs.len(), self.spill_budget());
            Ok::<_, RunError>((sessions, collect_outputs(outputs, gather, into)))
        })?;
        let reads = self.read_chunks(worker, sessions);
        tracing::info!(worker = index, elapsed = ?self.started.elapsed(), "inputs read");
        // The inputs are closed: the dataflow runs to completion.
        while worker.step_or_park(None) {}
        tracing::info!(worker = index, elapsed = ?self.started.elapsed(), "dataflow complete");
        let report = WorkerReport {
            rows_in: reads.rows_in,
            bad_rows: reads.bad_rows,
            late_dropped: reads.late_dropped,
            failure: reads
                .failure
                .as_ref()
                .map(|e| (failure_order(e), e.to_string())),
            exchanges: match &self.run.stats {
                Some(stats) if index.is_multiple_of(self.run.workers.threads) => stats.received(),
                _ => Vec::new(),
            },
        };
        let reports = cluster::all_gather(worker, &report)?;
        let collected = collected.replace(Spiller::new(0, None));
        let outputs = match reads.failure {
            None => collected.finish(),
            Some(_) => Ok(Vec::new()),
        };
        let outputs = match &self.run.finish {
            None => outputs?,
            Some(_) => {
                let read_failed = reports.iter().any(|r| r.failure.is_some());
                self.finish_as_one(worker, outputs, read_failed)?;
                Vec::new()
            }
        };
        Ok(WorkerResult {
            outputs,
            failure: reads.failure,
            reports,
        })
    }

    /// Under [`BatchRun::finish`]: the first process' workers hand their
    /// outputs to its first worker, which runs the finish unless a worker
    /// failed; then every worker of the run learns every failure, and fails
    /// with its own, or else with the first other one.
    fn finish_as_one(
        &self,
        worker: &mut timely::worker::Worker,
        outputs: Result<Vec<SortedOutput>, RunError>,
        read_failed: bool,
    ) -> Result<(), RunError> {
        let threads = self.run.workers.threads;
        let local = worker.index() % threads;
        let (sorted, mut own) = match outputs {
            Ok(sorted) => (Some(sorted), None),
            Err(e) => (None, Some(e)),
        };
        let mut failure = own.as_ref().map(ToString::to_string);
        if self.run.workers.is_first_process() {
            self.handoff.lock().unwrap()[local] = Some(sorted);
            self.handed.notify_all();
            if local == 0
                && !read_failed
                && let Err(e) = self.run_finish()
            {
                failure = Some(e.clone());
                own = Some(RunError::Finish(e));
            }
        }
        let failures = cluster::all_gather(worker, &failure)?;
        if let Some(e) = own {
            return Err(e);
        }
        match failures.iter().enumerate().find(|(_, f)| f.is_some()) {
            Some((w, Some(message))) => Err(RunError::Peer {
                process: w / threads,
                message: message.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// Waits for every worker of this process to hand over its outputs,
    /// and runs the finish on them all; nothing if a worker failed to sort
    /// its share (its own error is the run's).
    fn run_finish(&self) -> Result<(), String> {
        let mut slots = self.handoff.lock().unwrap();
        while slots.iter().any(Option::is_none) {
            slots = self.handed.wait(slots).unwrap();
        }
        let parts: Option<Vec<Vec<SortedOutput>>> =
            slots.iter_mut().map(|slot| slot.take().flatten()).collect();
        drop(slots);
        let Some(parts) = parts else {
            return Ok(());
        };
        let all = self.gather_outputs(parts);
        let finish = self
            .run
            .finish
            .as_ref()
            .and_then(|f| f.lock().unwrap().take());
        finish.map_or(Ok(()), |finish| finish(all))
    }

    /// Where this worker spills its outputs, and how many bytes of them it
    /// holds first: its share of the process' sort memory.
    fn spill_budget(&self) -> Option<(std::path::PathBuf, usize)> {
        let spill = self.run.spill.as_ref()?;
        Some((spill.dir.clone(), spill.memory / self.run.workers.threads))
    }

    /// Reads this worker's chunks into the inputs, closing each input as
    /// soon as its last chunk here is read (which lets its frontier
    /// advance), and all of them at the end; stops at the first failed
    /// read, or when another worker's failed.
    fn read_chunks(
        &self,
        worker: &mut timely::worker::Worker,
        sessions: Vec<RowInput>,
    ) -> WorkerReads {
        let (index, peers) = (worker.index(), worker.peers());
        let n = self.run.plan.inputs.len();
        let mut reads = WorkerReads {
            rows_in: vec![0; n],
            bad_rows: vec![BadRows::default(); n],
            late_dropped: vec![0; n],
            failure: None,
        };
        let mut combiners: Vec<Combiner> = (0..n).map(|_| Combiner::default()).collect();
        let mine: Vec<&Chunk> = self.chunks.iter().skip(index).step_by(peers).collect();
        // Per input, how many of this worker's chunks are still to read.
        let mut left = vec![0usize; n];
        mine.iter().for_each(|c| left[c.input] += 1);
        let mut sessions: Vec<Option<RowInput>> = sessions
            .into_iter()
            .zip(&left)
            .map(|(s, &n)| (n > 0).then_some(s))
            .collect();
        for chunk in mine {
            if self.abort.load(Ordering::Relaxed) {
                break;
            }
            let input = chunk.input;
            let session = sessions[input].as_mut().expect("open until its last chunk");
            let read = self.read_chunk(worker, chunk, &mut combiners[input], session, &mut reads);
            if let Err(e) = read {
                self.abort.store(true, Ordering::Relaxed);
                reads.failure = Some(e);
                break;
            }
            left[input] -= 1;
            if left[input] == 0 {
                combiners[input].flush(session);
                sessions[input] = None;
            }
        }
        for (combiner, session) in combiners.iter_mut().zip(&mut sessions) {
            if let Some(session) = session {
                combiner.flush(session);
            }
        }
        reads
    }

    /// Reads one chunk into its input's session, through the late-event
    /// filter when the input has one, stepping the dataflow as it goes so
    /// that exchange buffers stay small.
    fn read_chunk(
        &self,
        worker: &mut timely::worker::Worker,
        chunk: &Chunk,
        combiner: &mut Combiner,
        session: &mut RowInput,
        reads: &mut WorkerReads,
    ) -> Result<(), SourceError> {
        let input = chunk.input;
        let projection = &self.run.plan.inputs[input];
        let files = &self.run.inputs[input];
        let no_progress = |_: u64| {};
        let progress: &dyn Fn(u64) = match &self.run.progress {
            Some(p) => p.as_ref(),
            None => &no_progress,
        };
        let mut late = projection
            .late
            .map(|rule| LateFilter::new(rule, files.files[chunk.file].display().to_string()));
        let mut since_step = 0u64;
        let read = source::read_chunk(
            files,
            chunk,
            projection,
            &self.run.options,
            &mut reads.bad_rows[input],
            progress,
            &mut |row| {
                if late.as_mut().is_some_and(|f| !f.admit(row)) {
                    return;
                }
                combiner.push(row, session);
                since_step += 1;
                if since_step == STEP_EVERY {
                    since_step = 0;
                    worker.step();
                }
            },
        );
        reads.late_dropped[input] += late.map_or(0, |f| f.dropped());
        reads.rows_in[input] += read?;
        Ok(())
    }
}
