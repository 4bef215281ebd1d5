//! The committer of a stream run: the single writer that turns each
//! completed epoch's output changes, and the input offsets that epoch
//! covers, into ONE table-store transaction. It runs on a thread of its
//! own in the first process ([`Committer::spawn`]), fed the complete epochs
//! in order by worker 0's gatherer (`runner/epochs.rs`), so that the
//! workers read the next epoch while it writes one.
//!
//! Invariants (the exactly-once mechanism):
//! - epochs are committed in order, each exactly once, and only when the
//!   dataflow's frontier has passed it (no more changes at that time can come);
//!   while far behind, consecutive epochs may be merged into one commit
//!   ([`Hold`]), with the last one's offsets, and whatever is held is
//!   committed when the run ends;
//! - an epoch's offsets are exactly those of the records inserted at that
//!   epoch (workers record them before inserting the rows), so after any
//!   crash the table and its offsets agree;
//! - epoch 0 is the replay of what is already committed: its changes are
//!   the table's current content, so they are dropped, not applied — except
//!   on a deployment that has never committed an epoch, whose tables are
//!   empty while epoch 0 holds the job's output over no input (a SQL global
//!   aggregate's one row: `count(*)` is 0 over nothing): that is committed
//!   as its first epoch;
//! - with checkpoints ([`Keeper`]), every commit writes the state its
//!   records changed in the same transaction, and epoch 0's replay (when
//!   there was no usable state to restore) is stored as the whole state
//!   before anything else is committed: the stored state always covers
//!   exactly the committed offsets (`runner/checkpoint.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::checkpoint::Keeper;
use super::epochs::Epoch;
use crate::english::count;
use crate::job::Time;
use crate::metrics::StreamMetrics;
use crate::sink::changelog::ChangelogSink;
use crate::source::records::RecordLog;
use crate::table::{
    Deployment, DeploymentLock, DeploymentState, EpochStats, InputOffset, Lease, PartitionLag,
    SinkSpec, StatePiece, StateWrite, SwapRule, TableError, TableStore,
};
use crate::value::Row;

/// How often the deployment lock is checked (see `Committer::keep_lock`):
/// well within any `idle_session_timeout` an administrator would set.
const LOCK_CHECK_EVERY: Duration = Duration::from_millis(200);

/// How often a running stream prints a progress (or idle) line.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Longest a live version's epochs are held back for merging (see [`Hold`]):
/// readers see a stream that is catching up move on at least this often.
const HOLD_LIVE: Duration = Duration::from_secs(1);

/// The same for a version that is not live yet: no one reads it before
/// the swap, so the bound only limits what a crash makes the next owner
/// read again.
const HOLD_BUILDING: Duration = Duration::from_secs(10);

/// When the committer merges epochs rather than commit each: while the log
/// holds at least `budget` records beyond the epochs it has (so the next
/// comes as soon as the workers have read it), up to `budget` output
/// changes, and for at most [`HOLD_LIVE`] ([`HOLD_BUILDING`]). A keyed output
/// rewrites every group an epoch changed, so a backlog cut into epochs (the
/// first ones small, while the epoch sizer learns what the job makes) was
/// written once per epoch; merged, each group is written once per commit.
/// Merging is exactly-once as committing each is: the merged changes and
/// the last epoch's offsets go in one transaction.
#[derive(Clone, Copy, Debug)]
pub struct Hold {
    /// Most output changes held (after merging), and least lag, in
    /// records, behind the log end after the epochs held: what the workers'
    /// epochs may make when they grow, and so what a next epoch may read.
    pub budget: usize,
}

/// What a worker tells the committer about one epoch, through the
/// dataflow, at that epoch's time: sent before the worker inserts the
/// epoch's rows (or instead of them, when it failed), so the committer has
/// every worker's report of an epoch, in whatever process, before the
/// frontier passes it.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct EpochReport {
    /// The worker (global index) reporting.
    pub worker: usize,
    /// Where each of its partitions stands at the epoch's end.
    pub offsets: Vec<InputOffset>,
    /// Records it read in the epoch.
    pub records: u64,
    /// `(input, partition, late events dropped in total)` for its
    /// partitions under the `drop` late-event policy.
    pub late: Vec<(String, u32, u64)>,
    /// Bad rows it skipped in the epoch (epoch 0: in the replay).
    pub bad_rows: u64,
    /// Its failure: nothing of this epoch, or after it, may be committed.
    pub failure: Option<String>,
    /// The times of the last record read on each of its partitions (for
    /// the append-to-visible and event-time lag metrics).
    pub last_records: Vec<LastRecord>,
    /// What its records changed in its partitions' state, for the
    /// checkpoint (epoch 0: the state the replay rebuilt).
    pub state: Vec<StatePiece>,
}

