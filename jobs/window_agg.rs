//! `window-agg`: aggregates per key over event-time windows.
//!
//! Input `input` (any columns). Params `time=COL` (the event time: integers
//! in `unit`, or RFC 3339 text converted to it), `unit=ms|s` (default `ms`),
//! `window=tumbling:SIZE|hopping:SIZE/HOP|sliding:SIZE|session:GAP`
//! (durations such as `90s`, `10m`, `1h`, `1d`, or a bare number of units),
//! `key=COL[,COL...]` (optional: no key means one group per window) and
//! `agg=...` as in `group-by`; `max_windows=N` (default 1000) bounds the
//! hopping windows one event falls into (`SIZE/HOP`), refused before any
//! data is read. An event time whose window bounds would not fit in an
//! `i64` is a bad row. Output `windows`: the key columns,
//! `window_start`, `window_end` (integers in `unit`), then one column per
//! aggregate; key: the key columns and the window bounds. The window kinds
//! are defined in [`crate::ops::window`]. With `late=correct` (the default)
//! a late event (older than others already seen) updates its windows: the
//! output is the same whatever order the events came in. With `late=drop`,
//! events older than their partition's watermark minus `allowed_lateness`
//! are dropped and counted (see [`crate::source::late`]).

use crate::job::BuildContext;
use crate::ops::aggregate::{AggSpec, Aggregates};
use crate::ops::closing_window::ClosingWindow;
use crate::ops::window::{WindowAggregate, WindowSpec};
use crate::prelude::*;
use crate::time::TimeUnit;

pub struct WindowAgg;

