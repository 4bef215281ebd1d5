//! The logical plan of a SQL query: relational operators over rows whose
//! columns are positions, built by the binder (`bind/`) and lowered to
//! differential operators (`lower.rs`).
//!
//! Invariants: every [`Scalar`] in a node reads only positions below the
//! arity of the node's input (for a join, of left ++ right); a
//! [`Rel::Shared`] names an earlier entry of the plan's shared list (a CTE
//! or view), so the graph has no cycles.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::Arc;

use super::band::{TimeBand, TimeKind};
use super::scalar::Scalar;
use crate::ops::aggregate::AggKind;
use crate::ops::skew::HotKeys;
use crate::value::Value;

/// How two relations are joined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinType {
    /// Matching pairs.
    Inner,
    /// Matching pairs and unmatched left rows.
    Left,
    /// Matching pairs and unmatched right rows.
    Right,
    /// Matching pairs and unmatched rows of both sides.
    Full,
    /// Each left row with at least one match (`EXISTS`, `IN`), as often
    /// as it occurs; output: the left columns.
    Semi,
    /// Each left row with no match (`NOT EXISTS`); a left row with a null
    /// key matches nothing, so it is kept. Output: the left columns.
    Anti,
}

impl JoinType {
    /// Whether the output holds only the left columns.
    pub fn left_only(self) -> bool {
        matches!(self, JoinType::Semi | JoinType::Anti)
    }
}

/// How a join is computed (the same rows either way).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JoinStrategy {
    /// Both sides partitioned by key.
    Shuffle,
    /// The (small) right side sent to every worker; the left side stays
    /// where it is (in a batch run it streams through a hash table).
    Broadcast,
    /// The condition bounds a time of one side by the other's: the
    /// interval join (both sides partitioned by key and time bucket).
    Interval(TimeBand),
    /// The left side's rows of these (hot) keys spread over several
    /// workers, the right side's rows of them copied to each; the rest
    /// shuffled.
    Skew(Arc<HotKeys>),
}

impl JoinStrategy {
    /// The strategy's name, as explain and the run's summary say it.
    pub fn name(&self) -> &'static str {
        match self {
            JoinStrategy::Shuffle => "shuffle",
            JoinStrategy::Broadcast => "broadcast",
            JoinStrategy::Interval(_) => "interval",
            JoinStrategy::Skew(_) => "skew",
        }
    }
}

/// Set operations besides `UNION ALL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetOp {
    /// `EXCEPT [ALL]`.
    Except,
    /// `INTERSECT [ALL]`.
    Intersect,
}

/// One aggregate of an [`Rel::Aggregate`]: a function over an input position.
#[derive(Clone, Debug, PartialEq)]
pub struct AggCall {
    /// The engine's aggregate.
    pub kind: AggKind,
    /// The input position it reads (`None` for `count(*)`).
    pub arg: Option<usize>,
    /// Its value over no rows (a global aggregate of an empty input):
    /// 0 for counts, null for the others.
    pub empty_is_zero: bool,
}

/// How the groups of a [`Rel::Aggregate`] close: key column `key` holds a
/// window bound (a timestamp) and the group's end is it plus `shift`; every
/// row's window time is input `input`'s event time times `scale`, so a
/// group closes once its end is at or before the input's low watermark
/// times `scale`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Close {
    /// The input whose watermark closes the groups.
    pub input: usize,
    /// The key column holding the window bound.
    pub key: usize,
    /// The window's size when the key holds its start, else 0.
    pub shift: i64,
    /// Microseconds per unit of the input's event time (1 for dates and
    /// timestamps, 10^6 for `to_timestamp` of seconds).
    pub scale: i64,
}

/// A sort key of a [`Rel::TopK`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SortKey {
    /// The position sorted by.
    pub column: usize,
    /// `DESC`.
    pub descending: bool,
    /// Nulls before other values (default: after, in both directions).
    pub nulls_first: bool,
}

