//! What only the SQLite store has to show about its epoch commit: offsets
//! that survive reopening the file, and values that would break SQL if they
//! were ever spliced into it, as any SQLite client sees them. Shared
//! fixtures for the sibling test files live here too. The contract both
//! stores keep (the model test, failed epochs, fencing) is in `contract.rs`.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::Connection;

use super::*;
use crate::schema::OutputSchema;
use crate::value::{Row, Value};

/// A store in a fresh temporary directory (kept alive by the first field).
pub(super) fn store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("sub/tables.db")).unwrap();
    (dir, store)
}

pub(super) fn schema(name: &str, columns: &[&str], key: &[usize]) -> OutputSchema {
    OutputSchema {
        name: name.into(),
        columns: columns.iter().map(|c| c.to_string()).collect(),
        key: key.to_vec(),
    }
}

pub(super) fn new_deployment(
    job: &str,
    outputs: Vec<OutputSchema>,
    state: DeploymentState,
) -> NewDeployment {
    NewDeployment {
        job: job.into(),
        job_version: 1,
        params: vec![("gap".into(), "30m".into())],
        inputs: vec![("events".into(), "clicks".into())],
        outputs,
        state,
        note: None,
    }
}

/// Commits one epoch with offset `next` on input `events` partition 0.
pub(super) fn commit(
    store: &mut SqliteStore,
    id: i64,
    changes: Vec<Vec<(Row, isize)>>,
    next: u64,
) -> Result<(), TableError> {
    let records = changes.iter().map(Vec::len).sum::<usize>() as u64;
    let stats = EpochStats {
        records,
        epoch_ms: 5,
        records_per_sec: 1000.0,
        ..EpochStats::default()
    };
    let offsets = [offset("events", "clicks", 0, next)];
    store.commit_epoch(&lease(store, id), &changes, &offsets, &stats)
}

