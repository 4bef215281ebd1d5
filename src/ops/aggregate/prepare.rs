//! Per-worker pre-aggregation: the rows of a grouping become its entries
//! (`(key, slot row)` with a [`Tally`] as the difference), added up on the
//! worker that read them before anything is exchanged.
//!
//! Adding up equal records is what consolidation does anyway, so emitting
//! one entry with the sum of many rows' tallies leaves the collection the
//! same — for any input, at any epoch. Entries are held per logical time
//! and sent when the input frontier passes it (or earlier, when
//! [`MAX_HELD`] entries are held: a partial sum is still a correct update).
//!
//! Folding (only for inputs that only insert, [`Updates::InsertOnly`]):
//! `min`/`max` slots keep only the extreme of the rows seen, so a key has
//! one entry however many distinct values it has. That changes the
//! multiset of slot rows, but not its minimum or maximum; it would be wrong
//! if a row could later be retracted, hence the restriction (checked).

use std::collections::{BTreeMap, HashMap};

use differential_dataflow::{AsCollection, VecCollection};
use foldhash::fast::FixedState;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::Capability;
use timely::dataflow::operators::generic::operator::Operator;

use super::tally::Tally;
use super::{AggKind, Aggregates};
use crate::job::{Rows, Time, Updates};
use crate::value::{Key, Row};

/// Entries held per time before they are sent on early.
const MAX_HELD: usize = 1 << 18;

/// A grouping's entries: `((key, slot row), time, tally)`.
pub type Entries<'s> = VecCollection<'s, Time, (Row, Row), Tally>;

type Entry = ((Row, Row), Time, Tally);

/// Where each part of an entry comes from, in input-row positions.
#[derive(Clone)]
struct Layout {
    key: Vec<usize>,
    sums: Vec<usize>,
    slots: Vec<(AggKind, usize)>,
    fold: bool,
}

impl Layout {
    fn slot_row(&self, row: &Row) -> Key {
        self.slots.iter().map(|&(_, c)| row[c].clone()).collect()
    }

    /// Keeps in `held` the extreme of each slot over it and `row`.
    fn fold_into(&self, held: &mut Key, row: &Row) {
        for (h, &(kind, c)) in held.iter_mut().zip(&self.slots) {
            let v = &row[c];
            let better = match kind {
                AggKind::Min => !v.is_null() && (h.is_null() || v < h),
                AggKind::Max => !v.is_null() && (h.is_null() || v > h),
                _ => unreachable!("only min and max slots fold"),
            };
            if better {
                *h = v.clone();
            }
        }
    }
}

/// What one worker holds for one time.
enum Held {
    /// Keyed by `(key, slot row)`.
    Entries(HashMap<(Key, Key), Tally, FixedState>),
    /// Keyed by key: the extremes so far and the tally of all its rows.
    Folded(HashMap<Key, (Key, Tally), FixedState>),
}

impl Held {
    fn new(fold: bool) -> Held {
        match fold {
            true => Held::Folded(HashMap::default()),
            false => Held::Entries(HashMap::default()),
        }
    }

    fn len(&self) -> usize {
        match self {
            Held::Entries(m) => m.len(),
            Held::Folded(m) => m.len(),
        }
    }

    fn add(&mut self, layout: &Layout, row: Row, diff: isize) {
        let key: Key = layout.key.iter().map(|&c| row[c].clone()).collect();
        match self {
            Held::Entries(map) => {
                let tally = map.entry((key, layout.slot_row(&row))).or_default();
                tally.add_row(&row, diff as i64, &layout.sums);
            }
            Held::Folded(map) => {
                assert!(diff > 0, "a retraction in an insert-only grouping");
                match map.get_mut(&key) {
                    Some((slots, tally)) => {
                        layout.fold_into(slots, &row);
                        tally.add_row(&row, diff as i64, &layout.sums);
                    }
                    None => {
                        let mut tally = Tally::default();
                        tally.add_row(&row, diff as i64, &layout.sums);
                        map.insert(key, (layout.slot_row(&row), tally));
                    }
                }
            }
        }
    }

    fn drain_into(self, time: Time, out: &mut impl FnMut(Entry)) {
        let entries: Box<dyn Iterator<Item = ((Key, Key), Tally)>> = match self {
            Held::Entries(map) => Box::new(map.into_iter()),
            Held::Folded(map) => Box::new(map.into_iter().map(|(k, (s, t))| ((k, s), t))),
        };
        for ((key, slots), tally) in entries {
            if !differential_dataflow::difference::IsZero::is_zero(&tally) {
                out(((key.into_vec(), slots.into_vec()), time, tally));
            }
        }
    }
}

/// The entries of grouping `rows` by the columns at `key`, with the value
/// columns at `values` (the value row [`Aggregates`] was resolved against).
pub fn prepare<'s>(
    rows: Rows<'s>,
    key: &[usize],
    values: &[usize],
    aggs: &Aggregates,
    updates: Updates,
) -> Entries<'s> {
    let layout = Layout {
        key: key.to_vec(),
        sums: aggs.sums.iter().map(|&c| values[c]).collect(),
        slots: aggs.slots.iter().map(|&(k, c)| (k, values[c])).collect(),
        fold: updates == Updates::InsertOnly && aggs.foldable() && !aggs.slots.is_empty(),
    };
    rows.inner
        .unary_frontier::<CapacityContainerBuilder<Vec<Entry>>, _, _, _>(
            Pipeline,
            "GroupPrepare",
            move |_capability, _info| {
                let mut held: BTreeMap<Time, (Capability<Time>, Held)> = BTreeMap::new();
                move |(input, frontier), output| {
                    input.for_each(|cap, data| {
                        for (row, t, diff) in data.drain(..) {
                            let (_, h) = held
                                .entry(t)
                                .or_insert_with(|| (cap.delayed(&t, 0), Held::new(layout.fold)));
                            h.add(&layout, row, diff);
                            if h.len() >= MAX_HELD {
                                let (cap, h) = held.remove(&t).expect("just inserted");
                                let mut session = output.session(&cap);
                                h.drain_into(t, &mut |e| session.give(e));
                            }
                        }
                    });
                    while let Some(entry) = held.first_entry() {
                        if frontier.less_equal(entry.key()) {
                            break;
                        }
                        let (t, (cap, h)) = entry.remove_entry();
                        let mut session = output.session(&cap);
                        h.drain_into(t, &mut |e| session.give(e));
                    }
                }
            },
        )
        .as_collection()
}
