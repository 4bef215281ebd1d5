//! SQL jobs: a query compiled to the engine's own operators, so that it
//! has every property of a Rust job — batch == stream == reprocess,
//! `table verify`, reprocess-and-swap, rollback.
//!
//! A script ([`SqlJob::parse`]) is either one `SELECT` (the output is
//! named `result`) or one or more `CREATE VIEW name AS ...` (one output per
//! view; a view may read earlier views), optionally preceded by
//! `CREATE TABLE name (col type, ...)` declarations that fix the types an
//! input's columns are read as, and may declare its event time and late-event
//! policy (`WATERMARK FOR ts AS ts - INTERVAL ...`, see `watermark.rs`) —
//! which also makes it a versioned table for the temporal join (`JOIN t
//! FOR SYSTEM_TIME AS OF l.ts`, see `as_of.rs`).
//! Table names in the queries are inputs.
//!
//! Pipeline: sqlparser's AST → the binder (`bind/`: names, types, the
//! logical plan [`rel::Rel`]) → column pruning (`rel::prune`) → lowering
//! (`lower.rs`) into differential operators. Nothing is generated or
//! compiled per query: planning takes milliseconds.
//!
//! Identity: a SQL job is the job `sql` whose parameter `query` is the
//! normalized text of the script (sqlparser's rendering, so whitespace and
//! comments do not matter), so a deployment records the query it runs, a
//! changed query is a new version for `kappa reprocess`, and `table verify`
//! / `rollback` rebuild the job from the catalog ([`SqlJob::from_params`]).
//!
//! The names a [`JobSpec`] holds are `&'static str`: a SQL job's input
//! and output names and text are leaked once per parsed script (a process
//! parses a handful).

pub mod error;

mod as_of;
mod band;
mod bind;
mod blank;
mod closing;
mod lower;
mod rel;
mod scalar;
mod strategy;
mod watermark;

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use sqlparser::ast::{self, Spanned, Visit, Visitor};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;

use crate::job::{
    DataContext, InputSpec, Job, JobSpec, OutputSpec, ParamSpec, Params, Plan, PlanError, Schemas,
};
use crate::schema::{ColumnType, LateRule, OutputSchema, Projection};
use bind::{Binder, Bound, InputInfo};
pub use error::{Pos, SqlError, SqlErrorKind};
use rel::Rel;
use watermark::{Delay, Watermark};

/// The job name every SQL job runs under.
pub const JOB_NAME: &str = "sql";
/// The parameter that holds the normalized query text.
pub const QUERY_PARAM: &str = "query";
/// The output of a script that is one `SELECT`.
pub const RESULT: &str = "result";

/// A parsed SQL script, ready to plan over its inputs.
#[derive(Debug)]
pub struct SqlJob {
    /// Where the text came from (a file's path), for error messages.
    source: String,
    /// The text as written (error positions refer to it).
    original: String,
    /// The normalized text: the job's identity.
    normalized: &'static str,
    declared: Vec<Declared>,
    outputs: Vec<OutputDef>,
    inputs: Vec<&'static str>,
    /// Where each input is first read.
    input_pos: Vec<Pos>,
}

/// `CREATE TABLE name (col type, ..., [WATERMARK FOR ...])`.
#[derive(Debug)]
struct Declared {
    table: ast::Ident,
    columns: Vec<(ast::Ident, ColumnType)>,
    /// A `WATERMARK`, and its allowed lateness in its column's unit.
    watermark: Option<(Watermark, i64)>,
}

#[derive(Debug)]
struct OutputDef {
    name: &'static str,
    query: ast::Query,
    view: bool,
    pos: Pos,
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

impl SqlJob {
    /// Parses a script; `source` names it in error messages (a path, or
    /// `--sql-text`).
    pub fn parse(text: &str, source: &str) -> Result<SqlJob, SqlError> {
        let located = |e: SqlError| e.located(source, text);
        let accepted = bind::accept_table_arguments(text);
        let (accepted, watermarks) = watermark::extract(&accepted).map_err(located)?;
        let (accepted, as_ofs) = as_of::extract(&accepted).map_err(located)?;
        let mut statements = Parser::parse_sql(&GenericDialect {}, &accepted)
            .map_err(|e| located(SqlError::syntax(e)))?;
        as_of::attach(&mut statements, as_ofs).map_err(located)?;
        SqlJob::from_statements(statements, watermarks, text, source).map_err(located)
    }

