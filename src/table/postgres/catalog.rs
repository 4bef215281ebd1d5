//! The PostgreSQL store's catalog: creating deployments and reading them
//! back, offsets, progress, and the owner's generation. The rules are the
//! SQLite store's (see `sqlite/catalog.rs`); here they are kept with row
//! locks and advisory locks instead of SQLite's single writer.

use postgres::types::ToSql;
use postgres::{Client, GenericClient, Row as PgRow, Transaction};

use super::super::catalog::{RawDeployment, json, validate};
use super::super::owner::describe;
use super::{CATALOG_LOCK, PgStore};
use crate::table::{
    Deployment, DeploymentState, EpochStats, InputOffset, Lease, NewDeployment, Progress,
    TableError, TableVersion, ident, now_ms,
};

/// The columns `raw` expects, in order.
const SELECT_DEPLOYMENT: &str = "SELECT id, job, job_version, version, params, inputs, outputs, \
     state, created_at, caught_up_at, swapped_at, records_applied, bad_rows, epochs, \
     last_epoch_at, last_epoch_ms, records_per_sec, lag, note, late, generation, reading \
     FROM kappa.deployments";

/// PostgreSQL truncates longer identifiers; kappa refuses them instead.
const MAX_IDENTIFIER: usize = 63;

/// A write transaction. `exclusive` for changes to the catalog's shape
/// (create, swap, drop): they wait for every other writer and exclude them;
/// epochs and progress share the lock and order themselves by row locks.
pub(super) fn begin(client: &mut Client, exclusive: bool) -> Result<Transaction<'_>, TableError> {
    let mut tx = client.transaction()?;
    let sql = if exclusive {
        "SELECT pg_advisory_xact_lock($1, $2)"
    } else {
        "SELECT pg_advisory_xact_lock_shared($1, $2)"
    };
    tx.execute(sql, &[&CATALOG_LOCK.0, &CATALOG_LOCK.1])?;
    Ok(tx)
}

impl PgStore {
    /// Creates a deployment with its tables (and views when live), in one
    /// transaction.
    pub(super) fn create_in(&mut self, d: &NewDeployment) -> Result<Deployment, TableError> {
        validate(d)?;
        check_lengths(d)?;
        let schema = self.schema();
        let mut tx = begin(self.client.get_mut(), true)?;
        let version = next_version(&mut tx, d)?;
        if d.state == DeploymentState::Live {
            for o in &d.outputs {
                if let Some(live) = live_owner(&mut tx, &o.name)? {
                    return Err(TableError::LiveConflict {
                        output: o.name.clone(),
                        live,
                        live_version: deployment_in(&mut tx, live)?.version,
                    });
                }
            }
        }
        let now = now_ms();
        let live = d.state == DeploymentState::Live;
        let row = tx.query_one(
            "INSERT INTO kappa.deployments (job, job_version, version, params, inputs, outputs, \
             state, created_at, swapped_at, note) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             RETURNING id",
            &[
                &d.job,
                &i64::from(d.job_version),
                &i64::from(version),
                &json(&d.params),
                &json(&d.inputs),
                &json(&d.outputs),
                &d.state.as_str(),
                &now,
                &live.then_some(now),
                &d.note,
            ],
        )?;
        let id: i64 = row.get(0);
        for (position, o) in d.outputs.iter().enumerate() {
            let kinds = vec![super::values::Kind::None; o.columns.len()];
            tx.execute(
                "INSERT INTO kappa.outputs (output, version, deployment, position, kinds) \
                 VALUES ($1, $2, $3, $4, $5)",
                &[
                    &o.name,
                    &i64::from(version),
                    &id,
                    &(position as i32),
                    &json(&kinds),
                ],
            )?;
            let table = ident::table_name(&o.name, version);
            super::swap::create_table(&mut tx, &schema, &table, o)?;
            if live {
                super::swap::point_view(&mut tx, &schema, o, &table)?;
            }
        }
        let created = deployment_in(&mut tx, id)?;
        tx.commit()?;
        Ok(created)
    }
}

