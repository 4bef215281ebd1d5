//! SQL identifiers: which output and column names the store accepts, how the
//! names of version tables are made, and how identifiers are quoted.
//!
//! Invariants:
//! - Every identifier that reaches SQL text was checked by [`check`] (or is
//!   built from checked parts by [`table_name`]) and is still quoted with
//!   [`quote`]; nothing from data is ever spliced into SQL text — values go
//!   through bound parameters only.
//! - A name is `[A-Za-z_][A-Za-z0-9_]*`, at most [`MAX_LEN`] characters, and
//!   does not start with `kappa_` or `sqlite_` (any case): `kappa_` is the
//!   store's own prefix (catalog tables, the hidden `kappa_n` column, the
//!   view's `kappa_count`), `sqlite_` is SQLite's.
//! - An output name does not end in `__v<digits>`, so a view name (`NAME`)
//!   can never equal a version table's name (`NAME__vN`), and a table name
//!   parses back to exactly one (output, version) pair.
//! - SQLite compares identifiers without regard to ASCII case, so names that
//!   differ only in case are the same object; [`same_name`] compares that way.

use super::TableError;

/// The longest accepted output or column name.
pub const MAX_LEN: usize = 64;

/// Reserved prefixes (compared without regard to case).
const RESERVED: [&str; 2] = ["kappa_", "sqlite_"];

/// Checks that `name` is an acceptable identifier; `kind` names what it is
/// for the error message ("output", "column").
pub fn check(kind: &'static str, name: &str) -> Result<(), TableError> {
    let invalid = |reason| TableError::InvalidName {
        kind,
        name: name.to_string(),
        reason,
    };
    let bytes = name.as_bytes();
    let Some(first) = bytes.first() else {
        return Err(invalid("it is empty"));
    };
    if name.len() > MAX_LEN {
        return Err(invalid("it is longer than 64 characters"));
    }
    if !(first.is_ascii_alphabetic() || *first == b'_') {
        return Err(invalid("it must start with an ASCII letter or '_'"));
    }
    if !bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || *b == b'_')
    {
        return Err(invalid("it may contain only ASCII letters, digits and '_'"));
    }
    let lower = name.to_ascii_lowercase();
    if RESERVED.iter().any(|p| lower.starts_with(p)) {
        return Err(invalid(
            "names starting with 'kappa_' or 'sqlite_' are reserved",
        ));
    }
    Ok(())
}

/// Checks an output name: an identifier that does not look like a version
/// table's name.
pub fn check_output(name: &str) -> Result<(), TableError> {
    check("output", name)?;
    if split_version(name).is_some() {
        return Err(TableError::InvalidName {
            kind: "output",
            name: name.to_string(),
            reason: "names ending in '__v' and digits are reserved for table versions",
        });
    }
    Ok(())
}

/// The table holding version `version` of output `output`: `output__vN`.
pub fn table_name(output: &str, version: u32) -> String {
    format!("{output}__v{version}")
}

/// Splits a version table's name into its output and version
/// (`pageviews__v2` → `("pageviews", 2)`); `None` if it is not one.
pub fn split_version(table: &str) -> Option<(&str, u32)> {
    let (output, digits) = table.rsplit_once("__v")?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !(digits.starts_with('0') && digits.len() > 1);
    if output.is_empty() || !canonical {
        return None;
    }
    Some((output, digits.parse().ok()?))
}

/// The identifier as a quoted SQL identifier. Checked names never contain a
/// `"`, but quoting doubles it anyway, so this is safe for any string.
pub fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Whether SQLite would take the two names for the same identifier.
pub fn same_name(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// The first name of `names` that repeats an earlier one (compared as
/// SQLite compares identifiers).
pub fn first_duplicate<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut seen = std::collections::HashSet::new();
    names
        .into_iter()
        .find(|n| !seen.insert(n.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(kind: &'static str, name: &str) -> &'static str {
        match check(kind, name) {
            Err(TableError::InvalidName { reason, .. }) => reason,
            other => panic!("{name:?} should be invalid, got {other:?}"),
        }
    }

    #[test]
    fn accepts_plain_identifiers() {
        for name in [
            "pageviews",
            "_x",
            "A1_b2",
            "Kappa",
            "kappa",
            &"a".repeat(64),
        ] {
            check("output", name).unwrap();
        }
    }

    #[test]
    fn rejects_malformed_names_saying_why() {
        assert!(reason("output", "").contains("empty"));
        assert!(reason("output", "1abc").contains("start with"));
        assert!(reason("output", "a-b").contains("only ASCII"));
        assert!(reason("output", "a b").contains("only ASCII"));
        assert!(reason("column", "x\"; DROP TABLE t; --").contains("only ASCII"));
        assert!(reason("column", "é").contains("start with"));
        assert!(reason("column", "kappa_n").contains("reserved"));
        assert!(reason("column", "KAPPA_count").contains("reserved"));
        assert!(reason("output", "sqlite_master").contains("reserved"));
        assert!(reason("output", &"a".repeat(65)).contains("longer"));
    }

    #[test]
    fn output_names_cannot_look_like_version_tables() {
        check_output("page__views").unwrap();
        check_output("page__v").unwrap();
        check_output("page__vx").unwrap();
        let err = check_output("page__v2").unwrap_err();
        assert!(
            err.to_string().contains("reserved for table versions"),
            "{err}"
        );
    }

    #[test]
    fn table_names_split_back() {
        assert_eq!(table_name("pageviews", 7), "pageviews__v7");
        assert_eq!(split_version("pageviews__v7"), Some(("pageviews", 7)));
        assert_eq!(split_version("a__b__v12"), Some(("a__b", 12)));
        assert_eq!(split_version("pageviews"), None);
        assert_eq!(split_version("pageviews__v"), None);
        assert_eq!(split_version("pageviews__v07"), None);
        assert_eq!(split_version("__v1"), None);
        assert_eq!(split_version("x__v99999999999"), None);
    }

    #[test]
    fn quoting_doubles_quotes() {
        assert_eq!(quote("abc"), "\"abc\"");
        assert_eq!(quote("a\"b"), "\"a\"\"b\"");
    }

    #[test]
    fn duplicates_ignore_case() {
        assert_eq!(first_duplicate(["a", "b", "A"]), Some("A"));
        assert_eq!(first_duplicate(["a", "b"]), None);
        assert!(same_name("PageViews", "pageviews"));
    }
}
