//! Entry points for fuzzing the log's decoders on untrusted bytes: record
//! frames and batches, a partition's segment and index files, and row values. Used by the `cargo
//! fuzz` targets in `fuzz/` (built with `--cfg fuzzing`) and by the property
//! tests beside the decoders, so both exercise the same code.
//!
//! Each entry point panics only when the decoder breaks its contract: a
//! record returned whose bytes do not re-encode to the frame it was read
//! from (so its checksum did not really hold), offsets that go back, or a
//! row's elements that do not read back from their own encoding.

use super::batch::{self, BatchEncoder};
use super::record::{Decoded, RecordIn, decode, encode};
use super::{Log, Start, TopicConfig};

/// Reads `bytes` as a record value of each row format, with as many
/// columns as a binary value claims (else three), typed as several column
/// types: rows or errors, never a panic. Elements read from a binary value
/// must read back, the same, from what they encode to.
pub fn decode_row_value(bytes: &[u8]) {
    use super::rows::{RowFormat, binary, decode_fields, decode_row};
    use crate::schema::ColumnType;
    let columns = match binary::decode(bytes) {
        Ok(elements) => {
            let mut again = Vec::new();
            binary::encode(elements.len(), elements.iter().copied(), &mut again);
            let reread = binary::decode(&again);
            assert_eq!(
                reread.as_deref(),
                Ok(&elements[..]),
                "elements not their encoding"
            );
            elements.len()
        }
        Err(_) => 3,
    };
    for format in [RowFormat::Csv, RowFormat::Jsonl] {
        let _ = decode_fields(bytes, format, columns);
        for ty in [
            ColumnType::Any,
            ColumnType::Int,
            ColumnType::Str,
            ColumnType::Timestamp,
        ] {
            let _ = decode_row(bytes, format, &vec![ty; columns]);
        }
    }
}

/// Decodes frames back to back from `bytes`, as a reader scans a segment,
/// as version-1 frames and as record batches.
pub fn decode_frames(bytes: &[u8]) {
    decode_single_frames(bytes);
    decode_batches(bytes);
}

/// Every record decoded from a version-1 frame must be exactly that frame.
fn decode_single_frames(bytes: &[u8]) {
    let mut at = 0;
    while at < bytes.len() {
        match decode(&bytes[at..]) {
            Decoded::Record(r, len) => {
                let rin = RecordIn {
                    key: r.key.as_deref(),
                    value: &r.value,
                    event_ts: r.event_ts,
                };
                let mut again = Vec::new();
                encode(&rin, r.offset, r.append_ts, &mut again);
                assert_eq!(again, &bytes[at..at + len], "a record not its frame");
                at += len;
            }
            Decoded::Incomplete | Decoded::Bad(_) => return,
        }
    }
}

/// Every batch decoded must lend all its records, which written again as a
/// batch read back the same.
fn decode_batches(bytes: &[u8]) {
    let mut at = 0;
    while let Decoded::Record(batch, len) = batch::decode(&bytes[at..]) {
        let frame = &bytes[at..at + len];
        let records = batch_records(frame, &batch);
        assert_eq!(
            records.len(),
            batch.count as usize,
            "a checked batch's records do not read"
        );
        let mut again = Vec::new();
        let mut enc = BatchEncoder::begin(&mut again, records[0].offset, records[0].append_ts);
        for r in &records {
            enc.push(&mut again, &r.as_in(), r.offset, r.append_ts);
        }
        enc.finish(&mut again);
        let Decoded::Record(reread, _) = batch::decode(&again) else {
            panic!("a batch written again does not decode");
        };
        assert_eq!(
            batch_records(&again, &reread),
            records,
            "a batch's records not themselves"
        );
        at += len;
    }
}

fn batch_records(frame: &[u8], batch: &batch::Batch) -> Vec<super::Record> {
    let mut at = batch.first;
    let mut out = Vec::new();
    for _ in 0..batch.count {
        let Some((rec, next)) = batch::record(frame, at, batch) else {
            break;
        };
        out.push(rec.record(frame).to_record());
        at = next;
    }
    out
}

