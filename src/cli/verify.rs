//! `kappa table verify NAME [--version N]`: recompute a table version with
//! the batch path over exactly the log offsets it has applied, and compare;
//! across processes with the cluster flags (process 0 compares).

use crate::english::count;

use anyhow::{Context, bail};
use clap::Args;

use super::run::OnBadRow;
use super::sources::SourceArgs;
use super::workers::WorkerArgs;
use crate::engine;
use crate::registry::Registry;
use crate::runner::verify::OutputCheck;
use crate::table::{StoreAddr, TableVersion};

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The output (view) to verify.
    pub name: String,
    /// The version to verify (3 or v3) [default: the live one].
    #[arg(long, value_name = "N")]
    pub version: Option<TableVersion>,
    #[command(flatten)]
    pub sources: SourceArgs,
    /// Bad records: fail, or skip them [default: as the deployment's runs
    /// read them, recorded in the catalog].
    #[arg(long, value_enum)]
    pub on_bad_row: Option<OnBadRow>,
    /// The null marker [default: the one the deployment reads with].
    #[arg(long, value_name = "STR")]
    pub null: Option<String>,
    #[command(flatten)]
    pub workers: WorkerArgs,
}

pub fn verify(registry: &Registry, args: VerifyArgs, table_db: &StoreAddr) -> anyhow::Result<()> {
    let sources = args.sources.open()?;
    let store = crate::table::open_read_only(table_db)
        .with_context(|| format!("cannot read table store {}", table_db.display()))?;
    let workers = args.workers.config()?;
    if !workers.is_first_process() {
        say!(
            "kappa: process {} of {} recomputes its share of the partitions; process 0 compares",
            workers.process,
            workers.processes
        );
    }
    let reading = engine::ReadingOverride {
        on_bad_row: args.on_bad_row.map(|p| p.read_options(None).on_bad_row),
        null: args.null.clone(),
    };
    let check = engine::verify(
        registry,
        &*store,
        &sources,
        &args.name,
        args.version,
        &reading,
        &workers,
    )
    .with_context(|| format!("cannot verify {}", args.name))?;
    let Some(check) = check else {
        return Ok(());
    };
    let (version, applied) = (check.deployment.version, check.applied);
    let skipped = match check.bad_rows.count {
        0 => String::new(),
        n => format!(
            " ({} skipped, as {})",
            count(n, "bad record"),
            match args.on_bad_row {
                Some(_) => "--on-bad-row skip asks",
                None => "the deployment's runs skipped them",
            }
        ),
    };
    for out in &check.outputs {
        report(out, version, applied, &skipped)?;
    }
    if !check.identical() {
        bail!("{} {version} does not match its recomputation", args.name);
    }
    Ok(())
}

/// One output's comparison, on stdout.
fn report(
    check: &OutputCheck,
    version: TableVersion,
    applied: u64,
    skipped: &str,
) -> anyhow::Result<()> {
    let name = &check.output;
    if check.identical() {
        outln!(
            "{name} {version}: identical ({}, digest {:016x}) to a batch run over the {} it applied{skipped}",
            count(check.table_rows, "row"),
            check.digest,
            count(applied, "record")
        )?;
        return Ok(());
    }
    outln!(
        "{name} {version}: DIFFERS from a batch run over the {} it applied{skipped}: table {}, batch {}; \
         {} rows only in the table, {} only in the batch",
        count(applied, "record"),
        count(check.table_rows, "row"),
        count(check.expected_rows, "row"),
        check.differing.0,
        check.differing.1
    )?;
    let text = |row: &crate::value::Row| {
        row.iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    for (row, n) in &check.only_in_table {
        outln!("  only in table ({n}x): {}", text(row))?;
    }
    for (row, n) in &check.only_expected {
        outln!("  only in batch ({n}x): {}", text(row))?;
    }
    Ok(())
}
