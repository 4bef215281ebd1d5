//! `WATERMARK FOR ts AS ts - INTERVAL '5' SECOND` in a `CREATE TABLE`'s
//! column list (Flink's declaration): the input's event-time column and how
//! far out of order its rows may come. It puts the input under the `drop`
//! late-event policy of [`crate::source::late`]: a row whose time is more
//! than the interval behind the largest time read before it from the same
//! partition (a log partition, or an input file) is dropped, counted and
//! logged. Without a watermark every row counts (late rows correct the
//! windows they fall in).
//!
//! The policy is part of the script, so it is part of the job's identity:
//! changing the allowed lateness changes what is dropped, so it is a new
//! version (`kappa reprocess`), like any other change to the query.
//!
//! sqlparser does not parse the clause: [`extract`] blanks it out of the
//! text before parsing (every character but line breaks becomes a space, so
//! positions in the rest of the text still point into what the user wrote)
//! and reads it on its own.

use std::borrow::Cow;

use sqlparser::ast;
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, TokenWithSpan};

use super::bind::{interval, names};
use super::blank::{blanked, ident, is_word, span_bytes, tokens};
use super::error::{Pos, SqlError, SqlErrorKind};

/// One `WATERMARK FOR column AS expression` clause.
#[derive(Clone, Debug)]
pub struct Watermark {
    /// The table whose column list holds it, as written.
    pub table: ast::Ident,
    /// The event-time column.
    pub column: ast::Ident,
    /// How far behind the largest time seen a row may be.
    pub delay: Delay,
    /// The expression, as sqlparser renders it (for the normalized text).
    pub expr: String,
    /// Where the clause starts.
    pub pos: Pos,
}

/// A watermark's delay: how far out of order rows may come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delay {
    /// `ts AS ts`: none (for a column of any time type).
    Zero,
    /// `ts - INTERVAL ...`, in microseconds (a timestamp or date column).
    Interval(i64),
    /// `ts - 300`, in the integer column's own unit.
    Units(i64),
}

impl Watermark {
    /// The clause as the normalized text writes it.
    pub fn render(&self) -> String {
        format!("WATERMARK FOR {} AS {}", self.column, self.expr)
    }
}

const USAGE: &str = "write WATERMARK FOR ts AS ts - INTERVAL '5' SECOND (rows may come up to \
                     the interval out of order; ts - 300 for an integer time column, in its \
                     unit) or WATERMARK FOR ts AS ts (in order)";

fn usage(pos: Pos) -> SqlError {
    SqlError::new(SqlErrorKind::Syntax, pos, USAGE)
}

/// `text` with every `WATERMARK FOR ...` clause blanked out (and the comma
/// that separates it from the columns), and the clauses read.
pub fn extract(text: &str) -> Result<(Cow<'_, str>, Vec<Watermark>), SqlError> {
    let Some(tokens) = tokens(text) else {
        return Ok((Cow::Borrowed(text), Vec::new()));
    };
    let mut found = Vec::new();
    let mut blanks = Vec::new();
    for i in 0..tokens.len() {
        if !is_word(&tokens, i, "watermark") || !is_word(&tokens, i + 1, "for") {
            continue;
        }
        let pos = Pos::of(tokens[i].span);
        let table = enclosing_table(&tokens, i).ok_or_else(|| {
            SqlError::new(
                SqlErrorKind::Invalid,
                pos,
                "a WATERMARK belongs in the column list of a CREATE TABLE",
            )
        })?;
        let (column, expr_at) = match (tokens.get(i + 2), is_word(&tokens, i + 3, "as")) {
            (
                Some(TokenWithSpan {
                    token: Token::Word(w),
                    span,
                }),
                true,
            ) => (ident(w, *span), i + 4),
            _ => return Err(usage(pos)),
        };
        let end = expression_end(&tokens, expr_at).ok_or_else(|| usage(pos))?;
        let (from, to) = (tokens[expr_at].span.start, tokens[end - 1].span.end);
        let expr = parse_expr(
            text,
            span_bytes(text, from, to).ok_or_else(|| usage(pos))?,
            pos,
        )?;
        let delay = delay(&expr, &column, pos)?;
        // The clause and one comma around it go: the one before it, or,
        // first in the list, the one after it.
        let (first, last) = if matches!(tokens[i - 1].token, Token::Comma) {
            (i - 1, end - 1)
        } else if matches!(tokens.get(end).map(|t| &t.token), Some(Token::Comma)) {
            (i, end)
        } else {
            (i, end - 1)
        };
        blanks.push(
            span_bytes(text, tokens[first].span.start, tokens[last].span.end)
                .ok_or_else(|| usage(pos))?,
        );
        found.push(Watermark {
            table,
            column,
            delay,
            expr: expr.to_string(),
            pos,
        });
    }
    Ok((blanked(text, &blanks), found))
}

