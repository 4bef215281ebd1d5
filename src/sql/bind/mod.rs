//! The binder: resolves names in parsed SQL against the inputs' columns,
//! checks types, and builds the logical plan ([`Rel`]).
//!
//! Scopes are lists of [`Col`]s: a relation's columns, each with the table
//! name or alias that qualifies it, its type, and — when it is an input
//! column passed through unchanged — its origin. Where a query uses an
//! input column as a number or as text, the binder records that the
//! column must be read as that type ([`Binder::needs`]), so the source
//! rejects a row that does not fit as a bad row (with its file, line and
//! column) rather than the query computing with it silently.
//!
//! `expr.rs` binds scalar expressions (and aggregates in grouped queries),
//! `select.rs` binds `SELECT` blocks (FROM, joins, WHERE, GROUP BY), this
//! file queries, set operations and CTEs.

mod expr;
mod row_number;
mod select;
mod subquery;
mod temporal;
mod window;

pub use window::{accept_table_arguments, byte_offset, window_call};

pub use expr::{declared_type, interval};

use std::collections::BTreeMap;

use sqlparser::ast::{self, Spanned};

use super::error::{Pos, SqlError, SqlErrorKind, did_you_mean};
use super::rel::{Rel, SetOp, SortKey};
use crate::schema::ColumnType;

/// An input as the binder sees it: its name and columns, with the types a
/// `CREATE TABLE` declared.
#[derive(Clone, Debug)]
pub struct InputInfo {
    /// The input's name (a table name in the SQL).
    pub name: String,
    /// Its column names.
    pub columns: Vec<String>,
    /// Declared types, by column (`None`: inferred per value).
    pub declared: Vec<Option<ColumnType>>,
    /// A `WATERMARK`'s column and allowed lateness (in the column's unit:
    /// µs for timestamps and dates): the input is under the `drop`
    /// late-event policy.
    pub watermark: Option<(usize, i64)>,
}

/// The type of an expression, as far as the binder knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SqlType {
    /// The null literal: fits anything.
    Null,
    /// An integer.
    Int,
    /// A float.
    Float,
    /// An integer or a float.
    Number,
    /// Text.
    Text,
    /// A truth value.
    Bool,
    /// A date.
    Date,
    /// A timestamp.
    Timestamp,
    /// An input column read without a declared or required type: each
    /// value is inferred from its text.
    Any,
}

impl SqlType {
    /// Whether values of this type may be numbers.
    pub fn numeric(self) -> bool {
        matches!(
            self,
            SqlType::Int | SqlType::Float | SqlType::Number | SqlType::Null | SqlType::Any
        )
    }

    fn of_column_type(t: ColumnType) -> SqlType {
        match t {
            ColumnType::Int | ColumnType::Time(..) => SqlType::Int,
            ColumnType::Float => SqlType::Float,
            ColumnType::Number => SqlType::Number,
            ColumnType::Str => SqlType::Text,
            ColumnType::Bool => SqlType::Bool,
            ColumnType::Date => SqlType::Date,
            ColumnType::Timestamp => SqlType::Timestamp,
            ColumnType::Any => SqlType::Any,
        }
    }

    fn name(self) -> &'static str {
        match self {
            SqlType::Null => "null",
            SqlType::Int => "an integer",
            SqlType::Float => "a float",
            SqlType::Number => "a number",
            SqlType::Text => "text",
            SqlType::Bool => "a boolean",
            SqlType::Date => "a date",
            SqlType::Timestamp => "a timestamp",
            SqlType::Any => "a value",
        }
    }
}

/// A column of a relation in scope.
#[derive(Clone, Debug)]
pub struct Col {
    /// The table name or alias that qualifies it.
    pub table: Option<String>,
    /// Its name.
    pub name: String,
    /// Its type.
    pub ty: SqlType,
    /// The input column it passes through unchanged: (input, column).
    pub origin: Option<(usize, usize)>,
    /// Left out of `*` and of unqualified lookups when another column has
    /// the name (the right copy of a `USING` column).
    pub hidden: bool,
}

