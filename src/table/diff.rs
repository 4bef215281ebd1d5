//! What changed between two versions of an output: the review step of a
//! blue/green reprocess (`kappa table diff`, `reprocess --swap auto-if`).
//!
//! Rows are compared per key (the output's key columns), over the columns
//! both versions have: a reprocess that adds an aggregate is compared on
//! the columns it kept, and the diff lists the added and removed columns.
//! Versions keyed differently cannot be compared. A key only in the
//! new version is *added*, one only in the old version *removed*, one in
//! both whose rows differ *changed*. For a bag (the key is every column) a
//! row is its own key, so a changed multiplicity counts as *changed*.
//! Percentages are of the old version's keys, the table readers see today.
//!
//! The diff reads both versions in full through [`TableStore::read_rows`],
//! so it works on any store, and holds both in memory; it compares what is
//! committed, so run it on a building version that has caught up.
//!
//! A [`SwapRule`] is the small language of `--swap auto-if`: conditions
//! such as `changed <= 1%` or `added <= 100`, joined by `and`.

use std::collections::BTreeMap;
use std::fmt;

use crate::value::Row;

use super::TableError;
use super::deployment::is_bag;
use crate::schema::OutputSchema;

/// One key's rows with their multiplicities.
pub type Rows = Vec<(Row, isize)>;

/// What differs for one key.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// The key is only in the new version: its rows there.
    Added(Rows),
    /// The key is only in the old version: its rows there.
    Removed(Rows),
    /// The key is in both with other rows (or another multiplicity).
    Changed {
        /// Its rows in the old version.
        from: Rows,
        /// Its rows in the new version.
        to: Rows,
    },
}

/// How many keys differ, and how.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiffCounts {
    /// Keys in the old version.
    pub from_keys: u64,
    /// Keys in the new version.
    pub to_keys: u64,
    /// Keys only in the new version.
    pub added: u64,
    /// Keys only in the old version.
    pub removed: u64,
    /// Keys in both, with different rows.
    pub changed: u64,
    /// Keys in both, with the same rows.
    pub unchanged: u64,
}

impl DiffCounts {
    /// Added, removed and changed keys together.
    pub fn different(&self) -> u64 {
        self.added + self.removed + self.changed
    }

    /// `n` as a percentage of the old version's keys (infinite when the
    /// old version is empty and `n` is not 0).
    pub fn percent(&self, n: u64) -> f64 {
        match (n, self.from_keys) {
            (0, _) => 0.0,
            (_, 0) => f64::INFINITY,
            (n, of) => n as f64 * 100.0 / of as f64,
        }
    }

    fn metric(&self, m: Metric) -> u64 {
        match m {
            Metric::Added => self.added,
            Metric::Removed => self.removed,
            Metric::Changed => self.changed,
            Metric::Different => self.different(),
        }
    }
}

/// The difference between two versions of one output.
#[derive(Clone, Debug, PartialEq)]
pub struct TableDiff {
    /// The columns both versions have, which the rows are compared on.
    pub columns: Vec<String>,
    /// The positions of the key columns among them.
    pub key: Vec<usize>,
    /// Columns only the new version has (an aggregate a reprocess added).
    pub added_columns: Vec<String>,
    /// Columns only the old version has.
    pub removed_columns: Vec<String>,
    /// Whether the key is every column (rows carry a multiplicity).
    pub bag: bool,
    /// The counts over all keys.
    pub counts: DiffCounts,
    /// The first `limit` changes of each kind, in key order.
    pub examples: Vec<Change>,
}

/// Compares `from` with `to` (each a version's rows with multiplicities) by
/// the key columns `key`, keeping the first `limit` examples of each kind.
pub fn diff_rows(from: Rows, to: Rows, key: &[usize], limit: usize) -> (DiffCounts, Vec<Change>) {
    let mut by_key: BTreeMap<Row, (Rows, Rows)> = BTreeMap::new();
    let key_of = |row: &Row| -> Row { key.iter().map(|&i| row[i].clone()).collect() };
    for (row, n) in from {
        by_key.entry(key_of(&row)).or_default().0.push((row, n));
    }
    for (row, n) in to {
        by_key.entry(key_of(&row)).or_default().1.push((row, n));
    }
    let mut counts = DiffCounts::default();
    let (mut added, mut removed, mut changed) = (Vec::new(), Vec::new(), Vec::new());
    for (_, (mut from, mut to)) in by_key {
        counts.from_keys += u64::from(!from.is_empty());
        counts.to_keys += u64::from(!to.is_empty());
        from.sort();
        to.sort();
        let (count, examples, change) = match (from.is_empty(), to.is_empty()) {
            (true, _) => (&mut counts.added, &mut added, Change::Added(to)),
            (_, true) => (&mut counts.removed, &mut removed, Change::Removed(from)),
            _ if from == to => {
                counts.unchanged += 1;
                continue;
            }
            _ => (
                &mut counts.changed,
                &mut changed,
                Change::Changed { from, to },
            ),
        };
        *count += 1;
        if examples.len() < limit {
            examples.push(change);
        }
    }
    (counts, [added, removed, changed].concat())
}

