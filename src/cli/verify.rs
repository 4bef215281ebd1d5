//! `kappa table verify NAME [--version N]`: recompute a table version with
//! the batch path over exactly the log offsets it has applied, and compare.

use std::path::Path;

use anyhow::{Context, bail};
use clap::Args;

use super::run::OnBadRow;
use super::stream::{LogDirArg, StoreArgs, plan_job};
use crate::runner::verify::{compare, recompute};
use crate::table::TableVersion;

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The output (view) to verify.
    pub name: String,
    /// The version to verify (3 or v3) [default: the live one].
    #[arg(long, value_name = "N")]
    pub version: Option<TableVersion>,
    #[command(flatten)]
    pub log: LogDirArg,
    /// Bad records: fail, or skip them as the stream did with --on-bad-row skip.
    #[arg(long, value_enum, default_value_t = OnBadRow::Fail)]
    pub on_bad_row: OnBadRow,
    /// The null marker the stream used, if any.
    #[arg(long, value_name = "STR")]
    pub null: Option<String>,
    /// Worker threads for the recomputation [default: the number of cores].
    #[arg(short, long, value_name = "N")]
    pub workers: Option<usize>,
}

pub fn verify(args: VerifyArgs, table_db: &Path) -> anyhow::Result<()> {
    let paths = StoreArgs {
        log: args.log,
        table_db: table_db.to_path_buf(),
    };
    let (log, store) = paths.open()?;
    let d = store.find_by_output(&args.name, args.version.map(|v| v.0))?;
    let mut planned = plan_job(&d.job, &d.params, &d.inputs, &log)?;
    if planned.job.spec().version != d.job_version {
        bail!(
            "{} was built by {} v{}, this kappa has v{}",
            d.version,
            d.job,
            d.job_version,
            planned.job.spec().version
        );
    }
    planned.name_outputs_as(&d);
    let offsets = store.offsets(d.id)?;
    let options = args.on_bad_row.read_options(args.null.clone());
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let (expected, bad) = recompute(
        &log,
        &planned.plan,
        &planned.inputs,
        &offsets,
        &options,
        workers,
    )
    .with_context(|| format!("cannot recompute {} {}", args.name, d.version))?;
    let applied: u64 = offsets.values().sum();
    let mut all_identical = true;
    for (i, output) in d.outputs.iter().enumerate() {
        let table = store.read_rows(&d.table(i))?;
        let check = compare(&output.name, &table, &expected[i]);
        if check.identical() {
            outln!(
                "{} {}: identical ({} rows, digest {:016x}) to a batch run over the {applied} records it applied",
                output.name,
                d.version,
                check.table_rows,
                check.digest
            )?;
            continue;
        }
        all_identical = false;
        outln!(
            "{} {}: DIFFERS from a batch run over the {applied} records it applied: table {} rows, batch {} rows; \
             {} rows only in the table, {} only in the batch",
            output.name,
            d.version,
            check.table_rows,
            check.expected_rows,
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
    }
    if bad.count > 0 {
        eprintln!(
            "skipped {} bad records, as --on-bad-row skip asks",
            bad.count
        );
    }
    if !all_identical {
        bail!(
            "{} {} does not match its recomputation",
            args.name,
            d.version
        );
    }
    Ok(())
}
