//! The exactly-once commit into PostgreSQL: one epoch's output changes, the
//! input offsets they cover and the figures, in ONE transaction; see
//! `sqlite/epoch.rs` for the contract, which is the same.
//!
//! How the changes of one output are applied, set by set: they are copied
//! (`COPY ... FROM STDIN`, text format) into a temporary table with each
//! row's identity ([`row_id`]) and diff, then
//! 1. a retraction whose row is missing, or held fewer times, fails the
//!    epoch (`RetractMissing`; nothing is written);
//! 2. rows whose count falls to zero are deleted, other retractions
//!    decrement their rows;
//! 3. additions are inserted, or increment the row already there
//!    (`INSERT ... ON CONFLICT (kappa_id) DO UPDATE`).
//!
//! A handful of statements per output and epoch, whatever its size, each a
//! join on the primary key.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use postgres::{Client, Transaction};

use super::super::catalog::json;
use super::catalog::{accepting, begin, deployment_in, parse_state, require_lease, write_stats};
use super::values::{Kind, copy_bytes, copy_field, parse_kinds, row_id};
use super::{PgStore, swap};
use crate::schema::OutputSchema;
use crate::table::ident::{quote, table_name};
use crate::table::outbox::messages;
use crate::table::{
    DeploymentState, EpochStats, InputOffset, Lease, SinkMessage, SinkSpec, TableError,
};
use crate::value::Row;

/// What the committer needs of a deployment: its outputs and version (they
/// never change) and the committed kinds of their columns.
#[derive(Clone, Debug)]
pub(super) struct Writer {
    version: u32,
    outputs: Vec<OutputSchema>,
    kinds: Vec<Vec<Kind>>,
}

/// What one epoch's commit writes (see [`crate::table::TableStore::commit_epoch_with_state`]).
#[derive(Clone, Copy)]
pub(super) struct EpochWrite<'a> {
    pub changes: &'a [Vec<(Row, isize)>],
    pub offsets: &'a [InputOffset],
    pub stats: &'a EpochStats,
    pub sinks: &'a [SinkSpec],
    pub state: &'a crate::table::StateWrite<'a>,
}

impl PgStore {
    /// One attempt at the commit; `before` gets the deployment's epoch count
    /// as this transaction saw it, for [`landed`].
    pub(super) fn commit_in(
        &mut self,
        lease: &Lease,
        epoch: &EpochWrite<'_>,
        before: &std::cell::Cell<Option<i64>>,
    ) -> Result<(), TableError> {
        let EpochWrite {
            changes,
            offsets,
            stats,
            sinks,
            state: state_write,
        } = *epoch;
        before.set(None);
        let id = lease.deployment;
        let schema = self.schema();
        let writer = self.writer(id)?;
        if changes.len() != writer.outputs.len() {
            return Err(TableError::OutputCount {
                id,
                expected: writer.outputs.len(),
                actual: changes.len(),
            });
        }
        let kinds = widened(&writer, changes)?;
        let mut temp = std::mem::take(self.temp_tables.get_mut());
        let result: Result<(), TableError> = (|| {
            let mut tx = begin(self.client.get_mut(), false)?;
            require_lease(&mut tx, lease, true)?;
            let (state, epochs) = state_and_epochs(&mut tx, id)?;
            before.set(Some(epochs));
            let live = state == DeploymentState::Live;
            let mut used = Vec::new();
            for (i, (o, rows)) in writer.outputs.iter().zip(changes).enumerate() {
                let bare = table_name(&o.name, writer.version);
                let table = format!("{schema}.{}", quote(&bare));
                if kinds[i] != writer.kinds[i] {
                    let (old, new) = (&writer.kinds[i][..], &kinds[i][..]);
                    retype(&mut tx, &schema, id, (i, o), &bare, old, new, live)?;
                }
                if rows.is_empty() {
                    continue;
                }
                let changes_table = changes_table(&mut tx, o.columns.len(), &mut temp, &mut used)?;
                apply(&mut tx, (&bare, &table), &changes_table, o, &kinds[i], rows)?;
                for sink in sinks.iter().filter(|s| s.output == i) {
                    write_outbox(&mut tx, id, &sink.name, o, &table, &changes_table, rows)?;
                }
            }
            write_offsets(&mut tx, id, offsets)?;
            write_stats(&mut tx, id, stats, true)?;
            super::state::write(&mut tx, id, state_write)?;
            tx.commit()?;
            Ok(())
        })();
        // Temporary tables created in a rolled-back transaction are gone:
        // the list is kept only when this one committed (`CREATE ... IF NOT
        // EXISTS` makes a forgotten one harmless).
        result?;
        *self.temp_tables.get_mut() = temp;
        if kinds != writer.kinds {
            drop(writer);
            self.kinds_committed(id, kinds);
        }
        Ok(())
    }

