//! The stream runner: a planned job over log topics, maintaining its outputs
//! as tables, exactly once.
//!
//! Epoch 0 replays every input partition from its earliest retained offset
//! up to the offsets the deployment has committed, rebuilding the job's state
//! without re-applying its output (the committer drops epoch 0). Epochs 1, 2,
//! ... then read what the log holds beyond: a worker closes an epoch as soon
//! as it has read everything visible (or its record limit), or after
//! `max_latency` when nothing arrives, so latency stays low when idle. The
//! limit starts at `max_records` and doubles while epochs fill up (far
//! behind the log end, up to 16x), so a backlog is applied in few large
//! commits. An epoch's records are held until it is read whole and its
//! offsets recorded, then combined (`runner/combine.rs`) and inserted. All
//! output changes go to worker 0, whose committer writes each completed
//! epoch with its offsets in one transaction (`runner/commit.rs`).
//!
//! Partitions are dealt to workers round-robin. Stopping (a signal, an error,
//! or `until_caught_up`) closes a worker's inputs at an epoch boundary; what
//! was inserted is still committed with its offsets, and anything not
//! committed is simply read again on restart.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use timely::dataflow::ProbeHandle;
use timely::dataflow::channels::pact::Exchange;
use timely::progress::frontier::MutableAntichain;

use super::combine::Combiner;
pub use super::commit::CatchUp;
use super::commit::{Committer, EpochLogs, is_retired};
use super::outputs::{OutputChange, sink_outputs};
use super::{RunError, WorkerConfig};
use crate::job::{Plan, RowInput, Time, Updates, WatermarkInput};
use crate::log::{Log, Start};
use crate::source::topic::{PartitionSource, TopicInput};
use crate::source::{BadRows, ReadOptions, SourceError};
use crate::table::{DeploymentLock, InputOffset, Lease, TableStore, this_process};
use crate::value::Row;

/// How much larger than `max_records` an epoch may grow while far behind.
const MAX_GROWTH: usize = 16;

/// How epochs are cut.
#[derive(Clone, Copy, Debug)]
pub struct EpochConfig {
    /// Longest wait for records before an epoch is closed.
    pub max_latency: Duration,
    /// Most records one worker puts in one epoch near the log end (up to
    /// 16 times more while far behind).
    pub max_records: usize,
}

impl Default for EpochConfig {
    fn default() -> Self {
        EpochConfig {
            max_latency: Duration::from_millis(100),
            max_records: 100_000,
        }
    }
}

/// A stream job, ready to run.
pub struct StreamRun {
    /// The job's plan: what each input is read as, the dataflow, the outputs.
    pub plan: Plan,
    /// Inputs in the job's spec order.
    pub inputs: Vec<TopicInput>,
    /// The log directory the input topics are in.
    pub log_dir: std::path::PathBuf,
    /// The table store file the deployment's tables and offsets are in.
    pub table_db: std::path::PathBuf,
    /// The deployment to drive, and this process's lock on it.
    pub claim: Claim,
    /// The workers to run on.
    pub workers: WorkerConfig,
    /// How fields are read: the null marker and the bad-row policy.
    pub options: ReadOptions,
    /// How epochs are cut.
    pub epochs: EpochConfig,
    /// Stop once every partition has been read to its end.
    pub until_caught_up: bool,
    /// Set (by a signal handler) to stop at the next epoch boundary.
    pub stop: Arc<AtomicBool>,
    /// No progress lines on stderr.
    pub quiet: bool,
    /// For a building version (reprocess, rollback): when to go live.
    pub catch_up: Option<CatchUp>,
}

/// The deployment a run drives.
#[derive(Debug)]
pub struct Claim {
    /// The deployment's id in the table store.
    pub deployment: i64,
    /// Held for the whole run: only its holder may take the deployment over.
    pub lock: DeploymentLock,
    /// This process created the deployment: if the run fails before its
    /// first commit, it removes it again rather than leave an empty version.
    pub created: bool,
}

/// How a stream run ended.
#[derive(Debug)]
pub struct StreamResult {
    /// Input records read in the epochs this run streamed (the replay of
    /// what was already applied not counted).
    pub records: u64,
    /// Bad rows met (under [`crate::source::BadRowPolicy::Skip`]), the
    /// replay included.
    pub bad_rows: BadRows,
    /// The deployment was retired (swapped out) while running.
    pub retired: bool,
}

