//! Sorting outputs larger than memory: a batch run's workers hold their
//! output rows up to a budget, then sort and consolidate what they hold
//! into a run on disk, and the driver merges every run — in memory or on
//! disk — into the one sorted, consolidated output as the sink writes it.
//! So a stateless query over 10M rows needs memory for the budget, not for
//! its 9M output rows.
//!
//! A run file is an anonymous temporary file (`O_TMPFILE` where the system
//! has it), in a directory the caller picks (beside the output directory:
//! the system's temporary directory may be memory): it has no name to
//! leave behind, even when the process is killed. It holds the run's rows
//! in order, each `(row, multiplicity)` in bincode's varint encoding after
//! its length (four bytes, little-endian), so that a record is decoded from
//! a slice of the read buffer rather than field by field from the file; it
//! is read only by the process that wrote it, and only once.
//!
//! Invariants: a run, in memory or on disk, is sorted and consolidated
//! (no two equal rows, no zero multiplicity); the merge adds up equal rows
//! of different runs, drops those that cancel, and fails on a negative
//! sum (a bug in the job) — so its output is `consolidate` of all the
//! rows, whatever was spilled when.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::collections::binary_heap::PeekMut;
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use bincode::Options;

use super::order::{self, Drain, SortedRun};
use super::outputs::Collect;
use super::{OutputRows, RunError};
use crate::value::{Row, Value};

/// Where a run's workers spill, and how much output they may hold.
#[derive(Clone, Debug)]
pub struct Spill {
    /// The directory run files are made in.
    pub dir: PathBuf,
    /// Bytes of output rows this process' workers hold, together, before
    /// they sort some to disk ([`held_bytes`]).
    pub memory: usize,
}

/// The bytes a row takes in memory, about: its entry in a list of rows,
/// its values and its strings' heap buffers.
pub fn held_bytes(row: &Row) -> usize {
    let strings: usize = row
        .iter()
        .map(|v| match v {
            Value::Str(s) if s.is_heap_allocated() => s.capacity(),
            _ => 0,
        })
        .sum();
    size_of::<(Row, isize)>() + row.capacity() * size_of::<Value>() + strings
}

/// Bytes written or read at a time per run file.
const BUFFER: usize = 1 << 16;

fn encoding() -> impl Options {
    bincode::DefaultOptions::new()
}

/// A sorted, consolidated run of rows in an anonymous temporary file.
pub struct RunFile {
    file: File,
    rows: u64,
    dir: PathBuf,
}

impl RunFile {
    /// Writes `rows` (in order, consolidated) to a new file in `dir`.
    pub fn write(dir: &Path, rows: impl Iterator<Item = (Row, isize)>) -> Result<Self, RunError> {
        let failed = spill_error(dir);
        let file = tempfile::tempfile_in(dir).map_err(&failed)?;
        let mut out = BufWriter::with_capacity(BUFFER, file);
        let mut record = Vec::new();
        let mut count = 0;
        for (row, n) in rows {
            record.clear();
            encoding()
                .serialize_into(&mut record, &(row, n))
                .map_err(|e| failed(bincode_io(*e)))?;
            let len = u32::try_from(record.len()).map_err(|e| failed(std::io::Error::other(e)))?;
            out.write_all(&len.to_le_bytes()).map_err(&failed)?;
            out.write_all(&record).map_err(&failed)?;
            count += 1;
        }
        let mut file = out.into_inner().map_err(|e| failed(e.into_error()))?;
        file.seek(SeekFrom::Start(0)).map_err(&failed)?;
        Ok(RunFile {
            file,
            rows: count,
            dir: dir.to_path_buf(),
        })
    }

    fn reader(self) -> RunReader {
        RunReader {
            file: self.file,
            buffer: vec![0; BUFFER],
            start: 0,
            end: 0,
            left: self.rows,
            dir: self.dir,
        }
    }
}

fn spill_error(dir: &Path) -> impl Fn(std::io::Error) -> RunError + '_ {
    move |cause| RunError::Spill {
        dir: dir.to_path_buf(),
        cause,
    }
}

fn bincode_io(e: bincode::ErrorKind) -> std::io::Error {
    match e {
        bincode::ErrorKind::Io(e) => e,
        other => std::io::Error::other(other),
    }
}

/// A run file read back, row by row: records are decoded where they lie
/// in `buffer[start..end]`, the bytes read and not yet decoded.
struct RunReader {
    file: File,
    buffer: Vec<u8>,
    start: usize,
    end: usize,
    left: u64,
    dir: PathBuf,
}

