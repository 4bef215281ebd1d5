//! Reusable dataflow fragments, as extension traits on row collections: one
//! operator per file, no I/O. Jobs compose them.

pub mod aggregate;
pub mod announced;
pub mod closing_interval_join;
pub mod closing_window;
pub mod hash_join;
pub mod interval_join;
pub mod join;
pub mod pending;
pub mod skew;
pub mod temporal_join;
pub mod window;
