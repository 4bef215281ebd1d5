//! Scenario tests of reading and recovery: routing, rolling, the sparse
//! index, torn tails, corruption, garbage files and bad headers.
//! Shared fixtures for the other test files live here too.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use super::segment::{HEADER_LEN, list_segments, log_path};
use super::topic::partition_dir;
use super::*;

pub(super) struct Fixture {
    pub _dir: tempfile::TempDir,
    pub log: Log,
    pub now: Arc<AtomicI64>,
}

pub(super) fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicI64::new(1_000_000));
    let n = now.clone();
    let log = Log::open_with_clock(
        dir.path().join("log"),
        Arc::new(move || n.load(Ordering::SeqCst)),
    )
    .unwrap();
    Fixture {
        _dir: dir,
        log,
        now,
    }
}

impl Fixture {
    pub fn reopen(&mut self) {
        let n = self.now.clone();
        self.log =
            Log::open_with_clock(self.log.root(), Arc::new(move || n.load(Ordering::SeqCst)))
                .unwrap();
    }
    pub fn pdir(&self, topic: &str, p: u32) -> PathBuf {
        partition_dir(&self.log.root().join(topic), p)
    }
}

pub(super) fn read_all(log: &Log, topic: &str, p: u32, from: Start) -> Result<Vec<Record>> {
    let mut r = log.reader(topic, p, from)?;
    let mut out = Vec::new();
    loop {
        let batch = r.next_batch(7)?;
        if batch.is_empty() {
            return Ok(out);
        }
        out.extend(batch);
    }
}

pub(super) fn val(i: u64) -> Vec<u8> {
    format!("value-{i:05}").into_bytes()
}

pub(super) fn tiny(segment_bytes: u64) -> TopicConfig {
    TopicConfig {
        segment_bytes,
        ..Default::default()
    }
}

/// Appends `n` keyless records one batch each, returns the active segment path.
fn fill(f: &Fixture, topic: &str, cfg: TopicConfig, n: u64) -> PathBuf {
    f.log.create_topic(topic, cfg).unwrap();
    let mut w = f.log.writer(topic).unwrap();
    for i in 0..n {
        w.append_batch(0, &[RecordIn::new(None, &val(i))]).unwrap();
    }
    let last = *list_segments(&f.pdir(topic, 0)).unwrap().last().unwrap();
    log_path(&f.pdir(topic, 0), last)
}

/// The length of each frame of a segment that `fill` wrote `n` records of
/// the same size into, one an append.
fn frame_len(segment: &Path, n: u64) -> u64 {
    let body = std::fs::metadata(segment).unwrap().len() - HEADER_LEN;
    assert_eq!(body % n, 0, "frames of one size");
    body / n
}

#[test]
fn routing_reading_and_ranges() {
    let f = fixture();
    f.log
        .create_topic(
            "t",
            TopicConfig {
                partitions: 3,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(matches!(
        f.log.create_topic("t", TopicConfig::default()),
        Err(LogError::TopicExists { .. })
    ));
    assert!(matches!(
        f.log.create_topic("../x", TopicConfig::default()),
        Err(LogError::InvalidName { .. })
    ));
    let mut w = f.log.writer("t").unwrap();
    let keys: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i]).collect();
    let recs: Vec<RecordIn> = keys
        .iter()
        .map(|k| RecordIn::new(Some(k), b"v").with_event_ts(7))
        .collect();
    let placed = w.append(&recs).unwrap();
    for (k, (p, _)) in keys.iter().zip(&placed) {
        assert_eq!(
            *p,
            crc32c::crc32c(k) % 3,
            "routing is crc32c(key) % partitions"
        );
    }
    let rr = w
        .append(&[
            RecordIn::new(None, b"a"),
            RecordIn::new(None, b"b"),
            RecordIn::new(None, b"c"),
        ])
        .unwrap();
    let mut ps: Vec<u32> = rr.iter().map(|(p, _)| *p).collect();
    ps.sort();
    assert_eq!(ps, vec![0, 1, 2], "keyless records go round-robin");
    let info = f.log.topic("t").unwrap();
    for pi in &info.partitions {
        let got = read_all(&f.log, "t", pi.partition, Start::Earliest).unwrap();
        assert_eq!(got.len() as u64, pi.latest);
        assert!(got.windows(2).all(|w| w[0].offset + 1 == w[1].offset));
        assert!(got.iter().all(|r| r.append_ts == 1_000_000));
        let tail = read_all(&f.log, "t", pi.partition, Start::Offset(pi.latest - 1)).unwrap();
        assert_eq!(tail.len(), 1);
        assert!(
            read_all(&f.log, "t", pi.partition, Start::Latest)
                .unwrap()
                .is_empty()
        );
    }
    let err = f.log.reader("t", 0, Start::Offset(1000)).err().unwrap();
    assert!(matches!(
        err,
        LogError::OffsetOutOfRange {
            requested: 1000,
            ..
        }
    ));
    assert!(
        err.to_string().contains("earliest available offset is 0"),
        "{err}"
    );
    assert!(matches!(
        f.log.reader("t", 3, Start::Earliest),
        Err(LogError::PartitionOutOfRange { .. })
    ));
    assert!(matches!(
        f.log.writer("nope"),
        Err(LogError::TopicNotFound { .. })
    ));
    assert_eq!(f.log.list_topics().unwrap(), vec!["t".to_string()]);
}

