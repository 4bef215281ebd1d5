//! SQL jobs through the real binary: every supported construct against
//! DuckDB's answer on the same files (1, 2 and 4 workers); SQL streamed
//! with SIGKILLs equal to the batch run and verified; a changed query
//! refused, reprocessed beside the old one and rolled back; errors with
//! their line and column, before any data is read; `kappa sql explain`.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use kappa::value::Value;

use crate::common::{Rng, World};
use crate::stream::{chunks, events, table_csv, users, wait_for_commit};

/// The Python with DuckDB that `.ci/run` installs (`KAPPA_TEST_PYTHON`), or
/// the one in `target/services/venv`; `None` (printed) when there is none,
/// a failure under `KAPPA_REQUIRE_SERVICES`.
fn duckdb_python() -> Option<String> {
    let candidates = std::env::var("KAPPA_TEST_PYTHON")
        .into_iter()
        .chain([format!(
            "{}/target/services/venv/bin/python",
            env!("CARGO_MANIFEST_DIR")
        )]);
    for python in candidates {
        let ok = Command::new(&python)
            .args(["-c", "import duckdb"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(python);
        }
    }
    let why = "no Python with duckdb: set KAPPA_TEST_PYTHON (.ci/run installs duckdb into \
               target/services/venv)";
    assert!(std::env::var("KAPPA_REQUIRE_SERVICES").is_err(), "{why}");
    eprintln!("SKIPPED the DuckDB comparison: {why}");
    None
}

/// Runs `query` in DuckDB over CSV `tables` (name, path); the rows as
/// kappa's values (null for NULL), sorted.
fn duckdb_rows(python: &str, query: &str, tables: &[(&str, &str)]) -> Vec<Vec<Value>> {
    const SCRIPT: &str = r#"
import datetime, decimal, duckdb, json, sys
con = duckdb.connect()
for spec in sys.argv[2:]:
    name, path = spec.split("=", 1)
    con.execute(f"CREATE TABLE {name} AS SELECT * FROM read_csv('{path}', header=true)")
rows = con.execute(sys.argv[1]).fetchall()
def cell(v):
    if v is None: return None
    if isinstance(v, bool): return "true" if v else "false"
    if isinstance(v, decimal.Decimal): return float(v)
    if isinstance(v, datetime.datetime):
        t = v.isoformat(sep=" ")
        return t.rstrip("0") if "." in t else t
    if isinstance(v, (int, float, str)): return v
    return str(v)
print(json.dumps([[cell(v) for v in r] for r in rows]))
"#;
    let mut cmd = Command::new(python);
    cmd.args(["-c", SCRIPT, query]);
    cmd.args(tables.iter().map(|(n, p)| format!("{n}={p}")));
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "duckdb failed on {query}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Vec<serde_json::Value>> = serde_json::from_slice(&out.stdout).unwrap();
    let mut rows: Vec<Vec<Value>> = rows
        .into_iter()
        .map(|r| r.into_iter().map(json_value).collect())
        .collect();
    rows.sort();
    rows
}

fn json_value(v: serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::float(n.as_f64().unwrap()),
        },
        serde_json::Value::String(s) => Value::str(&s),
        other => Value::str(&other.to_string()),
    }
}

/// The rows of a kappa output file, typed as kappa writes them, sorted.
fn kappa_rows(csv: &str) -> Vec<Vec<Value>> {
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let mut rows: Vec<Vec<Value>> = reader
        .records()
        .map(|r| {
            r.unwrap()
                .iter()
                .map(|f| {
                    if f.is_empty() {
                        Value::Null
                    } else {
                        Value::infer(f)
                    }
                })
                .collect()
        })
        .collect();
    rows.sort();
    rows
}

/// Equal rows, numbers equal by value within a relative 1e-9 (DuckDB and
/// kappa may round a float sum's last bit differently).
fn same_rows(a: &[Vec<Value>], b: &[Vec<Value>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(u, v)| match (u.as_f64(), v.as_f64()) {
                        (Some(p), Some(q)) => (p - q).abs() <= 1e-9 * p.abs().max(q.abs()).max(1.0),
                        _ => u == v,
                    })
        })
}

/// The rows only one side has (a few), for a failure message.
fn difference(kappa: &[Vec<Value>], duckdb: &[Vec<Value>]) -> String {
    let only = |a: &[Vec<Value>], b: &[Vec<Value>]| -> Vec<String> {
        a.iter()
            .filter(|r| {
                !b.iter()
                    .any(|s| same_rows(std::slice::from_ref(*r), std::slice::from_ref(s)))
            })
            .take(5)
            .map(|r| format!("{r:?}"))
            .collect()
    };
    format!(
        "{} rows from kappa, {} from DuckDB\nonly kappa: {:#?}\nonly DuckDB: {:#?}",
        kappa.len(),
        duckdb.len(),
        only(kappa, duckdb),
        only(duckdb, kappa)
    )
}

/// Orders (`id,customer,amount,price,status,note,placed,stamp,rush`: a date,
/// a timestamp `stamp` with fractions of seconds and a boolean, each sometimes
/// null) with nulls and repeats, and customers (`name,city,tier`), one of
/// them without orders and some orders without a customer.
fn tables(w: &World) -> (String, String) {
    let mut rng = Rng(0x5eed_5a1e);
    let mut when = Rng(0xda7e);
    let mut orders = String::from("id,customer,amount,price,status,note,placed,stamp,rush\n");
    for id in 1..=400 {
        let customer = if rng.below(20) == 0 {
            String::new()
        } else {
            format!("c{}", rng.below(30))
        };
        let amount = if rng.below(10) == 0 {
            String::new()
        } else {
            (rng.below(200) as i64 - 20).to_string()
        };
        let price = format!("{}.{:02}", rng.below(100), rng.below(100));
        let status = ["paid", "open", "void"][rng.below(3) as usize];
        let note = ["rush order", "gift", "", "50% off", "Gift wrap"][rng.below(5) as usize];
        let (placed, stamp, rush) = if when.below(15) == 0 {
            (String::new(), String::new(), String::new())
        } else {
            let day = 1 + when.below(28);
            let month = 1 + when.below(3);
            let fraction = ["", ".5", ".125"][when.below(3) as usize];
            (
                format!("2024-{month:02}-{day:02}"),
                format!(
                    "2024-{month:02}-{day:02} {:02}:{:02}:{:02}{fraction}",
                    when.below(24),
                    when.below(60),
                    when.below(60)
                ),
                ["true", "false"][when.below(2) as usize].to_string(),
            )
        };
        orders.push_str(&format!(
            "{id},{customer},{amount},{price},{status},{note},{placed},{stamp},{rush}\n"
        ));
    }
    let mut customers = String::from("name,city,tier\n");
    for c in 0..32 {
        let city = ["Paris", "Lyon", "Nice", ""][rng.below(4) as usize];
        customers.push_str(&format!("c{c},{city},{}\n", rng.below(3)));
    }
    (
        w.write("orders.csv", &orders),
        w.write("customers.csv", &customers),
    )
}