    /// The deployment's writer, read from the catalog on first use.
    fn writer(&mut self, id: i64) -> Result<Arc<Writer>, TableError> {
        if let Some(w) = self.writers.get(&id) {
            return Ok(w.clone());
        }
        let client = self.client.get_mut();
        let d = deployment_in(client, id)?;
        let mut kinds = Vec::new();
        for row in client.query(
            "SELECT kinds FROM kappa.outputs WHERE deployment = $1 ORDER BY position",
            &[&id],
        )? {
            kinds.push(parse_kinds(row.get(0), &format!("deployment {id}"))?);
        }
        let w = Arc::new(Writer {
            version: d.version.0,
            outputs: d.outputs,
            kinds,
        });
        self.writers.insert(id, w.clone());
        Ok(w)
    }

    fn kinds_committed(&mut self, id: i64, kinds: Vec<Vec<Kind>>) {
        if let Some(w) = self.writers.get_mut(&id) {
            Arc::make_mut(w).kinds = kinds;
        }
    }
}

/// The deployment's state, which must accept epochs (else `StateConflict`),
/// and its epoch count, in one round trip.
fn state_and_epochs(
    tx: &mut Transaction<'_>,
    id: i64,
) -> Result<(DeploymentState, i64), TableError> {
    let row = tx
        .query_opt(
            "SELECT state, epochs FROM kappa.deployments WHERE id = $1",
            &[&id],
        )?
        .ok_or(TableError::DeploymentNotFound { id })?;
    let (state, epochs): (String, i64) = (row.get(0), row.get(1));
    let state = parse_state(id, &state)?;
    accepting(tx, id, state, "commit an epoch")?;
    Ok((state, epochs))
}

/// The kinds the columns must have to hold this epoch's rows; `Arity` or
/// `MixedColumn` when a row does not fit.
fn widened(w: &Writer, changes: &[Vec<(Row, isize)>]) -> Result<Vec<Vec<Kind>>, TableError> {
    let mut kinds = w.kinds.clone();
    for ((o, rows), kinds) in w.outputs.iter().zip(changes).zip(&mut kinds) {
        let table = table_name(&o.name, w.version);
        if kinds.len() != o.columns.len() {
            return Err(TableError::Corrupt {
                what: format!("table '{table}'"),
                reason: format!(
                    "{} column kinds for {} columns",
                    kinds.len(),
                    o.columns.len()
                ),
            });
        }
        for (row, _) in rows {
            if row.len() != o.columns.len() {
                return Err(TableError::Arity {
                    table,
                    expected: o.columns.len(),
                    actual: row.len(),
                });
            }
            for ((kind, v), column) in kinds.iter_mut().zip(row).zip(&o.columns) {
                *kind = kind.widen(v).map_err(|got| TableError::MixedColumn {
                    table: table.clone(),
                    column: column.clone(),
                    had: kind.describe(),
                    got,
                })?;
            }
        }
    }
    Ok(kinds)
}

/// Changes the types of the columns whose kind widened (and the view over
/// them, which PostgreSQL will not let a column change under), and records
/// the new kinds, in the epoch's transaction.
#[allow(clippy::too_many_arguments)]
fn retype(
    tx: &mut Transaction<'_>,
    schema: &str,
    id: i64,
    (position, o): (usize, &OutputSchema),
    bare: &str,
    old: &[Kind],
    new: &[Kind],
    live: bool,
) -> Result<(), TableError> {
    if live {
        swap::drop_view(tx, schema, &o.name)?;
    }
    let alters: Vec<String> = o
        .columns
        .iter()
        .zip(old.iter().zip(new))
        .filter(|(_, (a, b))| a.sql_type() != b.sql_type())
        .map(|(c, (a, b))| {
            let c = quote(c);
            format!(
                "ALTER COLUMN {c} TYPE {} USING {}",
                b.sql_type(),
                a.convert(*b, &c)
            )
        })
        .collect();
    if !alters.is_empty() {
        let table = format!("{schema}.{}", quote(bare));
        tx.batch_execute(&format!("ALTER TABLE {table} {}", alters.join(", ")))?;
    }
    tx.execute(
        "UPDATE kappa.outputs SET kinds = $3 WHERE deployment = $1 AND position = $2",
        &[&id, &(position as i32), &json(new)],
    )?;
    if live {
        swap::point_view(tx, schema, o, bare)?;
    }
    Ok(())
}

