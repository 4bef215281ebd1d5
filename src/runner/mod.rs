//! Runners: what drives a planned job's dataflow on timely workers.
//!
//! Every runner takes a [`WorkerConfig`] (timely's configuration: threads
//! now; processes, this process' index and a host file for cluster mode), so
//! that running across machines is a flag away rather than a rewrite.

pub mod batch;
pub(crate) mod combine;
mod commit;
pub mod memory;
pub mod order;
mod outputs;
pub mod stream;
pub mod verify;

use std::path::PathBuf;

use thiserror::Error;
use timely::CommunicationConfig;

use crate::source::SourceError;

/// Timely's worker configuration, as the CLI gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerConfig {
    /// Worker threads per process.
    pub threads: usize,
    /// Number of processes (1 = this process only).
    pub processes: usize,
    /// This process' index among them.
    pub process: usize,
    /// One `host:port` per line, a line per process.
    pub hostfile: Option<PathBuf>,
}

impl WorkerConfig {
    /// `threads` workers in this process.
    pub fn threads(threads: usize) -> Self {
        WorkerConfig {
            threads: threads.max(1),
            processes: 1,
            process: 0,
            hostfile: None,
        }
    }

    /// Workers across all processes.
    pub fn total_workers(&self) -> usize {
        self.threads * self.processes
    }

    /// The timely configuration.
    pub fn timely_config(&self) -> Result<timely::Config, RunError> {
        if self.processes <= 1 {
            return Ok(timely::Config::process(self.threads));
        }
        // The batch runner gathers outputs from its own process' workers; until
        // outputs are exchanged to process 0, a multi-process batch run would
        // write only part of the result, so refuse it rather than be wrong.
        Err(RunError::Unsupported(format!(
            "{} processes: this runner runs in one process for now (use --workers)",
            self.processes
        )))
    }

    /// The cluster configuration (used once runners gather across processes).
    pub fn cluster_config(&self) -> Result<timely::Config, RunError> {
        let hostfile = self
            .hostfile
            .as_ref()
            .ok_or_else(|| RunError::Unsupported("--processes needs --hostfile".into()))?;
        let text = std::fs::read_to_string(hostfile)
            .map_err(|e| RunError::Source(SourceError::io(hostfile, e)))?;
        let addresses: Vec<String> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .take(self.processes)
            .collect();
        if addresses.len() < self.processes {
            return Err(RunError::Unsupported(format!(
                "{} lists {} hosts for {} processes",
                hostfile.display(),
                addresses.len(),
                self.processes
            )));
        }
        Ok(timely::Config {
            communication: CommunicationConfig::Cluster {
                threads: self.threads,
                process: self.process,
                addresses,
                report: false,
                zerocopy: false,
            },
            worker: timely::WorkerConfig::default(),
        })
    }
}

/// Why a run failed.
#[derive(Debug, Error)]
pub enum RunError {
    /// An input could not be read, or held a bad row.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// Timely could not start its workers.
    #[error("cannot start workers: {0}")]
    Timely(String),
    /// The job's dataflow could not be built: a bug in the job.
    #[error("cannot build the job's dataflow: {0}")]
    Build(#[from] crate::job::BuildError),
    /// A row given to the in-memory runner does not fit its column type.
    #[error("input {input}: row {row}: {problem}")]
    BadMemoryRow {
        /// The job input the row was given for.
        input: String,
        /// The row's index (from 0) among that input's rows.
        row: usize,
        /// What does not fit.
        problem: String,
    },
    /// A worker panicked: a bug in a job or in kappa.
    #[error("a worker failed: {0}")]
    WorkerPanic(String),
    /// A job produced a negative count for a row: a bug in the job.
    #[error("job bug: output {output} holds row {row} {count} times")]
    NegativeMultiplicity {
        /// The output.
        output: String,
        /// The row, in debug form.
        row: String,
        /// Its consolidated count, below zero.
        count: isize,
    },
    /// The table store failed.
    #[error(transparent)]
    Table(#[from] crate::table::TableError),
    /// The log does not hold what a replay needs (retention deleted it).
    #[error("cannot replay: {0}")]
    Replay(String),
    /// The log no longer holds what the deployment applied: it ends before
    /// the committed offset, or the record there is not the one applied (a
    /// torn tail cut off and the offset reused, a restored older copy).
    #[error(
        "topic {topic} partition {partition}: the log lost data that {deployment} applied: {detail} \
         (committed offset {committed}, log end {log_end}); refusing to resume on a log that rewrote \
         history: restore the log, or rebuild from what it holds with `kappa reprocess`"
    )]
    LogRewritten {
        /// The deployment being resumed (its outputs and version).
        deployment: String,
        /// The topic.
        topic: String,
        /// The partition of the topic.
        partition: u32,
        /// The deployment's committed offset: the next one it would read.
        committed: u64,
        /// The partition's next offset to be written now.
        log_end: u64,
        /// What does not match: the end, or the last applied record.
        detail: String,
    },
    /// A configuration this runner cannot run (yet).
    #[error("unsupported: {0}")]
    Unsupported(String),
}

/// One output's rows with their multiplicities (sorted once consolidated).
pub type OutputRows = Vec<(crate::value::Row, isize)>;