/// Each query exercises constructs of the documented subset; DuckDB runs
/// the same text.
const QUERIES: &[&str] = &[
    // Projection, arithmetic, WHERE with three-valued logic.
    "SELECT id, amount * 2 + 1 AS a, price - amount AS b, -amount AS neg FROM orders WHERE amount > 10 AND status <> 'void'",
    "SELECT id FROM orders WHERE amount IS NULL OR NOT (status = 'paid')",
    "SELECT id, amount % 7 AS m FROM orders WHERE amount BETWEEN 5 AND 50 AND id NOT IN (3, 5, 8)",
    // CASE, COALESCE, NULLIF, CAST, string functions, LIKE.
    "SELECT id, CASE WHEN amount > 100 THEN 'big' WHEN amount > 0 THEN 'small' ELSE 'none' END AS size, \
     CASE status WHEN 'paid' THEN 1 ELSE 0 END AS paid, COALESCE(amount, -1) AS amt, NULLIF(status, 'open') AS st \
     FROM orders",
    "SELECT id, upper(customer) AS u, lower(note) AS l, length(note) AS n, substring(note FROM 2 FOR 3) AS s, \
     trim(note) AS t, customer || '-' || status AS tag, CAST(amount AS DOUBLE) / 4 AS q, CAST(price AS INTEGER) AS p \
     FROM orders WHERE note LIKE '%ft%' OR note LIKE 'rush%' OR note ILIKE 'gift%'",
    "SELECT id, round(price, 1) AS r, abs(amount) AS a, floor(price) AS f, ceil(price) AS c, greatest(amount, 50) AS g \
     FROM orders WHERE note NOT LIKE '%\\%%' ESCAPE '\\'",
    // GROUP BY with every aggregate, HAVING, positions and aliases.
    "SELECT customer, count(*) AS n, count(amount) AS na, sum(amount) AS s, avg(amount) AS a, min(price) AS lo, \
     max(status) AS hi, count(DISTINCT status) AS ds FROM orders GROUP BY customer",
    "SELECT status, customer IS NULL AS anon, sum(price) AS total FROM orders GROUP BY status, anon HAVING count(*) > 5",
    "SELECT amount % 3 AS bucket, count(*) AS n FROM orders WHERE amount IS NOT NULL GROUP BY 1",
    "SELECT upper(status) AS s, sum(amount) * 2 AS twice, max(amount) - min(amount) AS spread FROM orders GROUP BY upper(status)",
    // Global aggregates, also over no rows.
    "SELECT count(*) AS n, sum(amount) AS s, avg(price) AS a, min(id) AS lo FROM orders",
    "SELECT count(*) AS n, count(amount) AS na, sum(amount) AS s, max(id) AS hi FROM orders WHERE id < 0",
    // DISTINCT and set operations.
    "SELECT DISTINCT status, customer FROM orders",
    "SELECT customer FROM orders WHERE status = 'paid' UNION SELECT name FROM customers WHERE tier = 2",
    "SELECT customer FROM orders WHERE status = 'paid' UNION ALL SELECT name FROM customers",
    "SELECT customer FROM orders EXCEPT SELECT name FROM customers WHERE city = 'Paris'",
    "SELECT customer FROM orders INTERSECT SELECT name FROM customers",
    "SELECT status FROM orders EXCEPT ALL SELECT status FROM orders WHERE amount > 100",
    "SELECT status FROM orders INTERSECT ALL SELECT status FROM orders WHERE amount > 150",
    // Joins: inner, left, right, full, USING, comma joins, residual conditions.
    "SELECT o.id, c.city FROM orders o JOIN customers c ON o.customer = c.name AND o.amount > c.tier * 50",
    "SELECT o.id, o.customer, c.city, c.tier FROM orders o LEFT JOIN customers c ON o.customer = c.name",
    "SELECT o.id, c.name FROM orders o RIGHT JOIN customers c ON o.customer = c.name AND o.status = 'void'",
    "SELECT o.id, c.name, c.city FROM orders o FULL OUTER JOIN customers c ON o.customer = c.name",
    "SELECT id, city FROM orders JOIN customers ON customer = name WHERE city = 'Lyon' AND amount IS NOT NULL",
    "SELECT o.id, c.city FROM orders o, customers c WHERE o.customer = c.name AND c.tier > 0 AND o.price > 50",
    "SELECT a.id AS x, b.id AS y FROM orders a, orders b WHERE a.customer = b.customer AND a.id < b.id AND a.amount = b.amount",
    "SELECT c.city, count(*) AS n, sum(o.amount) AS s FROM orders o JOIN customers c ON o.customer = c.name GROUP BY c.city",
    // Subqueries in FROM and CTEs.
    "SELECT t.customer, t.n FROM (SELECT customer, count(*) AS n FROM orders GROUP BY customer) AS t WHERE t.n > 12",
    "WITH paid AS (SELECT customer, sum(amount) AS s FROM orders WHERE status = 'paid' GROUP BY customer), \
     big AS (SELECT customer FROM paid WHERE s > 300) \
     SELECT p.customer, p.s, c.city FROM paid p JOIN big b ON p.customer = b.customer LEFT JOIN customers c ON c.name = p.customer",
    // ORDER BY ... LIMIT (top-k), with OFFSET and NULLS placement.
    "SELECT id, amount FROM orders ORDER BY amount DESC, id LIMIT 7",
    "SELECT id, amount FROM orders ORDER BY amount NULLS FIRST, id LIMIT 5 OFFSET 3",
    "SELECT customer, sum(amount) AS s FROM orders WHERE customer IS NOT NULL GROUP BY customer ORDER BY s DESC, customer LIMIT 3",
    // ... by columns the select list does not name.
    "SELECT customer, status FROM orders WHERE amount IS NOT NULL ORDER BY amount DESC, id LIMIT 4",
    "SELECT customer FROM orders GROUP BY customer ORDER BY count(*) DESC, customer LIMIT 3",
    // EXISTS and IN subqueries (semi and anti joins), correlated or not,
    // with residual conditions; NOT IN with nulls in the subquery or none.
    "SELECT id FROM orders o WHERE EXISTS (SELECT 1 FROM customers c WHERE c.name = o.customer AND c.tier > 0)",
    "SELECT id, customer FROM orders o WHERE NOT EXISTS (SELECT * FROM customers c WHERE c.name = o.customer AND c.city = 'Paris')",
    "SELECT id FROM orders WHERE customer IN (SELECT name FROM customers WHERE city = 'Lyon') AND amount > 0",
    "SELECT id FROM orders WHERE customer NOT IN (SELECT name FROM customers WHERE tier = 1)",
    "SELECT id FROM orders WHERE amount NOT IN (SELECT amount FROM orders WHERE status = 'void')",
    "SELECT id, amount FROM orders WHERE amount NOT IN (SELECT amount FROM orders WHERE id < 0)",
    "SELECT id FROM orders WHERE amount NOT IN (SELECT amount FROM orders WHERE amount > 170)",
    "SELECT a.id FROM orders a WHERE EXISTS (SELECT 1 FROM orders b WHERE b.customer = a.customer AND b.id <> a.id AND b.amount > a.amount + 100)",
    "SELECT a.id FROM orders a WHERE a.status = 'paid' AND NOT EXISTS (SELECT 1 FROM orders b WHERE b.customer = a.customer AND b.id <> a.id AND b.price > a.price)",
    "SELECT id FROM orders WHERE upper(customer) IN (SELECT upper(customer) FROM orders GROUP BY customer HAVING count(*) > 15)",
    "SELECT name FROM customers WHERE EXISTS (SELECT 1 FROM orders WHERE amount > 175) AND NOT EXISTS (SELECT 1 FROM orders WHERE amount > 1000)",
    "SELECT id FROM orders o WHERE status IN (SELECT p.status FROM orders p WHERE p.customer = o.customer AND p.amount > 150)",
    // Scalar subqueries: uncorrelated (joined to every row), correlated
    // (grouped by the correlation), a count over no rows, in HAVING.
    "SELECT id, (SELECT max(amount) FROM orders) - amount AS gap FROM orders WHERE price > (SELECT avg(price) FROM orders)",
    "SELECT id FROM orders o WHERE amount > (SELECT avg(amount) * 1.5 FROM orders p WHERE p.customer = o.customer)",
    "SELECT name, (SELECT count(*) FROM orders o WHERE o.customer = c.name AND o.status = 'void') AS voids FROM customers c",
    "SELECT customer, sum(amount) AS s FROM orders GROUP BY customer HAVING sum(amount) > (SELECT avg(amount) * 25 FROM orders)",
    "SELECT id FROM orders WHERE amount = (SELECT amount FROM orders WHERE amount IS NOT NULL ORDER BY amount DESC LIMIT 1)",
    // Top-N per group: ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...)
    // filtered outside, or every row numbered.
    "SELECT customer, id, rn FROM (SELECT customer, id, ROW_NUMBER() OVER (PARTITION BY customer ORDER BY amount DESC NULLS LAST, id) AS rn FROM orders) t WHERE rn <= 2",
    "SELECT * FROM (SELECT status, id, price, row_number() OVER (PARTITION BY status, customer IS NULL ORDER BY price * 2, id DESC) AS r FROM orders) AS x WHERE r < 3 AND price > 10",
    "SELECT id, ROW_NUMBER() OVER (ORDER BY price DESC, id) AS n FROM orders WHERE status = 'void'",
    // Dates, timestamps and booleans, typed by their use: DATE/TIMESTAMP
    // literals, text compared with dates, INTERVAL arithmetic (months clamp
    // to the month's end), EXTRACT, date_trunc, CAST, boolean conditions.
    "SELECT id, placed FROM orders WHERE placed >= DATE '2024-02-10' AND placed < '2024-03-01'",
    "SELECT id, stamp + INTERVAL '1' MONTH AS later, stamp - INTERVAL '90' MINUTE AS earlier,      placed + INTERVAL '1 day 12 hours' AS after FROM orders WHERE stamp < TIMESTAMP '2024-01-20 12:00:00'",
    "SELECT extract(month FROM stamp) AS m, extract(dow FROM stamp) AS dow, extract(hour FROM stamp) AS h,      count(*) AS n, min(stamp) AS first, max(stamp) AS last FROM orders GROUP BY 1, 2, 3",
    "SELECT date_trunc('week', stamp) AS week, rush, count(*) AS n, sum(price) AS s FROM orders GROUP BY 1, 2",
    "SELECT id, CAST(stamp AS DATE) AS day, CAST(placed AS TIMESTAMP) AS midnight,      CAST(rush AS INTEGER) AS r FROM orders WHERE rush AND stamp BETWEEN '2024-02-01' AND '2024-02-15 23:00'",
    "SELECT id FROM orders WHERE NOT rush OR rush IS NULL AND extract(year FROM placed) = 2024",
    "SELECT o.id, p.id AS next FROM orders o JOIN orders p ON o.customer = p.customer      AND p.stamp BETWEEN o.stamp AND o.stamp + INTERVAL '2' DAY AND p.id <> o.id",
    "SELECT customer, max(stamp) - INTERVAL '1' HOUR AS cutoff FROM orders GROUP BY customer",
    // Time-bounded joins (the interval join): timestamps, the left side
    // bounded by the right, dates without a key, integers in a WHERE.
    "SELECT o.id, p.id AS before FROM orders o JOIN orders p ON o.customer = p.customer      AND o.stamp > p.stamp - INTERVAL '3' DAY AND o.stamp <= p.stamp",
    "SELECT o.id, count(*) AS n FROM orders o JOIN orders p      ON p.placed BETWEEN o.placed - INTERVAL '2' DAY AND o.placed + INTERVAL '1' DAY GROUP BY o.id",
    "SELECT a.id, b.id AS near FROM orders a, orders b      WHERE b.amount >= a.amount - 1 AND b.amount < a.amount + 2 AND a.id <= 80 AND b.status = a.status",
    // Floats under integer bounds: joined by key and filtered, not banded.
    "SELECT a.id, b.id AS near FROM orders a JOIN orders b ON a.customer = b.customer      AND b.price >= a.price - 1 AND b.price < a.price + 2",
];

