//! The windowing table-valued functions, in Flink's syntax:
//! `TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE))`,
//! `TABLE(HOP(TABLE t, DESCRIPTOR(ts), slide, size))` and
//! `TABLE(SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), gap))` in a `FROM`
//! clause (the outer `TABLE(...)` and the inner `TABLE` keyword may be left
//! out).
//! Each gives `t`'s columns and `window_start`, `window_end`
//! ([`Rel::Window`]); a windowed aggregate groups by them.
//!
//! Windows are a function of the time column alone (rule 1): a late row
//! updates the windows it falls in, as in the built-in `window-agg` job.

use std::borrow::Cow;

use sqlparser::ast::{self, Spanned};
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::Token;

use super::expr::{Cx, Want, interval};
use super::{Binder, Bound, Col, SqlType};
use crate::calendar::MICROS_PER_DAY;
use crate::sql::error::{Pos, SqlError, SqlErrorKind};
use crate::sql::rel::{Rel, WindowKind};
use crate::sql::scalar::Scalar;

/// The window functions' names.
const WINDOWS: &[&str] = &["tumble", "hop", "session"];

/// The most windows one row may fall in (`size / slide` of a `HOP`), as
/// the built-in `window-agg` job's default `max_windows`.
pub const MAX_WINDOWS_PER_ROW: i64 = 1000;

/// The longest window: ten thousand years (so bounds never overflow).
const MAX_SIZE: i64 = 10_000 * 366 * MICROS_PER_DAY;

/// `text` with the `TABLE` keyword of `TUMBLE(TABLE t, ...)` blanked out
/// (the parser takes no `TABLE t` argument), and a session's `t PARTITION
/// BY k` made the arguments `t, k`; every other character stays where it
/// was, so error positions still point into the user's text.
pub fn accept_table_arguments(text: &str) -> Cow<'_, str> {
    let Some(tokens) = crate::sql::blank::tokens(text) else {
        return Cow::Borrowed(text);
    };
    let word = |i: usize, k: Keyword| matches!(tokens.get(i).map(|t| &t.token), Some(Token::Word(w)) if w.keyword == k);
    // (where, what it becomes: text of the same length)
    let mut edits = Vec::new();
    for i in 0..tokens.len() {
        let is_window = matches!(&tokens[i].token, Token::Word(f)
            if f.quote_style.is_none() && WINDOWS.contains(&f.value.to_lowercase().as_str()));
        if !is_window || tokens.get(i + 1).map(|t| &t.token) != Some(&Token::LParen) {
            continue;
        }
        let mut at = i + 2;
        if word(at, Keyword::TABLE) {
            edits.push((tokens[at].span.start, "     "));
            at += 1;
        }
        if word(at + 1, Keyword::PARTITION) && word(at + 2, Keyword::BY) {
            edits.push((tokens[at + 1].span.start, ",        "));
            edits.push((tokens[at + 2].span.start, "  "));
        }
    }
    if edits.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_string();
    for (at, with) in edits {
        let Some(offset) = byte_offset(text, at.line, at.column) else {
            return Cow::Borrowed(text);
        };
        out.replace_range(offset..offset + with.len(), with);
    }
    Cow::Owned(out)
}

/// The byte offset of a 1-based line and column (in characters).
pub fn byte_offset(text: &str, line: u64, column: u64) -> Option<usize> {
    let start: usize = text
        .split_inclusive('\n')
        .take(usize::try_from(line).ok()?.checked_sub(1)?)
        .map(str::len)
        .sum();
    let rest = text.get(start..)?;
    let (i, _) = rest
        .char_indices()
        .nth(usize::try_from(column).ok()?.checked_sub(1)?)?;
    Some(start + i)
}

/// The window function a `FROM` item calls, if it calls one: its name and
/// arguments.
pub fn window_call(f: &ast::TableFactor) -> Option<(String, &[ast::FunctionArg])> {
    let (name, args) = match f {
        ast::TableFactor::Table {
            name,
            args: Some(args),
            ..
        } => (name, args.args.as_slice()),
        ast::TableFactor::TableFunction {
            expr: ast::Expr::Function(call),
            ..
        } => match &call.args {
            ast::FunctionArguments::List(list) => (&call.name, list.args.as_slice()),
            _ => return None,
        },
        _ => return None,
    };
    let name = name.to_string().to_lowercase();
    WINDOWS.contains(&name.as_str()).then_some((name, args))
}

