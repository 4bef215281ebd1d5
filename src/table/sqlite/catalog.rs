//! The catalog: creating deployments (with their version number and tables)
//! and reading them back; offsets and progress.
//!
//! Invariants kept here:
//! - A new deployment's version is 1 + the highest version `kappa_outputs`
//!   holds for any of its output names, read and written in the same
//!   `BEGIN IMMEDIATE` transaction, so two processes creating deployments at
//!   once cannot get the same number (and the primary key would refuse it).
//! - A deployment is created `building` or `live`; `live` only when none of
//!   its outputs has a live deployment, so at most one is live per output.
//! - A deployment's catalog row, tables, and (when live) views appear in one
//!   transaction: a crash leaves all or none of them.

use std::collections::BTreeMap;

use rusqlite::{Connection, OptionalExtension, Row as SqlRow, params};

use super::super::catalog::{RawDeployment, json, validate};
use super::super::owner::describe;
use super::InputOffset;
use super::Lease;
use super::deployment::{
    Deployment, DeploymentState, EpochStats, NewDeployment, Progress, TableVersion,
};
use super::owner::require_lease;
use super::{SqliteStore, TableError, ident, now_ms, swap};

/// The columns `read_deployment` expects, in order.
const SELECT_DEPLOYMENT: &str = "SELECT id, job, job_version, version, params, inputs, outputs, \
     state, created_at, caught_up_at, swapped_at, records_applied, bad_rows, epochs, \
     last_epoch_at, last_epoch_ms, records_per_sec, lag, note, late, generation, half_written, \
     reading FROM kappa_deployments";

