//! `enrich`: events enriched with the attributes of a table — the
//! stream-table join (page views joined with a `users` changelog).
//!
//! Inputs `events` and `table`, both with the key column (`key`, default
//! `user_id`); other columns are carried. Output `enriched`: the event's
//! columns, then the table row's columns except the key (a name that
//! clashes gets the prefix `table_`); a bag, so the key is the whole row.
//! Param `kind`: `inner` (default; events without a table row are left out)
//! or `left` (kept, with nulls).
//!
//! Two semantics, by param `as_of`:
//! - empty (the default): **current content**. Each event is joined with the
//!   table as it is now. Read from a compacted topic, the table is its
//!   latest row per key: a user's update changes the enriched rows of all
//!   that user's events, past ones included, and a tombstone removes them
//!   (or, with `kind=left`, nulls their attributes). This is what a
//!   materialized view of the join shows, and what a batch run over the
//!   table's final content gives.
//! - `as_of=EVENT_TIME:VALID_FROM`: **as of event time** (a temporal join).
//!   The table input is the history of versions, each with a `valid_from`
//!   time (read it from a plain, not compacted, topic so that every version
//!   stays); each event gets the version valid at its time, the latest with
//!   `valid_from <= event time`. A new version changes only the events at or
//!   after it. Both time columns are integers in `unit` or RFC 3339 text.
//!   See [`crate::ops::temporal_join`].

use crate::ops::interval_join::integer_time;
use crate::ops::join::{JoinColumns, JoinKind, RelationalJoin};
use crate::ops::temporal_join::{AsOfJoin, AsOfSpec};
use crate::prelude::*;
use crate::time::TimeUnit;

pub struct Enrich;

