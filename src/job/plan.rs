//! A planned job: the columns it reads of each input, the schema of each
//! output, and the dataflow between them — checked against the job's spec
//! before any runner sees it, and instantiated the same way by every runner.
//!
//! Invariant: a [`Plan`] a runner holds came through [`plan_job`], so its
//! inputs are in spec order, each reads at least the columns its spec
//! declares (with the declared types), and it plans every declared output
//! exactly once.

use std::sync::Arc;

use super::io::{BuildError, Inputs, Outputs, Schemas};
use super::{
    BuildContext, DataContext, Held, Job, Params, PlanError, Rows, Time, Updates, Watermark,
};
use crate::schema::{InputSchema, OutputSchema, Projection};
use crate::value::Row;

/// A planned job, ready to run.
#[derive(Clone)]
pub struct Plan {
    /// Per input (spec order once checked): the columns read and their types.
    pub inputs: Vec<Projection>,
    /// Per output: its name (the table's name, which `--table` may change),
    /// columns and key.
    pub outputs: Vec<OutputSchema>,
    dataflow: Arc<dyn Dataflow>,
    /// The outputs' names as the job declared them, which the dataflow
    /// uses whatever the tables are called.
    declared: Vec<String>,
}

/// The dataflow of a planned job. `build` is called once per worker, inside
/// that worker's dataflow scope.
pub trait Dataflow: Send + Sync + 'static {
    /// Builds the computation from the input collections (take them by
    /// name) to the output collections (give them by name).
    fn build<'s>(
        &self,
        inputs: Inputs<'s>,
        context: &BuildContext<'s>,
    ) -> Result<Outputs<'s>, BuildError>;
}

/// An input session feeding one of a plan's input collections.
pub type RowInput = differential_dataflow::input::InputSession<Time, Row, isize>;

/// The input through which a runner announces [`Watermark`]s.
pub type WatermarkInput = timely::dataflow::InputHandleVec<Time, Watermark>;

/// Plans `job` for `params` over inputs with these schemas (spec order),
/// and checks the plan against the job's spec: the one way every runner
/// plans a job.
pub fn plan_job(
    job: &dyn Job,
    params: &Params,
    schemas: Vec<InputSchema>,
    data: &dyn DataContext,
) -> Result<Plan, PlanError> {
    let spec = job.spec();
    let schemas = Schemas::new(&spec, schemas);
    let plan = job.plan(params, &schemas, data)?.checked(&schemas)?;
    plan.dry_build().map_err(|e| PlanError::JobBug {
        job: spec.name.to_string(),
        problem: e.to_string(),
    })?;
    Ok(plan)
}

impl Plan {
    /// A plan reading `inputs` (one projection per input, made with
    /// [`Schemas::project`]), producing `outputs` through `dataflow`.
    pub fn new(
        inputs: Vec<Projection>,
        outputs: Vec<OutputSchema>,
        dataflow: impl Dataflow,
    ) -> Plan {
        let declared = outputs.iter().map(|o| o.name.clone()).collect();
        Plan {
            inputs,
            outputs,
            dataflow: Arc::new(dataflow),
            declared,
        }
    }

    /// Builds the dataflow once on one worker, with empty inputs: a job
    /// whose dataflow cannot be built fails here, before any data is read,
    /// rather than on every worker of a run.
    fn dry_build(&self) -> Result<(), BuildError> {
        let plan = self.clone();
        timely::execute_directly(move |worker| {
            worker.dataflow::<Time, _, _>(|scope| {
                plan.instantiate(scope, Updates::InsertOnly).map(|_| ())
            })
        })
    }

    /// The plan with its inputs in spec order, or why it does not fit the
    /// spec (a bug in the job, reported as an error rather than a panic).
    fn checked(mut self, schemas: &Schemas) -> Result<Plan, PlanError> {
        let bug = |problem: String| PlanError::JobBug {
            job: schemas.job().to_string(),
            problem,
        };
        let mut ordered = Vec::with_capacity(schemas.len());
        for (spec, schema) in schemas.iter() {
            let mut found = self.inputs.iter().filter(|p| p.input == spec.name);
            let projection = match (found.next(), found.next()) {
                (Some(p), None) => p.clone(),
                (None, _) => {
                    return Err(bug(format!("it reads no columns of input {}", spec.name)));
                }
                (Some(_), Some(_)) => {
                    return Err(bug(format!("it plans input {} twice", spec.name)));
                }
            };
            for (column, ty) in spec.columns {
                let at = schema.index(column)?;
                if !projection.columns.contains(&(at, *ty)) {
                    return Err(bug(format!(
                        "input {} declares column {column} ({ty}), which the plan does not read as declared",
                        spec.name
                    )));
                }
            }
            ordered.push(projection);
        }
        if let Some(p) = self
            .inputs
            .iter()
            .find(|p| !schemas.iter().any(|(s, _)| s.name == p.input))
        {
            return Err(bug(format!("it reads an undeclared input {}", p.input)));
        }
        let outputs = schemas.outputs();
        if outputs.is_empty() {
            return Err(bug("it declares no output".into()));
        }
        for name in &self.declared {
            if !outputs.contains(&name.as_str()) {
                return Err(bug(format!(
                    "it plans an undeclared output {name} (declared: {})",
                    outputs.join(", ")
                )));
            }
        }
        for name in &outputs {
            match self.declared.iter().filter(|d| d == name).count() {
                1 => {}
                0 => return Err(bug(format!("it does not plan its output {name}"))),
                _ => return Err(bug(format!("it plans output {name} twice"))),
            }
        }
        self.inputs = ordered;
        Ok(self)
    }

    /// Creates the plan's input collections in `scope` and builds its
    /// dataflow on them: the input sessions (spec order) and the output
    /// collections (plan order). Every runner starts here.
    pub fn instantiate<'s>(
        &self,
        scope: timely::dataflow::Scope<'s, Time>,
        updates: Updates,
    ) -> Result<(Vec<RowInput>, Vec<Rows<'s>>), BuildError> {
        // Dropping the watermark input closes it: nothing is announced.
        let (sessions, _watermarks, outputs) =
            self.instantiate_with_watermarks(scope, updates, Held::default())?;
        Ok((sessions, outputs))
    }

    /// As [`Plan::instantiate`], also returning the input through which the
    /// runner announces watermarks (see [`BuildContext`]); the dataflow
    /// keeps `held` at the state it holds that they can release.
    pub fn instantiate_with_watermarks<'s>(
        &self,
        scope: timely::dataflow::Scope<'s, Time>,
        updates: Updates,
        held: Held,
    ) -> Result<(Vec<RowInput>, WatermarkInput, Vec<Rows<'s>>), BuildError> {
        use differential_dataflow::input::Input;
        use timely::dataflow::operators::Input as _;
        let (sessions, collections): (Vec<_>, Vec<_>) = self
            .inputs
            .iter()
            .map(|_| scope.new_collection::<Row, isize>())
            .unzip();
        let (watermark_input, watermarks) = scope.new_input::<Vec<Watermark>>();
        let context = BuildContext {
            watermarks,
            updates,
            held,
        };
        let names = self.inputs.iter().map(|p| p.input.clone());
        let inputs = Inputs::new(names.zip(collections).collect());
        let outputs = self.dataflow.build(inputs, &context)?;
        let outputs = outputs.in_order(&self.declared)?;
        Ok((sessions, watermark_input, outputs))
    }
}
