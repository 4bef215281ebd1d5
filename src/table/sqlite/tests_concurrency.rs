//! Concurrency: what a reader sees while a writer commits (never half an
//! epoch: WAL gives each read transaction one committed state), and two
//! writers on different deployments (the busy timeout serialises them).
//! Plus a by-hand timing of the commit path.

use rusqlite::Connection;

use super::epoch::{TableSql, apply, write_offsets};
use super::tests::{commit, new_deployment, offset, row, schema, select_all, store};
use super::*;
use crate::value::Value;

fn s(x: &str) -> Value {
    Value::str(x)
}

#[test]
fn a_reader_sees_the_previous_epoch_while_a_writer_is_mid_transaction() {
    let (dir, mut store) = store();
    let path = dir.path().join("sub/tables.db");
    let out = schema("counts", &["k", "n"], &[0]);
    let d = store
        .create_deployment(&new_deployment(
            "j",
            vec![out.clone()],
            DeploymentState::Live,
        ))
        .unwrap();
    commit(
        &mut store,
        d.id,
        vec![vec![(row(&[s("a"), Value::Int(1)]), 1)]],
        1,
    )
    .unwrap();
    let reader = SqliteStore::open(&path).unwrap();
    let epoch1 = vec![row(&[s("a"), Value::Int(1)])];

    // Half an epoch, by hand, in an open write transaction.
    let tx = store.write_txn().unwrap();
    let sql = TableSql::new(&tx, &out, d.version.0).unwrap();
    let half = [(row(&[s("a"), Value::Int(1)]), -1)];
    apply(&tx, &sql, &half).unwrap();
    write_offsets(&tx, d.id, &[offset("events", "clicks", 0, 2)]).unwrap();
    assert_eq!(select_all(&path, "counts"), epoch1);
    assert_eq!(
        reader.read_rows(&d.table(0)).unwrap(),
        vec![(epoch1[0].clone(), 1)]
    );
    assert_eq!(reader.offsets(d.id).unwrap()[&("events".to_string(), 0)], 1);
    let rest = [(row(&[s("a"), Value::Int(2)]), 1)];
    apply(&tx, &sql, &rest).unwrap();
    tx.commit().unwrap();

    assert_eq!(
        select_all(&path, "counts"),
        vec![row(&[s("a"), Value::Int(2)])]
    );
    assert_eq!(reader.offsets(d.id).unwrap()[&("events".to_string(), 0)], 2);
}

#[test]
fn a_reader_polling_the_view_never_sees_half_an_epoch() {
    let (dir, mut store) = store();
    let path = dir.path().join("sub/tables.db");
    let d = store
        .create_deployment(&new_deployment(
            "j",
            vec![schema("latest", &["k", "epoch"], &[0])],
            DeploymentState::Live,
        ))
        .unwrap();
    let keys = 20;
    let epoch_rows = |e: i64, diff| {
        (0..keys)
            .map(|k| (row(&[Value::Int(k), Value::Int(e)]), diff))
            .collect::<Vec<_>>()
    };
    commit(&mut store, d.id, vec![epoch_rows(0, 1)], 1).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let conn = Connection::open(&path).unwrap();
            let mut seen = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let (n, lo, hi): (i64, i64, i64) = conn
                    .query_row(
                        "SELECT count(*), min(epoch), max(epoch) FROM latest",
                        [],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                    )
                    .unwrap();
                assert_eq!((n, lo), (keys, hi), "a reader saw a mixed or partial epoch");
                seen += 1;
            }
            seen
        })
    };
    for e in 1..40 {
        let mut changes = epoch_rows(e - 1, -1);
        changes.extend(epoch_rows(e, 1));
        commit(&mut store, d.id, vec![changes], e as u64 + 1).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
}

#[test]
fn two_processes_write_different_deployments_at_once() {
    let (dir, mut store) = store();
    let path = dir.path().join("sub/tables.db");
    let live = store
        .create_deployment(&new_deployment(
            "j",
            vec![schema("o", &["k", "e"], &[0])],
            DeploymentState::Live,
        ))
        .unwrap();
    let building = store
        .create_deployment(&new_deployment(
            "j",
            vec![schema("o", &["k", "e"], &[0])],
            DeploymentState::Building,
        ))
        .unwrap();
    drop(store);
    // A stream process and a reprocess process, each with its own
    // connection: the busy timeout makes each wait for the other's epochs.
    let writers: Vec<_> = [live.id, building.id]
        .into_iter()
        .map(|id| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut store = SqliteStore::open(&path).unwrap();
                for e in 0..30i64 {
                    let changes = vec![vec![(row(&[Value::Int(e), Value::Int(id)]), 1)]];
                    commit(&mut store, id, changes, e as u64 + 1).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    for d in [live, building] {
        assert_eq!(store.read_rows(&d.table(0)).unwrap().len(), 30);
        assert_eq!(store.deployment(d.id).unwrap().progress.epochs, 30);
    }
}
