//! Version tables and the views over them: creating a version's tables,
//! pointing an output's view at the live version (the swap), dropping
//! versions, and keeping only the newest retired ones.
//!
//! Why a view and not a rename: `ALTER TABLE RENAME` would make a version's
//! name change under a process that writes it, and the old version would
//! lose its name for rollback. A view is redefined in the same transaction
//! that changes the catalog states, so a reader (in WAL mode, any SQLite
//! client) sees either the old version through the view or the new one,
//! never neither, and never a mix.
//!
//! Invariants after every transaction here:
//! - For each output name, at most one deployment is `live` (checked before
//!   the swap commits; a violation rolls it back), and the view `OUTPUT`
//!   exists exactly when one is, selecting from that deployment's table.
//! - A swap retires every deployment that was live for any of the swapped-in
//!   outputs. If such a deployment had other outputs besides, their views are
//!   dropped with it, since no live deployment maintains them any more.
//! - Only a deployment that is not live is dropped; its catalog row is kept.
//!   The one exception is a deployment that never committed an epoch: its
//!   creator abandons it on failure, and it disappears entirely.

use rusqlite::{Connection, OptionalExtension, params};

use crate::schema::OutputSchema;

use super::Lease;
use super::catalog::{deployment_in, live_owner, name_in, set_state, state_in};
use super::deployment::{DeploymentState, is_bag};
use super::epoch::half_written_refusal;
use super::ident::quote;
use super::owner::require_lease;
use super::{SqliteStore, TableError, now_ms};

impl SqliteStore {
    /// Swaps deployment `id` in (checking `lease` when its owner swaps).
    /// A building version whose owner is writing an epoch in pieces
    /// (`epoch::PIECE_ROWS`) is swapped in once the epoch is whole
    /// ([`SqliteStore::await_whole`]).
    pub(super) fn swap_checked(
        &mut self,
        id: i64,
        lease: Option<&Lease>,
    ) -> Result<Vec<i64>, TableError> {
        let since = std::time::Instant::now();
        loop {
            if let Some(retired) = self.swap_whole(id, lease)? {
                return Ok(retired);
            }
            let d = deployment_in(&self.conn, id)?;
            self.await_whole(&d, since, half_written_refusal!("be swapped in"))?;
        }
    }

    /// The swap, unless the deployment has an epoch half-written (`None`).
    fn swap_whole(
        &mut self,
        id: i64,
        lease: Option<&Lease>,
    ) -> Result<Option<Vec<i64>>, TableError> {
        let tx = self.write_txn()?;
        if let Some(lease) = lease {
            require_lease(&tx, lease)?;
        }
        let d = deployment_in(&tx, id)?;
        if d.half_written {
            return Ok(None);
        }
        match d.state {
            DeploymentState::Live => return Ok(Some(Vec::new())),
            DeploymentState::Dropped => {
                return Err(TableError::StateConflict {
                    id,
                    name: d.to_string(),
                    state: d.state,
                    action: "be swapped in (its tables were dropped)",
                });
            }
            DeploymentState::Building | DeploymentState::Retired => {}
        }
        let mut retired: Vec<i64> = Vec::new();
        for o in &d.outputs {
            if let Some(old) = live_owner(&tx, &o.name)?.filter(|old| !retired.contains(old)) {
                retired.push(old);
            }
        }
        for &old in &retired {
            set_state(&tx, old, DeploymentState::Retired)?;
            for o in deployment_in(&tx, old)?.outputs {
                if d.output_index(&o.name).is_none() {
                    drop_view(&tx, &o.name)?;
                }
            }
        }
        set_state(&tx, id, DeploymentState::Live)?;
        tx.execute(
            "UPDATE kappa_deployments SET swapped_at = ?2 WHERE id = ?1",
            params![id, now_ms()],
        )?;
        for (i, o) in d.outputs.iter().enumerate() {
            point_view(&tx, o, &d.table(i))?;
            check_single_live(&tx, &o.name)?;
        }
        crate::table::pause_inside_swap();
        tx.commit()?;
        Ok(Some(retired))
    }

    /// Drops a deployment's tables and marks it `dropped` (its catalog row
    /// and version number stay). Refuses a live deployment: swap another
    /// version in first. Dropping a building one abandons a reprocess; its
    /// process's next commit fails with `StateConflict`.
    pub(super) fn drop_deployment(&mut self, id: i64) -> Result<(), TableError> {
        let tx = self.write_txn()?;
        drop_in(&tx, id)?;
        tx.commit()?;
        self.writers.remove(&id);
        Ok(())
    }

