//! Values in and out of PostgreSQL: the type of each output column, the
//! text a value is copied in as, the text it is read back from, and a row's
//! identity.
//!
//! A column's [`Kind`] only ever widens: `none` (only NULLs so far, stored
//! as `text`) takes the kind of its first value; `bigint` and `double` meet
//! in `numeric`. In a `numeric` column an integer is written without a
//! decimal point and a float always with one (or as `NaN`/`Infinity`), and
//! PostgreSQL's `numeric` keeps the digits as written, so reading back tells
//! `1` from `1.0`. Text and a number never share a column (`MixedColumn`).
//!
//! Floats are written in Rust's shortest round-trip form and read back from
//! PostgreSQL's (`extra_float_digits = 1`), so they come back bit for bit.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::table::TableError;
use crate::value::{Row, Value};

/// What an output column holds so far, and so its PostgreSQL type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Only NULLs so far (`text`).
    None,
    /// Integers (`bigint`).
    Bigint,
    /// Floats (`double precision`).
    Double,
    /// Integers and floats (`numeric`).
    Numeric,
    /// Text (`text`).
    Text,
}

impl Kind {
    /// The column's PostgreSQL type.
    pub fn sql_type(self) -> &'static str {
        match self {
            Kind::None | Kind::Text => "text",
            Kind::Bigint => "bigint",
            Kind::Double => "double precision",
            Kind::Numeric => "numeric",
        }
    }

    /// How errors call what a column of this kind holds.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::None => "only NULLs",
            Kind::Bigint => "integers",
            Kind::Double => "floats",
            Kind::Numeric => "numbers",
            Kind::Text => "text",
        }
    }

    /// The kind a column must become to also hold `v`; `Err` with what `v`
    /// is when no kind holds both.
    pub fn widen(self, v: &Value) -> Result<Kind, &'static str> {
        let wanted = match &*v.stored() {
            Value::Null => return Ok(self),
            Value::Int(_) => Kind::Bigint,
            Value::Float(_) => Kind::Double,
            Value::Str(_) => Kind::Text,
            _ => unreachable!("a stored value is null, a number or text"),
        };
        match (self, wanted) {
            (a, b) if a == b => Ok(a),
            (Kind::None, b) => Ok(b),
            (Kind::Numeric, Kind::Bigint | Kind::Double) => Ok(Kind::Numeric),
            (Kind::Bigint, Kind::Double) | (Kind::Double, Kind::Bigint) => Ok(Kind::Numeric),
            (_, b) => Err(match b {
                Kind::Text => "text",
                Kind::Bigint => "an integer",
                _ => "a float",
            }),
        }
    }

    /// The `USING` expression that converts column `c` (quoted) from `self`
    /// to `to`, keeping every value exactly.
    pub fn convert(self, to: Kind, c: &str) -> String {
        match (self, to) {
            // A float becomes numeric through its shortest text, with at
            // least one decimal so that it still reads back as a float.
            (Kind::Double, Kind::Numeric) => format!(
                "CASE WHEN {c} IS NULL THEN NULL ELSE \
                 round(({c}::text)::numeric, greatest(scale(({c}::text)::numeric), 1)) END"
            ),
            _ => format!("{c}::{}", to.sql_type()),
        }
    }

    /// The value as COPY text (before COPY's escaping); `None` for NULL.
    pub fn text(self, v: &Value) -> Option<String> {
        match &*v.stored() {
            Value::Null => None,
            Value::Int(i) => Some(i.to_string()),
            Value::Float(f) => Some(float_text(f.get(), self == Kind::Numeric)),
            stored => Some(stored.to_string()),
        }
    }

    /// The value read back from PostgreSQL's text for a column of this kind.
    pub fn parse(self, text: Option<&str>, table: &str, column: &str) -> Result<Value, TableError> {
        let Some(t) = text else {
            return Ok(Value::Null);
        };
        let corrupt = || TableError::Corrupt {
            what: format!("table '{table}', column '{column}'"),
            reason: format!("'{t}' is not a value of a {} column", self.sql_type()),
        };
        match self {
            Kind::None | Kind::Text => Ok(Value::str(t)),
            Kind::Bigint => t.parse().map(Value::Int).map_err(|_| corrupt()),
            Kind::Double => parse_float(t).map(Value::float).ok_or_else(corrupt),
            Kind::Numeric if t.contains('.') || t.contains(['N', 'I']) => {
                parse_float(t).map(Value::float).ok_or_else(corrupt)
            }
            Kind::Numeric => t.parse().map(Value::Int).map_err(|_| corrupt()),
        }
    }
}

