//! `count-by`: rows per key, shorthand for `group-by` with `agg=count`.
//!
//! Input `input` (any columns). Param `key=COL[,COL...]`. Output `counts`:
//! the key columns and `count`; key: the key columns.

use super::group_by::plan_group_by;
use crate::prelude::*;

pub struct CountBy;

impl Job for CountBy {
    fn spec(&self) -> JobSpec {
        JobSpec {
            name: "count-by",
            version: 1,
            about: "Count rows per key (group-by with agg=count)",
            inputs: vec![InputSpec {
                name: "input",
                columns: &[],
                format: None,
                about: "rows to count",
            }],
            params: vec![ParamSpec {
                name: "key",
                default: None,
                help: "grouping columns, COL[,COL...]",
            }],
            outputs: vec![OutputSpec {
                name: "counts",
                about: "key columns, count",
            }],
        }
    }

    fn plan(
        &self,
        params: &Params,
        inputs: &Schemas,
        _data: &dyn DataContext,
    ) -> Result<Plan, PlanError> {
        let params = Params::from_pairs(&[("key", params.get("key")), ("agg", "count")]);
        plan_group_by(&params, inputs.get("input")?, "counts", None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{rows, run_job};

    #[test]
    fn counts_rows_per_key() {
        let out = run_job(
            &CountBy,
            &[("key", "k")],
            &["k,v"],
            vec![rows("b,1\na,2\nb,3\nb,3")],
        );
        assert_eq!(out[0], rows("a,1\nb,3"));
    }
}
