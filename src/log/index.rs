//! Sparse offset index: `{base_offset:020}.index` next to each segment.
//!
//! The file is a flat array of 8-byte entries (little endian):
//!
//! | field | size | meaning                                          |
//! |-------|------|--------------------------------------------------|
//! | `rel` | u32  | record offset minus the segment's base offset    |
//! | `pos` | u32  | file position of that record's frame             |
//!
//! An entry is added for the first record that starts at least
//! `INDEX_INTERVAL` bytes after the previous entry (or the header), so the
//! index is a pure function of the log and can always be rebuilt from it.
//! Invariants: `rel` and `pos` strictly increase. The index is *derived*: it is
//! never fsynced, readers verify the entry they use, and on open a missing,
//! torn or inconsistent index is rebuilt from the log.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

use super::error::{IoContext, Result};
use super::segment::HEADER_LEN;

pub const INDEX_INTERVAL: u64 = 4096;
pub const ENTRY_LEN: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    pub rel: u32,
    pub pos: u32,
}

/// Decides which records get an entry while records are appended or scanned.
#[derive(Clone, Debug)]
pub struct IndexBuilder {
    base: u64,
    last_pos: u64,
    pub entries: Vec<IndexEntry>,
}

impl IndexBuilder {
    pub fn new(base: u64) -> Self {
        IndexBuilder {
            base,
            last_pos: HEADER_LEN,
            entries: Vec::new(),
        }
    }

    /// Continues after existing entries, keeping the spacing rule identical
    /// to a rebuild from scratch.
    pub fn resume(base: u64, entries: Vec<IndexEntry>) -> Self {
        let last_pos = entries.last().map_or(HEADER_LEN, |e| u64::from(e.pos));
        IndexBuilder {
            base,
            last_pos,
            entries,
        }
    }

    /// Notes a record at `pos`; returns the entry if one was added.
    pub fn on_record(&mut self, offset: u64, pos: u64) -> Option<IndexEntry> {
        if pos < self.last_pos + INDEX_INTERVAL {
            return None;
        }
        let entry = IndexEntry {
            rel: u32::try_from(offset - self.base).ok()?,
            pos: u32::try_from(pos).ok()?,
        };
        self.last_pos = pos;
        self.entries.push(entry);
        Some(entry)
    }
}

pub fn encode_entries(entries: &[IndexEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * ENTRY_LEN);
    for e in entries {
        out.extend_from_slice(&e.rel.to_le_bytes());
        out.extend_from_slice(&e.pos.to_le_bytes());
    }
    out
}

/// Reads an index file; a missing file is an empty index and a torn last
/// entry is ignored (both are legal states of a derived file).
pub fn read_index(path: &Path) -> Result<Vec<IndexEntry>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).ctx(path),
    };
    Ok(bytes
        .chunks_exact(ENTRY_LEN)
        .map(|c| IndexEntry {
            rel: u32::from_le_bytes(c[..4].try_into().expect("4 bytes")),
            pos: u32::from_le_bytes(c[4..].try_into().expect("4 bytes")),
        })
        .collect())
}

/// Replaces the index file with `entries` (not fsynced: derived data).
pub fn write_index(path: &Path, entries: &[IndexEntry]) -> Result<()> {
    std::fs::write(path, encode_entries(entries)).ctx(path)
}

/// Opens the index for appending new entries after `write_index`.
pub fn open_for_append(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .ctx(path)
}

pub fn append_entries(file: &mut File, path: &Path, entries: &[IndexEntry]) -> Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    file.write_all(&encode_entries(entries)).ctx(path)
}

/// Structural check: strictly increasing and inside the log file.
pub fn is_plausible(entries: &[IndexEntry], log_len: u64) -> bool {
    let increasing = entries
        .windows(2)
        .all(|w| w[0].rel < w[1].rel && w[0].pos < w[1].pos);
    let in_range = entries
        .iter()
        .all(|e| u64::from(e.pos) >= HEADER_LEN && u64::from(e.pos) < log_len);
    increasing && in_range
}

/// The entry with the largest `rel <= target_rel`, if any.
pub fn lookup(entries: &[IndexEntry], target_rel: u64) -> Option<IndexEntry> {
    let n = entries.partition_point(|e| u64::from(e.rel) <= target_rel);
    n.checked_sub(1).map(|i| entries[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_picks_floor_entry() {
        let e = |rel, pos| IndexEntry { rel, pos };
        let entries = vec![e(10, 5000), e(20, 9000), e(35, 13000)];
        assert_eq!(lookup(&entries, 5), None);
        assert_eq!(lookup(&entries, 10), Some(e(10, 5000)));
        assert_eq!(lookup(&entries, 34), Some(e(20, 9000)));
        assert_eq!(lookup(&entries, 99), Some(e(35, 13000)));
        assert!(is_plausible(&entries, 13001));
        assert!(!is_plausible(&entries, 13000));
        assert!(!is_plausible(&[e(2, 5000), e(1, 6000)], 10000));
    }

    #[test]
    fn torn_index_tail_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.index");
        let mut bytes = encode_entries(&[IndexEntry { rel: 1, pos: 4200 }]);
        bytes.extend_from_slice(&[1, 2, 3]);
        std::fs::write(&p, bytes).unwrap();
        assert_eq!(
            read_index(&p).unwrap(),
            vec![IndexEntry { rel: 1, pos: 4200 }]
        );
        assert!(
            read_index(&dir.path().join("missing.index"))
                .unwrap()
                .is_empty()
        );
    }
}
