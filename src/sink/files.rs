//! Committing a batch run's outputs to a directory, atomically.
//!
//! Protocol: every output is written to a hidden temporary file in the
//! directory (`.NAME.csv.tmp`), flushed and fsynced; only when all of them are
//! written are they renamed to `NAME.csv`; then `_SUCCESS` is written the same
//! way, and the directory is fsynced. So a reader that sees `_SUCCESS` sees
//! complete outputs, and a run that fails before the renames leaves no output
//! file behind (its temporaries are removed). Nothing is created before the
//! run's results exist: a run that fails on bad input does not even create
//! the directory.
//!
//! Rows are written sorted (the caller sorts), each as many times as its
//! multiplicity, so a file is a function of the output collection only.

use std::fs::{self, File};
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::writeback::Writeback;
use crate::schema::OutputSchema;
use crate::value::{Row, Value};

/// Why outputs could not be committed.
#[derive(Debug, Error)]
pub enum SinkError {
    /// The output directory exists and `--overwrite` was not given.
    #[error("output directory {0} already exists (use --overwrite to replace its outputs)")]
    Exists(PathBuf),
    /// The output path is a file, not a directory (even `--overwrite`
    /// replaces only outputs inside a directory).
    #[error("output path {0} is a file, not a directory")]
    NotADirectory(PathBuf),
    /// An I/O error while writing.
    #[error("cannot write {path}: {cause}")]
    Io {
        /// The file or directory written.
        path: PathBuf,
        /// The operating system's error.
        cause: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SinkError + '_ {
    move |cause| SinkError::Io {
        path: path.to_path_buf(),
        cause,
    }
}

/// Checks, before any work is done, that `dir` may be written.
pub fn check_target(dir: &Path, overwrite: bool) -> Result<(), SinkError> {
    if dir.exists() && !dir.is_dir() {
        return Err(SinkError::NotADirectory(dir.to_path_buf()));
    }
    if dir.exists() && !overwrite {
        return Err(SinkError::Exists(dir.to_path_buf()));
    }
    Ok(())
}

/// The lines `rows` make in an output file: each row as many times as its
/// multiplicity.
pub fn line_count(rows: &[(Row, isize)]) -> u64 {
    rows.iter().map(|(_, n)| (*n).max(0) as u64).sum()
}

/// An output in memory, sorted, as [`commit`] takes it: in chunks.
pub fn in_chunks(
    rows: &[(Row, isize)],
) -> impl Iterator<Item = Result<&[(Row, isize)], SinkError>> + '_ {
    rows.chunks(CHUNK_ROWS).map(Ok)
}

/// Writes every output to `dir/NAME.csv` and then `dir/_SUCCESS`, atomically
/// as described in the module docs; returns each output's rows written
/// (with their multiplicities). `outputs` holds per output its schema and
/// its rows sorted, with their (positive) multiplicities, in chunks (of
/// about [`CHUNK_ROWS`]: a chunk is what one thread formats at a time);
/// a chunk that is an error stops the commit with it, writing nothing.
pub fn commit<'a, I, C, E>(
    dir: &Path,
    outputs: impl IntoIterator<Item = (&'a OutputSchema, I)>,
) -> Result<Vec<u64>, E>
where
    I: Iterator<Item = Result<C, E>>,
    C: AsRef<[(Row, isize)]> + Send,
    E: From<SinkError>,
{
    let created = !dir.exists();
    fs::create_dir_all(dir).map_err(io(dir))?;
    let success = dir.join("_SUCCESS");
    match fs::remove_file(&success) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&success)(e).into()),
        _ => {}
    }
    let mut written = Vec::new();
    let mut rows = Vec::new();
    let result = (|| {
        for (schema, chunks) in outputs {
            let tmp = dir.join(format!(".{}.csv.tmp", schema.name));
            written.push((tmp.clone(), dir.join(format!("{}.csv", schema.name))));
            rows.push(write_csv(&tmp, schema, chunks)?);
        }
        Ok(())
    })();
    if let Err(e) = result {
        for (tmp, _) in &written {
            let _ = fs::remove_file(tmp);
        }
        // A directory this commit made goes too, so a retry finds the
        // target as it was (only if empty: never remove what others wrote).
        if created {
            let _ = fs::remove_dir(dir);
        }
        return Err(e);
    }
    for (tmp, target) in &written {
        fs::rename(tmp, target).map_err(io(target))?;
    }
    let tmp = dir.join("._SUCCESS.tmp");
    File::create(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(io(&tmp))?;
    fs::rename(&tmp, &success).map_err(io(&success))?;
    sync_dir(dir)?;
    Ok(rows)
}

/// Rows turned into text at a time by one formatting thread.
pub const CHUNK_ROWS: usize = 1 << 15;