/// A bound relation: the plan and its columns.
#[derive(Clone, Debug)]
pub struct Bound {
    /// The plan.
    pub rel: Rel,
    /// Its columns.
    pub cols: Vec<Col>,
}

/// A named relation that queries may read: a view or a CTE.
#[derive(Clone, Debug)]
struct Named {
    name: String,
    shared: usize,
    cols: Vec<Col>,
}

/// Binds queries over a fixed set of inputs, accumulating shared
/// relations (views and CTEs) and the types input columns must be read as.
pub struct Binder<'a> {
    inputs: &'a [InputInfo],
    /// Views and CTEs, by index ([`Rel::Shared`]).
    pub shared: Vec<Rel>,
    /// Their names, by index.
    pub shared_names: Vec<String>,
    views: Vec<Named>,
    ctes: Vec<Named>,
    /// Per (input, column): the type the query needs and where it first said so.
    pub needs: BTreeMap<(usize, usize), (ColumnType, Pos)>,
    /// Set when an aggregate appears where plain expressions are bound,
    /// so a `SELECT` without `GROUP BY` can be re-bound as a grouping.
    saw_aggregate: bool,
}

impl<'a> Binder<'a> {
    /// A binder over `inputs`.
    pub fn new(inputs: &'a [InputInfo]) -> Binder<'a> {
        Binder {
            inputs,
            shared: Vec::new(),
            shared_names: Vec::new(),
            views: Vec::new(),
            ctes: Vec::new(),
            needs: BTreeMap::new(),
            saw_aggregate: false,
        }
    }

    /// Binds `CREATE VIEW name AS query`: later queries may read `name`.
    pub fn view(&mut self, name: &str, query: &ast::Query) -> Result<(Bound, usize), SqlError> {
        let bound = self.query(query)?;
        let shared = self.share(name, bound.rel.clone());
        let cols = unqualified(&bound.cols, name);
        self.views.push(Named {
            name: name.to_string(),
            shared,
            cols,
        });
        Ok((bound, shared))
    }

    fn share(&mut self, name: &str, rel: Rel) -> usize {
        self.shared.push(rel);
        self.shared_names.push(name.to_string());
        self.shared.len() - 1
    }

    /// Binds a query: `WITH`, the body, `ORDER BY ... LIMIT`.
    pub fn query(&mut self, q: &ast::Query) -> Result<Bound, SqlError> {
        let ctes_before = self.ctes.len();
        if let Some(with) = &q.with {
            if with.recursive {
                return Err(SqlError::unsupported(
                    Pos::of(with.with_token.0.span),
                    "WITH RECURSIVE",
                ));
            }
            for cte in &with.cte_tables {
                let mut bound = self.query(&cte.query)?;
                let name = ident(&cte.alias.name);
                rename_columns(&mut bound.cols, &cte.alias)?;
                let shared = self.share(&name, bound.rel);
                let cols = unqualified(&bound.cols, &name);
                self.ctes.push(Named { name, shared, cols });
            }
        }
        let result = self.query_body(q);
        self.ctes.truncate(ctes_before);
        result
    }

    fn query_body(&mut self, q: &ast::Query) -> Result<Bound, SqlError> {
        if q.fetch.is_some() || !q.locks.is_empty() || !q.pipe_operators.is_empty() {
            return Err(SqlError::unsupported(
                Pos::of(q.span()),
                "this query clause",
            ));
        }
        let bound = self.set_expr(&q.body)?;
        let (limit, offset) = self.limit(q)?;
        let order = match &q.order_by {
            None => Vec::new(),
            Some(o) => match &o.kind {
                ast::OrderByKind::Expressions(exprs) => exprs.clone(),
                ast::OrderByKind::All(_) => {
                    return Err(SqlError::unsupported(Pos::of(q.span()), "ORDER BY ALL"));
                }
            },
        };
        match limit {
            // Outputs are sets of rows (files are written sorted): an order
            // without a limit changes nothing.
            None if offset == 0 => Ok(bound),
            None => Err(SqlError::new(
                SqlErrorKind::Unsupported,
                Pos::of(q.span()),
                "OFFSET without LIMIT is not supported",
            )),
            Some(_) if order.is_empty() => Err(SqlError::new(
                SqlErrorKind::Invalid,
                Pos::of(q.span()),
                "LIMIT without ORDER BY picks arbitrary rows, and kappa's answers never depend \
                 on arrival order: add an ORDER BY",
            )),
            Some(limit) => {
                let saw = self.saw_aggregate;
                match self.top_k(bound.clone(), &order, limit, offset) {
                    // Sorted by what the output does not hold (a FROM
                    // column, an aggregate): try again with it hidden; if
                    // that fails too, the first error says more.
                    Err(e) => {
                        self.saw_aggregate = saw;
                        let arity = bound.cols.len();
                        match self.top_k_by_hidden(q, &order, arity, (limit, offset)) {
                            Ok(Some(b)) => Ok(b),
                            _ => Err(e),
                        }
                    }
                    ok => ok,
                }
            }
        }
    }

    fn limit(&mut self, q: &ast::Query) -> Result<(Option<u64>, u64), SqlError> {
        let number = |e: &ast::Expr| -> Result<u64, SqlError> {
            match e {
                ast::Expr::Value(v) => match &v.value {
                    ast::Value::Number(n, _) => n.parse().map_err(|_| {
                        SqlError::new(
                            SqlErrorKind::Invalid,
                            Pos::of(v.span),
                            format!("{n} is not a row count"),
                        )
                    }),
                    _ => Err(SqlError::new(
                        SqlErrorKind::Type,
                        Pos::of(v.span),
                        "LIMIT and OFFSET take a whole number",
                    )),
                },
                e => Err(SqlError::unsupported(
                    Pos::of(e.span()),
                    "a LIMIT or OFFSET that is not a number",
                )),
            }
        };
        match &q.limit_clause {
            None => Ok((None, 0)),
            Some(ast::LimitClause::LimitOffset {
                limit,
                offset,
                limit_by,
            }) => {
                if let Some(e) = limit_by.first() {
                    return Err(SqlError::unsupported(Pos::of(e.span()), "LIMIT BY"));
                }
                let limit = limit.as_ref().map(number).transpose()?;
                let offset = offset.as_ref().map(|o| number(&o.value)).transpose()?;
                Ok((limit, offset.unwrap_or(0)))
            }
            Some(ast::LimitClause::OffsetCommaLimit { offset, limit }) => {
                Ok((Some(number(limit)?), number(offset)?))
            }
        }
    }

    /// `ORDER BY ... LIMIT`: sort keys are output columns (by name, alias
    /// or position) or expressions over them.
    fn top_k(
        &mut self,
        bound: Bound,
        order: &[ast::OrderByExpr],
        limit: u64,
        offset: u64,
    ) -> Result<Bound, SqlError> {
        let arity = bound.cols.len();
        let mut extra = Vec::new();
        let mut keys = Vec::new();
        for o in order {
            let column = match &o.expr {
                ast::Expr::Value(v) if matches!(v.value, ast::Value::Number(..)) => {
                    position(&o.expr, arity)?
                }
                e => {
                    let typed = self.expr(e, &mut expr::Cx::plain(&bound.cols))?;
                    match typed.0 {
                        super::scalar::Scalar::Column(c) => c,
                        s => {
                            extra.push(s);
                            arity + extra.len() - 1
                        }
                    }
                }
            };
            keys.push(sort_key(o, column)?);
        }
        if extra.is_empty() {
            let rel = Rel::TopK {
                input: Box::new(bound.rel),
                partition: Vec::new(),
                order: keys,
                limit,
                offset,
                numbered: false,
            };
            return Ok(Bound {
                rel,
                cols: bound.cols,
            });
        }
        // Sort by computed columns, then drop them.
        let mut exprs: Vec<_> = (0..arity).map(super::scalar::Scalar::Column).collect();
        exprs.extend(extra);
        let widened = Rel::Map(Box::new(bound.rel), exprs);
        let top = Rel::TopK {
            input: Box::new(widened),
            partition: Vec::new(),
            order: keys,
            limit,
            offset,
            numbered: false,
        };
        let rel = Rel::Map(
            Box::new(top),
            (0..arity).map(super::scalar::Scalar::Column).collect(),
        );
        Ok(Bound {
            rel,
            cols: bound.cols,
        })
    }

    /// `ORDER BY` a column the select list does not name (`SELECT name
    /// FROM t ORDER BY price DESC LIMIT 3`): the `SELECT` is bound again
    /// with the sort expressions as extra columns, sorted by them, and
    /// they are dropped. `None` when the body is not a plain `SELECT`
    /// (a set operation, or `DISTINCT`, whose rows the extra columns would
    /// change).
    fn top_k_by_hidden(
        &mut self,
        q: &ast::Query,
        order: &[ast::OrderByExpr],
        arity: usize,
        (limit, offset): (u64, u64),
    ) -> Result<Option<Bound>, SqlError> {
        let ast::SetExpr::Select(s) = q.body.as_ref() else {
            return Ok(None);
        };
        if s.distinct.is_some() {
            return Ok(None);
        }
        let (from, correlated) = self.select_rows(s, None)?;
        debug_assert!(correlated.is_empty(), "no enclosing query");
        let extra: Vec<&ast::Expr> = order.iter().map(|o| &o.expr).collect();
        let widened = self.select_rest_with(s, from, &extra)?;
        let mut keys = Vec::new();
        for (i, o) in order.iter().enumerate() {
            keys.push(sort_key(o, arity + i)?);
        }
        let top = Rel::TopK {
            input: Box::new(widened.rel),
            partition: Vec::new(),
            order: keys,
            limit,
            offset,
            numbered: false,
        };
        let mut cols = widened.cols;
        cols.truncate(arity);
        let rel = Rel::Map(
            Box::new(top),
            (0..arity).map(super::scalar::Scalar::Column).collect(),
        );
        Ok(Some(Bound { rel, cols }))
    }

    fn set_expr(&mut self, body: &ast::SetExpr) -> Result<Bound, SqlError> {
        match body {
            ast::SetExpr::Select(select) => self.select(select),
            ast::SetExpr::Query(q) => self.query(q),
            ast::SetExpr::SetOperation {
                left,
                op,
                set_quantifier,
                right,
            } => {
                let pos = Pos::of(body.span());
                let l = self.set_expr(left)?;
                let r = self.set_expr(right)?;
                if l.cols.len() != r.cols.len() {
                    return Err(SqlError::new(
                        SqlErrorKind::Invalid,
                        Pos::of(right.span()),
                        format!(
                            "{op} of queries with {} and {} columns",
                            l.cols.len(),
                            r.cols.len()
                        ),
                    ));
                }
                let all = match set_quantifier {
                    ast::SetQuantifier::All => true,
                    ast::SetQuantifier::Distinct | ast::SetQuantifier::None => false,
                    q => return Err(SqlError::unsupported(pos, format!("{op} {q}"))),
                };
                let cols: Vec<Col> = l
                    .cols
                    .iter()
                    .zip(&r.cols)
                    .map(|(a, b)| Col {
                        ty: unify(a.ty, b.ty),
                        origin: None,
                        hidden: false,
                        ..a.clone()
                    })
                    .collect();
                let rel = match op {
                    ast::SetOperator::Union if all => Rel::Union(vec![l.rel, r.rel]),
                    ast::SetOperator::Union => {
                        Rel::Distinct(Box::new(Rel::Union(vec![l.rel, r.rel])))
                    }
                    ast::SetOperator::Except | ast::SetOperator::Minus => Rel::SetOp {
                        op: SetOp::Except,
                        all,
                        left: Box::new(l.rel),
                        right: Box::new(r.rel),
                    },
                    ast::SetOperator::Intersect => Rel::SetOp {
                        op: SetOp::Intersect,
                        all,
                        left: Box::new(l.rel),
                        right: Box::new(r.rel),
                    },
                };
                Ok(Bound { rel, cols })
            }
            other => Err(SqlError::unsupported(
                Pos::of(other.span()),
                "this kind of query (VALUES, TABLE, INSERT, ...)",
            )),
        }
    }

    /// A table name: a CTE (innermost first), a view, or an input.
    fn table(&self, name: &ast::ObjectName, pos: Pos) -> Result<Bound, SqlError> {
        let parts = object_name(name, pos)?;
        if parts.len() != 1 {
            return Err(SqlError::unsupported(
                pos,
                format!("the qualified table name {name} (tables are named by their inputs)"),
            ));
        }
        let written = &parts[0];
        let table = &written.value;
        let named = self
            .ctes
            .iter()
            .rev()
            .chain(self.views.iter().rev())
            .find(|n| names(written, &n.name));
        if let Some(n) = named {
            return Ok(Bound {
                rel: Rel::Shared(n.shared),
                cols: n.cols.clone(),
            });
        }
        let exact = self.inputs.iter().position(|i| i.name == *table);
        if let Some(i) = exact.or_else(|| self.inputs.iter().position(|i| names(written, &i.name)))
        {
            let input = &self.inputs[i];
            let cols = input
                .columns
                .iter()
                .enumerate()
                .map(|(c, name)| Col {
                    table: Some(input.name.clone()),
                    name: name.clone(),
                    ty: input.declared[c].map_or(SqlType::Any, SqlType::of_column_type),
                    origin: Some((i, c)),
                    hidden: false,
                })
                .collect();
            return Ok(Bound {
                rel: Rel::Scan {
                    input: i,
                    columns: (0..input.columns.len()).collect(),
                },
                cols,
            });
        }
        let known: Vec<&str> = self
            .inputs
            .iter()
            .map(|i| i.name.as_str())
            .chain(self.ctes.iter().map(|n| n.name.as_str()))
            .chain(self.views.iter().map(|n| n.name.as_str()))
            .collect();
        Err(SqlError::new(
            SqlErrorKind::UnknownTable,
            pos,
            format!(
                "unknown table {table}{} (tables are the inputs given with --input: {})",
                did_you_mean(table, known.iter().copied()),
                known.join(", ")
            ),
        ))
    }

    /// Records that input column `origin` must be read as `ty`, or says
    /// why it cannot (used both as a number and as text).
    fn need(&mut self, origin: (usize, usize), ty: ColumnType, pos: Pos) -> Result<(), SqlError> {
        match self.needs.get_mut(&origin) {
            Some((had, _)) if *had == ty => Ok(()),
            // A column used as a date and as a timestamp is read as
            // timestamps, which take dates too (as their midnight).
            Some((had @ (ColumnType::Date | ColumnType::Timestamp), _))
                if matches!(ty, ColumnType::Date | ColumnType::Timestamp) =>
            {
                *had = ColumnType::Timestamp;
                Ok(())
            }
            Some((had, first)) => {
                let input = &self.inputs[origin.0];
                Err(SqlError::new(
                    SqlErrorKind::Type,
                    pos,
                    format!(
                        "column {}.{} is used as {} here but as {} at line {}, column {}: \
                         CAST one of them",
                        input.name,
                        input.columns[origin.1],
                        type_word(ty),
                        type_word(*had),
                        first.line,
                        first.column
                    ),
                ))
            }
            None => {
                self.needs.insert(origin, (ty, pos));
                Ok(())
            }
        }
    }
}

/// An `ORDER BY` entry's direction and null placement, sorting `column`.
fn sort_key(o: &ast::OrderByExpr, column: usize) -> Result<SortKey, SqlError> {
    let descending = match &o.options.sort {
        None | Some(ast::OrderBySort::Asc) => false,
        Some(ast::OrderBySort::Desc) => true,
        Some(_) => {
            return Err(SqlError::unsupported(
                Pos::of(o.expr.span()),
                format!("ORDER BY ... {}", o.options),
            ));
        }
    };
    Ok(SortKey {
        column,
        descending,
        // Nulls last unless NULLS FIRST, in both directions (DuckDB; PostgreSQL
        // puts them first when descending).
        nulls_first: o.options.nulls_first.unwrap_or(false),
    })
}

fn type_word(t: ColumnType) -> &'static str {
    match t {
        ColumnType::Str => "text",
        ColumnType::Bool => "a boolean",
        ColumnType::Date => "a date",
        ColumnType::Timestamp => "a timestamp",
        _ => "a number",
    }
}