/// When the last record read on a partition was appended, and its event time.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct LastRecord {
    /// The input the partition belongs to.
    pub input: String,
    /// Its topic.
    pub topic: String,
    /// The partition.
    pub partition: u32,
    /// The record's append time (unix ms).
    pub append_ts: i64,
    /// The record's event time (unix ms), when its producer gave one.
    pub event_ts: Option<i64>,
}

/// What a building version does once it has caught up with the log.
#[derive(Clone, Debug)]
pub struct CatchUp {
    /// Caught up when the total lag behind the log end is at most this.
    pub max_lag: u64,
    /// Whether to swap the views to this version when caught up.
    pub swap: SwapPolicy,
    /// Retired versions kept after a swap (older ones are dropped).
    pub keep: usize,
}

/// Whether a building version goes live by itself once caught up.
#[derive(Clone, Debug, PartialEq)]
pub enum SwapPolicy {
    /// Swap at once.
    Auto,
    /// Wait for `kappa table swap`.
    Manual,
    /// Compare every output with its live version once, on catch-up, and
    /// swap only if the diff meets the rule; else wait as `Manual`, saying why.
    AutoIf(SwapRule),
}

/// An epoch's changes, per output ([`Epoch::outputs`]).
type Changes = Vec<Vec<(Row, isize)>>;

/// A changelog sink, open, and which output it carries.
pub type Sink = (SinkSpec, Box<dyn ChangelogSink>);

/// The committer's state (it runs on a thread of its own: [`Committer::spawn`]).
pub struct Committer {
    /// Set once a building version has caught up (it may still await a manual swap).
    caught_up: bool,
    /// Set while the deployment is building: when and how it goes live.
    catch_up: Option<CatchUp>,
    /// Last time the deployment's state was checked while idle.
    last_state_check: Instant,
    store: Box<dyn TableStore>,
    /// This process's ownership of the deployment (checked by every write).
    lease: Lease,
    /// Each input topic's log (for lag), by the topic's name in the offsets.
    topics: BTreeMap<String, Arc<dyn RecordLog>>,
    /// Per partition `(topic, partition)`, the committed next offset (for lag).
    positions: BTreeMap<(String, u32), u64>,
    /// The next epoch to commit.
    next: Time,
    /// Bad rows skipped in the epochs up to the last one committed (the
    /// replay's included: a replay meets them again).
    bad_rows: u64,
    records_total: u64,
    started: Instant,
    last_report: Instant,
    /// When this run last committed an epoch that read records.
    last_record: Option<Instant>,
    lag: Vec<PartitionLag>,
    /// Late events dropped per `(input, partition)`, as of the last commit.
    late: BTreeMap<(String, u32), u64>,
    quiet: bool,
    metrics: Option<Arc<StreamMetrics>>,
    /// When the lag was last read from the log while idle.
    idle_lag_at: Instant,
    /// Since when a log has not said where its end is (a broker that does
    /// not answer), for the idle line.
    silent_since: Option<Instant>,
    /// Changelog sinks, and which output each carries.
    sinks: Vec<Sink>,
    /// A sink failed: the outbox holds messages to send again.
    outbox_pending: bool,
    /// The deployment has never committed an epoch: epoch 0's changes
    /// (the output over no input) are its first commit.
    seed: bool,
    /// Where committed epochs' rows are freed (see [`Committer::free`]).
    freer: Option<SyncSender<Changes>>,
    /// When epochs may be merged before they are committed.
    hold: Option<Hold>,
    /// The epochs received and not committed yet, merged, and since when.
    held: Option<(Epoch, Instant)>,
    /// Checkpoints: writes each epoch's state and merges it (`None`: the
    /// run keeps no state, and its first commit clears any).
    keeper: Option<Keeper>,
    /// The state was restored: epoch 0 replayed nothing to store.
    restored: bool,
    /// The deployment lock this process holds (on process 0), and when
    /// it was last checked.
    lock: Option<Arc<DeploymentLock>>,
    lock_checked: Instant,
}

