//! Rows in record values: how `kappa log produce` encodes a row and how
//! consumers (the CLI, the stream runner) decode it.
//!
//! A topic that carries rows records its `columns` and its `row_format`
//! (`csv` or `jsonl`) in `topic.json`, both set by the first producer. The
//! value of every record is then a JSON array with exactly one element per
//! column, in column order:
//!
//! | format  | element                                                        |
//! |---------|----------------------------------------------------------------|
//! | `csv`   | a JSON string holding the raw field text, or `null` for an     |
//! |         | empty field or the producer's `--null` marker                  |
//! | `jsonl` | the object's JSON value for that column (`null` if missing)    |
//!
//! So `["7","007",null]` in a CSV topic is *text*, to be typed exactly like
//! a field of a CSV file ([`Value::infer`], [`ColumnType::parse`]: `7` is an
//! integer, `007` stays text), while `[7,"007",null]` in a JSON lines topic is
//! already typed (`"12"` is text). JSON is chosen over a binary row codec so
//! that a value stays readable with any tool and the two formats share one
//! framing. An empty value is a tombstone (compacted topics), not a row:
//! check [`Record::is_tombstone`](super::Record::is_tombstone) first.
//!
//! The record key is the raw text of the producer's `--key` column (no key
//! when the field is null); see `partition_for_key` for routing.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use smallvec::SmallVec;

use crate::schema::ColumnType;
use crate::value::{Row, Value};

/// How the elements of a topic's row values are to be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RowFormat {
    /// Raw CSV field text (strings), typed on read like a CSV file.
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
    /// The value is not a JSON array.
    #[error("value is not a JSON array: {detail}")]
    Malformed {
        /// The JSON parser's complaint.
        detail: String,
    },
    /// The array does not have one element per column.
    #[error("value has {found} fields, the topic has {expected} columns")]
    Arity {
        /// The topic's column count.
        expected: usize,
        /// The array's length.
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

/// Appends the value of a CSV row: `None` is a null field.
pub fn encode_csv_row<'a>(fields: impl IntoIterator<Item = Option<&'a str>>, out: &mut Vec<u8>) {
    out.push(b'[');
    for (i, field) in fields.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match field {
            Some(text) => serde_json::to_writer(&mut *out, text).expect("writing to a Vec"),
            None => out.extend_from_slice(b"null"),
        }
    }
    out.push(b']');
}

/// Appends the value of a JSON lines row: `None` (a missing key) is null.
pub fn encode_json_row<'a>(values: impl IntoIterator<Item = Option<&'a Json>>, out: &mut Vec<u8>) {
    out.push(b'[');
    for (i, value) in values.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match value {
            Some(v) => serde_json::to_writer(&mut *out, v).expect("writing to a Vec"),
            None => out.extend_from_slice(b"null"),
        }
    }
    out.push(b']');
}

/// Fields held inline by [`borrowed_csv_fields`] before it allocates.
const INLINE_FIELDS: usize = 16;

/// The fields of a CSV topic's row value, borrowed from it, when the value
/// is spelled as [`encode_csv_row`] writes it (no spaces) and no string
/// holds an escape or a control character; `None` otherwise, for a general
/// decoder, which reads every other valid spelling (and refuses the invalid
/// ones) as before. A `None` field is a JSON `null`. This is the stream
/// runner's hot path: no JSON parser and no allocation for a short row.
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

/// The raw elements of a row value, checked to number `columns`.
pub fn decode_fields(value: &[u8], columns: usize) -> Result<Vec<Json>, RowError> {
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
    let fields = decode_fields(value, types.len())?;
    fields
        .into_iter()
        .zip(types)
        .enumerate()
        .map(|(column, (json, ty))| {
            typed(json, format, *ty, None).map_err(|detail| RowError::Field { column, detail })
        })
        .collect()
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

    #[test]
    fn csv_rows_keep_raw_text_and_type_on_read() {
        let mut v = Vec::new();
        encode_csv_row([Some("7"), Some("007"), None, Some("a \"q\",b\n")], &mut v);
        assert_eq!(v, br#"["7","007",null,"a \"q\",b\n"]"#);
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
        let err = decode_row(
            &v,
            RowFormat::Csv,
            &[
                ColumnType::Int,
                ColumnType::Int,
                ColumnType::Any,
                ColumnType::Any,
            ],
        )
        .unwrap_err();
        assert!(matches!(err, RowError::Field { column: 1, .. }), "{err}");
    }

    #[test]
    fn json_rows_are_already_typed() {
        let (a, b, c) = (json!(12), json!("12"), json!({"x": true}));
        let mut v = Vec::new();
        encode_json_row([Some(&a), Some(&b), None, Some(&c)], &mut v);
        let row = decode_row(&v, RowFormat::Jsonl, &[ColumnType::Any; 4]).unwrap();
        assert_eq!(
            row,
            vec![
                Value::Int(12),
                Value::str("12"),
                Value::Null,
                Value::str(r#"{"x":true}"#)
            ]
        );
        // A number inside a CSV topic is not something a producer writes.
        assert!(matches!(
            decode_row(&v, RowFormat::Csv, &[ColumnType::Any; 4]),
            Err(RowError::Field { column: 0, .. })
        ));
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
            let mut v = Vec::new();
            encode_csv_row(fields.iter().map(|f| f.as_deref()), &mut v);
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
