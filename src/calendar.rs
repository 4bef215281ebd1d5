//! Dates and timestamps as SQL has them: ISO text in and out, interval
//! arithmetic, `EXTRACT` and `date_trunc` (the proleptic Gregorian calendar
//! is chrono's).
//!
//! A date is a count of days since 1970-01-01, a timestamp a count of
//! microseconds since 1970-01-01 00:00:00, without a time zone: text with an
//! offset (`Z`, `+02:00`) is converted to UTC when read, and every timestamp
//! is written as UTC.
//!
//! Invariants:
//! - Only years 1 to 9999 are dates or timestamps, so that every one is
//!   written as `YYYY-MM-DD[ HH:MM:SS[.ffffff]]` and the text order is the
//!   time order. A computation that leaves the range gives `None` (SQL's
//!   null, never a panic).
//! - Every function here is a function of its arguments alone — there is no
//!   "now" (rule 1: an output never depends on the clock).

use std::fmt;

use chrono::{Datelike, Days, Months, NaiveDate, NaiveDateTime, NaiveTime, Timelike};

/// Microseconds in a day.
pub const MICROS_PER_DAY: i64 = 86_400_000_000;

const EPOCH: NaiveDate = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();

/// A span of time as SQL's `INTERVAL` literals give it: months (whose length
/// depends on the date they are added to) and an exact number of
/// microseconds (days, hours, ... — days are 24 hours, there are no zones).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Interval {
    /// Whole months (a year is 12).
    pub months: i32,
    /// Exact microseconds.
    pub micros: i64,
}

impl Interval {
    /// The interval in the opposite direction; `None` if it does not fit.
    pub fn negated(self) -> Option<Interval> {
        Some(Interval {
            months: self.months.checked_neg()?,
            micros: self.micros.checked_neg()?,
        })
    }

    /// Multiplied by `n`; `None` if it does not fit.
    pub fn times(self, n: i64) -> Option<Interval> {
        Some(Interval {
            months: i32::try_from(i64::from(self.months).checked_mul(n)?).ok()?,
            micros: self.micros.checked_mul(n)?,
        })
    }
}

impl fmt::Display for Interval {
    /// PostgreSQL's form: `1 mon 2 days 03:04:05.5`, each part only when
    /// not zero (`00:00:00` for an empty interval).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.months != 0 {
            parts.push(format!("{} mon", self.months));
        }
        let days = self.micros / MICROS_PER_DAY;
        let rest = self.micros % MICROS_PER_DAY;
        if days != 0 {
            parts.push(format!("{days} days"));
        }
        if rest != 0 || parts.is_empty() {
            let sign = if rest < 0 { "-" } else { "" };
            let r = rest.unsigned_abs();
            let (h, m, s, us) = (
                r / 3_600_000_000,
                r / 60_000_000 % 60,
                r / 1_000_000 % 60,
                r % 1_000_000,
            );
            let mut clock = format!("{sign}{h:02}:{m:02}:{s:02}");
            if us != 0 {
                clock.push_str(format!(".{us:06}").trim_end_matches('0'));
            }
            parts.push(clock);
        }
        f.write_str(&parts.join(" "))
    }
}

/// The parts of a date or timestamp `EXTRACT` and `date_trunc` name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// The year.
    Year,
    /// 1 to 4.
    Quarter,
    /// 1 to 12.
    Month,
    /// The ISO week of the year (1 to 53).
    Week,
    /// The day of the month.
    Day,
    /// The day of the week, Sunday 0 to Saturday 6.
    DayOfWeek,
    /// The ISO day of the week, Monday 1 to Sunday 7.
    IsoDayOfWeek,
    /// The day of the year, from 1.
    DayOfYear,
    /// 0 to 23.
    Hour,
    /// 0 to 59.
    Minute,
    /// 0 to 59, whole seconds.
    Second,
    /// Milliseconds within the minute, seconds included (`SECOND` × 1000 + ms).
    Millisecond,
    /// Microseconds within the minute.
    Microsecond,
    /// Seconds since 1970-01-01 00:00:00.
    Epoch,
}

impl Field {
    /// The field a name (as `EXTRACT` or `date_trunc` spells it) means.
    pub fn by_name(name: &str) -> Option<Field> {
        Some(match name.to_ascii_lowercase().as_str() {
            "year" | "years" => Field::Year,
            "quarter" => Field::Quarter,
            "month" | "months" => Field::Month,
            "week" | "weeks" => Field::Week,
            "day" | "days" => Field::Day,
            "dow" | "dayofweek" => Field::DayOfWeek,
            "isodow" => Field::IsoDayOfWeek,
            "doy" | "dayofyear" => Field::DayOfYear,
            "hour" | "hours" => Field::Hour,
            "minute" | "minutes" => Field::Minute,
            "second" | "seconds" => Field::Second,
            "millisecond" | "milliseconds" => Field::Millisecond,
            "microsecond" | "microseconds" => Field::Microsecond,
            "epoch" => Field::Epoch,
            _ => return None,
        })
    }
}