/// Makes `segment` and `index` the files of a one-partition topic's first
/// segment, then opens the log, reads the partition from the start and
/// opens a writer (which recovers a torn tail). Errors are fine; a panic,
/// or offsets that do not increase, are not.
pub fn read_partition(segment: &[u8], index: &[u8]) {
    let dir = scratch_dir();
    let log = Log::open(&dir).expect("log dir");
    log.create_topic("t", TopicConfig::default())
        .expect("topic");
    let part = dir.join("t").join("partition-0");
    std::fs::write(part.join("00000000000000000000.log"), segment).expect("write segment");
    std::fs::write(part.join("00000000000000000000.index"), index).expect("write index");
    read_log(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

fn read_log(dir: &std::path::Path) {
    let Ok(log) = Log::open(dir) else {
        return;
    };
    if let Ok(mut reader) = log.reader("t", 0, Start::Earliest) {
        let mut last = None;
        while let Ok(batch) = reader.next_batch(64) {
            if batch.is_empty() {
                break;
            }
            for r in batch {
                assert!(last < Some(r.offset), "offset {} after {last:?}", r.offset);
                last = Some(r.offset);
            }
        }
    }
    let _ = log.topic("t");
    let _ = log.writer("t");
}

/// Applies `(position, byte, kind)` edits to `bytes`: kind 0 overwrites the
/// byte at `position % (len + 1)`, 1 inserts `byte` there, 2 removes it —
/// how the property tests turn a valid file into a damaged one.
pub fn edit(bytes: &mut Vec<u8>, edits: &[(usize, u8, u8)]) {
    for &(at, byte, kind) in edits {
        let i = at % (bytes.len() + 1);
        match kind % 3 {
            0 if i < bytes.len() => bytes[i] = byte,
            1 => bytes.insert(i, byte),
            _ if i < bytes.len() => {
                bytes.remove(i);
            }
            _ => {}
        }
    }
}

/// A new empty directory under the system's temp dir (no dev-dependency:
/// the fuzz targets build this module outside tests).
pub(crate) fn scratch_dir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("kappa-fuzz-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The segment and index files of a topic holding `n` small records.
    fn valid_files(n: usize) -> (Vec<u8>, Vec<u8>) {
        let dir = scratch_dir();
        let log = Log::open(&dir).unwrap();
        log.create_topic("t", TopicConfig::default()).unwrap();
        let mut w = log.writer("t").unwrap();
        let values: Vec<Vec<u8>> = (0..n).map(|i| format!("[\"{i}\"]").into_bytes()).collect();
        let recs: Vec<RecordIn<'_>> = values
            .iter()
            .map(|v| RecordIn {
                key: Some(&v[..]),
                value: v,
                event_ts: Some(7),
            })
            .collect();
        w.append(&recs).unwrap();
        drop(w);
        let part = dir.join("t").join("partition-0");
        let files = (
            std::fs::read(part.join("00000000000000000000.log")).unwrap(),
            std::fs::read(part.join("00000000000000000000.index")).unwrap(),
        );
        let _ = std::fs::remove_dir_all(&dir);
        files
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn random_frames(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            decode_frames(&bytes);
        }

        #[test]
        fn random_partition_files(
            segment in proptest::collection::vec(any::<u8>(), 0..400),
            index in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            read_partition(&segment, &index);
        }

        #[test]
        fn mutated_partition_files(
            n in 1usize..300,
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), any::<bool>()), 1..6),
        ) {
            let (mut segment, mut index) = valid_files(n);
            for (at, byte, in_index) in edits {
                let file = if in_index && !index.is_empty() { &mut index } else { &mut segment };
                let i = at.index(file.len());
                file[i] = byte;
            }
            decode_frames(&segment);
            read_partition(&segment, &index);
        }
    }
}