impl Job for Enrich {
    fn spec(&self) -> JobSpec {
        JobSpec {
            name: "enrich",
            version: 1,
            about: "Enrich events with a table's row for their key: current content, or as of event time",
            inputs: vec![
                InputSpec {
                    name: "events",
                    columns: &[],
                    format: None,
                    about: "events with the key column",
                },
                InputSpec {
                    name: "table",
                    columns: &[],
                    format: None,
                    about: "the table (a changelog), or its history of versions with as_of",
                },
            ],
            params: vec![
                ParamSpec {
                    name: "key",
                    default: Some("user_id"),
                    help: "the column events and table rows are matched on",
                },
                ParamSpec {
                    name: "kind",
                    default: Some("inner"),
                    help: "inner (drop events without a table row) or left (keep them, with nulls)",
                },
                ParamSpec {
                    name: "as_of",
                    default: Some(""),
                    help: "EVENT_TIME:VALID_FROM: join each event with the version valid at its time",
                },
                ParamSpec {
                    name: "unit",
                    default: Some("ms"),
                    help: "with as_of: unit of the time columns, ms or s",
                },
            ],
            outputs: vec![OutputSpec {
                name: "enriched",
                about: "event columns, then the table's columns except the key",
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
        let (events, table) = (inputs.get("events")?, inputs.get("table")?);
        let kind = match params.get("kind") {
            "inner" => JoinKind::Inner,
            "left" => JoinKind::Left,
            _ => return Err(bad("kind", "expected inner or left".into())),
        };
        let key = params.get("key");
        let (ek, tk) = (events.index(key)?, table.index(key)?);
        let rest: Vec<usize> = (0..table.columns.len()).filter(|&i| i != tk).collect();
        let mut names = events.columns.clone();
        for &i in &rest {
            let mut name = table.columns[i].clone();
            while names.contains(&name) {
                name = format!("table_{name}");
            }
            names.push(name);
        }
        let mut event_projection = Projection::all(events);
        let mut table_projection = Projection::all(table);
        let as_of = match params.get("as_of") {
            "" => None,
            text => {
                let (et, vf) = text.split_once(':').ok_or_else(|| {
                    bad(
                        "as_of",
                        "expected EVENT_TIME:VALID_FROM (two column names)".into(),
                    )
                })?;
                let unit = TimeUnit::parse(params.get("unit")).map_err(|e| bad("unit", e))?;
                let (et, vf) = (events.index(et)?, table.index(vf)?);
                event_projection.columns[et].1 = ColumnType::time(unit);
                table_projection.columns[vf].1 = ColumnType::time(unit);
                Some(AsOfSpec {
                    event_key: vec![ek],
                    event_time: et,
                    table_key: vec![tk],
                    valid_from: vf,
                    table_rest: rest.clone(),
                    left: kind == JoinKind::Left,
                    time: integer_time,
                })
            }
        };
        let width = names.len();
        Ok(Plan::new(
            vec![event_projection, table_projection],
            vec![OutputSchema {
                name: "enriched".into(),
                columns: names,
                key: (0..width).collect(),
            }],
            EnrichFlow {
                columns: JoinColumns {
                    left_key: vec![ek],
                    right_key: vec![tk],
                    right_rest: rest,
                },
                kind,
                as_of,
            },
        ))
    }
}

struct EnrichFlow {
    columns: JoinColumns,
    kind: JoinKind,
    as_of: Option<AsOfSpec>,
}

impl Dataflow for EnrichFlow {
    fn build<'s>(
        &self,
        mut inputs: Inputs<'s>,
        _context: &BuildContext<'s>,
    ) -> Result<Outputs<'s>, BuildError> {
        let (events, table) = (inputs.take("events")?, inputs.take("table")?);
        let enriched = match &self.as_of {
            None => events.relational_join(table, self.columns.clone(), self.kind),
            Some(spec) => events.as_of_join(table, spec.clone()),
        };
        Ok(Outputs::from([("enriched", enriched)]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{rows, run_job};

    #[test]
    fn current_content_inner_and_left() {
        let views = rows("u1,/a\nu2,/b\nu3,/c\nu1,/d");
        let users = rows("u1,fr\nu2,de");
        let run = |kind| {
            run_job(
                &Enrich,
                &[("kind", kind)],
                &["user_id,page", "user_id,country"],
                vec![views.clone(), users.clone()],
            )
            .remove(0)
        };
        assert_eq!(run("inner"), rows("u1,/a,fr\nu1,/d,fr\nu2,/b,de"));
        assert_eq!(run("left"), rows("u1,/a,fr\nu1,/d,fr\nu2,/b,de\nu3,/c,"));
    }

    #[test]
    fn as_of_picks_the_version_valid_at_event_time() {
        // Versions of u1: fr from 10, de from 20; u2: jp from 50.
        let users = rows("u1,10,fr\nu1,20,de\nu2,50,jp");
        let views = rows(
            "u1,5,/a\nu1,10,/b\nu1,19,/c\nu1,20,/d\nu1,99,/e\nu2,49,/f\nu2,50,/g\nu2,50,/g\nu3,1,/h",
        );
        let run = |kind| {
            run_job(
                &Enrich,
                &[("kind", kind), ("as_of", "ts:valid_from")],
                &["user_id,ts,page", "user_id,valid_from,country"],
                vec![views.clone(), users.clone()],
            )
            .remove(0)
        };
        assert_eq!(
            run("inner"),
            rows(
                "u1,10,/b,10,fr\nu1,19,/c,10,fr\nu1,20,/d,20,de\nu1,99,/e,20,de\nu2,50,/g,50,jp\nu2,50,/g,50,jp"
            )
        );
        assert_eq!(
            run("left"),
            rows(
                "u1,5,/a,,\nu1,10,/b,10,fr\nu1,19,/c,10,fr\nu1,20,/d,20,de\nu1,99,/e,20,de\nu2,49,/f,,\nu2,50,/g,50,jp\nu2,50,/g,50,jp\nu3,1,/h,,"
            )
        );
    }
}
