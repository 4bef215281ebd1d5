//! Verification of a table version against a from-scratch batch run: the
//! engine's central promise (stream == batch), as a check users can run on
//! their own deployments.
//!
//! It reads each input topic from its earliest offset up to exactly the
//! offsets the version has applied, turns the records into the same input
//! collections the stream runner built (changelog topics as tables), runs the
//! job's dataflow on them in one epoch, and compares every output with the
//! version's table, row by row and multiplicity by multiplicity.
//!
//! Across processes it is one run: every worker reads whole partitions by
//! global worker index, the first process says which offsets to stop at
//! (it read them from the table store) and gathers the outputs, which it
//! alone compares with the tables.

use std::collections::BTreeMap;
use std::sync::Arc;

use differential_dataflow::consolidation::consolidate;

use super::memory::compute_on_worker;
use super::stream::describe_reads;
use super::{OutputRows, RunError, WorkerConfig, cluster};
use crate::job::{Plan, Updates};
use crate::source::topic::{PartitionSource, TopicInput};
use crate::source::{BadRows, ReadOptions};
use crate::value::Row;

/// How one output compares.
#[derive(Debug)]
pub struct OutputCheck {
    /// The output compared.
    pub output: String,
    /// Rows (with multiplicity) in the table.
    pub table_rows: u64,
    /// Rows the batch recomputation gives.
    pub expected_rows: u64,
    /// Rows the table holds more copies of than the recomputation gives:
    /// the first few, each with the surplus.
    pub only_in_table: Vec<(Row, isize)>,
    /// Rows the recomputation gives more copies of than the table holds:
    /// the first few, each with the shortfall.
    pub only_expected: Vec<(Row, isize)>,
    /// Total rows (by multiplicity) that differ on each side.
    pub differing: (u64, u64),
    /// A digest of the table's content (FNV-1a over the sorted rows).
    pub digest: u64,
}

impl OutputCheck {
    /// Whether the table holds exactly the recomputed rows.
    pub fn identical(&self) -> bool {
        self.differing == (0, 0)
    }
}

/// Offsets per input name and partition: where a version's reading stopped.
pub type Offsets = BTreeMap<(String, u32), u64>;

/// A recomputation of a version's outputs from the log: its job's plan,
/// the topics it read, and how.
pub struct Recompute {
    /// The plan of the job that built the version.
    pub plan: Plan,
    /// Its inputs' topics, in spec order.
    pub inputs: Vec<TopicInput>,
    /// How records are read: the null marker and the bad-record policy.
    pub options: ReadOptions,
    /// The workers to run on (across processes in a cluster run).
    pub workers: WorkerConfig,
    /// The job, its version and parameters, one fact per line: every
    /// process of a cluster run must say the same.
    pub fingerprint: String,
}

/// What a recomputation gives.
#[derive(Debug)]
pub struct Recomputed {
    /// Per output, the rows with their multiplicities, sorted; held by the
    /// first process of a cluster run (the others' are empty).
    pub outputs: Vec<OutputRows>,
    /// The bad records skipped by every worker.
    pub bad_rows: BadRows,
}

/// One worker's word to all after reading its partitions.
#[derive(serde::Serialize, serde::Deserialize)]
struct ReadReport {
    /// Why its reading failed.
    failure: Option<String>,
    bad_rows: BadRows,
    /// Its consolidated rows all have positive counts.
    inserts_only: bool,
}

impl Recompute {
    /// Reads every input up to `offsets` (the first process' word: the
    /// others pass `None` and take it from there) and recomputes the
    /// plan's outputs. Every worker reads whole partitions, by global
    /// worker index; a failure anywhere fails every process, each with
    /// the first failing worker's error (its own, or the process' name).
    pub fn run(self, offsets: Option<Offsets>) -> Result<Recomputed, RunError> {
        let shared = Arc::new((self, offsets));
        let worker_shared = shared.clone();
        let results = shared
            .0
            .workers
            .run(move |worker| worker_shared.0.work(worker, worker_shared.1.as_ref()))?;
        if results.iter().any(Result::is_err) {
            // The first failing worker's own error, where it ran here.
            let (own, peers): (Vec<_>, Vec<_>) = results
                .into_iter()
                .filter_map(Result::err)
                .partition(|e| !matches!(e, RunError::Peer { .. }));
            return Err(own.into_iter().chain(peers).next().expect("an error"));
        }
        let mut outputs: Vec<OutputRows> = vec![Vec::new(); shared.0.plan.outputs.len()];
        let mut bad_rows = BadRows::default();
        for (mine, every_workers_bad_rows) in results.into_iter().flatten() {
            for (all, rows) in outputs.iter_mut().zip(mine) {
                all.extend(rows);
            }
            bad_rows = every_workers_bad_rows;
        }
        outputs.iter_mut().for_each(consolidate);
        Ok(Recomputed { outputs, bad_rows })
    }

