//! Typed values and rows: what crosses the boundary between files (or log
//! records) and jobs.
//!
//! A [`Row`] is a vector of [`Value`]s: null, boolean, 64-bit integer, 64-bit
//! float, date, timestamp or string. Strings are `CompactString`s, so the
//! short strings that make up most keys live inline and a row costs one
//! allocation, not one per field.
//!
//! Invariants that the engine relies on:
//! - `Value` has a total order and `Eq`/`Hash` that agree with it, so rows can
//!   be keys of joins, groups and arrangements. Floats are ordered by
//!   `f64::total_cmp`; `-0.0` is normalised to `0.0` and NaN is never produced
//!   by inference, so float equality is the usual one.
//! - The order is SQL-like and what output files are sorted by: null first,
//!   then booleans (false first), numbers (integers and floats compared by
//!   value), dates and timestamps (compared as instants), then strings
//!   (bytewise).
//! - Booleans, dates and timestamps leave the engine as their text
//!   ([`Value::stored`]): output files, tables and changelogs hold `true`,
//!   `1994-01-01`, `2024-03-01 10:20:30`, as every store and reader has a
//!   type for text. Inside a job they are typed (SQL's `BOOLEAN`, `DATE`,
//!   `TIMESTAMP`; see [`crate::calendar`]).
//! - [`Value::infer`] is a function of the field text only — never of other
//!   rows — so the same text gives the same value in a batch file, in a log
//!   record and on replay (rule 1 of the engine).

use std::cmp::Ordering;
use std::fmt;

use compact_str::CompactString;

use crate::calendar::date_to_timestamp;
use serde::{Deserialize, Serialize};

/// One row of typed values, in the column order of its schema.
pub type Row = Vec<Value>;

/// A short row held inline (up to [`KEY_INLINE`] values without a heap
/// allocation): the keys of the tables probed once per input row
/// ([`crate::row_map`]: the combiner, grouping's pre-aggregation), where
/// following a pointer to a heap row costs a cache miss per probe.
pub type Key = smallvec::SmallVec<[Value; KEY_INLINE]>;

/// Values a [`Key`] holds inline.
pub const KEY_INLINE: usize = 2;

/// How many rows ahead of the one in hand a pass over sorted rows asks
/// the CPU to fetch: rows are separate heap objects, allocated in the order
/// they were built, so a pass in sorted order waits on a cache miss per
/// row unless the next ones are already on their way.
pub const AHEAD: usize = 16;

/// Asks the CPU to start loading the values of `rows[AHEAD]`, if there is
/// one. A hint only: it changes no result.
pub fn prefetch_ahead(rows: &[(Row, isize)]) {
    if let Some((row, _)) = rows.get(AHEAD) {
        prefetch(row.as_ptr());
    }
}

/// Asks the CPU to start loading the memory at `p`: a hint only.
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and writes nothing, whatever the
    // address (here, a live row's values, or a dangling pointer of an
    // empty row, which is fine too).
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A typed value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Value {
    /// SQL's null: a missing value (an empty field, the null marker, JSON
    /// `null`).
    Null,
    /// A 64-bit integer.
    Int(i64),
    /// A truth value.
    Bool(bool),
    /// A date: days since 1970-01-01 (years 1 to 9999, [`crate::calendar`]).
    Date(i32),
    /// A timestamp without a zone: microseconds since 1970-01-01 00:00:00
    /// (years 1 to 9999).
    Timestamp(i64),
    /// A float, totally ordered and hashed by its bits ([`F64`]).
    Float(F64),
    /// Text, held inline when short.
    Str(CompactString),
}

/// An `f64` with a total order (`total_cmp`) and bitwise equality and hash.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct F64(f64);

impl F64 {
    /// Wraps a float, normalising `-0.0` to `0.0` so that equal numbers are equal values.
    pub fn new(x: f64) -> Self {
        F64(if x == 0.0 { 0.0 } else { x })
    }
    /// The float.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl PartialEq for F64 {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}
impl Eq for F64 {}
impl std::hash::Hash for F64 {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state)
    }
}
impl PartialOrd for F64 {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for F64 {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

const _: () = assert!(std::mem::size_of::<Value>() == 24, "a Value is three words");

impl Value {
    /// A float value ([`F64::new`]: `-0.0` becomes `0.0`).
    pub fn float(x: f64) -> Value {
        Value::Float(F64::new(x))
    }

    /// A string value, copied from `s`.
    pub fn str(s: &str) -> Value {
        Value::Str(CompactString::from(s))
    }

    /// Whether it is [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The value as a float, if it is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(f.get()),
            _ => None,
        }
    }

    /// The value as an integer, if it is one.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// Infers a value from a field's text: an integer if the text is the
    /// canonical decimal form of an `i64` (so `007` and `+7` stay strings and
    /// round-trip exactly), a float if it is a decimal with a `.` or an
    /// exponent, otherwise a string. The caller handles null markers.
    pub fn infer(text: &str) -> Value {
        if let Some(i) = parse_canonical_int(text.as_bytes()) {
            return Value::Int(i);
        }
        if let Some(f) = parse_decimal_float(text) {
            return Value::float(f);
        }
        Value::str(text)
    }

