//! kappa: a batch-and-stream unified dataflow engine on timely and
//! differential dataflow. One job, written once, gives the same answer on a
//! pile of files, on a live log, and on replay.
//!
//! The layers, bottom up:
//! - [`value`], [`schema`]: typed values and rows; column types, input and
//!   output schemas.
//! - [`job`]: the job contract — a spec, a planner, a dataflow builder —
//!   shared by every runner. Jobs live in [`jobs`] (the top-level `jobs/`
//!   folder), one file each.
//! - [`ops`]: reusable differential operators the jobs are built from
//!   (aggregates, relational joins).
//! - [`source`]: readers turning CSV / JSON lines / text files into typed rows,
//!   split across workers, with located errors for bad rows.
//! - [`sink`]: atomic commit of outputs.
//! - [`runner`]: drives a planned job on timely workers (batch over files;
//!   in memory for tests).
//! - [`cli`]: the `kappa` command line.

pub mod cli;
pub mod error;
pub mod job;
#[path = "../jobs/mod.rs"]
pub mod jobs;
pub mod ops;
pub mod runner;
pub mod schema;
pub mod sink;
pub mod source;
pub mod value;
