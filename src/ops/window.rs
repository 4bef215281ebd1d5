//! Event-time windows: tumbling, hopping, sliding and session windows over
//! an integer event-time column, each with any of the SQL aggregates of
//! [`crate::ops::aggregate`].
//!
//! Event time is data: a window is a function of the timestamps in the rows,
//! never of when they arrived. Every window kind is built from differential
//! operators (`flat_map` + grouping for tumbling and hopping windows, a
//! per-key `reduce` over the time-ordered events for sliding and session
//! windows), so a late event simply updates the windows it belongs to —
//! differential retracts the old result row and adds the new one — and a
//! stream run ends with exactly the rows a batch run over the same events
//! produces.
//!
//! Windows, for an event at time `t` (all bounds in the column's unit):
//! - tumbling `size`: `[start, start + size)` with `start = floor(t / size) * size`;
//! - hopping `size/hop`: every `[start, start + size)` containing `t`, with
//!   `start` a multiple of `hop`;
//! - sliding `size`: one window per distinct event time `t` of a key,
//!   `[t - size, t]` (both bounds included, as Kafka Streams' sliding windows):
//!   the aggregate over every event of the key no older than `size` before `t`;
//! - session `gap`: per key, events whose times follow each other by at most
//!   `gap` form one session `[first, last + gap)`.
//!
//! Rows whose time is null cannot be placed in time: per key they form one
//! group with null `window_start` and `window_end`, so they are counted,
//! never dropped (as SQL groups nulls).

use std::fmt;

use crate::job::Rows;
use crate::ops::aggregate::{Aggregates, GroupAggregate, project};
use crate::time::{TimeUnit, parse_duration};
use crate::value::{Row, Value};

/// The tumbling window `[start, end)` of size `size` holding `t`.
pub fn tumbling(t: i64, size: i64) -> (i64, i64) {
    let start = t.div_euclid(size) * size;
    (start, start + size)
}

/// Every hopping window `[start, start + size)` holding `t`, with `start` a
/// multiple of `hop`, earliest first.
pub fn hopping(t: i64, size: i64, hop: i64) -> impl Iterator<Item = (i64, i64)> {
    // The latest window starts at the last multiple of hop at or before t;
    // earlier ones, hop apart, still hold t while start + size > t.
    let last = t.div_euclid(hop) * hop;
    let count = (size - 1) / hop + 1;
    (0..count)
        .rev()
        .map(move |i| last - i * hop)
        .filter(move |start| start + size > t)
        .map(move |start| (start, start + size))
}

/// A window kind with its sizes, in the time column's unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowSpec {
    /// Back-to-back windows `[start, start + size)`, one per event.
    Tumbling {
        /// The windows' length (positive).
        size: i64,
    },
    /// Windows `[start, start + size)` starting every `hop`, overlapping
    /// when `hop < size`.
    Hopping {
        /// The windows' length (positive).
        size: i64,
        /// The distance between window starts (positive, at most `size`).
        hop: i64,
    },
    /// Per key, one window `[t - size, t]` per distinct event time `t`.
    Sliding {
        /// How far back from `t` the window reaches.
        size: i64,
    },
    /// Per key, runs of events at most `gap` apart: `[first, last + gap)`.
    Session {
        /// The longest silence within one session.
        gap: i64,
    },
}

impl WindowSpec {
    /// Parses `tumbling:SIZE`, `hopping:SIZE/HOP`, `sliding:SIZE` or
    /// `session:GAP`, durations as [`parse_duration`] reads them in `unit`.
    pub fn parse(text: &str, unit: TimeUnit) -> Result<WindowSpec, String> {
        let (kind, rest) = text.split_once(':').ok_or_else(|| {
            "expected tumbling:SIZE, hopping:SIZE/HOP, sliding:SIZE or session:GAP".to_string()
        })?;
        let positive = |d: &str| -> Result<i64, String> {
            let n = parse_duration(d, unit)?;
            if n <= 0 {
                return Err(format!("{d:?} must be longer than zero"));
            }
            Ok(n)
        };
        let spec = match kind {
            "tumbling" => WindowSpec::Tumbling {
                size: positive(rest)?,
            },
            "hopping" => {
                let (size, hop) = rest
                    .split_once('/')
                    .ok_or_else(|| format!("hopping needs SIZE/HOP, found {rest:?}"))?;
                let (size, hop) = (positive(size)?, positive(hop)?);
                if hop > size {
                    return Err(format!(
                        "hop {hop} is longer than size {size}: events between windows would be lost"
                    ));
                }
                WindowSpec::Hopping { size, hop }
            }
            "sliding" => WindowSpec::Sliding {
                size: parse_duration(rest, unit)?,
            },
            "session" => WindowSpec::Session {
                gap: parse_duration(rest, unit)?,
            },
            _ => {
                return Err(format!(
                    "unknown window kind {kind:?} (tumbling, hopping, sliding, session)"
                ));
            }
        };
        Ok(spec)
    }
}

