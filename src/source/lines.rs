//! Line-oriented chunks: JSON lines (one object per line) and plain text.
//!
//! JSON values arrive typed: numbers become integers (if they fit `i64`) or
//! floats, strings stay strings (no inference: `"12"` is text in JSON),
//! booleans become the strings `true`/`false`, arrays and objects their JSON
//! text. Blank lines are skipped. A key that is not among the columns (taken
//! from the file's first object) makes the row bad; a missing key is null.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::{Map, Value as Json};

use super::{ChunkReader, SourceError};
use crate::format;
use crate::log::rows::from_json;
use crate::value::{Row, Value};

/// The keys of the first object in a JSON lines file.
pub(super) fn read_json_header(path: &Path) -> Result<Vec<String>, SourceError> {
    let file = File::open(path).map_err(|e| SourceError::io(path, e))?;
    for (number, line) in (1..).zip(BufReader::new(file).lines()) {
        let line = line.map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidData => SourceError::BadHeader {
                path: path.into(),
                problem: format!("line {number}: invalid UTF-8"),
            },
            _ => SourceError::io(path, e),
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let object: Map<String, Json> =
            serde_json::from_str(&line).map_err(|e| SourceError::BadHeader {
                path: path.into(),
                problem: format!("first line: {e}"),
            })?;
        return Ok(object.keys().cloned().collect());
    }
    Err(SourceError::NoHeader { path: path.into() })
}

/// Calls `each(line_in_chunk, bytes)` for each line of the chunk, without its line ending.
fn for_each_line(
    r: &mut ChunkReader<'_>,
    progress: &dyn Fn(u64),
    mut each: impl FnMut(&mut ChunkReader<'_>, u64, &[u8]) -> Result<(), SourceError>,
) -> Result<(), SourceError> {
    let path = r.path().to_path_buf();
    let mut file = File::open(&path).map_err(|e| SourceError::io(&path, e))?;
    file.seek(SeekFrom::Start(r.chunk.start))
        .map_err(|e| SourceError::io(&path, e))?;
    let mut reader = BufReader::with_capacity(1 << 20, file.take(r.chunk.end - r.chunk.start));
    let mut buf = Vec::new();
    let (mut line_no, mut pending) = (0u64, 0u64);
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| SourceError::io(&path, e))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        pending += n as u64;
        if pending > 1 << 20 {
            progress(std::mem::take(&mut pending));
        }
        let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        each(r, line_no, line)?;
    }
    progress(pending);
    Ok(())
}

pub(super) fn read_text(
    r: &mut ChunkReader<'_>,
    progress: &dyn Fn(u64),
    emit: &mut dyn FnMut(&mut Row),
) -> Result<u64, SourceError> {
    let mut rows = 0;
    for_each_line(r, progress, |r, line_no, line| {
        match std::str::from_utf8(line) {
            Ok(text) => {
                rows += 1;
                emit(&mut vec![Value::str(text)]);
            }
            Err(_) => r.bad_row(line_no, None, "invalid UTF-8".into())?,
        }
        Ok(())
    })?;
    Ok(rows)
}

pub(super) fn read_jsonl(
    r: &mut ChunkReader<'_>,
    progress: &dyn Fn(u64),
    emit: &mut dyn FnMut(&mut Row),
) -> Result<u64, SourceError> {
    let mut rows = 0;
    for_each_line(r, progress, |r, line_no, line| {
        if format::json_blank(line) {
            return Ok(());
        }
        match json_row(r, line) {
            Ok(mut row) => {
                rows += 1;
                emit(&mut row);
                Ok(())
            }
            Err((column, problem)) => r.bad_row(line_no, column, problem),
        }
    })?;
    Ok(rows)
}

fn json_row(r: &ChunkReader<'_>, line: &[u8]) -> Result<Row, (Option<usize>, String)> {
    let mut object = format::json_object(line).map_err(|e| (None, e))?;
    let columns = &r.input.schema.columns;
    format::json_keys(&object, columns, "the columns of the first line").map_err(|e| (None, e))?;
    let mut row = Vec::with_capacity(r.projection.columns.len());
    for &(col, ty) in &r.projection.columns {
        let value = match format::json_field(&mut object, &columns[col], r.options.null.as_deref())
        {
            None => Value::Null,
            Some(json) => ty.coerce(from_json(json)).map_err(|e| (Some(col), e))?,
        };
        row.push(value);
    }
    r.projection
        .check(&row)
        .map_err(|(col, e)| (Some(col), e))?;
    Ok(row)
}
