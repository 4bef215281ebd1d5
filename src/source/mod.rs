//! Readers: bounded files (CSV, JSON lines, plain text) turned into typed,
//! projected rows.
//!
//! An input is a file or a directory of part files (sorted by name; names
//! starting with `.` or `_` are skipped, as Hadoop-style tools write
//! `_SUCCESS` and hidden temporaries). Large files are cut into byte ranges
//! at record boundaries ([`split`]) so that every worker parses its own share.
//!
//! Invariant: a row is either delivered whole and typed as the plan asked, or
//! reported as bad with its file, line and column — never dropped silently.
//! Under [`BadRowPolicy::Skip`] bad rows are counted and the first few kept as
//! examples; under [`BadRowPolicy::Fail`] the first one ends the read.

mod csv;
mod error;
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzz;
pub mod inputs;
pub mod kafka;
pub mod late;
mod lines;
pub mod records;
pub mod sample;
pub mod split;
pub mod state;
pub mod topic;

#[cfg(test)]
mod tests_fuzz;

use std::path::{Path, PathBuf};

pub use error::{Place, RowLocation, SourceError};
pub use split::Chunk;

use crate::job::InputFormat;
use crate::schema::{InputSchema, Projection};
use crate::value::Row;

/// An input file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// CSV with a header line (RFC 4180 as the `csv` crate reads it).
    Csv,
    /// One JSON object per line; the first object's keys are the columns.
    Jsonl,
    /// Plain text: one row per line, one column `line`.
    Text,
}

impl Format {
    /// The format a file name suggests: `.jsonl`/`.ndjson`/`.json` → JSON
    /// lines, `.txt` → text, anything else CSV.
    pub fn from_path(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some("jsonl" | "ndjson" | "json") => Format::Jsonl,
            Some("txt") => Format::Text,
            _ => Format::Csv,
        }
    }

    /// The extension [`Format::from_path`] reads as this format.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Jsonl => "jsonl",
            Format::Text => "txt",
        }
    }

    /// The format named on the command line (`--format`): `csv`, `jsonl`
    /// (or `json`), `text` (or `txt`).
    pub fn parse(name: &str) -> Option<Format> {
        match name {
            "csv" => Some(Format::Csv),
            "jsonl" | "json" => Some(Format::Jsonl),
            "text" | "txt" => Some(Format::Text),
            _ => None,
        }
    }
}

/// What to do with a row that does not fit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BadRowPolicy {
    /// Stop with an error naming the row (the default).
    #[default]
    Fail,
    /// Skip it, count it and keep the first few locations for the summary.
    Skip,
}

/// How fields are read.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ReadOptions {
    /// A second null marker besides the empty field (`NA`, `NULL`, `\N`).
    pub null: Option<String>,
    /// What to do with a row that does not fit.
    pub on_bad_row: BadRowPolicy,
}

impl ReadOptions {
    /// Whether a field is null ([`crate::format::is_null`]).
    pub fn is_null(&self, field: &[u8]) -> bool {
        crate::format::is_null(field, self.null.as_deref())
    }
}

/// Bad rows met while reading under [`BadRowPolicy::Skip`].
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct BadRows {
    /// Bad rows met, all of them.
    pub count: u64,
    /// The first few, as `location: problem`, sorted by location.
    pub examples: Vec<(RowLocation, String)>,
}

impl BadRows {
    /// How many examples are kept.
    pub const EXAMPLES: usize = 5;

    /// Counts one bad row, keeping it as an example if it is among the
    /// first few by location.
    pub fn record(&mut self, at: RowLocation, problem: String) {
        self.count += 1;
        self.examples.push((at, problem));
        self.examples.sort();
        self.examples.truncate(Self::EXAMPLES);
    }

    /// Merges another worker's bad rows; the examples stay the first few by location.
    pub fn merge(&mut self, other: BadRows) {
        self.count += other.count;
        self.examples.extend(other.examples);
        self.examples.sort();
        self.examples.truncate(Self::EXAMPLES);
    }
}

/// One input of a run, resolved: its files, format and columns.
#[derive(Clone, Debug)]
pub struct InputFiles {
    /// The input's name and the columns its files have.
    pub schema: InputSchema,
    /// The format every file is read as.
    pub format: Format,
    /// The files, sorted by name: the one given, or a directory's part files.
    pub files: Vec<PathBuf>,
}

impl InputFiles {
    /// Lists the files at `path` and reads the columns from the first one;
    /// every part file must have the same columns.
    pub fn resolve(
        name: &str,
        path: &Path,
        format: Option<Format>,
        required: Option<InputFormat>,
    ) -> Result<InputFiles, SourceError> {
        let files = list_files(name, path)?;
        let format = match required {
            Some(InputFormat::Text) => Format::Text,
            None => format.unwrap_or_else(|| Format::from_path(&files[0])),
        };
        let columns = read_header(&files[0], format)?;
        for file in &files[1..] {
            let other = read_header(file, format)?;
            if other != columns {
                return Err(SourceError::HeaderMismatch {
                    path: file.clone(),
                    found: other.join(","),
                    expected: columns.join(","),
                    first: files[0].clone(),
                });
            }
        }
        Ok(InputFiles {
            schema: InputSchema {
                name: name.to_string(),
                columns,
            },
            format,
            files,
        })
    }

    /// Total size in bytes.
    pub fn bytes(&self) -> u64 {
        self.files
            .iter()
            .filter_map(|f| f.metadata().ok())
            .map(|m| m.len())
            .sum()
    }
}

