//! The `kappa` binary: parse the command line, run it, report the error
//! chain and exit non-zero on failure.

fn main() -> std::process::ExitCode {
    kappa::cli::main()
}