fn in_range(d: NaiveDate) -> bool {
    (1..=9999).contains(&d.year())
}

fn date_of_days(days: i32) -> Option<NaiveDate> {
    let d = EPOCH.checked_add_signed(chrono::TimeDelta::try_days(i64::from(days))?)?;
    in_range(d).then_some(d)
}

fn days_of(d: NaiveDate) -> Option<i32> {
    in_range(d).then(|| (d - EPOCH).num_days() as i32)
}

fn datetime_of(micros: i64) -> Option<NaiveDateTime> {
    let days = micros.div_euclid(MICROS_PER_DAY);
    let within = micros.rem_euclid(MICROS_PER_DAY);
    let date = date_of_days(i32::try_from(days).ok()?)?;
    let time = NaiveTime::from_num_seconds_from_midnight_opt(
        (within / 1_000_000) as u32,
        (within % 1_000_000) as u32 * 1000,
    )?;
    Some(date.and_time(time))
}

fn micros_of(t: NaiveDateTime) -> Option<i64> {
    let days = i64::from(days_of(t.date())?);
    let time = t.time();
    let within = i64::from(time.num_seconds_from_midnight()) * 1_000_000
        + i64::from(time.nanosecond() / 1000);
    Some(days * MICROS_PER_DAY + within)
}

/// Whether `days` is a date kappa holds (years 1 to 9999).
pub fn date_valid(days: i32) -> bool {
    date_of_days(days).is_some()
}

/// Whether `micros` is a timestamp kappa holds (years 1 to 9999).
pub fn timestamp_valid(micros: i64) -> bool {
    datetime_of(micros).is_some()
}

/// The date `year-month-day`, if there is one.
pub fn date_from_ymd(year: i32, month: u32, day: u32) -> Option<i32> {
    days_of(NaiveDate::from_ymd_opt(year, month, day)?)
}

/// A date from `YYYY-MM-DD` text (surrounding spaces allowed).
pub fn parse_date(text: &str) -> Option<i32> {
    let t = text.trim();
    if t.len() != 10 {
        return None;
    }
    days_of(NaiveDate::parse_from_str(t, "%Y-%m-%d").ok()?)
}

/// A timestamp from ISO text: `YYYY-MM-DD`, then optionally `T` or a space
/// and `HH:MM[:SS[.fraction]]`, then optionally a UTC offset (`Z`, `±HH`,
/// `±HH:MM`, `±HHMM`), which is applied. Digits beyond microseconds are
/// dropped.
pub fn parse_timestamp(text: &str) -> Option<i64> {
    let t = text.trim();
    let date = days_of(NaiveDate::parse_from_str(t.get(..10)?, "%Y-%m-%d").ok()?)?;
    let rest = &t[10..];
    if rest.is_empty() {
        return Some(i64::from(date) * MICROS_PER_DAY);
    }
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let (clock, offset) = split_offset(rest)?;
    let time = NaiveTime::parse_from_str(clock, "%H:%M:%S%.f")
        .or_else(|_| NaiveTime::parse_from_str(clock, "%H:%M"))
        .ok()?;
    let date = date_of_days(date)?;
    let local = micros_of(date.and_time(time))?;
    let utc = local.checked_sub(offset)?;
    timestamp_valid(utc).then_some(utc)
}

/// Splits `HH:MM...` from a trailing UTC offset, returned in microseconds.
fn split_offset(s: &str) -> Option<(&str, i64)> {
    if let Some(clock) = s.strip_suffix(['Z', 'z']) {
        return Some((clock, 0));
    }
    let Some(at) = s.rfind(['+', '-']) else {
        return Some((s, 0));
    };
    let (clock, zone) = s.split_at(at);
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    let digits: String = zone[1..].chars().filter(|c| *c != ':').collect();
    if !digits.bytes().all(|b| b.is_ascii_digit()) || !matches!(digits.len(), 2 | 4) {
        return None;
    }
    let hours: i64 = digits[..2].parse().ok()?;
    let minutes: i64 = if digits.len() == 4 {
        digits[2..].parse().ok()?
    } else {
        0
    };
    if hours > 23 || minutes > 59 {
        return None;
    }
    Some((clock, sign * (hours * 60 + minutes) * 60_000_000))
}

/// Writes a date as `YYYY-MM-DD`.
pub fn write_date(days: i32, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match date_of_days(days) {
        Some(d) => write!(f, "{:04}-{:02}-{:02}", d.year(), d.month(), d.day()),
        // Not made by kappa (every constructor checks the range).
        None => write!(f, "date#{days}"),
    }
}

