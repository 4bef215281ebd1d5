//! The job registry. Adding a job is one new file here plus one line in [`ALL`].
//!
//! Each job file opens with a doc comment giving its intent and schema, holds
//! its planner (parameters and input columns in, output schema and dataflow
//! out) and its unit tests.

mod count_by;
mod distinct;
mod followers;
mod group_by;
mod join;
mod page_views;
mod sessionize;
mod top_k;
mod wordcount;

use kappa_job_prelude::*;

/// Every built-in job, in the order `kappa jobs` lists them.
pub static ALL: &[&dyn Job] = &[
    &group_by::GroupBy,
    &count_by::CountBy,
    &join::Join,
    &distinct::Distinct,
    &top_k::TopK,
    &wordcount::WordCount,
    &sessionize::Sessionize,
    &page_views::PageViews,
    &followers::Followers,
];

/// The job with this CLI name.
pub fn find(name: &str) -> Option<&'static dyn Job> {
    ALL.iter().copied().find(|j| j.spec().name == name)
}

/// What job files import.
mod kappa_job_prelude {
    pub use std::sync::Arc;

    pub use crate::job::{
        Dataflow, InputFormat, InputSpec, Job, JobSpec, OutputSpec, ParamSpec, Params, Plan,
        PlanError, Rows,
    };
    pub use crate::schema::{ColumnType, InputSchema, OutputSchema, Projection};
    pub use crate::value::{Row, Value};
}

#[cfg(test)]
pub(crate) mod testing;