/// Formatting threads, at most: formatting a 10M-row output is a second or
/// more of CPU, the write a copy into the page cache.
const MAX_FORMATTERS: usize = 3;

/// Chunks handed to each formatter ahead of the one being written.
const AHEAD_PER_FORMATTER: usize = 2;

/// Writes the header and the rows of `chunks` to `path`, syncs it, and
/// returns the rows written. Chunks are formatted on several threads,
/// round-robin, and written in order by this one, which takes them from
/// `chunks` (a merge, maybe) as the formatters need them; each formatter
/// is at most [`AHEAD_PER_FORMATTER`] chunks ahead, so memory stays a few
/// chunks whatever the output's size. The disk writes the file as it grows
/// ([`Writeback`]), so the sync waits only for the end of it.
fn write_csv<C, E>(
    path: &Path,
    schema: &OutputSchema,
    chunks: impl Iterator<Item = Result<C, E>>,
) -> Result<u64, E>
where
    C: AsRef<[(Row, isize)]> + Send,
    E: From<SinkError>,
{
    use std::io::Write;
    let csv_err = |e: csv::Error| io(path)(std::io::Error::other(e));
    // Buffered for a line written many times; a chunk's text is larger
    // than the buffer and goes to the file as it is.
    let file = Writeback::new(File::create(path).map_err(io(path))?);
    let mut file = BufWriter::with_capacity(1 << 16, file);
    let mut header = csv::Writer::from_writer(Vec::new());
    header.write_record(&schema.columns).map_err(csv_err)?;
    let header = header
        .into_inner()
        .map_err(|e| csv_err(e.into_error().into()))?;
    file.write_all(&header).map_err(io(path))?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let lanes = cores.clamp(1, MAX_FORMATTERS);
    let mut lines = 0u64;
    std::thread::scope(|s| {
        let formatters: Vec<_> = (0..lanes)
            .map(|_| {
                let (to, chunks) = std::sync::mpsc::sync_channel::<C>(AHEAD_PER_FORMATTER);
                let (tx, texts) = std::sync::mpsc::sync_channel(AHEAD_PER_FORMATTER);
                s.spawn(move || {
                    for chunk in chunks {
                        // A send fails only when the writer stopped on an error.
                        if tx.send(format_rows(chunk.as_ref())).is_err() {
                            return;
                        }
                    }
                });
                (to, texts)
            })
            .collect();
        // Lanes of the chunks handed out and not yet written, in order:
        // never more than a formatter's channels hold, so no send blocks.
        let mut in_flight = std::collections::VecDeque::new();
        let mut chunks = chunks.fuse();
        let mut lane = 0;
        loop {
            while in_flight.len() < lanes * AHEAD_PER_FORMATTER {
                let Some(chunk) = chunks.next() else { break };
                let chunk = chunk?;
                lines += line_count(chunk.as_ref());
                formatters[lane]
                    .0
                    .send(chunk)
                    .expect("a formatter runs until its chunks end");
                in_flight.push_back(lane);
                lane = (lane + 1) % lanes;
            }
            let Some(from) = in_flight.pop_front() else {
                return Ok::<_, E>(());
            };
            let text = formatters[from]
                .1
                .recv()
                .expect("a formatter sends every chunk of its lane");
            for (piece, times) in text.map_err(csv_err)? {
                for _ in 0..times {
                    file.write_all(&piece).map_err(io(path))?;
                }
            }
        }
    })?;
    let file = file.into_inner().map_err(|e| io(path)(e.into_error()))?;
    file.into_inner().sync_all().map_err(io(path))?;
    Ok(lines)
}

/// A chunk's CSV text: pieces, each to be written as many times as it
/// says. A row repeated more than [`REPEAT_INLINE`] times is one line to
/// write that many times, so a chunk's text stays small whatever the
/// multiplicities.
type Text = Vec<(Vec<u8>, usize)>;

/// Copies of a row's line held in a chunk's text, at most.
const REPEAT_INLINE: usize = 16;