/// Writes a timestamp as `YYYY-MM-DD HH:MM:SS`, with the fraction of a
/// second after a `.` when there is one (trailing zeros dropped, as
/// PostgreSQL writes it).
pub fn write_timestamp(micros: i64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let Some(t) = datetime_of(micros) else {
        return write!(f, "timestamp#{micros}");
    };
    write!(
        f,
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )?;
    let fraction = t.nanosecond() / 1000;
    if fraction != 0 {
        let digits = format!("{fraction:06}");
        write!(f, ".{}", digits.trim_end_matches('0'))?;
    }
    Ok(())
}

/// The timestamp `micros` plus `by`; months are added first, a day past the
/// end of the month becoming its last day (Jan 31 + 1 month = Feb 28/29).
pub fn add_to_timestamp(micros: i64, by: Interval) -> Option<i64> {
    let t = datetime_of(micros)?;
    let t = if by.months >= 0 {
        t.checked_add_months(Months::new(by.months as u32))?
    } else {
        t.checked_sub_months(Months::new(by.months.unsigned_abs()))?
    };
    let shifted = micros_of(t)?.checked_add(by.micros)?;
    timestamp_valid(shifted).then_some(shifted)
}

/// The date `days` plus `n` days.
pub fn add_days(days: i32, n: i64) -> Option<i32> {
    let d = date_of_days(days)?;
    let d = if n >= 0 {
        d.checked_add_days(Days::new(n as u64))?
    } else {
        d.checked_sub_days(Days::new(n.unsigned_abs()))?
    };
    days_of(d)
}

/// A date as the timestamp of its midnight (saturating for a day count no
/// date has, so comparing such a hand-made value cannot overflow).
pub fn date_to_timestamp(days: i32) -> i64 {
    i64::from(days).saturating_mul(MICROS_PER_DAY)
}

/// The date of a timestamp.
pub fn timestamp_to_date(micros: i64) -> i32 {
    micros.div_euclid(MICROS_PER_DAY) as i32
}

/// `EXTRACT(field FROM t)` of a timestamp (`Epoch` in whole seconds,
/// rounded down; [`epoch_seconds`] keeps the fraction).
pub fn extract(field: Field, micros: i64) -> Option<i64> {
    let t = datetime_of(micros)?;
    Some(match field {
        Field::Year => i64::from(t.year()),
        Field::Quarter => i64::from((t.month() - 1) / 3 + 1),
        Field::Month => i64::from(t.month()),
        Field::Week => i64::from(t.iso_week().week()),
        Field::Day => i64::from(t.day()),
        Field::DayOfWeek => i64::from(t.weekday().num_days_from_sunday()),
        Field::IsoDayOfWeek => i64::from(t.weekday().number_from_monday()),
        Field::DayOfYear => i64::from(t.ordinal()),
        Field::Hour => i64::from(t.hour()),
        Field::Minute => i64::from(t.minute()),
        Field::Second => i64::from(t.second()),
        Field::Millisecond => i64::from(t.second()) * 1000 + i64::from(t.nanosecond() / 1_000_000),
        Field::Microsecond => i64::from(t.second()) * 1_000_000 + i64::from(t.nanosecond() / 1000),
        Field::Epoch => micros.div_euclid(1_000_000),
    })
}

/// Seconds since the epoch, with the fraction: an integer when whole.
pub fn epoch_seconds(micros: i64) -> Result<i64, f64> {
    if micros % 1_000_000 == 0 {
        Ok(micros / 1_000_000)
    } else {
        Err(micros as f64 / 1e6)
    }
}

