//! `top-k`: the `k` rows with the largest (or smallest) `by` per key, ranked.
//!
//! Input `input` (any columns). Params `key=COL[,...]` (empty: one global
//! ranking), `by=COL`, `k` (default 10), `order=desc|asc` (default desc).
//! Output `top`: the input's columns, then `rank` (1..k); key: the key
//! columns and `rank`. Like SQL `ROW_NUMBER() OVER (PARTITION BY key ORDER BY
//! by DESC)`, equal rows take consecutive ranks; ties on `by` are broken by
//! the whole row in ascending order, so ranks are deterministic. Rows whose
//! `by` is null rank last.

use crate::ops::aggregate::project;
use crate::prelude::*;

pub struct TopK;

impl Job for TopK {
    fn spec(&self) -> JobSpec {
        JobSpec {
            name: "top-k",
            version: 1,
            about: "The k top rows per key by a column, ranked",
            inputs: vec![InputSpec {
                name: "input",
                columns: &[],
                format: None,
                about: "rows to rank",
            }],
            params: vec![
                ParamSpec {
                    name: "key",
                    default: Some(""),
                    help: "partition columns, COL[,COL...] (empty: rank all rows)",
                },
                ParamSpec {
                    name: "by",
                    default: None,
                    help: "column to rank by",
                },
                ParamSpec {
                    name: "k",
                    default: Some("10"),
                    help: "rows kept per key",
                },
                ParamSpec {
                    name: "order",
                    default: Some("desc"),
                    help: "desc (largest first) or asc",
                },
            ],
            outputs: vec![OutputSpec {
                name: "top",
                about: "input columns, then rank",
            }],
        }
    }

    fn plan(
        &self,
        params: &Params,
        inputs: &Schemas,
        _data: &dyn DataContext,
    ) -> Result<Plan, PlanError> {
        let schema = inputs.get("input")?;
        let key: Vec<usize> = params
            .list("key")
            .iter()
            .map(|c| schema.index(c))
            .collect::<Result<_, _>>()?;
        let by = schema.index(params.get("by"))?;
        let k = usize::try_from(params.positive("k")?).unwrap_or(usize::MAX);
        let descending = match params.get("order") {
            "desc" => true,
            "asc" => false,
            other => {
                return Err(PlanError::BadParam {
                    name: "order".into(),
                    value: other.into(),
                    reason: "expected desc or asc".into(),
                });
            }
        };
        let mut columns = schema.columns.clone();
        columns.push("rank".into());
        let mut out_key = key.clone();
        out_key.push(schema.columns.len());
        Ok(Plan::new(
            vec![Projection::all(schema)],
            vec![OutputSchema {
                name: "top".into(),
                columns,
                key: out_key,
            }],
            TopKFlow {
                key,
                by,
                k,
                descending,
            },
        ))
    }
}

struct TopKFlow {
    key: Vec<usize>,
    by: usize,
    k: usize,
    descending: bool,
}

impl Dataflow for TopKFlow {
    fn build<'s>(
        &self,
        mut inputs: Inputs<'s>,
        _context: &BuildContext<'s>,
    ) -> Result<Outputs<'s>, BuildError> {
        let (key, by, k, descending) = (self.key.clone(), self.by, self.k, self.descending);
        let input = inputs.take("input")?;
        let top =
            input
                .map(move |row| (project(&row, &key), row))
                .reduce(move |_key, group, out| {
                    let mut ranked: Vec<(&Row, isize)> =
                        group.iter().map(|(r, n)| (*r, *n)).collect();
                    // Group rows arrive sorted ascending; a stable sort by `by` keeps
                    // that order among ties.
                    ranked.sort_by(|(a, _), (b, _)| {
                        let (x, y) = (&a[by], &b[by]);
                        x.is_null().cmp(&y.is_null()).then(if descending {
                            y.cmp(x)
                        } else {
                            x.cmp(y)
                        })
                    });
                    let copies = ranked
                        .iter()
                        .flat_map(|(row, n)| std::iter::repeat_n(*row, (*n).max(0) as usize));
                    for (rank, row) in copies.take(k).enumerate() {
                        let mut row = row.clone();
                        row.push(Value::Int(rank as i64 + 1));
                        out.push((row, 1isize));
                    }
                });
        Ok(Outputs::from([("top", top.map(|(_key, row)| row))]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{rows, run_job};

    #[test]
    fn ranks_per_key_with_deterministic_ties() {
        let input = rows("a,1,x\na,3,y\na,3,b\na,2,z\nb,5,q\nb,,n\na,,m");
        let out = run_job(
            &TopK,
            &[("key", "k"), ("by", "v"), ("k", "3")],
            &["k,v,t"],
            vec![input],
        );
        assert_eq!(out[0], rows("a,2,z,3\na,3,b,1\na,3,y,2\nb,,n,2\nb,5,q,1"));
    }

    #[test]
    fn ascending_global_ranking() {
        let out = run_job(
            &TopK,
            &[("by", "v"), ("k", "2"), ("order", "asc")],
            &["v"],
            vec![rows("3\n1\n2\n1")],
        );
        assert_eq!(out[0], rows("1,1\n1,2"));
    }
}
