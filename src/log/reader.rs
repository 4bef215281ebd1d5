//! Lock-free readers of one partition, safe to run while a writer appends,
//! retains or compacts (in this or another process).
//!
//! Invariants:
//! - a reader only ever hands out valid records, in offset order, each once;
//! - the end of the *last* segment may hold a partial frame (a writer is
//!   mid-append) or a torn tail awaiting recovery: that is "not yet
//!   visible", never an error. Damage followed by valid data, or any damage
//!   in a sealed segment, is a `Corruption` error, returned again on every
//!   call, and nothing at or after it in that segment is served;
//! - a segment is known to be sealed once a later segment exists; the
//!   writer finishes a segment before creating the next, so the reader
//!   re-reads the current segment once after seeing a successor;
//! - an open file handle keeps its content on Unix when retention deletes
//!   the file or compaction renames a cleaned file over it, so a reader in
//!   the middle of a segment always sees one consistent version.

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::error::{LogError, Result};
use super::index;
use super::record::{Frame, Record, RecordRef};
use super::segment::{HEADER_LEN, Scan, SegmentCursor, Step, index_path, list_segments, log_path};

/// Where a new reader starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// The earliest retained offset.
    Earliest,
    /// Exactly this offset (the first record at or after it is served).
    Offset(u64),
    /// The next offset to be written: only new records are served.
    Latest,
}

/// What a reader remembers of the last record it lent: what a consumer
/// records of where it stands (see [`PartitionReader::last_lent`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lent {
    /// The record's offset.
    pub offset: u64,
    /// Its [`Record::fingerprint`].
    pub fingerprint: u32,
    /// The writer's wall clock when it was appended, in ms since the Unix epoch.
    pub append_ts: i64,
    /// Its event time, when the producer gave one.
    pub event_ts: Option<i64>,
}

impl Lent {
    fn of(frame: &Frame, fingerprint: u32) -> Lent {
        Lent {
            offset: frame.offset,
            fingerprint,
            append_ts: frame.append_ts,
            event_ts: frame.event_ts,
        }
    }
}

/// A reader of one partition: serves its records in offset order, from a
/// [`Start`], while a writer may append, retain or compact (see
/// [`crate::log::Log::reader`]).
pub struct PartitionReader {
    topic: String,
    partition: u32,
    dir: PathBuf,
    /// A plain (not compacted) topic: each segment starts right after the
    /// previous one's last record, so a jump is a lost segment.
    contiguous: bool,
    cur: SegmentCursor,
    /// Base of the next segment once the current one is known to be sealed.
    successor: Option<u64>,
    /// Records below this have been handed out or skipped.
    floor: u64,
    pending: VecDeque<Record>,
    /// The last record lent.
    last: Option<Lent>,
}

const POLL_INTERVAL: Duration = Duration::from_millis(5);

impl PartitionReader {
    pub(crate) fn open(
        dir: &Path,
        topic: &str,
        partition: u32,
        start: Start,
        contiguous: bool,
    ) -> Result<Self> {
        let mut attempts = 0;
        loop {
            match Self::try_open(dir, topic, partition, start, contiguous) {
                Err(LogError::Io { cause, .. })
                    if cause.kind() == std::io::ErrorKind::NotFound && attempts < 10 =>
                {
                    // A segment vanished between listing and opening
                    // (retention or compaction); list again.
                    attempts += 1;
                }
                other => return other,
            }
        }
    }

    fn try_open(
        dir: &Path,
        topic: &str,
        partition: u32,
        start: Start,
        contiguous: bool,
    ) -> Result<Self> {
        if contiguous {
            check_contiguous(dir, topic, partition)?;
        }
        let (earliest, latest) = bounds(dir)?;
        let target = match start {
            Start::Earliest => earliest,
            Start::Latest => latest,
            Start::Offset(n) if n < earliest || n > latest => {
                return Err(LogError::OffsetOutOfRange {
                    topic: topic.to_string(),
                    partition,
                    requested: n,
                    earliest,
                    latest,
                });
            }
            Start::Offset(n) => n,
        };
        let bases = list_segments(dir)?;
        let base = bases
            .iter()
            .copied()
            .filter(|&b| b <= target)
            .max()
            .unwrap_or(earliest);
        let mut cur = SegmentCursor::open(&log_path(dir, base), base)?;
        seek_with_index(&mut cur, dir, base, target)?;
        Ok(PartitionReader {
            topic: topic.to_string(),
            partition,
            dir: dir.to_path_buf(),
            contiguous,
            cur,
            successor: None,
            floor: target,
            pending: VecDeque::new(),
            last: None,
        })
    }

    /// The partition read.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// The smallest offset the next returned record can have.
    pub fn position(&self) -> u64 {
        self.pending.front().map_or(self.floor, |r| r.offset)
    }