/// The column kinds recorded in the catalog (`kappa.outputs.kinds`, JSON);
/// `Corrupt` naming `what` when they do not parse.
pub fn parse_kinds(text: &str, what: &str) -> Result<Vec<Kind>, TableError> {
    serde_json::from_str(text).map_err(|e| TableError::Corrupt {
        what: format!("{what}, kinds"),
        reason: e.to_string(),
    })
}

fn float_text(f: f64, numeric: bool) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if !numeric {
        return format!("{f:?}");
    }
    // `Display` never uses an exponent, which `numeric` would read as an
    // integer's digits.
    let mut s = format!("{f}");
    if !s.contains('.') {
        s.push_str(".0");
    }
    s
}

fn parse_float(t: &str) -> Option<f64> {
    match t {
        "NaN" => Some(f64::NAN),
        "Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        _ => t.parse().ok(),
    }
}

/// A row's identity, `kappa_id`: the SHA-256 of its values with their
/// types, so equal rows (and only those) share it, NULLs included.
pub fn row_id(row: &Row) -> [u8; 32] {
    let mut h = Sha256::new();
    for v in row {
        match &*v.stored() {
            Value::Null => h.update(b"n"),
            Value::Int(i) => {
                h.update(b"i");
                h.update(i.to_le_bytes());
            }
            Value::Float(f) => {
                h.update(b"f");
                h.update(f.get().to_bits().to_le_bytes());
            }
            Value::Str(s) => {
                h.update(b"s");
                h.update((s.len() as u64).to_le_bytes());
                h.update(s.as_bytes());
            }
            _ => unreachable!("a stored value is null, a number or text"),
        }
    }
    h.finalize().into()
}

/// Appends `text` to a COPY text-format line, escaped (`\N` for NULL).
pub fn copy_field(line: &mut String, text: Option<&str>) {
    let Some(text) = text else {
        line.push_str("\\N");
        return;
    };
    for ch in text.chars() {
        match ch {
            '\\' => line.push_str("\\\\"),
            '\t' => line.push_str("\\t"),
            '\n' => line.push_str("\\n"),
            '\r' => line.push_str("\\r"),
            c => line.push(c),
        }
    }
}

/// A `bytea` in COPY text format: `\\x` and hex digits.
pub fn copy_bytes(line: &mut String, bytes: &[u8]) {
    line.push_str("\\\\x");
    for b in bytes {
        line.push_str(&format!("{b:02x}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_widen_only_where_every_value_stays_exact() {
        let (i, f, s) = (Value::Int(1), Value::float(1.0), Value::str("x"));
        assert_eq!(Kind::None.widen(&Value::Null), Ok(Kind::None));
        assert_eq!(Kind::None.widen(&i), Ok(Kind::Bigint));
        assert_eq!(Kind::Bigint.widen(&f), Ok(Kind::Numeric));
        assert_eq!(Kind::Double.widen(&i), Ok(Kind::Numeric));
        assert_eq!(Kind::Numeric.widen(&f), Ok(Kind::Numeric));
        assert_eq!(Kind::Text.widen(&i), Err("an integer"));
        assert_eq!(Kind::Numeric.widen(&s), Err("text"));
    }

    #[test]
    fn values_come_back_as_they_went_in() {
        let values = [
            Value::Int(i64::MIN),
            Value::float(0.1),
            Value::float(1.0),
            Value::float(1e300),
            Value::float(-2.5e-300),
            Value::float(f64::INFINITY),
        ];
        for kind in [Kind::Numeric, Kind::Double, Kind::Bigint] {
            for v in &values {
                if kind.widen(v) != Ok(kind) {
                    continue;
                }
                let text = kind.text(v).unwrap();
                assert_eq!(
                    &kind.parse(Some(&text), "t", "c").unwrap(),
                    v,
                    "{kind:?} {text}"
                );
            }
        }
        assert_eq!(
            Kind::Numeric.parse(Some("12"), "t", "c").unwrap(),
            Value::Int(12)
        );
        assert_eq!(Kind::Text.parse(None, "t", "c").unwrap(), Value::Null);
        assert!(Kind::Bigint.parse(Some("x"), "t", "c").is_err());
    }

    #[test]
    fn equal_rows_share_an_id_and_only_they_do() {
        let a = vec![Value::Int(1), Value::Null];
        assert_eq!(row_id(&a), row_id(&a.clone()));
        for b in [
            vec![Value::float(1.0), Value::Null],
            vec![Value::Int(1), Value::str("")],
            vec![Value::str("1"), Value::Null],
        ] {
            assert_ne!(row_id(&a), row_id(&b));
        }
    }

    #[test]
    fn copy_text_escapes_what_copy_reads_specially() {
        let mut line = String::new();
        copy_field(&mut line, Some("a\tb\\c\nd"));
        line.push('\t');
        copy_field(&mut line, None);
        assert_eq!(line, "a\\tb\\\\c\\nd\t\\N");
    }
}
