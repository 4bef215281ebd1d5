//! The contract every [`TableStore`] keeps, checked against each: SQLite
//! always, PostgreSQL when `KAPPA_TEST_POSTGRES` names a server (`.ci/run`
//! starts one; a database is created per test and dropped after it). Without
//! a server the PostgreSQL half is skipped with a printed reason, unless
//! `KAPPA_REQUIRE_SERVICES` is set (CI), where it fails.
//!
//! The SQLite store's own tests (its files, its concurrency, its migrations)
//! are in `sqlite/tests*.rs`.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::postgres::TestDatabase;
use super::*;
use crate::schema::OutputSchema;
use crate::value::{Row, Value};

/// A store under test and what keeps it alive (a temporary directory, or a
/// database dropped when this is).
pub(crate) struct Subject {
    pub store: Box<dyn TableStore>,
    pub addr: StoreAddr,
    _dir: Option<tempfile::TempDir>,
    _database: Option<TestDatabase>,
}

/// A SQLite store and, when a server is there, a PostgreSQL one.
pub(crate) fn subjects() -> Vec<Subject> {
    let dir = tempfile::tempdir().unwrap();
    let addr = StoreAddr::Sqlite(dir.path().join("tables.db"));
    let mut out = vec![Subject {
        store: open(&addr).unwrap(),
        addr,
        _dir: Some(dir),
        _database: None,
    }];
    if let Some(db) = TestDatabase::create() {
        let addr = StoreAddr::parse(&db.url).unwrap();
        out.push(Subject {
            store: open(&addr).unwrap(),
            addr,
            _dir: None,
            _database: Some(db),
        });
    }
    out
}

fn schema(name: &str, columns: &[&str], key: &[usize]) -> OutputSchema {
    OutputSchema {
        name: name.into(),
        columns: columns.iter().map(|c| c.to_string()).collect(),
        key: key.to_vec(),
    }
}

fn new_deployment(outputs: Vec<OutputSchema>, state: DeploymentState) -> NewDeployment {
    NewDeployment {
        job: "j".into(),
        job_version: 1,
        params: vec![("gap".into(), "30m".into())],
        inputs: vec![("events".into(), "clicks".into())],
        outputs,
        state,
        note: None,
    }
}

fn offset(next: u64) -> InputOffset {
    InputOffset {
        input: "events".into(),
        topic: "clicks".into(),
        partition: 0,
        next,
        last: Some((next.saturating_sub(1), 7)),
    }
}

/// The deployment's current lease, as its owner holds it.
fn lease(store: &dyn TableStore, id: i64) -> Lease {
    Lease {
        deployment: id,
        generation: store.deployment(id).unwrap().generation,
    }
}

fn commit(
    store: &mut dyn TableStore,
    id: i64,
    changes: Vec<Vec<(Row, isize)>>,
    next: u64,
) -> Result<(), TableError> {
    let stats = EpochStats {
        records: 1,
        ..EpochStats::default()
    };
    let lease = lease(store, id);
    store.commit_epoch(&lease, &changes, &[offset(next)], &stats)
}

fn s(x: &str) -> Value {
    Value::str(x)
}

/// Keys: NULL, `1` beside `1.0` (distinct values), a negative; values:
/// NULL and text that would break SQL or COPY if it were ever spliced.
fn keys() -> Vec<Value> {
    vec![
        Value::Null,
        Value::Int(1),
        Value::float(1.0),
        Value::Int(-7),
    ]
}

fn texts() -> Vec<Value> {
    vec![
        Value::Null,
        s("it's; \"x\" --"),
        s("tab\there\nnew line \\N \\"),
    ]
}

