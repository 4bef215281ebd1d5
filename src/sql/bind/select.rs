//! Binding a `SELECT` block: FROM items and their joins, WHERE (split into
//! filters pushed to the one table they read and join keys between
//! tables), GROUP BY with aggregates and HAVING, the select list, DISTINCT.

use sqlparser::ast::{self, Spanned};

use super::expr::{AggState, Cx, SUBQUERY, Typed, Want};
use super::subquery::{SubqueryTest, conjuncts, join_scalars, reads_subquery, resolve};
use super::{Binder, Bound, Col, SqlType, ident, names, rename_columns};
use crate::sql::as_of;
use crate::sql::error::{Pos, SqlError, SqlErrorKind};
use crate::sql::rel::{AggCall, JoinStrategy, JoinType, Rel};
use crate::sql::scalar::{Compare, Scalar};

/// One entry of a select list, wildcards expanded.
pub(super) enum Item<'q> {
    /// An expression and its output name.
    Expr(&'q ast::Expr, String),
    /// A FROM column (from `*` or `t.*`).
    Column(usize),
}

impl Binder<'_> {
    pub(super) fn select(&mut self, s: &ast::Select) -> Result<Bound, SqlError> {
        let (from, correlated) = self.select_rows(s, None)?;
        debug_assert!(correlated.is_empty(), "no enclosing query");
        self.select_rest(s, from)
    }

    /// FROM and WHERE of a `SELECT`: the joined and filtered rows. In a
    /// subquery (`outer`: the enclosing query's columns) the WHERE
    /// conjuncts that read the enclosing row are returned instead, over
    /// the FROM columns followed by the enclosing ones.
    pub(super) fn select_rows(
        &mut self,
        s: &ast::Select,
        outer: Option<&[Col]>,
    ) -> Result<(Bound, Vec<Scalar>), SqlError> {
        let at = Pos::of(s.select_token.0.span);
        if s.top.is_some()
            || s.into.is_some()
            || !s.lateral_views.is_empty()
            || s.prewhere.is_some()
            || !s.cluster_by.is_empty()
            || !s.distribute_by.is_empty()
            || !s.sort_by.is_empty()
            || !s.named_window.is_empty()
            || s.qualify.is_some()
            || !s.connect_by.is_empty()
        {
            return Err(SqlError::unsupported(at, "a clause of this SELECT"));
        }
        if s.from.is_empty() {
            return Err(SqlError::unsupported(at, "SELECT without FROM"));
        }
        let mut items = Vec::new();
        for t in &s.from {
            items.push(self.table_with_joins(t)?);
        }
        let cols: Vec<Col> = items.iter().flat_map(|b| b.cols.clone()).collect();
        let n = cols.len();
        let (mut local, mut after, mut correlated) = (Vec::new(), Vec::new(), Vec::new());
        let (mut tests, mut subqueries) = (Vec::new(), Vec::new());
        for c in s.selection.iter().flat_map(conjuncts) {
            if let Some(t) = SubqueryTest::of(c) {
                tests.push(t);
                continue;
            }
            let mut cx = Cx {
                from: &cols,
                agg: None,
                outer,
                subqueries: Some(&mut subqueries),
            };
            for b in self.condition_in(c, &mut cx)?.conjuncts() {
                let mut used = Vec::new();
                b.columns(&mut used);
                let enclosing = used.iter().any(|&p| (n..SUBQUERY).contains(&p));
                match (enclosing, reads_subquery(&b)) {
                    (true, true) => {
                        return Err(SqlError::unsupported(
                            Pos::of(c.span()),
                            "a condition reading both the enclosing row and a scalar subquery",
                        ));
                    }
                    (true, false) => correlated.push(b),
                    (false, true) => after.push(b),
                    (false, false) => local.push(b),
                }
            }
        }
        let from = join_items(items, local);
        let mut rel = from.rel;
        if !subqueries.is_empty() {
            rel = join_scalars(rel, n, subqueries);
            let after = after.iter().map(|c| resolve(c, n)).collect();
            if let Some(p) = Scalar::all(after) {
                rel = Rel::Filter(Box::new(rel), p);
            }
            rel = Rel::Map(Box::new(rel), (0..n).map(Scalar::Column).collect());
        }
        for t in tests {
            rel = self.subquery_test(rel, &from.cols, t)?;
        }
        let bound = Bound {
            rel,
            cols: from.cols,
        };
        Ok((bound, correlated))
    }

    /// The rest of a `SELECT` over its FROM rows: the select list, GROUP
    /// BY and HAVING, DISTINCT.
    pub(super) fn select_rest(&mut self, s: &ast::Select, from: Bound) -> Result<Bound, SqlError> {
        self.select_rest_with(s, from, &[])
    }

    /// [`Binder::select_rest`] with `extra` expressions after the select
    /// list's columns (what a query sorts by but does not select).
    pub(super) fn select_rest_with(
        &mut self,
        s: &ast::Select,
        from: Bound,
        extra: &[&ast::Expr],
    ) -> Result<Bound, SqlError> {
        let at = Pos::of(s.select_token.0.span);
        let mut list = select_list(&s.projection, &from.cols)?;
        list.extend(extra.iter().map(|e| Item::Expr(e, String::new())));
        let group_by = match &s.group_by {
            ast::GroupByExpr::Expressions(exprs, modifiers) if modifiers.is_empty() => exprs,
            _ => return Err(SqlError::unsupported(at, "this form of GROUP BY")),
        };
        let (from, numbered) = self.row_numbers(&list, from)?;
        let grouped = !group_by.is_empty() || s.having.is_some();
        if grouped && !numbered.is_empty() {
            return Err(SqlError::unsupported(
                at,
                "ROW_NUMBER() in a grouped query (group in a subquery, number outside it)",
            ));
        }
        let bound = if !grouped {
            match self.plain_list(&list, &from, &numbered) {
                Err(_) if self.saw_aggregate => {
                    self.saw_aggregate = false;
                    self.grouped(&list, group_by, s.having.as_ref(), from)?
                }
                other => other?,
            }
        } else {
            self.grouped(&list, group_by, s.having.as_ref(), from)?
        };
        match &s.distinct {
            None | Some(ast::Distinct::All) => Ok(bound),
            Some(ast::Distinct::Distinct) => Ok(Bound {
                rel: Rel::Distinct(Box::new(bound.rel)),
                cols: bound.cols,
            }),
            Some(ast::Distinct::On(_)) => Err(SqlError::unsupported(at, "DISTINCT ON")),
        }
    }

    /// A condition: a boolean expression over `cols`.
    pub(super) fn condition(&mut self, e: &ast::Expr, cols: &[Col]) -> Result<Scalar, SqlError> {
        self.condition_in(e, &mut Cx::plain(cols))
    }

    /// A condition bound in `cx`.
    fn condition_in(&mut self, e: &ast::Expr, cx: &mut Cx<'_>) -> Result<Scalar, SqlError> {
        let t = self.expr(e, cx)?;
        if t.1 == SqlType::Any {
            // An inferred column as a condition is read as booleans.
            self.want(&t, Want::Bool, e, cx)?;
        }
        if !matches!(t.1, SqlType::Bool | SqlType::Null | SqlType::Any) {
            return Err(SqlError::new(
                SqlErrorKind::Type,
                Pos::of(e.span()),
                format!(
                    "a condition must be true or false, but {e} is {}",
                    t.1.name()
                ),
            ));
        }
        Ok(t.0)
    }

    /// A select list without grouping; `numbered` gives the items that
    /// are a row number and the column holding it.
    fn plain_list(
        &mut self,
        list: &[Item<'_>],
        from: &Bound,
        numbered: &[(usize, usize)],
    ) -> Result<Bound, SqlError> {
        let mut exprs = Vec::new();
        let mut cols = Vec::new();
        let mut subqueries = Vec::new();
        for (k, item) in list.iter().enumerate() {
            let number = numbered.iter().find(|(i, _)| *i == k);
            let (t, name, origin) = match item {
                Item::Expr(_, name) if number.is_some() => {
                    let column = number.expect("matched").1;
                    ((Scalar::Column(column), SqlType::Int), name.clone(), None)
                }
                Item::Column(i) => (
                    (Scalar::Column(*i), from.cols[*i].ty),
                    from.cols[*i].name.clone(),
                    from.cols[*i].origin,
                ),
                Item::Expr(e, name) => {
                    let mut cx = Cx {
                        subqueries: Some(&mut subqueries),
                        ..Cx::plain(&from.cols)
                    };
                    let t = self.expr(e, &mut cx)?;
                    let origin = match t.0 {
                        Scalar::Column(i) => from.cols.get(i).and_then(|c| c.origin),
                        _ => None,
                    };
                    (t, name.clone(), origin)
                }
            };
            exprs.push(t.0);
            cols.push(out_col(name, t.1, origin));
        }
        let n = from.cols.len();
        let input = join_scalars(from.rel.clone(), n, subqueries);
        let exprs = exprs.iter().map(|e| resolve(e, n)).collect();
        Ok(Bound {
            rel: Rel::Map(Box::new(input), exprs),
            cols,
        })
    }

    /// A grouped select: `GROUP BY` keys (expressions, select-list
    /// positions or aliases), aggregates, `HAVING`, then the select list
    /// over the grouping's output.
    fn grouped(
        &mut self,
        list: &[Item<'_>],
        group_by: &[ast::Expr],
        having: Option<&ast::Expr>,
        from: Bound,
    ) -> Result<Bound, SqlError> {
        let mut state = AggState::default();
        let mut subqueries = Vec::new();
        for g in group_by {
            let e = self.group_expr(g, list, &from.cols)?;
            let t = self.expr(e, &mut Cx::plain(&from.cols))?;
            let col = match t.0 {
                Scalar::Column(i) => from.cols[i].clone(),
                _ => out_col(e.to_string(), t.1, None),
            };
            if !state.groups.contains(&t.0) {
                state.groups.push(t.0);
                state.out.push(col);
            }
        }
        let mut exprs = Vec::new();
        let mut names = Vec::new();
        for item in list {
            let (t, name): (Typed, String) = match item {
                Item::Column(i) => {
                    let name = from.cols[*i].name.clone();
                    let k = state.groups.iter().position(|g| *g == Scalar::Column(*i));
                    match k {
                        Some(k) => ((Scalar::Column(k), state.out[k].ty), name),
                        None => {
                            return Err(SqlError::new(
                                SqlErrorKind::Invalid,
                                Pos::default(),
                                format!(
                                    "column {name} (from *) must appear in the GROUP BY clause"
                                ),
                            ));
                        }
                    }
                }
                Item::Expr(e, name) => {
                    let mut cx = Cx {
                        from: &from.cols,
                        agg: Some(&mut state),
                        outer: None,
                        subqueries: Some(&mut subqueries),
                    };
                    (self.expr(e, &mut cx)?, name.clone())
                }
            };
            exprs.push(t);
            names.push(name);
        }
        let having = match having {
            Some(h) => {
                let mut cx = Cx {
                    from: &from.cols,
                    agg: Some(&mut state),
                    outer: None,
                    subqueries: Some(&mut subqueries),
                };
                let t = self.expr(h, &mut cx)?;
                Some(t.0)
            }
            None => None,
        };
        let width = state.out.len();
        let mut rel = join_scalars(aggregate_rel(&state, from.rel), width, subqueries);
        if let Some(h) = having {
            rel = Rel::Filter(Box::new(rel), resolve(&h, width));
        }
        let cols = exprs
            .iter()
            .zip(names)
            .map(|((s, ty), name)| {
                let origin = match s {
                    Scalar::Column(i) => state.out.get(*i).and_then(|c| c.origin),
                    _ => None,
                };
                out_col(name, *ty, origin)
            })
            .collect();
        let exprs = exprs.iter().map(|t| resolve(&t.0, width)).collect();
        let rel = Rel::Map(Box::new(rel), exprs);
        Ok(Bound { rel, cols })
    }

    /// A `GROUP BY` entry: a select-list position (`GROUP BY 1`), an
    /// output alias that is not a FROM column, or an expression.
    fn group_expr<'q>(
        &self,
        g: &'q ast::Expr,
        list: &[Item<'q>],
        from: &[Col],
    ) -> Result<&'q ast::Expr, SqlError> {
        if let ast::Expr::Value(v) = g
            && matches!(v.value, ast::Value::Number(..))
        {
            let p = super::position(g, list.len())?;
            return match &list[p] {
                Item::Expr(e, _) => Ok(e),
                Item::Column(_) => Err(SqlError::unsupported(
                    Pos::of(g.span()),
                    "GROUP BY the position of a * column",
                )),
            };
        }
        if let ast::Expr::Identifier(i) = g {
            let is_column = from.iter().any(|c| names(i, &c.name));
            if !is_column {
                for item in list {
                    if let Item::Expr(e, name) = item
                        && names(i, name)
                    {
                        return Ok(e);
                    }
                }
            }
        }
        Ok(g)
    }

    fn table_with_joins(&mut self, t: &ast::TableWithJoins) -> Result<Bound, SqlError> {
        let mut acc = self.factor(&t.relation)?;
        for j in &t.joins {
            let at = Pos::of(j.relation.span());
            acc = match as_of::version_time(&j.relation) {
                Some(time) => {
                    let right = self.factor(&as_of::unversioned(&j.relation))?;
                    self.as_of_join(acc, right, time, &j.join_operator, at)?
                }
                None => {
                    let right = self.factor(&j.relation)?;
                    self.join(acc, right, &j.join_operator, at)?
                }
            };
        }
        Ok(acc)
    }

    fn factor(&mut self, f: &ast::TableFactor) -> Result<Bound, SqlError> {
        let at = Pos::of(f.span());
        let window = super::window::window_call(f);
        let (mut bound, alias) = match f {
            ast::TableFactor::Table { alias, .. }
            | ast::TableFactor::TableFunction { alias, .. }
                if window.is_some() =>
            {
                let (name, args) = window.expect("a window call");
                (self.window(&name, args, at)?, alias)
            }
            ast::TableFactor::Table {
                name,
                alias,
                args,
                version,
                ..
            } => {
                if version.is_some() {
                    return Err(SqlError::unsupported(
                        at,
                        "FOR SYSTEM_TIME AS OF here: the versioned table is the right side of \
                         a JOIN ... ON",
                    ));
                }
                if args.is_some() {
                    return Err(SqlError::unsupported(
                        at,
                        format!("the table function {name}"),
                    ));
                }
                (self.table(name, at)?, alias)
            }
            ast::TableFactor::Derived {
                lateral,
                subquery,
                alias,
                ..
            } => {
                if *lateral {
                    return Err(SqlError::unsupported(at, "LATERAL"));
                }
                let mut b = self.query(subquery)?;
                b.cols.iter_mut().for_each(|c| c.table = None);
                (b, alias)
            }
            ast::TableFactor::NestedJoin {
                table_with_joins,
                alias,
            } => (self.table_with_joins(table_with_joins)?, alias),
            other => return Err(SqlError::unsupported(at, format!("the FROM item {other}"))),
        };
        if let Some(alias) = alias {
            let name = ident(&alias.name);
            bound
                .cols
                .iter_mut()
                .for_each(|c| c.table = Some(name.clone()));
            rename_columns(&mut bound.cols, alias)?;
        }
        Ok(bound)
    }

    /// `left JOIN right ON/USING ...`.
    fn join(
        &mut self,
        left: Bound,
        right: Bound,
        op: &ast::JoinOperator,
        at: Pos,
    ) -> Result<Bound, SqlError> {
        use ast::JoinOperator as J;
        let (kind, constraint) = match op {
            J::Join(c) | J::Inner(c) | J::CrossJoin(c) => (JoinType::Inner, c),
            J::Left(c) | J::LeftOuter(c) => (JoinType::Left, c),
            J::Right(c) | J::RightOuter(c) => (JoinType::Right, c),
            J::FullOuter(c) => (JoinType::Full, c),
            other => {
                return Err(SqlError::unsupported(
                    at,
                    format!("this join ({other:?})")
                        .replace("(", " ")
                        .replace(")", ""),
                ));
            }
        };
        let nl = left.cols.len();
        let mut cols: Vec<Col> = left.cols.iter().chain(&right.cols).cloned().collect();
        let mut keys = (Vec::new(), Vec::new());
        let mut conjuncts = Vec::new();
        match constraint {
            ast::JoinConstraint::On(e) => conjuncts = self.condition(e, &cols)?.conjuncts(),
            ast::JoinConstraint::Using(using) => {
                for name in using {
                    let [ast::ObjectNamePart::Identifier(i)] = name.0.as_slice() else {
                        return Err(SqlError::unsupported(at, format!("USING {name}")));
                    };
                    let find = |range: std::ops::Range<usize>| {
                        range
                            .filter(|&c| !cols[c].hidden && names(i, &cols[c].name))
                            .collect::<Vec<_>>()
                    };
                    let (l, r) = (find(0..nl), find(nl..cols.len()));
                    let ([l], [r]) = (l.as_slice(), r.as_slice()) else {
                        return Err(SqlError::new(
                            SqlErrorKind::UnknownColumn,
                            Pos::of(i.span),
                            format!(
                                "USING ({}) needs exactly one such column on each side",
                                i.value
                            ),
                        ));
                    };
                    match kind {
                        JoinType::Inner | JoinType::Left => cols[*r].hidden = true,
                        JoinType::Right => cols[*l].hidden = true,
                        JoinType::Full | JoinType::Semi | JoinType::Anti => {
                            return Err(SqlError::unsupported(
                                Pos::of(i.span),
                                "FULL JOIN ... USING",
                            ));
                        }
                    }
                    conjuncts.push(Scalar::Compare(
                        Compare::Eq,
                        Box::new(Scalar::Column(*l)),
                        Box::new(Scalar::Column(*r)),
                    ));
                }
            }
            ast::JoinConstraint::None => {}
            ast::JoinConstraint::Natural | ast::JoinConstraint::UsingAlias(..) => {
                return Err(SqlError::unsupported(at, "NATURAL JOIN"));
            }
        }
        let (mut lf, mut rf, mut residual) = (Vec::new(), Vec::new(), Vec::new());
        for c in conjuncts {
            if let Some((l, r)) = equi(&c, nl) {
                keys.0.push(l);
                keys.1.push(r - nl);
                continue;
            }
            let mut used = Vec::new();
            c.columns(&mut used);
            let left_only = !used.is_empty() && used.iter().all(|&u| u < nl);
            let right_only = !used.is_empty() && used.iter().all(|&u| u >= nl);
            match kind {
                JoinType::Inner | JoinType::Right if left_only => lf.push(c),
                JoinType::Inner | JoinType::Left if right_only => rf.push(c.remap(&|i| i - nl)),
                JoinType::Inner => residual.push(c),
                _ => {
                    return Err(SqlError::unsupported(
                        at,
                        "an outer join's ON condition other than equalities between the two \
                         sides and conditions on the side whose rows may be missing (for now)",
                    ));
                }
            }
        }
        let filtered = |b: Bound, f: Vec<Scalar>| match Scalar::all(f) {
            Some(p) => Rel::Filter(Box::new(b.rel), p),
            None => b.rel,
        };
        let rel = Rel::Join {
            left: Box::new(filtered(left, lf)),
            right: Box::new(filtered(right, rf)),
            kind,
            left_key: keys.0,
            right_key: keys.1,
            residual: Scalar::all(residual),
            strategy: JoinStrategy::Shuffle,
        };
        Ok(Bound { rel, cols })
    }
}

