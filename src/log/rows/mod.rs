//! Rows in record values: how `kappa log produce` encodes a row and how
//! consumers (the CLI, the stream runner) decode it.
//!
//! A topic that carries rows records its `columns` and its `row_format`
//! (`csv` or `jsonl`) in `topic.json`, both set by the first producer. The
//! value of every record then holds one [`Element`] per column, in column
//! order: what the producer read, kept so that a consumer types it exactly
//! as it would type the same field of a file.
//!
//! | format  | elements                                                       |
//! |---------|----------------------------------------------------------------|
//! | `csv`   | a field's raw text (an integer's as the integer), or null for  |
//! |         | an empty field or the producer's `--null` marker               |
//! | `jsonl` | the object's JSON value for that column (null if missing)      |
//!
//! So `7`, `007` and null in a CSV topic are *text*, to be typed as a CSV
//! file's fields are ([`Value::infer`], [`ColumnType::parse`]: `7` is an
//! integer, `007` stays text, and a `str` column reads both as text), while
//! `7` and `"007"` in a JSON lines topic are already typed and only coerced.
//!
//! Values are written in the binary encoding of [`binary`] (version 1):
//! integers as integers, strings as length-prefixed bytes, and a tag that
//! says what `Value::infer` makes of the text, so reading a row allocates
//! nothing but its strings and parses nothing that was parsed when it was
//! produced. Topics written before it (version 0) hold a JSON array per
//! value (a CSV field as a JSON string); the first byte tells the two apart
//! (`[` or [`binary::VERSION`]), so those topics stay readable, and later
//! producers append version 1 records to them. An empty value is a
//! tombstone (compacted topics), not a row: check
//! [`Record::is_tombstone`](super::Record::is_tombstone) first.
//!
//! The record key is the raw text of the producer's `--key` column (no key
//! when the field is null); see `partition_for_key` for routing.

pub mod binary;

pub use binary::Elements;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use smallvec::SmallVec;

use crate::schema::ColumnType;
use crate::value::{Row, Value, parse_canonical_int, parse_decimal_float};

/// How the elements of a topic's row values are to be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RowFormat {
    /// Raw CSV field text, typed on read like a CSV file.
    Csv,
    /// Typed JSON values from JSON lines.
    Jsonl,
}

impl std::fmt::Display for RowFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RowFormat::Csv => "csv",
            RowFormat::Jsonl => "jsonl",
        })
    }
}

/// Why a record value is not a row of its topic.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RowError {
    /// The value is neither a binary row nor a JSON array.
    #[error("value is not a row: {detail}")]
    Malformed {
        /// The decoder's complaint.
        detail: String,
    },
    /// The value does not have one element per column.
    #[error("value has {found} fields, the topic has {expected} columns")]
    Arity {
        /// The topic's column count.
        expected: usize,
        /// The value's element count.
        found: usize,
    },
    /// One element does not fit its column.
    #[error("column {column}: {detail}")]
    Field {
        /// The column's index (from 0) in the topic's columns.
        column: usize,
        /// Why the element does not fit the column's type.
        detail: String,
    },
}