#[test]
fn segments_roll_and_every_offset_is_reachable() {
    let mut f = fixture();
    fill(&f, "t", tiny(6000), 400);
    let dir = f.pdir("t", 0);
    assert!(list_segments(&dir).unwrap().len() > 2);
    assert!(
        !super::index::read_index(&super::segment::index_path(&dir, 0))
            .unwrap()
            .is_empty()
    );
    let check = |log: &Log| {
        for start in (0..400).step_by(13) {
            let got = read_all(log, "t", 0, Start::Offset(start)).unwrap();
            let offsets: Vec<u64> = got.iter().map(|r| r.offset).collect();
            assert_eq!(offsets, (start..400).collect::<Vec<_>>());
            assert_eq!(got[0].value, val(start));
        }
    };
    check(&f.log);
    // Remove or garble every index: reads still work, the writer rebuilds them.
    for (i, b) in list_segments(&dir).unwrap().into_iter().enumerate() {
        let ip = super::segment::index_path(&dir, b);
        if i % 2 == 0 {
            std::fs::remove_file(&ip).unwrap();
        } else {
            std::fs::write(&ip, [9u8; 21]).unwrap();
        }
    }
    check(&f.log);
    f.reopen();
    let w = f.log.writer("t").unwrap();
    assert!(w.open_report().recoveries.is_empty());
    assert_eq!(w.next_offsets(), vec![400]);
    for b in list_segments(&dir).unwrap() {
        let entries = super::index::read_index(&super::segment::index_path(&dir, b)).unwrap();
        let (_, rebuilt) = super::partition::full_scan(&log_path(&dir, b), b).unwrap();
        assert_eq!(entries, rebuilt, "index of segment {b} rebuilt on open");
        assert!(b > 0 || !entries.is_empty());
    }
    check(&f.log);
}

/// `visit` lends every record once, in order, across segments, stopping
/// before `until` (the record there is held for the next read, and the
/// reader is then not at its end) and right after a break.
#[test]
fn visit_lends_records_in_order_up_to_until_and_a_break() {
    let f = fixture();
    fill(&f, "t", tiny(6000), 400);
    let mut r = f.log.reader("t", 0, Start::Earliest).unwrap();
    let mut seen: Vec<Record> = Vec::new();
    let mut lend = |r: &mut PartitionReader, max: usize, until: Option<u64>, stop_at: u64| {
        r.visit(max, until, &mut |rec| {
            seen.push(rec.to_record());
            if rec.offset == stop_at {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        })
        .unwrap()
    };
    assert_eq!(lend(&mut r, 50, Some(30), u64::MAX), 30);
    assert!(r.holds_records(), "offset 30 is held for the next read");
    assert_eq!(r.position(), 30);
    assert_eq!(lend(&mut r, 50, Some(30), u64::MAX), 0);
    assert_eq!(
        lend(&mut r, 1000, Some(350), 99),
        70,
        "stops after the break"
    );
    assert_eq!(r.position(), 100);
    assert_eq!(lend(&mut r, 120, None, u64::MAX), 120);
    assert_eq!(lend(&mut r, 1000, None, u64::MAX), 180);
    assert!(!r.holds_records());
    assert_eq!(lend(&mut r, 1000, None, u64::MAX), 0);
    let offsets: Vec<u64> = seen.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (0..400).collect::<Vec<_>>());
    assert_eq!(seen, read_all(&f.log, "t", 0, Start::Earliest).unwrap());
    assert!(
        seen.iter()
            .enumerate()
            .all(|(i, r)| r.value == val(i as u64))
    );
}

