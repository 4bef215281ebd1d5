//! What only the PostgreSQL store has to show: typed columns that widen
//! under a live view, readers on other connections that never see half an
//! epoch or half a swap, a lost connection redone exactly once, and the
//! catalog's own checks. Each test gets a database of its own (see
//! `contract.rs`); without a server they are skipped with a printed reason.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ::postgres::{Client, NoTls};

use super::TestDatabase;
use crate::schema::OutputSchema;
use crate::table::{
    DeploymentState, EpochStats, InputOffset, NewDeployment, StoreAddr, TableError, TableStore,
    open, open_existing,
};
use crate::value::{Row, Value};

fn deployment(
    name: &str,
    columns: &[&str],
    key: &[usize],
    state: DeploymentState,
) -> NewDeployment {
    NewDeployment {
        job: "j".into(),
        job_version: 1,
        params: vec![],
        inputs: vec![("events".into(), "clicks".into())],
        outputs: vec![OutputSchema {
            name: name.into(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            key: key.to_vec(),
        }],
        state,
        note: None,
    }
}

fn commit(
    store: &mut dyn TableStore,
    id: i64,
    rows: Vec<(Row, isize)>,
    next: u64,
) -> Result<(), TableError> {
    let lease = crate::table::Lease {
        deployment: id,
        generation: store.deployment(id).unwrap().generation,
    };
    let offsets = [InputOffset {
        input: "events".into(),
        topic: "clicks".into(),
        partition: 0,
        next,
        last: None,
    }];
    store.commit_epoch(&lease, &[rows], &offsets, &EpochStats::default())
}

fn s(x: &str) -> Value {
    Value::str(x)
}

#[test]
fn columns_take_the_type_of_their_values_and_widen_exactly() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let mut store = open(&StoreAddr::parse(&db.url).unwrap()).unwrap();
    let d = store
        .create_deployment(&deployment(
            "sums",
            &["k", "total", "note"],
            &[0],
            DeploymentState::Live,
        ))
        .unwrap();
    commit(
        &mut *store,
        d.id,
        vec![(vec![s("a"), Value::Int(3), Value::Null], 1)],
        1,
    )
    .unwrap();
    let mut psql = Client::connect(&db.url, NoTls).unwrap();
    let types = |psql: &mut Client| -> Vec<String> {
        psql.query(
            "SELECT data_type FROM information_schema.columns WHERE table_name = 'sums__v1' \
             AND column_name IN ('k', 'total', 'note') ORDER BY ordinal_position",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
    };
    assert_eq!(types(&mut psql), ["text", "bigint", "text"]);
    // A float beside the integer: the column becomes numeric, the view with it.
    let rows = vec![
        (vec![s("b"), Value::float(1.0), Value::Null], 1),
        (vec![s("c"), Value::float(0.1), Value::Null], 1),
    ];
    commit(&mut *store, d.id, rows, 2).unwrap();
    assert_eq!(types(&mut psql), ["text", "numeric", "text"]);
    let want = vec![
        (vec![s("a"), Value::Int(3), Value::Null], 1),
        (vec![s("b"), Value::float(1.0), Value::Null], 1),
        (vec![s("c"), Value::float(0.1), Value::Null], 1),
    ];
    assert_eq!(store.read_rows(&d.table(0)).unwrap(), want);
    let total: String = psql
        .query_one("SELECT sum(total)::text FROM sums", &[])
        .unwrap()
        .get(0);
    assert_eq!(total, "4.1");
    // Text in a numeric column is refused, naming it, and nothing is written.
    let err = commit(
        &mut *store,
        d.id,
        vec![(vec![s("d"), s("x"), Value::Null], 1)],
        3,
    )
    .unwrap_err();
    assert!(
        matches!(&err, TableError::MixedColumn { table, column, .. } if table == "sums__v1" && column == "total"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("holds numbers, and a row brings text"),
        "{err}"
    );
    assert_eq!(store.read_rows(&d.table(0)).unwrap(), want);
    // A fresh store (a restarted process) reads the kinds back from the catalog.
    let mut store = open(&StoreAddr::parse(&db.url).unwrap()).unwrap();
    commit(
        &mut *store,
        d.id,
        vec![(vec![s("e"), Value::Int(-1), s("it's")], 1)],
        3,
    )
    .unwrap();
    assert_eq!(types(&mut psql), ["text", "numeric", "text"]);
    assert_eq!(store.read_rows(&d.table(0)).unwrap().len(), 4);
}

/// Epochs move units between keys, keeping the total at 100; swaps move
/// the view between two versions that both hold 100. A reader polling the
/// view on its own connection must always see 100, and always a view.
#[test]
fn readers_never_see_half_an_epoch_or_half_a_swap() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let addr = StoreAddr::parse(&db.url).unwrap();
    let mut store = open(&addr).unwrap();
    let new = |state| deployment("stock", &["item", "n"], &[0], state);
    let v1 = store
        .create_deployment(&new(DeploymentState::Live))
        .unwrap();
    let v2 = store
        .create_deployment(&new(DeploymentState::Building))
        .unwrap();
    for d in [&v1, &v2] {
        commit(
            &mut *store,
            d.id,
            vec![(vec![s("a"), Value::Int(100)], 1)],
            1,
        )
        .unwrap();
    }
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (url, done) = (db.url.clone(), done.clone());
        std::thread::spawn(move || {
            let mut c = Client::connect(&url, NoTls).unwrap();
            let mut reads = 0;
            while !done.load(Ordering::Relaxed) {
                let total: i64 = c
                    .query_one("SELECT coalesce(sum(n), 0)::bigint FROM stock", &[])
                    .unwrap()
                    .get(0);
                assert_eq!(total, 100, "a reader saw a partial state");
                reads += 1;
            }
            reads
        })
    };
    let mut have = [100i64, 0];
    for e in 0..60u64 {
        let (from, to) = if have[0] > 0 { (0, 1) } else { (1, 0) };
        let key = |i: usize| s(["a", "b"][i]);
        let moved = have[from].min(7);
        let mut rows = vec![(vec![key(from), Value::Int(have[from])], -1)];
        if have[from] > moved {
            rows.push((vec![key(from), Value::Int(have[from] - moved)], 1));
        }
        if have[to] > 0 {
            rows.push((vec![key(to), Value::Int(have[to])], -1));
        }
        rows.push((vec![key(to), Value::Int(have[to] + moved)], 1));
        // Both versions get the same epoch, each swapped in in turn.
        commit(&mut *store, v1.id, rows.clone(), e + 2).unwrap();
        commit(&mut *store, v2.id, rows, e + 2).unwrap();
        have[from] -= moved;
        have[to] += moved;
        if e % 10 == 9 {
            let live = store.find_by_output("stock", None).unwrap().id;
            let other = if live == v1.id { v2.id } else { v1.id };
            for retired in store.swap(other).unwrap() {
                store.reopen(retired).unwrap();
            }
        }
    }
    done.store(true, Ordering::Relaxed);
    let reads = reader.join().expect("the reader saw only whole epochs");
    assert!(reads > 10, "the reader ran {reads} times");
}