fn list_files(name: &str, path: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => SourceError::Missing {
            input: name.into(),
            path: path.into(),
        },
        _ => SourceError::io(path, e),
    })?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).map_err(|e| SourceError::io(path, e))? {
        let entry = entry.map_err(|e| SourceError::io(path, e))?;
        let hidden = entry.file_name().to_string_lossy().starts_with(['.', '_']);
        let is_file = entry
            .file_type()
            .map_err(|e| SourceError::io(entry.path(), e))?
            .is_file();
        if is_file && !hidden {
            files.push(entry.path());
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(SourceError::EmptyDir {
            input: name.into(),
            path: path.into(),
        });
    }
    Ok(files)
}

/// The columns of a file: the CSV header, the first JSON object's keys, or `line`.
pub fn read_header(path: &Path, format: Format) -> Result<Vec<String>, SourceError> {
    let columns = match format {
        Format::Text => return Ok(vec!["line".to_string()]),
        Format::Csv => csv::read_header(path)?,
        Format::Jsonl => lines::read_json_header(path)?,
    };
    let bad = |problem: String| SourceError::BadHeader {
        path: path.into(),
        problem,
    };
    for (i, c) in columns.iter().enumerate() {
        if c.is_empty() {
            return Err(bad(format!("column {} has an empty name", i + 1)));
        }
        if columns[..i].contains(c) {
            return Err(bad(format!("column {c:?} appears twice")));
        }
    }
    Ok(columns)
}

/// Reads one chunk of an input, calling `emit` for each good row. `emit`
/// may take the row (`std::mem::take`) or leave it to be reused for the
/// next one, so that rows need not be allocated one by one.
pub fn read_chunk(
    input: &InputFiles,
    chunk: &Chunk,
    projection: &Projection,
    options: &ReadOptions,
    bad: &mut BadRows,
    progress: &dyn Fn(u64),
    emit: &mut dyn FnMut(&mut Row),
) -> Result<u64, SourceError> {
    let mut reader = ChunkReader {
        input,
        chunk,
        projection,
        options,
        bad,
        base_line: None,
        line_cursor: None,
    };
    match input.format {
        Format::Csv => csv::read(&mut reader, progress, emit),
        Format::Jsonl => lines::read_jsonl(&mut reader, progress, emit),
        Format::Text => lines::read_text(&mut reader, progress, emit),
    }
}

/// State shared by the format readers: where the chunk is, and how bad rows go.
struct ChunkReader<'a> {
    input: &'a InputFiles,
    chunk: &'a Chunk,
    projection: &'a Projection,
    options: &'a ReadOptions,
    bad: &'a mut BadRows,
    /// Line number of the chunk's first byte, counted only when a bad row
    /// needs it (counting lines up front would cost a pass over the prefix).
    base_line: Option<u64>,
    /// `(byte offset, its line)` of the last bad row located by offset: bad
    /// rows come in file order, so locating them all scans the file once.
    line_cursor: Option<(u64, u64)>,
}

impl ChunkReader<'_> {
    fn path(&self) -> &Path {
        &self.input.files[self.chunk.file]
    }

    /// Locates a row by its line within the chunk (1-based) and a column.
    fn locate(
        &mut self,
        line_in_chunk: u64,
        column: Option<usize>,
    ) -> Result<RowLocation, SourceError> {
        let base = match self.base_line {
            Some(b) => b,
            None => {
                let b = split::line_at(self.path(), self.chunk.start)
                    .map_err(|e| SourceError::io(self.path(), e))?;
                *self.base_line.get_or_insert(b)
            }
        };
        Ok(self.locate_line(base + line_in_chunk - 1, column))
    }

    /// Locates a row by its line in the file (1-based) and a column.
    fn locate_line(&self, line: u64, column: Option<usize>) -> RowLocation {
        let column = column.map(|c| {
            (
                c + 1,
                self.input
                    .schema
                    .columns
                    .get(c)
                    .cloned()
                    .unwrap_or_default(),
            )
        });
        let place = Place::Line {
            path: self.path().to_path_buf(),
            line,
        };
        RowLocation { place, column }
    }

    /// Reports a bad row: an error under `Fail`, a counted skip under `Skip`.
    fn bad_row(
        &mut self,
        line_in_chunk: u64,
        column: Option<usize>,
        problem: String,
    ) -> Result<(), SourceError> {
        let at = self.locate(line_in_chunk, column)?;
        self.report(at, problem)
    }

    /// [`bad_row`](Self::bad_row) for a row starting at byte `byte_in_chunk`:
    /// its line is counted from the bytes, whatever the line endings.
    fn bad_row_at_byte(
        &mut self,
        byte_in_chunk: u64,
        column: Option<usize>,
        problem: String,
    ) -> Result<(), SourceError> {
        // After a CRLF the csv crate starts the next record at the `\n`:
        // counting it too puts the row on its own line either way.
        let offset = self.chunk.start + byte_in_chunk + 1;
        let (from, line) = match self.line_cursor {
            Some((o, l)) if o <= offset => (o, l),
            _ => (0, 1),
        };
        let line = line
            + split::newlines_between(self.path(), from, offset)
                .map_err(|e| SourceError::io(self.path(), e))?;
        self.line_cursor = Some((offset, line));
        let at = self.locate_line(line, column);
        self.report(at, problem)
    }

    fn report(&mut self, at: RowLocation, problem: String) -> Result<(), SourceError> {
        match self.options.on_bad_row {
            BadRowPolicy::Fail => Err(SourceError::BadRow { at, problem }),
            BadRowPolicy::Skip => {
                self.bad.record(at, problem);
                Ok(())
            }
        }
    }
}
