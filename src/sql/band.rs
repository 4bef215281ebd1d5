//! Time-bounded join conditions: an inner join whose condition bounds one
//! side's time by the other's — `b.ts BETWEEN a.ts AND a.ts + INTERVAL '10'
//! MINUTE`, `b.t >= a.t - 5 AND b.t < a.t + 60` — is computed by the
//! interval join ([`crate::ops::interval_join`]), which compares only rows
//! close in time, instead of pairing every row of a key with every other
//! and filtering.
//!
//! The band is only a faster way to find candidates: the join's whole
//! condition is still applied to every pair, so the result is the equi-join
//! filtered, exactly. What the interval join cannot place — a time that is
//! not of the band's kind (text read as a timestamp when compared, a float
//! among integers, a time beyond ±2^62) — is joined by key alone and
//! filtered, as without a band; a null time matches nothing either way.

use super::rel::{JoinStrategy, JoinType, Rel};
use super::scalar::{Arith, Compare, Scalar};
use crate::calendar;
use crate::ops::closing_interval_join::SideBounds;
use crate::value::Value;

/// The largest time and bound magnitude the band handles: sums of a time
/// and two bounds stay within `i64`.
const LIMIT: i64 = 1 << 61;

/// `lower <= right.time - left.time <= upper`, in the times' unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeBand {
    /// The time column in left rows.
    pub left_time: usize,
    /// The time column in right rows.
    pub right_time: usize,
    /// The least difference (included).
    pub lower: i64,
    /// The greatest difference (included).
    pub upper: i64,
    /// What the times are.
    pub kind: TimeKind,
    /// When both sides' times are watermarked inputs' event times (see
    /// `closing.rs`): which, so that streams release the rows no row still
    /// to come can match.
    pub release: Option<SideBounds>,
}

/// The kind of the times a band compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeKind {
    /// Dates and timestamps, in microseconds (the bounds were `INTERVAL`s).
    Instant,
    /// Integers in their own unit (the bounds were integers).
    Integer,
}

impl TimeBand {
    /// `[lower, upper]` as the query's units write them: intervals for
    /// instants, numbers for integer times.
    pub fn range(&self) -> String {
        let show = |v: i64| match self.kind {
            TimeKind::Instant => calendar::Interval {
                months: 0,
                micros: v,
            }
            .to_string(),
            TimeKind::Integer => v.to_string(),
        };
        format!("[{}, {}]", show(self.lower), show(self.upper))
    }
}

impl TimeKind {
    /// The reader of this kind's times, for the interval join.
    pub fn reader(self) -> fn(&Value) -> Option<i64> {
        match self {
            TimeKind::Instant => instant_time,
            TimeKind::Integer => integer_time,
        }
    }
}

fn instant_time(v: &Value) -> Option<i64> {
    let t = match *v {
        Value::Timestamp(t) => t,
        Value::Date(d) => calendar::date_to_timestamp(d),
        _ => return None,
    };
    (t.unsigned_abs() <= LIMIT.unsigned_abs()).then_some(t)
}

fn integer_time(v: &Value) -> Option<i64> {
    match *v {
        Value::Int(t) if t.unsigned_abs() <= LIMIT.unsigned_abs() => Some(t),
        _ => None,
    }
}

/// Gives every inner join of `rel` whose condition bounds a pair of time
/// columns from both sides the [`JoinStrategy::Interval`] strategy
/// (`shared`: the plan's shared relations, which `rel` may read). A filter
/// right above an inner join (a comma join's `WHERE`) is its condition too:
/// it becomes the join's when it holds a band.
pub fn use_bands(rel: &mut Rel, shared: &[Rel]) {
    for child in rel.children_mut() {
        use_bands(child, shared);
    }
    if let Rel::Filter(input, p) = rel
        && let Rel::Join {
            left,
            kind: JoinType::Inner,
            residual,
            strategy,
            ..
        } = &mut **input
        && !matches!(strategy, JoinStrategy::Interval(_))
    {
        let condition = Scalar::all(residual.iter().cloned().chain([p.clone()]).collect());
        let condition = condition.expect("a filter's predicate at least");
        if let Some(band) = band(&condition, left.arity(shared)) {
            *residual = Some(condition);
            *strategy = JoinStrategy::Interval(band);
            let Rel::Filter(input, _) = std::mem::replace(rel, Rel::Union(Vec::new())) else {
                unreachable!("matched above");
            };
            *rel = *input;
        }
        return;
    }
    if let Rel::Join {
        left,
        kind: JoinType::Inner,
        residual: Some(residual),
        strategy,
        ..
    } = rel
        && let Some(band) = band(residual, left.arity(shared))
    {
        *strategy = JoinStrategy::Interval(band);
    }
}

