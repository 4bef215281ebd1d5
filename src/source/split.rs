//! Cutting input files into byte ranges that start and end on record
//! boundaries, so that all workers parse in parallel.
//!
//! JSON lines and text split at any newline. CSV splits at a newline that is
//! outside quotes: one sequential scan tracks quote state (RFC 4180: a quote
//! opens a field only at its start, and inside a quoted field `""` is an
//! escaped quote). A quote anywhere else means the file is not RFC 4180 and
//! its quote state cannot be trusted; such a file is read as one range, so
//! that results never depend on how many workers read it. Blocks without any
//! quote are skipped with `memchr`, so the scan of plain files runs at memory
//! speed.
//!
//! Invariant: the ranges of a file are disjoint, in order, and cover it.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use super::Format;

/// Files below this size are read whole by one worker.
pub const MIN_SPLIT_BYTES: u64 = 4 << 20;

/// A byte range of one file of one input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Index of the input (job spec order).
    pub input: usize,
    /// Index of the file within the input.
    pub file: usize,
    /// Byte position in the file where the range starts (a record boundary).
    pub start: u64,
    /// Byte position where it ends, exclusive (the next range's start).
    pub end: u64,
    /// True for the range that starts the file and so holds a CSV header.
    pub header: bool,
}

/// Splits a file into about `parts` ranges (one if it is small).
pub fn split_file(path: &Path, format: Format, parts: usize) -> io::Result<Vec<(u64, u64)>> {
    let len = std::fs::metadata(path)?.len();
    if parts <= 1 || len < MIN_SPLIT_BYTES {
        return Ok(vec![(0, len)]);
    }
    let targets: Vec<u64> = (1..parts as u64).map(|i| len * i / parts as u64).collect();
    let cuts = match format {
        Format::Csv => match csv_cuts(path, &targets)? {
            Some(cuts) => cuts,
            None => return Ok(vec![(0, len)]),
        },
        Format::Jsonl | Format::Text => newline_cuts(path, &targets)?,
    };
    Ok(ranges(cuts, len))
}

/// Splits a file into about `parts` ranges at newlines, without reading
/// what lies between the cuts — so, in a CSV file, not always at record
/// boundaries (a newline may be inside a quoted field). For sampling only,
/// where a garbled range costs a little accuracy, never a wrong result;
/// runs split with [`split_file`], whose CSV cuts read the file up to the
/// last one.
pub fn split_at_newlines(path: &Path, parts: usize) -> io::Result<Vec<(u64, u64)>> {
    let len = std::fs::metadata(path)?.len();
    if parts <= 1 || len < MIN_SPLIT_BYTES {
        return Ok(vec![(0, len)]);
    }
    let targets: Vec<u64> = (1..parts as u64).map(|i| len * i / parts as u64).collect();
    Ok(ranges(newline_cuts(path, &targets)?, len))
}

/// The ranges between 0, the cuts and `len`.
fn ranges(cuts: Vec<u64>, len: u64) -> Vec<(u64, u64)> {
    let mut bounds = vec![0];
    bounds.extend(cuts.into_iter().map(|c| c.min(len)));
    bounds.push(len);
    bounds.dedup();
    bounds.windows(2).map(|w| (w[0], w[1])).collect()
}

/// For each target, the offset just after the first newline at or after it.
fn newline_cuts(path: &Path, targets: &[u64]) -> io::Result<Vec<u64>> {
    let mut file = File::open(path)?;
    let mut buf = vec![0u8; 64 << 10];
    let mut cuts = Vec::with_capacity(targets.len());
    for &t in targets {
        let mut pos = t.max(cuts.last().copied().unwrap_or(0));
        file.seek(SeekFrom::Start(pos))?;
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            if let Some(i) = memchr::memchr(b'\n', &buf[..n]) {
                pos += i as u64 + 1;
                break;
            }
            pos += n as u64;
        }
        cuts.push(pos);
    }
    Ok(cuts)
}

/// Quote state of the CSV scanner.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    /// At the start of a field (after `,`, a newline, or the file start).
    FieldStart,
    /// Inside an unquoted field.
    Plain,
    /// Inside a quoted field.
    Quoted,
    /// Just saw a quote inside a quoted field: it closes, or escapes the next.
    MaybeClosed,
}

