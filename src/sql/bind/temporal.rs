//! Binding the temporal join, `left JOIN versioned FOR SYSTEM_TIME AS OF
//! left.ts AS v ON left.k = v.k` ([`Rel::AsOf`]; the clause itself is read
//! by `sql/as_of.rs`).
//!
//! The versioned side is an input declared with a `WATERMARK`: its
//! watermark column is when each row (a version) starts to hold, as
//! Flink's event-time attribute is. The `ON` condition is equalities
//! between the sides (the versioned table's key); other conditions belong
//! in `WHERE`, so that which version is picked never depends on them.

use sqlparser::ast::{self, Spanned};

use super::expr::{Cx, Want};
use super::select::equi;
use super::{Binder, Bound, SqlType};
use crate::schema::ColumnType;
use crate::sql::band::TimeKind;
use crate::sql::error::{Pos, SqlError, SqlErrorKind};
use crate::sql::rel::Rel;

impl Binder<'_> {
    /// `left JOIN right FOR SYSTEM_TIME AS OF time ON ...`; `at` is where
    /// the versioned table is named.
    pub(super) fn as_of_join(
        &mut self,
        left: Bound,
        right: Bound,
        time: &ast::Expr,
        op: &ast::JoinOperator,
        at: Pos,
    ) -> Result<Bound, SqlError> {
        use ast::JoinOperator as J;
        let (keep_unmatched, constraint) = match op {
            J::Join(c) | J::Inner(c) => (false, c),
            J::Left(c) | J::LeftOuter(c) => (true, c),
            _ => {
                return Err(SqlError::unsupported(
                    at,
                    "FOR SYSTEM_TIME AS OF in this join: the temporal join is an inner or a \
                     LEFT JOIN",
                ));
            }
        };
        let right_time = self.version_column(&right, at)?;
        let kind = match right.cols[right_time].ty {
            SqlType::Int => TimeKind::Integer,
            _ => TimeKind::Instant,
        };
        let left_time = self.as_of_time(&left, time, kind, &right.cols[right_time].name)?;
        let nl = left.cols.len();
        let cols: Vec<_> = left.cols.iter().chain(&right.cols).cloned().collect();
        let (mut left_key, mut right_key) = (Vec::new(), Vec::new());
        match constraint {
            ast::JoinConstraint::On(e) => {
                for c in self.condition(e, &cols)?.conjuncts() {
                    let Some((l, r)) = equi(&c, nl) else {
                        return Err(SqlError::unsupported(
                            Pos::of(e.span()),
                            "a FOR SYSTEM_TIME AS OF join's ON condition other than equalities \
                             between the two sides (the versioned table's key): filter in WHERE",
                        ));
                    };
                    left_key.push(l);
                    right_key.push(r - nl);
                }
            }
            ast::JoinConstraint::None => {}
            _ => {
                return Err(SqlError::unsupported(
                    at,
                    "USING or NATURAL with FOR SYSTEM_TIME AS OF: write ON l.key = v.key",
                ));
            }
        }
        let rel = Rel::AsOf {
            left: Box::new(left.rel),
            right: Box::new(right.rel),
            left_key,
            right_key,
            left_time,
            right_time,
            kind,
            keep_unmatched,
        };
        Ok(Bound { rel, cols })
    }

    /// The position of the versioned side's time: its input's watermark
    /// column.
    fn version_column(&self, right: &Bound, at: Pos) -> Result<usize, SqlError> {
        let Rel::Scan { input, columns } = &right.rel else {
            return Err(SqlError::unsupported(
                at,
                "FOR SYSTEM_TIME AS OF a view, CTE or subquery: the versioned side is an input \
                 declared with a WATERMARK",
            ));
        };
        let info = &self.inputs[*input];
        let Some((column, _)) = info.watermark else {
            return Err(SqlError::new(
                SqlErrorKind::Invalid,
                at,
                format!(
                    "table {0} has no event time to version its rows by: declare one, as for \
                     Flink, with CREATE TABLE {0} (ts TIMESTAMP, WATERMARK FOR ts AS ts - \
                     INTERVAL '1' MINUTE) (a row more than the interval behind the latest \
                     before it is dropped as late)",
                    info.name
                ),
            ));
        };
        Ok(columns
            .iter()
            .position(|&c| c == column)
            .expect("a table's scan reads all its columns"))
    }

    /// The position of the left side's time column `time`, checked to be
    /// of the versioned time's kind (an inferred column is read as it).
    fn as_of_time(
        &mut self,
        left: &Bound,
        time: &ast::Expr,
        kind: TimeKind,
        version: &str,
    ) -> Result<usize, SqlError> {
        let cx = &mut Cx::plain(&left.cols);
        let t = self.expr(time, cx)?;
        let pos = Pos::of(time.span());
        let crate::sql::scalar::Scalar::Column(p) = t.0 else {
            return Err(SqlError::unsupported(
                pos,
                format!("FOR SYSTEM_TIME AS OF {time}: it takes a column of the left side"),
            ));
        };
        match (kind, t.1, left.cols[p].origin) {
            (TimeKind::Instant, ..) => self.want(&t, Want::Time, time, cx)?,
            (TimeKind::Integer, SqlType::Int | SqlType::Null, _) => {}
            (TimeKind::Integer, SqlType::Any, Some(o)) => self.need(o, ColumnType::Int, pos)?,
            (TimeKind::Integer, ty, _) => {
                return Err(SqlError::new(
                    SqlErrorKind::Type,
                    pos,
                    format!(
                        "{time} is {}, but the versioned table's time {version} is an integer",
                        ty.name()
                    ),
                ));
            }
        }
        Ok(p)
    }
}
