//! How every runner takes a dataflow's outputs: all of a plan's outputs as
//! one stream of changes tagged with the output's position in the plan, into
//! one sink operator (the stream runner's committer takes the tagged
//! collection itself). The runners differ only in where the changes go (kept
//! on the worker that made them, or exchanged to the committer's) and what
//! is done with them (collected for sorting, stashed for an epoch commit).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use differential_dataflow::Hashable;
use differential_dataflow::VecCollection;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::{Exchange, ParallelizationContract, Pipeline};
use timely::dataflow::operators::Capability;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::{ProbeHandle, StreamVec};
use timely::progress::frontier::MutableAntichain;

use super::OutputRows;
use super::order::sort_consolidate;
use crate::job::{Rows, Time};
use crate::value::Row;

/// One output change: `((output index, row), time, diff)`.
pub type OutputChange = ((usize, Row), Time, isize);

/// An output change of a known time: `((output index, row), diff)`.
pub type TaggedChange = ((usize, Row), isize);

/// Every output's changes as one collection, tagged with the output's
/// index; `probe` (if given) is advanced by its progress. `None` for a
/// plan without outputs (plan_job refuses those).
pub fn tagged_outputs<'s>(
    outputs: Vec<Rows<'s>>,
    probe: Option<&ProbeHandle<Time>>,
) -> Option<VecCollection<'s, Time, (usize, Row)>> {
    let mut tagged = outputs
        .into_iter()
        .enumerate()
        .map(|(i, out)| out.map(move |row| (i, row)))
        .reduce(|a, b| a.concat(b))?;
    if let Some(probe) = probe {
        tagged = tagged.probe_with(probe);
    }
    Some(tagged)
}

/// One worker's changes to one output in one epoch: `(output, rows)`,
/// sorted and consolidated, except the replay's (epoch 0: see [`runs_of`]).
pub type OutputRun = (usize, Vec<(Row, isize)>);

/// Each worker's changes of each epoch as [`OutputRun`]s, made on that
/// worker once the epoch is complete there: the committer's worker, which
/// gathers them all, then merges sorted runs (`runner/epochs.rs`) instead
/// of sorting every worker's changes while the others wait for it.
pub fn sorted_runs<'s>(
    changes: VecCollection<'s, Time, (usize, Row)>,
    outputs: usize,
) -> StreamVec<'s, Time, OutputRun> {
    type Pending = BTreeMap<Time, (Capability<Time>, Vec<TaggedChange>)>;
    changes
        .inner
        .unary_frontier::<CapacityContainerBuilder<Vec<OutputRun>>, _, _, _>(
            Pipeline,
            "SortRuns",
            move |_capability, _info| {
                let mut pending = Pending::new();
                move |(input, frontier), output| {
                    input.for_each(|cap, data| {
                        for (change, t, diff) in data.drain(..) {
                            let (_, changes) = pending
                                .entry(t)
                                .or_insert_with(|| (cap.delayed(&t, 0), Vec::new()));
                            changes.push((change, diff));
                        }
                    });
                    while let Some(entry) = pending.first_entry() {
                        if frontier.less_equal(entry.key()) {
                            break;
                        }
                        let (t, (cap, changes)) = entry.remove_entry();
                        output
                            .session(&cap)
                            .give_iterator(runs_of(t, outputs, changes).into_iter());
                    }
                }
            },
        )
}

/// One worker's changes of epoch `time`, one run per output that changed.
/// The replay's (epoch 0) are left unsorted: the gatherer drops them
/// unless the deployment never committed, and sorts them then.
pub fn runs_of(time: Time, outputs: usize, changes: Vec<TaggedChange>) -> Vec<OutputRun> {
    let mut runs: Vec<Vec<(Row, isize)>> = vec![Vec::new(); outputs];
    for ((output, row), diff) in changes {
        runs[output].push((row, diff));
    }
    if time > 0 {
        runs.iter_mut().for_each(sort_consolidate);
    }
    let changed = runs.into_iter().enumerate();
    changed.filter(|(_, rows)| !rows.is_empty()).collect()
}

/// Sinks every output's changes through `pact` into `each`, which is
/// called at each activation with the changes that arrived (to drain) and
/// the frontier of times still to come.
pub fn sink_outputs<'s, P>(
    outputs: Vec<Rows<'s>>,
    pact: P,
    mut each: impl FnMut(&mut Vec<OutputChange>, &MutableAntichain<Time>) + 'static,
) where
    P: ParallelizationContract<Time, Vec<OutputChange>>,
{
    let Some(tagged) = tagged_outputs(outputs, None) else {
        return;
    };
    let mut changes = Vec::new();
    tagged
        .inner
        .sink(pact, "Outputs", move |(input, frontier)| {
            input.for_each(|_cap, data| changes.append(data));
            each(&mut changes, frontier);
        });
}

/// What takes the output changes that land on a worker, as they arrive.
pub trait Collect: 'static {
    /// Takes a change of output `output` (its index in the plan).
    fn collect(&mut self, output: usize, row: Row, diff: isize);
}

/// Per output (plan order), its `(row, diff)` changes, unsorted and
/// unconsolidated.
impl Collect for Vec<OutputRows> {
    fn collect(&mut self, output: usize, row: Row, diff: isize) {
        self[output].push((row, diff));
    }
}

/// Collects the output changes into `into`. With `gather: None`, each
/// worker keeps the changes made on it; with `Some(n)`, they go to workers
/// `0..n` by the row's hash (the first process' workers of a cluster run,
/// which then hold every change; the others' collections stay empty).
pub fn collect_outputs<C: Collect>(
    outputs: Vec<Rows<'_>>,
    gather: Option<usize>,
    into: C,
) -> Rc<RefCell<C>> {
    let collected = Rc::new(RefCell::new(into));
    let into = collected.clone();
    let keep = move |changes: &mut Vec<OutputChange>, _: &MutableAntichain<Time>| {
        let mut into = into.borrow_mut();
        for ((output, row), _time, diff) in changes.drain(..) {
            into.collect(output, row, diff);
        }
    };
    match gather {
        None => sink_outputs(outputs, Pipeline, keep),
        Some(n) => {
            let n = n.max(1) as u64;
            let to = Exchange::new(move |((_, row), _, _): &OutputChange| row.hashed() % n);
            sink_outputs(outputs, to, keep)
        }
    }
    collected
}
