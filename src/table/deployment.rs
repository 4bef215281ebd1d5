//! Deployments: one instance of a job writing one version of its output
//! tables, its lifecycle states, and the progress it reports.
//!
//! A deployment is a job name and version, parameter values, a binding of
//! the job's inputs to log topics, and the schemas of its outputs. All its
//! outputs share one [`TableVersion`] `N`: its tables are `OUTPUT__vN`.
//!
//! Lifecycle (the only transitions the store makes):
//!
//! ```text
//!   create ──▶ building ──swap──▶ live ──(another swaps in)──▶ retired ──drop──▶ dropped
//!   create ──────────────────────▶ live                        │    ▲
//!                                   ▲ └───────swap (rollback)──┘    │
//!                                   └─────── building ◀──reopen─────┘
//! ```
//!
//! Invariants: for any output name at most one deployment is `live`; only
//! `building` and `live` deployments accept epochs; a `dropped` deployment
//! has no tables but keeps its catalog row (and its version number, which is
//! never given out again).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::schema::OutputSchema;
use crate::value::Row;

use super::ident;

/// The version number shared by a deployment's output tables; displays as `v7`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TableVersion(pub u32);

impl fmt::Display for TableVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

impl FromStr for TableVersion {
    type Err = String;

    /// Accepts `7` and `v7`.
    fn from_str(s: &str) -> Result<Self, String> {
        let digits = s.strip_prefix(['v', 'V']).unwrap_or(s);
        match digits.parse::<u32>() {
            Ok(n) if n > 0 => Ok(TableVersion(n)),
            _ => Err(format!("'{s}' is not a table version (like 3 or v3)")),
        }
    }
}

/// Where a deployment is in its lifecycle (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeploymentState {
    /// Being filled; not visible through the views.
    Building,
    /// The views of its outputs select from its tables.
    Live,
    /// Swapped out; its tables are kept for rollback.
    Retired,
    /// Its tables are gone; the catalog row is kept for history.
    Dropped,
}

impl DeploymentState {
    /// Its name in the catalog and in messages: `building`, `live`,
    /// `retired`, `dropped`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeploymentState::Building => "building",
            DeploymentState::Live => "live",
            DeploymentState::Retired => "retired",
            DeploymentState::Dropped => "dropped",
        }
    }

    /// Whether `commit_epoch` and `set_progress` are accepted.
    pub fn accepts_epochs(self) -> bool {
        matches!(self, DeploymentState::Building | DeploymentState::Live)
    }
}

impl fmt::Display for DeploymentState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DeploymentState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "building" => Ok(DeploymentState::Building),
            "live" => Ok(DeploymentState::Live),
            "retired" => Ok(DeploymentState::Retired),
            "dropped" => Ok(DeploymentState::Dropped),
            _ => Err(format!("unknown deployment state '{s}'")),
        }
    }
}

/// What `create_deployment` needs.
#[derive(Clone, Debug, PartialEq)]
pub struct NewDeployment {
    /// The name of the job it runs.
    pub job: String,
    /// The version of the job's code ([`crate::job::JobSpec::version`]).
    pub job_version: u32,
    /// Parameter values, `K=V`, in the order given.
    pub params: Vec<(String, String)>,
    /// The job's inputs, each bound to a log topic: (input name, topic).
    pub inputs: Vec<(String, String)>,
    /// The schemas of the job's outputs, in plan order: one table each.
    pub outputs: Vec<OutputSchema>,
    /// `Building` (a reprocess) or `Live` (the first deployment of a stream).
    pub state: DeploymentState,
    /// Free text shown by `kappa table status`.
    pub note: Option<String>,
}

/// How far one log partition's end is ahead of what a deployment applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionLag {
    /// The log topic.
    pub topic: String,
    /// The partition of that topic.
    pub partition: u32,
    /// Log end offset minus the next offset the deployment will read.
    pub lag: u64,
}

/// What a runner reports with each epoch (or, without changes, in
/// `set_progress`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EpochStats {
    /// Input records applied in this epoch (added to the running total).
    pub records: u64,
    /// Bad input rows seen so far, in total (replaces the stored figure).
    pub bad_rows_total: u64,
    /// Wall time of this epoch, from first record read to commit.
    pub epoch_ms: u64,
    /// The runner's current throughput estimate.
    pub records_per_sec: f64,
    /// Lag per topic partition after this epoch.
    pub lag: Vec<PartitionLag>,
    /// Late events dropped so far per input (only inputs under the `drop`
    /// policy; replaces the stored figures).
    pub late_dropped: Vec<(String, u64)>,
}