    /// Removes a deployment that never committed an epoch, as if it had
    /// never been created: its tables, its views (when live), its catalog
    /// rows. What a process does when the deployment it just created fails
    /// before its first commit, so no empty version is left behind. Returns
    /// `false`, changing nothing, once any epoch has committed or its state
    /// is no longer `created_as` (a building version that was swapped in
    /// retired another; removing it would leave its outputs without a view).
    pub(super) fn abandon_unused(
        &mut self,
        lease: &Lease,
        created_as: DeploymentState,
    ) -> Result<bool, TableError> {
        let tx = self.write_txn()?;
        require_lease(&tx, lease)?;
        let id = lease.deployment;
        if state_in(&tx, id)? != created_as {
            return Ok(false);
        }
        let used: bool = tx.query_row(
            "SELECT epochs > 0 OR EXISTS (SELECT 1 FROM kappa_offsets WHERE deployment = ?1) \
             FROM kappa_deployments WHERE id = ?1",
            [id],
            |r| r.get(0),
        )?;
        if used {
            return Ok(false);
        }
        let d = deployment_in(&tx, id)?;
        if d.state == DeploymentState::Live {
            for o in &d.outputs {
                drop_view(&tx, &o.name)?;
            }
        }
        for table in d.tables() {
            drop_table(&tx, &table)?;
        }
        for sql in [
            "DELETE FROM kappa_outputs WHERE deployment = ?1",
            "DELETE FROM kappa_offsets WHERE deployment = ?1",
            "DELETE FROM kappa_deployments WHERE id = ?1",
        ] {
            tx.execute(sql, [id])?;
        }
        tx.commit()?;
        self.writers.remove(&id);
        Ok(true)
    }

    /// Drops the retired deployments of these outputs beyond the `keep` most
    /// recently live ones, in one transaction; returns the dropped ids. "Most
    /// recently live" is the latest `swapped_at` (the time it last went live),
    /// not the version number: after a rollback the older version is the one
    /// that was live last, and the one to keep for the next rollback.
    pub(super) fn retire_old(
        &mut self,
        outputs: &[String],
        keep: usize,
    ) -> Result<Vec<i64>, TableError> {
        let tx = self.write_txn()?;
        let mut retired: Vec<(i64, i64)> = Vec::new();
        {
            let mut stmt = tx.prepare_cached(
                "SELECT DISTINCT coalesce(d.swapped_at, d.created_at), d.id FROM kappa_outputs o \
                 JOIN kappa_deployments d ON d.id = o.deployment \
                 WHERE o.output = ?1 AND d.state = 'retired'",
            )?;
            for output in outputs {
                for row in stmt.query_map([output], |r| Ok((r.get(0)?, r.get(1)?)))? {
                    retired.push(row?);
                }
            }
        }
        retired.sort_unstable_by(|a, b| b.cmp(a));
        retired.dedup();
        let doomed: Vec<i64> = retired.into_iter().skip(keep).map(|(_, id)| id).collect();
        for &id in &doomed {
            drop_in(&tx, id)?;
        }
        tx.commit()?;
        for id in &doomed {
            self.writers.remove(id);
        }
        Ok(doomed)
    }
}

fn drop_in(conn: &Connection, id: i64) -> Result<(), TableError> {
    let state = state_in(conn, id)?;
    if matches!(state, DeploymentState::Live | DeploymentState::Dropped) {
        return Err(TableError::StateConflict {
            id,
            name: name_in(conn, id),
            state,
            action: "be dropped (only a building or retired deployment can)",
        });
    }
    let d = deployment_in(conn, id)?;
    for table in d.tables() {
        drop_table(conn, &table)?;
    }
    set_state(conn, id, DeploymentState::Dropped)?;
    Ok(())
}

/// Most columns the float mask covers (see [`create_table`]).
const MASKED_COLUMNS: usize = 62;

/// The table of a split version's rows without a NULL (see [`create_table`]).
pub(super) fn exact_table(table: &str) -> String {
    format!("kappa_rows__{table}")
}

/// The table of a split version's rows with a NULL (see [`create_table`]).
pub(super) fn nulls_table(table: &str) -> String {
    format!("kappa_nulls__{table}")
}

/// Creates a version table: the output's columns without declared types
/// and the multiplicity `kappa_n`, each distinct row stored once.
///
/// An output with a key is split in two behind a view of the version
/// table's name, so that a row is added, removed or counted by one lookup
/// in one B-tree (`epoch.rs`):
/// - `kappa_rows__TABLE`, `WITHOUT ROWID`, its primary key the key
///   columns, then the others, then `kappa_mask`, which columns are
///   floats: SQLite's equality takes an integer for an equal float, the
///   row's does not. A primary key cannot hold NULL, so this holds the
///   rows without one;
/// - `kappa_nulls__TABLE`, the rows with a NULL (a NaN float is stored as
///   one), indexed on the key and matched column by column.
///
/// Readers see one table: every row is in exactly one of the two. An
/// output without a key, or too wide for the mask, is one table with an
/// index on its key columns.
pub(super) fn create_table(
    conn: &Connection,
    table: &str,
    schema: &OutputSchema,
) -> Result<(), TableError> {
    let columns: Vec<String> = schema.columns.iter().map(|c| quote(c)).collect();
    let key: Vec<String> = schema.key.iter().map(|&k| columns[k].clone()).collect();
    if key.is_empty() || columns.len() > MASKED_COLUMNS {
        return create_indexed(conn, table, &columns, &key);
    }
    let list = columns.join(", ");
    let others = (0..columns.len()).filter(|i| !schema.key.contains(i));
    let primary: Vec<&str> = (schema.key.iter().copied().chain(others))
        .map(|i| columns[i].as_str())
        .chain(["kappa_mask"])
        .collect();
    let (exact, nulls) = (quote(&exact_table(table)), nulls_table(table));
    conn.execute_batch(&format!(
        "CREATE TABLE {exact} ({list}, kappa_mask INTEGER NOT NULL, \
         kappa_n INTEGER NOT NULL CHECK (kappa_n > 0), PRIMARY KEY ({})) WITHOUT ROWID;
         CREATE VIEW {} AS SELECT {list}, kappa_n FROM {exact} \
         UNION ALL SELECT {list}, kappa_n FROM {};",
        primary.join(", "),
        quote(table),
        quote(&nulls),
    ))?;
    create_indexed(conn, &nulls, &columns, &key)
}

