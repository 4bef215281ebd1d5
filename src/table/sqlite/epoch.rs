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
//! - offsets never go back (else `OffsetRegression`);
//! - the caller still owns the deployment (its [`Lease`] is current, else
//!   `Fenced`): checked in the same transaction, so a process that another
//!   took over can never commit under the new owner's offsets.
//!
//! How a change is applied, with each distinct row stored once and its
//! multiplicity in `kappa_n` (retractions first, so a row's count never
//! passes through an intermediate state the epoch does not describe):
//! - `diff < 0`: delete the row if its count is exactly `-diff`, else
//!   decrement it if it is larger, else fail;
//! - `diff > 0`: increment the row if present, else insert it; for a row
//!   without a NULL, one upsert does both (such rows are kept where a unique
//!   key finds them, `swap::create_table`).
//!
//! A row without a NULL is matched by its table's primary key: `"c" = ?i`
//! on every column and the mask of which columns are floats, one lookup in
//! one B-tree per statement.
//!
//! A row with a NULL, and every row of a table made before the split
//! (`swap::Layout`), is matched with `"c" IS ?i AND typeof("c") =
//! typeof(?i)` on every column, so NULLs match and `1` never matches `1.0`;
//! SQLite uses the key index for the `IS` terms. An updated row of a keyed
//! output among them — the retraction of a row and the insertion of another
//! with the same key and count, as a group whose aggregates changed — is
//! one lookup that finds the new row not stored yet, then one statement that
//! rewrites the old row's non-key columns in place when the old row holds
//! exactly that count; otherwise it is applied as the two changes it is.
//!
//! Each statement is prepared once per table (`prepare_cached`).

use std::collections::HashMap;
use std::sync::Arc;

use rusqlite::{Connection, Statement, params};

use crate::schema::OutputSchema;
use crate::value::{Row, Value};

use super::Lease;
use super::catalog::{deployment_in, require_accepting, write_stats};
use super::deployment::{EpochStats, is_keyed};
use super::ident::{quote, table_name};
use super::outbox;
use super::owner::require_lease;
use super::swap::{self, Layout};
use super::{InputOffset, SinkSpec};
use super::{SqliteStore, TableError};

/// The statements that apply changes to one version table. Parameters
/// `?1..?n` are the row's values, `?{n+1}` the count; `replace` also takes
/// the new row's non-key values as `?{n+2}..?{2n+1}`.
pub(super) struct TableSql {
    table: String,
    arity: usize,
    /// The output key's columns; `None` for a bag (the key is the whole
    /// row, so no two changes share a key).
    key: Option<Vec<usize>>,
    /// On the table of rows matched column by column: the version table,
    /// or a split one's table of rows with a NULL.
    delete: String,
    decrement: String,
    increment: String,
    insert: String,
    replace: String,
    /// Whether a row is stored (parameters `?1..?n`).
    stored: String,
    /// For the rows without a NULL, where a unique key finds them: a split
    /// table's, or a bag's with a unique index.
    exact: Option<ExactSql>,
}

/// The statements for rows a unique key finds: insert or increment in one
/// statement, and the retractions.
struct ExactSql {
    upsert: String,
    delete: String,
    decrement: String,
    /// The row's float mask is parameter `?{n+2}`.
    masked: bool,
}

