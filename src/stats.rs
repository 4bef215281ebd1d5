//! Exchange statistics (`kappa run --stats`): how many records each worker
//! received at each exchange of a dataflow (each join side, each group-by),
//! and the imbalance, max / mean.
//!
//! Counting is opt-in per run. The runner installs a [`Recorder`] on each
//! worker thread while the dataflow is built ([`install`]); operators ask
//! [`counter`] for a counter and add a counting step only when one is
//! installed, so a run without `--stats` builds no extra operator.
//!
//! Counts are taken on the sending side, from the exchange's own routing:
//! the worker a record goes to is a pure function of the record (timely
//! sends a record to `hash & (peers - 1)` for a power-of-two worker count,
//! else `hash % peers`), so summing over senders gives exactly what each
//! worker receives, without changing the exchange. A record counts once per
//! update (a row with multiplicity 3 sent as one update counts 1).
//!
//! Invariant: every worker builds the same dataflow in the same order, so
//! the n-th counter asked for on each worker is the same exchange.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use differential_dataflow::VecCollection;

use crate::job::Time;

/// Where an exchange sends a record.
#[derive(Clone, Copy, Debug)]
pub enum Dest {
    /// To the worker chosen by this routing hash.
    Hash(u64),
    /// Nowhere: it stays on the worker that has it (a local arrangement).
    Local,
    /// To every worker (a broadcast).
    All,
}

/// One exchange's counts.
#[derive(Debug)]
pub struct ExchangeCounts {
    /// What the exchange is, as the report shows it (`join left (shuffle)`).
    pub name: String,
    received: Vec<AtomicU64>,
}

impl ExchangeCounts {
    /// Records received per worker.
    pub fn received(&self) -> Vec<u64> {
        self.received
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }

    /// Max / mean of the records received per worker (1.0 when none).
    pub fn imbalance(&self) -> f64 {
        imbalance(&self.received())
    }
}

/// Max / mean of `counts` (1.0 when all are zero).
pub fn imbalance(counts: &[u64]) -> f64 {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return 1.0;
    }
    let max = counts.iter().copied().max().unwrap_or(0);
    max as f64 * counts.len() as f64 / total as f64
}

/// The counters of one run, shared by its workers.
#[derive(Debug, Default)]
pub struct Recorder {
    exchanges: Mutex<Vec<Arc<ExchangeCounts>>>,
}

impl Recorder {
    /// Every exchange counted, in the order the dataflow built them.
    pub fn exchanges(&self) -> Vec<Arc<ExchangeCounts>> {
        self.exchanges.lock().expect("stats poisoned").clone()
    }

    /// Records received per worker, per exchange (build order): what a
    /// process of a cluster run reports to the first one.
    pub fn received(&self) -> Vec<Vec<u64>> {
        self.exchanges().iter().map(|e| e.received()).collect()
    }

    /// Adds another process' counts ([`Recorder::received`]) to these:
    /// every process builds the same exchanges in the same order.
    pub fn absorb(&self, other: &[Vec<u64>]) {
        for (mine, theirs) in self.exchanges().iter().zip(other) {
            for (counter, n) in mine.received.iter().zip(theirs) {
                counter.fetch_add(*n, Ordering::Relaxed);
            }
        }
    }

    /// A table for stderr: exchange, records per worker, max / mean.
    pub fn table(&self) -> String {
        let exchanges = self.exchanges();
        let width = exchanges
            .iter()
            .map(|e| e.name.len())
            .max()
            .unwrap_or(0)
            .max(8);
        let mut s = format!(
            "{:<width$}  {:>12}  {:>9}  received per worker\n",
            "exchange", "records", "max/mean"
        );
        for e in &exchanges {
            let counts = e.received();
            let total: u64 = counts.iter().sum();
            let per: Vec<String> = counts.iter().map(u64::to_string).collect();
            s.push_str(&format!(
                "{:<width$}  {:>12}  {:>9.3}  {}\n",
                e.name,
                total,
                imbalance(&counts),
                per.join(" ")
            ));
        }
        s
    }
}