/// The most hopping windows one event may fall into by default
/// (`SIZE / HOP`); a job may let its users raise it.
pub const MAX_WINDOWS_PER_EVENT: i64 = 1000;

impl WindowSpec {
    /// How many windows one event falls into (at most).
    pub fn windows_per_event(&self) -> i64 {
        match *self {
            WindowSpec::Hopping { size, hop } => (size - 1) / hop + 1,
            _ => 1,
        }
    }

    /// Refuses a spec that puts an event in more than `max` windows (a
    /// year of one-second hops would make 31 million copies of each event).
    pub fn check_windows_per_event(&self, max: i64) -> Result<(), String> {
        let n = self.windows_per_event();
        if n > max {
            return Err(format!(
                "{self} puts each event in {n} windows, more than the limit of {max} \
                 (use a longer hop, or raise the limit with -p max_windows=N)"
            ));
        }
        Ok(())
    }

    /// How far from an event's time its window bounds can lie: the event
    /// time column's [`Reach`](crate::schema::Reach).
    pub fn reach(&self) -> crate::schema::Reach {
        crate::schema::Reach(match *self {
            WindowSpec::Tumbling { size } | WindowSpec::Hopping { size, .. } => size,
            WindowSpec::Sliding { size } => size,
            WindowSpec::Session { gap } => gap,
        })
    }
}

impl fmt::Display for WindowSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WindowSpec::Tumbling { size } => write!(f, "tumbling:{size}"),
            WindowSpec::Hopping { size, hop } => write!(f, "hopping:{size}/{hop}"),
            WindowSpec::Sliding { size } => write!(f, "sliding:{size}"),
            WindowSpec::Session { gap } => write!(f, "session:{gap}"),
        }
    }
}

/// Windowed grouping with aggregates, as a collection method.
pub trait WindowAggregate<'s> {
    /// Groups rows by the columns at `key` and by `window` over the integer
    /// time column at `time`, and appends the aggregates over the columns at
    /// `values`. Output rows: key columns, `window_start`, `window_end`, then
    /// one column per aggregate.
    fn window_aggregate(
        self,
        time: usize,
        key: Vec<usize>,
        values: Vec<usize>,
        window: WindowSpec,
        aggs: Aggregates,
    ) -> Rows<'s>;
}

impl<'s> WindowAggregate<'s> for Rows<'s> {
    fn window_aggregate(
        self,
        time: usize,
        key: Vec<usize>,
        values: Vec<usize>,
        window: WindowSpec,
        aggs: Aggregates,
    ) -> Rows<'s> {
        let n_keys = key.len();
        match window {
            WindowSpec::Tumbling { .. } | WindowSpec::Hopping { .. } => {
                // Each row becomes one row per window holding it: key,
                // window bounds, values; then a plain grouping on
                // (key, window), which keeps count-only aggregates on the
                // cheap `count` path.
                let n_values = values.len();
                self.flat_map(move |row| windowed_rows(&row, time, &key, &values, window))
                    .group_aggregate(
                        (0..n_keys + 2).collect(),
                        (n_keys + 2..n_keys + 2 + n_values).collect(),
                        aggs,
                    )
            }
            WindowSpec::Sliding { .. } | WindowSpec::Session { .. } => self
                .map(move |row| {
                    (
                        project(&row, &key),
                        (row[time].clone(), project(&row, &values)),
                    )
                })
                .reduce(move |_key, events, out| {
                    for (start, end, group) in per_key_windows(events, window) {
                        let mut row = vec![start, end];
                        row.extend(aggs.compute(&group));
                        out.push((row, 1isize));
                    }
                })
                .map(|(mut key, window)| {
                    key.extend(window);
                    key
                }),
        }
    }
}

