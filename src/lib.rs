//! kappa: a batch-and-stream unified dataflow engine on timely and
//! differential dataflow. One job, written once, gives the same answer on a
//! pile of files, on a live log, and on replay.
//!
//! The layers, bottom up:
//! - [`value`], [`schema`]: typed values and rows; column types, input and
//!   output schemas. [`row_map`]: the hash map keyed by rows that the
//!   per-row probes (input combiner, pre-aggregation) use.
//! - [`time`]: event timestamps (epoch integers, RFC 3339 text), their
//!   units, and durations such as `10m`.
//! - [`job`]: the job contract — a spec, a planner, a dataflow builder —
//!   shared by every runner. Jobs live in [`jobs`] (the top-level `jobs/`
//!   folder), one file each.
//! - [`log`]: the retained log — topics of partitioned, durable, replayable
//!   records on local disk, with retention, compaction and consumer groups;
//!   rows travel in it encoded as described in [`log::rows`].
//! - [`ops`]: reusable differential operators the jobs are built from
//!   (aggregates, relational joins and their skew strategies, event-time
//!   windows, interval and temporal joins).
//! - [`mod@format`]: the rules of the text formats (CSV, JSON lines) that every
//!   reader of them shares.
//! - [`source`]: readers turning CSV / JSON lines / text files and log topics
//!   into typed rows, split across workers, with located errors for bad rows
//!   and the late-event filter.
//! - [`sink`]: atomic commit of outputs.
//! - [`table`]: output tables in one SQLite file — a table per output and
//!   version, a view on the live one, the exactly-once epoch commit and the
//!   catalog of deployments (states, offsets, progress).
//! - [`runner`]: drives a planned job on timely workers (batch over files;
//!   in memory for tests).
//! - [`fslock`]: the advisory file locks behind the topic writer lock, the
//!   deployment lock and the table store's presence lock.
//! - [`registry`], [`app`]: the jobs a program knows, and the command line
//!   over them ([`App`]: a user's crate gets every command for its own jobs).
//! - [`engine`]: the orchestration the commands are made of (a job over
//!   files to committed outputs, a job over topics into a deployment's
//!   tables, a table version against its recomputation), for programs.
//! - [`metrics`], [`status`]: a running stream's Prometheus metrics, and
//!   the HTTP server of `/metrics` and the status page over the catalog.
//! - [`english`]: counts in messages (`1 record`, `2 records`);
//!   [`say`]: lines to the terminal, each written whole.
//! - [`cli`]: the `kappa` command line.

#![warn(missing_docs)]

#[macro_use]
pub mod say;

pub mod app;
pub mod calendar;
pub mod cli;
pub mod engine;
pub mod english;
pub mod format;
pub mod fslock;
pub mod job;
#[path = "../jobs/mod.rs"]
pub mod jobs;
pub mod log;
pub mod metrics;
pub mod ops;
pub mod prelude;
pub mod registry;
pub mod row_map;
pub mod runner;
pub mod schema;
pub mod sink;
pub mod source;
pub mod sql;
pub mod stats;
pub mod status;
pub mod table;
pub mod testing;
pub mod time;
pub mod typed;
pub mod value;

/// The dataflow crates jobs are written with, at the versions kappa runs.
pub use differential_dataflow;
pub use timely;

/// A string field of a typed record ([`typed`]) that is held inline when
/// short, as the strings in [`value::Row`]s are: records are cloned,
/// exchanged and compared many times, and a `String` costs a heap
/// allocation per copy and a pointer chase per comparison.
pub use compact_str::CompactString as Text;

pub use app::App;
pub use engine::{Batch, OnLog, StreamSettings};
pub use registry::Registry;
pub use source::inputs::Sources;

/// The allocator the `kappa` binary uses (mimalloc): rows built on one
/// worker are often freed on another, a pattern the system allocator is
/// slow at. A user's binary opts in with
/// `#[global_allocator] static ALLOC: kappa::Allocator = kappa::Allocator;`.
pub use mimalloc::MiMalloc as Allocator;
