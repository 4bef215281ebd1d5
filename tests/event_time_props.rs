//! Property tests of event time: every window kind, the interval join and
//! the as-of join over random events — out of order across workers,
//! duplicate timestamps, null times and keys, window boundaries hit
//! exactly (times and sizes are small, so they often are) — equal a plain
//! reference written here from the definitions (nested loops over the
//! events), on 1, 2 and 4 workers.

use std::collections::BTreeMap;

use kappa::value::{Row, Value};
use proptest::prelude::*;

use crate::properties::{job, key_value, number, reference_aggregates, run_with};

const AGGS: &str = "count,sum:v,avg:v,min:v,max:v,count_distinct:v";

fn time() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => Just(Value::Null),
        12 => (-20i64..40).prop_map(Value::Int),
    ]
}

/// Events `k,t,v`, with a repeated prefix (identical events).
fn events(max: usize) -> impl Strategy<Value = Vec<Row>> {
    prop::collection::vec(
        (key_value(), time(), number()).prop_map(|(k, t, v)| vec![k, t, v]),
        0..max,
    )
    .prop_map(|mut rows| {
        let dup: Vec<Row> = rows.iter().take(rows.len() / 5).cloned().collect();
        rows.extend(dup);
        rows
    })
}

#[derive(Clone, Copy, Debug)]
enum Window {
    Tumbling(i64),
    Hopping(i64, i64),
    Sliding(i64),
    Session(i64),
}

fn window() -> impl Strategy<Value = Window> {
    prop_oneof![
        (1i64..12).prop_map(Window::Tumbling),
        (1i64..12)
            .prop_flat_map(|size| (Just(size), 1..=size))
            .prop_map(|(s, h)| Window::Hopping(s, h)),
        (0i64..12).prop_map(Window::Sliding),
        (0i64..8).prop_map(Window::Session),
    ]
}

impl Window {
    fn param(self) -> String {
        match self {
            Window::Tumbling(s) => format!("tumbling:{s}"),
            Window::Hopping(s, h) => format!("hopping:{s}/{h}"),
            Window::Sliding(s) => format!("sliding:{s}"),
            Window::Session(g) => format!("session:{g}"),
        }
    }