/// Queries DuckDB has no syntax for (the window table functions), each
/// with a DuckDB query that computes the same rows.
const TRANSLATED: &[(&str, &str)] = &[
    (
        "SELECT window_start, window_end, status, count(*) AS n, sum(price) AS s \
         FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(stamp), INTERVAL '6' HOUR)) \
         GROUP BY window_start, window_end, status",
        "SELECT time_bucket(INTERVAL '6 hours', stamp) AS window_start, \
         time_bucket(INTERVAL '6 hours', stamp) + INTERVAL '6 hours' AS window_end, status, \
         count(*) AS n, sum(price) AS s FROM orders GROUP BY 1, 2, 3",
    ),
    (
        "SELECT window_start, window_end, count(*) AS n, max(id) AS last \
         FROM HOP(TABLE orders, DESCRIPTOR(stamp), INTERVAL '1' DAY, INTERVAL '3' DAY) \
         WHERE stamp IS NOT NULL GROUP BY window_start, window_end",
        "SELECT ws AS window_start, ws + INTERVAL '3 days' AS window_end, count(*) AS n, max(id) AS last \
         FROM (SELECT time_bucket(INTERVAL '1 day', stamp) - to_days(CAST(k AS INTEGER)) AS ws, id, stamp \
               FROM orders, range(3) r(k) WHERE stamp IS NOT NULL) \
         WHERE stamp < ws + INTERVAL '3 days' GROUP BY 1, 2",
    ),
    (
        "SELECT w.window_start, c.city, count(*) AS n \
         FROM TABLE(TUMBLE(orders, DESCRIPTOR(stamp), INTERVAL '1' DAY)) AS w \
         JOIN customers c ON w.customer = c.name GROUP BY w.window_start, c.city",
        "SELECT time_bucket(INTERVAL '1 day', o.stamp) AS window_start, c.city, count(*) AS n \
         FROM orders o JOIN customers c ON o.customer = c.name GROUP BY 1, 2",
    ),
    (
        "SELECT customer, window_start, window_end, count(*) AS n, sum(price) AS s \
         FROM TABLE(SESSION(TABLE orders PARTITION BY customer, DESCRIPTOR(stamp), INTERVAL '1' DAY)) \
         WHERE stamp IS NOT NULL GROUP BY customer, window_start, window_end",
        "WITH p AS (SELECT *, lag(stamp) OVER (PARTITION BY customer ORDER BY stamp) AS prev \
                    FROM orders WHERE stamp IS NOT NULL), \
         s AS (SELECT *, sum(CASE WHEN prev IS NULL OR stamp - prev > INTERVAL '1 day' THEN 1 ELSE 0 END) \
                    OVER (PARTITION BY customer ORDER BY stamp) AS sid FROM p) \
         SELECT customer, min(stamp) AS window_start, max(stamp) + INTERVAL '1 day' AS window_end, \
         count(*) AS n, sum(price) AS s FROM s GROUP BY customer, sid",
    ),
    // The temporal join (FOR SYSTEM_TIME AS OF) is DuckDB's ASOF JOIN:
    // timestamps, inner, more joins after it; integers, LEFT, nulls.
    (
        "CREATE TABLE orders (stamp TIMESTAMP, WATERMARK FOR stamp AS stamp - INTERVAL '100' DAY); \
         SELECT o.id, p.id AS prev, p.stamp AS at, c.city FROM orders o \
         JOIN orders FOR SYSTEM_TIME AS OF o.stamp AS p ON o.customer = p.customer AND o.status = p.status \
         JOIN customers c ON c.name = p.customer",
        "SELECT o.id, p.id AS prev, p.stamp AS at, c.city FROM orders o \
         ASOF JOIN orders p ON o.customer = p.customer AND o.status = p.status AND o.stamp >= p.stamp \
         JOIN customers c ON c.name = p.customer",
    ),
    (
        "CREATE TABLE orders (id BIGINT, WATERMARK FOR id AS id - 1000); \
         SELECT o.id, o.amount, p.id AS version, p.price FROM orders o \
         LEFT JOIN orders FOR SYSTEM_TIME AS OF o.amount AS p ON o.customer = p.customer",
        "SELECT o.id, o.amount, p.id AS version, p.price FROM orders o \
         ASOF LEFT JOIN orders p ON o.customer = p.customer AND o.amount >= p.id",
    ),
];

