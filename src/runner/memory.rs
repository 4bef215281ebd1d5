//! An in-memory runner: a planned job over rows held in memory, on any number
//! of worker threads. Used by job tests and property tests (the same plan and
//! dataflow as files and logs, without the I/O), and by jobs that are called
//! from code.
//!
//! Rows are dealt round-robin to the workers, so each worker count sends
//! different rows through different workers: the result must not change.

use std::sync::{Arc, Mutex};

use differential_dataflow::consolidation::consolidate;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::operator::Operator;

use crate::job::{Plan, Time, Updates};
use crate::value::Row;

/// Runs `plan` over full (unprojected) input rows, in spec order; returns per
/// output the rows sorted, with their multiplicities.
///
/// Panics if a row does not fit its projection's types: callers give
/// well-typed rows (this runner has no notion of files or lines to blame).
pub fn run_in_memory(plan: &Plan, inputs: Vec<Vec<Row>>, workers: usize) -> Vec<Vec<(Row, isize)>> {
    let projected: Vec<Vec<(Row, isize)>> = inputs
        .into_iter()
        .zip(&plan.inputs)
        .map(|(rows, projection)| {
            rows.into_iter()
                .map(|row| {
                    let row = projection
                        .columns
                        .iter()
                        .map(|&(i, ty)| {
                            ty.coerce(row[i].clone())
                                .expect("in-memory input row does not fit its column type")
                        })
                        .collect();
                    (row, 1)
                })
                .collect()
        })
        .collect();
    run_projected(plan, projected, workers)
}

/// As [`run_in_memory`], over inputs already projected and typed as the plan
/// asks, given as rows with multiplicities.
pub fn run_projected(
    plan: &Plan,
    inputs: Vec<Vec<(Row, isize)>>,
    workers: usize,
) -> Vec<Vec<(Row, isize)>> {
    // Consolidated tables (what verify recomputes from) only insert.
    let updates = match inputs.iter().flatten().all(|(_, n)| *n > 0) {
        true => Updates::InsertOnly,
        false => Updates::Any,
    };
    let projected = inputs;
    let shared = Arc::new((plan.clone(), projected));
    let results: Arc<Mutex<Vec<crate::runner::OutputRows>>> =
        Arc::new(Mutex::new(vec![Vec::new(); plan.outputs.len()]));
    let sink_results = results.clone();
    timely::execute(timely::Config::process(workers), move |worker| {
        let (index, peers) = (worker.index(), worker.peers());
        let (plan, inputs) = &*shared;
        let mut sessions = worker.dataflow::<Time, _, _>(|scope| {
            let (sessions, outputs) = plan.instantiate(scope, updates);
            for (i, output) in outputs.into_iter().enumerate() {
                let results = sink_results.clone();
                output
                    .inner
                    .sink(Pipeline, "CollectOutput", move |(input, _frontier)| {
                        input.for_each(|_cap, data| {
                            results.lock().unwrap()[i]
                                .extend(data.drain(..).map(|(row, _t, diff)| (row, diff)))
                        });
                    });
            }
            sessions
        });
        for (session, rows) in sessions.iter_mut().zip(inputs) {
            for (row, n) in rows.iter().skip(index).step_by(peers) {
                session.update(row.clone(), *n);
            }
        }
        sessions.clear();
        while worker.step_or_park(None) {}
    })
    .expect("cannot start timely workers")
    .join()
    .into_iter()
    .for_each(|r| r.expect("worker panicked"));
    let mut outputs = std::mem::take(&mut *results.lock().unwrap());
    for rows in &mut outputs {
        consolidate(rows);
    }
    outputs
}
