//! Worker 0's side of a stream run's commit: gathers each epoch's output
//! changes (each worker's sorted runs, `outputs::sorted_runs`) and the
//! workers' reports as they arrive (in any order, from any process) and
//! releases every complete epoch, in order, its runs merged, for the
//! committer (which runs on its own thread: see `runner/commit.rs`).
//!
//! Invariants:
//! - an epoch is released only once `complete(epoch)` holds (the dataflow's
//!   frontier has passed it on both the changes and the reports), so it
//!   holds every change made at that time and every worker's report of it;
//! - epochs are released in order, each once, including empty ones (the
//!   committer checks the deployment's state between epochs);
//! - after a failure report, or `halt`, nothing more is released: a failed
//!   worker's closed inputs seem to complete every later epoch.

use std::collections::BTreeMap;
use std::time::Instant;

use super::commit::{EpochReport, LastRecord};
use super::order::{SortedRun, merge_runs};
use super::outputs::OutputRun;
use crate::job::Time;
use crate::table::{InputOffset, StatePiece};
use crate::value::Row;

/// The workers' reports of one epoch, merged.
#[derive(Debug, Default)]
pub struct EpochLog {
    /// Where each partition stands at the epoch's end.
    pub offsets: Vec<InputOffset>,
    /// The last record read on each partition that was read.
    pub last_records: Vec<LastRecord>,
    /// Records read in the epoch.
    pub records: u64,
    /// `(input, partition, late events dropped in total)`.
    pub late: Vec<(String, u32, u64)>,
    /// Bad rows skipped in the epoch.
    pub bad_rows: u64,
    /// When the first report arrived (about when the first worker closed it).
    pub closed: Option<Instant>,
    /// What the epoch's records changed in their partitions' state, for the
    /// checkpoint (in epoch order, once epochs are absorbed).
    pub state: Vec<StatePiece>,
}

/// One complete epoch, ready to commit.
#[derive(Debug)]
pub struct Epoch {
    /// Its time.
    pub time: Time,
    /// The workers' reports.
    pub log: EpochLog,
    /// Per output (plan order), its changes, consolidated: each distinct
    /// row once, with a non-zero diff, in `Row`'s order.
    pub outputs: Vec<Vec<(Row, isize)>>,
}

impl Epoch {
    /// Whether the epoch changes no output.
    pub fn is_unchanged(&self) -> bool {
        self.outputs.iter().all(Vec::is_empty)
    }

    /// Output changes it holds, over all outputs.
    pub fn changes(&self) -> usize {
        self.outputs.iter().map(Vec::len).sum()
    }

    /// Takes in the next epoch, `later`, so that committing the result is
    /// committing both in one transaction: each output's changes added up
    /// (a group updated in both is written once, a row added in one and
    /// removed in the other not at all), each partition where `later` left
    /// it. The time is `later`'s, the close time the earlier one's.
    pub fn absorb(&mut self, later: Epoch) {
        debug_assert!(later.time > self.time, "epochs are absorbed in order");
        self.time = later.time;
        self.log.absorb(later.log);
        for (mine, theirs) in self.outputs.iter_mut().zip(later.outputs) {
            *mine = merge_runs(vec![
                SortedRun::sorted(std::mem::take(mine)),
                SortedRun::sorted(theirs),
            ]);
        }
    }
}

impl EpochLog {
    /// `later`'s positions, last records and late totals replace this
    /// log's for the same partition; counts add up.
    fn absorb(&mut self, later: EpochLog) {
        replace_or_add(&mut self.offsets, later.offsets, |a, b| {
            (&a.input, a.partition) == (&b.input, b.partition)
        });
        replace_or_add(&mut self.last_records, later.last_records, |a, b| {
            (&a.input, a.partition) == (&b.input, b.partition)
        });
        replace_or_add(&mut self.late, later.late, |a, b| {
            (&a.0, a.1) == (&b.0, b.1)
        });
        self.records += later.records;
        self.bad_rows += later.bad_rows;
        self.closed = self.closed.or(later.closed);
        self.state.extend(later.state);
    }
}

/// Each of `later` replaces the entry of `list` that is `same` as it, or
/// is added (lists of one entry per partition: a handful).
fn replace_or_add<T>(list: &mut Vec<T>, later: Vec<T>, same: impl Fn(&T, &T) -> bool) {
    for new in later {
        match list.iter_mut().find(|old| same(old, &new)) {
            Some(old) => *old = new,
            None => list.push(new),
        }
    }
}

/// The epochs not released yet.
#[derive(Debug)]
pub struct Gatherer {
    /// The next epoch to release.
    next: Time,
    /// The plan's output count.
    outputs: usize,
    /// The workers' runs received, by epoch.
    stash: BTreeMap<Time, Vec<OutputRun>>,
    /// Reports received, by epoch, merged.
    logs: BTreeMap<Time, EpochLog>,
    /// Epoch 0's changes are kept (see [`Gatherer::new`]).
    keep_replay: bool,
    /// Nothing more is released.
    halted: bool,
}