/// A relational operator.
#[derive(Clone, Debug, PartialEq)]
pub enum Rel {
    /// Columns of an input (positions in the input's own columns).
    Scan {
        /// The input's index in the plan's input list.
        input: usize,
        /// Input column positions, in output order.
        columns: Vec<usize>,
    },
    /// Rows for which the predicate is true.
    Filter(Box<Rel>, Scalar),
    /// One output column per expression.
    Map(Box<Rel>, Vec<Scalar>),
    /// An equi-join (no keys: every pair); output left ++ right columns.
    Join {
        /// The left side.
        left: Box<Rel>,
        /// The right side.
        right: Box<Rel>,
        /// Which rows are kept.
        kind: JoinType,
        /// Key positions in left rows.
        left_key: Vec<usize>,
        /// Key positions in right rows, paired with `left_key`.
        right_key: Vec<usize>,
        /// A condition over left ++ right besides the keys (inner, semi
        /// and anti joins only): a pair matches when the keys are equal
        /// and the condition holds.
        residual: Option<Scalar>,
        /// How it is computed (chosen once the inputs' sizes are known).
        strategy: JoinStrategy,
    },
    /// The temporal join (`right FOR SYSTEM_TIME AS OF left.time`): each
    /// left row with the right row of its key whose time is the latest at
    /// or before the left row's (ties: the greatest row); output left ++
    /// right columns. Rows with a null key or time match nothing.
    AsOf {
        /// The left side (the rows looked up).
        left: Box<Rel>,
        /// The right side (the versions).
        right: Box<Rel>,
        /// Key positions in left rows.
        left_key: Vec<usize>,
        /// Key positions in right rows, paired with `left_key`.
        right_key: Vec<usize>,
        /// The time position in left rows.
        left_time: usize,
        /// The time position in right rows: when a version starts.
        right_time: usize,
        /// What the times are.
        kind: TimeKind,
        /// Keep unmatched left rows, with nulls (`LEFT JOIN`).
        keep_unmatched: bool,
    },
    /// Groups by the first `keys` columns; output: the keys, then one
    /// column per aggregate.
    Aggregate {
        /// The input.
        input: Box<Rel>,
        /// How many leading columns form the group key.
        keys: usize,
        /// The aggregates.
        aggs: Vec<AggCall>,
        /// Keys so frequent that their rows are aggregated in two phases
        /// (on several workers, then combined); chosen with the join
        /// strategies.
        hot: Option<Arc<HotKeys>>,
        /// When the groups are windows that close under an input's
        /// watermark (see `closing.rs`): streams release their state.
        closes: Option<Close>,
    },
    /// Each distinct row once.
    Distinct(Box<Rel>),
    /// `UNION ALL` of relations of one arity.
    Union(Vec<Rel>),
    /// Each row once per event-time window holding its time, with the
    /// window's bounds appended (`window_start`, `window_end`: timestamps).
    /// A row whose time is null gets null bounds, once.
    Window {
        /// The input.
        input: Box<Rel>,
        /// The position of the time column (a date or timestamp).
        time: usize,
        /// Which windows.
        kind: WindowKind,
    },
    /// `EXCEPT`/`INTERSECT`, `all` keeping multiplicities.
    SetOp {
        /// The operation.
        op: SetOp,
        /// Multiset (`ALL`) rather than set semantics.
        all: bool,
        /// The left operand.
        left: Box<Rel>,
        /// The right operand.
        right: Box<Rel>,
    },
    /// `ORDER BY ... LIMIT n OFFSET m`: the rows at sorted positions
    /// `m..m+n`, ties broken by the whole row so that the result is a
    /// function of the input. With a partition, per group of rows equal in
    /// those columns; `numbered` appends each row's 1-based position in
    /// its group (`ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...)`).
    TopK {
        /// The input.
        input: Box<Rel>,
        /// The columns whose values make a group (none: one group).
        partition: Vec<usize>,
        /// The order.
        order: Vec<SortKey>,
        /// Rows kept (per group).
        limit: u64,
        /// Rows skipped first.
        offset: u64,
        /// Whether the row number is appended as a column.
        numbered: bool,
    },
    /// A CTE or view, computed once however often it is read.
    Shared(usize),
}

impl Rel {
    /// The number of columns of its rows.
    pub fn arity(&self, shared: &[Rel]) -> usize {
        match self {
            Rel::Scan { columns, .. } => columns.len(),
            Rel::Filter(input, _) | Rel::Distinct(input) => input.arity(shared),
            Rel::Window { input, .. } => input.arity(shared) + 2,
            Rel::TopK {
                input, numbered, ..
            } => input.arity(shared) + usize::from(*numbered),
            Rel::Map(_, exprs) => exprs.len(),
            Rel::Join { left, kind, .. } if kind.left_only() => left.arity(shared),
            Rel::Join { left, right, .. } | Rel::AsOf { left, right, .. } => {
                left.arity(shared) + right.arity(shared)
            }
            Rel::Aggregate { keys, aggs, .. } => keys + aggs.len(),
            Rel::Union(inputs) => inputs[0].arity(shared),
            Rel::SetOp { left, .. } => left.arity(shared),
            Rel::Shared(i) => shared[*i].arity(shared),
        }
    }
}