#[test]
fn a_lost_connection_redoes_the_epoch_exactly_once() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let mut store = open(&StoreAddr::parse(&db.url).unwrap()).unwrap();
    let d = store
        .create_deployment(&deployment(
            "counts",
            &["k", "n"],
            &[0],
            DeploymentState::Live,
        ))
        .unwrap();
    commit(&mut *store, d.id, vec![(vec![s("a"), Value::Int(1)], 1)], 1).unwrap();
    let mut admin = Client::connect(&db.url, NoTls).unwrap();
    let kill = |admin: &mut Client| {
        admin
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE application_name = 'kappa' AND pid <> pg_backend_pid() AND datname = current_database()",
                &[],
            )
            .unwrap()
            .len()
    };
    assert!(kill(&mut admin) >= 1);
    let rows = vec![
        (vec![s("a"), Value::Int(1)], -1),
        (vec![s("a"), Value::Int(2)], 1),
    ];
    commit(&mut *store, d.id, rows, 2).unwrap();
    assert_eq!(
        store.read_rows(&d.table(0)).unwrap(),
        vec![(vec![s("a"), Value::Int(2)], 1)]
    );
    assert_eq!(store.deployment(d.id).unwrap().progress.epochs, 2);
    // Reads reconnect too.
    assert!(kill(&mut admin) >= 1);
    assert_eq!(
        store
            .offsets(d.id)
            .unwrap()
            .values()
            .copied()
            .collect::<Vec<_>>(),
        [2]
    );
}

