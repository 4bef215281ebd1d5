//! What a job file imports: `use kappa::prelude::*;`. The built-in jobs in
//! `jobs/` import exactly this, as a job in a user's crate does.

pub use crate::job::Typed;
pub use crate::job::{
    BuildContext, BuildError, DataContext, Dataflow, InputFormat, InputSpec, Inputs, Job, JobSpec,
    LATE_PARAMS, NoData, OutputSpec, Outputs, ParamSpec, Params, Plan, PlanError, Rows, Schemas,
    Updates,
};
pub use crate::schema::{ColumnType, InputSchema, OutputSchema, Projection};
pub use crate::value::{Row, Value};