/// The committer's fixed parts.
pub struct CommitterSetup {
    /// The table store, open for writing.
    pub store: Box<dyn TableStore>,
    /// This process's ownership of the deployment.
    pub lease: Lease,
    /// Each input topic's log (for lag), by the topic's name in the offsets.
    pub topics: BTreeMap<String, Arc<dyn RecordLog>>,
    /// Per `(topic, partition)`, the committed next offset.
    pub positions: BTreeMap<(String, u32), u64>,
    /// Set while the deployment is building: when and how it goes live.
    pub catch_up: Option<CatchUp>,
    /// No progress lines on stderr.
    pub quiet: bool,
    /// Where to record what is committed.
    pub metrics: Option<Arc<StreamMetrics>>,
    /// Changelog sinks, and which output each carries.
    pub sinks: Vec<Sink>,
    /// When epochs may be merged before they are committed (never with
    /// sinks: each epoch's changes are their messages).
    pub hold: Option<Hold>,
    /// Checkpoints, when the run keeps them.
    pub keeper: Option<Keeper>,
    /// Whether the run restored a checkpoint (so epoch 0 replayed nothing,
    /// and bad rows are counted on from the deployment's total).
    pub restored: bool,
    /// The deployment lock this process holds, kept between epochs.
    pub lock: Option<Arc<DeploymentLock>>,
}

impl Committer {
    /// A committer that has committed nothing yet in this run.
    pub fn new(mut setup: CommitterSetup) -> Result<Committer, TableError> {
        let now = Instant::now();
        if let Some(lock) = &setup.lock {
            setup.store.keep_lock_on_reconnect(lock.clone());
        }
        let progress = setup.store.deployment(setup.lease.deployment)?.progress;
        let seed = progress.epochs == 0;
        // A replay meets the bad rows it applied again; a restore does not.
        let bad_rows = if setup.restored { progress.bad_rows } else { 0 };
        let hold = setup.hold.filter(|_| setup.sinks.is_empty());
        let mut committer = Committer {
            caught_up: false,
            catch_up: setup.catch_up,
            last_state_check: now,
            store: setup.store,
            lease: setup.lease,
            topics: setup.topics,
            positions: setup.positions,
            next: 0,
            bad_rows,
            records_total: 0,
            started: now,
            last_report: now,
            last_record: None,
            lag: Vec::new(),
            late: BTreeMap::new(),
            quiet: setup.quiet,
            metrics: setup.metrics,
            idle_lag_at: now,
            silent_since: None,
            sinks: setup.sinks,
            outbox_pending: false,
            seed,
            freer: None,
            hold,
            held: None,
            keeper: setup.keeper,
            restored: setup.restored,
            lock: setup.lock,
            lock_checked: now,
        };
        if let Some(keeper) = committer.keeper.as_mut() {
            let id = committer.lease.deployment;
            if let Some(summary) = committer.store.state_summary(id)? {
                keeper.stored(&summary);
            }
        }
        committer.refresh_lag();
        // What the last owner committed but did not get to send.
        committer.drain_outbox();
        Ok(committer)
    }

    /// Whether epoch 0's changes are to be committed: the deployment has
    /// never committed an epoch (see the module's invariants).
    pub fn keeps_replay(&self) -> bool {
        self.seed
    }

    /// Whether the deployment is building and has not caught up yet.
    pub fn awaits_catch_up(&self) -> bool {
        self.catch_up.is_some() && !self.caught_up
    }

    /// Commits the next epoch (epochs come in order, each once, complete:
    /// see `runner/epochs.rs`), then checks the deployment's state. After
    /// an error nothing more may be committed: a later epoch's offsets
    /// would cover the changes that were not applied.
    pub fn commit_epoch(&mut self, epoch: Epoch) -> Result<(), TableError> {
        debug_assert_eq!(epoch.time, self.next, "epochs are committed in order");
        let time = epoch.time;
        self.bad_rows += epoch.log.bad_rows;
        if time == 0 {
            self.store_replayed(&epoch.log.state)?;
        }
        if time > 0 || (self.seed && !epoch.is_unchanged()) {
            self.commit_or_hold(epoch)?;
        }
        self.seed = false;
        self.next = time + 1;
        self.after_epoch()
    }

