//! Writer-side state of one partition: its sealed segments, the active
//! (last) segment, open-time recovery, and appends.
//!
//! Invariants:
//! - there is always at least one segment; the last one is the only one
//!   written to ("active"), all earlier ones are sealed and were fsynced
//!   before the next one was created, so a torn tail can only be in the
//!   active segment;
//! - `next_offset` is one past the last offset ever appended; offsets are
//!   never reused, even after retention or compaction removed records;
//! - append timestamps never decrease within a partition (`max(now, last)`),
//!   so a segment's newest record is its last one.

use std::fs::{File, OpenOptions};
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::compaction::recover_leftovers;
use super::error::{IoContext, LogError, Result};
use super::fsutil::{self, fsync_dir, remove_if_exists};
use super::index::{self, IndexBuilder, IndexEntry};
use super::record::{LEN_PREFIX, MAX_BODY, RecordIn};
use super::segment::{
    FrameWriter, HEADER_LEN, ScanSummary, SegmentCursor, VERSION, create_segment, frames_len_bound,
    index_path, list_segments, log_path, scan_rest,
};

/// A torn tail that was cut off when the partition was opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// The partition repaired.
    pub partition: u32,
    /// The segment file whose tail was cut off (the partition's last).
    pub segment: PathBuf,
    /// Bytes removed from its end.
    pub truncated_bytes: u64,
    /// The offset the next append will get (the first offset that was lost).
    pub at_offset: u64,
    /// What was wrong with the tail (a partial frame, a bad checksum).
    pub detail: String,
}

impl std::fmt::Display for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "partition {}: truncated {} torn bytes at offset {} from {} ({})",
            self.partition,
            self.truncated_bytes,
            self.at_offset,
            self.segment.display(),
            self.detail
        )
    }
}

/// What opening a topic for writing repaired or ignored.
#[derive(Clone, Debug, Default)]
pub struct OpenReport {
    /// The torn tails cut off, one per partition that had one.
    pub recoveries: Vec<Recovery>,
    /// Unknown files ignored, and interrupted compactions completed or
    /// rolled back.
    pub warnings: Vec<String>,
}

/// Summary of one segment kept in memory by the writer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentMeta {
    pub base: u64,
    pub size: u64,
    pub last_offset: Option<u64>,
    pub max_append_ts: Option<i64>,
}

impl SegmentMeta {
    fn from_scan(base: u64, s: &ScanSummary) -> Self {
        SegmentMeta {
            base,
            size: s.valid_len,
            last_offset: s.last_offset,
            max_append_ts: s.max_append_ts,
        }
    }
}

struct Active {
    meta: SegmentMeta,
    /// Its format version: appends write frames of this version.
    version: u16,
    file: File,
    index_file: File,
    index: IndexBuilder,
    dirty: bool,
}

pub struct PartitionLog {
    pub id: u32,
    pub dir: PathBuf,
    segment_bytes: u64,
    pub sealed: Vec<SegmentMeta>,
    active: Active,
    next_offset: u64,
    last_ts: i64,
    poisoned: bool,
}

/// Creates an empty partition directory with its first segment at offset 0.
pub fn create_partition_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir(dir).ctx(dir)?;
    drop(create_segment(dir, 0)?);
    index::write_index(&index_path(dir, 0), &[])
}

