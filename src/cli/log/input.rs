//! Rows for `kappa log produce`: CSV with a header or JSON lines, read one
//! row at a time and encoded straight into a batch buffer as the log's row
//! values (`crate::log::rows`).
//!
//! CSV follows RFC 4180 as the `csv` crate reads it (like `kappa run`); an
//! empty field or the `--null` marker is null. JSON lines: one object per
//! line, blank lines skipped; the columns are the topic's when it already
//! has JSON columns, else the first object's keys; a missing key is null, a
//! key that is not a column makes the row bad, a string equal to the
//! `--null` marker is null. Every problem names the input line.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{BufRead, Read};
use std::rc::Rc;

use serde_json::{Map, Value as Json};

use crate::format;
use crate::log::rows::{encode_csv_row, encode_json_row, field_text};
use crate::log::{RowFormat, event_time_from_json, parse_event_time};

/// What went wrong reading the input.
#[derive(Debug)]
pub enum InputError {
    /// A row that cannot be produced, with its 1-based input line.
    Bad { line: u64, problem: String },
    /// Reading the input failed.
    Io(std::io::Error),
}

/// Which columns feed the key and the event time, and the null marker.
#[derive(Debug, Default)]
pub struct RowSpec {
    pub key: Option<usize>,
    pub time: Option<usize>,
    pub null: Option<String>,
}

/// One row whose value was appended to the caller's buffer.
#[derive(Debug)]
pub struct Row {
    pub line: u64,
    pub key: Option<String>,
    pub event_ts: Option<i64>,
}

pub enum RowReader {
    Csv {
        rdr: csv::Reader<Box<dyn Read>>,
        rec: csv::StringRecord,
        columns: usize,
        lines: Lines,
    },
    Jsonl {
        input: Box<dyn BufRead>,
        line: u64,
        buf: Vec<u8>,
        first: Option<(u64, Map<String, Json>)>,
        columns: Vec<String>,
    },
}

impl RowReader {
    pub fn new(format: RowFormat, input: Box<dyn BufRead>) -> Self {
        match format {
            RowFormat::Csv => {
                let lines = Lines::default();
                let tracked = Tracked {
                    inner: input,
                    lines: lines.clone(),
                };
                RowReader::Csv {
                    rdr: format::csv_reader(Box::new(tracked) as Box<dyn Read>, 1 << 16),
                    rec: csv::StringRecord::new(),
                    columns: 0,
                    lines,
                }
            }
            RowFormat::Jsonl => RowReader::Jsonl {
                input,
                line: 0,
                buf: Vec::new(),
                first: None,
                columns: Vec::new(),
            },
        }
    }

    /// The CSV header or the first object's keys; `None` for an empty input.
    pub fn read_header(&mut self) -> Result<Option<Vec<String>>, InputError> {
        match self {
            RowReader::Csv {
                rdr, rec, columns, ..
            } => {
                let header = rdr
                    .read_record(rec)
                    .map_err(|e| csv_error(e, 1, &Lines::default()))?;
                *columns = rec.len();
                Ok(header.then(|| rec.iter().map(String::from).collect()))
            }
            RowReader::Jsonl {
                input,
                line,
                buf,
                first,
                columns,
            } => {
                let Some(object) = next_object(input.as_mut(), line, buf)? else {
                    return Ok(None);
                };
                *columns = object.keys().cloned().collect();
                *first = Some((*line, object));
                Ok(Some(columns.clone()))
            }
        }
    }

    /// Uses the topic's columns instead of the first object's keys (JSON lines).
    pub fn use_columns(&mut self, topic_columns: &[String]) {
        if let RowReader::Jsonl { columns, .. } = self {
            *columns = topic_columns.to_vec();
        }
    }

    /// Reads the next row, appending its encoded value to `value`.
    pub fn next_row(
        &mut self,
        spec: &RowSpec,
        value: &mut Vec<u8>,
    ) -> Result<Option<Row>, InputError> {
        match self {
            RowReader::Csv {
                rdr,
                rec,
                columns,
                lines,
            } => {
                let line = lines.line_of(rec.position().map_or(0, |p| p.byte())) + 1;
                if !rdr
                    .read_record(rec)
                    .map_err(|e| csv_error(e, line, lines))?
                {
                    return Ok(None);
                }
                let line = lines.line_of(rec.position().map_or(0, |p| p.byte()));
                csv_row(rec, line, *columns, spec, value).map(Some)
            }
            RowReader::Jsonl {
                input,
                line,
                buf,
                first,
                columns,
            } => {
                let (at, object) = match first.take() {
                    Some(f) => f,
                    None => match next_object(input.as_mut(), line, buf)? {
                        Some(o) => (*line, o),
                        None => return Ok(None),
                    },
                };
                json_row(at, object, columns, spec, value).map(Some)
            }
        }
    }
}

