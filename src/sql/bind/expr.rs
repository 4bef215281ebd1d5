//! Binding scalar expressions: names to positions, literals to values,
//! operators and functions to [`Scalar`] nodes, with type checks.
//!
//! In a grouped query ([`AggState`]) an expression is bound against the
//! grouping's output: a subexpression equal to a `GROUP BY` expression
//! becomes that key column, an aggregate call becomes its result column,
//! and any other column reference is an error, as in SQL.

use sqlparser::ast::{self, Spanned};

use super::subquery::ScalarSubquery;
use super::{Binder, Col, SqlType, names};
use crate::calendar::{self, Field, Interval, MICROS_PER_DAY};
use crate::ops::aggregate::AggKind;
use crate::schema::ColumnType;
use crate::sql::error::{Pos, SqlError, SqlErrorKind, did_you_mean};
use crate::sql::rel::AggCall;
use crate::sql::scalar::{Arith, CastTo, Compare, Func, Scalar};
use crate::value::Value;

/// A bound expression and its type.
pub type Typed = (Scalar, SqlType);

/// The state of a grouped query's binding.
#[derive(Debug, Default)]
pub struct AggState {
    /// The `GROUP BY` expressions, over the FROM columns.
    pub groups: Vec<Scalar>,
    /// The grouping's output columns: the keys, then one per aggregate.
    pub out: Vec<Col>,
    /// The aggregates: the call, and its argument over the FROM columns.
    pub calls: Vec<(AggCall, Option<Scalar>)>,
}

/// Where an expression is bound: the columns names resolve to, and in a
/// grouped query the grouping.
pub struct Cx<'s> {
    /// The columns of the FROM clause (or of the relation being sorted).
    pub from: &'s [Col],
    /// The grouping, when the query groups.
    pub agg: Option<&'s mut AggState>,
    /// In a subquery's WHERE: the enclosing query's columns, which names
    /// not found in `from` resolve to, at positions `from.len() + i`.
    pub outer: Option<&'s [Col]>,
    /// Where scalar subqueries may appear: the ones bound so far, each
    /// read at position [`SUBQUERY`]` + i` until the caller joins them in.
    pub subqueries: Option<&'s mut Vec<ScalarSubquery>>,
}

/// The first position of a scalar subquery's value in a bound expression
/// (see [`Cx::subqueries`]); far above any real column.
pub const SUBQUERY: usize = 1 << 40;

impl<'s> Cx<'s> {
    /// Plain binding over `from`.
    pub fn plain(from: &'s [Col]) -> Cx<'s> {
        Cx {
            from,
            agg: None,
            outer: None,
            subqueries: None,
        }
    }

    /// The column a bound position reads, if it is a column of the input
    /// or of the enclosing query (not a scalar subquery's value).
    fn col(&self, i: usize) -> Option<&Col> {
        let own = match &self.agg {
            Some(a) => &a.out,
            None => self.from,
        };
        match i.checked_sub(own.len()) {
            None => own.get(i),
            Some(j) if i < SUBQUERY => self.outer.and_then(|o| o.get(j)),
            Some(_) => None,
        }
    }
}

/// What an operand must be.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Want {
    Number,
    Text,
    Bool,
    /// A date or a timestamp.
    Time,
}

fn pos(e: &impl Spanned) -> Pos {
    Pos::of(e.span())
}

