//! The SQL flags of `run`, `stream` and `reprocess` (`--sql FILE`,
//! `--sql-text SQL`), and `kappa sql explain`.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use super::run::name_value;
use crate::job::{Job, Params, Schemas};
use crate::registry::Registry;
use crate::schema::{ColumnType, InputSchema};
use crate::source::sample::sample_keys;
use crate::source::{BadRowPolicy, InputFiles, ReadOptions};
use crate::sql::SqlJob;

/// A SQL script instead of a named job.
#[derive(Debug, Default, Args)]
pub struct SqlArgs {
    /// Run a SQL script (one SELECT, or CREATE VIEW statements) instead of
    /// a named job: its table names are the --input names.
    #[arg(long, value_name = "FILE", conflicts_with = "sql_text")]
    pub sql: Option<PathBuf>,
    /// The SQL script inline.
    #[arg(long, value_name = "SQL")]
    pub sql_text: Option<String>,
}

impl SqlArgs {
    /// The script's job, if one was given.
    pub fn job(&self) -> anyhow::Result<Option<SqlJob>> {
        let (text, source) = match (&self.sql, &self.sql_text) {
            (Some(path), _) => (
                std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read SQL file {}", path.display()))?,
                path.display().to_string(),
            ),
            (None, Some(text)) => (text.clone(), "--sql-text".to_string()),
            (None, None) => return Ok(None),
        };
        Ok(Some(SqlJob::parse(&text, &source)?))
    }

    /// The job to run: the script, or the job named `name`; exactly one.
    /// A script's tables must be among the `inputs` given.
    pub fn job_or(
        &self,
        registry: &Registry,
        name: Option<&str>,
        inputs: &[&str],
    ) -> anyhow::Result<Arc<dyn Job>> {
        match (self.job()?, name) {
            (Some(_), Some(name)) => bail!("give a job name ({name}) or --sql, not both"),
            (Some(job), None) => {
                job.check_inputs(inputs)?;
                Ok(Arc::new(job))
            }
            (None, Some(name)) => Ok(registry.find(name)?),
            (None, None) => bail!("no job given: name one (see `kappa jobs`) or give --sql FILE"),
        }
    }
}

#[derive(Debug, Args)]
pub struct SqlCommandArgs {
    #[command(subcommand)]
    command: SqlCommand,
}

#[derive(Debug, Subcommand)]
enum SqlCommand {
    /// Print the plan of a SQL script: the columns each input reads (and as
    /// what), the operators of each output, its key, and the join strategy.
    Explain(ExplainArgs),
}

#[derive(Debug, Args)]
struct ExplainArgs {
    #[command(flatten)]
    sql: SqlArgs,
    /// An input file for its columns: NAME=PATH (a table the script
    /// declares with CREATE TABLE needs none).
    #[arg(short, long, value_name = "NAME=PATH", value_parser = name_value::<PathBuf>)]
    input: Vec<(String, PathBuf)>,
    /// A strategy parameter: K=V (`strategy`, `broadcast_limit`, `salts`,
    /// `sample_rate`, `hot_threshold`; as for `kappa run --sql`).
    #[arg(short, long, value_name = "K=V", value_parser = name_value::<String>)]
    param: Vec<(String, String)>,
}

pub fn run(args: SqlCommandArgs) -> anyhow::Result<()> {
    match args.command {
        SqlCommand::Explain(args) => explain(args),
    }
}

fn explain(args: ExplainArgs) -> anyhow::Result<()> {
    let Some(job) = args.sql.job()? else {
        bail!("give the script: --sql FILE or --sql-text SQL");
    };
    let spec = job.spec();
    let mut schemas = Vec::new();
    let mut files = Vec::new();
    for name in job.input_names() {
        let given = args.input.iter().find(|(n, _)| n == name);
        let columns = match (given, job.declared_columns(name)) {
            (Some((_, path)), _) => {
                let files_of = InputFiles::resolve(name, path, None, None)?;
                let columns = files_of.schema.columns.clone();
                files.push(files_of);
                columns
            }
            (None, Some(columns)) => columns,
            (None, None) => bail!(
                "the script reads table {name}: give --input {name}=PATH for its columns, or \
                 declare them (CREATE TABLE {name} (col type, ...))"
            ),
        };
        schemas.push(InputSchema {
            name: name.to_string(),
            columns,
        });
    }
    let known = Known {
        files,
        decisions: RefCell::default(),
    };
    let params = Params::resolve(&spec, &args.param)?;
    print!(
        "{}",
        job.explain(&Schemas::new(&spec, schemas), &params, &known)?
    );
    for d in known.decisions.borrow().iter() {
        println!("{d}");
    }
    Ok(())
}

/// What explain knows of the data: the input files given, for their
/// sizes and a sample of their keys (as a batch run over them would).
struct Known {
    files: Vec<InputFiles>,
    decisions: RefCell<Vec<String>>,
}

impl crate::job::DataContext for Known {
    fn input_bytes(&self, input: &str) -> Option<u64> {
        self.files
            .iter()
            .find(|f| f.schema.name == input)
            .map(InputFiles::bytes)
    }
    fn sample_keys(
        &self,
        input: &str,
        columns: &[(usize, ColumnType)],
        rate: f64,
    ) -> Option<crate::job::KeySample> {
        let index = self.files.iter().position(|f| f.schema.name == input)?;
        let options = ReadOptions {
            null: None,
            on_bad_row: BadRowPolicy::Skip,
        };
        sample_keys(&self.files[index], index, columns, rate, &options).ok()
    }
    fn decide(&self, note: String) {
        self.decisions.borrow_mut().push(note);
    }
}
