//! The outbox of changelog sinks (`--sink OUTPUT=kafka://...`): each epoch's
//! output changes, as upsert messages, written in the epoch's own
//! transaction, sent after the commit, and deleted once the sink has
//! acknowledged them.
//!
//! So a sink never misses an epoch and never sees one that was not
//! committed; after a crash between the commit and the acknowledgement the
//! outbox still holds the messages and the next owner sends them again (at
//! most the last epoch, twice). Messages are upserts by key — the output
//! key's text, and the row as a JSON object by column name, or `None` when
//! the key's row is gone — so sending one twice changes nothing for a reader
//! of the compacted topic: it sees exactly the table.
//!
//! Bags (outputs keyed by every column) are keyed by the whole row and carry
//! its multiplicity as `kappa_count`, as their views do.
//!
//! Table `kappa_outbox`: `deployment`, `sink`, `seq` (order within the sink),
//! `key`, `value` (NULL: a deletion); PK (`deployment`, `sink`, `seq`).

use std::collections::BTreeMap;

use rusqlite::{Connection, params};
use serde_json::{Map, Value as Json};

use super::TableStore;
use super::deployment::is_bag;
use super::error::TableError;
use super::ident::{quote, table_name};
use super::owner::{Lease, require_lease};
use crate::schema::OutputSchema;
use crate::value::{Row, Value};

/// A changelog sink of a deployment: its name and the output it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SinkSpec {
    /// The sink's name (the output's name, as `--sink OUTPUT=...` gives it).
    pub name: String,
    /// The output's index among the deployment's outputs.
    pub output: usize,
}

/// One message waiting in the outbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SinkMessage {
    /// The sink it is for.
    pub sink: String,
    /// Its order within the sink.
    pub seq: i64,
    /// The output key's text.
    pub key: String,
    /// The row as a JSON object by column name; `None`: the key's row is gone.
    pub value: Option<String>,
}

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
    let messages = if is_bag(schema) {
        bag_messages(conn, schema, version, changes)?
    } else {
        keyed_messages(schema, changes)
    };
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

/// Per changed key: its new row, or a deletion when the epoch only retracted it.
fn keyed_messages(
    schema: &OutputSchema,
    changes: &[(Row, isize)],
) -> Vec<(String, Option<String>)> {
    let mut by_key: BTreeMap<String, Option<String>> = BTreeMap::new();
    for (row, diff) in changes {
        let key = key_text(&schema.key.iter().map(|&c| &row[c]).collect::<Vec<_>>());
        let slot = by_key.entry(key).or_insert(None);
        if *diff > 0 {
            *slot = Some(row_json(schema, row, None));
        }
    }
    by_key.into_iter().collect()
}

/// Per changed row of a bag: its multiplicity now, or a deletion at zero.
fn bag_messages(
    conn: &Connection,
    schema: &OutputSchema,
    version: u32,
    changes: &[(Row, isize)],
) -> Result<Vec<(String, Option<String>)>, TableError> {
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
    let mut out = Vec::with_capacity(changes.len());
    for (row, _) in changes {
        let n: Option<i64> = count
            .query_map(rusqlite::params_from_iter(row.iter()), |r| r.get(0))?
            .next()
            .transpose()?;
        let key = key_text(&row.iter().collect::<Vec<_>>());
        out.push((key, n.map(|n| row_json(schema, row, Some(n)))));
    }
    Ok(out)
}

/// A key's text: a one-column key's value as text, else a JSON array.
fn key_text(values: &[&Value]) -> String {
    match values {
        [Value::Str(s)] => s.to_string(),
        [v] => value_json(v).to_string(),
        many => Json::Array(many.iter().map(|v| value_json(v)).collect()).to_string(),
    }
}

fn row_json(schema: &OutputSchema, row: &Row, count: Option<i64>) -> String {
    let mut object = Map::new();
    for (name, v) in schema.columns.iter().zip(row) {
        object.insert(name.clone(), value_json(v));
    }
    if let Some(n) = count {
        object.insert("kappa_count".into(), Json::from(n));
    }
    Json::Object(object).to_string()
}

fn value_json(v: &Value) -> Json {
    match v {
        Value::Null => Json::Null,
        Value::Int(i) => Json::from(*i),
        Value::Float(x) => serde_json::Number::from_f64(x.get()).map_or(Json::Null, Json::Number),
        Value::Str(s) => Json::String(s.to_string()),
    }
}

impl TableStore {
    /// The messages waiting in deployment `id`'s outbox, in order per sink.
    pub fn outbox(&self, id: i64) -> Result<Vec<SinkMessage>, TableError> {
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
    pub fn clear_outbox(&mut self, lease: &Lease, sink: &str, seq: i64) -> Result<(), TableError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_rows_are_json_by_column_name() {
        let schema = OutputSchema {
            name: "groups".into(),
            columns: vec!["user".into(), "n".into(), "avg".into()],
            key: vec![0],
        };
        let row = |u: &str, n: i64| vec![Value::str(u), Value::Int(n), Value::float(1.5)];
        let changes = vec![(row("a", 1), -1), (row("a", 2), 1), (row("b", 4), -1)];
        let got = keyed_messages(&schema, &changes);
        assert_eq!(
            got,
            vec![
                ("a".into(), Some(r#"{"user":"a","n":2,"avg":1.5}"#.into())),
                ("b".into(), None)
            ]
        );
        assert_eq!(key_text(&[&Value::Int(3), &Value::Null]), "[3,null]");
    }
}