/// The temporary table for changes of `arity` columns, created once per
/// connection, emptied if this transaction used it already.
fn changes_table(
    tx: &mut Transaction<'_>,
    arity: usize,
    created: &mut Vec<usize>,
    used: &mut Vec<usize>,
) -> Result<String, TableError> {
    let name = format!("kappa_changes_{arity}");
    if !created.contains(&arity) {
        let columns: Vec<String> = (1..=arity).map(|i| format!("v{i} text")).collect();
        tx.batch_execute(&format!(
            "CREATE TEMP TABLE IF NOT EXISTS {name} (id bytea NOT NULL, d bigint NOT NULL, {}) \
             ON COMMIT DELETE ROWS",
            columns.join(", ")
        ))?;
        created.push(arity);
    }
    if used.contains(&arity) {
        tx.batch_execute(&format!("TRUNCATE {name}"))?;
    }
    used.push(arity);
    Ok(name)
}

/// Applies one output's consolidated changes (see the module docs).
fn apply(
    tx: &mut Transaction<'_>,
    (bare, table): (&str, &str),
    changes: &str,
    o: &OutputSchema,
    kinds: &[Kind],
    rows: &[(Row, isize)],
) -> Result<(), TableError> {
    let n = o.columns.len();
    let vs: Vec<String> = (1..=n).map(|i| format!("v{i}")).collect();
    let mut ids: HashMap<[u8; 32], usize> = HashMap::with_capacity(rows.len());
    {
        let mut copy = tx.copy_in(&format!(
            "COPY {changes} (id, d, {}) FROM STDIN",
            vs.join(", ")
        ))?;
        let mut line = String::new();
        for (i, (row, diff)) in rows.iter().enumerate() {
            line.clear();
            let id = row_id(row);
            ids.insert(id, i);
            copy_bytes(&mut line, &id);
            line.push('\t');
            line.push_str(&diff.to_string());
            for (v, kind) in row.iter().zip(kinds) {
                line.push('\t');
                copy_field(&mut line, kind.text(v).as_deref());
            }
            line.push('\n');
            copy.write_all(line.as_bytes()).map_err(copy_error)?;
        }
        copy.finish()?;
    }
    if rows.iter().any(|(_, d)| *d < 0) {
        let missing = tx.query_opt(
            &format!(
                "SELECT c.id FROM {changes} c LEFT JOIN {table} t ON t.kappa_id = c.id \
                 WHERE c.d < 0 AND coalesce(t.kappa_n, 0) + c.d < 0 LIMIT 1"
            ),
            &[],
        )?;
        if let Some(r) = missing {
            let id: Vec<u8> = r.get(0);
            let i = <[u8; 32]>::try_from(id.as_slice())
                .ok()
                .and_then(|id| ids.get(&id).copied())
                .unwrap_or(0);
            let (row, diff) = &rows[i];
            return Err(TableError::RetractMissing {
                table: bare.to_string(),
                row: format!("{row:?}"),
                diff: -(*diff as i64),
            });
        }
        tx.batch_execute(&format!(
            "DELETE FROM {table} t USING {changes} c WHERE t.kappa_id = c.id AND t.kappa_n + c.d = 0; \
             UPDATE {table} t SET kappa_n = t.kappa_n + c.d FROM {changes} c \
             WHERE t.kappa_id = c.id AND c.d < 0"
        ))?;
    }
    if rows.iter().any(|(_, d)| *d > 0) {
        let columns: Vec<String> = o.columns.iter().map(|c| quote(c)).collect();
        let casts: Vec<String> = vs
            .iter()
            .zip(kinds)
            .map(|(v, k)| format!("{v}::{}", k.sql_type()))
            .collect();
        tx.batch_execute(&format!(
            "INSERT INTO {table} AS t ({}, kappa_n, kappa_id) SELECT {}, d, id FROM {changes} \
             WHERE d > 0 ON CONFLICT (kappa_id) DO UPDATE SET kappa_n = t.kappa_n + excluded.kappa_n",
            columns.join(", "),
            casts.join(", ")
        ))?;
    }
    Ok(())
}

