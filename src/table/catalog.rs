//! What both stores' catalogs share: checking a new deployment before
//! anything is written, and turning a catalog row (its JSON columns and
//! state as text) back into a [`Deployment`], checked again, since a damaged
//! or edited catalog may hold anything.

use super::TableError;
use super::deployment::{Deployment, DeploymentState, NewDeployment, PartitionLag, Progress};
use super::ident;
use crate::schema::OutputSchema;

/// Checks names, keys and the requested state before anything is written.
pub(super) fn validate(d: &NewDeployment) -> Result<(), TableError> {
    let invalid = |reason: String| TableError::InvalidDeployment {
        job: d.job.clone(),
        reason,
    };
    if !matches!(d.state, DeploymentState::Building | DeploymentState::Live) {
        return Err(invalid(format!("cannot be created {}", d.state)));
    }
    validate_outputs(&d.job, &d.outputs)
}

/// The outputs' names, columns and keys are valid: at creation, and on
/// every read of a catalog row (whose text a damaged or edited file may
/// have changed), before any SQL is built from them.
pub(super) fn validate_outputs(job: &str, outputs: &[OutputSchema]) -> Result<(), TableError> {
    let invalid = |reason: String| TableError::InvalidDeployment {
        job: job.to_string(),
        reason,
    };
    if outputs.is_empty() {
        return Err(invalid("it has no outputs".into()));
    }
    if let Some(dup) = ident::first_duplicate(outputs.iter().map(|o| o.name.as_str())) {
        return Err(invalid(format!("output '{dup}' appears twice")));
    }
    for o in outputs {
        ident::check_output(&o.name)?;
        if o.columns.is_empty() {
            return Err(invalid(format!("output '{}' has no columns", o.name)));
        }
        for c in &o.columns {
            ident::check("column", c)?;
        }
        if let Some(dup) = ident::first_duplicate(o.columns.iter().map(String::as_str)) {
            return Err(invalid(format!(
                "output '{}' has column '{dup}' twice",
                o.name
            )));
        }
        let mut key = o.key.clone();
        key.sort_unstable();
        key.dedup();
        if key.len() != o.key.len() || key.last().is_some_and(|&k| k >= o.columns.len()) {
            return Err(invalid(format!("output '{}' has key {:?}", o.name, o.key)));
        }
    }
    Ok(())
}

pub(super) fn json<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).expect("catalog values serialise to JSON")
}

/// A catalog row before its JSON and state are parsed.
pub(super) struct RawDeployment {
    pub fixed: Deployment,
    pub params: String,
    pub inputs: String,
    pub outputs: String,
    pub state: String,
    pub lag: String,
    pub late: String,
}

impl RawDeployment {
    pub(super) fn parse(self) -> Result<Deployment, TableError> {
        let id = self.fixed.id;
        Ok(Deployment {
            params: from_json(id, "params", &self.params)?,
            inputs: from_json(id, "inputs", &self.inputs)?,
            outputs: checked_outputs(id, &self.fixed.job, &self.outputs)?,
            state: self.state.parse().map_err(|reason| TableError::Corrupt {
                what: format!("deployment {id}, state"),
                reason,
            })?,
            progress: Progress {
                lag: from_json::<Vec<PartitionLag>>(id, "lag", &self.lag)?,
                late_dropped: from_json(id, "late", &self.late)?,
                ..self.fixed.progress
            },
            ..self.fixed
        })
    }
}

fn checked_outputs(id: i64, job: &str, text: &str) -> Result<Vec<OutputSchema>, TableError> {
    let outputs: Vec<OutputSchema> = from_json(id, "outputs", text)?;
    validate_outputs(job, &outputs).map_err(|e| TableError::Corrupt {
        what: format!("deployment {id}, outputs"),
        reason: e.to_string(),
    })?;
    Ok(outputs)
}

fn from_json<T: serde::de::DeserializeOwned>(
    id: i64,
    field: &str,
    text: &str,
) -> Result<T, TableError> {
    serde_json::from_str(text).map_err(|e| TableError::Corrupt {
        what: format!("deployment {id}, {field}"),
        reason: e.to_string(),
    })
}