impl Job for WindowAgg {
    fn spec(&self) -> JobSpec {
        JobSpec {
            name: "window-agg",
            version: 1,
            about: "Aggregate per key over event-time windows (tumbling, hopping, sliding, session)",
            inputs: vec![InputSpec {
                name: "input",
                columns: &[],
                format: None,
                about: "events with an event-time column",
            }],
            params: vec![
                ParamSpec {
                    name: "time",
                    default: None,
                    help: "event-time column: integer epoch time in `unit`, or RFC 3339 text",
                },
                ParamSpec {
                    name: "unit",
                    default: Some("ms"),
                    help: "unit of the time column and of window_start/window_end: ms or s",
                },
                ParamSpec {
                    name: "window",
                    default: None,
                    help: "tumbling:SIZE, hopping:SIZE/HOP, sliding:SIZE or session:GAP (e.g. 10m, 30s, 1h)",
                },
                ParamSpec {
                    name: "key",
                    default: Some(""),
                    help: "grouping columns, COL[,COL...] (none: one group per window)",
                },
                ParamSpec {
                    name: "max_windows",
                    default: Some("1000"),
                    help: "most hopping windows one event may fall into (SIZE/HOP)",
                },
                ParamSpec {
                    name: "agg",
                    default: Some("count"),
                    help: "aggregates: count,sum:COL,min:COL,max:COL,avg:COL,count_distinct:COL",
                },
                LATE_PARAMS[0].clone(),
                LATE_PARAMS[1].clone(),
            ],
            outputs: vec![OutputSpec {
                name: "windows",
                about: "key columns, window_start, window_end, then one column per aggregate",
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
        let window = WindowSpec::parse(params.get("window"), unit).map_err(|e| bad("window", e))?;
        let max_windows = i64::try_from(params.positive("max_windows")?).unwrap_or(i64::MAX);
        window
            .check_windows_per_event(max_windows)
            .map_err(|e| bad("window", e))?;
        let schema = inputs.get("input")?;
        let keys = params.list("key");
        let specs = AggSpec::parse_list(params.get("agg"))?;
        let (aggs, value_columns) = Aggregates::resolve(&specs, schema)?;
        // Projected row: time, key columns, value columns.
        // Window bounds must fit beside every event time: a time too close
        // to the ends of the i64 range is a bad row, never an overflow.
        let time = ColumnType::Time(unit, window.reach());
        let mut columns = vec![(schema.index(params.get("time"))?, time)];
        for k in &keys {
            columns.push((schema.index(k)?, ColumnType::Any));
        }
        let n_keys = keys.len();
        columns.extend(value_columns.iter().copied());
        let mut names = keys.clone();
        names.extend(["window_start".to_string(), "window_end".to_string()]);
        names.extend(specs.iter().map(AggSpec::output_name));
        let late = params.late_rule(0, unit)?;
        let input = schema.name.clone();
        Ok(Plan::new(
            vec![Projection {
                input,
                columns,
                late,
                rules: Vec::new(),
            }],
            vec![OutputSchema {
                name: "windows".into(),
                columns: names,
                key: (0..n_keys + 2).collect(),
            }],
            WindowAggFlow {
                key: (1..=n_keys).collect(),
                values: (1 + n_keys..1 + n_keys + value_columns.len()).collect(),
                window,
                aggs,
                closes: late.is_some()
                    && matches!(
                        window,
                        WindowSpec::Tumbling { .. } | WindowSpec::Hopping { .. }
                    ),
            },
        ))
    }
}

struct WindowAggFlow {
    key: Vec<usize>,
    values: Vec<usize>,
    window: WindowSpec,
    aggs: Aggregates,
    /// Under `late=drop`, tumbling and hopping windows close and release
    /// their state (see [`crate::ops::closing_window`]).
    closes: bool,
}

impl Dataflow for WindowAggFlow {
    fn build<'s>(
        &self,
        mut inputs: Inputs<'s>,
        context: &BuildContext<'s>,
    ) -> Result<Outputs<'s>, BuildError> {
        let input = inputs.take("input")?;
        let windows = if self.closes {
            let closing = ClosingWindow {
                time: 0,
                key: self.key.clone(),
                values: self.values.clone(),
                window: self.window,
                aggs: self.aggs.clone(),
                input: 0,
            };
            closing.aggregate(input, context)
        } else {
            input.window_aggregate(
                0,
                self.key.clone(),
                self.values.clone(),
                self.window,
                self.aggs.clone(),
            )
        };
        Ok(Outputs::from([("windows", windows)]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{rows, run_job};

    fn run(window: &str, agg: &str, input: &str) -> Vec<Row> {
        run_job(
            &WindowAgg,
            &[
                ("time", "ts"),
                ("window", window),
                ("key", "k"),
                ("agg", agg),
            ],
            &["k,ts,v"],
            vec![rows(input)],
        )
        .remove(0)
    }

    #[test]
    fn tumbling_windows_hit_boundaries_exactly() {
        let out = run(
            "tumbling:10",
            "count,sum:v",
            "a,0,1\na,9,2\na,10,4\nb,10,8\na,,16",
        );
        assert_eq!(out, rows("a,,,1,16\na,0,10,2,3\na,10,20,1,4\nb,10,20,1,8"));
    }

    #[test]
    fn hopping_windows_count_an_event_in_each_window_holding_it() {
        let out = run("hopping:10/5", "count", "a,7,1\na,12,1");
        assert_eq!(out, rows("a,0,10,1\na,5,15,2\na,10,20,1"));
    }

    #[test]
    fn sliding_windows_end_at_each_event_and_include_both_bounds() {
        let out = run("sliding:10", "count,max:v", "a,0,5\na,10,1\na,10,2\na,21,3");
        assert_eq!(out, rows("a,-10,0,1,5\na,0,10,3,5\na,11,21,1,3"));
    }

    #[test]
    fn sessions_split_on_gaps_longer_than_gap() {
        let out = run("session:5", "count,min:v", "a,0,3\na,5,1\na,11,2\nb,1,1");
        assert_eq!(out, rows("a,0,10,2,1\na,11,16,1,2\nb,1,6,1,1"));
    }

    #[test]
    fn rfc3339_times_are_converted_to_the_unit() {
        let out = run_job(
            &WindowAgg,
            &[("time", "ts"), ("window", "tumbling:1m"), ("unit", "s")],
            &["ts"],
            vec![vec![
                vec![Value::str("1970-01-01T00:00:59Z")],
                vec![Value::str("1970-01-01T00:01:00Z")],
                vec![Value::Int(61)],
            ]],
        )
        .remove(0);
        assert_eq!(out, rows("0,60,1\n60,120,2"));
    }
}