fn copy_error(e: std::io::Error) -> TableError {
    TableError::Postgres {
        store: String::new(),
        message: format!("copying an epoch's changes: {e}"),
        connection: true,
    }
}

/// Writes one sink's messages for an output applied just now (a bag's
/// counts read back from its table).
fn write_outbox(
    tx: &mut Transaction<'_>,
    id: i64,
    sink: &str,
    o: &OutputSchema,
    table: &str,
    changes: &str,
    rows: &[(Row, isize)],
) -> Result<(), TableError> {
    let counts: HashMap<Vec<u8>, i64> = tx
        .query(
            &format!("SELECT c.id, t.kappa_n FROM {changes} c JOIN {table} t ON t.kappa_id = c.id"),
            &[],
        )?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let messages = messages(o, rows, |row| Ok(counts.get(&row_id(row)[..]).copied()))?;
    if messages.is_empty() {
        return Ok(());
    }
    let (keys, values): (Vec<String>, Vec<Option<String>>) = messages.into_iter().unzip();
    tx.execute(
        "INSERT INTO kappa.outbox (deployment, sink, seq, key, value) \
         SELECT $1, $2, m.o + (SELECT coalesce(max(seq), 0) FROM kappa.outbox \
                               WHERE deployment = $1 AND sink = $2), m.k, m.v \
         FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS m(k, v, o)",
        &[&id, &sink, &keys, &values],
    )?;
    Ok(())
}

/// Upserts the offsets, refusing any that would go back.
fn write_offsets(
    tx: &mut Transaction<'_>,
    id: i64,
    offsets: &[InputOffset],
) -> Result<(), TableError> {
    for o in offsets {
        let partition = i64::from(o.partition);
        let committed: Option<i64> = tx
            .query_opt(
                "SELECT next_offset FROM kappa.offsets \
                 WHERE deployment = $1 AND input = $2 AND partition = $3",
                &[&id, &o.input, &partition],
            )?
            .map(|r| r.get(0));
        if let Some(committed) = committed.map(|c| c as u64).filter(|&c| o.next < c) {
            return Err(TableError::OffsetRegression {
                id,
                name: super::catalog::name_in(tx, id),
                input: o.input.clone(),
                partition: o.partition,
                committed,
                given: o.next,
            });
        }
        let (last_offset, last_crc) = o.last.unzip();
        tx.execute(
            "INSERT INTO kappa.offsets (deployment, input, topic, partition, next_offset, \
             last_offset, last_crc) VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (deployment, input, partition) DO UPDATE SET topic = excluded.topic, \
             next_offset = excluded.next_offset, \
             last_offset = coalesce(excluded.last_offset, kappa.offsets.last_offset), \
             last_crc = coalesce(excluded.last_crc, kappa.offsets.last_crc)",
            &[
                &id,
                &o.input,
                &o.topic,
                &partition,
                &(o.next as i64),
                &last_offset.map(|v| v as i64),
                &last_crc.map(i64::from),
            ],
        )?;
    }
    Ok(())
}

/// After a lost connection: `Some` when the commit that failed had landed
/// (the epoch count moved past what its transaction saw).
pub(super) fn landed(
    c: &mut Client,
    lease: &Lease,
    before: Option<i64>,
) -> Result<Option<()>, TableError> {
    let Some(before) = before else {
        return Ok(None);
    };
    let now: i64 = c
        .query_one(
            "SELECT epochs FROM kappa.deployments WHERE id = $1",
            &[&lease.deployment],
        )?
        .get(0);
    Ok((now > before).then_some(()))
}

pub(super) fn outbox(c: &mut Client, id: i64) -> Result<Vec<SinkMessage>, TableError> {
    Ok(c.query(
        "SELECT sink, seq, key, value FROM kappa.outbox WHERE deployment = $1 \
             ORDER BY sink, seq",
        &[&id],
    )?
    .iter()
    .map(|r| SinkMessage {
        sink: r.get(0),
        seq: r.get(1),
        key: r.get(2),
        value: r.get(3),
    })
    .collect())
}

pub(super) fn clear_outbox(
    c: &mut Client,
    lease: &Lease,
    sink: &str,
    seq: i64,
) -> Result<(), TableError> {
    let mut tx = begin(c, false)?;
    require_lease(&mut tx, lease, true)?;
    tx.execute(
        "DELETE FROM kappa.outbox WHERE deployment = $1 AND sink = $2 AND seq <= $3",
        &[&lease.deployment, &sink, &seq],
    )?;
    tx.commit()?;
    Ok(())
}