    /// Epoch 0: stores the state the replay rebuilt as the whole state
    /// (it covers exactly the committed offsets), unless it was restored.
    fn store_replayed(&mut self, pieces: &[StatePiece]) -> Result<(), TableError> {
        let (Some(keeper), false) = (&self.keeper, self.restored) else {
            return Ok(());
        };
        let write = StateWrite::Replace {
            digest: &keeper.digest,
            pieces,
        };
        self.store.write_state(&self.lease, &write)?;
        let bytes: usize = pieces.iter().map(|p| p.bytes.len()).sum();
        if let Some(keeper) = self.keeper.as_mut() {
            keeper.replaced(bytes as u64);
        }
        if !self.quiet && !pieces.is_empty() {
            say!(
                "kappa stream: checkpointed the state the replay rebuilt ({})",
                crate::english::bytes(bytes as u64)
            );
        }
        Ok(())
    }

    /// Merges the state's pieces into a full checkpoint, when due (or
    /// `now`, as the run ends).
    fn checkpoint(&mut self, now: bool) -> Result<(), TableError> {
        let Some(keeper) = self.keeper.as_mut() else {
            return Ok(());
        };
        if !(keeper.due() || (now && keeper.worth_merging())) {
            return Ok(());
        }
        let started = Instant::now();
        let (pieces, bytes) = keeper.merge(&mut *self.store, &self.lease)?;
        if let Some(metrics) = &self.metrics {
            metrics.record_checkpoint(started.elapsed(), bytes as u64);
        }
        tracing::info!(
            "checkpoint: {pieces} partition states, {bytes} bytes, in {:?}",
            started.elapsed()
        );
        Ok(())
    }

    /// Commits `epoch`, merged with the epochs held, or holds it too (see
    /// [`Hold`]).
    fn commit_or_hold(&mut self, epoch: Epoch) -> Result<(), TableError> {
        // An epoch that read nothing found the log drained: no next one is
        // coming at once, and an idle stream asks the log for no lag.
        let idle = epoch.log.records == 0 && epoch.is_unchanged();
        let (merged, since) = match self.held.take() {
            Some((mut held, since)) => {
                held.absorb(epoch);
                (held, since)
            }
            None => (epoch, Instant::now()),
        };
        if !idle && self.may_hold(&merged, since) {
            self.held = Some((merged, since));
            return Ok(());
        }
        self.commit(merged)
    }

    /// Whether `epoch` (merged since `since`) may wait for the next one.
    fn may_hold(&self, epoch: &Epoch, since: Instant) -> bool {
        let Some(hold) = self.hold else {
            return false;
        };
        let (longest, caught_up_at) = match &self.catch_up {
            Some(c) => (HOLD_BUILDING, c.max_lag),
            None => (HOLD_LIVE, 0),
        };
        epoch.changes() <= hold.budget
            && since.elapsed() < longest
            && self.lag_after(&epoch.log.offsets) >= (hold.budget as u64).max(caught_up_at + 1)
    }

    /// Commits the epochs held, if any: the run is over (nothing more
    /// comes). `None` when nothing was held.
    fn flush(&mut self) -> Option<Result<(), TableError>> {
        let (epoch, _) = self.held.take()?;
        Some(self.commit(epoch))
    }

    /// Runs the committer on a thread of its own, so that a large commit
    /// does not stall worker 0's part of the dataflow: epochs sent to the
    /// returned sender are committed in order, and `after` is told each
    /// result. The sender holds no epoch while one is being committed (a
    /// send waits for the committer to take it), which bounds memory to
    /// about two epochs; it fails once the committer has stopped on an
    /// error. The thread ends when the sender is dropped.
    pub fn spawn(
        mut self,
        mut after: impl FnMut(&Committer, Result<(), TableError>) + Send + 'static,
    ) -> std::io::Result<(SyncSender<Epoch>, JoinHandle<()>)> {
        let (to, epochs) = sync_channel::<Epoch>(0);
        let (free, freed) = sync_channel::<Changes>(0);
        std::thread::Builder::new()
            .name("kappa:free".into())
            .spawn(move || freed.into_iter().for_each(drop))?;
        self.freer = Some(free);
        let thread = std::thread::Builder::new()
            .name("kappa:commit".into())
            .spawn(move || {
                for epoch in epochs {
                    let result = self.commit_epoch(epoch);
                    let failed = result.is_err();
                    after(&self, result);
                    if failed {
                        return;
                    }
                }
                if let Some(result) = self.flush() {
                    let failed = result.is_err();
                    after(&self, result);
                    if failed {
                        return;
                    }
                }
                // The run is over: its state is merged into one checkpoint.
                if let Err(e) = self.checkpoint(true) {
                    after(&self, Err(e));
                }
            })?;
        Ok((to, thread))
    }

