//! Lowering a bound SQL plan to differential operators: the [`Dataflow`]
//! of a SQL job. Joins and groupings are the engine's own operators
//! ([`RelationalJoin`], [`GroupAggregate`]), so a SQL job computes exactly
//! what the equivalent built-in job does, with the same strategies.
//!
//! A grouping by windows that close under a watermark (`closing.rs`) is,
//! in streams, [`close_groups`]: the same rows, with closed windows'
//! state released.
//!
//! Every operator here is a function of its input collections: `TopK`
//! breaks ties by the whole row, and the default row of a global
//! aggregate over no rows is created on worker 0 only.

use std::cmp::Ordering;

use differential_dataflow::AsCollection;
use timely::dataflow::operators::vec::ToStream;

use super::band::{TimeBand, TimeKind};
use super::rel::{AggCall, Close, JoinStrategy, JoinType, Rel, SetOp, SortKey, WindowKind};
use super::scalar::Scalar;
use crate::job::{BuildContext, BuildError, Dataflow, Inputs, Outputs, Rows, Time, Updates};
use crate::ops::aggregate::{AggKind, Aggregates, GroupAggregate};
use crate::ops::closing_interval_join::closing_interval_join;
use crate::ops::closing_window::{Closes, close_groups};
use crate::ops::interval_join::{IntervalJoin, IntervalJoinSpec, integer_time};
use crate::ops::join::{JoinColumns, JoinKind, Physical, RelationalJoin};
use crate::ops::temporal_join::{AsOfJoin, AsOfSpec};
use crate::value::{Row, Value};

/// A SQL job's dataflow: its outputs' plans over its inputs.
pub struct SqlFlow {
    /// Input names, by the index `Rel::Scan` uses.
    pub inputs: Vec<String>,
    /// Per input: for each input column, its position in the projected rows.
    pub positions: Vec<Vec<Option<usize>>>,
    /// Views and CTEs, by index.
    pub shared: Vec<Rel>,
    /// The outputs: name and plan.
    pub outputs: Vec<(String, Rel)>,
}

impl Dataflow for SqlFlow {
    fn build<'s>(
        &self,
        mut inputs: Inputs<'s>,
        context: &BuildContext<'s>,
    ) -> Result<Outputs<'s>, BuildError> {
        let mut scans = Vec::new();
        for name in &self.inputs {
            scans.push(inputs.take(name)?);
        }
        let mut lower = Lower {
            flow: self,
            scans,
            memo: vec![None; self.shared.len()],
            context: context.clone(),
        };
        let mut outputs = Outputs::new();
        for (name, rel) in &self.outputs {
            let rows = lower.rel(rel);
            outputs = outputs.with(name, rows);
        }
        Ok(outputs)
    }
}

struct Lower<'f, 's> {
    flow: &'f SqlFlow,
    scans: Vec<Rows<'s>>,
    memo: Vec<Option<Rows<'s>>>,
    context: BuildContext<'s>,
}

