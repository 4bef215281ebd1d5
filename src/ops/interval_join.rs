//! The interval join (stream-stream window join): pairs of rows with equal
//! keys whose event times lie within a bound of each other —
//! `left.key = right.key AND left.t + lower <= right.t <= left.t + upper`
//! (for ad impressions and their clicks: `lower = 0`, `upper = 10m`).
//!
//! A plain equi-join on the key followed by the time filter would build
//! every pair of a key's rows, however far apart in time; a busy key makes
//! that quadratic in its history. Instead both sides are also keyed by a
//! time bucket of width `upper - lower + 1`: a right row goes to the one
//! bucket holding its time, a left row to the (at most two) buckets that
//! overlap its interval `[t + lower, t + upper]`. Each matching pair then
//! meets in exactly one bucket (the right row's), and only rows close in
//! time are ever compared. Like every operator here, it is a differential
//! join: a late row on either side adds (or retracts) exactly its pairs.
//!
//! Rows whose key is null, or whose time the spec's reader does not read
//! (null, or another kind of value), never match (SQL comparison with
//! null); a caller with such rows that may match routes them elsewhere
//! (the SQL lowering joins them by key alone and filters).

use crate::job::Rows;
use crate::ops::aggregate::project;
use crate::value::{Row, Value};

/// Where the key and time columns are, and the bounds.
#[derive(Clone, Debug)]
pub struct IntervalJoinSpec {
    /// The indices of the key columns in left rows.
    pub left_key: Vec<usize>,
    /// The index of the event-time column in left rows.
    pub left_time: usize,
    /// The indices of the key columns in right rows, paired with `left_key`.
    pub right_key: Vec<usize>,
    /// The index of the event-time column in right rows (same unit as the
    /// left one).
    pub right_time: usize,
    /// Bounds of `right.t - left.t`, both included; `lower <= upper`.
    pub lower: i64,
    /// The upper bound of `right.t - left.t` (included).
    pub upper: i64,
    /// Reads a time column's value as an integer time, or `None` (the row
    /// matches nothing). Callers keep times and bounds within ±2^61, so no
    /// sum overflows.
    pub time: fn(&Value) -> Option<i64>,
}

/// The built-in jobs' time columns: integers in their unit.
pub fn integer_time(v: &Value) -> Option<i64> {
    match *v {
        Value::Int(t) => Some(t),
        _ => None,
    }
}

/// The interval join, as a collection method.
pub trait IntervalJoin<'s> {
    /// Output rows: the left row's columns, then the right row's.
    fn interval_join(self, right: Rows<'s>, spec: IntervalJoinSpec) -> Rows<'s>;
}

impl<'s> IntervalJoin<'s> for Rows<'s> {
    fn interval_join(self, right: Rows<'s>, spec: IntervalJoinSpec) -> Rows<'s> {
        assert!(
            spec.lower <= spec.upper,
            "interval join bounds out of order"
        );
        let width = (spec.upper - spec.lower).saturating_add(1);
        let IntervalJoinSpec {
            left_key,
            left_time,
            right_key,
            right_time,
            lower,
            upper,
            time,
        } = spec;
        let left = self.flat_map(move |row| {
            let key = project(&row, &left_key);
            let Some(t) = time(&row[left_time]) else {
                return Vec::new();
            };
            if key.iter().any(Value::is_null) {
                return Vec::new();
            }
            let first = t.saturating_add(lower).div_euclid(width);
            let last = t.saturating_add(upper).div_euclid(width);
            let mut keyed = vec![((key.clone(), first), row.clone())];
            if last != first {
                keyed.push(((key, last), row));
            }
            keyed
        });
        let right = right.flat_map(move |row| {
            let key = project(&row, &right_key);
            match time(&row[right_time]) {
                Some(t) if !key.iter().any(Value::is_null) => {
                    Some(((key, t.div_euclid(width)), row))
                }
                _ => None,
            }
        });
        left.join_map(right, |_, l: &Row, r: &Row| (l.clone(), r.clone()))
            .flat_map(move |(l, r)| {
                let (Some(lt), Some(rt)) = (time(&l[left_time]), time(&r[right_time])) else {
                    unreachable!("only rows with times are keyed")
                };
                let gap = rt.saturating_sub(lt);
                (lower <= gap && gap <= upper).then(|| {
                    let mut row = l;
                    row.extend(r);
                    row
                })
            })
    }
}