impl RunReader {
    fn next(&mut self) -> Result<Option<(Row, isize)>, RunError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let row = self.decode();
        row.map(Some).map_err(|e| spill_error(&self.dir)(e))
    }

    fn decode(&mut self) -> std::io::Result<(Row, isize)> {
        let len = self.take(4)?;
        let len = u32::from_le_bytes(len.try_into().expect("four bytes")) as usize;
        let record = self.take(len)?;
        encoding().deserialize(record).map_err(|e| bincode_io(*e))
    }

    /// The next `n` bytes of the file.
    fn take(&mut self, n: usize) -> std::io::Result<&[u8]> {
        if self.end - self.start < n {
            self.buffer.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
            if self.buffer.len() < n {
                self.buffer.resize(n, 0);
            }
            while self.end < n {
                match self.file.read(&mut self.buffer[self.end..])? {
                    0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                    read => self.end += read,
                }
            }
        }
        self.start += n;
        Ok(&self.buffer[self.start - n..self.start])
    }
}

/// One output's rows on this process, sorted and consolidated in runs
/// (each worker's in memory, and those spilled), not yet merged.
#[derive(Default)]
pub struct SortedOutput {
    memory: Vec<SortedRun>,
    files: Vec<RunFile>,
}

impl SortedOutput {
    /// Adds `other`'s runs to these.
    pub fn absorb(&mut self, other: SortedOutput) {
        self.memory.extend(other.memory);
        self.files.extend(other.files);
    }

    /// The rows in order, in memory; `output` names the output in the
    /// error for a negative count.
    pub fn into_rows(self, output: &str) -> Result<OutputRows, RunError> {
        if !self.files.is_empty() {
            let mut rows = Vec::new();
            for chunk in self.merge(output, 1 << 16) {
                rows.extend(chunk?);
            }
            return Ok(rows);
        }
        let rows = order::merge_runs(self.memory);
        match rows.iter().find(|(_, n)| *n < 0) {
            Some((row, n)) => Err(negative(output, row, *n)),
            None => Ok(rows),
        }
    }

    /// The rows in order, in chunks of `chunk` rows, merged as they are
    /// read; `output` names the output in the error for a negative count.
    pub fn merge(self, output: &str, chunk: usize) -> Merge {
        self.merge_counts(Some(output), chunk)
    }

    /// [`SortedOutput::merge`], where `output: None` keeps negative counts
    /// (a worker's partial sums, which other workers' rows may offset).
    fn merge_counts(self, output: Option<&str>, chunk: usize) -> Merge {
        let mut sources: Vec<Source> = self
            .memory
            .into_iter()
            .map(|r| Source::Memory(r.drain()))
            .collect();
        sources.extend(self.files.into_iter().map(|f| Source::File(f.reader())));
        Merge {
            sources,
            heap: BinaryHeap::new(),
            started: false,
            pending: None,
            output: output.map(str::to_string),
            chunk: chunk.max(1),
            done: false,
        }
    }
}

fn negative(output: &str, row: &Row, count: isize) -> RunError {
    RunError::NegativeMultiplicity {
        output: output.to_string(),
        row: format!("{row:?}"),
        count,
    }
}

/// Where the merge reads a run.
enum Source {
    Memory(Drain),
    File(RunReader),
}

impl Source {
    fn next(&mut self) -> Result<Option<(Row, isize)>, RunError> {
        match self {
            Source::Memory(rows) => Ok(rows.next()),
            Source::File(reader) => reader.next(),
        }
    }
}

/// A run's next row in the merge; the heap's top is the least row (of
/// the first source, among equal ones).
struct Head {
    row: Row,
    count: isize,
    source: usize,
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        (&other.row, other.source).cmp(&(&self.row, self.source))
    }
}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head {}

/// The merge of an output's runs: its rows in order, consolidated, in
/// chunks ([`SortedOutput::merge`]). After an error it ends.
pub struct Merge {
    sources: Vec<Source>,
    heap: BinaryHeap<Head>,
    started: bool,
    /// The row being added up: equal rows of other runs may follow.
    pending: Option<(Row, isize)>,
    /// The output, whose negative counts are a bug; `None`: they are kept.
    output: Option<String>,
    chunk: usize,
    done: bool,
}

impl Merge {
    /// The next row in order, its counts in every run added up.
    fn next_row(&mut self) -> Result<Option<(Row, isize)>, RunError> {
        if !self.started {
            self.started = true;
            for (source, run) in self.sources.iter_mut().enumerate() {
                if let Some((row, count)) = run.next()? {
                    self.heap.push(Head { row, count, source });
                }
            }
        }
        loop {
            let Some(top) = self.heap.peek_mut() else {
                return complete(&self.output, self.pending.take());
            };
            let source = top.source;
            let head = match self.sources[source].next()? {
                Some((row, count)) => {
                    // The new head takes the old one's place, and sinks
                    // to its own as `top` goes.
                    let mut top = top;
                    std::mem::replace(&mut *top, Head { row, count, source })
                }
                None => PeekMut::pop(top),
            };
            match &mut self.pending {
                Some((row, count)) if *row == head.row => *count += head.count,
                pending => {
                    let done = pending.replace((head.row, head.count));
                    if let Some(row) = complete(&self.output, done)? {
                        return Ok(Some(row));
                    }
                }
            }
        }
    }
}

