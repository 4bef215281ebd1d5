//! Column types and the schemas of a job's inputs and outputs.
//!
//! A job never sees raw text: the source layer turns each field into a
//! [`Value`] according to the [`ColumnType`] the job's
//! plan asked for, and reports a field that does not fit as a bad row naming
//! its file, line and column. Rows reach the job *projected*: only the columns
//! its plan reads, in the order it asked for them.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::time::TimeUnit;
use crate::value::Value;

/// How a field's text becomes a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ColumnType {
    /// Inferred per value: integer, float or string (see [`Value::infer`]).
    Any,
    /// A 64-bit integer.
    Int,
    /// A float; integers are widened.
    Float,
    /// An integer or a float.
    Number,
    /// The text as it is, never a number.
    Str,
    /// `true` or `false` (also `t`/`f`, `yes`/`no`, `on`/`off`, `1`/`0`, any case).
    Bool,
    /// A date, `YYYY-MM-DD` ([`crate::calendar::parse_date`]).
    Date,
    /// A timestamp, ISO text with an optional UTC offset
    /// ([`crate::calendar::parse_timestamp`]); a date is its midnight.
    Timestamp,
    /// An event timestamp: an integer in the unit, or RFC 3339 text
    /// converted to it (see [`TimeUnit::parse_timestamp`]); always an `Int`,
    /// and at least [`Reach`] away from both ends of the `i64` range.
    Time(TimeUnit, Reach),
}

/// How far the bounds a job derives from an event time (window ends,
/// session ends, join intervals) lie from it, in the time's unit. A time
/// closer than this to `i64::MIN` or `i64::MAX` is a bad row, so that the
/// job's time arithmetic can never overflow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reach(pub i64);

impl Reach {
    /// Whether `t` and every bound within the reach of it fit in an `i64`.
    pub fn admits(self, t: i64) -> bool {
        t.checked_sub(self.0).is_some() && t.checked_add(self.0).is_some()
    }
}

impl ColumnType {
    /// A timestamp in `unit` with no bounds derived from it.
    pub fn time(unit: TimeUnit) -> ColumnType {
        ColumnType::Time(unit, Reach::default())
    }

    /// Converts a non-null field's text, or says why it does not fit.
    pub fn parse(self, text: &str) -> Result<Value, String> {
        let v = match self {
            ColumnType::Str => return Ok(Value::str(text)),
            ColumnType::Bool => {
                return parse_bool(text)
                    .map(Value::Bool)
                    .ok_or_else(|| self.mismatch(text));
            }
            ColumnType::Date => {
                return crate::calendar::parse_date(text)
                    .map(Value::Date)
                    .ok_or_else(|| self.mismatch(text));
            }
            ColumnType::Timestamp => {
                return crate::calendar::parse_timestamp(text)
                    .map(Value::Timestamp)
                    .ok_or_else(|| self.mismatch(text));
            }
            ColumnType::Time(unit, reach) => {
                return unit
                    .parse_timestamp(text)
                    .and_then(|t| reach_check(t, reach))
                    .map(Value::Int);
            }
            _ => Value::infer(text),
        };
        match (self, &v) {
            (ColumnType::Any, _) => Ok(v),
            (ColumnType::Int, Value::Int(_)) => Ok(v),
            (ColumnType::Number, Value::Int(_) | Value::Float(_)) => Ok(v),
            (ColumnType::Float, Value::Int(i)) => Ok(Value::float(*i as f64)),
            (ColumnType::Float, Value::Float(_)) => Ok(v),
            _ => Err(self.mismatch(text)),
        }
    }

    /// [`ColumnType::parse`] of a field's bytes. An integer's text is
    /// ASCII, so where an integer is what the type tries first it is typed
    /// without a UTF-8 check of the bytes (every numeric field of every CSV
    /// row comes through here); anything else is checked, then parsed.
    pub fn parse_bytes(self, bytes: &[u8]) -> Result<Value, String> {
        if matches!(self, ColumnType::Any | ColumnType::Int | ColumnType::Number)
            && let Some(i) = crate::value::parse_canonical_int(bytes)
        {
            return Ok(Value::Int(i));
        }
        let text = std::str::from_utf8(bytes).map_err(|_| "invalid UTF-8".to_string())?;
        self.parse(text)
    }