struct Shared {
    run: StreamRun,
    /// `(input index, partition)` in a fixed order; worker `k % peers` reads entry `k`.
    assignments: Vec<(usize, u32)>,
    /// Committed next offset per `(input index, partition)`.
    resume: BTreeMap<(usize, u32), u64>,
    /// The last applied record per `(input index, partition)`, when known.
    applied: BTreeMap<(usize, u32), (u64, u32)>,
    /// This process's ownership of the deployment.
    lease: Lease,
    /// How errors name the deployment (`sessions v2`).
    name: String,
    logs: EpochLogs,
    failure: Mutex<Option<RunError>>,
    /// Some worker failed (set before its inputs close; see `FailGuard`).
    failed: AtomicBool,
    bad_rows: AtomicU64,
    records: AtomicU64,
    retired: AtomicBool,
    /// A building version has not caught up yet: `until_caught_up` must not
    /// stop it merely because the log was drained once (a producer may be
    /// ahead again).
    awaiting_catch_up: AtomicBool,
}

/// Marks the run failed when dropped while armed. A worker declares it
/// after its input sessions, so it drops first: a worker that fails (an
/// error or a panic) closes its inputs only once the committer can see the
/// failure, and the committer never commits the epochs that the closed
/// inputs would seem to complete (they lack that worker's share).
struct FailGuard<'a> {
    failed: &'a AtomicBool,
    armed: bool,
}

impl FailGuard<'_> {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for FailGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.failed.store(true, Ordering::SeqCst);
        }
    }
}

/// What one worker feeds the dataflow from: its partitions, and per input
/// the combiner and session its rows go through, and the watermark input.
struct Feed<'a> {
    /// Declared before the sessions, so on an early return or a panic it
    /// drops (marking the run failed) before they close.
    failing: FailGuard<'a>,
    parts: Vec<(usize, PartitionSource)>,
    combiners: Vec<Combiner>,
    sessions: Vec<RowInput>,
    watermarks: WatermarkInput,
}

impl Feed<'_> {
    /// Sends what the combiners hold on into the sessions.
    fn flush(&mut self) {
        for (combiner, session) in self.combiners.iter_mut().zip(self.sessions.iter_mut()) {
            combiner.flush(session);
        }
    }

    /// Moves every input (the watermarks too) to `epoch`.
    fn advance_to(&mut self, epoch: Time) {
        for s in &mut self.sessions {
            s.advance_to(epoch);
            s.flush();
        }
        self.watermarks.advance_to(epoch);
    }
}

impl StreamRun {
    /// Runs until stopped, caught up (if asked) or failed.
    pub fn run(self) -> Result<StreamResult, RunError> {
        self.workers.one_process("a stream")?;
        let mut store = TableStore::open(&self.table_db)?;
        // Take the deployment over before reading where it stands: no commit
        // of an earlier owner can land after this.
        let id = self.claim.deployment;
        let lease = store.take_over(id, &this_process())?;
        let d = store.deployment(id)?;
        let name = d.to_string();
        let committed = store.input_offsets(id)?;
        let mut resume = BTreeMap::new();
        let mut applied = BTreeMap::new();
        let mut assignments = Vec::new();
        for (i, input) in self.inputs.iter().enumerate() {
            for p in 0..input.partitions {
                assignments.push((i, p));
                let at = committed
                    .iter()
                    .find(|o| o.input == input.schema.name && o.partition == p);
                resume.insert((i, p), at.map_or(0, |o| o.next));
                if let Some(last) = at.and_then(|o| o.last) {
                    applied.insert((i, p), last);
                }
            }
        }
        drop(store);
        let building = self.catch_up.is_some();
        let shared = Arc::new(Shared {
            run: self,
            assignments,
            resume,
            applied,
            lease,
            name,
            logs: Mutex::new(BTreeMap::new()),
            failure: Mutex::new(None),
            failed: AtomicBool::new(false),
            bad_rows: AtomicU64::new(0),
            records: AtomicU64::new(0),
            awaiting_catch_up: AtomicBool::new(building),
            retired: AtomicBool::new(false),
        });
        let result = shared.clone().execute();
        if result.is_err() && shared.run.claim.created {
            // Best effort: the run's own error is the one to report.
            let _ = TableStore::open(&shared.run.table_db)
                .and_then(|mut store| store.abandon_unused(&shared.lease, d.state));
        }
        result
    }
}

