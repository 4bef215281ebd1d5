//! `join`: SQL equi-join of `left` and `right`.
//!
//! Params `on=LEFTCOL=RIGHTCOL[,...]`, `kind=inner|left|semi|anti`.
//! Output `joined`: the left columns, then (for inner and left) the right
//! columns except the join keys; a right column whose name clashes with an
//! earlier one gets the prefix `right_`. Null keys never match. Rows may
//! repeat (a bag, as in SQL), so the output key is the whole row.

use super::kappa_job_prelude::*;
use crate::ops::join::{JoinColumns, JoinKind, RelationalJoin};

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
            params: vec![
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
            ],
            outputs: vec![OutputSpec {
                name: "joined",
                about: "left columns, then right columns except the join keys",
            }],
        }
    }

    fn plan(&self, params: &Params, inputs: &[InputSchema]) -> Result<Plan, PlanError> {
        let (left, right) = (&inputs[0], &inputs[1]);
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
        Ok(Plan {
            inputs: vec![Projection::all(left), Projection::all(right)],
            outputs: vec![OutputSchema {
                name: "joined".into(),
                columns: names,
                key: (0..width).collect(),
            }],
            dataflow: Arc::new(JoinFlow {
                columns: JoinColumns {
                    left_key,
                    right_key,
                    right_rest,
                },
                kind,
            }),
        })
    }
}

struct JoinFlow {
    columns: JoinColumns,
    kind: JoinKind,
}

impl Dataflow for JoinFlow {
    fn build<'s>(&self, inputs: Vec<Rows<'s>>) -> Vec<Rows<'s>> {
        let mut inputs = inputs.into_iter();
        let (left, right) = (inputs.next().expect("left"), inputs.next().expect("right"));
        vec![left.relational_join(right, self.columns.clone(), self.kind)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::testing::{rows, run_job};

    fn join(kind: &str) -> Vec<Row> {
        let left = rows("1,a\n2,b\n,c\n3,d\n1,e");
        let right = rows("1,x,p\n1,y,q\n2,z,r\n,n,s\n4,w,t");
        run_job(
            &Join,
            &[("on", "id=id"), ("kind", kind)],
            &["id,v", "id,v,w"],
            vec![left, right],
        )
        .remove(0)
    }

    #[test]
    fn kinds_follow_sql() {
        assert_eq!(
            join("inner"),
            rows("1,a,x,p\n1,a,y,q\n1,e,x,p\n1,e,y,q\n2,b,z,r")
        );
        assert_eq!(
            join("left"),
            rows(",c,,\n1,a,x,p\n1,a,y,q\n1,e,x,p\n1,e,y,q\n2,b,z,r\n3,d,,")
        );
        assert_eq!(join("semi"), rows("1,a\n1,e\n2,b"));
        assert_eq!(join("anti"), rows(",c\n3,d"));
    }

    #[test]
    fn clashing_right_columns_get_a_prefix() {
        let schemas = [
            InputSchema {
                name: "left".into(),
                columns: vec!["id".into(), "v".into()],
            },
            InputSchema {
                name: "right".into(),
                columns: vec!["rid".into(), "v".into(), "id".into()],
            },
        ];
        let plan = Join
            .plan(
                &Params::from_pairs(&[("on", "id=rid"), ("kind", "inner")]),
                &schemas,
            )
            .unwrap();
        assert_eq!(plan.outputs[0].columns, ["id", "v", "right_v", "right_id"]);
        let bad = Join.plan(
            &Params::from_pairs(&[("on", "id=rid"), ("kind", "outer")]),
            &schemas,
        );
        assert!(matches!(bad, Err(PlanError::BadParam { .. })));
    }
}