impl Rel {
    /// The relations it reads directly (a shared relation's plan is not
    /// among them: it is read through the plan's shared list).
    pub fn children(&self) -> Vec<&Rel> {
        match self {
            Rel::Scan { .. } | Rel::Shared(_) => Vec::new(),
            Rel::Filter(i, _)
            | Rel::Map(i, _)
            | Rel::Distinct(i)
            | Rel::Aggregate { input: i, .. }
            | Rel::Window { input: i, .. }
            | Rel::TopK { input: i, .. } => vec![i],
            Rel::Join { left, right, .. }
            | Rel::AsOf { left, right, .. }
            | Rel::SetOp { left, right, .. } => vec![left, right],
            Rel::Union(inputs) => inputs.iter().collect(),
        }
    }

    /// [`Rel::children`], to change in place.
    pub fn children_mut(&mut self) -> Vec<&mut Rel> {
        match self {
            Rel::Scan { .. } | Rel::Shared(_) => Vec::new(),
            Rel::Filter(i, _)
            | Rel::Map(i, _)
            | Rel::Distinct(i)
            | Rel::Aggregate { input: i, .. }
            | Rel::Window { input: i, .. }
            | Rel::TopK { input: i, .. } => vec![i],
            Rel::Join { left, right, .. }
            | Rel::AsOf { left, right, .. }
            | Rel::SetOp { left, right, .. } => vec![left, right],
            Rel::Union(inputs) => inputs.iter_mut().collect(),
        }
    }

    /// Whether it has at most one row whatever its input: a global
    /// aggregate or `LIMIT 1`, maybe projected or filtered.
    pub fn at_most_one_row(&self) -> bool {
        match self {
            Rel::Map(input, _) | Rel::Filter(input, _) | Rel::Distinct(input) => {
                input.at_most_one_row()
            }
            Rel::Aggregate { keys, .. } => *keys == 0,
            Rel::TopK {
                limit, partition, ..
            } => *limit <= 1 && partition.is_empty(),
            _ => false,
        }
    }
}

fn micros_interval(micros: i64) -> crate::calendar::Interval {
    crate::calendar::Interval { months: 0, micros }
}

/// The windows of a [`Rel::Window`], in microseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WindowKind {
    /// `[start, start + size)` with `start` a multiple of `hop` since
    /// 1970-01-01 (`TUMBLE` when `hop == size`, `HOP` otherwise).
    Hop {
        /// The windows' length (positive).
        size: i64,
        /// The distance between window starts (positive, at most `size`).
        hop: i64,
    },
    /// Per partition (rows equal in those columns), runs of rows whose
    /// times follow each other by at most `gap`: `[first, last + gap)`.
    Session {
        /// The longest silence within a session (positive).
        gap: i64,
        /// The partition's columns.
        partition: Vec<usize>,
    },
}

/// `#0, #2`: positions as `explain` shows them.
fn columns(positions: &[usize]) -> String {
    let shown: Vec<String> = positions.iter().map(|p| format!("#{p}")).collect();
    format!("[{}]", shown.join(", "))
}

/// Gives each numbered top-k (`ROW_NUMBER() OVER ...`) the limit that a
/// filter above it puts on its row number (`WHERE rn <= 3`), so that only
/// those rows are kept per group, not every row numbered. The filter stays:
/// the rows are the same either way.
pub fn limit_row_numbers(rel: &mut Rel, shared: &[Rel]) {
    for child in rel.children_mut() {
        limit_row_numbers(child, shared);
    }
    if let Rel::Filter(input, predicate) = rel {
        for c in predicate.clone().conjuncts() {
            if let Some((column, n)) = row_number_bound(&c) {
                tighten(input, column, n, shared);
            }
        }
    }
}

/// `#c <= n`, `#c < n + 1`, `#c = 1` (either way round): the column and
/// the largest row number that passes.
fn row_number_bound(c: &Scalar) -> Option<(usize, u64)> {
    use super::scalar::Compare as C;
    let Scalar::Compare(op, a, b) = c else {
        return None;
    };
    let (op, column, n) = match (&**a, &**b) {
        (Scalar::Column(x), Scalar::Literal(Value::Int(n))) => (*op, *x, *n),
        (Scalar::Literal(Value::Int(n)), Scalar::Column(x)) => (op.flipped(), *x, *n),
        _ => return None,
    };
    let most = match op {
        C::LtEq => n,
        C::Lt => n.saturating_sub(1),
        C::Eq if n == 1 => 1,
        _ => return None,
    };
    Some((column, most.max(0) as u64))
}