/// One element of a row value, borrowed from the value. What it holds is
/// what the producer read; the tag records what [`Value::infer`] makes of
/// a CSV field's text, so that reading need not find out again. Only this
/// module's encoders choose tags (a `Str` whose text is a number would be
/// read as text where a file's field would be a number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Element<'a> {
    /// An empty field, the producer's null marker, a JSON null or a missing key.
    Null,
    /// CSV: a field whose text is the integer's canonical text (`7`, not
    /// `007` or `+7`). JSON lines: a number with that text.
    Int(i64),
    /// CSV: a field's text that `Value::infer` keeps as text. JSON lines:
    /// a string.
    Str(&'a str),
    /// CSV: a field's text that `Value::infer` reads as a float. JSON
    /// lines: a number's text that is no canonical integer.
    Text(&'a str),
    /// JSON lines only: `true`, `false`, an array or an object, as its
    /// JSON text (read as that text, and never the consumer's null marker).
    Lit(&'a str),
}

impl<'a> Element<'a> {
    /// A CSV field; `None` is null.
    pub fn csv(field: Option<&'a str>) -> Element<'a> {
        let Some(text) = field else {
            return Element::Null;
        };
        if let Some(i) = parse_canonical_int(text.as_bytes()) {
            return Element::Int(i);
        }
        match parse_decimal_float(text) {
            Some(_) => Element::Text(text),
            None => Element::Str(text),
        }
    }

    /// A JSON lines value (`None`, a missing key, is null). `text` holds the
    /// JSON text of an array or object.
    pub fn json(value: Option<&'a Json>, text: &'a mut String) -> Element<'a> {
        match value {
            None | Some(Json::Null) => Element::Null,
            Some(Json::Bool(b)) => Element::Lit(if *b { "true" } else { "false" }),
            Some(Json::Number(n)) => match parse_canonical_int(n.as_str().as_bytes()) {
                Some(i) => Element::Int(i),
                None => Element::Text(n.as_str()),
            },
            Some(Json::String(s)) => Element::Str(s),
            Some(other) => {
                *text = other.to_string();
                Element::Lit(text)
            }
        }
    }

    /// The value of this element in a column of type `ty`, exactly as
    /// [`typed`] types the same element of a version 0 value; a text equal
    /// to `null_marker` (CSV fields, JSON strings) is null.
    #[inline]
    pub fn typed(
        self,
        format: RowFormat,
        ty: ColumnType,
        null_marker: Option<&str>,
    ) -> Result<Value, String> {
        match self.plain_int(ty, null_marker) {
            Some(i) => Ok(Value::Int(i)),
            None => self.typed_in_general(format, ty, null_marker),
        }
    }

    /// The integer this element is in a column of type `ty`, when it is an
    /// integer taken as it is (no null marker to compare it with): the
    /// common case, which a reader that types every element can take
    /// without building a `Result` (a `Value` moved through memory costs
    /// more than the typing: the stores and loads of its parts do not
    /// forward).
    #[inline]
    pub fn plain_int(self, ty: ColumnType, null_marker: Option<&str>) -> Option<i64> {
        match (self, ty, null_marker) {
            (Element::Int(i), ColumnType::Any | ColumnType::Int | ColumnType::Number, None) => {
                Some(i)
            }
            _ => None,
        }
    }

    /// [`Element::typed`] of any element.
    fn typed_in_general(
        self,
        format: RowFormat,
        ty: ColumnType,
        null_marker: Option<&str>,
    ) -> Result<Value, String> {
        let is_null = |text: &str| null_marker == Some(text);
        match (format, self) {
            (_, Element::Null) => Ok(Value::Null),
            (RowFormat::Csv, Element::Int(i)) => match null_marker {
                Some(m) if parse_canonical_int(m.as_bytes()) == Some(i) => Ok(Value::Null),
                _ => ty.parse_int(i),
            },
            (RowFormat::Csv, Element::Str(s) | Element::Text(s)) if is_null(s) => Ok(Value::Null),
            (RowFormat::Jsonl, Element::Str(s)) if is_null(s) => Ok(Value::Null),
            (RowFormat::Csv, Element::Str(s))
                if matches!(ty, ColumnType::Any | ColumnType::Str) =>
            {
                Ok(Value::str(s))
            }
            (RowFormat::Csv, Element::Str(s) | Element::Text(s)) => ty.parse(s),
            (RowFormat::Csv, Element::Lit(s)) => {
                Err(format!("expected a string in a CSV topic, found {s}"))
            }
            (RowFormat::Jsonl, Element::Int(i)) => ty.coerce(Value::Int(i)),
            (RowFormat::Jsonl, Element::Str(s) | Element::Lit(s)) => ty.coerce(Value::str(s)),
            (RowFormat::Jsonl, Element::Text(s)) => ty.coerce(Value::infer(s)),
        }
    }

    /// The element as version 0 stored it: a CSV field as a JSON string,
    /// a JSON lines value as itself.
    pub fn to_json(self, format: RowFormat) -> Json {
        match (format, self) {
            (_, Element::Null) => Json::Null,
            (RowFormat::Csv, Element::Int(i)) => Json::String(i.to_string()),
            (RowFormat::Csv, Element::Str(s) | Element::Text(s) | Element::Lit(s)) => {
                Json::String(s.into())
            }
            (RowFormat::Jsonl, Element::Int(i)) => Json::from(i),
            (RowFormat::Jsonl, Element::Str(s)) => Json::String(s.into()),
            (RowFormat::Jsonl, Element::Text(s) | Element::Lit(s)) => {
                serde_json::from_str(s).unwrap_or_else(|_| Json::String(s.into()))
            }
        }
    }
}

/// Appends the value of a CSV row: `None` is a null field.
pub fn encode_csv_row<'a>(
    fields: impl ExactSizeIterator<Item = Option<&'a str>>,
    out: &mut Vec<u8>,
) {
    binary::encode(fields.len(), fields.map(Element::csv), out);
}

/// Appends the value of a JSON lines row: `None` (a missing key) is null.
pub fn encode_json_row(values: &[Option<&Json>], out: &mut Vec<u8>) {
    let mut texts = vec![String::new(); values.len()];
    let elements = values
        .iter()
        .zip(&mut texts)
        .map(|(v, t)| Element::json(*v, t));
    binary::encode(values.len(), elements, out);
}

/// Whether a value is in the current (binary) encoding rather than
/// version 0's JSON.
pub fn is_binary(value: &[u8]) -> bool {
    value.first() == Some(&binary::VERSION)
}

/// The elements of a binary row value, checked to number `columns`.
pub fn elements(value: &[u8], columns: usize) -> Result<Elements<'_>, RowError> {
    let mut elements = Elements::new();
    elements_into(value, columns, &mut elements)?;
    Ok(elements)
}

