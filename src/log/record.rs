//! Records as appended and as read back, and the version-1 frame: one
//! record a frame, as segments written before record batches (`batch.rs`)
//! hold them. A record's fingerprint is this frame's checksum whatever
//! frame holds it, so offsets committed with fingerprints before batches
//! still check against the same records after.
//!
//! Frame layout (all integers little endian):
//!
//! | field       | size        | notes                                              |
//! |-------------|-------------|----------------------------------------------------|
//! | `length`    | u32         | bytes after this field (crc .. end of value)       |
//! | `crc32c`    | u32         | CRC-32C (Castagnoli) over every byte after it      |
//! | `offset`    | u64         | absolute offset in the partition                   |
//! | `append_ts` | i64         | wall clock (ms since epoch) at append              |
//! | `flags`     | u8          | bit 0: has key, bit 1: has event ts; others zero   |
//! | `event_ts`  | i64         | present only when flag bit 1 is set                |
//! | `key_len`   | u32         | present only when flag bit 0 is set                |
//! | `key`       | key_len     | present only when flag bit 0 is set                |
//! | `value_len` | u32         |                                                    |
//! | `value`     | value_len   | an empty value is a tombstone in compacted topics  |
//!
//! Invariants: decoding never panics and never reads out of bounds, whatever
//! the bytes; a frame decodes only if its CRC matches and its inner lengths
//! add up exactly to `length`. Offsets inside a segment are strictly
//! increasing but may have gaps (compaction removes records).

/// Bytes of the `length` prefix.
pub const LEN_PREFIX: usize = 4;
/// Smallest possible `length`: crc + offset + append_ts + flags + value_len.
pub const MIN_BODY: usize = 4 + 8 + 8 + 1 + 4;
/// Largest accepted `length`; bigger values are treated as corruption.
pub const MAX_BODY: usize = 64 << 20;

pub(super) const FLAG_KEY: u8 = 1;
pub(super) const FLAG_EVENT_TS: u8 = 2;

/// A record to append; borrowed so producers need not copy their buffers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordIn<'a> {
    /// The key: it routes the record to a partition and, in compacted
    /// topics, names what a later record with the same key replaces.
    pub key: Option<&'a [u8]>,
    /// The payload; empty is a tombstone in compacted topics.
    pub value: &'a [u8],
    /// The record's event time, in ms since the Unix epoch.
    pub event_ts: Option<i64>,
}

impl<'a> RecordIn<'a> {
    /// A record with this key and value and no event time.
    pub fn new(key: Option<&'a [u8]>, value: &'a [u8]) -> Self {
        RecordIn {
            key,
            value,
            event_ts: None,
        }
    }

    /// The same record with event time `ts` (ms since the Unix epoch).
    pub fn with_event_ts(mut self, ts: i64) -> Self {
        self.event_ts = Some(ts);
        self
    }

    /// Size of the encoded frame, prefix included.
    pub fn encoded_len(&self) -> usize {
        LEN_PREFIX
            + MIN_BODY
            + self.event_ts.map_or(0, |_| 8)
            + self.key.map_or(0, |k| 4 + k.len())
            + self.value.len()
    }
}

/// A record read back from the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Its offset in the partition.
    pub offset: u64,
    /// Its key, as appended.
    pub key: Option<Vec<u8>>,
    /// Its payload; empty is a tombstone in compacted topics.
    pub value: Vec<u8>,
    /// Its event time, in ms since the Unix epoch, when the producer gave one.
    pub event_ts: Option<i64>,
    /// The writer's wall clock when it was appended, in ms since the Unix
    /// epoch (retention and tombstone expiry go by it).
    pub append_ts: i64,
}

impl Record {
    /// An empty value marks a deletion in compacted topics.
    pub fn is_tombstone(&self) -> bool {
        self.view().is_tombstone()
    }

    /// The record borrowed as a [`RecordIn`] (to append it again, or encode it).
    pub fn as_in(&self) -> RecordIn<'_> {
        RecordIn {
            key: self.key.as_deref(),
            value: &self.value,
            event_ts: self.event_ts,
        }
    }

    /// See [`RecordRef::fingerprint`].
    pub fn fingerprint(&self) -> u32 {
        self.view().fingerprint()
    }
}