fn arb_epochs() -> impl Strategy<Value = Vec<Vec<(usize, usize, usize, isize)>>> {
    let change = (
        0usize..2,
        0usize..4,
        0usize..3,
        prop_oneof![-3isize..0, 1isize..4],
    );
    proptest::collection::vec(proptest::collection::vec(change, 0..12), 1..6)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Random epochs over a bag output and a keyed one: after each commit
    /// both tables hold exactly the model, and the offset is the epoch's.
    #[test]
    fn tables_follow_the_model(epochs in arb_epochs()) {
        for mut subject in subjects() {
            let store = &mut *subject.store;
            let outputs = vec![schema("bag", &["k", "v"], &[0, 1]), schema("keyed", &["k", "v"], &[0])];
            let d = store.create_deployment(&new_deployment(outputs, DeploymentState::Live)).unwrap();
            let mut models = [BTreeMap::<Row, isize>::new(), BTreeMap::new()];
            for (e, epoch) in epochs.iter().enumerate() {
                let mut changes = [BTreeMap::<Row, isize>::new(), BTreeMap::new()];
                for &(out, k, v, diff) in epoch {
                    *changes[out].entry(vec![keys()[k].clone(), texts()[v].clone()]).or_default() += diff;
                }
                for (out, c) in changes.iter_mut().enumerate() {
                    for (r, diff) in c.iter_mut() {
                        *diff = (*diff).max(-models[out].get(r).copied().unwrap_or(0));
                    }
                }
                let lists: Vec<Vec<(Row, isize)>> = changes
                    .iter()
                    .map(|c| c.iter().filter(|(_, d)| **d != 0).map(|(r, d)| (r.clone(), *d)).collect())
                    .collect();
                commit(store, d.id, lists, e as u64 + 1).unwrap();
                for (out, c) in changes.into_iter().enumerate() {
                    for (r, diff) in c {
                        *models[out].entry(r).or_default() += diff;
                    }
                }
                for (out, model) in models.iter().enumerate() {
                    let want: Vec<(Row, isize)> =
                        model.iter().filter(|(_, n)| **n != 0).map(|(r, n)| (r.clone(), *n)).collect();
                    prop_assert_eq!(store.read_rows(&d.table(out)).unwrap(), want, "{}", subject.addr);
                }
                let offsets = store.offsets(d.id).unwrap();
                prop_assert_eq!(offsets.get(&("events".to_string(), 0)), Some(&(e as u64 + 1)));
            }
            prop_assert_eq!(store.deployment(d.id).unwrap().progress.epochs, epochs.len() as u64);
        }
    }
}

#[test]
fn how_a_deployment_reads_its_inputs_is_kept_as_given() {
    for mut subject in subjects() {
        let store = &mut *subject.store;
        let outputs = vec![schema("a", &["k"], &[0])];
        let d = store
            .create_deployment(&new_deployment(outputs, DeploymentState::Live))
            .unwrap();
        assert_eq!(
            store.deployment(d.id).unwrap().reading,
            None,
            "{}",
            subject.addr
        );
        let text = r#"{"null":"NA","on_bad_row":"skip"}"#;
        store.set_reading(d.id, text).unwrap();
        let back = store.deployment(d.id).unwrap();
        assert_eq!(back.reading.as_deref(), Some(text), "{}", subject.addr);
    }
}

#[test]
fn a_failed_epoch_writes_nothing() {
    for mut subject in subjects() {
        let store = &mut *subject.store;
        let outputs = vec![schema("a", &["k", "n"], &[0]), schema("b", &["k"], &[0])];
        let d = store
            .create_deployment(&new_deployment(outputs, DeploymentState::Building))
            .unwrap();
        let first = vec![
            vec![(vec![s("x"), Value::Int(1)], 1)],
            vec![(vec![s("y")], 2)],
        ];
        commit(store, d.id, first, 10).unwrap();
        let state = |store: &dyn TableStore| {
            (
                store.read_rows(&d.table(0)).unwrap(),
                store.read_rows(&d.table(1)).unwrap(),
                store.input_offsets(d.id).unwrap(),
                store.deployment(d.id).unwrap().progress,
            )
        };
        let before = state(store);
        let failing: Vec<Vec<Vec<(Row, isize)>>> = vec![
            vec![
                vec![
                    (vec![s("x"), Value::Int(1)], -1),
                    (vec![s("z"), Value::Int(3)], 1),
                ],
                vec![(vec![s("nope")], -1)],
            ],
            vec![vec![], vec![(vec![s("y")], -3)]],
            vec![
                vec![(vec![s("q"), Value::Int(1)], 1), (vec![s("r")], 1)],
                vec![],
            ],
            vec![vec![], vec![], vec![(vec![s("w")], 1)]],
        ];
        for changes in failing {
            let err = commit(store, d.id, changes, 20).unwrap_err();
            assert!(
                matches!(
                    err,
                    TableError::RetractMissing { .. }
                        | TableError::Arity { .. }
                        | TableError::OutputCount { .. }
                ),
                "{}: {err}",
                subject.addr
            );
            assert_eq!(state(store), before, "{}", subject.addr);
        }
        let err = commit(store, d.id, vec![vec![], vec![]], 5).unwrap_err();
        assert!(matches!(err, TableError::OffsetRegression { .. }), "{err}");
        commit(store, d.id, vec![vec![], vec![(vec![s("y")], -2)]], 20).unwrap();
        assert!(store.read_rows(&d.table(1)).unwrap().is_empty());
        assert_eq!(store.input_offsets(d.id).unwrap(), vec![offset(20)]);
    }
}

