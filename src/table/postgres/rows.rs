//! Reading a PostgreSQL version table back as rows with multiplicities:
//! each column read as text and parsed by its kind (see `values.rs`), so a
//! value comes back exactly as it was committed.

use postgres::Client;

use super::catalog::deployment_in;
use super::values::{Kind, parse_kinds};
use crate::table::deployment::is_bag;
use crate::table::ident::{quote, split_version};
use crate::table::{Deployment, DeploymentState, TableError, TablePage};
use crate::value::Row;

/// The deployment, output index and column kinds of a version table that
/// exists.
pub(super) fn resolve_table(
    c: &mut Client,
    table: &str,
) -> Result<(Deployment, usize, Vec<Kind>), TableError> {
    let not_found = || TableError::TableNotFound {
        table: table.to_string(),
    };
    let (output, version) = split_version(table).ok_or_else(not_found)?;
    let row = c
        .query_opt(
            "SELECT deployment, kinds FROM kappa.outputs WHERE lower(output) = lower($1) \
             AND version = $2",
            &[&output, &i64::from(version)],
        )?
        .ok_or_else(not_found)?;
    let (id, kinds): (i64, String) = (row.get(0), row.get(1));
    let d = deployment_in(c, id)?;
    if d.state == DeploymentState::Dropped {
        return Err(not_found());
    }
    let index = d.output_index(output).ok_or_else(not_found)?;
    let kinds = parse_kinds(&kinds, &format!("table '{table}'"))?;
    if kinds.len() != d.outputs[index].columns.len() {
        return Err(TableError::Corrupt {
            what: format!("table '{table}', kinds"),
            reason: "not one kind per column".into(),
        });
    }
    Ok((d, index, kinds))
}

/// The rows of output `index`, ordered by SQL when limited.
pub(super) fn select(
    c: &mut Client,
    schema: &str,
    d: &Deployment,
    index: usize,
    kinds: &[Kind],
    limit: Option<usize>,
) -> Result<Vec<(Row, isize)>, TableError> {
    let table = d.table(index);
    let columns = &d.outputs[index].columns;
    let quoted: Vec<String> = columns.iter().map(|c| quote(c)).collect();
    let as_text: Vec<String> = quoted.iter().map(|c| format!("{c}::text")).collect();
    let mut sql = format!(
        "SELECT {}, kappa_n FROM {schema}.{}",
        as_text.join(", "),
        quote(&table)
    );
    if let Some(limit) = limit {
        sql.push_str(&format!(" ORDER BY {} LIMIT {limit}", quoted.join(", ")));
    }
    let mut out = Vec::new();
    for r in c.query(&sql, &[])? {
        let mut row = Row::with_capacity(columns.len());
        for (i, (name, kind)) in columns.iter().zip(kinds).enumerate() {
            row.push(kind.parse(r.get::<_, Option<&str>>(i), &table, name)?);
        }
        let n: i64 = r.get(columns.len());
        out.push((row, n as isize));
    }
    Ok(out)
}

/// The number of distinct rows of `table` (qualified and quoted), and of
/// rows counted with their multiplicities.
pub(super) fn counts(c: &mut Client, table: &str) -> Result<(u64, u64), TableError> {
    let r = c.query_one(
        &format!("SELECT count(*), sum(kappa_n)::bigint FROM {table}"),
        &[],
    )?;
    let (distinct, total): (i64, Option<i64>) = (r.get(0), r.get(1));
    Ok((distinct as u64, total.unwrap_or(0) as u64))
}

pub(super) fn read_page(
    c: &mut Client,
    schema: &str,
    table: &str,
    limit: usize,
) -> Result<TablePage, TableError> {
    let (d, index, kinds) = resolve_table(c, table)?;
    let name = d.table(index);
    let (distinct, total) = counts(c, &format!("{schema}.{}", quote(&name)))?;
    let mut rows = select(c, schema, &d, index, &kinds, Some(limit))?;
    rows.sort();
    let o = &d.outputs[index];
    Ok(TablePage {
        table: name,
        columns: o.columns.clone(),
        bag: is_bag(o),
        rows,
        distinct,
        total,
    })
}