impl Binder<'_> {
    /// Binds `e` in `cx`.
    pub(super) fn expr(&mut self, e: &ast::Expr, cx: &mut Cx<'_>) -> Result<Typed, SqlError> {
        if cx.agg.is_some()
            && let Some(t) = self.group_match(e, cx)?
        {
            return Ok(t);
        }
        use ast::Expr as E;
        match e {
            E::Identifier(i) => self.column(std::slice::from_ref(i), e, cx),
            E::CompoundIdentifier(parts) => self.column(parts, e, cx),
            E::Value(v) => literal(&v.value, Pos::of(v.span)),
            E::Nested(inner) => self.expr(inner, cx),
            E::BinaryOp { left, op, right } => self.binary(e, left, op, right, cx),
            E::UnaryOp { op, expr } => {
                let t = self.expr(expr, cx)?;
                match op {
                    ast::UnaryOperator::Minus => {
                        self.want(&t, Want::Number, expr, cx)?;
                        let ty = if t.1 == SqlType::Any {
                            SqlType::Number
                        } else {
                            t.1
                        };
                        Ok((Scalar::Neg(Box::new(t.0)), ty))
                    }
                    ast::UnaryOperator::Plus => {
                        self.want(&t, Want::Number, expr, cx)?;
                        Ok(t)
                    }
                    ast::UnaryOperator::Not => {
                        self.want(&t, Want::Bool, expr, cx)?;
                        Ok((Scalar::Not(Box::new(t.0)), SqlType::Bool))
                    }
                    op => Err(SqlError::unsupported(pos(e), format!("the operator {op}"))),
                }
            }
            E::IsNull(x) | E::IsNotNull(x) => {
                let t = self.expr(x, cx)?;
                Ok((
                    Scalar::IsNull(Box::new(t.0), matches!(e, E::IsNull(_))),
                    SqlType::Bool,
                ))
            }
            E::IsTrue(x) | E::IsFalse(x) | E::IsNotTrue(x) | E::IsNotFalse(x) => {
                let t = self.expr(x, cx)?;
                self.want(&t, Want::Bool, x, cx)?;
                let target = matches!(e, E::IsTrue(_) | E::IsNotTrue(_));
                let is = Scalar::Compare(
                    Compare::Eq,
                    Box::new(t.0),
                    Box::new(Scalar::Literal(crate::sql::scalar::boolean(target))),
                );
                // `x IS TRUE` is never null: false when x is null.
                let is = Scalar::Call(Func::Coalesce, vec![is, bool_lit(false)]);
                let negated = matches!(e, E::IsNotTrue(_) | E::IsNotFalse(_));
                Ok((maybe_not(is, negated), SqlType::Bool))
            }
            E::IsDistinctFrom(a, b) | E::IsNotDistinctFrom(a, b) => {
                let (mut ta, mut tb) = (self.expr(a, cx)?, self.expr(b, cx)?);
                self.comparable(&mut ta, a, &mut tb, b, cx)?;
                let same = not_distinct(ta.0, tb.0);
                Ok((
                    maybe_not(same, matches!(e, E::IsDistinctFrom(..))),
                    SqlType::Bool,
                ))
            }
            E::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let mut t = self.expr(expr, cx)?;
                let (mut lo, mut hi) = (self.expr(low, cx)?, self.expr(high, cx)?);
                self.comparable(&mut t, expr, &mut lo, low, cx)?;
                self.comparable(&mut t, expr, &mut hi, high, cx)?;
                let ge = Scalar::Compare(Compare::GtEq, Box::new(t.0.clone()), Box::new(lo.0));
                let le = Scalar::Compare(Compare::LtEq, Box::new(t.0), Box::new(hi.0));
                let both = Scalar::binary(Scalar::And, ge, le);
                Ok((maybe_not(both, *negated), SqlType::Bool))
            }
            E::In {
                expr,
                target: ast::InTarget::List(list),
                negated,
                ..
            } => {
                let mut t = self.expr(expr, cx)?;
                let mut items = Vec::new();
                for item in list {
                    let mut ti = self.expr(item, cx)?;
                    self.comparable(&mut t, expr, &mut ti, item, cx)?;
                    items.push(ti.0);
                }
                Ok((
                    Scalar::InList(Box::new(t.0), items, *negated),
                    SqlType::Bool,
                ))
            }
            E::Like {
                negated,
                any,
                expr,
                pattern,
                escape_char,
            }
            | E::ILike {
                negated,
                any,
                expr,
                pattern,
                escape_char,
            } => {
                if *any {
                    return Err(SqlError::unsupported(pos(e), "LIKE ANY"));
                }
                let t = self.expr(expr, cx)?;
                let p = self.expr(pattern, cx)?;
                self.want(&t, Want::Text, expr, cx)?;
                self.want(&p, Want::Text, pattern, cx)?;
                let escape = match escape_char {
                    None => None,
                    Some(c) => Some(escape_character(c)?),
                };
                Ok((
                    Scalar::Like {
                        expr: Box::new(t.0),
                        pattern: Box::new(p.0),
                        escape,
                        negated: *negated,
                        insensitive: matches!(e, E::ILike { .. }),
                    },
                    SqlType::Bool,
                ))
            }
            E::Case {
                operand,
                conditions,
                else_result,
                ..
            } => self.case(operand.as_deref(), conditions, else_result.as_deref(), cx),
            E::Cast {
                kind,
                expr,
                data_type,
                format,
            } => {
                // CAST is TRY_CAST (see `scalar`): both kinds bind alike.
                let _ = kind;
                if format.is_some() {
                    return Err(SqlError::unsupported(pos(e), "CAST ... FORMAT"));
                }
                let t = self.expr(expr, cx)?;
                let (to, ty) = cast_target(data_type, pos(e))?;
                Ok((Scalar::Cast(Box::new(t.0), to), ty))
            }
            E::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                let mut args = vec![expr.as_ref()];
                match substring_from {
                    Some(f) => args.push(f),
                    None => return Err(SqlError::unsupported(pos(e), "SUBSTRING without FROM")),
                }
                args.extend(substring_for.as_deref());
                self.call("substring", &args, e, cx)
            }
            E::Trim {
                trim_where,
                trim_what,
                expr,
                trim_characters,
            } => {
                if trim_characters.is_some() {
                    return Err(SqlError::unsupported(
                        pos(e),
                        "TRIM with a list of characters",
                    ));
                }
                let name = match trim_where {
                    None | Some(ast::TrimWhereField::Both) => "trim",
                    Some(ast::TrimWhereField::Leading) => "ltrim",
                    Some(ast::TrimWhereField::Trailing) => "rtrim",
                };
                let mut args = vec![expr.as_ref()];
                args.extend(trim_what.as_deref());
                self.call(name, &args, e, cx)
            }
            E::Ceil { expr, .. } => self.call("ceil", &[expr], e, cx),
            E::Extract { field, expr, .. } => self.extract(field, expr, e, cx),
            E::TypedString(ts) => {
                let text = match &ts.value.value {
                    ast::Value::SingleQuotedString(t) => t,
                    other => {
                        return Err(SqlError::unsupported(
                            pos(e),
                            format!("the literal {other}"),
                        ));
                    }
                };
                match cast_target(&ts.data_type, pos(e))? {
                    (CastTo::Date, ty) | (CastTo::Timestamp, ty) => time_literal(ty, text, pos(e)),
                    (to, ty) => Ok((
                        Scalar::Literal(crate::sql::scalar::cast(Value::str(text), to)),
                        ty,
                    )),
                }
            }
            E::Interval(_) => Err(SqlError::unsupported(
                pos(e),
                "an INTERVAL other than added to or subtracted from a date or timestamp \
                 (d + INTERVAL '1' DAY) or as a window's size",
            )),
            E::Floor { expr, .. } => self.call("floor", &[expr], e, cx),
            E::Function(f) => self.function(f, e, cx),
            E::Subquery(q) => self.scalar_subquery(q, e, cx),
            E::Exists { .. } | E::In { .. } => Err(SqlError::unsupported(
                pos(e),
                "EXISTS and IN (subquery) other than as conditions of a WHERE clause, \
                 joined by AND",
            )),
            other => Err(SqlError::unsupported(
                pos(other),
                format!("the expression {other}"),
            )),
        }
    }

    /// In a grouped query: `e` as a key column if it is a `GROUP BY`
    /// expression; an error if it is a column that is not one.
    fn group_match(&mut self, e: &ast::Expr, cx: &mut Cx<'_>) -> Result<Option<Typed>, SqlError> {
        let saw = self.saw_aggregate;
        let plain = self.expr(e, &mut Cx::plain(cx.from));
        self.saw_aggregate = saw;
        let agg = cx.agg.as_deref().expect("grouped");
        match plain {
            Ok((s, _)) => {
                if let Some(k) = agg.groups.iter().position(|g| *g == s) {
                    return Ok(Some((Scalar::Column(k), agg.out[k].ty)));
                }
                let mut cols = Vec::new();
                s.columns(&mut cols);
                if cols.is_empty() {
                    return Ok(Some((s, self.expr(e, &mut Cx::plain(cx.from))?.1)));
                }
                if matches!(
                    e,
                    ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_)
                ) {
                    return Err(SqlError::new(
                        SqlErrorKind::Invalid,
                        pos(e),
                        format!(
                            "column {e} must appear in the GROUP BY clause or be used in an \
                             aggregate function"
                        ),
                    ));
                }
                Ok(None)
            }
            Err(_) => Ok(None),
        }
    }

    fn column(
        &mut self,
        parts: &[ast::Ident],
        e: &ast::Expr,
        cx: &mut Cx<'_>,
    ) -> Result<Typed, SqlError> {
        let at = pos(e);
        let (mut from, mut base) = (cx.from, 0);
        let mut found = lookup(parts, from, at, e)?;
        if let (true, Some(outer)) = (found.is_empty(), cx.outer) {
            let in_outer = lookup(parts, outer, at, e)?;
            if !in_outer.is_empty() {
                (from, base, found) = (outer, cx.from.len(), in_outer);
            }
        }
        match found.as_slice() {
            [i] => {
                if cx.agg.is_some() {
                    // Reached only when the column is not a GROUP BY key.
                    return Err(SqlError::new(
                        SqlErrorKind::Invalid,
                        at,
                        format!(
                            "column {e} must appear in the GROUP BY clause or be used in an \
                             aggregate function"
                        ),
                    ));
                }
                Ok((Scalar::Column(base + *i), from[*i].ty))
            }
            [] => {
                let name = &parts[parts.len() - 1].value;
                if let [table, _] = parts
                    && !from
                        .iter()
                        .any(|c| c.table.as_deref().is_some_and(|t| names(table, t)))
                {
                    let tables: Vec<&str> =
                        from.iter().filter_map(|c| c.table.as_deref()).collect();
                    return Err(SqlError::new(
                        SqlErrorKind::UnknownTable,
                        Pos::of(table.span),
                        format!(
                            "no table or alias {} in this query's FROM{}",
                            table.value,
                            did_you_mean(&table.value, tables)
                        ),
                    ));
                }
                let known: Vec<&str> = from
                    .iter()
                    .filter(|c| !c.hidden)
                    .map(|c| c.name.as_str())
                    .collect();
                Err(SqlError::new(
                    SqlErrorKind::UnknownColumn,
                    at,
                    format!(
                        "unknown column {e}{} (columns here: {})",
                        did_you_mean(name, known.iter().copied()),
                        known.join(", ")
                    ),
                ))
            }
            several => {
                let tables: Vec<String> = several
                    .iter()
                    .map(|&i| {
                        format!(
                            "{}.{}",
                            from[i].table.as_deref().unwrap_or("?"),
                            from[i].name
                        )
                    })
                    .collect();
                Err(SqlError::new(
                    SqlErrorKind::UnknownColumn,
                    at,
                    format!("column {e} is ambiguous: it may be {}", tables.join(" or ")),
                ))
            }
        }
    }

    fn binary(
        &mut self,
        e: &ast::Expr,
        left: &ast::Expr,
        op: &ast::BinaryOperator,
        right: &ast::Expr,
        cx: &mut Cx<'_>,
    ) -> Result<Typed, SqlError> {
        use ast::BinaryOperator as B;
        if let Some(t) = self.interval_arith(left, op, right, cx)? {
            return Ok(t);
        }
        let mut l = self.expr(left, cx)?;
        let mut r = self.expr(right, cx)?;
        if let Some(t) = date_arith(&l, op, &r) {
            return Ok(t);
        }
        let arith = match op {
            B::Plus => Some(Arith::Add),
            B::Minus => Some(Arith::Sub),
            B::Multiply => Some(Arith::Mul),
            B::Divide => Some(Arith::Div),
            B::Modulo => Some(Arith::Mod),
            _ => None,
        };
        if let Some(a) = arith {
            self.want(&l, Want::Number, left, cx)?;
            self.want(&r, Want::Number, right, cx)?;
            let ty = match (l.1, r.1) {
                (SqlType::Int, SqlType::Int) => SqlType::Int,
                (SqlType::Float, _) | (_, SqlType::Float) if a != Arith::Mod => SqlType::Float,
                _ => SqlType::Number,
            };
            return Ok((Scalar::Arith(a, Box::new(l.0), Box::new(r.0)), ty));
        }
        let compare = match op {
            B::Eq => Some(Compare::Eq),
            B::NotEq => Some(Compare::NotEq),
            B::Lt => Some(Compare::Lt),
            B::LtEq => Some(Compare::LtEq),
            B::Gt => Some(Compare::Gt),
            B::GtEq => Some(Compare::GtEq),
            _ => None,
        };
        if let Some(c) = compare {
            self.comparable(&mut l, left, &mut r, right, cx)?;
            return Ok((
                Scalar::Compare(c, Box::new(l.0), Box::new(r.0)),
                SqlType::Bool,
            ));
        }
        match op {
            B::And | B::Or => {
                self.want(&l, Want::Bool, left, cx)?;
                self.want(&r, Want::Bool, right, cx)?;
                let make = if *op == B::And {
                    Scalar::And
                } else {
                    Scalar::Or
                };
                Ok((Scalar::binary(make, l.0, r.0), SqlType::Bool))
            }
            B::StringConcat => Ok((Scalar::binary(Scalar::Concat, l.0, r.0), SqlType::Text)),
            op => Err(SqlError::unsupported(pos(e), format!("the operator {op}"))),
        }
    }

    /// Checks that two operands can be compared, typing an inferred input
    /// column by the other side (`price > 10` reads `price` as a number,
    /// `code = '007'` reads `code` as text).
    pub(super) fn comparable(
        &mut self,
        l: &mut Typed,
        le: &ast::Expr,
        r: &mut Typed,
        re: &ast::Expr,
        cx: &mut Cx<'_>,
    ) -> Result<(), SqlError> {
        text_as_time(l, r.1, le)?;
        text_as_time(r, l.1, re)?;
        // An inferred column compared with text that is a date or timestamp
        // ('2024-03-01') stays inferred: such text compares as the instants
        // do, and where the column is read as dates for another use, the
        // text is read as one at the comparison (`scalar::sql_cmp`).
        if (time_text(l) && r.1 == SqlType::Any) || (time_text(r) && l.1 == SqlType::Any) {
            return Ok(());
        }
        match (class(l.1), class(r.1)) {
            (Some(a), Some(b)) if a != b => Err(SqlError::new(
                SqlErrorKind::Type,
                pos(re),
                format!(
                    "cannot compare {} ({le}) with {} ({re}): CAST one side",
                    l.1.name(),
                    r.1.name()
                ),
            )),
            (Some(_), None) => self.read_as(r, l.1, re, cx),
            (None, Some(_)) => self.read_as(l, r.1, le, cx),
            _ => Ok(()),
        }
    }

    /// An operand compared with a value of type `like`: an inferred input
    /// column is read as that type (`d < DATE '1994-01-01'` reads `d` as
    /// dates).
    fn read_as(
        &mut self,
        t: &Typed,
        like: SqlType,
        e: &ast::Expr,
        cx: &Cx<'_>,
    ) -> Result<(), SqlError> {
        let ty = match like {
            SqlType::Date => ColumnType::Date,
            SqlType::Timestamp => ColumnType::Timestamp,
            _ => return self.want(t, class(like).expect("a typed operand"), e, cx),
        };
        match (t.1, origin(t, cx)) {
            (SqlType::Any, Some(o)) => self.need(o, ty, pos(e)),
            _ => Ok(()),
        }
    }

    /// Checks (and for inferred input columns, records) that an operand is
    /// of the wanted kind.
    pub(super) fn want(
        &mut self,
        t: &Typed,
        want: Want,
        e: &ast::Expr,
        cx: &Cx<'_>,
    ) -> Result<(), SqlError> {
        let ok = match want {
            Want::Number => matches!(
                t.1,
                SqlType::Int | SqlType::Float | SqlType::Number | SqlType::Null
            ),
            Want::Text => matches!(t.1, SqlType::Text | SqlType::Null),
            Want::Bool => matches!(t.1, SqlType::Bool | SqlType::Null),
            Want::Time => matches!(t.1, SqlType::Date | SqlType::Timestamp | SqlType::Null),
        };
        if ok {
            return Ok(());
        }
        if t.1 == SqlType::Any {
            let Some(o) = origin(t, cx) else {
                return Ok(());
            };
            // A column whose use does not say date or timestamp is read as
            // timestamps, which take dates too.
            let ty = match want {
                Want::Number => ColumnType::Number,
                Want::Text => ColumnType::Str,
                Want::Bool => ColumnType::Bool,
                Want::Time => ColumnType::Timestamp,
            };
            return self.need(o, ty, pos(e));
        }
        let wanted = match want {
            Want::Number => "a number",
            Want::Text => "text",
            Want::Bool => "a boolean",
            Want::Time => "a date or a timestamp",
        };
        Err(SqlError::new(
            SqlErrorKind::Type,
            pos(e),
            format!("{e} is {}, but {wanted} is needed here", t.1.name()),
        ))
    }

    fn case(
        &mut self,
        operand: Option<&ast::Expr>,
        conditions: &[ast::CaseWhen],
        otherwise: Option<&ast::Expr>,
        cx: &mut Cx<'_>,
    ) -> Result<Typed, SqlError> {
        let mut subject = operand.map(|o| self.expr(o, cx)).transpose()?;
        let mut branches = Vec::new();
        let mut ty = SqlType::Null;
        for w in conditions {
            let mut c = self.expr(&w.condition, cx)?;
            let cond = match &mut subject {
                Some(s) => {
                    self.comparable(s, operand.expect("subject"), &mut c, &w.condition, cx)?;
                    Scalar::Compare(Compare::Eq, Box::new(s.0.clone()), Box::new(c.0))
                }
                None => {
                    self.want(&c, Want::Bool, &w.condition, cx)?;
                    c.0
                }
            };
            let then = self.expr(&w.result, cx)?;
            ty = result_type(ty, then.1, &w.result)?;
            branches.push((cond, then.0));
        }
        let otherwise = match otherwise {
            Some(e) => {
                let t = self.expr(e, cx)?;
                ty = result_type(ty, t.1, e)?;
                t.0
            }
            None => Scalar::Literal(Value::Null),
        };
        Ok((Scalar::Case(branches, Box::new(otherwise)), ty))
    }

    fn function(
        &mut self,
        f: &ast::Function,
        e: &ast::Expr,
        cx: &mut Cx<'_>,
    ) -> Result<Typed, SqlError> {
        let at = pos(e);
        let name = match f.name.0.as_slice() {
            [ast::ObjectNamePart::Identifier(i)] => i.value.to_lowercase(),
            _ => {
                return Err(SqlError::unsupported(
                    at,
                    format!("the function {}", f.name),
                ));
            }
        };
        if f.over.is_some() {
            return Err(SqlError::unsupported(
                at,
                format!(
                    "the window function {name}(...) OVER (...) (only ROW_NUMBER() OVER \
                     (PARTITION BY ... ORDER BY ...), as a column of a select list)"
                ),
            ));
        }
        if f.filter.is_some() || !f.within_group.is_empty() || f.null_treatment.is_some() {
            return Err(SqlError::unsupported(
                at,
                format!("this form of {name}(...)"),
            ));
        }
        let list = match &f.args {
            ast::FunctionArguments::List(l) => Some(l),
            // `user`, `current_date`, ...: keywords the parser reads as
            // functions, but a column of that name is what a query means.
            ast::FunctionArguments::None => match f.name.0.as_slice() {
                [ast::ObjectNamePart::Identifier(i)] => {
                    let column = self.column(std::slice::from_ref(i), e, cx);
                    return match column {
                        Err(_) if WALL_CLOCK.contains(&name.as_str()) => Err(wall_clock(&name, at)),
                        other => other,
                    };
                }
                _ => None,
            },
            ast::FunctionArguments::Subquery(_) => {
                return Err(SqlError::unsupported(
                    at,
                    "a subquery as a function argument",
                ));
            }
        };
        if let Some(kind) = aggregate_kind(&name) {
            return self.aggregate(&name, kind, list, e, cx);
        }
        let Some(list) = list else {
            return Err(SqlError::unsupported(
                at,
                format!("{name} without parentheses"),
            ));
        };
        if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
            return Err(SqlError::unsupported(
                at,
                format!("this form of {name}(...)"),
            ));
        }
        let mut args = Vec::new();
        for a in &list.args {
            match a {
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) => args.push(x),
                _ => {
                    return Err(SqlError::unsupported(
                        at,
                        format!("this argument of {name}"),
                    ));
                }
            }
        }
        if WALL_CLOCK.contains(&name.as_str()) {
            return Err(wall_clock(&name, at));
        }
        if name == "date_trunc" {
            return self.date_trunc(&args, e, cx);
        }
        self.call(&name, &args, e, cx)
    }

    /// A date or timestamp plus or minus an `INTERVAL` literal (a
    /// timestamp); `None` when neither operand is an interval.
    fn interval_arith(
        &mut self,
        left: &ast::Expr,
        op: &ast::BinaryOperator,
        right: &ast::Expr,
        cx: &mut Cx<'_>,
    ) -> Result<Option<Typed>, SqlError> {
        use ast::BinaryOperator as B;
        use ast::Expr as E;
        let (base, iv, negate) = match (left, op, right) {
            (x, B::Plus, E::Interval(i)) | (E::Interval(i), B::Plus, x) => (x, i, false),
            (x, B::Minus, E::Interval(i)) => (x, i, true),
            (E::Interval(_), _, _) | (_, _, E::Interval(_)) => {
                return Err(SqlError::unsupported(
                    pos(left).max(pos(right)),
                    format!("the operator {op} with an INTERVAL (only date ± INTERVAL)"),
                ));
            }
            _ => return Ok(None),
        };
        let at = if negate { pos(right) } else { pos(left) };
        let mut by = interval(iv, at)?;
        if negate {
            by = by.negated().ok_or_else(|| interval_too_large(at))?;
        }
        let t = self.expr(base, cx)?;
        self.want(&t, Want::Time, base, cx)?;
        Ok(Some((Scalar::Shift(Box::new(t.0), by), SqlType::Timestamp)))
    }

    /// `EXTRACT(field FROM d)`: an integer (the epoch, a number).
    fn extract(
        &mut self,
        field: &ast::DateTimeField,
        x: &ast::Expr,
        e: &ast::Expr,
        cx: &mut Cx<'_>,
    ) -> Result<Typed, SqlError> {
        let f = time_field(&field.to_string(), pos(e))?;
        let t = self.expr(x, cx)?;
        self.want(&t, Want::Time, x, cx)?;
        let ty = if f == Field::Epoch {
            SqlType::Number
        } else {
            SqlType::Int
        };
        Ok((Scalar::Call(Func::Extract(f), vec![t.0]), ty))
    }

    /// `date_trunc('unit', d)`: a date stays a date, anything else is read
    /// as a timestamp.
    fn date_trunc(
        &mut self,
        args: &[&ast::Expr],
        e: &ast::Expr,
        cx: &mut Cx<'_>,
    ) -> Result<Typed, SqlError> {
        let unit = match args {
            [ast::Expr::Value(v), _] => match &v.value {
                ast::Value::SingleQuotedString(u) => Some(u.as_str()),
                _ => None,
            },
            _ => None,
        };
        let Some(unit) = unit else {
            return Err(SqlError::new(
                SqlErrorKind::Invalid,
                pos(e),
                "date_trunc takes a unit in quotes and a date or timestamp: date_trunc('hour', ts)",
            ));
        };
        let f = time_field(unit, pos(args[0]))?;
        if calendar::truncate(f, 0).is_none() {
            return Err(SqlError::unsupported(
                pos(args[0]),
                format!("date_trunc to '{unit}'"),
            ));
        }
        let t = self.expr(args[1], cx)?;
        self.want(&t, Want::Time, args[1], cx)?;
        let ty = if t.1 == SqlType::Date {
            SqlType::Date
        } else {
            SqlType::Timestamp
        };
        Ok((Scalar::Call(Func::DateTrunc(f), vec![t.0]), ty))
    }

    /// A scalar function by name.
    fn call(
        &mut self,
        name: &str,
        args: &[&ast::Expr],
        e: &ast::Expr,
        cx: &mut Cx<'_>,
    ) -> Result<Typed, SqlError> {
        let at = pos(e);
        let Some((func, arity)) = Func::by_name(name) else {
            let known = [
                "coalesce",
                "nullif",
                "lower",
                "upper",
                "length",
                "trim",
                "ltrim",
                "rtrim",
                "substring",
                "replace",
                "abs",
                "round",
                "floor",
                "ceil",
                "concat",
                "greatest",
                "least",
                "date_trunc",
                "to_timestamp",
                "epoch_ms",
                "make_date",
                "count",
                "sum",
                "avg",
                "min",
                "max",
            ];
            return Err(SqlError::new(
                SqlErrorKind::Unsupported,
                at,
                format!("unknown function {name}{}", did_you_mean(name, known)),
            ));
        };
        if !arity.contains(&args.len()) {
            return Err(SqlError::new(
                SqlErrorKind::Invalid,
                at,
                format!(
                    "{name} takes {} arguments, not {}",
                    arity_text(&arity),
                    args.len()
                ),
            ));
        }
        let mut bound = Vec::new();
        for a in args {
            bound.push(self.expr(a, cx)?);
        }
        if let [a, b] = &mut bound[..]
            && func == Func::NullIf
        {
            self.comparable(a, args[0], b, args[1], cx)?;
        }
        let want = |i: usize| -> Option<Want> {
            match func {
                Func::Lower | Func::Upper | Func::Length | Func::Replace => Some(Want::Text),
                Func::Trim | Func::LTrim | Func::RTrim => Some(Want::Text),
                Func::Substring if i == 0 => Some(Want::Text),
                Func::Substring => Some(Want::Number),
                Func::Abs | Func::Round | Func::Floor | Func::Ceil => Some(Want::Number),
                Func::ToTimestamp | Func::EpochMs | Func::MakeDate => Some(Want::Number),
                _ => None,
            }
        };
        for (i, (t, a)) in bound.iter().zip(args).enumerate() {
            if let Some(w) = want(i) {
                self.want(t, w, a, cx)?;
            }
        }
        let ty = match func {
            Func::Coalesce | Func::Greatest | Func::Least => {
                let mut ty = SqlType::Null;
                for (t, a) in bound.iter().zip(args) {
                    ty = result_type(ty, t.1, a)?;
                }
                ty
            }
            Func::NullIf => bound[0].1,
            Func::Length => SqlType::Int,
            Func::ToTimestamp | Func::EpochMs => SqlType::Timestamp,
            Func::MakeDate => SqlType::Date,
            Func::Abs | Func::Floor | Func::Ceil | Func::Round => match bound[0].1 {
                SqlType::Any => SqlType::Number,
                t => t,
            },
            _ => SqlType::Text,
        };
        Ok((
            Scalar::Call(func, bound.into_iter().map(|t| t.0).collect()),
            ty,
        ))
    }

    fn aggregate(
        &mut self,
        name: &str,
        kind: AggKind,
        list: Option<&ast::FunctionArgumentList>,
        e: &ast::Expr,
        cx: &mut Cx<'_>,
    ) -> Result<Typed, SqlError> {
        let at = pos(e);
        if cx.agg.is_none() {
            self.saw_aggregate = true;
            return Err(SqlError::new(
                SqlErrorKind::Invalid,
                at,
                format!(
                    "the aggregate {name}(...) is not allowed here (WHERE, ON, GROUP BY, or inside another aggregate)"
                ),
            ));
        }
        let Some(list) = list else {
            return Err(SqlError::new(
                SqlErrorKind::Invalid,
                at,
                format!("{name} needs an argument"),
            ));
        };
        let distinct = matches!(
            list.duplicate_treatment,
            Some(ast::DuplicateTreatment::Distinct)
        );
        if !list.clauses.is_empty() {
            return Err(SqlError::unsupported(
                at,
                format!("this form of {name}(...)"),
            ));
        }
        let arg = match list.args.as_slice() {
            [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard)]
                if name == "count" && !distinct =>
            {
                None
            }
            [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x))] => Some(x),
            _ => {
                return Err(SqlError::new(
                    SqlErrorKind::Invalid,
                    at,
                    format!("{name} takes one argument"),
                ));
            }
        };
        let from = cx.from;
        let bound = match arg {
            Some(x) => {
                let t = self.expr(x, &mut Cx::plain(from))?;
                if matches!(kind, AggKind::Sum | AggKind::Avg) {
                    self.want(&t, Want::Number, x, &Cx::plain(from))?;
                }
                Some(t)
            }
            None => None,
        };
        let (kind, arg, zero, ty) = match (kind, distinct, bound) {
            (AggKind::Count, false, None) => (AggKind::Count, None, true, SqlType::Int),
            // count(x) counts the non-null values: the sum of 1 per non-null.
            (AggKind::Count, false, Some(t)) => {
                let one_if_present = Scalar::Case(
                    vec![(
                        Scalar::IsNull(Box::new(t.0), true),
                        Scalar::Literal(Value::Int(0)),
                    )],
                    Box::new(Scalar::Literal(Value::Int(1))),
                );
                (AggKind::Sum, Some(one_if_present), true, SqlType::Int)
            }
            (AggKind::Count, true, Some(t)) => {
                (AggKind::CountDistinct, Some(t.0), true, SqlType::Int)
            }
            (_, true, _) => {
                return Err(SqlError::unsupported(at, format!("{name}(DISTINCT ...)")));
            }
            (AggKind::Sum, _, Some(t)) => {
                let ty = match t.1 {
                    SqlType::Int | SqlType::Float => t.1,
                    _ => SqlType::Number,
                };
                (AggKind::Sum, Some(t.0), false, ty)
            }
            (AggKind::Avg, _, Some(t)) => (AggKind::Avg, Some(t.0), false, SqlType::Float),
            (k, _, Some(t)) => (k, Some(t.0), false, t.1),
            (_, _, None) => unreachable!("only count takes *"),
        };
        let agg = cx.agg.as_deref_mut().expect("grouped");
        let call = AggCall {
            kind,
            arg: None,
            empty_is_zero: zero,
        };
        let index = match agg
            .calls
            .iter()
            .position(|(c, a)| c.kind == kind && *a == arg)
        {
            Some(i) => i,
            None => {
                agg.calls.push((call, arg));
                agg.out.push(Col {
                    table: None,
                    name: e.to_string(),
                    ty,
                    origin: None,
                    hidden: false,
                });
                agg.calls.len() - 1
            }
        };
        let column = agg.groups.len() + index;
        Ok((Scalar::Column(column), agg.out[column].ty))
    }
}

