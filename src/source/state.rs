//! What one log partition has made of its input collection: the state a
//! checkpoint keeps so that a restart need not read the partition again.
//!
//! A partition's contribution to its input collection is a function of the
//! records read from it so far, and so is the little the reader itself must
//! remember to go on: the current row of each key of a changelog (to retract
//! it when the key is replaced) and the late-event filter's watermark. A
//! [`PartitionState`] holds all three; a [`StateDelta`] is what changed
//! between two points of the partition (each key's row then, the event rows
//! added, the watermark and drop count then), so that a checkpoint can be
//! written as the deltas of the commits since the last one and merged.
//!
//! Invariants:
//! - applying, in order, the deltas a reader took since it opened (at the
//!   start of the partition, or at a restored state) gives exactly the
//!   state a reader that read everything from the start would hold;
//! - the rows of a state ([`PartitionState::rows`]) are the partition's
//!   contribution to its input collection, consolidated: a restart that
//!   inserts them and reads on from the committed offset feeds the dataflow
//!   the same collection as a full replay.
//!
//! Encoding: bincode with varints (the serde format the spill files and
//! timely use), checked by the store's checksum of the bytes.

use std::collections::HashMap;

use bincode::Options;
use differential_dataflow::consolidation::consolidate;
use serde::{Deserialize, Serialize};

use crate::row_map::{RowMap, hash_values};
use crate::value::{Row, Value};

/// The changes since the last [`StateDelta`] was taken from a partition, or
/// a whole state (a delta from nothing).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StateDelta {
    /// Changelog keys whose row changed: the row now, `None` once retracted.
    pub keys: Vec<(Vec<u8>, Option<Row>)>,
    /// Event rows (and keyless records of a changelog), consolidated:
    /// distinct rows with non-zero differences.
    pub rows: Vec<(Row, isize)>,
    /// The late filter's watermark and drop count now (absolute values).
    pub late: Option<(Option<i64>, u64)>,
}

impl StateDelta {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.rows.is_empty() && self.late.is_none()
    }

    /// The bytes a checkpoint stores.
    pub fn encode(&self) -> Vec<u8> {
        codec()
            .serialize(self)
            .expect("a state delta always encodes")
    }

    /// Reads what [`StateDelta::encode`] wrote; `Err` names what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<StateDelta, String> {
        codec().deserialize(bytes).map_err(|e| e.to_string())
    }
}

fn codec() -> impl Options {
    bincode::DefaultOptions::new()
        .with_varint_encoding()
        .reject_trailing_bytes()
}

/// All a partition's records made, as of some offset.
///
/// The event rows are kept as one sorted, consolidated run (what a
/// [`StateDelta`] stores), not a hash map: a restart decodes millions of
/// rows, and merging sorted runs costs a linear pass where hashing each row
/// cost several times the replay it saves. Deltas are appended unsorted and
/// merged into the run by [`PartitionState::settle`], which every reader of
/// the rows needs first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PartitionState {
    /// Changelogs: each key's current row.
    pub keys: HashMap<Vec<u8>, Row>,
    /// Event rows with their multiplicities: sorted and consolidated up to
    /// `settled`, deltas after it.
    events: Vec<(Row, isize)>,
    settled: usize,
    /// The late filter's watermark and drop count, under `drop`.
    pub late: Option<(Option<i64>, u64)>,
}

impl PartitionState {
    /// Applies the next delta (its rows are merged by the next
    /// [`PartitionState::settle`], or once they outgrow the settled run).
    pub fn apply(&mut self, delta: StateDelta) {
        for (key, row) in delta.keys {
            match row {
                Some(row) => self.keys.insert(key, row),
                None => self.keys.remove(&key),
            };
        }
        self.events.extend(delta.rows);
        if delta.late.is_some() {
            self.late = delta.late;
        }
        // Merging when the tail has grown as big as the run keeps the cost
        // of many small deltas linear overall.
        if self.events.len() - self.settled > self.settled.max(1 << 16) {
            self.settle();
        }
    }

