//! Scenario tests of the segment formats: records appended together share
//! batches and read from any offset, however a reader stops inside one; a
//! torn batch is cut whole; topics written before batches (version-1
//! segments) are read, appended to, compacted and rolled into batches.

use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::Ordering;

use super::record::encode;
use super::segment::{VERSION, VERSION_SINGLE, encode_header, list_segments, log_path};
use super::tests::{Fixture, fixture, read_all, tiny};
use super::*;

/// Record `i` of these tests: a key on every third, an event time on every
/// other, values of varying length.
fn record_values(i: u64) -> (Option<Vec<u8>>, Vec<u8>, Option<i64>) {
    let key = i
        .is_multiple_of(3)
        .then(|| format!("k{}", i % 7).into_bytes());
    let value = format!("value-{i}-{}", "x".repeat((i % 11) as usize)).into_bytes();
    let event_ts = i.is_multiple_of(2).then_some(i as i64 * 1000 - 5_000);
    (key, value, event_ts)
}

fn append_together(w: &mut TopicWriter, range: std::ops::Range<u64>) {
    let owned: Vec<_> = range.map(record_values).collect();
    let recs: Vec<RecordIn<'_>> = owned
        .iter()
        .map(|(k, v, ts)| RecordIn {
            key: k.as_deref(),
            value: v,
            event_ts: *ts,
        })
        .collect();
    w.append_batch(0, &recs).unwrap();
}

fn segment_version(path: &Path) -> u16 {
    let bytes = std::fs::read(path).unwrap();
    u16::from_le_bytes([bytes[4], bytes[5]])
}

/// Reads from `start` in calls of varying `max` and `until`, checking each
/// call's records and the reader's `last_lent` against `all`.
fn read_in_pieces(log: &Log, start: u64, all: &[Record]) {
    let end = all.last().map_or(0, |r| r.offset + 1);
    let mut reader = log.reader("t", 0, Start::Offset(start)).unwrap();
    let mut next = start;
    for call in 0.. {
        let max = [1, 5, 64, 1000, 3][call % 5];
        let until = (call % 4 == 1).then_some(next + 9);
        let mut got = Vec::new();
        reader
            .visit(max, until, &mut |rec| {
                got.push(rec.to_record());
                ControlFlow::Continue(())
            })
            .unwrap();
        let want: Vec<Record> = all[next as usize..]
            .iter()
            .take(max)
            .take_while(|r| until.is_none_or(|u| r.offset < u))
            .cloned()
            .collect();
        assert_eq!(got, want, "from {start}, call {call}");
        if let Some(last) = got.last() {
            let lent = reader.last_lent().unwrap();
            assert_eq!(
                (lent.offset, lent.fingerprint, lent.append_ts, lent.event_ts),
                (
                    last.offset,
                    last.fingerprint(),
                    last.append_ts,
                    last.event_ts
                )
            );
            next = last.offset + 1;
        }
        if next == end && until.is_none() {
            break;
        }
    }
}

#[test]
fn records_appended_together_share_batches_and_read_from_any_offset() {
    let f = fixture();
    f.log.create_topic("t", tiny(60_000)).unwrap();
    let mut w = f.log.writer("t").unwrap();
    append_together(&mut w, 0..3000);
    f.now.fetch_add(5, Ordering::SeqCst);
    append_together(&mut w, 3000..3100);
    drop(w);
    let dir = f.pdir("t", 0);
    let bases = list_segments(&dir).unwrap();
    assert!(bases.len() >= 2, "the append rolled segments: {bases:?}");
    let bytes: u64 = bases
        .iter()
        .map(|&b| std::fs::metadata(log_path(&dir, b)).unwrap().len())
        .sum();
    assert!(
        bytes < 3100 * 40,
        "a few bytes a record beside its value: {bytes}"
    );
    let all = read_all(&f.log, "t", 0, Start::Earliest).unwrap();
    assert_eq!(all.len(), 3100);
    for (i, r) in all.iter().enumerate() {
        let (key, value, event_ts) = record_values(i as u64);
        assert_eq!(
            (r.offset, &r.key, &r.value, r.event_ts),
            (i as u64, &key, &value, event_ts)
        );
        assert_eq!(r.append_ts, 1_000_000 + if i < 3000 { 0 } else { 5 });
    }
    for start in [0, 1, 2, 63, 64, 1499, 2999, 3000, 3099] {
        read_in_pieces(&f.log, start, &all);
    }
}

#[test]
fn a_torn_batch_is_cut_whole() {
    let probe = fixture();
    probe.log.create_topic("t", tiny(1 << 20)).unwrap();
    let mut w = probe.log.writer("t").unwrap();
    append_together(&mut w, 0..5);
    drop(w);
    let seg = log_path(&probe.pdir("t", 0), 0);
    let start = std::fs::metadata(&seg).unwrap().len();
    for cut in (start..start + 400).step_by(37).chain([start + 1]) {
        let mut f = fixture();
        f.log.create_topic("t", tiny(1 << 20)).unwrap();
        let mut w = f.log.writer("t").unwrap();
        append_together(&mut w, 0..5);
        append_together(&mut w, 5..60);
        drop(w);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(seg_of(&f))
            .unwrap();
        file.set_len(cut).unwrap();
        assert_eq!(read_all(&f.log, "t", 0, Start::Earliest).unwrap().len(), 5);
        f.reopen();
        let mut w = f.log.writer("t").unwrap();
        let rec = &w.open_report().recoveries;
        assert_eq!(rec.len(), usize::from(cut > start), "cut at {cut}");
        if cut > start {
            assert_eq!((rec[0].truncated_bytes, rec[0].at_offset), (cut - start, 5));
        }
        append_together(&mut w, 5..7);
        let got = read_all(&f.log, "t", 0, Start::Earliest).unwrap();
        assert_eq!(
            got.iter().map(|r| r.offset).collect::<Vec<_>>(),
            (0..7).collect::<Vec<_>>()
        );
    }
}

