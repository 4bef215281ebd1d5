//! SQL aggregates over groups of rows: `count`, `sum`, `min`, `max`, `avg`,
//! `count_distinct`, as one differential operator ([`GroupAggregate`]).
//!
//! Semantics follow SQL: `count` counts rows; the others ignore nulls and give
//! null over a group with no non-null value. `sum` of integers is exact (kept
//! in an `i128`; a result beyond `i64` is written as a float); as soon as a
//! float is involved the sum is a float.
//!
//! How a group is computed (`group.rs`): `count`, `sum` and `avg` travel in
//! the difference type ([`tally::Tally`]), so differential's consolidation
//! adds them up and nothing is sorted by value; each worker first adds up
//! its own rows per key and epoch (`prepare.rs`), so a key costs one update
//! per worker and epoch however many rows it has. Only `min`, `max` and
//! `count_distinct` need the values themselves: the group's entries are its
//! distinct *slot rows* (one slot per such aggregate), each with the tally of
//! the rows that have it. Where the input only inserts (a batch run), `min`
//! and `max` keep just their extremes per worker, so again one entry per key.
//! Where a key's state is all there is to keep (no ordered slots, or
//! extremes folded), the key's worker adds up its entries in a hash table
//! instead of arranging them for a `reduce` (`settle.rs`).
//! When every aggregate is `count`, the key rows themselves settle, with
//! the runner's input combiner's counts as their `isize` differences:
//! cheaper still.
//!
//! Determinism: float sums are exact (Shewchuk's non-overlapping partials,
//! as Python's `math.fsum`, see [`sum`]) and rounded once at the end, so the
//! result does not depend on arrival order, worker count, or how a group was
//! split (plain float addition is not associative; summing in arrival order
//! would break batch == stream).
//!
//! Hot keys ([`Physical::Skew`](crate::ops::skew::Physical::Skew)): a hot key's entries are spread over
//! `(key, salt)` partitions on many workers, each computes a [`Partial`]
//! state, and one worker per key merges the few partials into the final
//! values. `count_distinct` stays exact because the salt is then a hash of
//! its slot's value, so each distinct value is counted in one partition only
//! (with `count_distinct` on two different columns, grouping stays
//! one-phase). Merging exact states gives exactly the one-phase values.

mod group;
mod prepare;
mod settle;
pub mod sum;
pub mod tally;

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

pub use group::{GroupAggregate, project};

use crate::job::{PlanError, Updates};
use crate::schema::{ColumnType, InputSchema};
use crate::value::{Row, Value};
use sum::Sum;
use tally::Tally;

/// One aggregate function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggKind {
    /// `count`: the group's rows, nulls included.
    Count,
    /// `sum:COL`: the exact sum of the non-null values (an integer unless a
    /// float is among them or it is beyond `i64`).
    Sum,
    /// `min:COL`: the least non-null value.
    Min,
    /// `max:COL`: the greatest non-null value.
    Max,
    /// `avg:COL`: the mean of the non-null values, a float.
    Avg,
    /// `count_distinct:COL`: the number of distinct non-null values.
    CountDistinct,
}

/// An aggregate as the user wrote it: a function and, except for `count`, a column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggSpec {
    /// The function.
    pub kind: AggKind,
    /// The input column it aggregates; `None` exactly for `count`.
    pub column: Option<String>,
}

impl AggSpec {
    /// Parses `count,sum:COL,min:COL,max:COL,avg:COL,count_distinct:COL`.
    pub fn parse_list(text: &str) -> Result<Vec<AggSpec>, PlanError> {
        let bad = |reason: String| PlanError::BadParam {
            name: "agg".into(),
            value: text.into(),
            reason,
        };
        let mut aggs = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (func, column) = match item.split_once(':') {
                Some((f, c)) if !c.is_empty() => (f, Some(c.to_string())),
                Some(_) => return Err(bad(format!("{item:?} names no column"))),
                None => (item, None),
            };
            let kind = match func {
                "count" => AggKind::Count,
                "sum" => AggKind::Sum,
                "min" => AggKind::Min,
                "max" => AggKind::Max,
                "avg" => AggKind::Avg,
                "count_distinct" => AggKind::CountDistinct,
                _ => {
                    return Err(bad(format!(
                        "unknown aggregate {func:?} (known: count, sum, min, max, avg, count_distinct)"
                    )));
                }
            };
            if (kind == AggKind::Count) != column.is_none() {
                let why = if column.is_some() {
                    "count takes no column"
                } else {
                    "needs a column: FUNC:COL"
                };
                return Err(bad(format!("{item:?}: {why}")));
            }
            aggs.push(AggSpec { kind, column });
        }
        if aggs.is_empty() {
            return Err(bad("no aggregate given".into()));
        }
        Ok(aggs)
    }

    /// The output column name: `count`, `sum_COL`, `count_distinct_COL`, ...
    pub fn output_name(&self) -> String {
        let func = match self.kind {
            AggKind::Count => return "count".into(),
            AggKind::Sum => "sum",
            AggKind::Min => "min",
            AggKind::Max => "max",
            AggKind::Avg => "avg",
            AggKind::CountDistinct => "count_distinct",
        };
        format!("{func}_{}", self.column.as_deref().unwrap_or(""))
    }

    /// The type the aggregate needs its column to have.
    pub fn column_type(&self) -> ColumnType {
        match self.kind {
            AggKind::Sum | AggKind::Avg => ColumnType::Number,
            _ => ColumnType::Any,
        }
    }
}

