//! Clauses sqlparser does not parse (`WATERMARK FOR ...` in a `CREATE
//! TABLE`, `FOR SYSTEM_TIME AS OF ...` after a table) are read from the
//! tokens and blanked out of the text before parsing: every character of
//! the clause but line breaks becomes a space, so positions in the rest of
//! the text still point into what the user wrote.

use std::borrow::Cow;

use sqlparser::ast;
use sqlparser::dialect::GenericDialect;
use sqlparser::tokenizer::{Location, Span, Token, TokenWithSpan, Tokenizer, Word};

use super::bind::byte_offset;

/// The text's tokens without whitespace, or `None` when it does not
/// tokenize (the parser then reports the error with its position).
pub fn tokens(text: &str) -> Option<Vec<TokenWithSpan>> {
    let tokens = Tokenizer::new(&GenericDialect {}, text)
        .tokenize_with_location()
        .ok()?;
    Some(
        tokens
            .into_iter()
            .filter(|t| !matches!(t.token, Token::Whitespace(_)))
            .collect(),
    )
}

/// Whether token `i` is the (unquoted) word `w`.
pub fn is_word(tokens: &[TokenWithSpan], i: usize, w: &str) -> bool {
    matches!(tokens.get(i).map(|t| &t.token),
        Some(Token::Word(word)) if word.quote_style.is_none() && word.value.eq_ignore_ascii_case(w))
}

/// A word token as an identifier.
pub fn ident(w: &Word, span: Span) -> ast::Ident {
    ast::Ident {
        value: w.value.clone(),
        quote_style: w.quote_style,
        span,
    }
}

/// The byte range of a span of the text.
pub fn span_bytes(text: &str, from: Location, to: Location) -> Option<(usize, usize)> {
    let at = |l: Location| {
        if l.line == 0 {
            return None;
        }
        // The end of the text has no character of its own.
        byte_offset(text, l.line, l.column).or_else(|| {
            let lines = text.split_inclusive('\n').count() as u64;
            (l.line == lines.max(1)).then_some(text.len())
        })
    };
    match (at(from), at(to)) {
        (Some(a), Some(b)) if a <= b => Some((a, b)),
        _ => None,
    }
}

/// `text` with the bytes in the ranges `blank` made spaces (line breaks
/// kept, one space per character); borrowed when there is none.
pub fn blanked<'t>(text: &'t str, blank: &[(usize, usize)]) -> Cow<'t, str> {
    if blank.is_empty() {
        return Cow::Borrowed(text);
    }
    Cow::Owned(keep_only_outside(text, blank))
}

/// `text` with the bytes in the ranges `blank` made spaces.
fn keep_only_outside(text: &str, blank: &[(usize, usize)]) -> String {
    text.char_indices()
        .map(|(i, c)| {
            if c != '\n' && blank.iter().any(|&(a, b)| i >= a && i < b) {
                ' '
            } else {
                c
            }
        })
        .collect()
}
