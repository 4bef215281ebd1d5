//! A building version's large epochs written in pieces (`epoch.rs`,
//! `PIECE_ROWS`): the same tables as one transaction; a stop between pieces
//! is repaired by the next take-over, which empties the version to be
//! replayed; versions that were ever live, and live ones, stay whole.

use super::epoch::pieces;
use super::tests::{commit, new_deployment, row, schema, store};
use super::*;
use crate::value::{Row, Value};

fn two_outputs() -> Vec<crate::schema::OutputSchema> {
    vec![
        schema("counts", &["k", "n"], &[0]),
        schema("pairs", &["a", "b"], &[]),
    ]
}

fn kn(k: i64, n: i64) -> Row {
    row(&[Value::Int(k), Value::Int(n)])
}

/// An epoch of `keys` groups (`k` counted `n` times) and as many pairs.
fn epoch(keys: std::ops::Range<i64>, n: i64) -> Vec<Vec<(Row, isize)>> {
    let groups = keys.clone().map(|k| (kn(k, n), 1)).collect();
    let pairs = keys.map(|k| (kn(k, -k), n as isize)).collect();
    vec![groups, pairs]
}

/// The second epoch: every group's count goes from 1 to 2.
fn recount(keys: std::ops::Range<i64>) -> Vec<Vec<(Row, isize)>> {
    let groups = keys
        .clone()
        .flat_map(|k| [(kn(k, 1), -1), (kn(k, 2), 1)])
        .collect();
    let pairs = keys.map(|k| (kn(k, -k), 1)).collect();
    vec![groups, pairs]
}

/// A new building version of [`two_outputs`].
fn building(store: &mut SqliteStore) -> Deployment {
    store
        .create_deployment(&new_deployment(
            "j",
            two_outputs(),
            DeploymentState::Building,
        ))
        .unwrap()
}

/// `changes` and then the retraction of a row no table holds.
fn failing(mut changes: Vec<Vec<(Row, isize)>>) -> Vec<Vec<(Row, isize)>> {
    changes[1].push((kn(99, 99), -1));
    changes
}

fn tables(store: &SqliteStore, d: &Deployment) -> Vec<Vec<(Row, isize)>> {
    d.tables()
        .iter()
        .map(|t| store.read_rows(t).unwrap())
        .collect()
}

#[test]
fn changes_are_cut_in_order_across_outputs() {
    let changes = epoch(0..5, 1);
    let cut = pieces(&changes, 3);
    assert_eq!(
        cut,
        vec![
            vec![(0, 0..3)],
            vec![(0, 3..5), (1, 0..1)],
            vec![(1, 1..4)],
            vec![(1, 4..5)],
        ]
    );
    assert_eq!(pieces(&changes, 100), vec![vec![(0, 0..5), (1, 0..5)]]);
    assert_eq!(pieces(&[vec![], vec![]], 3), vec![vec![]]);
}

#[test]
fn a_building_version_in_pieces_holds_what_one_transaction_holds() {
    let (_dir, mut store) = store();
    let live = store
        .create_deployment(&new_deployment("j", two_outputs(), DeploymentState::Live))
        .unwrap();
    let building = self::building(&mut store);
    for id in [live.id, building.id] {
        commit(&mut store, id, epoch(0..50, 1), 10).unwrap();
    }
    store.piece_rows = 7;
    for id in [live.id, building.id] {
        commit(&mut store, id, recount(0..50), 20).unwrap();
        assert!(!store.deployment(id).unwrap().half_written);
    }
    let (live, building) = (
        store.deployment(live.id).unwrap(),
        store.deployment(building.id).unwrap(),
    );
    assert_eq!(tables(&store, &live), tables(&store, &building));
    assert_eq!(tables(&store, &building)[0][7], (kn(7, 2), 1));
    assert_eq!(
        store.offsets(building.id).unwrap()[&("events".into(), 0)],
        20
    );
    assert_eq!(building.progress.epochs, 2);
    assert_eq!(building.progress.records_applied, 100 + 150);
}