    /// One worker's part: agree, take the offsets, read its partitions,
    /// tell every worker how that went, and run the dataflow (the outputs
    /// gathered on the first process). Returns the outputs collected here
    /// and every worker's bad rows.
    fn work(
        &self,
        worker: &mut timely::worker::Worker,
        offsets: Option<&Offsets>,
    ) -> Result<(Vec<OutputRows>, BadRows), RunError> {
        let w = &self.workers;
        cluster::agree(worker, &self.fingerprint(), w.threads)?;
        let offsets = self.offsets_from_first(worker, offsets)?;
        let read = self.read_partitions(worker.index(), worker.peers(), &offsets);
        let report = match &read {
            Ok((rows, bad)) => ReadReport {
                failure: None,
                bad_rows: bad.clone(),
                inserts_only: rows.iter().flatten().all(|(_, n)| *n > 0),
            },
            Err(e) => ReadReport {
                failure: Some(e.to_string()),
                bad_rows: BadRows::default(),
                inserts_only: false,
            },
        };
        let reports = cluster::all_gather(worker, &report)?;
        if let Some(first) = reports.iter().position(|r| r.failure.is_some()) {
            return Err(match (first == worker.index(), read) {
                (true, Err(e)) => e,
                _ => RunError::Peer {
                    process: first / w.threads,
                    message: reports[first].failure.clone().unwrap_or_default(),
                },
            });
        }
        let (rows, _) = read?;
        let mut bad_rows = BadRows::default();
        reports
            .iter()
            .for_each(|r| bad_rows.merge(r.bad_rows.clone()));
        // Consolidated tables only insert, which lets the batch operators run.
        let updates = match reports.iter().all(|r| r.inserts_only) {
            true => Updates::InsertOnly,
            false => Updates::Any,
        };
        let inputs = rows
            .into_iter()
            .map(|rows| rows.into_iter().map(|(row, n)| (row, 0, n)))
            .collect();
        let gather = (w.processes > 1).then_some(w.threads);
        let outputs = compute_on_worker(worker, &self.plan, updates, inputs, gather)?;
        Ok((outputs, bad_rows))
    }

    /// The offsets as the first process read them from the table store.
    fn offsets_from_first(
        &self,
        worker: &mut timely::worker::Worker,
        offsets: Option<&Offsets>,
    ) -> Result<Offsets, RunError> {
        // JSON maps need text keys: the offsets travel as a list.
        let mine: Option<Vec<((String, u32), u64)>> = match worker.index() {
            0 => offsets.map(|o| o.clone().into_iter().collect()),
            _ => None,
        };
        let first = cluster::all_gather(worker, &mine)?
            .into_iter()
            .next()
            .flatten();
        let offsets = first.ok_or_else(|| {
            RunError::Cluster("the first process did not say which offsets to verify".into())
        })?;
        Ok(offsets.into_iter().collect())
    }

    /// Reads this worker's partitions (entry `k` of every input's
    /// partitions in order goes to worker `k % peers`) from their earliest
    /// offset up to `offsets`, consolidated per input.
    fn read_partitions(
        &self,
        index: usize,
        peers: usize,
        offsets: &Offsets,
    ) -> Result<(Vec<OutputRows>, BadRows), RunError> {
        let mut bad = BadRows::default();
        let mut collections: Vec<OutputRows> = vec![Vec::new(); self.inputs.len()];
        let partitions = self
            .inputs
            .iter()
            .enumerate()
            .flat_map(|(i, input)| (0..input.partitions).map(move |p| (i, p)));
        for (i, p) in partitions.skip(index).step_by(peers) {
            let input = &self.inputs[i];
            let until = offsets
                .get(&(input.schema.name.clone(), p))
                .copied()
                .unwrap_or(0);
            let projection = self.plan.inputs[i].clone();
            let mut part = PartitionSource::open(input, p, projection)?;
            let rows = &mut collections[i];
            while part.position() < until {
                let n = part.read(
                    1 << 16,
                    Some(until),
                    &self.options,
                    &mut bad,
                    &mut |row, diff| rows.push((std::mem::take(row), diff)),
                )?;
                if n == 0 {
                    return Err(RunError::Replay(format!(
                        "topic {} partition {p}: the log holds records up to offset {}, but the version applied up to {until}",
                        input.log.name(),
                        part.position()
                    )));
                }
            }
        }
        collections.iter_mut().for_each(consolidate);
        Ok((collections, bad))
    }

    /// What this worker is about to recompute, one fact per line.
    fn fingerprint(&self) -> String {
        let w = &self.workers;
        format!(
            "{}\nworkers {} x {} processes\n{}\nread options {:?}",
            self.fingerprint,
            w.threads,
            w.processes,
            describe_reads(&self.inputs, &self.plan),
            self.options
        )
    }
}

/// Compares a table's rows with the expected rows (both sorted and consolidated).
pub fn compare(output: &str, table: &[(Row, isize)], expected: &[(Row, isize)]) -> OutputCheck {
    // A table holds what was written: booleans, dates and timestamps as text.
    let stored = |r: &Row| r.iter().map(|v| v.stored().into_owned()).collect::<Row>();
    let mut diff: Vec<(Row, isize)> = table.iter().map(|(r, n)| (stored(r), *n)).collect();
    diff.extend(expected.iter().map(|(r, n)| (stored(r), -n)));
    consolidate(&mut diff);
    let only_in_table: Vec<_> = diff.iter().filter(|(_, n)| *n > 0).cloned().collect();
    let only_expected: Vec<_> = diff
        .iter()
        .filter(|(_, n)| *n < 0)
        .map(|(r, n)| (r.clone(), -n))
        .collect();
    let count = |rows: &[(Row, isize)]| rows.iter().map(|(_, n)| *n as u64).sum::<u64>();
    OutputCheck {
        output: output.to_string(),
        table_rows: count(table),
        expected_rows: count(expected),
        differing: (count(&only_in_table), count(&only_expected)),
        only_in_table: only_in_table.into_iter().take(5).collect(),
        only_expected: only_expected.into_iter().take(5).collect(),
        digest: digest(table),
    }
}

/// FNV-1a over the rows' text, for a short fingerprint of a table's content.
fn digest(rows: &[(Row, isize)]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for (row, n) in rows {
        let line = format!("{row:?}x{n}\n");
        for b in line.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x100000001b3);
        }
    }
    h
}