/// A grouping's relation: `input` mapped to the group keys and the
/// aggregates' arguments, then aggregated (keys, then one column per call).
pub(super) fn aggregate_rel(state: &AggState, input: Rel) -> Rel {
    let keys = state.groups.len();
    let mut pre = state.groups.clone();
    let mut aggs = Vec::new();
    for (call, arg) in &state.calls {
        let arg = arg
            .as_ref()
            .map(|a| match pre[keys..].iter().position(|p| p == a) {
                Some(p) => keys + p,
                None => {
                    pre.push(a.clone());
                    pre.len() - 1
                }
            });
        aggs.push(AggCall {
            arg,
            ..call.clone()
        });
    }
    Rel::Aggregate {
        input: Box::new(Rel::Map(Box::new(input), pre)),
        keys,
        aggs,
        hot: None,
        closes: None,
    }
}

/// An equality between a left column and a right column (`nl` left
/// columns): the pair of positions, left first.
pub(super) fn equi(c: &Scalar, nl: usize) -> Option<(usize, usize)> {
    match c {
        Scalar::Compare(Compare::Eq, a, b) => match (&**a, &**b) {
            (Scalar::Column(x), Scalar::Column(y)) if *x < nl && *y >= nl => Some((*x, *y)),
            (Scalar::Column(x), Scalar::Column(y)) if *y < nl && *x >= nl => Some((*y, *x)),
            _ => None,
        },
        _ => None,
    }
}

