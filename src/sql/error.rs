//! Errors in SQL text: every one names the line and column of the
//! construct it is about, so that a user can find it before any data is
//! read. The CLI prefixes the file's path and shows the line with a caret.

/// Where in the SQL text something is: 1-based line and column (0, 0
/// when the parser gave no position).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    /// The line, from 1.
    pub line: u64,
    /// The column, from 1.
    pub column: u64,
}

impl Pos {
    /// The start of a parser span.
    pub fn of(span: sqlparser::tokenizer::Span) -> Pos {
        Pos {
            line: span.start.line,
            column: span.start.column,
        }
    }

    /// Whether the parser knew where it was.
    pub fn is_known(self) -> bool {
        self.line > 0
    }
}

/// What kind of mistake a [`SqlError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SqlErrorKind {
    /// The text does not parse.
    Syntax,
    /// A table that is neither an input nor a view or CTE defined before.
    UnknownTable,
    /// A column that no table in scope has (or more than one has).
    UnknownColumn,
    /// Operands or arguments of the wrong type.
    Type,
    /// Valid SQL that kappa does not run (yet).
    Unsupported,
    /// A query that cannot mean anything (a column outside GROUP BY, two
    /// outputs with one name, ...).
    Invalid,
}

/// A mistake in SQL text, at a position in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlError {
    /// The kind of mistake.
    pub kind: SqlErrorKind,
    /// What is wrong, and the fix when there is one.
    pub message: String,
    /// Where.
    pub pos: Pos,
    /// The error as [`SqlError::render`] shows it, once the script's
    /// source and text are known ([`SqlError::located`]).
    pub rendered: Option<String>,
}

impl std::fmt::Display for SqlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.rendered {
            Some(r) => f.write_str(r),
            None => write!(f, "{}{}", location(self.pos), self.message),
        }
    }
}

impl std::error::Error for SqlError {}

fn location(pos: Pos) -> String {
    if pos.is_known() {
        format!("line {}, column {}: ", pos.line, pos.column)
    } else {
        String::new()
    }
}

impl SqlError {
    /// An error of `kind` at `pos`.
    pub fn new(kind: SqlErrorKind, pos: Pos, message: impl Into<String>) -> SqlError {
        SqlError {
            kind,
            message: message.into(),
            pos,
            rendered: None,
        }
    }

    /// The error, displayed from now on with its source and line
    /// ([`SqlError::render`]).
    pub fn located(mut self, source: &str, sql: &str) -> SqlError {
        if self.rendered.is_none() {
            self.rendered = Some(self.render(source, sql));
        }
        self
    }

    /// A construct kappa does not run, at `pos`.
    pub fn unsupported(pos: Pos, what: impl std::fmt::Display) -> SqlError {
        SqlError::new(
            SqlErrorKind::Unsupported,
            pos,
            format!("{what} is not supported (see the README's SQL section for what is)"),
        )
    }

    /// The parser's error, with its position taken out of its message.
    pub fn syntax(error: sqlparser::parser::ParserError) -> SqlError {
        let text = match error {
            sqlparser::parser::ParserError::TokenizerError(s)
            | sqlparser::parser::ParserError::ParserError(s) => s,
            sqlparser::parser::ParserError::RecursionLimitExceeded => {
                "the query is nested too deeply".to_string()
            }
        };
        let (message, pos) = split_position(&text);
        SqlError::new(SqlErrorKind::Syntax, pos, message)
    }

    /// The error as a compiler would print it: `SOURCE:LINE:COLUMN: message`,
    /// then the line of `sql` it is on with a caret under the column.
    pub fn render(&self, source: &str, sql: &str) -> String {
        if !self.pos.is_known() {
            return format!("{source}: {}", self.message);
        }
        let mut out = format!(
            "{source}:{}:{}: {}",
            self.pos.line, self.pos.column, self.message
        );
        if let Some(line) = sql.lines().nth(self.pos.line as usize - 1) {
            let caret: String = line
                .chars()
                .take(self.pos.column.saturating_sub(1) as usize)
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            out.push_str(&format!("\n  {line}\n  {caret}^"));
        }
        out
    }
}

/// Splits sqlparser's `... at Line: 3, Column: 7` into the message and the position.
fn split_position(text: &str) -> (String, Pos) {
    let Some(at) = text.rfind(" at Line: ") else {
        return (text.to_string(), Pos::default());
    };
    let rest = &text[at + " at Line: ".len()..];
    let mut parts = rest.splitn(2, ", Column: ");
    let line = parts.next().and_then(|l| l.trim().parse().ok());
    let column = parts.next().and_then(|c| {
        c.trim()
            .trim_end_matches(|ch: char| !ch.is_ascii_digit())
            .parse()
            .ok()
    });
    match (line, column) {
        (Some(line), Some(column)) => (text[..at].to_string(), Pos { line, column }),
        _ => (text.to_string(), Pos::default()),
    }
}

/// The candidate closest to `name` by edit distance, if one is close
/// enough to be a likely typo.
pub fn suggest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let name = name.to_lowercase();
    candidates
        .into_iter()
        .map(|c| (edit_distance(&name, &c.to_lowercase()), c))
        .filter(|(d, c)| {
            let longest = c.chars().count().max(name.chars().count());
            *d <= (longest / 3).max(1) && *d < longest
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// ", did you mean X?" or nothing.
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    match suggest(name, candidates) {
        Some(s) => format!(" (did you mean {s}?)"),
        None => String::new(),
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parser_positions_are_taken_out_of_the_message() {
        let (m, p) = split_position("Expected: an expression, found: FROM at Line: 2, Column: 8");
        assert_eq!(m, "Expected: an expression, found: FROM");
        assert_eq!(p, Pos { line: 2, column: 8 });
        assert_eq!(split_position("no position").1, Pos::default());
    }

    #[test]
    fn suggestions_are_close_names_only() {
        assert_eq!(suggest("amout", ["amount", "id"]), Some("amount"));
        assert_eq!(suggest("Amount", ["amount"]), Some("amount"));
        assert_eq!(suggest("zzz", ["amount", "id"]), None);
        assert_eq!(suggest("x", ["o", "c"]), None);
    }

    #[test]
    fn rendered_errors_point_at_the_column() {
        let e = SqlError::new(
            SqlErrorKind::UnknownColumn,
            Pos { line: 2, column: 8 },
            "unknown column x",
        );
        let text = "SELECT a\nFROM t WHERE x > 1";
        assert_eq!(
            e.render("q.sql", text),
            "q.sql:2:8: unknown column x\n  FROM t WHERE x > 1\n         ^"
        );
        assert_eq!(e.to_string(), "line 2, column 8: unknown column x");
    }
}
