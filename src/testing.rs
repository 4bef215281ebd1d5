//! A test harness for jobs: check a job's central property — its output is
//! a function of its input collections only — for your own code, in a few
//! lines.
//!
//! [`JobTest`] plans a job over rows held in memory and runs it on 1, 2 and
//! 3 workers in one epoch (as a batch run does), then on several workers
//! with the inputs cut into random epochs, some rows inserted, retracted
//! and inserted again (as a stream over a changelog sees them). Every run
//! must give the same output; [`JobTest::check`] returns it, or panics with
//! the runs that disagree (it is meant for `#[test]` functions).
//!
//! ```
//! use kappa::testing::{JobTest, rows};
//!
//! let job = kappa::Registry::builtin().find("count-by").unwrap();
//! let out = JobTest::new(job)
//!     .param("key", "k")
//!     .input("input", "k,v", rows("a,1\nb,2\na,3"))
//!     .check();
//! assert_eq!(out["counts"], rows("a,2\nb,1"));
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::job::{Job, NoData, Params, Plan, Time, Updates, plan_job};
use crate::runner::OutputRows;
use crate::runner::memory::{project, run_projected, run_timed};
use crate::schema::InputSchema;
use crate::value::{Row, Value};

/// Rows from lines of comma-separated fields (no header, no quoting): each
/// field typed as in a CSV file (`12` an integer, `1.5` a float, else a
/// string); an empty field is null.
pub fn rows(text: &str) -> Vec<Row> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            l.split(',')
                .map(|f| match f.is_empty() {
                    true => Value::Null,
                    false => Value::infer(f),
                })
                .collect()
        })
        .collect()
}

/// A job, its parameters and its inputs in memory, to be checked.
pub struct JobTest {
    job: Arc<dyn Job>,
    params: Vec<(String, String)>,
    inputs: Vec<(String, Vec<String>, Vec<Row>)>,
    seed: u64,
    epochs: usize,
}

impl JobTest {
    /// A test of `job`, with no parameters or inputs yet.
    pub fn new(job: Arc<dyn Job>) -> JobTest {
        JobTest {
            job,
            params: Vec::new(),
            inputs: Vec::new(),
            seed: 0x006b_6170_7061,
            epochs: 5,
        }
    }

    /// A test of a job value (`JobTest::of(MyJob)`).
    pub fn of(job: impl Job + 'static) -> JobTest {
        JobTest::new(Arc::new(job))
    }

    /// Sets parameter `name`.
    pub fn param(mut self, name: &str, value: &str) -> JobTest {
        self.params.push((name.to_string(), value.to_string()));
        self
    }

    /// Input `name` with these columns (`"a,b,c"`, as a file's header) and
    /// rows (full rows, in the columns' order).
    pub fn input(mut self, name: &str, columns: &str, rows: Vec<Row>) -> JobTest {
        let columns = columns
            .split(',')
            .map(str::trim)
            .map(String::from)
            .collect();
        self.inputs.push((name.to_string(), columns, rows));
        self
    }

    /// The seed of the random epochs (change it to explore other cuts).
    pub fn seed(mut self, seed: u64) -> JobTest {
        self.seed = seed;
        self
    }

    /// Plans the job over the inputs, as a runner does.
    pub fn plan(&self) -> Result<Plan, String> {
        let spec = self.job.spec();
        let params = Params::resolve(&spec, &self.params).map_err(|e| e.to_string())?;
        let mut schemas = Vec::new();
        for input in &spec.inputs {
            let (_, columns, _) = self.given(input.name)?;
            schemas.push(InputSchema {
                name: input.name.to_string(),
                columns: columns.clone(),
            });
        }
        for (name, _, _) in &self.inputs {
            if !spec.inputs.iter().any(|i| i.name == name) {
                return Err(format!("job {} has no input {name:?}", spec.name));
            }
        }
        plan_job(&*self.job, &params, schemas, &NoData).map_err(|e| format!("{e}"))
    }

    /// Runs the job once, on one worker in one epoch: per output name, its
    /// rows sorted, each repeated by its multiplicity.
    pub fn run(&self) -> Result<BTreeMap<String, Vec<Row>>, String> {
        let plan = self.plan()?;
        let inputs = self.projected(&plan)?;
        let out = run_projected(&plan, inputs, 1).map_err(|e| e.to_string())?;
        Ok(named(&plan, out))
    }