    /// [`ColumnType::parse`] of an integer's canonical text, given the
    /// integer: no text is made where the type takes the integer as it is.
    pub fn parse_int(self, i: i64) -> Result<Value, String> {
        match self {
            ColumnType::Any | ColumnType::Int | ColumnType::Number => Ok(Value::Int(i)),
            ColumnType::Float => Ok(Value::float(i as f64)),
            ColumnType::Time(_, reach) => reach_check(i, reach).map(Value::Int),
            _ => self.parse(itoa::Buffer::new().format(i)),
        }
    }

    fn mismatch(self, text: &str) -> String {
        format!("expected {self}, found {text:?}")
    }

    /// Converts a value that arrived already typed (a JSON number or string).
    pub fn coerce(self, v: Value) -> Result<Value, String> {
        match (self, &v) {
            (_, Value::Null) | (ColumnType::Any, _) => Ok(v),
            (ColumnType::Str, Value::Str(_)) => Ok(v),
            (ColumnType::Str, _) => Ok(Value::str(&v.to_string())),
            (_, Value::Str(s)) => self.parse(s),
            (ColumnType::Time(_, reach), Value::Int(t)) => reach_check(*t, reach).map(Value::Int),
            (ColumnType::Int, Value::Int(_))
            | (ColumnType::Number, Value::Int(_) | Value::Float(_))
            | (ColumnType::Bool, Value::Bool(_))
            | (ColumnType::Date, Value::Date(_))
            | (ColumnType::Timestamp, Value::Timestamp(_)) => Ok(v),
            (ColumnType::Float, Value::Int(_) | Value::Float(_)) => {
                Ok(Value::float(v.as_f64().unwrap_or_default()))
            }
            (ColumnType::Timestamp, Value::Date(d)) => {
                Ok(Value::Timestamp(crate::calendar::date_to_timestamp(*d)))
            }
            _ => Err(format!("expected {self}, found {v}")),
        }
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ColumnType::Any => "any",
            ColumnType::Int => "an integer",
            ColumnType::Float => "a float",
            ColumnType::Number => "a number",
            ColumnType::Str => "a string",
            ColumnType::Bool => "a boolean",
            ColumnType::Date => "a date (YYYY-MM-DD)",
            ColumnType::Timestamp => "a timestamp (YYYY-MM-DD HH:MM:SS)",
            ColumnType::Time(..) => "a timestamp",
        })
    }
}

/// PostgreSQL's boolean text, in any case and with spaces around:
/// `true`/`false`, `t`/`f`, `yes`/`no`, `y`/`n`, `on`/`off`, `1`/`0`.
pub fn parse_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "t" | "yes" | "y" | "on" | "1" => Some(true),
        "false" | "f" | "no" | "n" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// `t`, unless the bounds within `reach` of it do not fit in an `i64`.
fn reach_check(t: i64, reach: Reach) -> Result<i64, String> {
    if reach.admits(t) {
        return Ok(t);
    }
    Err(format!(
        "timestamp {t} is too close to the limit of 64-bit time: the job's windows reach {} \
         from it, which does not fit",
        reach.0
    ))
}

/// The columns an input actually has (from a CSV header, JSON keys or a topic).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputSchema {
    /// The job's name for the input (`left`, `events`, ...).
    pub name: String,
    /// The column names, in the order the files or records carry them.
    pub columns: Vec<String>,
}

impl InputSchema {
    /// The position of a column, or a plan error listing the columns there are.
    pub fn index(&self, column: &str) -> Result<usize, UnknownColumn> {
        self.columns
            .iter()
            .position(|c| c == column)
            .ok_or_else(|| UnknownColumn {
                input: self.name.clone(),
                column: column.to_string(),
                available: self.columns.join(","),
            })
    }
}

/// What a job reads from one input: source column positions and their types,
/// in the order the job's rows carry them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Projection {
    /// The input projected (its name in the job's spec).
    pub input: String,
    /// Per column of the job's rows: the input column it comes from (its
    /// position in [`InputSchema::columns`]) and the type it is read as.
    pub columns: Vec<(usize, ColumnType)>,
    /// Under the `drop` late-event policy, the rule the source applies to
    /// this input's rows in partition order (see [`crate::source::late`]).
    pub late: Option<LateRule>,
    /// Per projected column, what its values must be besides their type
    /// (a typed input's fields: present, in range); empty: no rules. A row
    /// that breaks one is a bad row, located by the source.
    pub rules: Vec<ValueRule>,
}

