//! A stream run's Prometheus metrics: what the committer knows after each
//! epoch, encoded in the OpenMetrics text format for `/metrics`.
//!
//! Every metric carries the deployment's labels (`deployment` id, `job`,
//! `version`, `outputs`); lag also `input`, `topic` and `partition`. The
//! committer is the only writer (one per deployment, on process 0), so the
//! figures are those of the epochs actually committed: records applied
//! count once, however often the run restarts and replays.
//!
//! | metric | type | what |
//! |---|---|---|
//! | `kappa_records_applied_total` | counter | input records of the epochs committed by this process |
//! | `kappa_epochs_committed_total` | counter | epochs committed (idle epochs commit nothing and are not counted) |
//! | `kappa_lag_records` | gauge | per partition: the log's end offset minus the next offset to apply |
//! | `kappa_epoch_latency_seconds` | histogram | from an epoch's close to its commit |
//! | `kappa_commit_latency_seconds` | histogram | the table store transaction of an epoch |
//! | `kappa_append_to_visible_seconds` | histogram | per epoch and partition read: from the append of its newest record to the commit that made it visible |
//! | `kappa_lag_event_time_seconds` | gauge | per partition: now minus the event time of the last record applied (records produced with `--time`), computed at each scrape |
//! | `kappa_bad_rows_total` | counter | bad records skipped (`--on-bad-row skip`) |
//! | `kappa_late_dropped_total` | counter | per input: late events dropped (`late=drop`) |
//! | `kappa_last_record_timestamp_seconds` | gauge | unix time of the last commit that applied records |
//! | `kappa_deployment_live` | gauge | 1 once the deployment is live, 0 while building |
//! | `kappa_arranged_records` | gauge | updates held in this process' arrangements (the job's state), from differential's batch events |
//! | `kappa_windows_open` | gauge | windows held by aggregates that close them under a watermark (`late=drop` window-agg, SQL windows over a `WATERMARK` input) |
//! | `kappa_interval_join_rows` | gauge | rows kept by SQL interval joins of two `WATERMARK` inputs, which release a row once the other side's watermark has passed every time it could match |
//! | `process_resident_memory_bytes` | gauge | this process' resident memory, read at each scrape |

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::job::Held;
use crate::table::{Deployment, DeploymentState, EpochStats};

/// A label set: `(name, value)` pairs.
type Labels = Vec<(String, String)>;

/// The metrics of one deployment's stream run.
pub struct StreamMetrics {
    registry: Registry,
    base: Labels,
    /// `(topic, input)`: lag is labelled with both.
    inputs: Vec<(String, String)>,
    records: Family<Labels, Counter>,
    epochs: Family<Labels, Counter>,
    lag: Family<Labels, Gauge>,
    epoch_latency: Family<Labels, Histogram>,
    commit_latency: Family<Labels, Histogram>,
    visible: Family<Labels, Histogram>,
    event_lag: Family<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// Per partition's labels, the event time (unix ms) of its last record.
    event_times: Mutex<std::collections::BTreeMap<Labels, i64>>,
    bad_rows: Family<Labels, Counter>,
    late: Family<Labels, Counter>,
    last_record: Family<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    live: Family<Labels, Gauge>,
    memory: Gauge,
    /// Updates in the arrangements, kept by the workers' loggers.
    arranged: Arc<AtomicI64>,
    arranged_gauge: Family<Labels, Gauge>,
    held: Held,
    open_windows_gauge: Family<Labels, Gauge>,
    join_rows_gauge: Family<Labels, Gauge>,
    checkpoint_duration: Family<Labels, Histogram>,
    checkpoint_bytes: Family<Labels, Gauge>,
    checkpoint_age: Family<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// When the last full checkpoint was written (unix ms).
    checkpoint_at: AtomicI64,
    /// Serialises scrapes (the memory gauge is set, then encoded).
    scrape: Mutex<()>,
}

fn latency_family() -> Family<Labels, Histogram> {
    // 1 ms .. ~33 s.
    Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.001, 2.0, 16)))
}