    /// The deployment lock can be lost with its connection while this
    /// process lives (a server restart, an idle timeout): it is taken
    /// again before the next commit, or the run stops if another process
    /// holds it now.
    fn keep_lock(&mut self) -> Result<(), TableError> {
        // A building version comes here every epoch: a lock without a
        // keeper thread (a check, or a round trip) is checked a few times a
        // second, not per epoch; one with a thread only reports its failure.
        let Some(lock) = self
            .lock
            .as_ref()
            .filter(|_| self.lock_checked.elapsed() >= LOCK_CHECK_EVERY)
        else {
            return Ok(());
        };
        self.lock_checked = Instant::now();
        lock.check()
    }

    /// Between epochs: a building version checks whether it has caught up
    /// (and swaps in); every version notices, even when idle, that it was
    /// retired by a swap elsewhere or taken over by another process
    /// (`commit_epoch` would refuse its next epoch).
    fn after_epoch(&mut self) -> Result<(), TableError> {
        // A building version checks every epoch (it must not miss the moment
        // it catches up); a live one a few times a second.
        if self.catch_up.is_none() && self.last_state_check.elapsed() < Duration::from_millis(200) {
            return Ok(());
        }
        self.last_state_check = Instant::now();
        self.store.check_lease(&self.lease)?;
        self.keep_lock()?;
        let state = self.store.deployment(self.lease.deployment)?.state;
        if !state.accepts_epochs() {
            return Err(TableError::StateConflict {
                id: self.lease.deployment,
                name: self.store.deployment(self.lease.deployment)?.to_string(),
                state,
                action: "apply epochs",
            });
        }
        let Some(catch_up) = self.catch_up.clone() else {
            return Ok(());
        };
        if self.next < 2 {
            // Epoch 0 is the replay of what was committed before; lag is
            // only meaningful once this run has committed an epoch of its own.
            return Ok(());
        }
        if state == DeploymentState::Live {
            // Swapped in by hand (`kappa table swap`).
            if let Some(metrics) = &self.metrics {
                metrics.set_state(state);
            }
            self.catch_up = None;
            return Ok(());
        }
        self.refresh_lag();
        let lag: u64 = self.lag.iter().map(|l| l.lag).sum();
        if lag > catch_up.max_lag {
            return Ok(());
        }
        self.caught_up = true;
        let d = self.store.deployment(self.lease.deployment)?;
        if d.caught_up_at.is_none() {
            self.store.mark_caught_up(&self.lease)?;
            let waiting = match &catch_up.swap {
                SwapPolicy::Manual => format!(
                    "; waiting for `kappa table swap {} --version {}`",
                    d.outputs[0].name, d.version.0
                ),
                _ => String::new(),
            };
            say!("kappa: {} caught up (lag {lag}){waiting}", d.version);
        }
        match &catch_up.swap {
            SwapPolicy::Manual => Ok(()),
            SwapPolicy::Auto => self.swap_in(&d, catch_up.keep),
            SwapPolicy::AutoIf(rule) => match self.review(&d, rule)? {
                Ok(()) => self.swap_in(&d, catch_up.keep),
                Err(why) => {
                    let output = &d.outputs[0].name;
                    say!(
                        "kappa: not swapping {} in: {why} (rule '{rule}'); review it with \
                         `kappa table diff {output} --to {}` and swap it in with \
                         `kappa table swap {output} --version {}`",
                        d.version,
                        d.version.0,
                        d.version.0
                    );
                    self.catch_up = Some(CatchUp {
                        swap: SwapPolicy::Manual,
                        ..catch_up
                    });
                    Ok(())
                }
            },
        }
    }

