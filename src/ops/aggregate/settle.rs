//! The last step of a grouping whose keys' states are all it needs
//! ([`Aggregates::settles`], and every `count`-only grouping): each key's
//! records, exchanged to the key's worker, are added up in a hash table,
//! and the key's aggregate row is sent once the time is complete.
//!
//! `reduce`, the general last step, arranges the entries: it sorts them,
//! keeps them in a trace, and replays a key's history to recompute its
//! group, because a `min`, `max` or `count_distinct` needs the values
//! still there after a retraction. When there are no such aggregates, a
//! key's tally (count, sums) is its whole state, and a retraction subtracts
//! from it; when rows only arrive (a batch run), `min` and `max` need only
//! the extreme so far. For a batch `group-by` of 10M rows into 100k keys
//! the reduce was a fifth of the run: sorting the 200k entries by their
//! heap rows, building the traces and freeing them; in a stream `count-by`
//! differential's `count` replayed every changed key's history each epoch.
//!
//! Two kinds of record settle ([`Fold`]): a grouping's prepared entries
//! ([`super::prepare`], a [`Tally`] each) and a `count`-only grouping's
//! key rows (the input combiner's counts as their differences).
//!
//! The output is exactly the reduce's: times are settled in order, and for
//! each key with records at a time, its row before that time (if it had
//! one) is retracted and its row after it (if its state is not zero: a
//! group retracted to nothing has no row) inserted, unless the two are
//! equal. A grouping's row is computed from its state by the reduce's own
//! [`Aggregates::partial`] and [`Aggregates::finish`]. A key whose state
//! comes back to zero is dropped from the table.

use std::collections::BTreeMap;

use differential_dataflow::difference::IsZero;
use differential_dataflow::{AsCollection, Hashable, VecCollection};
use timely::ExchangeData;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::Capability;
use timely::dataflow::operators::generic::operator::Operator;

use super::prepare::{Entries, extreme_wins};
use super::tally::Tally;
use super::{AggKind, Aggregates};
use crate::job::{Rows, Time};
use crate::row_map::{RowMap, hash_values};
use crate::value::{Key, Row, Value};

/// What a settling grouping keeps of a key, and the row it makes of it.
trait Fold: 'static {
    /// A record's data: the key and what else it carries.
    type Data: ExchangeData;
    /// A record's difference.
    type Diff: ExchangeData;
    /// A key's state.
    type State;
    /// The key of a record.
    fn key(data: &Self::Data) -> &[Value];
    /// The state of one record.
    fn start(&self, data: &Self::Data, diff: &Self::Diff) -> Self::State;
    /// Adds a record of the same key.
    fn add(&self, state: &mut Self::State, data: &Self::Data, diff: &Self::Diff);
    /// Adds a later state of the same key.
    fn merge(&self, state: &mut Self::State, later: Self::State);
    /// Whether every record of the key has been retracted.
    fn is_zero(&self, state: &Self::State) -> bool;
    /// The output row of key `key` in a state that is not zero.
    fn row(&self, key: &Key, state: &Self::State) -> Row;
}

/// The output row of `key`, none once its records are all retracted.
fn row_of<F: Fold>(fold: &F, key: &Key, state: &F::State) -> Option<Row> {
    (!fold.is_zero(state)).then(|| fold.row(key, state))
}

/// A grouping's entries fold into per ordered slot the extreme so far,
/// and the tally of the key's rows.
struct Grouping {
    aggs: Aggregates,
    kinds: Vec<AggKind>,
}

/// A key's state in a [`Grouping`].
struct State {
    slots: Row,
    tally: Tally,
}

impl Fold for Grouping {
    type Data = (Row, Row);
    type Diff = Tally;
    type State = State;

    fn key((key, _): &(Row, Row)) -> &[Value] {
        key
    }

    fn start(&self, (_, slots): &(Row, Row), tally: &Tally) -> State {
        check_folds(slots, tally);
        State {
            slots: slots.clone(),
            tally: tally.clone(),
        }
    }

    fn add(&self, state: &mut State, (_, slots): &(Row, Row), tally: &Tally) {
        self.fold_in(state, slots, tally);
    }