impl StreamMetrics {
    /// The metrics of a run driving `d`.
    pub fn new(d: &Deployment) -> StreamMetrics {
        let outputs = d.output_names().join(",");
        let base: Labels = vec![
            ("deployment".into(), d.id.to_string()),
            ("job".into(), d.job.clone()),
            ("version".into(), d.version.to_string()),
            ("outputs".into(), outputs),
        ];
        let mut m = StreamMetrics {
            registry: Registry::default(),
            base,
            inputs: d
                .inputs
                .iter()
                .map(|(i, t)| (t.clone(), i.clone()))
                .collect(),
            records: Family::default(),
            epochs: Family::default(),
            lag: Family::default(),
            epoch_latency: latency_family(),
            commit_latency: latency_family(),
            visible: latency_family(),
            event_lag: Family::default(),
            event_times: Mutex::new(std::collections::BTreeMap::new()),
            bad_rows: Family::default(),
            late: Family::default(),
            last_record: Family::default(),
            live: Family::default(),
            memory: Gauge::default(),
            arranged: Arc::new(AtomicI64::new(0)),
            arranged_gauge: Family::default(),
            held: Held::default(),
            open_windows_gauge: Family::default(),
            join_rows_gauge: Family::default(),
            checkpoint_duration: latency_family(),
            checkpoint_bytes: Family::default(),
            checkpoint_age: Family::default(),
            checkpoint_at: AtomicI64::new(0),
            scrape: Mutex::new(()),
        };
        let r = m.registry.sub_registry_with_prefix("kappa");
        r.register(
            "records_applied",
            "Input records of the epochs this process committed",
            m.records.clone(),
        );
        r.register("epochs_committed", "Epochs committed", m.epochs.clone());
        r.register(
            "lag_records",
            "Records in the log not yet applied, per partition",
            m.lag.clone(),
        );
        r.register(
            "epoch_latency_seconds",
            "Time from an epoch's close to its commit",
            m.epoch_latency.clone(),
        );
        r.register(
            "commit_latency_seconds",
            "Time of an epoch's table store transaction",
            m.commit_latency.clone(),
        );
        r.register(
            "append_to_visible_seconds",
            "From the append of an epoch's newest record on a partition to the commit that made it visible",
            m.visible.clone(),
        );
        r.register(
            "lag_event_time_seconds",
            "Now minus the event time of the last record applied, per partition",
            m.event_lag.clone(),
        );
        r.register("bad_rows", "Bad records skipped", m.bad_rows.clone());
        r.register(
            "late_dropped",
            "Late events dropped, per input",
            m.late.clone(),
        );
        r.register(
            "last_record_timestamp_seconds",
            "Unix time of the last commit that applied records",
            m.last_record.clone(),
        );
        r.register(
            "deployment_live",
            "1 once the deployment is live, 0 while it builds",
            m.live.clone(),
        );
        r.register(
            "arranged_records",
            "Updates held in this process' arrangements",
            m.arranged_gauge.clone(),
        );
        r.register(
            "windows_open",
            "Windows held open by aggregates that close them under a watermark",
            m.open_windows_gauge.clone(),
        );
        r.register(
            "interval_join_rows",
            "Rows kept by interval joins that release them under watermarks",
            m.join_rows_gauge.clone(),
        );
        r.register(
            "checkpoint_duration_seconds",
            "Time to merge the checkpointed state into a full checkpoint",
            m.checkpoint_duration.clone(),
        );
        r.register(
            "checkpoint_bytes",
            "Bytes of the last full checkpoint",
            m.checkpoint_bytes.clone(),
        );
        r.register(
            "checkpoint_age_seconds",
            "Seconds since the last full checkpoint (each commit also stores what it changed)",
            m.checkpoint_age.clone(),
        );
        m.registry.register(
            "process_resident_memory_bytes",
            "Resident memory of this process",
            m.memory.clone(),
        );
        m.set_state(d.state);
        m.bad_rows.get_or_create(&m.base).inc_by(0);
        m.records.get_or_create(&m.base).inc_by(0);
        m
    }

    fn with(&self, extra: &[(&str, &str)]) -> Labels {
        let mut labels = self.base.clone();
        labels.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        labels
    }

    /// The deployment's state (live or building).
    pub fn set_state(&self, state: DeploymentState) {
        let live = i64::from(state == DeploymentState::Live);
        self.live.get_or_create(&self.base).set(live);
    }

    /// A full checkpoint of `bytes` written in `took`.
    pub fn record_checkpoint(&self, took: Duration, bytes: u64) {
        self.checkpoint_duration
            .get_or_create(&self.base)
            .observe(took.as_secs_f64());
        self.checkpoint_bytes
            .get_or_create(&self.base)
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
        self.checkpoint_at
            .store(crate::table::now_ms(), Ordering::Relaxed);
    }

    /// An epoch committed with `stats`, its transaction taking `commit`.
    pub fn record_epoch(&self, stats: &EpochStats, commit: Duration) {
        self.records.get_or_create(&self.base).inc_by(stats.records);
        self.epochs.get_or_create(&self.base).inc();
        let epoch = Duration::from_millis(stats.epoch_ms).as_secs_f64();
        self.epoch_latency.get_or_create(&self.base).observe(epoch);
        self.commit_latency
            .get_or_create(&self.base)
            .observe(commit.as_secs_f64());
        raise_to(
            &self.bad_rows.get_or_create(&self.base),
            stats.bad_rows_total,
        );
        for (input, n) in &stats.late_dropped {
            raise_to(
                &self.late.get_or_create(&self.with(&[("input", input)])),
                *n,
            );
        }
        if stats.records > 0 {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            self.last_record
                .get_or_create(&self.base)
                .set(now.as_secs_f64());
        }
        self.set_lag(&stats.lag);
    }

    /// The count the workers' arrangement loggers keep up to date.
    pub fn arranged(&self) -> Arc<AtomicI64> {
        self.arranged.clone()
    }