/// Limits the numbered top-k whose row number column `column` is.
fn tighten(rel: &mut Rel, column: usize, n: u64, shared: &[Rel]) {
    match rel {
        Rel::Map(input, exprs) => {
            if let Some(Scalar::Column(j)) = exprs.get(column) {
                tighten(input, *j, n, shared);
            }
        }
        Rel::Filter(input, _) => tighten(input, column, n, shared),
        Rel::TopK {
            input,
            limit,
            offset: 0,
            numbered: true,
            ..
        } if column == input.arity(shared) => *limit = (*limit).min(n),
        _ => {}
    }
}

/// Removes columns nobody reads: returns the relation producing only the
/// columns of `rel` marked in `needed` (possibly a few more), and for each
/// original column its new position (`None` if dropped). Shared relations
/// are pruned separately (they may have several readers), so a `Shared`
/// keeps all its columns.
pub fn prune(rel: Rel, needed: &[bool], shared: &[Rel]) -> (Rel, Vec<Option<usize>>) {
    let arity = rel.arity(shared);
    let identity = || (0..arity).map(Some).collect::<Vec<_>>();
    match rel {
        Rel::Scan { input, columns } => {
            let mut map = vec![None; columns.len()];
            let mut kept = Vec::new();
            for (i, c) in columns.into_iter().enumerate() {
                if needed[i] {
                    map[i] = Some(kept.len());
                    kept.push(c);
                }
            }
            (
                Rel::Scan {
                    input,
                    columns: kept,
                },
                map,
            )
        }
        Rel::Filter(input, predicate) => {
            let mut need = needed.to_vec();
            mark(&predicate, &mut need);
            let (input, map) = prune(*input, &need, shared);
            let predicate = predicate.remap(&|i| map[i].expect("kept"));
            (Rel::Filter(Box::new(input), predicate), map)
        }
        Rel::Map(input, exprs) => {
            let in_arity = input.arity(shared);
            let mut need = vec![false; in_arity];
            let mut map = vec![None; exprs.len()];
            let mut kept = Vec::new();
            for (i, e) in exprs.into_iter().enumerate() {
                if needed[i] {
                    mark(&e, &mut need);
                    map[i] = Some(kept.len());
                    kept.push(e);
                }
            }
            let (input, inner) = prune(*input, &need, shared);
            let kept: Vec<Scalar> = kept
                .iter()
                .map(|e| e.remap(&|i| inner[i].expect("kept")))
                .collect();
            // A projection of every column in order is no operator at all.
            let identity = kept.len() == input.arity(shared)
                && kept
                    .iter()
                    .enumerate()
                    .all(|(i, e)| *e == Scalar::Column(i));
            if identity {
                return (input, map);
            }
            (Rel::Map(Box::new(input), kept), map)
        }
        Rel::Join {
            left,
            right,
            kind,
            left_key,
            right_key,
            residual,
            strategy,
        } => {
            let nl = left.arity(shared);
            let mut need = needed.to_vec();
            if kind.left_only() {
                need.resize(nl + right.arity(shared), false);
            }
            if let Some(r) = &residual {
                mark(r, &mut need);
            }
            let mut need_left = need[..nl].to_vec();
            let mut need_right = need[nl..].to_vec();
            left_key.iter().for_each(|&k| need_left[k] = true);
            right_key.iter().for_each(|&k| need_right[k] = true);
            let (left, lmap) = prune(*left, &need_left, shared);
            let (right, rmap) = prune(*right, &need_right, shared);
            let map = side_by_side(&lmap, &rmap);
            let residual = residual.map(|r| r.remap(&|i| map[i].expect("kept")));
            let map = if kind.left_only() { lmap.clone() } else { map };
            (
                Rel::Join {
                    left: Box::new(left),
                    right: Box::new(right),
                    kind,
                    left_key: left_key.iter().map(|&k| lmap[k].expect("kept")).collect(),
                    right_key: right_key.iter().map(|&k| rmap[k].expect("kept")).collect(),
                    residual,
                    strategy,
                },
                map,
            )
        }
        Rel::AsOf {
            left,
            right,
            left_key,
            right_key,
            left_time,
            right_time,
            kind,
            keep_unmatched,
        } => {
            let nl = left.arity(shared);
            let mut need_left = needed[..nl].to_vec();
            left_key.iter().for_each(|&k| need_left[k] = true);
            need_left[left_time] = true;
            let (left, lmap) = prune(*left, &need_left, shared);
            // Versions keep every column: two versions of a key with one
            // time that differ only in columns nobody reads are still two,
            // of which the greatest is picked; pruned, they would be one
            // row of multiplicity 2, and the left row would come out twice.
            let (right, rmap) = prune_all(*right, shared);
            let map = side_by_side(&lmap, &rmap);
            let at = |map: &[Option<usize>], k: usize| map[k].expect("kept");
            (
                Rel::AsOf {
                    left: Box::new(left),
                    right: Box::new(right),
                    left_key: left_key.iter().map(|&k| at(&lmap, k)).collect(),
                    right_key: right_key.iter().map(|&k| at(&rmap, k)).collect(),
                    left_time: at(&lmap, left_time),
                    right_time: at(&rmap, right_time),
                    kind,
                    keep_unmatched,
                },
                map,
            )
        }
        Rel::Aggregate {
            input,
            keys,
            aggs,
            hot,
            closes,
        } => {
            let mut need = vec![false; input.arity(shared)];
            need[..keys].iter_mut().for_each(|n| *n = true);
            aggs.iter()
                .filter_map(|a| a.arg)
                .for_each(|a| need[a] = true);
            let (input, map) = prune(*input, &need, shared);
            let aggs = aggs
                .into_iter()
                .map(|a| AggCall {
                    arg: a.arg.map(|p| map[p].expect("kept")),
                    ..a
                })
                .collect();
            // The keys stay the leading columns: pruning keeps order.
            (
                Rel::Aggregate {
                    input: Box::new(input),
                    keys,
                    aggs,
                    hot,
                    closes,
                },
                identity(),
            )
        }
        Rel::TopK {
            input,
            partition,
            order,
            limit,
            offset,
            numbered,
        } => {
            // Ties are broken by the whole row, but rows that differ only in
            // columns nobody reads are alike to every reader, whichever of
            // them is kept: only the partition and order columns are added.
            let n = input.arity(shared);
            let mut need = needed[..n].to_vec();
            partition.iter().for_each(|&c| need[c] = true);
            order.iter().for_each(|k| need[k.column] = true);
            let (input, mut map) = prune(*input, &need, shared);
            let kept = |c: usize| map[c].expect("kept");
            let partition = partition.iter().map(|&c| kept(c)).collect();
            let order = order
                .iter()
                .map(|k| SortKey {
                    column: kept(k.column),
                    ..*k
                })
                .collect();
            if numbered {
                map.push(Some(input.arity(shared)));
            }
            (
                Rel::TopK {
                    input: Box::new(input),
                    partition,
                    order,
                    limit,
                    offset,
                    numbered,
                },
                map,
            )
        }
        Rel::Window { input, time, kind } => {
            let n = input.arity(shared);
            let mut need = needed[..n].to_vec();
            need[time] = true;
            if let WindowKind::Session { partition, .. } = &kind {
                partition.iter().for_each(|&c| need[c] = true);
            }
            let (input, mut map) = prune(*input, &need, shared);
            let m = input.arity(shared);
            let at = |c: usize| map[c].expect("kept");
            let time = at(time);
            let kind = match kind {
                WindowKind::Session { gap, partition } => WindowKind::Session {
                    gap,
                    partition: partition.into_iter().map(at).collect(),
                },
                hop => hop,
            };
            // The bounds stay: they are the point of the node.
            map.extend([Some(m), Some(m + 1)]);
            let input = Box::new(input);
            (Rel::Window { input, time, kind }, map)
        }
        Rel::Distinct(input) => {
            let (input, _) = prune_all(*input, shared);
            (Rel::Distinct(Box::new(input)), identity())
        }
        Rel::Union(inputs) => (
            Rel::Union(inputs.into_iter().map(|i| prune_all(i, shared).0).collect()),
            identity(),
        ),
        Rel::SetOp {
            op,
            all,
            left,
            right,
        } => (
            Rel::SetOp {
                op,
                all,
                left: Box::new(prune_all(*left, shared).0),
                right: Box::new(prune_all(*right, shared).0),
            },
            identity(),
        ),
        Rel::Shared(i) => (Rel::Shared(i), identity()),
    }
}