#[test]
fn a_stale_owner_is_fenced_off_and_a_second_is_refused_the_lock() {
    for mut subject in subjects() {
        let store = &mut *subject.store;
        let d = store
            .create_deployment(&new_deployment(
                vec![schema("o", &["k"], &[0])],
                DeploymentState::Live,
            ))
            .unwrap();
        let held = store.lock(&d).unwrap();
        let err = store.lock(&d).unwrap_err();
        assert!(matches!(err, TableError::Owned { .. }), "{err}");
        drop(held);
        let _again = store.lock(&d).unwrap();
        let first = store.take_over(d.id, "pid 1 on a").unwrap();
        let stats = EpochStats::default();
        let one = vec![vec![(vec![s("a")], 1)]];
        store
            .commit_epoch(&first, &one, &[offset(1)], &stats)
            .unwrap();
        let second = store.take_over(d.id, "pid 2 on b").unwrap();
        assert_eq!(store.owner(d.id).unwrap().as_deref(), Some("pid 2 on b"));
        let two = vec![vec![(vec![s("b")], 1)]];
        let err = store
            .commit_epoch(&first, &two, &[offset(2)], &stats)
            .unwrap_err();
        assert!(
            matches!(&err, TableError::Fenced { owner, .. } if owner == "pid 2 on b"),
            "{err}"
        );
        for refused in [
            store.set_progress(&first, &stats),
            store.mark_caught_up(&first),
            store.check_lease(&first),
            store.clear_outbox(&first, "o", 1),
        ] {
            assert!(
                matches!(refused, Err(TableError::Fenced { .. })),
                "{}",
                subject.addr
            );
        }
        assert_eq!(store.read_rows(&d.table(0)).unwrap().len(), 1);
        store
            .commit_epoch(&second, &two, &[offset(2)], &stats)
            .unwrap();
        assert_eq!(store.read_rows(&d.table(0)).unwrap().len(), 2);
    }
}

