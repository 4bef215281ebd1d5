//! The exactly-once commit: one epoch's output changes, the input offsets
//! they cover, and the progress figures, in ONE SQLite transaction.
//!
//! After any crash the tables and the offsets agree: either the epoch is in
//! both or in neither, so a restarted runner that resumes reading at the
//! committed offsets (replaying the log below them to rebuild its state,
//! without writing) never applies an input twice and never skips one.
//!
//! Preconditions (the runner's side of the contract):
//! - the changes of each output are *consolidated*: each distinct row at
//!   most once, with a non-zero diff;
//! - they continue what was committed: a retraction never takes a row's
//!   count below zero (else `RetractMissing`, and nothing is written);
//! - offsets never go back (else `OffsetRegression`).
//!
//! How a change is applied, with each distinct row stored once and its
//! multiplicity in `kappa_n` (retractions first, so a row's count never
//! passes through an intermediate state the epoch does not describe):
//! - `diff < 0`: delete the row if its count is exactly `-diff`, else
//!   decrement it if it is larger, else fail;
//! - `diff > 0`: increment the row if present, else insert it.
//!
//! Each statement is prepared once per table (`prepare_cached`) and matches
//! the row with `"c" IS ?i AND typeof("c") = typeof(?i)` on every column, so
//! NULLs match and `1` never matches `1.0`; SQLite uses the key index for the
//! `IS` terms. That is one or two index lookups per change.

use std::sync::Arc;

use rusqlite::{Connection, Statement, params};

use crate::schema::OutputSchema;
use crate::value::Row;

use super::catalog::{deployment_in, require_accepting, write_stats};
use super::deployment::EpochStats;
use super::ident::{quote, table_name};
use super::{TableError, TableStore};

/// The statements that apply changes to one version table. Parameters
/// `?1..?n` are the row's values, `?{n+1}` the count.
pub(super) struct TableSql {
    table: String,
    arity: usize,
    delete: String,
    decrement: String,
    increment: String,
    insert: String,
}

impl TableSql {
    pub(super) fn new(schema: &OutputSchema, version: u32) -> TableSql {
        let table = table_name(&schema.name, version);
        let n = schema.columns.len();
        let count = n + 1;
        let matches: Vec<String> = (1..=n)
            .zip(&schema.columns)
            .map(|(i, c)| format!("{c} IS ?{i} AND typeof({c}) = typeof(?{i})", c = quote(c)))
            .collect();
        let matches = matches.join(" AND ");
        let t = quote(&table);
        let columns: Vec<String> = schema.columns.iter().map(|c| quote(c)).collect();
        let values: Vec<String> = (1..=count).map(|i| format!("?{i}")).collect();
        TableSql {
            delete: format!("DELETE FROM {t} WHERE {matches} AND kappa_n = ?{count}"),
            decrement: format!(
                "UPDATE {t} SET kappa_n = kappa_n - ?{count} WHERE {matches} AND kappa_n > ?{count}"
            ),
            increment: format!("UPDATE {t} SET kappa_n = kappa_n + ?{count} WHERE {matches}"),
            insert: format!(
                "INSERT INTO {t} ({}, kappa_n) VALUES ({})",
                columns.join(", "),
                values.join(", ")
            ),
            table,
            arity: n,
        }
    }
}

impl TableStore {
    /// The exactly-once commit (see the module docs): in one transaction,
    /// applies `changes` (one list per output, in the deployment's output
    /// order: rows with their diffs, consolidated), sets the offsets
    /// (`(input, topic, partition, next offset to read)`), and stores the
    /// progress figures.
    ///
    /// Fails with `StateConflict`, writing nothing, when the deployment is
    /// `retired` or `dropped`: a stream process that was swapped out learns
    /// it here and should stop. On any error nothing is written.
    pub fn commit_epoch(
        &mut self,
        id: i64,
        changes: &[Vec<(Row, isize)>],
        offsets: &[(String, String, u32, u64)],
        stats: &EpochStats,
    ) -> Result<(), TableError> {
        let writers = self.writers_for(id)?;
        if changes.len() != writers.len() {
            return Err(TableError::OutputCount {
                id,
                expected: writers.len(),
                actual: changes.len(),
            });
        }
        let tx = self.write_txn()?;
        require_accepting(&tx, id, "commit an epoch")?;
        for (sql, rows) in writers.iter().zip(changes) {
            apply(&tx, sql, rows)?;
        }
        write_offsets(&tx, id, offsets)?;
        write_stats(&tx, id, stats, true)?;
        tx.commit()?;
        Ok(())
    }