/// The common type of two columns combined by a set operation.
fn unify(a: SqlType, b: SqlType) -> SqlType {
    match (a, b) {
        (x, y) if x == y => x,
        (SqlType::Null, y) => y,
        (x, SqlType::Null) => x,
        (x, y) if x.numeric() && y.numeric() && x != SqlType::Any && y != SqlType::Any => {
            SqlType::Number
        }
        _ => SqlType::Any,
    }
}

/// Columns as a view or CTE exposes them: qualified by its name, no origin
/// kept hidden.
fn unqualified(cols: &[Col], table: &str) -> Vec<Col> {
    cols.iter()
        .filter(|c| !c.hidden)
        .map(|c| Col {
            table: Some(table.to_string()),
            hidden: false,
            ..c.clone()
        })
        .collect()
}

/// Applies `alias (a, b, ...)` column names.
fn rename_columns(cols: &mut [Col], alias: &ast::TableAlias) -> Result<(), SqlError> {
    if alias.columns.len() > cols.len() {
        return Err(SqlError::new(
            SqlErrorKind::Invalid,
            Pos::of(alias.name.span),
            format!(
                "{} names {} columns, but it has {}",
                alias.name,
                alias.columns.len(),
                cols.len()
            ),
        ));
    }
    for (c, a) in cols.iter_mut().zip(&alias.columns) {
        c.name = ident(&a.name);
    }
    Ok(())
}