/// A table of `columns` and `kappa_n`, with an index on `key` if it has one.
fn create_indexed(
    conn: &Connection,
    table: &str,
    columns: &[String],
    key: &[String],
) -> Result<(), TableError> {
    conn.execute_batch(&format!(
        "CREATE TABLE {} ({}, kappa_n INTEGER NOT NULL CHECK (kappa_n > 0))",
        quote(table),
        columns.join(", ")
    ))?;
    if key.is_empty() {
        return Ok(());
    }
    conn.execute_batch(&format!(
        "CREATE INDEX {} ON {} ({})",
        quote(&format!("kappa_key__{table}")),
        quote(table),
        key.join(", ")
    ))?;
    Ok(())
}

/// How a version table stores its rows (see [`create_table`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Layout {
    /// One table with a plain index on the key (or none).
    Indexed,
    /// One table whose index over the row and its float mask is UNIQUE:
    /// a bag made by a kappa from before the split.
    UniqueIndexed,
    /// An exact table and a table of rows with a NULL.
    Split,
}

/// How `table` stores its rows.
pub(super) fn layout(conn: &Connection, table: &str) -> Result<Layout, TableError> {
    let split: bool = conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [exact_table(table)],
        |r| r.get(0),
    )?;
    if split {
        return Ok(Layout::Split);
    }
    let unique: Option<bool> = conn
        .query_row(
            "SELECT \"unique\" FROM pragma_index_list(?1) WHERE name = ?2",
            [table, &format!("kappa_key__{table}")],
            |r| r.get(0),
        )
        .optional()?;
    Ok(if unique.unwrap_or(false) {
        Layout::UniqueIndexed
    } else {
        Layout::Indexed
    })
}

/// Drops a version table, whatever its layout.
pub(super) fn drop_table(conn: &Connection, table: &str) -> Result<(), TableError> {
    if layout(conn, table)? == Layout::Split {
        conn.execute_batch(&format!(
            "DROP VIEW IF EXISTS {}; DROP TABLE {}; DROP TABLE IF EXISTS {};",
            quote(table),
            quote(&exact_table(table)),
            quote(&nulls_table(table)),
        ))?;
    } else {
        conn.execute_batch(&format!("DROP TABLE IF EXISTS {}", quote(table)))?;
    }
    Ok(())
}

/// (Re)defines the view `OUTPUT` to select from `table`.
pub(super) fn point_view(
    conn: &Connection,
    schema: &OutputSchema,
    table: &str,
) -> Result<(), TableError> {
    let mut columns: Vec<String> = schema.columns.iter().map(|c| quote(c)).collect();
    if is_bag(schema) {
        columns.push("kappa_n AS kappa_count".to_string());
    }
    drop_view(conn, &schema.name)?;
    conn.execute_batch(&format!(
        "CREATE VIEW {} AS SELECT {} FROM {}",
        quote(&schema.name),
        columns.join(", "),
        quote(table)
    ))?;
    Ok(())
}

fn drop_view(conn: &Connection, output: &str) -> Result<(), TableError> {
    conn.execute_batch(&format!("DROP VIEW IF EXISTS {}", quote(output)))?;
    Ok(())
}

/// Fails (so the transaction rolls back) unless exactly one deployment is
/// live for `output`.
fn check_single_live(conn: &Connection, output: &str) -> Result<(), TableError> {
    let live: Vec<i64> = conn
        .prepare_cached(
            "SELECT d.id FROM kappa_outputs o JOIN kappa_deployments d ON d.id = o.deployment \
             WHERE o.output = ?1 AND d.state = 'live'",
        )?
        .query_map([output], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    if live.len() != 1 {
        return Err(TableError::Corrupt {
            what: format!("output '{output}'"),
            reason: format!("a swap would leave live deployments {live:?}"),
        });
    }
    Ok(())
}
