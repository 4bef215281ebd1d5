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
use crate::ops::skew::{HotKeys, route, salt_of};
use crate::row_map::hash_values;
use crate::stats::{Dest, count_exchange};
use crate::value::{Row, Value};
use serde::{Deserialize, Serialize};

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
    /// The indices of the key columns in left rows.
    pub left_key: Vec<usize>,
    /// The indices of the key columns in right rows, paired with `left_key`.
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

/// A joined side's row, as its arrangement holds it: ordered by its hash
/// first. Sorting and merging `(key, row)` pairs compares the rows of
/// equal keys, and comparing two rows loads both from the heap (a cache
/// miss each, with millions of rows); comparing hashes mostly decides
/// without. Equal rows have equal hashes, so equality (and with it
/// consolidation, and every output) is as for the rows themselves. That
/// holds across the processes of a cluster run too, which exchange
/// `Hashed` rows with their hashes: [`hash_values`] is seeded fixed, not
/// per process.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
struct Hashed {
    hash: u64,
    row: Row,
}

impl Hashed {
    fn new(row: Row) -> Hashed {
        Hashed {
            hash: hash_values(&row),
            row,
        }
    }
}

type Keyed<'s, K> = VecCollection<'s, Time, (K, Hashed)>;

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
    let sides = JoinInput {
        left,
        pad: right_rest.len(),
        right: right.flat_map(move |row| {
            K::from_row(&row, &right_key).map(|key| (key, Hashed::new(project(&row, &right_rest))))
        }),
        left_key,
    };
    match physical {
        Physical::Shuffle => shuffle_join(sides, kind),
        Physical::Broadcast => broadcast_join(sides, kind),
        Physical::Skew(hot) => skew_join(sides, kind, hot),
    }
}

/// A join's two sides as every strategy starts from them: the left rows
/// whole, the right rows keyed (a null key matches nothing, so those rows
/// are gone) and cut to the columns they add.
struct JoinInput<'s, K: JoinKey> {
    left: Rows<'s>,
    left_key: Vec<usize>,
    right: Keyed<'s, K>,
    /// How many columns a right row adds (nulls, for an unmatched left row).
    pad: usize,
}

impl<'s, K: JoinKey> JoinInput<'s, K> {
    /// The left rows whose key has no null, keyed.
    fn matchable(&self) -> Keyed<'s, K> {
        let key = self.left_key.clone();
        self.left
            .clone()
            .flat_map(move |row| K::from_row(&row, &key).map(|k| (k, Hashed::new(row))))
    }

    /// The left rows with a null in their key. Only left and anti joins
    /// keep them, and only they build this branch: a second consumer of the
    /// left side would clone every left row.
    fn null_keyed(&self) -> Rows<'s> {
        let key = self.left_key.clone();
        self.left
            .clone()
            .filter(move |row| key.iter().any(|&c| row[c].is_null()))
    }

    /// A left row with nulls for the right columns.
    fn padding(&self) -> impl Fn(Row) -> Row + Clone + 'static {
        let pad = self.pad;
        move |mut row: Row| {
            row.extend(std::iter::repeat_n(Value::Null, pad));
            row
        }
    }
}

fn by_key<K: JoinKey>((k, _): &(K, Hashed)) -> Dest {
    Dest::Hash(k.hashed().into())
}

/// Both sides exchanged by key and joined where they meet.
fn shuffle_join<'s, K: JoinKey>(sides: JoinInput<'s, K>, kind: JoinKind) -> Rows<'s> {
    let right = count_exchange(sides.right.clone(), "join right (shuffle)", by_key::<K>);
    let keyed = count_exchange(sides.matchable(), "join left (shuffle)", by_key::<K>);
    match kind {
        JoinKind::Inner => keyed.join_map(right, |_, l, r| concat(&l.row, &r.row)),
        JoinKind::Semi => keyed
            .semijoin(right.map(|(k, _)| k).distinct())
            .map(|(_, l)| l.row),
        JoinKind::Anti => unmatched(keyed, right).concat(sides.null_keyed()),
        JoinKind::Left => {
            let matched = keyed
                .clone()
                .join_map(right.clone(), |_, l, r| concat(&l.row, &r.row));
            let unmatched = unmatched(keyed, right).concat(sides.null_keyed());
            matched.concat(unmatched.map(sides.padding()))
        }
    }
}

/// The left side stays where it is; every worker gets all of the right
/// side (and its keys) and joins its own left rows against it.
fn broadcast_join<'s, K: JoinKey>(sides: JoinInput<'s, K>, kind: JoinKind) -> Rows<'s> {
    let keyed = count_exchange(sides.matchable(), "join left (broadcast: local)", |_| {
        Dest::Local
    });
    let right_all = |right: Keyed<'s, K>| {
        let all = right.inner.broadcast().as_collection();
        let all = count_exchange(all, "join right (broadcast)", |_| Dest::Local);
        arrange_local(all, "JoinRightLocal")
    };
    let keys_all = |right: Keyed<'s, K>| {
        let keys = right.map(|(k, _)| (k, ())).distinct();
        arrange_local(keys.inner.broadcast().as_collection(), "JoinKeysLocal")
    };
    let (right, padding) = (sides.right.clone(), sides.padding());
    let left = Sides::new(&sides, kind, keyed, arrange_local);
    match kind {
        JoinKind::Inner | JoinKind::Left => {
            let keys = (kind == JoinKind::Left).then(|| keys_all(right.clone()));
            left.finish(kind, Some(right_all(right)), keys, padding)
        }
        JoinKind::Semi | JoinKind::Anti => left.finish(kind, None, Some(keys_all(right)), padding),
    }
}