    /// The windows of one key from its events' times, by definition:
    /// `(start, end) -> values` (null times: one window `(None, None)`).
    fn assign(
        self,
        events: &[(Option<i64>, Value)],
    ) -> BTreeMap<(Option<i64>, Option<i64>), Vec<Value>> {
        let mut out: BTreeMap<_, Vec<Value>> = BTreeMap::new();
        for (t, v) in events.iter().filter(|(t, _)| t.is_none()) {
            out.entry((*t, *t)).or_default().push(v.clone());
        }
        let timed: Vec<(i64, Value)> = events
            .iter()
            .filter_map(|(t, v)| t.map(|t| (t, v.clone())))
            .collect();
        match self {
            Window::Tumbling(size) | Window::Hopping(size, _) => {
                let hop = match self {
                    Window::Hopping(_, h) => h,
                    _ => size,
                };
                for (t, v) in &timed {
                    for start in (-100..100).filter(|s| s % hop == 0) {
                        if start <= *t && *t < start + size {
                            out.entry((Some(start), Some(start + size)))
                                .or_default()
                                .push(v.clone());
                        }
                    }
                }
            }
            Window::Sliding(size) => {
                for (end, _) in &timed {
                    let values = timed
                        .iter()
                        .filter(|(t, _)| end - size <= *t && t <= end)
                        .map(|(_, v)| v.clone())
                        .collect();
                    out.insert((Some(end - size), Some(*end)), values);
                }
            }
            Window::Session(gap) => {
                // Two events share a session when a chain of events at most
                // `gap` apart links them.
                let mut times: Vec<i64> = timed.iter().map(|(t, _)| *t).collect();
                times.sort();
                let mut sessions: Vec<(i64, i64)> = Vec::new();
                for t in times {
                    match sessions.last_mut() {
                        Some((_, last)) if t - *last <= gap => *last = t,
                        _ => sessions.push((t, t)),
                    }
                }
                for (first, last) in sessions {
                    let values = timed
                        .iter()
                        .filter(|(t, _)| first <= *t && *t <= last)
                        .map(|(_, v)| v.clone())
                        .collect();
                    out.insert((Some(first), Some(last + gap)), values);
                }
            }
        }
        out
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

fn opt(t: Option<i64>) -> Value {
    t.map_or(Value::Null, Value::Int)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn window_agg_matches_reference(input in events(50), window in window(), drop in any::<bool>()) {
        let w = window.param();
        // Under late=drop, tumbling and hopping windows take the operator
        // that releases closed windows; the in-memory runner applies no
        // late filter, so the result is still the plain windowing.
        let late = if drop { "drop" } else { "correct" };
        let got = run_with(
            &*job("window-agg"),
            &[("time", "t"), ("window", &w), ("key", "k"), ("agg", AGGS), ("late", late)],
            &["k,t,v"],
            vec![input.clone()],
        );
        let mut per_key: BTreeMap<Value, Vec<(Option<i64>, Value)>> = BTreeMap::new();
        for row in &input {
            per_key.entry(row[0].clone()).or_default().push((int(&row[1]), row[2].clone()));
        }
        let mut expected = Vec::new();
        for (k, events) in per_key {
            for ((start, end), values) in window.assign(&events) {
                let mut row = vec![k.clone(), opt(start), opt(end)];
                row.extend(reference_aggregates(&values));
                expected.push(row);
            }
        }
        expected.sort();
        prop_assert_eq!(got, expected);
    }

    #[test]
    fn interval_join_matches_reference(impressions in events(40), clicks in events(40), within in 0i64..12) {
        let got = run_with(
            &*job("ad-clicks"),
            &[("key", "k"), ("time", "t"), ("within", &within.to_string())],
            &["k,t,v", "k,t,v"],
            vec![impressions.clone(), clicks.clone()],
        );
        let mut expected = Vec::new();
        for i in &impressions {
            for c in &clicks {
                let (Some(it), Some(ct)) = (int(&i[1]), int(&c[1])) else { continue };
                if !i[0].is_null() && i[0] == c[0] && it <= ct && ct <= it + within {
                    expected.push(vec![i[0].clone(), i[1].clone(), i[2].clone(), c[1].clone(), c[2].clone()]);
                }
            }
        }
        expected.sort();
        prop_assert_eq!(got, expected);
    }

    #[test]
    fn as_of_join_matches_reference(events in events(40), versions in events(20), left in any::<bool>()) {
        let kind = if left { "left" } else { "inner" };
        let got = run_with(
            &*job("enrich"),
            &[("key", "k"), ("as_of", "t:t"), ("kind", kind)],
            &["k,t,v", "k,t,v"],
            vec![events.clone(), versions.clone()],
        );
        let mut expected = Vec::new();
        for e in &events {
            let valid: Vec<(i64, &Value)> = match int(&e[1]) {
                Some(t) if !e[0].is_null() => versions
                    .iter()
                    .filter_map(|v| int(&v[1]).filter(|vf| v[0] == e[0] && *vf <= t).map(|vf| (vf, &v[2])))
                    .collect(),
                _ => Vec::new(),
            };
            match valid.iter().max() {
                Some(best) => {
                    for _ in valid.iter().filter(|v| *v == best) {
                        expected.push(vec![e[0].clone(), e[1].clone(), e[2].clone(), Value::Int(best.0), best.1.clone()]);
                    }
                }
                None if left => expected.push(vec![e[0].clone(), e[1].clone(), e[2].clone(), Value::Null, Value::Null]),
                None => {}
            }
        }
        expected.sort();
        prop_assert_eq!(got, expected);
    }
}
