//! `card-risk-rows`: [`crate::CardRisk`] written on kappa's dynamic rows
//! instead of the crate's structs — the same output (the tests check it),
//! and the baseline the typed job's speed is measured against
//! (`benches/typed/run.sh`). A row without a card counts under a null card
//! here; the typed job, whose `card` is not an `Option`, refuses it.

use kappa::prelude::*;

/// The job.
pub struct CardRiskRows;

impl Job for CardRiskRows {
    fn spec(&self) -> JobSpec {
        JobSpec {
            name: "card-risk-rows",
            version: 1,
            about: "card-risk, written on rows instead of structs",
            inputs: vec![
                InputSpec {
                    name: "payments",
                    columns: &[
                        ("card", ColumnType::Str),
                        ("merchant", ColumnType::Str),
                        ("amount", ColumnType::Int),
                    ],
                    format: None,
                    about: "payments: card, merchant, amount (cents)",
                },
                InputSpec {
                    name: "blocked",
                    columns: &[("merchant", ColumnType::Str)],
                    format: None,
                    about: "the block list of merchants",
                },
            ],
            params: vec![ParamSpec {
                name: "min_amount",
                default: Some("0"),
                help: "ignore payments below this amount (cents)",
            }],
            outputs: vec![OutputSpec {
                name: "risk",
                about: "card, payments, total, blocked",
            }],
        }
    }

    fn plan(
        &self,
        params: &Params,
        inputs: &Schemas,
        _: &dyn DataContext,
    ) -> Result<Plan, PlanError> {
        let output = OutputSchema {
            name: "risk".into(),
            columns: ["card", "payments", "total", "blocked"]
                .map(String::from)
                .to_vec(),
            key: vec![0],
        };
        let flow = RiskFlow {
            min_amount: params.parse("min_amount")?,
        };
        Ok(Plan::new(
            vec![inputs.project("payments")?, inputs.project("blocked")?],
            vec![output],
            flow,
        ))
    }
}

struct RiskFlow {
    min_amount: i64,
}

impl Dataflow for RiskFlow {
    fn build<'s>(
        &self,
        mut inputs: Inputs<'s>,
        _: &BuildContext<'s>,
    ) -> Result<Outputs<'s>, BuildError> {
        let min = self.min_amount;
        // Rows are [card, merchant, amount] and [merchant], as declared.
        let payments = inputs.take("payments")?.flat_map(move |r| {
            let amount = r[2].as_i64().filter(|a| *a >= min)?;
            Some((r[1].clone(), (r[0].clone(), amount)))
        });
        let blocked = inputs
            .take("blocked")?
            .flat_map(|r| (!r[0].is_null()).then(|| r[0].clone()));
        // Each payment once as (amount, false); a blocked one also as (0, true).
        let flagged = payments
            .clone()
            .semijoin(blocked.distinct())
            .map(|(_, (card, _))| (card, (0, true)));
        let risk = payments
            .map(|(_, (card, amount))| (card, (amount, false)))
            .concat(flagged)
            .reduce(|_card, values, out| {
                let (mut payments, mut total, mut blocked) = (0i64, 0i64, 0i64);
                for ((amount, flag), n) in values {
                    let n = *n as i64;
                    match flag {
                        true => blocked += n,
                        false => (payments, total) = (payments + n, total + amount * n),
                    }
                }
                out.push(([payments, total, blocked].map(Value::Int).to_vec(), 1));
            })
            .map(|(card, mut row)| {
                row.insert(0, card);
                row
            });
        Ok(Outputs::from([("risk", risk)]))
    }
}