impl Shared {
    fn execute(self: Arc<Self>) -> Result<StreamResult, RunError> {
        let shared = self.clone();
        let mut bad_rows = BadRows::default();
        for result in self.run.workers.run(move |worker| shared.work(worker))? {
            bad_rows.merge(result);
        }
        if let Some(e) = self.failure.lock().expect("failure slot poisoned").take() {
            return Err(e);
        }
        Ok(StreamResult {
            records: self.records.load(Ordering::Relaxed),
            bad_rows,
            retired: self.retired.load(Ordering::Relaxed),
        })
    }

    fn fail(&self, e: RunError) {
        self.failed.store(true, Ordering::SeqCst);
        let mut slot = self.failure.lock().expect("failure slot poisoned");
        if slot.is_none() {
            *slot = Some(e);
        }
        self.run.stop.store(true, Ordering::Relaxed);
    }

    fn work(self: &Arc<Self>, worker: &mut timely::worker::Worker) -> BadRows {
        let mut bad = BadRows::default();
        if let Err(e) = self.drive(worker, &mut bad) {
            self.fail(e);
        }
        bad
    }

    /// One worker's run: builds the dataflow (with the committer on worker
    /// 0), replays epoch 0, then reads epochs until stopped.
    fn drive(
        self: &Arc<Self>,
        worker: &mut timely::worker::Worker,
        bad: &mut BadRows,
    ) -> Result<(), RunError> {
        let (index, peers) = (worker.index(), worker.peers());
        let log = Log::open(&self.run.log_dir).map_err(|cause| SourceError::Log {
            topic: String::new(),
            cause,
        })?;
        let committer = if index == 0 {
            Some(self.committer(&log)?)
        } else {
            None
        };
        let probe = ProbeHandle::new();
        let (sessions, watermarks) = worker.dataflow::<Time, _, _>(|scope| {
            let (sessions, watermarks, outputs) = self
                .run
                .plan
                .instantiate_with_watermarks(scope, Updates::Any)?;
            let shared = self.clone();
            let mut committer = committer;
            let to_committer = Exchange::new(|_: &OutputChange| 0);
            sink_outputs(
                outputs,
                to_committer,
                Some(&probe),
                move |changes, frontier| {
                    match committer.as_mut() {
                        Some(committer) => shared.commit(committer, changes, frontier),
                        // Every change goes to worker 0; none arrive here.
                        None => changes.clear(),
                    }
                },
            );
            Ok::<_, RunError>((sessions, watermarks))
        })?;
        let mut feed = Feed {
            // Dropped before the sessions on every early return or panic.
            failing: FailGuard {
                failed: &self.failed,
                armed: true,
            },
            parts: self.open_partitions(&log, index, peers)?,
            combiners: sessions.iter().map(|_| Combiner::default()).collect(),
            sessions,
            watermarks,
        };
        self.replay(worker, &log, &mut feed, bad)?;
        self.stream(worker, &probe, &mut feed, bad)?;
        // Closing every input (the watermarks too) lets the dataflow finish.
        let Feed {
            failing,
            sessions,
            watermarks,
            ..
        } = feed;
        failing.disarm();
        drop(sessions);
        drop(watermarks);
        while worker.step_or_park(Some(Duration::from_millis(10))) {}
        Ok(())
    }