    /// Rank of the value's kind in the total order: null < booleans <
    /// numbers < dates and timestamps < strings.
    fn kind_rank(&self) -> u8 {
        match self {
            Value::Null => 0,
            Value::Bool(_) => 1,
            Value::Int(_) | Value::Float(_) => 2,
            Value::Date(_) | Value::Timestamp(_) => 3,
            Value::Str(_) => 4,
        }
    }

    /// The value as outputs hold it: a boolean, date or timestamp as its
    /// text (what its `Display` writes), anything else as it is. Every sink
    /// and table store writes this, so that a table read back compares
    /// equal to the rows that were written.
    pub fn stored(&self) -> std::borrow::Cow<'_, Value> {
        use std::borrow::Cow;
        match self {
            Value::Bool(_) | Value::Date(_) | Value::Timestamp(_) => {
                Cow::Owned(Value::Str(self.to_string().into()))
            }
            other => Cow::Borrowed(other),
        }
    }

    /// A date value, if `days` is one kappa holds.
    pub fn date(days: i32) -> Value {
        if crate::calendar::date_valid(days) {
            Value::Date(days)
        } else {
            Value::Null
        }
    }

    /// A timestamp value, if `micros` is one kappa holds.
    pub fn timestamp(micros: i64) -> Value {
        if crate::calendar::timestamp_valid(micros) {
            Value::Timestamp(micros)
        } else {
            Value::Null
        }
    }
}

impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Value {
    fn cmp(&self, other: &Self) -> Ordering {
        use Value::*;
        match (self, other) {
            (Int(a), Int(b)) => a.cmp(b),
            (Float(a), Float(b)) => a.cmp(b),
            (Str(a), Str(b)) => a.as_bytes().cmp(b.as_bytes()),
            (Null, Null) => Ordering::Equal,
            (Bool(a), Bool(b)) => a.cmp(b),
            (Date(a), Date(b)) => a.cmp(b),
            (Timestamp(a), Timestamp(b)) => a.cmp(b),
            // A date is the instant of its midnight, and sorts before a
            // timestamp at that instant (consistent with structural `Eq`).
            (Date(a), Timestamp(b)) => date_to_timestamp(*a).cmp(b).then(Ordering::Less),
            (Timestamp(a), Date(b)) => a.cmp(&date_to_timestamp(*b)).then(Ordering::Greater),
            // Mixed numbers compare by value; an integer sorts before an equal
            // float so that the order stays consistent with structural `Eq`.
            (Int(a), Float(b)) => (*a as f64).total_cmp(&b.get()).then(Ordering::Less),
            (Float(a), Int(b)) => a.get().total_cmp(&(*b as f64)).then(Ordering::Greater),
            _ => self.kind_rank().cmp(&other.kind_rank()),
        }
    }
}

impl fmt::Display for Value {
    /// The text written to output files: null is empty, floats always carry a
    /// `.` or an exponent so they read back as floats.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => Ok(()),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{:?}", x.get()),
            Value::Str(s) => f.write_str(s),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Date(d) => crate::calendar::write_date(*d, f),
            Value::Timestamp(t) => crate::calendar::write_timestamp(*t, f),
        }
    }
}

/// Parses `-?(0|[1-9][0-9]*)` that fits an `i64`, except `-0`. One pass
/// over the bytes (which need not be UTF-8: anything but ASCII digits and
/// a leading `-` is not an integer): every numeric field of every input row
/// comes through here.
pub fn parse_canonical_int(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text {
        [b'-', rest @ ..] => (true, rest),
        all => (false, all),
    };
    match digits {
        [] | [b'0', _, ..] => return None,
        [b'0'] if negative => return None,
        _ if digits.len() > 19 => return None,
        _ => {}
    }
    // At most 19 digits: below 10^19, which fits a u64.
    let mut n: u64 = 0;
    for &c in digits {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n = n * 10 + u64::from(d);
    }
    match negative {
        false => i64::try_from(n).ok(),
        true if n <= 1 << 63 => Some((n as i64).wrapping_neg()),
        true => None,
    }
}

