//! The temporal ("as of") join: each event row joined with the version of
//! its key's table row that was valid at the event's time — the version with
//! the latest `valid_from` at or before the event time.
//!
//! The table side is a history of versions (every row a version with its
//! `valid_from`), not a changelog read as its current content: a new version
//! changes only the events at or after its `valid_from`, which is what makes
//! the result independent of when versions arrive relative to events. Ties
//! (two versions of a key with the same `valid_from`) go to the greatest row,
//! so the choice is a function of the data. Events with a null key or time,
//! or with no version valid yet, match nothing (kept with null table columns
//! by a left join).

use crate::job::Rows;
use crate::ops::aggregate::project;
use crate::value::Value;

/// Where the key and time columns are on each side.
#[derive(Clone, Debug)]
pub struct AsOfSpec {
    /// The indices of the key columns in event rows.
    pub event_key: Vec<usize>,
    /// The index of the event-time column in event rows.
    pub event_time: usize,
    /// The indices of the key columns in table rows, paired with `event_key`.
    pub table_key: Vec<usize>,
    /// The index of the column in table rows holding the time a version is
    /// valid from (same unit as the event time).
    pub valid_from: usize,
    /// Table columns appended to each event (usually all but the key).
    pub table_rest: Vec<usize>,
    /// Keep unmatched events, with nulls for the table columns.
    pub left: bool,
    /// Reads a time column's value as an integer time (both sides alike),
    /// or `None` (the row matches nothing).
    pub time: fn(&Value) -> Option<i64>,
}

/// The temporal join, as a collection method.
pub trait AsOfJoin<'s> {
    #[allow(clippy::wrong_self_convention)] // "as of" is SQL's name for the join, not a conversion
    /// Output rows: the event's columns, then the matching version's
    /// `table_rest` columns.
    fn as_of_join(self, table: Rows<'s>, spec: AsOfSpec) -> Rows<'s>;
}

impl<'s> AsOfJoin<'s> for Rows<'s> {
    fn as_of_join(self, table: Rows<'s>, spec: AsOfSpec) -> Rows<'s> {
        let AsOfSpec {
            event_key,
            event_time,
            table_key,
            valid_from,
            table_rest,
            left,
            time,
        } = spec;
        let pad = table_rest.len();
        let keyed = self.clone().flat_map(move |row| {
            let key = project(&row, &event_key);
            let timed = time(&row[event_time]).is_some();
            (timed && !key.iter().any(Value::is_null)).then_some((key, row))
        });
        let versions = table.flat_map(move |row| {
            let key = project(&row, &table_key);
            match time(&row[valid_from]) {
                Some(from) if !key.iter().any(Value::is_null) => {
                    Some((key, (from, project(&row, &table_rest))))
                }
                _ => None,
            }
        });
        // Every version valid at or before the event, then the latest one
        // per event row. Multiplicities multiply as in any join: an event
        // row twice gives its enriched row twice.
        let matched = keyed
            .join_map(versions, |_, event, version| {
                (event.clone(), version.clone())
            })
            .filter(move |(event, (from, _))| time(&event[event_time]).is_some_and(|t| *from <= t))
            .reduce(|_event, versions, out| {
                let (latest, n) = versions.last().expect("reduce gives non-empty groups");
                out.push((latest.1.clone(), *n));
            });
        let enriched = matched.clone().map(|(mut event, rest)| {
            event.extend(rest);
            event
        });
        if !left {
            return enriched;
        }
        let unmatched = self
            .map(|row| (row, ()))
            .antijoin(matched.map(|(event, _)| event).distinct())
            .map(move |(mut row, ())| {
                row.extend(std::iter::repeat_n(Value::Null, pad));
                row
            });
        enriched.concat(unmatched)
    }
}
