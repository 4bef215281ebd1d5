//! The file decoders on hostile bytes: random bytes and mutated valid files,
//! as CSV and JSON lines, split into any number of chunks. The reader must
//! return rows or a located error, never panic, and with `skip` it must
//! account for every line it could not read (rows + bad rows never exceed
//! the lines there are).

use proptest::prelude::*;

use super::fuzz::read_bytes;
use super::*;

fn valid_csv() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec((any::<i64>(), "[a-z,\"\n ]{0,8}"), 1..20).prop_map(|rows| {
        let mut text = String::from("a,b\n");
        for (a, b) in rows {
            text.push_str(&format!("{a},\"{}\"\n", b.replace('"', "\"\"")));
        }
        text.into_bytes()
    })
}

fn valid_jsonl() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec((any::<i64>(), "[a-z ]{0,8}"), 1..20).prop_map(|rows| {
        rows.iter()
            .map(|(a, b)| format!("{{\"a\":{a},\"b\":\"{b}\"}}\n"))
            .collect::<String>()
            .into_bytes()
    })
}

/// A valid file with a few bytes overwritten, inserted or removed.
fn mutated(valid: impl Strategy<Value = Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    (
        valid,
        proptest::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 1..6),
    )
        .prop_map(|(mut bytes, edits)| {
            crate::log::fuzz::edit(&mut bytes, &edits);
            bytes
        })
}

/// At most this many rows can be in `bytes` (CSV ends a record at `\r` too).
fn lines(bytes: &[u8]) -> u64 {
    bytes.split(|&b| b == b'\n' || b == b'\r').count() as u64
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400), parts in 1usize..4) {
        for format in [Format::Csv, Format::Jsonl, Format::Text] {
            for policy in [BadRowPolicy::Fail, BadRowPolicy::Skip] {
                if let Ok((rows, bad)) = read_bytes(&bytes, format, policy, parts) {
                    prop_assert!(rows + bad <= lines(&bytes), "{rows} rows + {bad} bad from {} lines", lines(&bytes));
                }
            }
        }
    }

    #[test]
    fn mutated_csv_is_read_or_refused_with_a_location(bytes in mutated(valid_csv()), parts in 1usize..4) {
        if let Err(e) = read_bytes(&bytes, Format::Csv, BadRowPolicy::Fail, parts) {
            prop_assert!(e.contains("line ") || e.contains("header") || e.contains("column") || e.contains("UTF-8"), "{e}");
        }
        if let Ok((rows, bad)) = read_bytes(&bytes, Format::Csv, BadRowPolicy::Skip, parts) {
            prop_assert!(rows + bad <= lines(&bytes));
        }
    }

    #[test]
    fn mutated_json_lines_are_read_or_refused_with_a_location(bytes in mutated(valid_jsonl()), parts in 1usize..4) {
        if let Err(e) = read_bytes(&bytes, Format::Jsonl, BadRowPolicy::Fail, parts) {
            prop_assert!(e.contains("line ") || e.contains("first line") || e.contains("column"), "{e}");
        }
        if let Ok((rows, bad)) = read_bytes(&bytes, Format::Jsonl, BadRowPolicy::Skip, parts) {
            prop_assert!(rows + bad <= lines(&bytes));
        }
    }
}

/// A field that is not UTF-8 is a bad row at its line and column, whether
/// its column is typed as an integer or inferred (integers are typed from
/// the bytes, so this error comes from the text path they fall back to).
#[test]
fn a_field_that_is_not_utf8_is_located() {
    let bytes = b"a,b\n1,x\n2,\xff\n\xc35,y\n4,z\n";
    let err = read_bytes(bytes, Format::Csv, BadRowPolicy::Fail, 1).unwrap_err();
    assert!(
        err.contains("line 3") && err.contains("column 2") && err.contains("invalid UTF-8"),
        "{err}"
    );
    assert_eq!(
        read_bytes(bytes, Format::Csv, BadRowPolicy::Skip, 1),
        Ok((2, 2))
    );
    let first = b"a,b\n1,x\n\xc35,y\n";
    let err = read_bytes(first, Format::Csv, BadRowPolicy::Fail, 1).unwrap_err();
    assert!(
        err.contains("line 3") && err.contains("column 1") && err.contains("invalid UTF-8"),
        "{err}"
    );
}
