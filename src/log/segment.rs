//! Segment files: naming, the file header, and sequential record scanning.
//!
//! A partition directory holds segments `{base_offset:020}.log`, each starting
//! with this header (integers little endian):
//!
//! | field         | size | value                                  |
//! |---------------|------|----------------------------------------|
//! | `magic`       | 4    | `KLOG`                                 |
//! | `version`     | u16  | 2 (1 in segments written before batches) |
//! | `reserved`    | u16  | 0                                      |
//! | `base_offset` | u64  | equals the number in the file name     |
//! | `header_crc`  | u32  | CRC-32C of the 16 bytes before it      |
//!
//! followed by frames: in a version-2 segment, record batches (`batch.rs`),
//! one batch for each run of records an append wrote, up to a target size;
//! in a version-1 segment, one frame a record (`record.rs`). Topics written
//! before batches keep their version-1 segments, which every reader reads;
//! the writer goes on appending frames of the version its active segment
//! has, and every segment it creates is version 2. Invariants: every record in
//! a segment has `offset >= base_offset`, offsets strictly increase, and all
//! offsets are below the next segment's base. A `.log` file always has a
//! complete header because segments are created under a temporary name
//! (`.log.new`) and renamed into place once the header is durable.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::batch::{self, Batch, BatchEncoder};
use super::error::{IoContext, LogError, Result};
use super::fsutil::fsync_dir;
use super::record::{
    Decoded, Frame, Record, RecordIn, RecordRef, decode_frame, encode, valid_frame_after,
};

pub const MAGIC: &[u8; 4] = b"KLOG";
/// The version of the segments this build writes: record batches.
pub const VERSION: u16 = 2;
/// The version of segments of one frame a record, which this build reads
/// and appends to.
pub const VERSION_SINGLE: u16 = 1;
pub const HEADER_LEN: u64 = 20;
const READ_CHUNK: usize = 64 << 10;

/// The role of a file inside a partition directory, judged by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegFile {
    Log(u64),
    Index(u64),
    /// A segment being created (header not yet durable).
    New(u64),
    /// A compaction output not yet committed.
    Cleaned(u64),
    /// A committed compaction output waiting to replace its `.log`.
    Swap(u64),
    Other,
}

pub fn classify(name: &str) -> SegFile {
    let Some((digits, ext)) = name.split_at_checked(20) else {
        return SegFile::Other;
    };
    let Some(base) = digits
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| digits.parse::<u64>().ok())
        .flatten()
    else {
        return SegFile::Other;
    };
    match ext {
        ".log" => SegFile::Log(base),
        ".index" => SegFile::Index(base),
        ".log.new" => SegFile::New(base),
        ".log.cleaned" => SegFile::Cleaned(base),
        ".log.swap" => SegFile::Swap(base),
        _ => SegFile::Other,
    }
}

pub fn file_name(base: u64, ext: &str) -> String {
    format!("{base:020}{ext}")
}

pub fn log_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(file_name(base, ".log"))
}

pub fn index_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(file_name(base, ".index"))
}

