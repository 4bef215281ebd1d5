//! Combining identical input rows before they enter the dataflow (batch
//! runs per worker, stream runs per worker and epoch).
//!
//! An input collection is a multiset: inserting a row `n` times and
//! inserting it once with multiplicity `n` are the same collection, so a
//! worker may count identical rows locally and send each distinct row once —
//! the MapReduce combiner, applied to whole (projected) rows. When a job
//! reads few columns with few distinct values (count by key), this shrinks
//! what is exchanged and sorted by orders of magnitude; when rows are mostly
//! distinct (a fact table's `key,value`) it would only cost a hash per row,
//! so the combiner holds at most [`MAX_HELD`] distinct rows, and when that
//! fills up without rows having repeated enough since the last flush (or,
//! at [`EARLY`] rows held, when hardly any row repeated), it flushes and
//! switches itself off for the rest of the input.
//!
//! Each row waits `2 * PROBE_AHEAD` rows in a small ring between its hash and its
//! probe: its index slot is prefetched when it comes in, its entry
//! ([`RowMap::prefetch`]) halfway, while the rows before it are counted. A
//! row's count reaches the dataflow at the next [`Combiner::flush`] either
//! way (as a held row's always did), which the runners call before they
//! advance an input's time; only the order within a time changes.

use differential_dataflow::input::InputSession;

use crate::job::Time;
use crate::row_map::{PROBE_AHEAD, RowMap, hash_values};
use crate::value::Row;

/// Distinct rows held before they are flushed to the dataflow.
const MAX_HELD: usize = 1 << 18;
/// Combining goes on after a flush only if rows repeated at least this many
/// times on average since the previous one.
const MIN_REPEAT: usize = 2;
/// Distinct rows held when the combiner first looks at how often rows
/// repeat: if fewer than one row in [`RARE`] found its row already held,
/// rows hardly repeat (a fact table's `key,value`) and combining stops
/// there, instead of hashing [`MAX_HELD`] rows into a table bigger than the
/// cache first. Rows that repeat at all pass: 100k keys drawn uniformly have
/// a third of their rows repeat by the time 64k are held.
const EARLY: usize = 1 << 16;
/// See [`EARLY`].
const RARE: usize = 64;
/// Rows between a row's hash and its probe.
const RING: usize = 2 * PROBE_AHEAD;

/// Counts identical rows of one input on one worker.
pub struct Combiner {
    held: RowMap<isize>,
    /// Rows hashed and prefetched but not yet counted, with their
    /// differences and hashes; once it is full ([`RING`]), the oldest is at
    /// `next`.
    ring: Vec<(Row, isize, u64)>,
    next: usize,
    /// Rows counted since the last flush (the ring's not yet).
    seen: usize,
    enabled: bool,
}

impl Default for Combiner {
    fn default() -> Self {
        Combiner {
            held: RowMap::default(),
            ring: Vec::with_capacity(RING),
            next: 0,
            seen: 0,
            enabled: true,
        }
    }
}

impl Combiner {
    /// Adds a row, passing it straight on once combining is off. The row's
    /// buffer may be swapped for another, emptied: the caller refills it.
    pub fn push(&mut self, row: &mut Row, session: &mut InputSession<Time, Row, isize>) {
        self.update(row, 1, session);
    }

    /// Adds a row change with difference `diff` (a changelog retracts rows).
    pub fn update(
        &mut self,
        row: &mut Row,
        diff: isize,
        session: &mut InputSession<Time, Row, isize>,
    ) {
        if !self.enabled {
            session.update(std::mem::take(row), diff);
            return;
        }
        let hash = hash_values(row.iter());
        self.held.prefetch_slot(hash);
        if self.ring.len() < RING {
            self.ring.push((std::mem::take(row), diff, hash));
            return;
        }
        // The new row takes the oldest one's place; the oldest is counted,
        // and the one halfway has its entry prefetched.
        let slot = &mut self.ring[self.next];
        std::mem::swap(&mut slot.0, row);
        let (old_diff, old_hash) = (slot.1, slot.2);
        (slot.1, slot.2) = (diff, hash);
        self.held
            .prefetch(self.ring[(self.next + RING - PROBE_AHEAD) % RING].2);
        self.next = (self.next + 1) % RING;
        let added = self.count(row, old_diff, old_hash);
        let held = self.held.len();
        let rare = added && held == EARLY && (self.seen - held) * RARE < self.seen;
        if rare || held >= MAX_HELD {
            self.enabled = !rare && self.seen >= MIN_REPEAT * held;
            self.flush(session);
        }
    }

