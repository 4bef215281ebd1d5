//! `group-by`: SQL `GROUP BY` with aggregates.
//!
//! Input `input` (any columns). Params `key=COL[,COL...]`,
//! `agg=count,sum:COL,min:COL,max:COL,avg:COL,count_distinct:COL`.
//! Output `groups`: the key columns, then one column per aggregate
//! (`count`, `sum_COL`, `min_COL`, `max_COL`, `avg_COL`,
//! `count_distinct_COL`); key: the key columns. Nulls are ignored by every
//! aggregate but `count`, which counts rows; null key values form a group,
//! as in SQL. Hot keys (`strategy=auto|skew|shuffle`, `hot=`, `salts=`,
//! `sample_rate=`, `hot_threshold=`; see [`crate::ops::skew`]) are grouped
//! in two phases, with the same output.

use crate::ops::aggregate::{AggSpec, Aggregates, GroupAggregate, Split};
use crate::ops::skew::{self, Physical, SkewParams};
use crate::prelude::*;

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
            params: [
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
            ]
            .into_iter()
            .chain(skew::param_specs(false))
            .collect(),
            outputs: vec![OutputSpec {
                name: "groups",
                about: "key columns, then one column per aggregate",
            }],
        }
    }

    fn plan(
        &self,
        params: &Params,
        inputs: &Schemas,
        data: &dyn DataContext,
    ) -> Result<Plan, PlanError> {
        plan_group_by(params, inputs.get("input")?, "groups", Some(data))
    }
}

/// Plans a group-by over `schema` into an output named `output` (shared
/// with `count-by`, which has no strategy parameters: `data` is `None`).
pub(super) fn plan_group_by(
    params: &Params,
    schema: &InputSchema,
    output: &str,
    data: Option<&dyn DataContext>,
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
    let physical = match data {
        None => Physical::Shuffle,
        Some(data) => {
            let skew = SkewParams::parse(params, n_keys, false)?;
            if aggs.split() == Split::Never {
                data.decide(
                    "group-by: strategy shuffle (count_distinct on several columns)".into(),
                );
                Physical::Shuffle
            } else {
                let key_columns: Vec<usize> = columns.iter().map(|(c, _)| *c).collect();
                skew.plan_group(data, "group-by", "input", &key_columns)
            }
        }
    };
    columns.extend(value_columns.iter().copied());
    let mut names = keys.clone();
    names.extend(specs.iter().map(AggSpec::output_name));
    Ok(Plan::new(
        vec![Projection {
            input: schema.name.clone(),
            columns,
            late: None,
            rules: Vec::new(),
        }],
        vec![OutputSchema {
            name: output.into(),
            columns: names,
            key: (0..n_keys).collect(),
        }],
        GroupByFlow {
            output: output.to_string(),
            key: (0..n_keys).collect(),
            values: (n_keys..n_keys + value_columns.len()).collect(),
            aggs,
            physical,
        },
    ))
}

struct GroupByFlow {
    output: String,
    key: Vec<usize>,
    values: Vec<usize>,
    aggs: Aggregates,
    physical: Physical,
}

impl Dataflow for GroupByFlow {
    fn build<'s>(
        &self,
        mut inputs: Inputs<'s>,
        context: &BuildContext<'s>,
    ) -> Result<Outputs<'s>, BuildError> {
        let groups = inputs.take("input")?.group_aggregate_with(
            self.key.clone(),
            self.values.clone(),
            self.aggs.clone(),
            &self.physical,
            context.updates,
        );
        Ok(Outputs::new().with(&self.output, groups))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{rows, run_job};

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
    fn two_phase_hot_keys_give_the_one_phase_output() {
        let input =
            rows("a,1\na,\nb,2.5\na,3\n,4\nb,2.5\na,0.1\na,0.2\na,0.3\nb,1e300\nb,-1e300\nb,1");
        let aggs = "count,sum:v,min:v,max:v,avg:v,count_distinct:v";
        let one = run_job(
            &GroupBy,
            &[("key", "k"), ("agg", aggs), ("strategy", "shuffle")],
            &["k,v"],
            vec![input.clone()],
        );
        for hot in ["a", "a,b", "b,x"] {
            for salts in ["auto", "3", "16"] {
                let two = run_job(
                    &GroupBy,
                    &[
                        ("key", "k"),
                        ("agg", aggs),
                        ("strategy", "skew"),
                        ("hot", hot),
                        ("salts", salts),
                    ],
                    &["k,v"],
                    vec![input.clone()],
                );
                assert_eq!(two, one, "hot={hot} salts={salts}");
            }
        }
        // Float sums are exact, then rounded once.
        assert_eq!(one[0][1][2], Value::float(4.6));
        assert_eq!(one[0][2][2], Value::float(6.0));
    }

    #[test]
    fn bad_params_are_plan_errors() {
        let schema = InputSchema {
            name: "input".into(),
            columns: vec!["k".into()],
        };
        let plan = |p: &[(&str, &str)]| {
            crate::job::plan_job(
                &GroupBy,
                &Params::from_pairs(p),
                vec![schema.clone()],
                &NoData,
            )
            .err()
        };
        assert!(matches!(
            plan(&[("key", "x"), ("agg", "count")]),
            Some(PlanError::UnknownColumn(_))
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
