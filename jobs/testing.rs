//! Helpers for job tests: rows from compact text, and running a job in memory.

use super::kappa_job_prelude::*;
use crate::runner::memory::run_in_memory;

/// Rows from lines of comma-separated fields (no header, no quoting): each
/// field inferred as in a CSV file, an empty field is null.
pub fn rows(text: &str) -> Vec<Row> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            l.split(',')
                .map(|f| {
                    if f.is_empty() {
                        Value::Null
                    } else {
                        Value::infer(f)
                    }
                })
                .collect()
        })
        .collect()
}

/// Plans `job` with `params` over inputs whose columns are given as
/// `"a,b,c"`, runs it on 1 and 3 workers (which must agree), and returns
/// each output's rows, sorted, repeated by multiplicity.
pub fn run_job(
    job: &dyn Job,
    params: &[(&str, &str)],
    columns: &[&str],
    inputs: Vec<Vec<Row>>,
) -> Vec<Vec<Row>> {
    let spec = job.spec();
    let given: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let params = Params::resolve(&spec, &given).expect("params");
    let schemas: Vec<InputSchema> = spec
        .inputs
        .iter()
        .zip(columns)
        .map(|(i, c)| InputSchema {
            name: i.name.into(),
            columns: c.split(',').map(String::from).collect(),
        })
        .collect();
    let plan = job.plan(&params, &schemas).expect("plan");
    let one = run_in_memory(&plan, inputs.clone(), 1);
    let three = run_in_memory(&plan, inputs, 3);
    assert_eq!(one, three, "output depends on the worker count");
    one.into_iter()
        .map(|out| {
            out.into_iter()
                .flat_map(|(row, n)| std::iter::repeat_n(row, n as usize))
                .collect()
        })
        .collect()
}