#[test]
fn sql_matches_duckdb_in_batch() {
    let Some(python) = duckdb_python() else {
        return;
    };
    let w = World::new();
    let (orders, customers) = tables(&w);
    let same_text = QUERIES.iter().map(|q| (*q, *q));
    for (q, (query, duckdb_query)) in same_text.chain(TRANSLATED.iter().copied()).enumerate() {
        let expected = duckdb_rows(
            &python,
            duckdb_query,
            &[("orders", &orders), ("customers", &customers)],
        );
        for workers in ["1", "2", "4"] {
            let out = w.path(&format!("out-{q}-{workers}"));
            let mut args = vec!["run", "--sql-text", query, "--workers", workers];
            let out_s = out.display().to_string();
            args.extend(["-o", &out_s]);
            let input_o = format!("orders={orders}");
            let input_c = format!("customers={customers}");
            if query.contains("orders") {
                args.extend(["-i", &input_o]);
            }
            if query.contains("customers") {
                args.extend(["-i", &input_c]);
            }
            w.ok(&args);
            let got = kappa_rows(&std::fs::read_to_string(out.join("result.csv")).unwrap());
            assert!(
                same_rows(&got, &expected),
                "query {q} on {workers} workers: {query}\n{}",
                difference(&got, &expected)
            );
        }
    }
}

/// The TPC-H queries of `benches/sql/tpch/` (the benchmark's, with dates
/// as ISO text) on tables tpchgen-cli generates at scale factor 0.01 give
/// DuckDB's answers, on 2 and 3 workers.
#[test]
fn tpch_queries_match_duckdb() {
    let Some(python) = duckdb_python() else {
        return;
    };
    let generator = std::path::Path::new(&python).with_file_name("tpchgen-cli");
    if !generator.exists() {
        let why = format!("no {} (.ci/run installs tpchgen-cli)", generator.display());
        assert!(std::env::var("KAPPA_REQUIRE_SERVICES").is_err(), "{why}");
        eprintln!("SKIPPED the TPC-H comparison: {why}");
        return;
    }
    let w = World::new();
    let data = w.path("tpch");
    let made = Command::new(&generator)
        .args([
            "csv",
            "-s",
            "0.01",
            &format!("--output-dir={}", data.display()),
        ])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/sql/tpch");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 15, "{files:?}");
    let tables = [
        "lineitem", "orders", "customer", "part", "partsupp", "supplier", "nation", "region",
    ];
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let body: String = text
            .lines()
            .filter(|l| !l.starts_with("--"))
            .collect::<Vec<_>>()
            .join("\n");
        let words: Vec<&str> = body
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .collect();
        let used: Vec<(&str, String)> = tables
            .iter()
            .filter(|t| words.contains(t))
            .map(|t| (*t, format!("{}/{t}.csv", data.display())))
            .collect();
        let specs: Vec<(&str, &str)> = used.iter().map(|(t, p)| (*t, p.as_str())).collect();
        // A CSV file cannot tell the text '13' from the number 13: type
        // DuckDB's values as kappa reads its output back.
        let mut expected: Vec<Vec<Value>> = duckdb_rows(&python, &body, &specs)
            .into_iter()
            .map(|row| {
                row.into_iter()
                    .map(|v| match v {
                        Value::Str(s) => Value::infer(&s),
                        other => other,
                    })
                    .collect()
            })
            .collect();
        expected.sort();
        for workers in ["2", "3"] {
            let out = w.path(&format!("tpch-out-{workers}"));
            let (file_s, out_s) = (file.display().to_string(), out.display().to_string());
            let mut args = vec![
                "run",
                "--sql",
                &file_s,
                "--workers",
                workers,
                "-o",
                &out_s,
                "--overwrite",
            ];
            let inputs: Vec<String> = used.iter().map(|(t, p)| format!("{t}={p}")).collect();
            for i in &inputs {
                args.extend(["-i", i]);
            }
            w.ok(&args);
            let got = kappa_rows(&std::fs::read_to_string(out.join("result.csv")).unwrap());
            assert!(
                same_rows(&got, &expected),
                "{} on {workers} workers\n{}",
                file.display(),
                difference(&got, &expected)
            );
        }
    }
}

/// SQL scripts streamed: each is one output, renamed by `--table`.
const STREAMED: &[(&str, &str)] = &[
    (
        "per_user",
        "SELECT user_id, count(*) AS n, sum(amount) AS s, max(ts) AS last, count(DISTINCT page) AS pages \
         FROM events GROUP BY user_id",
    ),
    (
        "by_country",
        "SELECT u.country, e.page, count(*) AS views, avg(e.amount) AS mean \
         FROM events e JOIN users u ON e.user_id = u.user_id GROUP BY u.country, e.page",
    ),
    (
        "unmatched",
        "SELECT e.ts, e.user_id, u.country FROM events e LEFT JOIN users u ON e.user_id = u.user_id \
         WHERE e.amount IS NULL OR e.amount > 450",
    ),
    (
        "top_spend",
        "SELECT user_id, sum(amount) AS s FROM events GROUP BY user_id ORDER BY s DESC, user_id LIMIT 5",
    ),
    (
        "above_own_mean",
        "SELECT e.ts, e.user_id, e.amount FROM events e \
         WHERE e.amount > (SELECT avg(f.amount) * 1.5 FROM events f WHERE f.user_id = e.user_id) \
         AND EXISTS (SELECT 1 FROM users u WHERE u.user_id = e.user_id AND u.country <> 'jp')",
    ),
    (
        "outside_fr",
        "SELECT page, count(*) AS n FROM events \
         WHERE user_id NOT IN (SELECT user_id FROM users WHERE country = 'fr') GROUP BY page",
    ),
    (
        "latest_per_user",
        "SELECT user_id, page, ts, rn FROM (SELECT user_id, page, ts, \
         ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts DESC, page) AS rn FROM events) AS r \
         WHERE rn <= 3",
    ),
    (
        "followed_within",
        "SELECT a.user_id, count(*) AS n, max(b.ts - a.ts) AS longest FROM events a JOIN events b \
         ON a.user_id = b.user_id AND b.ts > a.ts AND b.ts <= a.ts + 120 GROUP BY a.user_id",
    ),
    (
        "per_window",
        "WITH e AS (SELECT page, user_id, to_timestamp(ts) AS t FROM events) \
         SELECT window_start, window_end, page, count(*) AS views, count(DISTINCT user_id) AS people \
         FROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(t), INTERVAL '5' MINUTE)) \
         GROUP BY window_start, window_end, page",
    ),
    (
        "hopping",
        "WITH e AS (SELECT user_id, amount, to_timestamp(ts) AS t FROM events) \
         SELECT window_start, user_id, sum(amount) AS s, count(*) AS n \
         FROM TABLE(HOP(TABLE e, DESCRIPTOR(t), INTERVAL '2' MINUTE, INTERVAL '10' MINUTE)) \
         GROUP BY window_start, user_id",
    ),
    (
        // The times never fall within a partition: nothing is dropped, and
        // windows close (and release their state) as the watermark rises.
        "closing_hop",
        "CREATE TABLE events (ts BIGINT, WATERMARK FOR ts AS ts - 60); \
         WITH e AS (SELECT user_id, amount, to_timestamp(ts) AS t FROM events) \
         SELECT window_end, user_id, sum(amount) AS s, count(*) AS n \
         FROM TABLE(HOP(TABLE e, DESCRIPTOR(t), INTERVAL '2' MINUTE, INTERVAL '10' MINUTE)) \
         GROUP BY window_end, user_id",
    ),
    (
        // An interval join of a watermarked input with itself: rows are
        // released as the watermark rises.
        "next_visits",
        "CREATE TABLE events (ts BIGINT, WATERMARK FOR ts AS ts - 60); \
         SELECT a.user_id, a.ts, b.ts AS next, b.page FROM events a JOIN events b \
         ON a.user_id = b.user_id AND b.ts > a.ts AND b.ts <= a.ts + 120",
    ),
    (
        "sessions",
        "WITH e AS (SELECT user_id, page, to_timestamp(ts) AS t FROM events) \
         SELECT user_id, window_start, window_end, count(*) AS n, count(DISTINCT page) AS pages \
         FROM TABLE(SESSION(TABLE e PARTITION BY user_id, DESCRIPTOR(t), INTERVAL '3' MINUTE)) \
         GROUP BY user_id, window_start, window_end",
    ),
    (
        "totals",
        "SELECT count(*) AS n, sum(amount) AS s, count(DISTINCT user_id) AS people FROM events WHERE page <> '/'",
    ),
    (
        "as_of_previous",
        "CREATE TABLE events (ts BIGINT, WATERMARK FOR ts AS ts - 1000000000); \
         SELECT a.user_id, a.ts, a.page, b.page AS current, b.amount AS spent FROM events a \
         LEFT JOIN events FOR SYSTEM_TIME AS OF a.ts AS b ON a.user_id = b.user_id",
    ),
];