/// The deployment's current lease, as its owner holds it (without taking
/// it over, so a test of a retired deployment sees the state conflict).
pub(super) fn lease(store: &SqliteStore, id: i64) -> Lease {
    let generation = store
        .conn
        .query_row(
            "SELECT generation FROM kappa_deployments WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap_or(0);
    Lease {
        deployment: id,
        generation,
    }
}

/// Offset `next` of an input partition, without a last record.
pub(super) fn offset(input: &str, topic: &str, partition: u32, next: u64) -> InputOffset {
    InputOffset {
        input: input.into(),
        topic: topic.into(),
        partition,
        next,
        last: None,
    }
}

/// What any SQLite client sees when it selects everything from `name`.
pub(super) fn select_all(path: &Path, name: &str) -> Vec<Row> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn.prepare(&format!("SELECT * FROM \"{name}\"")).unwrap();
    let n = stmt.column_count();
    let mut rows: Vec<Row> = stmt
        .query_map([], |r| {
            (0..n)
                .map(|i| {
                    Ok(match r.get_ref(i)? {
                        rusqlite::types::ValueRef::Null => Value::Null,
                        rusqlite::types::ValueRef::Integer(i) => Value::Int(i),
                        rusqlite::types::ValueRef::Real(f) => Value::float(f),
                        rusqlite::types::ValueRef::Text(t) => {
                            Value::str(std::str::from_utf8(t).unwrap())
                        }
                        rusqlite::types::ValueRef::Blob(_) => panic!("blob"),
                    })
                })
                .collect()
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    rows.sort();
    rows
}

pub(super) fn row(values: &[Value]) -> Row {
    values.to_vec()
}

fn s(x: &str) -> Value {
    Value::str(x)
}

#[test]
fn offsets_round_trip_and_never_go_back() {
    let (dir, mut store) = store();
    let d = store
        .create_deployment(&new_deployment(
            "j",
            vec![schema("o", &["k"], &[0])],
            DeploymentState::Live,
        ))
        .unwrap();
    assert!(store.offsets(d.id).unwrap().is_empty());
    let offsets = [
        offset("events", "clicks", 0, 7),
        offset("events", "clicks", 1, 9),
        offset("users", "users-changelog", 0, 3),
    ];
    let stats = EpochStats::default();
    store
        .commit_epoch(&lease(&store, d.id), &[vec![]], &offsets, &stats)
        .unwrap();
    drop(store);
    let mut store = SqliteStore::open(&dir.path().join("sub/tables.db")).unwrap();
    let expected: BTreeMap<(String, u32), u64> = [
        (("events".to_string(), 0), 7),
        (("events".to_string(), 1), 9),
        (("users".to_string(), 0), 3),
    ]
    .into();
    assert_eq!(store.offsets(d.id).unwrap(), expected);
    let back = [offset("events", "clicks", 1, 8)];
    let err = store
        .commit_epoch(&lease(&store, d.id), &[vec![]], &back, &stats)
        .unwrap_err();
    assert!(
        matches!(
            err,
            TableError::OffsetRegression {
                committed: 9,
                given: 8,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.is_state_conflict());
    assert_eq!(store.offsets(d.id).unwrap(), expected);
    assert!(matches!(
        store.offsets(999),
        Err(TableError::DeploymentNotFound { id: 999 })
    ));
}

#[test]
fn quotes_and_semicolons_in_values_are_data() {
    let (dir, mut store) = store();
    let d = store
        .create_deployment(&new_deployment(
            "j",
            vec![schema("select", &["from", "where"], &[0])],
            DeploymentState::Live,
        ))
        .unwrap();
    let nasty = [
        "'; DROP TABLE kappa_deployments; --",
        "\"select\"",
        "a\0b",
        "é ✓",
        "",
    ];
    let rows: Vec<(Row, isize)> = nasty
        .iter()
        .enumerate()
        .map(|(i, t)| (row(&[s(t), Value::Int(i as i64)]), 1))
        .collect();
    commit(&mut store, d.id, vec![rows.clone()], 1).unwrap();
    let mut expected = rows.clone();
    expected.sort();
    assert_eq!(store.read_rows("select__v1").unwrap(), expected);
    assert_eq!(
        select_all(&dir.path().join("sub/tables.db"), "select").len(),
        nasty.len()
    );
    let retract: Vec<(Row, isize)> = rows.iter().map(|(r, _)| (r.clone(), -1)).collect();
    commit(&mut store, d.id, vec![retract], 2).unwrap();
    assert!(store.read_rows("select__v1").unwrap().is_empty());
    assert_eq!(store.deployments().unwrap().len(), 1);
}

/// Rows a bag keeps apart: an integer, an equal float and equal text,
/// NULLs; each once.
fn bag_rows() -> Vec<Row> {
    vec![
        row(&[Value::Int(1), s("a")]),
        row(&[Value::float(1.0), s("a")]),
        row(&[Value::Null, s("a")]),
        row(&[Value::Int(1), Value::Null]),
        row(&[Value::float(-0.5), s("b")]),
        row(&[s("1"), s("a")]),
    ]
}

/// Commits every bag row twice, checks the table, then retracts each once
/// (a decrement) and then again (a delete).
fn bag_round_trip(store: &mut SqliteStore, id: i64) {
    let rows = bag_rows();
    let with = |diff| rows.iter().map(|r| (r.clone(), diff)).collect::<Vec<_>>();
    commit(store, id, vec![with(1)], 1).unwrap();
    commit(store, id, vec![with(1)], 2).unwrap();
    let mut want = with(2);
    want.sort();
    assert_eq!(store.read_rows("bag__v1").unwrap(), want);
    commit(store, id, vec![with(-1)], 3).unwrap();
    let mut want = with(1);
    want.sort();
    assert_eq!(store.read_rows("bag__v1").unwrap(), want);
    commit(store, id, vec![with(-1)], 4).unwrap();
    assert!(store.read_rows("bag__v1").unwrap().is_empty());
    let err = commit(store, id, vec![vec![(rows[0].clone(), -1)]], 5).unwrap_err();
    assert!(matches!(err, TableError::RetractMissing { .. }), "{err}");
}

/// A store with one deployment of output `name` (columns `k`, `v`, keyed
/// by `key`) in `state`, and a connection of its own to the database.
fn one_output(
    name: &str,
    key: &[usize],
    state: DeploymentState,
) -> (tempfile::TempDir, SqliteStore, i64, Connection) {
    let (dir, mut store) = store();
    let outputs = vec![schema(name, &["k", "v"], key)];
    let d = store
        .create_deployment(&new_deployment("j", outputs, state))
        .unwrap();
    let conn = Connection::open(dir.path().join("sub/tables.db")).unwrap();
    (dir, store, d.id, conn)
}

fn count(conn: &Connection, table: &str) -> i64 {
    conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_bag_keeps_rows_without_nulls_under_a_primary_key() {
    let (_dir, mut store, id, conn) = one_output("bag", &[0, 1], DeploymentState::Building);
    assert_eq!(swap::layout(&conn, "bag__v1").unwrap(), swap::Layout::Split);
    let once: Vec<(Row, isize)> = bag_rows().into_iter().map(|r| (r, 1)).collect();
    commit(&mut store, id, vec![once.clone()], 1).unwrap();
    commit(&mut store, id, vec![once], 2).unwrap();
    assert_eq!(
        count(&conn, "bag__v1"),
        6,
        "each distinct row is stored once"
    );
    assert_eq!(count(&conn, "kappa_rows__bag__v1"), 4);
    assert_eq!(count(&conn, "kappa_nulls__bag__v1"), 2);
    store.drop_deployment(id).unwrap();
    let objects = count(&conn, "sqlite_master WHERE name LIKE '%bag__v1'");
    assert_eq!(objects, 0, "the view and both tables are dropped");
}

#[test]
fn a_bag_retracts_from_either_table() {
    let (_dir, mut store, id, _) = one_output("bag", &[0, 1], DeploymentState::Live);
    bag_round_trip(&mut store, id);
}

/// Remakes the bag `bag__v1` (columns `k`, `v`) as earlier versions made
/// it: one table, with a UNIQUE index over the row and its float mask or
/// (not `unique`) a plain index over the row.
fn remake_as_one_table(conn: &Connection, unique: bool) {
    let (index, mask, layout) = match unique {
        true => (
            "UNIQUE INDEX",
            ", ((typeof(k) = 'real') * 1 + (typeof(v) = 'real') * 2)",
            swap::Layout::UniqueIndexed,
        ),
        false => ("INDEX", "", swap::Layout::Indexed),
    };
    conn.execute_batch(&format!(
        "DROP VIEW bag__v1; DROP TABLE kappa_rows__bag__v1; DROP TABLE kappa_nulls__bag__v1;
         CREATE TABLE bag__v1 (k, v, kappa_n INTEGER NOT NULL CHECK (kappa_n > 0));
         CREATE {index} kappa_key__bag__v1 ON bag__v1 (k, v{mask});"
    ))
    .unwrap();
    assert_eq!(swap::layout(conn, "bag__v1").unwrap(), layout);
}

/// Bags made by earlier versions, one table with a plain or a UNIQUE
/// index over the row (and its float mask), still take every change.
#[test]
fn a_bag_made_as_one_indexed_table_still_works() {
    for unique in [false, true] {
        let (_dir, mut store, id, conn) = one_output("bag", &[0, 1], DeploymentState::Live);
        remake_as_one_table(&conn, unique);
        bag_round_trip(&mut store, id);
    }
}

/// Updates of a keyed output between rows with and without NULLs, epoch
/// by epoch; after each the table holds exactly the model.
fn keyed_updates(store: &mut SqliteStore, id: i64) {
    let kv = |k: Value, v: Value| row(&[k, v]);
    let (a, b, null) = (s("a"), s("b"), Value::Null);
    let epochs = [
        vec![
            (kv(a.clone(), Value::Int(1)), 1),
            (kv(b.clone(), null.clone()), 1),
            (kv(null.clone(), Value::Int(2)), 1),
        ],
        vec![
            (kv(a.clone(), Value::Int(1)), -1),
            (kv(a.clone(), Value::float(1.0)), 1),
            (kv(b.clone(), null.clone()), -1),
            (kv(b.clone(), Value::Int(3)), 1),
            (kv(null.clone(), Value::Int(2)), -1),
            (kv(null.clone(), null.clone()), 1),
        ],
        vec![
            (kv(a.clone(), Value::float(1.0)), -1),
            (kv(a.clone(), null.clone()), 1),
        ],
    ];
    let mut model = std::collections::BTreeMap::new();
    for (e, changes) in epochs.iter().enumerate() {
        commit(store, id, vec![changes.clone()], e as u64 + 1).unwrap();
        for (r, diff) in changes {
            *model.entry(r.clone()).or_insert(0) += diff;
        }
        model.retain(|_, n| *n != 0);
        let want: Vec<(Row, isize)> = model.iter().map(|(r, n)| (r.clone(), *n)).collect();
        assert_eq!(store.read_rows("groups__v1").unwrap(), want, "epoch {e}");
    }
}

/// A keyed row moves to the table it now belongs in, and the view shows
/// the output.
#[test]
fn a_keyed_row_moves_between_the_exact_and_the_nulls_table() {
    let (_dir, mut store, id, conn) = one_output("groups", &[0], DeploymentState::Live);
    assert_eq!(
        swap::layout(&conn, "groups__v1").unwrap(),
        swap::Layout::Split
    );
    keyed_updates(&mut store, id);
    assert_eq!(count(&conn, "kappa_rows__groups__v1"), 1, "b,3");
    assert_eq!(
        count(&conn, "kappa_nulls__groups__v1"),
        2,
        "a,NULL and NULL,NULL"
    );
}

/// A keyed output made as one table with an index on its key, by earlier
/// versions, still takes every update (in place where it can).
#[test]
fn a_keyed_table_made_as_one_indexed_table_still_works() {
    let (_dir, mut store, id, conn) = one_output("groups", &[0], DeploymentState::Live);
    conn.execute_batch(
        "DROP VIEW groups__v1; DROP TABLE kappa_rows__groups__v1; DROP TABLE kappa_nulls__groups__v1;
         CREATE TABLE groups__v1 (k, v, kappa_n INTEGER NOT NULL CHECK (kappa_n > 0));
         CREATE INDEX kappa_key__groups__v1 ON groups__v1 (k);",
    )
    .unwrap();
    assert_eq!(
        swap::layout(&conn, "groups__v1").unwrap(),
        swap::Layout::Indexed
    );
    keyed_updates(&mut store, id);
    assert_eq!(count(&conn, "groups__v1"), 3);
}

/// Rows enough for several upserts of many rows and a remainder, mixing
/// what a bag keeps apart: integers, equal floats, text, NULLs.
fn many_bag_rows() -> Vec<Row> {
    (0..3 * epoch::UPSERT_ROWS as i64 + 5)
        .map(|i| {
            let v = match i % 4 {
                0 => Value::Int(i / 4),
                1 => Value::float((i / 4) as f64),
                2 => s(&(i / 4).to_string()),
                _ if i % 20 == 3 => Value::Null,
                _ => Value::float(i as f64 + 0.5),
            };
            row(&[v, s(["a", "b", "c"][i as usize % 3])])
        })
        .collect()
}

/// Epochs of many rows (each a few times, some again, some retracted)
/// leave the table holding what adding them up gives, in either layout
/// that upserts: inserts go by many rows at a time, and a row already
/// stored adds up.
#[test]
fn many_rows_in_an_epoch_add_up_as_one_by_one() {
    for unique in [false, true] {
        let (_dir, mut store, id, conn) = one_output("bag", &[0, 1], DeploymentState::Live);
        if unique {
            remake_as_one_table(&conn, true);
        }
        let rows = many_bag_rows();
        let epochs: Vec<Vec<(Row, isize)>> = vec![
            rows.iter().map(|r| (r.clone(), 2)).collect(),
            rows.iter().step_by(2).map(|r| (r.clone(), 1)).collect(),
            rows.iter()
                .skip(1)
                .step_by(3)
                .map(|r| (r.clone(), -2))
                .collect(),
        ];
        let mut model = BTreeMap::new();
        for (e, changes) in epochs.into_iter().enumerate() {
            for (r, diff) in &changes {
                *model.entry(r.clone()).or_insert(0) += diff;
            }
            model.retain(|_, n| *n != 0);
            commit(&mut store, id, vec![changes], e as u64 + 1).unwrap();
            let want: Vec<(Row, isize)> = model.iter().map(|(r, n)| (r.clone(), *n)).collect();
            assert_eq!(
                store.read_rows("bag__v1").unwrap(),
                want,
                "unique {unique}, epoch {e}"
            );
        }
    }
}
