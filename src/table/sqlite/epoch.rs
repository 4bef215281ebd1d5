//! The exactly-once commit: one epoch's output changes, the input offsets
//! they cover, and the progress figures, in ONE SQLite transaction.
//!
//! After any crash the tables and the offsets agree: either the epoch is in
//! both or in neither, so a restarted runner that resumes reading at the
//! committed offsets (replaying the log below them to rebuild its state,
//! without writing) never applies an input twice and never skips one.
//!
//! One exception keeps a replay from stalling the live version: a building
//! version that was never live writes an epoch of more than
//! [`PIECE_ROWS`] changes in pieces, one transaction each, the last with
//! the offsets. Until then the deployment is marked `half_written`: no
//! swap and no read sees it so, and if its process stops, the next owner's
//! take-over empties the version and replays it from the start
//! ([`reset_half_written`]). No reader sees a building version through a
//! view, and its whole history is in the log, so the tables still change
//! only by whole epochs as far as anyone can tell.
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
//!   key finds them, `swap::create_table`), [`UPSERT_ROWS`] rows to a
//!   statement.
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

use rusqlite::{Connection, OptionalExtension, Statement, TransactionBehavior, params};

use crate::schema::OutputSchema;
use crate::value::{Row, Value};

use super::Lease;
use super::catalog::{deployment_in, require_accepting, write_stats};
use super::deployment::{Deployment, EpochStats, is_keyed};
use super::ident::{quote, table_name};
use super::outbox;
use super::owner::require_lease;
use super::swap::{self, Layout};
use super::{InputOffset, SinkSpec, StateWrite};
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
    general: ByColumns,
    /// For the rows without a NULL, where a unique key finds them: a split
    /// table's, or a bag's with a unique index.
    exact: Option<ExactSql>,
    /// How the table stores its rows.
    layout: Layout,
}

/// The statements for rows a unique key finds: insert or increment in one
/// statement, and the retractions.
struct ExactSql {
    upsert: String,
    /// `upsert` for [`UPSERT_ROWS`] rows at once: row `j`'s parameters are
    /// `upsert`'s shifted by `j` times the parameters of a row.
    upsert_many: String,
    delete: String,
    decrement: String,
    /// The row's float mask is parameter `?{n+2}`.
    masked: bool,
}

/// Rows one `upsert_many` statement inserts. With a statement per row, the
/// committer of a stream `join` spent ~2.1 s of CPU on its 2M output rows,
/// where SQLite inserts the same rows from one `INSERT ... SELECT` in 0.9 s:
/// the rest was per statement (resetting, stepping, opening and closing
/// the table's cursor), and that stream waits on its committer. A row has
/// at most `MASKED_COLUMNS` + 2 parameters, so a statement stays far below
/// SQLite's limit of 32766.
pub(super) const UPSERT_ROWS: usize = 64;

impl TableSql {
    /// The statements for `schema`'s table of `version`, as that table was made.
    pub(super) fn new(
        conn: &Connection,
        schema: &OutputSchema,
        version: u32,
    ) -> Result<TableSql, TableError> {
        let table = table_name(&schema.name, version);
        let layout = swap::layout(conn, &table)?;
        let columns: Vec<String> = schema.columns.iter().map(|c| quote(c)).collect();
        let t = quote(&match layout {
            Layout::Split => swap::nulls_table(&table),
            Layout::Indexed | Layout::UniqueIndexed => table.clone(),
        });
        let general = ByColumns::new(&t, &columns, &schema.key);
        let exact = match layout {
            Layout::Indexed => None,
            Layout::UniqueIndexed => Some(ExactSql::new(
                &format!("INSERT INTO {t} ({}, kappa_n) VALUES", columns.join(", ")),
                (1..=columns.len() + 1).collect(),
                false,
                general.delete.clone(),
                general.decrement.clone(),
            )),
            Layout::Split => Some(ExactSql::split(&table, &columns)),
        };
        Ok(TableSql {
            key: is_keyed(schema).then(|| schema.key.clone()),
            general,
            exact,
            layout,
            table,
            arity: columns.len(),
        })
    }
}