impl Binder<'_> {
    /// `TUMBLE(t, DESCRIPTOR(ts), size)`, `HOP(t, DESCRIPTOR(ts), slide,
    /// size)` or `SESSION(t [PARTITION BY k], DESCRIPTOR(ts), gap)` (the
    /// partition comes here as a second argument).
    pub(super) fn window(
        &mut self,
        name: &str,
        args: &[ast::FunctionArg],
        at: Pos,
    ) -> Result<Bound, SqlError> {
        let usage = match name {
            "tumble" => "TUMBLE(TABLE t, DESCRIPTOR(time column), INTERVAL 'n' unit)",
            "hop" => "HOP(TABLE t, DESCRIPTOR(time column), INTERVAL slide, INTERVAL size)",
            _ => {
                "SESSION(TABLE t [PARTITION BY col | (col, ...)], DESCRIPTOR(time column), \
                 INTERVAL gap)"
            }
        };
        let wrong =
            |why: &str| SqlError::new(SqlErrorKind::Invalid, at, format!("{why}: write {usage}"));
        let exprs: Vec<&ast::Expr> = args
            .iter()
            .map(|a| match a {
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Ok(e),
                _ => Err(wrong("arguments are given in order, without names")),
            })
            .collect::<Result<_, _>>()?;
        let counts: &[usize] = match name {
            "tumble" => &[3],
            "hop" => &[4],
            _ => &[3, 4],
        };
        if !counts.contains(&exprs.len()) {
            let n = counts[0];
            return Err(wrong(&format!(
                "{} takes {n} arguments",
                name.to_uppercase()
            )));
        }
        let table = match exprs[0] {
            ast::Expr::Identifier(i) => ast::ObjectName::from(vec![i.clone()]),
            _ => return Err(wrong("the first argument is a table, view or CTE name")),
        };
        let mut bound = self.table(&table, Pos::of(exprs[0].span()))?;
        let partition = match (name, exprs.len()) {
            ("session", 4) => self.partition(exprs[1], &bound.cols, &wrong)?,
            _ => Vec::new(),
        };
        let after = if name == "hop" { 3 } else { 2 };
        let rest = &exprs[exprs.len() - after..];
        let time = self.descriptor(rest[0], &bound.cols, &wrong)?;
        let mut sizes = Vec::new();
        for e in &rest[1..] {
            sizes.push(window_size(e, &wrong)?);
        }
        let kind = match (name, &sizes[..]) {
            ("session", &[gap]) => WindowKind::Session { gap, partition },
            (_, &[size]) => WindowKind::Hop { size, hop: size },
            (_, &[hop, size]) => hopping(size, hop, &wrong)?,
            _ => unreachable!("the argument count was checked"),
        };
        let qualifier = bound.cols.first().and_then(|c| c.table.clone());
        for name in ["window_start", "window_end"] {
            bound.cols.push(Col {
                table: qualifier.clone(),
                name: name.to_string(),
                ty: SqlType::Timestamp,
                origin: None,
                hidden: false,
            });
        }
        bound.rel = Rel::Window {
            input: Box::new(bound.rel),
            time,
            kind,
        };
        Ok(bound)
    }

    /// A session's `PARTITION BY` columns: one, or several in parentheses.
    fn partition(
        &mut self,
        e: &ast::Expr,
        cols: &[Col],
        wrong: &dyn Fn(&str) -> SqlError,
    ) -> Result<Vec<usize>, SqlError> {
        let items: Vec<&ast::Expr> = match e {
            ast::Expr::Tuple(items) => items.iter().collect(),
            ast::Expr::Nested(item) => vec![item],
            item => vec![item],
        };
        let mut out = Vec::new();
        for item in items {
            match self.expr(item, &mut Cx::plain(cols))?.0 {
                Scalar::Column(c) => out.push(c),
                _ => return Err(wrong("PARTITION BY names columns")),
            }
        }
        Ok(out)
    }

    /// The time column `DESCRIPTOR(col)` names: a date or timestamp (an
    /// inferred input column is read as timestamps).
    fn descriptor(
        &mut self,
        e: &ast::Expr,
        cols: &[Col],
        wrong: &dyn Fn(&str) -> SqlError,
    ) -> Result<usize, SqlError> {
        let column = match e {
            ast::Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("descriptor") => {
                match &f.args {
                    ast::FunctionArguments::List(l) => match &l.args[..] {
                        [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(c))] => Some(c),
                        _ => None,
                    },
                    _ => None,
                }
            }
            _ => None,
        };
        let Some(column) = column else {
            return Err(wrong("the second argument is DESCRIPTOR(time column)"));
        };
        let t = self.expr(column, &mut Cx::plain(cols))?;
        let Scalar::Column(i) = t.0 else {
            return Err(wrong("DESCRIPTOR names one column"));
        };
        if t.1.numeric() && t.1 != SqlType::Any {
            return Err(SqlError::new(
                SqlErrorKind::Type,
                Pos::of(column.span()),
                format!(
                    "{column} is {}, but a window's time is a timestamp: convert it in a CTE \
                     with to_timestamp({column}) (seconds) or epoch_ms({column})",
                    t.1.name()
                ),
            ));
        }
        self.want(&t, Want::Time, column, &Cx::plain(cols))?;
        Ok(i)
    }
}

