//! Putting output rows in order, fast: the batch runner's outputs are
//! sorted (that is what makes them byte-identical for every worker count),
//! and for a 10M-row join output the sort was most of the run.
//!
//! Each worker sorts its share by a *prefix key* — a `u64` computed from
//! the first value of a row, ordered as the values are — so that the sort
//! moves and compares small inline keys instead of following a pointer to
//! each row; rows with equal prefixes, now next to each other (and so in
//! cache), are then ordered in full. The driver merges the workers' sorted
//! runs in one linear pass.
//!
//! Invariant: the prefix is monotone — `a < b` implies
//! `prefix(a) <= prefix(b)` — so ordering by prefix, then by row, is the
//! order of rows. It is not injective (an integer and the float it rounds
//! to, strings sharing their first bytes), which is why a second value's
//! prefix could not be used to break ties: only the full comparison may.

use std::cmp::Ordering;

use crate::value::{AHEAD, Row, Value, prefetch, prefetch_ahead};

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

/// Sorts `rows` and adds up the multiplicities of equal rows, dropping the
/// ones that cancel (what `differential_dataflow::consolidation::consolidate`
/// does, by prefix keys).
///
/// A key is one `u64`: the row's index in the low bits (as many as the
/// length needs: 23 for 5M rows) under the prefix's top bits. Masking low
/// bits keeps the prefix monotone, so the key order is the row order up to
/// ties, which the full comparison settles; an 8-byte key instead of a
/// (prefix, index) pair is 8 bytes less per row at the run's peak memory,
/// when the rows, their keys and the sorted rows are all held.
pub fn sort_consolidate(rows: &mut Vec<(Row, isize)>) {
    let index_bits = u64::BITS - (rows.len() as u64).saturating_sub(1).leading_zeros();
    let index = (1u64 << index_bits) - 1;
    let mut keys: Vec<u64> = rows
        .iter()
        .enumerate()
        .map(|(i, (row, _))| (prefix(row) & !index) | i as u64)
        .collect();
    keys.sort_unstable();
    let at = |key: u64| (key & index) as usize;
    let mut sorted: Vec<(Row, isize)> = Vec::with_capacity(rows.len());
    for (n, &key) in keys.iter().enumerate() {
        if let Some(&ahead) = keys.get(n + AHEAD) {
            prefetch(&rows[at(ahead)]);
        }
        sorted.push(std::mem::take(&mut rows[at(key)]));
    }
    // Rows with equal truncated prefixes are contiguous: order them in full.
    let mut start = 0;
    while start < keys.len() {
        let group = keys[start] & !index;
        let end = start + keys[start..].partition_point(|k| k & !index == group);
        if end - start > 1 {
            sorted[start..end]
                .iter()
                .for_each(|(row, _)| prefetch(row.as_ptr()));
            sorted[start..end].sort_unstable_by(|a, b| a.0.cmp(&b.0));
        }
        start = end;
    }
    add_up_sorted(&mut sorted);
    *rows = sorted;
}

/// Adds up adjacent equal rows of a sorted list in place; drops zeros.
fn add_up_sorted(rows: &mut Vec<(Row, isize)>) {
    let mut kept = 0;
    for i in 0..rows.len() {
        prefetch_ahead(&rows[i..]);
        if kept > 0 && rows[kept - 1].0 == rows[i].0 {
            rows[kept - 1].1 += rows[i].1;
        } else {
            if kept > 0 && rows[kept - 1].1 == 0 {
                kept -= 1;
            }
            rows.swap(kept, i);
            kept += 1;
        }
    }
    if kept > 0 && rows[kept - 1].1 == 0 {
        kept -= 1;
    }
    rows.truncate(kept);
}

/// Merges sorted, consolidated runs into one sorted, consolidated list,
/// two at a time (for the usual two or four workers, one or two linear
/// passes that read each run in order).
pub fn merge_runs(mut runs: Vec<Vec<(Row, isize)>>) -> Vec<(Row, isize)> {
    while runs.len() > 1 {
        let mut merged = Vec::with_capacity(runs.len().div_ceil(2));
        let mut pairs = runs.into_iter();
        while let Some(a) = pairs.next() {
            merged.push(match pairs.next() {
                Some(b) => merge_two(a, b),
                None => a,
            });
        }
        runs = merged;
    }
    runs.pop().unwrap_or_default()
}

fn merge_two(a: Vec<(Row, isize)>, b: Vec<(Row, isize)>) -> Vec<(Row, isize)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter(), b.into_iter());
    loop {
        prefetch_ahead(a.as_slice());
        prefetch_ahead(b.as_slice());
        let next = match (a.as_slice().first(), b.as_slice().first()) {
            (Some(x), Some(y)) => match x.0.cmp(&y.0) {
                Ordering::Less => a.next(),
                Ordering::Greater => b.next(),
                Ordering::Equal => {
                    let (row, n) = a.next().expect("looked at");
                    let (_, m) = b.next().expect("looked at");
                    (n + m != 0).then_some((row, n + m))
                }
            },
            (Some(_), None) => a.next(),
            (None, Some(_)) => b.next(),
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
            let runs = runs.into_iter().map(|mut r| { sort_consolidate(&mut r); r }).collect();
            prop_assert_eq!(merge_runs(runs), expected);
        }
    }
}
