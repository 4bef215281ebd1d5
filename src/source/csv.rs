//! CSV chunks: `csv::ByteRecord`s (no allocation per field), then only the
//! projected columns are decoded and typed.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use super::{ChunkReader, SourceError};
use crate::format;
use crate::value::{Row, Value};

/// How many records between progress reports.
const PROGRESS_EVERY: u64 = 1 << 14;

/// The header record of a CSV file.
pub(super) fn read_header(path: &Path) -> Result<Vec<String>, SourceError> {
    let file = File::open(path).map_err(|e| SourceError::io(path, e))?;
    let mut reader = format::csv_reader(file, 1 << 16);
    let mut record = ::csv::StringRecord::new();
    match reader.read_record(&mut record) {
        Ok(true) => Ok(record.iter().map(|f| f.trim().to_string()).collect()),
        Ok(false) => Err(SourceError::NoHeader { path: path.into() }),
        Err(e) => Err(csv_error(path, e)),
    }
}

fn csv_error(path: &Path, e: ::csv::Error) -> SourceError {
    let problem = e.to_string();
    match e.into_kind() {
        ::csv::ErrorKind::Io(io) => SourceError::io(path, io),
        _ => SourceError::BadHeader {
            path: path.into(),
            problem,
        },
    }
}

pub(super) fn read(
    r: &mut ChunkReader<'_>,
    progress: &dyn Fn(u64),
    emit: &mut dyn FnMut(&mut Row),
) -> Result<u64, SourceError> {
    let path = r.path().to_path_buf();
    let mut file = File::open(&path).map_err(|e| SourceError::io(&path, e))?;
    file.seek(SeekFrom::Start(r.chunk.start))
        .map_err(|e| SourceError::io(&path, e))?;
    let mut reader = format::csv_reader(file.take(r.chunk.end - r.chunk.start), 1 << 20);
    let width = r.input.schema.columns.len();
    let mut record = ::csv::ByteRecord::new();
    let mut row: Row = Vec::new();
    let mut skip_header = r.chunk.header;
    let (mut rows, mut reported) = (0u64, 0u64);
    loop {
        match reader.read_byte_record(&mut record) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => return Err(SourceError::io(&path, std::io::Error::other(e))),
        }
        if std::mem::take(&mut skip_header) {
            continue;
        }
        // The csv crate's line numbers run one behind after each CRLF, so
        // a bad row is located by its byte offset instead.
        let byte = record.position().map_or(0, |p| p.byte());
        let blank = record.len() == 1 && record[0].is_empty();
        match format::csv_width(width, record.len(), blank) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(problem) => {
                r.bad_row_at_byte(byte, None, problem)?;
                continue;
            }
        }
        match typed_row(r, &record, &mut row) {
            Ok(()) => {
                rows += 1;
                emit(&mut row);
            }
            Err((column, problem)) => r.bad_row_at_byte(byte, Some(column), problem)?,
        }
        if rows % PROGRESS_EVERY == 0 {
            let at = record.position().map_or(0, |p| p.byte());
            progress(at - reported);
            reported = at;
        }
    }
    progress(r.chunk.end - r.chunk.start - reported);
    Ok(rows)
}

/// Fills `row` with the projected, typed fields, or says which (0-based)
/// column does not fit and why.
fn typed_row(
    r: &ChunkReader<'_>,
    record: &::csv::ByteRecord,
    row: &mut Row,
) -> Result<(), (usize, String)> {
    row.clear();
    row.reserve(r.projection.columns.len());
    for &(col, ty) in &r.projection.columns {
        let field = &record[col];
        if r.options.is_null(field) {
            row.push(Value::Null);
            continue;
        }
        row.push(ty.parse_bytes(field).map_err(|e| (col, e))?);
    }
    r.projection.check(row)
}