/// The band the conjuncts of `condition` (over left ++ right, `nl` left
/// columns) put on some pair of time columns, if they bound it both ways.
pub fn band(condition: &Scalar, nl: usize) -> Option<TimeBand> {
    // Per (left column, right column): the kind of their times (`None`: no
    // bound has said yet; a pair bounded as both kinds gets no band) and
    // the tightest bounds so far.
    let mut bounds: Vec<Bounds> = Vec::new();
    for c in condition.clone().conjuncts() {
        let Some((l, r, kind, op, d)) = difference(&c, nl) else {
            continue;
        };
        let at = match bounds.iter().position(|b| (b.0, b.1) == (l, r)) {
            Some(at) => at,
            None => {
                bounds.push((l, r, Ok(None), None, None));
                bounds.len() - 1
            }
        };
        let b = &mut bounds[at];
        b.2 = match (b.2, kind) {
            (Ok(None), k) | (Ok(k), None) => Ok(k),
            (Ok(Some(a)), Some(k)) if a == k => Ok(Some(a)),
            _ => Err(()),
        };
        let lower = |b: &mut Option<i64>, v: i64| *b = Some(b.map_or(v, |x| x.max(v)));
        let upper = |b: &mut Option<i64>, v: i64| *b = Some(b.map_or(v, |x| x.min(v)));
        match op {
            Compare::GtEq => lower(&mut b.3, d),
            Compare::Gt => lower(&mut b.3, d + 1),
            Compare::LtEq => upper(&mut b.4, d),
            Compare::Lt => upper(&mut b.4, d - 1),
            Compare::Eq => {
                lower(&mut b.3, d);
                upper(&mut b.4, d);
            }
            Compare::NotEq => {}
        }
    }
    bounds.into_iter().find_map(|(l, r, kind, lower, upper)| {
        let (lower, upper, kind) = (lower?, upper?, kind.ok()??);
        (lower <= upper).then_some(TimeBand {
            left_time: l,
            right_time: r - nl,
            lower,
            upper,
            kind,
            release: None,
        })
    })
}

/// Per pair of time columns (left, right): their kind, the lower and the
/// upper bound of `right - left`.
type Bounds = (
    usize,
    usize,
    Result<Option<TimeKind>, ()>,
    Option<i64>,
    Option<i64>,
);

/// A conjunct as `right.time - left.time OP d`: the two columns, the kind
/// of their times if the offsets tell it, the operator and `d`.
fn difference(c: &Scalar, nl: usize) -> Option<(usize, usize, Option<TimeKind>, Compare, i64)> {
    let Scalar::Compare(op, x, y) = c else {
        return None;
    };
    let ((cx, dx), (cy, dy)) = (offset(x)?, offset(y)?);
    let kind = match (dx, dy) {
        (Offset::Zero, Offset::Zero) => None,
        (Offset::Micros(_) | Offset::Zero, Offset::Micros(_) | Offset::Zero) => {
            Some(TimeKind::Instant)
        }
        (Offset::Units(_) | Offset::Zero, Offset::Units(_) | Offset::Zero) => {
            Some(TimeKind::Integer)
        }
        _ => return None,
    };
    let (dx, dy) = (dx.value(), dy.value());
    // cx + dx OP cy + dy
    if cx >= nl && cy < nl {
        Some((cy, cx, kind, *op, dy - dx))
    } else if cx < nl && cy >= nl {
        Some((cx, cy, kind, flip(*op), dx - dy))
    } else {
        None
    }
}

/// What is added to a column on one side of a comparison.
#[derive(Clone, Copy)]
enum Offset {
    Zero,
    Micros(i64),
    Units(i64),
}

impl Offset {
    fn value(self) -> i64 {
        match self {
            Offset::Zero => 0,
            Offset::Micros(v) | Offset::Units(v) => v,
        }
    }
}

/// `col`, `col ± INTERVAL` (of a fixed length) or `col ± integer`.
fn offset(e: &Scalar) -> Option<(usize, Offset)> {
    let small = |v: i64| (v.unsigned_abs() <= LIMIT.unsigned_abs()).then_some(v);
    match e {
        Scalar::Column(c) => Some((*c, Offset::Zero)),
        Scalar::Shift(x, by) if by.months == 0 => match **x {
            Scalar::Column(c) => Some((c, Offset::Micros(small(by.micros)?))),
            _ => None,
        },
        Scalar::Arith(op @ (Arith::Add | Arith::Sub), x, y) => match (&**x, &**y, op) {
            (Scalar::Column(c), Scalar::Literal(Value::Int(k)), Arith::Add)
            | (Scalar::Literal(Value::Int(k)), Scalar::Column(c), Arith::Add) => {
                Some((*c, Offset::Units(small(*k)?)))
            }
            (Scalar::Column(c), Scalar::Literal(Value::Int(k)), Arith::Sub) => {
                Some((*c, Offset::Units(-small(*k)?)))
            }
            _ => None,
        },
        _ => None,
    }
}