/// The input's line numbers, counted from its `\n` bytes as the csv reader
/// reads them (the csv crate's own run one behind after each CRLF).
#[derive(Clone, Default)]
pub struct Lines(Rc<RefCell<LineState>>);

#[derive(Default)]
struct LineState {
    /// Offsets of newlines read but not yet passed by a record.
    pending: VecDeque<u64>,
    /// Bytes read so far.
    read: u64,
    /// Newlines passed.
    passed: u64,
}

impl Lines {
    /// The line of the record that starts at byte `at`. Records come in
    /// order; after a CRLF the csv crate starts the next one at the `\n`,
    /// which is counted as the end of the line before.
    fn line_of(&self, at: u64) -> u64 {
        let mut s = self.0.borrow_mut();
        while s.pending.front().is_some_and(|&n| n <= at) {
            s.pending.pop_front();
            s.passed += 1;
        }
        1 + s.passed
    }
}

/// The input as the csv reader reads it, noting where its newlines are.
struct Tracked {
    inner: Box<dyn BufRead>,
    lines: Lines,
}

impl Read for Tracked {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut s = self.lines.0.borrow_mut();
        let start = s.read;
        s.pending
            .extend(memchr::memchr_iter(b'\n', &buf[..n]).map(|i| start + i as u64));
        s.read += n as u64;
        Ok(n)
    }
}

fn csv_error(e: csv::Error, line: u64, lines: &Lines) -> InputError {
    let line = e
        .position()
        .map_or(line, |p| lines.line_of(p.byte()).max(p.line()));
    match e.into_kind() {
        csv::ErrorKind::Io(io) => InputError::Io(io),
        csv::ErrorKind::Utf8 { err, .. } => InputError::Bad {
            line,
            problem: format!("invalid UTF-8 in field {}", err.field() + 1),
        },
        other => InputError::Bad {
            line,
            problem: format!("{other:?}"),
        },
    }
}

fn csv_row(
    rec: &csv::StringRecord,
    line: u64,
    columns: usize,
    spec: &RowSpec,
    value: &mut Vec<u8>,
) -> Result<Row, InputError> {
    let bad = |problem: String| InputError::Bad { line, problem };
    format::csv_width(columns, rec.len(), false).map_err(bad)?;
    let field = |i: usize| {
        let f = &rec[i];
        (!format::is_null(f.as_bytes(), spec.null.as_deref())).then_some(f)
    };
    let event_ts = match spec.time.and_then(field) {
        Some(text) => Some(parse_event_time(text).map_err(|e| bad(format!("time: {e}")))?),
        None => None,
    };
    encode_csv_row((0..columns).map(field), value);
    Ok(Row {
        line,
        key: spec.key.and_then(field).map(String::from),
        event_ts,
    })
}

/// The next non-blank line parsed as a JSON object.
fn next_object(
    input: &mut dyn BufRead,
    line: &mut u64,
    buf: &mut Vec<u8>,
) -> Result<Option<Map<String, Json>>, InputError> {
    loop {
        buf.clear();
        if input.read_until(b'\n', buf).map_err(InputError::Io)? == 0 {
            return Ok(None);
        }
        *line += 1;
        if format::json_blank(buf) {
            continue;
        }
        return format::json_object(buf)
            .map(Some)
            .map_err(|problem| InputError::Bad {
                line: *line,
                problem,
            });
    }
}

fn json_row(
    line: u64,
    mut object: Map<String, Json>,
    columns: &[String],
    spec: &RowSpec,
    value: &mut Vec<u8>,
) -> Result<Row, InputError> {
    let bad = |problem: String| InputError::Bad { line, problem };
    format::json_keys(&object, columns, "the topic's columns").map_err(bad)?;
    let fields: Vec<Option<Json>> = columns
        .iter()
        .map(|c| format::json_field(&mut object, c, spec.null.as_deref()))
        .collect();
    let event_ts = match spec.time.and_then(|i| fields[i].as_ref()) {
        Some(v) => Some(event_time_from_json(v).map_err(|e| bad(format!("time: {e}")))?),
        None => None,
    };
    let key = spec
        .key
        .and_then(|i| fields[i].as_ref())
        .and_then(field_text)
        .map(|k| k.into_owned());
    let refs: Vec<Option<&Json>> = fields.iter().map(Option::as_ref).collect();
    encode_json_row(&refs, value);
    Ok(Row {
        line,
        key,
        event_ts,
    })
}