/// A row as tumbling or hopping windows group it: one row per window holding
/// its time — the key columns, `window_start`, `window_end`, the value
/// columns (null bounds for a null time).
pub(crate) fn windowed_rows(
    row: &Row,
    time: usize,
    key: &[usize],
    values: &[usize],
    window: WindowSpec,
) -> Vec<Row> {
    let windows: Vec<(Value, Value)> = match (&row[time], window) {
        (Value::Int(t), WindowSpec::Tumbling { size }) => {
            let (s, e) = tumbling(*t, size);
            vec![(Value::Int(s), Value::Int(e))]
        }
        (Value::Int(t), WindowSpec::Hopping { size, hop }) => hopping(*t, size, hop)
            .map(|(s, e)| (Value::Int(s), Value::Int(e)))
            .collect(),
        (_, WindowSpec::Tumbling { .. } | WindowSpec::Hopping { .. }) => {
            vec![(Value::Null, Value::Null)]
        }
        (_, WindowSpec::Sliding { .. } | WindowSpec::Session { .. }) => {
            unreachable!("sliding and session windows are not assigned per row")
        }
    };
    windows
        .into_iter()
        .map(|(start, end)| {
            let mut out = project(row, key);
            out.extend([start, end]);
            out.extend(values.iter().map(|&i| row[i].clone()));
            out
        })
        .collect()
}

/// One window of a key: its bounds and its events' value rows.
type KeyWindow<'a> = (Value, Value, Vec<(&'a Row, isize)>);

/// The sliding or session windows of one key. `events` are the key's
/// `(time, values)` with multiplicities, sorted (null times first); each
/// window comes with its events' value rows, consolidated and sorted as
/// [`Aggregates::compute`] needs them.
fn per_key_windows<'a>(
    events: &[(&'a (Value, Row), isize)],
    window: WindowSpec,
) -> Vec<KeyWindow<'a>> {
    let nulls = events.partition_point(|(e, _)| e.0.is_null());
    let mut out = Vec::new();
    if nulls > 0 {
        out.push((Value::Null, Value::Null, consolidated(&events[..nulls])));
    }
    let timed = &events[nulls..];
    let time = |i: usize| match timed[i].0.0 {
        Value::Int(t) => t,
        // The plan types the time column as a timestamp, so the source
        // layer rejects anything else as a bad row before it gets here.
        ref v => unreachable!("non-integer event time {v:?}: the plan must type it"),
    };
    match window {
        WindowSpec::Session { gap } => {
            let mut first = 0;
            for i in 1..=timed.len() {
                // Times far apart (say i64::MIN and 0) overflow the difference:
                // they are certainly more than a gap apart.
                if i == timed.len() || time(i).checked_sub(time(i - 1)).is_none_or(|d| d > gap) {
                    out.push((
                        Value::Int(time(first)),
                        Value::Int(time(i - 1).saturating_add(gap)),
                        consolidated(&timed[first..i]),
                    ));
                    first = i;
                }
            }
        }
        WindowSpec::Sliding { size } => {
            // Two pointers over the time-ordered events: the window ending
            // at each distinct time starts at the first event no older
            // than `size` before it.
            let mut lo = 0;
            let mut i = 0;
            while i < timed.len() {
                let t = time(i);
                let mut hi = i;
                while hi < timed.len() && time(hi) == t {
                    hi += 1;
                }
                while time(lo) < t.saturating_sub(size) {
                    lo += 1;
                }
                out.push((
                    Value::Int(t.saturating_sub(size)),
                    Value::Int(t),
                    consolidated(&timed[lo..hi]),
                ));
                i = hi;
            }
        }
        WindowSpec::Tumbling { .. } | WindowSpec::Hopping { .. } => {
            unreachable!("tumbling and hopping windows are grouped, not reduced per key")
        }
    }
    out
}