/// The position map of left ++ right columns, from each side's.
fn side_by_side(left: &[Option<usize>], right: &[Option<usize>]) -> Vec<Option<usize>> {
    let nl = left.iter().flatten().count();
    left.iter()
        .copied()
        .chain(right.iter().map(|m| m.map(|p| p + nl)))
        .collect()
}

/// Prunes below a node that needs all of its input's columns.
pub fn prune_all(rel: Rel, shared: &[Rel]) -> (Rel, Vec<Option<usize>>) {
    let n = rel.arity(shared);
    prune(rel, &vec![true; n], shared)
}

fn mark(e: &Scalar, need: &mut [bool]) {
    let mut cols = Vec::new();
    e.columns(&mut cols);
    cols.into_iter().for_each(|c| need[c] = true);
}

/// The inputs a relation's scans read, through the views and CTEs it reads.
pub fn inputs_of(rel: &Rel, shared: &[Rel]) -> BTreeSet<usize> {
    fn walk(rel: &Rel, shared: &[Rel], out: &mut BTreeSet<usize>) {
        match rel {
            Rel::Scan { input, .. } => {
                out.insert(*input);
            }
            Rel::Shared(i) => walk(&shared[*i], shared, out),
            _ => rel
                .children()
                .into_iter()
                .for_each(|c| walk(c, shared, out)),
        }
    }
    let mut out = BTreeSet::new();
    walk(rel, shared, &mut out);
    out
}