/// The statements on table `t` (quoted) that find a row column by column,
/// so that NULLs match and `1` never matches `1.0` (see the module docs).
struct ByColumns {
    delete: String,
    decrement: String,
    increment: String,
    insert: String,
    replace: String,
    /// Whether a row is stored (parameters `?1..?n`).
    stored: String,
}

impl ByColumns {
    /// For `columns` (quoted), of which those at `key` are the output's key.
    fn new(t: &str, columns: &[String], key: &[usize]) -> ByColumns {
        let n = columns.len();
        let count = n + 1;
        let matches: Vec<String> = (1..=n)
            .zip(columns)
            .map(|(i, c)| format!("{c} IS ?{i} AND typeof({c}) = typeof(?{i})"))
            .collect();
        let matches = matches.join(" AND ");
        let values: Vec<String> = (1..=count).map(|i| format!("?{i}")).collect();
        let set: Vec<String> = (0..n)
            .filter(|i| !key.contains(i))
            .map(|i| format!("{} = ?{}", columns[i], count + 1 + i))
            .collect();
        ByColumns {
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
            // The new row's absence is checked by `stored` first: a `NOT
            // EXISTS` on the table being updated made SQLite materialize
            // the matches in a temporary B-tree, opened and closed per row.
            replace: format!(
                "UPDATE {t} SET {} WHERE {matches} AND kappa_n = ?{count}",
                set.join(", "),
            ),
            stored: format!("SELECT 1 FROM {t} WHERE {matches} LIMIT 1"),
        }
    }
}

/// Adds an inserted row's count to the stored equal row instead.
const ADD_ON_CONFLICT: &str = "ON CONFLICT DO UPDATE SET kappa_n = kappa_n + excluded.kappa_n";

impl ExactSql {
    /// The upserts `insert` (up to `VALUES`) makes of rows whose values are
    /// the parameters numbered `params`, in the order of `insert`'s
    /// columns, with the retractions `delete` and `decrement`.
    fn new(
        insert: &str,
        params: Vec<usize>,
        masked: bool,
        delete: String,
        decrement: String,
    ) -> ExactSql {
        let width = params.len();
        let row = |j: usize| {
            let values: Vec<String> = params
                .iter()
                .map(|p| format!("?{}", p + j * width))
                .collect();
            format!("({})", values.join(", "))
        };
        let rows: Vec<String> = (0..UPSERT_ROWS).map(row).collect();
        ExactSql {
            upsert: format!("{insert} {} {ADD_ON_CONFLICT}", row(0)),
            upsert_many: format!("{insert} {} {ADD_ON_CONFLICT}", rows.join(", ")),
            delete,
            decrement,
            masked,
        }
    }

    /// On a split version's exact table, keyed by the row and its float
    /// mask (no column holds NULL there, so `=` is exact).
    fn split(table: &str, columns: &[String]) -> ExactSql {
        let n = columns.len();
        let count = n + 1;
        let mask = format!("?{}", n + 2);
        let t = quote(&swap::exact_table(table));
        let key: Vec<String> = (1..=n)
            .zip(columns)
            .map(|(i, c)| format!("{c} = ?{i}"))
            .chain([format!("kappa_mask = {mask}")])
            .collect();
        let key = key.join(" AND ");
        ExactSql::new(
            &format!(
                "INSERT INTO {t} ({}, kappa_mask, kappa_n) VALUES",
                columns.join(", ")
            ),
            (1..=n).chain([n + 2, count]).collect(),
            true,
            format!("DELETE FROM {t} WHERE {key} AND kappa_n = ?{count}"),
            format!(
                "UPDATE {t} SET kappa_n = kappa_n - ?{count} WHERE {key} AND kappa_n > ?{count}"
            ),
        )
    }
}

