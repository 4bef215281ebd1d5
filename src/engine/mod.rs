//! The orchestration every command is made of, as a library: a job planned
//! over files and run to committed outputs ([`Batch`]), a job planned over
//! log topics into a deployment's tables — created, matched, resumed or
//! built beside the live one ([`OnLog`]) — and a table version checked
//! against its recomputation ([`verify`]).
//!
//! The CLI is a thin layer over this module (flags in, messages out); a
//! program drives the same runs from Rust with the same results and errors.
//!
//! Invariants: a job is always planned through [`crate::job::plan_job`]
//! (so the plan fits the spec); a deployment is resumed only by the job,
//! version, parameters and inputs that created it ([`OnLog::matches`]).

mod batch;
mod error;
mod on_log;
mod reading;
mod verify;

pub use batch::{Batch, BatchOutput, BatchPlan, BatchReport};
pub use error::EngineError;
pub use on_log::{OnLog, Started, StreamSettings, StreamSummary};
pub use verify::{ReadingOverride, Verification, verify};