/// One aggregate, resolved: `Sum`/`Avg` name a sum slot, `Min`/`Max`/
/// `CountDistinct` an ordered slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Agg {
    Count,
    Sum(usize),
    Avg(usize),
    Min(usize),
    Max(usize),
    CountDistinct(usize),
}

/// Aggregates resolved against a value row (the columns a plan gives the
/// grouping besides its key, see [`Aggregates::resolve`]).
#[derive(Clone, Debug)]
pub struct Aggregates {
    aggs: Vec<Agg>,
    /// Per sum slot (a tally's `sums`): its value-row position.
    sums: Vec<usize>,
    /// Per ordered slot (a slot row's columns): the function and its
    /// value-row position.
    slots: Vec<(AggKind, usize)>,
}

impl Aggregates {
    /// Resolves `specs` against `schema`; returns the aggregates and the
    /// source columns (with types) the value rows must carry, in order.
    pub fn resolve(
        specs: &[AggSpec],
        schema: &InputSchema,
    ) -> Result<(Aggregates, Vec<(usize, ColumnType)>), PlanError> {
        let mut columns: Vec<(usize, ColumnType)> = Vec::new();
        let mut resolved = Aggregates {
            aggs: Vec::new(),
            sums: Vec::new(),
            slots: Vec::new(),
        };
        for spec in specs {
            let Some(name) = &spec.column else {
                resolved.aggs.push(Agg::Count);
                continue;
            };
            let source = schema.index(name)?;
            let ty = spec.column_type();
            let pos = match columns.iter().position(|(s, _)| *s == source) {
                Some(p) => {
                    if ty == ColumnType::Number {
                        columns[p].1 = ty;
                    }
                    p
                }
                None => {
                    columns.push((source, ty));
                    columns.len() - 1
                }
            };
            let agg = resolved.slot_for(spec.kind, pos);
            resolved.aggs.push(agg);
        }
        Ok((resolved, columns))
    }

    /// Aggregates given by value-row position: per aggregate its function
    /// and the position it reads (`None` exactly for `count`), sharing
    /// slots as [`Aggregates::resolve`] does (the SQL front end's path).
    pub fn over_positions(calls: &[(AggKind, Option<usize>)]) -> Aggregates {
        let mut resolved = Aggregates {
            aggs: Vec::new(),
            sums: Vec::new(),
            slots: Vec::new(),
        };
        for (kind, pos) in calls {
            let agg = match pos {
                None => Agg::Count,
                Some(p) => resolved.slot_for(*kind, *p),
            };
            resolved.aggs.push(agg);
        }
        resolved
    }

    /// The aggregate `kind` over value-row position `pos`, sharing a slot
    /// with an earlier aggregate that needs the same one.
    fn slot_for(&mut self, kind: AggKind, pos: usize) -> Agg {
        fn index<T: PartialEq>(list: &mut Vec<T>, item: T) -> usize {
            match list.iter().position(|x| *x == item) {
                Some(i) => i,
                None => {
                    list.push(item);
                    list.len() - 1
                }
            }
        }
        match kind {
            AggKind::Count => Agg::Count,
            AggKind::Sum => Agg::Sum(index(&mut self.sums, pos)),
            AggKind::Avg => Agg::Avg(index(&mut self.sums, pos)),
            AggKind::Min => Agg::Min(index(&mut self.slots, (kind, pos))),
            AggKind::Max => Agg::Max(index(&mut self.slots, (kind, pos))),
            AggKind::CountDistinct => Agg::CountDistinct(index(&mut self.slots, (kind, pos))),
        }
    }