impl Gatherer {
    /// A gatherer from epoch 0. Epoch 0 is the replay of what the tables
    /// already hold, so its changes are dropped as they arrive, unless
    /// `keep_replay` (a deployment that never committed: its output over
    /// no input is its first commit).
    pub fn new(outputs: usize, keep_replay: bool) -> Gatherer {
        Gatherer {
            next: 0,
            outputs,
            stash: BTreeMap::new(),
            logs: BTreeMap::new(),
            keep_replay,
            halted: false,
        }
    }

    /// Takes in runs that arrived, each with its epoch (and lets go of
    /// them in `runs`). Epoch 0's are dropped unless the replay is kept.
    pub fn stash(&mut self, runs: &mut Vec<(Time, OutputRun)>) {
        if self.halted {
            runs.clear();
            return;
        }
        let keep_replay = self.keep_replay;
        for (time, run) in runs.drain(..) {
            if time > 0 || keep_replay {
                self.stash.entry(time).or_default().push(run);
            }
        }
    }

    /// Takes in a worker's report of epoch `time`. A failure halts the
    /// gatherer: it is returned, with the worker, for the run to report.
    pub fn receive(&mut self, time: Time, report: EpochReport) -> Option<(usize, String)> {
        let log = self.logs.entry(time).or_default();
        log.offsets.extend(report.offsets);
        log.last_records.extend(report.last_records);
        log.records += report.records;
        log.late.extend(report.late);
        log.bad_rows += report.bad_rows;
        log.state.extend(report.state);
        log.closed.get_or_insert_with(Instant::now);
        let failure = report.failure?;
        self.halt();
        Some((report.worker, failure))
    }

    /// Releases nothing more, and lets go of what it holds.
    pub fn halt(&mut self) {
        self.halted = true;
        self.stash.clear();
        self.logs.clear();
    }

