//! Property tests against a plain in-memory model, and damage fuzzing of
//! real segment files.
//!
//! The model is one `BTreeMap<offset, Record>` per partition. Appends,
//! clock advances, retention, compaction and writer reopens are applied to
//! both; after every step every partition must serve exactly the model's
//! records, in order, once each, from the earliest offset and from many
//! start offsets.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;

use proptest::prelude::*;

use super::tests::{Fixture, fixture, read_all};
use super::*;

#[derive(Clone, Debug)]
enum Op {
    /// (key, value length; 0 is a tombstone)
    Append(Vec<(Option<u8>, u8)>),
    Advance(i64),
    Retain,
    Compact,
    Reopen,
}

fn arb_op() -> impl Strategy<Value = Op> {
    let rec = (
        proptest::option::weighted(0.8, 0u8..6),
        prop_oneof![1 => Just(0u8), 5 => 1u8..40],
    );
    prop_oneof![
        6 => proptest::collection::vec(rec, 0..8).prop_map(Op::Append),
        2 => (0i64..400).prop_map(Op::Advance),
        1 => Just(Op::Retain),
        2 => Just(Op::Compact),
        1 => Just(Op::Reopen),
    ]
}

fn arb_config() -> impl Strategy<Value = TopicConfig> {
    (
        1u32..3,
        64u64..400,
        proptest::option::of(200i64..2000),
        proptest::option::of(300u64..2000),
        any::<bool>(),
        0i64..300,
    )
        .prop_map(
            |(partitions, segment_bytes, retention_ms, retention_bytes, compact, del)| {
                TopicConfig {
                    partitions,
                    segment_bytes,
                    retention_ms,
                    retention_bytes,
                    compact,
                    delete_retention_ms: del,
                    ..TopicConfig::default()
                }
            },
        )
}

struct Model {
    parts: Vec<BTreeMap<u64, Record>>,
    next: Vec<u64>,
    earliest: Vec<u64>,
    counter: u64,
}

fn apply_append(f: &Fixture, w: &mut TopicWriter, m: &mut Model, recs: &[(Option<u8>, u8)]) {
    let now = f.now.load(Ordering::SeqCst);
    let owned: Vec<(Option<Vec<u8>>, Vec<u8>)> = recs
        .iter()
        .map(|(k, len)| {
            m.counter += 1;
            let mut v = format!("{}:", m.counter).into_bytes();
            v.resize(v.len().max(*len as usize), b'.');
            (k.map(|k| vec![k]), if *len == 0 { Vec::new() } else { v })
        })
        .collect();
    let ins: Vec<RecordIn> = owned
        .iter()
        .map(|(k, v)| RecordIn::new(k.as_deref(), v))
        .collect();
    let placed = w.append(&ins).unwrap();
    for ((p, off), (key, value)) in placed.into_iter().zip(owned) {
        let p = p as usize;
        assert_eq!(off, m.next[p], "offsets are dense and monotonic on append");
        m.next[p] += 1;
        m.parts[p].insert(
            off,
            Record {
                offset: off,
                key,
                value,
                event_ts: None,
                append_ts: now,
            },
        );
    }
}

fn apply_retain(f: &Fixture, w: &mut TopicWriter, m: &mut Model, cfg: &TopicConfig) {
    let now = f.now.load(Ordering::SeqCst);
    w.retain(now).unwrap();
    let info = f.log.topic("t").unwrap();
    for (p, pi) in info.partitions.iter().enumerate() {
        assert!(pi.earliest >= m.earliest[p], "earliest never goes back");
        m.earliest[p] = pi.earliest;
        let kept = m.parts[p].split_off(&pi.earliest);
        let removed = std::mem::replace(&mut m.parts[p], kept);
        if let (Some(ms), None) = (cfg.retention_ms, cfg.retention_bytes) {
            assert!(
                removed.values().all(|r| now - r.append_ts >= ms),
                "age retention removed young data"
            );
        }
        if let (None, Some(max)) = (cfg.retention_ms, cfg.retention_bytes) {
            assert!(
                pi.bytes <= max || pi.segments == 1,
                "size retention left {} bytes",
                pi.bytes
            );
        }
        if cfg.retention_ms.is_none() && cfg.retention_bytes.is_none() {
            assert!(removed.is_empty());
        }
    }
}