impl TableSql {
    /// The statements for `schema`'s table of `version`, as that table was made.
    pub(super) fn new(
        conn: &Connection,
        schema: &OutputSchema,
        version: u32,
    ) -> Result<TableSql, TableError> {
        let table = table_name(&schema.name, version);
        let layout = swap::layout(conn, &table)?;
        let n = schema.columns.len();
        let count = n + 1;
        let columns: Vec<String> = schema.columns.iter().map(|c| quote(c)).collect();
        let matches: Vec<String> = (1..=n)
            .zip(&columns)
            .map(|(i, c)| format!("{c} IS ?{i} AND typeof({c}) = typeof(?{i})"))
            .collect();
        let matches = matches.join(" AND ");
        let general = match layout {
            Layout::Split => swap::nulls_table(&table),
            Layout::Indexed | Layout::UniqueIndexed => table.clone(),
        };
        let t = quote(&general);
        let values: Vec<String> = (1..=count).map(|i| format!("?{i}")).collect();
        let new = |i: usize| count + 1 + i;
        let set: Vec<String> = (0..n)
            .filter(|i| !schema.key.contains(i))
            .map(|i| format!("{} = ?{}", columns[i], new(i)))
            .collect();
        let keyed = is_keyed(schema);
        let insert = format!(
            "INSERT INTO {t} ({}, kappa_n) VALUES ({})",
            columns.join(", "),
            values.join(", ")
        );
        let delete = format!("DELETE FROM {t} WHERE {matches} AND kappa_n = ?{count}");
        let decrement = format!(
            "UPDATE {t} SET kappa_n = kappa_n - ?{count} WHERE {matches} AND kappa_n > ?{count}"
        );
        let exact = match layout {
            Layout::Indexed => None,
            Layout::UniqueIndexed => Some(ExactSql {
                upsert: format!("{insert} {ADD_ON_CONFLICT}"),
                delete: delete.clone(),
                decrement: decrement.clone(),
                masked: false,
            }),
            Layout::Split => Some(ExactSql::split(&table, &columns)),
        };
        Ok(TableSql {
            key: keyed.then(|| schema.key.clone()),
            // The new row's absence is checked by `stored` first: a `NOT
            // EXISTS` on the table being updated made SQLite materialize
            // the matches in a temporary B-tree, opened and closed per row.
            replace: format!(
                "UPDATE {t} SET {} WHERE {matches} AND kappa_n = ?{count}",
                set.join(", "),
            ),
            stored: format!("SELECT 1 FROM {t} WHERE {matches} LIMIT 1"),
            delete,
            decrement,
            increment: format!("UPDATE {t} SET kappa_n = kappa_n + ?{count} WHERE {matches}"),
            insert,
            exact,
            table,
            arity: n,
        })
    }
}

/// Adds an inserted row's count to the stored equal row instead.
const ADD_ON_CONFLICT: &str = "ON CONFLICT DO UPDATE SET kappa_n = kappa_n + excluded.kappa_n";

impl ExactSql {
    /// On a split version's exact table, keyed by the row and its float
    /// mask (no column holds NULL there, so `=` is exact).
    fn split(table: &str, columns: &[String]) -> ExactSql {
        let n = columns.len();
        let count = n + 1;
        let mask = format!("?{}", n + 2);
        let t = quote(&swap::exact_table(table));
        let values: Vec<String> = (1..=n).map(|i| format!("?{i}")).collect();
        let key: Vec<String> = (1..=n)
            .zip(columns)
            .map(|(i, c)| format!("{c} = ?{i}"))
            .chain([format!("kappa_mask = {mask}")])
            .collect();
        let key = key.join(" AND ");
        ExactSql {
            upsert: format!(
                "INSERT INTO {t} ({}, kappa_mask, kappa_n) VALUES ({}, {mask}, ?{count}) {ADD_ON_CONFLICT}",
                columns.join(", "),
                values.join(", "),
            ),
            delete: format!("DELETE FROM {t} WHERE {key} AND kappa_n = ?{count}"),
            decrement: format!(
                "UPDATE {t} SET kappa_n = kappa_n - ?{count} WHERE {key} AND kappa_n > ?{count}"
            ),
            masked: true,
        }
    }
}