/// Appends the frame for `rec` at `offset` to `out`.
pub fn encode(rec: &RecordIn<'_>, offset: u64, append_ts: i64, out: &mut Vec<u8>) {
    let start = out.len();
    let body_len = rec.encoded_len() - LEN_PREFIX;
    out.extend_from_slice(&(body_len as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]); // crc, patched below
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(&append_ts.to_le_bytes());
    let flags = rec.key.map_or(0, |_| FLAG_KEY) | rec.event_ts.map_or(0, |_| FLAG_EVENT_TS);
    out.push(flags);
    if let Some(ts) = rec.event_ts {
        out.extend_from_slice(&ts.to_le_bytes());
    }
    if let Some(key) = rec.key {
        out.extend_from_slice(&(key.len() as u32).to_le_bytes());
        out.extend_from_slice(key);
    }
    out.extend_from_slice(&(rec.value.len() as u32).to_le_bytes());
    out.extend_from_slice(rec.value);
    let crc = crc32c::crc32c(&out[start + 8..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// A record read from the log, borrowed from the reader's buffer: what a
/// consumer looks at without copying it (see [`RecordRef::to_record`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// Its offset in the partition.
    pub offset: u64,
    /// Its key, as appended.
    pub key: Option<&'a [u8]>,
    /// Its payload; empty is a tombstone in compacted topics.
    pub value: &'a [u8],
    /// Its event time, in ms since the Unix epoch, when the producer gave one.
    pub event_ts: Option<i64>,
    /// The writer's wall clock when it was appended, in ms since the Unix epoch.
    pub append_ts: i64,
}

impl RecordRef<'_> {
    /// An empty value marks a deletion in compacted topics.
    pub fn is_tombstone(&self) -> bool {
        self.value.is_empty()
    }

    /// The CRC-32C over its offset, append time, event time, key and value,
    /// as a version-1 frame carries it (whatever frame it was read from):
    /// tells this record from another one later written at the same offset,
    /// since the append time differs.
    pub fn fingerprint(&self) -> u32 {
        let flags = self.key.map_or(0, |_| FLAG_KEY) | self.event_ts.map_or(0, |_| FLAG_EVENT_TS);
        let mut crc = crc32c::crc32c(&self.offset.to_le_bytes());
        crc = crc32c::crc32c_append(crc, &self.append_ts.to_le_bytes());
        crc = crc32c::crc32c_append(crc, &[flags]);
        if let Some(ts) = self.event_ts {
            crc = crc32c::crc32c_append(crc, &ts.to_le_bytes());
        }
        if let Some(key) = self.key {
            crc = crc32c::crc32c_append(crc, &(key.len() as u32).to_le_bytes());
            crc = crc32c::crc32c_append(crc, key);
        }
        crc = crc32c::crc32c_append(crc, &(self.value.len() as u32).to_le_bytes());
        crc32c::crc32c_append(crc, self.value)
    }

    /// The record, copied out of the buffer it was read from.
    pub fn to_record(self) -> Record {
        let mut rec = Record {
            offset: 0,
            key: None,
            value: Vec::new(),
            event_ts: None,
            append_ts: 0,
        };
        self.copy_into(&mut rec);
        rec
    }

    /// Makes `rec` this record, reusing its buffers.
    pub fn copy_into(self, rec: &mut Record) {
        rec.offset = self.offset;
        rec.event_ts = self.event_ts;
        rec.append_ts = self.append_ts;
        rec.value.clear();
        rec.value.extend_from_slice(self.value);
        match (self.key, &mut rec.key) {
            (Some(key), Some(held)) => {
                held.clear();
                held.extend_from_slice(key);
            }
            (key, held) => *held = key.map(<[u8]>::to_vec),
        }
    }
}

impl Record {
    /// The record borrowed as a consumer sees it straight from the log.
    pub fn view(&self) -> RecordRef<'_> {
        RecordRef {
            offset: self.offset,
            key: self.key.as_deref(),
            value: &self.value,
            event_ts: self.event_ts,
            append_ts: self.append_ts,
        }
    }
}

/// A valid record's fields, with its key and value as byte ranges of the
/// buffer it was decoded from (a version-1 frame, or a record of a batch,
/// `batch.rs`): a plain value, so that a reader can decode a frame, refill
/// its buffer when the frame is incomplete, and lend out the record only
/// once the loop is over (see [`Frame::record`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The record's offset in the partition.
    pub offset: u64,
    /// The writer's wall clock at append, in ms since the Unix epoch.
    pub append_ts: i64,
    /// The record's event time, when the producer gave one.
    pub event_ts: Option<i64>,
    /// The CRC-32C a version-1 frame carries (and was checked against): the
    /// record's [`RecordRef::fingerprint`]. A batch's records have none of
    /// their own; their fingerprint is computed when asked for.
    pub crc: Option<u32>,
    pub(super) key: Option<(usize, usize)>,
    pub(super) value: (usize, usize),
}