/// Parses a finite decimal float with a `.` or an exponent (`1.5`, `-2e3`,
/// `.5`); rejects `inf`, `NaN`, hex and anything with other characters.
pub fn parse_decimal_float(text: &str) -> Option<f64> {
    let b = text.as_bytes();
    let ok_chars = b
        .iter()
        .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'-' | b'+'));
    let has_digit = b.iter().any(u8::is_ascii_digit);
    let has_mark = b.iter().any(|c| matches!(c, b'.' | b'e' | b'E'));
    if !(ok_chars && has_digit && has_mark) {
        return None;
    }
    text.parse::<f64>().ok().filter(|f| f.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn infer_keeps_non_canonical_numbers_as_strings() {
        assert_eq!(Value::infer("42"), Value::Int(42));
        assert_eq!(Value::infer("-7"), Value::Int(-7));
        assert_eq!(Value::infer("0"), Value::Int(0));
        assert_eq!(Value::infer("007"), Value::str("007"));
        assert_eq!(Value::infer("+7"), Value::str("+7"));
        assert_eq!(Value::infer("-0"), Value::str("-0"));
        assert_eq!(
            Value::infer("99999999999999999999"),
            Value::str("99999999999999999999")
        );
        assert_eq!(Value::infer("1.5"), Value::float(1.5));
        assert_eq!(Value::infer("-2e3"), Value::float(-2000.0));
        assert_eq!(Value::infer("inf"), Value::str("inf"));
        assert_eq!(Value::infer("NaN"), Value::str("NaN"));
        assert_eq!(Value::infer("1e999"), Value::str("1e999"));
        assert_eq!(Value::infer("e"), Value::str("e"));
        assert_eq!(Value::infer("abc"), Value::str("abc"));
    }

    proptest! {
        /// The one-pass parser against its definition: the canonical text
        /// of an `i64` (not `-0`), parsed by the standard library.
        #[test]
        fn canonical_int_is_its_definition(text in "-?[0-9]{0,21}|[-+0-9a ]{0,4}", n: i64) {
            let canonical = |t: &str| {
                let digits = t.strip_prefix('-').unwrap_or(t);
                let ok = !digits.is_empty()
                    && digits.bytes().all(|c| c.is_ascii_digit())
                    && (digits == "0" || !digits.starts_with('0'))
                    && t != "-0";
                if ok { t.parse::<i64>().ok() } else { None }
            };
            prop_assert_eq!(parse_canonical_int(text.as_bytes()), canonical(&text));
            prop_assert_eq!(parse_canonical_int(n.to_string().as_bytes()), Some(n));
        }
    }

    #[test]
    fn canonical_int_limits() {
        assert_eq!(parse_canonical_int(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_canonical_int(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_canonical_int(b"9223372036854775808"), None);
        assert_eq!(parse_canonical_int(b"-9223372036854775809"), None);
        assert_eq!(parse_canonical_int(b"9999999999999999999"), None);
        assert_eq!(parse_canonical_int(b"-"), None);
        assert_eq!(parse_canonical_int(b"1\xff"), None);
    }

    #[test]
    fn order_is_null_numbers_strings() {
        let mut v = [
            Value::str("b"),
            Value::float(1.5),
            Value::Null,
            Value::Int(2),
            Value::Int(1),
            Value::str("a"),
            Value::float(1.0),
        ];
        v.sort();
        let text: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        assert_eq!(text, ["", "1", "1.0", "1.5", "2", "a", "b"]);
    }

    #[test]
    fn floats_display_as_floats() {
        assert_eq!(Value::float(3.0).to_string(), "3.0");
        assert_eq!(
            Value::infer(&Value::float(0.1).to_string()),
            Value::float(0.1)
        );
        assert_eq!(Value::float(-0.0), Value::float(0.0));
    }

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(Value::Int),
            (-1e6f64..1e6).prop_map(Value::float),
            (-3i64..3).prop_map(|i| Value::float(i as f64)),
            "[a-c]{0,3}".prop_map(|s| Value::str(&s)),
            any::<bool>().prop_map(Value::Bool),
            (-3i32..3).prop_map(Value::Date),
            (-3i64..3).prop_map(|d| Value::Timestamp(d * crate::calendar::MICROS_PER_DAY / 2)),
        ]
    }

    #[test]
    fn booleans_dates_and_timestamps_order_as_instants_and_store_as_text() {
        let day = crate::calendar::MICROS_PER_DAY;
        let mut v = [
            Value::str("a"),
            Value::Timestamp(day / 2),
            Value::Date(1),
            Value::Timestamp(0),
            Value::Date(0),
            Value::Int(5),
            Value::Bool(true),
            Value::Bool(false),
        ];
        v.sort();
        let text: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        assert_eq!(
            text,
            [
                "false",
                "true",
                "5",
                "1970-01-01",
                "1970-01-01 00:00:00",
                "1970-01-01 12:00:00",
                "1970-01-02",
                "a"
            ]
        );
        assert_eq!(*Value::Date(0).stored(), Value::str("1970-01-01"));
        assert_eq!(*Value::Bool(true).stored(), Value::str("true"));
        assert_eq!(*Value::Int(3).stored(), Value::Int(3));
        assert_eq!(Value::date(i32::MAX), Value::Null);
        assert_eq!(Value::timestamp(i64::MIN), Value::Null);
    }

    proptest! {
        #[test]
        fn order_is_total_and_consistent_with_eq(a in value(), b in value(), c in value()) {
            prop_assert_eq!(a.cmp(&b) == Ordering::Equal, a == b);
            prop_assert_eq!(a.cmp(&b), b.cmp(&a).reverse());
            if a <= b && b <= c { prop_assert!(a <= c); }
        }

        #[test]
        fn display_then_infer_round_trips_numbers(i in any::<i64>(), f in -1e12f64..1e12) {
            prop_assert_eq!(Value::infer(&Value::Int(i).to_string()), Value::Int(i));
            prop_assert_eq!(Value::infer(&Value::float(f).to_string()), Value::float(f));
        }
    }
}