    /// How a hot key's entries may be spread over salts: by the whole slot
    /// row, by the one slot `count_distinct` counts, or not at all
    /// (`count_distinct` on several columns).
    pub fn split(&self) -> Split {
        let distinct: BTreeSet<usize> = self
            .aggs
            .iter()
            .filter_map(|a| match a {
                Agg::CountDistinct(slot) => Some(*slot),
                _ => None,
            })
            .collect();
        match (distinct.len(), distinct.first()) {
            (0, _) => Split::ByRow,
            (1, Some(&slot)) => Split::ByColumn(slot),
            _ => Split::Never,
        }
    }

    /// True when every aggregate is `count`: then the input combiner's
    /// counts (an `isize` difference) are all a key needs
    /// (`settle::settle_counts`), the cheapest grouping.
    fn only_counts(&self) -> bool {
        self.aggs.iter().all(|a| *a == Agg::Count)
    }

    /// True when a group's entries may be folded into one per key and
    /// worker by keeping only the extremes (no `count_distinct`, which
    /// needs every distinct value). Valid only for inputs that only insert.
    fn foldable(&self) -> bool {
        self.slots.iter().all(|(k, _)| *k != AggKind::CountDistinct)
    }

    /// Whether a key's state is all its last step needs to keep
    /// (`settle.rs`): with no `min`, `max` or `count_distinct` the tally is
    /// the whole state (a retraction subtracts from it), and where rows
    /// only arrive, so are the extremes of `min` and `max`.
    fn settles(&self, updates: Updates) -> bool {
        self.slots.is_empty() || (updates == Updates::InsertOnly && self.foldable())
    }

    /// The states of one part of a group: its entries (slot rows with the
    /// tallies of the rows that have them), sorted and consolidated.
    pub fn partial(&self, group: &[(&Row, Tally)]) -> Vec<Partial> {
        let mut total = Tally::default();
        for (_, t) in group {
            total.add_times(t, 1);
        }
        let sum = |s: usize| total.sums.get(s).cloned().unwrap_or_default();
        // Entries with no rows left carry nothing (a consolidated group has none).
        let values = |slot: usize| {
            group
                .iter()
                .filter(|(_, t)| t.rows > 0)
                .map(move |(r, _)| &r[slot])
                .filter(|v| !v.is_null())
        };
        self.aggs
            .iter()
            .map(|agg| match *agg {
                Agg::Count => Partial::Count(total.rows),
                Agg::Sum(s) => Partial::Sum(sum(s)),
                Agg::Avg(s) => Partial::Avg(sum(s)),
                Agg::Min(slot) => Partial::Min(values(slot).min().cloned().unwrap_or(Value::Null)),
                Agg::Max(slot) => Partial::Max(values(slot).max().cloned().unwrap_or(Value::Null)),
                Agg::CountDistinct(slot) => {
                    Partial::CountDistinct(values(slot).collect::<BTreeSet<_>>().len() as i64)
                }
            })
            .collect()
    }

    /// Merges the states of a group's parts (with multiplicities: two parts
    /// with equal states arrive as one with multiplicity 2).
    pub fn merge(&self, parts: &[(&Vec<Partial>, isize)]) -> Vec<Partial> {
        let mut acc: Vec<Partial> = self
            .aggs
            .iter()
            .map(|agg| match agg {
                Agg::Count => Partial::Count(0),
                Agg::Sum(_) => Partial::Sum(Sum::default()),
                Agg::Avg(_) => Partial::Avg(Sum::default()),
                Agg::Min(_) => Partial::Min(Value::Null),
                Agg::Max(_) => Partial::Max(Value::Null),
                Agg::CountDistinct(_) => Partial::CountDistinct(0),
            })
            .collect();
        let better = |a: &mut Value, b: &Value, kind: AggKind| {
            if prepare::extreme_wins(kind, a, b) {
                *a = b.clone();
            }
        };
        for (part, m) in parts {
            let m = *m as i64;
            for (a, b) in acc.iter_mut().zip(part.iter()) {
                match (a, b) {
                    (Partial::Count(a), Partial::Count(b)) => *a += b * m,
                    (Partial::CountDistinct(a), Partial::CountDistinct(b)) => *a += b * m,
                    (Partial::Sum(a), Partial::Sum(b)) | (Partial::Avg(a), Partial::Avg(b)) => {
                        a.add_sum(b, m)
                    }
                    (Partial::Min(a), Partial::Min(b)) => better(a, b, AggKind::Min),
                    (Partial::Max(a), Partial::Max(b)) => better(a, b, AggKind::Max),
                    (a, b) => unreachable!("partials of different aggregates: {a:?}, {b:?}"),
                }
            }
        }
        acc
    }