/// [`elements`] into a buffer the caller keeps (see [`binary::decode_into`]).
pub fn elements_into<'a>(
    value: &'a [u8],
    columns: usize,
    elements: &mut Elements<'a>,
) -> Result<(), RowError> {
    binary::decode_into(value, elements).map_err(|detail| RowError::Malformed { detail })?;
    match elements.len() == columns {
        true => Ok(()),
        false => Err(RowError::Arity {
            expected: columns,
            found: elements.len(),
        }),
    }
}

/// Fields held inline by [`borrowed_csv_fields`] before it allocates.
const INLINE_FIELDS: usize = 16;

/// The fields of a version 0 CSV row value, borrowed from it, when the
/// value is spelled as version 0's producer wrote it (no spaces) and no string
/// holds an escape or a control character; `None` otherwise, for a general
/// decoder, which reads every other valid spelling (and refuses the invalid
/// ones) as before. A `None` field is a JSON `null`. Topics written before
/// the binary encoding are mostly read here: no JSON parser and no
/// allocation for a short row.
pub fn borrowed_csv_fields(value: &[u8]) -> Option<SmallVec<[Option<&str>; INLINE_FIELDS]>> {
    let mut fields = SmallVec::new();
    // One UTF-8 check for the whole value, not one per field: a field is
    // then a slice of it, cut next to ASCII quotes (so at char boundaries).
    let rest = std::str::from_utf8(value).ok()?.strip_prefix('[')?;
    let bytes = rest.as_bytes();
    if rest == "]" {
        return Some(fields);
    }
    let mut at = 0;
    loop {
        match bytes.get(at)? {
            b'n' if bytes.get(at..at + 4)? == b"null" => {
                fields.push(None);
                at += 4;
            }
            b'"' => {
                let start = at + 1;
                let end = start + memchr::memchr2(b'"', b'\\', &bytes[start..])?;
                if bytes[end] != b'"' || bytes[start..end].iter().any(|&b| b < 0x20) {
                    return None; // an escape, or a character JSON must escape
                }
                fields.push(Some(&rest[start..end]));
                at = end + 1;
            }
            _ => return None,
        }
        match bytes.get(at)? {
            b',' => at += 1,
            b']' if at + 1 == bytes.len() => return Some(fields),
            _ => return None,
        }
    }
}

