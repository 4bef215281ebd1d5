//! The one interface the runners, the engine and the CLI use: a
//! [`TableStore`] is SQLite or PostgreSQL, and no caller knows which.
//!
//! Every implementation keeps the same contract (the tests in
//! `contract.rs` run against each):
//! - a deployment's catalog row, tables and (when live) views appear in one
//!   transaction; versions are never reused; at most one deployment is live
//!   per output;
//! - an epoch's changes, the offsets they cover and its figures commit in one
//!   transaction, checked against the owner's [`Lease`], or not at all;
//! - readers of a view see whole epochs and whole swaps.

use std::collections::BTreeMap;

use crate::value::Row;

use super::diff::{TableDiff, diff_rows};
use super::{
    Deployment, DeploymentLock, DeploymentState, EpochStats, InputOffset, Lease, NewDeployment,
    SinkMessage, SinkSpec, StateSummary, StateWrite, StoredState, TableError, TablePage,
};

/// The output tables of deployments, with their catalog: see the module docs
/// of [`crate::table`].
pub trait TableStore: Send + std::fmt::Debug {
    /// Where the store is, for messages: a path, or a URL without its password.
    fn describe(&self) -> String;

    /// Takes the lock that keeps a second process from driving deployment
    /// `d` (`Owned`, naming the holder, when one does).
    fn lock(&self, d: &Deployment) -> Result<DeploymentLock, TableError>;

    /// Creates a deployment in state `building` or `live` with its tables
    /// (and, when live, its views), all in one transaction. Names are
    /// checked first; nothing is written when any is invalid.
    fn create_deployment(&mut self, d: &NewDeployment) -> Result<Deployment, TableError>;

    /// The deployment with this id, in any state.
    fn deployment(&self, id: i64) -> Result<Deployment, TableError>;

    /// Every deployment, oldest first (for status and list).
    fn deployments(&self) -> Result<Vec<Deployment>, TableError>;

    /// Every deployment that has (or had) output `output`, by version.
    fn deployments_of(&self, output: &str) -> Result<Vec<Deployment>, TableError>;

    /// The live deployment of `job` whose outputs are exactly `outputs` (in
    /// any order): what a restarted `kappa stream` resumes.
    fn live_for_job(
        &self,
        job: &str,
        outputs: &[String],
    ) -> Result<Option<Deployment>, TableError> {
        let names = |it: &mut dyn Iterator<Item = &str>| {
            let mut v: Vec<String> = it.map(str::to_ascii_lowercase).collect();
            v.sort();
            v
        };
        let wanted = names(&mut outputs.iter().map(String::as_str));
        Ok(self.deployments()?.into_iter().find(|d| {
            d.job == job
                && d.state == DeploymentState::Live
                && names(&mut d.outputs.iter().map(|o| o.name.as_str())) == wanted
        }))
    }

    /// The deployment that owns `output` at `version`, in any state, or the
    /// live one when `version` is `None`.
    fn find_by_output(&self, output: &str, version: Option<u32>) -> Result<Deployment, TableError>;

    /// The committed offsets of a deployment: (input, partition) → the next
    /// offset to read. Empty for a deployment that never committed.
    fn offsets(&self, id: i64) -> Result<BTreeMap<(String, u32), u64>, TableError> {
        Ok(self
            .input_offsets(id)?
            .into_iter()
            .map(|o| ((o.input, o.partition), o.next))
            .collect())
    }

    /// Where the deployment stands on each input partition, with the last
    /// applied record of each (what a resuming owner checks the log against).
    fn input_offsets(&self, id: i64) -> Result<Vec<InputOffset>, TableError>;

    /// Records progress (lag, rate, bad rows) without changes.
    fn set_progress(&mut self, lease: &Lease, stats: &EpochStats) -> Result<(), TableError>;

    /// Records that the deployment has caught up with its inputs (now).
    fn mark_caught_up(&mut self, lease: &Lease) -> Result<(), TableError>;

    /// Sets the free-text note shown by `kappa table status`.
    fn set_note(&mut self, id: i64, note: Option<&str>) -> Result<(), TableError>;

    /// Records how the deployment's inputs are read ([`Deployment::reading`]).
    fn set_reading(&mut self, id: i64, reading: &str) -> Result<(), TableError>;

    /// Turns a retired deployment back into a building one (a rollback's start).
    fn reopen(&mut self, id: i64) -> Result<(), TableError>;

    /// Makes this process the deployment's owner: bumps its generation and
    /// records `owner`, in one transaction. Refuses a retired or dropped one.
    /// Empties a deployment whose epoch was left half-written (see
    /// [`TableStore::commit_epoch_with_sinks`]).
    fn take_over(&mut self, id: i64, owner: &str) -> Result<Lease, TableError>;

    /// Fails with `Fenced` when another process took the deployment over
    /// since `lease` was taken.
    fn check_lease(&self, lease: &Lease) -> Result<(), TableError>;

    /// The process that last took the deployment over, if any.
    fn owner(&self, id: i64) -> Result<Option<String>, TableError>;

    /// The exactly-once commit: in one transaction, applies `changes` (one
    /// consolidated list per output, in the deployment's output order), sets
    /// the offsets, stores the figures, writes each changelog sink's
    /// messages into the outbox, and writes `state` (see
    /// [`crate::table::state`]). `StateConflict` (nothing written) when the
    /// deployment is retired or dropped, `Fenced` when another process took
    /// it over, `RetractMissing` when a retraction finds no such row.
    ///
    /// A store may write a large epoch of a building deployment that was
    /// never live in several transactions, provided that until the last
    /// one (which sets the offsets and the state) no swap and no read sees
    /// it, and that the next [`TableStore::take_over`] empties such a
    /// deployment (its state included) to be replayed from the start
    /// (SQLite does, for a single write lock's sake; see
    /// `table::sqlite`'s `epoch.rs`).
    #[allow(clippy::too_many_arguments)]
    fn commit_epoch_with_state(
        &mut self,
        lease: &Lease,
        changes: &[Vec<(Row, isize)>],
        offsets: &[InputOffset],
        stats: &EpochStats,
        sinks: &[SinkSpec],
        state: &StateWrite<'_>,
    ) -> Result<(), TableError>;