impl SqliteStore {
    /// The exactly-once commit (see the module docs), writing in the same transaction the
    /// messages of each changelog sink into the outbox (see [`super::outbox`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn commit_epoch_with_state(
        &mut self,
        lease: &Lease,
        changes: &[Vec<(Row, isize)>],
        offsets: &[InputOffset],
        stats: &EpochStats,
        sinks: &[SinkSpec],
        state: &StateWrite<'_>,
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
        let mut pieces = pieces(changes, self.piece_rows);
        let but_last = pieces.len() - 1;
        let in_pieces = but_last > 0
            && sinks.is_empty()
            && rebuildable(&self.conn, id)?
            && self.write_pieces(lease, &writers, changes, &pieces[..but_last])?;
        if in_pieces {
            pieces.drain(..but_last);
        }
        let tx = self.write_txn()?;
        require_accepting(&tx, id, "commit an epoch")?;
        require_lease(&tx, lease)?;
        if !in_pieces {
            require_whole(&tx, id)?;
        }
        for piece in &pieces {
            apply_piece(&tx, &writers, changes, piece)?;
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
        super::state::write(&tx, id, state)?;
        if in_pieces {
            set_half_written(&tx, id, false)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Writes all but the last piece of a building version's epoch, each
    /// in its own transaction, the first of which marks the deployment
    /// half-written; `false`, writing nothing, when the deployment turns
    /// out not to be [`rebuildable`] any more. The pieces need not be
    /// durable one by one (`synchronous=NORMAL`): the last transaction's
    /// `FULL` commit syncs the write-ahead log, and theirs with it.
    fn write_pieces(
        &mut self,
        lease: &Lease,
        writers: &[TableSql],
        changes: &[Vec<(Row, isize)>],
        pieces: &[Piece],
    ) -> Result<bool, TableError> {
        let id = lease.deployment;
        let write = |conn: &mut Connection, first: bool, piece: &Piece| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            require_accepting(&tx, id, "commit an epoch")?;
            require_lease(&tx, lease)?;
            if first {
                if !rebuildable(&tx, id)? {
                    return Ok(false);
                }
                require_whole(&tx, id)?;
                set_half_written(&tx, id, true)?;
            }
            apply_piece(&tx, writers, changes, piece)?;
            tx.commit()?;
            std::thread::sleep(PIECE_PAUSE);
            Ok::<bool, TableError>(true)
        };
        self.conn.pragma_update(None, "synchronous", "NORMAL")?;
        let mut written = Ok(true);
        for (i, piece) in pieces.iter().enumerate() {
            written = write(&mut self.conn, i == 0, piece);
            if !matches!(written, Ok(true)) {
                break;
            }
        }
        self.conn.pragma_update(None, "synchronous", "FULL")?;
        written
    }

    /// Between two tries of a swap or a read that found `d` half-written:
    /// waits 2 ms for its owner to finish the epoch, or fails when no
    /// process owns it (it stopped; the next take-over rebuilds the
    /// version) or after [`super::BUSY_TIMEOUT`].
    pub(super) fn await_whole(
        &self,
        d: &Deployment,
        since: std::time::Instant,
        action: &'static str,
    ) -> Result<(), TableError> {
        let owned = match super::owner::lock_file(&self.path, d) {
            // Its owner may have made the epoch whole and let go since the
            // caller looked: asked again under the lock, which no owner can
            // take meanwhile, half-written means that no process writes it.
            Ok(_free) if !half_written(&self.conn, d.id)? => return Ok(()),
            Ok(_free) => false,
            Err(TableError::Owned { .. }) => true,
            Err(e) => return Err(e),
        };
        if !owned || since.elapsed() >= super::BUSY_TIMEOUT {
            return Err(TableError::StateConflict {
                id: d.id,
                name: d.to_string(),
                state: d.state,
                action,
            });
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
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

/// The refusal of `$action` (a swap, a read) on a version left half-written
/// by a process that stopped ([`SqliteStore::await_whole`]).
macro_rules! half_written_refusal {
    ($action:literal) => {
        concat!(
            $action,
            " (an epoch of it is half-written and no process is writing it: \
             `kappa reprocess` resumes it, rebuilding it from the log)"
        )
    };
}
pub(super) use half_written_refusal;

/// Most changes of one epoch that a building version, never live, writes
/// in one transaction. A replay's epochs are large (100k groups, a few
/// hundred milliseconds of writing), and the database has one write lock:
/// written whole, such an epoch would stall the live version's commits
/// for as long. Written in pieces, the live version's commits come in
/// between. Nobody reads a building version through a view, and one that
/// was never live can be rebuilt from the log, so a crash between pieces
/// is repaired by the next owner, which finds the deployment marked
/// `half_written` and empties it ([`reset_half_written`]) to replay it
/// from the start. A version that was live (rolled back to) keeps
/// whole-epoch commits, as its history may no longer be in the log.
pub(super) const PIECE_ROWS: usize = 4096;

/// How long a building version waits after each piece, so that a writer
/// waiting for the lock (which tries again every millisecond,
/// [`super::poll_busy`]) gets it: SQLite's lock is not fair, and the next
/// piece would otherwise take it again at once.
const PIECE_PAUSE: std::time::Duration = std::time::Duration::from_millis(3);

/// Some rows of some outputs: `(output, range of its changes)`.
pub(super) type Piece = Vec<(usize, std::ops::Range<usize>)>;

/// The changes cut into pieces of at most `limit` rows, in order.
pub(super) fn pieces(changes: &[Vec<(Row, isize)>], limit: usize) -> Vec<Piece> {
    let limit = limit.max(1);
    let mut pieces = Vec::new();
    let mut piece = Piece::new();
    let mut size = 0;
    for (output, rows) in changes.iter().enumerate() {
        let mut at = 0;
        while at < rows.len() {
            let end = rows.len().min(at + limit - size);
            piece.push((output, at..end));
            size += end - at;
            at = end;
            if size == limit {
                pieces.push(std::mem::take(&mut piece));
                size = 0;
            }
        }
    }
    if !piece.is_empty() || pieces.is_empty() {
        pieces.push(piece);
    }
    pieces
}

fn apply_piece(
    conn: &Connection,
    writers: &[TableSql],
    changes: &[Vec<(Row, isize)>],
    piece: &Piece,
) -> Result<(), TableError> {
    for (output, range) in piece {
        apply(conn, &writers[*output], &changes[*output][range.clone()])?;
    }
    Ok(())
}

/// Whether a deployment may be written in pieces: building, and never live.
fn rebuildable(conn: &Connection, id: i64) -> Result<bool, TableError> {
    Ok(conn
        .prepare_cached(
            "SELECT state = 'building' AND swapped_at IS NULL FROM kappa_deployments WHERE id = ?1",
        )?
        .query_row([id], |r| r.get(0))
        .optional()?
        .unwrap_or(false))
}

/// Whether the deployment has an epoch written in part.
pub(super) fn half_written(conn: &Connection, id: i64) -> Result<bool, TableError> {
    Ok(conn
        .prepare_cached("SELECT half_written FROM kappa_deployments WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?
        .unwrap_or(false))
}

fn set_half_written(conn: &Connection, id: i64, half: bool) -> Result<(), TableError> {
    conn.prepare_cached("UPDATE kappa_deployments SET half_written = ?2 WHERE id = ?1")?
        .execute(params![id, half])?;
    Ok(())
}

/// Refuses to add to an epoch that a process left half-written: only a
/// take-over, which rebuilds the deployment, clears the mark.
fn require_whole(conn: &Connection, id: i64) -> Result<(), TableError> {
    if !half_written(conn, id)? {
        return Ok(());
    }
    Err(TableError::StateConflict {
        id,
        name: super::catalog::name_in(conn, id),
        state: super::catalog::state_in(conn, id)?,
        action: "commit an epoch (an earlier one was left half-written: \
                 the next process to take it over rebuilds it from the log)",
    })
}

/// Empties a deployment whose epoch was left half-written, so that its new
/// owner replays its inputs from the start: its tables, offsets and
/// progress go back to those of a new deployment. Called by the take-over,
/// in its transaction; returns whether there was anything to reset.
pub(super) fn reset_half_written(conn: &Connection, id: i64) -> Result<bool, TableError> {
    if !half_written(conn, id)? {
        return Ok(false);
    }
    let d = deployment_in(conn, id)?;
    for (i, o) in d.outputs.iter().enumerate() {
        let table = d.table(i);
        swap::drop_table(conn, &table)?;
        swap::create_table(conn, &table, o)?;
    }
    conn.execute("DELETE FROM kappa_offsets WHERE deployment = ?1", [id])?;
    super::state::write(conn, id, &StateWrite::Clear)?;
    conn.execute(
        "UPDATE kappa_deployments SET records_applied = 0, bad_rows = 0, epochs = 0, \
         last_epoch_at = NULL, last_epoch_ms = NULL, records_per_sec = NULL, lag = '[]', \
         late = '[]', caught_up_at = NULL, half_written = 0 WHERE id = ?1",
        [id],
    )?;
    Ok(true)
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
    // are a delete and an upsert by primary key, in one B-tree.
    let split = sql.layout == Layout::Split;
    let in_place = sql
        .key
        .as_ref()
        .filter(|_| !split || rows.iter().any(|(r, _)| !is_exact(r)));
    if let Some(key) = in_place {
        let mut replace = conn.prepare_cached(&sql.general.replace)?;
        let mut stored = conn.prepare_cached(&sql.general.stored)?;
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
    let mut delete = conn.prepare_cached(&sql.general.delete)?;
    let mut decrement = conn.prepare_cached(&sql.general.decrement)?;
    let mut exact = match &sql.exact {
        Some(e) => Some((
            conn.prepare_cached(&e.delete)?,
            conn.prepare_cached(&e.decrement)?,
            e.masked,
        )),
        None => None,
    };
    for (row, diff) in rows.iter().copied().filter(|(_, d)| *d < 0) {
        let n = -(*diff as i64);
        let done = match exact.as_mut().filter(|_| is_exact(row)) {
            Some((delete, decrement, masked)) => {
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
    add(conn, sql, rows.iter().copied().filter(|(_, d)| *d > 0))
}

/// Applies insertions: the rows a unique key finds by upserts of
/// [`UPSERT_ROWS`] rows at a time, the others by an increment, or an
/// insert where no equal row is stored.
fn add<'r>(
    conn: &Connection,
    sql: &TableSql,
    rows: impl Iterator<Item = &'r (Row, isize)>,
) -> Result<(), TableError> {
    let mut increment = conn.prepare_cached(&sql.general.increment)?;
    let mut insert = conn.prepare_cached(&sql.general.insert)?;
    let mut upserts = match &sql.exact {
        Some(e) => Some((conn.prepare_cached(&e.upsert_many)?, e.masked)),
        None => None,
    };
    let mut batch: Vec<(&Row, i64)> = Vec::with_capacity(UPSERT_ROWS);
    for (row, diff) in rows {
        let n = *diff as i64;
        let exact = is_exact(row) && row.len() == sql.arity;
        let Some((many, masked)) = upserts.as_mut().filter(|_| exact) else {
            if run(&mut increment, sql, row, n)? == 0 {
                run(&mut insert, sql, row, n)?;
            }
            continue;
        };
        batch.push((row, n));
        if batch.len() == UPSERT_ROWS {
            let width = sql.arity + 1 + usize::from(*masked);
            for (j, &(row, n)) in batch.iter().enumerate() {
                bind_row(many, sql, *masked, row, n, j * width)?;
            }
            many.raw_execute()?;
            batch.clear();
        }
    }
    if let Some(e) = sql.exact.as_ref().filter(|_| !batch.is_empty()) {
        let mut upsert = conn.prepare_cached(&e.upsert)?;
        for (row, n) in batch {
            run_masked(&mut upsert, sql, e.masked, row, n)?;
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
    run_masked(stmt, sql, false, row, count)
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
    if row.len() != sql.arity {
        return Err(TableError::Arity {
            table: sql.table.clone(),
            expected: sql.arity,
            actual: row.len(),
        });
    }
    bind_row(stmt, sql, masked, row, count, 0)?;
    Ok(stmt.raw_execute()?)
}

/// Binds a row of the table's arity as the parameters after `base`: its
/// values `?{base+1}..`, its count `?{base+n+1}` and, if `masked`, its
/// float mask `?{base+n+2}`.
fn bind_row(
    stmt: &mut Statement<'_>,
    sql: &TableSql,
    masked: bool,
    row: &Row,
    count: i64,
    base: usize,
) -> Result<(), TableError> {
    for (i, v) in row.iter().enumerate() {
        stmt.raw_bind_parameter(base + i + 1, v)?;
    }
    stmt.raw_bind_parameter(base + sql.arity + 1, count)?;
    if masked {
        let mask = row
            .iter()
            .enumerate()
            .filter(|(_, v)| matches!(v, Value::Float(_)))
            .fold(0i64, |m, (i, _)| m | 1 << i);
        stmt.raw_bind_parameter(base + sql.arity + 2, mask)?;
    }
    Ok(())
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
