//! `sessionize`: user-activity sessions, the MapReduce classic.
//!
//! Input `events` with columns `user` and `ts` (an integer time, e.g. epoch
//! seconds; other columns are ignored). Params `gap` (default 1800) and
//! `unit=s|ms` (default `s`, the unit of `ts`): a user's events belong to
//! one session while each follows the previous one by at most `gap`, a
//! duration (`30m`, `90s`) or a bare number of units. Output `sessions`:
//! `user,start,end,events` (first and last event time, number of events);
//! key: `user,start`. Events with a null `ts` cannot be placed in time: per
//! user they form one session with null `start` and `end` (as SQL groups
//! nulls), so they are counted, never dropped.

use crate::prelude::*;
use crate::time::{TimeUnit, parse_duration};

pub struct Sessionize;

impl Job for Sessionize {
    fn spec(&self) -> JobSpec {
        JobSpec {
            name: "sessionize",
            version: 1,
            about: "Split each user's events into sessions by an inactivity gap",
            inputs: vec![InputSpec {
                name: "events",
                columns: &[("user", ColumnType::Any), ("ts", ColumnType::Int)],
                format: None,
                about: "user activity events",
            }],
            params: vec![
                ParamSpec {
                    name: "gap",
                    default: Some("1800"),
                    help: "inactivity gap that ends a session: a duration (30m, 90s, 1h) or a number of `unit`s",
                },
                ParamSpec {
                    name: "unit",
                    default: Some("s"),
                    help: "unit of the ts column: s or ms",
                },
            ],
            outputs: vec![OutputSpec {
                name: "sessions",
                about: "user, start, end, events",
            }],
        }
    }

    fn plan(
        &self,
        params: &Params,
        inputs: &Schemas,
        _data: &dyn DataContext,
    ) -> Result<Plan, PlanError> {
        let unit = TimeUnit::parse(params.get("unit")).map_err(|e| params.bad("unit", e))?;
        let gap = parse_duration(params.get("gap"), unit).map_err(|e| params.bad("gap", e))?;
        let columns = ["user", "start", "end", "events"]
            .map(String::from)
            .to_vec();
        Ok(Plan::new(
            vec![inputs.project("events")?],
            vec![OutputSchema {
                name: "sessions".into(),
                columns,
                key: vec![0, 1],
            }],
            SessionFlow { gap },
        ))
    }
}

/// Sessions of one user from its event times (sorted, with multiplicities):
/// `(start, end, events)`.
fn sessions(times: &[(&Value, isize)], gap: i64) -> Vec<(Value, Value, i64)> {
    let mut out: Vec<(Value, Value, i64)> = Vec::new();
    for &(t, n) in times {
        match (out.last_mut(), t) {
            (Some((Value::Null, _, count)), Value::Null) => *count += n as i64,
            // A difference that overflows (i64::MIN and 0) is more than any gap.
            (Some((_, Value::Int(end), count)), Value::Int(t))
                if t.checked_sub(*end).is_some_and(|d| d <= gap) =>
            {
                *end = *t;
                *count += n as i64;
            }
            _ => out.push((t.clone(), t.clone(), n as i64)),
        }
    }
    out
}

struct SessionFlow {
    gap: i64,
}

impl Dataflow for SessionFlow {
    fn build<'s>(
        &self,
        mut inputs: Inputs<'s>,
        _context: &BuildContext<'s>,
    ) -> Result<Outputs<'s>, BuildError> {
        let gap = self.gap;
        let events = inputs.take("events")?;
        let out = events
            .map(|row| (row[0].clone(), row[1].clone()))
            .reduce(move |_user, times, out| {
                for (start, end, n) in sessions(times, gap) {
                    out.push((vec![start, end, Value::Int(n)], 1isize));
                }
            })
            .map(|(user, mut session)| {
                session.insert(0, user);
                session
            });
        Ok(Outputs::from([("sessions", out)]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{rows, run_job};

    #[test]
    fn splits_on_gaps_per_user() {
        let events = rows("u1,100,x\nu1,150,x\nu1,150,y\nu1,400,x\nu2,10,x\nu1,,x\nu1,,y");
        let out = run_job(
            &Sessionize,
            &[("gap", "100")],
            &["user,ts,page"],
            vec![events],
        );
        assert_eq!(
            out[0],
            rows("u1,,,2\nu1,100,150,3\nu1,400,400,1\nu2,10,10,1")
        );
    }

    #[test]
    fn gap_is_inclusive() {
        let times = [
            (&Value::Int(0), 1),
            (&Value::Int(10), 1),
            (&Value::Int(21), 1),
        ];
        assert_eq!(
            sessions(&times, 10),
            vec![
                (Value::Int(0), Value::Int(10), 2),
                (Value::Int(21), Value::Int(21), 1)
            ]
        );
    }
}
