//! SQL aggregates over groups of rows: `count`, `sum`, `min`, `max`, `avg`,
//! `count_distinct`, as one differential operator ([`GroupAggregate`]).
//!
//! Semantics follow SQL: `count` counts rows; the others ignore nulls and give
//! null over a group with no non-null value. `sum` of integers is exact (kept
//! in an `i128`; a result beyond `i64` is written as a float); as soon as a
//! float is involved the sum is a float.
//!
//! Determinism: float sums are exact (Shewchuk's non-overlapping partials,
//! as Python's `math.fsum`) and rounded once at the end, so the result does
//! not depend on arrival order, worker count, or how a group was split
//! (plain float addition is not associative; summing in arrival order would
//! break batch == stream). When the only aggregate is `count`, the cheaper
//! `count` operator is used: the arrangement then holds one entry per key
//! instead of one per distinct row.
//!
//! Hot keys ([`Physical::Skew`]): every aggregate here combines, so a hot
//! key's rows are spread over `(key, salt)` partitions on many workers, each
//! computes a [`Partial`] state, and one worker per key merges the few
//! partials into the final values. `count_distinct` stays exact because the
//! salt is then a hash of its column's value, so each distinct value is
//! counted in one partition only (with `count_distinct` on two different
//! columns, grouping stays one-phase). Merging exact states gives exactly
//! the one-phase values.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use differential_dataflow::Hashable;
use differential_dataflow::operators::arrange::arrangement::arrange_core;
use differential_dataflow::trace::implementations::{ValBatcher, ValBuilder, ValSpine};
use serde::{Deserialize, Serialize};
use timely::dataflow::channels::pact::Exchange;

use crate::job::{PlanError, Rows, Time};
use crate::ops::skew::{Physical, route, salt_of};
use crate::schema::{ColumnType, InputSchema};
use crate::stats::{Dest, count_exchange};
use crate::value::{F64, Row, Value};

/// One aggregate function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggKind {
    Count,
    Sum,
    Min,
    Max,
    Avg,
    CountDistinct,
}

/// An aggregate as the user wrote it: a function and, except for `count`, a column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggSpec {
    pub kind: AggKind,
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

/// Aggregates resolved against a value row: each function with the position
/// of its column within the rows given to [`Aggregates::compute`].
#[derive(Clone, Debug)]
pub struct Aggregates {
    aggs: Vec<(AggKind, usize)>,
}

impl Aggregates {
    /// Resolves `specs` against `schema`; returns the aggregates and the
    /// source columns (with types) the value rows must carry, in order.
    pub fn resolve(
        specs: &[AggSpec],
        schema: &InputSchema,
    ) -> Result<(Aggregates, Vec<(usize, ColumnType)>), PlanError> {
        let mut columns: Vec<(usize, ColumnType)> = Vec::new();
        let mut aggs = Vec::new();
        for spec in specs {
            let Some(name) = &spec.column else {
                aggs.push((spec.kind, usize::MAX));
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
            aggs.push((spec.kind, pos));
        }
        Ok((Aggregates { aggs }, columns))
    }

    /// True when every aggregate is `count`.
    pub fn only_counts(&self) -> bool {
        self.aggs.iter().all(|(k, _)| *k == AggKind::Count)
    }

    /// The aggregate values of one group: `group` is its consolidated
    /// multiset of value rows (with multiplicities), sorted.
    pub fn compute(&self, group: &[(&Row, isize)]) -> Row {
        self.aggs
            .iter()
            .map(|&(kind, col)| aggregate(kind, col, group))
            .collect()
    }
}

fn aggregate(kind: AggKind, col: usize, group: &[(&Row, isize)]) -> Value {
    let non_null = || {
        group
            .iter()
            .filter(move |(r, _)| !r[col].is_null())
            .map(move |(r, m)| (&r[col], *m))
    };
    match kind {
        AggKind::Count => Value::Int(group.iter().map(|(_, m)| *m as i64).sum()),
        AggKind::Sum => sum(non_null()).map_or(Value::Null, |s| s.value()),
        AggKind::Avg => {
            let count: i64 = non_null().map(|(_, m)| m as i64).sum();
            match sum(non_null()) {
                Some(s) if count != 0 => Value::float(s.as_f64() / count as f64),
                _ => Value::Null,
            }
        }
        AggKind::Min => non_null()
            .map(|(v, _)| v)
            .min()
            .cloned()
            .unwrap_or(Value::Null),
        AggKind::Max => non_null()
            .map(|(v, _)| v)
            .max()
            .cloned()
            .unwrap_or(Value::Null),
        AggKind::CountDistinct => {
            Value::Int(non_null().map(|(v, _)| v).collect::<BTreeSet<_>>().len() as i64)
        }
    }
}

/// A running sum, exact: integers in an `i128`, floats as non-overlapping
/// partials (their exact sum), rounded once when the value is read.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Sum {
    ints: i128,
    floats: Vec<F64>,
    any_float: bool,
}