/// Calls `f` on every node of `rel`, innermost first.
pub fn for_each_node(rel: &mut Rel, f: &mut dyn FnMut(&mut Rel)) {
    for child in rel.children_mut() {
        for_each_node(child, f);
    }
    f(rel);
}

/// The input column that column `col` of `rel` is, unchanged, with about
/// the input's frequencies of values, if there is one: `(input, column)`.
/// Followed through filters, projections, shared relations and the left
/// (large) side of joins, where each left row keeps its value; not through
/// a join's right side (a value's count there says little of its count in
/// the output) nor anything that computes or merges rows.
pub fn origin(rel: &Rel, col: usize, shared: &[Rel]) -> Option<(usize, usize)> {
    match rel {
        Rel::Scan { input, columns } => Some((*input, columns[col])),
        Rel::Filter(input, _) => origin(input, col, shared),
        Rel::Map(input, exprs) => match exprs[col] {
            Scalar::Column(c) => origin(input, c, shared),
            _ => None,
        },
        Rel::Join { left, .. } | Rel::AsOf { left, .. } if col < left.arity(shared) => {
            origin(left, col, shared)
        }
        Rel::Shared(i) => origin(&shared[*i], col, shared),
        _ => None,
    }
}

/// The input columns each input's scans read, over a whole plan.
pub fn scanned(rels: &[&Rel], inputs: usize) -> Vec<BTreeSet<usize>> {
    let mut out = vec![BTreeSet::new(); inputs];
    fn walk(rel: &Rel, out: &mut [BTreeSet<usize>]) {
        if let Rel::Scan { input, columns } = rel {
            out[*input].extend(columns.iter().copied());
        }
        rel.children().into_iter().for_each(|c| walk(c, out));
    }
    rels.iter().for_each(|r| walk(r, &mut out));
    out
}

