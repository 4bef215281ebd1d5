//! The `kappa` command line for a chosen set of jobs: what a user's crate
//! calls from its `main` to get every command (`run`, `stream`,
//! `reprocess`, `table ...`, `jobs`) for its own jobs.
//!
//! ```no_run
//! use kappa::prelude::*;
//! # struct FraudScore;
//! # impl Job for FraudScore {
//! #     fn spec(&self) -> JobSpec { unimplemented!() }
//! #     fn plan(&self, _: &Params, _: &Schemas, _: &dyn DataContext) -> Result<Plan, PlanError> { unimplemented!() }
//! # }
//! fn main() -> std::process::ExitCode {
//!     kappa::App::new().job(FraudScore).run()
//! }
//! ```

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::Arc;

use crate::job::Job;
use crate::registry::Registry;

/// A command-line program over a set of jobs.
#[derive(Clone, Default)]
pub struct App {
    registry: Registry,
}

impl App {
    /// A program with no jobs yet.
    pub fn new() -> App {
        App::default()
    }

    /// Adds a job.
    pub fn job(mut self, job: impl Job + 'static) -> App {
        self.registry.add(Arc::new(job));
        self
    }

    /// Adds the built-in jobs (those of the `kappa` binary).
    pub fn with_builtin_jobs(mut self) -> App {
        self.registry.add_builtin();
        self
    }

    /// The jobs this program runs.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Parses the process's arguments, runs the command, reports an error
    /// (with its chain of causes) on stderr: the process's exit code.
    pub fn run(self) -> ExitCode {
        no_transparent_huge_pages();
        self.run_from(std::env::args_os())
    }

    /// As [`App::run`], with the arguments given (the first is the program name).
    pub fn run_from<I, T>(self, args: I) -> ExitCode
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        if let Err(e) = self.registry.check() {
            say!("error: {e}");
            return ExitCode::FAILURE;
        }
        crate::cli::main(&self.registry, args)
    }
}

/// Turns transparent huge pages off for this process. mimalloc advises
/// the kernel to back its arenas with huge pages; where THP defrag is
/// `madvise` (Debian's default), a fault in such an arena may compact
/// memory synchronously to find a free 2 MiB page, and a run whose memory
/// is mostly fresh rows (a join's 10M output rows, a stream epoch's
/// output) spent up to half its wall time in the kernel doing that, a
/// different share every run (benches/README.md, 2026-12-04). Small pages
/// cost a few percent of TLB misses instead.
fn no_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes integer arguments only and changes
    // nothing but this process' page policy; a kernel without it refuses
    // with EINVAL, which leaves the default.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}