    /// The commit operator's work at each activation (worker 0): stashes
    /// the changes that arrived, then commits every epoch the frontier has
    /// passed, unless some worker failed.
    fn commit(
        &self,
        committer: &mut Committer,
        changes: &mut Vec<OutputChange>,
        frontier: &MutableAntichain<Time>,
    ) {
        // Epoch 0 is the replay of what the tables already hold.
        for (change, time, diff) in changes.drain(..).filter(|(_, t, _)| *t > 0) {
            committer
                .stash
                .entry(time)
                .or_default()
                .push((change, diff));
        }
        if self.failed.load(Ordering::SeqCst) {
            // A failed worker's closed inputs seem to complete every epoch;
            // none of them may be committed.
            committer.halted = true;
            return;
        }
        let bad_rows = self.bad_rows.load(Ordering::Relaxed);
        let result = committer.commit_ready(&self.logs, bad_rows, |t| !frontier.less_equal(&t));
        if committer.caught_up || committer.catch_up.is_none() {
            self.awaiting_catch_up.store(false, Ordering::Relaxed);
        }
        if let Err(e) = result {
            if is_retired(&e) {
                self.retired.store(true, Ordering::Relaxed);
                self.run.stop.store(true, Ordering::Relaxed);
            } else {
                self.fail(RunError::Table(e));
            }
        }
    }

    /// Epoch 0: replays this worker's partitions up to the committed
    /// offsets (rebuilding the state; the committer drops its output) and
    /// checks that the log still holds what was applied.
    fn replay(
        &self,
        worker: &mut timely::worker::Worker,
        log: &Log,
        feed: &mut Feed<'_>,
        bad: &mut BadRows,
    ) -> Result<(), RunError> {
        for (input, part) in &mut feed.parts {
            let combiner = &mut feed.combiners[*input];
            let until = self.resume[&(*input, part.partition())];
            let session = &mut feed.sessions[*input];
            while part.position() < until {
                let n = part.read(
                    1 << 16,
                    Some(until),
                    &self.run.options,
                    bad,
                    &mut |mut row, diff| combiner.update(&mut row, diff, session),
                )?;
                if n == 0 {
                    break;
                }
                worker.step();
            }
        }
        feed.flush();
        for (input, part) in &feed.parts {
            self.check_replayed(log, *input, part)?;
        }
        self.announce_watermarks(&feed.parts, &mut feed.watermarks, worker.index());
        // Bad rows are counted as they are met, so each commit reports the
        // total among the records it covers (a replay meets them again).
        self.bad_rows.fetch_add(bad.count, Ordering::Relaxed);
        feed.advance_to(1);
        Ok(())
    }

    /// Epochs 1, 2, ...: reads an epoch, lets the dataflow catch up with
    /// it, and goes on until stopped (or caught up, when asked).
    fn stream(
        &self,
        worker: &mut timely::worker::Worker,
        probe: &ProbeHandle<Time>,
        feed: &mut Feed<'_>,
        bad: &mut BadRows,
    ) -> Result<(), RunError> {
        let mut reported = bad.count;
        let mut epoch: Time = 1;
        let mut limit = self.run.epochs.max_records;
        while !self.run.stop.load(Ordering::Relaxed) {
            let (records, drained) = self.read_epoch(feed, bad, epoch, limit)?;
            self.records.fetch_add(records, Ordering::Relaxed);
            self.bad_rows
                .fetch_add(bad.count - reported, Ordering::Relaxed);
            reported = bad.count;
            self.announce_watermarks(&feed.parts, &mut feed.watermarks, worker.index());
            epoch += 1;
            feed.advance_to(epoch);
            // Park (rather than spin) while other workers finish the epoch:
            // on a small machine a spinning worker takes the committer's CPU.
            worker.step_or_park_while(Some(Duration::from_millis(1)), || {
                probe.less_than(&epoch) && !self.run.stop.load(Ordering::Relaxed)
            });
            // Far behind the log end (the epoch filled up), epochs grow so that
            // a backlog is applied in few large commits; near the end they
            // shrink back to `max_records` for latency.
            limit = if drained {
                self.run.epochs.max_records
            } else {
                (limit * 2).min(self.run.epochs.max_records * MAX_GROWTH)
            };
            if drained && self.may_stop_caught_up() {
                break;
            }
        }
        Ok(())
    }

    /// Whether `until_caught_up` may stop the run once the log is drained:
    /// a building version must have caught up first (a producer may be
    /// ahead again by the time it drains once).
    fn may_stop_caught_up(&self) -> bool {
        self.run.until_caught_up && !self.awaiting_catch_up.load(Ordering::Relaxed)
    }

