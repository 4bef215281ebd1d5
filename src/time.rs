//! Event time: timestamps in row fields, their units, and durations.
//!
//! A log record's event time is an `i64` of milliseconds since the Unix
//! epoch. Producers take it from a column holding either an integer (already epoch
//! ms) or an RFC 3339 timestamp, `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)` (`t` or
//! a space may stand for `T`, `z` for `Z`; digits past milliseconds are
//! truncated). The parser is written by hand — a few dozen lines — rather
//! than pulling in a date crate for this one format; it validates every
//! field, so `2024-02-30T00:00:00Z` is an error, not March 1st.

use serde::{Deserialize, Serialize};

/// The unit of an integer timestamp column (and of durations over it).
///
/// Jobs keep event time as a plain integer column in this unit; RFC 3339
/// text in such a column is converted to it (rounding down to whole seconds
/// for [`TimeUnit::Seconds`]), so windows and lateness are integer
/// arithmetic and a function of the data only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TimeUnit {
    /// Milliseconds since the Unix epoch (`ms`).
    Millis,
    /// Seconds since the Unix epoch (`s`).
    Seconds,
}

impl TimeUnit {
    /// `ms` or `s`.
    pub fn parse(text: &str) -> Result<TimeUnit, String> {
        match text {
            "ms" => Ok(TimeUnit::Millis),
            "s" => Ok(TimeUnit::Seconds),
            _ => Err(format!("unknown time unit {text:?} (ms or s)")),
        }
    }

    /// Milliseconds per unit.
    fn millis(self) -> i64 {
        match self {
            TimeUnit::Millis => 1,
            TimeUnit::Seconds => 1000,
        }
    }

    /// A field's text as a timestamp in this unit: an integer as it is, or
    /// an RFC 3339 timestamp converted.
    pub fn parse_timestamp(self, text: &str) -> Result<i64, String> {
        let t = text.trim();
        let digits = t.strip_prefix('-').unwrap_or(t);
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            return t
                .parse::<i64>()
                .map_err(|_| format!("{text:?} does not fit in a 64-bit timestamp"));
        }
        match parse_rfc3339(t) {
            Some(ms) => Ok(ms.div_euclid(self.millis())),
            None => Err(format!(
                "expected a timestamp (integer epoch {self} or RFC 3339 \
                 YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)), found {text:?}"
            )),
        }
    }
}

impl std::fmt::Display for TimeUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimeUnit::Millis => "milliseconds",
            TimeUnit::Seconds => "seconds",
        })
    }
}

/// A duration in `unit`: a number with a suffix `ms`, `s`, `m`, `h` or `d`
/// (`10m`, `1h`, `500ms`), or a bare integer already in `unit`. A duration
/// that is not a whole number of units (`500ms` in seconds) is an error.
pub fn parse_duration(text: &str, unit: TimeUnit) -> Result<i64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, suffix) = t.split_at(split);
    let n: i64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. 90s, 10m, 2h, 1d, 500ms)"))?;
    let millis_per = match suffix {
        "" => return Ok(n),
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => {
            return Err(format!(
                "unknown unit {suffix:?} in duration {text:?} (ms, s, m, h, d)"
            ));
        }
    };
    let ms = n
        .checked_mul(millis_per)
        .ok_or_else(|| format!("duration {text:?} is too long"))?;
    if ms % unit.millis() != 0 {
        return Err(format!("duration {text:?} is not a whole number of {unit}"));
    }
    Ok(ms / unit.millis())
}

/// Parses a field's text as epoch ms or an RFC 3339 timestamp.
pub fn parse_event_time(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let digits = t.strip_prefix('-').unwrap_or(t);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return t
            .parse::<i64>()
            .map_err(|_| format!("{text:?} does not fit in 64-bit epoch milliseconds"));
    }
    parse_rfc3339(t).ok_or_else(|| {
        format!(
            "{text:?} is neither epoch milliseconds nor an RFC 3339 timestamp \
             (YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM))"
        )
    })
}

/// The event time in a JSON value: an integer (epoch ms) or a string.
pub fn event_time_from_json(json: &serde_json::Value) -> Result<i64, String> {
    match json {
        serde_json::Value::Number(n) => n
            .as_i64()
            .ok_or_else(|| format!("{n} is not an integer number of epoch milliseconds")),
        serde_json::Value::String(s) => parse_event_time(s),
        other => Err(format!("{other} is not a timestamp")),
    }
}

