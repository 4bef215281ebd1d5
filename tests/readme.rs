//! The README, run top to bottom in one directory as a new user would: every
//! `$ ` command of every `console` block, in order, through `sh`, with
//! `kappa` on the PATH and the repository's `data/` beside it. Each command
//! must exit 0, and each output line the README shows under a command must
//! appear in what the command printed (`...` stands for any text), so the
//! README cannot drift from what kappa does.
//!
//! Blocks that show excerpts of runs a reader cannot repeat as written (a
//! benchmark's generated input) are `text` blocks, not `console` ones.
//! `cargo test --release --workspace` is the one command not run: it is this suite.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::{KAPPA, World, output_within};

/// One `$ ` command, the output lines shown under it, and where it is.
#[derive(Debug)]
struct Step {
    command: String,
    expected: Vec<String>,
    line: usize,
}

fn steps(readme: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut in_console = false;
    let mut continued = false;
    for (i, line) in readme.lines().enumerate() {
        if line.starts_with("```") {
            in_console = line == "```console";
            continue;
        }
        if !in_console {
            continue;
        }
        if continued {
            let step = steps.last_mut().expect("a continuation follows a command");
            step.command.push('\n');
            step.command.push_str(line);
        } else if let Some(command) = line.strip_prefix("$ ") {
            steps.push(Step {
                command: command.to_string(),
                expected: Vec::new(),
                line: i + 1,
            });
        } else if let Some(step) = steps.last_mut() {
            step.expected.push(line.to_string());
        }
        continued = line.ends_with('\\');
    }
    steps
}

/// Whether `actual` is `expected` with each `...` standing for any text.
fn matches(expected: &str, actual: &str) -> bool {
    let parts: Vec<&str> = expected.split("...").collect();
    let (first, rest) = parts.split_first().unwrap();
    let Some(mut tail) = actual.strip_prefix(first) else {
        return false;
    };
    for (k, part) in rest.iter().enumerate() {
        if k + 1 == rest.len() {
            return tail.ends_with(part);
        }
        match tail.find(part) {
            Some(at) => tail = &tail[at + part.len()..],
            None => return false,
        }
    }
    tail.is_empty()
}

#[test]
fn ellipses_stand_for_any_text() {
    assert!(matches("a ... b", "a x y b"));
    assert!(matches(
        "a, ... -> out",
        "a, 0.01 s on 2 workers, 3 MB -> out"
    ));
    assert!(matches("exact", "exact"));
    assert!(!matches("exact", "exact and more"));
    assert!(!matches("a ... b", "a x y c"));
    assert!(matches("...", "anything"));
}

fn link_data(dir: &Path) {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
    std::os::unix::fs::symlink(data, dir.join("data")).unwrap();
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(KAPPA, bin.join("kappa")).unwrap();
}

#[test]
fn the_readme_runs_top_to_bottom() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let w = World::new();
    link_data(w.dir.path());
    let path = format!(
        "{}:{}",
        w.path("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let steps = steps(&readme);
    assert!(
        steps.len() > 40,
        "only {} commands found in the README",
        steps.len()
    );
    for step in steps
        .iter()
        .filter(|s| s.command != "cargo test --release --workspace")
    {
        let command = step.command.replace("cargo run --release -- ", "kappa ");
        let out = output_within(
            Command::new("sh")
                .args(["-c", &command])
                .current_dir(w.dir.path())
                .env("PATH", &path)
                .env_remove("KAPPA_LOG_DIR")
                .env_remove("KAPPA_TABLE_DB"),
            Duration::from_secs(120),
        )
        .unwrap_or_else(|| {
            panic!(
                "README line {}: `{}` did not end within 2 minutes",
                step.line, step.command
            )
        });
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "README line {}: `{}` failed:\n{printed}",
            step.line,
            step.command
        );
        for expected in &step.expected {
            assert!(
                printed.lines().any(|l| matches(expected, l)),
                "README line {}: `{}` did not print\n  {expected}\nit printed:\n{printed}",
                step.line,
                step.command
            );
        }
    }
}