    /// Merges the applied deltas into the sorted run. The sort is stable
    /// and finds the run already sorted: sorted run plus a tail costs
    /// about a pass over the run and a sort of the tail.
    pub fn settle(&mut self) {
        if self.settled < self.events.len() {
            consolidate(&mut self.events);
            self.settled = self.events.len();
        }
    }

    fn check_settled(&self) {
        debug_assert_eq!(
            self.settled,
            self.events.len(),
            "a partition state is read before its deltas were settled"
        );
    }

    /// The whole state as one delta (from nothing), in a fixed order so
    /// that equal states encode to equal bytes.
    pub fn to_delta(&self) -> StateDelta {
        self.check_settled();
        let mut keys: Vec<_> = self
            .keys
            .iter()
            .map(|(k, r)| (k.clone(), Some(r.clone())))
            .collect();
        keys.sort();
        StateDelta {
            keys,
            rows: self.events.clone(),
            late: self.late,
        }
    }

    /// The event rows, sorted, with their multiplicities.
    pub fn events(&self) -> &[(Row, isize)] {
        self.check_settled();
        &self.events
    }

    /// The partition's contribution to its input collection: every key's
    /// row once, and the event rows with their multiplicities; and the
    /// keys' rows by key.
    pub fn into_rows(self) -> (Vec<(Row, isize)>, HashMap<Vec<u8>, Row>) {
        self.check_settled();
        let mut rows = self.events;
        rows.extend(self.keys.values().map(|r| (r.clone(), 1)));
        (rows, self.keys)
    }

    /// Rows (with multiplicity) it holds, for sizes in messages.
    pub fn len(&self) -> usize {
        self.keys.len() + self.events.len()
    }

    /// Whether it holds no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Collects what a reader's records change, between two takes.
///
/// Event rows are counted in a hash map, so a take sorts only the distinct
/// rows: sorting every row read, at every epoch, cost a catch-up 3 to 4
/// times its reading (`Value::cmp` was 37% of it). The map is probed in
/// batches of [`BATCH`] rows hashed ahead, each entry prefetched a few rows
/// before its probe (as the combiner does): probed one row at a time, its
/// cache misses were 37% of a catch-up.
#[derive(Default)]
pub(crate) struct Capture {
    /// Keys whose row changed (the row now is the reader's).
    pub keys: std::collections::HashSet<Vec<u8>>,
    /// Event rows counted since the last take, with their multiplicities.
    rows: RowMap<isize>,
    /// Rows admitted but not yet counted, and their hashes.
    pending: Vec<(Row, isize)>,
    hashes: Vec<u64>,
    /// The late filter moved (or dropped an event).
    pub late_moved: bool,
}

/// Rows hashed before they are counted (see [`Capture`]).
const BATCH: usize = 1024;

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("keys", &self.keys.len())
            .field("rows", &(self.rows.len() + self.pending.len()))
            .field("late_moved", &self.late_moved)
            .finish()
    }
}

impl Capture {
    /// Counts an event row admitted `diff` more times.
    pub fn add(&mut self, row: &[Value], diff: isize) {
        self.hashes.push(hash_values(row));
        self.pending.push((row.to_vec(), diff));
        if self.pending.len() == BATCH {
            self.count_pending();
        }
    }

    fn count_pending(&mut self) {
        for (i, (row, diff)) in self.pending.drain(..).enumerate() {
            self.rows.prefetch_for(&self.hashes, i);
            let hash = self.hashes[i];
            match self.rows.get_mut(hash, &row) {
                Some(n) => *n += diff,
                None => self.rows.insert_new(hash, row.into(), diff),
            }
        }
        self.hashes.clear();
    }

