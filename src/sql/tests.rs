//! Binder and planner tests: plans and errors for scripts over fixed input
//! columns, without running anything (the end-to-end tests against DuckDB
//! are in tests/sql.rs).

use super::*;
use crate::schema::InputSchema;
use crate::value::Value;

fn schemas(job: &SqlJob, inputs: &[(&str, &[&str])]) -> Schemas {
    let spec = job.spec();
    let list = spec
        .inputs
        .iter()
        .map(|i| {
            let (_, cols) = inputs
                .iter()
                .find(|(n, _)| *n == i.name)
                .expect("input given");
            InputSchema {
                name: i.name.to_string(),
                columns: cols.iter().map(|c| c.to_string()).collect(),
            }
        })
        .collect();
    Schemas::new(&spec, list)
}

const ORDERS: (&str, &[&str]) = ("orders", &["id", "customer", "amount", "note"]);
const CUSTOMERS: (&str, &[&str]) = ("customers", &["name", "city"]);

fn plan(sql: &str) -> Result<Plan, PlanError> {
    let job = SqlJob::parse(sql, "q.sql").map_err(|e| PlanError::Sql(Box::new(e)))?;
    let s = schemas(&job, &[ORDERS, CUSTOMERS]);
    let params = Params::resolve(&job.spec(), &[]).unwrap();
    job.plan(&params, &s, &crate::job::NoData)
}