fn aggregate_kind(name: &str) -> Option<AggKind> {
    Some(match name {
        "count" => AggKind::Count,
        "sum" => AggKind::Sum,
        "avg" => AggKind::Avg,
        "min" => AggKind::Min,
        "max" => AggKind::Max,
        _ => return None,
    })
}

fn arity_text(r: &std::ops::RangeInclusive<usize>) -> String {
    match (*r.start(), *r.end()) {
        (a, b) if a == b => a.to_string(),
        (a, usize::MAX) => format!("at least {a}"),
        (a, b) => format!("{a} to {b}"),
    }
}

fn bool_lit(b: bool) -> Scalar {
    Scalar::Literal(crate::sql::scalar::boolean(b))
}

fn maybe_not(s: Scalar, negated: bool) -> Scalar {
    if negated { Scalar::Not(Box::new(s)) } else { s }
}

/// `a IS NOT DISTINCT FROM b`: equal, or both null.
fn not_distinct(a: Scalar, b: Scalar) -> Scalar {
    let both_null = Scalar::binary(
        Scalar::And,
        Scalar::IsNull(Box::new(a.clone()), true),
        Scalar::IsNull(Box::new(b.clone()), true),
    );
    let equal = Scalar::Call(
        Func::Coalesce,
        vec![
            Scalar::Compare(Compare::Eq, Box::new(a), Box::new(b)),
            bool_lit(false),
        ],
    );
    Scalar::binary(Scalar::Or, both_null, equal)
}