impl SqliteStore {
    /// Creates a deployment in state `building` or `live` with its tables
    /// (and, when live, its views), all in one transaction. Names are
    /// checked first; nothing is written when any is invalid.
    pub(super) fn create_deployment(
        &mut self,
        d: &NewDeployment,
    ) -> Result<Deployment, TableError> {
        validate(d)?;
        let tx = self.write_txn()?;
        let version = next_version(&tx, d)?;
        if d.state == DeploymentState::Live {
            for o in &d.outputs {
                if let Some(live) = live_owner(&tx, &o.name)? {
                    return Err(TableError::LiveConflict {
                        output: o.name.clone(),
                        live,
                        live_version: deployment_in(&tx, live)?.version,
                    });
                }
            }
        }
        let now = now_ms();
        tx.execute(
            "INSERT INTO kappa_deployments (job, job_version, version, params, inputs, outputs, \
             state, created_at, swapped_at, note) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                d.job,
                d.job_version,
                version,
                json(&d.params),
                json(&d.inputs),
                json(&d.outputs),
                d.state.as_str(),
                now,
                (d.state == DeploymentState::Live).then_some(now),
                d.note,
            ],
        )?;
        let id = tx.last_insert_rowid();
        for (position, o) in d.outputs.iter().enumerate() {
            tx.execute(
                "INSERT INTO kappa_outputs (output, version, deployment, position) \
                 VALUES (?1, ?2, ?3, ?4)",
                params![o.name, version, id, position],
            )?;
            let table = ident::table_name(&o.name, version);
            swap::create_table(&tx, &table, o)?;
            if d.state == DeploymentState::Live {
                swap::point_view(&tx, o, &table)?;
            }
        }
        let created = deployment_in(&tx, id)?;
        tx.commit()?;
        Ok(created)
    }

    /// Every deployment, oldest first (for status and list).
    pub(super) fn deployments(&self) -> Result<Vec<Deployment>, TableError> {
        query_deployments(&self.conn, &format!("{SELECT_DEPLOYMENT} ORDER BY id"), [])
    }

    /// Every deployment that has (or had) output `output`, oldest first.
    pub(super) fn deployments_of(&self, output: &str) -> Result<Vec<Deployment>, TableError> {
        let sql = format!(
            "{SELECT_DEPLOYMENT} WHERE id IN \
             (SELECT deployment FROM kappa_outputs WHERE output = ?1) ORDER BY version"
        );
        query_deployments(&self.conn, &sql, [output])
    }

    /// The deployment that owns `output` at `version`, in any state, or the
    /// live one when `version` is `None`.
    pub(super) fn find_by_output(
        &self,
        output: &str,
        version: Option<u32>,
    ) -> Result<Deployment, TableError> {
        let id = match version {
            Some(v) => self
                .conn
                .query_row(
                    "SELECT deployment FROM kappa_outputs WHERE output = ?1 AND version = ?2",
                    params![output, v],
                    |r| r.get(0),
                )
                .optional()?,
            None => live_owner(&self.conn, output)?,
        };
        let id = id.ok_or_else(|| TableError::OutputNotFound {
            output: output.to_string(),
            version,
        })?;
        deployment_in(&self.conn, id)
    }

    /// The committed offsets of a deployment: (input, partition) → the next
    /// offset to read. Empty for a deployment that never committed.
    pub(super) fn offsets(&self, id: i64) -> Result<BTreeMap<(String, u32), u64>, TableError> {
        state_in(&self.conn, id)?;
        let mut stmt = self.conn.prepare_cached(
            "SELECT input, partition, next_offset FROM kappa_offsets WHERE deployment = ?1",
        )?;
        let rows = stmt.query_map([id], |r| Ok(((r.get(0)?, r.get(1)?), r.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Where the deployment stands on each input partition, with the last
    /// applied record of each (what a resuming owner checks the log against).
    pub(super) fn input_offsets(&self, id: i64) -> Result<Vec<InputOffset>, TableError> {
        state_in(&self.conn, id)?;
        let mut stmt = self.conn.prepare_cached(
            "SELECT input, topic, partition, next_offset, last_offset, last_crc FROM kappa_offsets \
             WHERE deployment = ?1 ORDER BY input, partition",
        )?;
        let rows = stmt.query_map([id], |r| {
            let last_offset: Option<u64> = r.get(4)?;
            let last_crc: Option<u32> = r.get(5)?;
            Ok(InputOffset {
                input: r.get(0)?,
                topic: r.get(1)?,
                partition: r.get(2)?,
                next: r.get(3)?,
                last: last_offset.zip(last_crc),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Records progress (lag, rate, bad rows) without changes, e.g. while
    /// the log is idle or a replay epoch is still open.
    pub(super) fn set_progress(
        &mut self,
        lease: &Lease,
        stats: &EpochStats,
    ) -> Result<(), TableError> {
        let id = lease.deployment;
        let tx = self.write_txn()?;
        require_accepting(&tx, id, "report progress")?;
        require_lease(&tx, lease)?;
        write_stats(&tx, id, stats, false)?;
        tx.commit()?;
        Ok(())
    }

    /// Records that the deployment has caught up with the log (now). The
    /// runner calls it when the lag first falls to its threshold.
    pub(super) fn mark_caught_up(&mut self, lease: &Lease) -> Result<(), TableError> {
        let id = lease.deployment;
        let tx = self.write_txn()?;
        require_accepting(&tx, id, "be marked caught up")?;
        require_lease(&tx, lease)?;
        tx.execute(
            "UPDATE kappa_deployments SET caught_up_at = ?2 WHERE id = ?1",
            params![id, now_ms()],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Sets the free-text note shown by `kappa table status`.
    pub(super) fn set_note(&mut self, id: i64, note: Option<&str>) -> Result<(), TableError> {
        self.set_text(id, "note", note)
    }

    pub(super) fn set_reading(&mut self, id: i64, reading: &str) -> Result<(), TableError> {
        self.set_text(id, "reading", Some(reading))
    }

    /// Sets the text column `column` (a name of ours, never the user's) of
    /// deployment `id`, which must exist.
    fn set_text(&mut self, id: i64, column: &str, value: Option<&str>) -> Result<(), TableError> {
        let tx = self.write_txn()?;
        state_in(&tx, id)?;
        tx.execute(
            &format!("UPDATE kappa_deployments SET {column} = ?2 WHERE id = ?1"),
            params![id, value],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Turns a retired deployment back into a building one, so it accepts
    /// epochs again: the start of a rollback, which resumes it from its own
    /// offsets, lets it catch up, and swaps it in.
    pub(super) fn reopen(&mut self, id: i64) -> Result<(), TableError> {
        let tx = self.write_txn()?;
        let state = state_in(&tx, id)?;
        if state != DeploymentState::Retired {
            return Err(TableError::StateConflict {
                id,
                name: name_in(&tx, id),
                state,
                action: "be reopened (only a retired deployment can)",
            });
        }
        set_state(&tx, id, DeploymentState::Building)?;
        tx.execute(
            "UPDATE kappa_deployments SET caught_up_at = NULL WHERE id = ?1",
            [id],
        )?;
        tx.commit()?;
        Ok(())
    }
}

/// 1 + the highest version ever given to any of the outputs.
fn next_version(conn: &Connection, d: &NewDeployment) -> Result<u32, TableError> {
    let mut max = 0u32;
    for o in &d.outputs {
        let v: Option<u32> = conn.query_row(
            "SELECT max(version) FROM kappa_outputs WHERE output = ?1",
            [&o.name],
            |r| r.get(0),
        )?;
        max = max.max(v.unwrap_or(0));
    }
    Ok(max + 1)
}

/// The live deployment that owns `output`, if any.
pub(super) fn live_owner(conn: &Connection, output: &str) -> Result<Option<i64>, TableError> {
    Ok(conn
        .query_row(
            "SELECT d.id FROM kappa_outputs o JOIN kappa_deployments d ON d.id = o.deployment \
             WHERE o.output = ?1 AND d.state = 'live' ORDER BY d.id LIMIT 1",
            [output],
            |r| r.get(0),
        )
        .optional()?)
}

/// A deployment's state; `DeploymentNotFound` if there is none.
pub(super) fn state_in(conn: &Connection, id: i64) -> Result<DeploymentState, TableError> {
    let state: Option<String> = conn
        .prepare_cached("SELECT state FROM kappa_deployments WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?;
    let state = state.ok_or(TableError::DeploymentNotFound { id })?;
    state.parse().map_err(|reason| TableError::Corrupt {
        what: format!("deployment {id}"),
        reason,
    })
}

/// Fails with `StateConflict` unless the deployment is building or live.
pub(super) fn require_accepting(
    conn: &Connection,
    id: i64,
    action: &'static str,
) -> Result<(), TableError> {
    let state = state_in(conn, id)?;
    if !state.accepts_epochs() {
        let name = name_in(conn, id);
        return Err(TableError::StateConflict {
            id,
            name,
            state,
            action,
        });
    }
    Ok(())
}

/// How errors name a deployment: `sessions v2` (or its id when unreadable).
pub(super) fn name_in(conn: &Connection, id: i64) -> String {
    deployment_in(conn, id).map_or_else(|_| format!("deployment {id}"), |d| describe(&d))
}

pub(super) fn set_state(
    conn: &Connection,
    id: i64,
    state: DeploymentState,
) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE kappa_deployments SET state = ?2 WHERE id = ?1",
        params![id, state.as_str()],
    )?;
    Ok(())
}

/// Stores an epoch's figures; `epoch` adds its records and counts it.
pub(super) fn write_stats(
    conn: &Connection,
    id: i64,
    s: &EpochStats,
    epoch: bool,
) -> Result<(), TableError> {
    let (records, epochs) = if epoch { (s.records, 1u64) } else { (0, 0) };
    let rate = Some(s.records_per_sec).filter(|r| r.is_finite());
    conn.prepare_cached(
        "UPDATE kappa_deployments SET records_applied = records_applied + ?2, \
         epochs = epochs + ?3, bad_rows = ?4, last_epoch_at = ?5, last_epoch_ms = ?6, \
         records_per_sec = ?7, lag = ?8, late = ?9 WHERE id = ?1",
    )?
    .execute(params![
        id,
        records,
        epochs,
        s.bad_rows_total,
        now_ms(),
        s.epoch_ms,
        rate,
        json(&s.lag),
        json(&s.late_dropped)
    ])?;
    Ok(())
}

pub(super) fn deployment_in(conn: &Connection, id: i64) -> Result<Deployment, TableError> {
    query_deployments(conn, &format!("{SELECT_DEPLOYMENT} WHERE id = ?1"), [id])?
        .pop()
        .ok_or(TableError::DeploymentNotFound { id })
}

fn query_deployments<P: rusqlite::Params>(
    conn: &Connection,
    sql: &str,
    params: P,
) -> Result<Vec<Deployment>, TableError> {
    let mut stmt = conn.prepare_cached(sql)?;
    let raws = stmt
        .query_map(params, read_raw)?
        .collect::<Result<Vec<_>, _>>()?;
    raws.into_iter().map(RawDeployment::parse).collect()
}

fn read_raw(r: &SqlRow<'_>) -> rusqlite::Result<RawDeployment> {
    let fixed = Deployment {
        id: r.get(0)?,
        job: r.get(1)?,
        job_version: r.get(2)?,
        version: TableVersion(r.get(3)?),
        params: Vec::new(),
        inputs: Vec::new(),
        outputs: Vec::new(),
        state: DeploymentState::Building,
        created_at: r.get(8)?,
        caught_up_at: r.get(9)?,
        swapped_at: r.get(10)?,
        progress: Progress {
            records_applied: r.get(11)?,
            bad_rows: r.get(12)?,
            epochs: r.get(13)?,
            last_epoch_at: r.get(14)?,
            last_epoch_ms: r.get(15)?,
            records_per_sec: r.get(16)?,
            lag: Vec::new(),
            late_dropped: Vec::new(),
        },
        note: r.get(18)?,
        generation: r.get(20)?,
        half_written: r.get(21)?,
        reading: r.get(22)?,
    };
    Ok(RawDeployment {
        fixed,
        params: r.get(4)?,
        inputs: r.get(5)?,
        outputs: r.get(6)?,
        state: r.get(7)?,
        lag: r.get(17)?,
        late: r.get(19)?,
    })
}