/// `last_lent` is the last record a read lent, with its frame's CRC as the
/// fingerprint and its times, however it was read: from the buffer, after
/// a refill, held past an `until`, across segments, from an indexed offset.
#[test]
fn last_lent_is_the_last_record_lent_with_its_fingerprint() {
    let f = fixture();
    f.log.create_topic("t", tiny(6000)).unwrap();
    let mut w = f.log.writer("t").unwrap();
    for i in 0..400u64 {
        let value = val(i);
        let rec = RecordIn::new((i % 3 == 0).then_some(&b"k"[..]), &value);
        let rec = match i % 2 {
            0 => rec.with_event_ts(i as i64 * 10),
            _ => rec,
        };
        f.now.store(1_000_000 + i as i64, Ordering::SeqCst);
        w.append_batch(0, &[rec]).unwrap();
    }
    drop(w);
    let all = read_all(&f.log, "t", 0, Start::Earliest).unwrap();
    let of = |r: &Record| Lent {
        offset: r.offset,
        fingerprint: r.fingerprint(),
        append_ts: r.append_ts,
        event_ts: r.event_ts,
    };
    for start in [0, 1, 137, 399] {
        let mut reader = f.log.reader("t", 0, Start::Offset(start)).unwrap();
        assert_eq!(reader.last_lent(), None);
        let (mut next, mut expected) = (start, None);
        for call in 0..400 {
            let max = [1, 7, 50, 1000][call % 4];
            let until = (call % 3 == 1).then_some(next + 13);
            let mut offsets = Vec::new();
            reader
                .visit(max, until, &mut |rec| {
                    offsets.push(rec.offset);
                    std::ops::ControlFlow::Continue(())
                })
                .unwrap();
            assert_eq!(
                offsets,
                (next..next + offsets.len() as u64).collect::<Vec<_>>()
            );
            if let Some(&last) = offsets.last() {
                expected = Some(of(&all[last as usize]));
                next = last + 1;
            }
            assert_eq!(reader.last_lent(), expected, "from {start}, call {call}");
            if next == 400 && until.is_none() {
                break;
            }
        }
        assert_eq!(expected.map(|l| l.offset), Some(399));
    }
}

#[test]
fn big_segment_uses_sparse_index() {
    let f = fixture();
    fill(&f, "t", tiny(1 << 20), 3000);
    let dir = f.pdir("t", 0);
    let entries = super::index::read_index(&super::segment::index_path(&dir, 0)).unwrap();
    assert!(entries.len() > 10, "an entry every ~4 KiB");
    for start in [0, 1, 999, 1500, 2999, 3000] {
        let got = read_all(&f.log, "t", 0, Start::Offset(start)).unwrap();
        assert_eq!(
            got.first().map(|r| r.offset),
            (start < 3000).then_some(start)
        );
    }
}

#[test]
fn torn_tail_at_every_byte_of_last_record() {
    let probe = fixture();
    let seg = fill(&probe, "t", tiny(1 << 20), 3);
    let full = std::fs::metadata(&seg).unwrap().len();
    let start = full - frame_len(&seg, 3);
    for cut in start..full {
        let mut f = fixture();
        let seg = fill(&f, "t", tiny(1 << 20), 3);
        let file = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
        file.set_len(cut).unwrap();
        // Readers treat the torn tail as not yet visible.
        assert_eq!(read_all(&f.log, "t", 0, Start::Earliest).unwrap().len(), 2);
        f.reopen();
        let mut w = f.log.writer("t").unwrap();
        let rec = &w.open_report().recoveries;
        if cut == start {
            assert!(rec.is_empty());
        } else {
            assert_eq!(rec.len(), 1);
            assert_eq!((rec[0].truncated_bytes, rec[0].at_offset), (cut - start, 2));
            assert_eq!(rec[0].segment, seg);
        }
        assert_eq!(
            w.append(&[RecordIn::new(None, b"new")]).unwrap(),
            vec![(0, 2)]
        );
        let got = read_all(&f.log, "t", 0, Start::Earliest).unwrap();
        assert_eq!(
            got.iter().map(|r| r.value.clone()).collect::<Vec<_>>(),
            vec![val(0), val(1), b"new".to_vec()]
        );
    }
}

