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

use std::collections::BTreeMap;

use differential_dataflow::{AsCollection, VecCollection};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::Capability;
use timely::dataflow::operators::generic::operator::Operator;

use super::tally::Tally;
use super::{AggKind, Aggregates};
use crate::job::{Rows, Time, Updates};
use crate::row_map::{RowMap, hash_values};
use crate::value::{Key, Row, Value};

/// Entries held per time before they are sent on early (checked after each
/// run of rows at one time, so a few more may be held).
const MAX_HELD: usize = 1 << 18;

/// A grouping's entries: `((key, slot row), time, tally)`.
pub type Entries<'s> = VecCollection<'s, Time, (Row, Row), Tally>;

/// One entry at one time.
pub type Entry = ((Row, Row), Time, Tally);

/// Where each part of an entry comes from, in input-row positions.
#[derive(Clone)]
struct Layout {
    /// How many of the columns in `probe` are the key's.
    key_len: usize,
    sums: Vec<usize>,
    slots: Vec<(AggKind, usize)>,
    fold: bool,
    /// The columns a row's entry is found by: the key, then (unless
    /// folding) the slots.
    probe: Vec<usize>,
}

impl Layout {
    fn slot_row(&self, row: &Row) -> Key {
        self.slots.iter().map(|&(_, c)| row[c].clone()).collect()
    }

    /// The values a row's entry is found by.
    fn probe<'r>(&self, row: &'r Row) -> impl Iterator<Item = &'r Value> + Clone {
        self.probe.iter().map(move |&c| &row[c])
    }

    /// Keeps in `held` the extreme of each slot over it and `row`.
    fn fold_into(&self, held: &mut Key, row: &Row) {
        for (h, &(kind, c)) in held.iter_mut().zip(&self.slots) {
            let v = &row[c];
            if extreme_wins(kind, h, v) {
                *h = v.clone();
            }
        }
    }
}

/// Whether `v` replaces `held` as the extreme of a `min` or `max` slot:
/// nulls are not values, and a slot with none holds null.
pub fn extreme_wins(kind: AggKind, held: &Value, v: &Value) -> bool {
    let better = match kind {
        AggKind::Min => v < held,
        AggKind::Max => v > held,
        _ => unreachable!("only min and max slots fold"),
    };
    !v.is_null() && (held.is_null() || better)
}

/// What one worker holds for one time.
enum Held {
    /// Keyed by the key and slot row, one after the other.
    Entries(RowMap<Tally>),
    /// Keyed by key: the extremes so far and the tally of all its rows.
    Folded(RowMap<(Key, Tally)>),
}

impl Held {
    fn new(fold: bool) -> Held {
        match fold {
            true => Held::Folded(RowMap::default()),
            false => Held::Entries(RowMap::default()),
        }
    }

    fn len(&self) -> usize {
        match self {
            Held::Entries(m) => m.len(),
            Held::Folded(m) => m.len(),
        }
    }

    /// The prefetches due before adding row `i` ([`RowMap::prefetch_for`]).
    fn prefetch_for(&self, hashes: &[u64], i: usize) {
        match self {
            Held::Entries(m) => m.prefetch_for(hashes, i),
            Held::Folded(m) => m.prefetch_for(hashes, i),
        }
    }

    /// Adds rows of one time, each one's entry prefetched a few rows before
    /// it is added ([`RowMap::prefetch_for`]); `hashes` is scratch space.
    fn add_all(&mut self, layout: &Layout, rows: &[(Row, Time, isize)], hashes: &mut Vec<u64>) {
        hashes.clear();
        hashes.extend(
            rows.iter()
                .map(|(row, _, _)| hash_values(layout.probe(row))),
        );
        for (i, ((row, _, diff), &hash)) in rows.iter().zip(hashes.iter()).enumerate() {
            self.prefetch_for(hashes, i);
            self.add(layout, row, *diff, hash);
        }
    }

    fn add(&mut self, layout: &Layout, row: &Row, diff: isize, hash: u64) {
        match self {
            Held::Entries(map) => match map.get_mut(hash, layout.probe(row)) {
                Some(tally) => tally.add_row(row, diff as i64, &layout.sums),
                None => {
                    let mut tally = Tally::default();
                    tally.add_row(row, diff as i64, &layout.sums);
                    map.insert_new(hash, layout.probe(row).cloned().collect(), tally);
                }
            },
            Held::Folded(map) => {
                assert!(diff > 0, "a retraction in an insert-only grouping");
                match map.get_mut(hash, layout.probe(row)) {
                    Some((slots, tally)) => {
                        layout.fold_into(slots, row);
                        tally.add_row(row, diff as i64, &layout.sums);
                    }
                    None => {
                        let mut tally = Tally::default();
                        tally.add_row(row, diff as i64, &layout.sums);
                        let key = layout.probe(row).cloned().collect();
                        map.insert_new(hash, key, (layout.slot_row(row), tally));
                    }
                }
            }
        }
    }

    fn drain_into(self, layout: &Layout, time: Time, out: &mut impl FnMut(Entry)) {
        let entries: Box<dyn Iterator<Item = ((Row, Row), Tally)>> = match self {
            Held::Entries(map) => {
                let split = layout.key_len;
                Box::new(map.into_entries().map(move |(probe, t)| {
                    let mut key = probe.into_vec();
                    let slots = key.split_off(split);
                    ((key, slots), t)
                }))
            }
            Held::Folded(map) => Box::new(
                map.into_entries()
                    .map(|(k, (s, t))| ((k.into_vec(), s.into_vec()), t)),
            ),
        };
        for (entry, tally) in entries {
            if !differential_dataflow::difference::IsZero::is_zero(&tally) {
                out((entry, time, tally));
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
    let slots: Vec<(AggKind, usize)> = aggs.slots.iter().map(|&(k, c)| (k, values[c])).collect();
    let fold = updates == Updates::InsertOnly && aggs.foldable() && !slots.is_empty();
    let mut probe = key.to_vec();
    if !fold {
        probe.extend(slots.iter().map(|&(_, c)| c));
    }
    let layout = Layout {
        key_len: key.len(),
        sums: aggs.sums.iter().map(|&c| values[c]).collect(),
        slots,
        fold,
        probe,
    };
    rows.inner
        .unary_frontier::<CapacityContainerBuilder<Vec<Entry>>, _, _, _>(
            Pipeline,
            "GroupPrepare",
            move |_capability, _info| {
                let mut held: BTreeMap<Time, (Capability<Time>, Held)> = BTreeMap::new();
                let mut hashes = Vec::new();
                move |(input, frontier), output| {
                    input.for_each(|cap, data| {
                        for run in data.chunk_by(|(_, a, _), (_, b, _)| a == b) {
                            let t = run[0].1;
                            let (_, h) = held
                                .entry(t)
                                .or_insert_with(|| (cap.delayed(&t, 0), Held::new(layout.fold)));
                            h.add_all(&layout, run, &mut hashes);
                            if h.len() >= MAX_HELD {
                                let (cap, h) = held.remove(&t).expect("just inserted");
                                let mut session = output.session(&cap);
                                h.drain_into(&layout, t, &mut |e| session.give(e));
                            }
                        }
                        data.clear();
                    });
                    while let Some(entry) = held.first_entry() {
                        if frontier.less_equal(entry.key()) {
                            break;
                        }
                        let (t, (cap, h)) = entry.remove_entry();
                        let mut session = output.session(&cap);
                        h.drain_into(&layout, t, &mut |e| session.give(e));
                    }
                }
            },
        )
        .as_collection()
}
