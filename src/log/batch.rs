//! Record batches: the frames of a version-2 segment, each holding one or
//! more records under one header and one checksum.
//!
//! Batch layout (fixed integers little endian):
//!
//! | field         | size   | notes                                                  |
//! |---------------|--------|--------------------------------------------------------|
//! | `length`      | u32    | bytes after this field (crc .. end of the last record) |
//! | `crc32c`      | u32    | CRC-32C (Castagnoli) over every byte after it          |
//! | `base_offset` | u64    | the first record's offset                              |
//! | `last_delta`  | u32    | the last record's offset minus `base_offset`           |
//! | `base_ts`     | i64    | the first record's append time                         |
//! | `count`       | u32    | records in the batch, at least one                     |
//!
//! then `count` records, each:
//!
//! | field          | size          | notes                                              |
//! |----------------|---------------|----------------------------------------------------|
//! | `flags`        | u8            | bit 0: has key, bit 1: has event ts; others zero   |
//! | `offset_delta` | varint        | offset minus `base_offset`: 0 first, then rising   |
//! | `ts_delta`     | zigzag varint | append time minus `base_ts` (wrapping)             |
//! | `event_ts`     | zigzag varint | present only when flag bit 1 is set                |
//! | `key`          | varint + bytes| length and bytes, present only when flag bit 0 is set |
//! | `value`        | varint + bytes| length and bytes; empty is a tombstone             |
//!
//! A version-1 frame (`record.rs`) spends 33 bytes and a checksum on every
//! record; a batch spends 4–6 bytes a record and one checksum on up to
//! [`TARGET_BYTES`] of them: a topic less than half the size, read and
//! written with less work a record.
//!
//! Invariants: decoding never panics and never reads out of bounds, whatever
//! the bytes; a batch decodes only if its CRC matches and its records, walked
//! to the end, add up exactly to `length`, number `count`, have strictly
//! rising offsets starting at `base_offset` and ending at `base_offset +
//! last_delta`. A batch that decoded lends its records without failing.

use super::record::{
    Decoded, FLAG_EVENT_TS, FLAG_KEY, Frame, LEN_PREFIX, RecordIn, valid_after, whole,
};
use super::varint;

/// Bytes of a batch's header, length prefix included.
pub const HEADER: usize = LEN_PREFIX + 4 + 8 + 4 + 8 + 4;
/// The smallest record: flags, offset delta, time delta, value length.
const MIN_RECORD: usize = 4;
/// Smallest possible `length`: the header after the prefix and one record.
pub const MIN_BODY: usize = HEADER - LEN_PREFIX + MIN_RECORD;
/// A writer starts a new batch rather than take one past this many bytes
/// of records: large enough that the header and checksum cost nothing a
/// record, small enough that a reader's buffer holds several.
pub const TARGET_BYTES: usize = 32 << 10;

/// The most bytes `rec` takes inside a batch.
pub fn record_len_bound(rec: &RecordIn<'_>) -> usize {
    const VARINT: usize = 10;
    1 + 2 * VARINT
        + rec.event_ts.map_or(0, |_| VARINT)
        + rec.key.map_or(0, |k| VARINT + k.len())
        + VARINT
        + rec.value.len()
}

/// Writes one batch: [`BatchEncoder::begin`] it in a buffer, push records in
/// rising offset order, [`BatchEncoder::finish`] it.
#[derive(Debug)]
pub struct BatchEncoder {
    start: usize,
    base_offset: u64,
    base_ts: i64,
    last_offset: u64,
    count: u32,
}

impl BatchEncoder {
    /// Starts a batch at the end of `out` whose first record will have
    /// offset `base_offset` and append time `base_ts`.
    pub fn begin(out: &mut Vec<u8>, base_offset: u64, base_ts: i64) -> Self {
        let start = out.len();
        out.resize(start + HEADER, 0);
        BatchEncoder {
            start,
            base_offset,
            base_ts,
            last_offset: base_offset,
            count: 0,
        }
    }

