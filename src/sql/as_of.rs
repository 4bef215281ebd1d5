//! `JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON ...` (Flink's temporal
//! join): each left row joined with the version of its key's right row
//! that was valid at the left row's time. The versioned side is an input
//! whose `WATERMARK` names its time column (as Flink requires an event-time
//! attribute); the binder builds [`super::rel::Rel::AsOf`].
//!
//! The time is a column of the left side, never the wall clock (rule 1):
//! `PROCTIME()` and the like are refused, so the result is a function of
//! the two inputs.
//!
//! sqlparser parses the clause only for dialects whose other rules differ
//! from the generic one, so [`extract`] blanks it out of the text (see
//! `blank.rs`) and [`attach`] puts it back into the parsed tree as the
//! table's version. The tree then renders it (the normalized text, the
//! job's identity), after the table's alias, where [`extract`] accepts it
//! too.

use std::borrow::Cow;
use std::ops::ControlFlow;

use sqlparser::ast::{self, Spanned, VisitMut, VisitorMut};
use sqlparser::tokenizer::{Location, Token, TokenWithSpan};

use super::blank::{blanked, ident, is_word, span_bytes, tokens};
use super::error::{Pos, SqlError, SqlErrorKind};

/// One `FOR SYSTEM_TIME AS OF column` clause, read from the text.
#[derive(Clone, Debug)]
pub struct AsOfClause {
    /// The end of the token before it: the table's name or alias.
    after: Location,
    /// The left side's time column.
    time: ast::Expr,
    /// Where the clause starts.
    pos: Pos,
}

const USAGE: &str = "write JOIN versioned FOR SYSTEM_TIME AS OF l.ts AS v ON l.key = v.key, \
                     with l.ts a time column of the left side";

/// Functions and words that mean the wall clock.
const WALL_CLOCK: &[&str] = &[
    "proctime",
    "now",
    "current_timestamp",
    "current_date",
    "current_time",
    "localtimestamp",
    "localtime",
];

/// `text` with every `FOR SYSTEM_TIME AS OF column` blanked out, and the
/// clauses read.
pub fn extract(text: &str) -> Result<(Cow<'_, str>, Vec<AsOfClause>), SqlError> {
    let Some(tokens) = tokens(text) else {
        return Ok((Cow::Borrowed(text), Vec::new()));
    };
    let mut found = Vec::new();
    let mut blanks = Vec::new();
    for i in 0..tokens.len() {
        if !is_word(&tokens, i, "for") || !is_word(&tokens, i + 1, "system_time") {
            continue;
        }
        let pos = Pos::of(tokens[i].span);
        let usage = |why: &str| SqlError::new(SqlErrorKind::Syntax, pos, format!("{why}: {USAGE}"));
        if i == 0 || !is_word(&tokens, i + 2, "as") || !is_word(&tokens, i + 3, "of") {
            return Err(usage("FOR SYSTEM_TIME is followed by AS OF"));
        }
        let (time, end) = column(&tokens, i + 4, pos)?;
        blanks.push(
            span_bytes(text, tokens[i].span.start, tokens[end - 1].span.end)
                .ok_or_else(|| usage("FOR SYSTEM_TIME AS OF"))?,
        );
        found.push(AsOfClause {
            after: tokens[i - 1].span.end,
            time,
            pos,
        });
    }
    Ok((blanked(text, &blanks), found))
}

/// The column reference (`ts`, `o.ts`) starting at token `from`, and the
/// index after it; anything else is refused (an expression, a literal, the
/// wall clock).
fn column(tokens: &[TokenWithSpan], from: usize, pos: Pos) -> Result<(ast::Expr, usize), SqlError> {
    let mut parts = Vec::new();
    let mut j = from;
    while let Some(TokenWithSpan {
        token: Token::Word(w),
        span,
    }) = tokens.get(j)
    {
        parts.push(ident(w, *span));
        j += 1;
        if tokens.get(j).map(|t| &t.token) != Some(&Token::Period) {
            break;
        }
        j += 1;
    }
    let last = parts.last().map(|p| p.value.to_lowercase());
    if parts.len() == 1 && last.as_deref().is_some_and(|l| WALL_CLOCK.contains(&l)) {
        return Err(SqlError::new(
            SqlErrorKind::Unsupported,
            pos,
            format!(
                "FOR SYSTEM_TIME AS OF {}() is processing time, and kappa's answers never \
                 depend on the wall clock: {USAGE}",
                parts[0].value.to_uppercase()
            ),
        ));
    }
    let ends_here = matches!(
        tokens.get(j).map(|t| &t.token),
        None | Some(Token::Word(_) | Token::Comma | Token::RParen | Token::SemiColon | Token::EOF)
    );
    if parts.is_empty() || !ends_here || tokens[j - 1].token == Token::Period {
        return Err(SqlError::new(
            SqlErrorKind::Unsupported,
            pos,
            format!("FOR SYSTEM_TIME AS OF takes a column, not an expression: {USAGE}"),
        ));
    }
    let expr = match parts.len() {
        1 => ast::Expr::Identifier(parts.pop().expect("one part")),
        _ => ast::Expr::CompoundIdentifier(parts),
    };
    Ok((expr, j))
}