    /// The counts the operators that release state keep up to date.
    pub fn held(&self) -> Held {
        self.held.clone()
    }

    /// A record made visible `ms` after it was appended.
    pub fn record_visible(&self, ms: i64) {
        let secs = Duration::from_millis(ms.max(0) as u64).as_secs_f64();
        self.visible.get_or_create(&self.base).observe(secs);
    }

    /// The event time of the last record applied on `r`'s partition.
    pub fn set_event_time(&self, r: &crate::runner::stream::LastRecord, event_ts: i64) {
        let partition = r.partition.to_string();
        let labels = self.with(&[
            ("input", &r.input),
            ("topic", &r.topic),
            ("partition", &partition),
        ]);
        let mut times = self.event_times.lock().unwrap_or_else(|e| e.into_inner());
        times.insert(labels, event_ts);
    }

    /// Lag per partition (also between commits, while idle).
    pub fn set_lag(&self, lag: &[crate::table::PartitionLag]) {
        for l in lag {
            let input = self
                .inputs
                .iter()
                .find(|(t, _)| *t == l.topic)
                .map_or("", |(_, i)| i.as_str());
            let partition = l.partition.to_string();
            let labels = self.with(&[
                ("input", input),
                ("topic", &l.topic),
                ("partition", &partition),
            ]);
            self.lag
                .get_or_create(&labels)
                .set(i64::try_from(l.lag).unwrap_or(i64::MAX));
        }
    }

    /// Everything, in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let _one = self.scrape.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bytes) = resident_bytes() {
            self.memory.set(i64::try_from(bytes).unwrap_or(i64::MAX));
        }
        self.arranged_gauge
            .get_or_create(&self.base)
            .set(self.arranged.load(Ordering::Relaxed));
        self.open_windows_gauge
            .get_or_create(&self.base)
            .set(self.held.windows.load(Ordering::Relaxed));
        self.join_rows_gauge
            .get_or_create(&self.base)
            .set(self.held.join_rows.load(Ordering::Relaxed));
        let now = crate::table::now_ms();
        let checkpoint_at = self.checkpoint_at.load(Ordering::Relaxed);
        if checkpoint_at > 0 {
            let age = (now - checkpoint_at).max(0) as f64 / 1000.0;
            self.checkpoint_age.get_or_create(&self.base).set(age);
        }
        let times = self.event_times.lock().unwrap_or_else(|e| e.into_inner());
        for (labels, event_ts) in times.iter() {
            let lag = (now - event_ts) as f64 / 1000.0;
            self.event_lag.get_or_create(labels).set(lag);
        }
        drop(times);
        let mut text = String::new();
        encode(&mut text, &self.registry).expect("writing to a String cannot fail");
        text
    }
}

impl std::fmt::Debug for StreamMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamMetrics")
            .field("labels", &self.base)
            .finish_non_exhaustive()
    }
}

/// Raises a counter to a running total (totals only grow within a run).
fn raise_to(counter: &Counter, total: u64) {
    let now = counter.get();
    if total > now {
        counter.inc_by(total - now);
    }
}

/// This process' resident set size, from `/proc/self/statm`.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::{PartitionLag, TableVersion};

    fn deployment() -> Deployment {
        Deployment {
            id: 7,
            version: TableVersion(2),
            inputs: vec![("events".into(), "ev".into())],
            ..Deployment::example("sessionize", "sessions", "user")
        }
    }

    #[test]
    fn epochs_show_up_with_the_deployments_labels() {
        let m = StreamMetrics::new(&deployment());
        let stats = EpochStats {
            records: 40,
            bad_rows_total: 3,
            epoch_ms: 12,
            records_per_sec: 0.0,
            lag: vec![PartitionLag {
                topic: "ev".into(),
                partition: 1,
                lag: 9,
            }],
            late_dropped: vec![("events".into(), 2)],
        };
        m.record_epoch(&stats, Duration::from_millis(3));
        m.record_epoch(
            &EpochStats {
                records: 2,
                ..stats
            },
            Duration::from_millis(3),
        );
        let text = m.encode();
        let base = r#"deployment="7",job="sessionize",version="v2",outputs="sessions""#;
        for line in [
            format!("kappa_records_applied_total{{{base}}} 42"),
            format!("kappa_epochs_committed_total{{{base}}} 2"),
            format!("kappa_bad_rows_total{{{base}}} 3"),
            format!("kappa_late_dropped_total{{{base},input=\"events\"}} 2"),
            format!("kappa_lag_records{{{base},input=\"events\",topic=\"ev\",partition=\"1\"}} 9"),
            format!("kappa_epoch_latency_seconds_count{{{base}}} 2"),
            format!("kappa_deployment_live{{{base}}} 0"),
        ] {
            assert!(text.contains(&line), "{line} missing in\n{text}");
        }
        assert!(text.contains("process_resident_memory_bytes "), "{text}");
    }
}
