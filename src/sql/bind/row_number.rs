//! `ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...)` as a column of a
//! select list: the FROM rows numbered per group by a partitioned top-k
//! ([`Rel::TopK`] with `numbered`). With a filter on the number above it
//! (`WHERE rn <= 3`, Flink's top-N idiom) the top-k keeps only those rows
//! ([`crate::sql::rel::limit_row_numbers`]).
//!
//! Rows that tie on the `ORDER BY` keys are numbered in the order of their
//! whole values, so the numbers are a function of the input — where other
//! engines number ties in arrival order.

use sqlparser::ast::{self, Spanned};

use super::expr::Cx;
use super::select::Item;
use super::{Binder, Bound, Col, SqlType, sort_key};
use crate::sql::error::{Pos, SqlError, SqlErrorKind};
use crate::sql::rel::Rel;
use crate::sql::scalar::Scalar;

/// The window of `e` when it is `ROW_NUMBER() OVER (...)`.
fn row_number_window(e: &ast::Expr) -> Option<&ast::WindowType> {
    let ast::Expr::Function(f) = e else {
        return None;
    };
    let named = matches!(f.name.0.as_slice(),
        [ast::ObjectNamePart::Identifier(i)] if i.value.eq_ignore_ascii_case("row_number"));
    let no_args = match &f.args {
        ast::FunctionArguments::None => true,
        ast::FunctionArguments::List(l) => l.args.is_empty(),
        ast::FunctionArguments::Subquery(_) => false,
    };
    if named && no_args {
        f.over.as_ref()
    } else {
        None
    }
}

impl Binder<'_> {
    /// The FROM rows, numbered when the select list has `ROW_NUMBER()
    /// OVER (...)` items (one window for all of them), and for each such
    /// item its position in the list and the number's column.
    pub(super) fn row_numbers(
        &mut self,
        list: &[Item<'_>],
        from: Bound,
    ) -> Result<(Bound, Vec<(usize, usize)>), SqlError> {
        let mut window: Option<(&ast::WindowType, Pos)> = None;
        let mut items = Vec::new();
        for (k, item) in list.iter().enumerate() {
            let Item::Expr(e, _) = item else { continue };
            let Some(w) = row_number_window(e) else {
                continue;
            };
            match window {
                Some((seen, _)) if seen != w => {
                    return Err(SqlError::unsupported(
                        Pos::of(e.span()),
                        "ROW_NUMBER() over two different windows in one select list",
                    ));
                }
                Some(_) => {}
                None => window = Some((w, Pos::of(e.span()))),
            }
            items.push(k);
        }
        let Some((window, at)) = window else {
            return Ok((from, Vec::new()));
        };
        let ast::WindowType::WindowSpec(spec) = window else {
            return Err(SqlError::unsupported(
                at,
                "a named window (WINDOW w AS ...)",
            ));
        };
        if spec.window_frame.is_some() || spec.window_name.is_some() {
            return Err(SqlError::unsupported(
                at,
                "a window frame with ROW_NUMBER()",
            ));
        }
        if spec.order_by.is_empty() {
            return Err(SqlError::new(
                SqlErrorKind::Invalid,
                at,
                "ROW_NUMBER() without ORDER BY numbers rows in arrival order, and kappa's \
                 answers never depend on it: add ORDER BY to its OVER (...)",
            ));
        }
        let n = from.cols.len();
        let mut exprs: Vec<Scalar> = (0..n).map(Scalar::Column).collect();
        let mut column_of = |s: Scalar| match s {
            Scalar::Column(c) => c,
            other => {
                exprs.push(other);
                exprs.len() - 1
            }
        };
        let mut partition = Vec::new();
        for p in &spec.partition_by {
            let t = self.expr(p, &mut Cx::plain(&from.cols))?;
            partition.push(column_of(t.0));
        }
        let mut order = Vec::new();
        for o in &spec.order_by {
            let t = self.expr(&o.expr, &mut Cx::plain(&from.cols))?;
            order.push(sort_key(o, column_of(t.0))?);
        }
        let width = exprs.len();
        let input = match width > n {
            true => Rel::Map(Box::new(from.rel), exprs),
            false => from.rel,
        };
        let rel = Rel::TopK {
            input: Box::new(input),
            partition,
            order,
            limit: u64::MAX,
            offset: 0,
            numbered: true,
        };
        let mut cols = from.cols;
        let hidden = |ty| Col {
            table: None,
            name: String::new(),
            ty,
            origin: None,
            hidden: true,
        };
        cols.extend((n..width).map(|_| hidden(SqlType::Any)));
        cols.push(hidden(SqlType::Int));
        let numbered = items.into_iter().map(|k| (k, width)).collect();
        Ok((Bound { rel, cols }, numbered))
    }
}
