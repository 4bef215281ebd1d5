//! Relational equi-joins with SQL semantics: inner, left (outer), semi, anti.
//!
//! Null keys never match (SQL's `NULL = NULL` is not true): left rows with a
//! null in any key column take the "no match" path (kept by `left` with
//! nulls for the right columns, kept by `anti`, dropped by `inner` and
//! `semi`); right rows with a null key are ignored.
//!
//! Output rows are the left columns followed by the right columns minus the
//! right join keys. The left side is the large one. Strategies
//! ([`Physical`]):
//! - `shuffle`: both sides partitioned by key (a reduce-side join).
//! - `broadcast`: the right side is sent whole to every worker and arranged
//!   there; the left side is arranged where it already is, never exchanged.
//!   Where the inputs only insert ([`Updates::InsertOnly`]), the left side
//!   is not arranged either: it streams through a hash table of the right
//!   side ([`crate::ops::hash_join`]).
//! - `skew`: left records of hot keys are spread over `(key, salt)`
//!   partitions by a salt that hashes the whole record; the right records
//!   of a hot key are replicated to each of its salts, so every partition
//!   sees all right records of its key. Other keys are shuffled.
//!
//! Every strategy gives exactly the output of `shuffle`: a left record's
//! matches (and so its match status, for `left`, `semi` and `anti`) are
//! decided against all right records of its key, which broadcast gives
//! locally and skew by replication. Unmatched rows of `left`/`anti` are the
//! left rows minus the semi-join, wherever they are, so no strategy moves
//! the left side a second time.

use std::str::FromStr;

use std::collections::HashSet;

use differential_dataflow::operators::arrange::TraceAgent;
use differential_dataflow::operators::arrange::arrangement::{Arranged, arrange_core};
use differential_dataflow::trace::implementations::{ValBatcher, ValSpine};
use differential_dataflow::{AsCollection, Hashable, VecCollection};
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::vec::Broadcast;

use crate::job::{Rows, Time, Updates};
use crate::ops::aggregate::project;
pub use crate::ops::skew::Physical;
use crate::ops::skew::{route, salt_of};
use crate::stats::{Dest, count_exchange};
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
    /// A shuffle join.
    fn relational_join(self, right: Rows<'s>, columns: JoinColumns, kind: JoinKind) -> Rows<'s>;
    /// A join computed with strategy `physical` (same output as shuffle),
    /// knowing what kind of changes its inputs carry.
    fn relational_join_with(
        self,
        right: Rows<'s>,
        columns: JoinColumns,
        kind: JoinKind,
        physical: &Physical,
        updates: Updates,
    ) -> Rows<'s>;
}

impl<'s> RelationalJoin<'s> for Rows<'s> {
    fn relational_join(self, right: Rows<'s>, columns: JoinColumns, kind: JoinKind) -> Rows<'s> {
        self.relational_join_with(right, columns, kind, &Physical::Shuffle, Updates::Any)
    }

    fn relational_join_with(
        self,
        right: Rows<'s>,
        columns: JoinColumns,
        kind: JoinKind,
        physical: &Physical,
        updates: Updates,
    ) -> Rows<'s> {
        if matches!(physical, Physical::Broadcast) && updates == Updates::InsertOnly {
            return crate::ops::hash_join::hash_join(self, right, columns, kind);
        }
        // A one-column key is a `Value`, compared in place; wider keys are rows.
        if columns.left_key.len() == 1 {
            join_on::<Value>(self, right, columns, kind, physical)
        } else {
            join_on::<Row>(self, right, columns, kind, physical)
        }
    }
}

/// A join key taken from a row: `None` when any key column is null (null
/// keys never match).
trait JoinKey:
    differential_dataflow::ExchangeData + differential_dataflow::Hashable + std::hash::Hash + Sized
{
    fn from_row(row: &Row, columns: &[usize]) -> Option<Self>;
    /// The key from a row of key values (a hot key).
    fn from_key(values: &Row) -> Option<Self>;
}

impl JoinKey for Value {
    fn from_row(row: &Row, columns: &[usize]) -> Option<Value> {
        let v = &row[columns[0]];
        (!v.is_null()).then(|| v.clone())
    }
    fn from_key(values: &Row) -> Option<Value> {
        (values.len() == 1).then(|| values[0].clone())
    }
}