#[test]
fn zero_filled_tail_is_truncated() {
    let mut f = fixture();
    let seg = fill(&f, "t", tiny(1 << 20), 5);
    let len = std::fs::metadata(&seg).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    file.set_len(len + 300).unwrap();
    f.reopen();
    let w = f.log.writer("t").unwrap();
    assert_eq!(w.open_report().recoveries[0].truncated_bytes, 300);
    assert_eq!(w.next_offsets(), vec![5]);
}

fn flip_byte(path: &Path, pos: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[pos as usize] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn corruption_in_the_middle_is_an_error_and_never_served() {
    let mut f = fixture();
    let seg = fill(&f, "t", tiny(1 << 20), 10);
    let rec_len = frame_len(&seg, 10);
    flip_byte(&seg, HEADER_LEN + 4 * rec_len + 20); // inside record 4
    let mut r = f.log.reader("t", 0, Start::Earliest).unwrap();
    let got = r.next_batch(100).unwrap();
    assert_eq!(got.len(), 4);
    let err = r.next_batch(100).unwrap_err();
    match &err {
        LogError::Corruption {
            path,
            offset,
            position,
            ..
        } => {
            assert_eq!(
                (path, *offset, *position),
                (&seg, Some(4), Some(HEADER_LEN + 4 * rec_len))
            );
        }
        e => panic!("expected corruption, got {e}"),
    }
    assert!(err.is_corruption());
    assert!(r.next_batch(100).is_err(), "the error repeats");
    assert!(
        read_all(&f.log, "t", 0, Start::Offset(6)).is_err(),
        "later records are not served"
    );
    f.reopen();
    let err = f.log.writer("t").err().unwrap();
    assert!(
        matches!(
            err,
            LogError::Corruption {
                offset: Some(4),
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains(&seg.display().to_string()));
}

#[test]
fn corruption_in_a_sealed_segment() {
    let mut f = fixture();
    fill(&f, "t", tiny(200), 30);
    let dir = f.pdir("t", 0);
    let bases = list_segments(&dir).unwrap();
    let sealed = log_path(&dir, bases[1]);
    let len = std::fs::metadata(&sealed).unwrap().len();
    flip_byte(&sealed, len - 3); // the last record of a sealed segment: not a torn tail
    let mut r = f.log.reader("t", 0, Start::Earliest).unwrap();
    let mut seen = Vec::new();
    let err = loop {
        match r.next_batch(5) {
            Ok(b) if b.is_empty() => panic!("corruption not reported"),
            Ok(b) => seen.extend(b.into_iter().map(|r| r.offset)),
            Err(e) => break e,
        }
    };
    assert!(
        matches!(&err, LogError::Corruption { path, .. } if *path == sealed),
        "{err}"
    );
    assert!(
        seen.iter().all(|&o| o < bases[2] - 1),
        "the damaged record is never served"
    );
    f.reopen();
    assert!(f.log.writer("t").err().unwrap().is_corruption());
}

#[test]
fn garbage_files_and_bad_headers() {
    let mut f = fixture();
    fill(&f, "t", tiny(200), 30);
    let dir = f.pdir("t", 0);
    std::fs::write(dir.join("notes.txt"), b"hello").unwrap();
    std::fs::write(f.log.root().join("stray"), b"x").unwrap();
    std::fs::create_dir(f.log.root().join("empty-dir")).unwrap();
    f.reopen();
    assert_eq!(f.log.warnings().len(), 2);
    assert_eq!(f.log.list_topics().unwrap(), vec!["t".to_string()]);
    let w = f.log.writer("t").unwrap();
    assert!(
        w.open_report()
            .warnings
            .iter()
            .any(|w| w.contains("notes.txt"))
    );
    drop(w);

    let bases = list_segments(&dir).unwrap();
    let last = log_path(&dir, *bases.last().unwrap());
    let keep = std::fs::read(&last).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&last)
        .unwrap()
        .set_len(10)
        .unwrap();
    let err = f.log.writer("t").err().unwrap();
    assert!(
        matches!(&err, LogError::BadHeader { path, .. } if *path == last),
        "{err}"
    );
    assert!(f.log.reader("t", 0, Start::Earliest).is_err());
    std::fs::write(&last, b"GARBAGE GARBAGE GARBAGE GARBAGE").unwrap();
    assert!(matches!(f.log.writer("t"), Err(LogError::BadHeader { .. })));
    std::fs::write(&last, &keep).unwrap();
    f.log.writer("t").unwrap();

    std::fs::write(f.log.root().join("t").join("topic.json"), b"{oops").unwrap();
    assert!(matches!(
        f.log.writer("t"),
        Err(LogError::BadMetadata { .. })
    ));
}