impl<'s> Lower<'_, 's> {
    fn arity(&self, rel: &Rel) -> usize {
        rel.arity(&self.flow.shared)
    }

    fn rel(&mut self, rel: &Rel) -> Rows<'s> {
        match rel {
            Rel::Scan { input, columns } => {
                let width = self.flow.positions[*input].iter().flatten().count();
                let at: Vec<usize> = columns
                    .iter()
                    .map(|&c| self.flow.positions[*input][c].expect("projected"))
                    .collect();
                let rows = self.scans[*input].clone();
                if at.len() == width && at.iter().enumerate().all(|(i, &p)| i == p) {
                    rows
                } else {
                    rows.map(move |row| at.iter().map(|&p| row[p].clone()).collect())
                }
            }
            Rel::Filter(input, predicate) => {
                let p = predicate.clone();
                self.rel(input).filter(move |row| p.holds(row))
            }
            Rel::Map(input, exprs) => {
                let exprs = exprs.clone();
                self.rel(input)
                    .map(move |row| exprs.iter().map(|e| e.eval(&row)).collect::<Row>())
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
                let (nl, nr) = (self.arity(left), self.arity(right));
                let (l, r) = (self.rel(left), self.rel(right));
                let physical = match strategy {
                    JoinStrategy::Shuffle => Physical::Shuffle,
                    JoinStrategy::Broadcast => Physical::Broadcast,
                    JoinStrategy::Skew(hot) => Physical::Skew(hot.clone()),
                    JoinStrategy::Interval(band) => {
                        let p = residual.clone().expect("a band is found in the condition");
                        let keys = (left_key.as_slice(), right_key.as_slice());
                        return self
                            .banded((l, r), keys, (nl, nr), *band)
                            .filter(move |row| p.holds(row));
                    }
                };
                if kind.left_only() {
                    let keys = (left_key.as_slice(), right_key.as_slice());
                    return self.semi((l, r), *kind, keys, residual.as_ref(), (nl, nr), &physical);
                }
                let joined = self.join(l, r, *kind, (left_key, right_key), (nl, nr), &physical);
                match residual {
                    Some(p) => {
                        let p = p.clone();
                        joined.filter(move |row| p.holds(row))
                    }
                    None => joined,
                }
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
                let spec = AsOfSpec {
                    event_key: left_key.clone(),
                    event_time: *left_time,
                    table_key: right_key.clone(),
                    valid_from: *right_time,
                    table_rest: (0..self.arity(right)).collect(),
                    left: *keep_unmatched,
                    time: kind.reader(),
                };
                self.rel(left).as_of_join(self.rel(right), spec)
            }
            Rel::Aggregate {
                input,
                keys,
                aggs,
                closes: Some(close),
                ..
            } if self.context.updates == Updates::Any => {
                closing(self.rel(input), *keys, aggs, *close, &self.context)
            }
            Rel::Aggregate {
                input,
                keys,
                aggs,
                hot,
                ..
            } => {
                let physical = match hot {
                    Some(h) => Physical::Skew(h.clone()),
                    None => Physical::Shuffle,
                };
                aggregate(
                    self.rel(input),
                    *keys,
                    aggs,
                    &physical,
                    self.context.updates,
                )
            }
            Rel::Distinct(input) => self.rel(input).distinct(),
            Rel::Window { input, time, kind } => {
                let (rows, time) = (self.rel(input), *time);
                match kind {
                    WindowKind::Hop { size, hop } => {
                        let (size, hop) = (*size, *hop);
                        rows.flat_map(move |row| windowed(row, time, size, hop))
                    }
                    WindowKind::Session { gap, partition } => {
                        sessions(rows, time, *gap, partition.clone())
                    }
                }
            }
            Rel::Union(inputs) => {
                let mut parts = inputs.iter().map(|i| self.rel(i));
                let first = parts.next().expect("a union has inputs");
                parts.fold(first, |acc, p| acc.concat(p))
            }
            Rel::SetOp {
                op,
                all,
                left,
                right,
            } => {
                let (l, r) = (self.rel(left), self.rel(right));
                set_op(l, r, *op, *all)
            }
            Rel::TopK {
                input,
                partition,
                order,
                limit,
                offset,
                numbered,
            } => {
                let spec = TopK {
                    partition: partition.clone(),
                    order: order.clone(),
                    limit: *limit,
                    offset: *offset,
                    numbered: *numbered,
                };
                top_k(self.rel(input), spec)
            }
            Rel::Shared(i) => {
                if let Some(rows) = &self.memo[*i] {
                    return rows.clone();
                }
                let rows = self.rel(&self.flow.shared[*i].clone());
                self.memo[*i] = Some(rows.clone());
                rows
            }
        }
    }

    /// A semi or anti join. Without a residual condition it is the
    /// engine's; with one, the matching pairs are joined and filtered, and
    /// the left rows that had one are matched to the left side as whole
    /// rows (so a left row occurring twice is kept or dropped twice).
    fn semi(
        &self,
        (l, r): (Rows<'s>, Rows<'s>),
        kind: JoinType,
        (lk, rk): (&[usize], &[usize]),
        residual: Option<&Scalar>,
        (nl, nr): (usize, usize),
        physical: &Physical,
    ) -> Rows<'s> {
        let engine_kind = match kind {
            JoinType::Semi => JoinKind::Semi,
            _ => JoinKind::Anti,
        };
        let updates = self.context.updates;
        let Some(p) = residual.cloned() else {
            let columns = JoinColumns {
                left_key: lk.to_vec(),
                right_key: rk.to_vec(),
                right_rest: Vec::new(),
            };
            return l.relational_join_with(r, columns, engine_kind, physical, updates);
        };
        let columns = JoinColumns {
            left_key: lk.to_vec(),
            right_key: rk.to_vec(),
            right_rest: (0..nr).collect(),
        };
        let matched = l
            .clone()
            .relational_join_with(r, columns, JoinKind::Inner, physical, updates)
            .filter(move |row| p.holds(row))
            .map(move |mut row: Row| {
                row.truncate(nl);
                row
            })
            .distinct();
        let keyed = l.map(|row| (row, ()));
        match kind {
            JoinType::Semi => keyed.semijoin(matched).map(|(row, ())| row),
            _ => keyed.antijoin(matched).map(|(row, ())| row),
        }
    }

    /// The pairs of an inner join whose condition holds a [`TimeBand`]
    /// (before the condition is applied): rows whose times the band reads
    /// meet in the interval join; the others (a time of another kind: text,
    /// a float) are joined by key alone; a null time matches nothing. In
    /// streams, a band between watermarked inputs (whose times are all of
    /// its kind or null) releases the rows no row still to come can match.
    fn banded(
        &self,
        (l, r): (Rows<'s>, Rows<'s>),
        (lk, rk): (&[usize], &[usize]),
        arity: (usize, usize),
        band: TimeBand,
    ) -> Rows<'s> {
        let spec = |time| IntervalJoinSpec {
            left_key: lk.to_vec(),
            left_time: band.left_time,
            right_key: rk.to_vec(),
            right_time: band.right_time,
            lower: band.lower,
            upper: band.upper,
            time,
        };
        if let Some(bounds) = band.release
            && self.context.updates == Updates::Any
        {
            // Any integer: the operator's sums saturate, and the band holds
            // every pair the condition can.
            let time = match band.kind {
                TimeKind::Integer => integer_time,
                TimeKind::Instant => band.kind.reader(),
            };
            return closing_interval_join(l, r, spec(time), bounds, &self.context);
        }
        let time = band.kind.reader();
        let split = |rows: Rows<'s>, at: usize| {
            let placed = rows.clone().filter(move |row| time(&row[at]).is_some());
            let other = rows.filter(move |row| !row[at].is_null() && time(&row[at]).is_none());
            (placed, other)
        };
        let (l_placed, l_other) = split(l, band.left_time);
        let (r_placed, r_other) = split(r, band.right_time);
        let near = l_placed.clone().interval_join(r_placed.clone(), spec(time));
        let shuffle = &Physical::Shuffle;
        let by_key = |a, b| self.join(a, b, JoinType::Inner, (lk, rk), arity, shuffle);
        let others = by_key(l_other, r_placed.concat(r_other.clone()));
        near.concat(others).concat(by_key(l_placed, r_other))
    }

    /// An equi-join with the engine's join; right and full joins are left
    /// joins with the sides swapped (plus the unmatched right rows).
    fn join(
        &self,
        l: Rows<'s>,
        r: Rows<'s>,
        kind: JoinType,
        (lk, rk): (&[usize], &[usize]),
        (nl, nr): (usize, usize),
        physical: &Physical,
    ) -> Rows<'s> {
        let columns = |key: &[usize], other: &[usize], n: usize| JoinColumns {
            left_key: key.to_vec(),
            right_key: other.to_vec(),
            right_rest: (0..n).collect(),
        };
        // Right and full joins swap the sides: the broadcast side would be
        // the large one, so they shuffle.
        let shuffle = &Physical::Shuffle;
        let updates = self.context.updates;
        let swap_back = move |row: Row| -> Row {
            let mut out = Vec::with_capacity(row.len());
            out.extend_from_slice(&row[nr..]);
            out.extend_from_slice(&row[..nr]);
            out
        };
        match kind {
            JoinType::Inner => {
                l.relational_join_with(r, columns(lk, rk, nr), JoinKind::Inner, physical, updates)
            }
            JoinType::Left => {
                l.relational_join_with(r, columns(lk, rk, nr), JoinKind::Left, physical, updates)
            }
            JoinType::Right => r
                .relational_join_with(l, columns(rk, lk, nl), JoinKind::Left, shuffle, updates)
                .map(swap_back),
            JoinType::Semi | JoinType::Anti => unreachable!("lowered by semi"),
            JoinType::Full => {
                let left_join = l.clone().relational_join_with(
                    r.clone(),
                    columns(lk, rk, nr),
                    JoinKind::Left,
                    physical,
                    updates,
                );
                let unmatched_right = r
                    .relational_join_with(l, columns(rk, lk, nl), JoinKind::Anti, shuffle, updates)
                    .map(move |row: Row| {
                        let mut out = vec![Value::Null; nl];
                        out.extend(row);
                        out
                    });
                left_join.concat(unmatched_right)
            }
        }
    }
}