impl JoinKey for Row {
    fn from_row(row: &Row, columns: &[usize]) -> Option<Row> {
        let key = project(row, columns);
        (!key.iter().any(Value::is_null)).then_some(key)
    }
    fn from_key(values: &Row) -> Option<Row> {
        Some(values.clone())
    }
}

type Keyed<'s, K> = VecCollection<'s, Time, (K, Row)>;

fn join_on<'s, K: JoinKey>(
    left: Rows<'s>,
    right: Rows<'s>,
    columns: JoinColumns,
    kind: JoinKind,
    physical: &Physical,
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
    let padded = move |mut row: Row| {
        row.extend(std::iter::repeat_n(Value::Null, pad));
        row
    };
    let by_key = |(k, _): &(K, Row)| Dest::Hash(k.hashed().into());
    match physical {
        Physical::Shuffle => {
            let right = count_exchange(right, "join right (shuffle)", by_key);
            let keyed =
                |left: Rows<'s>| count_exchange(matchable(left), "join left (shuffle)", by_key);
            match kind {
                JoinKind::Inner => keyed(left).join_map(right, |_, l, r| concat(l, r)),
                JoinKind::Semi => keyed(left)
                    .semijoin(right.map(|(k, _)| k).distinct())
                    .map(|(_, row)| row),
                JoinKind::Anti => unmatched(keyed(left.clone()), right).concat(null_keyed(left)),
                JoinKind::Left => {
                    let keyed = keyed(left.clone());
                    let matched = keyed
                        .clone()
                        .join_map(right.clone(), |_, l, r| concat(l, r));
                    matched.concat(unmatched(keyed, right).concat(null_keyed(left)).map(padded))
                }
            }
        }
        Physical::Broadcast => {
            let keyed = count_exchange(
                matchable(left.clone()),
                "join left (broadcast: local)",
                |_| Dest::Local,
            );
            let left_arr = arrange_local(keyed.clone(), "JoinLeftLocal");
            let right_all = |right: Keyed<'s, K>| {
                count_exchange(
                    right.inner.broadcast().as_collection(),
                    "join right (broadcast)",
                    |_| Dest::Local,
                )
            };
            let keys_all = |right: Keyed<'s, K>| {
                let keys = right.map(|(k, _)| (k, ())).distinct();
                arrange_local(keys.inner.broadcast().as_collection(), "JoinKeysLocal")
            };
            let sides = Sides {
                left_rows: keyed.map(|(_, row)| row),
                left_arr,
                null_keyed: null_keyed(left),
            };
            match kind {
                JoinKind::Inner | JoinKind::Left => {
                    let right_arr = arrange_local(right_all(right.clone()), "JoinRightLocal");
                    let keys = (kind == JoinKind::Left).then(|| keys_all(right));
                    sides.finish(kind, Some(right_arr), keys, padded)
                }
                JoinKind::Semi | JoinKind::Anti => {
                    sides.finish(kind, None, Some(keys_all(right)), padded)
                }
            }
        }
        Physical::Skew(hot) => {
            let scope = left.inner.scope();
            let salts = hot.salts(scope.peers());
            let hot_set: HashSet<K> = hot.set(K::from_key);
            let hot_right = hot_set.clone();
            let salted = matchable(left.clone()).map(move |(k, row)| {
                let salt = if hot_set.contains(&k) {
                    salt_of(&row, salts)
                } else {
                    0
                };
                ((k, salt), row)
            });
            let salted = count_exchange(salted, "join left (skew)", |((k, s), _)| {
                Dest::Hash(route(k, *s))
            });
            let left_arr = arrange_routed(salted.clone(), "JoinLeftSalted");
            // Right records (and keys) of a hot key go to each of its salts.
            let replicate = move |k: K| -> Vec<(K, u32)> {
                if hot_right.contains(&k) {
                    (0..salts).map(|s| (k.clone(), s)).collect()
                } else {
                    vec![(k, 0)]
                }
            };
            let rep = replicate.clone();
            let right_salted = |right: Keyed<'s, K>| {
                let r =
                    right.flat_map(move |(k, v)| rep(k).into_iter().map(move |ks| (ks, v.clone())));
                let r = count_exchange(r, "join right (skew)", |((k, s), _)| {
                    Dest::Hash(route(k, *s))
                });
                arrange_routed(r, "JoinRightSalted")
            };
            let keys_salted = |right: Keyed<'s, K>| {
                let keys = right
                    .map(|(k, _)| k)
                    .distinct()
                    .flat_map(move |k| replicate(k).into_iter().map(|ks| (ks, ())));
                arrange_routed(keys, "JoinKeysSalted")
            };
            let sides = Sides {
                left_rows: salted.map(|(_, row)| row),
                left_arr,
                null_keyed: null_keyed(left),
            };
            match kind {
                JoinKind::Inner | JoinKind::Left => {
                    let right_arr = right_salted(right.clone());
                    let keys = (kind == JoinKind::Left).then(|| keys_salted(right));
                    sides.finish(kind, Some(right_arr), keys, padded)
                }
                JoinKind::Semi | JoinKind::Anti => {
                    sides.finish(kind, None, Some(keys_salted(right)), padded)
                }
            }
        }
    }
}