    /// Appends `rec` at `offset`, appended at `append_ts`. Offsets must rise
    /// and stay within `u32::MAX` of the first (a segment's offsets do).
    pub fn push(&mut self, out: &mut Vec<u8>, rec: &RecordIn<'_>, offset: u64, append_ts: i64) {
        debug_assert!(
            (self.count == 0 && offset == self.base_offset) || offset > self.last_offset,
            "offsets rise within a batch"
        );
        debug_assert!(offset - self.base_offset <= u64::from(u32::MAX));
        let flags = rec.key.map_or(0, |_| FLAG_KEY) | rec.event_ts.map_or(0, |_| FLAG_EVENT_TS);
        out.push(flags);
        varint::put(offset - self.base_offset, out);
        varint::put_signed(append_ts.wrapping_sub(self.base_ts), out);
        if let Some(ts) = rec.event_ts {
            varint::put_signed(ts, out);
        }
        if let Some(key) = rec.key {
            varint::put(key.len() as u64, out);
            out.extend_from_slice(key);
        }
        varint::put(rec.value.len() as u64, out);
        out.extend_from_slice(rec.value);
        self.last_offset = offset;
        self.count += 1;
    }

    /// Bytes of the batch so far, header included.
    pub fn len(&self, out: &[u8]) -> usize {
        out.len() - self.start
    }

    /// Completes the batch's header and checksum; a batch without records
    /// is taken back out of `out`.
    pub fn finish(self, out: &mut Vec<u8>) {
        if self.count == 0 {
            out.truncate(self.start);
            return;
        }
        let body_len = (out.len() - self.start - LEN_PREFIX) as u32;
        let head = &mut out[self.start..self.start + HEADER];
        head[..4].copy_from_slice(&body_len.to_le_bytes());
        head[8..16].copy_from_slice(&self.base_offset.to_le_bytes());
        let last_delta = (self.last_offset - self.base_offset) as u32;
        head[16..20].copy_from_slice(&last_delta.to_le_bytes());
        head[20..28].copy_from_slice(&self.base_ts.to_le_bytes());
        head[28..32].copy_from_slice(&self.count.to_le_bytes());
        let crc = crc32c::crc32c(&out[self.start + 8..]);
        out[self.start + 4..self.start + 8].copy_from_slice(&crc.to_le_bytes());
    }
}

/// A valid batch's header, with where its records start in the buffer it
/// was decoded from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch {
    /// The first record's offset.
    pub base_offset: u64,
    /// The last record's offset.
    pub last_offset: u64,
    /// The first record's append time.
    base_ts: i64,
    /// Records in the batch.
    pub count: u32,
    /// Position of the first record in the buffer decoded from.
    pub first: usize,
    /// The batch's length, prefix included.
    pub len: usize,
}

impl Batch {
    /// The same batch, found `by` bytes further into a buffer.
    pub fn shifted(mut self, by: usize) -> Batch {
        self.first += by;
        self
    }
}

/// Decodes and checks the batch starting at `buf[0]`.
pub fn decode(buf: &[u8]) -> Decoded<Batch> {
    let frame = match whole(buf, MIN_BODY) {
        Ok(frame) => frame,
        Err(outcome) => return outcome,
    };
    match check(frame) {
        Ok(batch) => Decoded::Record(batch, frame.len()),
        Err(detail) => Decoded::Bad(detail),
    }
}