/// The columns `aggs` read (each once) and the engine's aggregates over
/// value rows of those columns.
fn resolve(aggs: &[AggCall]) -> (Vec<usize>, Aggregates) {
    let mut values: Vec<usize> = Vec::new();
    let calls: Vec<(AggKind, Option<usize>)> = aggs
        .iter()
        .map(|a| {
            let slot = a.arg.map(|p| match values.iter().position(|&v| v == p) {
                Some(i) => i,
                None => {
                    values.push(p);
                    values.len() - 1
                }
            });
            (a.kind, slot)
        })
        .collect();
    (values, Aggregates::over_positions(&calls))
}

/// A grouping: the first `keys` columns are the key, the aggregates read
/// the other columns. With no key (a global aggregate) the one result row
/// exists even over no input rows, as SQL says: counts 0, the rest null.
fn aggregate<'s>(
    rows: Rows<'s>,
    keys: usize,
    aggs: &[AggCall],
    physical: &Physical,
    updates: Updates,
) -> Rows<'s> {
    let (values, resolved) = resolve(aggs);
    let result =
        rows.group_aggregate_with((0..keys).collect(), values, resolved, physical, updates);
    if keys > 0 {
        return result;
    }
    let default: Row = aggs
        .iter()
        .map(|a| {
            if a.empty_is_zero {
                Value::Int(0)
            } else {
                Value::Null
            }
        })
        .collect();
    let scope = result.scope();
    let seed = if scope.index() == 0 {
        vec![(((), default), 0 as Time, 1isize)]
    } else {
        Vec::new()
    };
    let fallback = seed
        .to_stream(scope)
        .as_collection()
        .antijoin(result.clone().map(|_| ()).distinct())
        .map(|((), row)| row);
    result.concat(fallback)
}

