//! `kappa table ...`: the output tables from the command line — which
//! outputs and versions there are, their rows, the status and progress of
//! every deployment, what changed between two versions, and the manual swap
//! and drop.
//!
//! The store is `--table-db PATH`, else `$KAPPA_TABLE_DB`, else
//! `./kappa-data/tables.db`. No command creates a store: with none at the
//! path they fail saying so. Data go to stdout as aligned text, or as CSV
//! with a header with `--csv`; remarks (which version `show` printed, how
//! many rows it left out) go to stderr, so the CSV can be piped on.

use anyhow::Context;
use clap::{Args, Subcommand};

use crate::registry::Registry;
use crate::table::{
    Change, Deployment, DeploymentState, StoreAddr, TableError, TableStore, TableVersion,
};
use crate::time::{format_duration, format_unix_ms};
use crate::value::Value;

#[derive(Debug, Args)]
pub struct TableArgs {
    /// The table store: a SQLite file, or a PostgreSQL database
    /// (`postgresql://USER@HOST:PORT/DB[?schema=NAME]`).
    #[arg(
        long,
        global = true,
        value_name = "PATH|URL",
        env = "KAPPA_TABLE_DB",
        default_value = crate::table::DEFAULT_PATH
    )]
    table_db: StoreAddr,
    /// Print CSV with a header instead of aligned text.
    #[arg(long, global = true)]
    csv: bool,
    #[command(subcommand)]
    command: TableCommand,
}

#[derive(Debug, Subcommand)]
enum TableCommand {
    /// List the outputs: live version, rows, columns, key and all versions.
    List,
    /// Print an output's rows, sorted (the live version unless --version).
    #[command(disable_version_flag = true)]
    Show(ShowArgs),
    /// Every deployment: outputs, version, job, params, state, progress, lag
    /// per input partition, bad rows, times, and the ETA of building versions.
    Status,
    /// Make a version live: the output's view selects from it, and the
    /// version that was live is retired (kept for rollback).
    #[command(disable_version_flag = true)]
    Swap(SwapArgs),
    /// What changed between two versions of an output: keys added, removed
    /// and changed (counts and the first rows of each), e.g. before a
    /// manual swap.
    #[command(disable_version_flag = true)]
    Diff(DiffArgs),
    /// Drop a version's tables (never the live one); the catalog keeps its
    /// history and its version number is never reused.
    #[command(disable_version_flag = true)]
    Drop(VersionArgs),
    /// Resume the previous version from its own offsets, let it catch up, and
    /// swap it back in (or any retired version with --version: roll forward).
    #[command(disable_version_flag = true)]
    Rollback(super::reprocess::RollbackArgs),
    /// Recompute a version with the batch path over exactly the log offsets
    /// it has applied, and compare: prints `identical` and a digest, or the
    /// rows that differ (non-zero exit).
    #[command(disable_version_flag = true)]
    Verify(super::verify::VerifyArgs),
}

#[derive(Debug, Args)]
struct ShowArgs {
    /// The output (the name of its view).
    name: String,
    /// The version to show (3 or v3); the live one by default.
    #[arg(long)]
    version: Option<TableVersion>,
    /// Print at most this many distinct rows.
    #[arg(long, default_value_t = 100,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1 << 31))]
    limit: usize,
}

#[derive(Debug, Args)]
struct DiffArgs {
    /// The output (the name of its view).
    name: String,
    /// The old version [default: the live one].
    #[arg(long, value_name = "N")]
    from: Option<TableVersion>,
    /// The new version [default: the newest other version that has tables].
    #[arg(long, value_name = "N")]
    to: Option<TableVersion>,
    /// Rows shown of each kind (added, removed, changed).
    #[arg(long, default_value_t = 10)]
    limit: usize,
}

#[derive(Debug, Args)]
struct SwapArgs {
    /// The output (the name of its view).
    name: String,
    /// The version (3 or v3).
    #[arg(long)]
    version: TableVersion,
    /// Retired versions to keep after the swap; older ones are dropped.
    #[arg(long, value_name = "N", default_value_t = 1)]
    keep: usize,
    /// Swap in a building version that has not caught up with the log.
    #[arg(long)]
    force: bool,
}