/// How two versions' columns line up: the diff compares the columns both
/// have, by name, keyed by the key both have.
#[derive(Clone, Debug, PartialEq)]
pub struct Shared {
    /// The columns in both versions, in the old version's order.
    pub columns: Vec<String>,
    /// Where each shared column is in the old version's rows.
    from: Vec<usize>,
    /// Where each shared column is in the new version's rows.
    to: Vec<usize>,
    /// The key's positions among the shared columns.
    pub key: Vec<usize>,
    /// Columns only the new version has.
    pub added: Vec<String>,
    /// Columns only the old version has.
    pub removed: Vec<String>,
}

impl Shared {
    /// `from`'s and `to`'s rows cut down to the shared columns (as they
    /// are when both versions have the same columns in the same order).
    pub fn project(&self, from: Rows, to: Rows) -> (Rows, Rows) {
        let cut = |rows: Rows, at: &[usize]| -> Rows {
            if at
                .iter()
                .copied()
                .eq(0..rows.first().map_or(0, |(r, _)| r.len()))
            {
                return rows;
            }
            rows.into_iter()
                .map(|(row, n)| (at.iter().map(|&i| row[i].clone()).collect(), n))
                .collect()
        };
        (cut(from, &self.from), cut(to, &self.to))
    }
}

/// How two versions of `output` compare: over the columns both have, when
/// both are keyed by the same columns (by name, in any order). Keys that
/// differ give `NotComparable`: a key's rows in one version have no
/// counterpart in the other. A bag (keyed by every column) that gained or
/// lost a column has another key, so it is not comparable either.
pub(super) fn comparable(
    output: &str,
    from: u32,
    to: u32,
    sa: &OutputSchema,
    sb: &OutputSchema,
) -> Result<Shared, TableError> {
    if key_names(sa) != key_names(sb) || is_bag(sa) != is_bag(sb) {
        return Err(TableError::NotComparable {
            output: output.to_string(),
            from,
            to,
            reason: format!(
                "{}v{from} is keyed by ({}), v{to} by ({}), so their rows do not pair up \
                 (v{from} has columns ({}), v{to} has ({}))",
                match (is_bag(sa), is_bag(sb)) {
                    (true, false) => format!("v{from} is a bag (keyed by every column): "),
                    (false, true) => format!("v{to} is a bag (keyed by every column): "),
                    _ => String::new(),
                },
                names(&sa.columns, &sa.key),
                names(&sb.columns, &sb.key),
                sa.columns.join(","),
                sb.columns.join(","),
            ),
        });
    }
    let in_b = |c: &String| sb.columns.iter().position(|b| b == c);
    let (mut shared, mut at_a, mut at_b) = (Vec::new(), Vec::new(), Vec::new());
    for (i, c) in sa.columns.iter().enumerate() {
        if let Some(j) = in_b(c) {
            shared.push(c.clone());
            at_a.push(i);
            at_b.push(j);
        }
    }
    let key = sa
        .key
        .iter()
        .map(|&k| {
            at_a.iter()
                .position(|&i| i == k)
                .expect("a key column is in both")
        })
        .collect();
    let only = |s: &OutputSchema, other: &OutputSchema| -> Vec<String> {
        s.columns
            .iter()
            .filter(|c| !other.columns.contains(c))
            .cloned()
            .collect()
    };
    Ok(Shared {
        columns: shared,
        from: at_a,
        to: at_b,
        key,
        added: only(sb, sa),
        removed: only(sa, sb),
    })
}

/// The names of `s`'s key columns, sorted: the key as a set.
fn key_names(s: &OutputSchema) -> Vec<&str> {
    let mut k: Vec<&str> = s.key.iter().map(|&i| s.columns[i].as_str()).collect();
    k.sort_unstable();
    k
}

fn names(columns: &[String], key: &[usize]) -> String {
    let names: Vec<&str> = key.iter().map(|&k| columns[k].as_str()).collect();
    names.join(",")
}

/// Which count a rule condition bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Metric {
    Added,
    Removed,
    Changed,
    Different,
}

impl Metric {
    const ALL: [(&'static str, Metric); 4] = [
        ("added", Metric::Added),
        ("removed", Metric::Removed),
        ("changed", Metric::Changed),
        ("different", Metric::Different),
    ];

    fn name(self) -> &'static str {
        Metric::ALL
            .iter()
            .find(|(_, m)| *m == self)
            .expect("listed")
            .0
    }
}