/// `date_trunc(field, t)`: the start of the year, quarter, month, ISO week,
/// day, hour, minute or second `t` is in; `None` for other fields.
pub fn truncate(field: Field, micros: i64) -> Option<i64> {
    let t = datetime_of(micros)?;
    let day = t.date();
    let start_of = |d: NaiveDate| micros_of(d.and_time(NaiveTime::MIN));
    let unit = |u: i64| Some(micros - micros.rem_euclid(u));
    match field {
        Field::Year => start_of(NaiveDate::from_ymd_opt(t.year(), 1, 1)?),
        Field::Quarter => start_of(NaiveDate::from_ymd_opt(
            t.year(),
            (t.month() - 1) / 3 * 3 + 1,
            1,
        )?),
        Field::Month => start_of(NaiveDate::from_ymd_opt(t.year(), t.month(), 1)?),
        Field::Week => start_of(day - Days::new(u64::from(t.weekday().num_days_from_monday()))),
        Field::Day => unit(MICROS_PER_DAY),
        Field::Hour => unit(3_600_000_000),
        Field::Minute => unit(60_000_000),
        Field::Second => unit(1_000_000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Ts(i64);
    impl fmt::Display for Ts {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write_timestamp(self.0, f)
        }
    }
    struct D(i32);
    impl fmt::Display for D {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write_date(self.0, f)
        }
    }

    #[test]
    fn dates_read_and_write_as_iso_text() {
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("1969-12-31"), Some(-1));
        let d = parse_date("1994-02-28").unwrap();
        assert_eq!(D(d).to_string(), "1994-02-28");
        assert_eq!(D(add_days(d, 1).unwrap()).to_string(), "1994-03-01");
        for bad in [
            "1994-02-29",
            "1994-2-1",
            "94-02-01",
            "1994-13-01",
            "x",
            "0000-01-01",
        ] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
        assert_eq!(
            D(parse_date("9999-12-31").unwrap()).to_string(),
            "9999-12-31"
        );
        assert_eq!(add_days(parse_date("9999-12-31").unwrap(), 1), None);
    }

    #[test]
    fn timestamps_take_iso_forms_and_offsets() {
        let t = parse_timestamp("2024-03-01 10:20:30").unwrap();
        assert_eq!(Ts(t).to_string(), "2024-03-01 10:20:30");
        assert_eq!(parse_timestamp("2024-03-01T10:20:30Z"), Some(t));
        assert_eq!(parse_timestamp("2024-03-01T12:20:30+02:00"), Some(t));
        assert_eq!(parse_timestamp("2024-03-01T09:20:30-0100"), Some(t));
        assert_eq!(parse_timestamp("2024-03-01 10:20"), Some(t - 30_000_000));
        let frac = parse_timestamp("2024-03-01 10:20:30.5").unwrap();
        assert_eq!(Ts(frac).to_string(), "2024-03-01 10:20:30.5");
        assert_eq!(
            Ts(parse_timestamp("1969-12-31 23:59:59.000001").unwrap()).to_string(),
            "1969-12-31 23:59:59.000001"
        );
        assert_eq!(
            parse_timestamp("2024-03-01"),
            Some(t - (10 * 3600 + 20 * 60 + 30) * 1_000_000)
        );
        for bad in [
            "2024-03-01 25:00:00",
            "2024-03-01X10:00",
            "2024-03-01 10:00:00+2",
            "yesterday",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
    }

    #[test]
    fn months_clamp_to_the_end_of_the_month() {
        let jan31 = date_to_timestamp(parse_date("2024-01-31").unwrap());
        let month = Interval {
            months: 1,
            micros: 0,
        };
        assert_eq!(
            Ts(add_to_timestamp(jan31, month).unwrap()).to_string(),
            "2024-02-29 00:00:00"
        );
        let back = month.negated().unwrap().times(12).unwrap();
        assert_eq!(
            Ts(add_to_timestamp(jan31, back).unwrap()).to_string(),
            "2023-01-31 00:00:00"
        );
        let odd = Interval {
            months: 14,
            micros: 2 * MICROS_PER_DAY + 3_723_500_000,
        };
        assert_eq!(odd.to_string(), "14 mon 2 days 01:02:03.5");
        assert_eq!(Interval::default().to_string(), "00:00:00");
        assert_eq!(month.negated().unwrap().to_string(), "-1 mon");
    }

    #[test]
    fn extract_and_truncate() {
        let t = parse_timestamp("2024-05-19 13:45:07.25").unwrap(); // a Sunday
        let get = |f| extract(f, t).unwrap();
        assert_eq!(
            [
                get(Field::Year),
                get(Field::Quarter),
                get(Field::Month),
                get(Field::Day)
            ],
            [2024, 2, 5, 19]
        );
        assert_eq!(
            [
                get(Field::DayOfWeek),
                get(Field::IsoDayOfWeek),
                get(Field::DayOfYear)
            ],
            [0, 7, 140]
        );
        assert_eq!(
            [
                get(Field::Hour),
                get(Field::Minute),
                get(Field::Second),
                get(Field::Millisecond)
            ],
            [13, 45, 7, 7250]
        );
        assert_eq!(get(Field::Week), 20);
        assert_eq!(epoch_seconds(t), Err(1716126307.25));
        assert_eq!(epoch_seconds(0), Ok(0));
        let trunc = |f| Ts(truncate(f, t).unwrap()).to_string();
        assert_eq!(trunc(Field::Year), "2024-01-01 00:00:00");
        assert_eq!(trunc(Field::Quarter), "2024-04-01 00:00:00");
        assert_eq!(trunc(Field::Week), "2024-05-13 00:00:00");
        assert_eq!(trunc(Field::Hour), "2024-05-19 13:00:00");
        assert_eq!(truncate(Field::Epoch, t), None);
        assert_eq!(
            extract(Field::Year, parse_timestamp("1969-12-31 23:00:00").unwrap()),
            Some(1969)
        );
    }
}
