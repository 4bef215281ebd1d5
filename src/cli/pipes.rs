//! Pipes for `kappa run`: `-i NAME=-` reads an input from stdin, and
//! `-o -` writes the job's one output to stdout.
//!
//! A batch run cuts each input file into byte ranges, one per worker, so it
//! reads files it can seek in: stdin is first copied to a temporary file
//! (under `TMPDIR`, removed when the run ends), and errors name it `stdin`.
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

/// The copy of stdin an input reads, kept until the run ends.
pub struct StdinCopy {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl StdinCopy {
    /// Copies stdin when an input is given as `-`, and points the input at
    /// the copy. One input at most, in a one-process run (a cluster's
    /// processes do not share a stdin).
    pub fn take(
        inputs: &mut [(String, PathBuf)],
        format: Option<Format>,
        processes: usize,
    ) -> anyhow::Result<Option<StdinCopy>> {
        let dashes: Vec<usize> = (0..inputs.len())
            .filter(|&i| is_dash(&inputs[i].1))
            .collect();
        let &[at] = dashes.as_slice() else {
            if dashes.is_empty() {
                return Ok(None);
            }
            let names: Vec<&str> = dashes.iter().map(|&i| inputs[i].0.as_str()).collect();
            bail!(
                "only one input can be read from stdin, and {} are given as -",
                names.join(" and ")
            );
        };
        let name = &inputs[at].0;
        if processes > 1 {
            bail!(
                "-i {name}=- reads stdin, which the processes of a cluster run do not share: \
                 give a file on a filesystem every process reads"
            );
        }
        let ext = match format {
            Some(Format::Jsonl) => "jsonl",
            Some(Format::Text) => "txt",
            _ => "csv",
        };
        let dir = tempfile::Builder::new()
            .prefix("kappa-stdin-")
            .tempdir()
            .context("cannot make a temporary directory for stdin")?;
        let path = dir.path().join(format!("stdin.{ext}"));
        let copied = File::create(&path).and_then(|mut file| {
            std::io::copy(&mut std::io::stdin().lock(), &mut file)?;
            file.sync_all()
        });
        copied.with_context(|| format!("cannot copy stdin to {}", path.display()))?;
        inputs[at].1 = path.clone();
        Ok(Some(StdinCopy { _dir: dir, path }))
    }

    /// `text` with the copy's path said as `stdin`, so that an error names
    /// what the user gave.
    pub fn rename(&self, text: &str) -> String {
        text.replace(&self.path.display().to_string(), "stdin")
    }
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
