//! An in-memory runner: a planned job over rows held in memory, on any number
//! of worker threads. Used by job tests and property tests (the same plan and
//! dataflow as files and logs, without the I/O), and by jobs that are called
//! from code.
//!
//! Rows are dealt round-robin to the workers, so each worker count sends
//! different rows through different workers: the result must not change.

use std::sync::Arc;

use differential_dataflow::consolidation::consolidate;

use super::outputs::collect_outputs;
use super::{OutputRows, RunError};
use crate::job::{Plan, Time, Updates};
use crate::value::Row;

/// Runs `plan` over full (unprojected) input rows, in spec order; returns per
/// output the rows sorted, with their multiplicities. A row that does not
/// fit its projection's types is an error naming the input and the row's
/// index.
pub fn run_in_memory(
    plan: &Plan,
    inputs: Vec<Vec<Row>>,
    workers: usize,
) -> Result<Vec<OutputRows>, RunError> {
    run_projected(plan, project(plan, inputs)?, workers)
}

/// Full input rows (spec order) projected and typed as the plan reads them,
/// each once: a row that does not fit its projection (types, rules) is an
/// error naming the input and the row's index.
pub fn project(plan: &Plan, inputs: Vec<Vec<Row>>) -> Result<Vec<OutputRows>, RunError> {
    let mut projected = Vec::with_capacity(inputs.len());
    for (rows, projection) in inputs.into_iter().zip(&plan.inputs) {
        let mut typed = Vec::with_capacity(rows.len());
        for (index, row) in rows.into_iter().enumerate() {
            let bad = |problem: String| RunError::BadMemoryRow {
                input: projection.input.clone(),
                row: index,
                problem,
            };
            let mut out = Vec::with_capacity(projection.columns.len());
            for &(i, ty) in &projection.columns {
                let value = row
                    .get(i)
                    .ok_or_else(|| bad(format!("has {} columns, column {i} is read", row.len())))?;
                out.push(ty.coerce(value.clone()).map_err(bad)?);
            }
            projection.check(&out).map_err(|(_, e)| bad(e))?;
            typed.push((out, 1));
        }
        projected.push(typed);
    }
    Ok(projected)
}

/// As [`run_in_memory`], over inputs already projected and typed as the plan
/// asks, given as rows with multiplicities.
pub fn run_projected(
    plan: &Plan,
    inputs: Vec<Vec<(Row, isize)>>,
    workers: usize,
) -> Result<Vec<OutputRows>, RunError> {
    // Consolidated tables (what verify recomputes from) only insert.
    let updates = match inputs.iter().flatten().all(|(_, n)| *n > 0) {
        true => Updates::InsertOnly,
        false => Updates::Any,
    };
    let timed = inputs
        .into_iter()
        .map(|rows| rows.into_iter().map(|(row, n)| (row, 0, n)).collect())
        .collect();
    run_timed(plan, timed, updates, workers)
}

/// Runs `plan` over projected input updates `(row, epoch, difference)`,
/// each input's sorted by epoch, fed epoch by epoch as a stream runner
/// would: returns per output the accumulated rows, sorted, with their
/// multiplicities (whatever the epochs, they must equal a one-epoch run
/// over the accumulated inputs).
pub fn run_timed(
    plan: &Plan,
    inputs: Vec<Vec<(Row, Time, isize)>>,
    updates: Updates,
    workers: usize,
) -> Result<Vec<OutputRows>, RunError> {
    let shared = Arc::new((plan.clone(), inputs));
    let guards = timely::execute(timely::Config::process(workers.max(1)), move |worker| {
        let (index, peers) = (worker.index(), worker.peers());
        let (plan, inputs) = &*shared;
        let mine = inputs
            .iter()
            .map(|updates| updates.iter().skip(index).step_by(peers).cloned())
            .collect();
        compute_on_worker(worker, plan, updates, mine, None)
    })
    .map_err(RunError::Timely)?;
    let mut outputs: Vec<OutputRows> = vec![Vec::new(); plan.outputs.len()];
    for result in guards.join() {
        // Every worker builds the same dataflow, so a build error is every worker's.
        let collected = result.map_err(RunError::WorkerPanic)??;
        for (all, mine) in outputs.iter_mut().zip(collected) {
            all.extend(mine);
        }
    }
    for rows in &mut outputs {
        consolidate(rows);
    }
    Ok(outputs)
}

/// One worker's part of an in-memory run: builds `plan`'s dataflow, feeds
/// it this worker's share of each input (updates sorted by epoch), runs it
/// to completion, and returns the output changes collected here, unsorted
/// (`gather` as in [`collect_outputs`]).
pub(super) fn compute_on_worker<I>(
    worker: &mut timely::worker::Worker,
    plan: &Plan,
    updates: Updates,
    inputs: Vec<I>,
    gather: Option<usize>,
) -> Result<Vec<OutputRows>, RunError>
where
    I: Iterator<Item = (Row, Time, isize)>,
{
    let (mut sessions, collected) = worker.dataflow::<Time, _, _>(|scope| {
        let (sessions, outputs) = plan.instantiate(scope, updates)?;
        let into = vec![Vec::new(); outputs.len()];
        Ok::<_, RunError>((sessions, collect_outputs(outputs, gather, into)))
    })?;
    for (session, updates) in sessions.iter_mut().zip(inputs) {
        for (row, t, n) in updates {
            if t > *session.time() {
                session.advance_to(t);
            }
            session.update(row, n);
        }
    }
    sessions.clear();
    while worker.step_or_park(None) {}
    Ok(std::mem::take(&mut *collected.borrow_mut()))
}
