//! kappa's integration tests: the real binary on files, and property tests
//! against plain reference implementations.

mod checkpoints;
mod cli;
mod cluster;
mod cluster_stream;
mod common;
mod crash_campaign;
mod disk_faults;
mod event_time;
mod event_time_props;
mod extreme_params;
#[cfg(feature = "kafka")]
mod kafka;
mod log_cli;
mod log_crash;
mod nexmark;
mod postgres;
mod properties;
mod readme;
mod reliability;
mod reprocess;
mod sql;
mod status;
mod stream;
mod table_cli;
