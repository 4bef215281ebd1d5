//! Relational equi-joins with SQL semantics: inner, left (outer), semi, anti.
//!
//! Null keys never match (SQL's `NULL = NULL` is not true): left rows with a
//! null in any key column take the "no match" path (kept by `left` with
//! nulls for the right columns, kept by `anti`, dropped by `inner` and
//! `semi`); right rows with a null key are ignored.
//!
//! Output rows are the left columns followed by the right columns minus the
//! right join keys. Both sides are partitioned by key (a reduce-side join);
//! the left side is arranged once and shared by the matching and the
//! non-matching halves of a left/anti join.

use std::str::FromStr;

use crate::job::Rows;
use crate::ops::aggregate::project;
use crate::value::{Row, Value};

/// Which rows a join keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinKind {
    /// Every matching pair.
    Inner,
    /// Every matching pair, plus unmatched left rows with null right columns.
    Left,
    /// Each left row that has at least one match, once.
    Semi,
    /// Each left row that has no match.
    Anti,
}

impl FromStr for JoinKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "inner" => Ok(JoinKind::Inner),
            "left" => Ok(JoinKind::Left),
            "semi" => Ok(JoinKind::Semi),
            "anti" => Ok(JoinKind::Anti),
            _ => Err("expected inner, left, semi or anti".into()),
        }
    }
}

/// Which columns to match and what to keep of the right side.
#[derive(Clone, Debug)]
pub struct JoinColumns {
    pub left_key: Vec<usize>,
    pub right_key: Vec<usize>,
    /// Right columns carried into the output (all but the key columns).
    pub right_rest: Vec<usize>,
}

/// Equi-join of two row collections, as a collection method.
pub trait RelationalJoin<'s> {
    fn relational_join(self, right: Rows<'s>, columns: JoinColumns, kind: JoinKind) -> Rows<'s>;
}

impl<'s> RelationalJoin<'s> for Rows<'s> {
    fn relational_join(self, right: Rows<'s>, columns: JoinColumns, kind: JoinKind) -> Rows<'s> {
        // A one-column key is a `Value`, compared in place; wider keys are rows.
        if columns.left_key.len() == 1 {
            join_on::<Value>(self, right, columns, kind)
        } else {
            join_on::<Row>(self, right, columns, kind)
        }
    }
}

/// A join key taken from a row: `None` when any key column is null (null
/// keys never match).
trait JoinKey: differential_dataflow::ExchangeData + differential_dataflow::Hashable + Sized {
    fn from_row(row: &Row, columns: &[usize]) -> Option<Self>;
}

impl JoinKey for Value {
    fn from_row(row: &Row, columns: &[usize]) -> Option<Value> {
        let v = &row[columns[0]];
        (!v.is_null()).then(|| v.clone())
    }
}

impl JoinKey for Row {
    fn from_row(row: &Row, columns: &[usize]) -> Option<Row> {
        let key = project(row, columns);
        (!key.iter().any(Value::is_null)).then_some(key)
    }
}

type Keyed<'s, K> = differential_dataflow::VecCollection<'s, crate::job::Time, (K, Row)>;

fn join_on<'s, K: JoinKey>(
    left: Rows<'s>,
    right: Rows<'s>,
    columns: JoinColumns,
    kind: JoinKind,
) -> Rows<'s> {
    let JoinColumns {
        left_key,
        right_key,
        right_rest,
    } = columns;
    let pad = right_rest.len();
    let right: Keyed<'s, K> = right.flat_map(move |row| {
        K::from_row(&row, &right_key).map(|key| (key, project(&row, &right_rest)))
    });
    let lk = left_key.clone();
    // Only left/anti joins keep null-keyed left rows; the others never build
    // that branch (a second consumer would clone every left row).
    let matchable = |left: Rows<'s>| -> Keyed<'s, K> {
        left.flat_map(move |row| K::from_row(&row, &lk).map(|k| (k, row)))
    };
    let null_keyed =
        move |left: Rows<'s>| left.filter(move |row| left_key.iter().any(|&c| row[c].is_null()));
    match kind {
        JoinKind::Inner => matchable(left).join_map(right, |_, l, r| concat(l, r)),
        JoinKind::Semi => matchable(left)
            .semijoin(right.map(|(k, _)| k).distinct())
            .map(|(_, row)| row),
        JoinKind::Anti => unmatched(matchable(left.clone()), right).concat(null_keyed(left)),
        JoinKind::Left => {
            let keyed = matchable(left.clone());
            let matched = keyed
                .clone()
                .join_map(right.clone(), |_, l, r| concat(l, r));
            let padded = move |mut row: Row| {
                row.extend(std::iter::repeat_n(Value::Null, pad));
                row
            };
            matched.concat(unmatched(keyed, right).concat(null_keyed(left)).map(padded))
        }
    }
}

/// Left rows (with non-null keys) that have no match on the right.
fn unmatched<'s, K: JoinKey>(left: Keyed<'s, K>, right: Keyed<'s, K>) -> Rows<'s> {
    left.antijoin(right.map(|(k, _)| k).distinct())
        .map(|(_, row)| row)
}

fn concat(left: &Row, right: &Row) -> Row {
    let mut row = Vec::with_capacity(left.len() + right.len());
    row.extend_from_slice(left);
    row.extend_from_slice(right);
    row
}
