//! State that streams release under watermarks: windows that close, and
//! interval-join rows no row still to come can match.
//!
//! A grouping by a `TUMBLE` or `HOP` window's bound, over an input under a
//! `WATERMARK`, releases each window's state once the watermark has passed
//! the window's end (the operator is
//! [`crate::ops::closing_window::close_groups`]). [`release_state`] marks
//! a grouping ([`Close`]) only where no row the input still admits can fall
//! in a window whose end the watermark has passed:
//! - one of its key columns is the `window_start` or `window_end` of a
//!   `TUMBLE`/`HOP`, reached through filters, column projections and shared
//!   relations only — so every row it groups is a row of that window;
//! - the window's time column is the watermarked input's event-time
//!   column, or `to_timestamp`/`epoch_ms` of it (both keep order, so a row
//!   admitted after the watermark `w` has a window time at or after
//!   `w × scale`), reached through filters, projections and windows only.
//!
//! An interval join (a [`TimeBand`](super::band::TimeBand)) releases rows
//! ([`crate::ops::closing_interval_join`]) when both sides' band times are
//! so traced to watermarked inputs, and every time there is of the band's
//! kind or null (so no row needs the key-only join `lower.rs` gives times
//! the band cannot place).
//!
//! A join anywhere on those paths disqualifies: its other side has no
//! watermark, so a late row there could pair with an old row and land in a
//! closed window. Releasing never changes results — the operators emit
//! exactly the updates of the differential ones — only the state a stream
//! holds; batch runs compute as always.

use super::band::TimeKind;
use super::rel::{Close, JoinStrategy, JoinType, Rel, WindowKind};
use super::scalar::{Func, Scalar};
use crate::ops::closing_interval_join::SideBounds;
use crate::schema::ColumnType;

/// An input's watermarked column and its declared type.
pub type Watermarked = Option<(usize, ColumnType)>;

/// Marks what `rel`'s groupings and interval joins can release in streams
/// (`watermarks[input]`: the input's watermarked column, if it has one).
pub fn release_state(rel: &mut Rel, shared: &[Rel], watermarks: &[Watermarked]) {
    for child in rel.children_mut() {
        release_state(child, shared, watermarks);
    }
    close_window(rel, shared, watermarks);
    release_band(rel, shared, watermarks);
}

/// Marks `rel`, a grouping, if its windows close.
fn close_window(rel: &mut Rel, shared: &[Rel], watermarks: &[Watermarked]) {
    let Rel::Aggregate {
        input,
        keys,
        closes,
        ..
    } = rel
    else {
        return;
    };
    *closes = (0..*keys).find_map(|key| {
        let (window, time, shift) = window_bound(input, key, shared)?;
        let (i, column, scale) = event_time(window, time, shared)?;
        (watermarks[i]?.0 == column).then_some(Close {
            input: i,
            key,
            shift,
            scale,
        })
    });
}

/// Marks `rel`, an interval join, if its rows can be released.
fn release_band(rel: &mut Rel, shared: &[Rel], watermarks: &[Watermarked]) {
    let Rel::Join {
        left,
        right,
        kind: JoinType::Inner,
        strategy: JoinStrategy::Interval(band),
        ..
    } = rel
    else {
        return;
    };
    let side = |rel: &Rel, col: usize| -> Option<(usize, i64)> {
        let (i, column, scale) = event_time(rel, col, shared)?;
        let (watermarked, ty) = watermarks[i]?;
        // Every time of the band's kind or null: an integer column read as
        // is, a date or timestamp one, or seconds or milliseconds made
        // timestamps.
        let of_kind = match band.kind {
            TimeKind::Integer => scale == 1 && ty == ColumnType::Int,
            TimeKind::Instant => {
                scale > 1 || matches!(ty, ColumnType::Date | ColumnType::Timestamp)
            }
        };
        (watermarked == column && of_kind).then_some((i, scale))
    };
    band.release = match (side(left, band.left_time), side(right, band.right_time)) {
        (Some(left), Some(right)) => Some(SideBounds { left, right }),
        _ => None,
    };
}

