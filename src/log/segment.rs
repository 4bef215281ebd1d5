//! Segment files: naming, the file header, and sequential record scanning.
//!
//! A partition directory holds segments `{base_offset:020}.log`, each starting
//! with this header (integers little endian):
//!
//! | field         | size | value                                  |
//! |---------------|------|----------------------------------------|
//! | `magic`       | 4    | `KLOG`                                 |
//! | `version`     | u16  | 1                                      |
//! | `reserved`    | u16  | 0                                      |
//! | `base_offset` | u64  | equals the number in the file name     |
//! | `header_crc`  | u32  | CRC-32C of the 16 bytes before it      |
//!
//! followed by record frames (see `record.rs`). Invariants: every record in
//! a segment has `offset >= base_offset`, offsets strictly increase, and all
//! offsets are below the next segment's base. A `.log` file always has a
//! complete header because segments are created under a temporary name
//! (`.log.new`) and renamed into place once the header is durable.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::error::{IoContext, LogError, Result};
use super::fsutil::fsync_dir;
use super::record::{Decoded, Frame, Record, RecordRef, decode_frame, valid_frame_after};

pub const MAGIC: &[u8; 4] = b"KLOG";
pub const VERSION: u16 = 1;
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

pub fn encode_header(base: u64) -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[..4].copy_from_slice(MAGIC);
    h[4..6].copy_from_slice(&VERSION.to_le_bytes());
    h[8..16].copy_from_slice(&base.to_le_bytes());
    let crc = crc32c::crc32c(&h[..16]);
    h[16..].copy_from_slice(&crc.to_le_bytes());
    h
}

pub fn check_header(path: &Path, bytes: &[u8], base: u64) -> Result<()> {
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
    if version != VERSION {
        return Err(bad(format!(
            "unsupported format version {version} (this build reads {VERSION})"
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
    Ok(())
}

/// Opens a segment for reading and validates its header.
pub fn open_segment(path: &Path, base: u64) -> Result<File> {
    let mut file = File::open(path).ctx(path)?;
    let mut head = Vec::with_capacity(HEADER_LEN as usize);
    (&mut file)
        .take(HEADER_LEN)
        .read_to_end(&mut head)
        .ctx(path)?;
    check_header(path, &head, base)?;
    Ok(file)
}

/// Writes `{base}{ext}` holding only a header plus `body`, durably, and
/// returns its path. Used for new segments and compaction outputs.
pub fn write_segment_file(dir: &Path, base: u64, ext: &str, body: &[u8]) -> Result<PathBuf> {
    let path = dir.join(file_name(base, ext));
    let mut f = File::create(&path).ctx(&path)?;
    f.write_all(&encode_header(base)).ctx(&path)?;
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

/// One step of a sequential scan; `R` is the record found (owned, or a
/// [`Frame`] to borrow it by with [`SegmentCursor::record`]).
#[derive(Debug)]
pub enum Step<R = Record> {
    /// A valid record starting at file position `pos`.
    Record(R, u64),
    /// Fewer bytes than a whole frame remain; `available` of them (0 at a clean end).
    Incomplete { available: u64 },
    /// A complete but invalid frame (or out-of-order offset) at the position.
    Bad(String),
}

/// What [`SegmentCursor::scan_buffered`] does with the frame it lent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scan {
    /// Consume it and go on.
    Take,
    /// Consume it and stop.
    TakeAndStop,
    /// Stop before it: the next scan or step starts at this frame.
    Leave,
}

/// Buffered sequential reader over one segment file. It re-reads the file
/// when it runs dry, so it naturally follows a concurrent appender.
pub struct SegmentCursor {
    file: File,
    pub path: PathBuf,
    pub base: u64,
    buf: Vec<u8>,
    buf_pos: u64,
    pos: u64,
    last_offset: Option<u64>,
}

impl SegmentCursor {
    pub fn open(path: &Path, base: u64) -> Result<Self> {
        let file = open_segment(path, base)?;
        Ok(Self::from_file(file, path, base))
    }

    pub fn from_file(file: File, path: &Path, base: u64) -> Self {
        SegmentCursor {
            file,
            path: path.to_path_buf(),
            base,
            buf: Vec::new(),
            buf_pos: HEADER_LEN,
            pos: HEADER_LEN,
            last_offset: None,
        }
    }

    /// File position of the next frame.
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
            let at = (self.pos - self.buf_pos) as usize;
            match decode_frame(&self.buf[at..]) {
                Decoded::Record(frame, _) => return Ok(self.accept(frame)),
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
    /// when `f` says so; the cursor is left after every frame `f` took.
    pub fn scan_buffered(&mut self, f: &mut impl FnMut(&Frame, RecordRef<'_>) -> Scan) {
        let mut at = (self.pos - self.buf_pos) as usize;
        while let Decoded::Record(frame, len) = decode_frame(&self.buf[at..]) {
            let in_order = match self.last_offset {
                Some(prev) => frame.offset > prev,
                None => frame.offset >= self.base,
            };
            if !in_order {
                break;
            }
            let scan = f(&frame, frame.record(&self.buf[at..]));
            if scan == Scan::Leave {
                break;
            }
            at += len;
            self.last_offset = Some(frame.offset);
            if scan == Scan::TakeAndStop {
                break;
            }
        }
        self.pos = self.buf_pos + at as u64;
    }

    /// The record of the frame [`SegmentCursor::next_frame`] returned last
    /// (the cursor knows where that frame is, not where earlier ones were).
    pub fn record(&self, frame: &Frame) -> RecordRef<'_> {
        debug_assert_eq!(Some(frame.offset), self.last_offset, "not the last frame");
        let at = (self.pos - self.buf_pos) as usize - frame.len;
        frame.record(&self.buf[at..])
    }

    fn accept(&mut self, frame: Frame) -> Step<Frame> {
        let in_order = match self.last_offset {
            Some(prev) => frame.offset > prev,
            None => frame.offset >= self.base,
        };
        if !in_order {
            let prev = self.last_offset;
            return Step::Bad(format!(
                "offset {} out of order (previous {prev:?}, base {})",
                frame.offset, self.base
            ));
        }
        let start = self.pos;
        self.pos += frame.len as u64;
        self.last_offset = Some(frame.offset);
        Step::Record(frame, start)
    }

    /// Reads more bytes after the buffer; false when the file has none.
    fn refill(&mut self) -> Result<bool> {
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
        Ok(valid_frame_after(&self.buf[at..], min).is_some())
    }

    pub fn corruption(&self, detail: impl Into<String>) -> LogError {
        let expected = self.last_offset.map_or(self.base, |o| o.saturating_add(1));
        LogError::corrupt(&self.path, Some(expected), Some(self.pos), detail)
    }
}

/// What a full scan of a segment found.
#[derive(Debug, Default)]
pub struct ScanSummary {
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
/// record. Damage followed by valid data is a `Corruption` error; damage at
/// the very end is reported as a tail for the caller to judge.
pub fn scan_rest(
    cur: &mut SegmentCursor,
    mut visit: impl FnMut(&Record, u64, u64),
) -> Result<ScanSummary> {
    let mut s = ScanSummary {
        valid_len: cur.position(),
        last_offset: cur.last_offset(),
        ..Default::default()
    };
    loop {
        match cur.next()? {
            Step::Record(rec, pos) => {
                visit(&rec, pos, cur.position() - pos);
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
