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
//! fills up without rows having repeated enough, it flushes and switches
//! itself off for the rest of the input. Rows are held as inline
//! [`Key`]s, so that a probe does not follow a pointer per row.

use std::collections::HashMap;

use differential_dataflow::input::InputSession;

use crate::job::Time;
use crate::value::{Key, Row};

/// Distinct rows held before they are flushed to the dataflow.
const MAX_HELD: usize = 1 << 18;
/// Combining goes on after a flush only if rows repeated at least this many
/// times on average since the previous one.
const MIN_REPEAT: usize = 2;

/// Counts identical rows of one input on one worker.
pub struct Combiner {
    held: HashMap<Key, isize, foldhash::fast::FixedState>,
    /// Rows pushed since the last flush.
    seen: usize,
    enabled: bool,
}

impl Default for Combiner {
    fn default() -> Self {
        Combiner {
            held: HashMap::with_hasher(foldhash::fast::FixedState::default()),
            seen: 0,
            enabled: true,
        }
    }
}

impl Combiner {
    /// Adds a row, passing it straight on once combining is off. The row is
    /// taken only when it must be kept; a repeated row is left to be reused.
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
        match self.held.get_mut(row.as_slice()) {
            Some(n) => *n += diff,
            None => {
                self.held.insert(row.drain(..).collect(), diff);
            }
        }
        self.seen += 1;
        if self.held.len() >= MAX_HELD {
            self.enabled = self.seen >= MIN_REPEAT * self.held.len();
            self.seen = 0;
            self.flush(session);
        }
    }

    /// Sends every held row, with its count.
    pub fn flush(&mut self, session: &mut InputSession<Time, Row, isize>) {
        for (row, n) in self.held.drain().filter(|(_, n)| *n != 0) {
            session.update(row.into_vec(), n);
        }
    }
}
