//! Sampling an input's keys before a run, so that a planner can find hot
//! keys (see [`crate::ops::skew`]).
//!
//! Block sampling: each file is cut at newlines into `8 / rate` ranges and
//! every `1 / rate`-th range is read, so about `rate` of the bytes are read
//! and parsed, spread evenly over the file. Files too small to split are
//! read whole. Rows are typed exactly as a run types them, so sampled keys
//! compare equal to the keys the dataflow sees. Bad rows are skipped: the
//! run itself reports them.
//!
//! The cuts do not track CSV quotes (that would read the whole file, which
//! on TPC-H's 750 MB `lineitem` took longer than a third of the run): a
//! range starting inside a quoted field with a newline parses wrongly and
//! skews the sample a little. A sample only informs a strategy, and every
//! strategy gives the same rows.

use super::split::{Chunk, split_at_newlines};
use super::{BadRowPolicy, BadRows, InputFiles, ReadOptions, SourceError, read_chunk};
use crate::job::KeySample;
use crate::schema::{ColumnType, Projection};

/// Counts the values of `columns` over about `rate` of input `index`'s rows.
pub fn sample_keys(
    input: &InputFiles,
    index: usize,
    columns: &[(usize, ColumnType)],
    rate: f64,
    options: &ReadOptions,
) -> Result<KeySample, SourceError> {
    let projection = Projection {
        input: input.schema.name.clone(),
        columns: columns.to_vec(),
        late: None,
        rules: Vec::new(),
    };
    let options = ReadOptions {
        null: options.null.clone(),
        on_bad_row: BadRowPolicy::Skip,
    };
    let every = (1.0 / rate).round().max(1.0) as usize;
    let mut sample = KeySample::default();
    for (file, path) in input.files.iter().enumerate() {
        let ranges = split_at_newlines(path, every * 8).map_err(|e| SourceError::io(path, e))?;
        let step = if ranges.len() < every { 1 } else { every };
        // Start halfway into the first stride so the file's head is not favoured.
        let first = (step / 2).min(ranges.len().saturating_sub(1));
        for &(start, end) in ranges.iter().skip(first).step_by(step) {
            let chunk = Chunk {
                input: index,
                file,
                start,
                end,
                header: start == 0,
            };
            let mut bad = BadRows::default();
            read_chunk(
                input,
                &chunk,
                &projection,
                &options,
                &mut bad,
                &|_| {},
                &mut |row| {
                    sample.rows += 1;
                    match sample.counts.get_mut(row) {
                        Some(n) => *n += 1,
                        None => {
                            sample.counts.insert(std::mem::take(row), 1);
                        }
                    }
                },
            )?;
        }
    }
    Ok(sample)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;

    #[test]
    fn samples_a_share_of_a_large_file_and_finds_its_hot_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.csv");
        let mut text = String::from("a,b\n");
        let mut i = 0u64;
        while text.len() < 6 << 20 {
            let key = if i.is_multiple_of(4) { 0 } else { i };
            text.push_str(&format!("{key},{i}\n"));
            i += 1;
        }
        std::fs::write(&path, &text).unwrap();
        let input = InputFiles::resolve("in", &path, None, None).unwrap();
        let options = ReadOptions {
            null: None,
            on_bad_row: BadRowPolicy::Fail,
        };
        let sample = sample_keys(&input, 0, &[(0, ColumnType::Any)], 0.05, &options).unwrap();
        assert!(
            sample.rows > i / 40 && sample.rows < i / 10,
            "{} of {i}",
            sample.rows
        );
        let hot = sample.counts[&vec![Value::Int(0)]];
        let share = hot as f64 / sample.rows as f64;
        assert!((share - 0.25).abs() < 0.02, "{share}");
    }
}