    /// Reads one epoch from this worker's partitions into the dataflow;
    /// returns the records read and whether everything visible was read.
    /// The epoch's changes are held back until it is read whole and its
    /// offsets are recorded: rows must never reach the dataflow (and so a
    /// commit) without the offsets that cover them, even when a read fails.
    fn read_epoch(
        &self,
        feed: &mut Feed<'_>,
        bad: &mut BadRows,
        epoch: Time,
        max_records: usize,
    ) -> Result<(u64, bool), RunError> {
        let mut changes: Vec<(usize, Row, isize)> = Vec::new();
        let drained =
            self.read_until_closed(&mut feed.parts, bad, epoch, max_records, &mut changes)?;
        self.record_epoch(&feed.parts, epoch, changes.len() as u64);
        let total = changes.len() as u64;
        for (input, mut row, diff) in changes {
            feed.combiners[input].update(&mut row, diff, &mut feed.sessions[input]);
        }
        feed.flush();
        Ok((total, drained))
    }

    /// Reads from the partitions into `changes` until the epoch closes:
    /// `max_records` read, everything visible read (with records, or once
    /// another worker has closed the epoch), `max_latency` passed, or a
    /// stop. Returns whether everything visible was read.
    fn read_until_closed(
        &self,
        parts: &mut [(usize, PartitionSource)],
        bad: &mut BadRows,
        epoch: Time,
        max_records: usize,
        changes: &mut Vec<(usize, Row, isize)>,
    ) -> Result<bool, RunError> {
        let deadline = Instant::now() + self.run.epochs.max_latency;
        loop {
            let mut drained = true;
            for (input, part) in parts.iter_mut() {
                let room = max_records.saturating_sub(changes.len());
                let input = *input;
                let n = part.read(room, None, &self.run.options, bad, &mut |row, diff| {
                    changes.push((input, row, diff))
                })?;
                drained &= n < room;
            }
            let total = changes.len();
            // An idle worker closes the epoch as soon as another one has, so
            // that it does not hold back their records' latency.
            let others_closed = drained && self.closed_elsewhere(epoch);
            let done = total >= max_records
                || (total > 0 && drained)
                || others_closed
                || Instant::now() >= deadline;
            if done
                || self.run.stop.load(Ordering::Relaxed)
                || (drained && self.may_stop_caught_up())
            {
                return Ok(drained);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Whether some worker has closed `epoch` already.
    fn closed_elsewhere(&self, epoch: Time) -> bool {
        self.logs
            .lock()
            .expect("epoch logs poisoned")
            .get(&epoch)
            .is_some_and(|e| e.closed.is_some())
    }

    /// Records, for the committer, where this worker's partitions stand
    /// after `epoch`, what the late filter dropped, and how many records
    /// the epoch read here; marks the epoch closed.
    fn record_epoch(&self, parts: &[(usize, PartitionSource)], epoch: Time, records: u64) {
        let offsets: Vec<_> = parts
            .iter()
            .map(|(input, part)| InputOffset {
                input: self.run.inputs[*input].schema.name.clone(),
                topic: self.run.inputs[*input].topic.clone(),
                partition: part.partition(),
                next: part.position(),
                last: part.last_consumed(),
            })
            .collect();
        let late: Vec<_> = parts
            .iter()
            .filter(|(input, _)| self.run.plan.inputs[*input].late.is_some())
            .map(|(input, part)| {
                let name = self.run.inputs[*input].schema.name.clone();
                (name, part.partition(), part.late_dropped())
            })
            .collect();
        let mut logs = self.logs.lock().expect("epoch logs poisoned");
        let entry = logs.entry(epoch).or_default();
        entry.offsets.extend(offsets);
        entry.late.extend(late);
        entry.records += records;
        entry.closed.get_or_insert_with(Instant::now);
    }

    /// Announces, for each input under the `drop` late-event policy, the
    /// lowest time this worker's partitions of it can still admit (see
    /// [`crate::job::Watermark`]); a worker without partitions of the input
    /// bounds nothing. Sent at the epoch just read.
    fn announce_watermarks(
        &self,
        parts: &[(usize, PartitionSource)],
        watermarks: &mut WatermarkInput,
        worker: usize,
    ) {
        let epoch = *watermarks.time();
        for (input, projection) in self.run.plan.inputs.iter().enumerate() {
            if projection.late.is_none() || self.run.inputs[input].compacted {
                continue;
            }
            let low = parts
                .iter()
                .filter(|(i, _)| *i == input)
                .filter_map(|(_, part)| part.low_watermark())
                .min()
                .unwrap_or(i64::MAX);
            watermarks.send((epoch, input, worker, low));
        }
    }

    /// After the replay of epoch 0: the partition must still hold what the
    /// deployment applied, up to the committed offset, and the last applied
    /// record must be the very one it applied (Kafka's leader-epoch check,
    /// with the record's checksum as the epoch).
    fn check_replayed(
        &self,
        log: &Log,
        input: usize,
        part: &PartitionSource,
    ) -> Result<(), RunError> {
        let committed = self.resume[&(input, part.partition())];
        let topic = &self.run.inputs[input];
        // Compaction may have removed the records before the log end, so the
        // end is the log's next offset, not where the reader stopped.
        let info = log.topic(&topic.topic).map_err(|cause| SourceError::Log {
            topic: topic.topic.clone(),
            cause,
        })?;
        let log_end = info
            .partitions
            .iter()
            .find(|p| p.partition == part.partition())
            .map_or(0, |p| p.latest)
            .max(part.position());
        let lost = |log_end: u64, detail: String| RunError::LogRewritten {
            deployment: self.name.clone(),
            topic: topic.topic.clone(),
            partition: part.partition(),
            committed,
            log_end,
            detail,
        };
        if log_end < committed {
            return Err(lost(
                log_end,
                format!(
                    "the partition ends at offset {log_end}, before the offsets the deployment applied"
                ),
            ));
        }
        let Some(&(offset, crc)) = self.applied.get(&(input, part.partition())) else {
            return Ok(());
        };
        let now = part.last_consumed();
        // Compaction may since have removed the last applied record.
        let compacted_away = topic.compacted && now.is_none_or(|(at, _)| at < offset);
        if now == Some((offset, crc)) || compacted_away {
            return Ok(());
        }
        let detail = match now {
            Some((at, _)) if at == offset => format!(
                "the record at offset {offset} is not the one that was applied (its checksum differs)"
            ),
            _ => format!("the record at offset {offset}, the last one applied, is not in the log"),
        };
        Err(lost(log_end, detail))
    }

    /// Opens this worker's partitions at their earliest retained offsets.
    fn open_partitions(
        &self,
        log: &Log,
        index: usize,
        peers: usize,
    ) -> Result<Vec<(usize, PartitionSource)>, RunError> {
        let mut parts = Vec::new();
        for &(input, partition) in self.assignments.iter().skip(index).step_by(peers) {
            let topic = &self.run.inputs[input];
            let part = PartitionSource::open(
                log,
                topic,
                partition,
                self.run.plan.inputs[input].clone(),
                Start::Earliest,
            )?;
            let committed = self.resume[&(input, partition)];
            if part.position() > 0 && committed > 0 && !topic.compacted {
                // Retention deleted records this deployment applied: its state
                // cannot be rebuilt by replay.
                return Err(RunError::Replay(format!(
                    "topic {} partition {partition}: records below offset {} were deleted by retention, so the state \
                     built from them cannot be rebuilt (use a longer retention, or reprocess from what is left)",
                    topic.topic,
                    part.position()
                )));
            }
            parts.push((input, part));
        }
        Ok(parts)
    }

    fn committer(&self, log: &Log) -> Result<Committer, RunError> {
        let store = TableStore::open(&self.run.table_db)?;
        let mut positions = BTreeMap::new();
        for (&(input, partition), &at) in &self.resume {
            positions.insert((self.run.inputs[input].topic.clone(), partition), at);
        }
        let now = Instant::now();
        let mut committer = Committer {
            halted: false,
            caught_up: false,
            catch_up: self.run.catch_up.clone(),
            last_state_check: now,
            store,
            lease: self.lease,
            log: log.clone(),
            positions,
            next: 0,
            stash: BTreeMap::new(),
            outputs: self.run.plan.outputs.len(),
            records_total: 0,
            started: now,
            last_report: now,
            lag: Vec::new(),
            late: BTreeMap::new(),
            quiet: self.run.quiet,
        };
        committer.refresh_lag();
        Ok(committer)
    }
}