    fn merge(&self, state: &mut State, later: State) {
        self.fold_in(state, &later.slots, &later.tally);
    }

    fn is_zero(&self, state: &State) -> bool {
        state.tally.is_zero()
    }

    fn row(&self, key: &Key, state: &State) -> Row {
        let mut row = key.to_vec();
        let aggs = &self.aggs;
        row.extend(aggs.finish(&aggs.partial(&[(&state.slots, state.tally.clone())])));
        row
    }
}

impl Grouping {
    /// Adds an entry's slots and tally to a key's state.
    fn fold_in(&self, state: &mut State, slots: &Row, tally: &Tally) {
        check_folds(slots, tally);
        for ((held, v), &kind) in state.slots.iter_mut().zip(slots).zip(&self.kinds) {
            if extreme_wins(kind, held, v) {
                *held = v.clone();
            }
        }
        state.tally.add_times(tally, 1);
    }
}

/// Extremes fold only over rows that arrive ([`Aggregates::settles`]).
fn check_folds(slots: &Row, tally: &Tally) {
    assert!(
        slots.is_empty() || tally.rows > 0,
        "a retraction in a grouping that folds min or max"
    );
}

/// A `count`-only grouping's key rows fold into their count, repeated
/// once per `count` column.
struct Counting {
    columns: usize,
}

impl Fold for Counting {
    type Data = Row;
    type Diff = isize;
    type State = i64;

    fn key(key: &Row) -> &[Value] {
        key
    }

    fn start(&self, _: &Row, n: &isize) -> i64 {
        *n as i64
    }

    fn add(&self, count: &mut i64, _: &Row, n: &isize) {
        *count += *n as i64;
    }

    fn merge(&self, count: &mut i64, later: i64) {
        *count += later;
    }

    fn is_zero(&self, count: &i64) -> bool {
        *count == 0
    }

    fn row(&self, key: &Key, count: &i64) -> Row {
        let mut row = key.to_vec();
        row.extend(std::iter::repeat_n(Value::Int(*count), self.columns));
        row
    }
}

/// The aggregate rows of `entries` (not yet exchanged), where
/// [`Aggregates::settles`].
pub fn settle<'s>(entries: Entries<'s>, aggs: Aggregates) -> Rows<'s> {
    let kinds = aggs.slots.iter().map(|&(k, _)| k).collect();
    settle_with(entries, Grouping { aggs, kinds }, "GroupSettle")
}

/// The rows of a grouping whose aggregates are `columns` counts: each key
/// of `keys` (not yet exchanged) with its count in every column.
pub fn settle_counts<'s>(keys: Rows<'s>, columns: usize) -> Rows<'s> {
    settle_with(keys, Counting { columns }, "CountSettle")
}

/// The states of one time's keys, or of every key settled so far.
type States<S> = RowMap<S>;

/// Settles `records` (not yet exchanged) by `fold`.
fn settle_with<'s, F: Fold>(
    records: VecCollection<'s, Time, F::Data, F::Diff>,
    fold: F,
    name: &str,
) -> Rows<'s> {
    let by_key = Exchange::new(|(d, _, _): &(F::Data, Time, F::Diff)| Hashable::hashed(&F::key(d)));
    records
        .inner
        .unary_frontier::<CapacityContainerBuilder<Vec<(Row, Time, isize)>>, _, _, _>(
            by_key,
            name,
            move |_capability, _info| {
                let mut pending: BTreeMap<Time, (Capability<Time>, States<F::State>)> =
                    BTreeMap::new();
                let mut settled = States::default();
                let mut hashes = Vec::new();
                move |(input, frontier), output| {
                    input.for_each(|cap, data| {
                        for run in data.chunk_by(|(_, a, _), (_, b, _)| a == b) {
                            let t = run[0].1;
                            let (_, states) = pending
                                .entry(t)
                                .or_insert_with(|| (cap.delayed(&t, 0), States::default()));
                            add_all(&fold, states, run, &mut hashes);
                        }
                        data.clear();
                    });
                    while let Some(entry) = pending.first_entry() {
                        if frontier.less_equal(entry.key()) {
                            break;
                        }
                        let (t, (cap, states)) = entry.remove_entry();
                        let mut session = output.session(&cap);
                        settle_time(&fold, &mut settled, states, &mut |row, n| {
                            session.give((row, t, n))
                        });
                    }
                }
            },
        )
        .as_collection()
}