/// The type of a `CASE`/`COALESCE` result over branches of types `a` and `b`.
fn result_type(a: SqlType, b: SqlType, e: &ast::Expr) -> Result<SqlType, SqlError> {
    Ok(match (a, b) {
        (x, y) if x == y => x,
        (SqlType::Null, y) => y,
        (x, SqlType::Null) => x,
        (SqlType::Any, _) | (_, SqlType::Any) => SqlType::Any,
        (x, y) if x.numeric() && y.numeric() => SqlType::Number,
        (x, y) => {
            return Err(SqlError::new(
                SqlErrorKind::Type,
                pos(e),
                format!(
                    "{e} is {}, but the other results are {}: CAST one of them",
                    y.name(),
                    x.name()
                ),
            ));
        }
    })
}

fn literal(v: &ast::Value, at: Pos) -> Result<Typed, SqlError> {
    Ok(match v {
        ast::Value::Number(n, _) => match n.parse::<i64>() {
            Ok(i) => (Scalar::Literal(Value::Int(i)), SqlType::Int),
            Err(_) => match n.parse::<f64>() {
                Ok(f) if f.is_finite() => (Scalar::Literal(Value::float(f)), SqlType::Float),
                _ => {
                    return Err(SqlError::new(
                        SqlErrorKind::Invalid,
                        at,
                        format!("{n} is not a number kappa can hold"),
                    ));
                }
            },
        },
        ast::Value::SingleQuotedString(s)
        | ast::Value::DoubleQuotedString(s)
        | ast::Value::EscapedStringLiteral(s)
        | ast::Value::NationalStringLiteral(s) => (Scalar::Literal(Value::str(s)), SqlType::Text),
        ast::Value::Boolean(b) => (bool_lit(*b), SqlType::Bool),
        ast::Value::Null => (Scalar::Literal(Value::Null), SqlType::Null),
        other => return Err(SqlError::unsupported(at, format!("the literal {other}"))),
    })
}

