//! `card-risk`: per card, how many of its payments went to merchants on a
//! block list — the kind of job a payments team writes for itself, on its
//! own structs.
//!
//! Inputs `payments` (`card`, `merchant`, `amount` in cents; other columns
//! ignored) and `blocked` (`merchant`). Param `min_amount` (default 0):
//! smaller payments are ignored. Output `risk`: `card, payments, total,
//! blocked`; key `card`. A payment without an amount is ignored; a null
//! merchant is never blocked; a row without a card is a bad row.

use kappa::Text;
use kappa::prelude::*;
use serde::{Deserialize, Serialize};

pub mod rows;

/// A payment, as the `payments` input's rows are read.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Payment {
    pub card: Text,
    pub merchant: Option<Text>,
    pub amount: Option<i64>,
}

/// A merchant on the block list.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Blocked {
    pub merchant: Text,
}

/// A row of the output.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Risk {
    pub card: Text,
    pub payments: i64,
    pub total: i64,
    pub blocked: i64,
}

/// The job.
pub struct CardRisk;

impl Job for CardRisk {
    fn spec(&self) -> JobSpec {
        JobSpec {
            name: "card-risk",
            version: 1,
            about: "Payments per card, and how many went to blocked merchants",
            inputs: vec![
                InputSpec::typed::<Payment>("payments", "payments: card, merchant, amount (cents)"),
                InputSpec::typed::<Blocked>("blocked", "the block list of merchants"),
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
        let reads = vec![
            inputs.project_as::<Payment>("payments")?,
            inputs.project_as::<Blocked>("blocked")?,
        ];
        let output = OutputSchema::of::<Risk>("risk", &["card"])?;
        Ok(Plan::new(
            reads,
            vec![output],
            RiskFlow {
                min_amount: params.parse("min_amount")?,
            },
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
        let payments = inputs.take_as::<Payment>("payments")?.flat_map(move |p| {
            let amount = p.amount.filter(|a| *a >= min)?;
            Some((p.merchant, (p.card, amount)))
        });
        let blocked = inputs
            .take_as::<Blocked>("blocked")?
            .map(|b| Some(b.merchant))
            .distinct();
        // Each payment once as (amount, false); a blocked one also as (0, true).
        let flagged = payments
            .clone()
            .semijoin(blocked)
            .map(|(_, (card, _))| (card, (0, true)));
        let risk = payments
            .map(|(_, (card, amount))| (card, (amount, false)))
            .concat(flagged)
            .reduce(|_card, values, out| {
                let (mut payments, mut total, mut blocked) = (0, 0, 0);
                for ((amount, flag), n) in values {
                    let n = *n as i64;
                    match flag {
                        true => blocked += n,
                        false => (payments, total) = (payments + n, total + amount * n),
                    }
                }
                out.push(((payments, total, blocked), 1));
            })
            .map(|(card, (payments, total, blocked))| Risk {
                card,
                payments,
                total,
                blocked,
            });
        Ok(Outputs::new().with_typed("risk", risk))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kappa::testing::{JobTest, rows};

    #[test]
    fn counts_payments_to_blocked_merchants_per_card() {
        let payments =
            rows("c1,m1,500\nc1,m2,150\nc2,m2,900\nc2,m3,50\nc3,,300\nc1,m2,150\nc4,m2,");
        let out = JobTest::of(CardRisk)
            .param("min_amount", "100")
            .input("payments", "card,merchant,amount", payments)
            .input("blocked", "merchant", rows("m2\nm9\nm2"))
            .check();
        assert_eq!(out["risk"], rows("c1,3,800,2\nc2,1,900,1\nc3,1,300,0"));
    }

    #[test]
    fn the_job_on_rows_gives_the_same_output() {
        let payments = rows("c1,m1,500\nc1,m2,150\nc2,m2,900\n7,m3,50\nc3,,300\nc1,m2,150");
        let test = |job: JobTest| {
            job.input(
                "payments",
                "card,merchant,amount,extra",
                payments
                    .iter()
                    .map(|r| {
                        let mut r = r.clone();
                        r.push(Value::str("x"));
                        r
                    })
                    .collect(),
            )
            .input("blocked", "merchant", rows("m2\nm9"))
            .check()
        };
        assert_eq!(
            test(JobTest::of(CardRisk)),
            test(JobTest::of(rows::CardRiskRows))
        );
    }

    #[test]
    fn a_payment_without_a_card_is_refused() {
        let err = JobTest::of(CardRisk)
            .input("payments", "card,merchant,amount", rows(",m1,5"))
            .input("blocked", "merchant", rows("m2"))
            .run()
            .unwrap_err();
        assert!(
            err.contains("row 0") && err.contains("needs a value"),
            "{err}"
        );
    }
}