/// Adds records of one time to its states, each one's state prefetched a
/// few records ahead ([`RowMap::prefetch_for`]); `hashes` is scratch space.
fn add_all<F: Fold>(
    fold: &F,
    states: &mut States<F::State>,
    run: &[(F::Data, Time, F::Diff)],
    hashes: &mut Vec<u64>,
) {
    hashes.clear();
    hashes.extend(run.iter().map(|(d, _, _)| hash_values(F::key(d))));
    for (i, ((data, _, diff), &hash)) in run.iter().zip(hashes.iter()).enumerate() {
        states.prefetch_for(hashes, i);
        let key = F::key(data);
        match states.get_mut(hash, key) {
            Some(state) => fold.add(state, data, diff),
            None => states.insert_new(hash, key.iter().cloned().collect(), fold.start(data, diff)),
        }
    }
}

/// Adds one complete time's states to the settled ones, giving each
/// changed key's old row with -1 and its new row with +1.
fn settle_time<F: Fold>(
    fold: &F,
    settled: &mut States<F::State>,
    states: States<F::State>,
    give: &mut impl FnMut(Row, isize),
) {
    if settled.is_empty() && states.iter().all(|(_, s)| !fold.is_zero(s)) {
        // The first time (a batch run's only one): every key is new.
        for (key, state) in states.iter() {
            give(fold.row(key, state), 1);
        }
        *settled = states;
        return;
    }
    for (key, state) in states.into_entries() {
        let hash = hash_values(&key);
        let Some(old) = settled.get_mut(hash, &key) else {
            if let Some(row) = row_of(fold, &key, &state) {
                give(row, 1);
                settled.insert_new(hash, key, state);
            }
            continue;
        };
        let before = row_of(fold, &key, old);
        fold.merge(old, state);
        let after = row_of(fold, &key, old);
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

    /// Pushes a row's updates by its fate: inserted at `t` (0), then
    /// retracted later (1), then inserted again (2); whether it is there
    /// in the end.
    fn fated(timed: &mut Vec<(Row, u64, isize)>, row: Row, t: u64, fate: u8) -> bool {
        timed.push((row.clone(), t, 1));
        if fate > 0 {
            timed.push((row.clone(), t + 1 + u64::from(fate), -1));
        }
        if fate == 2 {
            timed.push((row, t + 4, 1));
        }
        fate != 1
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
                if fated(&mut timed, row, t, fate) {
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

        /// `count-by` over a stream that inserts, retracts and inserts again
        /// (rows repeat, so the input combiner's counts are more than one)
        /// ends with the plain count of the rows still there, and no row for
        /// a key whose rows are all gone, on 1 to 3 workers.
        #[test]
        fn a_counting_stream_that_retracts_settles_to_the_plain_count(
            rows in prop::collection::vec((0i64..6, 0i64..3, 0u64..5, 0u8..3), 0..200),
            workers in 1usize..4,
        ) {
            let job = crate::Registry::builtin().find("count-by").unwrap();
            let test = JobTest::new(job).param("key", "k").input("input", "k,v", Vec::new());
            let plan = test.plan().unwrap();
            let full = rows.iter().map(|&(k, v, _, _)| vec![Value::Int(k), Value::Int(v)]).collect();
            let projected = project(&plan, vec![full]).unwrap().remove(0);
            let mut timed = Vec::new();
            let mut expected: std::collections::BTreeMap<i64, i64> = Default::default();
            for ((row, _), &(k, _, t, fate)) in projected.into_iter().zip(&rows) {
                if fated(&mut timed, row, t, fate) {
                    *expected.entry(k).or_default() += 1;
                }
            }
            timed.sort_by_key(|(_, t, _)| *t);
            let got = run_timed(&plan, vec![timed], Updates::Any, workers).unwrap().remove(0);
            let expected: Vec<(Row, isize)> = expected
                .into_iter()
                .map(|(k, n)| (vec![Value::Int(k), Value::Int(n)], 1))
                .collect();
            prop_assert_eq!(got, expected);
        }
    }
}
