//! Runners: what drives a planned job's dataflow on timely workers.
//!
//! Every runner takes a [`WorkerConfig`] (timely's configuration: threads
//! now; processes, this process' index and a host file for cluster mode), so
//! that running across machines is a flag away rather than a rewrite.

pub mod batch;
pub mod checkpoint;
mod cluster;
pub(crate) mod combine;
mod commit;
mod epochs;
mod heartbeat;
pub mod memory;
mod network;
pub mod order;
mod outputs;
pub mod spill;
pub mod stream;
pub mod verify;

use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

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
    /// How long a cluster run waits for its other processes to connect.
    pub connect_timeout: Duration,
    /// How long a process of a cluster run goes without a heartbeat from
    /// another before the run ends (`None`: it waits for ever).
    pub peer_timeout: Option<Duration>,
}

impl WorkerConfig {
    /// How long a cluster run waits for its peers unless told otherwise.
    pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);
    /// How long a cluster run waits for a silent peer unless told otherwise.
    pub const PEER_TIMEOUT: Duration = Duration::from_secs(10);

    /// `threads` workers in this process.
    pub fn threads(threads: usize) -> Self {
        WorkerConfig {
            threads: threads.max(1),
            processes: 1,
            process: 0,
            hostfile: None,
            connect_timeout: Self::CONNECT_TIMEOUT,
            peer_timeout: Some(Self::PEER_TIMEOUT),
        }
    }

    /// Workers across all processes.
    pub fn total_workers(&self) -> usize {
        self.threads * self.processes
    }

    /// Starts `func` on this process' workers: threads in this process, or
    /// this process' part of a cluster run (connected to the others first,
    /// with heartbeats that last as long as what is returned).
    #[allow(clippy::type_complexity)]
    fn execute<T, F>(
        &self,
        func: F,
    ) -> Result<
        (
            timely::communication::WorkerGuards<T>,
            Option<heartbeat::Heartbeats>,
        ),
        RunError,
    >
    where
        T: Send + 'static,
        F: Fn(&mut timely::worker::Worker) -> T + Send + Sync + 'static,
    {
        if self.processes <= 1 {
            return timely::execute(timely::Config::process(self.threads), func)
                .map(|guards| (guards, None))
                .map_err(RunError::Timely);
        }
        network::execute(self, &self.addresses()?, func)
    }

    /// Runs `func` on this process' workers to the end; what each returned,
    /// in worker order. A worker's panic is an error; in a cluster run, so
    /// is a lost peer (which makes every worker here panic), reported as the
    /// process that was lost rather than as the panics that followed.
    pub fn run<T, F>(&self, func: F) -> Result<Vec<T>, RunError>
    where
        T: Send + 'static,
        F: Fn(&mut timely::worker::Worker) -> T + Send + Sync + 'static,
    {
        let joined = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.execute(func).map(|(guards, heartbeats)| {
                let joined = guards.join();
                drop(heartbeats);
                joined
            })
        }));
        if let Some((peer, how)) = network::lost_peer() {
            let address = self.addresses().ok().and_then(|a| a.get(peer).cloned());
            return Err(RunError::Cluster(format!(
                "lost process {peer}{}: {how}; every process of the run stops, and nothing of the current epoch was committed",
                address.map_or(String::new(), |a| format!(" ({a})"))
            )));
        }
        match joined {
            Err(panic) => Err(RunError::WorkerPanic(network::panic_message(&*panic))),
            Ok(results) => results?
                .into_iter()
                .map(|r| r.map_err(RunError::WorkerPanic))
                .collect(),
        }
    }

    /// This process is the first of its run (the one that commits).
    pub fn is_first_process(&self) -> bool {
        self.process == 0
    }

    /// The processes' addresses: the host file's first `processes` lines.
    fn addresses(&self) -> Result<Vec<String>, RunError> {
        let hostfile = self
            .hostfile
            .as_ref()
            .ok_or_else(|| RunError::Cluster("--processes needs --hostfile".into()))?;
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
            return Err(RunError::Cluster(format!(
                "{} lists {} hosts for {} processes",
                hostfile.display(),
                addresses.len(),
                self.processes
            )));
        }
        Ok(addresses)
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
    /// A batch run's output rows, past its sort memory, could not be
    /// sorted in temporary files.
    #[error("cannot sort output rows in temporary files in {}: {cause}", dir.display())]
    Spill {
        /// The directory of the temporary files.
        dir: PathBuf,
        /// The operating system's error.
        cause: std::io::Error,
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
    /// The processes of a cluster run do not agree, or cannot talk.
    #[error("cluster: {0}")]
    Cluster(String),
    /// The first process could not finish a batch run: merge and commit
    /// its outputs ([`batch::Finish`]).
    #[error("{0}")]
    Finish(String),
    /// Another process of a cluster run failed (its own error is reported there).
    #[error("process {process} failed: {message}")]
    Peer {
        /// The process whose worker failed.
        process: usize,
        /// Its error.
        message: String,
    },
    /// A changelog sink could not be set up.
    #[error("sink {output}: {message}")]
    Sink {
        /// The output the sink carries.
        output: String,
        /// What went wrong.
        message: String,
    },
    /// A configuration this runner cannot run (yet).
    #[error("unsupported: {0}")]
    Unsupported(String),
}

/// One output's rows with their multiplicities (sorted once consolidated).
pub type OutputRows = Vec<(crate::value::Row, isize)>;