    /// The cached statements of a deployment's tables.
    fn writers_for(&mut self, id: i64) -> Result<Arc<[TableSql]>, TableError> {
        if let Some(w) = self.writers.get(&id) {
            return Ok(w.clone());
        }
        let d = deployment_in(&self.conn, id)?;
        let w: Arc<[TableSql]> = d
            .outputs
            .iter()
            .map(|o| TableSql::new(o, d.version.0))
            .collect();
        self.writers.insert(id, w.clone());
        Ok(w)
    }
}

/// Applies one output's consolidated changes: retractions, then additions.
pub(super) fn apply(
    conn: &Connection,
    sql: &TableSql,
    rows: &[(Row, isize)],
) -> Result<(), TableError> {
    let mut delete = conn.prepare_cached(&sql.delete)?;
    let mut decrement = conn.prepare_cached(&sql.decrement)?;
    for (row, diff) in rows.iter().filter(|(_, d)| *d < 0) {
        let n = -(*diff as i64);
        if run(&mut delete, sql, row, n)? == 0 && run(&mut decrement, sql, row, n)? == 0 {
            return Err(TableError::RetractMissing {
                table: sql.table.clone(),
                row: format!("{row:?}"),
                diff: n,
            });
        }
    }
    let mut increment = conn.prepare_cached(&sql.increment)?;
    let mut insert = conn.prepare_cached(&sql.insert)?;
    for (row, diff) in rows.iter().filter(|(_, d)| *d > 0) {
        let n = *diff as i64;
        if run(&mut increment, sql, row, n)? == 0 {
            run(&mut insert, sql, row, n)?;
        }
    }
    Ok(())
}

/// Binds a row and a count and runs the statement; the rows it changed.
fn run(
    stmt: &mut Statement<'_>,
    sql: &TableSql,
    row: &Row,
    count: i64,
) -> Result<usize, TableError> {
    if row.len() != sql.arity {
        return Err(TableError::Arity {
            table: sql.table.clone(),
            expected: sql.arity,
            actual: row.len(),
        });
    }
    for (i, v) in row.iter().enumerate() {
        stmt.raw_bind_parameter(i + 1, v)?;
    }
    stmt.raw_bind_parameter(sql.arity + 1, count)?;
    Ok(stmt.raw_execute()?)
}

/// Upserts the offsets, refusing any that would go back.
pub(super) fn write_offsets(
    conn: &Connection,
    id: i64,
    offsets: &[(String, String, u32, u64)],
) -> Result<(), TableError> {
    let mut current = conn.prepare_cached(
        "SELECT next_offset FROM kappa_offsets WHERE deployment = ?1 AND input = ?2 AND partition = ?3",
    )?;
    let mut upsert = conn.prepare_cached(
        "INSERT INTO kappa_offsets (deployment, input, topic, partition, next_offset) \
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (deployment, input, partition) \
         DO UPDATE SET topic = excluded.topic, next_offset = excluded.next_offset",
    )?;
    for (input, topic, partition, next) in offsets {
        let mut rows = current.query(params![id, input, partition])?;
        if let Some(r) = rows.next()? {
            let committed: u64 = r.get(0)?;
            if *next < committed {
                return Err(TableError::OffsetRegression {
                    id,
                    input: input.clone(),
                    partition: *partition,
                    committed,
                    given: *next,
                });
            }
        }
        drop(rows);
        upsert.execute(params![id, input, topic, partition, next])?;
    }
    Ok(())
}