/// An indented text rendering of a relation, one operator per line,
/// for `kappa sql explain`; `name` gives a column's name for a position of
/// a node's input, `input` an input's name.
pub fn explain(rel: &Rel, depth: usize, ctx: &ExplainContext<'_>, out: &mut String) {
    let pad = "  ".repeat(depth);
    let line = match rel {
        Rel::Scan { input, columns } => {
            let names: Vec<&str> = columns
                .iter()
                .map(|&c| ctx.input_columns[*input][c].as_str())
                .collect();
            format!("scan {} [{}]", ctx.inputs[*input], names.join(", "))
        }
        Rel::Filter(_, p) => format!("filter {}", show(p)),
        Rel::Map(_, exprs) => format!(
            "project {}",
            exprs.iter().map(show).collect::<Vec<_>>().join(", ")
        ),
        Rel::Join {
            kind,
            left_key,
            right_key,
            residual,
            strategy,
            ..
        } => {
            let keys = key_pairs(left_key, right_key);
            let banded = matches!(strategy, JoinStrategy::Interval(_));
            let strategy = match strategy {
                JoinStrategy::Interval(b) => format!(
                    "interval: right.#{} - left.#{} in {}{}",
                    b.right_time,
                    b.left_time,
                    b.range(),
                    match b.release {
                        Some(r) => format!(
                            "; streamed, a row is released once the other side's watermark \
                             ({} for left rows, {} for right rows) has passed every time it could match",
                            ctx.inputs[r.right.0], ctx.inputs[r.left.0]
                        ),
                        None => String::new(),
                    }
                ),
                JoinStrategy::Skew(hot) => format!("skew: {} hot keys", hot.keys.len()),
                other => other.name().to_string(),
            };
            let mut s = match (keys.is_empty(), banded) {
                (true, false) => {
                    format!("{kind:?} join, no key: every pair, on one worker").to_lowercase()
                }
                (true, true) => {
                    format!("{kind:?} join, no key (strategy {strategy})").to_lowercase()
                }
                (false, _) => format!(
                    "{} join on {} (strategy {strategy})",
                    format!("{kind:?}").to_lowercase(),
                    keys.join(" and ")
                ),
            };
            if let Some(r) = residual {
                let _ = write!(s, ", then {}", show(r));
            }
            s
        }
        Rel::AsOf {
            left_key,
            right_key,
            left_time,
            right_time,
            keep_unmatched,
            ..
        } => {
            let keys = key_pairs(left_key, right_key);
            let on = match keys.is_empty() {
                true => String::new(),
                false => format!(" on {}", keys.join(" and ")),
            };
            format!(
                "{}as-of join{on}: each left row with the right row whose #{right_time} is the \
                 latest at or before left.#{left_time}",
                if *keep_unmatched { "left " } else { "" },
            )
        }
        Rel::Aggregate {
            keys,
            aggs,
            hot,
            closes,
            ..
        } => {
            let aggs: Vec<String> = aggs
                .iter()
                .map(|a| match a.arg {
                    Some(p) => format!("{}(#{p})", agg_name(a.kind)),
                    None => "count(*)".into(),
                })
                .collect();
            let group = (0..*keys).map(|k| format!("#{k}")).collect::<Vec<_>>();
            let hot = match hot {
                Some(h) => format!(" ({} hot keys in two phases)", h.keys.len()),
                None => String::new(),
            };
            let closes = match closes {
                Some(c) => format!(
                    "; streamed, a window's state is released once the watermark of {} passes its \
                     end (#{}{})",
                    ctx.inputs[c.input],
                    c.key,
                    match c.shift {
                        0 => String::new(),
                        size => format!(" + {}", micros_interval(size)),
                    }
                ),
                None => String::new(),
            };
            format!(
                "group by [{}] computing {}{hot}{closes}",
                group.join(", "),
                aggs.join(", ")
            )
        }
        Rel::Distinct(_) => "distinct".into(),
        Rel::Window { time, kind, .. } => {
            let window = match kind {
                WindowKind::Hop { size, hop } if size == hop => {
                    format!("tumble(#{time}, size {})", micros_interval(*size))
                }
                WindowKind::Hop { size, hop } => format!(
                    "hop(#{time}, size {}, hop {})",
                    micros_interval(*size),
                    micros_interval(*hop)
                ),
                WindowKind::Session { gap, partition } => format!(
                    "session(#{time}, gap {}) per {}",
                    micros_interval(*gap),
                    columns(partition)
                ),
            };
            format!("window {window} appending window_start, window_end")
        }
        Rel::Union(inputs) => format!("union all of {}", inputs.len()),
        Rel::SetOp { op, all, .. } => {
            format!("{op:?}{}", if *all { " all" } else { "" }).to_lowercase()
        }
        Rel::TopK {
            partition,
            order,
            limit,
            offset,
            numbered,
            ..
        } => {
            let keys: Vec<String> = order
                .iter()
                .map(|k| format!("#{}{}", k.column, if k.descending { " desc" } else { "" }))
                .collect();
            let groups = match partition.is_empty() {
                true => String::new(),
                false => format!(" per group of {}", columns(partition)),
            };
            let limit = match *limit {
                u64::MAX => "all".to_string(),
                n => n.to_string(),
            };
            format!(
                "top {limit} (offset {offset}){groups} by {}, ties by the whole row{}",
                keys.join(", "),
                if *numbered { ", numbered" } else { "" }
            )
        }
        Rel::Shared(i) => format!("read {}", ctx.shared_names[*i]),
    };
    let _ = writeln!(out, "{pad}{line}");
    for child in rel.children() {
        explain(child, depth + 1, ctx, out);
    }
}

