//! How each join and grouping of a bound script is computed, picked from
//! what the runner knows of the inputs: their sizes (files) and a sample of
//! their keys (a batch run over files; `kappa sql explain` with `--input`).
//!
//! Invariant: a choice changes where rows are computed, never which rows
//! come out (every strategy of [`crate::ops::join`] and of the grouping
//! gives the output of a shuffle), so a stream, which knows nothing of its
//! data and shuffles, gives the rows of the batch run that sampled.

use std::cell::RefCell;
use std::sync::Arc;

use super::Bound_;
use super::rel::{self, JoinStrategy, JoinType, Rel};
use crate::job::{DataContext, ParamSpec, Params, PlanError};
use crate::ops::skew::{self, HotKeys, SkewParams, StrategyParam};
use crate::schema::{ColumnType, Projection};

/// The parameters of a SQL job besides its query: the built-in `join`'s
/// strategy parameters, for every join and grouping of the script, except
/// `hot` (hot keys by hand belong to one join's key).
pub fn param_specs() -> impl Iterator<Item = ParamSpec> {
    skew::param_specs(true)
        .into_iter()
        .filter(|p| p.name != "hot")
}

/// The strategy parameters, checked.
pub fn parse(params: &Params) -> Result<SkewParams, PlanError> {
    SkewParams::parse(params, 1, true)
}

/// Picks each join's strategy and each grouping's hot keys. With
/// `strategy=auto` (the default), as the built-in `join` and `group-by` do:
/// an inner, left, semi or anti join whose right side reads inputs of at
/// most `broadcast_limit` bytes in all is broadcast; otherwise, when the
/// join's left key (a grouping's key) is columns of one input, unchanged,
/// hot keys found in a sample of that input are salted (two-phase for a
/// grouping); else it shuffles. `shuffle`, `broadcast` and `skew` ask for
/// that strategy wherever it applies (right and full joins always
/// shuffle). Each choice is told to `data` (the run's summary, `kappa sql
/// explain`).
pub(super) fn choose(b: &mut Bound_, skew: &SkewParams, data: &dyn DataContext) {
    // Joins are chosen in place; what a view reads does not change.
    let shared = b.shared.clone();
    let ctx = Context {
        skew,
        found: RefCell::new(Vec::new()),
        data,
        names: b.infos.iter().map(|i| i.name.clone()).collect(),
        projections: &b.projections,
        shared: &shared,
    };
    let mut choose = |rel: &mut Rel| match rel {
        Rel::Join { .. } => ctx.join(rel),
        Rel::Aggregate { .. } => ctx.grouping(rel),
        _ => {}
    };
    for r in b.shared.iter_mut() {
        rel::for_each_node(r, &mut choose);
    }
    for (_, r, _) in b.outputs.iter_mut() {
        rel::for_each_node(r, &mut choose);
    }
}

/// Hot keys of an input's typed columns, and why.
type Found = ((usize, Vec<(usize, ColumnType)>), (Arc<HotKeys>, String));

/// What the choices read.
struct Context<'a> {
    skew: &'a SkewParams,
    /// Hot keys found so far, by input and typed columns: a join and the
    /// grouping above it often share a key, and a sample reads the file.
    found: RefCell<Vec<Found>>,
    data: &'a dyn DataContext,
    names: Vec<String>,
    projections: &'a [Projection],
    shared: &'a [Rel],
}