    /// [`TableStore::commit_epoch_with_state`] by a run that keeps no
    /// state: any stored state is removed with the commit.
    fn commit_epoch_with_sinks(
        &mut self,
        lease: &Lease,
        changes: &[Vec<(Row, isize)>],
        offsets: &[InputOffset],
        stats: &EpochStats,
        sinks: &[SinkSpec],
    ) -> Result<(), TableError> {
        self.commit_epoch_with_state(lease, changes, offsets, stats, sinks, &StateWrite::Clear)
    }

    /// Writes state outside an epoch's commit (a merge, or the state a
    /// replay rebuilt), checked against the owner's lease.
    fn write_state(&mut self, lease: &Lease, state: &StateWrite<'_>) -> Result<(), TableError>;

    /// The deployment's stored state, its pieces checked against their
    /// checksums; `None` when it keeps none.
    fn load_state(&self, id: i64) -> Result<Option<StoredState>, TableError>;

    /// How much state the deployment keeps, and since when; `None` when it
    /// keeps none.
    fn state_summary(&self, id: i64) -> Result<Option<StateSummary>, TableError>;

    /// [`TableStore::commit_epoch_with_sinks`] without sinks.
    fn commit_epoch(
        &mut self,
        lease: &Lease,
        changes: &[Vec<(Row, isize)>],
        offsets: &[InputOffset],
        stats: &EpochStats,
    ) -> Result<(), TableError> {
        self.commit_epoch_with_sinks(lease, changes, offsets, stats, &[])
    }

    /// Makes deployment `id` live for all its outputs in one transaction,
    /// retiring the deployments that were live for any of them; returns their
    /// ids. Works from `building` and from `retired` (a rollback).
    fn swap(&mut self, id: i64) -> Result<Vec<i64>, TableError>;

    /// [`TableStore::swap`] by the deployment's owner: `Fenced` when another
    /// process took it over.
    fn swap_owned(&mut self, lease: &Lease) -> Result<Vec<i64>, TableError>;

    /// Drops a building or retired deployment's tables and marks it `dropped`.
    fn drop_deployment(&mut self, id: i64) -> Result<(), TableError>;

    /// The deployment lock of the deployment this store commits for: a
    /// store that reconnects to its server keeps it (takes it again if it
    /// was lost with the server) before it runs a transaction again.
    fn keep_lock_on_reconnect(&mut self, lock: std::sync::Arc<DeploymentLock>) {
        // A store without connections to lose has nothing to keep.
        let _ = lock;
    }

    /// Removes a deployment that never committed an epoch, as if it had never
    /// been created; `false`, changing nothing, once it has or when its state
    /// is no longer `created_as`.
    fn abandon_unused(
        &mut self,
        lease: &Lease,
        created_as: DeploymentState,
    ) -> Result<bool, TableError>;

    /// Drops the retired deployments of these outputs beyond the `keep` most
    /// recently live ones; returns the dropped ids.
    fn retire_old(&mut self, outputs: &[String], keep: usize) -> Result<Vec<i64>, TableError>;

    /// Every row of version table `table` (`OUTPUT__vN`) with its
    /// multiplicity, sorted by `Row`'s order.
    fn read_rows(&self, table: &str) -> Result<Vec<(Row, isize)>, TableError>;

    /// The first `limit` rows of `table` in SQL order, with its row counts.
    fn read_page(&self, table: &str, limit: usize) -> Result<TablePage, TableError>;

    /// The number of distinct rows of `table`, and of rows counted with
    /// their multiplicities.
    fn row_counts(&self, table: &str) -> Result<(u64, u64), TableError>;

    /// The difference between `output` at version `from` and at `to`.
    /// Refused (`NotComparable`) when the versions' columns differ.
    fn diff(
        &self,
        output: &str,
        from: u32,
        to: u32,
        limit: usize,
    ) -> Result<TableDiff, TableError> {
        let (a, b) = (
            self.find_by_output(output, Some(from))?,
            self.find_by_output(output, Some(to))?,
        );
        let (ia, ib) = (
            a.output_index(output).expect("found by this output"),
            b.output_index(output).expect("found by this output"),
        );
        let (sa, sb) = (&a.outputs[ia], &b.outputs[ib]);
        let shared = super::diff::comparable(output, from, to, sa, sb)?;
        let (rows_a, rows_b) =
            shared.project(self.read_rows(&a.table(ia))?, self.read_rows(&b.table(ib))?);
        let (counts, examples) = diff_rows(rows_a, rows_b, &shared.key, limit);
        Ok(TableDiff {
            columns: shared.columns,
            key: shared.key,
            added_columns: shared.added,
            removed_columns: shared.removed,
            bag: super::deployment::is_bag(sa),
            counts,
            examples,
        })
    }

    /// The changelog sinks' messages not yet sent, by sink and sequence.
    fn outbox(&self, id: i64) -> Result<Vec<SinkMessage>, TableError>;

    /// Deletes `sink`'s messages up to `seq`, once they were sent.
    fn clear_outbox(&mut self, lease: &Lease, sink: &str, seq: i64) -> Result<(), TableError>;
}