type Arr<'s, K, V> = Arranged<'s, TraceAgent<ValSpine<K, V, Time, isize>>>;

/// Arranges `(key, value)` pairs where they are (no exchange).
fn arrange_local<'s, K, V>(c: VecCollection<'s, Time, (K, V)>, name: &str) -> Arr<'s, K, V>
where
    K: differential_dataflow::ExchangeData,
    V: differential_dataflow::ExchangeData,
{
    arrange_core::<_, _, ValBatcher<K, V, Time, isize>, ValSpine<K, V, Time, isize>>(
        c.inner,
        Pipeline,
        name,
        ValBatcher::new,
    )
}

/// Arranges `((key, salt), value)` pairs by partition: `(key, salt)` goes to
/// worker `hash(key) + salt`.
fn arrange_routed<'s, K, V>(
    c: VecCollection<'s, Time, ((K, u32), V)>,
    name: &str,
) -> Arr<'s, (K, u32), V>
where
    K: differential_dataflow::ExchangeData + Hashable,
    V: differential_dataflow::ExchangeData,
{
    let pact = Exchange::new(|(((k, s), _), _, _): &(((K, u32), V), Time, isize)| route(k, *s));
    arrange_core::<_, _, ValBatcher<(K, u32), V, Time, isize>, ValSpine<(K, u32), V, Time, isize>>(
        c.inner,
        pact,
        name,
        ValBatcher::new,
    )
}

/// The left side of a broadcast or salted join, partitioned like the right
/// side's arrangements.
struct Sides<'s, KK: differential_dataflow::ExchangeData> {
    /// The non-null-keyed left rows (anywhere: only concatenated).
    left_rows: Rows<'s>,
    left_arr: Arr<'s, KK, Row>,
    null_keyed: Rows<'s>,
}

impl<'s, KK: differential_dataflow::ExchangeData> Sides<'s, KK> {
    /// Builds the join from the arranged right side (`right`, needed by
    /// inner and left joins) and its distinct keys (`keys`, needed by left,
    /// semi and anti joins; multiplicity one per partition).
    fn finish(
        self,
        kind: JoinKind,
        right: Option<Arr<'s, KK, Row>>,
        keys: Option<Arr<'s, KK, ()>>,
        padded: impl Fn(Row) -> Row + 'static,
    ) -> Rows<'s> {
        let Sides {
            left_rows,
            left_arr,
            null_keyed,
        } = self;
        let matched = |right: Arr<'s, KK, Row>| {
            left_arr
                .clone()
                .join_core(right, |_k, l: &Row, r: &Row| Some(concat(l, r)))
        };
        let semi = |keys: Arr<'s, KK, ()>| {
            left_arr
                .clone()
                .join_core(keys, |_k, l: &Row, _: &()| Some(l.clone()))
        };
        match kind {
            JoinKind::Inner => matched(right.expect("right side")),
            JoinKind::Semi => semi(keys.expect("keys")),
            JoinKind::Anti => left_rows
                .concat(semi(keys.expect("keys")).negate())
                .concat(null_keyed),
            JoinKind::Left => {
                let unmatched = left_rows.concat(semi(keys.expect("keys")).negate());
                matched(right.expect("right side")).concat(unmatched.concat(null_keyed).map(padded))
            }
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