#[test]
fn a_stop_between_pieces_is_repaired_by_the_next_owner() {
    let (dir, mut store) = store();
    let d = building(&mut store);
    commit(&mut store, d.id, epoch(0..20, 1), 10).unwrap();
    store.piece_rows = 5;
    // The last piece retracts a row that is not there: the pieces before
    // it are committed, the epoch is not.
    let err = commit(&mut store, d.id, failing(recount(0..20)), 20).unwrap_err();
    assert!(matches!(err, TableError::RetractMissing { .. }), "{err}");
    assert!(store.deployment(d.id).unwrap().half_written);
    assert_eq!(store.offsets(d.id).unwrap()[&("events".into(), 0)], 10);

    // Its writer adds nothing to the half-written epoch.
    let err = commit(&mut store, d.id, epoch(30..31, 1), 30).unwrap_err();
    assert!(
        matches!(err, TableError::StateConflict { .. }) && err.to_string().contains("half-written"),
        "{err}"
    );

    // With no owner, a reader is refused at once; while an owner runs, it
    // waits for the epoch to be whole, and the owner's take-over (here from
    // another connection) empties the version.
    let err = store.read_rows(&d.table(0)).unwrap_err();
    assert!(err.to_string().contains("half-written"), "{err}");
    let path = dir.path().join("sub/tables.db");
    let lock = store.lock(&d).unwrap();
    let owner = std::thread::spawn(move || {
        let _lock = lock;
        std::thread::sleep(std::time::Duration::from_millis(100));
        let mut other = SqliteStore::open(&path).unwrap();
        other.take_over(d.id, "the next owner").unwrap()
    });
    let read = store.read_rows(&d.table(0)).unwrap();
    let lease = owner.join().unwrap();
    assert!(read.is_empty(), "{read:?}");
    let reset = store.deployment(d.id).unwrap();
    assert!(!reset.half_written);
    assert!(store.offsets(d.id).unwrap().is_empty());
    assert_eq!(
        (reset.progress.epochs, reset.progress.records_applied),
        (0, 0)
    );
    assert_eq!(lease.generation, reset.generation);
    // A reader that saw it half-written before the owner made it whole and
    // let go of its lock tries again rather than refuse it as orphaned.
    store
        .await_whole(&d, std::time::Instant::now(), "be read")
        .unwrap();

    // Replayed from the start, it ends where a whole commit would have.
    store.writers.clear();
    commit(&mut store, d.id, epoch(0..20, 1), 10).unwrap();
    commit(&mut store, d.id, recount(0..20), 20).unwrap();
    assert_eq!(tables(&store, &reset)[0][3], (kn(3, 2), 1));
    assert_eq!(tables(&store, &reset)[1].len(), 20);
}

#[test]
fn a_swap_waits_for_a_whole_epoch() {
    let (dir, mut store) = store();
    let d = building(&mut store);
    store.piece_rows = 4;
    commit(&mut store, d.id, failing(epoch(0..10, 1)), 10).unwrap_err();
    let err = store.swap(d.id).unwrap_err();
    assert!(err.to_string().contains("half-written"), "{err}");
    let path = dir.path().join("sub/tables.db");
    let lock = store.lock(&d).unwrap();
    let owner = std::thread::spawn(move || {
        let _lock = lock;
        std::thread::sleep(std::time::Duration::from_millis(100));
        SqliteStore::open(&path)
            .unwrap()
            .take_over(d.id, "the next owner")
            .unwrap();
    });
    assert!(store.swap(d.id).unwrap().is_empty());
    owner.join().unwrap();
    let swapped = store.deployment(d.id).unwrap();
    assert_eq!(swapped.state, DeploymentState::Live);
    assert!(store.read_rows(&d.table(0)).unwrap().is_empty());
}

#[test]
fn versions_that_were_live_commit_each_epoch_whole() {
    let (_dir, mut store) = store();
    let v1 = store
        .create_deployment(&new_deployment("j", two_outputs(), DeploymentState::Live))
        .unwrap();
    commit(&mut store, v1.id, epoch(0..10, 1), 10).unwrap();
    let v2 = building(&mut store);
    store.swap(v2.id).unwrap();
    store.swap(v1.id).unwrap();
    store.reopen(v2.id).unwrap(); // a rollback to v2 starts so
    store.piece_rows = 3;
    for id in [v1.id, v2.id] {
        let before: Vec<_> = {
            let d = store.deployment(id).unwrap();
            tables(&store, &d)
        };
        let err = commit(&mut store, id, failing(epoch(20..30, 1)), 30).unwrap_err();
        assert!(matches!(err, TableError::RetractMissing { .. }), "{err}");
        let d = store.deployment(id).unwrap();
        assert!(!d.half_written);
        assert_eq!(
            tables(&store, &d),
            before,
            "nothing of the epoch is written"
        );
    }
}