impl Sum {
    fn value(&self) -> Value {
        match (self.any_float, i64::try_from(self.ints)) {
            (false, Ok(i)) => Value::Int(i),
            _ => Value::float(self.as_f64()),
        }
    }
    fn as_f64(&self) -> f64 {
        self.ints as f64 + round_partials(&self.floats)
    }
    /// Adds `v` `m` times.
    fn add(&mut self, v: &Value, m: isize) {
        match v {
            Value::Int(i) => self.ints += *i as i128 * m as i128,
            Value::Float(f) => {
                self.any_float = true;
                add_times(&mut self.floats, f.get(), m);
            }
            // The plan types sum/avg columns as numbers, so the source layer
            // rejects anything else as a bad row before it gets here.
            _ => unreachable!(
                "non-numeric value {v:?} in a sum: the plan must type the column as a number"
            ),
        }
    }
    /// Adds `other` `m` times.
    fn merge(&mut self, other: &Sum, m: isize) {
        self.ints += other.ints * m as i128;
        self.any_float |= other.any_float;
        for p in &other.floats {
            add_times(&mut self.floats, p.get(), m);
        }
    }
}

/// Adds `x * m` to the partials exactly (the product's rounding error is
/// recovered with a fused multiply-add).
fn add_times(partials: &mut Vec<F64>, x: f64, m: isize) {
    if m == 1 {
        add_exact(partials, x);
        return;
    }
    let m = m as f64;
    let p = x * m;
    let e = x.mul_add(m, -p);
    add_exact(partials, p);
    if e != 0.0 {
        add_exact(partials, e);
    }
}

/// Shewchuk's exact addition: keeps the partials non-overlapping, in
/// increasing magnitude, summing exactly to everything added.
fn add_exact(partials: &mut Vec<F64>, mut x: f64) {
    let mut i = 0;
    for j in 0..partials.len() {
        let mut y = partials[j].get();
        if x.abs() < y.abs() {
            std::mem::swap(&mut x, &mut y);
        }
        let hi = x + y;
        let lo = y - (hi - x);
        if lo != 0.0 {
            partials[i] = F64::new(lo);
            i += 1;
        }
        x = hi;
    }
    partials.truncate(i);
    partials.push(F64::new(x));
}

/// The exact sum of the partials, correctly rounded (as `math.fsum`).
fn round_partials(partials: &[F64]) -> f64 {
    let mut n = partials.len();
    if n == 0 {
        return 0.0;
    }
    n -= 1;
    let mut hi = partials[n].get();
    let mut lo = 0.0;
    while n > 0 {
        let x = hi;
        n -= 1;
        let y = partials[n].get();
        hi = x + y;
        let yr = hi - x;
        lo = y - yr;
        if lo != 0.0 {
            break;
        }
    }
    if n > 0
        && ((lo < 0.0 && partials[n - 1].get() < 0.0) || (lo > 0.0 && partials[n - 1].get() > 0.0))
    {
        let y = lo * 2.0;
        let x = hi + y;
        let yr = x - hi;
        if y == yr {
            hi = x;
        }
    }
    hi
}

fn sum<'a>(values: impl Iterator<Item = (&'a Value, isize)>) -> Option<Sum> {
    let mut acc: Option<Sum> = None;
    for (v, m) in values {
        acc.get_or_insert_with(Sum::default).add(v, m);
    }
    acc
}

/// How the rows of a hot key may be spread over salts (see [`Aggregates::split`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    ByRow,
    ByColumn(usize),
    Never,
}

/// One aggregate's state over part of a group; states of disjoint parts
/// merge into the state of their union.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Partial {
    Count(i64),
    /// `None`: no non-null value yet.
    Sum(Option<Sum>),
    /// The sum and count of the non-null values.
    Avg(Option<Sum>, i64),
    Min(Value),
    Max(Value),
    /// Exact when parts never share a value (the salt hashes this column).
    CountDistinct(i64),
}

impl Aggregates {
    /// How a hot key's rows may be split over salts: by the whole row, by
    /// the one column `count_distinct` counts (its position in the value
    /// rows), or not at all (`count_distinct` on several columns).
    pub fn split(&self) -> Split {
        let cols: BTreeSet<usize> = self
            .aggs
            .iter()
            .filter(|(k, _)| *k == AggKind::CountDistinct)
            .map(|(_, c)| *c)
            .collect();
        match (cols.len(), cols.first()) {
            (0, _) => Split::ByRow,
            (1, Some(&c)) => Split::ByColumn(c),
            _ => Split::Never,
        }
    }