#[derive(Debug, Args)]
struct VersionArgs {
    /// The output (the name of its view).
    name: String,
    /// The version (3 or v3).
    #[arg(long)]
    version: TableVersion,
}

pub fn run(registry: &Registry, args: TableArgs) -> anyhow::Result<()> {
    let path = &args.table_db;
    match args.command {
        TableCommand::Rollback(a) => return super::reprocess::rollback(registry, a, path),
        TableCommand::Verify(a) => return super::verify::verify(registry, a, path),
        _ => {}
    }
    let writes = matches!(args.command, TableCommand::Swap(_) | TableCommand::Drop(_));
    let open = match writes {
        true => crate::table::open_existing,
        false => crate::table::open_read_only,
    };
    let mut store = open(path).map_err(|e| match e {
        TableError::StoreNotFound { .. } => anyhow::Error::new(e),
        e => {
            anyhow::Error::new(e).context(format!("cannot open the table store {}", path.display()))
        }
    })?;
    match args.command {
        TableCommand::List => out!("{}", list(&*store)?.render(args.csv))?,
        TableCommand::Show(a) => out!("{}", show(&*store, &a, args.csv)?.render(args.csv))?,
        TableCommand::Status => out!("{}", status(&*store)?.render(args.csv))?,
        TableCommand::Swap(a) => swap(&mut *store, &a)?,
        TableCommand::Diff(a) => out!("{}", diff(&*store, &a, args.csv)?.render(args.csv))?,
        TableCommand::Drop(a) => drop_version(&mut *store, &a)?,
        TableCommand::Rollback(_) | TableCommand::Verify(_) => unreachable!("handled above"),
    }
    Ok(())
}

fn list(store: &dyn TableStore) -> anyhow::Result<Grid> {
    let deployments = store.deployments().context("cannot read the catalog")?;
    let mut names: Vec<&str> = Vec::new();
    for o in deployments.iter().flat_map(|d| &d.outputs) {
        if !names.iter().any(|n| n.eq_ignore_ascii_case(&o.name)) {
            names.push(&o.name);
        }
    }
    names.sort_unstable();
    let mut grid = Grid::new(&[
        "output", "live", "rows", "columns", "key", "versions", "job",
    ]);
    for name in names {
        let versions: Vec<&Deployment> = deployments
            .iter()
            .filter(|d| d.output_index(name).is_some())
            .collect();
        let live = versions.iter().find(|d| d.state == DeploymentState::Live);
        let newest = versions.last().expect("an output has a deployment");
        let shown = live.unwrap_or(newest);
        let schema = &shown.outputs[shown.output_index(name).expect("filtered on it")];
        let rows = live
            .map(|d| store.row_counts(&d.table(d.output_index(name).unwrap())))
            .transpose()?
            .map_or("-".into(), |(_, total)| total.to_string());
        let key: Vec<&str> = schema.key.iter().map(|&k| &*schema.columns[k]).collect();
        let key = match (key.is_empty(), crate::table::deployment::is_bag(schema)) {
            (true, _) => "(none)".to_string(),
            (false, bag) => format!("{}{}", key.join(","), if bag { " (bag)" } else { "" }),
        };
        let history: Vec<String> = versions
            .iter()
            .filter(|d| d.state != DeploymentState::Dropped)
            .map(|d| format!("{} {}", d.version, d.state))
            .collect();
        grid.push(vec![
            name.to_string(),
            live.map_or("-".to_string(), |d| d.version.to_string()),
            rows,
            schema.columns.join(","),
            key,
            history.join(", "),
            format!("{} v{}", shown.job, shown.job_version),
        ]);
    }
    Ok(grid)
}