    /// The next epoch, if it is complete (`complete(t)` tells whether the
    /// frontier has passed epoch `t`) and something was received for it or
    /// after it. Its runs (each worker's changes, sorted there) are merged
    /// here, on the worker, so that the committer's thread only writes: an
    /// epoch of a projection holds as many changes as it read records.
    pub fn ready(&mut self, complete: impl Fn(Time) -> bool) -> Option<Epoch> {
        let last = self.logs.keys().next_back().copied().unwrap_or(0);
        let last = last.max(self.stash.keys().next_back().copied().unwrap_or(0));
        if self.halted || self.next > last || !complete(self.next) {
            return None;
        }
        let time = self.next;
        self.next += 1;
        let mut runs: Vec<Vec<SortedRun>> = (0..self.outputs).map(|_| Vec::new()).collect();
        for (i, rows) in self.stash.remove(&time).unwrap_or_default() {
            // The replay's runs are not sorted (`outputs::runs_of`).
            runs[i].push(match time {
                0 => SortedRun::new(rows),
                _ => SortedRun::sorted(rows),
            });
        }
        Some(Epoch {
            time,
            log: self.logs.remove(&time).unwrap_or_default(),
            outputs: runs.into_iter().map(merge_runs).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::outputs::{OutputChange, TaggedChange, runs_of};
    use crate::value::Value;

    fn change(time: Time, v: i64) -> OutputChange {
        ((0, vec![Value::Int(v)]), time, 1)
    }

    /// What one worker sends of `changes` to a gatherer of `outputs`.
    fn sent(outputs: usize, changes: Vec<OutputChange>) -> Vec<(Time, OutputRun)> {
        let mut by_time: BTreeMap<Time, Vec<TaggedChange>> = BTreeMap::new();
        for (change, time, diff) in changes {
            by_time.entry(time).or_default().push((change, diff));
        }
        let runs = by_time
            .into_iter()
            .map(|(t, c)| (t, runs_of(t, outputs, c)));
        runs.flat_map(|(t, runs)| runs.into_iter().map(move |r| (t, r)))
            .collect()
    }

    #[test]
    fn consolidates_each_output() {
        let mut g = Gatherer::new(2, false);
        let row = |v: i64| vec![Value::Int(v)];
        // Two workers' runs: each consolidated on its worker, then merged.
        g.stash(&mut sent(
            2,
            vec![
                ((1, row(2)), 1, 1),
                ((0, row(3)), 1, 1),
                ((1, row(1)), 1, 2),
                ((1, row(4)), 1, 1),
            ],
        ));
        g.stash(&mut sent(
            2,
            vec![
                ((1, row(2)), 1, -1),
                ((0, row(3)), 1, 1),
                ((1, row(0)), 1, 1),
            ],
        ));
        g.receive(1, report(0, 5));
        g.ready(|_| true).expect("epoch 0");
        let e1 = g.ready(|_| true).expect("epoch 1");
        let expected = vec![(row(0), 1), (row(1), 2), (row(4), 1)];
        assert_eq!(e1.outputs, vec![vec![(row(3), 2)], expected]);
    }

    fn report(worker: usize, records: u64) -> EpochReport {
        EpochReport {
            worker,
            records,
            ..EpochReport::default()
        }
    }

    #[test]
    fn releases_complete_epochs_in_order_with_their_changes_and_reports() {
        let mut g = Gatherer::new(1, false);
        g.stash(&mut sent(
            1,
            vec![change(2, 20), change(1, 10), change(0, 0)],
        ));
        g.receive(1, report(0, 3));
        g.receive(2, report(1, 4));
        // Nothing before the frontier passes epoch 0.
        assert!(g.ready(|_| false).is_none());
        let e0 = g.ready(|t| t < 2).expect("epoch 0");
        assert!(e0.is_unchanged(), "the replay's changes are dropped");
        let e1 = g.ready(|t| t < 2).expect("epoch 1");
        assert_eq!((e1.time, e1.log.records), (1, 3));
        assert_eq!(e1.outputs, vec![vec![(vec![Value::Int(10)], 1)]]);
        assert!(g.ready(|t| t < 2).is_none(), "epoch 2 is not complete");
        let e2 = g.ready(|_| true).expect("epoch 2");
        assert_eq!((e2.time, e2.log.records), (2, 4));
        assert!(
            g.ready(|_| true).is_none(),
            "nothing received beyond epoch 2"
        );
    }

    #[test]
    fn a_first_deployment_keeps_the_replay() {
        let mut g = Gatherer::new(1, true);
        // The replay's runs come unsorted: the gatherer sorts them.
        g.stash(&mut sent(1, vec![change(0, 2), change(0, 1), change(0, 2)]));
        let e0 = g.ready(|_| true).expect("epoch 0");
        let row = |v: i64| vec![Value::Int(v)];
        assert_eq!(e0.outputs, vec![vec![(row(1), 1), (row(2), 2)]]);
    }

    fn offset(partition: u32, next: u64) -> InputOffset {
        InputOffset {
            input: "input".into(),
            topic: "t".into(),
            partition,
            next,
            last: Some((next - 1, 7)),
        }
    }

    #[test]
    fn an_absorbed_epoch_adds_up_changes_and_moves_partitions_on() {
        let group = |k: &str, n: i64| vec![Value::str(k), Value::Int(n)];
        let first = Instant::now();
        let mut merged = Epoch {
            time: 1,
            log: EpochLog {
                offsets: vec![offset(0, 10), offset(1, 5)],
                records: 15,
                late: vec![("input".into(), 0, 2)],
                bad_rows: 1,
                closed: Some(first),
                ..EpochLog::default()
            },
            outputs: vec![vec![(group("a", 1), 1), (group("b", 2), 1)], vec![]],
        };
        let later = Epoch {
            time: 2,
            log: EpochLog {
                offsets: vec![offset(1, 9), offset(2, 4)],
                records: 8,
                late: vec![("input".into(), 0, 3)],
                bad_rows: 2,
                closed: Some(Instant::now()),
                ..EpochLog::default()
            },
            outputs: vec![
                vec![(group("b", 2), -1), (group("b", 5), 1), (group("c", 1), 1)],
                vec![(group("x", 0), 2)],
            ],
        };
        merged.absorb(later);
        assert_eq!(merged.time, 2);
        assert_eq!(
            merged.outputs,
            vec![
                vec![(group("a", 1), 1), (group("b", 5), 1), (group("c", 1), 1)],
                vec![(group("x", 0), 2)],
            ],
            "b's first count is written by neither"
        );
        assert_eq!(merged.changes(), 4);
        assert_eq!(
            merged.log.offsets,
            vec![offset(0, 10), offset(1, 9), offset(2, 4)]
        );
        assert_eq!(merged.log.late, vec![("input".to_string(), 0, 3)]);
        assert_eq!((merged.log.records, merged.log.bad_rows), (23, 3));
        assert_eq!(
            merged.log.closed,
            Some(first),
            "the wait counts from the first"
        );
    }

    #[test]
    fn a_failure_report_releases_nothing_more() {
        let mut g = Gatherer::new(1, false);
        g.stash(&mut sent(1, vec![change(1, 10)]));
        g.receive(0, report(0, 1));
        let failed = EpochReport {
            failure: Some("disk on fire".into()),
            ..report(1, 0)
        };
        assert_eq!(g.receive(1, failed), Some((1, "disk on fire".into())));
        assert!(g.ready(|_| true).is_none());
        g.stash(&mut sent(1, vec![change(2, 20)]));
        assert!(g.ready(|_| true).is_none());
    }
}
