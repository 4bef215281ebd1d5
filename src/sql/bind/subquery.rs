//! Subqueries, decorrelated into joins.
//!
//! - `[NOT] EXISTS (q)` and `x [NOT] IN (q)`, as conjuncts of a WHERE
//!   clause, become semi and anti joins of the filtered rows with `q`'s
//!   rows: on the equalities by which `q`'s WHERE relates its rows to the
//!   enclosing row (and `x` = `q`'s column), the rest of those conditions
//!   as the join's residual.
//! - A scalar subquery `(q)` becomes a left join with a relation of at
//!   most one row per enclosing row: `q` itself when it is uncorrelated
//!   and provably one row (a global aggregate, `LIMIT 1`), or `q`'s
//!   aggregate grouped by the columns its WHERE equates with the
//!   enclosing row's.
//!
//! Invariants: the enclosing query's rows keep their multiplicities (a
//! semi join never repeats a row, and a scalar subquery's relation has at
//! most one row per key); a correlated aggregate over no rows has SQL's
//! value (counts 0, the rest null), which stands in for a missing match;
//! and `NOT IN` has SQL's meaning with nulls (no row passes when the
//! subquery has a null, unless it is empty).

use sqlparser::ast::{self, Spanned};

use super::expr::{AggState, Cx, SUBQUERY, Typed};
use super::{Binder, Col, SqlType};
use crate::ops::aggregate::AggKind;
use crate::sql::error::{Pos, SqlError, SqlErrorKind};
use crate::sql::rel::{AggCall, JoinStrategy, JoinType, Rel};
use crate::sql::scalar::{Compare, Scalar};
use crate::value::Value;

/// A bound scalar subquery: left-joined to the enclosing rows on `keys`,
/// its value computed from the joined row (all nulls when none matched).
#[derive(Debug)]
pub struct ScalarSubquery {
    rel: Rel,
    /// Pairs (enclosing row's column, subquery's column) that must be equal.
    keys: Vec<(usize, usize)>,
    /// The value, over the subquery's columns.
    value: Scalar,
}

/// A WHERE conjunct that tests a subquery's rows.
pub enum SubqueryTest<'q> {
    /// `[NOT] EXISTS (query)`.
    Exists {
        /// The subquery.
        query: &'q ast::Query,
        /// `NOT EXISTS`.
        negated: bool,
    },
    /// `expr [NOT] IN (query)`.
    In {
        /// The value looked for.
        expr: &'q ast::Expr,
        /// The subquery, of one column.
        query: &'q ast::Query,
        /// `NOT IN`.
        negated: bool,
    },
}

impl<'q> SubqueryTest<'q> {
    /// `c` as a subquery test, if it is one.
    pub fn of(c: &'q ast::Expr) -> Option<SubqueryTest<'q>> {
        use SubqueryTest as T;
        match c {
            ast::Expr::Nested(inner) => Self::of(inner),
            ast::Expr::Exists { subquery, negated } => Some(T::Exists {
                query: subquery,
                negated: *negated,
            }),
            ast::Expr::In {
                expr,
                target: ast::InTarget::Subquery(query),
                negated,
                ..
            } => Some(T::In {
                expr,
                query,
                negated: *negated,
            }),
            ast::Expr::UnaryOp {
                op: ast::UnaryOperator::Not,
                expr,
            } => Some(match Self::of(expr)? {
                T::Exists { query, negated } => T::Exists {
                    query,
                    negated: !negated,
                },
                T::In {
                    expr,
                    query,
                    negated,
                } => T::In {
                    expr,
                    query,
                    negated: !negated,
                },
            }),
            _ => None,
        }
    }
}

/// The conjuncts of a condition as written: `a AND (b AND c)` is a, b, c.
pub fn conjuncts(e: &ast::Expr) -> Vec<&ast::Expr> {
    match e {
        ast::Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::And,
            right,
        } => {
            let mut all = conjuncts(left);
            all.extend(conjuncts(right));
            all
        }
        ast::Expr::Nested(inner) if matches!(**inner, ast::Expr::BinaryOp { .. }) => {
            match conjuncts(inner).as_slice() {
                [_] => vec![e],
                several => several.to_vec(),
            }
        }
        _ => vec![e],
    }
}