#[test]
fn versions_swap_roll_back_and_drop() {
    for mut subject in subjects() {
        let store = &mut *subject.store;
        let out = || vec![schema("sessions", &["user", "n"], &[0])];
        let v1 = store
            .create_deployment(&new_deployment(out(), DeploymentState::Live))
            .unwrap();
        commit(
            store,
            v1.id,
            vec![vec![(vec![s("a"), Value::Int(1)], 1)]],
            1,
        )
        .unwrap();
        let v2 = store
            .create_deployment(&new_deployment(out(), DeploymentState::Building))
            .unwrap();
        assert_eq!(v2.version, TableVersion(2));
        let rows = vec![
            (vec![s("a"), Value::Int(2)], 1),
            (vec![s("b"), Value::Int(1)], 1),
        ];
        commit(store, v2.id, vec![rows], 1).unwrap();
        let diff = store.diff("sessions", 1, 2, 10).unwrap();
        assert_eq!((diff.counts.added, diff.counts.changed), (1, 1));
        assert_eq!(store.find_by_output("sessions", None).unwrap().id, v1.id);
        assert_eq!(store.swap(v2.id).unwrap(), vec![v1.id]);
        assert_eq!(store.find_by_output("SESSIONS", None).unwrap().id, v2.id);
        assert_eq!(
            store.deployment(v1.id).unwrap().state,
            DeploymentState::Retired
        );
        // Rollback: reopen v1, swap it back in.
        store.reopen(v1.id).unwrap();
        assert_eq!(store.swap(v1.id).unwrap(), vec![v2.id]);
        assert!(matches!(
            store.drop_deployment(v1.id),
            Err(TableError::StateConflict { .. })
        ));
        store.drop_deployment(v2.id).unwrap();
        assert!(matches!(
            store.read_rows(&v2.table(0)),
            Err(TableError::TableNotFound { .. })
        ));
        // A building version that never committed leaves no trace.
        let v3 = store
            .create_deployment(&new_deployment(out(), DeploymentState::Building))
            .unwrap();
        assert_eq!(v3.version, TableVersion(3));
        let l3 = store.take_over(v3.id, "me").unwrap();
        assert!(
            store
                .abandon_unused(&l3, DeploymentState::Building)
                .unwrap()
        );
        let v3 = store
            .create_deployment(&new_deployment(out(), DeploymentState::Building))
            .unwrap();
        assert_eq!(v3.version, TableVersion(3), "{}", subject.addr);
        commit(store, v3.id, vec![vec![]], 1).unwrap();
        store.swap(v3.id).unwrap();
        assert_eq!(
            store.retire_old(&["sessions".into()], 0).unwrap(),
            vec![v1.id]
        );
        let page = store.read_page(&v3.table(0), 10).unwrap();
        assert_eq!((page.distinct, page.total), (0, 0));
        assert_eq!(store.deployments_of("sessions").unwrap().len(), 3);
    }
}

#[test]
fn sinks_get_upserts_by_key_and_bags_their_counts() {
    for mut subject in subjects() {
        let store = &mut *subject.store;
        let outputs = vec![
            schema("g", &["k", "n"], &[0]),
            schema("pairs", &["a", "b"], &[0, 1]),
        ];
        let d = store
            .create_deployment(&new_deployment(outputs, DeploymentState::Live))
            .unwrap();
        let sinks = [
            SinkSpec {
                name: "g".into(),
                output: 0,
            },
            SinkSpec {
                name: "pairs".into(),
                output: 1,
            },
        ];
        let l = lease(store, d.id);
        let stats = EpochStats::default();
        let changes = vec![
            vec![(vec![s("a"), Value::Int(1)], 1)],
            vec![(vec![s("x"), Value::Int(1)], 2)],
        ];
        store
            .commit_epoch_with_sinks(&l, &changes, &[offset(1)], &stats, &sinks)
            .unwrap();
        let changes = vec![
            vec![(vec![s("a"), Value::Int(1)], -1)],
            vec![(vec![s("x"), Value::Int(1)], -1)],
        ];
        store
            .commit_epoch_with_sinks(&l, &changes, &[offset(2)], &stats, &sinks)
            .unwrap();
        let got: Vec<(String, i64, String, Option<String>)> = store
            .outbox(d.id)
            .unwrap()
            .into_iter()
            .map(|m| (m.sink, m.seq, m.key, m.value))
            .collect();
        let pair = |n: i64| Some(format!(r#"{{"a":"x","b":1,"kappa_count":{n}}}"#));
        assert_eq!(
            got,
            vec![
                ("g".into(), 1, "a".into(), Some(r#"{"k":"a","n":1}"#.into())),
                ("g".into(), 2, "a".into(), None),
                ("pairs".into(), 1, r#"["x",1]"#.into(), pair(2)),
                ("pairs".into(), 2, r#"["x",1]"#.into(), pair(1)),
            ],
            "{}",
            subject.addr
        );
        store.clear_outbox(&l, "g", 2).unwrap();
        assert_eq!(store.outbox(d.id).unwrap().len(), 2);
    }
}