    /// The job a deployment ran, from its recorded parameters.
    pub fn from_params(params: &[(String, String)]) -> Result<SqlJob, SqlError> {
        let text = params
            .iter()
            .find(|(k, _)| k == QUERY_PARAM)
            .map(|(_, v)| v.as_str())
            .unwrap_or_default();
        SqlJob::parse(text, "the deployment's query")
    }

    fn from_statements(
        statements: Vec<ast::Statement>,
        mut watermarks: Vec<Watermark>,
        text: &str,
        source: &str,
    ) -> Result<SqlJob, SqlError> {
        if statements.is_empty() {
            return Err(SqlError::new(
                SqlErrorKind::Invalid,
                Pos::default(),
                "the script has no statement",
            ));
        }
        let mut normalized = Vec::new();
        let mut declared = Vec::new();
        let mut outputs: Vec<OutputDef> = Vec::new();
        for s in &statements {
            let at = Pos::of(s.span());
            normalized.push(s.to_string());
            match s {
                ast::Statement::Query(q) => outputs.push(OutputDef {
                    name: RESULT,
                    query: (**q).clone(),
                    view: false,
                    pos: at,
                }),
                ast::Statement::CreateView(v) => {
                    let name = single_name(&v.name, at)?;
                    if !v.columns.is_empty() {
                        return Err(SqlError::unsupported(
                            at,
                            "a column list after the view name (alias the columns in its SELECT)",
                        ));
                    }
                    outputs.push(OutputDef {
                        name: leak(name.value.clone()),
                        query: (*v.query).clone(),
                        view: true,
                        pos: Pos::of(name.span),
                    });
                }
                ast::Statement::CreateTable(t) if t.query.is_none() => {
                    let table = single_name(&t.name, at)?;
                    let mut columns = Vec::new();
                    for c in &t.columns {
                        let ty = bind::declared_type(&c.data_type, Pos::of(c.name.span))?;
                        columns.push((c.name.clone(), ty));
                    }
                    let watermark = take_watermark(&mut watermarks, &table, &mut columns)?;
                    if let Some((w, _)) = &watermark {
                        let text = normalized.last_mut().expect("pushed above");
                        *text = with_watermark(text, w)?;
                    }
                    declared.push(Declared {
                        table,
                        columns,
                        watermark,
                    });
                }
                other => {
                    let what = other.to_string();
                    let what = what
                        .split_whitespace()
                        .take(2)
                        .collect::<Vec<_>>()
                        .join(" ");
                    return Err(SqlError::unsupported(
                        at,
                        format!("the statement {what} ..."),
                    ));
                }
            }
        }
        if let Some(w) = watermarks.first() {
            return Err(SqlError::new(
                SqlErrorKind::Invalid,
                w.pos,
                "a WATERMARK belongs in the column list of a CREATE TABLE declaring an input",
            ));
        }
        check_outputs(&outputs)?;
        let (inputs, input_pos) = referenced_tables(&outputs).into_iter().unzip();
        Ok(SqlJob {
            source: source.to_string(),
            original: text.to_string(),
            normalized: leak(normalized.join(";\n")),
            declared,
            outputs,
            inputs,
            input_pos,
        })
    }

    /// The normalized text (the job's `query` parameter).
    pub fn normalized(&self) -> &str {
        self.normalized
    }

    /// The columns a `CREATE TABLE` declares for input `name`, if one does.
    pub fn declared_columns(&self, name: &str) -> Option<Vec<String>> {
        self.declared
            .iter()
            .find(|d| bind::names(&d.table, name))
            .map(|d| d.columns.iter().map(|(c, _)| c.value.clone()).collect())
    }

