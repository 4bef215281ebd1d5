//! The epoch commit against a plain model, its atomicity, offsets, and
//! values that would break SQL if they were ever spliced into it. Shared
//! fixtures for the sibling test files live here too.
//!
//! The model of an output is a `BTreeMap<Row, isize>`: each epoch's
//! consolidated changes are added to it and to the table; after every
//! epoch `read_rows` must equal the model's non-zero entries.

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
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

fn model_rows(model: &BTreeMap<Row, isize>) -> Vec<(Row, isize)> {
    model
        .iter()
        .filter(|(_, n)| **n != 0)
        .map(|(r, n)| (r.clone(), *n))
        .collect()
}

/// The values the model test draws from: null, `1` next to `1.0`, and text
/// that would break SQL if it were ever spliced.
fn domain() -> Vec<Value> {
    vec![
        Value::Null,
        Value::Int(1),
        Value::float(1.0),
        Value::Int(-7),
        s("a"),
        s("it's; \"x\" --"),
    ]
}

fn arb_epochs() -> impl Strategy<Value = Vec<Vec<(usize, usize, usize, isize)>>> {
    let change = (
        0usize..2,
        0usize..6,
        0usize..3,
        prop_oneof![-3isize..0, 1isize..4],
    );
    proptest::collection::vec(proptest::collection::vec(change, 0..12), 1..8)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Random epochs over a bag output and a keyed one: after each commit
    /// both tables hold exactly the model, and the offset is the epoch's.
    #[test]
    fn tables_follow_the_model(epochs in arb_epochs()) {
        let (_dir, mut store) = store();
        let outputs = vec![schema("bag", &["k", "v"], &[0, 1]), schema("keyed", &["k", "v"], &[0])];
        let d = store
            .create_deployment(&new_deployment("j", outputs, DeploymentState::Live))
            .unwrap();
        let values = domain();
        let mut models = [BTreeMap::<Row, isize>::new(), BTreeMap::new()];
        for (e, epoch) in epochs.iter().enumerate() {
            let mut changes = vec![BTreeMap::<Row, isize>::new(), BTreeMap::new()];
            for &(out, k, v, diff) in epoch {
                let r = row(&[values[k].clone(), values[v % 3 * 2].clone()]);
                *changes[out].entry(r).or_default() += diff;
            }
            // Never retract more than the model holds.
            for (out, c) in changes.iter_mut().enumerate() {
                for (r, diff) in c.iter_mut() {
                    let have = models[out].get(r).copied().unwrap_or(0);
                    *diff = (*diff).max(-have);
                }
            }
            let lists: Vec<Vec<(Row, isize)>> = changes
                .iter()
                .map(|c| c.iter().filter(|(_, d)| **d != 0).map(|(r, d)| (r.clone(), *d)).collect())
                .collect();
            commit(&mut store, d.id, lists, e as u64 + 1).unwrap();
            for (out, c) in changes.into_iter().enumerate() {
                for (r, diff) in c {
                    *models[out].entry(r).or_default() += diff;
                }
            }
            for (out, model) in models.iter().enumerate() {
                prop_assert_eq!(store.read_rows(&d.table(out)).unwrap(), model_rows(model));
            }
            let offsets = store.offsets(d.id).unwrap();
            prop_assert_eq!(offsets.get(&("events".to_string(), 0)), Some(&(e as u64 + 1)));
        }
        let after = store.deployment(d.id).unwrap();
        prop_assert_eq!(after.progress.epochs, epochs.len() as u64);
    }
}

#[test]
fn failed_epoch_leaves_tables_offsets_and_stats_unchanged() {
    let (_dir, mut store) = store();
    let outputs = vec![schema("a", &["k", "n"], &[0]), schema("b", &["k"], &[0])];
    let d = store
        .create_deployment(&new_deployment("j", outputs, DeploymentState::Building))
        .unwrap();
    let first = vec![
        vec![(row(&[s("x"), Value::Int(1)]), 1)],
        vec![(row(&[s("y")]), 2)],
    ];
    commit(&mut store, d.id, first, 10).unwrap();
    let before = (
        store.read_rows(&d.table(0)).unwrap(),
        store.read_rows(&d.table(1)).unwrap(),
        store.offsets(d.id).unwrap(),
        store.deployment(d.id).unwrap().progress,
    );
    let failing: Vec<Vec<Vec<(Row, isize)>>> = vec![
        // Output a applies, then output b retracts a row it does not hold.
        vec![
            vec![
                (row(&[s("x"), Value::Int(1)]), -1),
                (row(&[s("z"), Value::Int(3)]), 1),
            ],
            vec![(row(&[s("nope")]), -1)],
        ],
        // More copies retracted than held.
        vec![vec![], vec![(row(&[s("y")]), -3)]],
        // A row of the wrong width, after a good one.
        vec![
            vec![(row(&[s("q"), Value::Int(1)]), 1), (row(&[s("r")]), 1)],
            vec![],
        ],
        // Changes for an output the deployment does not have.
        vec![vec![], vec![], vec![(row(&[s("w")]), 1)]],
    ];
    for changes in failing {
        let err = commit(&mut store, d.id, changes, 20).unwrap_err();
        assert!(
            matches!(
                err,
                TableError::RetractMissing { .. }
                    | TableError::Arity { .. }
                    | TableError::OutputCount { .. }
            ),
            "{err}"
        );
        let after = (
            store.read_rows(&d.table(0)).unwrap(),
            store.read_rows(&d.table(1)).unwrap(),
            store.offsets(d.id).unwrap(),
            store.deployment(d.id).unwrap().progress,
        );
        assert_eq!(after, before);
    }
    // The store is still usable after the failures.
    commit(
        &mut store,
        d.id,
        vec![vec![], vec![(row(&[s("y")]), -2)]],
        20,
    )
    .unwrap();
    assert!(store.read_rows(&d.table(1)).unwrap().is_empty());
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