    /// Runs the job on 1, 2 and 3 workers in one epoch, and on 2 and 3
    /// workers over random epochs with retractions; panics unless every run
    /// gives the same output. Returns that output: per output name, its
    /// rows sorted, each repeated by its multiplicity.
    pub fn check(&self) -> BTreeMap<String, Vec<Row>> {
        let plan = self.plan().unwrap_or_else(|e| panic!("cannot plan: {e}"));
        let inputs = self.projected(&plan).unwrap_or_else(|e| panic!("{e}"));
        let run = |what: &str, result: Result<Vec<OutputRows>, crate::runner::RunError>| {
            result.unwrap_or_else(|e| panic!("{what}: {e}"))
        };
        let batch = run("1 worker", run_projected(&plan, inputs.clone(), 1));
        for workers in [2, 3] {
            let other = run("batch", run_projected(&plan, inputs.clone(), workers));
            assert_same(
                &plan,
                &batch,
                &other,
                &format!("{workers} workers, one epoch"),
            );
        }
        for (round, workers) in [(0u64, 2), (1, 3), (2, 1)] {
            let timed = self.epochs_of(&inputs, self.seed.wrapping_add(round));
            let other = run("epochs", run_timed(&plan, timed, Updates::Any, workers));
            let what = format!("{workers} workers, random epochs with retractions (round {round})");
            assert_same(&plan, &batch, &other, &what);
        }
        named(&plan, batch)
    }

    /// The given input `name`.
    fn given(&self, name: &str) -> Result<&(String, Vec<String>, Vec<Row>), String> {
        let mut found = self.inputs.iter().filter(|(n, _, _)| n == name);
        match (found.next(), found.next()) {
            (Some(input), None) => Ok(input),
            (None, _) => Err(format!("no rows given for input {name:?}")),
            (Some(_), Some(_)) => Err(format!("input {name:?} given twice")),
        }
    }

    /// Each input's rows (in spec order), projected and typed as the plan
    /// reads them.
    fn projected(&self, plan: &Plan) -> Result<Vec<Vec<(Row, isize)>>, String> {
        let rows = plan
            .inputs
            .iter()
            .map(|p| self.given(&p.input).map(|(_, _, rows)| rows.clone()))
            .collect::<Result<Vec<_>, String>>()?;
        project(plan, rows).map_err(|e| e.to_string())
    }

    /// The inputs cut into random epochs: every row arrives at a random
    /// epoch, and some rows are also retracted at a later epoch and
    /// inserted again after that (so the accumulated inputs are unchanged).
    fn epochs_of(&self, inputs: &[Vec<(Row, isize)>], seed: u64) -> Vec<Vec<(Row, Time, isize)>> {
        let mut rng = SplitMix(seed);
        let epochs = self.epochs as u64;
        inputs
            .iter()
            .map(|rows| {
                let mut timed = Vec::new();
                for (row, n) in rows {
                    let t = rng.below(epochs);
                    timed.push((row.clone(), t, *n));
                    if rng.below(3) == 0 {
                        let gone = t + 1 + rng.below(epochs);
                        let back = gone + 1 + rng.below(epochs);
                        timed.push((row.clone(), gone, -n));
                        timed.push((row.clone(), back, *n));
                    }
                }
                timed.sort_by_key(|(_, t, _)| *t);
                timed
            })
            .collect()
    }
}

/// Panics with both outputs unless `a` and `b` are the same.
fn assert_same(plan: &Plan, a: &[OutputRows], b: &[OutputRows], what: &str) {
    for ((schema, a), b) in plan.outputs.iter().zip(a).zip(b) {
        assert!(
            a == b,
            "output {} differs between 1 worker in one epoch and {what}:\n  one epoch: {a:?}\n  {what}: {b:?}",
            schema.name
        );
    }
}

/// Outputs by name, rows repeated by multiplicity.
fn named(plan: &Plan, outputs: Vec<OutputRows>) -> BTreeMap<String, Vec<Row>> {
    plan.outputs
        .iter()
        .zip(outputs)
        .map(|(schema, rows)| {
            let rows = rows
                .into_iter()
                .flat_map(|(row, n)| std::iter::repeat_n(row, n.max(0) as usize))
                .collect();
            (schema.name.clone(), rows)
        })
        .collect()
}

/// Plans `job` with `params` over inputs whose columns are given as
/// `"a,b,c"` (in spec order), checks it as [`JobTest::check`] does, and
/// returns each output's rows (in plan order), sorted, repeated by
/// multiplicity: the shorthand of the built-in jobs' unit tests.
pub fn run_job(
    job: impl Job + 'static,
    params: &[(&str, &str)],
    columns: &[&str],
    inputs: Vec<Vec<Row>>,
) -> Vec<Vec<Row>> {
    let spec = job.spec();
    let mut test = JobTest::of(job);
    for (k, v) in params {
        test = test.param(k, v);
    }
    for ((input, columns), rows) in spec.inputs.iter().zip(columns).zip(inputs) {
        test = test.input(input.name, columns, rows);
    }
    let mut out = test.check();
    // Without --table, outputs keep their declared names.
    spec.outputs
        .iter()
        .map(|o| out.remove(o.name).unwrap_or_default())
        .collect()
}

/// A small deterministic random number generator (SplitMix64): the epochs
/// of a check depend on its seed only.
struct SplitMix(u64);

impl SplitMix {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}
