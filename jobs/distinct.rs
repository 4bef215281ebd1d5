//! `distinct`: SQL `SELECT DISTINCT *`.
//!
//! Input `input` (any columns). Output `distinct`: the same columns, each
//! distinct row once; key: the whole row.

use crate::prelude::*;

pub struct Distinct;

impl Job for Distinct {
    fn spec(&self) -> JobSpec {
        JobSpec {
            name: "distinct",
            version: 1,
            about: "Each distinct row once (SELECT DISTINCT *)",
            inputs: vec![InputSpec {
                name: "input",
                columns: &[],
                format: None,
                about: "rows",
            }],
            params: vec![],
            outputs: vec![OutputSpec {
                name: "distinct",
                about: "the input's columns",
            }],
        }
    }

    fn plan(
        &self,
        _params: &Params,
        inputs: &Schemas,
        _data: &dyn DataContext,
    ) -> Result<Plan, PlanError> {
        let schema = inputs.get("input")?;
        Ok(Plan::new(
            vec![Projection::all(schema)],
            vec![OutputSchema {
                name: "distinct".into(),
                columns: schema.columns.clone(),
                key: (0..schema.columns.len()).collect(),
            }],
            DistinctFlow,
        ))
    }
}

struct DistinctFlow;

impl Dataflow for DistinctFlow {
    fn build<'s>(
        &self,
        mut inputs: Inputs<'s>,
        _context: &BuildContext<'s>,
    ) -> Result<Outputs<'s>, BuildError> {
        Ok(Outputs::from([(
            "distinct",
            inputs.take("input")?.distinct(),
        )]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{rows, run_job};

    #[test]
    fn keeps_each_row_once_nulls_included() {
        let out = run_job(
            &Distinct,
            &[],
            &["a,b"],
            vec![rows("1,x\n1,x\n,\n,\n2,x\n1,y")],
        );
        assert_eq!(out[0], rows(",\n1,x\n1,y\n2,x"));
    }
}
