//! `kappa jobs`: what jobs there are, and what each one takes.

use std::fmt::Write;

use clap::Args;

use crate::job::JobSpec;
use crate::registry::Registry;

#[derive(Debug, Args)]
pub struct JobsArgs {}

pub fn list(registry: &Registry, _args: JobsArgs) -> anyhow::Result<()> {
    let mut out = String::new();
    for job in registry.iter() {
        out.push_str(&describe(&job.spec()));
        out.push('\n');
    }
    print!("{out}");
    Ok(())
}

/// A job's spec as text: what `kappa jobs` and `kappa run JOB --help` show.
pub fn describe(spec: &JobSpec) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{} (v{}): {}", spec.name, spec.version, spec.about);
    for input in &spec.inputs {
        let cols = if input.columns.is_empty() {
            "any columns".to_string()
        } else {
            input
                .columns
                .iter()
                .map(|(c, t)| format!("{c} ({t})"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(s, "  input  {:<10} {} [{}]", input.name, input.about, cols);
    }
    for p in &spec.params {
        let default = p
            .default
            .map_or("required".to_string(), |d| format!("default {d:?}"));
        let _ = writeln!(s, "  param  {:<10} {} ({})", p.name, p.help, default);
    }
    for o in &spec.outputs {
        let _ = writeln!(s, "  output {:<10} {}", o.name, o.about);
    }
    s
}
