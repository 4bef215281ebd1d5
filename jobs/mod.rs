//! The job registry. Adding a job is one new file here plus one line in [`ALL`].
//!
//! Each job file opens with a doc comment giving its intent and schema, holds
//! its planner (parameters and input columns in, output schema and dataflow
//! out) and its unit tests.

mod ad_clicks;
mod count_by;
mod distinct;
mod enrich;
mod followers;
mod group_by;
mod join;
pub mod nexmark;
mod page_views;
mod sessionize;
mod top_k;
mod window_agg;
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
    &window_agg::WindowAgg,
    &ad_clicks::AdClicks,
    &enrich::Enrich,
    &nexmark::q0::Q0,
    &nexmark::q1::Q1,
    &nexmark::q2::Q2,
    &nexmark::q3::Q3,
    &nexmark::q4::Q4,
    &nexmark::q5::Q5,
    &nexmark::q7::Q7,
    &nexmark::q8::Q8,
    &nexmark::q9::Q9,
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
        BuildContext, Dataflow, InputFormat, InputSpec, Job, JobSpec, LATE_PARAMS, OutputSpec,
        ParamSpec, Params, Plan, PlanError, Rows, Updates,
    };
    pub use crate::schema::{ColumnType, InputSchema, OutputSchema, Projection};
    pub use crate::value::{Row, Value};
}

#[cfg(test)]
pub(crate) mod testing;