/// The elements of a row value of either version as version 0 stored them
/// (JSON), checked to number `columns`.
pub fn decode_fields(
    value: &[u8],
    format: RowFormat,
    columns: usize,
) -> Result<Vec<Json>, RowError> {
    if is_binary(value) {
        return Ok(elements(value, columns)?
            .iter()
            .map(|e| e.to_json(format))
            .collect());
    }
    let fields: Vec<Json> = serde_json::from_slice(value).map_err(|e| RowError::Malformed {
        detail: e.to_string(),
    })?;
    if fields.len() != columns {
        return Err(RowError::Arity {
            expected: columns,
            found: fields.len(),
        });
    }
    Ok(fields)
}

/// Decodes a row value into typed values, one per column, typing each
/// element as `types` asks (`ColumnType::Any` infers, as for files).
pub fn decode_row(value: &[u8], format: RowFormat, types: &[ColumnType]) -> Result<Row, RowError> {
    let field = |column, typed: Result<Value, String>| {
        typed.map_err(|detail| RowError::Field { column, detail })
    };
    if is_binary(value) {
        let elements = elements(value, types.len())?;
        let typed = elements
            .iter()
            .zip(types)
            .map(|(e, ty)| e.typed(format, *ty, None));
        return typed.enumerate().map(|(c, v)| field(c, v)).collect();
    }
    let fields = decode_fields(value, format, types.len())?;
    let typed = fields
        .into_iter()
        .zip(types)
        .map(|(j, ty)| typed(j, format, *ty, None));
    typed.enumerate().map(|(c, v)| field(c, v)).collect()
}

/// Types one element of a row value as the file readers would type the same
/// field: CSV text through [`ColumnType::parse`], JSON values through
/// [`ColumnType::coerce`]; `null` (and the text `null_marker`, if given) is null.
pub fn typed(
    json: Json,
    format: RowFormat,
    ty: ColumnType,
    null_marker: Option<&str>,
) -> Result<Value, String> {
    match (format, json) {
        (_, Json::Null) => Ok(Value::Null),
        (_, Json::String(s)) if null_marker == Some(s.as_str()) => Ok(Value::Null),
        (RowFormat::Csv, Json::String(text)) => ty.parse(&text),
        (RowFormat::Csv, other) => Err(format!("expected a string in a CSV topic, found {other}")),
        (RowFormat::Jsonl, json) => ty.coerce(from_json(json)),
    }
}

/// The value of a JSON element, mapped as the JSON lines file reader does
/// (`source/lines.rs`): booleans become the strings `true`/`false`, arrays and
/// objects their JSON text. A number is typed from its text exactly as a CSV
/// field with that text ([`Value::infer`]): an integer that does not fit an
/// `i64` stays its text rather than becoming an approximate float.
pub fn from_json(json: Json) -> Value {
    match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::str(if b { "true" } else { "false" }),
        Json::Number(n) => Value::infer(&n.to_string()),
        Json::String(s) => Value::str(&s),
        other => Value::str(&other.to_string()),
    }
}

/// The text of an element as a CSV field (and as a key): `None` for null,
/// a string's content, or any other value's JSON text.
pub fn field_text(json: &Json) -> Option<Cow<'_, str>> {
    match json {
        Json::Null => None,
        Json::String(s) => Some(Cow::Borrowed(s)),
        other => Some(Cow::Owned(other.to_string())),
    }
}