/// A bound: a count of keys, or a percentage of the old version's keys.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Bound {
    Count(u64),
    Percent(f64),
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Condition {
    metric: Metric,
    /// `<` when set, else `<=`.
    strict: bool,
    bound: Bound,
}

/// When a reprocessed version may be swapped in without a review: every
/// condition must hold for every output (`changed <= 1% and removed = 0`).
#[derive(Clone, Debug, PartialEq)]
pub struct SwapRule {
    text: String,
    conditions: Vec<Condition>,
}

impl SwapRule {
    /// Parses `METRIC OP BOUND [and ...]`: METRIC is `added`, `removed`,
    /// `changed` or `different` (the three together), OP is `<=`, `<` or
    /// `=`, BOUND a count of keys or a percentage (`1%`, `0.5%`) of the
    /// live version's keys.
    pub fn parse(text: &str) -> Result<SwapRule, String> {
        let mut conditions = Vec::new();
        for part in text.split(" and ") {
            conditions.push(parse_condition(part.trim()).map_err(|e| {
                format!("bad swap rule '{text}': {e} (e.g. 'changed <= 1%' or 'added <= 100 and removed = 0')")
            })?);
        }
        Ok(SwapRule {
            text: text.trim().to_string(),
            conditions,
        })
    }

    /// `Ok` when `counts` meet every condition, else the first one they break,
    /// with the figure (`changed 3.2% (32 of 1000 keys) is not <= 1%`).
    pub fn check(&self, counts: &DiffCounts) -> Result<(), String> {
        for c in &self.conditions {
            let n = counts.metric(c.metric);
            let (ok, figure) = match c.bound {
                Bound::Count(b) => (if c.strict { n < b } else { n <= b }, n.to_string()),
                Bound::Percent(b) => {
                    let p = counts.percent(n);
                    (
                        if c.strict { p < b } else { p <= b },
                        format!("{} ({n} of {} keys)", percent(p), counts.from_keys),
                    )
                }
            };
            if !ok {
                let op = if c.strict { "<" } else { "<=" };
                let bound = match c.bound {
                    Bound::Count(b) => b.to_string(),
                    Bound::Percent(b) => format!("{b}%"),
                };
                return Err(format!("{} {figure} is not {op} {bound}", c.metric.name()));
            }
        }
        Ok(())
    }
}

impl fmt::Display for SwapRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for SwapRule {
    type Err = String;
    fn from_str(s: &str) -> Result<SwapRule, String> {
        SwapRule::parse(s)
    }
}

fn parse_condition(part: &str) -> Result<Condition, String> {
    let at = part
        .find(['<', '='])
        .ok_or_else(|| format!("'{part}' has no '<=', '<' or '='"))?;
    let (name, rest) = (part[..at].trim(), &part[at..]);
    let metric = Metric::ALL
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, m)| *m)
        .ok_or_else(|| format!("unknown count '{name}' (added, removed, changed or different)"))?;
    let (strict, bound) = if let Some(b) = rest.strip_prefix("<=") {
        (false, b)
    } else if let Some(b) = rest.strip_prefix("==").or_else(|| rest.strip_prefix('=')) {
        // `= N` is `<= N` for a count that cannot go below 0 only when N is 0.
        let b = b.trim();
        if b != "0" && b != "0%" {
            return Err(format!(
                "'=' is only for 0 ('{name} = 0'); use '<=' for a bound"
            ));
        }
        (false, b)
    } else {
        (true, &rest[1..])
    };
    let bound = bound.trim();
    let bound = match bound.strip_suffix('%') {
        Some(p) => Bound::Percent(
            p.trim()
                .parse::<f64>()
                .ok()
                .filter(|p| p.is_finite() && *p >= 0.0)
                .ok_or_else(|| format!("'{bound}' is not a percentage"))?,
        ),
        None => Bound::Count(
            bound
                .parse()
                .map_err(|_| format!("'{bound}' is not a count of keys"))?,
        ),
    };
    Ok(Condition {
        metric,
        strict,
        bound,
    })
}

