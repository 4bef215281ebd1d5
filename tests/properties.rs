//! Property tests: group-by, join (each kind) and distinct over random rows
//! with nulls, duplicates and a hot key equal a plain reference
//! implementation written here (nested loops and maps, no dataflow), and are
//! identical on 1, 2 and 4 workers.
//!
//! Values are integers and multiples of 0.5, so float sums are exact in any
//! order and the comparison can be exact.
//!
//! Every join and grouping strategy (shuffle, broadcast, skew with zero, one
//! or several hot keys and any salt count, auto) must give the reference's
//! output, on every worker count.

use std::collections::{BTreeMap, BTreeSet};

use std::sync::Arc;

use kappa::job::{Job, NoData, Params, plan_job};
use kappa::runner::memory::{run_in_memory, run_projected};
use kappa::schema::InputSchema;
use kappa::value::{Row, Value};
use proptest::prelude::*;

pub(crate) fn key_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => Just(Value::Int(0)), // the hot key
        1 => Just(Value::Null),
        3 => (1i64..6).prop_map(Value::Int),
        1 => prop_oneof![Just(Value::str("a")), Just(Value::str("b"))],
    ]
}

pub(crate) fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => Just(Value::Null),
        3 => (-50i64..50).prop_map(Value::Int),
        1 => (-20i64..20).prop_map(|h| Value::float(h as f64 / 2.0)),
    ]
}

fn rows(max: usize) -> impl Strategy<Value = Vec<Row>> {
    prop::collection::vec(
        (key_value(), number()).prop_map(|(k, v)| vec![k, v]),
        0..max,
    )
    // Duplicates: repeat a prefix.
    .prop_map(|mut rows| {
        let dup: Vec<Row> = rows.iter().take(rows.len() / 4).cloned().collect();
        rows.extend(dup);
        rows
    })
}

/// Runs a job on 1, 2 and 4 workers, checks they agree, returns the rows of
/// output 0 repeated by multiplicity (sorted). Every input has columns `k,v`.
fn run(job: Arc<dyn Job>, params: &[(&str, &str)], inputs: Vec<Vec<Row>>) -> Vec<Row> {
    let columns = vec!["k,v"; inputs.len()];
    run_with(&*job, params, &columns, inputs)
}

/// As [`run`], with each input's columns given as `"a,b,c"`.
pub(crate) fn run_with(
    job: &dyn Job,
    params: &[(&str, &str)],
    columns: &[&str],
    inputs: Vec<Vec<Row>>,
) -> Vec<Row> {
    let spec = job.spec();
    let given: Vec<_> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let params = Params::resolve(&spec, &given).unwrap();
    let schemas: Vec<_> = spec
        .inputs
        .iter()
        .zip(columns)
        .map(|(i, c)| InputSchema {
            name: i.name.into(),
            columns: c.split(',').map(String::from).collect(),
        })
        .collect();
    let plan = plan_job(job, &params, schemas, &NoData).unwrap();
    let one = run_in_memory(&plan, inputs.clone(), 1).unwrap();
    for workers in [2, 4] {
        assert_eq!(
            run_in_memory(&plan, inputs.clone(), workers).unwrap(),
            one,
            "{workers} workers differ from 1"
        );
    }
    one.into_iter()
        .next()
        .unwrap()
        .into_iter()
        .flat_map(|(r, n)| std::iter::repeat_n(r, n as usize))
        .collect()
}

pub(crate) fn job(name: &str) -> Arc<dyn Job> {
    kappa::jobs::find(name).unwrap()
}

/// SQL aggregates over one group's `v` values, written plainly.
pub(crate) fn reference_aggregates(values: &[Value]) -> Row {
    let non_null: Vec<&Value> = values.iter().filter(|v| !v.is_null()).collect();
    let count = Value::Int(values.len() as i64);
    if non_null.is_empty() {
        return vec![
            count,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Int(0),
        ];
    }
    let any_float = non_null.iter().any(|v| matches!(v, Value::Float(_)));
    let total: f64 = non_null.iter().map(|v| v.as_f64().unwrap()).sum();
    let sum = if any_float {
        Value::float(total)
    } else {
        Value::Int(total as i64)
    };
    let distinct: BTreeSet<&Value> = non_null.iter().copied().collect();
    vec![
        count,
        sum,
        Value::float(total / non_null.len() as f64),
        (*distinct.first().unwrap()).clone(),
        (*distinct.last().unwrap()).clone(),
        Value::Int(distinct.len() as i64),
    ]
}

fn reference_join(left: &[Row], right: &[Row], kind: &str) -> Vec<Row> {
    let mut out = Vec::new();
    for l in left {
        let matches: Vec<&Row> = right
            .iter()
            .filter(|r| !l[0].is_null() && l[0] == r[0])
            .collect();
        match kind {
            "inner" => out.extend(
                matches
                    .iter()
                    .map(|r| vec![l[0].clone(), l[1].clone(), r[1].clone()]),
            ),
            "left" if matches.is_empty() => out.push(vec![l[0].clone(), l[1].clone(), Value::Null]),
            "left" => out.extend(
                matches
                    .iter()
                    .map(|r| vec![l[0].clone(), l[1].clone(), r[1].clone()]),
            ),
            "semi" if !matches.is_empty() => out.push(l.clone()),
            "anti" if matches.is_empty() => out.push(l.clone()),
            _ => {}
        }
    }
    out.sort();
    out
}