fn seg_of(f: &Fixture) -> std::path::PathBuf {
    log_path(&f.pdir("t", 0), 0)
}

/// Replaces the topic's only segment with a version-1 segment holding
/// records `range`, one frame each, as a build before batches wrote them.
fn write_version_1_segment(f: &Fixture, range: std::ops::Range<u64>) -> Vec<Record> {
    let dir = f.pdir("t", 0);
    let records: Vec<Record> = range
        .map(|i| {
            let (key, value, event_ts) = record_values(i);
            Record {
                offset: i,
                key,
                value,
                event_ts,
                append_ts: 500_000 + i as i64,
            }
        })
        .collect();
    let mut bytes = encode_header(0, VERSION_SINGLE).to_vec();
    for r in &records {
        encode(&r.as_in(), r.offset, r.append_ts, &mut bytes);
    }
    std::fs::write(log_path(&dir, 0), bytes).unwrap();
    std::fs::remove_file(super::segment::index_path(&dir, 0)).unwrap();
    records
}

#[test]
fn version_1_segments_are_read_appended_to_and_rolled_into_batches() {
    let mut f = fixture();
    f.log.create_topic("t", tiny(8_000)).unwrap();
    let mut all = write_version_1_segment(&f, 0..100);
    f.reopen();
    assert_eq!(read_all(&f.log, "t", 0, Start::Earliest).unwrap(), all);
    read_in_pieces(&f.log, 0, &all);
    read_in_pieces(&f.log, 57, &all);

    // The writer appends version-1 frames to the version-1 segment until
    // it rolls; every segment after it holds batches.
    let mut w = f.log.writer("t").unwrap();
    assert!(w.open_report().recoveries.is_empty());
    assert_eq!(w.next_offsets(), vec![100]);
    append_together(&mut w, 100..400);
    drop(w);
    let dir = f.pdir("t", 0);
    let bases = list_segments(&dir).unwrap();
    assert!(bases.len() >= 2 && bases[1] > 100, "{bases:?}");
    assert_eq!(segment_version(&log_path(&dir, 0)), VERSION_SINGLE);
    for &b in &bases[1..] {
        assert_eq!(segment_version(&log_path(&dir, b)), VERSION, "segment {b}");
    }
    all.extend(read_all(&f.log, "t", 0, Start::Offset(100)).unwrap());
    assert_eq!(all.len(), 400);
    for (i, r) in all.iter().enumerate().skip(100) {
        let (key, value, event_ts) = record_values(i as u64);
        assert_eq!(
            (r.offset, &r.key, &r.value, r.event_ts),
            (i as u64, &key, &value, event_ts)
        );
    }
    for start in [0, 99, 100, 101, 250, 399] {
        read_in_pieces(&f.log, start, &all);
    }
    f.reopen();
    let w = f.log.writer("t").unwrap();
    assert!(w.open_report().recoveries.is_empty());
    assert_eq!(w.next_offsets(), vec![400]);
}

#[test]
fn a_version_1_segment_torn_at_its_end_is_recovered() {
    let mut f = fixture();
    f.log.create_topic("t", tiny(1 << 20)).unwrap();
    write_version_1_segment(&f, 0..10);
    let seg = seg_of(&f);
    let len = std::fs::metadata(&seg).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    file.set_len(len - 3).unwrap();
    f.reopen();
    assert_eq!(read_all(&f.log, "t", 0, Start::Earliest).unwrap().len(), 9);
    let mut w = f.log.writer("t").unwrap();
    assert_eq!(w.open_report().recoveries[0].at_offset, 9);
    append_together(&mut w, 9..12);
    let got = read_all(&f.log, "t", 0, Start::Earliest).unwrap();
    assert_eq!(
        got.iter().map(|r| r.offset).collect::<Vec<_>>(),
        (0..12).collect::<Vec<_>>()
    );
    assert_eq!(segment_version(&seg), VERSION_SINGLE);
}

#[test]
fn compaction_rewrites_version_1_segments_as_batches() {
    let mut f = fixture();
    let cfg = TopicConfig {
        compact: true,
        ..tiny(4_000)
    };
    f.log.create_topic("t", cfg).unwrap();
    let old = write_version_1_segment(&f, 0..100);
    f.reopen();
    let mut w = f.log.writer("t").unwrap();
    append_together(&mut w, 100..101); // rolls: the version-1 segment is full
    drop(w);
    let appended = read_all(&f.log, "t", 0, Start::Offset(100))
        .unwrap()
        .remove(0);
    let reports = f.log.compact("t", 0).unwrap();
    assert!(reports[0].records_removed > 0, "{reports:?}");
    let dir = f.pdir("t", 0);
    assert_eq!(segment_version(&log_path(&dir, 0)), VERSION);
    let got = read_all(&f.log, "t", 0, Start::Earliest).unwrap();
    // Keyless records stay; of each key, only its latest record.
    let before: Vec<Record> = old.into_iter().chain([appended]).collect();
    let want: Vec<Record> = before
        .iter()
        .filter(|r| {
            r.key.is_none() || !before.iter().any(|l| l.offset > r.offset && l.key == r.key)
        })
        .cloned()
        .collect();
    assert_eq!(got, want);
    f.reopen();
    assert_eq!(read_all(&f.log, "t", 0, Start::Earliest).unwrap(), got);
}