/// Epoch milliseconds of an RFC 3339 timestamp (`T`, `t` or a space
/// between date and time; `Z` or `±HH:MM` required; digits beyond
/// milliseconds dropped; a leap second counts as the next minute's 0).
fn parse_rfc3339(s: &str) -> Option<i64> {
    let t = chrono::DateTime::parse_from_rfc3339(&s.to_ascii_uppercase()).ok()?;
    Some(t.timestamp_millis())
}

/// Unix ms as `2026-11-29 08:56:03` (UTC), or `-`.
pub fn format_unix_ms(ms: Option<i64>) -> String {
    let Some(ms) = ms else { return "-".into() };
    match chrono::DateTime::from_timestamp_millis(ms) {
        Some(t) => t.format("%Y-%m-%d %H:%M:%S").to_string(),
        None => format!("{ms} ms"),
    }
}

/// `1h02m`, `3m20s`, `12s`, `<1s`.
pub fn format_duration(d: std::time::Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => "<1s".into(),
        1..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn times_and_durations_read_well() {
        assert_eq!(format_unix_ms(Some(0)), "1970-01-01 00:00:00");
        assert_eq!(
            format_unix_ms(Some(1_795_946_163_000)),
            "2026-11-29 09:56:03"
        );
        assert_eq!(format_unix_ms(None), "-");
        assert_eq!(
            format_duration(std::time::Duration::from_millis(300)),
            "<1s"
        );
        assert_eq!(
            format_duration(std::time::Duration::from_secs(200)),
            "3m20s"
        );
        assert_eq!(
            format_duration(std::time::Duration::from_secs(3720)),
            "1h02m"
        );
    }

    #[test]
    fn epoch_millis_and_rfc3339() {
        assert_eq!(parse_event_time("1700000000123"), Ok(1_700_000_000_123));
        assert_eq!(parse_event_time("-5"), Ok(-5));
        assert_eq!(parse_event_time("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(
            parse_event_time("2023-11-14T22:13:20.123Z"),
            Ok(1_700_000_000_123)
        );
        assert_eq!(
            parse_event_time("2023-11-15T00:13:20.1234567+02:00"),
            Ok(1_700_000_000_123)
        );
        assert_eq!(
            parse_event_time("2023-11-14 21:13:20.5-01:00"),
            Ok(1_700_000_000_500)
        );
        assert_eq!(
            parse_event_time("2000-02-29t00:00:00z"),
            Ok(951_782_400_000)
        );
        assert_eq!(parse_event_time("1969-12-31T23:59:59.999Z"), Ok(-1));
    }

    #[test]
    fn invalid_timestamps_are_errors() {
        for bad in [
            "",
            "x",
            "1.5",
            "2023-02-29T00:00:00Z",
            "2023-13-01T00:00:00Z",
            "2023-01-01T24:00:00Z",
            "2023-01-01T00:00:00",
            "2023-01-01T00:00:00.Z",
            "2023-01-01T00:00:00+0100",
            "2023-01-01T00:00:00Zjunk",
            "99999999999999999999",
        ] {
            assert!(parse_event_time(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn units_and_durations() {
        let s = TimeUnit::Seconds;
        assert_eq!(s.parse_timestamp("1700000000"), Ok(1_700_000_000));
        assert_eq!(
            s.parse_timestamp("2023-11-14T22:13:20.999Z"),
            Ok(1_700_000_000)
        );
        assert_eq!(s.parse_timestamp("1969-12-31T23:59:59.5Z"), Ok(-1));
        assert!(
            s.parse_timestamp("soon")
                .unwrap_err()
                .contains("epoch seconds")
        );
        assert_eq!(
            TimeUnit::Millis.parse_timestamp("1970-01-01T00:00:01Z"),
            Ok(1000)
        );
        assert_eq!(parse_duration("10m", TimeUnit::Millis), Ok(600_000));
        assert_eq!(parse_duration("10m", s), Ok(600));
        assert_eq!(parse_duration("90", s), Ok(90));
        assert_eq!(parse_duration("1d", s), Ok(86_400));
        assert!(parse_duration("500ms", s).is_err());
        assert!(parse_duration("5x", s).is_err());
        assert!(parse_duration("-5s", s).is_err());
        assert!(parse_duration("", s).is_err());
    }

    #[test]
    fn json_values() {
        use serde_json::json;
        assert_eq!(event_time_from_json(&json!(42)), Ok(42));
        assert_eq!(
            event_time_from_json(&json!("1970-01-01T00:00:01Z")),
            Ok(1000)
        );
        assert!(event_time_from_json(&json!(1.5)).is_err());
        assert!(event_time_from_json(&json!(true)).is_err());
    }
}
