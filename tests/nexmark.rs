//! Nexmark end to end: `kappa nexmark gen` writes the same events as CSV
//! files and as log topics, and every `nexmark-qN` job gives the same rows
//! through `kappa run` on the files as through `kappa stream` over the
//! topics (in many small epochs, so that windows, maxima and winners are
//! revised while they stream in), and `kappa table verify` agrees; and the
//! same queries written in SQL (`jobs/nexmark/sql/`) give the same rows.

use kappa::table::{SqliteStore, TableStore};

use crate::common::World;

/// Events generated: enough for a few dozen q5/q7/q8 windows at a high rate.
const EVENTS: &str = "20000";
/// Events per second of event time: 20k events over 40 s.
const RATE: &str = "500";

/// Each query with its inputs.
const QUERIES: &[(&str, &[&str])] = &[
    ("q0", &["bid"]),
    ("q1", &["bid"]),
    ("q2", &["bid"]),
    ("q3", &["person", "auction"]),
    ("q4", &["auction", "bid"]),
    ("q5", &["bid"]),
    ("q7", &["bid"]),
    ("q8", &["person", "auction"]),
    ("q9", &["auction", "bid"]),
];

/// Rows of a CSV output file (without its header), as sorted text fields.
fn batch_rows(path: &std::path::Path) -> Vec<Vec<String>> {
    let mut reader = csv::Reader::from_path(path).unwrap();
    let mut rows: Vec<Vec<String>> = reader
        .records()
        .map(|r| r.unwrap().iter().map(String::from).collect())
        .collect();
    rows.sort();
    rows
}

/// Rows of the live table of `output`, repeated by multiplicity, as sorted text fields.
fn table_rows(db: &std::path::Path, output: &str) -> Vec<Vec<String>> {
    let store = SqliteStore::open(db).unwrap();
    let d = store.find_by_output(output, None).unwrap();
    let index = d.output_index(output).unwrap();
    let mut rows = Vec::new();
    for (row, n) in store.read_rows(&d.table(index)).unwrap() {
        let fields: Vec<String> = row.iter().map(|v| v.to_string()).collect();
        rows.extend(std::iter::repeat_n(fields, n as usize));
    }
    rows.sort();
    rows
}

#[test]
fn every_query_gives_the_same_rows_in_batch_and_stream() {
    let w = World::new();
    let csv = w.path("csv");
    let gen_args = ["nexmark", "gen", "--events", EVENTS, "--rate", RATE];
    let out = w.ok(&[&gen_args[..], &["--output", csv.to_str().unwrap()]].concat());
    assert!(
        out.contains("20000 events (400 person, 1200 auction, 18400 bid)"),
        "{out}"
    );
    w.ok(&[
        &gen_args[..],
        &["--topic-prefix", "nx", "--partitions", "3"],
    ]
    .concat());
    // Generating twice into the same topics would repeat every event.
    let again = w.fails(&[&gen_args[..], &["--topic-prefix", "nx"]].concat());
    assert!(again.contains("already has records"), "{again}");
    for (query, inputs) in QUERIES {
        let job = format!("nexmark-{query}");
        let output = format!("nexmark_{query}");
        let dir = w.path(&format!("out-{query}"));
        let mut run = vec![
            "run".to_string(),
            job.clone(),
            "-o".into(),
            dir.display().to_string(),
        ];
        let mut stream = vec![
            "stream".to_string(),
            job.clone(),
            "--until-caught-up".into(),
            "--quiet".into(),
            "--workers".into(),
            "2".into(),
            "--max-batch".into(),
            "1500".into(),
        ];
        for input in *inputs {
            run.extend([
                "-i".into(),
                format!("{input}={}/{input}.csv", csv.display()),
            ]);
            stream.extend(["-i".into(), format!("{input}=nx-{input}")]);
        }
        w.ok(&run.iter().map(String::as_str).collect::<Vec<_>>());
        w.ok(&stream.iter().map(String::as_str).collect::<Vec<_>>());
        let batch = batch_rows(&dir.join(format!("{output}.csv")));
        assert!(
            !batch.is_empty(),
            "{job}: no output on the generated events"
        );
        assert_eq!(
            table_rows(&w.path("tables.db"), &output),
            batch,
            "{job}: the stream table differs from the batch output"
        );
        let verify = w.ok(&["table", "verify", &output]);
        assert!(verify.contains(": identical ("), "{job}: {verify}");
        same_rows_in_sql(&w, query, inputs, &batch);
    }
}

/// `jobs/nexmark/sql/QUERY.sql` gives exactly the rows of the Rust job: in
/// batch for every query, and streamed (in small epochs) for the windowed
/// and ranked ones.
fn same_rows_in_sql(w: &World, query: &str, inputs: &[&str], expected: &[Vec<String>]) {
    let sql = format!(
        "{}/jobs/nexmark/sql/{query}.sql",
        env!("CARGO_MANIFEST_DIR")
    );
    let dir = w.path(&format!("sql-{query}"));
    let mut run = vec!["run".to_string(), "--sql".into(), sql.clone()];
    run.extend(["-o".into(), dir.display().to_string()]);
    let table = format!("sql_{query}");
    let mut stream = vec![
        "stream".to_string(),
        "--sql".into(),
        sql,
        "--table".into(),
        table.clone(),
    ];
    stream.extend(["--until-caught-up", "--quiet", "--max-batch", "1500"].map(String::from));
    for input in inputs {
        let csv = w.path("csv");
        run.extend([
            "-i".into(),
            format!("{input}={}/{input}.csv", csv.display()),
        ]);
        stream.extend(["-i".into(), format!("{input}=nx-{input}")]);
    }
    w.ok(&run.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(
        batch_rows(&dir.join("result.csv")),
        expected,
        "{query}.sql differs from nexmark-{query}"
    );
    if ["q5", "q7", "q9"].contains(&query) {
        w.ok(&stream.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(
            table_rows(&w.path("tables.db"), &table),
            expected,
            "{query}.sql streamed differs from nexmark-{query}"
        );
    }
}