/// An element as a typed JSON value: CSV text is inferred like a CSV field
/// (`"42"` becomes `42`), JSON values are returned as they are.
pub fn typed_json(json: Json, format: RowFormat) -> Json {
    match (format, json) {
        (RowFormat::Csv, Json::String(text)) => match Value::infer(&text) {
            Value::Int(i) => Json::from(i),
            Value::Float(x) => {
                serde_json::Number::from_f64(x.get()).map_or(Json::String(text), Json::Number)
            }
            _ => Json::String(text),
        },
        (_, json) => json,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A CSV row as version 0 wrote it: a JSON array of strings and nulls.
    fn v0_csv(fields: &[Option<&str>]) -> Vec<u8> {
        serde_json::to_vec(fields).unwrap()
    }

    fn v1_csv(fields: &[Option<&str>]) -> Vec<u8> {
        let mut v = Vec::new();
        encode_csv_row(fields.iter().copied(), &mut v);
        v
    }

    #[test]
    fn csv_rows_keep_raw_text_and_type_on_read() {
        let fields = [Some("7"), Some("007"), None, Some("a \"q\",b\n")];
        assert_eq!(v0_csv(&fields), br#"["7","007",null,"a \"q\",b\n"]"#);
        for v in [v0_csv(&fields), v1_csv(&fields)] {
            let row = decode_row(&v, RowFormat::Csv, &[ColumnType::Any; 4]).unwrap();
            assert_eq!(
                row,
                vec![
                    Value::Int(7),
                    Value::str("007"),
                    Value::Null,
                    Value::str("a \"q\",b\n")
                ]
            );
            let strs = decode_row(&v, RowFormat::Csv, &[ColumnType::Str; 4]).unwrap();
            assert_eq!(strs[0], Value::str("7"));
            let ints = [
                ColumnType::Int,
                ColumnType::Int,
                ColumnType::Any,
                ColumnType::Any,
            ];
            let err = decode_row(&v, RowFormat::Csv, &ints).unwrap_err();
            assert!(matches!(err, RowError::Field { column: 1, .. }), "{err}");
            let json = decode_fields(&v, RowFormat::Csv, 4).unwrap();
            assert_eq!(
                json,
                vec![json!("7"), json!("007"), json!(null), json!("a \"q\",b\n")]
            );
        }
        // Integers as integers, strings as bytes: 12 bytes for 24 of JSON.
        let v1 = v1_csv(&[Some("123456"), Some("abcdef")]);
        assert_eq!(
            (v1.len(), v0_csv(&[Some("123456"), Some("abcdef")]).len()),
            (14, 19)
        );
    }

    #[test]
    fn json_rows_are_already_typed() {
        let (a, b, c) = (json!(12), json!("12"), json!({"x": true}));
        let v0 = serde_json::to_vec(&json!([12, "12", null, {"x": true}])).unwrap();
        let mut v1 = Vec::new();
        encode_json_row(&[Some(&a), Some(&b), None, Some(&c)], &mut v1);
        for v in [&v0, &v1] {
            let row = decode_row(v, RowFormat::Jsonl, &[ColumnType::Any; 4]).unwrap();
            assert_eq!(
                row,
                vec![
                    Value::Int(12),
                    Value::str("12"),
                    Value::Null,
                    Value::str(r#"{"x":true}"#)
                ]
            );
            let json = decode_fields(v, RowFormat::Jsonl, 4).unwrap();
            assert_eq!(json, vec![a.clone(), b.clone(), json!(null), c.clone()]);
        }
        // What no producer writes: a number or an object in a CSV topic.
        assert!(matches!(
            decode_row(&v0, RowFormat::Csv, &[ColumnType::Any; 4]),
            Err(RowError::Field { column: 0, .. })
        ));
        assert!(matches!(
            decode_row(&v1, RowFormat::Csv, &[ColumnType::Any; 4]),
            Err(RowError::Field { column: 3, .. })
        ));
    }

    /// Every column type a consumer may ask for.
    const TYPES: [ColumnType; 10] = [
        ColumnType::Any,
        ColumnType::Int,
        ColumnType::Float,
        ColumnType::Number,
        ColumnType::Str,
        ColumnType::Bool,
        ColumnType::Date,
        ColumnType::Timestamp,
        ColumnType::Time(crate::time::TimeUnit::Millis, crate::schema::Reach(0)),
        ColumnType::Time(
            crate::time::TimeUnit::Seconds,
            crate::schema::Reach(1 << 62),
        ),
    ];

    /// Field texts of every kind `Value::infer` and the column types tell apart.
    fn any_text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            "-?[0-9]{1,20}",
            "[-+]?[0-9]{0,3}\\.?[0-9]{0,3}([eE][-+]?[0-9]{1,3})?",
            "(true|false|yes|t|f|NA|null|inf|NaN|-0|\\+7|007| 12|1e999|9223372036854775808)",
            "[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}:[0-9]{2}(Z|[-+]0[0-9]:00)?)?",
            "(.|\\n){0,6}",
        ]
    }

    /// A JSON value of every kind JSON lines can hold.
    fn json_value() -> impl proptest::strategy::Strategy<Value = Json> {
        use proptest::prelude::*;
        prop_oneof![
            Just(Json::Null),
            any::<bool>().prop_map(Json::from),
            any::<i64>().prop_map(Json::from),
            "-?(0|[1-9][0-9]{0,21})(\\.[0-9]{1,3})?([eE][-+]?[0-9]{1,3})?"
                .prop_map(|t| serde_json::from_str(&t).unwrap()),
            any_text().prop_map(Json::from),
            Just(json!([1, "a", null])),
            Just(json!({"b": 2, "a": [true]})),
        ]
    }

    /// The consumer's null marker: none, the field's own text, or another.
    fn marker(pick: u8, text: Option<&str>) -> Option<&str> {
        match pick % 3 {
            0 => None,
            1 => text,
            _ => Some("7"),
        }
    }

    /// Every column type types `element` as the version 0 path types `json`.
    fn types_agree(
        element: Element,
        json: &Json,
        format: RowFormat,
        null: Option<&str>,
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        for ty in TYPES {
            let want = typed(json.clone(), format, ty, null);
            proptest::prop_assert_eq!(element.typed(format, ty, null), want, "{} as {}", json, ty);
        }
        Ok(())
    }

    proptest::proptest! {
        /// A CSV field reads the same from both versions, as every type.
        #[test]
        fn binary_csv_fields_read_as_json_ones(
            fields in proptest::collection::vec(proptest::option::of(any_text()), 1..4),
            pick in 0u8..3,
        ) {
            let fields: Vec<Option<&str>> = fields.iter().map(|f| f.as_deref()).collect();
            let (v0, v1) = (v0_csv(&fields), v1_csv(&fields));
            let json = decode_fields(&v0, RowFormat::Csv, fields.len()).unwrap();
            let again = decode_fields(&v1, RowFormat::Csv, fields.len()).unwrap();
            proptest::prop_assert_eq!(&again, &json);
            let elements = elements(&v1, fields.len()).unwrap();
            for ((element, json), field) in elements.iter().zip(&json).zip(&fields) {
                types_agree(*element, json, RowFormat::Csv, marker(pick, *field))?;
            }
        }

        /// A JSON lines value reads the same from both versions, as every type.
        #[test]
        fn binary_json_values_read_as_json_ones(
            values in proptest::collection::vec(proptest::option::of(json_value()), 1..4),
            pick in 0u8..3,
        ) {
            let refs: Vec<Option<&Json>> = values.iter().map(Option::as_ref).collect();
            let mut v1 = Vec::new();
            encode_json_row(&refs, &mut v1);
            let json: Vec<Json> = values.iter().map(|v| v.clone().unwrap_or(Json::Null)).collect();
            let again = decode_fields(&v1, RowFormat::Jsonl, json.len()).unwrap();
            proptest::prop_assert_eq!(&again, &json);
            let elements = elements(&v1, json.len()).unwrap();
            for (element, json) in elements.iter().zip(&json) {
                types_agree(*element, json, RowFormat::Jsonl, marker(pick, json.as_str()))?;
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn borrowed_fields_are_what_json_reads(
            fields in proptest::collection::vec(
                proptest::option::of(proptest::string::string_regex("(.|\\n|\\t|\"|\\\\){0,6}").unwrap()),
                0..5,
            ),
            (at, byte) in (proptest::num::usize::ANY, proptest::num::u8::ANY),
        ) {
            let v = v0_csv(&fields.iter().map(|f| f.as_deref()).collect::<Vec<_>>());
            let owned = |got: &[Option<&str>]| -> Vec<Option<String>> {
                got.iter().map(|f| f.map(str::to_string)).collect()
            };
            let json: Vec<Option<String>> = serde_json::from_slice(&v).unwrap();
            let escaped = fields.iter().flatten().any(|f| f.contains(['"', '\\']) || f.chars().any(char::is_control));
            match borrowed_csv_fields(&v) {
                Some(got) => proptest::prop_assert_eq!(owned(&got), json),
                None => proptest::prop_assert!(escaped, "{v:?} should have borrowed"),
            }
            // Given the value with one byte changed, it reads nothing JSON
            // would not, and nothing else than JSON would.
            let mut changed = v.clone();
            changed[at % v.len()] = byte;
            if let Some(got) = borrowed_csv_fields(&changed) {
                let json: Vec<Option<String>> = serde_json::from_slice(&changed).unwrap();
                proptest::prop_assert_eq!(owned(&got), json);
            }
        }
    }

    #[test]
    fn borrowed_fields_leave_other_spellings_to_the_json_reader() {
        assert_eq!(
            borrowed_csv_fields(br#"["7",null,"a b"]"#)
                .unwrap()
                .to_vec(),
            vec![Some("7"), None, Some("a b")]
        );
        assert!(borrowed_csv_fields(b"[]").unwrap().is_empty());
        for other in [
            &br#"[ "7"]"#[..],
            br#"["7"] "#,
            br#"["a\"b"]"#,
            b"[nul]",
            b"[7]",
            br#"["7",]"#,
            b"[",
            b"",
        ] {
            assert!(borrowed_csv_fields(other).is_none(), "{other:?}");
        }
    }

    #[test]
    fn malformed_values_are_errors() {
        let any = [ColumnType::Any; 2];
        assert!(matches!(
            decode_row(b"[1]", RowFormat::Jsonl, &any),
            Err(RowError::Arity {
                expected: 2,
                found: 1
            })
        ));
        assert!(matches!(
            decode_row(b"{\"a\":1}", RowFormat::Jsonl, &any),
            Err(RowError::Malformed { .. })
        ));
        assert!(decode_row(b"", RowFormat::Csv, &any).is_err());
    }

    #[test]
    fn text_and_typed_views() {
        assert_eq!(field_text(&json!(null)), None);
        assert_eq!(field_text(&json!("x")).as_deref(), Some("x"));
        assert_eq!(field_text(&json!(1.5)).as_deref(), Some("1.5"));
        assert_eq!(typed_json(json!("42"), RowFormat::Csv), json!(42));
        assert_eq!(typed_json(json!("2.5"), RowFormat::Csv), json!(2.5));
        assert_eq!(typed_json(json!("007"), RowFormat::Csv), json!("007"));
        assert_eq!(typed_json(json!("42"), RowFormat::Jsonl), json!("42"));
        let fmt: RowFormat = serde_json::from_str("\"jsonl\"").unwrap();
        assert_eq!(
            (fmt, RowFormat::Csv.to_string()),
            (RowFormat::Jsonl, "csv".into())
        );
    }
}