fn escape_character(e: &ast::Expr) -> Result<char, SqlError> {
    let text = match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) => s.as_str(),
            _ => "",
        },
        _ => "",
    };
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => Ok(c),
        _ => Err(SqlError::new(
            SqlErrorKind::Invalid,
            pos(e),
            format!("ESCAPE takes one character, not {e}"),
        )),
    }
}

/// The conversion a SQL type name asks for.
fn cast_target(t: &ast::DataType, at: Pos) -> Result<(CastTo, SqlType), SqlError> {
    use ast::DataType as D;
    Ok(match t {
        D::Int(_)
        | D::Integer(_)
        | D::BigInt(_)
        | D::SmallInt(_)
        | D::TinyInt(_)
        | D::Int8(_)
        | D::Int4(_)
        | D::Int2(_)
        | D::Int64
        | D::Int32
        | D::Int16
        | D::HugeInt
        | D::Signed
        | D::SignedInteger => (CastTo::Int, SqlType::Int),
        D::Double(_)
        | D::DoublePrecision
        | D::Float(_)
        | D::Real
        | D::Float4
        | D::Float8
        | D::Float64
        | D::Float32
        | D::Decimal(_)
        | D::Numeric(_)
        | D::Dec(_) => (CastTo::Float, SqlType::Float),
        D::Text
        | D::Varchar(_)
        | D::Char(_)
        | D::Character(_)
        | D::CharVarying(_)
        | D::CharacterVarying(_)
        | D::String(_)
        | D::Nvarchar(_) => (CastTo::Text, SqlType::Text),
        D::Boolean | D::Bool => (CastTo::Bool, SqlType::Bool),
        D::Date => (CastTo::Date, SqlType::Date),
        D::Timestamp(..) | D::Datetime(_) | D::TimestampNtz(_) => {
            (CastTo::Timestamp, SqlType::Timestamp)
        }
        other => {
            return Err(SqlError::unsupported(
                at,
                format!("the type {other} (for now)"),
            ));
        }
    })
}