fn error(sql: &str) -> SqlError {
    match plan(sql) {
        Err(PlanError::Sql(e)) => *e,
        other => panic!("{sql}: expected a SQL error, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn inputs_read_only_the_columns_used_typed_by_use() {
    let p = plan(
        "SELECT o.customer, sum(o.amount) AS s FROM orders o JOIN customers c \
         ON o.customer = c.name WHERE c.city = 'Paris' GROUP BY o.customer",
    )
    .unwrap();
    let orders = p.inputs.iter().find(|i| i.input == "orders").unwrap();
    assert_eq!(
        orders.columns,
        vec![(1, ColumnType::Any), (2, ColumnType::Number)]
    );
    let customers = p.inputs.iter().find(|i| i.input == "customers").unwrap();
    assert_eq!(
        customers.columns,
        vec![(0, ColumnType::Any), (1, ColumnType::Str)]
    );
    assert_eq!(p.outputs[0].columns, ["customer", "s"]);
    assert_eq!(p.outputs[0].key, [0]);
}

#[test]
fn keys_are_the_grouping_or_the_whole_row() {
    let key = |sql: &str| plan(sql).unwrap().outputs[0].key.clone();
    assert_eq!(
        key("SELECT count(*) AS n, customer FROM orders GROUP BY customer"),
        [1]
    );
    assert_eq!(
        key("SELECT customer || 'x' AS c, count(*) AS n FROM orders GROUP BY customer"),
        [0, 1]
    );
    assert_eq!(key("SELECT id, note FROM orders"), [0, 1]);
    assert_eq!(key("SELECT count(*) AS n FROM orders"), [0]);
}

#[test]
fn declared_types_and_views() {
    let job = SqlJob::parse(
        "CREATE TABLE orders (amount BIGINT, note TEXT);
         CREATE VIEW per AS SELECT customer, count(*) AS n FROM orders GROUP BY customer;
         CREATE VIEW big AS SELECT customer FROM per WHERE n > 3",
        "q.sql",
    )
    .unwrap();
    assert_eq!(job.input_names(), ["orders"]);
    let s = schemas(&job, &[ORDERS]);
    let params = Params::resolve(&job.spec(), &[]).unwrap();
    let p = job.plan(&params, &s, &crate::job::NoData).unwrap();
    let names: Vec<&str> = p.outputs.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["per", "big"]);
    assert_eq!(p.outputs[0].key, [0]);
    let text = job.explain(&s, &params, &crate::job::NoData).unwrap();
    assert!(text.contains("shared per (computed once)"), "{text}");
    assert!(text.contains("read per"), "{text}");
    // A declared column the input does not have.
    let job = SqlJob::parse(
        "CREATE TABLE orders (amout INT); SELECT id FROM orders",
        "q.sql",
    )
    .unwrap();
    let params = Params::resolve(&job.spec(), &[]).unwrap();
    let e = job
        .explain(&schemas(&job, &[ORDERS]), &params, &crate::job::NoData)
        .unwrap_err();
    let crate::job::PlanError::Sql(e) = e else {
        panic!("{e}")
    };
    assert_eq!(e.kind, SqlErrorKind::UnknownColumn);
    assert!(
        e.to_string()
            .contains("q.sql:1:22: table orders declares column amout"),
        "{e}"
    );
}

#[test]
fn the_identity_is_the_normalized_text() {
    let a = SqlJob::parse("select  id\nfrom orders -- a comment", "a").unwrap();
    let b = SqlJob::parse("SELECT id FROM orders", "b").unwrap();
    assert_eq!(a.normalized(), b.normalized());
    let job = SqlJob::from_params(&[(QUERY_PARAM.into(), a.normalized().into())]).unwrap();
    assert_eq!(job.normalized(), a.normalized());
    // A different query cannot be planned under this job's spec.
    let params = Params::resolve(&a.spec(), &[(QUERY_PARAM.into(), "SELECT 1".into())]).unwrap();
    let s = schemas(&a, &[ORDERS]);
    assert!(matches!(
        a.plan(&params, &s, &crate::job::NoData),
        Err(PlanError::BadParam { .. })
    ));
}

#[test]
fn errors_have_kinds_and_positions() {
    let cases: &[(&str, SqlErrorKind, (u64, u64))] = &[
        (
            "SELECT nme FROM customers",
            SqlErrorKind::UnknownColumn,
            (1, 8),
        ),
        (
            "SELECT id FROM orders o, orders p",
            SqlErrorKind::UnknownColumn,
            (1, 8),
        ),
        (
            "SELECT id FROM orders\nWHERE upper(note) + 1 > 2",
            SqlErrorKind::Type,
            (2, 7),
        ),
        (
            "SELECT note, count(*) AS n FROM orders GROUP BY customer",
            SqlErrorKind::Invalid,
            (1, 8),
        ),
        (
            "SELECT id FROM orders WHERE count(*) > 1",
            SqlErrorKind::Invalid,
            (1, 29),
        ),
        (
            "SELECT id FROM orders WHERE id IN (SELECT 1)",
            SqlErrorKind::Unsupported,
            (1, 36),
        ),
        (
            "SELECT id FROM orders WHERE id = 1 OR id IN (SELECT id FROM orders)",
            SqlErrorKind::Unsupported,
            (1, 39),
        ),
        (
            "SELECT id, (SELECT id FROM orders) AS x FROM orders",
            SqlErrorKind::Unsupported,
            (1, 13),
        ),
        (
            "SELECT id FROM orders LIMIT 2",
            SqlErrorKind::Invalid,
            (1, 1),
        ),
        ("SELECT id, id FROM orders", SqlErrorKind::Invalid, (1, 1)),
        (
            "SELECT o.id FROM orders o LEFT JOIN customers c ON o.id > 3",
            SqlErrorKind::Unsupported,
            (1, 37),
        ),
    ];
    for (sql, kind, (line, column)) in cases {
        let e = error(sql);
        assert_eq!(e.kind, *kind, "{sql}: {e}");
        assert_eq!((e.pos.line, e.pos.column), (*line, *column), "{sql}: {e}");
    }
    assert!(
        error("SELECT id FROM orders o, orders p")
            .message
            .contains("ambiguous")
    );
    let syntax = SqlJob::parse("SELECT FROM WHERE", "q.sql").unwrap_err();
    assert_eq!(syntax.kind, SqlErrorKind::Syntax);
    assert!(syntax.pos.is_known(), "{syntax}");
    let mixed = SqlJob::parse(
        "SELECT 1 FROM orders; CREATE VIEW v AS SELECT 2 FROM orders",
        "q.sql",
    )
    .unwrap_err();
    assert_eq!(mixed.kind, SqlErrorKind::Invalid);
}

#[test]
fn unknown_tables_are_named_against_the_given_inputs() {
    let job = SqlJob::parse("SELECT id\nFROM ordrs", "q.sql").unwrap();
    let e = job.check_inputs(&["orders"]).unwrap_err();
    assert_eq!(e.kind, SqlErrorKind::UnknownTable);
    assert_eq!((e.pos.line, e.pos.column), (2, 6));
    assert!(e.message.contains("did you mean orders?"), "{e}");
    let cte = SqlJob::parse(
        "WITH t AS (SELECT id FROM orders) SELECT id FROM t",
        "q.sql",
    )
    .unwrap();
    assert_eq!(cte.input_names(), ["orders"]);
    cte.check_inputs(&["orders"]).unwrap();
}

#[test]
fn date_uses_type_inferred_columns() {
    let p = plan(
        "SELECT id FROM orders WHERE note < DATE '2024-01-01' \
         AND note + INTERVAL '1' DAY > TIMESTAMP '2024-01-01 00:00' AND customer >= DATE '2020-01-01' \
         AND amount = '2020-01-01'",
    )
    .unwrap();
    let orders = p.inputs.iter().find(|i| i.input == "orders").unwrap();
    // Used as a date and as a timestamp: read as timestamps; as a date only:
    // dates; compared with date-like text only: still inferred.
    assert_eq!(
        orders.columns,
        vec![
            (0, ColumnType::Any),
            (1, ColumnType::Date),
            (2, ColumnType::Any),
            (3, ColumnType::Timestamp)
        ]
    );
    let e = error("SELECT id FROM orders WHERE note + INTERVAL '1 fortnight' > DATE '2024-01-01'");
    assert_eq!(e.kind, SqlErrorKind::Invalid);
    let e = error("SELECT id FROM orders WHERE amount + 1 > 2 AND amount < DATE '2024-01-01'");
    assert_eq!(e.kind, SqlErrorKind::Type);
}

/// Large inputs of which every sampled key is `hot` or unique; the
/// decisions told, kept.
struct Skewed {
    hot: Value,
    decisions: std::cell::RefCell<Vec<String>>,
}

impl DataContext for Skewed {
    fn input_bytes(&self, _: &str) -> Option<u64> {
        Some(1 << 30)
    }
    fn sample_keys(
        &self,
        _: &str,
        columns: &[(usize, ColumnType)],
        _: f64,
    ) -> Option<crate::job::KeySample> {
        let mut sample = crate::job::KeySample::default();
        for i in 0..1000 {
            let v = if i % 2 == 0 {
                self.hot.clone()
            } else {
                Value::Int(i)
            };
            *sample.counts.entry(vec![v; columns.len()]).or_default() += 1;
            sample.rows += 1;
        }
        Some(sample)
    }
    fn decide(&self, note: String) {
        self.decisions.borrow_mut().push(note);
    }
}

/// Skew is chosen where the key is a large input's columns, unchanged (the
/// left side of a join, a grouping over it), never through a join's right
/// side or a computed key; `strategy=` overrides `auto`.
#[test]
fn hot_keys_are_sampled_where_the_key_is_an_input_column() {
    let sql = "SELECT c.city, o.customer, count(*) AS n FROM orders o \
               JOIN customers c ON o.customer = c.name GROUP BY c.city, o.customer; \
               ";
    let job = SqlJob::parse(sql, "q.sql").unwrap();
    let s = schemas(&job, &[ORDERS, CUSTOMERS]);
    let explain = |given: &[(&str, &str)]| {
        let data = Skewed {
            hot: Value::Str("c7".into()),
            decisions: Default::default(),
        };
        let given: Vec<(String, String)> = given
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let params = Params::resolve(&job.spec(), &given).unwrap();
        let text = job.explain(&s, &params, &data).unwrap();
        (text, data.decisions.take())
    };
    let (text, decisions) = explain(&[]);
    assert!(text.contains("(strategy skew: 1 hot keys)"), "{text}");
    assert!(decisions[0].contains("1 hot keys at >= 1% of 1000 sampled rows: c7 (50.0%)"));
    // The grouping's key holds c.city, from the join's right side.
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    let (text, decisions) = explain(&[("strategy", "shuffle")]);
    assert!(text.contains("(strategy shuffle)"), "{text}");
    assert_eq!(
        decisions,
        ["sql join orders with customers: strategy shuffle (asked)"]
    );
    let grouped = SqlJob::parse(
        "SELECT customer, lower(note) AS n, count(*) AS c FROM orders GROUP BY customer, lower(note)",
        "q.sql",
    )
    .unwrap();
    let params = Params::resolve(&grouped.spec(), &[]).unwrap();
    let data = Skewed {
        hot: Value::Str("c7".into()),
        decisions: Default::default(),
    };
    let text = grouped
        .explain(&schemas(&grouped, &[ORDERS]), &params, &data)
        .unwrap();
    assert!(
        !text.contains("hot keys"),
        "a computed key is not sampled: {text}"
    );
    let by_input = SqlJob::parse(
        "SELECT customer, count(*) AS c FROM orders WHERE amount > 0 GROUP BY customer",
        "q.sql",
    )
    .unwrap();
    let text = by_input
        .explain(&schemas(&by_input, &[ORDERS]), &params, &data)
        .unwrap();
    assert!(text.contains("(1 hot keys in two phases)"), "{text}");
}
