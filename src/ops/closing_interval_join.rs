//! The interval join of two inputs under the `drop` late-event policy: the
//! pairs of [`crate::ops::interval_join`], computed by an operator that
//! keeps each side's rows by key and time and releases a row once the other
//! side's watermark has passed every time it could still match.
//!
//! A left row at `t` matches right rows at `s` in `[t + lower, t + upper]`.
//! Once every right row still to come has `s >= B` (the right input's
//! bound, see [`Announced`]) and `t + upper < B`, the left row can match
//! nothing new: its pairs are already out, and it is dropped. A right row at
//! `s` likewise once the left bound passes `s - lower`.
//!
//! At each completed epoch the operator emits `ΔL ⋈ R + (L + ΔL) ⋈ ΔR` — as
//! a collection, exactly the updates of the differential interval join — so
//! outputs are the same with and without release, in every runner. Rows
//! with a null key or a time the reader does not read match nothing, as
//! there.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::Ordering;

use differential_dataflow::AsCollection;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::operators::vec::Broadcast;

use crate::job::{BuildContext, Rows, Time};
use crate::ops::aggregate::project;
use crate::ops::announced::Announced;
use crate::ops::interval_join::IntervalJoinSpec;
use crate::ops::pending::Pending;
use crate::value::{Row, Value};

/// The inputs whose watermarks bound each side's times: `(input, scale)`,
/// the side's times being the input's event times times `scale` (or a
/// non-decreasing function of them bounded below by that).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SideBounds {
    /// What bounds the left rows' times (and so releases right rows).
    pub left: (usize, i64),
    /// What bounds the right rows' times (and so releases left rows).
    pub right: (usize, i64),
}

/// One side's rows: per key, per time, each row's multiplicity.
type Side = HashMap<Row, BTreeMap<i64, HashMap<Row, isize>>>;

/// A row of either side (`true`: left) and its multiplicity.
type SidedRow = ((bool, Row), isize);

type Tagged = ((bool, Row), Time, isize);

/// The interval join of `left` and `right` (output: left columns, then
/// right ones), releasing rows as `bounds` allow; `context.held.join_rows`
/// counts the rows kept.
pub fn closing_interval_join<'s>(
    left: Rows<'s>,
    right: Rows<'s>,
    spec: IntervalJoinSpec,
    bounds: SideBounds,
    context: &BuildContext<'s>,
) -> Rows<'s> {
    assert!(
        spec.lower <= spec.upper,
        "interval join bounds out of order"
    );
    let tagged = left
        .map(|row| (true, row))
        .concat(right.map(|row| (false, row)));
    let peers = tagged.inner.scope().peers();
    let hasher = foldhash::fast::FixedState::with_seed(0x5eed);
    let keys = (spec.left_key.clone(), spec.right_key.clone());
    // Hashes the key's values where they are: the same function on both
    // sides, so equal keys meet, without a key row built per row.
    let by_key = Exchange::new(move |((is_left, row), _, _): &Tagged| {
        let columns = if *is_left { &keys.0 } else { &keys.1 };
        let mut h = hasher.build_hasher();
        columns.iter().for_each(|&c| row[c].hash(&mut h));
        h.finish()
    });
    let held = context.held.join_rows.clone();
    tagged
        .inner
        .binary_frontier::<_, CapacityContainerBuilder<Vec<(Row, Time, isize)>>, _, _, _, _>(
            context.watermarks.clone().broadcast(),
            by_key,
            Pipeline,
            "ClosingIntervalJoin",
            move |_capability, _info| {
                let mut state = Sides {
                    spec,
                    left: Side::new(),
                    right: Side::new(),
                    rows: 0,
                };
                let mut pending: Pending<SidedRow> = Pending::default();
                let mut announced = Announced::new(peers);
                let mut counted = 0i64;
                move |(data, frontier), (marks, _), output| {
                    data.for_each(|cap, batch| {
                        for (row, t, diff) in batch.drain(..) {
                            pending.hold(t, || cap.delayed(&t, 0), (row, diff));
                        }
                    });
                    marks.for_each(|_cap, batch| announced.receive(batch.drain(..)));
                    while let Some((t, cap, updates)) = pending.release(|t| !frontier.less_equal(t))
                    {
                        let mut session = output.session(&cap);
                        for (row, diff) in state.apply(updates) {
                            session.give((row, t, diff));
                        }
                    }
                    if announced.advance(|t| !frontier.less_equal(t)) {
                        let bound = |(input, scale): (usize, i64)| {
                            announced.bound(input).map(|b| b.saturating_mul(scale))
                        };
                        state.release(bound(bounds.left), bound(bounds.right));
                    }
                    held.fetch_add(state.rows - counted, Ordering::Relaxed);
                    counted = state.rows;
                }
            },
        )
        .as_collection()
}