    /// The states of one part of a group (its value rows with multiplicities).
    pub fn partial(&self, group: &[(&Row, isize)]) -> Vec<Partial> {
        self.aggs
            .iter()
            .map(|&(kind, col)| {
                let non_null = || {
                    group
                        .iter()
                        .filter(move |(r, _)| !r[col].is_null())
                        .map(move |(r, m)| (&r[col], *m))
                };
                match kind {
                    AggKind::Count => Partial::Count(group.iter().map(|(_, m)| *m as i64).sum()),
                    AggKind::Sum => Partial::Sum(sum(non_null())),
                    AggKind::Avg => {
                        Partial::Avg(sum(non_null()), non_null().map(|(_, m)| m as i64).sum())
                    }
                    AggKind::Min => Partial::Min(aggregate(kind, col, group)),
                    AggKind::Max => Partial::Max(aggregate(kind, col, group)),
                    AggKind::CountDistinct => {
                        Partial::CountDistinct(aggregate(kind, col, group).as_i64().unwrap_or(0))
                    }
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
            .map(|(kind, _)| match kind {
                AggKind::Count => Partial::Count(0),
                AggKind::Sum => Partial::Sum(None),
                AggKind::Avg => Partial::Avg(None, 0),
                AggKind::Min => Partial::Min(Value::Null),
                AggKind::Max => Partial::Max(Value::Null),
                AggKind::CountDistinct => Partial::CountDistinct(0),
            })
            .collect();
        let merge_sum = |a: &mut Option<Sum>, b: &Option<Sum>, m: isize| {
            if let Some(b) = b {
                a.get_or_insert_with(Sum::default).merge(b, m);
            }
        };
        let better = |a: &mut Value, b: &Value, max: bool| {
            if !b.is_null() && (a.is_null() || (max && b > a) || (!max && b < a)) {
                *a = b.clone();
            }
        };
        for (part, m) in parts {
            for (a, b) in acc.iter_mut().zip(part.iter()) {
                match (a, b) {
                    (Partial::Count(a), Partial::Count(b)) => *a += b * *m as i64,
                    (Partial::CountDistinct(a), Partial::CountDistinct(b)) => *a += b * *m as i64,
                    (Partial::Sum(a), Partial::Sum(b)) => merge_sum(a, b, *m),
                    (Partial::Avg(a, an), Partial::Avg(b, bn)) => {
                        merge_sum(a, b, *m);
                        *an += bn * *m as i64;
                    }
                    (Partial::Min(a), Partial::Min(b)) => better(a, b, false),
                    (Partial::Max(a), Partial::Max(b)) => better(a, b, true),
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
                Partial::Sum(s) => s.as_ref().map_or(Value::Null, Sum::value),
                Partial::Avg(s, n) => match s {
                    Some(s) if *n != 0 => Value::float(s.as_f64() / *n as f64),
                    _ => Value::Null,
                },
                Partial::Min(v) | Partial::Max(v) => v.clone(),
            })
            .collect()
    }
}

/// Grouping with aggregates, as a collection method.
pub trait GroupAggregate<'s> {
    /// Groups rows by the columns at `key` and appends, per group, the
    /// aggregates over the columns at `values`. Output rows: key columns,
    /// then one column per aggregate.
    fn group_aggregate(self, key: Vec<usize>, values: Vec<usize>, aggs: Aggregates) -> Rows<'s>;

    /// As [`GroupAggregate::group_aggregate`], with hot keys computed in two
    /// phases under [`Physical::Skew`] (the same output).
    fn group_aggregate_with(
        self,
        key: Vec<usize>,
        values: Vec<usize>,
        aggs: Aggregates,
        physical: &Physical,
    ) -> Rows<'s>;
}

impl<'s> GroupAggregate<'s> for Rows<'s> {
    fn group_aggregate_with(
        self,
        key: Vec<usize>,
        values: Vec<usize>,
        aggs: Aggregates,
        physical: &Physical,
    ) -> Rows<'s> {
        match physical {
            Physical::Skew(hot) if aggs.split() != Split::Never => {
                let hot: Arc<HashSet<Row>> = Arc::new(hot.set(|k| Some(k.clone())));
                let salts = hot_salts(&self, physical);
                two_phase(self, key, values, aggs, hot, salts)
            }
            _ => self.group_aggregate(key, values, aggs),
        }
    }

    fn group_aggregate(self, key: Vec<usize>, values: Vec<usize>, aggs: Aggregates) -> Rows<'s> {
        let by_key = |k: &Row| Dest::Hash(k.hashed());
        if aggs.only_counts() {
            let n = aggs.aggs.len();
            let keys = self.map(move |row| project_owned(row, &key));
            return count_exchange(keys, "group-by (shuffle)", by_key)
                .count()
                .map(move |(mut k, c)| {
                    k.extend(std::iter::repeat_n(Value::Int(c as i64), n));
                    k
                });
        }
        let pairs = self.map(move |row| (project(&row, &key), project(&row, &values)));
        count_exchange(pairs, "group-by (shuffle)", move |(k, _)| by_key(k))
            .reduce(move |_key, group, out| out.push((aggs.compute(group), 1isize)))
            .map(|(mut k, v)| {
                k.extend(v);
                k
            })
    }
}

