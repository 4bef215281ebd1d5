//! How every runner takes a dataflow's outputs: all of a plan's outputs as
//! one stream of changes tagged with the output's position in the plan, into
//! one sink operator (the stream runner's committer takes the tagged
//! collection itself). The runners differ only in where the changes go (kept
//! on the worker that made them, or exchanged to the committer's) and what
//! is done with them (collected for sorting, stashed for an epoch commit).

use std::cell::RefCell;
use std::rc::Rc;

use differential_dataflow::Hashable;
use differential_dataflow::VecCollection;
use timely::dataflow::ProbeHandle;
use timely::dataflow::channels::pact::{Exchange, ParallelizationContract, Pipeline};
use timely::dataflow::operators::generic::operator::Operator;
use timely::progress::frontier::MutableAntichain;

use super::OutputRows;
use crate::job::{Rows, Time};
use crate::value::Row;

/// One output change: `((output index, row), time, diff)`.
pub type OutputChange = ((usize, Row), Time, isize);

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

/// Collects the output changes: per output (plan order), `(row, diff)`
/// pairs, unsorted and unconsolidated. With `gather: None`, each worker
/// keeps the changes made on it; with `Some(n)`, they go to workers
/// `0..n` by the row's hash (the first process' workers of a cluster run,
/// which then hold every change; the others' collections stay empty).
pub fn collect_outputs(
    outputs: Vec<Rows<'_>>,
    gather: Option<usize>,
) -> Rc<RefCell<Vec<OutputRows>>> {
    let collected = Rc::new(RefCell::new(vec![Vec::new(); outputs.len()]));
    let into = collected.clone();
    let keep = move |changes: &mut Vec<OutputChange>, _: &MutableAntichain<Time>| {
        let mut into = into.borrow_mut();
        for ((output, row), _time, diff) in changes.drain(..) {
            into[output].push((row, diff));
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
