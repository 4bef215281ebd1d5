//! A job's inputs and outputs by name: the schemas a planner sees
//! ([`Schemas`]), the collections a dataflow takes ([`Inputs`]) and the ones
//! it gives back ([`Outputs`]).
//!
//! Names are the ones the job's spec declares; a name the spec does not
//! declare, an input taken twice or an output missing or given twice is a
//! typed error ([`PlanError`], [`BuildError`]), never a panic.

use std::collections::BTreeMap;

use thiserror::Error;

use super::{InputSpec, JobSpec, PlanError, Rows, Time};
use crate::schema::{ColumnType, InputSchema, OutputSchema, Projection};
use crate::typed::Record;

/// A collection of records of type `T` in a dataflow scope.
pub type Typed<'s, T> = differential_dataflow::VecCollection<'s, Time, T>;

/// The columns each input of a job actually has, by input name, with what
/// the job declared about them.
#[derive(Clone, Debug)]
pub struct Schemas {
    job: String,
    inputs: Vec<(InputSpec, InputSchema)>,
    outputs: Vec<&'static str>,
}

impl Schemas {
    /// The schemas of `spec`'s inputs, given in spec order.
    pub fn new(spec: &JobSpec, schemas: Vec<InputSchema>) -> Schemas {
        Schemas {
            job: spec.name.to_string(),
            inputs: spec.inputs.iter().cloned().zip(schemas).collect(),
            outputs: spec.outputs.iter().map(|o| o.name).collect(),
        }
    }

    /// The schema of input `name`.
    pub fn get(&self, name: &str) -> Result<&InputSchema, PlanError> {
        self.entry(name).map(|(_, schema)| schema)
    }

    /// A projection of input `name` on the columns its spec declares, with
    /// the declared types, in declaration order.
    pub fn project(&self, name: &str) -> Result<Projection, PlanError> {
        self.project_with(name, &[])
    }

    /// As [`Schemas::project`], followed by `extra` columns (those that
    /// depend on parameters, such as a grouping key).
    pub fn project_with(
        &self,
        name: &str,
        extra: &[(&str, ColumnType)],
    ) -> Result<Projection, PlanError> {
        let (spec, schema) = self.entry(name)?;
        let columns: Vec<(&str, ColumnType)> = spec
            .columns
            .iter()
            .copied()
            .chain(extra.iter().copied())
            .collect();
        Ok(Projection::named(schema, &columns)?)
    }

    /// A projection of input `name` on the fields of the struct `T`, which
    /// the dataflow reads it as ([`Inputs::take_as`]): each field must be a
    /// column the input's spec declares, with the same type (as
    /// [`InputSpec::typed`] declares them), and the source checks each row
    /// against the fields (present unless an `Option`, integers in range).
    pub fn project_as<T: Record>(&self, name: &str) -> Result<Projection, PlanError> {
        let bug = |problem: String| PlanError::JobBug {
            job: self.job.clone(),
            problem,
        };
        let columns = T::columns().map_err(|e| bug(e.to_string()))?;
        let (spec, schema) = self.entry(name)?;
        for field in columns.declared {
            if !spec.columns.contains(field) {
                return Err(bug(format!(
                    "input {name} is read as {}, whose field {} ({}) the input does not declare \
                     (InputSpec::typed declares a struct's fields)",
                    std::any::type_name::<T>(),
                    field.0,
                    field.1
                )));
            }
        }
        let mut projection = Projection::named(schema, columns.declared)?;
        projection.rules = columns.rules.clone();
        Ok(projection)
    }

    /// The job these inputs belong to.
    pub fn job(&self) -> &str {
        &self.job
    }

    /// How many inputs the job has.
    pub fn len(&self) -> usize {
        self.inputs.len()
    }

    /// Whether the job has no inputs.
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty()
    }

    /// The inputs in spec order, with their declarations.
    pub fn iter(&self) -> impl Iterator<Item = (&InputSpec, &InputSchema)> {
        self.inputs.iter().map(|(s, i)| (s, i))
    }

    /// The names of the declared outputs.
    pub(super) fn outputs(&self) -> Vec<&'static str> {
        self.outputs.clone()
    }

    fn entry(&self, name: &str) -> Result<(&InputSpec, &InputSchema), PlanError> {
        self.iter()
            .find(|(spec, _)| spec.name == name)
            .ok_or_else(|| PlanError::UnknownInput {
                job: self.job.clone(),
                name: name.to_string(),
                known: self.names(),
            })
    }

    fn names(&self) -> String {
        let names: Vec<_> = self.inputs.iter().map(|(s, _)| s.name).collect();
        names.join(", ")
    }
}

/// The input collections of a dataflow, to be taken by name.
pub struct Inputs<'s> {
    slots: Vec<(String, Option<Rows<'s>>)>,
}