/// Whether `sql` reads `table` (names it after FROM or JOIN).
fn reads(sql: &str, table: &str) -> bool {
    sql.contains(&format!("FROM {table}")) || sql.contains(&format!("JOIN {table}"))
}

fn stream_sql_args(table: &str, sql: &str) -> Vec<String> {
    let mut args: Vec<String> = ["stream", "--quiet", "--sql-text", sql, "--table", table]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for table in ["events", "users"] {
        if reads(sql, table) {
            args.extend(["-i".into(), format!("{table}={table}")]);
        }
    }
    args
}

/// The SQL scripts streamed over randomly chunked topics, SIGKILLed and
/// restarted on 1–3 workers, end with exactly the batch run's rows, and
/// `table verify` agrees; then a changed query is refused by `stream`,
/// built beside the old one by `reprocess`, and rolled back.
#[test]
fn sql_streams_with_kills_equal_batch_and_reprocess() {
    let w = World::new();
    let mut rng = Rng(0x51_5eed);
    let events = events(&mut rng, 1200);
    let users = users(&mut rng);
    w.ok(&["log", "create", "events", "--partitions", "3"]);
    w.ok(&["log", "create", "users", "--partitions", "2", "--compact"]);
    let ev_file = w.write(
        "events.csv",
        &format!("user,user_id,ts,page,amount\n{}\n", events.join("\n")),
    );
    let mut latest: BTreeMap<String, String> = BTreeMap::new();
    for u in &users {
        latest.insert(u.split(',').next().unwrap().to_string(), u.clone());
    }
    let users_file = w.write(
        "users.csv",
        &format!(
            "user_id,country\n{}\n",
            latest.values().cloned().collect::<Vec<_>>().join("\n")
        ),
    );
    let mut plan: Vec<(&str, Vec<String>, &str)> = Vec::new();
    for c in chunks(&mut rng, &events, 5) {
        plan.push(("events", c, "user,user_id,ts,page,amount"));
    }
    for (i, c) in chunks(&mut rng, &users, 3).into_iter().enumerate() {
        plan.insert((2 * i + 1).min(plan.len()), ("users", c, "user_id,country"));
    }
    for (i, (topic, rows, header)) in plan.iter().enumerate() {
        let file = w.write(
            &format!("chunk{i}.csv"),
            &format!("{header}\n{}\n", rows.join("\n")),
        );
        let mut produce = vec!["log", "produce", topic, "--file", &file];
        if *topic == "users" {
            produce.extend(["--key", "user_id"]);
        }
        w.ok(&produce);
        for (table, sql) in STREAMED {
            let mut args = stream_sql_args(table, sql);
            args.extend([
                "--workers".into(),
                (1 + rng.below(3)).to_string(),
                "--max-batch".into(),
                (50 + rng.below(300)).to_string(),
            ]);
            let mut child = w.spawn_silent(&args);
            if i + 1 == plan.len() {
                wait_for_commit(&w, table);
            }
            std::thread::sleep(Duration::from_millis(rng.below(200)));
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
    for (table, sql) in STREAMED {
        let mut args = stream_sql_args(table, sql);
        args.push("--until-caught-up".into());
        w.ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let out = w.path(&format!("batch-{table}"));
        let mut run = vec![
            "run".to_string(),
            "--sql-text".into(),
            sql.to_string(),
            "-o".into(),
            out.display().to_string(),
        ];
        if reads(sql, "events") {
            run.extend(["-i".into(), format!("events={ev_file}")]);
        }
        if reads(sql, "users") {
            run.extend(["-i".into(), format!("users={users_file}")]);
        }
        w.ok(&run.iter().map(String::as_str).collect::<Vec<_>>());
        let batch = std::fs::read_to_string(out.join("result.csv")).unwrap();
        let table_text = table_csv(&w, table);
        assert_eq!(
            kappa_rows(&table_text),
            kappa_rows(&batch.replace('"', "")),
            "{table}: the streamed table differs from the batch run"
        );
        let verify = w.ok(&["table", "verify", table]);
        assert!(verify.contains(": identical ("), "{verify}");
    }
    // A changed query is a new version: refused by stream, built by reprocess.
    let (table, sql) = STREAMED[0];
    let changed = sql.replace("count(*) AS n", "count(*) AS n, min(ts) AS first");
    let err = w.fails(
        &stream_sql_args(table, &changed)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(err.contains("reprocess"), "{err}");
    let mut reprocess = stream_sql_args(table, &changed);
    reprocess[0] = "reprocess".into();
    reprocess.push("--until-caught-up".into());
    let out = w.ok(&reprocess.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.contains("swap"), "{out}");
    let text = table_csv(&w, table);
    assert!(text.starts_with("user_id,n,first,s,last,pages"), "{text}");
    let verify = w.ok(&["table", "verify", table]);
    assert!(verify.contains(": identical ("), "{verify}");
    let rolled = w.ok(&["table", "rollback", table, "--until-caught-up"]);
    assert!(rolled.contains("v1"), "{rolled}");
    assert!(table_csv(&w, table).starts_with("user_id,n,s,last,pages"));
}

/// Two versions of a key with one time are two rows whatever the query
/// reads of them: each left row gets the greatest, once.
#[test]
fn as_of_picks_one_version_whatever_the_query_reads() {
    let w = World::new();
    let events = w.write("events.csv", "id,k,t\n1,a,10\n2,a,5\n3,b,10\n");
    let versions = w.write("versions.csv", "k,t,note\na,7,x\na,7,y\na,3,w\n");
    let declare = "CREATE TABLE versions (t BIGINT, WATERMARK FOR t AS t - 100); ";
    for (select, expected) in [
        ("e.id", "id\n1\n2\n"),
        ("e.id, v.note", "id,note\n1,y\n2,w\n"),
        ("e.id, v.t", "id,t\n1,7\n2,3\n"),
    ] {
        let out = w.path(&format!("out-{}", select.len()));
        let sql = format!(
            "{declare}SELECT {select} FROM events e \
             JOIN versions FOR SYSTEM_TIME AS OF e.t AS v ON e.k = v.k"
        );
        w.ok(&[
            "run",
            "--sql-text",
            &sql,
            "-i",
            &format!("events={events}"),
            "-i",
            &format!("versions={versions}"),
            "-o",
            &out.display().to_string(),
        ]);
        let got = std::fs::read_to_string(out.join("result.csv")).unwrap();
        assert_eq!(got, expected, "{sql}");
    }
}

/// Orders of which a third are one customer's, and its customers.
fn skewed_tables(w: &World) -> (String, String) {
    let mut rng = Rng(0x5ce3);
    let mut orders = String::from("id,customer,region,amount\n");
    for id in 0..3000 {
        let customer = match rng.below(3) {
            0 => 7,
            _ => rng.below(500),
        };
        let amount = match rng.below(25) {
            0 => String::new(),
            _ => rng.below(100).to_string(),
        };
        orders.push_str(&format!("{id},{customer},{},{amount}\n", customer % 4));
    }
    let mut customers = String::from("customer,region,tier\n");
    for c in (0..520).step_by(2) {
        customers.push_str(&format!("{c},{},{}\n", c % 4, rng.below(3)));
    }
    (
        w.write("skewed_orders.csv", &orders),
        w.write("skewed_customers.csv", &customers),
    )
}

/// Joins and groupings over a hot key give the same bytes whichever
/// strategy computes them — salted hot keys (asked, or found by `auto`'s
/// sample), broadcast or shuffled, on 1 to 4 workers — and DuckDB's rows.
#[test]
fn every_strategy_gives_the_same_rows_over_a_hot_key() {
    let w = World::new();
    let (orders, customers) = skewed_tables(&w);
    let queries = [
        "SELECT c.tier, count(*) AS n, sum(o.amount) AS total FROM orders o \
         JOIN customers c ON o.customer = c.customer GROUP BY c.tier",
        "SELECT o.id, c.tier FROM orders o LEFT JOIN customers c \
         ON o.customer = c.customer AND o.region = c.region",
        "SELECT o.id FROM orders o WHERE EXISTS (SELECT 1 FROM customers c \
         WHERE c.customer = o.customer AND c.tier <> o.amount % 3)",
        "SELECT o.id FROM orders o WHERE NOT EXISTS (SELECT 1 FROM customers c \
         WHERE c.customer = o.customer)",
        "SELECT customer, count(*) AS n, count(DISTINCT amount) AS amounts, min(amount) AS lo, \
         max(amount) AS hi, avg(amount) AS mean FROM orders GROUP BY customer",
    ];
    let python = duckdb_python();
    let tables = [
        ("orders", orders.as_str()),
        ("customers", customers.as_str()),
    ];
    for (q, query) in queries.iter().enumerate() {
        let run = |name: &str, workers: &str, params: &[&str]| -> (String, String) {
            let out = w.path(&format!("skew-{q}-{name}-{workers}"));
            let mut args = vec!["run", "--sql-text", query, "--workers", workers];
            let (io, ic) = (format!("orders={orders}"), format!("customers={customers}"));
            let out_s = out.display().to_string();
            args.extend(["-i", &io, "-o", &out_s]);
            if query.contains("customers") {
                args.extend(["-i", &ic]);
            }
            params.iter().for_each(|p| args.extend(["-p", p]));
            let log = w.ok(&args);
            (
                std::fs::read_to_string(out.join("result.csv")).unwrap(),
                log,
            )
        };
        let (reference, _) = run("shuffle", "1", &["strategy=shuffle"]);
        for (name, workers, params) in [
            ("skew", "2", &["strategy=skew"][..]),
            ("skew", "4", &["strategy=skew", "salts=3"]),
            ("auto", "3", &["broadcast_limit=0"]),
            ("broadcast", "2", &["strategy=broadcast"]),
            ("shuffle", "4", &["strategy=shuffle"]),
        ] {
            let (got, log) = run(name, workers, params);
            assert_eq!(got, reference, "{query}: {name} on {workers} workers");
            if name != "shuffle" && name != "broadcast" {
                assert!(
                    log.contains("strategy skew") && log.contains("sampled rows: 7"),
                    "{query}: {name} found no hot key 7:\n{log}"
                );
            }
        }
        if let Some(python) = &python {
            let expected = duckdb_rows(python, query, &tables);
            let got = kappa_rows(&reference);
            assert!(
                same_rows(&got, &expected),
                "{query}\n{}",
                difference(&got, &expected)
            );
        }
    }
}

/// Every error class names the line and column and exits non-zero before
/// reading any data (no output directory is made).
#[test]
fn sql_errors_name_line_and_column() {
    let w = World::new();
    let (orders, customers) = tables(&w);
    let cases: &[(&str, &str)] = &[
        (
            "SELECT id FROM orders\nWHERE amount > > 3",
            "q.sql:2:16: Expected: an expression, found: >",
        ),
        (
            "SELECT id FROM ordrs",
            "q.sql:1:16: unknown table ordrs (did you mean orders?)",
        ),
        (
            "SELECT id,\n  amout FROM orders",
            "q.sql:2:3: unknown column amout (did you mean amount?)",
        ),
        (
            "SELECT id FROM orders WHERE upper(status) > 3",
            "q.sql:1:45: cannot compare text (upper(status)) with an integer",
        ),
        (
            "SELECT id FROM orders WHERE customer = 'c1' AND customer + 1 > 2",
            "is used as a number here but as text at line 1, column 29",
        ),
        (
            "SELECT customer, amount FROM orders GROUP BY customer",
            "q.sql:1:18: column amount must appear in the GROUP BY clause",
        ),
        (
            "SELECT id FROM orders WHERE sum(amount) > 3",
            "q.sql:1:29: the aggregate sum(...) is not allowed here",
        ),
        (
            "SELECT id, rank() OVER (ORDER BY id) FROM orders",
            "q.sql:1:12: the window function rank(...) OVER (...)",
        ),
        (
            "SELECT id, row_number() OVER (PARTITION BY status) AS n FROM orders",
            "q.sql:1:12: ROW_NUMBER() without ORDER BY numbers rows in arrival order",
        ),
        ("SELECT id FROM orders LIMIT 3", "LIMIT without ORDER BY"),
        (
            "SELECT o.id FROM orders o JOIN customers c ON o.customer = c.name AND x.y = 1",
            "q.sql:1:71: no table or alias x in this query's FROM\n",
        ),
        ("SELECT id, id FROM orders", "two columns named id"),
        ("DELETE FROM orders", "q.sql:1:1: the statement DELETE FROM"),
        (
            "SELECT id FROM orders WHERE customer IN (SELECT name, city FROM customers)",
            "q.sql:1:42: IN (subquery) needs a subquery of one column, this one has 2",
        ),
        (
            "SELECT id, (SELECT amount FROM orders) FROM orders",
            "q.sql:1:13: a scalar subquery that may give more than one row",
        ),
        (
            "SELECT id FROM orders o WHERE\n  customer NOT IN (SELECT name FROM customers c WHERE c.tier = o.amount)",
            "q.sql:2:20: NOT IN with a correlated subquery",
        ),
        (
            "SELECT id FROM orders WHERE placed > DATE '2024-02-30'",
            "q.sql:1:43: '2024-02-30' is not a date (write YYYY-MM-DD",
        ),
        (
            "SELECT id FROM orders WHERE stamp > now() - INTERVAL '1' HOUR",
            "q.sql:1:37: now reads the wall clock, and a job's output depends on its inputs only",
        ),
        (
            "SELECT id FROM orders WHERE placed < current_date",
            "q.sql:1:38: current_date reads the wall clock",
        ),
        (
            "SELECT stamp * INTERVAL '2' DAY FROM orders",
            "q.sql:1:25: the operator * with an INTERVAL (only date ± INTERVAL)",
        ),
        (
            "SELECT * FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(stamp), INTERVAL '1' MONTH))",
            "q.sql:1:70: a window's size is a positive fixed length",
        ),
        (
            "SELECT * FROM HOP(TABLE orders, DESCRIPTOR(stamp), INTERVAL '2' DAY, INTERVAL '1' DAY)",
            "q.sql:1:15: the slide is at most the size",
        ),
        (
            "SELECT * FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(id), INTERVAL '1' DAY))",
            "expected a timestamp (YYYY-MM-DD HH:MM:SS), found \"1\"",
        ),
        (
            "SELECT extract(century FROM stamp) FROM orders",
            "q.sql:1:29: the field CENTURY",
        ),
        (
            "SELECT id FROM orders WHERE amount > 3 OR EXISTS (SELECT 1 FROM customers)",
            "q.sql:1:51: EXISTS and IN (subquery) other than as conditions of a WHERE clause",
        ),
        (
            "SELECT o.id FROM orders o\n  JOIN customers FOR SYSTEM_TIME AS OF o.stamp AS c ON o.customer = c.name",
            "q.sql:2:8: table customers has no event time to version its rows by",
        ),
        (
            "SELECT o.id FROM orders o\n  JOIN customers FOR SYSTEM_TIME AS OF NOW() AS c ON o.customer = c.name",
            "q.sql:2:18: FOR SYSTEM_TIME AS OF NOW() is processing time",
        ),
        (
            "CREATE TABLE orders (id BIGINT, stamp TIMESTAMP, WATERMARK FOR id AS id);\nSELECT o.id FROM orders o\n  \
             JOIN orders FOR SYSTEM_TIME AS OF o.stamp AS p ON o.customer = p.customer",
            "q.sql:3:37: o.stamp is a timestamp, but the versioned table's time id is an integer",
        ),
        (
            "CREATE TABLE orders (id BIGINT, WATERMARK FOR id AS id);\nSELECT o.id FROM orders o\n  \
             JOIN orders FOR SYSTEM_TIME AS OF o.id AS p ON o.customer = p.customer AND p.amount > 3",
            "q.sql:3:50: a FOR SYSTEM_TIME AS OF join's ON condition other than equalities",
        ),
        (
            "CREATE TABLE orders (id BIGINT, WATERMARK FOR id AS id);\nSELECT o.id FROM orders o\n  \
             RIGHT JOIN orders FOR SYSTEM_TIME AS OF o.id AS p ON o.customer = p.customer",
            "q.sql:3:14: FOR SYSTEM_TIME AS OF in this join",
        ),
        (
            "CREATE TABLE orders (id BIGINT, WATERMARK FOR id AS id);\n\
             SELECT o.id FROM orders FOR SYSTEM_TIME AS OF id AS o",
            "q.sql:2:18: FOR SYSTEM_TIME AS OF here: the versioned table is the right side",
        ),
        (
            "CREATE TABLE orders (id BIGINT, WATERMARK FOR id AS id);\nWITH p AS (SELECT * FROM orders)\n\
             SELECT o.id FROM orders o JOIN p FOR SYSTEM_TIME AS OF o.id AS q ON o.customer = q.customer",
            "q.sql:3:32: FOR SYSTEM_TIME AS OF a view, CTE or subquery",
        ),
        (
            "CREATE TABLE orders (id BIGINT, WATERMARK FOR id AS id);\n\
             SELECT o.id FROM orders o JOIN orders FOR SYSTEM_TIME AS OF o.id AS p USING (customer)",
            "q.sql:2:32: USING or NATURAL with FOR SYSTEM_TIME AS OF",
        ),
        (
            "CREATE TABLE orders (customer TEXT,\n  WATERMARK FOR customer AS customer - INTERVAL '1' SECOND);\nSELECT id FROM orders",
            "q.sql:2:3: customer is declared text, but a watermark's column is an event time",
        ),
        (
            "CREATE TABLE orders (placed DATE, WATERMARK FOR placed AS placed - 3);\nSELECT id FROM orders",
            "q.sql:1:35: placed is a date: its delay is an INTERVAL",
        ),
        (
            "CREATE TABLE orders (WATERMARK FOR stamp AS stamp + INTERVAL '1' HOUR);\nSELECT id FROM orders",
            "q.sql:1:22: a watermark is its column minus a delay",
        ),
    ];
    let (orders_arg, customers_arg) =
        (format!("orders={orders}"), format!("customers={customers}"));
    for (sql, expected) in cases {
        w.write("q.sql", sql);
        let mut args = vec!["run", "--sql", "q.sql", "-i", &orders_arg, "-o", "never"];
        if sql.contains("customers") {
            args.extend(["-i", &customers_arg]);
        }
        let out = w.path("never");
        let mut cmd = w.kappa(&[]);
        cmd.current_dir(w.dir.path());
        let out_text = cmd.args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out_text.stderr);
        assert!(!out_text.status.success(), "{sql}: succeeded");
        assert!(
            stderr.contains(expected),
            "{sql}: expected {expected:?} in:\n{stderr}"
        );
        assert!(!stderr.contains("panick"), "{stderr}");
        assert!(!out.exists(), "{sql}: an output was written");
    }
}

/// `kappa sql explain` prints what each input reads (and as what), the
/// operators and the output's key, from files or CREATE TABLE declarations.
#[test]
fn explain_shows_columns_operators_and_keys() {
    let w = World::new();
    let (orders, customers) = tables(&w);
    let text = w.ok(&[
        "sql",
        "explain",
        "--sql-text",
        "SELECT c.city, sum(o.amount) AS s FROM orders o JOIN customers c ON o.customer = c.name \
         WHERE o.price > 10 GROUP BY c.city",
        "-i",
        &format!("orders={orders}"),
        "-i",
        &format!("customers={customers}"),
    ]);
    assert!(
        text.contains("orders: customer inferred, amount number, price number"),
        "{text}"
    );
    assert!(
        text.contains("customers: name inferred, city inferred"),
        "{text}"
    );
    assert!(
        text.contains("output result (city, s), key (city)"),
        "{text}"
    );
    assert!(
        text.contains("inner join on left.#0 = right.#0 (strategy broadcast)"),
        "{text}"
    );
    assert!(
        text.contains("sql join orders with customers: strategy broadcast (auto: right side "),
        "{text}"
    );
    assert!(text.contains("filter (#2 > 10)"), "{text}");
    let (hot_orders, hot_customers) = skewed_tables(&w);
    let skewed = w.ok(&[
        "sql",
        "explain",
        "--sql-text",
        "SELECT o.customer, count(*) AS n FROM orders o JOIN customers c \
         ON o.customer = c.customer GROUP BY o.customer",
        "-i",
        &format!("orders={hot_orders}"),
        "-i",
        &format!("customers={hot_customers}"),
        "-p",
        "broadcast_limit=1K",
    ]);
    for line in [
        "group by [#0] computing count(*) (1 hot keys in two phases)",
        "inner join on left.#0 = right.#0 (strategy skew: 1 hot keys)",
        "sql join orders with customers: strategy skew (auto: right side 2046 bytes > 1024; \
         1 hot keys at >= 1% of 3000 sampled rows: 7 (34.6%))",
        "sql group by of orders+customers: strategy skew (1 hot keys at >= 1% of 3000 sampled \
         rows: 7 (34.6%))",
    ] {
        assert!(skewed.contains(line), "{line}\n{skewed}");
    }
    let declared = w.ok(&[
        "sql",
        "explain",
        "--sql-text",
        "CREATE TABLE t (k TEXT, v BIGINT); CREATE VIEW s AS SELECT k, count(*) AS n FROM t GROUP BY k; \
         CREATE VIEW big AS SELECT k FROM s WHERE n > 2",
    ]);
    let band = w.ok(&[
        "sql",
        "explain",
        "--sql-text",
        "SELECT o.id, p.id AS later FROM orders o JOIN orders p ON o.customer = p.customer \
         AND p.stamp BETWEEN o.stamp AND o.stamp + INTERVAL '1' HOUR",
        "-i",
        &format!("orders={orders}"),
    ]);
    assert!(
        band.contains("(strategy interval: right.#2 - left.#2 in [00:00:00, 01:00:00])"),
        "{band}"
    );
    let as_of = w.ok(&[
        "sql",
        "explain",
        "--sql-text",
        "CREATE TABLE customers (tier BIGINT, WATERMARK FOR tier AS tier); \
         SELECT o.id, c.city FROM orders o LEFT JOIN customers FOR SYSTEM_TIME AS OF o.amount AS c \
         ON o.customer = c.name",
        "-i",
        &format!("orders={orders}"),
        "-i",
        &format!("customers={customers}"),
    ]);
    assert!(
        as_of.contains(
            "left as-of join on left.#1 = right.#0: each left row with the right row whose #2 \
             is the latest at or before left.#2"
        ),
        "{as_of}"
    );
    assert!(
        as_of.contains("orders: id inferred, customer inferred, amount integer"),
        "{as_of}"
    );
    assert!(declared.contains("t: k text"), "{declared}");
    assert!(declared.contains("output big (k), key (k)"), "{declared}");
    assert!(declared.contains("read s"), "{declared}");
}

/// The late rows of `rows` (`k,ts,v`, in order) under a watermark of
/// `lateness` seconds: what the drop policy must drop (a plain reference).
fn late_reference(rows: &[String], lateness: i64) -> (Vec<&String>, usize) {
    let mut max = i64::MIN;
    let mut kept = Vec::new();
    for row in rows {
        let ts: i64 = row.split(',').nth(1).unwrap().parse().unwrap();
        if max != i64::MIN && ts < max - lateness {
            continue;
        }
        max = max.max(ts);
        kept.push(row);
    }
    let dropped = rows.len() - kept.len();
    (kept, dropped)
}

/// `k,ts,v` with `ts` seconds made a timestamp on 2024-03-01.
fn timestamped(row: &str) -> String {
    let mut f = row.split(',');
    let (k, ts, v) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
    let s: i64 = ts.parse().unwrap();
    format!(
        "{k},2024-03-01 {:02}:{:02}:{:02},{v}",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// A `WATERMARK` drops exactly the rows a plain reference says are late;
/// a stream over a one-partition topic produced from the file (killed and
/// restarted) drops the same ones and ends with the batch table, which
/// `verify` recomputes; the counts show in the run's summary and `table
/// status`; a changed watermark is a new version; the `--late` flags are
/// refused with the clause to write.
#[test]
fn sql_watermark_drops_late_rows_in_batch_and_stream() {
    let w = World::new();
    let mut rng = Rng(0x1a7e_05e1);
    let raw = crate::event_time::events(&mut rng, 700);
    let rows: Vec<String> = raw.iter().map(|r| timestamped(r)).collect();
    let file = w.write("events.csv", &format!("k,at,v\n{}\n", rows.join("\n")));
    let sql = |lateness: u32| {
        format!(
            "CREATE TABLE events (k TEXT, v BIGINT, WATERMARK FOR at AS at - INTERVAL '{lateness}' SECOND);\n\
             SELECT k, window_start, count(*) AS n, sum(v) AS s\n\
             FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(at), INTERVAL '100' SECOND))\n\
             GROUP BY k, window_start"
        )
    };
    let query = sql(30);
    // The reference: the kept rows' windows, counted.
    let (kept, dropped) = late_reference(&raw, 30);
    assert!(dropped > 20, "only {dropped} late rows: not late enough");
    let mut expected: BTreeMap<(String, i64), (i64, Option<i64>)> = BTreeMap::new();
    for row in kept {
        let f: Vec<&str> = row.split(',').collect();
        let ts: i64 = f[1].parse().unwrap();
        let e = expected
            .entry((f[0].to_string(), ts.div_euclid(100) * 100))
            .or_insert((0, None));
        e.0 += 1;
        if let Ok(v) = f[2].parse::<i64>() {
            e.1 = Some(e.1.unwrap_or(0) + v);
        }
    }
    let out = w.path("batch");
    let input = format!("events={file}");
    let summary = w.ok(&[
        "run",
        "--sql-text",
        &query,
        "-i",
        &input,
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(
        summary.contains(&format!("dropped {dropped} late events in input 'events'")),
        "{summary}"
    );
    let batch = std::fs::read_to_string(out.join("result.csv")).unwrap();
    let want: Vec<String> = expected
        .iter()
        .map(|((k, start), (n, s))| {
            let s = s.map_or(String::new(), |s| s.to_string());
            let start = timestamped(&format!("k,{start},v"));
            let start = start.split(',').nth(1).unwrap().to_string();
            format!("{k},{start},{n},{s}")
        })
        .collect();
    let mut got: Vec<String> = batch.lines().skip(1).map(String::from).collect();
    got.sort();
    assert_eq!(got, want, "the batch run is not the reference");
    // Streamed over one partition, with kills: the same table.
    w.ok(&["log", "create", "events", "--partitions", "1"]);
    let stream = |sql: &str| -> Vec<String> {
        [
            "stream",
            "--quiet",
            "--sql-text",
            sql,
            "--table",
            "late",
            "-i",
            "events=events",
        ]
        .map(String::from)
        .to_vec()
    };
    for (i, part) in chunks(&mut rng, &rows, 4).iter().enumerate() {
        let chunk = w.write(
            &format!("c{i}.csv"),
            &format!("k,at,v\n{}\n", part.join("\n")),
        );
        w.ok(&["log", "produce", "events", "--file", &chunk]);
        let mut args = stream(&query);
        args.extend(["--max-batch".into(), (20 + rng.below(100)).to_string()]);
        let mut child = w.spawn_silent(&args);
        std::thread::sleep(Duration::from_millis(rng.below(300)));
        child.kill().unwrap();
        child.wait().unwrap();
    }
    let mut args = stream(&query);
    args.push("--until-caught-up".into());
    w.ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(
        kappa_rows(&table_csv(&w, "late")),
        kappa_rows(&batch),
        "the stream differs from the batch run"
    );
    let verify = w.ok(&["table", "verify", "late"]);
    assert!(verify.contains(": identical ("), "{verify}");
    let status = w.ok(&["table", "status"]);
    assert!(status.contains(&format!("events={dropped} ")), "{status}");
    // The watermark is part of the query: a new one is a new version.
    let mut changed = stream(&sql(300));
    changed.push("--until-caught-up".into());
    let err = w.fails(&changed.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(err.contains("reprocess"), "{err}");
    // The flags do not apply to SQL jobs: the message says what does.
    let err = w.fails(&[
        "run",
        "--sql-text",
        &query,
        "-i",
        &input,
        "-o",
        "x",
        "--late",
        "drop",
    ]);
    assert!(err.contains("WATERMARK FOR ts AS ts - INTERVAL"), "{err}");
}
