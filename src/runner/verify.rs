//! Verification of a table version against a from-scratch batch run: the
//! engine's central promise (stream == batch), as a check users can run on
//! their own deployments.
//!
//! It reads each input topic from its earliest offset up to exactly the
//! offsets the version has applied, turns the records into the same input
//! collections the stream runner built (changelog topics as tables), runs the
//! job's dataflow on them in one epoch, and compares every output with the
//! version's table, row by row and multiplicity by multiplicity.

use std::collections::BTreeMap;

use differential_dataflow::consolidation::consolidate;

use super::memory::run_projected;
use super::{OutputRows, RunError};
use crate::job::Plan;
use crate::log::{Log, Start};
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

/// Reads `inputs` up to `offsets` (per input name and partition) and
/// recomputes the plan's outputs.
pub fn recompute(
    log: &Log,
    plan: &Plan,
    inputs: &[TopicInput],
    offsets: &BTreeMap<(String, u32), u64>,
    options: &ReadOptions,
    workers: usize,
) -> Result<(Vec<OutputRows>, BadRows), RunError> {
    let mut bad = BadRows::default();
    let mut collections = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        let mut rows: Vec<(Row, isize)> = Vec::new();
        for p in 0..input.partitions {
            let until = offsets
                .get(&(input.schema.name.clone(), p))
                .copied()
                .unwrap_or(0);
            let mut part =
                PartitionSource::open(log, input, p, plan.inputs[i].clone(), Start::Earliest)?;
            while part.position() < until {
                let n = part.read(1 << 16, Some(until), options, &mut bad, &mut |row, diff| {
                    rows.push((row, diff))
                })?;
                if n == 0 {
                    return Err(RunError::Replay(format!(
                        "topic {} partition {p}: the log holds records up to offset {}, but the version applied up to {until}",
                        input.topic,
                        part.position()
                    )));
                }
            }
        }
        consolidate(&mut rows);
        collections.push(rows);
    }
    Ok((run_projected(plan, collections, workers)?, bad))
}

/// Compares a table's rows with the expected rows (both sorted and consolidated).
pub fn compare(output: &str, table: &[(Row, isize)], expected: &[(Row, isize)]) -> OutputCheck {
    let mut diff: Vec<(Row, isize)> = table.to_vec();
    diff.extend(expected.iter().map(|(r, n)| (r.clone(), -n)));
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
