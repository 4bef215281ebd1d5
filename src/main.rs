//! The `kappa` binary: parse the command line, run it, report the error
//! chain and exit non-zero on failure.

// Rows are built on one worker and often freed on another after an
// exchange; glibc's allocator spends a third of a group-by's time on that
// pattern (consolidating and unlinking chunks across arenas), mimalloc a
// small fraction of it.
#[global_allocator]
static ALLOCATOR: kappa::Allocator = kappa::Allocator;

fn main() -> std::process::ExitCode {
    kappa::App::new().with_builtin_jobs().run()
}
