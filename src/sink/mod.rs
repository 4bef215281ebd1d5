//! Writers of job outputs. `files` commits a batch run's outputs to a
//! directory atomically; `changelog` sends a stream's committed changes on
//! to an external log (Kafka, in `kafka`); `writeback` has the disk write
//! a large file while it is being written. The tables of stream runs are
//! the table store's ([`crate::table`]).

pub mod changelog;
pub mod files;
#[cfg(feature = "kafka")]
mod kafka;
mod writeback;