/// The progress figures stored in the catalog.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Progress {
    /// Input records applied by every committed epoch, in total.
    pub records_applied: u64,
    /// Bad input rows seen, in total, as last reported.
    pub bad_rows: u64,
    /// Epochs committed.
    pub epochs: u64,
    /// Unix ms of the last commit or progress report.
    pub last_epoch_at: Option<i64>,
    /// Wall time of the last reported epoch, in ms.
    pub last_epoch_ms: Option<u64>,
    /// The runner's throughput estimate, as last reported (records per
    /// second).
    pub records_per_sec: Option<f64>,
    /// Lag per topic partition, as last reported.
    pub lag: Vec<PartitionLag>,
    /// Late events dropped per input (see [`EpochStats::late_dropped`]).
    pub late_dropped: Vec<(String, u64)>,
}

impl Progress {
    /// The sum of the lag over all partitions.
    pub fn total_lag(&self) -> u64 {
        self.lag.iter().map(|l| l.lag).sum()
    }

    /// Lag divided by rate: how long until caught up at the current rate
    /// (`None` without a positive rate). Zero when there is no lag.
    pub fn eta(&self) -> Option<Duration> {
        let lag = self.total_lag();
        if lag == 0 {
            return Some(Duration::ZERO);
        }
        let rate = self.records_per_sec.filter(|r| r.is_finite() && *r > 0.0)?;
        Some(Duration::from_secs_f64(lag as f64 / rate))
    }
}

/// A deployment as the catalog records it.
#[derive(Clone, Debug, PartialEq)]
pub struct Deployment {
    /// Its id in the catalog, never reused.
    pub id: i64,
    /// The name of the job it runs.
    pub job: String,
    /// The version of the job's code it was created with.
    pub job_version: u32,
    /// The version shared by its output tables (`OUTPUT__vN`).
    pub version: TableVersion,
    /// Parameter values, `K=V`, in the order given.
    pub params: Vec<(String, String)>,
    /// The job's inputs, each bound to a log topic: (input name, topic).
    pub inputs: Vec<(String, String)>,
    /// The schemas of its outputs, in plan order: one table each.
    pub outputs: Vec<OutputSchema>,
    /// Where it is in its lifecycle.
    pub state: DeploymentState,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms of when it first caught up with the log (cleared when a
    /// retired deployment is reopened).
    pub caught_up_at: Option<i64>,
    /// When it last became live.
    pub swapped_at: Option<i64>,
    /// The progress figures its runner reported.
    pub progress: Progress,
    /// Free text shown by `kappa table status`.
    pub note: Option<String>,
    /// Bumped by each process that takes the deployment over; a writer
    /// whose [`Lease`](super::Lease) holds an older one is fenced off.
    pub generation: i64,
    /// Its tables hold part of an epoch: a store that writes a large epoch
    /// of a version never live in pieces (SQLite) marks it until the last
    /// piece. Reads and swaps wait while its owner runs and are refused
    /// when none does; the next owner rebuilds it from the start.
    pub half_written: bool,
    /// How its inputs are read (the null marker, the bad-record policy), as
    /// the engine records it: text the catalog keeps and does not read.
    /// `None` for a deployment from before it was recorded.
    pub reading: Option<String>,
}

/// How users know a deployment: its outputs and version, `sessions v2`.
impl fmt::Display for Deployment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.output_names().join(","), self.version)
    }
}

impl Deployment {
    /// `events=12 clicks=0`: late events dropped per input under the `drop`
    /// policy, `-` for a deployment that corrects late events. (A SQL job
    /// drops by its inputs' `WATERMARK`s, which its query holds: its counts
    /// are those its inputs under one reported.)
    pub fn late_dropped(&self) -> String {
        let d = self;
        if !d.params.iter().any(|(k, v)| k == "late" && v == "drop") {
            if d.progress.late_dropped.is_empty() {
                return "-".into();
            }
            let counts: Vec<String> = d
                .progress
                .late_dropped
                .iter()
                .map(|(input, n)| format!("{input}={n}"))
                .collect();
            return counts.join(" ");
        }
        let per_input: Vec<String> = d
            .inputs
            .iter()
            .map(|(input, _)| {
                let n = d.progress.late_dropped.iter().find(|(i, _)| i == input);
                format!("{input}={}", n.map_or(0, |(_, n)| *n))
            })
            .collect();
        per_input.join(" ")
    }

