//! `ad-clicks`: ad impressions joined with the clicks on the same ad within a
//! time bound after the impression — the stream-stream (interval) join.
//!
//! Inputs `impressions` and `clicks`, each with the key column (`key`,
//! default `ad_id`) and the event-time column (`time`, default `ts`: integers
//! in `unit`, or RFC 3339 text); other columns are carried. Param `within`
//! (default `10m`): a click matches an impression when
//! `impression.ts <= click.ts <= impression.ts + within`. Output
//! `attributed`: one row per matched pair — the impression's columns, then
//! the click's columns except the key, a name that clashes getting the
//! prefix `click_` (`ad_id,ts,user,click_ts,click_user`); a bag, so the key
//! is the whole row. A late impression or click adds exactly its pairs (with
//! `late=correct`), so the result does not depend on arrival order. See
//! [`crate::ops::interval_join`].

use crate::ops::aggregate::project;
use crate::ops::interval_join::{IntervalJoin, IntervalJoinSpec, integer_time};
use crate::prelude::*;
use crate::time::{TimeUnit, parse_duration};

pub struct AdClicks;

impl Job for AdClicks {
    fn spec(&self) -> JobSpec {
        JobSpec {
            name: "ad-clicks",
            version: 1,
            about: "Join ad impressions with the clicks that follow them within a time bound (interval join)",
            inputs: vec![
                InputSpec {
                    name: "impressions",
                    columns: &[],
                    format: None,
                    about: "ad impressions: key and event-time columns, and any others",
                },
                InputSpec {
                    name: "clicks",
                    columns: &[],
                    format: None,
                    about: "clicks: key and event-time columns, and any others",
                },
            ],
            params: vec![
                ParamSpec {
                    name: "key",
                    default: Some("ad_id"),
                    help: "the column both inputs are joined on",
                },
                ParamSpec {
                    name: "time",
                    default: Some("ts"),
                    help: "the event-time column of both inputs",
                },
                ParamSpec {
                    name: "unit",
                    default: Some("ms"),
                    help: "unit of the time columns: ms or s",
                },
                ParamSpec {
                    name: "within",
                    default: Some("10m"),
                    help: "a click matches an impression at most this long after it (e.g. 10m)",
                },
                LATE_PARAMS[0].clone(),
                LATE_PARAMS[1].clone(),
            ],
            outputs: vec![OutputSpec {
                name: "attributed",
                about: "impression columns, then the matching click's columns",
            }],
        }
    }

    fn plan(
        &self,
        params: &Params,
        inputs: &Schemas,
        _data: &dyn DataContext,
    ) -> Result<Plan, PlanError> {
        let bad = |name: &str, reason: String| params.bad(name, reason);
        let unit = TimeUnit::parse(params.get("unit")).map_err(|e| bad("unit", e))?;
        let within = parse_duration(params.get("within"), unit).map_err(|e| bad("within", e))?;
        let (key, time) = (params.get("key"), params.get("time"));
        // Every column of each input, the time column typed as a timestamp.
        let side = |schema: &InputSchema| -> Result<(Projection, usize, usize), PlanError> {
            let (k, t) = (schema.index(key)?, schema.index(time)?);
            let columns = (0..schema.columns.len())
                .map(|i| match i == t {
                    true => (i, ColumnType::Time(unit, crate::schema::Reach(within))),
                    false => (i, ColumnType::Any),
                })
                .collect();
            let late = params.late_rule(t, unit)?;
            let input = schema.name.clone();
            Ok((
                Projection {
                    input,
                    columns,
                    late,
                    rules: Vec::new(),
                },
                k,
                t,
            ))
        };
        let (impressions, clicks) = (inputs.get("impressions")?, inputs.get("clicks")?);
        let (left, lk, lt) = side(impressions)?;
        let (right, rk, rt) = side(clicks)?;
        let mut names = impressions.columns.clone();
        let mut keep = (0..names.len()).collect::<Vec<_>>();
        for (i, c) in clicks.columns.iter().enumerate() {
            if i == rk {
                continue;
            }
            keep.push(impressions.columns.len() + i);
            names.push(match names.contains(c) {
                true => format!("click_{c}"),
                false => c.clone(),
            });
        }
        let width = names.len();
        Ok(Plan::new(
            vec![left, right],
            vec![OutputSchema {
                name: "attributed".into(),
                columns: names,
                key: (0..width).collect(),
            }],
            AdClicksFlow {
                spec: IntervalJoinSpec {
                    left_key: vec![lk],
                    left_time: lt,
                    right_key: vec![rk],
                    right_time: rt,
                    lower: 0,
                    upper: within,
                    time: integer_time,
                },
                keep,
            },
        ))
    }
}

struct AdClicksFlow {
    spec: IntervalJoinSpec,
    /// Columns of the joined row (impression then click) that are output.
    keep: Vec<usize>,
}

impl Dataflow for AdClicksFlow {
    fn build<'s>(
        &self,
        mut inputs: Inputs<'s>,
        _context: &BuildContext<'s>,
    ) -> Result<Outputs<'s>, BuildError> {
        let (impressions, clicks) = (inputs.take("impressions")?, inputs.take("clicks")?);
        let keep = self.keep.clone();
        let attributed = impressions
            .interval_join(clicks, self.spec.clone())
            .map(move |row| project(&row, &keep));
        Ok(Outputs::from([("attributed", attributed)]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{rows, run_job};

    #[test]
    fn clicks_match_impressions_within_the_bound_inclusive() {
        let impressions = rows("a,100,u1\na,100,u1\nb,100,u2\na,500,u3\n,100,u4");
        let clicks = rows("a,100,x\na,110,y\na,111,z\nb,99,w\na,505,v\n,100,n");
        let out = run_job(
            &AdClicks,
            &[("within", "10")],
            &["ad_id,ts,user", "ad_id,ts,user"],
            vec![impressions, clicks],
        );
        assert_eq!(
            out[0],
            rows("a,100,u1,100,x\na,100,u1,100,x\na,100,u1,110,y\na,100,u1,110,y\na,500,u3,505,v")
        );
    }
}