impl Projection {
    /// Every column, inferred.
    pub fn all(schema: &InputSchema) -> Self {
        Projection {
            input: schema.name.clone(),
            columns: (0..schema.columns.len())
                .map(|i| (i, ColumnType::Any))
                .collect(),
            late: None,
            rules: Vec::new(),
        }
    }

    /// The named columns, with their types, in the given order.
    pub fn named(
        schema: &InputSchema,
        columns: &[(&str, ColumnType)],
    ) -> Result<Self, UnknownColumn> {
        let columns = columns
            .iter()
            .map(|(name, ty)| Ok((schema.index(name)?, *ty)))
            .collect::<Result<_, _>>()?;
        Ok(Projection {
            input: schema.name.clone(),
            columns,
            late: None,
            rules: Vec::new(),
        })
    }

    /// Why the projected `row` breaks a rule, with the source column it
    /// came from, if it does.
    pub fn check(&self, row: &[Value]) -> Result<(), (usize, String)> {
        for ((rule, value), (col, _)) in self.rules.iter().zip(row).zip(&self.columns) {
            rule.check(value).map_err(|e| (*col, e))?;
        }
        Ok(())
    }

    /// Position, within the projected row, of source column `source`.
    pub fn position_of(&self, source: usize) -> Option<usize> {
        self.columns.iter().position(|(i, _)| *i == source)
    }
}

/// The `drop` policy for one input: which projected column holds the event
/// time, and how far behind the watermark an event may be (applied by
/// [`crate::source::late`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LateRule {
    /// Position of the event-time column in the projected row.
    pub column: usize,
    /// Allowed lateness, in the time column's unit.
    pub lateness: i64,
}

/// What a field's value must be besides its column type: present (a field
/// that is not an `Option`), and within the range of its integer type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueRule {
    /// Null is not a value of this field.
    pub required: bool,
    /// For an integer field, the values its type holds.
    pub range: Option<(i64, i64)>,
}

impl ValueRule {
    /// Why `value` is not one of this field's values, if it is not.
    pub fn check(&self, value: &Value) -> Result<(), String> {
        match (value, self.range) {
            (Value::Null, _) if self.required => {
                Err("empty, but the job needs a value here".into())
            }
            (Value::Int(i), Some((min, max))) if *i < min || *i > max => {
                Err(format!("{i} is out of range ({min} to {max})"))
            }
            _ => Ok(()),
        }
    }
}

/// A column asked for that the input does not have.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("input {input} has no column {column:?} (its columns: {available})")]
pub struct UnknownColumn {
    /// The input.
    pub input: String,
    /// The column asked for.
    pub column: String,
    /// The input's columns.
    pub available: String,
}

