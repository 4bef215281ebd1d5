//! The grouping operator: [`GroupAggregate`] on row collections.
//!
//! One phase (the default): the prepared entries ([`super::prepare`]) are
//! exchanged by key, and a `reduce` per key turns its entries into the
//! aggregate values (where a key's state is all it needs, a hash table of
//! the states does, [`super::settle`]). Two phases for hot keys
//! ([`Physical::Skew`]): entries of hot keys are salted, reduced to
//! [`Partial`] states per `(key, salt)`, and the few states of a key merged
//! on one worker.

use std::collections::HashSet;
use std::sync::Arc;

use differential_dataflow::Hashable;
use differential_dataflow::operators::arrange::arrangement::arrange_core;
use differential_dataflow::trace::implementations::{ValBatcher, ValBuilder, ValSpine};
use timely::dataflow::channels::pact::Exchange;

use super::prepare::prepare;
use super::settle::{settle, settle_counts};
use super::tally::Tally;
use super::{Aggregates, Partial, Split};
use crate::job::{Rows, Time, Updates};
use crate::ops::skew::{Physical, route, salt_of};
use crate::stats::{Dest, count_exchange};
use crate::value::Row;

/// Grouping with aggregates, as a collection method.
pub trait GroupAggregate<'s> {
    /// Groups rows by the columns at `key` and appends, per group, the
    /// aggregates over the columns at `values`. Output rows: key columns,
    /// then one column per aggregate.
    fn group_aggregate(self, key: Vec<usize>, values: Vec<usize>, aggs: Aggregates) -> Rows<'s>;

    /// As [`GroupAggregate::group_aggregate`], with hot keys computed in two
    /// phases under [`Physical::Skew`], and folding where the rows only
    /// arrive ([`Updates::InsertOnly`]): the same output.
    fn group_aggregate_with(
        self,
        key: Vec<usize>,
        values: Vec<usize>,
        aggs: Aggregates,
        physical: &Physical,
        updates: Updates,
    ) -> Rows<'s>;
}

impl<'s> GroupAggregate<'s> for Rows<'s> {
    fn group_aggregate(self, key: Vec<usize>, values: Vec<usize>, aggs: Aggregates) -> Rows<'s> {
        self.group_aggregate_with(key, values, aggs, &Physical::Shuffle, Updates::Any)
    }

    fn group_aggregate_with(
        self,
        key: Vec<usize>,
        values: Vec<usize>,
        aggs: Aggregates,
        physical: &Physical,
        updates: Updates,
    ) -> Rows<'s> {
        let skewed = matches!(physical, Physical::Skew(_)) && aggs.split() != Split::Never;
        if aggs.only_counts() && !skewed {
            // The input combiner has already counted equal rows per worker.
            let n = aggs.aggs.len();
            let keys = self.map(move |row| project(&row, &key));
            let keys = count_exchange(keys, "group-by (shuffle)", |k| Dest::Hash(k.hashed()));
            return settle_counts(keys, n);
        }
        let salts = hot_salts(&self, physical);
        let entries = prepare(self, &key, &values, &aggs, updates);
        match physical {
            Physical::Skew(hot) if skewed => {
                let hot: Arc<HashSet<Row>> = Arc::new(hot.set(|k| Some(k.clone())));
                two_phase(entries, aggs, hot, salts)
            }
            _ => {
                let entries = count_exchange(entries, "group-by (shuffle)", |(k, _)| {
                    Dest::Hash(k.hashed())
                });
                if aggs.settles(updates) {
                    return settle(entries, aggs);
                }
                entries
                    .reduce(move |_key, group: &[(&Row, Tally)], out| {
                        out.push((aggs.finish(&aggs.partial(group)), 1isize))
                    })
                    .map(|(mut k, v)| {
                        k.extend(v);
                        k
                    })
            }
        }
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
    entries: super::prepare::Entries<'s>,
    aggs: Aggregates,
    hot: Arc<HashSet<Row>>,
    salts: u32,
) -> Rows<'s> {
    let salt_slot = match aggs.split() {
        Split::ByColumn(c) => Some(c),
        Split::ByRow => None,
        Split::Never => unreachable!("checked by the caller"),
    };
    let is_hot = hot.clone();
    let salted = entries.map(move |(k, slots)| {
        let salt = if !is_hot.contains(&k) {
            0
        } else if let Some(c) = salt_slot {
            salt_of(&slots[c], salts)
        } else {
            salt_of(&slots, salts)
        };
        ((k, salt), slots)
    });
    let salted = count_exchange(salted, "group-by (skew)", |((k, s), _)| {
        Dest::Hash(route(k, *s))
    });
    let pact = Exchange::new(|(((k, s), _), _, _): &(((Row, u32), Row), Time, Tally)| route(k, *s));
    let arranged = arrange_core::<
        _,
        _,
        ValBatcher<(Row, u32), Row, Time, Tally>,
        ValSpine<(Row, u32), Row, Time, Tally>,
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