impl SqliteStore {
    /// The exactly-once commit (see the module docs), writing in the same transaction the
    /// messages of each changelog sink into the outbox (see [`super::outbox`]).
    pub(super) fn commit_epoch_with_sinks(
        &mut self,
        lease: &Lease,
        changes: &[Vec<(Row, isize)>],
        offsets: &[InputOffset],
        stats: &EpochStats,
        sinks: &[SinkSpec],
    ) -> Result<(), TableError> {
        let id = lease.deployment;
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
        require_lease(&tx, lease)?;
        for (sql, rows) in writers.iter().zip(changes) {
            apply(&tx, sql, rows)?;
        }
        if !sinks.is_empty() {
            let d = deployment_in(&tx, id)?;
            for sink in sinks {
                let schema = &d.outputs[sink.output];
                let rows = &changes[sink.output];
                outbox::write(&tx, id, &sink.name, schema, d.version.0, rows)?;
            }
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
            .map(|o| TableSql::new(&self.conn, o, d.version.0))
            .collect::<Result<_, _>>()?;
        self.writers.insert(id, w.clone());
        Ok(w)
    }
}

/// Applies one output's consolidated changes: updated rows in place where
/// they can be, then retractions, then additions.
pub(super) fn apply(
    conn: &Connection,
    sql: &TableSql,
    rows: &[(Row, isize)],
) -> Result<(), TableError> {
    let mut done = vec![false; rows.len()];
    // A split table rewrites in place only its rows with a NULL: the others
    // are a delete and an upsert by primary key, in one B-tree. (A keyed
    // table with `exact` statements is split: only bags had unique indexes.)
    let split = sql.exact.is_some();
    let in_place = sql
        .key
        .as_ref()
        .filter(|_| !split || rows.iter().any(|(r, _)| !is_exact(r)));
    if let Some(key) = in_place {
        let mut replace = conn.prepare_cached(&sql.replace)?;
        let mut stored = conn.prepare_cached(&sql.stored)?;
        for (old, new) in updates(key, rows) {
            let (old_row, diff) = &rows[old];
            let new_row = &rows[new].0;
            if split && (is_exact(old_row) || is_exact(new_row)) {
                continue;
            }
            if !is_stored(&mut stored, sql, new_row)?
                && replace_row(&mut replace, sql, old_row, -(*diff as i64), new_row)? > 0
            {
                done[old] = true;
                done[new] = true;
            }
        }
    }
    let rows: Vec<&(Row, isize)> = rows
        .iter()
        .zip(&done)
        .filter_map(|(r, done)| (!done).then_some(r))
        .collect();
    let mut delete = conn.prepare_cached(&sql.delete)?;
    let mut decrement = conn.prepare_cached(&sql.decrement)?;
    let mut exact = match &sql.exact {
        Some(e) => Some((
            conn.prepare_cached(&e.upsert)?,
            conn.prepare_cached(&e.delete)?,
            conn.prepare_cached(&e.decrement)?,
            e.masked,
        )),
        None => None,
    };
    for (row, diff) in rows.iter().copied().filter(|(_, d)| *d < 0) {
        let n = -(*diff as i64);
        let done = match exact.as_mut().filter(|_| is_exact(row)) {
            Some((_, delete, decrement, masked)) => {
                run_masked(delete, sql, *masked, row, n)? > 0
                    || run_masked(decrement, sql, *masked, row, n)? > 0
            }
            None => run(&mut delete, sql, row, n)? > 0 || run(&mut decrement, sql, row, n)? > 0,
        };
        if !done {
            return Err(TableError::RetractMissing {
                table: sql.table.clone(),
                row: format!("{row:?}"),
                diff: n,
            });
        }
    }
    let mut increment = conn.prepare_cached(&sql.increment)?;
    let mut insert = conn.prepare_cached(&sql.insert)?;
    for (row, diff) in rows.iter().copied().filter(|(_, d)| *d > 0) {
        let n = *diff as i64;
        if let Some((upsert, _, _, masked)) = exact.as_mut().filter(|_| is_exact(row)) {
            run_masked(upsert, sql, *masked, row, n)?;
        } else if run(&mut increment, sql, row, n)? == 0 {
            run(&mut insert, sql, row, n)?;
        }
    }
    Ok(())
}

/// Whether a unique key finds `row`: whether it holds no NULL (a NaN float
/// is stored as one), as NULLs never conflict in a unique index and a
/// primary key cannot hold them.
fn is_exact(row: &Row) -> bool {
    row.iter().all(|v| match v {
        Value::Null => false,
        Value::Float(f) => !f.get().is_nan(),
        _ => true,
    })
}

/// The updates among consolidated changes: `(retraction, insertion)`
/// index pairs, where a key has exactly one of each, with opposite diffs.
fn updates(key: &[usize], rows: &[(Row, isize)]) -> Vec<(usize, usize)> {
    // Per key: the retraction and insertion seen, and whether there were more.
    type Seen = (Option<usize>, Option<usize>, bool);
    let hasher = foldhash::fast::RandomState::default();
    let mut by_key: HashMap<Vec<&Value>, Seen, _> =
        HashMap::with_capacity_and_hasher(rows.len(), hasher);
    for (i, (row, diff)) in rows.iter().enumerate() {
        let Some(k) = key.iter().map(|&c| row.get(c)).collect::<Option<Vec<_>>>() else {
            continue; // the wrong arity: the general path reports it
        };
        let (old, new, more) = by_key.entry(k).or_default();
        let slot = if *diff < 0 { old } else { new };
        *more |= slot.replace(i).is_some();
    }
    let mut pairs: Vec<(usize, usize)> = by_key
        .into_values()
        .filter_map(|(old, new, more)| match (old, new, more) {
            (Some(o), Some(n), false) if rows[o].1 == -rows[n].1 => Some((o, n)),
            _ => None,
        })
        .collect();
    pairs.sort_unstable();
    pairs
}

/// Runs `replace` for `old` (held `count` times) becoming `new`; the rows it changed.
fn replace_row(
    stmt: &mut Statement<'_>,
    sql: &TableSql,
    old: &Row,
    count: i64,
    new: &Row,
) -> Result<usize, TableError> {
    if old.len() != sql.arity || new.len() != sql.arity {
        return Ok(0); // the general path reports the arity
    }
    // Only the non-key values are parameters of the `SET`.
    let key = sql.key.as_deref().unwrap_or_default();
    for (i, v) in new.iter().enumerate().filter(|(i, _)| !key.contains(i)) {
        stmt.raw_bind_parameter(sql.arity + 2 + i, v)?;
    }
    run(stmt, sql, old, count)
}

/// Whether `row` is stored (with any count).
fn is_stored(stmt: &mut Statement<'_>, sql: &TableSql, row: &Row) -> Result<bool, TableError> {
    if row.len() != sql.arity {
        return Ok(true); // the general path reports the arity
    }
    for (i, v) in row.iter().enumerate() {
        stmt.raw_bind_parameter(i + 1, v)?;
    }
    Ok(stmt.raw_query().next()?.is_some())
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

/// [`run`], with the row's float mask bound as `?{n+2}` if `masked`: which
/// columns hold floats, bit `i` for column `i` (`swap::create_table`).
fn run_masked(
    stmt: &mut Statement<'_>,
    sql: &TableSql,
    masked: bool,
    row: &Row,
    count: i64,
) -> Result<usize, TableError> {
    // A row of the wrong arity is left to `run` to report.
    if masked && row.len() == sql.arity {
        let mask = row
            .iter()
            .enumerate()
            .filter(|(_, v)| matches!(v, Value::Float(_)))
            .fold(0i64, |m, (i, _)| m | 1 << i);
        stmt.raw_bind_parameter(sql.arity + 2, mask)?;
    }
    run(stmt, sql, row, count)
}

/// Upserts the offsets, refusing any that would go back.
pub(super) fn write_offsets(
    conn: &Connection,
    id: i64,
    offsets: &[InputOffset],
) -> Result<(), TableError> {
    let mut current = conn.prepare_cached(
        "SELECT next_offset FROM kappa_offsets WHERE deployment = ?1 AND input = ?2 AND partition = ?3",
    )?;
    let mut upsert = conn.prepare_cached(
        "INSERT INTO kappa_offsets (deployment, input, topic, partition, next_offset, last_offset, last_crc) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (deployment, input, partition) \
         DO UPDATE SET topic = excluded.topic, next_offset = excluded.next_offset, \
         last_offset = coalesce(excluded.last_offset, last_offset), \
         last_crc = coalesce(excluded.last_crc, last_crc)",
    )?;
    for o in offsets {
        let mut rows = current.query(params![id, o.input, o.partition])?;
        if let Some(r) = rows.next()? {
            let committed: u64 = r.get(0)?;
            if o.next < committed {
                return Err(TableError::OffsetRegression {
                    id,
                    name: super::catalog::name_in(conn, id),
                    input: o.input.clone(),
                    partition: o.partition,
                    committed,
                    given: o.next,
                });
            }
        }
        drop(rows);
        let (last_offset, last_crc) = o.last.unzip();
        upsert.execute(params![
            id,
            o.input,
            o.topic,
            o.partition,
            o.next,
            last_offset,
            last_crc
        ])?;
    }
    Ok(())
}