/// Whether a bound expression reads a scalar subquery's value.
pub fn reads_subquery(s: &Scalar) -> bool {
    let mut used = Vec::new();
    s.columns(&mut used);
    used.iter().any(|&p| p >= SUBQUERY)
}

/// `s` with the scalar subqueries' positions moved to `width + i`, where
/// [`join_scalars`] puts them.
pub fn resolve(s: &Scalar, width: usize) -> Scalar {
    s.remap(&|p| {
        if p >= SUBQUERY {
            width + p - SUBQUERY
        } else {
            p
        }
    })
}

/// `rel` (of `width` columns) left-joined with each scalar subquery in
/// turn: its columns, then one per subquery holding its value.
pub fn join_scalars(mut rel: Rel, width: usize, subqueries: Vec<ScalarSubquery>) -> Rel {
    for (w, s) in (width..).zip(subqueries) {
        let (left_key, right_key) = s.keys.iter().copied().unzip();
        let joined = Rel::Join {
            left: Box::new(rel),
            right: Box::new(s.rel),
            kind: JoinType::Left,
            left_key,
            right_key,
            residual: None,
            strategy: JoinStrategy::Shuffle,
        };
        let mut exprs: Vec<Scalar> = (0..w).map(Scalar::Column).collect();
        exprs.push(s.value.remap(&|p| p + w));
        rel = Rel::Map(Box::new(joined), exprs);
    }
    rel
}

/// The query as one `SELECT` block, when it is nothing more.
fn plain_select(q: &ast::Query) -> Option<&ast::Select> {
    let ast::SetExpr::Select(s) = q.body.as_ref() else {
        return None;
    };
    let bare = q.with.is_none()
        && q.order_by.is_none()
        && q.limit_clause.is_none()
        && q.fetch.is_none()
        && q.locks.is_empty();
    bare.then_some(s)
}

fn has_grouping(s: &ast::Select) -> bool {
    let grouped = !matches!(&s.group_by, ast::GroupByExpr::Expressions(e, _) if e.is_empty());
    grouped || s.having.is_some() || s.distinct.is_some()
}

/// A subquery's rows with what relates them to the enclosing row.
struct Inner {
    rel: Rel,
    cols: Vec<Col>,
    /// WHERE conjuncts reading the enclosing row, over inner ++ enclosing.
    correlated: Vec<Scalar>,
}