impl Context<'_> {
    /// The names of the inputs `r` reads, joined by `+`.
    fn tables(&self, r: &Rel) -> String {
        let read = rel::inputs_of(r, self.shared);
        let names: Vec<&str> = read.iter().map(|&i| self.names[i].as_str()).collect();
        names.join("+")
    }

    fn join(&self, rel: &mut Rel) {
        let Rel::Join {
            left,
            right,
            kind,
            left_key,
            strategy,
            ..
        } = rel
        else {
            return;
        };
        let what = format!("sql join {} with {}", self.tables(left), self.tables(right));
        if let JoinStrategy::Interval(b) = strategy {
            self.data.decide(format!(
                "{what}: strategy interval (the condition bounds right.#{} - left.#{} to {}: \
                 only rows close in time are compared)",
                b.right_time,
                b.left_time,
                b.range()
            ));
            return;
        }
        let bytes: Option<u64> = rel::inputs_of(right, self.shared)
            .iter()
            .map(|&i| self.data.input_bytes(&self.names[i]))
            .sum();
        let limit = self.skew.broadcast_limit.unwrap_or(0);
        let salted = |before: String| match self.hot_keys(left, left_key) {
            Some((hot, why)) if !hot.keys.is_empty() => {
                (JoinStrategy::Skew(hot), format!("{before}{why}"))
            }
            Some((_, why)) => (JoinStrategy::Shuffle, format!("{before}{why}")),
            None => (
                JoinStrategy::Shuffle,
                format!("{before}the left key is not columns of one input read from files"),
            ),
        };
        let (chosen, why) = match (self.skew.strategy, *kind, bytes) {
            (_, JoinType::Right | JoinType::Full, _) => {
                (JoinStrategy::Shuffle, "right and full joins shuffle".into())
            }
            (StrategyParam::Shuffle, ..) => (JoinStrategy::Shuffle, "asked".into()),
            (StrategyParam::Broadcast, ..) => (JoinStrategy::Broadcast, "asked".into()),
            (StrategyParam::Skew, ..) => salted("asked: ".into()),
            _ if right.at_most_one_row() => (
                JoinStrategy::Broadcast,
                "auto: right side is at most one row".into(),
            ),
            (_, _, Some(n)) if n <= limit => (
                JoinStrategy::Broadcast,
                format!("auto: right side {n} bytes <= broadcast_limit {limit}"),
            ),
            (_, _, Some(n)) => salted(format!("auto: right side {n} bytes > {limit}; ")),
            (_, _, None) => (JoinStrategy::Shuffle, "auto: input sizes unknown".into()),
        };
        self.data
            .decide(format!("{what}: strategy {} ({why})", chosen.name()));
        *strategy = chosen;
    }

    fn grouping(&self, rel: &mut Rel) {
        let Rel::Aggregate {
            input,
            keys,
            hot,
            closes: None,
            ..
        } = rel
        else {
            // Windows that close are grouped by their own operator, which
            // does not split keys (batch runs shuffle them).
            return;
        };
        if matches!(
            self.skew.strategy,
            StrategyParam::Shuffle | StrategyParam::Broadcast
        ) {
            return;
        }
        let key: Vec<usize> = (0..*keys).collect();
        if let Some((found, why)) = self.hot_keys(input, &key) {
            let what = format!("sql group by of {}", self.tables(input));
            let skewed = !found.keys.is_empty();
            let name = if skewed { "skew" } else { "shuffle" };
            self.data.decide(format!("{what}: strategy {name} ({why})"));
            *hot = skewed.then_some(found);
        }
    }

    /// The hot keys among `rel`'s columns `key`, from a sample of the input
    /// they are columns of; `None` when they are not all columns of one
    /// input, unchanged, or the input cannot be sampled (not files).
    fn hot_keys(&self, rel: &Rel, key: &[usize]) -> Option<(Arc<HotKeys>, String)> {
        let origins: Vec<(usize, usize)> = key
            .iter()
            .map(|&k| rel::origin(rel, k, self.shared))
            .collect::<Option<_>>()?;
        let input = origins.first()?.0;
        if origins.iter().any(|&(i, _)| i != input) {
            return None;
        }
        let name = &self.names[input];
        self.data.input_bytes(name)?;
        let typed: Vec<(usize, ColumnType)> = origins
            .iter()
            .map(|&(_, c)| {
                let read = self.projections[input]
                    .columns
                    .iter()
                    .find(|(s, _)| *s == c);
                (c, read.map_or(ColumnType::Any, |&(_, t)| t))
            })
            .collect();
        let at = (input, typed);
        if let Some((_, known)) = self.found.borrow().iter().find(|(k, _)| *k == at) {
            return Some(known.clone());
        }
        let found = self.skew.hot_keys(self.data, name, &at.1);
        self.found.borrow_mut().push((at, found.clone()));
        Some(found)
    }
}
