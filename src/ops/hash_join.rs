//! The broadcast hash join, for inputs that only insert
//! ([`Updates::InsertOnly`](crate::job::Updates::InsertOnly): a batch run;
//! a right row may come with its retraction at the same time, and the
//! table is consolidated before it is probed).
//!
//! A broadcast join in differential dataflow arranges the big left side
//! where it is — it must, because either side may change later. When no row
//! ever leaves and the right side is bounded, there is a cheaper plan with
//! the same output, the one DuckDB and Polars use: every worker builds a
//! hash table of the whole right side (it is broadcast), and once the right
//! input is complete (its frontier is empty: no right row will ever come),
//! each left row is looked up and its output rows are sent on at once. The
//! left side is never exchanged, sorted or stored; left rows that arrive
//! before the right side is complete wait in a buffer (the batch runner
//! reads the smaller inputs first, so that buffer stays small).
//!
//! The output is exactly the differential join's: each left row with each
//! matching right row (multiplicities multiplied), unmatched left rows
//! padded (left) or kept (anti), left rows with a match once (semi), and
//! null keys never matching.

use std::collections::{BTreeMap, HashMap};

use differential_dataflow::AsCollection;
use foldhash::fast::FixedState;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::Capability;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::operators::vec::Broadcast;

use crate::job::{Rows, Time};
use crate::ops::join::{JoinColumns, JoinKind};
use crate::stats::{Dest, count_exchange};
use crate::value::{Key, Row, Value};

/// Left rows held at a time until the right side is complete, with the
/// capability to send their matches at that time.
type Waiting = (Capability<Time>, Vec<(Row, isize)>);

type Update = (Row, Time, isize);

/// The right side's rows by key: `(rest of the row, multiplicity)`.
type Table = HashMap<Key, Vec<(Row, isize)>, FixedState>;

/// Joins `left` (any distribution) with `right` (broadcast here) by hash.
pub fn hash_join<'s>(
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
    let right = count_exchange(
        right.inner.broadcast().as_collection(),
        "join right (broadcast)",
        |_| Dest::Local,
    );
    let pad = right_rest.len();
    left.inner
        .binary_frontier::<_, CapacityContainerBuilder<Vec<Update>>, _, _, _, _>(
            right.inner,
            Pipeline,
            Pipeline,
            "HashJoin",
            move |_capability, _info| {
                let mut table = Table::default();
                let mut settled = false;
                let mut waiting: BTreeMap<Time, Waiting> = BTreeMap::new();
                let probe = Probe {
                    key: left_key,
                    kind,
                    pad,
                };
                move |(left, _), (right, right_frontier), output| {
                    right.for_each(|_cap, data| {
                        for (row, _t, diff) in data.drain(..) {
                            let Some(key) = key_of(&row, &right_key) else {
                                continue; // null keys never match
                            };
                            let rest = right_rest.iter().map(|&c| row[c].clone()).collect();
                            table.entry(key).or_default().push((rest, diff));
                        }
                    });
                    let complete = right_frontier.is_empty();
                    if complete && !settled {
                        settle(&mut table);
                        settled = true;
                    }
                    left.for_each(|cap, data| {
                        if complete {
                            let mut session = output.session(&cap);
                            for (row, t, diff) in data.drain(..) {
                                probe.emit(&table, row, diff, &mut |u| session.give((u.0, t, u.1)));
                            }
                        } else {
                            for (row, t, diff) in data.drain(..) {
                                let (_, rows) = waiting
                                    .entry(t)
                                    .or_insert_with(|| (cap.delayed(&t, 0), Vec::new()));
                                rows.push((row, diff));
                            }
                        }
                    });
                    if complete {
                        for (t, (cap, rows)) in std::mem::take(&mut waiting) {
                            let mut session = output.session(&cap);
                            for (row, diff) in rows {
                                probe.emit(&table, row, diff, &mut |u| session.give((u.0, t, u.1)));
                            }
                        }
                    }
                }
            },
        )
        .as_collection()
}

/// What a left row becomes.
struct Probe {
    key: Vec<usize>,
    kind: JoinKind,
    pad: usize,
}

impl Probe {
    fn emit(&self, table: &Table, row: Row, diff: isize, out: &mut impl FnMut((Row, isize))) {
        let matches = key_of(&row, &self.key).and_then(|k| table.get(k.as_slice()));
        match (self.kind, matches) {
            (JoinKind::Inner | JoinKind::Left, Some(matches)) => {
                for (rest, n) in matches {
                    let mut joined = Vec::with_capacity(row.len() + rest.len());
                    joined.extend_from_slice(&row);
                    joined.extend_from_slice(rest);
                    out((joined, diff * n));
                }
            }
            (JoinKind::Left, None) => {
                let mut padded = row;
                padded.extend(std::iter::repeat_n(Value::Null, self.pad));
                out((padded, diff));
            }
            (JoinKind::Semi, Some(_)) | (JoinKind::Anti, None) => out((row, diff)),
            (JoinKind::Inner, None) | (JoinKind::Semi, None) | (JoinKind::Anti, Some(_)) => {}
        }
    }
}

/// Adds up each right row's multiplicities once the right side is
/// complete. An insert-only input may still carry a row and its
/// retraction at the same time (an operator that emits both rather than
/// nothing, as an antijoin does); what is left is the right side itself,
/// and a key whose rows all cancelled out has no match.
fn settle(table: &mut Table) {
    table.retain(|_, rows| {
        rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut summed: Vec<(Row, isize)> = Vec::with_capacity(rows.len());
        for (rest, n) in rows.drain(..) {
            match summed.last_mut() {
                Some((last, m)) if *last == rest => *m += n,
                _ => summed.push((rest, n)),
            }
        }
        summed.retain(|(_, n)| *n != 0);
        assert!(
            summed.iter().all(|(_, n)| *n > 0),
            "a right row retracted more often than inserted in an insert-only join"
        );
        *rows = summed;
        !rows.is_empty()
    });
}

/// The key of `row` at `columns`, `None` when any part is null.
fn key_of(row: &Row, columns: &[usize]) -> Option<Key> {
    let key: Key = columns.iter().map(|&c| row[c].clone()).collect();
    (!key.iter().any(Value::is_null)).then_some(key)
}