/// The salt count of a skewed grouping on this scope's workers.
fn hot_salts(rows: &Rows<'_>, physical: &Physical) -> u32 {
    match physical {
        Physical::Skew(hot) => hot.salts(rows.inner.scope().peers()),
        _ => 1,
    }
}

/// Two-phase grouping: partial states per `(key, salt)` (hot keys spread
/// over `salts` partitions, others in one), final values per key, merged on
/// one worker only for hot keys.
fn two_phase<'s>(
    rows: Rows<'s>,
    key: Vec<usize>,
    values: Vec<usize>,
    aggs: Aggregates,
    hot: Arc<HashSet<Row>>,
    salts: u32,
) -> Rows<'s> {
    let salt_column = match aggs.split() {
        Split::ByColumn(c) => Some(c),
        Split::ByRow => None,
        Split::Never => unreachable!("checked by the caller"),
    };
    let is_hot = hot.clone();
    let salted = rows.map(move |row| {
        let k = project(&row, &key);
        let v = project(&row, &values);
        let salt = if !is_hot.contains(&k) {
            0
        } else if let Some(c) = salt_column {
            salt_of(&v[c], salts)
        } else {
            salt_of(&row, salts)
        };
        ((k, salt), v)
    });
    let salted = count_exchange(salted, "group-by (skew)", |((k, s), _)| {
        Dest::Hash(route(k, *s))
    });
    let pact = Exchange::new(|(((k, s), _), _, _): &(((Row, u32), Row), Time, isize)| route(k, *s));
    let arranged = arrange_core::<
        _,
        _,
        ValBatcher<(Row, u32), Row, Time, isize>,
        ValSpine<(Row, u32), Row, Time, isize>,
    >(salted.inner, pact, "GroupSalted", ValBatcher::new);
    let part_aggs = aggs.clone();
    let partials = arranged
        .reduce_abelian::<_, ValBuilder<_, _, _, _>, ValSpine<(Row, u32), Vec<Partial>, Time, isize>, _, _>(
            "GroupPartial",
            move |_key, group, out| out.push((part_aggs.partial(group), 1isize)),
            |vec, key, upds| {
                vec.clear();
                vec.extend(upds.drain(..).map(|(v, t, r)| ((key.clone(), v), t, r)));
            },
        )
        .as_collection(|k: &(Row, u32), v: &Vec<Partial>| (k.0.clone(), v.clone()));
    let cold_aggs = aggs.clone();
    let is_hot = hot.clone();
    let cold = partials.clone().flat_map(move |(mut k, parts)| {
        (!is_hot.contains(&k)).then(|| {
            k.extend(cold_aggs.finish(&parts));
            k
        })
    });
    let merged = partials
        .filter(move |(k, _)| hot.contains(k))
        .reduce(move |_key, parts, out| out.push((aggs.finish(&aggs.merge(parts)), 1isize)))
        .map(|(mut k, v)| {
            k.extend(v);
            k
        });
    cold.concat(merged)
}

/// The values at `columns`, in that order.
pub fn project(row: &Row, columns: &[usize]) -> Row {
    columns.iter().map(|&i| row[i].clone()).collect()
}

/// As [`project`], reusing the row when `columns` is a prefix of it in
/// order (the common case: a plan projects the key columns first).
pub fn project_owned(mut row: Row, columns: &[usize]) -> Row {
    if columns.iter().enumerate().all(|(i, &c)| i == c) {
        row.truncate(columns.len());
        row
    } else {
        project(&row, columns)
    }
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

    #[test]
    fn integer_sums_are_exact_beyond_f64() {
        let rows = [vec![Value::Int(i64::MAX)], vec![Value::Int(-1)]];
        let group = [(&rows[0], 1), (&rows[1], 1)];
        let s = sum(group.iter().map(|(r, m)| (&r[0], *m))).unwrap();
        assert_eq!(s.value(), Value::Int(i64::MAX - 1));
    }
}