/// `left.#l = right.#r` per key column pair.
fn key_pairs(left: &[usize], right: &[usize]) -> Vec<String> {
    left.iter()
        .zip(right)
        .map(|(l, r)| format!("left.#{l} = right.#{r}"))
        .collect()
}

fn agg_name(kind: AggKind) -> &'static str {
    match kind {
        AggKind::Count => "count",
        AggKind::Sum => "sum",
        AggKind::Avg => "avg",
        AggKind::Min => "min",
        AggKind::Max => "max",
        AggKind::CountDistinct => "count_distinct",
    }
}

/// What [`explain`] needs to name things.
pub struct ExplainContext<'a> {
    /// Input names by index.
    pub inputs: &'a [String],
    /// Each input's column names.
    pub input_columns: &'a [Vec<String>],
    /// Shared relations' names.
    pub shared_names: &'a [String],
}

fn show(e: &Scalar) -> String {
    use super::scalar::{Arith, Compare, Func};
    let b = |a: &Scalar, op: &str, c: &Scalar| format!("({} {op} {})", show(a), show(c));
    match e {
        Scalar::Column(i) => format!("#{i}"),
        Scalar::Literal(v) => match v {
            crate::value::Value::Null => "null".into(),
            crate::value::Value::Str(s) => format!("'{}'", s.replace('\'', "''")),
            crate::value::Value::Date(_) => format!("date '{v}'"),
            crate::value::Value::Timestamp(_) => format!("timestamp '{v}'"),
            v => v.to_string(),
        },
        Scalar::Neg(x) => format!("-{}", show(x)),
        Scalar::Not(x) => format!("not {}", show(x)),
        Scalar::Arith(op, a, c) => b(
            a,
            match op {
                Arith::Add => "+",
                Arith::Sub => "-",
                Arith::Mul => "*",
                Arith::Div => "/",
                Arith::Mod => "%",
            },
            c,
        ),
        Scalar::Compare(op, a, c) => b(
            a,
            match op {
                Compare::Eq => "=",
                Compare::NotEq => "<>",
                Compare::Lt => "<",
                Compare::LtEq => "<=",
                Compare::Gt => ">",
                Compare::GtEq => ">=",
            },
            c,
        ),
        Scalar::And(a, c) => b(a, "and", c),
        Scalar::Or(a, c) => b(a, "or", c),
        Scalar::Concat(a, c) => b(a, "||", c),
        Scalar::IsNull(x, true) => format!("{} is null", show(x)),
        Scalar::IsNull(x, false) => format!("{} is not null", show(x)),
        Scalar::Case(branches, otherwise) => {
            let mut s = "case".to_string();
            for (w, t) in branches {
                let _ = write!(s, " when {} then {}", show(w), show(t));
            }
            format!("{s} else {} end", show(otherwise))
        }
        Scalar::Cast(x, to) => format!("cast({} as {to:?})", show(x)).to_lowercase(),
        Scalar::Shift(x, by) => format!("({} + interval '{by}')", show(x)),
        Scalar::Call(Func::Extract(field), args) => {
            format!("extract({field:?} from {})", show(&args[0])).to_lowercase()
        }
        Scalar::Call(Func::DateTrunc(field), args) => {
            format!("date_trunc('{field:?}', {})", show(&args[0])).to_lowercase()
        }
        Scalar::Call(f, args) => format!(
            "{}({})",
            match f {
                Func::ToTimestamp => "to_timestamp".to_string(),
                Func::EpochMs => "epoch_ms".to_string(),
                Func::MakeDate => "make_date".to_string(),
                Func::ConcatFn => "concat".to_string(),
                Func::NullIf => "nullif".to_string(),
                f => format!("{f:?}").to_lowercase(),
            },
            args.iter().map(show).collect::<Vec<_>>().join(", ")
        ),
        Scalar::Like {
            expr,
            pattern,
            negated,
            insensitive,
            ..
        } => format!(
            "{} {}{} {}",
            show(expr),
            if *negated { "not " } else { "" },
            if *insensitive { "ilike" } else { "like" },
            show(pattern)
        ),
        Scalar::InList(x, list, negated) => format!(
            "{} {}in ({})",
            show(x),
            if *negated { "not " } else { "" },
            list.iter().map(show).collect::<Vec<_>>().join(", ")
        ),
    }
}
