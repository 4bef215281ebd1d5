//! Putting output rows in order, fast: the batch runner's outputs are
//! sorted (that is what makes them byte-identical for every worker count),
//! and for a 10M-row join output the sort was most of the run.
//!
//! Each worker sorts its share by a *prefix key* — a `u64` computed from
//! the first value of a row, ordered as the values are — so that the sort
//! moves and compares small inline keys instead of following a pointer to
//! each row; rows with equal prefixes, now next to each other in the key
//! order, are then ordered in full. The rows themselves do not move: a
//! worker's [`SortedRun`] is its rows and their order, and the driver
//! merges the workers' runs into the one ordered list in one linear pass:
//! rows move once, not into a sorted list on each worker and again into
//! the merged one.
//!
//! Invariant: the prefix is monotone — `a < b` implies
//! `prefix(a) <= prefix(b)` — so ordering by prefix, then by row, is the
//! order of rows. It is not injective (an integer and the float it rounds
//! to, strings sharing their first bytes), which is why a second value's
//! prefix could not be used to break ties: only the full comparison may.

use std::cmp::Ordering;

use crate::value::{AHEAD, Row, Value, prefetch};

/// The sort key of a row: its first value as a `u64` that orders as
/// [`Value`] does (an empty row sorts first, as with null).
fn prefix(row: &Row) -> u64 {
    row.first().map_or(0, value_prefix)
}

/// Three bits of kind (null < booleans < numbers < dates and timestamps <
/// strings), then 61 bits of the value: a number as its float's
/// order-preserving bits (an integer converts to the nearest float, which
/// is monotone), a date or timestamp as its instant in microseconds, a
/// string as its first bytes.
fn value_prefix(v: &Value) -> u64 {
    let kind = |k: u64, bits: u64| (k << 61) | (bits >> 3);
    let instant = |micros: i64| (micros as u64) ^ (1 << 63);
    match v {
        Value::Null => 0,
        Value::Bool(b) => kind(1, u64::from(*b) << 63),
        Value::Int(i) => kind(2, ordered_bits(*i as f64)),
        Value::Float(f) => kind(2, ordered_bits(f.get())),
        Value::Date(d) => kind(3, instant(crate::calendar::date_to_timestamp(*d))),
        Value::Timestamp(t) => kind(3, instant(*t)),
        Value::Str(s) => {
            let mut bytes = [0u8; 8];
            let n = s.len().min(8);
            bytes[..n].copy_from_slice(&s.as_bytes()[..n]);
            kind(4, u64::from_be_bytes(bytes))
        }
    }
}

