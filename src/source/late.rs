//! Late events under the `drop` policy: a per-partition watermark and the
//! filter that applies it.
//!
//! By default jobs *correct* for late events: a late event updates the
//! windows it belongs to, so a stream run ends with the batch run's result.
//! The cost is that no window is ever final, so its state is kept for ever.
//! Under `drop`, an event older than the watermark minus the allowed
//! lateness is dropped (counted, and logged with a rate limit), which lets a
//! job treat windows behind the watermark as closed.
//!
//! The watermark of a *partition* (a log partition, or one input file in a
//! batch run) is the largest event time read from it so far. It is a
//! function of the partition's order alone — never of how partitions
//! interleave, of epoch boundaries, or of worker count — so a stream run, a
//! restart (which replays each partition from its start) and `kappa table
//! verify` drop exactly the same events, and a batch run over a file drops
//! what a stream run over a one-partition topic produced from that file
//! drops. That is the whole of the equivalence `drop` keeps: results now
//! depend on the order of events within a partition, where `correct` results
//! depend on the events only.
//!
//! Only event inputs are filtered. Changelog topics are tables: their rows
//! are replaced by key, not placed in time.

use std::time::{Duration, Instant};

use crate::schema::LateRule;
use crate::value::{Row, Value};

/// How often a dropped event is logged at most, per partition.
const WARN_EVERY: Duration = Duration::from_secs(5);

/// Applies a [`LateRule`] to the rows of one partition, in order.
#[derive(Debug)]
pub struct LateFilter {
    rule: LateRule,
    watermark: Option<i64>,
    dropped: u64,
    /// Where the rows come from, for the warning.
    place: String,
    last_warning: Option<Instant>,
    unreported: u64,
}

impl LateFilter {
    /// A filter applying `rule`, with no watermark yet (nothing is late
    /// until a row has an event time); `place` names the partition in the
    /// warnings about dropped rows.
    pub fn new(rule: LateRule, place: String) -> LateFilter {
        LateFilter {
            rule,
            watermark: None,
            dropped: 0,
            place,
            last_warning: None,
            unreported: 0,
        }
    }

    /// Whether `row` is on time; advances the watermark. A row without an
    /// event time (null) cannot be late and does not move the watermark.
    pub fn admit(&mut self, row: &Row) -> bool {
        let Some(t) = event_time(&row[self.rule.column]) else {
            return true;
        };
        match self.watermark {
            Some(w) if t < w.saturating_sub(self.rule.lateness) => {
                self.dropped += 1;
                self.unreported += 1;
                if self
                    .last_warning
                    .is_none_or(|at| at.elapsed() >= WARN_EVERY)
                {
                    tracing::warn!(
                        "{}: dropped {} late event(s), the last at time {t} \
                         (watermark {w}, allowed lateness {}); {} dropped so far",
                        self.place,
                        self.unreported,
                        self.rule.lateness,
                        self.dropped
                    );
                    self.last_warning = Some(Instant::now());
                    self.unreported = 0;
                }
                false
            }
            Some(w) if w >= t => true,
            _ => {
                self.watermark = Some(t);
                true
            }
        }
    }

    /// Events dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The watermark and drop count: all the filter's decisions depend on
    /// (what a checkpoint keeps of it).
    pub fn state(&self) -> (Option<i64>, u64) {
        (self.watermark, self.dropped)
    }

    /// Goes on from a [`LateFilter::state`] taken earlier on the same
    /// partition, as if it had read everything before.
    pub fn restore(&mut self, (watermark, dropped): (Option<i64>, u64)) {
        self.watermark = watermark;
        self.dropped = dropped;
    }

    /// The lowest time an event read from now on can have and be admitted
    /// (`None` before the first timed event: anything goes).
    pub fn low_watermark(&self) -> Option<i64> {
        self.watermark.map(|w| w.saturating_sub(self.rule.lateness))
    }
}

/// A row's event time, in its column's unit: an integer as it is (the
/// built-in jobs' time columns), a timestamp in microseconds, a date as its
/// midnight's microseconds (SQL's event times); `None` for anything else.
fn event_time(v: &Value) -> Option<i64> {
    match *v {
        Value::Int(t) | Value::Timestamp(t) => Some(t),
        Value::Date(d) => Some(crate::calendar::date_to_timestamp(d)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitted(lateness: i64, times: &[Option<i64>]) -> Vec<Option<i64>> {
        let mut f = LateFilter::new(
            LateRule {
                column: 0,
                lateness,
            },
            "test".into(),
        );
        let kept = times
            .iter()
            .copied()
            .filter(|t| f.admit(&vec![t.map_or(Value::Null, Value::Int)]))
            .collect::<Vec<_>>();
        assert_eq!(f.dropped() as usize, times.len() - kept.len());
        kept
    }

    #[test]
    fn drops_events_older_than_watermark_minus_lateness() {
        let times = [
            Some(10),
            Some(5),
            Some(20),
            Some(15),
            Some(14),
            None,
            Some(30),
            Some(20),
        ];
        assert_eq!(
            admitted(5, &times),
            [Some(10), Some(5), Some(20), Some(15), None, Some(30)]
        );
        // Lateness 0 keeps ties with the watermark.
        assert_eq!(
            admitted(0, &[Some(3), Some(3), Some(2)]),
            [Some(3), Some(3)]
        );
        // A late event does not move the watermark back.
        assert_eq!(
            admitted(0, &[Some(9), Some(1), Some(8), Some(9)]),
            [Some(9), Some(9)]
        );
    }

    #[test]
    fn timestamps_and_dates_are_event_times_in_microseconds() {
        let day = crate::calendar::MICROS_PER_DAY;
        let mut f = LateFilter::new(
            LateRule {
                column: 0,
                lateness: day,
            },
            "test".into(),
        );
        assert!(f.admit(&vec![Value::Date(10)]));
        assert!(f.admit(&vec![Value::Timestamp(9 * day)]));
        assert!(!f.admit(&vec![Value::Timestamp(9 * day - 1)]));
        assert!(!f.admit(&vec![Value::Date(8)]));
        assert!(f.admit(&vec![Value::str("text is not a time")]));
        assert_eq!(f.low_watermark(), Some(9 * day));
    }
}