/// Joins comma-separated FROM items: a WHERE conjunct over one item
/// filters it before any join; equalities between items become join keys
/// (the next item joined is one with such an equality, so a cross join is
/// taken only when there is none); the rest filter the joined rows as soon
/// as the items they read are joined. The result's columns are in FROM order.
fn join_items(items: Vec<Bound>, conjuncts: Vec<Scalar>) -> Bound {
    let offsets: Vec<usize> = items
        .iter()
        .scan(0, |acc, b| {
            let start = *acc;
            *acc += b.cols.len();
            Some(start)
        })
        .collect();
    let total: usize = items.iter().map(|b| b.cols.len()).sum();
    let item_of = |p: usize| offsets.iter().rposition(|&o| o <= p).expect("a position");
    let cols: Vec<Col> = items.iter().flat_map(|b| b.cols.clone()).collect();
    let mut rels: Vec<Option<Rel>> = items.into_iter().map(|b| Some(b.rel)).collect();
    let mut pending: Vec<(Scalar, Vec<usize>)> = Vec::new();
    let mut constant = Vec::new();
    let mut local: Vec<Vec<Scalar>> = vec![Vec::new(); rels.len()];
    for c in conjuncts {
        let mut used = Vec::new();
        c.columns(&mut used);
        let mut its: Vec<usize> = used.iter().map(|&p| item_of(p)).collect();
        its.sort_unstable();
        its.dedup();
        match its.as_slice() {
            [] => constant.push(c),
            [one] => {
                let off = offsets[*one];
                local[*one].push(c.remap(&|p| p - off));
            }
            _ => pending.push((c, its)),
        }
    }
    for (i, f) in local.into_iter().enumerate() {
        if let Some(p) = Scalar::all(f) {
            let rel = rels[i].take().expect("unjoined");
            rels[i] = Some(Rel::Filter(Box::new(rel), p));
        }
    }
    // pos[p]: where global column p is in the accumulated join.
    let mut pos: Vec<Option<usize>> = vec![None; total];
    let mut joined = vec![false; rels.len()];
    let width = |i: usize| {
        if i + 1 < offsets.len() {
            offsets[i + 1] - offsets[i]
        } else {
            total - offsets[i]
        }
    };
    let mut acc = rels[0].take().expect("first item");
    joined[0] = true;
    (0..width(0)).for_each(|c| pos[c] = Some(c));
    let mut acc_width = width(0);
    while let Some(next) = pick_next(&joined, &pending, &item_of) {
        let right = rels[next].take().expect("unjoined");
        let (mut lk, mut rk, mut rest) = (Vec::new(), Vec::new(), Vec::new());
        for (c, its) in pending.drain(..) {
            let links = its.contains(&next) && its.iter().all(|&i| joined[i] || i == next);
            match links
                .then(|| equi_between(&c, &pos, offsets[next], width(next)))
                .flatten()
            {
                Some((l, r)) => {
                    lk.push(l);
                    rk.push(r);
                }
                None => rest.push((c, its)),
            }
        }
        pending = rest;
        for c in 0..width(next) {
            pos[offsets[next] + c] = Some(acc_width + c);
        }
        acc_width += width(next);
        joined[next] = true;
        acc = Rel::Join {
            left: Box::new(acc),
            right: Box::new(right),
            kind: JoinType::Inner,
            left_key: lk,
            right_key: rk,
            residual: None,
            strategy: JoinStrategy::Shuffle,
        };
        let (ready, waiting): (Vec<_>, Vec<_>) = pending
            .into_iter()
            .partition(|(_, its)| its.iter().all(|&i| joined[i]));
        pending = waiting;
        let ready: Vec<Scalar> = ready
            .into_iter()
            .map(|(c, _)| c.remap(&|p| pos[p].expect("joined")))
            .collect();
        if let Some(p) = Scalar::all(ready) {
            acc = Rel::Filter(Box::new(acc), p);
        }
    }
    let in_order: Vec<usize> = (0..total).map(|p| pos[p].expect("joined")).collect();
    if in_order.iter().enumerate().any(|(i, &p)| i != p) {
        acc = Rel::Map(
            Box::new(acc),
            in_order.into_iter().map(Scalar::Column).collect(),
        );
    }
    if let Some(p) = Scalar::all(constant) {
        acc = Rel::Filter(Box::new(acc), p);
    }
    Bound { rel: acc, cols }
}