/// The column type a `CREATE TABLE` column declaration reads its values as.
pub fn declared_type(t: &ast::DataType, at: Pos) -> Result<ColumnType, SqlError> {
    Ok(match cast_target(t, at)? {
        (CastTo::Int, _) => ColumnType::Int,
        (CastTo::Float, _) => ColumnType::Float,
        (CastTo::Text, _) => ColumnType::Str,
        (CastTo::Bool, _) => ColumnType::Bool,
        (CastTo::Date, _) => ColumnType::Date,
        (CastTo::Timestamp, _) => ColumnType::Timestamp,
    })
}

/// The columns of `from` that `parts` (`name` or `table.name`) may name.
fn lookup(
    parts: &[ast::Ident],
    from: &[Col],
    at: Pos,
    e: &ast::Expr,
) -> Result<Vec<usize>, SqlError> {
    Ok(match parts {
        [name] => {
            let all: Vec<usize> = (0..from.len())
                .filter(|&i| names(name, &from[i].name))
                .collect();
            let visible: Vec<usize> = all.iter().copied().filter(|&i| !from[i].hidden).collect();
            let pick = if visible.is_empty() { all } else { visible };
            let exact: Vec<usize> = pick
                .iter()
                .copied()
                .filter(|&i| from[i].name == name.value)
                .collect();
            if exact.len() == 1 { exact } else { pick }
        }
        [table, name] => (0..from.len())
            .filter(|&i| {
                from[i].table.as_deref().is_some_and(|t| names(table, t))
                    && names(name, &from[i].name)
            })
            .collect(),
        _ => {
            return Err(SqlError::unsupported(at, format!("the name {e}")));
        }
    })
}