impl Binder<'_> {
    /// A subquery whose WHERE may read `outer`: its rows before the select
    /// list when it is correlated, all of it otherwise.
    fn inner<'q>(
        &mut self,
        q: &'q ast::Query,
        outer: &[Col],
    ) -> Result<(Inner, Option<&'q ast::Select>), SqlError> {
        let Some(s) = plain_select(q) else {
            let b = self.query(q)?;
            let inner = Inner {
                rel: b.rel,
                cols: b.cols,
                correlated: Vec::new(),
            };
            return Ok((inner, None));
        };
        let (from, correlated) = self.select_rows(s, Some(outer))?;
        if correlated.is_empty() {
            let b = self.select_rest(s, from)?;
            let inner = Inner {
                rel: b.rel,
                cols: b.cols,
                correlated,
            };
            return Ok((inner, None));
        }
        let inner = Inner {
            rel: from.rel,
            cols: from.cols,
            correlated,
        };
        Ok((inner, Some(s)))
    }

    /// `(q)` in an expression bound in `cx`.
    pub(super) fn scalar_subquery(
        &mut self,
        q: &ast::Query,
        e: &ast::Expr,
        cx: &mut Cx<'_>,
    ) -> Result<Typed, SqlError> {
        let at = Pos::of(e.span());
        if cx.subqueries.is_none() {
            return Err(SqlError::unsupported(
                at,
                "a scalar subquery here (they may be used in WHERE, the select list and HAVING)",
            ));
        }
        let (inner, select) = self.inner(q, cx.from)?;
        let (sub, ty) = match select {
            None => one_row(inner, at)?,
            Some(_) if cx.agg.is_some() => {
                return Err(SqlError::unsupported(
                    at,
                    "a correlated subquery in the select list or HAVING of a grouped query",
                ));
            }
            Some(s) => self.grouped_by_correlation(s, inner, at)?,
        };
        let list = cx.subqueries.as_deref_mut().expect("checked above");
        list.push(sub);
        Ok((Scalar::Column(SUBQUERY + list.len() - 1), ty))
    }

    /// A correlated scalar subquery: its aggregate per value of the
    /// columns its WHERE equates with the enclosing row's.
    fn grouped_by_correlation(
        &mut self,
        s: &ast::Select,
        inner: Inner,
        at: Pos,
    ) -> Result<(ScalarSubquery, SqlType), SqlError> {
        let ni = inner.cols.len();
        let mut state = AggState::default();
        let mut keys = Vec::new();
        for c in &inner.correlated {
            let Some((i, o)) = equality(c, ni) else {
                return Err(SqlError::unsupported(
                    at,
                    "a correlated scalar subquery whose WHERE relates its rows to the enclosing \
                     row other than by equalities",
                ));
            };
            let g = Scalar::Column(i);
            let k = match state.groups.iter().position(|x| *x == g) {
                Some(k) => k,
                None => {
                    state.groups.push(g);
                    state.out.push(inner.cols[i].clone());
                    state.groups.len() - 1
                }
            };
            keys.push((o, k));
        }
        let expr = match s.projection.as_slice() {
            [ast::SelectItem::UnnamedExpr(e)]
            | [ast::SelectItem::ExprWithAlias { expr: e, .. }]
                if !has_grouping(s) =>
            {
                e
            }
            _ => {
                return Err(SqlError::unsupported(
                    at,
                    "a correlated scalar subquery other than one aggregate expression without \
                     GROUP BY, HAVING or DISTINCT",
                ));
            }
        };
        let saw = std::mem::replace(&mut self.saw_aggregate, false);
        let plain = self.expr(expr, &mut Cx::plain(&inner.cols));
        let aggregates = std::mem::replace(&mut self.saw_aggregate, saw);
        if !aggregates {
            plain?;
            return Err(SqlError::unsupported(
                Pos::of(expr.span()),
                "a correlated scalar subquery that does not aggregate (it may give several rows)",
            ));
        }
        let mut cx = Cx {
            from: &inner.cols,
            agg: Some(&mut state),
            outer: None,
            subqueries: None,
        };
        let (value, ty) = self.expr(expr, &mut cx)?;
        let nk = state.groups.len();
        let over_nothing: Vec<Value> = std::iter::repeat_n(Value::Null, nk)
            .chain(state.calls.iter().map(|(c, _)| match c.empty_is_zero {
                true => Value::Int(0),
                false => Value::Null,
            }))
            .collect();
        let empty = value.eval(&over_nothing);
        // Columns: the value, a marker that a group matched, the keys.
        let mut exprs = vec![value, Scalar::Literal(Value::Int(1))];
        exprs.extend((0..nk).map(Scalar::Column));
        let rel = Rel::Map(
            Box::new(super::select::aggregate_rel(&state, inner.rel)),
            exprs,
        );
        let value = match empty.is_null() {
            true => Scalar::Column(0),
            false => Scalar::Case(
                vec![(
                    Scalar::IsNull(Box::new(Scalar::Column(1)), true),
                    Scalar::Literal(empty),
                )],
                Box::new(Scalar::Column(0)),
            ),
        };
        let keys = keys.into_iter().map(|(o, k)| (o, 2 + k)).collect();
        Ok((ScalarSubquery { rel, keys, value }, ty))
    }

    /// Keeps the rows of `rel` (columns `cols`) that pass a subquery test.
    pub(super) fn subquery_test(
        &mut self,
        rel: Rel,
        cols: &[Col],
        test: SubqueryTest<'_>,
    ) -> Result<Rel, SqlError> {
        let nf = cols.len();
        let (query, negated, x) = match test {
            SubqueryTest::Exists { query, negated } => (query, negated, None),
            SubqueryTest::In {
                expr,
                query,
                negated,
            } => (query, negated, Some(expr)),
        };
        let at = Pos::of(query.span());
        let (inner, select) = self.inner(query, cols)?;
        let Inner {
            rel: mut right,
            cols: inner_cols,
            correlated,
        } = inner;
        let ni = inner_cols.len();
        let mut value = None;
        if let Some(s) = select {
            value = self.correlated_list(s, &inner_cols, x.is_some(), at)?;
        } else if x.is_some() {
            if ni != 1 {
                return Err(SqlError::new(
                    SqlErrorKind::Invalid,
                    at,
                    format!("IN (subquery) needs a subquery of one column, this one has {ni}"),
                ));
            }
            value = Some((Scalar::Column(0), inner_cols[0].ty));
        }
        let mut left = rel;
        let (mut lk, mut rk, mut residual) = (Vec::new(), Vec::new(), Vec::new());
        let mut nl = nf;
        let mut x_at = None;
        if let (Some(x), Some((v, vt))) = (x, value) {
            let mut tx = self.expr(x, &mut Cx::plain(cols))?;
            let mut both = Cx {
                from: cols,
                agg: None,
                outer: Some(&inner_cols),
                subqueries: None,
            };
            let mut tv = (v.remap(&|p| p + nf), vt);
            self.comparable(&mut tx, x, &mut tv, x, &mut both)?;
            let xk = match tx.0 {
                Scalar::Column(c) => c,
                other => {
                    let mut exprs: Vec<Scalar> = (0..nf).map(Scalar::Column).collect();
                    exprs.push(other);
                    left = Rel::Map(Box::new(left), exprs);
                    nl += 1;
                    nf
                }
            };
            let vk = match v {
                Scalar::Column(c) => c,
                other => {
                    let mut exprs: Vec<Scalar> = (0..ni).map(Scalar::Column).collect();
                    exprs.push(other);
                    right = Rel::Map(Box::new(right), exprs);
                    ni
                }
            };
            lk.push(xk);
            rk.push(vk);
            x_at = Some((xk, vk));
        }
        for c in correlated {
            match equality(&c, ni) {
                Some((i, o)) => {
                    lk.push(o);
                    rk.push(i);
                }
                None => residual.push(c.remap(&|p| if p < ni { nl + p } else { p - ni })),
            }
        }
        let anti = negated && x.is_some();
        if anti && (!residual.is_empty() || lk.len() > 1) {
            return Err(SqlError::unsupported(
                at,
                "NOT IN with a correlated subquery (write NOT EXISTS, which has no surprises \
                 with nulls)",
            ));
        }
        let kind = match negated {
            true => JoinType::Anti,
            false => JoinType::Semi,
        };
        let mut out = if anti {
            let (xk, vk) = x_at.expect("IN has a value");
            self.not_in(left, right, nl, (xk, vk))
        } else {
            Rel::Join {
                left: Box::new(left),
                right: Box::new(right),
                kind,
                left_key: lk,
                right_key: rk,
                residual: Scalar::all(residual),
                strategy: JoinStrategy::Shuffle,
            }
        };
        if nl > nf {
            out = Rel::Map(Box::new(out), (0..nf).map(Scalar::Column).collect());
        }
        Ok(out)
    }

    /// A correlated EXISTS or IN subquery's select list, checked: for IN,
    /// its one expression; for EXISTS nothing (its rows only need to exist),
    /// but a grouping or aggregate there would change which rows exist.
    fn correlated_list(
        &mut self,
        s: &ast::Select,
        cols: &[Col],
        wants_value: bool,
        at: Pos,
    ) -> Result<Option<Typed>, SqlError> {
        if has_grouping(s) {
            return Err(SqlError::unsupported(
                at,
                "GROUP BY, HAVING or DISTINCT in a correlated subquery",
            ));
        }
        let items = super::select::select_list(&s.projection, cols)?;
        let mut bound = Vec::new();
        for item in &items {
            if let super::select::Item::Expr(e, _) = item {
                let saw = self.saw_aggregate;
                let t = self.expr(e, &mut Cx::plain(cols));
                let aggregated = self.saw_aggregate;
                self.saw_aggregate = saw;
                if aggregated {
                    return Err(SqlError::unsupported(
                        Pos::of(e.span()),
                        "an aggregate in a correlated EXISTS or IN subquery",
                    ));
                }
                bound.push(t?);
            }
        }
        if !wants_value {
            return Ok(None);
        }
        match (items.as_slice(), bound.pop()) {
            ([super::select::Item::Expr(..)], Some(t)) => Ok(Some(t)),
            ([super::select::Item::Column(c)], _) => Ok(Some((Scalar::Column(*c), cols[*c].ty))),
            _ => Err(SqlError::new(
                SqlErrorKind::Invalid,
                at,
                format!(
                    "IN (subquery) needs a subquery of one column, this one has {}",
                    items.len()
                ),
            )),
        }
    }

    /// `x NOT IN (q)` for an uncorrelated `q`: the rows with no match,
    /// kept only if `q` has no null and `x` is not null — or `q` is empty.
    fn not_in(&mut self, left: Rel, right: Rel, nl: usize, (xk, vk): (usize, usize)) -> Rel {
        let right = Rel::Shared(self.share("NOT IN subquery", right));
        let v = Scalar::Column(vk);
        let present = Scalar::Case(
            vec![(
                Scalar::IsNull(Box::new(v.clone()), true),
                Scalar::Literal(Value::Int(0)),
            )],
            Box::new(Scalar::Literal(Value::Int(1))),
        );
        let counts = Rel::Aggregate {
            input: Box::new(Rel::Map(Box::new(right.clone()), vec![v, present])),
            keys: 0,
            hot: None,
            closes: None,
            aggs: vec![
                AggCall {
                    kind: AggKind::Count,
                    arg: None,
                    empty_is_zero: true,
                },
                AggCall {
                    kind: AggKind::Sum,
                    arg: Some(1),
                    empty_is_zero: true,
                },
            ],
        };
        let unmatched = Rel::Join {
            left: Box::new(left),
            right: Box::new(right),
            kind: JoinType::Anti,
            left_key: vec![xk],
            right_key: vec![vk],
            residual: None,
            strategy: JoinStrategy::Shuffle,
        };
        let with_counts = Rel::Join {
            left: Box::new(unmatched),
            right: Box::new(counts),
            kind: JoinType::Inner,
            left_key: Vec::new(),
            right_key: Vec::new(),
            residual: None,
            strategy: JoinStrategy::Shuffle,
        };
        let (n, non_null) = (Scalar::Column(nl), Scalar::Column(nl + 1));
        let zero = Scalar::Literal(Value::Int(0));
        let empty = Scalar::Compare(Compare::Eq, Box::new(n.clone()), Box::new(zero));
        let no_nulls = Scalar::Compare(Compare::Eq, Box::new(non_null), Box::new(n));
        let x_present = Scalar::IsNull(Box::new(Scalar::Column(xk)), false);
        let passes = Scalar::binary(
            Scalar::Or,
            empty,
            Scalar::binary(Scalar::And, x_present, no_nulls),
        );
        let kept = Rel::Filter(Box::new(with_counts), passes);
        Rel::Map(Box::new(kept), (0..nl).map(Scalar::Column).collect())
    }
}