/// Names must fit PostgreSQL's identifiers, which are cut at 63 bytes.
fn check_lengths(d: &NewDeployment) -> Result<(), TableError> {
    let too_long = |kind, name: &str| TableError::InvalidName {
        kind,
        name: name.to_string(),
        reason: "PostgreSQL cuts identifiers at 63 bytes (with '__vN' for the version tables)",
    };
    for o in &d.outputs {
        // Room for the version suffix of the thousandth version.
        if o.name.len() + "__v9999".len() > MAX_IDENTIFIER {
            return Err(too_long("output", &o.name));
        }
        if let Some(c) = o.columns.iter().find(|c| c.len() > MAX_IDENTIFIER) {
            return Err(too_long("column", c));
        }
    }
    Ok(())
}

/// 1 + the highest version ever given to any of the outputs.
fn next_version(c: &mut impl GenericClient, d: &NewDeployment) -> Result<u32, TableError> {
    let names: Vec<String> = d.outputs.iter().map(|o| o.name.to_lowercase()).collect();
    let max: Option<i64> = c
        .query_one(
            "SELECT max(version) FROM kappa.outputs WHERE lower(output) = ANY($1)",
            &[&names],
        )?
        .get(0);
    Ok(max.unwrap_or(0) as u32 + 1)
}

/// The live deployment that owns `output`, if any.
pub(super) fn live_owner(
    c: &mut impl GenericClient,
    output: &str,
) -> Result<Option<i64>, TableError> {
    Ok(c.query_opt(
        "SELECT d.id FROM kappa.outputs o JOIN kappa.deployments d ON d.id = o.deployment \
         WHERE lower(o.output) = lower($1) AND d.state = 'live' ORDER BY d.id LIMIT 1",
        &[&output],
    )?
    .map(|r| r.get(0)))
}

pub(super) fn deployment_in(c: &mut impl GenericClient, id: i64) -> Result<Deployment, TableError> {
    query_deployments(c, "WHERE id = $1", &[&id])?
        .pop()
        .ok_or(TableError::DeploymentNotFound { id })
}