/// The next FROM item to join: the first one linked to the joined ones by
/// an equality, or else the first one left (a cross join).
fn pick_next(
    joined: &[bool],
    pending: &[(Scalar, Vec<usize>)],
    item_of: &dyn Fn(usize) -> usize,
) -> Option<usize> {
    let linked = pending.iter().find_map(|(c, its)| {
        let Scalar::Compare(Compare::Eq, a, b) = c else {
            return None;
        };
        let (Scalar::Column(x), Scalar::Column(y)) = (&**a, &**b) else {
            return None;
        };
        let (ix, iy) = (item_of(*x), item_of(*y));
        let _ = its;
        match (joined[ix], joined[iy]) {
            (true, false) => Some(iy),
            (false, true) => Some(ix),
            _ => None,
        }
    });
    linked.or_else(|| joined.iter().position(|j| !j))
}

/// An equality between a joined column and a column of the item at
/// `offset..offset+width`: (position in the join, position in the item).
fn equi_between(
    c: &Scalar,
    pos: &[Option<usize>],
    offset: usize,
    width: usize,
) -> Option<(usize, usize)> {
    let Scalar::Compare(Compare::Eq, a, b) = c else {
        return None;
    };
    let (Scalar::Column(x), Scalar::Column(y)) = (&**a, &**b) else {
        return None;
    };
    let inside = |p: usize| (offset..offset + width).contains(&p);
    match (inside(*x), inside(*y)) {
        (false, true) => Some((pos[*x]?, *y - offset)),
        (true, false) => Some((pos[*y]?, *x - offset)),
        _ => None,
    }
}

