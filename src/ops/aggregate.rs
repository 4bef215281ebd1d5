//! SQL aggregates over groups of rows: `count`, `sum`, `min`, `max`, `avg`,
//! `count_distinct`, as one differential operator ([`GroupAggregate`]).
//!
//! Semantics follow SQL: `count` counts rows; the others ignore nulls and give
//! null over a group with no non-null value. `sum` of integers is exact (kept
//! in an `i128`; a result beyond `i64` is written as a float); as soon as a
//! float is involved the sum is a float.
//!
//! Determinism: aggregates are computed by `reduce`, whose input for a key is
//! the consolidated multiset of values sorted by value. Float sums are added
//! in that order, so the result does not depend on arrival order or worker
//! count (plain float addition is not associative; summing in arrival order
//! would break batch == stream). When the only aggregate is `count`, the
//! cheaper `count` operator is used: the arrangement then holds one entry per
//! key instead of one per distinct row.

use std::collections::BTreeSet;

use crate::job::{PlanError, Rows};
use crate::schema::{ColumnType, InputSchema};
use crate::value::{Row, Value};

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

/// A running sum: exact while only integers are seen.
#[derive(Clone, Copy, Debug)]
struct Sum {
    ints: i128,
    floats: f64,
    any_float: bool,
}

impl Sum {
    fn value(self) -> Value {
        match (self.any_float, i64::try_from(self.ints)) {
            (false, Ok(i)) => Value::Int(i),
            _ => Value::float(self.as_f64()),
        }
    }
    fn as_f64(self) -> f64 {
        self.ints as f64 + self.floats
    }
}

fn sum<'a>(values: impl Iterator<Item = (&'a Value, isize)>) -> Option<Sum> {
    let mut acc: Option<Sum> = None;
    for (v, m) in values {
        let s = acc.get_or_insert(Sum {
            ints: 0,
            floats: 0.0,
            any_float: false,
        });
        match v {
            Value::Int(i) => s.ints += *i as i128 * m as i128,
            Value::Float(f) => {
                s.floats += f.get() * m as f64;
                s.any_float = true;
            }
            // The plan types sum/avg columns as numbers, so the source layer
            // rejects anything else as a bad row before it gets here.
            _ => unreachable!(
                "non-numeric value {v:?} in a sum: the plan must type the column as a number"
            ),
        }
    }
    acc
}

/// Grouping with aggregates, as a collection method.
pub trait GroupAggregate<'s> {
    /// Groups rows by the columns at `key` and appends, per group, the
    /// aggregates over the columns at `values`. Output rows: key columns,
    /// then one column per aggregate.
    fn group_aggregate(self, key: Vec<usize>, values: Vec<usize>, aggs: Aggregates) -> Rows<'s>;
}

impl<'s> GroupAggregate<'s> for Rows<'s> {
    fn group_aggregate(self, key: Vec<usize>, values: Vec<usize>, aggs: Aggregates) -> Rows<'s> {
        if aggs.only_counts() {
            let n = aggs.aggs.len();
            return self
                .map(move |row| project_owned(row, &key))
                .count()
                .map(move |(mut k, c)| {
                    k.extend(std::iter::repeat_n(Value::Int(c as i64), n));
                    k
                });
        }
        self.map(move |row| (project(&row, &key), project(&row, &values)))
            .reduce(move |_key, group, out| out.push((aggs.compute(group), 1isize)))
            .map(|(mut k, v)| {
                k.extend(v);
                k
            })
    }
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