/// `a OP b` as `b OP' a`.
fn flip(op: Compare) -> Compare {
    match op {
        Compare::Lt => Compare::Gt,
        Compare::LtEq => Compare::GtEq,
        Compare::Gt => Compare::Lt,
        Compare::GtEq => Compare::LtEq,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calendar::Interval;

    fn col(c: usize) -> Box<Scalar> {
        Box::new(Scalar::Column(c))
    }

    fn cmp(op: Compare, a: Box<Scalar>, b: Box<Scalar>) -> Scalar {
        Scalar::Compare(op, a, b)
    }

    fn shift(c: usize, micros: i64) -> Box<Scalar> {
        Box::new(Scalar::Shift(col(c), Interval { months: 0, micros }))
    }

    #[test]
    fn between_with_intervals_is_a_band() {
        // right.#3 BETWEEN left.#1 AND left.#1 + 10 (columns: 2 left)
        let c = Scalar::all(vec![
            cmp(Compare::GtEq, col(3), col(1)),
            cmp(Compare::LtEq, col(3), shift(1, 10)),
        ])
        .unwrap();
        assert_eq!(
            band(&c, 2),
            Some(TimeBand {
                left_time: 1,
                right_time: 1,
                lower: 0,
                upper: 10,
                kind: TimeKind::Instant,
                release: None,
            })
        );
    }

    #[test]
    fn the_left_side_bounded_by_the_right_is_a_band_too() {
        // left.#0 > right.#2 - 5 AND left.#0 + 3 <= right.#2 (ints; 2 left)
        let minus = Box::new(Scalar::Arith(
            Arith::Sub,
            col(2),
            Box::new(Scalar::Literal(Value::Int(5))),
        ));
        let plus = Box::new(Scalar::Arith(
            Arith::Add,
            col(0),
            Box::new(Scalar::Literal(Value::Int(3))),
        ));
        let c = Scalar::all(vec![
            cmp(Compare::Gt, col(0), minus),
            cmp(Compare::LtEq, plus, col(2)),
        ])
        .unwrap();
        // left > right - 5  =>  right - left < 5  => upper 4
        // left + 3 <= right  =>  right - left >= 3
        assert_eq!(
            band(&c, 2),
            Some(TimeBand {
                left_time: 0,
                right_time: 0,
                lower: 3,
                upper: 4,
                kind: TimeKind::Integer,
                release: None,
            })
        );
    }

    #[test]
    fn a_plain_comparison_takes_the_kind_of_the_other_bound() {
        let c = Scalar::all(vec![
            cmp(Compare::Lt, col(0), col(2)),
            cmp(Compare::GtEq, shift(0, 7), col(2)),
        ])
        .unwrap();
        let b = band(&c, 2).unwrap();
        assert_eq!((b.lower, b.upper, b.kind), (1, 7, TimeKind::Instant));
        let alone = cmp(Compare::Eq, col(0), col(2));
        assert_eq!(band(&alone, 2), None);
    }

    #[test]
    fn one_sided_mixed_or_empty_bounds_are_no_band() {
        let one_sided = cmp(Compare::GtEq, col(3), shift(1, 10));
        assert_eq!(band(&one_sided, 2), None);
        let other_columns = Scalar::all(vec![
            cmp(Compare::GtEq, col(3), shift(1, 0)),
            cmp(Compare::LtEq, col(2), shift(1, 10)),
        ])
        .unwrap();
        assert_eq!(band(&other_columns, 2), None);
        let empty = Scalar::all(vec![
            cmp(Compare::GtEq, col(3), shift(1, 20)),
            cmp(Compare::LtEq, col(3), shift(1, 10)),
        ])
        .unwrap();
        assert_eq!(band(&empty, 2), None);
        let same_side = Scalar::all(vec![
            cmp(Compare::GtEq, col(0), shift(1, 0)),
            cmp(Compare::LtEq, col(0), shift(1, 10)),
        ])
        .unwrap();
        assert_eq!(band(&same_side, 2), None);
    }

    #[test]
    fn readers_take_their_kind_only() {
        assert_eq!(
            instant_time(&Value::Date(1)),
            Some(calendar::MICROS_PER_DAY)
        );
        assert_eq!(instant_time(&Value::Int(1)), None);
        assert_eq!(instant_time(&Value::str("2024-01-01")), None);
        assert_eq!(integer_time(&Value::Int(-4)), Some(-4));
        assert_eq!(integer_time(&Value::Int(i64::MAX)), None);
        assert_eq!(integer_time(&Value::Int(i64::MIN)), None);
        assert_eq!(instant_time(&Value::Timestamp(i64::MIN)), None);
        assert_eq!(integer_time(&Value::Timestamp(4)), None);
    }
}
