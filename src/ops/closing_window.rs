//! Tumbling and hopping window aggregation that releases the state of
//! closed windows — for jobs under the `drop` late-event policy.
//!
//! Differential's `reduce` keeps every window it has seen: it cannot know
//! that a window will never change again. Under `drop` it can be known.
//! Each stream worker announces, after each epoch, a low watermark for its
//! partitions ([`Watermark`]): every event it will still admit has a time at
//! or after it. Once every worker has announced, the minimum over them
//! bounds every future event, so a window whose end is at or before it is
//! closed: no event can enter it again, its output row is final (it stays
//! in the table), and its state here is dropped.
//!
//! The operator keeps, per open window, the multiset of its events' value
//! rows and its current output row. At each completed epoch it applies the
//! epoch's changes and emits, per touched window, the retraction of the old
//! row and the new one — exactly the updates the differential path (window
//! assignment + `group_aggregate`) produces, so outputs are identical with
//! and without release, and in every runner. Announcements are applied only
//! after all data of their epoch, so a window is never dropped while events
//! admitted before the watermark rose are still on their way.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;

use differential_dataflow::AsCollection;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::StreamVec;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::operators::vec::Broadcast;

use crate::job::{Rows, Time, Watermark};
use crate::ops::aggregate::Aggregates;
use crate::ops::window::{WindowSpec, windowed_rows};
use crate::value::{Row, Value};

type Update = (Row, Time, isize);

/// One open window: its events' value rows and its current output row.
#[derive(Default)]
struct OpenWindow {
    values: BTreeMap<Row, isize>,
    output: Option<Row>,
}

/// Where the window to aggregate and release is described.
#[derive(Clone, Debug)]
pub struct ClosingWindow {
    /// The index of the integer event-time column in the input rows.
    pub time: usize,
    /// The indices of the key columns.
    pub key: Vec<usize>,
    /// The indices of the columns the aggregates read, in the order of the
    /// value rows [`Aggregates::resolve`] describes.
    pub values: Vec<usize>,
    /// The window kind and sizes, in the time column's unit: tumbling or
    /// hopping only (others never close).
    pub window: WindowSpec,
    /// The aggregates computed per key and window.
    pub aggs: Aggregates,
    /// The job input whose watermarks close windows.
    pub input: usize,
}

impl ClosingWindow {
    /// The aggregate rows: key columns, `window_start`, `window_end`, then
    /// one column per aggregate (as [`crate::ops::window::WindowAggregate`]).
    pub fn aggregate<'s>(
        self,
        rows: Rows<'s>,
        watermarks: StreamVec<'s, Time, Watermark>,
    ) -> Rows<'s> {
        let ClosingWindow {
            time,
            key,
            values,
            window,
            aggs,
            input,
        } = self;
        assert!(
            matches!(
                window,
                WindowSpec::Tumbling { .. } | WindowSpec::Hopping { .. }
            ),
            "only tumbling and hopping windows close"
        );
        let width = key.len() + 2;
        let windowed = rows.flat_map(move |row| windowed_rows(&row, time, &key, &values, window));
        let peers = windowed.inner.scope().peers();
        let hasher = foldhash::fast::FixedState::with_seed(0x5eed);
        let by_window = Exchange::new(move |(row, _, _): &Update| hasher.hash_one(&row[..width]));
        windowed
            .inner
            .binary_frontier::<_, CapacityContainerBuilder<Vec<Update>>, _, _, _, _>(
                watermarks.broadcast(),
                by_window,
                Pipeline,
                "ClosingWindows",
                move |_capability, _info| {
                    let mut open: HashMap<Row, OpenWindow> = HashMap::new();
                    let mut pending: BTreeMap<Time, Vec<(Row, isize)>> = BTreeMap::new();
                    let mut capabilities = BTreeMap::new();
                    let mut marks: BTreeMap<Time, Vec<Watermark>> = BTreeMap::new();
                    let mut low: HashMap<usize, i64> = HashMap::new();
                    move |(data, frontier), (announced, _), output| {
                        data.for_each(|cap, batch| {
                            for (row, t, diff) in batch.drain(..) {
                                capabilities.entry(t).or_insert_with(|| cap.delayed(&t, 0));
                                pending.entry(t).or_default().push((row, diff));
                            }
                        });
                        announced.for_each(|_cap, batch| {
                            for mark in batch.drain(..) {
                                marks.entry(mark.0).or_default().push(mark);
                            }
                        });
                        while let Some(entry) = pending.first_entry() {
                            if frontier.less_equal(entry.key()) {
                                break;
                            }
                            let (t, updates) = entry.remove_entry();
                            let cap = capabilities
                                .remove(&t)
                                .expect("a capability per pending time");
                            let mut session = output.session(&cap);
                            for (row, diff) in apply(&mut open, updates, width, &aggs) {
                                session.give((row, t, diff));
                            }
                        }
                        while let Some(entry) = marks.first_entry() {
                            if frontier.less_equal(entry.key()) {
                                break;
                            }
                            for (_, i, worker, at) in entry.remove() {
                                if i == input {
                                    low.insert(worker, at);
                                }
                            }
                            if low.len() == peers {
                                let closed = *low.values().min().expect("peers > 0");
                                open.retain(|window, _| match window[width - 1] {
                                    Value::Int(end) => end > closed,
                                    // Rows without a time never close.
                                    _ => true,
                                });
                            }
                        }
                    }
                },
            )
            .as_collection()
    }
}

/// Applies one epoch's updates to the open windows; returns the output
/// changes (old rows retracted, new rows added).
fn apply(
    open: &mut HashMap<Row, OpenWindow>,
    updates: Vec<(Row, isize)>,
    width: usize,
    aggs: &Aggregates,
) -> Vec<(Row, isize)> {
    let mut touched: HashMap<Row, Vec<(Row, isize)>> = HashMap::new();
    for (mut row, diff) in updates {
        let values = row.split_off(width);
        touched.entry(row).or_default().push((values, diff));
    }
    let mut changes = Vec::new();
    for (window, updates) in touched {
        let state = open.entry(window.clone()).or_default();
        for (values, diff) in updates {
            let n = state.values.entry(values).or_insert(0);
            *n += diff;
            if *n == 0 {
                state.values.retain(|_, n| *n != 0);
            }
        }
        let new = (!state.values.is_empty()).then(|| {
            let group: Vec<(&Row, isize)> = state.values.iter().map(|(r, n)| (r, *n)).collect();
            let mut row = window.clone();
            row.extend(aggs.compute(&group));
            row
        });
        if new != state.output {
            if let Some(old) = state.output.take() {
                changes.push((old, -1));
            }
            if let Some(new) = &new {
                changes.push((new.clone(), 1));
            }
            state.output = new;
        }
        if state.values.is_empty() {
            open.remove(&window);
        }
    }
    changes
}
