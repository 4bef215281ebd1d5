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
//! Catalog table `kappa_outbox`: `deployment`, `sink`, `seq` (order within the sink),
//! `key`, `value` (NULL: a deletion); PK (`deployment`, `sink`, `seq`).

use std::collections::BTreeMap;

use serde_json::{Map, Value as Json};

use super::deployment::is_bag;
use super::error::TableError;
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

/// The messages of one output's consolidated changes, applied already in
/// the epoch's transaction: `count` reads a bag row's multiplicity back from
/// its table (`None`: the row is gone).
pub(super) fn messages(
    schema: &OutputSchema,
    changes: &[(Row, isize)],
    mut count: impl FnMut(&Row) -> Result<Option<i64>, TableError>,
) -> Result<Vec<(String, Option<String>)>, TableError> {
    if !is_bag(schema) {
        return Ok(keyed_messages(schema, changes));
    }
    let mut out = Vec::with_capacity(changes.len());
    for (row, _) in changes {
        let key = key_text(&row.iter().collect::<Vec<_>>());
        out.push((key, count(row)?.map(|n| row_json(schema, row, Some(n)))));
    }
    Ok(out)
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
    match &*v.stored() {
        Value::Null => Json::Null,
        Value::Int(i) => Json::from(*i),
        Value::Float(x) => serde_json::Number::from_f64(x.get()).map_or(Json::Null, Json::Number),
        stored => Json::String(stored.to_string()),
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
