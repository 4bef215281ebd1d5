//! Pipes for `kappa run`: `-i NAME=-` reads an input from stdin (and
//! `-i NAME=PIPE` from a named pipe or a `<(command)`), and `-o -` writes
//! the job's one output to stdout.
//!
//! A batch run cuts each input file into byte ranges, one per worker, so it
//! reads files it can seek in: stdin and pipes are first copied to
//! temporary files (under `TMPDIR`, removed when the run ends), and errors
//! name them as the user did (`stdin`, the pipe's path).
//! The output is committed as to a directory (a temporary one), then copied
//! to stdout: stdout gets nothing unless the whole run succeeded, and then
//! the rows in the order a CSV output file has. What a pipe cannot give is
//! the directory's all-or-nothing: a reader sees the rows as they are
//! copied, so a kill during the copy leaves it a prefix.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::job::JobSpec;
use crate::source::Format;

/// What `-i NAME=-` and `-o -` name.
const DASH: &str = "-";

/// Whether a path given on the command line means stdin or stdout.
pub fn is_dash(path: &Path) -> bool {
    path.as_os_str() == DASH
}

/// The copies of the inputs that cannot be read twice or at an offset
/// (stdin, a named pipe, a `<(command)`), kept until the run ends.
pub struct PipeCopies {
    _dir: tempfile::TempDir,
    /// Each copy's path, and what the user gave.
    names: Vec<(PathBuf, String)>,
}

/// Where an input's rows come from, when it is not a file to seek in.
enum Pipe {
    Stdin,
    Other(PathBuf),
}

/// Whether `path` is something other than a regular file or a directory
/// (a named pipe, a character device such as `/dev/stdin`).
fn is_pipe(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

impl PipeCopies {
    /// Copies each input given as `-` (stdin) or as a pipe to a temporary
    /// file, and points the input at its copy. One input at most may be
    /// `-`, and none in a cluster run (its processes share no stdin, nor
    /// pipes).
    pub fn take(
        inputs: &mut [(String, PathBuf)],
        format: Option<Format>,
        processes: usize,
    ) -> anyhow::Result<Option<PipeCopies>> {
        let pipes: Vec<(usize, Pipe)> = (0..inputs.len())
            .filter_map(|i| {
                let path = &inputs[i].1;
                if is_dash(path) {
                    Some((i, Pipe::Stdin))
                } else {
                    is_pipe(path).then(|| (i, Pipe::Other(path.clone())))
                }
            })
            .collect();
        let Some((first, _)) = pipes.first() else {
            return Ok(None);
        };
        let dashes: Vec<&str> = pipes
            .iter()
            .filter(|(_, p)| matches!(p, Pipe::Stdin))
            .map(|(i, _)| inputs[*i].0.as_str())
            .collect();
        if dashes.len() > 1 {
            bail!(
                "only one input can be read from stdin, and {} are given as -",
                dashes.join(" and ")
            );
        }
        if processes > 1 {
            bail!(
                "input {} is a pipe (or stdin), which the processes of a cluster run do not \
                 share: give a file on a filesystem every process reads",
                inputs[*first].0
            );
        }
        let dir = tempfile::Builder::new()
            .prefix("kappa-stdin-")
            .tempdir()
            .context("cannot make a temporary directory for the piped inputs")?;
        let mut names = Vec::new();
        for (i, pipe) in pipes {
            let (shown, from_name) = match &pipe {
                Pipe::Stdin => ("stdin".to_string(), PathBuf::from("stdin")),
                Pipe::Other(path) => (path.display().to_string(), path.clone()),
            };
            let ext = format
                .unwrap_or_else(|| Format::from_path(&from_name))
                .extension();
            let path = dir.path().join(format!("{}-{i}.{ext}", inputs[i].0));
            copy(&pipe, &path)
                .with_context(|| format!("cannot copy {shown} to {}", path.display()))?;
            inputs[i].1 = path.clone();
            names.push((path, shown));
        }
        Ok(Some(PipeCopies { _dir: dir, names }))
    }

    /// `text` with each copy's path said as what the user gave (`stdin`,
    /// the pipe's path), so that an error names it.
    pub fn rename(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (path, shown) in &self.names {
            text = text.replace(&path.display().to_string(), shown);
        }
        text
    }
}

/// Copies what `pipe` gives to a new file at `to`, durably.
fn copy(pipe: &Pipe, to: &Path) -> std::io::Result<()> {
    let mut file = File::create(to)?;
    match pipe {
        Pipe::Stdin => std::io::copy(&mut std::io::stdin().lock(), &mut file)?,
        Pipe::Other(path) => std::io::copy(&mut File::open(path)?, &mut file)?,
    };
    file.sync_all()
}

/// `-o -`: the run commits to a temporary directory, copied to stdout.
pub struct StdoutTarget {
    dir: tempfile::TempDir,
    output: String,
}

impl StdoutTarget {
    /// For a job with exactly one output, in a one-process run.
    pub fn new(spec: &JobSpec, processes: usize) -> anyhow::Result<StdoutTarget> {
        if processes > 1 {
            bail!("-o - writes to this process' stdout: a cluster run commits to a directory");
        }
        let [output] = spec.outputs.as_slice() else {
            let names: Vec<&str> = spec.outputs.iter().map(|o| o.name).collect();
            bail!(
                "-o - writes one output to stdout, and job {} has {}: {}; give a directory",
                spec.name,
                spec.outputs.len(),
                names.join(", ")
            );
        };
        let dir = tempfile::Builder::new()
            .prefix("kappa-out-")
            .tempdir()
            .context("cannot make a temporary directory for the output")?;
        Ok(StdoutTarget {
            dir,
            output: output.name.to_string(),
        })
    }

    /// The directory the run commits to (it does not exist yet).
    pub fn dir(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    /// Copies the committed output to stdout.
    pub fn copy_out(&self) -> anyhow::Result<()> {
        let path = self.dir().join(format!("{}.csv", self.output));
        let mut file =
            File::open(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let mut stdout = std::io::stdout().lock();
        std::io::copy(&mut file, &mut stdout)?;
        stdout.flush()?;
        Ok(())
    }
}
