//! Entry point for fuzzing the file decoders on untrusted bytes (CSV, JSON
//! lines, text), split into any number of chunks as workers split a file.
//! Used by the `cargo fuzz` targets in `fuzz/` (built with `--cfg fuzzing`)
//! and by the property tests in `tests_fuzz.rs`.

use super::split::{Chunk, split_file};
use super::{BadRowPolicy, BadRows, Format, InputFiles, ReadOptions, read_chunk};
use crate::schema::{ColumnType, Projection};

/// Reads every chunk of `bytes` as `format` under `policy`; the rows and
/// bad rows read, or the error that stopped the read.
pub fn read_bytes(
    bytes: &[u8],
    format: Format,
    policy: BadRowPolicy,
    parts: usize,
) -> Result<(u64, u64), String> {
    let dir = crate::log::fuzz::scratch_dir();
    let path = dir.join("f");
    std::fs::write(&path, bytes).expect("write input");
    let result = read_file(&path, format, policy, parts);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn read_file(
    path: &std::path::Path,
    format: Format,
    policy: BadRowPolicy,
    parts: usize,
) -> Result<(u64, u64), String> {
    let input = match InputFiles::resolve("input", path, Some(format), None) {
        Ok(i) => i,
        Err(e) => return Err(e.to_string()),
    };
    let projection = Projection {
        input: input.schema.name.clone(),
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
        rules: Vec::new(),
    };
    let options = ReadOptions {
        on_bad_row: policy,
        ..ReadOptions::default()
    };
    let mut bad = BadRows::default();
    let mut rows = 0u64;
    let cuts = split_file(path, format, parts).map_err(|e| e.to_string())?;
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