/// The kind of value a typed operand is, if it is typed.
fn class(t: SqlType) -> Option<Want> {
    match t {
        SqlType::Int | SqlType::Float | SqlType::Number => Some(Want::Number),
        SqlType::Text => Some(Want::Text),
        SqlType::Bool => Some(Want::Bool),
        SqlType::Date | SqlType::Timestamp => Some(Want::Time),
        SqlType::Null | SqlType::Any => None,
    }
}

/// The input column a bound operand reads as it is, if any.
fn origin(t: &Typed, cx: &Cx<'_>) -> Option<(usize, usize)> {
    match &t.0 {
        Scalar::Column(i) => cx.col(*i).and_then(|c| c.origin),
        _ => None,
    }
}

/// Whether `t` is a text literal holding a date or timestamp.
fn time_text(t: &Typed) -> bool {
    matches!(&t.0, Scalar::Literal(Value::Str(text)) if calendar::parse_timestamp(text).is_some())
}

/// A text literal compared with a date or timestamp is one (as in
/// PostgreSQL: `d >= '1994-01-01'`); one that is not is an error here,
/// not a null for every row.
fn text_as_time(t: &mut Typed, like: SqlType, e: &ast::Expr) -> Result<(), SqlError> {
    let (Scalar::Literal(Value::Str(text)), SqlType::Date | SqlType::Timestamp) = (&t.0, like)
    else {
        return Ok(());
    };
    *t = time_literal(like, text, pos(e))?;
    Ok(())
}

/// A `DATE '...'` or `TIMESTAMP '...'` literal.
fn time_literal(ty: SqlType, text: &str, at: Pos) -> Result<Typed, SqlError> {
    let v = match ty {
        SqlType::Date => calendar::parse_date(text).map(Value::Date),
        _ => calendar::parse_timestamp(text).map(Value::Timestamp),
    };
    let v = v.ok_or_else(|| {
        SqlError::new(
            SqlErrorKind::Invalid,
            at,
            format!(
                "'{text}' is not {} (write {})",
                ty.name(),
                if ty == SqlType::Date {
                    "YYYY-MM-DD, years 1 to 9999"
                } else {
                    "YYYY-MM-DD HH:MM:SS[.ffffff][+HH:MM], years 1 to 9999"
                }
            ),
        )
    })?;
    Ok((Scalar::Literal(v), ty))
}