/// The select list with wildcards expanded and output names chosen.
pub(super) fn select_list<'q>(
    items: &'q [ast::SelectItem],
    from: &[Col],
) -> Result<Vec<Item<'q>>, SqlError> {
    let mut out = Vec::new();
    for item in items {
        match item {
            ast::SelectItem::UnnamedExpr(e) => {
                let name = match e {
                    ast::Expr::Identifier(i) => column_name(i, from),
                    ast::Expr::CompoundIdentifier(parts) => {
                        column_name(&parts[parts.len() - 1], from)
                    }
                    e => e.to_string(),
                };
                out.push(Item::Expr(e, name));
            }
            ast::SelectItem::ExprWithAlias { expr, alias } => {
                out.push(Item::Expr(expr, ident(alias)))
            }
            ast::SelectItem::Wildcard(opts) => {
                check_plain_wildcard(opts, item)?;
                out.extend(
                    (0..from.len())
                        .filter(|&i| !from[i].hidden)
                        .map(Item::Column),
                );
            }
            ast::SelectItem::QualifiedWildcard(kind, opts) => {
                check_plain_wildcard(opts, item)?;
                let ast::SelectItemQualifiedWildcardKind::ObjectName(name) = kind else {
                    return Err(SqlError::unsupported(
                        Pos::of(item.span()),
                        format!("{item}"),
                    ));
                };
                let [ast::ObjectNamePart::Identifier(t)] = name.0.as_slice() else {
                    return Err(SqlError::unsupported(
                        Pos::of(item.span()),
                        format!("{item}"),
                    ));
                };
                let cols: Vec<usize> = (0..from.len())
                    .filter(|&i| from[i].table.as_deref().is_some_and(|n| names(t, n)))
                    .collect();
                if cols.is_empty() {
                    return Err(SqlError::new(
                        SqlErrorKind::UnknownTable,
                        Pos::of(t.span),
                        format!("no table or alias {} in this query's FROM", t.value),
                    ));
                }
                out.extend(cols.into_iter().map(Item::Column));
            }
            ast::SelectItem::ExprWithAliases { .. } => {
                return Err(SqlError::unsupported(
                    Pos::of(item.span()),
                    format!("{item}"),
                ));
            }
        }
    }
    Ok(out)
}

/// The name of a selected column: the column's own spelling when the
/// identifier names one, else as written.
fn column_name(i: &ast::Ident, from: &[Col]) -> String {
    from.iter()
        .find(|c| names(i, &c.name))
        .map_or_else(|| i.value.clone(), |c| c.name.clone())
}

fn check_plain_wildcard(
    opts: &ast::WildcardAdditionalOptions,
    item: &ast::SelectItem,
) -> Result<(), SqlError> {
    if opts.opt_ilike.is_some()
        || opts.opt_exclude.is_some()
        || opts.opt_except.is_some()
        || opts.opt_replace.is_some()
        || opts.opt_rename.is_some()
    {
        return Err(SqlError::unsupported(
            Pos::of(item.span()),
            format!("{item}"),
        ));
    }
    Ok(())
}

fn out_col(name: String, ty: SqlType, origin: Option<(usize, usize)>) -> Col {
    Col {
        table: None,
        name,
        ty,
        origin,
        hidden: false,
    }
}