impl Frame {
    /// The record this frame holds; `buf` is the buffer it was decoded from.
    pub fn record<'a>(&self, buf: &'a [u8]) -> RecordRef<'a> {
        RecordRef {
            offset: self.offset,
            key: self.key.map(|(start, end)| &buf[start..end]),
            value: &buf[self.value.0..self.value.1],
            event_ts: self.event_ts,
            append_ts: self.append_ts,
        }
    }

    /// The same frame, found `by` bytes further into a buffer.
    pub fn shifted(mut self, by: usize) -> Frame {
        self.key = self.key.map(|(start, end)| (start + by, end + by));
        self.value = (self.value.0 + by, self.value.1 + by);
        self
    }
}

/// What the bytes at a position hold.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<R> {
    /// A valid record and the total frame length (prefix included).
    Record(R, usize),
    /// Too few bytes for the frame its prefix announces (or for the prefix):
    /// either a writer is mid-append or the tail was torn.
    Incomplete,
    /// The frame is complete but invalid.
    Bad(String),
}

impl<R> Decoded<R> {
    /// The same outcome with the record made into something else.
    pub fn map<S>(self, f: impl FnOnce(R) -> S) -> Decoded<S> {
        match self {
            Decoded::Record(r, len) => Decoded::Record(f(r), len),
            Decoded::Incomplete => Decoded::Incomplete,
            Decoded::Bad(detail) => Decoded::Bad(detail),
        }
    }
}

/// Decodes the frame starting at `buf[0]` into an owned record.
#[cfg(any(test, fuzzing))]
pub fn decode(buf: &[u8]) -> Decoded<Record> {
    decode_frame(buf).map(|frame| frame.record(buf).to_record())
}

/// Decodes the frame starting at `buf[0]`; its ranges index `buf`.
#[inline]
pub fn decode_frame(buf: &[u8]) -> Decoded<Frame> {
    let frame = match whole(buf, MIN_BODY) {
        Ok(frame) => frame,
        Err(outcome) => return outcome,
    };
    match decode_body(&frame[LEN_PREFIX..]) {
        Ok(record) => Decoded::Record(record.shifted(LEN_PREFIX), frame.len()),
        Err(detail) => Decoded::Bad(detail),
    }
}

/// The bytes of the frame (of either version) that starts `buf`, length
/// prefix included, when its length is plausible (`min_body` to
/// [`MAX_BODY`]) and all of it is there; else what decoding it comes to.
#[inline]
pub(super) fn whole<R>(buf: &[u8], min_body: usize) -> Result<&[u8], Decoded<R>> {
    let Some(len) = read_u32(buf, 0) else {
        return Err(Decoded::Incomplete);
    };
    let len = len as usize;
    if !(min_body..=MAX_BODY).contains(&len) {
        return Err(Decoded::Bad(format!("implausible frame length {len}")));
    }
    buf.get(..LEN_PREFIX + len).ok_or(Decoded::Incomplete)
}

/// Reads only the offset field of a complete-looking frame; used to skip
/// candidates cheaply before paying for a CRC.
pub fn peek_offset(buf: &[u8]) -> Option<u64> {
    read_u64(buf, 8)
}

/// The fields of a frame's body (after the length prefix); ranges index `body`.
#[inline]
fn decode_body(body: &[u8]) -> Result<Frame, String> {
    // `body` holds at least MIN_BODY bytes: crc, offset, append time, flags.
    let fixed = |at: usize| u64::from_le_bytes(body[at..at + 8].try_into().expect("8 bytes"));
    let stored = u32::from_le_bytes(body[..4].try_into().expect("4 bytes"));
    let actual = crc32c::crc32c(&body[4..]);
    if stored != actual {
        return Err(format!(
            "crc mismatch: stored {stored:#010x}, computed {actual:#010x}"
        ));
    }
    let (offset, append_ts, flags) = (fixed(4), fixed(12) as i64, body[20]);
    if flags & !(FLAG_KEY | FLAG_EVENT_TS) != 0 {
        return Err(format!("unknown flag bits {flags:#04x}"));
    }
    let mut cur = Cursor { buf: body, pos: 21 };
    let event_ts = if flags & FLAG_EVENT_TS != 0 {
        Some(cur.u64()? as i64)
    } else {
        None
    };
    let key = if flags & FLAG_KEY != 0 {
        let n = cur.u32()? as usize;
        Some(cur.range(n)?)
    } else {
        None
    };
    let n = cur.u32()? as usize;
    let value = cur.range(n)?;
    if cur.pos != body.len() {
        return Err(format!(
            "{} trailing bytes inside frame",
            body.len() - cur.pos
        ));
    }
    Ok(Frame {
        offset,
        append_ts,
        event_ts,
        crc: Some(stored),
        key,
        value,
    })
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).ok_or("length overflow")?;
        let out = self
            .buf
            .get(self.pos..end)
            .ok_or_else(|| format!("field of {n} bytes at {} overruns frame", self.pos))?;
        self.pos = end;
        Ok(out)
    }
    /// The positions of the next `n` bytes, which are skipped.
    #[inline]
    fn range(&mut self, n: usize) -> Result<(usize, usize), String> {
        let start = self.pos;
        self.take(n)?;
        Ok((start, self.pos))
    }
    #[inline]
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    #[inline]
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
}