/// Record-boundary cuts for a CSV file, or `None` if a stray quote means
/// its quote state cannot be tracked.
fn csv_cuts(path: &Path, targets: &[u64]) -> io::Result<Option<Vec<u64>>> {
    let mut file = File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut state = Quote::FieldStart;
    let mut cuts = Vec::with_capacity(targets.len());
    let mut pos = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        let block = &buf[..n];
        let quiet = matches!(state, Quote::FieldStart | Quote::Plain)
            && memchr::memchr(b'"', block).is_none();
        if quiet {
            // Only newlines matter in a quote-free block: jump to them.
            while let Some(&t) = targets.get(cuts.len()) {
                let from = t.saturating_sub(pos) as usize;
                match block
                    .get(from..)
                    .and_then(|rest| memchr::memchr(b'\n', rest))
                {
                    Some(i) => cuts.push(pos + (from + i) as u64 + 1),
                    None => break,
                }
            }
            state = if matches!(block[n - 1], b',' | b'\n') {
                Quote::FieldStart
            } else {
                Quote::Plain
            };
        } else {
            for (i, &b) in block.iter().enumerate() {
                let at = pos + i as u64;
                let wanted = targets.get(cuts.len()).is_some_and(|&t| at >= t);
                state = match (state, b) {
                    (Quote::Quoted, b'"') => Quote::MaybeClosed,
                    (Quote::Quoted, _) => Quote::Quoted,
                    (Quote::MaybeClosed, b'"') => Quote::Quoted,
                    (Quote::MaybeClosed | Quote::FieldStart | Quote::Plain, b',') => {
                        Quote::FieldStart
                    }
                    (Quote::MaybeClosed | Quote::FieldStart | Quote::Plain, b'\n') => {
                        if wanted {
                            cuts.push(at + 1);
                        }
                        Quote::FieldStart
                    }
                    (Quote::MaybeClosed, b'\r') => Quote::Plain,
                    (Quote::MaybeClosed, _) => return Ok(None),
                    (Quote::FieldStart, b'"') => Quote::Quoted,
                    (Quote::Plain, b'"') => return Ok(None),
                    (Quote::FieldStart | Quote::Plain, _) => Quote::Plain,
                };
            }
        }
        pos += n as u64;
        if cuts.len() == targets.len() {
            break;
        }
    }
    Ok(Some(cuts))
}

/// The 1-based line number of the byte at `offset` (newlines before it, plus one).
pub fn line_at(path: &Path, offset: u64) -> io::Result<u64> {
    Ok(1 + newlines_between(path, 0, offset)?)
}

/// The newlines (`\n`, so CRLF files count right) in bytes `from..to`.
pub fn newlines_between(path: &Path, from: u64, to: u64) -> io::Result<u64> {
    let mut file = File::open(path)?;
    file.seek(io::SeekFrom::Start(from))?;
    let mut file = file.take(to.saturating_sub(from));
    let mut buf = vec![0u8; 1 << 20];
    let mut lines = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(lines);
        }
        lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut_all(text: &str, format: Format, targets: &[u64]) -> Option<Vec<u64>> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, text).unwrap();
        match format {
            Format::Csv => csv_cuts(&path, targets).unwrap(),
            _ => Some(newline_cuts(&path, targets).unwrap()),
        }
    }

    #[test]
    fn csv_cuts_skip_newlines_inside_quotes() {
        let text = "a,b\n1,\"x\ny\"\n2,\"p\"\"\nq\"\n3,z\n";
        // Targets inside the quoted fields move to the end of their record.
        assert_eq!(cut_all(text, Format::Csv, &[7, 17]), Some(vec![12, 22]));
    }

    #[test]
    fn csv_cuts_give_up_on_stray_quotes() {
        assert_eq!(cut_all("a,b\n1,x\"y\n2,3\n", Format::Csv, &[5]), None);
        assert_eq!(cut_all("a,b\n1,\"x\"y\n2,3\n", Format::Csv, &[5]), None);
    }

    #[test]
    fn newline_cuts_go_to_next_line() {
        assert_eq!(
            cut_all("ab\ncd\nef\n", Format::Text, &[1, 3, 4]),
            Some(vec![3, 6, 9])
        );
    }

    #[test]
    fn split_file_covers_the_file_at_record_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.csv");
        let mut text = String::from("k,v\n");
        let mut i = 0;
        while text.len() < (MIN_SPLIT_BYTES as usize) * 2 {
            text.push_str(&format!("{i},\"line\n{i}\"\n"));
            i += 1;
        }
        std::fs::write(&path, &text).unwrap();
        let ranges = split_file(&path, Format::Csv, 3).unwrap();
        assert_eq!(ranges.len(), 3);
        assert_eq!(ranges[0].0, 0);
        assert_eq!(ranges[2].1, text.len() as u64);
        for w in ranges.windows(2) {
            assert_eq!(w[0].1, w[1].0);
            let next = &text[w[1].0 as usize..];
            assert!(
                next.split(',').next().unwrap().parse::<u64>().is_ok(),
                "cut not at a record: {next:.20}"
            );
        }
    }

    #[test]
    fn line_at_counts_newlines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "a\nb\nc\n").unwrap();
        assert_eq!(line_at(&path, 0).unwrap(), 1);
        assert_eq!(line_at(&path, 4).unwrap(), 3);
    }
}