/// A job output as planned: its columns and the columns that form its key
/// (unique in the output; tables use them as the primary key).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputSchema {
    /// The output's name: its file (`NAME.csv`) and its table.
    pub name: String,
    /// The column names, in the order the output's rows carry them.
    pub columns: Vec<String>,
    /// The positions in `columns` of the key columns.
    pub key: Vec<usize>,
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Typing a field's bytes is typing its text, for every type; bytes
        /// that are not UTF-8 (never an integer) are the UTF-8 error.
        #[test]
        fn parse_bytes_is_parse_of_the_text(
            bytes in prop::collection::vec(
                prop_oneof![Just(b'0'), Just(b'1'), Just(b'9'), Just(b'-'), Just(b'.'),
                            Just(b'e'), Just(b'a'), Just(b't'), Just(0xc3), Just(0xa9), Just(0xff)],
                0..8,
            )
        ) {
            let types = [ColumnType::Any, ColumnType::Int, ColumnType::Float, ColumnType::Number,
                         ColumnType::Str, ColumnType::Bool, ColumnType::Date, ColumnType::Timestamp,
                         ColumnType::Time(TimeUnit::Millis, Reach(10))];
            for ty in types {
                let expected = match std::str::from_utf8(&bytes) {
                    Ok(text) => ty.parse(text),
                    Err(_) => Err("invalid UTF-8".to_string()),
                };
                prop_assert_eq!(ty.parse_bytes(&bytes), expected, "{}", ty);
            }
        }

        /// Typing an integer is typing its canonical text, for every type.
        #[test]
        fn parse_int_is_parse_of_the_text(
            i in prop_oneof![any::<i64>(), -3i64..3, Just(i64::MIN), Just(i64::MAX - 5)],
        ) {
            let types = [ColumnType::Any, ColumnType::Int, ColumnType::Float, ColumnType::Number,
                         ColumnType::Str, ColumnType::Bool, ColumnType::Date, ColumnType::Timestamp,
                         ColumnType::Time(TimeUnit::Millis, Reach(10)),
                         ColumnType::Time(TimeUnit::Seconds, Reach(0))];
            for ty in types {
                prop_assert_eq!(ty.parse_int(i), ty.parse(&i.to_string()), "{}", ty);
            }
        }
    }

    #[test]
    fn parse_checks_declared_types() {
        assert_eq!(ColumnType::Int.parse("12"), Ok(Value::Int(12)));
        assert!(ColumnType::Int.parse("1.5").is_err());
        assert_eq!(ColumnType::Float.parse("2"), Ok(Value::float(2.0)));
        assert!(
            ColumnType::Number
                .parse("x")
                .unwrap_err()
                .contains("expected a number")
        );
        assert_eq!(ColumnType::Str.parse("12"), Ok(Value::str("12")));
        assert_eq!(ColumnType::Any.parse("007"), Ok(Value::str("007")));
        assert_eq!(ColumnType::Bool.parse("TRUE"), Ok(Value::Bool(true)));
        assert_eq!(ColumnType::Bool.parse("0"), Ok(Value::Bool(false)));
        assert_eq!(ColumnType::Bool.parse(" Off "), Ok(Value::Bool(false)));
        assert!(
            ColumnType::Bool
                .parse("maybe")
                .unwrap_err()
                .contains("a boolean")
        );
        assert_eq!(ColumnType::Date.parse("1970-01-02"), Ok(Value::Date(1)));
        assert!(ColumnType::Date.parse("1970-01-02 10:00").is_err());
        assert_eq!(
            ColumnType::Timestamp.parse("1970-01-01T00:00:01Z"),
            Ok(Value::Timestamp(1_000_000))
        );
        assert_eq!(
            ColumnType::Timestamp.coerce(Value::Date(1)),
            Ok(Value::Timestamp(crate::calendar::MICROS_PER_DAY))
        );
        assert!(ColumnType::Number.coerce(Value::Bool(true)).is_err());
        assert!(ColumnType::Date.coerce(Value::Int(3)).is_err());
    }

    #[test]
    fn coerce_converts_typed_values() {
        assert_eq!(ColumnType::Str.coerce(Value::Int(3)), Ok(Value::str("3")));
        assert_eq!(ColumnType::Int.coerce(Value::str("4")), Ok(Value::Int(4)));
        assert!(ColumnType::Int.coerce(Value::float(1.5)).is_err());
        let ts = ColumnType::time(TimeUnit::Seconds);
        assert_eq!(
            ts.coerce(Value::str("1970-01-01T00:01:00Z")),
            Ok(Value::Int(60))
        );
        assert_eq!(ts.coerce(Value::Int(5)), Ok(Value::Int(5)));
        assert!(ts.coerce(Value::float(1.5)).is_err());
        assert_eq!(ts.parse("1970-01-01T00:00:02Z"), Ok(Value::Int(2)));
        assert!(ts.parse("1.5").unwrap_err().contains("timestamp"));
        let windowed = ColumnType::Time(TimeUnit::Seconds, Reach(10));
        assert_eq!(
            windowed.parse("-9223372036854775798"),
            Ok(Value::Int(i64::MIN + 10))
        );
        assert!(windowed.parse("-9223372036854775799").is_err());
        assert!(windowed.coerce(Value::Int(i64::MAX - 9)).is_err());
        assert_eq!(
            windowed.coerce(Value::Int(i64::MAX - 10)),
            Ok(Value::Int(i64::MAX - 10))
        );
        assert_eq!(
            ColumnType::Float.coerce(Value::Int(1)),
            Ok(Value::float(1.0))
        );
    }
}
