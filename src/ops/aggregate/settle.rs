//! The last step of a grouping whose keys' states are all it needs
//! ([`Aggregates::settles`]): each key's prepared entries
//! ([`super::prepare`]), exchanged to the key's worker, are added up in a
//! hash table, and the key's aggregate row is sent once the time is
//! complete.
//!
//! `reduce`, the general last step, arranges the entries: it sorts them,
//! keeps them in a trace, and replays a key's history to recompute its
//! group, because a `min`, `max` or `count_distinct` needs the values
//! still there after a retraction. When there are no such aggregates, a
//! key's tally (count, sums) is its whole state, and a retraction subtracts
//! from it; when rows only arrive (a batch run), `min` and `max` need only
//! the extreme so far. For a batch `group-by` of 10M rows into 100k keys
//! the reduce was a fifth of the run: sorting the 200k entries by their
//! heap rows, building the traces and freeing them.
//!
//! The output is exactly the reduce's: times are settled in order, and for
//! each key with entries at a time, its row before that time (if it had
//! one) is retracted and its row after it (if its tally is not zero: a
//! group retracted to nothing has no row) inserted, unless the two are
//! equal. The row is computed from the state by the reduce's own
//! [`Aggregates::partial`] and [`Aggregates::finish`]. A key whose tally
//! comes back to zero is dropped from the table.

use std::collections::BTreeMap;

use differential_dataflow::difference::IsZero;
use differential_dataflow::{AsCollection, Hashable};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::Capability;
use timely::dataflow::operators::generic::operator::Operator;

use super::prepare::{Entries, Entry, extreme_wins};
use super::tally::Tally;
use super::{AggKind, Aggregates};
use crate::job::{Rows, Time};
use crate::row_map::{RowMap, hash_values};
use crate::value::{Key, Row};

/// A key's state: per ordered slot its extreme so far, and the tally of
/// its rows.
struct State {
    slots: Row,
    tally: Tally,
}

impl State {
    /// The state of one entry.
    fn new(slots: &Row, tally: &Tally) -> State {
        check_folds(slots, tally);
        State {
            slots: slots.clone(),
            tally: tally.clone(),
        }
    }

    /// Adds an entry of the same key.
    fn add(&mut self, kinds: &[AggKind], slots: &Row, tally: &Tally) {
        check_folds(slots, tally);
        for ((held, v), &kind) in self.slots.iter_mut().zip(slots).zip(kinds) {
            if extreme_wins(kind, held, v) {
                *held = v.clone();
            }
        }
        self.tally.add_times(tally, 1);
    }

    /// The output row of key `key` in this state: none once its rows are
    /// all retracted.
    fn row(&self, key: &Key, aggs: &Aggregates) -> Option<Row> {
        if self.tally.is_zero() {
            return None;
        }
        let mut row = key.to_vec();
        row.extend(aggs.finish(&aggs.partial(&[(&self.slots, self.tally.clone())])));
        Some(row)
    }
}

/// Extremes fold only over rows that arrive ([`Aggregates::settles`]).
fn check_folds(slots: &Row, tally: &Tally) {
    assert!(
        slots.is_empty() || tally.rows > 0,
        "a retraction in a grouping that folds min or max"
    );
}

/// The states of one time's keys, or of every key settled so far.
type States = RowMap<State>;

/// The aggregate rows of `entries` (not yet exchanged), where
/// [`Aggregates::settles`].
pub fn settle<'s>(entries: Entries<'s>, aggs: Aggregates) -> Rows<'s> {
    let kinds: Vec<AggKind> = aggs.slots.iter().map(|&(k, _)| k).collect();
    let by_key = Exchange::new(|((k, _), _, _): &Entry| k.hashed());
    entries
        .inner
        .unary_frontier::<CapacityContainerBuilder<Vec<(Row, Time, isize)>>, _, _, _>(
            by_key,
            "GroupSettle",
            move |_capability, _info| {
                let mut pending: BTreeMap<Time, (Capability<Time>, States)> = BTreeMap::new();
                let mut settled = States::default();
                let mut hashes = Vec::new();
                move |(input, frontier), output| {
                    input.for_each(|cap, data| {
                        for run in data.chunk_by(|(_, a, _), (_, b, _)| a == b) {
                            let t = run[0].1;
                            let (_, states) = pending
                                .entry(t)
                                .or_insert_with(|| (cap.delayed(&t, 0), States::default()));
                            add_all(states, &kinds, run, &mut hashes);
                        }
                        data.clear();
                    });
                    while let Some(entry) = pending.first_entry() {
                        if frontier.less_equal(entry.key()) {
                            break;
                        }
                        let (t, (cap, states)) = entry.remove_entry();
                        let mut session = output.session(&cap);
                        settle_time(&mut settled, states, &kinds, &aggs, &mut |row, n| {
                            session.give((row, t, n))
                        });
                    }
                }
            },
        )
        .as_collection()
}

/// Adds entries of one time to its states, each one's state prefetched a
/// few entries ahead ([`RowMap::prefetch_for`]); `hashes` is scratch space.
fn add_all(states: &mut States, kinds: &[AggKind], run: &[Entry], hashes: &mut Vec<u64>) {
    hashes.clear();
    hashes.extend(run.iter().map(|((key, _), _, _)| hash_values(key)));
    for (i, (((key, slots), _, tally), &hash)) in run.iter().zip(hashes.iter()).enumerate() {
        states.prefetch_for(hashes, i);
        match states.get_mut(hash, key) {
            Some(state) => state.add(kinds, slots, tally),
            None => states.insert_new(
                hash,
                key.iter().cloned().collect(),
                State::new(slots, tally),
            ),
        }
    }
}