fn show(store: &dyn TableStore, a: &ShowArgs, csv: bool) -> anyhow::Result<Grid> {
    let d = store.find_by_output(&a.name, a.version.map(|v| v.0))?;
    let index = d.output_index(&a.name).expect("found by this output");
    let page = store.read_page(&d.table(index), a.limit)?;
    let mut header: Vec<String> = page.columns.clone();
    if page.bag {
        header.push("kappa_count".into());
    }
    let mut grid = Grid::with_header(header);
    'rows: for (row, n) in &page.rows {
        let cells: Vec<String> = row.iter().map(|v| cell(v, csv)).collect();
        if page.bag {
            grid.push([cells, vec![n.to_string()]].concat());
            continue;
        }
        // A keyed output holds each row once; repeat any that is not.
        for _ in 0..*n {
            if grid.rows.len() >= a.limit {
                break 'rows;
            }
            grid.push(cells.clone());
        }
    }
    say!(
        "{} ({}, job {} v{}): {} of {} distinct rows",
        page.table,
        d.state,
        d.job,
        d.job_version,
        page.rows.len(),
        page.distinct
    );
    Ok(grid)
}

fn status(store: &dyn TableStore) -> anyhow::Result<Grid> {
    let deployments = store.deployments().context("cannot read the catalog")?;
    let mut grid = Grid::new(&[
        "id",
        "outputs",
        "version",
        "job",
        "params",
        "state",
        "records",
        "rate",
        "lag",
        "lag_by_input",
        "bad_rows",
        "late_dropped",
        "checkpoint",
        "created",
        "caught_up",
        "swapped",
        "eta",
    ]);
    for d in deployments {
        let p = &d.progress;
        let eta = match d.state {
            DeploymentState::Building => p.eta().map_or("?".into(), format_duration),
            _ => "-".into(),
        };
        grid.push(vec![
            d.id.to_string(),
            d.output_names().join(","),
            d.version.to_string(),
            format!("{} v{}", d.job, d.job_version),
            d.short_params(),
            d.state_shown(),
            p.records_applied.to_string(),
            p.records_per_sec
                .map_or("-".into(), |r| format!("{r:.0}/s")),
            p.total_lag().to_string(),
            d.lag_by_input(),
            p.bad_rows.to_string(),
            d.late_dropped(),
            checkpoint_cell(store, d.id)?,
            format_unix_ms(Some(d.created_at)),
            format_unix_ms(d.caught_up_at),
            format_unix_ms(d.swapped_at),
            eta,
        ]);
    }
    Ok(grid)
}

/// A deployment's checkpoint for `table status`: its size, the pieces it
/// is stored in (one per partition once merged, plus one per partition and
/// commit since) and how long ago it was merged; `-` when it keeps none (a
/// restart replays the log).
fn checkpoint_cell(store: &dyn TableStore, id: i64) -> anyhow::Result<String> {
    let Some(s) = store
        .state_summary(id)
        .context("cannot read the checkpoint")?
    else {
        return Ok("-".into());
    };
    let merged = match s.merged_at {
        Some(at) => {
            let ago = (crate::table::now_ms() - at).max(0) as u64;
            format!(
                "merged {} ago",
                format_duration(std::time::Duration::from_millis(ago))
            )
        }
        None => "not merged".into(),
    };
    Ok(format!(
        "{} in {}, {merged}",
        crate::english::bytes(s.bytes),
        crate::english::count(s.pieces, "piece")
    ))
}