/// All files in a partition directory with their role, sorted by name.
pub fn list_dir(dir: &Path) -> Result<Vec<(String, SegFile)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).ctx(dir)? {
        let name = entry.ctx(dir)?.file_name().to_string_lossy().into_owned();
        let kind = classify(&name);
        out.push((name, kind));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Base offsets of the `.log` segments, ascending.
pub fn list_segments(dir: &Path) -> Result<Vec<u64>> {
    let files = list_dir(dir)?;
    Ok(files
        .iter()
        .filter_map(|(_, k)| match k {
            SegFile::Log(b) => Some(*b),
            _ => None,
        })
        .collect())
}

pub fn encode_header(base: u64, version: u16) -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[..4].copy_from_slice(MAGIC);
    h[4..6].copy_from_slice(&version.to_le_bytes());
    h[8..16].copy_from_slice(&base.to_le_bytes());
    let crc = crc32c::crc32c(&h[..16]);
    h[16..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Checks a segment's header; returns its format version.
pub fn check_header(path: &Path, bytes: &[u8], base: u64) -> Result<u16> {
    let bad = |detail: String| LogError::BadHeader {
        path: path.to_path_buf(),
        detail,
    };
    if bytes.len() < HEADER_LEN as usize {
        return Err(bad(format!(
            "file is {} bytes, shorter than the {HEADER_LEN}-byte header",
            bytes.len()
        )));
    }
    if &bytes[..4] != MAGIC {
        return Err(bad(format!(
            "magic is {:?}, expected \"KLOG\"",
            &bytes[..4]
        )));
    }
    let version = u16::from_le_bytes([bytes[4], bytes[5]]);
    if !(VERSION_SINGLE..=VERSION).contains(&version) {
        return Err(bad(format!(
            "unsupported format version {version} (this build reads {VERSION_SINGLE} to {VERSION})"
        )));
    }
    let stored = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
    if stored != crc32c::crc32c(&bytes[..16]) {
        return Err(bad("header checksum mismatch".into()));
    }
    let found = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    if found != base {
        return Err(bad(format!(
            "header base offset {found} disagrees with file name base {base}"
        )));
    }
    Ok(version)
}

/// Opens a segment for reading and validates its header; returns the file
/// and the segment's format version.
pub fn open_segment(path: &Path, base: u64) -> Result<(File, u16)> {
    let mut file = File::open(path).ctx(path)?;
    let mut head = Vec::with_capacity(HEADER_LEN as usize);
    (&mut file)
        .take(HEADER_LEN)
        .read_to_end(&mut head)
        .ctx(path)?;
    let version = check_header(path, &head, base)?;
    Ok((file, version))
}

/// Writes `{base}{ext}` holding only a header of this build's version plus
/// `body`, durably, and returns its path. Used for new segments and
/// compaction outputs.
pub fn write_segment_file(dir: &Path, base: u64, ext: &str, body: &[u8]) -> Result<PathBuf> {
    let path = dir.join(file_name(base, ext));
    let mut f = File::create(&path).ctx(&path)?;
    f.write_all(&encode_header(base, VERSION)).ctx(&path)?;
    f.write_all(body).ctx(&path)?;
    f.sync_data().ctx(&path)?;
    Ok(path)
}

/// Creates an empty segment atomically (temp name, fsync, rename, dir fsync)
/// and opens it for appending.
pub fn create_segment(dir: &Path, base: u64) -> Result<File> {
    let tmp = write_segment_file(dir, base, ".log.new", &[])?;
    let path = log_path(dir, base);
    std::fs::rename(&tmp, &path).ctx(&path)?;
    fsync_dir(dir)?;
    OpenOptions::new().append(true).open(&path).ctx(&path)
}

/// Encodes appended records as the frames of a segment of one version:
/// record batches (version 2) or one frame a record (version 1).
#[derive(Debug)]
pub struct FrameWriter {
    version: u16,
    open: Option<BatchEncoder>,
}

impl FrameWriter {
    pub fn new(version: u16) -> Self {
        FrameWriter {
            version,
            open: None,
        }
    }

    /// The most bytes pushing `rec` next adds to `out` (with the header of
    /// the batch it would start).
    pub fn len_bound(&self, out: &[u8], rec: &RecordIn<'_>) -> usize {
        match self.version {
            VERSION_SINGLE => rec.encoded_len(),
            _ if self.starts_batch(out, rec) => batch::HEADER + batch::record_len_bound(rec),
            _ => batch::record_len_bound(rec),
        }
    }

    /// Whether `rec` goes into a new batch: none is open, or it would take
    /// the open one past the target size (so that no batch but a lone
    /// record's is larger, and no batch is larger than one record may be).
    fn starts_batch(&self, out: &[u8], rec: &RecordIn<'_>) -> bool {
        self.open.as_ref().is_none_or(|b| {
            b.len(out) + batch::record_len_bound(rec) > batch::HEADER + batch::TARGET_BYTES
        })
    }

    /// Appends `rec`, at `offset` and appended at `append_ts`, to `out`
    /// (offsets rising, within `u32::MAX` of the segment's base); true when
    /// it starts a frame, which then starts where `out` ended before.
    pub fn push(
        &mut self,
        out: &mut Vec<u8>,
        rec: &RecordIn<'_>,
        offset: u64,
        append_ts: i64,
    ) -> bool {
        if self.version == VERSION_SINGLE {
            encode(rec, offset, append_ts, out);
            return true;
        }
        let starts = self.starts_batch(out, rec);
        if starts {
            self.close(out);
            self.open = Some(BatchEncoder::begin(out, offset, append_ts));
        }
        let open = self.open.as_mut().expect("a batch is open");
        open.push(out, rec, offset, append_ts);
        starts
    }

    /// Completes the frame in progress: `out` then holds whole frames only.
    pub fn close(&mut self, out: &mut Vec<u8>) {
        if let Some(open) = self.open.take() {
            open.finish(out);
        }
    }
}

/// The most bytes `recs` take as frames of a segment of `version`.
pub fn frames_len_bound(version: u16, recs: &[RecordIn<'_>]) -> u64 {
    let bound = |r: &RecordIn<'_>| match version {
        VERSION_SINGLE => r.encoded_len(),
        _ => batch::HEADER + batch::record_len_bound(r),
    };
    recs.iter().map(|r| bound(r) as u64).sum()
}

/// One step of a sequential scan; `R` is the record found (owned, or a
/// [`Frame`] to borrow it by with [`SegmentCursor::record`]).
#[derive(Debug)]
pub enum Step<R = Record> {
    /// A valid record of the frame starting at file position `pos` (a
    /// batch's records all name the batch's position).
    Record(R, u64),
    /// Fewer bytes than a whole frame remain; `available` of them (0 at a clean end).
    Incomplete { available: u64 },
    /// A complete but invalid frame (or out-of-order offset) at the position.
    Bad(String),
}

/// What [`SegmentCursor::scan_buffered`] does with the record it lent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scan {
    /// Consume it and go on.
    Take,
    /// Consume it and stop.
    TakeAndStop,
    /// Stop before it: the next scan or step starts at this record.
    Leave,
}

/// A frame decoded at the cursor's position, of either version.
enum Unit {
    One(Frame),
    Many(Batch),
}

impl Unit {
    fn first_offset(&self) -> u64 {
        match self {
            Unit::One(frame) => frame.offset,
            Unit::Many(batch) => batch.base_offset,
        }
    }

    fn shifted(self, by: usize) -> Unit {
        match self {
            Unit::One(frame) => Unit::One(frame.shifted(by)),
            Unit::Many(batch) => Unit::Many(batch.shifted(by)),
        }
    }
}

/// The frame at `buf[0]` of a segment of `version`.
#[inline]
fn decode_unit(version: u16, buf: &[u8]) -> Decoded<Unit> {
    match version {
        VERSION_SINGLE => decode_frame(buf).map(Unit::One),
        _ => batch::decode(buf).map(Unit::Many),
    }
}

/// The batch at the cursor's position whose records are being lent.
struct Lending {
    batch: Batch,
    /// Buffer position of its next record.
    next: usize,
    /// Records not yet lent.
    left: u32,
}

/// Buffered sequential reader over one segment file. It re-reads the file
/// when it runs dry, so it naturally follows a concurrent appender.
pub struct SegmentCursor {
    file: File,
    pub path: PathBuf,
    pub base: u64,
    version: u16,
    buf: Vec<u8>,
    buf_pos: u64,
    /// File position of the frame being read: the next one, or the batch
    /// whose records are being lent (which stays in the buffer until its
    /// last record is lent).
    pos: u64,
    last_offset: Option<u64>,
    lending: Option<Lending>,
}

impl SegmentCursor {
    pub fn open(path: &Path, base: u64) -> Result<Self> {
        let (file, version) = open_segment(path, base)?;
        Ok(Self::from_file(file, version, path, base))
    }

    pub fn from_file(file: File, version: u16, path: &Path, base: u64) -> Self {
        SegmentCursor {
            file,
            path: path.to_path_buf(),
            base,
            version,
            buf: Vec::new(),
            buf_pos: HEADER_LEN,
            pos: HEADER_LEN,
            last_offset: None,
            lending: None,
        }
    }

    /// The segment's format version.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// File position of the next frame, or of the batch being lent.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Offset of the last record returned, if any.
    pub fn last_offset(&self) -> Option<u64> {
        self.last_offset
    }

    /// Repositions at a frame boundary; `prev` is the offset known to precede it.
    pub fn seek(&mut self, pos: u64, prev: Option<u64>) {
        self.buf.clear();
        self.buf_pos = pos;
        self.pos = pos;
        self.last_offset = prev;
        self.lending = None;
    }

    /// The next record, copied out of the buffer.
    pub fn next(&mut self) -> Result<Step> {
        Ok(match self.next_frame()? {
            Step::Record(frame, pos) => Step::Record(self.record(&frame).to_record(), pos),
            Step::Incomplete { available } => Step::Incomplete { available },
            Step::Bad(detail) => Step::Bad(detail),
        })
    }

    /// The next record's frame: [`SegmentCursor::record`] lends the record
    /// until the cursor moves on. (Returning the borrow from the loop that
    /// refills the buffer is what the borrow checker cannot yet accept.)
    pub fn next_frame(&mut self) -> Result<Step<Frame>> {
        loop {
            if self.lending.is_some() {
                let (start, mut lent) = (self.pos, None);
                self.lend_batch(&mut |frame, _| {
                    lent = Some(*frame);
                    Scan::TakeAndStop
                });
                return Ok(match lent {
                    Some(frame) => Step::Record(frame, start),
                    None => Step::Bad("a record of a checked batch does not read".into()),
                });
            }
            let at = (self.pos - self.buf_pos) as usize;
            match decode_unit(self.version, &self.buf[at..]) {
                Decoded::Record(unit, len) => {
                    if let Some(step) = self.accept(unit.shifted(at), len) {
                        return Ok(step);
                    }
                }
                Decoded::Bad(detail) => return Ok(Step::Bad(detail)),
                Decoded::Incomplete => {
                    if !self.refill()? {
                        let available = self.buf_pos + self.buf.len() as u64 - self.pos;
                        return Ok(Step::Incomplete { available });
                    }
                }
            }
        }
    }

    /// Lends `f` the records of the complete, valid, in-order frames already
    /// in the buffer, from the cursor's position, without reading the file:
    /// the loop a reader spends its time in. Stops at the first frame that
    /// is not whole, valid and in order (for [`SegmentCursor::next_frame`]
    /// to judge, refilling the buffer first), at the end of the buffer, or
    /// when `f` says so; the cursor is left after every record `f` took.
    pub fn scan_buffered(&mut self, f: &mut impl FnMut(&Frame, RecordRef<'_>) -> Scan) {
        loop {
            if self.lending.is_none() {
                let at = (self.pos - self.buf_pos) as usize;
                let Decoded::Record(unit, len) = decode_unit(self.version, &self.buf[at..]) else {
                    return;
                };
                if !self.in_order(unit.first_offset()) {
                    return;
                }
                match unit.shifted(at) {
                    Unit::One(frame) => {
                        let scan = f(&frame, frame.record(&self.buf));
                        if scan == Scan::Leave {
                            return;
                        }
                        self.pos += len as u64;
                        self.last_offset = Some(frame.offset);
                        if scan == Scan::TakeAndStop {
                            return;
                        }
                        continue;
                    }
                    Unit::Many(batch) => self.start_lending(batch),
                }
            }
            if !self.lend_batch(f) {
                return;
            }
        }
    }

    /// Lends `f` the records left of the batch being lent; true when `f`
    /// took them all and did not ask to stop (the cursor is after the
    /// batch once its last record is taken).
    #[inline]
    fn lend_batch(&mut self, f: &mut impl FnMut(&Frame, RecordRef<'_>) -> Scan) -> bool {
        let Some(l) = self.lending.as_mut() else {
            return true;
        };
        let buf = &self.buf;
        let mut stop = false;
        while l.left > 0 && !stop {
            let Some((frame, next)) = batch::record(buf, l.next, &l.batch) else {
                return false;
            };
            let scan = f(&frame, frame.record(buf));
            if scan == Scan::Leave {
                return false;
            }
            stop = scan == Scan::TakeAndStop;
            (l.next, l.left) = (next, l.left - 1);
            self.last_offset = Some(frame.offset);
        }
        if l.left > 0 {
            return false;
        }
        self.pos += l.batch.len as u64;
        self.lending = None;
        !stop
    }

    /// The record of the frame [`SegmentCursor::next_frame`] returned last,
    /// or [`SegmentCursor::scan_buffered`] lent last, until the cursor
    /// reads the file again.
    pub fn record(&self, frame: &Frame) -> RecordRef<'_> {
        debug_assert_eq!(Some(frame.offset), self.last_offset, "not the last frame");
        frame.record(&self.buf)
    }

    /// The [`RecordRef::fingerprint`] of the record of `frame`, lent last.
    pub fn fingerprint(&self, frame: &Frame) -> u32 {
        frame
            .crc
            .unwrap_or_else(|| self.record(frame).fingerprint())
    }

    fn in_order(&self, offset: u64) -> bool {
        match self.last_offset {
            Some(prev) => offset > prev,
            None => offset >= self.base,
        }
    }

    /// Takes the frame decoded at the cursor's position: a record to return,
    /// or a batch to lend the records of (`None`).
    fn accept(&mut self, unit: Unit, len: usize) -> Option<Step<Frame>> {
        let first = unit.first_offset();
        if !self.in_order(first) {
            let prev = self.last_offset;
            return Some(Step::Bad(format!(
                "offset {first} out of order (previous {prev:?}, base {})",
                self.base
            )));
        }
        match unit {
            Unit::One(frame) => {
                let start = self.pos;
                self.pos += len as u64;
                self.last_offset = Some(frame.offset);
                Some(Step::Record(frame, start))
            }
            Unit::Many(batch) => {
                self.start_lending(batch);
                None
            }
        }
    }

    fn start_lending(&mut self, batch: Batch) {
        self.lending = Some(Lending {
            next: batch.first,
            left: batch.count,
            batch,
        });
    }

    /// Reads more bytes after the buffer; false when the file has none.
    fn refill(&mut self) -> Result<bool> {
        debug_assert!(self.lending.is_none(), "a batch being lent stays buffered");
        let consumed = (self.pos - self.buf_pos) as usize;
        self.buf.drain(..consumed);
        self.buf_pos = self.pos;
        let want = READ_CHUNK.max(self.buf.len());
        let end = self.buf_pos + self.buf.len() as u64;
        self.file.seek(SeekFrom::Start(end)).ctx(&self.path)?;
        let before = self.buf.len();
        (&mut self.file)
            .take(want as u64)
            .read_to_end(&mut self.buf)
            .ctx(&self.path)?;
        Ok(self.buf.len() > before)
    }

    /// True when a valid frame (offset beyond the last good one) exists
    /// anywhere after the current bad position: the damage is then in the
    /// middle of the data, not a torn tail.
    pub fn valid_data_follows(&mut self) -> Result<bool> {
        while self.refill()? {}
        let at = (self.pos - self.buf_pos) as usize;
        let min = self.last_offset.map_or(self.base, |o| o.saturating_add(1));
        let rest = &self.buf[at..];
        Ok(match self.version {
            VERSION_SINGLE => valid_frame_after(rest, min).is_some(),
            _ => batch::valid_batch_after(rest, min).is_some(),
        })
    }

    pub fn corruption(&self, detail: impl Into<String>) -> LogError {
        let expected = self.last_offset.map_or(self.base, |o| o.saturating_add(1));
        LogError::corrupt(&self.path, Some(expected), Some(self.pos), detail)
    }
}

/// What a full scan of a segment found.
#[derive(Debug, Default)]
pub struct ScanSummary {
    /// The segment's format version.
    pub version: u16,
    /// Position just after the last valid record.
    pub valid_len: u64,
    pub last_offset: Option<u64>,
    pub max_append_ts: Option<i64>,
    /// Bytes after `valid_len` that do not form valid records (a tail).
    pub tail_bytes: u64,
    /// Why the tail is not a record, when there is one.
    pub tail_detail: Option<String>,
}

/// Scans from the cursor's position to the end, calling `visit` for each
/// record with the file position of its frame. Damage followed by valid data is a `Corruption` error; damage at
/// the very end is reported as a tail for the caller to judge.
pub fn scan_rest(
    cur: &mut SegmentCursor,
    mut visit: impl FnMut(&Record, u64),
) -> Result<ScanSummary> {
    let mut s = ScanSummary {
        version: cur.version(),
        valid_len: cur.position(),
        last_offset: cur.last_offset(),
        ..Default::default()
    };
    loop {
        match cur.next()? {
            Step::Record(rec, pos) => {
                visit(&rec, pos);
                s.valid_len = cur.position();
                s.last_offset = Some(rec.offset);
                s.max_append_ts = Some(
                    s.max_append_ts
                        .map_or(rec.append_ts, |t| t.max(rec.append_ts)),
                );
            }
            Step::Incomplete { available: 0 } => return Ok(s),
            step => {
                let detail = match step {
                    Step::Bad(d) => d,
                    _ => "partial record at end of file".to_string(),
                };
                if cur.valid_data_follows()? {
                    return Err(cur.corruption(format!("{detail}; valid records follow it")));
                }
                let len = cur.file.metadata().ctx(&cur.path)?.len();
                s.tail_bytes = len.saturating_sub(s.valid_len);
                s.tail_detail = Some(detail);
                return Ok(s);
            }
        }
    }
}