/// Arithmetic on dates: date ± integer is a date, date − date an integer
/// (days); `None` when neither operand is a date or timestamp.
fn date_arith(l: &Typed, op: &ast::BinaryOperator, r: &Typed) -> Option<Typed> {
    use ast::BinaryOperator as B;
    let time = |t: SqlType| matches!(t, SqlType::Date | SqlType::Timestamp);
    if !time(l.1) && !time(r.1) {
        return None;
    }
    let ty = match (l.1, op, r.1) {
        (SqlType::Date, B::Plus | B::Minus, SqlType::Int)
        | (SqlType::Int, B::Plus, SqlType::Date) => SqlType::Date,
        (SqlType::Date, B::Minus, SqlType::Date) => SqlType::Int,
        _ => return None,
    };
    let a = if *op == B::Plus {
        Arith::Add
    } else {
        Arith::Sub
    };
    Some((
        Scalar::Arith(a, Box::new(l.0.clone()), Box::new(r.0.clone())),
        ty,
    ))
}

/// Functions of the wall clock, which no job may read (an output is a
/// function of the inputs alone).
const WALL_CLOCK: &[&str] = &[
    "now",
    "current_date",
    "current_time",
    "current_timestamp",
    "localtime",
    "localtimestamp",
    "today",
    "get_current_timestamp",
];

fn wall_clock(name: &str, at: Pos) -> SqlError {
    SqlError::new(
        SqlErrorKind::Unsupported,
        at,
        format!(
            "{name} reads the wall clock, and a job's output depends on its inputs only \
             (the same answer in batch, stream and replay): use an event-time column"
        ),
    )
}

/// A date or time field by name, for `EXTRACT` and `date_trunc`.
fn time_field(name: &str, at: Pos) -> Result<Field, SqlError> {
    Field::by_name(name.trim_matches(['\'', '"'])).ok_or_else(|| {
        SqlError::unsupported(
            at,
            format!(
                "the field {name} (year, quarter, month, week, day, dow, isodow, doy, hour, \
                 minute, second, millisecond, microsecond, epoch)"
            ),
        )
    })
}

fn interval_too_large(at: Pos) -> SqlError {
    SqlError::new(SqlErrorKind::Invalid, at, "the INTERVAL is too large")
}

/// An `INTERVAL` literal: `INTERVAL '3' MONTH`, `INTERVAL 3 DAY` or
/// `INTERVAL '1 day 2 hours'`.
pub fn interval(iv: &ast::Interval, at: Pos) -> Result<Interval, SqlError> {
    if iv.last_field.is_some() || iv.fractional_seconds_precision.is_some() {
        return Err(SqlError::unsupported(at, "an INTERVAL ... TO ... range"));
    }
    let (text, negative) = match iv.value.as_ref() {
        ast::Expr::Value(v) => (interval_text(&v.value), false),
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => match expr.as_ref() {
            ast::Expr::Value(v) => (interval_text(&v.value), true),
            _ => (None, false),
        },
        _ => (None, false),
    };
    let bad = |why: &str| {
        SqlError::new(
            SqlErrorKind::Invalid,
            at,
            format!("INTERVAL {}: {why}", iv.value),
        )
    };
    let text = text.ok_or_else(|| bad("write a number and a unit, as INTERVAL '10' MINUTE"))?;
    let words: Vec<String> = match &iv.leading_field {
        Some(f) => vec![text, f.to_string()],
        None => text.split_whitespace().map(str::to_string).collect(),
    };
    if words.is_empty() || !words.len().is_multiple_of(2) {
        return Err(bad("write amounts with units, as INTERVAL '1 day 2 hours'"));
    }
    let mut total = Interval::default();
    for pair in words.chunks(2) {
        let part = interval_part(&pair[0], &pair[1]).ok_or_else(|| {
            bad(
                "each amount is a number and each unit one of year, quarter, month, week, day, \
                 hour, minute, second, millisecond, microsecond",
            )
        })?;
        total = Interval {
            months: total
                .months
                .checked_add(part.months)
                .ok_or_else(|| interval_too_large(at))?,
            micros: total
                .micros
                .checked_add(part.micros)
                .ok_or_else(|| interval_too_large(at))?,
        };
    }
    if negative {
        total = total.negated().ok_or_else(|| interval_too_large(at))?;
    }
    Ok(total)
}

fn interval_text(v: &ast::Value) -> Option<String> {
    match v {
        ast::Value::SingleQuotedString(s) => Some(s.clone()),
        ast::Value::Number(n, _) => Some(n.clone()),
        _ => None,
    }
}

/// `amount unit` as an interval: whole months for years, quarters and
/// months; microseconds (a fraction allowed) for the rest.
fn interval_part(amount: &str, unit: &str) -> Option<Interval> {
    let unit = match unit.to_ascii_lowercase().as_str() {
        "ms" => "millisecond".to_string(),
        "us" => "microsecond".to_string(),
        u => u.strip_suffix('s').unwrap_or(u).to_string(),
    };
    let unit = unit.as_str();
    let months = match unit {
        "year" => Some(12),
        "quarter" => Some(3),
        "month" | "mon" => Some(1),
        _ => None,
    };
    if let Some(m) = months {
        let n: i64 = amount.parse().ok()?;
        return Interval {
            months: 1,
            micros: 0,
        }
        .times(n.checked_mul(m)?);
    }
    let micros_per: i64 = match unit {
        "week" => 7 * MICROS_PER_DAY,
        "day" => MICROS_PER_DAY,
        "hour" => 3_600_000_000,
        "minute" | "min" => 60_000_000,
        "second" | "sec" => 1_000_000,
        "millisecond" => 1_000,
        "microsecond" => 1,
        _ => return None,
    };
    let micros = match amount.parse::<i64>() {
        Ok(n) => n.checked_mul(micros_per)?,
        Err(_) => {
            let x: f64 = amount.parse().ok()?;
            let m = (x * micros_per as f64).round();
            if !m.is_finite() || m.abs() >= 9.2e18 {
                return None;
            }
            m as i64
        }
    };
    Some(Interval { months: 0, micros })
}