#[test]
fn the_catalog_checks_names_schemas_and_existence() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let err = open_existing(&StoreAddr::parse(&db.url).unwrap()).unwrap_err();
    assert!(matches!(err, TableError::StoreNotFound { .. }), "{err}");
    let addr = StoreAddr::parse(&format!("{}?schema=serving", db.url)).unwrap();
    let mut store = open(&addr).unwrap();
    let long = "x".repeat(60);
    let err = store
        .create_deployment(&deployment(&long, &["k"], &[0], DeploymentState::Live))
        .unwrap_err();
    assert!(err.to_string().contains("63 bytes"), "{err}");
    let d = store
        .create_deployment(&deployment("Sessions", &["k"], &[0], DeploymentState::Live))
        .unwrap();
    commit(&mut *store, d.id, vec![(vec![s("a")], 1)], 1).unwrap();
    let mut psql = Client::connect(&db.url, NoTls).unwrap();
    let n: i64 = psql
        .query_one("SELECT count(*) FROM serving.\"Sessions\"", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 1);
    // The catalog keeps its schema: another one in the URL is refused.
    let err = open(&StoreAddr::parse(&db.url).unwrap()).unwrap_err();
    assert!(err.to_string().contains("?schema=serving"), "{err}");
    assert!(open_existing(&addr).is_ok());
}

#[test]
fn an_unreachable_server_is_a_clear_error_without_the_password() {
    let addr =
        StoreAddr::parse("postgresql://app:s3cret@127.0.0.1:1/db?connect_timeout=2").unwrap();
    let err = open(&addr).unwrap_err().to_string();
    assert!(
        err.contains("cannot connect") && err.contains("app:***@127.0.0.1:1/db"),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "{err}");
}

#[test]
fn pgpass_lines_match_like_libpq() {
    let text = "# comment\ndb:5432:shop:app:first\n*:*:*:other:se\\:cret\n";
    assert_eq!(
        super::pgpass_lookup(text, ["db", "5432", "shop", "app"]).as_deref(),
        Some("first")
    );
    assert_eq!(
        super::pgpass_lookup(text, ["h", "1", "x", "other"]).as_deref(),
        Some("se:cret")
    );
    assert_eq!(
        super::pgpass_lookup(text, ["db", "5433", "shop", "app"]),
        None
    );
}

/// A role that may connect but not create kappa's schema: the error says
/// what PostgreSQL refused, naming the database, and which store it was.
#[test]
fn a_permission_error_names_the_object() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let role = format!("kappa_reader_{}", std::process::id());
    let mut admin = Client::connect(&db.url, NoTls).unwrap();
    admin
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN"
        ))
        .unwrap();
    let url = db.url.replacen("postgres@", &format!("{role}@"), 1);
    let err = open(&StoreAddr::parse(&url).unwrap())
        .unwrap_err()
        .to_string();
    let name = db.url.rsplit('/').next().unwrap();
    assert!(
        err.contains("permission denied for database") && err.contains(name),
        "{err}"
    );
    assert!(err.starts_with(&format!("PostgreSQL ({url})")), "{err}");
    drop(admin);
    drop(db);
    if let Ok(admin) = std::env::var("KAPPA_TEST_POSTGRES") {
        let mut c = Client::connect(&admin, NoTls).unwrap();
        c.batch_execute(&format!("DROP ROLE IF EXISTS {role}"))
            .unwrap();
    }
}
