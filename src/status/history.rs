//! The last minutes of each deployment's lag and records applied, sampled
//! from the catalog, for the status page's charts.
//!
//! Kept in memory by the server only: a page opened after a restart of
//! the server starts its charts empty. Samples older than [`KEEP_MS`] are
//! dropped, and so are deployments that are no longer in the catalog or
//! were dropped.

use std::collections::{BTreeMap, VecDeque};

use crate::table::{Deployment, DeploymentState};

/// How far back the charts reach.
pub const KEEP_MS: i64 = 10 * 60 * 1000;

/// One reading of a deployment's progress.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// When it was read (unix ms).
    pub at: i64,
    /// Its total lag then.
    pub lag: u64,
    /// Its records applied then.
    pub records: u64,
}

/// Samples per deployment id, oldest first.
#[derive(Clone, Debug, Default)]
pub struct History {
    by_id: BTreeMap<i64, VecDeque<Sample>>,
}

impl History {
    /// Adds a reading of every deployment at `now` and forgets old ones.
    pub fn record(&mut self, now: i64, deployments: &[Deployment]) {
        self.by_id.retain(|id, _| {
            deployments
                .iter()
                .any(|d| d.id == *id && d.state != DeploymentState::Dropped)
        });
        for d in deployments
            .iter()
            .filter(|d| d.state != DeploymentState::Dropped)
        {
            let samples = self.by_id.entry(d.id).or_default();
            samples.push_back(Sample {
                at: now,
                lag: d.progress.total_lag(),
                records: d.progress.records_applied,
            });
            while samples.front().is_some_and(|s| now - s.at > KEEP_MS) {
                samples.pop_front();
            }
        }
    }

    /// The samples of deployment `id`, oldest first.
    pub fn of(&self, id: i64) -> impl Iterator<Item = &Sample> {
        self.by_id.get(&id).into_iter().flatten()
    }
}
