//! The low watermarks stream workers announce (see
//! [`crate::job::Watermark`]), gathered by an operator that releases state:
//! per input, the bound on every event still to come, known once every
//! worker has announced one.
//!
//! An announcement is applied only once the operator's data input has
//! passed its epoch, so everything admitted before the watermark rose has
//! been applied first: state is never released while rows it could still
//! meet are on their way.

use std::collections::{BTreeMap, HashMap};

use crate::job::{Time, Watermark};

/// Announcements received, and the latest applied per input and worker.
#[derive(Debug)]
pub struct Announced {
    peers: usize,
    pending: BTreeMap<Time, Vec<Watermark>>,
    low: HashMap<usize, HashMap<usize, i64>>,
}

impl Announced {
    /// Nothing announced yet, by `peers` workers.
    pub fn new(peers: usize) -> Announced {
        Announced {
            peers,
            pending: BTreeMap::new(),
            low: HashMap::new(),
        }
    }

    /// Takes in announcements as they arrive.
    pub fn receive(&mut self, marks: impl IntoIterator<Item = Watermark>) {
        for mark in marks {
            self.pending.entry(mark.0).or_default().push(mark);
        }
    }

    /// Applies the announcements of the epochs `done` says the data has
    /// passed; whether any was applied.
    pub fn advance(&mut self, done: impl Fn(&Time) -> bool) -> bool {
        let mut applied = false;
        while let Some(entry) = self.pending.first_entry() {
            if !done(entry.key()) {
                break;
            }
            for (_, input, worker, at) in entry.remove() {
                self.low.entry(input).or_default().insert(worker, at);
            }
            applied = true;
        }
        applied
    }

    /// The time every event of `input` still to come has at least, once
    /// every worker has announced one.
    pub fn bound(&self, input: usize) -> Option<i64> {
        let lows = self.low.get(&input)?;
        (lows.len() == self.peers).then(|| *lows.values().min().expect("peers > 0"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_the_least_low_once_every_worker_announced() {
        let mut a = Announced::new(2);
        a.receive([(0, 0, 0, 50), (0, 1, 0, 7)]);
        assert!(!a.advance(|_| false), "epoch 0 is not done");
        assert!(a.advance(|t| *t == 0));
        assert_eq!(a.bound(0), None, "worker 1 has not announced");
        a.receive([(1, 0, 1, 40), (2, 0, 0, 90)]);
        a.advance(|t| *t <= 1);
        assert_eq!(a.bound(0), Some(40));
        assert_eq!(a.bound(1), None);
        a.advance(|t| *t <= 2);
        assert_eq!(a.bound(0), Some(40), "worker 1 still bounds it");
    }
}