fn apply_compact(f: &Fixture, w: &mut TopicWriter, m: &mut Model, cfg: &TopicConfig) {
    let now = f.now.load(Ordering::SeqCst);
    if cfg.compact {
        let next = m.next.clone();
        for (p, recs) in m.parts.iter_mut().enumerate() {
            // An explicit compaction seals the segment being written first:
            // it reaches every record up to the log end.
            let active_base = next[p];
            let latest: HashMap<Vec<u8>, u64> = recs
                .values()
                .filter_map(|r| r.key.clone().map(|k| (k, r.offset)))
                .collect();
            recs.retain(|&off, r| match &r.key {
                _ if off >= active_base => true,
                None => true,
                Some(k) if latest[k] != off => false,
                Some(_) => !r.is_tombstone() || now < r.append_ts + cfg.delete_retention_ms,
            });
        }
    }
    w.compact(now).unwrap();
}

fn check(f: &Fixture, m: &Model) {
    let info = f.log.topic("t").unwrap();
    for (p, recs) in m.parts.iter().enumerate() {
        let pi = &info.partitions[p];
        assert_eq!((pi.earliest, pi.latest), (m.earliest[p], m.next[p]));
        let want: Vec<Record> = recs.values().cloned().collect();
        assert_eq!(
            read_all(&f.log, "t", p as u32, Start::Earliest).unwrap(),
            want
        );
        for start in (m.earliest[p]..=m.next[p]).step_by(5) {
            let got = read_all(&f.log, "t", p as u32, Start::Offset(start)).unwrap();
            let want: Vec<&Record> = recs.range(start..).map(|(_, r)| r).collect();
            assert_eq!(got.iter().collect::<Vec<_>>(), want, "reading from {start}");
        }
        if m.earliest[p] > 0 {
            assert!(
                f.log
                    .reader("t", p as u32, Start::Offset(m.earliest[p] - 1))
                    .is_err()
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn log_matches_model(cfg in arb_config(), ops in proptest::collection::vec(arb_op(), 1..40)) {
        let mut f = fixture();
        f.log.create_topic("t", cfg.clone()).unwrap();
        let n = cfg.partitions as usize;
        let mut m = Model { parts: vec![BTreeMap::new(); n], next: vec![0; n], earliest: vec![0; n], counter: 0 };
        let mut w = Some(f.log.writer("t").unwrap());
        for op in &ops {
            let wr = w.as_mut().unwrap();
            match op {
                Op::Append(recs) => apply_append(&f, wr, &mut m, recs),
                Op::Advance(ms) => { f.now.fetch_add(*ms, Ordering::SeqCst); }
                Op::Retain => apply_retain(&f, wr, &mut m, &cfg),
                Op::Compact => apply_compact(&f, wr, &mut m, &cfg),
                Op::Reopen => {
                    drop(w.take());
                    f.reopen();
                    let fresh = f.log.writer("t").unwrap();
                    prop_assert!(fresh.open_report().recoveries.is_empty());
                    prop_assert_eq!(fresh.next_offsets(), m.next.clone());
                    w = Some(fresh);
                }
            }
            check(&f, &m);
        }
    }

    #[test]
    fn damaged_segments_never_panic_or_serve_foreign_data(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..4),
    ) {
        let mut f = fixture();
        f.log.create_topic("t", TopicConfig::default()).unwrap();
        let mut w = f.log.writer("t").unwrap();
        for i in 0..12u8 {
            let v = vec![i; 20 + i as usize];
            w.append(&[RecordIn::new(Some(&[i % 3]), &v).with_event_ts(i64::from(i))]).unwrap();
        }
        drop(w);
        let original = read_all(&f.log, "t", 0, Start::Earliest).unwrap();
        let seg = super::segment::log_path(&f.pdir("t", 0), 0);
        let mut bytes = std::fs::read(&seg).unwrap();
        for (idx, bit) in &flips {
            let i = idx.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        std::fs::write(&seg, &bytes).unwrap();
        let check_served = |got: &[Record]| {
            got.iter().all(|r| original.contains(r)) && got.windows(2).all(|w| w[0].offset < w[1].offset)
        };
        match read_all(&f.log, "t", 0, Start::Earliest) {
            Ok(got) => prop_assert!(check_served(&got)),
            Err(e) => prop_assert!(e.is_corruption(), "{e}"),
        }
        f.reopen();
        match f.log.writer("t") {
            Ok(w) => {
                drop(w);
                let got = read_all(&f.log, "t", 0, Start::Earliest).unwrap();
                prop_assert!(check_served(&got));
                prop_assert_eq!(&got[..], &original[..got.len()], "recovery keeps a prefix");
            }
            Err(e) => prop_assert!(e.is_corruption(), "{e}"),
        }
    }
}