/// A strategy with its hot keys (none, the hot key 0, several) and salts.
fn strategy() -> impl Strategy<Value = (&'static str, &'static str, &'static str)> {
    (
        prop_oneof![
            Just("shuffle"),
            Just("broadcast"),
            Just("skew"),
            Just("auto")
        ],
        prop_oneof![Just(""), Just("0"), Just("0,1,2,a")],
        prop_oneof![Just("auto"), Just("1"), Just("3")],
    )
}

fn group_by_reference(input: &[Row]) -> Vec<Row> {
    let mut groups: BTreeMap<Value, Vec<Value>> = BTreeMap::new();
    for row in input {
        groups
            .entry(row[0].clone())
            .or_default()
            .push(row[1].clone());
    }
    groups
        .into_iter()
        .map(|(k, values)| {
            let mut row = vec![k];
            row.extend(reference_aggregates(&values));
            row
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn join_strategies_match_reference(
        left in rows(40),
        right in rows(20),
        kind in prop_oneof![Just("inner"), Just("left"), Just("semi"), Just("anti")],
        (strategy, hot, salts) in strategy(),
    ) {
        let got = run(
            job("join"),
            &[("on", "k=k"), ("kind", kind), ("strategy", strategy), ("hot", hot), ("salts", salts)],
            vec![left.clone(), right.clone()],
        );
        prop_assert_eq!(got, reference_join(&left, &right, kind));
    }

    #[test]
    fn group_by_strategies_match_reference(input in rows(60), (strategy, hot, salts) in strategy()) {
        let strategy = if strategy == "broadcast" { "skew" } else { strategy };
        let got = run(
            job("group-by"),
            &[("key", "k"), ("agg", "count,sum:v,avg:v,min:v,max:v,count_distinct:v"),
              ("strategy", strategy), ("hot", hot), ("salts", salts)],
            vec![input.clone()],
        );
        prop_assert_eq!(got, group_by_reference(&input));
    }

    /// Without count_distinct, a batch (insert-only) grouping folds min and
    /// max to their extremes per worker: still the reference.
    #[test]
    fn group_by_folding_matches_reference(input in rows(60), (strategy, hot, salts) in strategy()) {
        let strategy = if strategy == "broadcast" { "skew" } else { strategy };
        let got = run(
            job("group-by"),
            &[("key", "k"), ("agg", "count,sum:v,avg:v,min:v,max:v"),
              ("strategy", strategy), ("hot", hot), ("salts", salts)],
            vec![input.clone()],
        );
        let expected: Vec<Row> = group_by_reference(&input)
            .into_iter()
            .map(|mut row| { row.truncate(row.len() - 1); row })
            .collect();
        prop_assert_eq!(got, expected);
    }

    /// Rows inserted and some retracted again (the path of streams, where
    /// count and sum travel in the difference and cancel): the reference over
    /// what remains.
    #[test]
    fn group_by_under_retractions_matches_reference(input in rows(60), gone in prop::collection::vec(any::<bool>(), 60)) {
        let spec = job("group-by").spec();
        let given = [("key", "k"), ("agg", "count,sum:v,avg:v,min:v,max:v,count_distinct:v")];
        let given: Vec<_> = given.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let params = Params::resolve(&spec, &given).unwrap();
        let schema = InputSchema { name: "input".into(), columns: vec!["k".into(), "v".into()] };
        let plan = plan_job(&*job("group-by"), &params, vec![schema], &NoData).unwrap();
        let mut changes: Vec<(Row, isize)> = input.iter().map(|r| (r.clone(), 1)).collect();
        let mut kept = Vec::new();
        for (row, gone) in input.iter().zip(gone.iter().chain(std::iter::repeat(&false))) {
            if *gone {
                changes.push((row.clone(), -1));
            } else {
                kept.push(row.clone());
            }
        }
        let one = run_projected(&plan, vec![changes.clone()], 1).unwrap();
        prop_assert_eq!(&run_projected(&plan, vec![changes], 3).unwrap(), &one);
        let got: Vec<Row> = one[0].iter().map(|(r, n)| { assert_eq!(*n, 1); r.clone() }).collect();
        prop_assert_eq!(got, group_by_reference(&kept));
    }

    #[test]
    fn group_by_matches_reference(input in rows(60)) {
        let got = run(job("group-by"), &[("key", "k"), ("agg", "count,sum:v,avg:v,min:v,max:v,count_distinct:v")], vec![input.clone()]);
        prop_assert_eq!(got, group_by_reference(&input));
    }

    #[test]
    fn join_matches_reference(left in rows(40), right in rows(20), kind in prop_oneof![Just("inner"), Just("left"), Just("semi"), Just("anti")]) {
        let got = run(job("join"), &[("on", "k=k"), ("kind", kind)], vec![left.clone(), right.clone()]);
        prop_assert_eq!(got, reference_join(&left, &right, kind));
    }

    #[test]
    fn distinct_matches_reference(input in rows(60)) {
        let got = run(job("distinct"), &[], vec![input.clone()]);
        let expected: Vec<Row> = input.into_iter().collect::<BTreeSet<_>>().into_iter().collect();
        prop_assert_eq!(got, expected);
    }
}