/// Puts each clause into the parsed statements as the version of the
/// table it follows (`TableFactor::Table::version`); a clause that follows
/// no table name or alias is an error.
pub fn attach(statements: &mut [ast::Statement], clauses: Vec<AsOfClause>) -> Result<(), SqlError> {
    struct Attach(Vec<Option<AsOfClause>>);
    impl VisitorMut for Attach {
        type Break = ();
        fn pre_visit_table_factor(&mut self, f: &mut ast::TableFactor) -> ControlFlow<()> {
            if let ast::TableFactor::Table {
                name,
                alias,
                version,
                ..
            } = f
            {
                let ends = [
                    Some(name.span().end),
                    alias.as_ref().map(|a| a.name.span.end),
                ];
                let clause = self
                    .0
                    .iter_mut()
                    .find(|c| c.as_ref().is_some_and(|c| ends.contains(&Some(c.after))));
                if let Some(c) = clause.and_then(Option::take) {
                    *version = Some(ast::TableVersion::ForSystemTimeAsOf(c.time));
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut visitor = Attach(clauses.into_iter().map(Some).collect());
    for s in statements.iter_mut() {
        let _ = s.visit(&mut visitor);
    }
    match visitor.0.into_iter().flatten().next() {
        Some(c) => Err(SqlError::new(
            SqlErrorKind::Invalid,
            c.pos,
            format!("FOR SYSTEM_TIME AS OF follows the versioned table's name: {USAGE}"),
        )),
        None => Ok(()),
    }
}

/// The time column of a table read `FOR SYSTEM_TIME AS OF` it, if it is.
pub fn version_time(f: &ast::TableFactor) -> Option<&ast::Expr> {
    match f {
        ast::TableFactor::Table {
            version: Some(ast::TableVersion::ForSystemTimeAsOf(e)),
            ..
        } => Some(e),
        _ => None,
    }
}

/// The table without its `FOR SYSTEM_TIME AS OF`.
pub fn unversioned(f: &ast::TableFactor) -> ast::TableFactor {
    let mut f = f.clone();
    if let ast::TableFactor::Table { version, .. } = &mut f {
        *version = None;
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clause_is_blanked_in_place_and_read() {
        let text = "SELECT * FROM o JOIN r FOR SYSTEM_TIME AS OF o.ts AS v ON o.k = v.k";
        let (out, found) = extract(text).unwrap();
        assert_eq!(
            out,
            format!(
                "SELECT * FROM o JOIN r {} AS v ON o.k = v.k",
                " ".repeat(26)
            )
        );
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].time.to_string(), "o.ts");
        assert_eq!(
            found[0].pos,
            Pos {
                line: 1,
                column: 24
            }
        );
        assert_eq!(
            found[0].after,
            Location {
                line: 1,
                column: 23
            }
        );
        // After the alias, as sqlparser renders it; no alias; a quoted name.
        let (_, found) =
            extract("SELECT 1 FROM o JOIN r v for system_time as of ts ON true").unwrap();
        assert_eq!(found[0].time.to_string(), "ts");
        let (_, found) =
            extract("SELECT 1 FROM o JOIN r FOR SYSTEM_TIME AS OF \"O\".\"t s\"").unwrap();
        assert_eq!(found[0].time.to_string(), "\"O\".\"t s\"");
    }

    #[test]
    fn expressions_literals_and_the_wall_clock_are_refused() {
        let err = |t: &str| extract(t).unwrap_err();
        let e = err("SELECT 1 FROM o JOIN r FOR SYSTEM_TIME AS OF PROCTIME() ON true");
        assert!(e.message.contains("wall clock"), "{e}");
        assert_eq!(
            e.pos,
            Pos {
                line: 1,
                column: 24
            }
        );
        let e = err("SELECT 1 FROM o JOIN r FOR SYSTEM_TIME AS OF CURRENT_TIMESTAMP ON true");
        assert!(e.message.contains("wall clock"), "{e}");
        for text in [
            "SELECT 1 FROM o JOIN r FOR SYSTEM_TIME AS OF o.ts - INTERVAL '1' HOUR ON true",
            "SELECT 1 FROM o JOIN r FOR SYSTEM_TIME AS OF TIMESTAMP '2024-01-01' ON true",
            "SELECT 1 FROM o JOIN r FOR SYSTEM_TIME AS OF 5 ON true",
        ] {
            assert!(err(text).message.contains("takes a column"), "{text}");
        }
        let e = err("SELECT 1 FROM o JOIN r FOR SYSTEM_TIME o.ts ON true");
        assert!(e.message.contains("AS OF"), "{e}");
    }

    #[test]
    fn a_clause_attaches_to_the_table_it_follows() {
        let sql = |text: &str| {
            let (out, found) = extract(text).unwrap();
            let mut statements =
                sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::GenericDialect {}, &out)
                    .unwrap();
            attach(&mut statements, found).map(|()| statements)
        };
        let statements =
            sql("SELECT * FROM o JOIN r FOR SYSTEM_TIME AS OF o.ts AS v ON o.k = v.k").unwrap();
        let rendered = statements[0].to_string();
        assert_eq!(
            rendered,
            "SELECT * FROM o JOIN r AS v FOR SYSTEM_TIME AS OF o.ts ON o.k = v.k"
        );
        // The rendering reads back the same.
        assert_eq!(sql(&rendered).unwrap()[0].to_string(), rendered);
        let e = sql("SELECT * FROM (SELECT 1) FOR SYSTEM_TIME AS OF ts AS v").unwrap_err();
        assert!(e.message.contains("follows the versioned table"), "{e}");
    }
}