/// `3.2%`, `0%`, `0.01%`, or `new` where the old version was empty.
pub fn percent(p: f64) -> String {
    if p.is_infinite() {
        "new".into()
    } else if p == 0.0 || p >= 10.0 {
        format!("{p:.0}%")
    } else if p >= 0.1 {
        format!("{p:.1}%")
    } else {
        format!("{p:.2}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;

    fn row(k: &str, v: i64) -> Row {
        vec![Value::str(k), Value::Int(v)]
    }

    #[test]
    fn keyed_rows_are_added_removed_changed_or_unchanged() {
        let from = vec![(row("a", 1), 1), (row("b", 2), 1), (row("c", 3), 1)];
        let to = vec![(row("a", 1), 1), (row("b", 5), 1), (row("d", 4), 1)];
        let (counts, examples) = diff_rows(from, to, &[0], 10);
        assert_eq!(
            counts,
            DiffCounts {
                from_keys: 3,
                to_keys: 3,
                added: 1,
                removed: 1,
                changed: 1,
                unchanged: 1
            }
        );
        assert_eq!(
            examples,
            vec![
                Change::Added(vec![(row("d", 4), 1)]),
                Change::Removed(vec![(row("c", 3), 1)]),
                Change::Changed {
                    from: vec![(row("b", 2), 1)],
                    to: vec![(row("b", 5), 1)]
                },
            ]
        );
    }

    #[test]
    fn a_bag_row_with_another_multiplicity_is_changed() {
        let from = vec![(row("a", 1), 2), (row("b", 1), 1)];
        let to = vec![(row("a", 1), 3), (row("b", 1), 1)];
        let (counts, _) = diff_rows(from, to, &[0, 1], 10);
        assert_eq!((counts.changed, counts.unchanged), (1, 1));
    }

    #[test]
    fn examples_stop_at_the_limit_but_counts_do_not() {
        let to: Rows = (0..50).map(|i| (row(&format!("k{i:02}"), i), 1)).collect();
        let (counts, examples) = diff_rows(Vec::new(), to, &[0], 3);
        assert_eq!(counts.added, 50);
        assert_eq!(examples.len(), 3);
        assert_eq!(examples[0], Change::Added(vec![(row("k00", 0), 1)]));
        assert_eq!(counts.percent(50), f64::INFINITY);
    }

    fn schema(columns: &[&str], key: &[usize]) -> OutputSchema {
        OutputSchema {
            name: "o".into(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            key: key.to_vec(),
        }
    }

    #[test]
    fn versions_compare_on_the_columns_both_have_by_the_same_key() {
        let old = schema(&["k", "n", "gone"], &[0]);
        let new = schema(&["top", "n", "k"], &[2]);
        let shared = comparable("o", 1, 2, &old, &new).unwrap();
        assert_eq!(shared.columns, ["k", "n"]);
        assert_eq!(shared.key, [0]);
        assert_eq!(
            (shared.added.as_slice(), shared.removed.as_slice()),
            (&["top".to_string()][..], &["gone".to_string()][..])
        );
        let from = vec![(vec![Value::str("a"), Value::Int(1), Value::Int(0)], 1)];
        let to = vec![(vec![Value::Int(9), Value::Int(1), Value::str("a")], 1)];
        let (from, to) = shared.project(from, to);
        assert_eq!(from, to);
        let (counts, _) = diff_rows(from, to, &shared.key, 10);
        assert_eq!(counts.unchanged, 1);

        let rekeyed = schema(&["k", "n"], &[0, 1]);
        let e = comparable("o", 1, 3, &old, &rekeyed)
            .unwrap_err()
            .to_string();
        assert!(e.contains("v1 is keyed by (k), v3 by (k,n)"), "{e}");
        // The same columns need no copy of the rows.
        let same = comparable("o", 1, 2, &old, &old).unwrap();
        let rows = vec![(vec![Value::Int(1), Value::Int(2), Value::Int(3)], 1)];
        assert_eq!(
            same.project(rows.clone(), rows.clone()),
            (rows.clone(), rows)
        );
    }

    #[test]
    fn rules_bound_counts_and_percentages() {
        let counts = DiffCounts {
            from_keys: 1000,
            to_keys: 1001,
            added: 1,
            removed: 0,
            changed: 32,
            unchanged: 968,
        };
        assert_eq!(
            SwapRule::parse("changed <= 5%").unwrap().check(&counts),
            Ok(())
        );
        assert_eq!(
            SwapRule::parse("changed <= 1%").unwrap().check(&counts),
            Err("changed 3.2% (32 of 1000 keys) is not <= 1%".into())
        );
        let rule = SwapRule::parse("added<=1 and removed = 0 and different < 34").unwrap();
        assert_eq!(rule.check(&counts), Ok(()));
        assert_eq!(
            SwapRule::parse("different < 33").unwrap().check(&counts),
            Err("different 33 is not < 33".into())
        );
        for bad in [
            "",
            "changed",
            "moved <= 1",
            "changed <= x",
            "changed = 5",
            "changed <= -1%",
        ] {
            assert!(SwapRule::parse(bad).is_err(), "{bad}");
        }
    }
}