/// An uncorrelated scalar subquery: one column, at most one row.
fn one_row(inner: Inner, at: Pos) -> Result<(ScalarSubquery, SqlType), SqlError> {
    if inner.cols.len() != 1 {
        return Err(SqlError::new(
            SqlErrorKind::Invalid,
            at,
            format!(
                "a scalar subquery must select one column, this one selects {}",
                inner.cols.len()
            ),
        ));
    }
    if !inner.rel.at_most_one_row() {
        return Err(SqlError::unsupported(
            at,
            "a scalar subquery that may give more than one row (make it an aggregate without \
             GROUP BY, or ORDER BY ... LIMIT 1)",
        ));
    }
    let sub = ScalarSubquery {
        rel: inner.rel,
        keys: Vec::new(),
        value: Scalar::Column(0),
    };
    Ok((sub, inner.cols[0].ty))
}

/// A correlated conjunct (over inner ++ enclosing columns, `ni` inner)
/// that equates an inner column with an enclosing one: (inner, enclosing).
fn equality(c: &Scalar, ni: usize) -> Option<(usize, usize)> {
    let Scalar::Compare(Compare::Eq, a, b) = c else {
        return None;
    };
    match (&**a, &**b) {
        (Scalar::Column(x), Scalar::Column(y)) if *x < ni && *y >= ni => Some((*x, *y - ni)),
        (Scalar::Column(x), Scalar::Column(y)) if *y < ni && *x >= ni => Some((*y, *x - ni)),
        _ => None,
    }
}
