//! Parameter values: checked against a job's declared parameters, filled
//! with defaults, and read by planners as text, lists or parsed values.

use std::collections::BTreeMap;

use super::{JobSpec, PlanError};
use crate::schema::LateRule;
use crate::time::{TimeUnit, parse_duration};

/// Parameter values after validation: every declared parameter has a value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Params(BTreeMap<String, String>);

impl Params {
    /// Checks `given` against `spec`: unknown names and missing required
    /// parameters are errors; absent ones take their defaults.
    pub fn resolve(spec: &JobSpec, given: &[(String, String)]) -> Result<Params, PlanError> {
        let mut values = BTreeMap::new();
        for (k, v) in given {
            if !spec.params.iter().any(|p| p.name == k) {
                return Err(PlanError::UnknownParam {
                    job: spec.name.to_string(),
                    name: k.clone(),
                    known: spec
                        .params
                        .iter()
                        .map(|p| p.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
            if values.insert(k.clone(), v.clone()).is_some() {
                return Err(PlanError::BadParam {
                    name: k.clone(),
                    value: v.clone(),
                    reason: "given more than once".into(),
                });
            }
        }
        for p in &spec.params {
            if !values.contains_key(p.name) {
                match p.default {
                    Some(d) => {
                        values.insert(p.name.to_string(), d.to_string());
                    }
                    None => {
                        return Err(PlanError::MissingParam {
                            job: spec.name.to_string(),
                            name: p.name.to_string(),
                            help: p.help.to_string(),
                        });
                    }
                }
            }
        }
        Ok(Params(values))
    }

    /// Builds parameters directly (tests, and jobs that call other jobs).
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Params {
        Params(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    /// The value of a declared parameter.
    pub fn get(&self, name: &str) -> &str {
        self.0.get(name).map(String::as_str).unwrap_or("")
    }

    /// A comma-separated list, empty items removed.
    pub fn list(&self, name: &str) -> Vec<String> {
        self.get(name)
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    }

    /// A parameter parsed with `FromStr`, or a `BadParam` error.
    pub fn parse<T: std::str::FromStr>(&self, name: &str) -> Result<T, PlanError>
    where
        T::Err: std::fmt::Display,
    {
        let v = self.get(name);
        v.parse().map_err(|e: T::Err| PlanError::BadParam {
            name: name.into(),
            value: v.into(),
            reason: e.to_string(),
        })
    }

    /// A parameter that must be a positive integer (a count, a size).
    pub fn positive(&self, name: &str) -> Result<u64, PlanError> {
        match self.get(name).trim().parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(self.bad(name, "expected a positive integer")),
        }
    }

    /// The late-event rule the parameters of [`LATE_PARAMS`](super::LATE_PARAMS) ask for, for an
    /// event-time column at `column` (projected) in `unit`: `None` under the
    /// default policy `correct`.
    pub fn late_rule(&self, column: usize, unit: TimeUnit) -> Result<Option<LateRule>, PlanError> {
        let bad = |name: &str, reason: String| self.bad(name, reason);
        let lateness = parse_duration(self.get("allowed_lateness"), unit)
            .map_err(|e| bad("allowed_lateness", e))?;
        match self.get("late") {
            // A lateness without the drop policy would be silently ignored.
            "correct" if lateness != 0 => Err(bad(
                "allowed_lateness",
                "applies only with late=drop (--late drop); late=correct keeps every event".into(),
            )),
            "correct" => Ok(None),
            "drop" => Ok(Some(LateRule { column, lateness })),
            other => Err(bad(
                "late",
                format!("unknown policy {other:?} (correct or drop)"),
            )),
        }
    }

    /// A `BadParam` error for parameter `name`, with its value and `reason`.
    pub fn bad(&self, name: &str, reason: impl Into<String>) -> PlanError {
        PlanError::BadParam {
            name: name.into(),
            value: self.get(name).into(),
            reason: reason.into(),
        }
    }

    /// The parameters and their values, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        self.0.iter()
    }
}
