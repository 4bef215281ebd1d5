//! `join`: SQL equi-join of `left` and `right`.
//!
//! Params `on=LEFTCOL=RIGHTCOL[,...]`, `kind=inner|left|semi|anti`, and the
//! strategy (`strategy=shuffle|broadcast|skew|auto`, `hot=`, `salts=`,
//! `sample_rate=`, `hot_threshold=`, `broadcast_limit=`; see
//! [`crate::ops::skew`]): `left` is the large side, `right` the small one.
//! Every strategy gives the same output.
//! Output `joined`: the left columns, then (for inner and left) the right
//! columns except the join keys; a right column whose name clashes with an
//! earlier one gets the prefix `right_`. Null keys never match. Rows may
//! repeat (a bag, as in SQL), so the output key is the whole row.

use crate::ops::join::{JoinColumns, JoinKind, Physical, RelationalJoin};
use crate::ops::skew::{self, SkewParams};
use crate::prelude::*;

pub struct Join;

impl Job for Join {
    fn spec(&self) -> JobSpec {
        JobSpec {
            name: "join",
            version: 1,
            about: "Equi-join two inputs (inner, left, semi or anti), SQL semantics",
            inputs: vec![
                InputSpec {
                    name: "left",
                    columns: &[],
                    format: None,
                    about: "left side",
                },
                InputSpec {
                    name: "right",
                    columns: &[],
                    format: None,
                    about: "right side",
                },
            ],
            params: [
                ParamSpec {
                    name: "on",
                    default: None,
                    help: "join columns, LEFTCOL=RIGHTCOL[,...] (or COL when both are named COL)",
                },
                ParamSpec {
                    name: "kind",
                    default: Some("inner"),
                    help: "inner, left, semi or anti",
                },
            ]
            .into_iter()
            .chain(skew::param_specs(true))
            .collect(),
            outputs: vec![OutputSpec {
                name: "joined",
                about: "left columns, then right columns except the join keys",
            }],
        }
    }

    fn plan(
        &self,
        params: &Params,
        inputs: &Schemas,
        data: &dyn DataContext,
    ) -> Result<Plan, PlanError> {
        let (left, right) = (inputs.get("left")?, inputs.get("right")?);
        let kind: JoinKind = params.parse("kind")?;
        let pairs = params.list("on");
        if pairs.is_empty() {
            return Err(PlanError::BadParam {
                name: "on".into(),
                value: params.get("on").into(),
                reason: "no columns given".into(),
            });
        }
        let (mut left_key, mut right_key) = (Vec::new(), Vec::new());
        for pair in &pairs {
            let (l, r) = pair.split_once('=').unwrap_or((pair, pair));
            left_key.push(left.index(l.trim())?);
            right_key.push(right.index(r.trim())?);
        }
        let skew = SkewParams::parse(params, left_key.len(), true)?;
        let physical = skew.plan_join(data, "join", "left", &left_key, "right");
        let keeps_right = matches!(kind, JoinKind::Inner | JoinKind::Left);
        let right_rest: Vec<usize> = if keeps_right {
            (0..right.columns.len())
                .filter(|i| !right_key.contains(i))
                .collect()
        } else {
            Vec::new()
        };
        let mut names = left.columns.clone();
        for &i in &right_rest {
            let mut name = right.columns[i].clone();
            while names.contains(&name) {
                name = format!("right_{name}");
            }
            names.push(name);
        }
        let width = names.len();
        Ok(Plan::new(
            vec![Projection::all(left), Projection::all(right)],
            vec![OutputSchema {
                name: "joined".into(),
                columns: names,
                key: (0..width).collect(),
            }],
            JoinFlow {
                columns: JoinColumns {
                    left_key,
                    right_key,
                    right_rest,
                },
                kind,
                physical,
            },
        ))
    }
}

struct JoinFlow {
    columns: JoinColumns,
    kind: JoinKind,
    physical: Physical,
}

impl Dataflow for JoinFlow {
    fn build<'s>(
        &self,
        mut inputs: Inputs<'s>,
        context: &BuildContext<'s>,
    ) -> Result<Outputs<'s>, BuildError> {
        let (left, right) = (inputs.take("left")?, inputs.take("right")?);
        let (columns, kind) = (self.columns.clone(), self.kind);
        let joined =
            left.relational_join_with(right, columns, kind, &self.physical, context.updates);
        Ok(Outputs::from([("joined", joined)]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{rows, run_job};

    fn join(kind: &str) -> Vec<Row> {
        join_with(kind, &[])
    }

    fn join_with(kind: &str, extra: &[(&str, &str)]) -> Vec<Row> {
        let left = rows("1,a\n2,b\n,c\n3,d\n1,e\n1,f\n1,a");
        let right = rows("1,x,p\n1,y,q\n2,z,r\n,n,s\n4,w,t");
        let mut params = vec![("on", "id=id"), ("kind", kind)];
        params.extend_from_slice(extra);
        run_job(&Join, &params, &["id,v", "id,v,w"], vec![left, right]).remove(0)
    }

    #[test]
    fn every_strategy_gives_the_shuffle_output() {
        for kind in ["inner", "left", "semi", "anti"] {
            let shuffle = join_with(kind, &[("strategy", "shuffle")]);
            for extra in [
                &[("strategy", "broadcast")][..],
                &[("strategy", "skew"), ("hot", "1")],
                &[("strategy", "skew"), ("hot", "1,2,3"), ("salts", "5")],
                &[("strategy", "skew")],
                &[("strategy", "auto"), ("hot", "1")],
            ] {
                assert_eq!(join_with(kind, extra), shuffle, "{kind} {extra:?}");
            }
        }
    }

    #[test]
    fn kinds_follow_sql() {
        assert_eq!(
            join("inner"),
            rows("1,a,x,p\n1,a,x,p\n1,a,y,q\n1,a,y,q\n1,e,x,p\n1,e,y,q\n1,f,x,p\n1,f,y,q\n2,b,z,r")
        );
        assert_eq!(
            join("left"),
            rows(
                ",c,,\n1,a,x,p\n1,a,x,p\n1,a,y,q\n1,a,y,q\n1,e,x,p\n1,e,y,q\n1,f,x,p\n1,f,y,q\n2,b,z,r\n3,d,,"
            )
        );
        assert_eq!(join("semi"), rows("1,a\n1,a\n1,e\n1,f\n2,b"));
        assert_eq!(join("anti"), rows(",c\n3,d"));
    }

    #[test]
    fn clashing_right_columns_get_a_prefix() {
        let schemas = vec![
            InputSchema {
                name: "left".into(),
                columns: vec!["id".into(), "v".into()],
            },
            InputSchema {
                name: "right".into(),
                columns: vec!["rid".into(), "v".into(), "id".into()],
            },
        ];
        let plan = crate::job::plan_job(
            &Join,
            &Params::from_pairs(&[("on", "id=rid"), ("kind", "inner")]),
            schemas.clone(),
            &NoData,
        )
        .unwrap();
        assert_eq!(plan.outputs[0].columns, ["id", "v", "right_v", "right_id"]);
        let bad = crate::job::plan_job(
            &Join,
            &Params::from_pairs(&[("on", "id=rid"), ("kind", "outer")]),
            schemas,
            &NoData,
        );
        assert!(matches!(bad, Err(PlanError::BadParam { .. })));
    }
}