    /// Whether every output of `d` differs from its live version within
    /// `rule` (an output with no live version passes): the first breach,
    /// named by output, otherwise.
    fn review(&self, d: &Deployment, rule: &SwapRule) -> Result<Result<(), String>, TableError> {
        for o in &d.outputs {
            let live = match self.store.find_by_output(&o.name, None) {
                Ok(live) => live,
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            };
            let diff = match self.store.diff(&o.name, live.version.0, d.version.0, 0) {
                Ok(diff) => diff,
                // The rule cannot be evaluated: wait for a review, as
                // `--swap manual` does, and say why.
                Err(e @ TableError::NotComparable { .. }) => {
                    return Ok(Err(format!("the rule cannot be evaluated: {e}")));
                }
                Err(e) => return Err(e),
            };
            if !diff.removed_columns.is_empty() {
                return Ok(Err(format!(
                    "{} {} drops the columns {} of {}, which no rule can accept",
                    o.name,
                    d.version,
                    diff.removed_columns.join(", "),
                    live.version
                )));
            }
            if let Err(why) = rule.check(&diff.counts) {
                return Ok(Err(format!(
                    "{} {} against {}: {why}",
                    o.name, d.version, live.version
                )));
            }
            let columns = match diff.added_columns.as_slice() {
                [] => String::new(),
                added => format!(" on the columns both have (it adds {})", added.join(", ")),
            };
            say!(
                "kappa: {} {} against {}{columns}: {} added, {} removed, {} changed of {} keys, within '{rule}'",
                o.name,
                d.version,
                live.version,
                diff.counts.added,
                diff.counts.removed,
                diff.counts.changed,
                diff.counts.from_keys
            );
        }
        Ok(Ok(()))
    }

    /// A live version is caught up the first time its lag reaches 0 (`table
    /// status` and the status page show when); a building one is marked in
    /// `after_epoch`, where it may also swap.
    fn note_live_caught_up(&mut self) -> Result<(), TableError> {
        if self.catch_up.is_some() || self.caught_up || self.lag.iter().any(|l| l.lag > 0) {
            return Ok(());
        }
        self.caught_up = true;
        if self
            .store
            .deployment(self.lease.deployment)?
            .caught_up_at
            .is_none()
        {
            self.store.mark_caught_up(&self.lease)?;
        }
        Ok(())
    }