/// If `rel`'s column `col` is a `TUMBLE`/`HOP` window's start or end (every
/// row of `rel` a row of that window): the window's input, its time column
/// there, and what is added to the column to give the window's end.
fn window_bound<'r>(rel: &'r Rel, col: usize, shared: &'r [Rel]) -> Option<(&'r Rel, usize, i64)> {
    match rel {
        Rel::Filter(input, _) => window_bound(input, col, shared),
        Rel::Map(input, exprs) => match exprs[col] {
            Scalar::Column(c) => window_bound(input, c, shared),
            _ => None,
        },
        Rel::Shared(i) => window_bound(&shared[*i], col, shared),
        Rel::Window {
            input,
            time,
            kind: WindowKind::Hop { size, .. },
        } => {
            let n = input.arity(shared);
            match col.checked_sub(n)? {
                0 => Some((input, *time, *size)),
                1 => Some((input, *time, 0)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// If every row of `rel` is a row of one input, and its column `col` is
/// that input's column `column` in microseconds per `scale` units: `(input,
/// column, scale)`.
fn event_time(rel: &Rel, col: usize, shared: &[Rel]) -> Option<(usize, usize, i64)> {
    match rel {
        Rel::Scan { input, columns } => Some((*input, columns[col], 1)),
        Rel::Filter(input, _) => event_time(input, col, shared),
        Rel::Map(input, exprs) => {
            let (arg, per_unit) = match &exprs[col] {
                Scalar::Column(c) => return event_time(input, *c, shared),
                Scalar::Call(Func::ToTimestamp, args) => (&args[0], 1_000_000),
                Scalar::Call(Func::EpochMs, args) => (&args[0], 1_000),
                _ => return None,
            };
            let Scalar::Column(c) = arg else { return None };
            let (i, column, scale) = event_time(input, *c, shared)?;
            // Only an integer column's times are scaled (`to_timestamp` of
            // a date or timestamp is null: such rows never close anything).
            (scale == 1).then_some((i, column, per_unit))
        }
        Rel::Window { input, .. } if col < input.arity(shared) => event_time(input, col, shared),
        Rel::Shared(i) => event_time(&shared[*i], col, shared),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan() -> Rel {
        Rel::Scan {
            input: 0,
            columns: vec![0, 1],
        }
    }

    fn tumble(input: Rel, time: usize) -> Rel {
        Rel::Window {
            input: Box::new(input),
            time,
            kind: WindowKind::Hop {
                size: 3_600_000_000,
                hop: 3_600_000_000,
            },
        }
    }

    fn grouped(input: Rel, keys: usize) -> Rel {
        Rel::Aggregate {
            input: Box::new(input),
            keys,
            aggs: Vec::new(),
            hot: None,
            closes: None,
        }
    }

    fn closes(rel: Rel, watermarks: &[Option<usize>]) -> Option<Close> {
        let mut rel = rel;
        let typed: Vec<Watermarked> = watermarks
            .iter()
            .map(|w| w.map(|c| (c, ColumnType::Timestamp)))
            .collect();
        release_state(&mut rel, &[], &typed);
        match rel {
            Rel::Aggregate { closes, .. } => closes,
            _ => unreachable!(),
        }
    }

    /// `[window_start, page]` of a tumble over scan columns `[page, ts]`.
    fn by_start(window_time: Rel) -> Rel {
        let window = tumble(window_time, 1);
        grouped(
            Rel::Map(Box::new(window), vec![Scalar::Column(2), Scalar::Column(0)]),
            2,
        )
    }

    #[test]
    fn a_window_over_the_watermarked_column_closes() {
        let c = closes(by_start(scan()), &[Some(1)]).expect("closes");
        assert_eq!((c.input, c.key, c.shift, c.scale), (0, 0, 3_600_000_000, 1));
        // By the end: no shift.
        let window = tumble(scan(), 1);
        let by_end = grouped(
            Rel::Map(Box::new(window), vec![Scalar::Column(3), Scalar::Column(0)]),
            2,
        );
        assert_eq!(closes(by_end, &[Some(1)]).map(|c| c.shift), Some(0));
    }

    #[test]
    fn seconds_are_scaled_to_microseconds() {
        let seconds = Rel::Map(
            Box::new(scan()),
            vec![
                Scalar::Column(0),
                Scalar::Call(Func::ToTimestamp, vec![Scalar::Column(1)]),
            ],
        );
        let c = closes(by_start(seconds), &[Some(1)]).expect("closes");
        assert_eq!(c.scale, 1_000_000);
    }

    #[test]
    fn nothing_closes_without_a_watermark_on_that_column() {
        assert_eq!(closes(by_start(scan()), &[None]), None);
        assert_eq!(closes(by_start(scan()), &[Some(0)]), None);
        // A computed time: its order is not known.
        let shifted = Rel::Map(
            Box::new(scan()),
            vec![
                Scalar::Column(0),
                Scalar::Arith(
                    super::super::scalar::Arith::Mul,
                    Box::new(Scalar::Column(1)),
                    Box::new(Scalar::Literal(crate::value::Value::Int(-1))),
                ),
            ],
        );
        assert_eq!(closes(by_start(shifted), &[Some(1)]), None);
    }

    #[test]
    fn nothing_closes_above_a_join() {
        let joined = Rel::Join {
            left: Box::new(scan()),
            right: Box::new(Rel::Scan {
                input: 1,
                columns: vec![0],
            }),
            kind: super::super::rel::JoinType::Inner,
            left_key: vec![0],
            right_key: vec![0],
            residual: None,
            strategy: super::super::rel::JoinStrategy::Shuffle,
        };
        assert_eq!(closes(by_start(joined), &[Some(1), None]), None);
    }

    #[test]
    fn a_key_that_is_not_a_window_bound_closes_nothing() {
        let window = tumble(scan(), 1);
        let by_page = grouped(Rel::Map(Box::new(window), vec![Scalar::Column(0)]), 1);
        assert_eq!(closes(by_page, &[Some(1)]), None);
    }
}
