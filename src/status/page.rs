//! The status page: one HTML document rendered on the server from the
//! catalog and the sampled history, reloaded by the browser every two
//! seconds (a `meta` refresh: no script, no build step).
//!
//! Every text that comes from the catalog (job names, parameters, paths)
//! is escaped; the page has stable element ids and classes (`#d3`,
//! `.state`, `.lag`) so that tests and scrapers can read it.

use std::fmt::Write as _;

use super::history::{History, KEEP_MS, Sample};
use crate::table::{Deployment, DeploymentState};
use crate::time::{format_duration, format_unix_ms};

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
h1{margin:0 0 .2em}.store{color:#666;margin:0 0 1em}
table{border-collapse:collapse;margin-bottom:1.5em}
th,td{border-bottom:1px solid #ddd;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.n{text-align:right}small{color:#666}
.live{color:#070;font-weight:bold}.building{color:#a60;font-weight:bold}.retired,.dropped{color:#888}
.charts{display:flex;flex-wrap:wrap;gap:1.5em}figure{margin:0}figcaption{font-weight:bold}
svg{background:#fafafa;border:1px solid #ddd;display:block;margin-top:.3em}";

/// The page for the deployments of the store at `table_db`.
pub fn render(
    table_db: &crate::table::StoreAddr,
    metrics: bool,
    deployments: &[Deployment],
    history: &History,
) -> String {
    let mut html = head(table_db, metrics);
    html.push_str("<h2>Deployments</h2>\n");
    if deployments.is_empty() {
        html.push_str(
            "<p id=\"empty\">No deployments yet: `kappa stream` creates the first.</p>\n",
        );
    } else {
        deployments_table(&mut html, deployments);
        charts(&mut html, deployments, history);
        swaps(&mut html, deployments);
    }
    html.push_str("</body></html>\n");
    html
}

/// The page when the catalog cannot be read (no store yet, a broken file).
pub fn unavailable(table_db: &crate::table::StoreAddr, metrics: bool, error: &str) -> String {
    let mut html = head(table_db, metrics);
    let _ = writeln!(
        html,
        "<p id=\"error\">Cannot read the catalog: {}</p>",
        esc(error)
    );
    html.push_str("</body></html>\n");
    html
}

fn head(table_db: &crate::table::StoreAddr, metrics: bool) -> String {
    let now = format_unix_ms(Some(crate::table::now_ms()));
    let link = match metrics {
        true => " &middot; <a href=\"/metrics\">metrics</a>",
        false => "",
    };
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"2\"><title>kappa status</title>\
         <style>{STYLE}</style></head><body>\n<h1>kappa</h1>\n\
         <p class=\"store\">table store {} &middot; {now} UTC{link}</p>\n",
        esc(&table_db.display().to_string())
    )
}

fn deployments_table(html: &mut String, deployments: &[Deployment]) {
    html.push_str(
        "<table id=\"deployments\"><thead><tr><th>id</th><th>outputs</th><th>version</th>\
         <th>job</th><th>state</th><th>records</th><th>rate</th><th>lag</th>\
         <th>lag by input</th><th>epoch</th><th>ETA</th><th>bad rows</th>\
         <th>late dropped</th><th>created</th><th>caught up</th><th>swapped</th>\
         </tr></thead><tbody>\n",
    );
    for d in deployments {
        let p = &d.progress;
        let params: Vec<String> = d.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let eta = match d.state {
            DeploymentState::Building => p.eta().map_or("?".into(), format_duration),
            _ => "-".into(),
        };
        let _ = writeln!(
            html,
            "<tr id=\"d{id}\" data-state=\"{state}\"><td class=\"n\">{id}</td>\
             <td class=\"outputs\">{outputs}</td><td>{version}</td>\
             <td>{job} v{job_version}<br><small title=\"{full}\">{params}</small></td>\
             <td class=\"state {state}\">{state}</td><td class=\"n records\">{records}</td>\
             <td class=\"n rate\">{rate}</td><td class=\"n lag\">{lag}</td>\
             <td><small>{by_input}</small></td><td class=\"n epoch\">{epoch}</td>\
             <td class=\"eta\">{eta}</td><td class=\"n bad\">{bad}</td>\
             <td class=\"late\">{late}</td><td>{created}</td><td>{caught_up}</td><td>{swapped}</td></tr>",
            id = d.id,
            outputs = esc(&d.output_names().join(", ")),
            version = d.version,
            job = esc(&d.job),
            job_version = d.job_version,
            params = esc(&d.short_params()),
            full = esc(&params.join(" ")),
            state = esc(&d.state_shown()),
            records = p.records_applied,
            rate = p
                .records_per_sec
                .map_or("-".into(), |r| format!("{r:.0}/s")),
            lag = p.total_lag(),
            by_input = esc(&d.lag_by_input()),
            epoch = p.last_epoch_ms.map_or("-".into(), |ms| format!("{ms} ms")),
            bad = p.bad_rows,
            late = esc(&d.late_dropped()),
            created = format_unix_ms(Some(d.created_at)),
            caught_up = format_unix_ms(d.caught_up_at),
            swapped = format_unix_ms(d.swapped_at),
        );
    }
    html.push_str("</tbody></table>\n");
}

fn charts(html: &mut String, deployments: &[Deployment], history: &History) {
    let _ = writeln!(
        html,
        "<h2>Lag and throughput, up to the last {} minutes (times in UTC)</h2>\n<div class=\"charts\">",
        KEEP_MS / 60_000
    );
    let now = crate::table::now_ms();
    for d in deployments
        .iter()
        .filter(|d| d.state != DeploymentState::Dropped)
    {
        let samples: Vec<Sample> = history.of(d.id).copied().collect();
        let lag: Vec<(i64, f64)> = samples.iter().map(|s| (s.at, s.lag as f64)).collect();
        let rate: Vec<(i64, f64)> = samples
            .windows(2)
            .map(|w| {
                let secs = ((w[1].at - w[0].at) as f64 / 1000.0).max(1e-3);
                (
                    w[1].at,
                    w[1].records.saturating_sub(w[0].records) as f64 / secs,
                )
            })
            .collect();
        let _ = writeln!(
            html,
            "<figure id=\"chart-d{}\"><figcaption>{} {} ({})</figcaption>{}{}</figure>",
            d.id,
            esc(&d.output_names().join(", ")),
            d.version,
            esc(&d.state_shown()),
            chart("lag (records)", &lag, now),
            chart("applied (records/s)", &rate, now),
        );
    }
    html.push_str("</div>\n");
}

/// A line chart of `points` (unix ms, value) up to `now`, over the span
/// sampled (at least a minute, at most [`KEEP_MS`]), with a time axis in
/// UTC under it.
fn chart(title: &str, points: &[(i64, f64)], now: i64) -> String {
    let span = points
        .first()
        .map_or(KEEP_MS, |p| now - p.0)
        .clamp(60_000, KEEP_MS);
    let max = points.iter().map(|p| p.1).fold(0.0_f64, f64::max);
    let top = if max > 0.0 { max } else { 1.0 };
    let x = |at: i64| CHART_W * (1.0 - (now - at) as f64 / span as f64);
    let line: Vec<String> = points
        .iter()
        .map(|&(at, v)| format!("{:.1},{:.1}", x(at), CHART_H - CHART_H * v / top))
        .collect();
    let last = points.last().map_or("-".into(), |p| format!("{:.0}", p.1));
    format!(
        "<svg width=\"{CHART_W}\" height=\"{}\" role=\"img\" aria-label=\"{title}\">\
         <text x=\"4\" y=\"12\" font-size=\"11\" fill=\"#555\">{title}: now {last}, max {max:.0}</text>\
         <polyline fill=\"none\" stroke=\"#36c\" stroke-width=\"1.5\" points=\"{}\"/>{}</svg>",
        CHART_H + AXIS_H,
        line.join(" "),
        time_axis(now, span, x)
    )
}

const CHART_W: f64 = 360.0;
const CHART_H: f64 = 70.0;
/// The height of the time axis under a chart.
const AXIS_H: f64 = 16.0;
/// Half the width of the widest tick label (`HH:MM:SS` at 10 px).
const LABEL_HALF_W: f64 = 22.0;

/// The time axis under a chart that ends at `now` and spans `span` ms: a
/// base line and a tick at every multiple of a round step, 3 to 6 of them,
/// labelled `HH:MM` (or `HH:MM:SS` for ticks less than a minute apart)
/// where the label fits.
fn time_axis(now: i64, span: i64, x: impl Fn(i64) -> f64) -> String {
    const STEPS: [i64; 6] = [10_000, 15_000, 30_000, 60_000, 120_000, 300_000];
    let step = STEPS.into_iter().find(|s| span / s <= 6).unwrap_or(600_000);
    let mut axis = format!(
        "<g class=\"time-axis\" font-size=\"10\" fill=\"#555\" stroke=\"#999\">\
         <line x1=\"0\" y1=\"{CHART_H}\" x2=\"{CHART_W}\" y2=\"{CHART_H}\"/>"
    );
    let mut tick = (now - span).div_euclid(step) * step + step;
    while tick <= now {
        let at = x(tick);
        let _ = write!(
            axis,
            "<line x1=\"{at:.1}\" y1=\"{CHART_H}\" x2=\"{at:.1}\" y2=\"{}\"/>",
            CHART_H + 3.0
        );
        // A label centred on its tick, unless it would not fit the chart.
        if (LABEL_HALF_W..=CHART_W - LABEL_HALF_W).contains(&at) {
            let _ = write!(
                axis,
                "<text x=\"{at:.1}\" y=\"{}\" text-anchor=\"middle\" stroke=\"none\">{}</text>",
                CHART_H + 13.0,
                clock(tick, step < 60_000)
            );
        }
        tick += step;
    }
    axis.push_str("</g>");
    axis
}

/// The UTC time of day of `ms` (unix ms): `HH:MM`, or `HH:MM:SS`.
fn clock(ms: i64, seconds: bool) -> String {
    let s = ms.div_euclid(1000).rem_euclid(86_400);
    match seconds {
        true => format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60),
        false => format!("{:02}:{:02}", s / 3600, s / 60 % 60),
    }
}

/// `v2 went live`, or `rolled back to v1` when a newer version of `output`
/// had gone live before `d` did (at `at`): only a rollback brings an older
/// version back. The catalog keeps each version's last swap only.
fn went_live(deployments: &[Deployment], output: &str, d: &Deployment, at: i64) -> String {
    let newer_was_live = deployments.iter().any(|o| {
        o.output_index(output).is_some()
            && o.version > d.version
            && o.swapped_at.is_some_and(|t| t < at)
    });
    match newer_was_live {
        true => format!("rolled back to {}", d.version),
        false => format!("{} went live", d.version),
    }
}

/// Per output, its versions' lifecycle events in time order: created,
/// caught up, made live (a swap, or a rollback to an older version).
fn swaps(html: &mut String, deployments: &[Deployment]) {
    html.push_str("<h2>Versions and swaps</h2>\n");
    let mut outputs: Vec<&str> = deployments.iter().flat_map(|d| d.output_names()).collect();
    outputs.sort_unstable();
    outputs.dedup();
    for output in outputs {
        let mut events: Vec<(i64, String)> = Vec::new();
        for d in deployments
            .iter()
            .filter(|d| d.output_index(output).is_some())
        {
            let v = d.version;
            events.push((
                d.created_at,
                format!("{v} created ({} v{})", d.job, d.job_version),
            ));
            if let Some(at) = d.caught_up_at {
                events.push((at, format!("{v} caught up")));
            }
            if let Some(at) = d.swapped_at {
                events.push((at, went_live(deployments, output, d, at)));
            }
        }
        events.sort();
        let now: Vec<String> = deployments
            .iter()
            .filter(|d| d.output_index(output).is_some())
            .map(|d| format!("{} {}", d.version, d.state_shown()))
            .collect();
        let _ = writeln!(
            html,
            "<h3>{}</h3>\n<p class=\"versions\">{}</p>\n<ol class=\"events\">",
            esc(output),
            esc(&now.join(", "))
        );
        for (at, what) in events {
            let _ = writeln!(
                html,
                "<li>{} UTC: {}</li>",
                format_unix_ms(Some(at)),
                esc(&what)
            );
        }
        html.push_str("</ol>\n");
    }
}

/// Text as HTML.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::OutputSchema;
    use crate::table::{Progress, TableVersion};

    #[test]
    fn catalog_text_is_escaped_and_rows_are_addressable() {
        let d = Deployment {
            id: 3,
            job: "<script>".into(),
            job_version: 1,
            version: TableVersion(2),
            params: vec![("k".into(), "a&b".into())],
            inputs: vec![],
            outputs: vec![OutputSchema {
                name: "sessions".into(),
                columns: vec!["user".into()],
                key: vec![0],
            }],
            state: DeploymentState::Live,
            created_at: 0,
            caught_up_at: Some(1000),
            swapped_at: Some(2000),
            progress: Progress::default(),
            note: None,
            generation: 1,
            half_written: false,
            reading: None,
        };
        let mut history = History::default();
        history.record(crate::table::now_ms(), std::slice::from_ref(&d));
        let html = render(&"t.db".parse().unwrap(), false, &[d], &history);
        assert!(!html.contains("<script>"), "{html}");
        assert!(
            html.contains("&lt;script&gt; v1<br><small title=\"k=a&amp;b\">k=a&amp;b</small>"),
            "{html}"
        );
        assert!(
            html.contains("<tr id=\"d3\" data-state=\"live\">"),
            "{html}"
        );
        assert!(html.contains("<td class=\"n lag\">0</td>"), "{html}");
        assert!(html.contains("v2 went live"), "{html}");
    }

    /// Version `v` of a SQL job's deployment of `bystatus`.
    fn sql_version(
        sql: &str,
        v: u32,
        state: DeploymentState,
        swapped_at: Option<i64>,
    ) -> Deployment {
        Deployment {
            id: i64::from(v),
            version: TableVersion(v),
            params: vec![("sql".into(), sql.into())],
            state,
            swapped_at,
            ..Deployment::example("sql", "bystatus", "status")
        }
    }

    #[test]
    fn a_rollback_is_told_from_a_swap_and_long_queries_are_cut() {
        let sql = format!(
            "SELECT status, count(*) AS n\nFROM orders{}\nGROUP BY status",
            " ".repeat(400)
        );
        let version = |v, state, at| sql_version(&sql, v, state, Some(at));
        // v1 went live at 10, v2 at 20, and v1 again (a rollback) at 30.
        let ds = [
            version(1, DeploymentState::Live, 30),
            version(2, DeploymentState::Retired, 20),
        ];
        let html = render(&"t.db".parse().unwrap(), false, &ds, &History::default());
        assert!(html.contains("v2 went live"), "{html}");
        assert!(html.contains("rolled back to v1"), "{html}");
        let short = ds[0].short_params();
        assert!(
            short.starts_with("sql=SELECT status, count(*) AS n… ("),
            "{short}"
        );
        assert!(
            short.contains(&format!("({} chars, ", sql.chars().count())),
            "{short}"
        );
        assert!(short.len() < 80, "{short}");
        assert!(
            html.contains(&format!(">{}</small>", esc(&short))),
            "{html}"
        );
    }

    #[test]
    fn charts_have_a_time_axis_in_utc() {
        // 12:10:00 UTC on some day; samples over the last 5 minutes.
        let now = 1_700_000_000_000_i64.div_euclid(86_400_000) * 86_400_000 + 43_800_000;
        let points: Vec<(i64, f64)> = (0..=5).map(|m| (now - 300_000 + m * 60_000, 1.0)).collect();
        let svg = chart("lag (records)", &points, now);
        for tick in ["12:06", "12:07", "12:09"] {
            assert!(svg.contains(&format!(">{tick}</text>")), "{tick}: {svg}");
        }
        assert!(
            !svg.contains(">12:05</text>"),
            "the span starts at 12:05: {svg}"
        );
        // A minute's span ticks every 10 s, with seconds.
        let svg = chart("lag (records)", &points[5..], now);
        assert!(svg.contains(">12:09:10</text>"), "{svg}");
        assert!(svg.contains(">12:09:50</text>"), "{svg}");
        // The tick at the chart's right edge has no label: it would not fit.
        assert!(!svg.contains(">12:10:00</text>"), "{svg}");
        assert_eq!(svg.matches("text-anchor").count(), 5, "{svg}");
    }

    #[test]
    fn a_caught_up_building_version_waits_for_a_swap() {
        let mut d = sql_version("SELECT 1", 2, DeploymentState::Building, None);
        assert_eq!(d.state_shown(), "building");
        d.caught_up_at = Some(5);
        assert_eq!(d.state_shown(), "building, caught up: waiting for a swap");
        d.state = DeploymentState::Live;
        assert_eq!(d.state_shown(), "live");
    }
}