    /// Whether the reader holds records it has read and not yet handed out
    /// (one past a read's `until`, or one [`PartitionReader::wait_for`] saw).
    pub fn holds_records(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Up to `max` records that are visible now (possibly none).
    pub fn next_batch(&mut self, max: usize) -> Result<Vec<Record>> {
        let mut out: Vec<Record> = Vec::with_capacity(max.min(4096));
        self.visit(max, None, &mut |r| {
            out.push(r.to_record());
            ControlFlow::Continue(())
        })?;
        Ok(out)
    }

    /// Lends `f` up to `max` records that are visible now, in order, without
    /// copying them, stopping before the first at or past `until` (kept for
    /// the next call) and after the one for which `f` breaks. Returns how
    /// many `f` was lent.
    pub fn visit(
        &mut self,
        max: usize,
        until: Option<u64>,
        f: &mut dyn FnMut(RecordRef<'_>) -> ControlFlow<()>,
    ) -> Result<usize> {
        let below = |offset: u64| until.is_none_or(|u| offset < u);
        let mut lent = 0;
        while lent < max {
            if let Some(r) = self.pending.front() {
                if !below(r.offset) {
                    break;
                }
                let r = self.pending.pop_front().expect("checked above");
                lent += 1;
                self.last = Some(Lent {
                    offset: r.offset,
                    fingerprint: r.fingerprint(),
                    append_ts: r.append_ts,
                    event_ts: r.event_ts,
                });
                if f(r.view()).is_break() {
                    break;
                }
                continue;
            }
            if self.lend_buffered(max, &below, &mut lent, f) || lent == max {
                break;
            }
            // The buffer holds no whole frame to lend: read the file, move
            // to the next segment, or find what is wrong.
            let frame = match self.fetch() {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                // Hand out what was valid; the error repeats on the next call.
                Err(_) if lent > 0 => break,
                Err(e) => return Err(e),
            };
            let record = self.cur.record(&frame);
            if !below(record.offset) {
                self.pending.push_back(record.to_record());
                break;
            }
            lent += 1;
            self.last = Some(Lent::of(&frame, self.cur.fingerprint(&frame)));
            if f(record).is_break() {
                break;
            }
        }
        Ok(lent)
    }

    /// Lends `f` the records whose frames are whole in the cursor's buffer
    /// (skipping those below the floor), until `lent` reaches `max` or a
    /// record is not `below`; true when `f` broke.
    fn lend_buffered(
        &mut self,
        max: usize,
        below: &impl Fn(u64) -> bool,
        lent: &mut usize,
        f: &mut dyn FnMut(RecordRef<'_>) -> ControlFlow<()>,
    ) -> bool {
        let floor = &mut self.floor;
        let mut last = None;
        let mut broke = false;
        self.cur.scan_buffered(&mut |frame, record| {
            if frame.offset < *floor {
                return Scan::Take;
            }
            if *lent == max || !below(frame.offset) {
                return Scan::Leave;
            }
            *floor = frame.offset + 1;
            *lent += 1;
            last = Some(*frame);
            broke = f(record).is_break();
            match broke {
                true => Scan::TakeAndStop,
                false => Scan::Take,
            }
        });
        // Only the last record's fingerprint is kept, so only it is computed
        // (a batch's records carry none of their own).
        if let Some(frame) = last {
            self.last = Some(Lent::of(&frame, self.cur.fingerprint(&frame)));
        }
        broke
    }

    /// The last record lent by [`PartitionReader::visit`] (or
    /// [`PartitionReader::next_batch`]), if any.
    pub fn last_lent(&self) -> Option<Lent> {
        self.last
    }

    /// Waits until a record is available at the reader's position or the
    /// timeout passes; true when one is available. Polls the file system.
    pub fn wait_for(&mut self, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            if !self.pending.is_empty() {
                return Ok(true);
            }
            if let Some(frame) = self.fetch()? {
                self.pending.push_back(self.cur.record(&frame).to_record());
                return Ok(true);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            std::thread::sleep(POLL_INTERVAL.min(deadline - now));
        }
    }

    /// The frame of the next record at or above the floor, if visible: the
    /// cursor lends the record.
    fn fetch(&mut self) -> Result<Option<Frame>> {
        while let Some(frame) = self.step()? {
            if frame.offset >= self.floor {
                self.floor = frame.offset + 1;
                return Ok(Some(frame));
            }
        }
        Ok(None)
    }

    fn step(&mut self) -> Result<Option<Frame>> {
        loop {
            let step = self.cur.next_frame()?;
            if let Step::Record(frame, _) = step {
                return Ok(Some(frame));
            }
            let Some(next_base) = self.successor else {
                self.successor = self.find_successor()?;
                if self.successor.is_some() {
                    continue; // sealed meanwhile: read it once more to its end
                }
                return self.at_live_end(step);
            };
            match step {
                Step::Incomplete { available: 0 } if self.contiguous && next_base > self.floor => {
                    return Err(LogError::MissingSegment {
                        topic: self.topic.clone(),
                        partition: self.partition,
                        from: self.floor,
                        to: next_base - 1,
                    });
                }
                Step::Incomplete { available: 0 } => self.move_to(next_base)?,
                Step::Incomplete { .. } => {
                    return Err(self
                        .cur
                        .corruption("partial record at the end of a sealed segment"));
                }
                Step::Bad(d) => return Err(self.cur.corruption(d)),
                Step::Record(..) => unreachable!("handled above"),
            }
        }
    }

    /// End of the visible data in the last segment.
    fn at_live_end(&mut self, step: Step<Frame>) -> Result<Option<Frame>> {
        match step {
            Step::Bad(d) if self.cur.valid_data_follows()? => {
                Err(self.cur.corruption(format!("{d}; valid records follow it")))
            }
            _ => Ok(None),
        }
    }

    fn find_successor(&self) -> Result<Option<u64>> {
        let base = self.cur.base;
        Ok(list_segments(&self.dir)?.into_iter().find(|&b| b > base))
    }

    fn move_to(&mut self, mut base: u64) -> Result<()> {
        loop {
            match SegmentCursor::open(&log_path(&self.dir, base), base) {
                Ok(cur) => {
                    self.cur = cur;
                    self.successor = None;
                    return Ok(());
                }
                Err(LogError::Io { cause, .. }) if cause.kind() == std::io::ErrorKind::NotFound => {
                    base = self.after_vanished(base)?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The segment we wanted to move to was deleted. If the retained range
    /// now starts above our position, retention overtook this reader.
    fn after_vanished(&self, base: u64) -> Result<u64> {
        let (earliest, latest) = bounds(&self.dir)?;
        if self.floor < earliest {
            return Err(LogError::OffsetOutOfRange {
                topic: self.topic.clone(),
                partition: self.partition,
                requested: self.floor,
                earliest,
                latest,
            });
        }
        let bases = list_segments(&self.dir)?;
        Ok(bases
            .into_iter()
            .find(|&b| b > base)
            .unwrap_or(earliest.max(base)))
    }
}

/// Positions `cur` at the indexed frame at or before `target`; falls back to
/// the start of the segment when the index is missing or wrong.
fn seek_with_index(cur: &mut SegmentCursor, dir: &Path, base: u64, target: u64) -> Result<()> {
    let entries = index::read_index(&index_path(dir, base))?;
    let Some(e) = index::lookup(&entries, target.saturating_sub(base)) else {
        return Ok(());
    };
    let at = base.saturating_add(u64::from(e.rel));
    cur.seek(u64::from(e.pos), None);
    let verified = matches!(cur.next(), Ok(Step::Record(r, _)) if r.offset == at);
    if verified {
        cur.seek(u64::from(e.pos), at.checked_sub(1).filter(|&p| p >= base));
    } else {
        cur.seek(HEADER_LEN, None);
    }
    Ok(())
}

/// Fails with `MissingSegment` when a segment does not start right after
/// the previous one's last record (only for plain topics: compaction leaves
/// gaps between segments). A segment that retention deletes meanwhile is
/// the oldest one, never a hole.
pub(crate) fn check_contiguous(dir: &Path, topic: &str, partition: u32) -> Result<()> {
    let bases = list_segments(dir)?;
    for pair in bases.windows(2) {
        let end = match sealed_end(dir, pair[0]) {
            Err(LogError::Io { cause, .. }) if cause.kind() == std::io::ErrorKind::NotFound => {
                continue;
            }
            other => other?,
        };
        // A segment damaged before its end is a corruption, which the reader
        // reports when it gets there (after serving what comes before it).
        let Some(end) = end else { continue };
        if end != pair[1] {
            return Err(LogError::MissingSegment {
                topic: topic.to_string(),
                partition,
                from: end,
                to: pair[1].saturating_sub(1),
            });
        }
    }
    Ok(())
}

/// `(earliest, next)` offsets of a partition as visible right now.
pub(crate) fn bounds(dir: &Path) -> Result<(u64, u64)> {
    let bases = list_segments(dir)?;
    let (Some(&first), Some(&last)) = (bases.first(), bases.last()) else {
        return Err(LogError::corrupt(
            dir,
            None,
            None,
            "partition directory has no segment files",
        ));
    };
    Ok((first, visible_next_offset(dir, last)?))
}

/// One past the last record of the sealed segment at `base` (or `base`),
/// or `None` when damaged data ends it rather than the end of the file.
fn sealed_end(dir: &Path, base: u64) -> Result<Option<u64>> {
    let mut cur = SegmentCursor::open(&log_path(dir, base), base)?;
    seek_with_index(&mut cur, dir, base, u64::MAX)?;
    let mut last = None;
    loop {
        match cur.next_frame()? {
            Step::Record(frame, _) => last = Some(frame.offset),
            Step::Incomplete { available: 0 } => return Ok(Some(last.map_or(base, |o| o + 1))),
            _ => return Ok(None),
        }
    }
}

/// One past the last visible record of the segment at `base` (or `base`).
pub(crate) fn visible_next_offset(dir: &Path, base: u64) -> Result<u64> {
    let mut cur = SegmentCursor::open(&log_path(dir, base), base)?;
    seek_with_index(&mut cur, dir, base, u64::MAX)?;
    let mut last = None;
    while let Step::Record(frame, _) = cur.next_frame()? {
        last = Some(frame.offset);
    }
    Ok(last.map_or(base, |o| o + 1))
}
