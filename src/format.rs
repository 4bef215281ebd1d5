//! The rules of the text formats rows arrive in — CSV with a header, and
//! JSON lines — shared by every reader of them: the file sources
//! ([`crate::source`]) and `kappa log produce`. What is null, how many
//! fields a CSV record must have, which JSON lines are objects and which
//! keys they may have are decided here once, so a file read by `kappa run`
//! and the same file produced into a topic accept and refuse the same rows
//! with the same words.
//!
//! The readers differ in what they make of a field (a typed value for a
//! job, an encoded log value) and in how they locate a row (a chunk of a
//! file, a line of standard input); that stays with them.

use std::io::Read;

use serde_json::{Map, Value as Json};

/// Which fields are null: the empty field always, and a second marker
/// when given (`NA`, `NULL`, `\N`).
pub fn is_null(field: &[u8], marker: Option<&str>) -> bool {
    field.is_empty() || marker.is_some_and(|m| m.as_bytes() == field)
}

/// A CSV reader as kappa reads CSV: RFC 4180 as the `csv` crate reads it,
/// records of any length (a record of the wrong length is a bad row, found
/// by [`csv_width`], not an error that stops the reader), and the header
/// read as a record by the caller.
pub fn csv_reader<R: Read>(input: R, capacity: usize) -> csv::Reader<R> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .buffer_capacity(capacity)
        .from_reader(input)
}

/// Whether a record of `found` fields fits a header of `expected`: `Ok`
/// with `false` for a blank line (one empty field), which is skipped, and
/// the problem for any other wrong length.
pub fn csv_width(expected: usize, found: usize, blank: bool) -> Result<bool, String> {
    if found == expected {
        Ok(true)
    } else if found == 1 && blank {
        Ok(false)
    } else {
        Err(format!("expected {expected} fields, found {found}"))
    }
}

/// Whether a JSON line is blank (skipped, not a row).
pub fn json_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// One JSON line as the object it must be.
pub fn json_object(line: &[u8]) -> Result<Map<String, Json>, String> {
    serde_json::from_slice(line)
        .map_err(|e| format!("bad JSON (one object per line expected): {e}"))
}

/// An object whose keys are all among `columns` (a missing key is null);
/// `whence` names the columns in the error (`the topic's columns`).
pub fn json_keys(
    object: &Map<String, Json>,
    columns: &[String],
    whence: &str,
) -> Result<(), String> {
    match object.keys().find(|k| !columns.contains(k)) {
        None => Ok(()),
        Some(extra) => Err(format!(
            "key {extra:?} is not a column ({whence}: {})",
            columns.join(",")
        )),
    }
}

/// The value of `column`, taken out of the object: `None` when it is
/// missing, JSON `null`, or a string equal to the null `marker`.
pub fn json_field(
    object: &mut Map<String, Json>,
    column: &str,
    marker: Option<&str>,
) -> Option<Json> {
    match object.remove(column) {
        None | Some(Json::Null) => None,
        Some(Json::String(s)) if marker == Some(s.as_str()) => None,
        Some(v) => Some(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nulls_are_the_empty_field_and_the_marker() {
        assert!(is_null(b"", None));
        assert!(!is_null(b"NA", None));
        assert!(is_null(b"NA", Some("NA")));
        assert!(!is_null(b"na", Some("NA")));
    }

    #[test]
    fn csv_width_skips_blank_lines_and_names_the_counts() {
        assert_eq!(csv_width(2, 2, false), Ok(true));
        assert_eq!(csv_width(2, 1, true), Ok(false));
        assert_eq!(
            csv_width(2, 1, false),
            Err("expected 2 fields, found 1".into())
        );
        assert_eq!(
            csv_width(2, 3, false),
            Err("expected 2 fields, found 3".into())
        );
    }

    #[test]
    fn json_lines_are_objects_with_known_keys() {
        assert!(json_blank(b"  \t"));
        assert!(json_object(b"[1]").unwrap_err().starts_with("bad JSON"));
        let mut o = json_object(br#"{"a":1,"b":"NA","c":null}"#).unwrap();
        let columns = ["a", "b", "c", "d"].map(String::from);
        assert_eq!(
            json_keys(&o, &columns, "the columns of the first line"),
            Ok(())
        );
        assert_eq!(
            json_keys(&o, &columns[..2], "the columns of the first line"),
            Err("key \"c\" is not a column (the columns of the first line: a,b)".into())
        );
        assert_eq!(json_field(&mut o, "a", Some("NA")), Some(Json::from(1)));
        assert_eq!(json_field(&mut o, "b", Some("NA")), None);
        assert_eq!(json_field(&mut o, "c", None), None);
        assert_eq!(json_field(&mut o, "d", None), None);
    }
}