    /// The delta since the last take: `current` gives each changed key's
    /// row now, `late` the filter's state now.
    pub fn take(
        &mut self,
        current: &HashMap<Vec<u8>, Row>,
        late: Option<(Option<i64>, u64)>,
    ) -> StateDelta {
        let mut keys: Vec<_> = self
            .keys
            .drain()
            .map(|k| {
                let row = current.get(&k).cloned();
                (k, row)
            })
            .collect();
        keys.sort();
        self.count_pending();
        let mut rows: Vec<(Row, isize)> = self
            .rows
            .drain()
            .filter(|(_, n)| *n != 0)
            .map(|(row, n)| (row.into_vec(), n))
            .collect();
        // Distinct rows: an unstable sort gives the one order there is.
        rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let late = std::mem::take(&mut self.late_moved)
            .then_some(late)
            .flatten();
        StateDelta { keys, rows, late }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(v: i64) -> Row {
        vec![Value::Int(v), Value::str("x")]
    }

    #[test]
    fn deltas_applied_in_order_give_the_state_and_round_trip() {
        let mut state = PartitionState::default();
        let first = StateDelta {
            keys: vec![(b"a".to_vec(), Some(row(1))), (b"b".to_vec(), Some(row(2)))],
            rows: vec![(row(7), 2)],
            late: Some((Some(10), 0)),
        };
        let second = StateDelta {
            keys: vec![(b"a".to_vec(), None), (b"b".to_vec(), Some(row(3)))],
            rows: vec![(row(7), -2), (row(8), 1)],
            late: None,
        };
        for d in [first, second] {
            let bytes = d.encode();
            state.apply(StateDelta::decode(&bytes).unwrap());
        }
        state.settle();
        assert_eq!(state.keys.len(), 1);
        assert_eq!(state.keys[&b"b".to_vec()], row(3));
        assert_eq!(state.events(), &[(row(8), 1)]);
        assert_eq!(state.late, Some((Some(10), 0)));
        let mut again = PartitionState::default();
        again.apply(state.to_delta());
        again.settle();
        assert_eq!(again, state);
        assert_eq!(state.to_delta().encode(), again.to_delta().encode());
    }

    #[test]
    fn a_capture_counts_rows_and_takes_them_sorted_without_zeros() {
        let mut capture = Capture::default();
        for (v, n) in [(3, 1), (1, 1), (3, 1), (2, 1), (2, -1), (1, 2)] {
            capture.add(&row(v), n);
        }
        let delta = capture.take(&HashMap::new(), None);
        assert_eq!(delta.rows, vec![(row(1), 3), (row(3), 2)]);
        assert!(capture.take(&HashMap::new(), None).is_empty());
    }

    #[test]
    fn damaged_bytes_do_not_decode_as_a_state() {
        let d = StateDelta {
            keys: vec![],
            rows: vec![(row(1), 1)],
            late: None,
        };
        let bytes = d.encode();
        assert!(StateDelta::decode(&bytes[..bytes.len() - 1]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(StateDelta::decode(&longer).is_err());
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(64))]
        /// Against a plain map of row to multiplicity: deltas applied in
        /// order, settled at any points (or by themselves, past the
        /// threshold), give the same rows, sorted, without zeros.
        #[test]
        fn deltas_settle_as_a_plain_map_adds_them(
            deltas in proptest::collection::vec(
                (proptest::collection::vec((0i64..50, -2isize..3), 0..40), proptest::bool::ANY),
                0..60,
            ),
            big in 0usize..2,
        ) {
            let mut state = PartitionState::default();
            let mut reference: std::collections::BTreeMap<Row, isize> = Default::default();
            // Once, a delta past the settle threshold of its own.
            if big == 1 {
                let rows: Vec<(Row, isize)> = (0..(1 << 16) + 1).map(|i| (row(1000 + i), 1)).collect();
                for (r, n) in &rows {
                    *reference.entry(r.clone()).or_default() += n;
                }
                state.apply(StateDelta { keys: vec![], rows, late: None });
            }
            for (rows, settle) in deltas {
                let rows: Vec<(Row, isize)> = rows.into_iter().map(|(v, n)| (row(v), n)).collect();
                for (r, n) in &rows {
                    *reference.entry(r.clone()).or_default() += n;
                }
                state.apply(StateDelta { keys: vec![], rows, late: None });
                if settle {
                    state.settle();
                }
            }
            state.settle();
            let expected: Vec<(Row, isize)> = reference.into_iter().filter(|(_, n)| *n != 0).collect();
            proptest::prop_assert_eq!(state.events(), &expected[..]);
        }
    }
}
