//! Timely's configuration as command-line flags, shared by every runner.

use std::path::PathBuf;

use clap::Args;

use crate::runner::WorkerConfig;

/// Worker threads per process: each is an OS thread with its own copy of
/// the dataflow, so beyond a few per core they only cost memory.
pub const MAX_WORKERS: usize = 1024;

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Worker threads in this process [default: the number of cores].
    #[arg(short, long, value_name = "N")]
    workers: Option<usize>,
    /// Number of processes in a cluster run (each started with its own --process).
    #[arg(long, value_name = "N", default_value_t = 1)]
    processes: usize,
    /// This process' index in a cluster run.
    #[arg(long, value_name = "I", default_value_t = 0)]
    process: usize,
    /// File with one host:port per process, for cluster runs.
    #[arg(long, value_name = "FILE")]
    hostfile: Option<PathBuf>,
    /// How long a cluster run waits for its other processes to connect.
    #[arg(long, value_name = "SECONDS", default_value_t = WorkerConfig::CONNECT_TIMEOUT.as_secs())]
    connect_timeout: u64,
}

impl WorkerArgs {
    pub fn config(&self) -> anyhow::Result<WorkerConfig> {
        let threads = match self.workers {
            Some(n @ 1..=MAX_WORKERS) => n,
            Some(_) => anyhow::bail!("--workers must be from 1 to {MAX_WORKERS}"),
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        if self.process >= self.processes.max(1) {
            anyhow::bail!(
                "--process {} is not below --processes {}",
                self.process,
                self.processes
            );
        }
        Ok(WorkerConfig {
            threads,
            processes: self.processes.max(1),
            process: self.process,
            hostfile: self.hostfile.clone(),
            connect_timeout: std::time::Duration::from_secs(self.connect_timeout),
        })
    }
}