/// Deployments selected by `tail` (a WHERE and ORDER BY clause).
pub(super) fn query_deployments(
    c: &mut impl GenericClient,
    tail: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Deployment>, TableError> {
    c.query(&format!("{SELECT_DEPLOYMENT} {tail}"), params)?
        .iter()
        .map(|r| raw(r).parse())
        .collect()
}

fn raw(r: &PgRow) -> RawDeployment {
    let u = |i: usize| r.get::<_, i64>(i) as u64;
    RawDeployment {
        fixed: Deployment {
            id: r.get(0),
            job: r.get(1),
            job_version: r.get::<_, i64>(2) as u32,
            version: TableVersion(r.get::<_, i64>(3) as u32),
            params: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            state: DeploymentState::Building,
            created_at: r.get(8),
            caught_up_at: r.get(9),
            swapped_at: r.get(10),
            progress: Progress {
                records_applied: u(11),
                bad_rows: u(12),
                epochs: u(13),
                last_epoch_at: r.get(14),
                last_epoch_ms: r.get::<_, Option<i64>>(15).map(|v| v as u64),
                records_per_sec: r.get(16),
                lag: Vec::new(),
                late_dropped: Vec::new(),
            },
            note: r.get(18),
            generation: r.get(20),
            // An epoch is one transaction here: its row locks do not keep
            // the live version's commits waiting as SQLite's file lock does.
            half_written: false,
            reading: r.get(21),
        },
        params: r.get(4),
        inputs: r.get(5),
        outputs: r.get(6),
        state: r.get(7),
        lag: r.get(17),
        late: r.get(19),
    }
}

pub(super) fn find_by_output(
    c: &mut Client,
    output: &str,
    version: Option<u32>,
) -> Result<Deployment, TableError> {
    let id = match version {
        Some(v) => c
            .query_opt(
                "SELECT deployment FROM kappa.outputs WHERE lower(output) = lower($1) \
                 AND version = $2",
                &[&output, &i64::from(v)],
            )?
            .map(|r| r.get(0)),
        None => live_owner(c, output)?,
    };
    let id = id.ok_or_else(|| TableError::OutputNotFound {
        output: output.to_string(),
        version,
    })?;
    deployment_in(c, id)
}

pub(super) fn input_offsets(c: &mut Client, id: i64) -> Result<Vec<InputOffset>, TableError> {
    state_in(c, id)?;
    let rows = c.query(
        "SELECT input, topic, partition, next_offset, last_offset, last_crc FROM kappa.offsets \
         WHERE deployment = $1 ORDER BY input, partition",
        &[&id],
    )?;
    Ok(rows
        .iter()
        .map(|r| {
            let last_offset: Option<i64> = r.get(4);
            let last_crc: Option<i64> = r.get(5);
            InputOffset {
                input: r.get(0),
                topic: r.get(1),
                partition: r.get::<_, i64>(2) as u32,
                next: r.get::<_, i64>(3) as u64,
                last: last_offset.zip(last_crc).map(|(o, c)| (o as u64, c as u32)),
            }
        })
        .collect())
}

pub(super) fn set_progress(
    c: &mut Client,
    lease: &Lease,
    stats: &EpochStats,
) -> Result<(), TableError> {
    let mut tx = begin(c, false)?;
    require_lease(&mut tx, lease, true)?;
    require_accepting(&mut tx, lease.deployment, "report progress")?;
    write_stats(&mut tx, lease.deployment, stats, false)?;
    tx.commit()?;
    Ok(())
}

pub(super) fn mark_caught_up(c: &mut Client, lease: &Lease) -> Result<(), TableError> {
    let mut tx = begin(c, false)?;
    require_lease(&mut tx, lease, true)?;
    require_accepting(&mut tx, lease.deployment, "be marked caught up")?;
    tx.execute(
        "UPDATE kappa.deployments SET caught_up_at = $2 WHERE id = $1",
        &[&lease.deployment, &now_ms()],
    )?;
    tx.commit()?;
    Ok(())
}

pub(super) fn set_note(c: &mut Client, id: i64, note: Option<&str>) -> Result<(), TableError> {
    set_text(c, id, "note", note)
}

pub(super) fn set_reading(c: &mut Client, id: i64, reading: &str) -> Result<(), TableError> {
    set_text(c, id, "reading", Some(reading))
}

/// Sets the text column `column` (a name of ours, never the user's) of
/// deployment `id`, which must exist.
fn set_text(c: &mut Client, id: i64, column: &str, value: Option<&str>) -> Result<(), TableError> {
    let mut tx = begin(c, false)?;
    state_in(&mut tx, id)?;
    tx.execute(
        &format!("UPDATE kappa.deployments SET {column} = $2 WHERE id = $1"),
        &[&id, &value],
    )?;
    tx.commit()?;
    Ok(())
}

pub(super) fn reopen(c: &mut Client, id: i64) -> Result<(), TableError> {
    let mut tx = begin(c, true)?;
    let state = state_in(&mut tx, id)?;
    if state != DeploymentState::Retired {
        return Err(TableError::StateConflict {
            id,
            name: name_in(&mut tx, id),
            state,
            action: "be reopened (only a retired deployment can)",
        });
    }
    set_state(&mut tx, id, DeploymentState::Building)?;
    tx.execute(
        "UPDATE kappa.deployments SET caught_up_at = NULL WHERE id = $1",
        &[&id],
    )?;
    tx.commit()?;
    Ok(())
}

pub(super) fn take_over(c: &mut Client, id: i64, owner: &str) -> Result<Lease, TableError> {
    let mut tx = begin(c, false)?;
    tx.query_opt(
        "SELECT 1 FROM kappa.deployments WHERE id = $1 FOR UPDATE",
        &[&id],
    )?;
    require_accepting(&mut tx, id, "be taken over")?;
    let generation: i64 = tx
        .query_one(
            "UPDATE kappa.deployments SET generation = generation + 1, owner = $2 WHERE id = $1 \
             RETURNING generation",
            &[&id, &owner],
        )?
        .get(0);
    tx.commit()?;
    Ok(Lease {
        deployment: id,
        generation,
    })
}

/// Fails with `Fenced` unless `lease` is the deployment's current one. With
/// `lock`, also locks the deployment's row until the transaction ends, so
/// that no take-over can commit between this check and the writes it guards.
pub(super) fn require_lease(
    c: &mut impl GenericClient,
    lease: &Lease,
    lock: bool,
) -> Result<(), TableError> {
    let sql = if lock {
        "SELECT generation, owner FROM kappa.deployments WHERE id = $1 FOR UPDATE"
    } else {
        "SELECT generation, owner FROM kappa.deployments WHERE id = $1"
    };
    let row = c
        .query_opt(sql, &[&lease.deployment])?
        .ok_or(TableError::DeploymentNotFound {
            id: lease.deployment,
        })?;
    let (generation, owner): (i64, Option<String>) = (row.get(0), row.get(1));
    if generation == lease.generation {
        return Ok(());
    }
    Err(TableError::Fenced {
        deployment: describe(&deployment_in(c, lease.deployment)?),
        owner: owner.unwrap_or_else(|| "another process".into()),
    })
}

/// A deployment's state; `DeploymentNotFound` if there is none.
pub(super) fn state_in(c: &mut impl GenericClient, id: i64) -> Result<DeploymentState, TableError> {
    let state: String = c
        .query_opt("SELECT state FROM kappa.deployments WHERE id = $1", &[&id])?
        .ok_or(TableError::DeploymentNotFound { id })?
        .get(0);
    parse_state(id, &state)
}

/// A state as the catalog holds it.
pub(super) fn parse_state(id: i64, text: &str) -> Result<DeploymentState, TableError> {
    text.parse().map_err(|reason| TableError::Corrupt {
        what: format!("deployment {id}"),
        reason,
    })
}

/// Fails with `StateConflict` unless the deployment is building or live.
pub(super) fn require_accepting(
    c: &mut impl GenericClient,
    id: i64,
    action: &'static str,
) -> Result<(), TableError> {
    let state = state_in(c, id)?;
    accepting(c, id, state, action)
}

/// `StateConflict` unless `state`, deployment `id`'s, accepts epochs.
pub(super) fn accepting(
    c: &mut impl GenericClient,
    id: i64,
    state: DeploymentState,
    action: &'static str,
) -> Result<(), TableError> {
    if state.accepts_epochs() {
        return Ok(());
    }
    Err(TableError::StateConflict {
        id,
        name: name_in(c, id),
        state,
        action,
    })
}

/// How errors name a deployment: `sessions v2` (or its id when unreadable).
pub(super) fn name_in(c: &mut impl GenericClient, id: i64) -> String {
    deployment_in(c, id).map_or_else(|_| format!("deployment {id}"), |d| describe(&d))
}

pub(super) fn set_state(
    c: &mut impl GenericClient,
    id: i64,
    state: DeploymentState,
) -> Result<(), TableError> {
    c.execute(
        "UPDATE kappa.deployments SET state = $2 WHERE id = $1",
        &[&id, &state.as_str()],
    )?;
    Ok(())
}

/// Stores an epoch's figures; `epoch` adds its records and counts it.
pub(super) fn write_stats(
    c: &mut impl GenericClient,
    id: i64,
    s: &EpochStats,
    epoch: bool,
) -> Result<(), TableError> {
    let (records, epochs) = if epoch {
        (s.records as i64, 1i64)
    } else {
        (0, 0)
    };
    let rate = Some(s.records_per_sec).filter(|r| r.is_finite());
    c.execute(
        "UPDATE kappa.deployments SET records_applied = records_applied + $2, \
         epochs = epochs + $3, bad_rows = $4, last_epoch_at = $5, last_epoch_ms = $6, \
         records_per_sec = $7, lag = $8, late = $9 WHERE id = $1",
        &[
            &id,
            &records,
            &epochs,
            &(s.bad_rows_total as i64),
            &now_ms(),
            &(s.epoch_ms as i64),
            &rate,
            &json(&s.lag),
            &json(&s.late_dropped),
        ],
    )?;
    Ok(())
}