/// `HOP` windows, if every row falls in at least one and not too many.
fn hopping(size: i64, hop: i64, wrong: &dyn Fn(&str) -> SqlError) -> Result<WindowKind, SqlError> {
    if hop > size {
        return Err(wrong(
            "the slide is at most the size (rows between windows would be in none)",
        ));
    }
    if (size - 1) / hop + 1 > MAX_WINDOWS_PER_ROW {
        return Err(wrong(&format!(
            "a row would fall in more than {MAX_WINDOWS_PER_ROW} windows (size / slide)"
        )));
    }
    Ok(WindowKind::Hop { size, hop })
}

/// A window's size or slide: an `INTERVAL` of a fixed length (no months).
fn window_size(e: &ast::Expr, wrong: &dyn Fn(&str) -> SqlError) -> Result<i64, SqlError> {
    let ast::Expr::Interval(iv) = e else {
        return Err(wrong(
            "sizes are INTERVAL literals, as INTERVAL '10' MINUTE",
        ));
    };
    let at = Pos::of(e.span());
    let iv = interval(iv, at)?;
    if iv.months != 0 || iv.micros <= 0 || iv.micros > MAX_SIZE {
        return Err(SqlError::new(
            SqlErrorKind::Invalid,
            at,
            format!(
                "a window's size is a positive fixed length (days or shorter units, \
                 not months or years), not {e}"
            ),
        ));
    }
    Ok(iv.micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_keyword_is_blanked_in_place() {
        let text =
            "SELECT *\nFROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(t), INTERVAL '1' HOUR)) -- TABLE\n";
        let out = accept_table_arguments(text);
        assert_eq!(
            out,
            "SELECT *\nFROM TABLE(TUMBLE(      e, DESCRIPTOR(t), INTERVAL '1' HOUR)) -- TABLE\n"
        );
        assert_eq!(out.len(), text.len());
        let session = "SELECT * FROM TABLE(SESSION(TABLE e PARTITION\n BY (u, v), DESCRIPTOR(t), INTERVAL '1' HOUR))";
        assert_eq!(
            accept_table_arguments(session),
            "SELECT * FROM TABLE(SESSION(      e ,        \n    (u, v), DESCRIPTOR(t), INTERVAL '1' HOUR))"
        );
        let other = "SELECT 'TUMBLE(TABLE x' FROM t";
        assert_eq!(accept_table_arguments(other), other);
        let hop =
            "SELECT * FROM hop ( table é, DESCRIPTOR(t), INTERVAL '1' MINUTE, INTERVAL '2' MINUTE)";
        assert_eq!(
            accept_table_arguments(hop),
            "SELECT * FROM hop (       é, DESCRIPTOR(t), INTERVAL '1' MINUTE, INTERVAL '2' MINUTE)"
        );
    }
}