/// A row of `output` whose count is complete: none if it cancelled out.
fn complete(
    output: &Option<String>,
    row: Option<(Row, isize)>,
) -> Result<Option<(Row, isize)>, RunError> {
    match (row, output) {
        (Some((row, n)), Some(output)) if n < 0 => Err(negative(output, &row, n)),
        (row, _) => Ok(row.filter(|(_, n)| *n != 0)),
    }
}

impl Iterator for Merge {
    type Item = Result<Vec<(Row, isize)>, RunError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut chunk = Vec::with_capacity(self.chunk);
        while chunk.len() < self.chunk {
            match self.next_row() {
                Ok(Some(row)) => chunk.push(row),
                Ok(None) => {
                    self.done = true;
                    break;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        (!chunk.is_empty()).then_some(Ok(chunk))
    }
}

/// Run files a worker keeps per output, at most: at that many, it merges
/// the smaller half into one, so that the final merge's open files and read
/// buffers stay few whatever the output's size over the sort memory (each
/// row is rewritten about once per 32-fold of the output over the memory).
const MAX_RUN_FILES: usize = 64;

/// What a worker collects of the outputs: the rows that landed on it,
/// sorted to disk in runs whenever they pass its budget.
pub struct Spiller {
    rows: Vec<OutputRows>,
    files: Vec<Vec<RunFile>>,
    held: usize,
    budget: usize,
    dir: PathBuf,
    failure: Option<RunError>,
}

impl Spiller {
    /// A collector of `outputs` outputs that holds at most `budget` bytes
    /// of rows, spilling to `dir`; `None`: it holds every row.
    pub fn new(outputs: usize, spill: Option<(PathBuf, usize)>) -> Self {
        let (dir, budget) = spill.unwrap_or((PathBuf::new(), usize::MAX));
        Spiller {
            rows: vec![Vec::new(); outputs],
            files: (0..outputs).map(|_| Vec::new()).collect(),
            held: 0,
            budget,
            dir,
            failure: None,
        }
    }
}

impl Collect for Spiller {
    fn collect(&mut self, output: usize, row: Row, diff: isize) {
        if self.failure.is_some() {
            // The run fails: what follows is dropped, not held.
            return;
        }
        self.held = self.held.saturating_add(held_bytes(&row));
        self.rows[output].push((row, diff));
        if self.held > self.budget {
            self.spill();
        }
    }
}

impl Spiller {
    /// Sorts every output's rows held here into a run file each.
    fn spill(&mut self) {
        self.held = 0;
        for (rows, files) in self.rows.iter_mut().zip(&mut self.files) {
            if rows.is_empty() {
                continue;
            }
            let run = SortedRun::new(std::mem::take(rows));
            let written = RunFile::write(&self.dir, run.drain()).and_then(|file| {
                files.push(file);
                match files.len() {
                    MAX_RUN_FILES.. => compact(&self.dir, files, MAX_RUN_FILES / 2),
                    _ => Ok(()),
                }
            });
            if let Err(e) = written {
                self.failure = Some(e);
                self.rows.iter_mut().for_each(Vec::clear);
                return;
            }
        }
    }
}

/// Merges the `n` smallest of a worker's run files of an output into one.
fn compact(dir: &Path, files: &mut Vec<RunFile>, n: usize) -> Result<(), RunError> {
    files.sort_by_key(|f| std::cmp::Reverse(f.rows));
    let runs = SortedOutput {
        memory: Vec::new(),
        files: files.split_off(files.len().saturating_sub(n)),
    };
    let mut merge = runs.merge_counts(None, 1);
    let mut failure = None;
    let rows = std::iter::from_fn(|| match merge.next_row() {
        Ok(row) => row,
        Err(e) => {
            failure = Some(e);
            None
        }
    });
    let file = RunFile::write(dir, rows)?;
    if let Some(e) = failure {
        return Err(e);
    }
    files.push(file);
    Ok(())
}

impl Spiller {
    /// Per output, its runs on this worker: the rows still held, sorted,
    /// and the run files.
    pub fn finish(self) -> Result<Vec<SortedOutput>, RunError> {
        if let Some(e) = self.failure {
            return Err(e);
        }
        let outputs = self.rows.into_iter().zip(self.files);
        let sorted = outputs.map(|(rows, files)| SortedOutput {
            memory: vec![SortedRun::new(rows)],
            files,
        });
        Ok(sorted.collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use differential_dataflow::consolidation::consolidate;
    use proptest::prelude::*;

    fn row(i: i64, s: &str) -> Row {
        vec![Value::Int(i), Value::str(s)]
    }

    fn merged(output: SortedOutput, chunk: usize) -> Result<Vec<(Row, isize)>, RunError> {
        let mut rows = Vec::new();
        for c in output.merge("out", chunk) {
            let c = c?;
            assert!(c.len() <= chunk);
            rows.extend(c);
        }
        Ok(rows)
    }

    /// Every value type round-trips through a run file, long strings and
    /// extreme numbers included.
    #[test]
    fn a_run_file_reads_back_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let long = "x".repeat(1000);
        let mut rows: Vec<(Row, isize)> = vec![
            (vec![], 1),
            (
                vec![Value::Null, Value::Bool(true), Value::Int(i64::MIN)],
                3,
            ),
            (vec![Value::float(-1e300), Value::Date(-719162)], 7),
            (
                vec![Value::Timestamp(i64::MAX), Value::str(&long)],
                isize::MAX,
            ),
            (vec![Value::str("é"), Value::float(f64::INFINITY)], 1),
        ];
        rows.sort();
        let file = RunFile::write(dir.path(), rows.clone().into_iter()).unwrap();
        let output = SortedOutput {
            memory: Vec::new(),
            files: vec![file],
        };
        assert_eq!(merged(output, 2).unwrap(), rows);
        let names = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(names, 0, "a run file has no name in its directory");
    }

    #[test]
    fn a_negative_sum_is_a_job_bug() {
        let dir = tempfile::tempdir().unwrap();
        let file = RunFile::write(dir.path(), [(row(1, "a"), -2)].into_iter()).unwrap();
        let output = SortedOutput {
            memory: vec![SortedRun::new(vec![(row(0, "z"), 1), (row(1, "a"), 1)])],
            files: vec![file],
        };
        let err = merged(output, 8).unwrap_err();
        assert!(
            matches!(err, RunError::NegativeMultiplicity { count: -1, .. }),
            "{err}"
        );
    }

    #[test]
    fn a_spill_that_cannot_be_written_fails_the_run() {
        let mut spiller = Spiller::new(1, Some(("/nonexistent/kappa".into(), 1)));
        spiller.collect(0, row(1, "a"), 1);
        spiller.collect(0, row(2, "b"), 1);
        let err = spiller.finish().err().expect("the spill failed");
        assert!(err.to_string().contains("/nonexistent/kappa"), "{err}");
    }

    fn changes() -> impl Strategy<Value = Vec<(usize, Row, isize)>> {
        let value = prop_oneof![
            Just(Value::Null),
            (-3i64..3).prop_map(Value::Int),
            (-2i64..2).prop_map(|h| Value::float(h as f64 / 2.0)),
            prop_oneof![Just(""), Just("a"), Just("abcdefghijklmnopqrstuvwxyz0")]
                .prop_map(Value::str),
        ];
        let row = prop::collection::vec(value, 0..3);
        prop::collection::vec((0usize..2, row, -1isize..3), 0..120)
    }

    proptest! {
        /// Whatever the budget (so whenever the spills happen) and however
        /// the changes fall on workers, the merge is `consolidate` of all
        /// of an output's changes.
        #[test]
        fn merging_spilled_runs_is_consolidating_all(
            changes in changes(),
            budget in 0usize..2000,
            workers in 1usize..4,
            chunk in 1usize..50,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut spillers: Vec<Spiller> = (0..workers)
                .map(|_| Spiller::new(2, Some((dir.path().to_path_buf(), budget))))
                .collect();
            for (i, (output, row, diff)) in changes.iter().cloned().enumerate() {
                spillers[i % workers].collect(output, row, diff);
            }
            let mut outputs: Vec<SortedOutput> = (0..2).map(|_| SortedOutput::default()).collect();
            for spiller in spillers {
                for (all, mine) in outputs.iter_mut().zip(spiller.finish().unwrap()) {
                    all.absorb(mine);
                }
            }
            for (o, output) in outputs.into_iter().enumerate() {
                let mut expected: Vec<(Row, isize)> = changes
                    .iter()
                    .filter(|(out, _, _)| *out == o)
                    .map(|(_, row, diff)| (row.clone(), *diff))
                    .collect();
                consolidate(&mut expected);
                match expected.iter().find(|(_, n)| *n < 0) {
                    Some(_) => prop_assert!(merged(output, chunk).is_err()),
                    None => prop_assert_eq!(merged(output, chunk).unwrap(), expected),
                }
            }
        }
    }
}