    /// Its state as `table status` and the status page show it: a
    /// building version that has caught up waits for a swap (`--swap
    /// manual`, an `auto-if` rule that refused it, or a process that
    /// stopped before its swap), and a half-written one says so.
    pub fn state_shown(&self) -> String {
        let mut shown = self.state.to_string();
        if self.state == DeploymentState::Building && self.caught_up_at.is_some() {
            shown.push_str(", caught up: waiting for a swap");
        }
        if self.half_written {
            shown.push_str(" (half-written)");
        }
        shown
    }

    /// The parameters as `K=V` words, a long or multi-line value (a SQL
    /// job's query) cut to its first line and named by its length and a
    /// digest: `sql=SELECT status, count(*)… (412 chars, 5f0c2a1e)`. The
    /// full values are in [`Deployment::params`].
    pub fn short_params(&self) -> String {
        const LONGEST: usize = 40;
        let words: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| {
                let first = v
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .trim();
                if v.chars().count() <= LONGEST && !v.contains('\n') {
                    return format!("{k}={v}");
                }
                let cut: String = first.chars().take(LONGEST).collect();
                let digest = sha2::Sha256::digest(v.as_bytes());
                format!(
                    "{k}={cut}… ({} chars, {:02x}{:02x}{:02x}{:02x})",
                    v.chars().count(),
                    digest[0],
                    digest[1],
                    digest[2],
                    digest[3]
                )
            })
            .collect();
        words.join(" ")
    }

    /// `events=120 (0:60 1:60); users=0 (0:0)`: per input, its lag summed over
    /// partitions and per partition.
    pub fn lag_by_input(&self) -> String {
        let d = self;
        let mut groups: Vec<(String, Vec<(u32, u64)>)> = d
            .inputs
            .iter()
            .map(|(input, topic)| {
                let parts = d.progress.lag.iter().filter(|l| &l.topic == topic);
                (input.clone(), parts.map(|l| (l.partition, l.lag)).collect())
            })
            .collect();
        for l in &d.progress.lag {
            if !d.inputs.iter().any(|(_, t)| *t == l.topic) {
                groups.push((format!("topic {}", l.topic), vec![(l.partition, l.lag)]));
            }
        }
        let groups: Vec<String> = groups
            .into_iter()
            .filter(|(_, parts)| !parts.is_empty())
            .map(|(name, mut parts)| {
                parts.sort_unstable();
                let sum: u64 = parts.iter().map(|p| p.1).sum();
                let each: Vec<String> = parts.iter().map(|(p, l)| format!("{p}:{l}")).collect();
                format!("{name}={sum} ({})", each.join(" "))
            })
            .collect();
        if groups.is_empty() {
            "-".into()
        } else {
            groups.join("; ")
        }
    }

    /// The table of output `index` (in plan order): `OUTPUT__vN`.
    pub fn table(&self, index: usize) -> String {
        ident::table_name(&self.outputs[index].name, self.version.0)
    }

    /// All its tables, in output order.
    pub fn tables(&self) -> Vec<String> {
        (0..self.outputs.len()).map(|i| self.table(i)).collect()
    }

    /// The names of its outputs, in plan order.
    pub fn output_names(&self) -> Vec<&str> {
        self.outputs.iter().map(|o| o.name.as_str()).collect()
    }

    /// The position of output `name` (compared as SQLite compares names).
    pub fn output_index(&self, name: &str) -> Option<usize> {
        self.outputs
            .iter()
            .position(|o| ident::same_name(&o.name, name))
    }

    /// The topic an input is bound to.
    pub fn topic_of(&self, input: &str) -> Option<&str> {
        self.inputs
            .iter()
            .find(|(i, _)| i == input)
            .map(|(_, t)| t.as_str())
    }
}