/// The value rows of `events`, sorted, equal rows merged.
fn consolidated<'a>(events: &[(&'a (Value, Row), isize)]) -> Vec<(&'a Row, isize)> {
    let mut rows: Vec<(&Row, isize)> = events.iter().map(|(e, m)| (&e.1, *m)).collect();
    rows.sort_by(|a, b| a.0.cmp(b.0));
    rows.dedup_by(|next, kept| {
        if next.0 == kept.0 {
            kept.1 += next.1;
            true
        } else {
            false
        }
    });
    rows
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn tumbling_floors_negative_times() {
        assert_eq!(tumbling(0, 10), (0, 10));
        assert_eq!(tumbling(9, 10), (0, 10));
        assert_eq!(tumbling(10, 10), (10, 20));
        assert_eq!(tumbling(-1, 10), (-10, 0));
    }

    #[test]
    fn hopping_lists_every_window_holding_t() {
        let w: Vec<_> = hopping(10, 10, 2).collect();
        assert_eq!(w, vec![(2, 12), (4, 14), (6, 16), (8, 18), (10, 20)]);
        let w: Vec<_> = hopping(7, 5, 3).collect();
        assert_eq!(w, vec![(3, 8), (6, 11)]);
        assert_eq!(
            hopping(-1, 4, 2).collect::<Vec<_>>(),
            vec![(-4, 0), (-2, 2)]
        );
        // A brute-force check against the definition.
        for (size, hop) in [(10, 2), (10, 3), (5, 5), (7, 1)] {
            for t in -30..30 {
                let expected: Vec<_> = (-60..60)
                    .filter(|s| s % hop == 0 && *s <= t && t < s + size)
                    .map(|s| (s, s + size))
                    .collect();
                assert_eq!(hopping(t, size, hop).collect::<Vec<_>>(), expected);
            }
        }
    }

    #[test]
    fn parse_specs_in_units() {
        let ms = TimeUnit::Millis;
        assert_eq!(
            WindowSpec::parse("tumbling:1m", ms),
            Ok(WindowSpec::Tumbling { size: 60_000 })
        );
        assert_eq!(
            WindowSpec::parse("hopping:5m/1m", TimeUnit::Seconds),
            Ok(WindowSpec::Hopping { size: 300, hop: 60 })
        );
        assert_eq!(
            WindowSpec::parse("session:30m", TimeUnit::Seconds),
            Ok(WindowSpec::Session { gap: 1800 })
        );
        assert_eq!(
            WindowSpec::parse("sliding:10", ms),
            Ok(WindowSpec::Sliding { size: 10 })
        );
        for bad in [
            "tumbling",
            "tumbling:0",
            "hopping:1m",
            "hopping:1m/2m",
            "daily:1d",
            "session:x",
        ] {
            assert!(WindowSpec::parse(bad, ms).is_err(), "{bad:?} accepted");
        }
    }

    proptest! {
        /// Any time the event-time column admits (its `Reach` is the
        /// window's) gets window bounds that fit and hold it, at the very
        /// ends of the i64 range too; the window count stays within the
        /// limit the spec was checked against.
        #[test]
        fn admitted_times_get_bounds_that_fit(
            t in prop_oneof![
                any::<i64>(),
                (0i64..1000).prop_map(|d| i64::MIN + d),
                (0i64..1000).prop_map(|d| i64::MAX - d),
            ],
            size in prop_oneof![1i64..1000, any::<i64>().prop_map(|s| s.saturating_abs().max(1))],
            hops in 1i64..2000,
        ) {
            let hop = (size / hops).max(1);
            let spec = WindowSpec::Hopping { size, hop };
            let n = spec.windows_per_event();
            prop_assert!(n >= 1);
            if spec.check_windows_per_event(MAX_WINDOWS_PER_EVENT).is_err() {
                prop_assert!(n > MAX_WINDOWS_PER_EVENT);
                return Ok(());
            }
            if !spec.reach().admits(t) {
                return Ok(());
            }
            let (s, e) = tumbling(t, size);
            prop_assert!(s <= t && t < e && e - s == size);
            let windows: Vec<_> = hopping(t, size, hop).collect();
            prop_assert!(!windows.is_empty() && windows.len() as i64 <= n);
            for (s, e) in windows {
                prop_assert!(s <= t && t < e && e - s == size && s.rem_euclid(hop) == 0);
            }
        }
    }

    #[test]
    fn limits_of_windows_per_event_and_reach() {
        let year_of_seconds = WindowSpec::parse("hopping:365d/1s", TimeUnit::Seconds).unwrap();
        let err = year_of_seconds
            .check_windows_per_event(MAX_WINDOWS_PER_EVENT)
            .unwrap_err();
        assert!(err.contains("31536000 windows"), "{err}");
        let huge = WindowSpec::Hopping {
            size: i64::MAX,
            hop: 2,
        };
        assert_eq!(huge.windows_per_event(), i64::MAX / 2 + 1);
        assert!(!huge.reach().admits(1) && huge.reach().admits(0));
        assert_eq!(
            hopping(i64::MAX - 10, 10, 5).count(),
            2,
            "windows near the end of time are all listed"
        );
    }
}
