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

fn has_null(key: &Row) -> bool {
    key.iter().any(Value::is_null)
}

impl<'s> RelationalJoin<'s> for Rows<'s> {
    fn relational_join(self, right: Rows<'s>, columns: JoinColumns, kind: JoinKind) -> Rows<'s> {
        let JoinColumns {
            left_key,
            right_key,
            right_rest,
        } = columns;
        let pad = right_rest.len();
        let keyed = self.map(move |row| (project(&row, &left_key), row));
        let matchable = keyed.clone().filter(|(k, _)| !has_null(k));
        let null_keyed = keyed.filter(|(k, _)| has_null(k)).map(|(_, row)| row);
        let right = right.flat_map(move |row| {
            let key = project(&row, &right_key);
            (!has_null(&key)).then(|| (key, project(&row, &right_rest)))
        });
        let padded = move |mut row: Row| {
            row.extend(std::iter::repeat_n(Value::Null, pad));
            row
        };
        match kind {
            JoinKind::Inner => matchable.join_map(right, |_, l, r| concat(l, r)),
            JoinKind::Semi => matchable
                .semijoin(right.map(|(k, _)| k).distinct())
                .map(|(_, row)| row),
            JoinKind::Anti => unmatched(matchable, right).concat(null_keyed),
            JoinKind::Left => {
                let matched = matchable
                    .clone()
                    .join_map(right.clone(), |_, l, r| concat(l, r));
                matched.concat(unmatched(matchable, right).concat(null_keyed).map(padded))
            }
        }
    }
}

/// Left rows (with non-null keys) that have no match on the right.
fn unmatched<'s>(
    left: differential_dataflow::VecCollection<'s, crate::job::Time, (Row, Row)>,
    right: differential_dataflow::VecCollection<'s, crate::job::Time, (Row, Row)>,
) -> Rows<'s> {
    left.antijoin(right.map(|(k, _)| k).distinct())
        .map(|(_, row)| row)
}

fn concat(left: &Row, right: &Row) -> Row {
    let mut row = Vec::with_capacity(left.len() + right.len());
    row.extend_from_slice(left);
    row.extend_from_slice(right);
    row
}