/// The CSV text of `rows`, each written as many times as its multiplicity.
fn format_rows(rows: &[(Row, isize)]) -> Result<Text, csv::Error> {
    let lines = |w: Vec<u8>| csv::Writer::from_writer(w);
    let mut text = Text::new();
    let mut out = lines(Vec::with_capacity(rows.len() * 16));
    // Fields are formatted into one reused buffer: no allocation per value.
    let mut record: Vec<u8> = Vec::new();
    let mut ends: Vec<usize> = Vec::new();
    for (i, (row, count)) in rows.iter().enumerate() {
        crate::value::prefetch_ahead(&rows[i..]);
        record.clear();
        ends.clear();
        for value in row {
            write_value(&mut record, value);
            ends.push(record.len());
        }
        let line = |out: &mut csv::Writer<Vec<u8>>| {
            let mut start = 0;
            for &end in &ends {
                out.write_field(&record[start..end])?;
                start = end;
            }
            out.write_record(None::<&[u8]>)
        };
        let count = usize::try_from(*count).unwrap_or(0);
        if count <= REPEAT_INLINE {
            (0..count).try_for_each(|_| line(&mut out))?;
        } else {
            let mut one = lines(Vec::new());
            line(&mut one)?;
            let before = std::mem::replace(&mut out, lines(Vec::new()));
            text.push((before.into_inner().map_err(|e| e.into_error())?, 1));
            text.push((one.into_inner().map_err(|e| e.into_error())?, count));
        }
    }
    text.push((out.into_inner().map_err(|e| e.into_error())?, 1));
    Ok(text)
}

/// Appends a value's output text (its `Display`) to `buf`.
fn write_value(buf: &mut Vec<u8>, value: &Value) {
    use std::io::Write;
    match value {
        Value::Null => {}
        Value::Str(s) => buf.extend_from_slice(s.as_bytes()),
        // The same digits as `Display`, without the formatting machinery.
        Value::Int(i) => buf.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes()),
        other => write!(buf, "{other}").expect("writing to a Vec cannot fail"),
    }
}

fn sync_dir(dir: &Path) -> Result<(), SinkError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(name: &str) -> OutputSchema {
        OutputSchema {
            name: name.into(),
            columns: vec!["k".into(), "n".into()],
            key: vec![0],
        }
    }

    fn commit_rows(
        dir: &Path,
        outputs: &[(OutputSchema, Vec<(Row, isize)>)],
    ) -> Result<Vec<u64>, SinkError> {
        commit(dir, outputs.iter().map(|(s, rows)| (s, in_chunks(rows))))
    }

    #[test]
    fn commit_writes_outputs_then_success() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let rows = vec![
            (vec![Value::str("a,b"), Value::Int(1)], 2),
            (vec![Value::Null, Value::float(2.0)], 1),
        ];
        let written = commit_rows(&out, &[(schema("counts"), rows)]).unwrap();
        assert_eq!(written, [3]);
        let text = fs::read_to_string(out.join("counts.csv")).unwrap();
        assert_eq!(text, "k,n\n\"a,b\",1\n\"a,b\",1\n,2.0\n");
        assert!(out.join("_SUCCESS").exists());
        let names: Vec<_> = fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "no temporaries left: {names:?}");
    }

    /// Chunks formatted on several threads land in row order, and a row
    /// repeated more often than a chunk holds inline is written every time.
    #[test]
    fn an_output_of_many_chunks_is_written_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let n = 5 * CHUNK_ROWS as i64 + 7;
        let count = |i: i64| match i % 1000 {
            0 => REPEAT_INLINE as isize + 3,
            1 => REPEAT_INLINE as isize,
            _ => 1,
        };
        let rows: Vec<(Row, isize)> = (0..n)
            .map(|i| (vec![Value::Int(i), Value::str(&format!("s{i}"))], count(i)))
            .collect();
        commit_rows(&out, &[(schema("many"), rows)]).unwrap();
        let mut expected = String::from("k,n\n");
        for i in 0..n {
            for _ in 0..count(i) {
                expected.push_str(&format!("{i},s{i}\n"));
            }
        }
        let text = fs::read_to_string(out.join("many.csv")).unwrap();
        assert!(text == expected, "the file differs from the rows in order");
    }

    /// Rows that fail while they are written (a merge's error) stop the
    /// commit: no output file, no `_SUCCESS`, no directory it made.
    #[test]
    fn an_error_among_the_chunks_commits_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let first: Vec<(Row, isize)> = vec![(vec![Value::Int(1)], 1)];
        let failed = SinkError::Io {
            path: "merge".into(),
            cause: std::io::Error::other("the merge failed"),
        };
        let chunks = vec![Ok(first.clone()), Ok(first), Err(failed)];
        let good: Vec<(Row, isize)> = vec![(vec![Value::Int(2)], 1)];
        let (good_schema, bad_schema) = (schema("good"), schema("bad"));
        let outputs = vec![
            (&good_schema, vec![Ok(good)].into_iter()),
            (&bad_schema, chunks.into_iter()),
        ];
        let err = commit(&out, outputs);
        assert!(err.unwrap_err().to_string().contains("the merge failed"));
        assert!(!out.exists(), "the directory the commit made is gone");
    }

    #[test]
    fn existing_directory_is_refused_without_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            check_target(dir.path(), false),
            Err(SinkError::Exists(_))
        ));
        assert!(check_target(dir.path(), true).is_ok());
        assert!(check_target(&dir.path().join("new"), false).is_ok());
    }
}
