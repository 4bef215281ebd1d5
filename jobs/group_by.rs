//! `group-by`: SQL `GROUP BY` with aggregates.
//!
//! Input `input` (any columns). Params `key=COL[,COL...]`,
//! `agg=count,sum:COL,min:COL,max:COL,avg:COL,count_distinct:COL`.
//! Output `groups`: the key columns, then one column per aggregate
//! (`count`, `sum_COL`, `min_COL`, `max_COL`, `avg_COL`,
//! `count_distinct_COL`); key: the key columns. Nulls are ignored by every
//! aggregate but `count`, which counts rows; null key values form a group,
//! as in SQL.

use super::kappa_job_prelude::*;
use crate::ops::aggregate::{AggSpec, Aggregates, GroupAggregate};

pub struct GroupBy;

impl Job for GroupBy {
    fn spec(&self) -> JobSpec {
        JobSpec {
            name: "group-by",
            version: 1,
            about: "Group rows by key columns and compute aggregates (SQL GROUP BY)",
            inputs: vec![InputSpec {
                name: "input",
                columns: &[],
                format: None,
                about: "rows to group",
            }],
            params: vec![
                ParamSpec {
                    name: "key",
                    default: None,
                    help: "grouping columns, COL[,COL...]",
                },
                ParamSpec {
                    name: "agg",
                    default: Some("count"),
                    help: "aggregates: count,sum:COL,min:COL,max:COL,avg:COL,count_distinct:COL",
                },
            ],
            outputs: vec![OutputSpec {
                name: "groups",
                about: "key columns, then one column per aggregate",
            }],
        }
    }

    fn plan(&self, params: &Params, inputs: &[InputSchema]) -> Result<Plan, PlanError> {
        plan_group_by(params, &inputs[0], "groups")
    }
}

/// Plans a group-by over `schema` into an output named `output` (shared
/// with `count-by`).
pub(super) fn plan_group_by(
    params: &Params,
    schema: &InputSchema,
    output: &str,
) -> Result<Plan, PlanError> {
    let keys = params.list("key");
    if keys.is_empty() {
        return Err(PlanError::BadParam {
            name: "key".into(),
            value: params.get("key").into(),
            reason: "no column given".into(),
        });
    }
    let specs = AggSpec::parse_list(params.get("agg"))?;
    let (aggs, value_columns) = Aggregates::resolve(&specs, schema)?;
    let mut columns: Vec<(usize, ColumnType)> = keys
        .iter()
        .map(|k| Ok((schema.index(k)?, ColumnType::Any)))
        .collect::<Result<_, PlanError>>()?;
    let n_keys = columns.len();
    columns.extend(value_columns.iter().copied());
    let mut names = keys.clone();
    names.extend(specs.iter().map(AggSpec::output_name));
    Ok(Plan {
        inputs: vec![Projection {
            columns,
            late: None,
        }],
        outputs: vec![OutputSchema {
            name: output.into(),
            columns: names,
            key: (0..n_keys).collect(),
        }],
        dataflow: Arc::new(GroupByFlow {
            key: (0..n_keys).collect(),
            values: (n_keys..n_keys + value_columns.len()).collect(),
            aggs,
        }),
    })
}

struct GroupByFlow {
    key: Vec<usize>,
    values: Vec<usize>,
    aggs: Aggregates,
}

impl Dataflow for GroupByFlow {
    fn build<'s>(&self, inputs: Vec<Rows<'s>>) -> Vec<Rows<'s>> {
        let input = inputs.into_iter().next().expect("group-by has one input");
        vec![input.group_aggregate(self.key.clone(), self.values.clone(), self.aggs.clone())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::testing::{rows, run_job};

    #[test]
    fn aggregates_per_key_with_sql_nulls() {
        let input = rows("a,1\na,\nb,2.5\na,3\n,4\nb,2.5");
        let out = run_job(
            &GroupBy,
            &[
                ("key", "k"),
                ("agg", "count,sum:v,min:v,max:v,avg:v,count_distinct:v"),
            ],
            &["k,v"],
            vec![input],
        );
        assert_eq!(
            out[0],
            rows(",1,4,4,4,4.0,1\na,3,4,1,3,2.0,2\nb,2,5.0,2.5,2.5,2.5,1")
        );
    }

    #[test]
    fn bad_params_are_plan_errors() {
        let schema = InputSchema {
            name: "input".into(),
            columns: vec!["k".into()],
        };
        let plan = |p: &[(&str, &str)]| {
            GroupBy
                .plan(&Params::from_pairs(p), std::slice::from_ref(&schema))
                .err()
        };
        assert!(matches!(
            plan(&[("key", "x"), ("agg", "count")]),
            Some(PlanError::UnknownColumn { .. })
        ));
        assert!(matches!(
            plan(&[("key", ""), ("agg", "count")]),
            Some(PlanError::BadParam { .. })
        ));
        assert!(matches!(
            plan(&[("key", "k"), ("agg", "median:k")]),
            Some(PlanError::BadParam { .. })
        ));
    }
}
