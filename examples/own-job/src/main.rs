//! The whole `kappa` command line, for the jobs of this crate.

#[global_allocator]
static ALLOC: kappa::Allocator = kappa::Allocator;

fn main() -> std::process::ExitCode {
    use own_job::{CardRisk, rows::CardRiskRows};
    kappa::App::new().job(CardRisk).job(CardRiskRows).run()
}