/// A grouping by windows that close under an input's watermark (see
/// `closing.rs`): the rows [`aggregate`] gives, with each window's state
/// released once it closes.
fn closing<'s>(
    rows: Rows<'s>,
    keys: usize,
    aggs: &[AggCall],
    close: Close,
    context: &BuildContext<'s>,
) -> Rows<'s> {
    let (values, resolved) = resolve(aggs);
    let laid_out = rows.map(move |row| {
        let mut out = Vec::with_capacity(keys + values.len());
        out.extend_from_slice(&row[..keys]);
        out.extend(values.iter().map(|&v| row[v].clone()));
        out
    });
    let closes = Closes {
        input: close.input,
        column: close.key,
        time: super::scalar::instant,
        shift: close.shift,
        scale: close.scale,
    };
    close_groups(laid_out, keys, resolved, closes, context)
}

fn set_op<'s>(l: Rows<'s>, r: Rows<'s>, op: SetOp, all: bool) -> Rows<'s> {
    if !all {
        let (l, r) = (l.distinct(), r.distinct());
        let keyed = l.map(|row| (row, ()));
        return match op {
            SetOp::Intersect => keyed.semijoin(r).map(|(row, ())| row),
            SetOp::Except => keyed.antijoin(r).map(|(row, ())| row),
        };
    }
    // Multisets: per distinct row, min (INTERSECT ALL) or the positive
    // difference (EXCEPT ALL) of the two sides' counts.
    let tagged = l.map(|row| (row, true)).concat(r.map(|row| (row, false)));
    tagged
        .reduce(
            move |_row, input: &[(&bool, isize)], output: &mut Vec<((), isize)>| {
                let count = |side: bool| {
                    input
                        .iter()
                        .filter(|(s, _)| **s == side)
                        .map(|(_, n)| *n)
                        .sum::<isize>()
                };
                let (a, b) = (count(true), count(false));
                let n = match op {
                    SetOp::Intersect => a.min(b),
                    SetOp::Except => a - b,
                };
                if n > 0 {
                    output.push(((), n));
                }
            },
        )
        .map(|(row, ())| row)
}

/// A [`Rel::TopK`]'s parameters.
struct TopK {
    partition: Vec<usize>,
    order: Vec<SortKey>,
    limit: u64,
    offset: u64,
    numbered: bool,
}

