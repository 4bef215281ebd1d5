//! Reusable dataflow fragments, as extension traits on row collections: one
//! operator per file, no I/O. Jobs compose them.

pub mod aggregate;
pub mod join;
pub mod skew;
