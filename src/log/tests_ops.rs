//! Scenario tests of writer-side operations: locking and concurrent
//! readers, retention, compaction (including crash-safety of the swap
//! protocol), topic columns, consumer groups and fsync policies.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::compaction::Steps;
use super::segment::list_segments;
use super::tests::{Fixture, fixture, read_all, tiny, val};
use super::*;

#[test]
fn single_writer_lock_and_concurrent_readers() {
    let f = fixture();
    f.log.create_topic("t", tiny(300)).unwrap();
    let mut w = f.log.writer("t").unwrap();
    let err = f.log.writer("t").err().unwrap();
    assert!(matches!(err, LogError::Locked { .. }), "{err}");
    assert!(matches!(f.log.retain("t", 0), Err(LogError::Locked { .. })));
    // Opened before the appends start, so `Latest` is offset 0 whatever the
    // thread scheduling.
    let mut r = f.log.reader("t", 0, Start::Latest).unwrap();
    let tail = std::thread::spawn(move || {
        let mut got = Vec::new();
        while got.len() < 200 {
            if r.wait_for(Duration::from_secs(10)).unwrap() {
                got.extend(r.next_batch(1000).unwrap());
            } else {
                panic!("timed out after {} records", got.len());
            }
        }
        got
    });
    for i in 0..200u64 {
        w.append(&[RecordIn::new(None, &val(i))]).unwrap();
        if i % 50 == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let got = tail.join().unwrap();
    assert_eq!(
        got.iter().map(|r| r.offset).collect::<Vec<_>>(),
        (0..200).collect::<Vec<_>>()
    );
    assert_eq!(got[199].value, val(199));
    drop(w);
    f.log.writer("t").unwrap();
}

#[test]
fn wait_for_times_out_without_data() {
    let f = fixture();
    f.log.create_topic("t", TopicConfig::default()).unwrap();
    let mut r = f.log.reader("t", 0, Start::Latest).unwrap();
    assert!(!r.wait_for(Duration::from_millis(20)).unwrap());
    f.log
        .writer("t")
        .unwrap()
        .append(&[RecordIn::new(None, b"x")])
        .unwrap();
    assert!(r.wait_for(Duration::from_millis(500)).unwrap());
    assert_eq!(r.position(), 0);
    assert_eq!(r.next_batch(10).unwrap().len(), 1);
    assert_eq!(r.position(), 1);
}

#[test]
fn retention_by_age_and_size() {
    let f = fixture();
    let cfg = TopicConfig {
        retention_ms: Some(1000),
        ..tiny(300)
    };
    f.log.create_topic("t", cfg).unwrap();
    let mut w = f.log.writer("t").unwrap();
    for i in 0..40 {
        f.now.store(1_000_000 + i * 100, Ordering::SeqCst);
        w.append(&[RecordIn::new(None, &val(i as u64))]).unwrap();
    }
    let segs_before = list_segments(&f.pdir("t", 0)).unwrap();
    assert!(
        w.retain(1_000_000).unwrap().is_empty(),
        "nothing is old yet"
    );
    let deleted = w.retain(1_000_000 + 2500).unwrap();
    assert!(!deleted.is_empty());
    assert!(deleted.iter().all(|d| d.reason == DeleteReason::Age));
    let earliest = f.log.topic("t").unwrap().partitions[0].earliest;
    let got = read_all(&f.log, "t", 0, Start::Earliest).unwrap();
    assert_eq!(got[0].offset, earliest);
    assert!(
        got.iter()
            .all(|r| r.append_ts > 1_000_000 + 2500 - 1000 - 500)
    );
    assert!(f.log.reader("t", 0, Start::Offset(0)).is_err());
    // Everything is old: all but the active segment go.
    w.retain(i64::MAX).unwrap();
    assert_eq!(
        list_segments(&f.pdir("t", 0)).unwrap(),
        vec![*segs_before.last().unwrap()]
    );
    drop(w);

    let cfg = TopicConfig {
        retention_bytes: Some(1000),
        ..tiny(300)
    };
    f.log.create_topic("s", cfg).unwrap();
    let mut w = f.log.writer("s").unwrap();
    for i in 0..60 {
        w.append(&[RecordIn::new(None, &val(i))]).unwrap();
    }
    let deleted = w.retain(0).unwrap();
    assert!(deleted.iter().all(|d| d.reason == DeleteReason::Size) && !deleted.is_empty());
    let info = f.log.topic("s").unwrap();
    assert!(info.partitions[0].bytes <= 1000);
    assert_eq!(info.partitions[0].latest, 60);
}

/// A compacted topic with several sealed segments, keys, and tombstones.
fn compacted_fixture() -> Fixture {
    let f = fixture();
    let cfg = TopicConfig {
        compact: true,
        delete_retention_ms: 100,
        ..tiny(250)
    };
    f.log.create_topic("c", cfg).unwrap();
    let mut w = f.log.writer("c").unwrap();
    for i in 0..60u64 {
        let key = [(i % 5) as u8];
        let value = if i % 11 == 10 { Vec::new() } else { val(i) };
        f.now.store(1_000_000 + i as i64, Ordering::SeqCst);
        w.append(&[RecordIn::new(Some(&key), &value)]).unwrap();
    }
    f
}

#[test]
fn compaction_keeps_latest_per_key() {
    let f = compacted_fixture();
    let before = read_all(&f.log, "c", 0, Start::Earliest).unwrap();
    let reports = f.log.compact("c", 2_000_000).unwrap();
    assert!(reports[0].records_removed > 0);
    let after = read_all(&f.log, "c", 0, Start::Earliest).unwrap();
    let info = f.log.topic("c").unwrap();
    assert_eq!(
        (info.partitions[0].earliest, info.partitions[0].latest),
        (0, 60)
    );
    // Every key's latest record survives, with its offset.
    for k in 0..5u8 {
        let last = before
            .iter()
            .rev()
            .find(|r| r.key.as_deref() == Some(&[k][..]))
            .unwrap();
        if !last.is_tombstone() {
            assert!(after.contains(last));
        }
    }
    assert!(after.windows(2).all(|w| w[0].offset < w[1].offset));
    // Reading from inside a gap starts at the next kept record.
    let gap = (0..60)
        .find(|o| !after.iter().any(|r| r.offset == *o))
        .unwrap();
    let from_gap = read_all(&f.log, "c", 0, Start::Offset(gap)).unwrap();
    assert!(from_gap[0].offset > gap);
    assert_eq!(
        f.log.compact("c", 2_000_000).unwrap()[0].records_removed,
        0,
        "idempotent"
    );
}

#[test]
fn an_explicit_compaction_reaches_the_log_end() {
    let f = fixture();
    let cfg = TopicConfig {
        compact: true,
        ..TopicConfig::default()
    };
    f.log.create_topic("c", cfg).unwrap();
    let mut w = f.log.writer("c").unwrap();
    for i in 0..10u64 {
        w.append(&[RecordIn::new(Some(b"k"), &val(i))]).unwrap();
    }
    drop(w);
    // Everything is in the segment being written: it is sealed and compacted.
    let reports = f.log.compact("c", 0).unwrap();
    assert_eq!(reports[0].records_removed, 9);
    let after = read_all(&f.log, "c", 0, Start::Earliest).unwrap();
    assert_eq!(after.iter().map(|r| r.offset).collect::<Vec<_>>(), [9]);
    let mut w = f.log.writer("c").unwrap();
    assert_eq!(
        w.append(&[RecordIn::new(Some(b"k"), &val(10))]).unwrap(),
        [(0, 10)]
    );
}

#[test]
fn compaction_swap_is_crash_safe_at_every_step() {
    let old = {
        let f = compacted_fixture();
        read_all(&f.log, "c", 0, Start::Earliest).unwrap()
    };
    let new = {
        let f = compacted_fixture();
        f.log.compact("c", 2_000_000).unwrap();
        read_all(&f.log, "c", 0, Start::Earliest).unwrap()
    };
    assert_ne!(old, new);
    let mut crashes = 0;
    for k in 0.. {
        let mut f = compacted_fixture();
        let mut w = f.log.writer("c").unwrap();
        let done = w
            .compact_with(2_000_000, &mut Steps::stop_after(k))
            .unwrap()
            .is_some();
        drop(w); // "crash": the writer vanishes mid-protocol
        if done {
            break;
        }
        crashes += 1;
        let mid = read_all(&f.log, "c", 0, Start::Earliest).unwrap();
        assert!(
            mid.iter().all(|r| old.contains(r)),
            "readers never see foreign data"
        );
        f.reopen();
        let w = f.log.writer("c").unwrap();
        assert!(w.open_report().recoveries.is_empty());
        drop(w);
        let got = read_all(&f.log, "c", 0, Start::Earliest).unwrap();
        assert!(
            got == old || got == new,
            "crash after step {k}: neither old nor new"
        );
        let leftovers = std::fs::read_dir(f.pdir("c", 0)).unwrap().filter(|e| {
            let n = e
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .into_owned();
            n.ends_with(".cleaned") || n.ends_with(".swap")
        });
        assert_eq!(leftovers.count(), 0);
    }
    assert!(crashes > 5);
}

#[test]
fn columns_are_set_once_and_checked() {
    let f = fixture();
    f.log.create_topic("t", TopicConfig::default()).unwrap();
    let cols = vec!["a".to_string(), "b".to_string()];
    let mut w = f.log.writer("t").unwrap();
    w.ensure_columns(&cols, RowFormat::Csv).unwrap();
    w.ensure_columns(&cols, RowFormat::Csv).unwrap();
    let err = w
        .ensure_columns(&["a".to_string()], RowFormat::Csv)
        .unwrap_err();
    assert!(matches!(err, LogError::ColumnsMismatch { .. }));
    let err = w.ensure_columns(&cols, RowFormat::Jsonl).unwrap_err();
    assert!(matches!(err, LogError::RowFormatMismatch { .. }), "{err}");
    drop(w);
    let config = f.log.topic("t").unwrap().config;
    assert_eq!(
        (config.columns, config.row_format),
        (cols, Some(RowFormat::Csv))
    );
}

#[test]
fn consumer_groups_and_lag() {
    let f = fixture();
    f.log
        .create_topic(
            "t",
            TopicConfig {
                partitions: 2,
                ..Default::default()
            },
        )
        .unwrap();
    let mut w = f.log.writer("t").unwrap();
    w.append_batch(0, &[RecordIn::new(None, b"a"); 10]).unwrap();
    w.append_batch(1, &[RecordIn::new(None, b"a"); 4]).unwrap();
    f.log.commit_offsets("t", "g", &[(0, 3), (1, 4)]).unwrap();
    f.log.commit_offsets("t", "g", &[(0, 6)]).unwrap();
    f.log.commit_offsets("t", "g", &[(0, 6)]).unwrap();
    assert_eq!(
        f.log.fetch_offsets("t", "g").unwrap(),
        [(0, 6), (1, 4)].into()
    );
    assert!(f.log.fetch_offsets("t", "other").unwrap().is_empty());
    let info = f.log.topic("t").unwrap();
    let lags: Vec<_> = info.groups[0].partitions.iter().map(|p| p.lag).collect();
    assert_eq!(lags, vec![4, 0]);
    // A group that never committed on partition 1 has all of it to read.
    f.log.commit_offsets("t", "late", &[(0, 10)]).unwrap();
    let info = f.log.topic("t").unwrap();
    let late = info.groups.iter().find(|g| g.group == "late").unwrap();
    let lags: Vec<_> = late
        .partitions
        .iter()
        .map(|p| (p.committed, p.lag))
        .collect();
    assert_eq!(lags, vec![(Some(10), 0), (None, 4)]);
}

#[test]
fn groups_reset_to_every_kind_of_place_and_delete() {
    let f = fixture();
    let config = TopicConfig {
        partitions: 2,
        ..Default::default()
    };
    f.log.create_topic("t", config).unwrap();
    let mut w = f.log.writer("t").unwrap();
    f.now.store(1_000, Ordering::SeqCst);
    w.append_batch(0, &[RecordIn::new(None, b"a"); 5]).unwrap();
    f.now.store(2_000, Ordering::SeqCst);
    w.append_batch(0, &[RecordIn::new(None, b"b"); 5]).unwrap();
    w.append_batch(1, &[RecordIn::new(None, b"c"); 3]).unwrap();
    drop(w);
    f.log.commit_offsets("t", "g", &[(0, 7)]).unwrap();
    let to = |r: ResetTo, dry: bool| -> Vec<(Option<u64>, u64)> {
        let moves = f.log.reset_group("t", "g", r, dry).unwrap();
        moves.iter().map(|m| (m.from, m.to)).collect()
    };
    assert_eq!(to(ResetTo::Earliest, true), vec![(Some(7), 0), (None, 0)]);
    assert_eq!(
        f.log.fetch_offsets("t", "g").unwrap(),
        [(0, 7)].into(),
        "dry run"
    );
    assert_eq!(to(ResetTo::Latest, false), vec![(Some(7), 10), (None, 3)]);
    assert_eq!(
        f.log.fetch_offsets("t", "g").unwrap(),
        [(0, 10), (1, 3)].into()
    );
    assert_eq!(
        to(ResetTo::Offset(4), false),
        vec![(Some(10), 4), (Some(3), 3)]
    );
    assert_eq!(
        to(ResetTo::Time(1_500), false),
        vec![(Some(4), 5), (Some(3), 0)]
    );
    assert_eq!(
        to(ResetTo::Time(9_000), false),
        vec![(Some(5), 10), (Some(0), 3)]
    );
    assert!(f.log.delete_group("t", "g").unwrap());
    assert!(!f.log.delete_group("t", "g").unwrap());
    assert!(f.log.topic("t").unwrap().groups.is_empty());
}

#[test]
fn topics_are_altered_and_deleted_under_the_writer_lock() {
    let f = fixture();
    f.log.create_topic("t", TopicConfig::default()).unwrap();
    f.log.create_topic("u", TopicConfig::default()).unwrap();
    let change = TopicChange {
        retention_ms: Some(Some(60_000)),
        retention_bytes: None,
        delete_retention_ms: Some(5),
    };
    let (before, after) = f.log.alter_topic("t", &change).unwrap();
    assert_eq!(
        (before.retention_ms, after.retention_ms),
        (None, Some(60_000))
    );
    assert_eq!(f.log.topic("t").unwrap().config, after);
    let bad = TopicChange {
        retention_ms: Some(Some(0)),
        ..Default::default()
    };
    assert!(matches!(
        f.log.alter_topic("t", &bad),
        Err(LogError::InvalidConfig { .. })
    ));
    assert_eq!(f.log.topic("t").unwrap().config, after, "nothing written");

    let w = f.log.writer("t").unwrap();
    assert!(matches!(
        f.log.delete_topic("t"),
        Err(LogError::Locked { .. })
    ));
    drop(w);
    f.log.delete_topic("t").unwrap();
    assert_eq!(f.log.list_topics().unwrap(), vec!["u".to_string()]);
    assert!(matches!(
        f.log.topic("t"),
        Err(LogError::TopicNotFound { .. })
    ));
    // An interrupted delete's leftovers are not a topic, and go with the next delete.
    std::fs::create_dir(f.log.root().join(".deleted.x.1")).unwrap();
    assert_eq!(f.log.list_topics().unwrap(), vec!["u".to_string()]);
    f.log.delete_topic("u").unwrap();
    assert_eq!(std::fs::read_dir(f.log.root()).unwrap().count(), 0);
}

#[test]
fn fsync_policies_and_batches_spanning_rolls() {
    let f = fixture();
    f.log.create_topic("t", tiny(200)).unwrap();
    for fsync in [
        FsyncPolicy::Never,
        FsyncPolicy::IntervalMs(1),
        FsyncPolicy::EveryBatch,
    ] {
        let mut w = f.log.writer_with("t", WriterOptions { fsync }).unwrap();
        let vals: Vec<Vec<u8>> = (0..30).map(val).collect();
        let recs: Vec<RecordIn> = vals.iter().map(|v| RecordIn::new(None, v)).collect();
        w.append_batch(0, &recs).unwrap();
        w.flush().unwrap();
    }
    let dir = f.pdir("t", 0);
    for b in list_segments(&dir).unwrap() {
        let len = std::fs::metadata(super::segment::log_path(&dir, b))
            .unwrap()
            .len();
        assert!(len <= 200, "segment {b} is {len} bytes: batches roll too");
    }
    let got = read_all(&f.log, "t", 0, Start::Earliest).unwrap();
    assert_eq!(got.len(), 90);
    assert!(got.iter().enumerate().all(|(i, r)| r.offset == i as u64));
}

#[test]
fn readers_race_compaction_and_retention() {
    let f = fixture();
    let cfg = TopicConfig {
        compact: true,
        delete_retention_ms: 0,
        retention_bytes: Some(3000),
        ..tiny(300)
    };
    f.log.create_topic("c", cfg).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (log, stop) = (f.log.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut passes = 0;
                while !stop.load(Ordering::SeqCst) || passes == 0 {
                    let Ok(mut r) = log.reader("c", 0, Start::Earliest) else {
                        continue;
                    };
                    let mut last = None;
                    loop {
                        match r.next_batch(50) {
                            Ok(b) if b.is_empty() => break,
                            Ok(b) => {
                                for rec in b {
                                    assert!(
                                        last.is_none_or(|l| rec.offset > l),
                                        "offsets go forward"
                                    );
                                    assert_eq!(
                                        rec.value,
                                        val(rec.offset),
                                        "record content matches its offset"
                                    );
                                    last = Some(rec.offset);
                                }
                            }
                            Err(LogError::OffsetOutOfRange { .. }) => break, // retention overtook us
                            Err(e) => panic!("reader failed: {e}"),
                        }
                    }
                    passes += 1;
                }
                passes
            })
        })
        .collect();
    let mut w = f.log.writer("c").unwrap();
    for i in 0..300u64 {
        let key = [(i % 7) as u8];
        w.append(&[RecordIn::new(Some(&key), &val(i))]).unwrap();
        if i % 25 == 0 {
            w.compact(i64::MAX).unwrap();
            w.retain(0).unwrap();
        }
    }
    stop.store(true, Ordering::SeqCst);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
}
