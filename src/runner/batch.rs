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
//! updates that land on it and sorts and consolidates them; the driver
//! merges the workers' sorted runs. The result is a function of the input
//! collections only, hence byte-identical for every worker count.
//!
//! Invariant: a read error on any worker makes the whole run fail with the
//! error at the smallest location (so the message does not depend on which
//! worker got there first), and no output is produced.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::combine::Combiner;
use super::order;
use super::outputs::collect_outputs;
use super::{RunError, WorkerConfig};
use crate::job::{Plan, RowInput, Time, Updates};
use crate::source::late::LateFilter;
use crate::source::{self, BadRows, Chunk, InputFiles, ReadOptions, SourceError};
use crate::value::Row;

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
}

/// What a batch run produced.
#[derive(Debug)]
pub struct BatchResult {
    /// Per output (plan order): rows sorted, with positive multiplicities.
    pub outputs: Vec<Vec<(Row, isize)>>,
    /// Rows read per input.
    pub rows_in: Vec<u64>,
    /// Bad rows skipped per input (only under `--on-bad-row skip`).
    pub bad_rows: Vec<BadRows>,
    /// Late events dropped per input (only under the `drop` policy).
    pub late_dropped: Vec<u64>,
    /// Wall time from the start of the run to its outputs gathered.
    pub elapsed: Duration,
}

/// What one worker hands back.
struct WorkerResult {
    outputs: Vec<Vec<(Row, isize)>>,
    rows_in: Vec<u64>,
    bad_rows: Vec<BadRows>,
    late_dropped: Vec<u64>,
}

impl BatchRun {
    /// Runs the job to completion.
    pub fn run(self) -> Result<BatchResult, RunError> {
        let started = Instant::now();
        let config = self.workers.timely_config()?;
        let chunks = plan_chunks(&self.inputs, &self.plan, self.workers.total_workers())?;
        let shared = Arc::new(Shared {
            run: self,
            chunks,
            abort: AtomicBool::new(false),
            started,
        });
        let worker_shared = shared.clone();
        let guards = timely::execute(config, move |worker| worker_shared.work(worker))
            .map_err(RunError::Timely)?;
        let mut results = Vec::new();
        let mut errors = Vec::new();
        for result in guards.join() {
            match result.map_err(RunError::WorkerPanic)? {
                Ok(r) => results.push(r),
                Err(e) => errors.push(e),
            }
        }
        if let Some(e) = first_error(errors) {
            return Err(e);
        }
        let n_inputs = shared.run.inputs.len();
        let mut result = BatchResult {
            outputs: vec![Vec::new(); shared.run.plan.outputs.len()],
            rows_in: vec![0; n_inputs],
            bad_rows: vec![BadRows::default(); n_inputs],
            late_dropped: vec![0; n_inputs],
            elapsed: Duration::ZERO,
        };
        let mut runs: Vec<Vec<Vec<(Row, isize)>>> = vec![Vec::new(); result.outputs.len()];
        for r in results {
            for (all, part) in runs.iter_mut().zip(r.outputs) {
                all.push(part);
            }
            for i in 0..n_inputs {
                result.rows_in[i] += r.rows_in[i];
                result.bad_rows[i].merge(r.bad_rows[i].clone());
                result.late_dropped[i] += r.late_dropped[i];
            }
        }
        for ((schema, rows), runs) in shared
            .run
            .plan
            .outputs
            .iter()
            .zip(&mut result.outputs)
            .zip(runs)
        {
            // The workers' runs are sorted: one merge puts them in order.
            *rows = order::merge_runs(runs);
            if let Some((row, n)) = rows.iter().find(|(_, n)| *n < 0) {
                return Err(RunError::NegativeMultiplicity {
                    output: schema.name.clone(),
                    row: format!("{row:?}"),
                    count: *n,
                });
            }
        }
        result.elapsed = started.elapsed();
        tracing::info!(elapsed = ?result.elapsed, "outputs gathered");
        Ok(result)
    }
}

/// The error at the smallest row location (deterministic across worker counts).
fn first_error(mut errors: Vec<RunError>) -> Option<RunError> {
    use RunError::Source;
    errors.sort_by(|a, b| match (a, b) {
        (Source(SourceError::BadRow { at: x, .. }), Source(SourceError::BadRow { at: y, .. })) => {
            x.cmp(y)
        }
        (Source(SourceError::BadRow { .. }), _) => std::cmp::Ordering::Greater,
        (_, Source(SourceError::BadRow { .. })) => std::cmp::Ordering::Less,
        _ => std::cmp::Ordering::Equal,
    });
    errors.into_iter().next()
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
        let (sessions, collected) = worker.dataflow::<Time, _, _>(|scope| {
            let _stats = self.run.stats.clone().map(crate::stats::install);
            let (sessions, outputs) = plan.instantiate(scope, Updates::InsertOnly)?;
            Ok::<_, RunError>((sessions, collect_outputs(outputs)))
        })?;
        let reads = self.read_chunks(worker, sessions);
        tracing::info!(worker = index, elapsed = ?self.started.elapsed(), "inputs read");
        // The inputs are closed: the dataflow runs to completion.
        while worker.step_or_park(None) {}
        tracing::info!(worker = index, elapsed = ?self.started.elapsed(), "dataflow complete");
        if let Some(e) = reads.failure {
            return Err(RunError::Source(e));
        }
        let mut outputs = std::mem::take(&mut *collected.borrow_mut());
        outputs.iter_mut().for_each(order::sort_consolidate);
        Ok(WorkerResult {
            outputs,
            rows_in: reads.rows_in,
            bad_rows: reads.bad_rows,
            late_dropped: reads.late_dropped,
        })
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