    /// Counts `row` (hashed to `hash`) `diff` more times, leaving it empty;
    /// true if it was not held.
    fn count(&mut self, row: &mut Row, diff: isize, hash: u64) -> bool {
        self.seen += 1;
        let added = match self.held.get_mut(hash, row.iter()) {
            Some(n) => {
                *n += diff;
                false
            }
            None => {
                self.held.insert_new(hash, row.drain(..).collect(), diff);
                true
            }
        };
        row.clear();
        added
    }

    /// Sends every row held or waiting in the ring, with its count.
    pub fn flush(&mut self, session: &mut InputSession<Time, Row, isize>) {
        let mut ring = std::mem::take(&mut self.ring);
        for (row, diff, hash) in &mut ring {
            self.count(row, *diff, *hash);
        }
        ring.clear();
        self.ring = ring;
        self.next = 0;
        self.seen = 0;
        for (row, n) in self.held.drain().filter(|(_, n)| *n != 0) {
            session.update(row.into_vec(), n);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use std::rc::Rc;

    use differential_dataflow::input::Input;

    use super::*;
    use crate::value::Value;

    /// What a combiner passes on for `changes` (at time 0, flushed once):
    /// the updates it sent, and their sums per row.
    fn combined(changes: Vec<(Row, isize)>) -> (usize, BTreeMap<Row, isize>) {
        timely::execute_directly(move |worker| {
            let sent = Rc::new(RefCell::new(Vec::new()));
            let (mut session, probe) = worker.dataflow::<Time, _, _>(|scope| {
                let (session, rows) = scope.new_collection::<Row, isize>();
                let sink = sent.clone();
                let (probe, _) = rows
                    .inspect(move |(row, _, diff)| sink.borrow_mut().push((row.clone(), *diff)))
                    .probe();
                (session, probe)
            });
            let mut combiner = Combiner::default();
            for (mut row, diff) in changes {
                combiner.update(&mut row, diff, &mut session);
            }
            combiner.flush(&mut session);
            session.advance_to(1);
            session.flush();
            worker.step_while(|| probe.less_than(&1));
            let sent = sent.borrow();
            let mut sums = BTreeMap::new();
            for (row, diff) in sent.iter() {
                *sums.entry(row.clone()).or_insert(0) += diff;
            }
            sums.retain(|_, n| *n != 0);
            (sent.len(), sums)
        })
    }

    /// The plain reference: sums per row.
    fn sums(changes: &[(Row, isize)]) -> BTreeMap<Row, isize> {
        let mut sums = BTreeMap::new();
        for (row, diff) in changes {
            *sums.entry(row.clone()).or_insert(0) += diff;
        }
        sums.retain(|_, n| *n != 0);
        sums
    }

    #[test]
    fn repeated_rows_are_sent_once_with_their_count() {
        // Fewer rows than the ring holds, and many more.
        for n in [3, 1000] {
            let changes: Vec<(Row, isize)> = (0..n)
                .map(|i| {
                    (
                        vec![Value::Int(i % 7), Value::str("k")],
                        if i % 5 == 0 { -1 } else { 1 },
                    )
                })
                .collect();
            let (updates, got) = combined(changes.clone());
            assert_eq!(got, sums(&changes));
            assert!(updates <= 7, "{updates} updates for 7 distinct rows");
        }
    }

    #[test]
    fn distinct_rows_switch_combining_off_early_and_lose_nothing() {
        // Past EARLY distinct rows, then repeats of a few.
        let n = EARLY as i64 + 1000;
        let changes: Vec<(Row, isize)> = (0..n)
            .map(|i| (vec![Value::Int(i)], 1))
            .chain((0..500).map(|i| (vec![Value::Int(i % 3)], 1)))
            .collect();
        let (updates, got) = combined(changes.clone());
        assert_eq!(got, sums(&changes));
        assert!(
            updates > EARLY + 1400,
            "combining went on past {EARLY} distinct rows: {updates} updates"
        );
    }

    #[test]
    fn rows_that_repeat_too_little_switch_combining_off_when_the_table_fills() {
        // Every third row repeats the one before: plenty for the early
        // look, too few (1.5 times each) once MAX_HELD are held.
        let n = MAX_HELD as i64 + 1000;
        let changes: Vec<(Row, isize)> = (0..n)
            .flat_map(|i| {
                let row = vec![Value::Int(i)];
                let times = if i % 2 == 0 { 2 } else { 1 };
                std::iter::repeat_n((row, 1), times)
            })
            .chain((0..500).map(|i| (vec![Value::Int(i % 3)], 1)))
            .collect();
        let (updates, got) = combined(changes.clone());
        assert_eq!(got, sums(&changes));
        assert!(
            (MAX_HELD..MAX_HELD + 2000).contains(&(updates - 1500)),
            "combining should go on to {MAX_HELD} rows held, then stop: {updates} updates"
        );
    }
}