/// Checks a whole batch frame: its checksum, then every record in it.
fn check(frame: &[u8]) -> Result<Batch, String> {
    let u32_at = |at: usize| u32::from_le_bytes(frame[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(frame[at..at + 8].try_into().expect("8 bytes"));
    let stored = u32_at(4);
    let actual = crc32c::crc32c(&frame[8..]);
    if stored != actual {
        return Err(format!(
            "crc mismatch: stored {stored:#010x}, computed {actual:#010x}"
        ));
    }
    let base_offset = u64_at(8);
    let last_delta = u64::from(u32_at(16));
    let batch = Batch {
        base_offset,
        last_offset: base_offset
            .checked_add(last_delta)
            .ok_or("the last offset overflows")?,
        base_ts: u64_at(20) as i64,
        count: u32_at(28),
        first: HEADER,
        len: frame.len(),
    };
    if batch.count == 0 {
        return Err("a batch of no records".into());
    }
    let (mut at, mut prev) = (HEADER, None);
    for i in 0..batch.count {
        let (delta, next) =
            skip(frame, at).ok_or_else(|| format!("record {i} of the batch does not read"))?;
        let in_order = match prev {
            None => delta == 0,
            Some(p) => delta > p,
        };
        if !in_order {
            return Err(format!(
                "record {i} of the batch is out of order (offset delta {delta} after {prev:?})"
            ));
        }
        (at, prev) = (next, Some(delta));
    }
    if prev != Some(last_delta) {
        return Err(format!(
            "the batch says its last offset delta is {last_delta}, its records end at {prev:?}"
        ));
    }
    if at != frame.len() {
        return Err(format!("{} trailing bytes inside batch", frame.len() - at));
    }
    Ok(batch)
}

/// The offset delta of the record at `buf[at..]` and where the next one
/// starts: the walk that checks a batch, reading no more than it must.
#[inline]
fn skip(buf: &[u8], mut at: usize) -> Option<(u64, usize)> {
    let flags = *buf.get(at)?;
    at += 1;
    if flags & !(FLAG_KEY | FLAG_EVENT_TS) != 0 {
        return None;
    }
    let delta = varint::get(buf, &mut at).ok()?;
    varint::get(buf, &mut at).ok()?;
    if flags & FLAG_EVENT_TS != 0 {
        varint::get(buf, &mut at).ok()?;
    }
    if flags & FLAG_KEY != 0 {
        range(buf, &mut at)?;
    }
    range(buf, &mut at)?;
    Some((delta, at))
}

/// The record at `buf[at..]` inside `batch` (decoded from `buf`), as a
/// frame whose ranges index `buf`, and where the next record starts. The
/// batch was checked, so this reads it without judging it again; on bytes
/// that are not a checked batch it may give `None` or any record, never a
/// panic.
#[inline]
pub fn record(buf: &[u8], mut at: usize, batch: &Batch) -> Option<(Frame, usize)> {
    let buf = buf.get(..batch.first - HEADER + batch.len)?;
    let flags = *buf.get(at)?;
    at += 1;
    // A checked batch's deltas are below its last one, whose sum with the
    // base did not overflow: the additions are exact.
    let offset = batch
        .base_offset
        .wrapping_add(varint::get(buf, &mut at).ok()?);
    let append_ts = batch
        .base_ts
        .wrapping_add(varint::get_signed(buf, &mut at).ok()?);
    let event_ts = match flags & FLAG_EVENT_TS != 0 {
        true => Some(varint::get_signed(buf, &mut at).ok()?),
        false => None,
    };
    let key = match flags & FLAG_KEY != 0 {
        true => Some(range(buf, &mut at)?),
        false => None,
    };
    let value = range(buf, &mut at)?;
    let frame = Frame {
        offset,
        append_ts,
        event_ts,
        crc: None,
        key,
        value,
    };
    Some((frame, at))
}

/// The range of a length-prefixed byte string at `buf[*at..]`; moves `at`
/// past it.
#[inline]
fn range(buf: &[u8], at: &mut usize) -> Option<(usize, usize)> {
    let len = varint::get(buf, at).ok()?;
    let start = *at;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    if end > buf.len() {
        return None;
    }
    *at = end;
    Some((start, end))
}

/// Whether any valid batch starts at or after `buf[1]` with a first offset
/// of at least `min_offset`: tells a torn tail (nothing valid follows the
/// bad bytes) from damage in the middle (valid batches follow).
pub fn valid_batch_after(buf: &[u8], min_offset: u64) -> Option<usize> {
    valid_after(buf, min_offset, MIN_BODY, |rest| {
        matches!(decode(rest), Decoded::Record(..))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::record::Record;
    use proptest::prelude::*;

    type Owned = (Option<Vec<u8>>, Vec<u8>, Option<i64>);

    fn arb_records() -> impl Strategy<Value = (Vec<(Owned, u64, i64)>, u64)> {
        let rec = (
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
            proptest::collection::vec(any::<u8>(), 0..60),
            proptest::option::of(any::<i64>()),
        );
        (
            proptest::collection::vec((rec, 1..1000u64, any::<i64>()), 1..40),
            0..u64::MAX / 2,
        )
    }

    /// The records as appended: offsets from `base` by the gaps given.
    fn lay_out(recs: &[(Owned, u64, i64)], base: u64) -> Vec<Record> {
        let mut offset = base;
        recs.iter()
            .enumerate()
            .map(|(i, ((key, value, event_ts), gap, append_ts))| {
                if i > 0 {
                    offset += gap;
                }
                Record {
                    offset,
                    key: key.clone(),
                    value: value.clone(),
                    event_ts: *event_ts,
                    append_ts: *append_ts,
                }
            })
            .collect()
    }

    fn encode_all(recs: &[Record]) -> Vec<u8> {
        let mut out = vec![0xee; 3]; // a batch need not start a buffer
        let mut b = BatchEncoder::begin(&mut out, recs[0].offset, recs[0].append_ts);
        for r in recs {
            b.push(&mut out, &r.as_in(), r.offset, r.append_ts);
        }
        b.finish(&mut out);
        out.drain(..3);
        out
    }

    fn read_all(buf: &[u8]) -> Result<Vec<Record>, String> {
        let batch = match decode(buf) {
            Decoded::Record(batch, _) => batch,
            other => return Err(format!("{other:?}")),
        };
        let mut at = batch.first;
        let mut out = Vec::new();
        for i in 0..batch.count {
            let (frame, next) = record(buf, at, &batch).ok_or(format!("record {i}"))?;
            out.push(frame.record(buf).to_record());
            at = next;
        }
        Ok(out)
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn records_read_back_from_their_batch((recs, base) in arb_records()) {
            let recs = lay_out(&recs, base);
            let buf = encode_all(&recs);
            prop_assert_eq!(read_all(&buf), Ok(recs.clone()));
            let Decoded::Record(batch, len) = decode(&buf) else { panic!("a batch") };
            prop_assert_eq!((batch.base_offset, batch.last_offset), (recs[0].offset, recs[recs.len() - 1].offset));
            prop_assert_eq!(len, buf.len());
            prop_assert!(buf.len() <= HEADER + recs.iter().map(|r| record_len_bound(&r.as_in())).sum::<usize>());
            // Every strict prefix is incomplete, never an error or a panic.
            for cut in 0..buf.len() {
                prop_assert_eq!(decode(&buf[..cut]), Decoded::Incomplete);
            }
        }

        #[test]
        fn bit_flips_are_detected((recs, base) in arb_records(), bit in any::<usize>()) {
            let mut buf = encode_all(&lay_out(&recs, base));
            let bit = bit % (buf.len() * 8);
            buf[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(!matches!(decode(&buf), Decoded::Record(..)));
        }

        #[test]
        fn never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode(&bytes);
            let _ = valid_batch_after(&bytes, 0);
        }

        /// A batch whose checksum holds but whose records do not add up (a
        /// writer's bug, or bytes forged) is rejected as a whole.
        #[test]
        fn inconsistent_records_under_a_good_checksum_are_rejected(
            (recs, base) in arb_records(),
            field in 0..3usize,
            delta in 1..5u32,
        ) {
            let mut buf = encode_all(&lay_out(&recs, base));
            let bump = |buf: &mut Vec<u8>, at: usize| {
                let n = u32::from_le_bytes(buf[at..at + 4].try_into().unwrap()).wrapping_add(delta);
                buf[at..at + 4].copy_from_slice(&n.to_le_bytes());
            };
            match field {
                0 => bump(&mut buf, 16),
                1 => bump(&mut buf, 28),
                _ => {
                    buf.extend(std::iter::repeat_n(0, delta as usize));
                    let len = (buf.len() - LEN_PREFIX) as u32;
                    buf[..4].copy_from_slice(&len.to_le_bytes());
                }
            }
            let crc = crc32c::crc32c(&buf[8..]);
            buf[4..8].copy_from_slice(&crc.to_le_bytes());
            prop_assert!(matches!(decode(&buf), Decoded::Bad(_)), "{:?}", decode(&buf));
        }
    }

    #[test]
    fn an_empty_batch_leaves_nothing() {
        let mut out = vec![1, 2, 3];
        BatchEncoder::begin(&mut out, 7, 0).finish(&mut out);
        assert_eq!(out, [1, 2, 3]);
    }

    #[test]
    fn a_record_takes_a_few_bytes_beside_its_key_and_value() {
        let recs: Vec<Record> = (0..100)
            .map(|i| Record {
                offset: 1_000_000 + i,
                key: Some(b"k".to_vec()),
                value: vec![0; 10],
                event_ts: None,
                append_ts: 1_700_000_000_000,
            })
            .collect();
        let per_record = (encode_all(&recs).len() - HEADER) / 100;
        assert_eq!(per_record, 1 + 1 + 1 + 1 + 1 + 1 + 10);
    }
}
