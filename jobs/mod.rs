//! The built-in jobs. Adding one is one new file here plus one line in
//! [`builtin`]. They are written against the public API ([`crate::prelude`])
//! exactly as a job in a user's crate is.
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

use std::sync::Arc;

use crate::job::Job;

/// Every built-in job, in the order `kappa jobs` lists them.
pub fn builtin() -> Vec<Arc<dyn Job>> {
    vec![
        Arc::new(group_by::GroupBy),
        Arc::new(count_by::CountBy),
        Arc::new(join::Join),
        Arc::new(distinct::Distinct),
        Arc::new(top_k::TopK),
        Arc::new(wordcount::WordCount),
        Arc::new(sessionize::Sessionize),
        Arc::new(page_views::PageViews),
        Arc::new(window_agg::WindowAgg),
        Arc::new(ad_clicks::AdClicks),
        Arc::new(enrich::Enrich),
        Arc::new(&nexmark::q0::Q0),
        Arc::new(&nexmark::q1::Q1),
        Arc::new(&nexmark::q2::Q2),
        Arc::new(&nexmark::q3::Q3),
        Arc::new(&nexmark::q4::Q4),
        Arc::new(&nexmark::q5::Q5),
        Arc::new(&nexmark::q7::Q7),
        Arc::new(&nexmark::q8::Q8),
        Arc::new(&nexmark::q9::Q9),
        Arc::new(followers::Followers),
    ]
}

/// The built-in job with this CLI name.
pub fn find(name: &str) -> Option<Arc<dyn Job>> {
    builtin().into_iter().find(|j| j.spec().name == name)
}