    /// Makes `d` live, drops the retired versions beyond `keep`, and says so.
    fn swap_in(&mut self, d: &Deployment, keep: usize) -> Result<(), TableError> {
        let retired = self.store.swap_owned(&self.lease)?;
        let outputs: Vec<String> = d.outputs.iter().map(|o| o.name.clone()).collect();
        let dropped = self.store.retire_old(&outputs, keep)?;
        let versions = |ids: &[i64]| -> Result<String, TableError> {
            let mut names = Vec::new();
            for &id in ids {
                names.push(self.store.deployment(id)?.version.to_string());
            }
            Ok(if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            })
        };
        say!(
            "kappa: swapped {} to {} (retired: {}; dropped: {}); streaming on as the live version",
            outputs.join(","),
            d.version,
            versions(&retired)?,
            versions(&dropped)?
        );
        if let Some(metrics) = &self.metrics {
            metrics.set_state(DeploymentState::Live);
        }
        self.catch_up = None;
        Ok(())
    }

    fn commit(&mut self, epoch: Epoch) -> Result<(), TableError> {
        // An idle epoch (nothing read, nothing changed) needs no transaction.
        if epoch.is_unchanged() && epoch.log.records == 0 {
            self.idle();
            return Ok(());
        }
        let Epoch { time, log, outputs } = epoch;
        // Partitions whose records this epoch makes visible.
        let mut advanced = Vec::new();
        for o in &log.offsets {
            let key = (o.topic.clone(), o.partition);
            if self.positions.insert(key.clone(), o.next) != Some(o.next) {
                advanced.push(key);
            }
        }
        for (input, partition, dropped) in &log.late {
            self.late.insert((input.clone(), *partition), *dropped);
        }
        let mut late_dropped: Vec<(String, u64)> = Vec::new();
        for ((input, _), n) in &self.late {
            match late_dropped.last_mut() {
                Some((last, total)) if last == input => *total += n,
                _ => late_dropped.push((input.clone(), *n)),
            }
        }
        self.records_total += log.records;
        let now = Instant::now();
        if log.records > 0 {
            self.last_record = Some(now);
        }
        self.refresh_lag();
        let elapsed = self.started.elapsed().as_secs_f64().max(1e-9);
        let stats = EpochStats {
            records: log.records,
            bad_rows_total: self.bad_rows,
            epoch_ms: log
                .closed
                .map_or(0, |c| now.duration_since(c).as_millis() as u64),
            records_per_sec: self.records_total as f64 / elapsed,
            lag: self.lag.clone(),
            late_dropped,
        };
        let transaction = Instant::now();
        let specs: Vec<SinkSpec> = self.sinks.iter().map(|(spec, _)| spec.clone()).collect();
        let state = match self.keeper.as_mut() {
            Some(keeper) => keeper.append(&log.state),
            None => StateWrite::Clear,
        };
        self.store.commit_epoch_with_state(
            &self.lease,
            &outputs,
            &log.offsets,
            &stats,
            &specs,
            &state,
        )?;
        self.free(outputs);
        self.drain_outbox();
        self.tell_applied(&log.offsets);
        self.checkpoint(false)?;
        if let Some(metrics) = &self.metrics {
            metrics.record_epoch(&stats, transaction.elapsed());
            let now = crate::table::now_ms();
            for r in &log.last_records {
                if advanced.contains(&(r.topic.clone(), r.partition)) {
                    metrics.record_visible(now - r.append_ts);
                }
                if let Some(event_ts) = r.event_ts {
                    metrics.set_event_time(r, event_ts);
                }
            }
        }
        self.note_live_caught_up()?;
        if !self.quiet && now.duration_since(self.last_report) >= PROGRESS_EVERY {
            self.report(time, &stats);
            self.last_report = now;
        }
        Ok(())
    }

    /// Drops a committed epoch's rows, on the freeing thread when there is
    /// one: freeing millions of rows that the workers allocated took a
    /// tenth of the writer's time (Nexmark q0), and a stream with a large
    /// output runs at the writer's pace. The channel holds nothing: the
    /// writer hands an epoch over once the last is freed, so at most one
    /// epoch's rows wait to be freed.
    fn free(&self, outputs: Changes) {
        if let Some(freer) = &self.freer {
            // Fails only if the thread is gone; the rows are dropped here then.
            let _ = freer.send(outputs);
        }
    }

    /// Tells each input's log where the deployment now stands.
    fn tell_applied(&self, offsets: &[InputOffset]) {
        for (topic, log) in &self.topics {
            let mine: Vec<(u32, u64)> = offsets
                .iter()
                .filter(|o| &o.topic == topic)
                .map(|o| (o.partition, o.next))
                .collect();
            log.applied(&mine);
        }
    }

    /// Sends what the outbox holds to each sink and clears what they took.
    /// A sink that fails keeps its messages, sent again after the next
    /// epoch; the tables are never held back by a sink.
    fn drain_outbox(&mut self) {
        if self.sinks.is_empty() {
            return;
        }
        self.outbox_pending = false;
        let pending = match self.store.outbox(self.lease.deployment) {
            Ok(pending) => pending,
            Err(e) => return say!("kappa stream: cannot read the sinks' outbox: {e}"),
        };
        for (spec, sink) in &mut self.sinks {
            let mine: Vec<_> = pending
                .iter()
                .filter(|m| m.sink == spec.name)
                .cloned()
                .collect();
            let Some(last) = mine.last().map(|m| m.seq) else {
                continue;
            };
            let sent = sink.send(&mine).and_then(|()| {
                self.store
                    .clear_outbox(&self.lease, &spec.name, last)
                    .map_err(|e| e.to_string())
            });
            if let Err(e) = sent {
                self.outbox_pending = true;
                say!(
                    "kappa stream: sink {}: {e}; its {} stay in the outbox and are sent again",
                    spec.name,
                    count(mine.len() as u64, "message")
                );
            }
        }
    }

    /// Lag per partition: the log's end offset minus the committed offset.
    pub fn refresh_lag(&mut self) {
        self.lag = lag_at(&self.topics, &self.positions);
    }

    /// The total lag there would be once `offsets` were committed.
    fn lag_after(&self, offsets: &[InputOffset]) -> u64 {
        let mut positions = self.positions.clone();
        for o in offsets {
            positions.insert((o.topic.clone(), o.partition), o.next);
        }
        lag_at(&self.topics, &positions).iter().map(|l| l.lag).sum()
    }

    /// An idle epoch: the lag metric stays current (the log may grow while
    /// nothing is read), and a line every progress interval tells an idle
    /// stream from a stuck one.
    fn idle(&mut self) {
        if self.outbox_pending && self.idle_lag_at.elapsed() >= Duration::from_secs(1) {
            self.drain_outbox();
        }
        if let Some(metrics) = self.metrics.clone()
            && self.idle_lag_at.elapsed() >= Duration::from_secs(1)
        {
            self.idle_lag_at = Instant::now();
            self.refresh_lag();
            metrics.set_lag(&self.lag);
        }
        if self.quiet || self.last_report.elapsed() < PROGRESS_EVERY {
            return;
        }
        self.last_report = Instant::now();
        let (lag, silent) = lag_and_silence(&self.topics, &self.positions);
        self.lag = lag;
        let silent_for = match silent {
            Some(log) => {
                let since = *self.silent_since.get_or_insert_with(Instant::now);
                Some((log, since.elapsed()))
            }
            None => {
                self.silent_since = None;
                None
            }
        };
        let lag: u64 = self.lag.iter().map(|l| l.lag).sum();
        let since_last = self.last_record.map(|t| t.elapsed());
        say!("kappa stream: {}", idle_line(lag, since_last, silent_for));
    }

    /// One progress line on stderr.
    pub fn report(&self, epoch: Time, stats: &EpochStats) {
        let lag: u64 = stats.lag.iter().map(|l| l.lag).sum();
        say!(
            "kappa stream: epoch {epoch}: {} applied, {:.0} records/s, lag {lag}, epoch latency {} ms, {}",
            count(self.records_total, "record"),
            stats.records_per_sec,
            stats.epoch_ms,
            count(stats.bad_rows_total, "bad row")
        );
    }
}

