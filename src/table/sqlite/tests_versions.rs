//! Versions, views and the lifecycle: create live and building versions,
//! swap forward and back, refuse writes to retired versions, drop, keep the
//! newest retired ones, never reuse a number; and name validation.

use super::tests::{commit, lease, new_deployment, row, schema, select_all, store};
use super::*;
use crate::table::{PartitionLag, TableVersion};
use crate::value::Value;

fn pageviews() -> Vec<crate::schema::OutputSchema> {
    vec![schema("pageviews", &["page", "views"], &[0])]
}

fn pv(page: &str, views: i64) -> crate::value::Row {
    row(&[Value::str(page), Value::Int(views)])
}

fn object_exists(store: &SqliteStore, kind: &str, name: &str) -> bool {
    store
        .conn
        .query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = ?1 AND name = ?2",
            [kind, name],
            |r| r.get(0),
        )
        .unwrap()
}

#[test]
fn swap_moves_the_view_and_back() {
    let (dir, mut store) = store();
    let path = dir.path().join("sub/tables.db");
    let v1 = store
        .create_deployment(&new_deployment("pv", pageviews(), DeploymentState::Live))
        .unwrap();
    assert_eq!(
        (v1.version, v1.state),
        (TableVersion(1), DeploymentState::Live)
    );
    assert_eq!(v1.tables(), ["pageviews__v1"]);
    assert!(v1.swapped_at.is_some());
    commit(&mut store, v1.id, vec![vec![(pv("home", 3), 1)]], 1).unwrap();
    assert_eq!(select_all(&path, "pageviews"), [pv("home", 3)]);

    let v2 = store
        .create_deployment(&new_deployment(
            "pv",
            pageviews(),
            DeploymentState::Building,
        ))
        .unwrap();
    assert_eq!(v2.version, TableVersion(2));
    commit(&mut store, v2.id, vec![vec![(pv("home", 4), 1)]], 1).unwrap();
    assert_eq!(
        select_all(&path, "pageviews"),
        [pv("home", 3)],
        "building is invisible"
    );

    assert_eq!(store.swap(v2.id).unwrap(), [v1.id]);
    assert_eq!(select_all(&path, "pageviews"), [pv("home", 4)]);
    assert_eq!(
        store.deployment(v1.id).unwrap().state,
        DeploymentState::Retired
    );
    let live = store.find_by_output("pageviews", None).unwrap();
    assert_eq!((live.id, live.state), (v2.id, DeploymentState::Live));
    assert!(live.swapped_at.is_some());
    assert!(
        store.swap(v2.id).unwrap().is_empty(),
        "swapping in the live one is a no-op"
    );

    // The old stream process learns it was swapped out.
    let err = commit(&mut store, v1.id, vec![vec![(pv("x", 1), 1)]], 2).unwrap_err();
    assert!(
        matches!(
            err,
            TableError::StateConflict {
                state: DeploymentState::Retired,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.is_state_conflict());
    assert!(
        store
            .set_progress(&lease(&store, v1.id), &EpochStats::default())
            .is_err()
    );
    assert_eq!(
        store.read_rows("pageviews__v1").unwrap(),
        [(pv("home", 3), 1)]
    );

    // Rollback: swap the retired version back in.
    assert_eq!(store.swap(v1.id).unwrap(), [v2.id]);
    assert_eq!(select_all(&path, "pageviews"), [pv("home", 3)]);
    assert_eq!(store.find_by_output("pageviews", None).unwrap().id, v1.id);

    let err = store.drop_deployment(v1.id).unwrap_err();
    assert!(matches!(
        err,
        TableError::StateConflict {
            state: DeploymentState::Live,
            ..
        }
    ));
    store.drop_deployment(v2.id).unwrap();
    assert!(!object_exists(&store, "table", "pageviews__v2"));
    assert!(matches!(
        store.read_rows("pageviews__v2"),
        Err(TableError::TableNotFound { .. })
    ));
    let dropped = store.find_by_output("pageviews", Some(2)).unwrap();
    assert_eq!(
        dropped.state,
        DeploymentState::Dropped,
        "the catalog row stays"
    );
    assert!(
        store.swap(v2.id).is_err(),
        "a dropped version cannot come back"
    );

    let v3 = store
        .create_deployment(&new_deployment(
            "pv",
            pageviews(),
            DeploymentState::Building,
        ))
        .unwrap();
    assert_eq!(
        v3.version,
        TableVersion(3),
        "version 2 is never given out again"
    );
}

#[test]
fn reopen_lets_a_retired_version_catch_up_before_the_swap_back() {
    let (_dir, mut store) = store();
    let v1 = store
        .create_deployment(&new_deployment("pv", pageviews(), DeploymentState::Live))
        .unwrap();
    let v2 = store
        .create_deployment(&new_deployment(
            "pv",
            pageviews(),
            DeploymentState::Building,
        ))
        .unwrap();
    store.mark_caught_up(&lease(&store, v2.id)).unwrap();
    store.swap(v2.id).unwrap();
    assert!(store.deployment(v2.id).unwrap().caught_up_at.is_some());
    store.reopen(v1.id).unwrap();
    assert_eq!(
        store.deployment(v1.id).unwrap().state,
        DeploymentState::Building
    );
    commit(&mut store, v1.id, vec![vec![(pv("late", 1), 1)]], 5).unwrap();
    assert!(store.reopen(v2.id).is_err(), "only retired versions reopen");
    assert_eq!(store.swap(v1.id).unwrap(), [v2.id]);
}

#[test]
fn retire_old_keeps_the_newest_retired_versions() {
    let (_dir, mut store) = store();
    let mut ids = Vec::new();
    for i in 0..5 {
        let state = if i == 0 {
            DeploymentState::Live
        } else {
            DeploymentState::Building
        };
        let d = store
            .create_deployment(&new_deployment("pv", pageviews(), state))
            .unwrap();
        store.swap(d.id).unwrap();
        ids.push(d.id);
    }
    let building = store
        .create_deployment(&new_deployment(
            "pv",
            pageviews(),
            DeploymentState::Building,
        ))
        .unwrap();
    // v5 live; v1..v4 retired; v6 building.
    let dropped = store.retire_old(&["pageviews".to_string()], 2).unwrap();
    assert_eq!(dropped, [ids[1], ids[0]]);
    let states: Vec<DeploymentState> = store
        .deployments_of("pageviews")
        .unwrap()
        .iter()
        .map(|d| d.state)
        .collect();
    use DeploymentState::*;
    assert_eq!(states, [Dropped, Dropped, Retired, Retired, Live, Building]);
    assert!(
        store
            .retire_old(&["pageviews".to_string()], 2)
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .retire_old(&["pageviews".to_string()], 0)
            .unwrap()
            .len(),
        2
    );
    assert_eq!(store.deployment(building.id).unwrap().state, Building);
}

#[test]
fn at_most_one_live_deployment_per_output() {
    let (_dir, mut store) = store();
    let v1 = store
        .create_deployment(&new_deployment("pv", pageviews(), DeploymentState::Live))
        .unwrap();
    let err = store
        .create_deployment(&new_deployment("other", pageviews(), DeploymentState::Live))
        .unwrap_err();
    assert!(
        matches!(err, TableError::LiveConflict { live, .. } if live == v1.id),
        "{err}"
    );
    assert_eq!(store.deployments().unwrap().len(), 1, "nothing was created");
    let names = ["pageviews".to_string()];
    assert_eq!(store.live_for_job("pv", &names).unwrap().unwrap().id, v1.id);
    assert!(store.live_for_job("other", &names).unwrap().is_none());
    assert!(store.live_for_job("pv", &[]).unwrap().is_none());
    assert!(matches!(
        store.find_by_output("nothing", None),
        Err(TableError::OutputNotFound { .. })
    ));
}

#[test]
fn swapping_in_a_partial_overlap_retires_the_other_outputs_views() {
    let (_dir, mut store) = store();
    let both = vec![schema("a", &["k"], &[0]), schema("b", &["k"], &[0])];
    let old = store
        .create_deployment(&new_deployment("j", both, DeploymentState::Live))
        .unwrap();
    let new = store
        .create_deployment(&new_deployment(
            "j2",
            vec![schema("b", &["k"], &[0])],
            DeploymentState::Building,
        ))
        .unwrap();
    assert_eq!(new.version, TableVersion(2));
    assert_eq!(store.swap(new.id).unwrap(), [old.id]);
    assert!(
        !object_exists(&store, "view", "a"),
        "no live deployment maintains a"
    );
    assert!(object_exists(&store, "view", "b"));
    assert!(store.find_by_output("a", None).is_err());
}

#[test]
fn bag_views_show_the_multiplicity() {
    let (dir, mut store) = store();
    let outputs = vec![
        schema("pairs", &["l", "r"], &[0, 1]),
        schema("totals", &["k", "n"], &[0]),
    ];
    let d = store
        .create_deployment(&new_deployment("join", outputs, DeploymentState::Live))
        .unwrap();
    let changes = vec![
        vec![(row(&[Value::Int(1), Value::Null]), 3)],
        vec![(row(&[Value::Null, Value::Int(7)]), 1)],
    ];
    commit(&mut store, d.id, changes, 1).unwrap();
    let path = dir.path().join("sub/tables.db");
    assert_eq!(
        select_all(&path, "pairs"),
        [row(&[Value::Int(1), Value::Null, Value::Int(3)])]
    );
    assert_eq!(
        select_all(&path, "totals"),
        [row(&[Value::Null, Value::Int(7)])],
        "a keyed view hides kappa_n; the null group is a row"
    );
    let retract = vec![vec![(row(&[Value::Int(1), Value::Null]), -2)], vec![]];
    commit(&mut store, d.id, retract, 2).unwrap();
    let page = store.read_page("pairs__v1", 10).unwrap();
    assert!(page.bag);
    assert_eq!((page.distinct, page.total), (1, 1));
}

#[test]
fn catalog_round_trips_a_deployment_across_reopen() {
    let (dir, mut store) = store();
    let mut new = new_deployment("pv", pageviews(), DeploymentState::Building);
    new.note = Some("gap=10m experiment".into());
    let d = store.create_deployment(&new).unwrap();
    let stats = EpochStats {
        records: 0,
        bad_rows_total: 4,
        epoch_ms: 12,
        records_per_sec: 250.0,
        lag: vec![PartitionLag {
            topic: "clicks".into(),
            partition: 1,
            lag: 500,
        }],
        late_dropped: vec![("clicks".into(), 7)],
    };
    store.set_progress(&lease(&store, d.id), &stats).unwrap();
    drop(store);
    let store = SqliteStore::open_existing(&dir.path().join("sub/tables.db")).unwrap();
    let back = store.deployment(d.id).unwrap();
    assert_eq!(
        (&back.params, &back.inputs, &back.outputs),
        (&new.params, &new.inputs, &new.outputs)
    );
    assert_eq!(back.note.as_deref(), Some("gap=10m experiment"));
    assert_eq!(back.progress.bad_rows, 4);
    assert_eq!(back.progress.lag, stats.lag);
    assert_eq!(back.progress.late_dropped, stats.late_dropped);
    assert_eq!(back.progress.eta(), Some(std::time::Duration::from_secs(2)));
    // A catalog of schema version 1 (before late-event counts) is migrated.
    drop(store);
    let conn = rusqlite::Connection::open(dir.path().join("sub/tables.db")).unwrap();
    conn.execute_batch(
        "ALTER TABLE kappa_deployments DROP COLUMN late; \
         ALTER TABLE kappa_deployments DROP COLUMN generation; \
         ALTER TABLE kappa_deployments DROP COLUMN owner; \
         ALTER TABLE kappa_deployments DROP COLUMN half_written; \
         ALTER TABLE kappa_deployments DROP COLUMN state_digest; \
         ALTER TABLE kappa_deployments DROP COLUMN state_merged_at; \
         ALTER TABLE kappa_deployments DROP COLUMN state_written_at; \
         ALTER TABLE kappa_deployments DROP COLUMN reading; \
         DROP TABLE kappa_state; \
         ALTER TABLE kappa_offsets DROP COLUMN last_offset; \
         ALTER TABLE kappa_offsets DROP COLUMN last_crc; \
         DROP TABLE kappa_outbox; \
         UPDATE kappa_meta SET value = '1' WHERE key = 'schema_version';",
    )
    .unwrap();
    drop(conn);
    let store = SqliteStore::open_existing(&dir.path().join("sub/tables.db")).unwrap();
    let back = store.deployment(d.id).unwrap();
    assert_eq!(back.progress.bad_rows, 4);
    assert!(back.progress.late_dropped.is_empty());
    assert!(matches!(
        SqliteStore::open_existing(&dir.path().join("missing.db")),
        Err(TableError::StoreNotFound { .. })
    ));
}

#[test]
fn invalid_names_are_rejected_before_anything_is_written() {
    let (_dir, mut store) = store();
    let bad: Vec<(Vec<crate::schema::OutputSchema>, &str)> = vec![
        (vec![schema("page-views", &["a"], &[0])], "page-views"),
        (
            vec![schema("x; DROP TABLE y", &["a"], &[0])],
            "x; DROP TABLE y",
        ),
        (vec![schema("kappa_deployments", &["a"], &[0])], "reserved"),
        (vec![schema("sessions__v2", &["a"], &[0])], "table versions"),
        (vec![schema("o", &["kappa_n"], &[0])], "kappa_n"),
        (vec![schema("o", &["a\"b"], &[0])], "a\"b"),
        (vec![schema("o", &["a", "A"], &[0])], "twice"),
        (vec![schema("o", &["a"], &[1])], "key"),
        (vec![schema("o", &[], &[])], "no columns"),
        (
            vec![schema("o", &["a"], &[0]), schema("O", &["a"], &[0])],
            "twice",
        ),
        (vec![], "no outputs"),
    ];
    for (outputs, needle) in bad {
        let err = store
            .create_deployment(&new_deployment("j", outputs, DeploymentState::Live))
            .unwrap_err();
        assert!(
            err.to_string().contains(needle),
            "{err} should mention {needle}"
        );
    }
    let mut retired = new_deployment("j", pageviews(), DeploymentState::Retired);
    assert!(store.create_deployment(&retired).is_err());
    retired.state = DeploymentState::Building;
    assert_eq!(
        store.create_deployment(&retired).unwrap().version,
        TableVersion(1)
    );
    assert_eq!(store.deployments().unwrap().len(), 1);
    assert!(matches!(
        store.read_rows("pageviews; DROP TABLE x"),
        Err(TableError::TableNotFound { .. })
    ));
}

#[test]
fn output_names_differing_in_case_share_versions() {
    let (_dir, mut store) = store();
    store
        .create_deployment(&new_deployment("pv", pageviews(), DeploymentState::Live))
        .unwrap();
    let upper = store
        .create_deployment(&new_deployment(
            "pv",
            vec![schema("PageViews", &["page", "views"], &[0])],
            DeploymentState::Building,
        ))
        .unwrap();
    assert_eq!(upper.version, TableVersion(2));
    assert_eq!(
        store.find_by_output("PAGEVIEWS", Some(2)).unwrap().id,
        upper.id
    );
    assert_eq!(store.swap(upper.id).unwrap().len(), 1);
}