/// Per group of rows equal in the partition columns (one group without
/// them), the rows at positions `offset..offset+limit` sorted by `order`,
/// ties broken by the whole row; numbered, each row copy gets its 1-based
/// position appended. Groups are reduced where their key is hashed, so a
/// partitioned top-k runs on every worker.
fn top_k(rows: Rows<'_>, spec: TopK) -> Rows<'_> {
    let TopK {
        partition,
        order,
        limit,
        offset,
        numbered,
    } = spec;
    rows.map(move |row| {
        let key: Row = partition.iter().map(|&c| row[c].clone()).collect();
        (key, row)
    })
    .reduce(
        move |_, input: &[(&Row, isize)], output: &mut Vec<(Row, isize)>| {
            let mut sorted: Vec<(&Row, isize)> = input.iter().map(|(r, n)| (*r, *n)).collect();
            sorted.sort_by(|a, b| compare_rows(a.0, b.0, &order));
            let (mut skip, mut take) = (offset as i128, limit as i128);
            let mut position = offset as i64;
            for (row, n) in sorted {
                let n = n as i128;
                let skipped = skip.min(n);
                skip -= skipped;
                let kept = (n - skipped).min(take);
                take -= kept;
                if kept > 0 && numbered {
                    for _ in 0..kept {
                        position += 1;
                        let mut r = row.clone();
                        r.push(Value::Int(position));
                        output.push((r, 1));
                    }
                } else if kept > 0 {
                    output.push((row.clone(), kept as isize));
                }
                if take == 0 {
                    break;
                }
            }
        },
    )
    .map(|(_, row)| row)
}

/// SQL `ORDER BY`: each key in its direction with its null placement,
/// numbers by value; then the whole row, so no two distinct rows tie.
pub fn compare_rows(a: &Row, b: &Row, order: &[SortKey]) -> Ordering {
    for k in order {
        let (x, y) = (&a[k.column], &b[k.column]);
        let o = match (x.is_null(), y.is_null()) {
            (true, true) => Ordering::Equal,
            (true, false) => {
                return if k.nulls_first {
                    Ordering::Less
                } else {
                    Ordering::Greater
                };
            }
            (false, true) => {
                return if k.nulls_first {
                    Ordering::Greater
                } else {
                    Ordering::Less
                };
            }
            (false, false) => {
                let o = super::scalar::sql_cmp(x, y).unwrap_or(Ordering::Equal);
                if k.descending { o.reverse() } else { o }
            }
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    a.cmp(b)
}

/// `row` once per window `[start, start + size)` (`start` a multiple of
/// `hop`) holding its time, with the bounds appended; once with null
/// bounds when its time is null (or text that is not a timestamp).
fn windowed(row: Row, time: usize, size: i64, hop: i64) -> Vec<Row> {
    let Some(t) = crate::sql::scalar::instant(&row[time]) else {
        let mut row = row;
        row.extend([Value::Null, Value::Null]);
        return vec![row];
    };
    crate::ops::window::hopping(t, size, hop)
        .map(|(start, end)| {
            let mut out = row.clone();
            out.extend([Value::timestamp(start), Value::timestamp(end)]);
            out
        })
        .collect()
}

/// Each row with the bounds of its session: per partition, the rows in time
/// order, split where two times are more than `gap` apart; a session is
/// `[first, last + gap)`. Rows whose time is null get null bounds.
fn sessions(rows: Rows<'_>, time: usize, gap: i64, partition: Vec<usize>) -> Rows<'_> {
    use crate::sql::scalar::instant;
    rows.map(move |row| {
        let key: Row = partition.iter().map(|&c| row[c].clone()).collect();
        (key, row)
    })
    .reduce(
        move |_, input: &[(&Row, isize)], output: &mut Vec<(Row, isize)>| {
            let mut events: Vec<(Option<i64>, &Row, isize)> = input
                .iter()
                .map(|(r, n)| (instant(&r[time]), *r, *n))
                .collect();
            events.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)));
            let timed = events.partition_point(|e| e.0.is_none());
            let bounded = |row: &Row, start: Value, end: Value| {
                let mut out = row.clone();
                out.extend([start, end]);
                out
            };
            for (_, row, n) in &events[..timed] {
                output.push((bounded(row, Value::Null, Value::Null), *n));
            }
            let events = &events[timed..];
            let t = |i: usize| events[i].0.expect("timed");
            let mut first = 0;
            for i in 1..=events.len() {
                if i < events.len() && t(i).checked_sub(t(i - 1)).is_some_and(|d| d <= gap) {
                    continue;
                }
                let (start, end) = (t(first), t(i - 1).saturating_add(gap));
                for (_, row, n) in &events[first..i] {
                    let b = bounded(row, Value::timestamp(start), Value::timestamp(end));
                    output.push((b, *n));
                }
                first = i;
            }
        },
    )
    .map(|(_, row)| row)
}
