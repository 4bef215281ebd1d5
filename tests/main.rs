//! kappa's integration tests: the real binary on files, and property tests
//! against plain reference implementations.

mod cli;
mod properties;
