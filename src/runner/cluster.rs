//! What the workers of a run agree on through the dataflow itself, so that
//! a run across processes (timely's cluster mode) behaves as one: every
//! worker sees every other worker's word, in worker order, whatever process
//! it runs in.
//!
//! - [`agree`]: before the job's dataflow is built, every worker shows the
//!   others what it is about to run (job, parameters, plan, input chunks).
//!   Processes started with a different command line would build different
//!   dataflows (and hang, or compute garbage); they are refused instead,
//!   with the process that differs and the first line where it does.
//! - [`all_gather`]: any small serializable value from every worker (the
//!   batch runner's per-worker reports: rows read, bad rows, the failure).
//! - [`scatter`]: values addressed to one worker each (a restart's
//!   checkpointed state, sent by process 0 to the worker that reads each
//!   partition, however many processes wrote it).
//!
//! Every worker must call these in the same order (each builds a dataflow,
//! and timely pairs dataflows across processes by the order they are built).

use std::cell::RefCell;
use std::rc::Rc;

use differential_dataflow::AsCollection;
use differential_dataflow::input::Input;
use serde::Serialize;
use serde::de::DeserializeOwned;
use timely::dataflow::ProbeHandle;
use timely::dataflow::operators::vec::Broadcast;

use super::RunError;

/// Steps `worker` until `probe` is done, parking between steps rather than
/// spinning: a worker may wait here a long time (for the first worker's
/// commit of a batch run's outputs, `super::batch::Finish`), and a
/// spinning thread would take a core from it. A message from another
/// worker unparks it; the 10 ms bound is a safety net.
fn wait_for(worker: &mut timely::worker::Worker, probe: &ProbeHandle<u64>) {
    while !probe.done() {
        worker.step_or_park(Some(std::time::Duration::from_millis(10)));
    }
}

/// Every worker's `value`, in worker order (global worker index).
pub fn all_gather<T: Serialize + DeserializeOwned>(
    worker: &mut timely::worker::Worker,
    value: &T,
) -> Result<Vec<T>, RunError> {
    let mine = serde_json::to_string(value)
        .map_err(|e| RunError::Cluster(format!("cannot encode a worker report: {e}")))?;
    let index = worker.index();
    let got: Rc<RefCell<Vec<(usize, String)>>> = Rc::default();
    let into = got.clone();
    let probe = ProbeHandle::new();
    let mut input = worker.dataflow::<u64, _, _>(|scope| {
        let (input, words) = scope.new_collection::<(usize, String), isize>();
        words
            .inner
            .broadcast()
            .as_collection()
            .inspect(move |((from, word), _, _)| into.borrow_mut().push((*from, word.clone())))
            .probe_with(&probe);
        input
    });
    input.insert((index, mine));
    input.close();
    wait_for(worker, &probe);
    let mut words = std::mem::take(&mut *got.borrow_mut());
    words.sort();
    words
        .into_iter()
        .map(|(from, word)| {
            serde_json::from_str(&word).map_err(|e| {
                RunError::Cluster(format!("cannot decode the report of worker {from}: {e}"))
            })
        })
        .collect()
}

/// The values addressed to this worker: every worker passes `(worker,
/// value)` pairs for any workers (global indices), and gets those that
/// name it, in no particular order.
pub fn scatter<T: timely::ExchangeData + Clone>(
    worker: &mut timely::worker::Worker,
    items: Vec<(usize, T)>,
) -> Vec<T> {
    use timely::dataflow::operators::{Exchange, Input as _, Inspect, Probe};
    let got: Rc<RefCell<Vec<T>>> = Rc::default();
    let into = got.clone();
    let probe = ProbeHandle::new();
    let mut input = worker.dataflow::<u64, _, _>(|scope| {
        let (input, items) = scope.new_input::<Vec<(usize, T)>>();
        items
            .exchange(|(to, _): &(usize, T)| *to as u64)
            .inspect(move |(_, v): &(usize, T)| into.borrow_mut().push(v.clone()))
            .probe_with(&probe);
        input
    });
    for item in items {
        input.send(item);
    }
    drop(input);
    wait_for(worker, &probe);
    std::mem::take(&mut *got.borrow_mut())
}

/// Refuses the run unless every worker is about to run the same thing:
/// `fingerprint` is this worker's description of it, one fact per line.
/// `threads` (workers per process) names the process that differs.
pub fn agree(
    worker: &mut timely::worker::Worker,
    fingerprint: &str,
    threads: usize,
) -> Result<(), RunError> {
    let all = all_gather(worker, &fingerprint.to_string())?;
    let Some((first, differs)) = all.iter().enumerate().find(|(_, f)| **f != all[0]) else {
        return Ok(());
    };
    let (ours, theirs) = (all[0].lines(), differs.lines());
    let detail = match ours.zip(theirs).find(|(a, b)| a != b) {
        Some((a, b)) => format!("process 0 has `{a}`, process {} has `{b}`", first / threads),
        None => "one describes more than the other".to_string(),
    };
    Err(RunError::Cluster(format!(
        "process {} was started with another job, parameters, inputs or worker count than \
         process 0 ({detail}); start every process with the same command line but --process",
        first / threads
    )))
}
