//! Writers of job outputs. `files` commits a batch run's outputs to a
//! directory atomically; the table writer of stream runs will sit beside it.

pub mod files;