/// The table of the `CREATE TABLE name (` whose parenthesis encloses
/// token `i`.
fn enclosing_table(tokens: &[TokenWithSpan], i: usize) -> Option<ast::Ident> {
    let mut depth = 0;
    let open = (0..i).rev().find(|&j| {
        match tokens[j].token {
            Token::RParen => depth += 1,
            Token::LParen if depth == 0 => return true,
            Token::LParen => depth -= 1,
            _ => {}
        }
        false
    })?;
    match (
        open.checked_sub(1).map(|j| &tokens[j]),
        open >= 2 && is_word(tokens, open - 2, "table"),
    ) {
        (
            Some(TokenWithSpan {
                token: Token::Word(w),
                span,
            }),
            true,
        ) => Some(ident(w, *span)),
        _ => None,
    }
}

/// The index after the last token of the expression starting at `from`:
/// where a `,` or `)` at its own depth ends it.
fn expression_end(tokens: &[TokenWithSpan], from: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (j, t) in tokens.iter().enumerate().skip(from) {
        match t.token {
            Token::LParen => depth += 1,
            Token::RParen if depth == 0 => return (j > from).then_some(j),
            Token::RParen => depth -= 1,
            Token::Comma if depth == 0 => return (j > from).then_some(j),
            Token::SemiColon | Token::EOF => return None,
            _ => {}
        }
    }
    None
}

/// The expression at the byte range `keep` of the text, parsed with the
/// rest made spaces (line breaks kept), so that the parser's positions are
/// the user's.
fn parse_expr(text: &str, keep: (usize, usize), pos: Pos) -> Result<ast::Expr, SqlError> {
    let only: String = text
        .char_indices()
        .map(|(i, c)| match c {
            '\n' => '\n',
            _ if i >= keep.0 && i < keep.1 => c,
            _ => ' ',
        })
        .collect();
    let mut parser = Parser::new(&GenericDialect {})
        .try_with_sql(&only)
        .map_err(SqlError::syntax)?;
    let expr = parser.parse_expr().map_err(SqlError::syntax)?;
    match parser.peek_token().token {
        Token::EOF => Ok(expr),
        _ => Err(usage(pos)),
    }
}