/// Both sides' rows, and how they meet.
struct Sides {
    spec: IntervalJoinSpec,
    left: Side,
    right: Side,
    /// Distinct (key, time, row) entries kept, over both sides.
    rows: i64,
}

impl Sides {
    /// The key and time of a row of one side, if it can match anything.
    fn place(&self, is_left: bool, row: &Row) -> Option<(Row, i64)> {
        let (key, time) = if is_left {
            (&self.spec.left_key, self.spec.left_time)
        } else {
            (&self.spec.right_key, self.spec.right_time)
        };
        let t = (self.spec.time)(&row[time])?;
        let key = project(row, key);
        (!key.iter().any(Value::is_null)).then_some((key, t))
    }

    /// Applies one epoch's updates: left ones meet the right rows kept so
    /// far, then right ones meet every left row; returns the pairs.
    fn apply(&mut self, updates: Vec<SidedRow>) -> Vec<(Row, isize)> {
        let (lower, upper) = (self.spec.lower, self.spec.upper);
        let mut placed: Vec<(bool, Row, i64, Row, isize)> = updates
            .into_iter()
            .filter_map(|((is_left, row), diff)| {
                let (key, t) = self.place(is_left, &row)?;
                Some((is_left, key, t, row, diff))
            })
            .collect();
        // Left rows first: they meet the right rows of earlier epochs, and
        // the right rows of this one meet them.
        placed.sort_by_key(|p| !p.0);
        let mut out = Vec::new();
        for (is_left, key, t, row, diff) in placed {
            let (mine, other, range) = if is_left {
                let r = t.saturating_add(lower)..=t.saturating_add(upper);
                (&mut self.left, &self.right, r)
            } else {
                let r = t.saturating_sub(upper)..=t.saturating_sub(lower);
                (&mut self.right, &self.left, r)
            };
            if let Some(times) = other.get(&key) {
                for (_, rows) in times.range(range) {
                    for (o, n) in rows {
                        let (l, r) = if is_left { (&row, o) } else { (o, &row) };
                        let mut pair = l.clone();
                        pair.extend_from_slice(r);
                        out.push((pair, diff * n));
                    }
                }
            }
            self.rows += add(mine, key, t, row, diff);
        }
        out
    }

    /// Drops the rows no row still to come can match: left rows at `t`
    /// with `t + upper` before the right side's bound, right rows at `s`
    /// with `s - lower` before the left side's.
    fn release(&mut self, left_bound: Option<i64>, right_bound: Option<i64>) {
        if let Some(b) = right_bound {
            self.rows -= drop_before(&mut self.left, b.saturating_sub(self.spec.upper));
        }
        if let Some(b) = left_bound {
            self.rows -= drop_before(&mut self.right, b.saturating_add(self.spec.lower));
        }
    }
}

/// Adds `diff` copies of `row` at `key` and `t`; the change in entries.
fn add(side: &mut Side, key: Row, t: i64, row: Row, diff: isize) -> i64 {
    let times = side.entry(key.clone()).or_default();
    let rows = times.entry(t).or_default();
    let before = rows.len() as i64;
    let n = rows.entry(row).or_insert(0);
    *n += diff;
    if *n == 0 {
        rows.retain(|_, n| *n != 0);
    }
    let change = rows.len() as i64 - before;
    if rows.is_empty() {
        times.remove(&t);
        if times.is_empty() {
            side.remove(&key);
        }
    }
    change
}