    /// The aggregate values from a whole group's states.
    pub fn finish(&self, parts: &[Partial]) -> Row {
        parts
            .iter()
            .map(|p| match p {
                Partial::Count(n) | Partial::CountDistinct(n) => Value::Int(*n),
                Partial::Sum(s) => s.value(),
                Partial::Avg(s) => s.average(),
                Partial::Min(v) | Partial::Max(v) => v.clone(),
            })
            .collect()
    }

    /// The aggregate values of one group given as value rows with
    /// multiplicities (windows that gather their rows themselves).
    pub fn compute(&self, group: &[(&Row, isize)]) -> Row {
        let entries: Vec<(Row, Tally)> = group
            .iter()
            .map(|(row, m)| {
                let mut tally = Tally::default();
                tally.add_row(row, *m as i64, &self.sums);
                (
                    self.slots.iter().map(|&(_, c)| row[c].clone()).collect(),
                    tally,
                )
            })
            .collect();
        let entries: Vec<(&Row, Tally)> = entries.iter().map(|(r, t)| (r, t.clone())).collect();
        self.finish(&self.partial(&entries))
    }
}

/// How the entries of a hot key may be spread over salts (see [`Aggregates::split`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// By a hash of the whole slot row (no `count_distinct`).
    ByRow,
    /// By the value of this ordered slot.
    ByColumn(usize),
    /// Not at all (`count_distinct` on several columns): hot keys are
    /// grouped in one phase.
    Never,
}

/// One aggregate's state over part of a group; states of disjoint parts
/// merge into the state of their union.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Partial {
    /// The part's rows.
    Count(i64),
    /// The exact sum of the part's non-null values.
    Sum(Sum),
    /// The sum and count of the non-null values (the sum counts them).
    Avg(Sum),
    /// The part's least non-null value (null if none).
    Min(Value),
    /// The part's greatest non-null value (null if none).
    Max(Value),
    /// Exact when parts never share a value (the salt hashes this slot).
    CountDistinct(i64),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> InputSchema {
        InputSchema {
            name: "input".into(),
            columns: vec!["k".into(), "v".into(), "w".into()],
        }
    }

    #[test]
    fn parse_list_accepts_all_functions_and_names_outputs() {
        let aggs = AggSpec::parse_list("count,sum:v,min:v,max:w,avg:v,count_distinct:w").unwrap();
        let names: Vec<_> = aggs.iter().map(AggSpec::output_name).collect();
        assert_eq!(
            names,
            [
                "count",
                "sum_v",
                "min_v",
                "max_w",
                "avg_v",
                "count_distinct_w"
            ]
        );
    }

    #[test]
    fn parse_list_rejects_malformed() {
        for bad in ["", "median:v", "sum", "count:v", "sum:"] {
            assert!(AggSpec::parse_list(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn resolve_shares_columns_and_types_sums_as_numbers() {
        let specs = AggSpec::parse_list("min:v,sum:v,count").unwrap();
        let (_, cols) = Aggregates::resolve(&specs, &schema()).unwrap();
        assert_eq!(cols, vec![(1, ColumnType::Number)]);
        assert!(Aggregates::resolve(&AggSpec::parse_list("sum:x").unwrap(), &schema()).is_err());
    }

    #[test]
    fn compute_ignores_nulls_like_sql() {
        let specs = AggSpec::parse_list("count,sum:v,avg:v,min:v,max:v,count_distinct:v").unwrap();
        let (aggs, _) = Aggregates::resolve(
            &specs,
            &InputSchema {
                name: "i".into(),
                columns: vec!["v".into()],
            },
        )
        .unwrap();
        let rows = [
            vec![Value::Null],
            vec![Value::Int(2)],
            vec![Value::float(1.5)],
        ];
        let group = [(&rows[0], 1), (&rows[1], 2), (&rows[2], 1)];
        assert_eq!(
            aggs.compute(&group),
            vec![
                Value::Int(4),
                Value::float(5.5),
                Value::float(5.5 / 3.0),
                Value::float(1.5),
                Value::Int(2),
                Value::Int(2)
            ]
        );
        let nulls = [(&rows[0], 3)];
        assert_eq!(
            aggs.compute(&nulls),
            vec![
                Value::Int(3),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Int(0)
            ]
        );
    }
}