/// The progress line of an epoch that read nothing: `idle` when nothing
/// is left to read, `stalled` when the log holds records the stream does
/// not get (a broker or a peer that does not answer), never `idle` then.
fn idle_line(lag: u64, since_last: Option<Duration>, silent: Option<(String, Duration)>) -> String {
    let last = match since_last {
        Some(t) => format!("last record {} s ago", t.as_secs()),
        None => "no record read since the start".into(),
    };
    if let Some((log, for_)) = silent {
        // Its lag is unknown, so it is no sign of being idle.
        return format!(
            "stalled, waiting for {log} ({} s without an answer), {last}",
            for_.as_secs()
        );
    }
    if lag == 0 {
        format!("idle, lag 0, {last}")
    } else {
        format!(
            "stalled, lag {lag}, {last}: the log holds records that it does not return \
             (is its broker answering?)"
        )
    }
}

/// Per partition of each topic, its log end minus `positions` (the next
/// offset to apply).
fn lag_at(
    topics: &BTreeMap<String, Arc<dyn RecordLog>>,
    positions: &BTreeMap<(String, u32), u64>,
) -> Vec<PartitionLag> {
    lag_and_silence(topics, positions).0
}

/// [`lag_at`], and the first log that did not say where its end is (a
/// broker that does not answer), by its whereabouts.
fn lag_and_silence(
    topics: &BTreeMap<String, Arc<dyn RecordLog>>,
    positions: &BTreeMap<(String, u32), u64>,
) -> (Vec<PartitionLag>, Option<String>) {
    let mut lag = Vec::new();
    let mut silent = None;
    for (topic, log) in topics {
        for partition in 0..log.partitions() {
            let Some(bounds) = log.bounds_for_lag(partition) else {
                silent.get_or_insert_with(|| log.whereabouts());
                continue;
            };
            let at = positions
                .get(&(topic.clone(), partition))
                .copied()
                .unwrap_or(0);
            lag.push(PartitionLag {
                topic: topic.clone(),
                partition,
                lag: bounds.end.saturating_sub(at),
            });
        }
    }
    (lag, silent)
}

/// True when a commit was refused because the deployment is no longer
/// applying epochs (swapped out or dropped): the stream should exit cleanly.
pub fn is_retired(e: &TableError) -> bool {
    matches!(
        e,
        TableError::StateConflict {
            state: DeploymentState::Retired | DeploymentState::Dropped,
            ..
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_epoch_that_reads_nothing_with_lag_is_stalled_never_idle() {
        let ten = Some(Duration::from_secs(10));
        assert_eq!(idle_line(0, ten, None), "idle, lag 0, last record 10 s ago");
        let line = idle_line(120_000, ten, None);
        assert!(
            line.starts_with("stalled, lag 120000, last record 10 s ago"),
            "{line}"
        );
        assert!(idle_line(5, None, None).contains("no record read since the start"));
        // A log that does not answer leaves the lag unknown: never idle.
        let silent = Some((
            "broker 127.0.0.1:9092 (topic ev)".to_string(),
            Duration::from_secs(7),
        ));
        assert_eq!(
            idle_line(0, ten, silent),
            "stalled, waiting for broker 127.0.0.1:9092 (topic ev) (7 s without an answer), last record 10 s ago"
        );
    }
}