/// A shuffle join in which each hot key's left rows are spread over
/// `salts` workers (by a salt taken from the row) and its right rows (and
/// key) are copied to each of them.
fn skew_join<'s, K: JoinKey>(sides: JoinInput<'s, K>, kind: JoinKind, hot: &HotKeys) -> Rows<'s> {
    let salts = hot.salts(sides.left.inner.scope().peers());
    let hot_left: HashSet<K> = hot.set(K::from_key);
    let hot_right = hot_left.clone();
    let salted = sides.matchable().map(move |(k, row)| {
        let salt = if hot_left.contains(&k) {
            salt_of(&row.row, salts)
        } else {
            0
        };
        ((k, salt), row)
    });
    let salted = count_exchange(salted, "join left (skew)", |((k, s), _)| {
        Dest::Hash(route(k, *s))
    });
    let replicate = move |k: K| -> Vec<(K, u32)> {
        if hot_right.contains(&k) {
            (0..salts).map(|s| (k.clone(), s)).collect()
        } else {
            vec![(k, 0)]
        }
    };
    let rep = replicate.clone();
    let right_salted = |right: Keyed<'s, K>| {
        let r = right.flat_map(move |(k, v)| rep(k).into_iter().map(move |ks| (ks, v.clone())));
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
    let (right, padding) = (sides.right.clone(), sides.padding());
    let left = Sides::new(&sides, kind, salted, arrange_routed);
    match kind {
        JoinKind::Inner | JoinKind::Left => {
            let keys = (kind == JoinKind::Left).then(|| keys_salted(right.clone()));
            left.finish(kind, Some(right_salted(right)), keys, padding)
        }
        JoinKind::Semi | JoinKind::Anti => {
            left.finish(kind, None, Some(keys_salted(right)), padding)
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
    left_arr: Arr<'s, KK, Hashed>,
    /// For left and anti joins (the others never build them: each extra
    /// consumer of the left side clones every left row), the left rows
    /// with a key (anywhere: only concatenated) and those without.
    unmatchable: Option<(Rows<'s>, Rows<'s>)>,
}

impl<'s, KK: differential_dataflow::ExchangeData> Sides<'s, KK> {
    /// The left side of a `kind` join, keyed by `KK` and arranged by
    /// `arrange` (where the right side's arrangements are).
    fn new<K: JoinKey>(
        sides: &JoinInput<'s, K>,
        kind: JoinKind,
        keyed: Keyed<'s, KK>,
        arrange: fn(Keyed<'s, KK>, &str) -> Arr<'s, KK, Hashed>,
    ) -> Self {
        let unmatchable = matches!(kind, JoinKind::Left | JoinKind::Anti)
            .then(|| (keyed.clone().map(|(_, l)| l.row), sides.null_keyed()));
        Sides {
            left_arr: arrange(keyed, "JoinLeft"),
            unmatchable,
        }
    }

    /// Builds the join from the arranged right side (`right`, needed by
    /// inner and left joins) and its distinct keys (`keys`, needed by left,
    /// semi and anti joins; multiplicity one per partition).
    fn finish(
        self,
        kind: JoinKind,
        right: Option<Arr<'s, KK, Hashed>>,
        keys: Option<Arr<'s, KK, ()>>,
        padded: impl Fn(Row) -> Row + 'static,
    ) -> Rows<'s> {
        let Sides {
            left_arr,
            unmatchable,
        } = self;
        let matched = |right: Arr<'s, KK, Hashed>| {
            left_arr
                .clone()
                .join_core(right, |_k, l: &Hashed, r: &Hashed| {
                    Some(concat(&l.row, &r.row))
                })
        };
        let semi = |keys: Arr<'s, KK, ()>| {
            left_arr
                .clone()
                .join_core(keys, |_k, l: &Hashed, _: &()| Some(l.row.clone()))
        };
        match kind {
            JoinKind::Inner => matched(right.expect("right side")),
            JoinKind::Semi => semi(keys.expect("keys")),
            JoinKind::Anti => {
                let (left_rows, null_keyed) = unmatchable.expect("an anti join's left rows");
                left_rows
                    .concat(semi(keys.expect("keys")).negate())
                    .concat(null_keyed)
            }
            JoinKind::Left => {
                let (left_rows, null_keyed) = unmatchable.expect("a left join's left rows");
                let unmatched = left_rows.concat(semi(keys.expect("keys")).negate());
                matched(right.expect("right side")).concat(unmatched.concat(null_keyed).map(padded))
            }
        }
    }
}

/// Left rows (with non-null keys) that have no match on the right.
fn unmatched<'s, K: JoinKey>(left: Keyed<'s, K>, right: Keyed<'s, K>) -> Rows<'s> {
    left.antijoin(right.map(|(k, _)| k).distinct())
        .map(|(_, l)| l.row)
}

fn concat(left: &Row, right: &Row) -> Row {
    let mut row = Vec::with_capacity(left.len() + right.len());
    row.extend_from_slice(left);
    row.extend_from_slice(right);
    row
}