    /// Checks that every table the script reads is among the `given`
    /// input names, before anything is read: an unknown table is an error
    /// at its line and column, with the closest given name.
    pub fn check_inputs(&self, given: &[&str]) -> Result<(), SqlError> {
        for (name, pos) in self.inputs.iter().zip(&self.input_pos) {
            if !given.contains(name) {
                let listed = if given.is_empty() {
                    "none".to_string()
                } else {
                    given.join(", ")
                };
                return Err(SqlError::new(
                    SqlErrorKind::UnknownTable,
                    *pos,
                    format!(
                        "unknown table {name}{} (tables are the inputs given with --input: {listed})",
                        error::did_you_mean(name, given.iter().copied())
                    ),
                )
                .located(&self.source, &self.original));
            }
        }
        Ok(())
    }

    /// The tables the script reads, which `--input` must name.
    pub fn input_names(&self) -> &[&'static str] {
        &self.inputs
    }

    /// Binds the script against the inputs' columns: the plan and, for
    /// `kappa sql explain`, a description of it.
    fn bind(&self, schemas: &Schemas) -> Result<Bound_, SqlError> {
        let infos = self.input_infos(schemas)?;
        let infos_for_binder = infos.clone();
        let mut binder = Binder::new(&infos_for_binder);
        let mut outputs: Vec<(&'static str, Bound, Pos)> = Vec::new();
        for o in &self.outputs {
            let bound = if o.view {
                // A view's output reads the shared relation, so a view that
                // later views read is computed once.
                let (bound, shared) = binder.view(o.name, &o.query)?;
                Bound {
                    rel: Rel::Shared(shared),
                    cols: bound.cols,
                }
            } else {
                binder.query(&o.query)?
            };
            check_columns(o, &bound)?;
            outputs.push((o.name, bound, o.pos));
        }
        let unlimited = binder.shared.clone();
        for r in binder.shared.iter_mut() {
            rel::limit_row_numbers(r, &unlimited);
        }
        let mut shared: Vec<Rel> = binder
            .shared
            .iter()
            .map(|r| rel::prune_all(r.clone(), &binder.shared).0)
            .collect();
        let pruned = shared.clone();
        let watermarked: Vec<closing::Watermarked> = infos
            .iter()
            .map(|i| {
                let (c, _) = i.watermark?;
                Some((c, i.declared[c].unwrap_or(ColumnType::Any)))
            })
            .collect();
        for r in shared.iter_mut() {
            band::use_bands(r, &pruned);
            closing::release_state(r, &pruned, &watermarked);
        }
        let rels: Vec<(&'static str, Rel, Vec<String>)> = outputs
            .into_iter()
            .map(|(name, mut b, _)| {
                rel::limit_row_numbers(&mut b.rel, &binder.shared);
                let mut rel = rel::prune_all(b.rel, &binder.shared).0;
                band::use_bands(&mut rel, &pruned);
                closing::release_state(&mut rel, &pruned, &watermarked);
                (name, rel, b.cols.into_iter().map(|c| c.name).collect())
            })
            .collect();
        let all: Vec<&Rel> = shared
            .iter()
            .chain(rels.iter().map(|(_, r, _)| r))
            .collect();
        let mut scanned = rel::scanned(&all, infos.len());
        // The late-event filter reads the event time, used or not.
        for (i, info) in infos.iter().enumerate() {
            scanned[i].extend(info.watermark.map(|(c, _)| c));
        }
        let projections: Vec<Projection> = infos
            .iter()
            .enumerate()
            .map(|(i, info)| Projection {
                input: info.name.clone(),
                columns: scanned[i]
                    .iter()
                    .map(|&c| {
                        let ty = binder
                            .needs
                            .get(&(i, c))
                            .map(|(t, _)| *t)
                            .or(info.declared[c])
                            .unwrap_or(ColumnType::Any);
                        (c, ty)
                    })
                    .collect(),
                late: info.watermark.map(|(c, lateness)| LateRule {
                    column: scanned[i].iter().position(|&s| s == c).expect("scanned"),
                    lateness,
                }),
                rules: Vec::new(),
            })
            .collect();
        let positions = infos
            .iter()
            .enumerate()
            .map(|(i, info)| {
                (0..info.columns.len())
                    .map(|c| scanned[i].iter().position(|&s| s == c))
                    .collect()
            })
            .collect();
        Ok(Bound_ {
            infos,
            shared,
            shared_names: binder.shared_names,
            outputs: rels,
            projections,
            positions,
        })
    }

    fn input_infos(&self, schemas: &Schemas) -> Result<Vec<InputInfo>, SqlError> {
        let mut infos = Vec::new();
        for name in &self.inputs {
            let schema = schemas.get(name).map_err(|e| {
                SqlError::new(SqlErrorKind::UnknownTable, Pos::default(), e.to_string())
            })?;
            let mut declared = vec![None; schema.columns.len()];
            let mut watermark = None;
            for d in self.declared.iter().filter(|d| bind::names(&d.table, name)) {
                for (col, ty) in &d.columns {
                    let Some(c) = schema.columns.iter().position(|c| bind::names(col, c)) else {
                        return Err(SqlError::new(
                            SqlErrorKind::UnknownColumn,
                            Pos::of(col.span),
                            format!(
                                "table {name} declares column {}, which its input does not have (its columns: {})",
                                col.value,
                                schema.columns.join(", ")
                            ),
                        ));
                    };
                    declared[c] = Some(*ty);
                    if let Some((_, lateness)) = d
                        .watermark
                        .as_ref()
                        .filter(|(w, _)| w.column.value == col.value)
                    {
                        watermark = Some((c, *lateness));
                    }
                }
            }
            infos.push(InputInfo {
                name: name.to_string(),
                columns: schema.columns.clone(),
                declared,
                watermark,
            });
        }
        Ok(infos)
    }

    /// The plan of the script over `schemas`, as `kappa sql explain` prints
    /// it, with the join and grouping strategies chosen from `params` (the
    /// job's, resolved) and what `data` knows.
    pub fn explain(
        &self,
        schemas: &Schemas,
        params: &Params,
        data: &dyn DataContext,
    ) -> Result<String, PlanError> {
        let mut b = self
            .bind(schemas)
            .map_err(|e| PlanError::Sql(Box::new(e.located(&self.source, &self.original))))?;
        strategy::choose(&mut b, &strategy::parse(params)?, data);
        let input_names: Vec<String> = b.infos.iter().map(|i| i.name.clone()).collect();
        let input_columns: Vec<Vec<String>> = b.infos.iter().map(|i| i.columns.clone()).collect();
        let ctx = rel::ExplainContext {
            inputs: &input_names,
            input_columns: &input_columns,
            shared_names: &b.shared_names,
        };
        let mut out = String::new();
        out.push_str("inputs (the columns each one reads, and as what):\n");
        for p in &b.projections {
            let info = b
                .infos
                .iter()
                .find(|i| i.name == p.input)
                .expect("an input");
            let cols: Vec<String> = p
                .columns
                .iter()
                .map(|(c, t)| format!("{} {}", info.columns[*c], type_name(*t)))
                .collect();
            let late = match p.late {
                Some(rule) => {
                    let (column, ty) = p.columns[rule.column];
                    let delay = match ty {
                        ColumnType::Int => rule.lateness.to_string(),
                        _ => crate::calendar::Interval {
                            months: 0,
                            micros: rule.lateness,
                        }
                        .to_string(),
                    };
                    format!(
                        "; rows more than {delay} behind the latest {} of their partition are \
                         dropped",
                        info.columns[column]
                    )
                }
                None => String::new(),
            };
            out.push_str(&format!("  {}: {}{late}\n", p.input, cols.join(", ")));
        }
        for (i, r) in b.shared.iter().enumerate() {
            out.push_str(&format!("shared {} (computed once):\n", b.shared_names[i]));
            rel::explain(r, 1, &ctx, &mut out);
        }
        for (name, r, cols) in &b.outputs {
            let key = output_key(r, cols.len(), &b.shared);
            let key: Vec<&str> = key.iter().map(|&k| cols[k].as_str()).collect();
            out.push_str(&format!(
                "output {name} ({}), key ({}):\n",
                cols.join(", "),
                key.join(", ")
            ));
            rel::explain(r, 1, &ctx, &mut out);
        }
        Ok(out)
    }
}

/// What binding a script gives.
struct Bound_ {
    infos: Vec<InputInfo>,
    shared: Vec<Rel>,
    shared_names: Vec<String>,
    outputs: Vec<(&'static str, Rel, Vec<String>)>,
    projections: Vec<Projection>,
    positions: Vec<Vec<Option<usize>>>,
}

fn type_name(t: ColumnType) -> &'static str {
    match t {
        ColumnType::Int => "integer",
        ColumnType::Float => "float",
        ColumnType::Number => "number",
        ColumnType::Str => "text",
        ColumnType::Bool => "boolean",
        ColumnType::Date => "date",
        ColumnType::Timestamp => "timestamp",
        ColumnType::Any | ColumnType::Time(..) => "inferred",
    }
}

impl Job for SqlJob {
    fn spec(&self) -> JobSpec {
        JobSpec {
            name: JOB_NAME,
            version: 1,
            about: "A SQL query (kappa run|stream|reprocess --sql)",
            inputs: self
                .inputs
                .iter()
                .map(|name| InputSpec {
                    name,
                    columns: &[],
                    format: None,
                    about: "a table the query reads",
                })
                .collect(),
            params: std::iter::once(ParamSpec {
                name: QUERY_PARAM,
                default: Some(self.normalized),
                help: "the query (set by --sql; its normalized text is the job's identity)",
            })
            .chain(strategy::param_specs())
            .collect(),
            outputs: self
                .outputs
                .iter()
                .map(|o| OutputSpec {
                    name: o.name,
                    about: if o.view {
                        "a view of the script"
                    } else {
                        "the query's result"
                    },
                })
                .collect(),
        }
    }

    fn plan(
        &self,
        params: &Params,
        inputs: &Schemas,
        data: &dyn DataContext,
    ) -> Result<Plan, PlanError> {
        if params.get(QUERY_PARAM) != self.normalized {
            return Err(PlanError::BadParam {
                name: QUERY_PARAM.into(),
                value: params.get(QUERY_PARAM).into(),
                reason: "a SQL job's query is its script (give it with --sql)".into(),
            });
        }
        let mut b = self
            .bind(inputs)
            .map_err(|e| PlanError::Sql(Box::new(e.located(&self.source, &self.original))))?;
        strategy::choose(&mut b, &strategy::parse(params)?, data);
        let outputs = b
            .outputs
            .iter()
            .map(|(name, r, cols)| OutputSchema {
                name: name.to_string(),
                columns: cols.clone(),
                key: output_key(r, cols.len(), &b.shared),
            })
            .collect();
        let flow = lower::SqlFlow {
            inputs: b.infos.iter().map(|i| i.name.clone()).collect(),
            positions: b.positions,
            shared: b.shared,
            outputs: b
                .outputs
                .into_iter()
                .map(|(n, r, _)| (n.to_string(), r))
                .collect(),
        };
        Ok(Plan::new(b.projections, outputs, flow))
    }
}

/// The key of an output: its grouping keys when it is a grouping whose
/// select list has each key as a column, else the whole row (a table then
/// counts equal rows).
fn output_key(rel: &Rel, arity: usize, shared: &[Rel]) -> Vec<usize> {
    let whole = (0..arity).collect();
    let (exprs, mut below) = match rel {
        Rel::Shared(i) => return output_key(&shared[*i], arity, shared),
        Rel::Map(input, exprs) => (Some(exprs), &**input),
        other => (None, other),
    };
    while let Rel::Filter(i, _) = below {
        below = i;
    }
    let Rel::Aggregate { keys, .. } = below else {
        return whole;
    };
    if *keys == 0 {
        return whole;
    }
    let mut key = Vec::new();
    for k in 0..*keys {
        let at = match exprs {
            Some(exprs) => exprs.iter().position(|e| *e == scalar::Scalar::Column(k)),
            None => Some(k),
        };
        match at {
            Some(p) => key.push(p),
            None => return whole,
        }
    }
    key.sort_unstable();
    key
}

/// The watermark declared in `table`'s column list, if there is one, and
/// its allowed lateness in the column's unit. An event time is a timestamp
/// or date (the delay an `INTERVAL`), or an integer (the delay a number, in
/// its unit); a column the list does not declare is declared so by the
/// delay.
fn take_watermark(
    watermarks: &mut Vec<Watermark>,
    table: &ast::Ident,
    columns: &mut Vec<(ast::Ident, ColumnType)>,
) -> Result<Option<(Watermark, i64)>, SqlError> {
    let mut mine = watermarks
        .iter()
        .enumerate()
        .filter(|(_, w)| w.table.value == table.value && w.table.quote_style == table.quote_style);
    let Some((at, _)) = mine.next() else {
        return Ok(None);
    };
    if let Some((_, second)) = mine.next() {
        return Err(SqlError::new(
            SqlErrorKind::Invalid,
            second.pos,
            format!("table {table} has two watermarks: an input has one event time"),
        ));
    }
    let mut w = watermarks.remove(at);
    let same = |c: &ast::Ident| bind::names(c, &w.column.value) || bind::names(&w.column, &c.value);
    let ty = match columns.iter().find(|(c, _)| same(c)) {
        Some((c, ty)) => {
            w.column = c.clone();
            *ty
        }
        None => {
            let ty = match w.delay {
                Delay::Units(_) => ColumnType::Int,
                _ => ColumnType::Timestamp,
            };
            columns.push((w.column.clone(), ty));
            ty
        }
    };
    let lateness = match (ty, w.delay) {
        (ColumnType::Timestamp | ColumnType::Date | ColumnType::Int, Delay::Zero) => 0,
        (ColumnType::Timestamp | ColumnType::Date, Delay::Interval(micros)) => micros,
        (ColumnType::Int, Delay::Units(n)) => n,
        (ColumnType::Timestamp | ColumnType::Date, _) => {
            let why = format!(
                "{} is a {}: its delay is an INTERVAL",
                w.column,
                type_name(ty)
            );
            return Err(SqlError::new(SqlErrorKind::Type, w.pos, why));
        }
        (ColumnType::Int, _) => {
            let why = format!(
                "{} is an integer: its delay is a number in its unit (as {} - 300)",
                w.column, w.column
            );
            return Err(SqlError::new(SqlErrorKind::Type, w.pos, why));
        }
        _ => {
            let why = format!(
                "{} is declared {}, but a watermark's column is an event time: declare it \
                 TIMESTAMP, DATE or BIGINT",
                w.column,
                type_name(ty)
            );
            return Err(SqlError::new(SqlErrorKind::Type, w.pos, why));
        }
    };
    Ok(Some((w, lateness)))
}

/// A `CREATE TABLE` as sqlparser renders it, with its watermark put back
/// at the end of the column list.
fn with_watermark(rendered: &str, w: &Watermark) -> Result<String, SqlError> {
    let Some(head) = rendered.strip_suffix(')') else {
        return Err(SqlError::unsupported(
            w.pos,
            "a WATERMARK in a CREATE TABLE with options after its column list",
        ));
    };
    let sep = if head.trim_end().ends_with('(') {
        ""
    } else {
        ", "
    };
    Ok(format!("{head}{sep}{})", w.render()))
}

fn single_name(name: &ast::ObjectName, at: Pos) -> Result<ast::Ident, SqlError> {
    match name.0.as_slice() {
        [ast::ObjectNamePart::Identifier(i)] => Ok(i.clone()),
        _ => Err(SqlError::unsupported(
            at,
            format!("the qualified name {name}"),
        )),
    }
}

/// One `SELECT`, or views only; output names unique.
fn check_outputs(outputs: &[OutputDef]) -> Result<(), SqlError> {
    let selects: Vec<&OutputDef> = outputs.iter().filter(|o| !o.view).collect();
    if selects.len() > 1 || (selects.len() == 1 && outputs.len() > 1) {
        let second = selects.get(1).copied().unwrap_or(selects[0]);
        return Err(SqlError::new(
            SqlErrorKind::Invalid,
            second.pos,
            "a script is one SELECT, or CREATE VIEW statements (one output each)",
        ));
    }
    if outputs.is_empty() {
        return Err(SqlError::new(
            SqlErrorKind::Invalid,
            Pos::default(),
            "the script has no SELECT and no CREATE VIEW",
        ));
    }
    let mut seen = BTreeSet::new();
    for o in outputs {
        if !seen.insert(o.name.to_lowercase()) {
            return Err(SqlError::new(
                SqlErrorKind::Invalid,
                o.pos,
                format!("two views are named {}", o.name),
            ));
        }
    }
    Ok(())
}

/// Output column names must be unique (they name file and table columns).
fn check_columns(o: &OutputDef, b: &Bound) -> Result<(), SqlError> {
    let mut seen = BTreeSet::new();
    for c in &b.cols {
        if !seen.insert(c.name.to_lowercase()) {
            return Err(SqlError::new(
                SqlErrorKind::Invalid,
                o.pos,
                format!(
                    "{} has two columns named {}: give one an alias (AS name)",
                    o.name, c.name
                ),
            ));
        }
    }
    Ok(())
}

/// The tables the queries read that are not views or CTEs: the inputs,
/// in order of first mention, spelled as first written.
fn referenced_tables(outputs: &[OutputDef]) -> Vec<(&'static str, Pos)> {
    struct Tables {
        ctes: BTreeSet<String>,
        seen: Vec<(String, Pos)>,
        skip: Option<String>,
    }
    impl Visitor for Tables {
        type Break = ();
        fn pre_visit_query(&mut self, q: &ast::Query) -> ControlFlow<()> {
            if let Some(with) = &q.with {
                for c in &with.cte_tables {
                    self.ctes.insert(c.alias.name.value.to_lowercase());
                }
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_table_factor(&mut self, f: &ast::TableFactor) -> ControlFlow<()> {
            // A window function's table is its first argument, and its own
            // name (visited next as a relation when written without the
            // outer TABLE(...)) is no table.
            if let Some((_, args)) = bind::window_call(f) {
                if let ast::TableFactor::Table { name, .. } = f {
                    self.skip = Some(name.to_string());
                }
                if let Some(ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(
                    ast::Expr::Identifier(i),
                ))) = args.first()
                {
                    self.seen_name(&ast::ObjectName::from(vec![i.clone()]));
                }
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_relation(&mut self, r: &ast::ObjectName) -> ControlFlow<()> {
            if self.skip.take().is_some_and(|s| s == r.to_string()) {
                return ControlFlow::Continue(());
            }
            self.seen_name(r);
            ControlFlow::Continue(())
        }
    }
    impl Tables {
        fn seen_name(&mut self, r: &ast::ObjectName) {
            let name = r.to_string();
            let name = name.trim_matches('"').to_string();
            if !self.seen.iter().any(|(s, _)| s.eq_ignore_ascii_case(&name)) {
                self.seen.push((name, Pos::of(r.span())));
            }
        }
    }
    let mut t = Tables {
        ctes: BTreeSet::new(),
        seen: Vec::new(),
        skip: None,
    };
    for o in outputs {
        let _ = o.query.visit(&mut t);
    }
    let views: BTreeSet<String> = outputs
        .iter()
        .filter(|o| o.view)
        .map(|o| o.name.to_lowercase())
        .collect();
    t.seen
        .into_iter()
        .filter(|(n, _)| !t.ctes.contains(&n.to_lowercase()) && !views.contains(&n.to_lowercase()))
        .map(|(n, pos)| (leak(n), pos))
        .collect()
}

#[cfg(test)]
mod tests;