/// An identifier's name as written (output columns keep their spelling).
pub fn ident(i: &ast::Ident) -> String {
    i.value.clone()
}

/// Whether `written` names `name`: exactly when quoted, ignoring ASCII
/// case otherwise (SQL folds unquoted names; a CSV header keeps its case).
pub fn names(written: &ast::Ident, name: &str) -> bool {
    if written.quote_style.is_some() {
        written.value == name
    } else {
        written.value.eq_ignore_ascii_case(name)
    }
}

fn object_name(name: &ast::ObjectName, pos: Pos) -> Result<Vec<ast::Ident>, SqlError> {
    name.0
        .iter()
        .map(|p| match p {
            ast::ObjectNamePart::Identifier(i) => Ok(i.clone()),
            _ => Err(SqlError::unsupported(pos, format!("the name {name}"))),
        })
        .collect()
}

/// `ORDER BY 2`, `GROUP BY 1`: a 1-based output column position.
fn position(e: &ast::Expr, arity: usize) -> Result<usize, SqlError> {
    let pos = Pos::of(e.span());
    let ast::Expr::Value(v) = e else {
        unreachable!("called on number literals")
    };
    let ast::Value::Number(n, _) = &v.value else {
        unreachable!("called on number literals")
    };
    match n.parse::<usize>() {
        Ok(p) if (1..=arity).contains(&p) => Ok(p - 1),
        _ => Err(SqlError::new(
            SqlErrorKind::Invalid,
            pos,
            format!("there is no column {n}: the select list has {arity}"),
        )),
    }
}