/// The delay `expr` gives `column`: `column` (none), `column - INTERVAL`
/// of a fixed length, or `column - n` (an integer).
fn delay(expr: &ast::Expr, column: &ast::Ident, pos: Pos) -> Result<Delay, SqlError> {
    let is_column = |e: &ast::Expr| matches!(e, ast::Expr::Identifier(c) if names(c, &column.value) || names(column, &c.value));
    let wrong = |why: &str| SqlError::new(SqlErrorKind::Invalid, pos, format!("{why}: {USAGE}"));
    match expr {
        e if is_column(e) => Ok(Delay::Zero),
        ast::Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::Minus,
            right,
        } if is_column(left) => {
            let iv = match &**right {
                ast::Expr::Interval(iv) => iv,
                ast::Expr::Value(v) => {
                    return match &v.value {
                        ast::Value::Number(n, _) => match n.parse::<i64>() {
                            Ok(n) if n >= 0 => Ok(Delay::Units(n)),
                            _ => Err(wrong(
                                "the watermark's delay is a whole number, not negative",
                            )),
                        },
                        _ => Err(wrong("the watermark subtracts an INTERVAL or a number")),
                    };
                }
                _ => return Err(wrong("the watermark subtracts an INTERVAL or a number")),
            };
            let iv = interval(iv, pos)?;
            if iv.months != 0 || iv.micros < 0 {
                return Err(wrong(
                    "the watermark's delay is a fixed length (days or shorter units), not negative",
                ));
            }
            Ok(Delay::Interval(iv.micros))
        }
        _ => Err(wrong(&format!(
            "a watermark is its column minus a delay, not {expr}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clause_is_blanked_in_place_and_read() {
        let text = "CREATE TABLE bids (price BIGINT, ts TIMESTAMP,\n  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);\nSELECT 1";
        let (out, found) = extract(text).unwrap();
        assert_eq!(
            out,
            "CREATE TABLE bids (price BIGINT, ts TIMESTAMP \n                                              );\nSELECT 1"
        );
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].table.value, "bids");
        assert_eq!(found[0].column.value, "ts");
        assert_eq!(found[0].delay, Delay::Interval(5_000_000));
        assert_eq!(
            found[0].render(),
            "WATERMARK FOR ts AS ts - INTERVAL '5' SECOND"
        );
        assert_eq!(found[0].pos, Pos { line: 2, column: 3 });
        // First in the list: the comma after it goes.
        let (out, found) = extract("CREATE TABLE t (watermark for \"T\" as \"T\", a INT)").unwrap();
        assert_eq!(out, format!("CREATE TABLE t ({}a INT)", " ".repeat(26)));
        assert_eq!(found[0].delay, Delay::Zero);
        let (_, found) =
            extract("CREATE TABLE t (ts BIGINT, WATERMARK FOR ts AS ts - 300)").unwrap();
        assert_eq!(found[0].delay, Delay::Units(300));
        // Alone.
        let (out, _) = extract("CREATE TABLE t (WATERMARK FOR ts AS ts)").unwrap();
        assert_eq!(out, "CREATE TABLE t (                      )");
    }

    #[test]
    fn other_text_is_left_alone() {
        let text = "SELECT watermark FROM t WHERE 'WATERMARK FOR x AS x' <> ''";
        let (out, found) = extract(text).unwrap();
        assert_eq!(out, text);
        assert!(found.is_empty());
    }

    #[test]
    fn bad_clauses_are_errors_at_their_place() {
        let err = |text: &str| extract(text).unwrap_err();
        let e = err("CREATE TABLE t (ts TIMESTAMP, WATERMARK FOR ts AS ts + INTERVAL '1' SECOND)");
        assert_eq!(
            e.pos,
            Pos {
                line: 1,
                column: 31
            }
        );
        assert!(
            e.message
                .contains("a watermark is its column minus a delay"),
            "{e}"
        );
        let e = err("CREATE TABLE t (ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' MONTH)");
        assert!(e.message.contains("fixed length"), "{e}");
        let e =
            err("CREATE TABLE t (ts TIMESTAMP, WATERMARK FOR ts AS other - INTERVAL '1' SECOND)");
        assert!(e.message.contains("its column minus a delay"), "{e}");
        let e = err("SELECT * FROM t WHERE WATERMARK FOR x");
        assert!(e.message.contains("belongs in the column list"), "{e}");
        let e = err("CREATE TABLE t (ts TIMESTAMP, WATERMARK FOR ts)");
        assert_eq!(e.kind, SqlErrorKind::Syntax);
        let e = err("CREATE TABLE t (ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 'x' SECOND)");
        assert_eq!(e.pos.line, 1);
    }
}
