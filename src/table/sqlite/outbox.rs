//! The SQLite store's outbox table (see [`crate::table::outbox`]).

use rusqlite::{Connection, params};

use super::super::outbox::messages;
use super::ident::{quote, table_name};
use super::owner::require_lease;
use super::{SqliteStore, TableError};
use crate::schema::OutputSchema;
use crate::table::{Lease, SinkMessage};
use crate::value::Row;

/// Writes the messages of one output's consolidated changes, applied
/// already in this transaction (a bag's counts are read back from its table).
pub(super) fn write(
    conn: &Connection,
    deployment: i64,
    sink: &str,
    schema: &OutputSchema,
    version: u32,
    changes: &[(Row, isize)],
) -> Result<(), TableError> {
    let matches: Vec<String> = (1..=schema.columns.len())
        .zip(&schema.columns)
        .map(|(i, c)| format!("{c} IS ?{i} AND typeof({c}) = typeof(?{i})", c = quote(c)))
        .collect();
    let sql = format!(
        "SELECT kappa_n FROM {} WHERE {}",
        quote(&table_name(&schema.name, version)),
        matches.join(" AND ")
    );
    let mut count = conn.prepare_cached(&sql)?;
    let messages = messages(schema, changes, |row| {
        Ok(count
            .query_map(rusqlite::params_from_iter(row.iter()), |r| r.get(0))?
            .next()
            .transpose()?)
    })?;
    if messages.is_empty() {
        return Ok(());
    }
    let next: i64 = conn.query_row(
        "SELECT coalesce(max(seq), 0) + 1 FROM kappa_outbox WHERE deployment = ?1 AND sink = ?2",
        params![deployment, sink],
        |r| r.get(0),
    )?;
    let mut insert = conn.prepare_cached(
        "INSERT INTO kappa_outbox (deployment, sink, seq, key, value) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for (i, (key, value)) in messages.into_iter().enumerate() {
        insert.execute(params![deployment, sink, next + i as i64, key, value])?;
    }
    Ok(())
}

impl SqliteStore {
    /// The messages waiting in deployment `id`'s outbox, in order per sink.
    pub(super) fn outbox(&self, id: i64) -> Result<Vec<SinkMessage>, TableError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT sink, seq, key, value FROM kappa_outbox WHERE deployment = ?1 ORDER BY sink, seq",
        )?;
        let rows = stmt.query_map([id], |r| {
            Ok(SinkMessage {
                sink: r.get(0)?,
                seq: r.get(1)?,
                key: r.get(2)?,
                value: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Deletes the messages of `sink` up to `seq`, which it has acknowledged.
    pub(super) fn clear_outbox(
        &mut self,
        lease: &Lease,
        sink: &str,
        seq: i64,
    ) -> Result<(), TableError> {
        let tx = self.write_txn()?;
        require_lease(&tx, lease)?;
        tx.execute(
            "DELETE FROM kappa_outbox WHERE deployment = ?1 AND sink = ?2 AND seq <= ?3",
            params![lease.deployment, sink, seq],
        )?;
        tx.commit()?;
        Ok(())
    }
}