pub(crate) fn read_u32(buf: &[u8], at: usize) -> Option<u32> {
    let b = buf.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(b.try_into().ok()?))
}

pub(crate) fn read_u64(buf: &[u8], at: usize) -> Option<u64> {
    let b = buf.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(b.try_into().ok()?))
}

/// Looks for any valid frame starting at or after `buf[1]` whose offset is at
/// least `min_offset`. Used to tell a torn tail (nothing valid follows the bad
/// bytes) from corruption in the middle (valid records follow).
pub fn valid_frame_after(buf: &[u8], min_offset: u64) -> Option<usize> {
    valid_after(buf, min_offset, MIN_BODY, |rest| {
        matches!(decode_frame(rest), Decoded::Record(..))
    })
}

/// The first position from `buf[1]` on where a frame (of either version:
/// both keep their first offset in bytes 8 to 16) of at least `min_body`
/// bytes and a first offset of at least `min_offset` `decodes`; the cheap
/// tests go before the decode.
pub(super) fn valid_after(
    buf: &[u8],
    min_offset: u64,
    min_body: usize,
    decodes: impl Fn(&[u8]) -> bool,
) -> Option<usize> {
    (1..buf.len()).find(|&i| {
        let rest = &buf[i..];
        whole::<()>(rest, min_body).is_ok()
            && peek_offset(rest).is_some_and(|o| o >= min_offset)
            && decodes(rest)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_record() -> impl Strategy<Value = (Option<Vec<u8>>, Vec<u8>, Option<i64>, u64, i64)> {
        (
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
            proptest::collection::vec(any::<u8>(), 0..200),
            proptest::option::of(any::<i64>()),
            any::<u64>(),
            any::<i64>(),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn roundtrip((key, value, ets, offset, ats) in arb_record()) {
            let rin = RecordIn { key: key.as_deref(), value: &value, event_ts: ets };
            let mut buf = Vec::new();
            encode(&rin, offset, ats, &mut buf);
            prop_assert_eq!(buf.len(), rin.encoded_len());
            let want = Record { offset, key: key.clone(), value: value.clone(), event_ts: ets, append_ts: ats };
            prop_assert_eq!(decode(&buf), Decoded::Record(want.clone(), buf.len()));
            let Decoded::Record(frame, _) = decode_frame(&buf) else { panic!("a frame") };
            prop_assert_eq!(frame.crc, Some(want.fingerprint()));
            // Every strict prefix is incomplete, never an error or a panic.
            for cut in 0..buf.len() {
                prop_assert_eq!(decode(&buf[..cut]), Decoded::Incomplete);
            }
        }

        /// A record copied into the buffers of another is the record.
        #[test]
        fn copy_into_reuses_buffers_and_copies_exactly(
            (key, value, ets, offset, ats) in arb_record(),
            (key2, value2, ets2, offset2, ats2) in arb_record(),
        ) {
            let mut held = Record { offset, key, value, event_ts: ets, append_ts: ats };
            let new = Record { offset: offset2, key: key2, value: value2, event_ts: ets2, append_ts: ats2 };
            new.view().copy_into(&mut held);
            prop_assert_eq!(&held, &new);
            prop_assert_eq!(new.view().to_record(), new);
        }

        #[test]
        fn never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode(&bytes);
            let _ = valid_frame_after(&bytes, 0);
        }

        #[test]
        fn bit_flips_are_detected((key, value, ets, offset, ats) in arb_record(), bit in any::<usize>()) {
            let rin = RecordIn { key: key.as_deref(), value: &value, event_ts: ets };
            let mut buf = Vec::new();
            encode(&rin, offset, ats, &mut buf);
            let bit = bit % (buf.len() * 8);
            buf[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(!matches!(decode(&buf), Decoded::Record(..)));
        }
    }
}