/// Adds one complete time's states to the settled ones, giving each
/// changed key's old row with -1 and its new row with +1.
fn settle_time(
    settled: &mut States,
    states: States,
    kinds: &[AggKind],
    aggs: &Aggregates,
    give: &mut impl FnMut(Row, isize),
) {
    if settled.is_empty() && states.iter().all(|(_, s)| !s.tally.is_zero()) {
        // The first time (a batch run's only one): every key is new.
        for (key, state) in states.iter() {
            give(state.row(key, aggs).expect("not zero"), 1);
        }
        *settled = states;
        return;
    }
    for (key, state) in states.into_entries() {
        let hash = hash_values(&key);
        let Some(old) = settled.get_mut(hash, &key) else {
            if let Some(row) = state.row(&key, aggs) {
                give(row, 1);
                settled.insert_new(hash, key, state);
            }
            continue;
        };
        let before = old.row(&key, aggs);
        old.add(kinds, &state.slots, &state.tally);
        let after = old.row(&key, aggs);
        if after.is_none() {
            settled.remove(hash, &key);
        }
        if before != after {
            before.into_iter().for_each(|row| give(row, -1));
            after.into_iter().for_each(|row| give(row, 1));
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::job::Updates;
    use crate::runner::memory::{project, run_timed};
    use crate::testing::JobTest;
    use crate::value::{Row, Value};

    /// A value of any kind a column may mix: null, integer, float, string.
    fn any_value(x: u8) -> Value {
        match x % 5 {
            0 => Value::Null,
            1 | 2 => Value::Int(i64::from(x / 5)),
            3 => Value::float(f64::from(x) / 4.0),
            _ => Value::str(&format!("s{}", x / 5)),
        }
    }

    /// As [`any_value`], but never a string (sums take numbers).
    fn number(x: u8) -> Value {
        match any_value(x) {
            Value::Str(_) => Value::Null,
            v => v,
        }
    }

    /// A `k,v,w` row: one of 7 keys, a number `v`, any value `w`.
    fn row(k: u8, v: u8, w: u8) -> Row {
        vec![Value::Int(i64::from(k % 7)), number(v), any_value(w)]
    }

    proptest! {
        /// Settling gives the reduce's output (the same grouping over the same
        /// rows, treated as a stream that may retract), on 1 to 3 workers,
        /// whatever epochs the rows arrive in.
        #[test]
        fn settling_inserts_gives_what_the_reduce_gives(
            rows in prop::collection::vec((0u8..40, 0u8..40, 0u8..40, 0u64..4), 0..300),
            workers in 1usize..4,
        ) {
            let rows: Vec<(Row, u64)> = rows.iter().map(|&(k, v, w, t)| (row(k, v, w), t)).collect();
            let job = crate::Registry::builtin().find("group-by").unwrap();
            let test = JobTest::new(job)
                .param("key", "k")
                .param("agg", "count,sum:v,avg:v,min:w,max:w,max:v")
                .input("input", "k,v,w", Vec::new());
            let plan = test.plan().unwrap();
            let full = rows.iter().map(|(r, _)| r.clone()).collect();
            let projected = project(&plan, vec![full]).unwrap().remove(0);
            let mut timed: Vec<(Row, u64, isize)> = projected
                .into_iter()
                .zip(&rows)
                .map(|((r, n), (_, t))| (r, *t, n))
                .collect();
            timed.sort_by_key(|(_, t, _)| *t);
            let settled = run_timed(&plan, vec![timed.clone()], Updates::InsertOnly, workers).unwrap();
            let reduced = run_timed(&plan, vec![timed], Updates::Any, workers).unwrap();
            prop_assert_eq!(settled, reduced);
        }

        /// A stream that inserts, retracts and inserts again (count and sum:
        /// the tally is the state) ends with the plain count and sum of the
        /// rows still there, and no row for a key whose rows are all gone,
        /// on 1 to 3 workers.
        #[test]
        fn a_stream_that_retracts_settles_to_the_plain_count_and_sum(
            rows in prop::collection::vec((0i64..6, prop::option::of(0i64..30), 0u64..5, 0u8..3), 0..200),
            workers in 1usize..4,
        ) {
            let job = crate::Registry::builtin().find("group-by").unwrap();
            let test = JobTest::new(job)
                .param("key", "k")
                .param("agg", "count,sum:v")
                .input("input", "k,v", Vec::new());
            let plan = test.plan().unwrap();
            let value = |v: Option<i64>| v.map_or(Value::Null, Value::Int);
            let full = rows.iter().map(|&(k, v, _, _)| vec![Value::Int(k), value(v)]).collect();
            let projected = project(&plan, vec![full]).unwrap().remove(0);
            let mut timed = Vec::new();
            // Per key: rows still there, and the sum of their non-null values.
            let mut expected: std::collections::BTreeMap<i64, (i64, Option<i64>)> = Default::default();
            for ((row, _), &(k, v, t, fate)) in projected.into_iter().zip(&rows) {
                timed.push((row.clone(), t, 1));
                if fate > 0 {
                    timed.push((row.clone(), t + 1 + u64::from(fate), -1));
                }
                if fate == 2 {
                    timed.push((row, t + 4, 1));
                }
                if fate != 1 {
                    let (n, sum) = expected.entry(k).or_default();
                    *n += 1;
                    if let Some(v) = v {
                        *sum = Some(sum.unwrap_or(0) + v);
                    }
                }
            }
            timed.sort_by_key(|(_, t, _)| *t);
            let got = run_timed(&plan, vec![timed], Updates::Any, workers).unwrap().remove(0);
            let expected: Vec<(Row, isize)> = expected
                .into_iter()
                .map(|(k, (n, sum))| (vec![Value::Int(k), Value::Int(n), value(sum)], 1))
                .collect();
            prop_assert_eq!(got, expected);
        }
    }
}