fn swap(store: &mut dyn TableStore, a: &SwapArgs) -> anyhow::Result<()> {
    let d = store.find_by_output(&a.name, Some(a.version.0))?;
    if let Some(why) = behind_the_log(&d).filter(|_| !a.force) {
        anyhow::bail!(
            "not swapping {} {} in: {why}, so its tables are behind the log; let the \
             `kappa reprocess` that builds it catch up (it swaps by its --swap), or pass --force",
            a.name,
            d.version
        );
    }
    let retired = store
        .swap(d.id)
        .with_context(|| format!("cannot swap {} {} in", a.name, a.version))?;
    let outputs = d.output_names().join(", ");
    if retired.is_empty() && d.state == DeploymentState::Live {
        outln!("{outputs}: {} is already live", d.version)?;
        return Ok(());
    }
    let mut old = Vec::new();
    for id in retired {
        old.push(store.deployment(id)?.version.to_string());
    }
    let old = if old.is_empty() {
        "nothing was live".into()
    } else {
        format!("retired {}", old.join(", "))
    };
    let names: Vec<String> = d.output_names().iter().map(|n| n.to_string()).collect();
    let mut dropped = Vec::new();
    for id in store.retire_old(&names, a.keep)? {
        dropped.push(store.deployment(id)?.version.to_string());
    }
    let dropped = match dropped.is_empty() {
        true => String::new(),
        false => format!("; dropped {} (--keep {})", dropped.join(", "), a.keep),
    };
    outln!("{outputs}: {} is live ({old}{dropped})", d.version)?;
    Ok(())
}

/// Why a building version is not caught up, by what its last commit
/// recorded; `None` for one that is (or is not building).
fn behind_the_log(d: &crate::table::Deployment) -> Option<String> {
    if d.state != DeploymentState::Building {
        return None;
    }
    let lag = d.progress.total_lag();
    match (d.caught_up_at, lag) {
        (None, _) => Some(format!(
            "{} has not caught up yet (lag {lag} at its last commit)",
            d.version
        )),
        (Some(_), lag) if lag > 0 => Some(format!("{} lags by {lag} records", d.version)),
        _ => None,
    }
}

/// The diff's rows as a grid (`change`, `version`, the columns); its
/// counts on stdout before the grid, or on stderr under `--csv`.
fn diff(store: &dyn TableStore, a: &DiffArgs, csv: bool) -> anyhow::Result<Grid> {
    let (from, to) = diff_versions(store, a)?;
    let d = store.diff(&a.name, from, to, a.limit)?;
    let c = &d.counts;
    let key: Vec<&str> = d.key.iter().map(|&k| d.columns[k].as_str()).collect();
    let mut summary = format!(
        "{} v{from} -> v{to}, keyed by ({}): {} -> {} keys\n",
        a.name,
        key.join(","),
        c.from_keys,
        c.to_keys
    );
    for (what, n) in [
        ("added", c.added),
        ("removed", c.removed),
        ("changed", c.changed),
    ] {
        let p = crate::table::diff::percent(c.percent(n));
        summary.push_str(&format!("  {what:<9} {n} ({p})\n"));
    }
    summary.push_str(&format!("  unchanged {}", c.unchanged));
    for (what, columns) in [
        ("added in", &d.added_columns),
        ("only in", &d.removed_columns),
    ] {
        if !columns.is_empty() {
            let version = if what == "added in" { to } else { from };
            summary.push_str(&format!(
                "\n  columns {what} v{version}: {} (rows are compared on the {} columns both have)",
                columns.join(", "),
                d.columns.len()
            ));
        }
    }
    if csv {
        say!("{summary}");
    } else {
        outln!("{summary}")?;
    }
    let mut header = vec!["change".to_string(), "version".to_string()];
    header.extend(d.columns.iter().cloned());
    if d.bag {
        header.push("kappa_count".into());
    }
    let mut grid = Grid::with_header(header);
    let mut push = |change: &str, version: u32, rows: &[(crate::value::Row, isize)]| {
        for (row, n) in rows {
            let mut cells = vec![change.to_string(), format!("v{version}")];
            cells.extend(row.iter().map(|v| cell(v, csv)));
            if d.bag {
                cells.push(n.to_string());
            }
            grid.push(cells);
        }
    };
    for change in &d.examples {
        match change {
            Change::Added(rows) => push("added", to, rows),
            Change::Removed(rows) => push("removed", from, rows),
            Change::Changed { from: old, to: new } => {
                push("changed", from, old);
                push("changed", to, new);
            }
        }
    }
    Ok(grid)
}

