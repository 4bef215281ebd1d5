//! The file decoders on hostile bytes: random bytes and mutated valid files,
//! as CSV and JSON lines, split into any number of chunks. The reader must
//! return rows or a located error, never panic, and with `skip` it must
//! account for every line it could not read (rows + bad rows never exceed
//! the lines there are).

use proptest::prelude::*;

use super::split::{Chunk, split_file};
use super::*;
use crate::schema::{ColumnType, Projection};

/// Reads every chunk of `text` as `format` under `policy`.
fn read_bytes(
    bytes: &[u8],
    format: Format,
    policy: BadRowPolicy,
    parts: usize,
) -> Result<(u64, u64), String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, bytes).unwrap();
    let input = match InputFiles::resolve("input", &path, Some(format), None) {
        Ok(i) => i,
        Err(e) => return Err(e.to_string()),
    };
    let projection = Projection {
        columns: (0..input.schema.columns.len())
            .map(|i| {
                (
                    i,
                    if i == 0 {
                        ColumnType::Int
                    } else {
                        ColumnType::Any
                    },
                )
            })
            .collect(),
        late: None,
    };
    let options = ReadOptions {
        on_bad_row: policy,
        ..ReadOptions::default()
    };
    let mut bad = BadRows::default();
    let mut rows = 0u64;
    let cuts = split_file(&path, format, parts).map_err(|e| e.to_string())?;
    for (i, (start, end)) in cuts.into_iter().enumerate() {
        let chunk = Chunk {
            input: 0,
            file: 0,
            start,
            end,
            header: i == 0,
        };
        read_chunk(
            &input,
            &chunk,
            &projection,
            &options,
            &mut bad,
            &|_| {},
            &mut |_| rows += 1,
        )
        .map_err(|e| e.to_string())?;
    }
    Ok((rows, bad.count))
}

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
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..6),
    )
        .prop_map(|(mut bytes, edits)| {
            for (at, byte, kind) in edits {
                let i = at.index(bytes.len().max(1)).min(bytes.len());
                match kind {
                    0 if i < bytes.len() => bytes[i] = byte,
                    1 => bytes.insert(i, byte),
                    _ if i < bytes.len() => {
                        bytes.remove(i);
                    }
                    _ => {}
                }
            }
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