impl PartitionLog {
    pub fn open(dir: &Path, id: u32, segment_bytes: u64, report: &mut OpenReport) -> Result<Self> {
        recover_leftovers(dir, report)?;
        let bases = list_segments(dir)?;
        let Some((&active_base, sealed_bases)) = bases.split_last() else {
            return Err(LogError::corrupt(
                dir,
                None,
                None,
                "partition directory has no segment files",
            ));
        };
        let mut sealed = Vec::with_capacity(sealed_bases.len());
        for &base in sealed_bases {
            sealed.push(open_sealed(dir, base)?);
        }
        let active = open_active(dir, id, active_base, report)?;
        check_continuity(dir, &sealed, &active.meta)?;
        let next_offset = active.meta.last_offset.map_or(active_base, |o| o + 1);
        let last_ts = std::iter::once(&active.meta)
            .chain(sealed.iter().rev())
            .find_map(|m| m.max_append_ts)
            .unwrap_or(i64::MIN);
        Ok(PartitionLog {
            id,
            dir: dir.to_path_buf(),
            segment_bytes,
            sealed,
            active,
            next_offset,
            last_ts,
            poisoned: false,
        })
    }

    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }

    /// For a plain topic: every segment starts right after the previous
    /// one's last record (`MissingSegment` names the hole otherwise).
    pub fn check_contiguous(&self, topic: &str) -> Result<()> {
        let all: Vec<&SegmentMeta> = self.segments().collect();
        for w in all.windows(2) {
            let end = w[0].last_offset.map_or(w[0].base, |l| l + 1);
            if end != w[1].base {
                return Err(LogError::MissingSegment {
                    topic: topic.to_string(),
                    partition: self.id,
                    from: end,
                    to: w[1].base.saturating_sub(1),
                });
            }
        }
        Ok(())
    }

    /// Sealed segments followed by the active one.
    pub fn segments(&self) -> impl Iterator<Item = &SegmentMeta> {
        self.sealed.iter().chain(std::iter::once(&self.active.meta))
    }

    /// Appends `recs` in order; returns the offsets they got. Not durable
    /// until `sync` (the topic writer applies the fsync policy).
    pub fn append(&mut self, recs: &[RecordIn<'_>], now: i64) -> Result<Range<u64>> {
        if self.poisoned {
            let e = std::io::Error::other("an earlier write failed; reopen the writer");
            return Err(e).ctx(&self.dir);
        }
        for r in recs {
            let body =
                frames_len_bound(self.active.version, std::slice::from_ref(r)) - LEN_PREFIX as u64;
            if body > MAX_BODY as u64 {
                return Err(LogError::RecordTooLarge {
                    size: body,
                    max: MAX_BODY as u64,
                });
            }
        }
        let result = self.append_unchecked(recs, now);
        self.poisoned = result.is_err();
        result
    }

    /// Reserves the disk space that appending `recs` takes in the active
    /// segment and its index (the part that goes there before a roll), so
    /// that a full disk fails the batch here, before any of it is written.
    pub fn reserve(&mut self, recs: &[RecordIn<'_>]) -> Result<()> {
        let Some(first) = recs.first() else {
            return Ok(());
        };
        let m = &self.active.meta;
        let version = self.active.version;
        let total = frames_len_bound(version, recs);
        let room = self.segment_bytes.saturating_sub(m.size);
        let bytes = total.min(room.max(frames_len_bound(version, std::slice::from_ref(first))));
        let path = log_path(&self.dir, m.base);
        fsutil::reserve(&self.active.file, &path, m.size, bytes)?;
        let ipath = index_path(&self.dir, m.base);
        let index_len = self.active.index_file.metadata().ctx(&ipath)?.len();
        let index_bytes = (bytes / index::INDEX_INTERVAL + 1) * index::ENTRY_LEN as u64;
        fsutil::reserve(&self.active.index_file, &ipath, index_len, index_bytes)
    }

    fn append_unchecked(&mut self, recs: &[RecordIn<'_>], now: i64) -> Result<Range<u64>> {
        let first = self.next_offset;
        let ts = now.max(self.last_ts);
        if !recs.is_empty() {
            self.last_ts = ts;
        }
        // One allocation for the whole append (up to a segment's worth).
        let total = frames_len_bound(self.active.version, recs);
        let mut buf = Vec::with_capacity(total.min(self.segment_bytes) as usize);
        let mut entries = Vec::new();
        let mut frames = FrameWriter::new(self.active.version);
        for rec in recs {
            let incoming = frames.len_bound(&buf, rec) as u64;
            if self.needs_roll(buf.len() as u64, incoming) {
                frames.close(&mut buf);
                self.write_pending(&mut buf, &mut entries)?;
                self.roll()?;
                frames = FrameWriter::new(self.active.version);
            }
            let pos = self.active.meta.size + buf.len() as u64;
            if frames.push(&mut buf, rec, self.next_offset, ts) {
                entries.extend(self.active.index.on_record(self.next_offset, pos));
            }
            self.next_offset += 1;
        }
        frames.close(&mut buf);
        self.write_pending(&mut buf, &mut entries)?;
        Ok(first..self.next_offset)
    }

    /// Whether the next record (at most `incoming` bytes, after `pending`
    /// buffered ones) must start a new segment. A lone oversized record
    /// still fits.
    fn needs_roll(&self, pending: u64, incoming: u64) -> bool {
        let m = &self.active.meta;
        let has_records = m.size > HEADER_LEN || pending > 0;
        let too_big = m.size + pending + incoming > self.segment_bytes;
        let rel_overflow = self.next_offset - m.base >= u64::from(u32::MAX);
        has_records && (too_big || rel_overflow)
    }

    fn write_pending(&mut self, buf: &mut Vec<u8>, entries: &mut Vec<IndexEntry>) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let path = log_path(&self.dir, self.active.meta.base);
        use std::io::Write;
        self.active.file.write_all(buf).ctx(&path)?;
        let m = &mut self.active.meta;
        m.size += buf.len() as u64;
        m.last_offset = Some(self.next_offset - 1);
        m.max_append_ts = Some(
            m.max_append_ts
                .map_or(self.last_ts, |t| t.max(self.last_ts)),
        );
        self.active.dirty = true;
        let ipath = index_path(&self.dir, m.base);
        index::append_entries(&mut self.active.index_file, &ipath, entries)?;
        buf.clear();
        entries.clear();
        Ok(())
    }

    /// Seals the active segment (durably) and starts a new one at `next_offset`.
    fn roll(&mut self) -> Result<()> {
        let path = log_path(&self.dir, self.active.meta.base);
        self.active.file.sync_data().ctx(&path)?;
        let base = self.next_offset;
        let file = create_segment(&self.dir, base)?;
        let ipath = index_path(&self.dir, base);
        index::write_index(&ipath, &[])?;
        let new = Active {
            meta: SegmentMeta {
                base,
                size: HEADER_LEN,
                last_offset: None,
                max_append_ts: None,
            },
            version: VERSION,
            file,
            index_file: index::open_for_append(&ipath)?,
            index: IndexBuilder::new(base),
            dirty: false,
        };
        let old = std::mem::replace(&mut self.active, new);
        self.sealed.push(old.meta);
        Ok(())
    }

    /// Seals the active segment when it holds records, so that an explicit
    /// compaction reaches every record appended so far.
    pub fn seal_active(&mut self) -> Result<()> {
        if self.active.meta.last_offset.is_some() {
            self.roll()?;
        }
        Ok(())
    }

    /// Makes every append so far durable.
    pub fn sync(&mut self) -> Result<()> {
        if self.active.dirty {
            let path = log_path(&self.dir, self.active.meta.base);
            self.active.file.sync_data().ctx(&path)?;
            self.active.dirty = false;
        }
        Ok(())
    }

    /// Deletes the oldest sealed segment (never the active one).
    pub fn delete_oldest(&mut self) -> Result<Option<SegmentMeta>> {
        if self.sealed.is_empty() {
            return Ok(None);
        }
        let meta = self.sealed.remove(0);
        // The .log goes first: once it is gone the segment is gone, and an
        // orphan .index is cleaned up on the next open.
        let path = log_path(&self.dir, meta.base);
        std::fs::remove_file(&path).ctx(&path)?;
        remove_if_exists(&index_path(&self.dir, meta.base))?;
        fsync_dir(&self.dir)?;
        Ok(Some(meta))
    }

    /// Re-reads the sealed segments from disk (after compaction swapped them).
    pub fn reload_sealed(&mut self) -> Result<()> {
        let bases = list_segments(&self.dir)?;
        let mut sealed = Vec::new();
        for base in bases.into_iter().filter(|&b| b < self.active.meta.base) {
            sealed.push(open_sealed(&self.dir, base)?);
        }
        check_continuity(&self.dir, &sealed, &self.active.meta)?;
        self.sealed = sealed;
        Ok(())
    }
}

/// Sealed segments: trust the index for a short tail scan when it checks out,
/// otherwise rebuild it with a full scan. A tail in a sealed segment is damage.
fn open_sealed(dir: &Path, base: u64) -> Result<SegmentMeta> {
    let path = log_path(dir, base);
    let ipath = index_path(dir, base);
    let mut cur = SegmentCursor::open(&path, base)?;
    let size = std::fs::metadata(&path).ctx(&path)?.len();
    let entries = index::read_index(&ipath)?;
    if let Some(last) = entries
        .last()
        .filter(|_| index::is_plausible(&entries, size))
    {
        let at = base.saturating_add(u64::from(last.rel));
        cur.seek(
            u64::from(last.pos),
            at.checked_sub(1).filter(|&p| p >= base),
        );
        let mut first = None;
        let scanned = scan_rest(&mut cur, |r, _| {
            first.get_or_insert(r.offset);
        });
        if let Some(s) = scanned
            .ok()
            .filter(|s| s.tail_bytes == 0 && first == Some(at))
        {
            return Ok(SegmentMeta {
                size,
                ..SegmentMeta::from_scan(base, &s)
            });
        }
    }
    let (s, entries) = full_scan(&path, base)?;
    if let Some(detail) = s.tail_detail {
        return Err(LogError::corrupt(
            &path,
            s.last_offset.map(|o| o + 1),
            Some(s.valid_len),
            format!("sealed segment ends in damaged data: {detail}"),
        ));
    }
    index::write_index(&ipath, &entries)?;
    Ok(SegmentMeta::from_scan(base, &s))
}

/// Scans a whole segment, building its index.
pub fn full_scan(path: &Path, base: u64) -> Result<(ScanSummary, Vec<IndexEntry>)> {
    let mut cur = SegmentCursor::open(path, base)?;
    let mut ib = IndexBuilder::new(base);
    let s = scan_rest(&mut cur, |r, pos| {
        ib.on_record(r.offset, pos);
    })?;
    Ok((s, ib.entries))
}

/// The active segment is always fully scanned: its tail may be torn.
fn open_active(dir: &Path, id: u32, base: u64, report: &mut OpenReport) -> Result<Active> {
    let path = log_path(dir, base);
    let (s, entries) = full_scan(&path, base)?;
    if let Some(detail) = &s.tail_detail {
        let f = OpenOptions::new().write(true).open(&path).ctx(&path)?;
        f.set_len(s.valid_len).ctx(&path)?;
        f.sync_data().ctx(&path)?;
        report.recoveries.push(Recovery {
            partition: id,
            segment: path.clone(),
            truncated_bytes: s.tail_bytes,
            at_offset: s.last_offset.map_or(base, |o| o + 1),
            detail: detail.clone(),
        });
    }
    let ipath = index_path(dir, base);
    index::write_index(&ipath, &entries)?;
    let index = IndexBuilder::resume(base, entries);
    Ok(Active {
        meta: SegmentMeta::from_scan(base, &s),
        version: s.version,
        file: OpenOptions::new().append(true).open(&path).ctx(&path)?,
        index_file: index::open_for_append(&ipath)?,
        index,
        dirty: false,
    })
}

fn check_continuity(dir: &Path, sealed: &[SegmentMeta], active: &SegmentMeta) -> Result<()> {
    let all: Vec<&SegmentMeta> = sealed.iter().chain(std::iter::once(active)).collect();
    for w in all.windows(2) {
        if let Some(last) = w[0].last_offset.filter(|&l| l >= w[1].base) {
            let path = log_path(dir, w[0].base);
            let detail = format!(
                "segment holds offset {last} at or beyond the next segment's base {}",
                w[1].base
            );
            return Err(LogError::corrupt(&path, Some(last), None, detail));
        }
    }
    Ok(())
}