/// Drops every row at a time before `cut`; how many entries went.
fn drop_before(side: &mut Side, cut: i64) -> i64 {
    let mut dropped = 0;
    side.retain(|_, times| {
        let kept = times.split_off(&cut);
        dropped += times.values().map(|rows| rows.len() as i64).sum::<i64>();
        *times = kept;
        !times.is_empty()
    });
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::interval_join::integer_time;

    fn sides(lower: i64, upper: i64) -> Sides {
        Sides {
            spec: IntervalJoinSpec {
                left_key: vec![0],
                left_time: 1,
                right_key: vec![0],
                right_time: 1,
                lower,
                upper,
                time: integer_time,
            },
            left: Side::new(),
            right: Side::new(),
            rows: 0,
        }
    }

    fn row(k: &str, t: Option<i64>) -> Row {
        vec![Value::Str(k.into()), t.map_or(Value::Null, Value::Int)]
    }

    fn update(is_left: bool, k: &str, t: i64, diff: isize) -> SidedRow {
        ((is_left, row(k, Some(t))), diff)
    }

    fn pair(k: &str, lt: i64, rt: i64) -> Row {
        let mut p = row(k, Some(lt));
        p.extend(row(k, Some(rt)));
        p
    }

    fn sorted(mut v: Vec<(Row, isize)>) -> Vec<(Row, isize)> {
        v.sort();
        v
    }

    #[test]
    fn pairs_within_the_band_meet_once_whichever_comes_first() {
        let mut s = sides(0, 10);
        // Same epoch: left and right meet once.
        let out = s.apply(vec![update(false, "a", 5, 1), update(true, "a", 0, 1)]);
        assert_eq!(out, vec![(pair("a", 0, 5), 1)]);
        // Later rows meet the kept ones; out-of-band and other keys do not.
        let out = s.apply(vec![
            update(true, "a", 2, 1),
            update(false, "a", 11, 2),
            update(false, "a", -1, 1),
            update(false, "b", 5, 1),
        ]);
        assert_eq!(
            sorted(out),
            vec![(pair("a", 2, 5), 1), (pair("a", 2, 11), 2)]
        );
        // A retraction takes its pairs back.
        let out = s.apply(vec![update(true, "a", 0, -1)]);
        assert_eq!(out, vec![(pair("a", 0, 5), -1)]);
        // Null keys and times match nothing and are not kept.
        let rows = s.rows;
        let out = s.apply(vec![
            ((true, row("a", None)), 1),
            ((false, vec![Value::Null, Value::Int(5)]), 1),
        ]);
        assert!(out.is_empty());
        assert_eq!(s.rows, rows);
    }

    #[test]
    fn rows_go_once_the_other_side_has_passed_them() {
        let mut s = sides(0, 10);
        s.apply(vec![
            update(true, "a", 0, 1),
            update(true, "a", 20, 1),
            update(false, "a", 5, 1),
            update(false, "a", 30, 1),
        ]);
        assert_eq!(s.rows, 4);
        // Right rows to come are at 11 or later: the left row at 0 (which
        // reaches 10) can match none; left rows to come at 6 or later: the
        // right row at 5 (reached from 5 - 10 ..= 5) can match none.
        s.release(Some(6), Some(11));
        assert_eq!(s.rows, 2);
        // The kept rows still meet what comes.
        let out = s.apply(vec![update(false, "a", 25, 1), update(true, "a", 22, 1)]);
        assert_eq!(
            sorted(out),
            vec![
                (pair("a", 20, 25), 1),
                (pair("a", 22, 25), 1),
                (pair("a", 22, 30), 1)
            ]
        );
        // Unknown bounds release nothing.
        s.release(None, None);
        assert_eq!(s.rows, 4);
    }
}