/// The bits of `x` as an unsigned integer in the order of `f64::total_cmp`.
fn ordered_bits(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// How many rows ahead of the one in hand a pass through a run's order
/// asks for a row's list entry: a row's values can be asked for only once
/// its entry (which points to them) is in cache.
const ENTRY_AHEAD: usize = 4 * AHEAD;

/// A list of rows in sorted, consolidated order without the rows having
/// moved: the rows where the dataflow left them and, unless they already
/// are in order, the order to read them in.
///
/// A batch run's peak memory is its output rows: moving them into order
/// would hold every row's slot twice (the list they are in and the sorted
/// one) while the sort finishes; reading them through the sorted keys
/// holds only the keys beside them, and the merge of the workers' runs
/// makes the one ordered list. (Moving a row into its place within the same
/// list instead, walking the permutation's cycles, was tried: each step
/// waits on the key of the row just moved, a chain of cache misses that
/// cost the join 0.9 s.)
pub struct SortedRun {
    rows: Vec<(Row, isize)>,
    /// Sorted keys, one per row kept, each with the row's index in its low
    /// bits ([`SortedRun::new`]); `None`: `rows` is in order.
    order: Option<Vec<u64>>,
    /// The low bits of a key that hold the row's index.
    index: u64,
}

impl SortedRun {
    /// Sorts `rows` and adds up the multiplicities of equal rows, dropping
    /// the ones that cancel (what
    /// `differential_dataflow::consolidation::consolidate` does), by
    /// prefix keys.
    ///
    /// A key is one `u64`: the row's index in the low bits (as many as the
    /// length needs: 23 for 5M rows) under the prefix's top bits. Masking
    /// low bits keeps the prefix monotone, so the key order is the row
    /// order up to ties, which the full comparison settles.
    pub fn new(mut rows: Vec<(Row, isize)>) -> Self {
        let index_bits = u64::BITS - (rows.len() as u64).saturating_sub(1).leading_zeros();
        let index = (1u64 << index_bits) - 1;
        let mut keys: Vec<u64> = rows
            .iter()
            .enumerate()
            .map(|(i, (row, _))| (prefix(row) & !index) | i as u64)
            .collect();
        keys.sort_unstable();
        order_ties_and_add_up(&mut rows, &mut keys, index);
        SortedRun {
            rows,
            order: Some(keys),
            index,
        }
    }

    /// Rows already sorted and consolidated.
    pub fn sorted(rows: Vec<(Row, isize)>) -> Self {
        SortedRun {
            rows,
            order: None,
            index: 0,
        }
    }

    fn len(&self) -> usize {
        self.order.as_ref().map_or(self.rows.len(), Vec::len)
    }

    /// Where the `n`th row in order is.
    fn at(&self, n: usize) -> Option<usize> {
        match &self.order {
            Some(keys) => keys.get(n).map(|k| (k & self.index) as usize),
            None => (n < self.rows.len()).then_some(n),
        }
    }

    fn get(&self, n: usize) -> Option<&(Row, isize)> {
        self.at(n).map(|i| &self.rows[i])
    }

    fn take(&mut self, n: usize) -> (Row, isize) {
        let i = self.at(n).expect("taken within the run");
        std::mem::take(&mut self.rows[i])
    }

    /// Asks for the rows a pass reading the `n`th row will want next: the
    /// values of the row [`AHEAD`] places on and, through the order, the
    /// list entry of the one [`ENTRY_AHEAD`] places on (whose values it
    /// will ask for once that entry is in cache).
    fn prefetch(&self, n: usize) {
        if self.order.is_some()
            && let Some(i) = self.at(n + ENTRY_AHEAD)
        {
            prefetch(&self.rows[i]);
        }
        if let Some((row, _)) = self.get(n + AHEAD) {
            prefetch(row.as_ptr());
        }
    }

    /// The rows, in order.
    pub fn into_vec(self) -> Vec<(Row, isize)> {
        if self.order.is_none() {
            return self.rows;
        }
        let mut out = Vec::with_capacity(self.len());
        out.extend(self.drain());
        out
    }

    /// The rows, in order, one at a time (each moved out as it is read).
    pub fn drain(self) -> Drain {
        Drain { run: self, next: 0 }
    }
}

/// A [`SortedRun`]'s rows in order: see [`SortedRun::drain`].
pub struct Drain {
    run: SortedRun,
    next: usize,
}

impl Iterator for Drain {
    type Item = (Row, isize);

    fn next(&mut self) -> Option<(Row, isize)> {
        let n = self.next;
        self.run.at(n)?;
        self.run.prefetch(n);
        self.next += 1;
        Some(self.run.take(n))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.run.len() - self.next;
        (left, Some(left))
    }
}

/// Sorts `rows` and adds up the multiplicities of equal rows, dropping the
/// ones that cancel (see [`SortedRun::new`]).
pub fn sort_consolidate(rows: &mut Vec<(Row, isize)>) {
    *rows = SortedRun::new(std::mem::take(rows)).into_vec();
}

/// Orders the rows whose keys tie (equal truncated prefixes: only those
/// can be out of order, or equal), adds up the multiplicities of equal rows
/// into the first of them, and keeps in `keys` only the keys of first ones
/// whose sum is not zero. One pass: each group of ties is sorted and added
/// up while its rows are in cache, and the rows of the groups to come are
/// asked for ahead, their list entries first.
fn order_ties_and_add_up(rows: &mut [(Row, isize)], keys: &mut Vec<u64>, index: u64) {
    let at = |key: u64| (key & index) as usize;
    let (mut kept, mut start, mut fetched) = (0, 0, 0);
    while start < keys.len() {
        let group = keys[start] & !index;
        let end = start
            + keys[start..]
                .iter()
                .take_while(|&&k| k & !index == group)
                .count();
        while fetched < (end + AHEAD).min(keys.len()) {
            if let Some(&k) = keys.get(fetched + ENTRY_AHEAD) {
                prefetch(&rows[at(k)]);
            }
            prefetch(rows[at(keys[fetched])].0.as_ptr());
            fetched += 1;
        }
        if end - start > 1 {
            keys[start..end].sort_unstable_by(|&a, &b| rows[at(a)].0.cmp(&rows[at(b)].0));
        }
        let first = kept;
        for n in start..end {
            let key = keys[n];
            if kept > first {
                let last = at(keys[kept - 1]);
                if rows[last].0 == rows[at(key)].0 {
                    rows[last].1 += rows[at(key)].1;
                    continue;
                }
                if rows[last].1 == 0 {
                    kept -= 1;
                }
            }
            keys[kept] = key;
            kept += 1;
        }
        if kept > first && rows[at(keys[kept - 1])].1 == 0 {
            kept -= 1;
        }
        start = end;
    }
    keys.truncate(kept);
}

/// Merges sorted, consolidated runs into one sorted, consolidated list,
/// two at a time (for the usual two or four workers, one or two linear
/// passes that read each run in order).
pub fn merge_runs(mut runs: Vec<SortedRun>) -> Vec<(Row, isize)> {
    while runs.len() > 1 {
        let mut merged = Vec::with_capacity(runs.len().div_ceil(2));
        let mut pairs = runs.into_iter();
        while let Some(a) = pairs.next() {
            merged.push(match pairs.next() {
                Some(b) => SortedRun::sorted(merge_two(a, b)),
                None => a,
            });
        }
        runs = merged;
    }
    runs.pop().map(SortedRun::into_vec).unwrap_or_default()
}

fn merge_two(mut a: SortedRun, mut b: SortedRun) -> Vec<(Row, isize)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    loop {
        a.prefetch(i);
        b.prefetch(j);
        let next = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) => match x.0.cmp(&y.0) {
                Ordering::Less => {
                    i += 1;
                    Some(a.take(i - 1))
                }
                Ordering::Greater => {
                    j += 1;
                    Some(b.take(j - 1))
                }
                Ordering::Equal => {
                    let (row, n) = a.take(i);
                    let (_, m) = b.take(j);
                    (i, j) = (i + 1, j + 1);
                    (n + m != 0).then_some((row, n + m))
                }
            },
            (Some(_), None) => {
                i += 1;
                Some(a.take(i - 1))
            }
            (None, Some(_)) => {
                j += 1;
                Some(b.take(j - 1))
            }
            (None, None) => return out,
        };
        out.extend(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use differential_dataflow::consolidation::consolidate;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            (-3i64..3).prop_map(Value::Int),
            prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(9007199254740993)]
                .prop_map(Value::Int),
            (-3i64..3).prop_map(|h| Value::float(h as f64 / 2.0)),
            prop_oneof![Just(9007199254740992.0), Just(-1e300), Just(f64::INFINITY)]
                .prop_map(Value::float),
            prop_oneof![
                Just(""),
                Just("a"),
                Just("ab"),
                Just("abcdefgh1"),
                Just("abcdefgh2"),
                Just("\u{ff}")
            ]
            .prop_map(Value::str),
            any::<bool>().prop_map(Value::Bool),
            (-2i32..2).prop_map(Value::Date),
            prop_oneof![
                Just(-1),
                Just(0),
                Just(1),
                Just(crate::calendar::MICROS_PER_DAY)
            ]
            .prop_map(Value::Timestamp),
        ]
    }

    fn rows() -> impl Strategy<Value = Vec<(Row, isize)>> {
        prop::collection::vec((prop::collection::vec(value(), 0..4), -2isize..3), 0..60)
    }

    #[test]
    fn prefixes_are_monotone_on_neighbours() {
        let mut values = vec![
            Value::Null,
            Value::Bool(false),
            Value::Bool(true),
            Value::Int(i64::MIN),
            Value::float(-1e300),
            Value::Int(-1),
            Value::float(-0.5),
            Value::Int(0),
            Value::float(0.5),
            Value::Int(9007199254740992),
            Value::float(9007199254740992.0),
            Value::Int(9007199254740993),
            Value::Int(i64::MAX),
            Value::float(f64::INFINITY),
            Value::Date(-1),
            Value::Timestamp(-1),
            Value::Date(0),
            Value::Timestamp(0),
            Value::Timestamp(7),
            Value::Date(1),
            Value::str(""),
            Value::str("a"),
            Value::str("abcdefgh1"),
            Value::str("abcdefgh2"),
        ];
        values.sort();
        for pair in values.windows(2) {
            assert!(value_prefix(&pair[0]) <= value_prefix(&pair[1]), "{pair:?}");
        }
    }

    /// With thousands of rows the index takes the prefix's low bits, and
    /// values that differ only there (timestamps microseconds apart, long
    /// integers, strings sharing their first bytes) tie on the key: the
    /// full comparison orders them.
    #[test]
    fn rows_tied_by_the_truncated_prefix_are_ordered_in_full() {
        let rows: Vec<(Row, isize)> = (0..5000i64)
            .map(|i| {
                let v = (i * 7919) % 5000;
                let first = match i % 3 {
                    0 => Value::Timestamp(1_700_000_000_000_000 + v),
                    1 => Value::Int((1 << 40) + v),
                    _ => Value::str(&format!("abcd{v:05}")),
                };
                (
                    vec![first, Value::Int(v % 7)],
                    if v % 11 == 0 { -1 } else { 1 },
                )
            })
            .chain((0..50).map(|v| (vec![Value::Int((1 << 40) + v)], 2)))
            .collect();
        let mut expected = rows.clone();
        consolidate(&mut expected);
        let mut got = rows;
        sort_consolidate(&mut got);
        assert_eq!(got, expected);
    }

    proptest! {
        #[test]
        fn sort_consolidate_is_consolidate(rows in rows()) {
            let mut expected = rows.clone();
            consolidate(&mut expected);
            let mut got = rows;
            sort_consolidate(&mut got);
            prop_assert_eq!(got, expected);
        }

        #[test]
        fn merging_sorted_runs_is_consolidating_all(runs in prop::collection::vec(rows(), 0..4)) {
            let mut expected: Vec<(Row, isize)> = runs.iter().flatten().cloned().collect();
            consolidate(&mut expected);
            // Some runs as the batch runner hands them over (rows where they
            // were, read through their order), some already moved into it.
            let runs = runs
                .into_iter()
                .enumerate()
                .map(|(i, mut r)| if i % 2 == 0 {
                    SortedRun::new(r)
                } else {
                    sort_consolidate(&mut r);
                    SortedRun::sorted(r)
                })
                .collect();
            prop_assert_eq!(merge_runs(runs), expected);
        }
    }
}