thread_local! {
    /// This worker's recorder and the number of counters it has handed out.
    static CURRENT: RefCell<Option<(Arc<Recorder>, usize)>> = const { RefCell::new(None) };
}

/// Keeps a recorder installed on this thread; uninstalls it when dropped.
pub struct Installed(());

impl Drop for Installed {
    fn drop(&mut self) {
        CURRENT.with(|c| *c.borrow_mut() = None);
    }
}

/// Installs `recorder` on this (worker) thread until the guard is dropped:
/// dataflows built meanwhile count their exchanges into it.
pub fn install(recorder: Arc<Recorder>) -> Installed {
    CURRENT.with(|c| *c.borrow_mut() = Some((recorder, 0)));
    Installed(())
}

/// The counter for the next exchange built on this worker, or `None` when
/// no recorder is installed (then no counting step must be built).
pub fn counter(name: &str, peers: usize) -> Option<Arc<ExchangeCounts>> {
    CURRENT.with(|c| {
        let mut current = c.borrow_mut();
        let (recorder, next) = current.as_mut()?;
        let mut all = recorder.exchanges.lock().expect("stats poisoned");
        if all.len() <= *next {
            all.push(Arc::new(ExchangeCounts {
                name: name.to_string(),
                received: (0..peers).map(|_| AtomicU64::new(0)).collect(),
            }));
        }
        let counts = all[*next].clone();
        *next += 1;
        Some(counts)
    })
}

/// Counts, when stats are on, where each record of `collection` goes at the
/// exchange named `name` (`route` gives the exchange's routing for a record);
/// returns the collection unchanged. Without stats this builds nothing.
pub fn count_exchange<'s, D, R>(
    collection: VecCollection<'s, Time, D, R>,
    name: &str,
    route: impl Fn(&D) -> Dest + 'static,
) -> VecCollection<'s, Time, D, R>
where
    D: differential_dataflow::Data,
    R: differential_dataflow::difference::Semigroup + 'static,
{
    let scope = collection.inner.scope();
    let (index, peers) = (scope.index(), scope.peers());
    let Some(counts) = counter(name, peers) else {
        return collection;
    };
    let mut local = vec![0u64; peers];
    collection.inspect_batch(move |_stamp, batch| {
        for (d, _, _) in batch {
            match route(d) {
                Dest::Hash(h) => local[destination(h, peers)] += 1,
                Dest::Local => local[index] += 1,
                Dest::All => local.iter_mut().for_each(|n| *n += 1),
            }
        }
        for (n, c) in local.iter_mut().zip(&counts.received) {
            if *n > 0 {
                c.fetch_add(std::mem::take(n), Ordering::Relaxed);
            }
        }
    })
}

/// The worker timely's exchange sends routing hash `h` to.
pub fn destination(h: u64, peers: usize) -> usize {
    if peers.is_power_of_two() {
        (h & (peers as u64 - 1)) as usize
    } else {
        (h % peers as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imbalance_is_max_over_mean() {
        assert_eq!(imbalance(&[5, 5]), 1.0);
        assert_eq!(imbalance(&[10, 0]), 2.0);
        assert_eq!(imbalance(&[0, 0, 0]), 1.0);
        assert!((imbalance(&[6, 4]) - 1.2).abs() < 1e-12);
    }

    #[test]
    fn counters_are_shared_by_build_order() {
        let recorder = Arc::new(Recorder::default());
        for _worker in 0..2 {
            let _guard = install(recorder.clone());
            let a = counter("a", 2).unwrap();
            let b = counter("b", 2).unwrap();
            a.received[0].fetch_add(1, Ordering::Relaxed);
            b.received[1].fetch_add(2, Ordering::Relaxed);
        }
        assert!(counter("none", 2).is_none());
        let all = recorder.exchanges();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].received(), [2, 0]);
        assert_eq!(all[1].received(), [0, 4]);
        assert!(recorder.table().contains("max/mean"));
    }
}