impl<'s> Inputs<'s> {
    /// Collections by input name (a runner makes them).
    pub(super) fn new(named: Vec<(String, Rows<'s>)>) -> Inputs<'s> {
        Inputs {
            slots: named.into_iter().map(|(n, r)| (n, Some(r))).collect(),
        }
    }

    /// The collection of input `name` as the struct `T` it was projected as
    /// ([`Schemas::project_as`]).
    pub fn take_as<T: Record>(&mut self, name: &str) -> Result<Typed<'s, T>, BuildError> {
        let rows = self.take(name)?;
        // Rows that reach the dataflow passed the projection's rules, so
        // they convert; one that does not is a bug in kappa, not in data.
        Ok(rows.map(|row| {
            crate::typed::from_row(&row)
                .unwrap_or_else(|e| unreachable!("a checked row does not convert: {e}: {row:?}"))
        }))
    }

    /// The collection of input `name`; each input can be taken once.
    pub fn take(&mut self, name: &str) -> Result<Rows<'s>, BuildError> {
        let Some(at) = self.slots.iter().position(|(n, _)| n == name) else {
            let names: Vec<_> = self.slots.iter().map(|(n, _)| n.as_str()).collect();
            return Err(BuildError::UnknownInput {
                name: name.to_string(),
                known: names.join(", "),
            });
        };
        self.slots[at]
            .1
            .take()
            .ok_or_else(|| BuildError::InputTakenTwice {
                name: name.to_string(),
            })
    }
}

/// The output collections of a dataflow, by output name.
#[derive(Default)]
pub struct Outputs<'s> {
    named: Vec<(String, Rows<'s>)>,
}

impl<'s> Outputs<'s> {
    /// No outputs yet.
    pub fn new() -> Outputs<'s> {
        Outputs { named: Vec::new() }
    }

    /// These outputs and `rows` as output `name`.
    pub fn with(mut self, name: &str, rows: Rows<'s>) -> Outputs<'s> {
        self.named.push((name.to_string(), rows));
        self
    }

    /// These outputs and the collection of structs `records` as output
    /// `name` (its schema made by [`crate::schema::OutputSchema::of`]).
    pub fn with_typed<T: Record>(self, name: &str, records: Typed<'s, T>) -> Outputs<'s> {
        // T is a record (the plan's OutputSchema::of checked it), and a
        // record's fields always serialize.
        let rows = records.map(|r| {
            crate::typed::to_row(&r)
                .unwrap_or_else(|e| unreachable!("a record does not serialize: {e}"))
        });
        self.with(name, rows)
    }

    /// The collections in the order of `declared`: each declared output
    /// given exactly once, nothing else.
    pub(super) fn in_order(self, declared: &[String]) -> Result<Vec<Rows<'s>>, BuildError> {
        let mut by_name = BTreeMap::new();
        for (name, rows) in self.named {
            if !declared.contains(&name) {
                return Err(BuildError::UnknownOutput {
                    name,
                    known: declared.join(", "),
                });
            }
            if by_name.insert(name.clone(), rows).is_some() {
                return Err(BuildError::OutputTwice { name });
            }
        }
        declared
            .iter()
            .map(|name| {
                by_name
                    .remove(name)
                    .ok_or_else(|| BuildError::MissingOutput { name: name.clone() })
            })
            .collect()
    }
}

impl<'s, const N: usize> From<[(&str, Rows<'s>); N]> for Outputs<'s> {
    fn from(named: [(&str, Rows<'s>); N]) -> Outputs<'s> {
        named
            .into_iter()
            .fold(Outputs::new(), |outputs, (name, rows)| {
                outputs.with(name, rows)
            })
    }
}

/// Why a job's dataflow could not be built: a bug in the job, reported as
/// an error by the runner.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BuildError {
    /// `take` of a name the job does not declare.
    #[error(
        "the dataflow takes input {name:?}, which the job does not declare (its inputs: {known})"
    )]
    UnknownInput {
        /// The name taken.
        name: String,
        /// The inputs there are.
        known: String,
    },
    /// `take` of the same input a second time.
    #[error("the dataflow takes input {name:?} twice")]
    InputTakenTwice {
        /// The input.
        name: String,
    },
    /// An output the job does not declare.
    #[error(
        "the dataflow gives output {name:?}, which the job does not declare (its outputs: {known})"
    )]
    UnknownOutput {
        /// The name given.
        name: String,
        /// The outputs there are.
        known: String,
    },
    /// The same output given twice.
    #[error("the dataflow gives output {name:?} twice")]
    OutputTwice {
        /// The output.
        name: String,
    },
    /// A declared output the dataflow did not give.
    #[error("the dataflow does not give its output {name:?}")]
    MissingOutput {
        /// The output.
        name: String,
    },
    /// Anything else a job cannot build.
    #[error("{0}")]
    Job(String),
}

// Declared here, beside `Outputs::with_typed`, so that the schema layer
// knows nothing of jobs or records.
impl OutputSchema {
    /// The schema of output `name` written from the struct `T`
    /// ([`crate::job::Outputs::with_typed`]): its fields are the columns,
    /// `key` names the key columns.
    pub fn of<T: Record>(name: &str, key: &[&str]) -> Result<OutputSchema, PlanError> {
        let bug = |problem: String| PlanError::JobBug {
            job: name.to_string(),
            problem,
        };
        let columns = T::columns().map_err(|e| bug(e.to_string()))?.names();
        let key = key
            .iter()
            .map(|k| {
                columns
                    .iter()
                    .position(|c| c == k)
                    .ok_or_else(|| bug(format!("output {name} has no key column {k:?}")))
            })
            .collect::<Result<_, _>>()?;
        Ok(OutputSchema {
            name: name.to_string(),
            columns,
            key,
        })
    }
}
