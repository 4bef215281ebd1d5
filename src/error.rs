//! The crate's error: one variant per layer, each layer's error kept whole so
//! that callers can tell bad input from a failed disk from a bug.

use thiserror::Error;

/// Any kappa error.
#[derive(Debug, Error)]
pub enum Error {
    /// Parameters or inputs do not fit the job.
    #[error(transparent)]
    Plan(#[from] crate::job::PlanError),
    /// Reading an input failed.
    #[error(transparent)]
    Source(#[from] crate::source::SourceError),
    /// Running the dataflow failed.
    #[error(transparent)]
    Run(#[from] crate::runner::RunError),
    /// Committing outputs failed.
    #[error(transparent)]
    Sink(#[from] crate::sink::files::SinkError),
}
