//! Timely's configuration as command-line flags, shared by every runner.

use std::path::PathBuf;

use clap::Args;

use crate::runner::WorkerConfig;

/// The most worker threads per process on a machine with at most this many
/// cores. Each worker is an OS thread with its own copy of the dataflow, and
/// timely connects every pair of workers, so start-up time and memory grow
/// with the square of the count: measured on 2 cores, a 40-row count-by
/// took 2.4 s on 64 workers, 32 s on 256 and 4 min 23 s (3 GB) on 512.
/// Beyond the cores they buy no parallelism, only that cost.
pub const MAX_WORKERS: usize = 64;

/// The most worker threads per process here: [`MAX_WORKERS`], or one per
/// core on a machine with more.
pub fn max_workers() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    MAX_WORKERS.max(cores)
}

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
    /// How long a process of a cluster run waits without a heartbeat from
    /// another (a network partition, a stopped process) before every
    /// process it can reach exits with an error; 0: for ever.
    #[arg(long, value_name = "SECONDS", default_value_t = WorkerConfig::PEER_TIMEOUT.as_secs_f64())]
    peer_timeout: f64,
}

impl WorkerArgs {
    pub fn config(&self) -> anyhow::Result<WorkerConfig> {
        let max = max_workers();
        let threads = match self.workers {
            Some(n) if (1..=max).contains(&n) => n,
            Some(_) => anyhow::bail!(
                "--workers must be from 1 to {max} (more threads than cores add no \
                 parallelism; timely connects every pair, so each one costs start-up time)"
            ),
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        if self.process >= self.processes.max(1) {
            anyhow::bail!(
                "--process {} is not below --processes {}",
                self.process,
                self.processes
            );
        }
        if !(self.peer_timeout >= 0.0 && self.peer_timeout <= 86_400.0) {
            anyhow::bail!("--peer-timeout must be from 0 (wait for ever) to 86400 seconds");
        }
        let peer_timeout = (self.peer_timeout > 0.0)
            .then(|| std::time::Duration::from_secs_f64(self.peer_timeout.max(0.1)));
        Ok(WorkerConfig {
            threads,
            processes: self.processes.max(1),
            process: self.process,
            hostfile: self.hostfile.clone(),
            connect_timeout: std::time::Duration::from_secs(self.connect_timeout),
            peer_timeout,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workers(n: usize) -> anyhow::Result<WorkerConfig> {
        WorkerArgs {
            workers: Some(n),
            processes: 1,
            process: 0,
            hostfile: None,
            connect_timeout: 1,
            peer_timeout: 10.0,
        }
        .config()
    }

    #[test]
    fn worker_counts_are_bounded() {
        assert_eq!(workers(1).unwrap().threads, 1);
        assert_eq!(workers(max_workers()).unwrap().threads, max_workers());
        for n in [0, max_workers() + 1, 1 << 20] {
            let e = workers(n).unwrap_err().to_string();
            assert!(e.contains("--workers must be from 1 to"), "{e}");
        }
    }
}