/// `--from` or the live version; `--to` or the newest other version that
/// still has its tables.
fn diff_versions(store: &dyn TableStore, a: &DiffArgs) -> anyhow::Result<(u32, u32)> {
    let from = match a.from {
        Some(v) => v.0,
        None => store.find_by_output(&a.name, None)?.version.0,
    };
    if let Some(to) = a.to {
        return Ok((from, to.0));
    }
    let newest = store
        .deployments_of(&a.name)?
        .into_iter()
        .filter(|d| d.state != DeploymentState::Dropped && d.version.0 != from)
        .map(|d| d.version.0)
        .max();
    let to = newest.with_context(|| {
        format!(
            "{} has no version other than v{from} to compare with (name one with --to)",
            a.name
        )
    })?;
    Ok((from, to))
}

fn drop_version(store: &mut dyn TableStore, a: &VersionArgs) -> anyhow::Result<()> {
    let d = store.find_by_output(&a.name, Some(a.version.0))?;
    store.drop_deployment(d.id).with_context(|| {
        format!(
            "cannot drop {} {} (to drop a live version, swap another in first)",
            a.name, a.version
        )
    })?;
    outln!("dropped {}", d.tables().join(", "))?;
    Ok(())
}

/// A value as a cell: null is `NULL` in text (to tell it from an empty
/// string) and empty in CSV, as in kappa's output files.
fn cell(v: &Value, csv: bool) -> String {
    match v {
        Value::Null if !csv => "NULL".into(),
        v => v.to_string(),
    }
}

/// Rows of cells under a header, rendered as aligned text or CSV.
struct Grid {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Grid {
    fn new(header: &[&str]) -> Grid {
        Grid::with_header(header.iter().map(|h| h.to_string()).collect())
    }

    fn with_header(header: Vec<String>) -> Grid {
        Grid {
            header,
            rows: Vec::new(),
        }
    }

    fn push(&mut self, row: Vec<String>) {
        debug_assert_eq!(
            row.len(),
            self.header.len(),
            "a grid row has one cell per column"
        );
        self.rows.push(row);
    }

    fn render(&self, csv: bool) -> String {
        if csv { self.csv() } else { self.text() }
    }

    fn csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&self.header).expect("write to memory");
        for row in &self.rows {
            w.write_record(row).expect("write to memory");
        }
        String::from_utf8(w.into_inner().expect("flush to memory")).expect("cells are UTF-8")
    }

    /// Columns padded to their widest cell, two spaces apart; headers upper case.
    fn text(&self) -> String {
        let header: Vec<String> = self.header.iter().map(|h| h.to_uppercase()).collect();
        let lines: Vec<&Vec<String>> = std::iter::once(&header).chain(&self.rows).collect();
        let widths: Vec<usize> = (0..header.len())
            .map(|i| {
                lines
                    .iter()
                    .map(|l| l[i].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for line in lines {
            let last = line.len().saturating_sub(1);
            for (i, c) in line.iter().enumerate() {
                out.push_str(c);
                if i < last {
                    out.push_str(&" ".repeat(widths[i] - c.chars().count() + 2));
                }
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    /// The subcommands under a root like kappa's (`propagate_version`), so
    /// clap's own checks catch a clash with the `--version` flag.
    #[derive(Debug, Parser)]
    #[command(name = "kappa", version, propagate_version = true)]
    struct Root {
        #[command(flatten)]
        table: TableArgs,
    }

    #[test]
    fn arguments_are_consistent() {
        Root::command().debug_assert();
        let root = Root::parse_from(["kappa", "show", "pageviews", "--version", "v3", "--csv"]);
        assert!(root.table.csv);
        let TableCommand::Show(show) = root.table.command else {
            panic!("show")
        };
        assert_eq!(show.version, Some(TableVersion(3)));
    }

    #[test]
    fn grids_align_and_quote() {
        let mut g = Grid::new(&["a", "long_name"]);
        g.push(vec!["x,y".into(), "1".into()]);
        assert_eq!(g.render(false), "A    LONG_NAME\nx,y  1\n");
        assert_eq!(g.render(true), "a,long_name\n\"x,y\",1\n");
    }
}