/// Whether an output's rows form a bag: its key is all its columns, so
/// equal rows may occur more than once and the view shows `kappa_count`.
pub fn is_bag(schema: &OutputSchema) -> bool {
    !schema.columns.is_empty() && (0..schema.columns.len()).all(|i| schema.key.contains(&i))
}

/// Whether an output's table is keyed: a key and other columns, so that a
/// change of a key's other columns rewrites its row in place.
pub fn is_keyed(schema: &OutputSchema) -> bool {
    !schema.key.is_empty() && !is_bag(schema)
}

/// Where a deployment stands on one input partition.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InputOffset {
    /// The job input's name.
    pub input: String,
    /// The log topic the input is bound to.
    pub topic: String,
    /// The partition of that topic.
    pub partition: u32,
    /// The next offset to read: everything below it is applied.
    pub next: u64,
    /// The last applied record: its offset and its checksum
    /// ([`crate::log::Record::fingerprint`]). On resume the log must still
    /// hold that very record, or it lost or rewrote what was applied.
    pub last: Option<(u64, u32)>,
}

/// The first rows of a version table, for display.
#[derive(Clone, Debug, PartialEq)]
pub struct TablePage {
    /// The version table read (`OUTPUT__vN`).
    pub table: String,
    /// Its column names, in schema order.
    pub columns: Vec<String>,
    /// Whether the output is a bag (its view shows `kappa_count`).
    pub bag: bool,
    /// Rows in order, each with its multiplicity.
    pub rows: Vec<(Row, isize)>,
    /// Distinct rows in the whole table.
    pub distinct: u64,
    /// Rows counted with their multiplicities.
    pub total: u64,
}

/// A deployment for tests of what shows deployments: building version 1
/// (id 1) of `job`, writing `output` keyed by its one column `column`.
#[cfg(test)]
impl Deployment {
    pub(crate) fn example(job: &str, output: &str, column: &str) -> Deployment {
        Deployment {
            id: 1,
            job: job.into(),
            job_version: 1,
            version: TableVersion(1),
            params: vec![],
            inputs: vec![],
            outputs: vec![OutputSchema {
                name: output.into(),
                columns: vec![column.into()],
                key: vec![0],
            }],
            state: DeploymentState::Building,
            created_at: 0,
            caught_up_at: None,
            swapped_at: None,
            progress: Progress::default(),
            note: None,
            generation: 1,
            half_written: false,
            reading: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_display_and_parse() {
        assert_eq!(TableVersion(7).to_string(), "v7");
        assert_eq!("7".parse::<TableVersion>(), Ok(TableVersion(7)));
        assert_eq!("v12".parse::<TableVersion>(), Ok(TableVersion(12)));
        assert!("v0".parse::<TableVersion>().is_err());
        assert!("x".parse::<TableVersion>().is_err());
    }

    #[test]
    fn states_round_trip() {
        use DeploymentState::*;
        for s in [Building, Live, Retired, Dropped] {
            assert_eq!(s.as_str().parse::<DeploymentState>(), Ok(s));
        }
        assert!(Building.accepts_epochs() && Live.accepts_epochs());
        assert!(!Retired.accepts_epochs() && !Dropped.accepts_epochs());
    }

    #[test]
    fn eta_is_lag_over_rate() {
        let lag = |n| PartitionLag {
            topic: "t".into(),
            partition: 0,
            lag: n,
        };
        let mut p = Progress {
            lag: vec![lag(600), lag(400)],
            records_per_sec: Some(100.0),
            ..Progress::default()
        };
        assert_eq!(p.total_lag(), 1000);
        assert_eq!(p.eta(), Some(Duration::from_secs(10)));
        p.records_per_sec = Some(0.0);
        assert_eq!(p.eta(), None);
        p.lag.clear();
        assert_eq!(p.eta(), Some(Duration::ZERO));
    }

    #[test]
    fn bags_are_outputs_keyed_by_every_column() {
        let schema = |key: Vec<usize>| OutputSchema {
            name: "o".into(),
            columns: vec!["a".into(), "b".into()],
            key,
        };
        assert!(is_bag(&schema(vec![0, 1])));
        assert!(!is_bag(&schema(vec![0])));
        assert!(!is_bag(&schema(vec![])));
    }
}
