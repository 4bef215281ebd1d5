//! The stream runner: a planned job over log topics, maintaining its outputs
//! as tables, exactly once.
//!
//! Epoch 0 replays every input partition from its earliest retained offset
//! up to the offsets the deployment has committed, rebuilding the job's state
//! without re-applying its output (the committer drops epoch 0). Epochs 1, 2,
//! ... then read what the log holds beyond: a worker closes an epoch as soon
//! as it has read everything visible (or its record limit), or after
//! `max_latency` when nothing arrives, so latency stays low when idle. The
//! limit starts at `max_records` and grows up to 16 times that once an
//! epoch fills up (behind the log end; 64 times for a version that is not
//! live yet), so a backlog is applied in few large commits, as far as the
//! output the worker made stays small (see `EpochSizer`). An epoch's rows
//! are combined (`runner/combine.rs`) and inserted as they are read; the
//! worker's report of the offsets they cover follows at the same epoch,
//! before the epoch can close (see `read_epoch`). All output changes go to
//! worker 0, which gathers each complete epoch (`runner/epochs.rs`) for the
//! committer's thread, which writes it with its offsets in one transaction
//! (`runner/commit.rs`) while the workers read on.
//!
//! Partitions are dealt to workers round-robin by global worker index, so a
//! run across processes (timely's cluster mode) reads each partition in one
//! place. Everything the workers tell each other crosses the dataflow, never
//! process memory, so one process and several behave alike:
//! - at startup, every worker checks that all run the same job, parameters
//!   and inputs, and takes the committed offsets that process 0 read (only
//!   process 0 opens the table store: it owns the deployment);
//! - each worker's [`EpochReport`] (offsets, counts, or its failure) goes to
//!   the committer at the epoch's time, so an epoch's reports are all in
//!   before the frontier passes it, and a failed worker's epoch is never
//!   committed;
//! - stop, caught-up, retired and failure are broadcast as [`Control`]
//!   messages, so every process stops when one does.
//!
//! Stopping (a signal, an error, or `until_caught_up`) closes a worker's
//! inputs at an epoch boundary; what was inserted is still committed with
//! its offsets, and anything not committed is simply read again on restart.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::Input as _;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::operators::vec::Broadcast;
use timely::dataflow::{InputHandleVec, ProbeHandle};

use super::checkpoint::{self, Keeper, Loaded, States};
use super::cluster;
use super::combine::Combiner;
pub use super::commit::{CatchUp, LastRecord, SwapPolicy};
use super::commit::{Committer, CommitterSetup, EpochReport, Hold, Sink, is_retired};
use super::epochs::{Epoch, Gatherer};
use super::outputs::{OutputRun, sorted_runs, tagged_outputs};
use super::{RunError, WorkerConfig};
use crate::job::{Plan, RowInput, Time, Updates, WatermarkInput};
use crate::schema::OutputSchema;
use crate::sink::changelog::SinkTarget;
use crate::source::state::PartitionState;
use crate::source::topic::{PartitionSource, TopicInput};
use crate::source::{BadRows, ReadOptions};
use crate::table::deployment::is_keyed;
use crate::table::{
    DeploymentLock, DeploymentState, InputOffset, Lease, SinkSpec, StatePiece, this_process,
};

/// How much larger than `max_records` an epoch may grow while far behind.
const MAX_GROWTH: usize = 16;

/// The same for a version that is not live yet (reprocess, rollback): no
/// one sees its table before the swap, so only memory bounds its epochs.
const BUILDING_GROWTH: usize = 64;

/// Most output changes one worker should make in an epoch that grew, in
/// multiples of `max_records`: the committer holds an epoch's changes.
const OUTPUT_BUDGET: usize = 4;

/// Most records read from one partition between two steps of the dataflow.
const READ_CHUNK: usize = 1 << 14;

/// How epochs are cut.
#[derive(Clone, Copy, Debug)]
pub struct EpochConfig {
    /// Longest wait for records before an epoch is closed.
    pub max_latency: Duration,
    /// Most records one worker puts in one epoch near the log end (up to
    /// 16 times more while far behind, when the output is small; 64 times
    /// for a version that is not live yet).
    pub max_records: usize,
}

/// One worker's epoch limits, from what its last epochs read and made.
///
/// Behind the log end (an epoch filled up), an epoch grows up to a cap
/// ([`MAX_GROWTH`] times `max_records`, [`BUILDING_GROWTH`] for a version
/// not live yet), so that a backlog is applied in few large commits (a
/// keyed output rewrites each changed key once per epoch), as far as its
/// output is expected to stay within [`OUTPUT_BUDGET`] times `max_records`:
/// in proportion to the records read (an output as large as its input, a
/// projection, gains nothing from large epochs but the memory the committer
/// holds them in), unless the output is seen to saturate (an aggregation
/// over keys it has all met: its output is the keys, however many records
/// an epoch reads), when the epoch may grow to the cap. Near the end epochs
/// shrink back to `max_records` for latency.
///
/// A job with no keyed output (each output a bag, whose key is the whole
/// row, or without a key) and whose output is at least half its input (a
/// projection, a join, a filter that keeps most rows) keeps its epochs at
/// `max_records`: it writes each row once whatever the epochs, so larger
/// ones would only hold more rows in memory (about three epochs are in
/// flight: one committing, one waiting for the committer, one being read).
/// A bag that is small beside its input (Nexmark q7: the highest bids of
/// each window) grows as a keyed output does: its dataflow does less work
/// in fewer, larger epochs.
#[derive(Debug)]
struct EpochSizer {
    max: usize,
    /// Some output is keyed: larger epochs rewrite its keys less often.
    keyed: bool,
    /// The previous epoch's `(records, made)`, when it filled up.
    full: Option<(u64, u64)>,
}

impl EpochSizer {
    fn new(config: &EpochConfig, outputs: &[OutputSchema]) -> EpochSizer {
        EpochSizer {
            max: config.max_records,
            keyed: outputs.iter().any(is_keyed),
            full: None,
        }
    }

    /// The next epoch's limit, after one that read `records` row changes
    /// and made `made` output changes on this worker (all of them: the
    /// dataflow has caught up with it). `building`: the version is not live.
    fn next(&mut self, drained: bool, records: u64, made: u64, building: bool) -> usize {
        let max = self.max;
        let previous = self.full.take();
        if drained || (!self.keyed && 2 * made >= records) {
            return max;
        }
        self.full = Some((records, made));
        let cap = max
            * if building {
                BUILDING_GROWTH
            } else {
                MAX_GROWTH
            };
        if previous.is_some_and(|p| saturates(p, (records, made))) {
            return cap;
        }
        let budget = (max * OUTPUT_BUDGET) as u128;
        let fits = (budget * records as u128 / (made as u128).max(1)).min(usize::MAX as u128);
        (fits as usize).clamp(max, cap)
    }
}

/// Whether the output grew less than half as fast as the input from one
/// full epoch to one at least twice its size, and is at most a quarter of
/// the input: an aggregation whose keys have all been met.
fn saturates((r0, m0): (u64, u64), (r1, m1): (u64, u64)) -> bool {
    let (r0, m0, r1, m1) = (r0 as u128, m0 as u128, r1 as u128, m1 as u128);
    m0 > 0 && r1 >= 2 * r0 && 2 * m1 * r0 <= m0 * r1 && 4 * m1 <= r1
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
    /// Inputs in the job's spec order, each with the log it is read from.
    pub inputs: Vec<TopicInput>,
    /// The table store file the deployment's tables and offsets are in.
    pub table_db: crate::table::StoreAddr,
    /// The deployment to drive, and this process's lock on it: on the
    /// first process only (the others never open the table store).
    pub claim: Option<Claim>,
    /// What the job is (its name, version and parameters, one per line):
    /// every process of a cluster run must run the same.
    pub fingerprint: String,
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
    /// Where the committer records its metrics.
    pub metrics: Option<Arc<crate::metrics::StreamMetrics>>,
    /// Changelog sinks of outputs (process 0 sends them).
    pub sinks: Vec<SinkTarget>,
    /// Checkpoints: how often the stored state is merged into a full
    /// checkpoint (`None`: the run keeps no state, and replays on restart).
    pub checkpoints: Option<Duration>,
}

/// The deployment a run drives.
#[derive(Debug)]
pub struct Claim {
    /// The deployment's id in the table store.
    pub deployment: i64,
    /// Held for the whole run: only its holder may take the deployment over.
    pub lock: Arc<DeploymentLock>,
    /// This process created the deployment: if the run fails before its
    /// first commit, it removes it again rather than leave an empty version.
    pub created: bool,
}

/// How a stream run ended.
#[derive(Debug)]
pub struct StreamResult {
    /// Input records this process read in the epochs this run streamed
    /// (the replay of what was already applied not counted).
    pub records: u64,
    /// Bad rows this process met (under
    /// [`crate::source::BadRowPolicy::Skip`]), the replay included.
    pub bad_rows: BadRows,
    /// The deployment was retired (swapped out) while running.
    pub retired: bool,
}

/// Where the deployment stands, as process 0 read it from the table store:
/// every process resumes from it.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Start {
    /// How errors name the deployment (`sessions v2`).
    name: String,
    /// The committed offsets.
    offsets: Vec<InputOffset>,
    /// A checkpoint covering them was loaded: partitions are read from the
    /// committed offsets, their state restored, not replayed.
    restored: bool,
}

/// [`Start`], by `(input index, partition)`.
#[derive(Debug)]
struct Resume {
    name: String,
    /// The committed next offset.
    next: BTreeMap<(usize, u32), u64>,
    /// The last applied record, when known.
    applied: BTreeMap<(usize, u32), (u64, u32)>,
    /// Whether the state is restored from a checkpoint (see [`Start`]).
    restored: bool,
}

/// What a worker shows the others at startup.
#[derive(Debug, Serialize, Deserialize)]
struct SetUp {
    /// From worker 0: where the deployment stands, or why it cannot be read.
    start: Option<Result<Start, String>>,
    /// Why this worker cannot run (the committer's store).
    failure: Option<String>,
}

/// What is broadcast to every worker of every process.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum Control {
    /// Stop at the next epoch boundary (a signal reached some process).
    Stop,
    /// The building version has caught up: `until_caught_up` may stop.
    CaughtUp,
    /// The version was swapped out: stop, it is done.
    Retired,
    /// A process failed: stop, and fail with its message.
    Failed { process: usize, message: String },
}

/// The inputs of one worker's control dataflow part.
type ControlInput = InputHandleVec<Time, Control>;

struct Shared {
    run: StreamRun,
    /// `(input index, partition)` in a fixed order; worker `k % peers` reads entry `k`.
    assignments: Vec<(usize, u32)>,
    /// Process 0's ownership of the deployment (none elsewhere).
    lease: Option<Lease>,
    /// Process 0: where the deployment stands, or why it could not be read.
    start: Option<Result<Start, String>>,
    /// Where every worker resumes, as process 0 said.
    resume: OnceLock<Resume>,
    failure: Mutex<Option<RunError>>,
    /// Some worker failed (set before its inputs close; see `FailGuard`).
    failed: AtomicBool,
    records: AtomicU64,
    retired: AtomicBool,
    /// A building version has not caught up yet: `until_caught_up` must not
    /// stop it merely because the log was drained once (a producer may be
    /// ahead again).
    awaiting_catch_up: AtomicBool,
    /// The highest epoch a worker of this process has closed.
    closed: AtomicU64,
    /// Control messages for every process, sent by the next local worker
    /// at an epoch boundary.
    outbox: Mutex<Vec<Control>>,
    /// This process has broadcast its stop.
    told_stop: AtomicBool,
    /// Process 0: the checkpoint loaded, until it is sent to the workers.
    restore: Mutex<Option<States>>,
    /// The digest of the plan's state ([`checkpoint::digest`]).
    digest: String,
}

/// Marks the run failed (and stops it) when dropped while armed. A worker
/// declares it after its input sessions, so it drops first: a worker that
/// panics closes its inputs only once the committer can see the failure.
struct FailGuard<'a> {
    shared: &'a Shared,
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
            self.shared.failed.store(true, Ordering::SeqCst);
            self.shared.run.stop.store(true, Ordering::SeqCst);
        }
    }
}

/// What one worker feeds the dataflow from: its partitions, and per input
/// the combiner and session its rows go through, the watermark input, its
/// reports to the committer and its control messages to every worker.
struct Feed<'a> {
    /// Declared before the inputs, so on a panic it drops (marking the run
    /// failed) before they close.
    failing: FailGuard<'a>,
    parts: Vec<(usize, PartitionSource)>,
    /// This worker's share of a restored checkpoint, until it is inserted.
    restored: Vec<((usize, u32), PartitionState)>,
    combiners: Vec<Combiner>,
    sessions: Vec<RowInput>,
    watermarks: WatermarkInput,
    reports: InputHandleVec<Time, EpochReport>,
    control: ControlInput,
    /// Output changes made on this worker so far (for epoch sizes).
    made: Rc<Cell<u64>>,
}

impl Feed<'_> {
    /// Sends what the combiners hold on into the sessions.
    fn flush(&mut self) {
        for (combiner, session) in self.combiners.iter_mut().zip(self.sessions.iter_mut()) {
            combiner.flush(session);
        }
    }

    /// Moves every input to `epoch`.
    fn advance_to(&mut self, epoch: Time) {
        for s in &mut self.sessions {
            s.advance_to(epoch);
            s.flush();
        }
        self.watermarks.advance_to(epoch);
        self.reports.advance_to(epoch);
        self.control.advance_to(epoch);
    }
}

impl StreamRun {
    /// Runs until stopped, caught up (if asked) or failed.
    pub fn run(self) -> Result<StreamResult, RunError> {
        let first = self.workers.is_first_process();
        let digest = checkpoint::digest(&self.inputs, &self.plan);
        let mut restore = None;
        let (lease, start, state) = match (first, &self.claim) {
            (false, _) => (None, None, None),
            (true, None) => {
                return Err(RunError::Unsupported(
                    "the first process of a stream needs the deployment it drives".into(),
                ));
            }
            (true, Some(claim)) => match take_over(&self, claim.deployment, &digest) {
                Ok((lease, start, state, loaded)) => {
                    restore = loaded;
                    (Some(lease), Some(Ok(start)), Some(state))
                }
                Err(e) => (None, Some(Err(e)), None),
            },
        };
        let (start, failure) = match start {
            Some(Err(e)) => (Some(Err(e.to_string())), Some(e)),
            Some(Ok(start)) => (Some(Ok(start)), None),
            None => (None, None),
        };
        let assignments = self
            .inputs
            .iter()
            .enumerate()
            .flat_map(|(i, input)| (0..input.partitions).map(move |p| (i, p)))
            .collect();
        let building = self.catch_up.is_some();
        let shared = Arc::new(Shared {
            run: self,
            assignments,
            lease,
            start,
            resume: OnceLock::new(),
            failure: Mutex::new(failure),
            failed: AtomicBool::new(false),
            records: AtomicU64::new(0),
            retired: AtomicBool::new(false),
            awaiting_catch_up: AtomicBool::new(building),
            closed: AtomicU64::new(0),
            outbox: Mutex::new(Vec::new()),
            told_stop: AtomicBool::new(false),
            restore: Mutex::new(restore),
            digest,
        });
        let result = shared.clone().execute();
        let created = shared.run.claim.as_ref().is_some_and(|c| c.created);
        if let (Err(_), true, Some(lease), Some(state)) = (&result, created, shared.lease, state) {
            // Best effort: the run's own error is the one to report.
            let _ = crate::table::open(&shared.run.table_db)
                .and_then(|mut store| store.abandon_unused(&lease, state));
        }
        result
    }
}

/// Takes the deployment over before reading where it stands (no commit of
/// an earlier owner can land after this), and, when the run keeps
/// checkpoints, loads the state that covers the committed offsets.
fn take_over(
    run: &StreamRun,
    id: i64,
    digest: &str,
) -> Result<(Lease, Start, DeploymentState, Option<States>), RunError> {
    let mut store = crate::table::open(&run.table_db)?;
    let lease = store.take_over(id, &this_process())?;
    let d = store.deployment(id)?;
    let offsets = store.input_offsets(id)?;
    let loaded = match run.checkpoints {
        Some(_) => checkpoint::load(&*store, id, &run.inputs, digest)?,
        None => Loaded::Replay(None),
    };
    let states = match loaded {
        Loaded::State(states) => {
            if !run.quiet {
                let rows: usize = states.values().map(PartitionState::len).sum();
                say!(
                    "kappa stream: {d}: restoring its checkpoint ({} of state); reading the log from the committed offsets",
                    crate::english::count(rows as u64, "row")
                );
            }
            Some(states)
        }
        Loaded::Replay(why) => {
            if let Some(why) = why {
                tracing::warn!("{d}: its checkpoint cannot be used ({why}): replaying the log");
                if !run.quiet {
                    say!(
                        "kappa stream: {d}: its checkpoint cannot be used ({why}); replaying the log instead"
                    );
                }
            }
            None
        }
    };
    let start = Start {
        name: d.to_string(),
        offsets,
        restored: states.is_some(),
    };
    Ok((lease, start, d.state, states))
}

impl Resume {
    fn new(start: &Start, inputs: &[TopicInput]) -> Resume {
        let mut next = BTreeMap::new();
        let mut applied = BTreeMap::new();
        for (i, input) in inputs.iter().enumerate() {
            for p in 0..input.partitions {
                let at = start
                    .offsets
                    .iter()
                    .find(|o| o.input == input.schema.name && o.partition == p);
                next.insert((i, p), at.map_or(0, |o| o.next));
                if let Some(last) = at.and_then(|o| o.last) {
                    applied.insert((i, p), last);
                }
            }
        }
        Resume {
            name: start.name.clone(),
            next,
            applied,
            restored: start.restored,
        }
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

    /// Fails the run with `e` (the first failure is the one reported; a
    /// worker's own error wins over another's word of it) and stops it
    /// everywhere: a failure of this process is broadcast.
    fn fail(&self, e: RunError) {
        self.failed.store(true, Ordering::SeqCst);
        let ours = self.run.workers.process;
        let peer = matches!(e, RunError::Peer { .. });
        if !peer {
            self.tell(Control::Failed {
                process: ours,
                message: e.to_string(),
            });
        }
        let mut slot = self.failure.lock().expect("failure slot poisoned");
        let replaces = match &*slot {
            None => true,
            Some(RunError::Peer { process, .. }) => *process == ours && !peer,
            Some(_) => false,
        };
        if replaces {
            *slot = Some(e);
        }
        self.run.stop.store(true, Ordering::SeqCst);
    }

    /// Queues `control` for every worker of every process.
    fn tell(&self, control: Control) {
        self.outbox.lock().expect("outbox poisoned").push(control);
    }

    /// Sends what is queued for every worker (whichever local worker comes
    /// first sends it, once).
    fn send_told(&self, control: &mut ControlInput) {
        let told = std::mem::take(&mut *self.outbox.lock().expect("outbox poisoned"));
        if told.is_empty() {
            return;
        }
        for c in told {
            control.send(c);
        }
        // Now, not at the next epoch: after its inputs close, a worker
        // waits for the others, which may be waiting for this word.
        control.flush();
    }

    /// A control message from some worker (every worker gets each one).
    fn obey(&self, control: Control) {
        match control {
            Control::Stop => self.run.stop.store(true, Ordering::SeqCst),
            Control::CaughtUp => self.awaiting_catch_up.store(false, Ordering::SeqCst),
            Control::Retired => {
                self.retired.store(true, Ordering::SeqCst);
                self.run.stop.store(true, Ordering::SeqCst);
            }
            Control::Failed { process, message } => {
                if process != self.run.workers.process {
                    self.fail(RunError::Peer { process, message });
                }
            }
        }
    }

    fn work(self: &Arc<Self>, worker: &mut timely::worker::Worker) -> BadRows {
        let mut bad = BadRows::default();
        if let Err(e) = self.drive(worker, &mut bad) {
            self.fail(e);
        }
        bad
    }

    /// What this worker is about to run, one fact per line: every process
    /// of a cluster run must say the same.
    fn fingerprint(&self) -> String {
        use std::fmt::Write;
        let run = &self.run;
        let mut text = run.fingerprint.clone();
        let w = &run.workers;
        let _ = write!(text, "\nworkers {} x {} processes", w.threads, w.processes);
        let _ = write!(text, "\n{}", describe_reads(&run.inputs, &run.plan));
        let _ = write!(text, "\nread options {:?}", run.options);
        let _ = write!(text, "\nepochs {:?}", run.epochs);
        let _ = write!(text, "\nuntil caught up {}", run.until_caught_up);
        let _ = write!(text, "\ncatch up {:?}", run.catch_up);
        let _ = write!(text, "\ncheckpoints {:?}", run.checkpoints);
        text
    }

    /// Before any dataflow of the job: every worker checks that all run the
    /// same, worker 0 opens the committer, and every worker takes where to
    /// resume from process 0. A failure anywhere fails every worker alike.
    fn set_up(
        &self,
        worker: &mut timely::worker::Worker,
    ) -> Result<(Option<Committer>, Vec<((usize, u32), PartitionState)>), RunError> {
        let threads = self.run.workers.threads;
        cluster::agree(worker, &self.fingerprint(), threads)?;
        let index = worker.index();
        let local = self.open_local(index);
        let word = SetUp {
            start: if index == 0 { self.start.clone() } else { None },
            failure: local.as_ref().err().map(|e| e.to_string()),
        };
        let words = cluster::all_gather(worker, &word)?;
        let start = match &words[0].start {
            Some(Ok(start)) => start,
            Some(Err(message)) => return Err(peer(0, message)),
            None => {
                return Err(RunError::Cluster(
                    "worker 0 did not say where to resume".into(),
                ));
            }
        };
        if let Some((w, message)) = words
            .iter()
            .enumerate()
            .find_map(|(w, word)| Some((w, word.failure.as_ref()?)))
        {
            return match local {
                Err(e) if w == index => Err(e),
                _ => Err(peer(w / threads, message)),
            };
        }
        self.resume
            .get_or_init(|| Resume::new(start, &self.run.inputs));
        let local = local?;
        Ok((local, self.deal_restored(worker)))
    }

    /// Sends each partition's restored state from worker 0 to the worker
    /// that reads the partition in this run (whatever process wrote it):
    /// every worker takes part, and gets its share.
    fn deal_restored(
        &self,
        worker: &mut timely::worker::Worker,
    ) -> Vec<((usize, u32), PartitionState)> {
        let states = match worker.index() {
            0 => self.restore.lock().expect("restore slot poisoned").take(),
            _ => None,
        };
        let peers = worker.peers();
        let items = states
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(at, state)| {
                let k = self.assignments.iter().position(|a| *a == at)?;
                Some((k % peers, (at, state)))
            })
            .collect();
        cluster::scatter(worker, items)
    }

    /// On worker 0, the committer.
    fn open_local(&self, index: usize) -> Result<Option<Committer>, RunError> {
        Ok(match (index, &self.start, self.lease) {
            (0, Some(Ok(start)), Some(lease)) => Some(self.committer(start, lease)?),
            _ => None,
        })
    }

    fn resume(&self) -> &Resume {
        self.resume
            .get()
            .expect("resume offsets are set before the dataflow is built")
    }

    /// One worker's run: builds the dataflow (with the committer on worker
    /// 0), replays epoch 0, then reads epochs until stopped. A failure while
    /// reading is reported to the committer and to every worker before this
    /// worker's inputs close.
    fn drive(
        self: &Arc<Self>,
        worker: &mut timely::worker::Worker,
        bad: &mut BadRows,
    ) -> Result<(), RunError> {
        let (committer, restored) = self.set_up(worker)?;
        let (commit, thread) = match committer {
            Some(committer) => {
                let outputs = self.run.plan.outputs.len();
                let gatherer = Gatherer::new(outputs, committer.keeps_replay());
                let shared = self.clone();
                let (to, thread) = committer
                    .spawn(move |committer, result| shared.committed(committer, result))
                    .map_err(|e| RunError::Timely(format!("cannot start the committer: {e}")))?;
                (Some((gatherer, to)), Some(thread))
            }
            None => (None, None),
        };
        let probe = ProbeHandle::new();
        let built = self.build(worker, commit, &probe);
        let mut feed = match built {
            Ok(feed) => feed,
            Err(e) => {
                self.join_committer(thread);
                return Err(e);
            }
        };
        feed.restored = restored;
        if let Err(e) = self.feed(worker, &probe, &mut feed, bad) {
            feed.reports.send(EpochReport {
                worker: worker.index(),
                failure: Some(e.to_string()),
                ..EpochReport::default()
            });
            self.fail(e);
        }
        if self.run.stop.load(Ordering::SeqCst) && !self.told_stop.swap(true, Ordering::SeqCst) {
            self.tell(Control::Stop);
        }
        self.close(worker, &probe, feed);
        self.join_committer(thread);
        Ok(())
    }

    /// Waits for the committer to commit what it was given (its sender is
    /// gone with the dataflow).
    fn join_committer(&self, thread: Option<std::thread::JoinHandle<()>>) {
        if let Some(Err(panic)) = thread.map(|t| t.join()) {
            let message = super::network::panic_message(&*panic);
            self.fail(RunError::WorkerPanic(format!("the committer: {message}")));
        }
    }

    /// Builds the job's dataflow with its inputs, the commit operator
    /// (gathering epochs for the committer, on worker 0) and the control
    /// messages' sink.
    fn build<'a>(
        self: &'a Arc<Self>,
        worker: &mut timely::worker::Worker,
        commit: Option<(Gatherer, SyncSender<Epoch>)>,
        probe: &ProbeHandle<Time>,
    ) -> Result<Feed<'a>, RunError> {
        if let Some(metrics) = &self.run.metrics {
            // Before the dataflow is built: it takes its logger then.
            count_arranged(worker, metrics.arranged());
        }
        let held = match &self.run.metrics {
            Some(metrics) => metrics.held(),
            None => Default::default(),
        };
        let made = Rc::new(Cell::new(0));
        let (sessions, watermarks, reports, control) = worker.dataflow::<Time, _, _>(|scope| {
            let (sessions, watermarks, outputs) =
                self.run
                    .plan
                    .instantiate_with_watermarks(scope, Updates::Any, held)?;
            let (reports_input, reports) = scope.new_input::<Vec<EpochReport>>();
            let (control_input, control) = scope.new_input::<Vec<Control>>();
            let shared = self.clone();
            control
                .broadcast()
                .sink(Pipeline, "Control", move |(input, _frontier)| {
                    input.for_each(|_cap, data| data.drain(..).for_each(|c| shared.obey(c)));
                });
            if let Some(changes) = tagged_outputs(outputs, Some(probe)) {
                let counter = made.clone();
                let changes = changes.inspect_batch(move |_, batch| {
                    counter.set(counter.get() + batch.len() as u64);
                });
                let shared = self.clone();
                let mut commit = commit;
                let mut stashed = Vec::new();
                sorted_runs(changes, self.run.plan.outputs.len())
                    .binary_frontier::<_, CapacityContainerBuilder<Vec<()>>, _, _, _, _>(
                        reports,
                        Exchange::new(|_: &OutputRun| 0),
                        Exchange::new(|_: &EpochReport| 0),
                        "Commit",
                        move |_capability, _info| {
                            move |(changes, changed), (reports, reported), _output| {
                                let mut received = Vec::new();
                                changes.for_each(|cap, data| {
                                    let time = *cap.least().expect("an epoch");
                                    stashed.extend(data.drain(..).map(|run| (time, run)));
                                });
                                reports.for_each(|cap, data| {
                                    received.extend(
                                        data.drain(..)
                                            .map(|r| (*cap.least().expect("an epoch"), r)),
                                    )
                                });
                                // Every worker sends its changes to worker 0.
                                let Some((gatherer, to)) = commit.as_mut() else {
                                    stashed.clear();
                                    return;
                                };
                                let complete =
                                    |t: Time| !changed.less_equal(&t) && !reported.less_equal(&t);
                                shared.gather(gatherer, to, &mut stashed, received, complete);
                                if changed.is_empty() && reported.is_empty() {
                                    // Every epoch is in: the committer may finish.
                                    commit = None;
                                }
                            }
                        },
                    );
            }
            Ok::<_, RunError>((sessions, watermarks, reports_input, control_input))
        })?;
        Ok(Feed {
            failing: FailGuard {
                shared: self,
                armed: true,
            },
            parts: Vec::new(),
            restored: Vec::new(),
            combiners: sessions.iter().map(|_| Combiner::default()).collect(),
            sessions,
            watermarks,
            reports,
            control,
            made,
        })
    }

    /// Opens this worker's partitions, replays epoch 0 and streams.
    fn feed(
        &self,
        worker: &mut timely::worker::Worker,
        probe: &ProbeHandle<Time>,
        feed: &mut Feed<'_>,
        bad: &mut BadRows,
    ) -> Result<(), RunError> {
        feed.parts = self.open_partitions(worker.index(), worker.peers())?;
        self.replay(worker, feed, bad)?;
        self.stream(worker, probe, feed, bad)
    }

    /// Closes this worker's inputs and lets the dataflow finish: first the
    /// data (the control messages still flow, so that what the committer
    /// decides on the last epochs reaches every process), then the rest.
    fn close(
        &self,
        worker: &mut timely::worker::Worker,
        probe: &ProbeHandle<Time>,
        feed: Feed<'_>,
    ) {
        let Feed {
            failing,
            sessions,
            watermarks,
            reports,
            mut control,
            ..
        } = feed;
        failing.disarm();
        drop(sessions);
        drop(watermarks);
        drop(reports);
        while !probe.done() {
            self.send_told(&mut control);
            worker.step_or_park(Some(Duration::from_millis(10)));
        }
        self.send_told(&mut control);
        drop(control);
        while worker.step_or_park(Some(Duration::from_millis(10))) {}
    }

    /// The commit operator's work at each activation (worker 0): takes in
    /// the changes and the workers' reports that arrived, then hands every
    /// complete epoch to the committer, unless some worker failed.
    fn gather(
        &self,
        gatherer: &mut Gatherer,
        to: &SyncSender<Epoch>,
        changes: &mut Vec<(Time, OutputRun)>,
        reports: Vec<(Time, EpochReport)>,
        complete: impl Fn(Time) -> bool,
    ) {
        gatherer.stash(changes);
        let threads = self.run.workers.threads;
        for (time, report) in reports {
            if let Some((worker, message)) = gatherer.receive(time, report) {
                // A worker of this process has failed with its own error.
                self.fail(peer(worker / threads, &message));
            }
        }
        if self.failed.load(Ordering::SeqCst) {
            // A failed worker's closed inputs seem to complete every epoch;
            // none of them may be committed.
            gatherer.halt();
            return;
        }
        while let Some(epoch) = gatherer.ready(&complete) {
            if to.send(epoch).is_err() {
                // The committer stopped: on an error it reported (failed or
                // retired), else it panicked (its join says how).
                if !self.failed.load(Ordering::SeqCst) && !self.retired.load(Ordering::SeqCst) {
                    self.fail(RunError::WorkerPanic(
                        "the committer stopped (it panicked)".into(),
                    ));
                }
                gatherer.halt();
                return;
            }
        }
    }

    /// What the committer (on its thread) makes of each epoch's commit.
    fn committed(&self, committer: &Committer, result: Result<(), crate::table::TableError>) {
        if !committer.awaits_catch_up() && self.awaiting_catch_up.swap(false, Ordering::SeqCst) {
            self.tell(Control::CaughtUp);
        }
        match result {
            Ok(()) => {}
            Err(e) if is_retired(&e) => {
                self.retired.store(true, Ordering::SeqCst);
                self.run.stop.store(true, Ordering::SeqCst);
                self.tell(Control::Retired);
            }
            Err(e) => self.fail(RunError::Table(e)),
        }
    }

    /// Epoch 0: replays this worker's partitions up to the committed
    /// offsets (rebuilding the state; the committer drops its output) and
    /// checks that the log still holds what was applied.
    fn replay(
        &self,
        worker: &mut timely::worker::Worker,
        feed: &mut Feed<'_>,
        bad: &mut BadRows,
    ) -> Result<(), RunError> {
        if self.resume().restored {
            self.insert_restored(worker, feed);
        }
        for (input, part) in &mut feed.parts {
            let combiner = &mut feed.combiners[*input];
            let until = self.resume().next[&(*input, part.partition())];
            let session = &mut feed.sessions[*input];
            while part.position() < until {
                let n = part.read(
                    1 << 16,
                    Some(until),
                    &self.run.options,
                    bad,
                    &mut |row, diff| combiner.update(row, diff, session),
                )?;
                if n == 0 {
                    break;
                }
                worker.step();
            }
        }
        feed.flush();
        for (input, part) in &feed.parts {
            self.check_replayed(*input, part)?;
        }
        self.announce_watermarks(&feed.parts, &mut feed.watermarks, worker.index());
        // Bad rows are counted as they are met, so each commit reports the
        // total among the records it covers (a replay meets them again; a
        // restore does not, and the committer goes on from the total).
        // The state the replay rebuilt is the checkpoint's first.
        let state = self.take_state(&mut feed.parts);
        feed.reports.send(EpochReport {
            worker: worker.index(),
            bad_rows: bad.count,
            state,
            ..EpochReport::default()
        });
        self.send_told(&mut feed.control);
        feed.advance_to(1);
        Ok(())
    }

    /// Epoch 0 of a restart from a checkpoint: inserts the rows of this
    /// worker's share of the restored state (its partitions' sources took
    /// their keys and watermarks when they opened).
    fn insert_restored(&self, worker: &mut timely::worker::Worker, feed: &mut Feed<'_>) {
        let restored = std::mem::take(&mut feed.restored);
        for ((input, partition), state) in restored {
            let Some((_, part)) = feed
                .parts
                .iter_mut()
                .find(|(i, p)| *i == input && p.partition() == partition)
            else {
                continue;
            };
            let (combiner, session) = (&mut feed.combiners[input], &mut feed.sessions[input]);
            for (n, (mut row, diff)) in part.restore(state).into_iter().enumerate() {
                combiner.update(&mut row, diff, session);
                if n % (1 << 16) == 0 {
                    worker.step();
                }
            }
        }
    }

    /// What this worker's partitions' records changed in their state since
    /// the last take, as checkpoint pieces (none without checkpoints).
    fn take_state(&self, parts: &mut [(usize, PartitionSource)]) -> Vec<StatePiece> {
        parts
            .iter_mut()
            .filter_map(|(input, part)| {
                let delta = part.take_delta()?;
                Some(StatePiece {
                    input: self.run.inputs[*input].schema.name.clone(),
                    partition: part.partition(),
                    bytes: delta.encode(),
                })
            })
            .collect()
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
        let mut sizer = EpochSizer::new(&self.run.epochs, &self.run.plan.outputs);
        let mut limit = self.run.epochs.max_records;
        let mut made = feed.made.get();
        while !self.run.stop.load(Ordering::Relaxed) {
            let (records, drained) =
                self.read_epoch(worker, feed, bad, (epoch, reported), limit)?;
            self.records.fetch_add(records, Ordering::Relaxed);
            reported = bad.count;
            self.announce_watermarks(&feed.parts, &mut feed.watermarks, worker.index());
            self.send_told(&mut feed.control);
            epoch += 1;
            feed.advance_to(epoch);
            // Park (rather than spin) while other workers finish the epoch:
            // on a small machine a spinning worker takes the committer's CPU.
            worker.step_or_park_while(Some(Duration::from_millis(1)), || {
                probe.less_than(&epoch) && !self.run.stop.load(Ordering::Relaxed)
            });
            let made_now = feed.made.get();
            let building = self.awaiting_catch_up.load(Ordering::Relaxed);
            limit = sizer.next(drained, records, made_now - made, building);
            made = made_now;
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
    /// returns the row changes read and whether everything visible was
    /// read. Rows go into the combiners as they are read, and the report
    /// with the offsets that cover them follows at the same epoch: the
    /// committer commits an epoch only once the frontier has passed it,
    /// with every worker's report in, and never after a failure report
    /// (`drive` sends one when a read fails), so rows never reach a commit
    /// without their offsets. `bad_before` is the bad rows met before this
    /// epoch.
    fn read_epoch(
        &self,
        worker: &mut timely::worker::Worker,
        feed: &mut Feed<'_>,
        bad: &mut BadRows,
        (epoch, bad_before): (Time, u64),
        max_records: usize,
    ) -> Result<(u64, bool), RunError> {
        let (total, drained) = self.read_until_closed(worker, feed, bad, epoch, max_records)?;
        feed.flush();
        let report = self.report(
            worker.index(),
            &mut feed.parts,
            total,
            bad.count - bad_before,
        );
        feed.reports.send(report);
        self.closed.fetch_max(epoch, Ordering::SeqCst);
        Ok((total, drained))
    }

    /// Reads from the partitions into the combiners until the epoch closes:
    /// `max_records` row changes read, everything visible read (with
    /// records, or once another worker has closed the epoch), `max_latency`
    /// passed, or a stop. Reads in chunks, stepping the dataflow between
    /// them, so that a large epoch streams through rather than piling up.
    /// Returns the row changes read and whether everything visible was read.
    fn read_until_closed(
        &self,
        worker: &mut timely::worker::Worker,
        feed: &mut Feed<'_>,
        bad: &mut BadRows,
        epoch: Time,
        max_records: usize,
    ) -> Result<(u64, bool), RunError> {
        let Feed {
            parts,
            combiners,
            sessions,
            ..
        } = feed;
        let deadline = Instant::now() + self.run.epochs.max_latency;
        let mut total = 0usize;
        loop {
            // `drained`: every partition read to its end; `full`: some
            // partition filled its chunk, so it has more right away.
            let (mut drained, mut full) = (true, false);
            for (input, part) in parts.iter_mut() {
                let room = max_records.saturating_sub(total).min(READ_CHUNK);
                let (combiner, session) = (&mut combiners[*input], &mut sessions[*input]);
                let n = part.read(room, None, &self.run.options, bad, &mut |row, diff| {
                    total += 1;
                    combiner.update(row, diff, session)
                })?;
                drained &= n < room && part.at_end();
                full |= n == room;
            }
            // While a partition has more right away, only the limit closes
            // the epoch. Otherwise it closes once everything visible is read
            // and it has records, or another worker has closed it (an idle
            // worker must not hold back their records' latency), or once
            // `max_latency` has passed.
            let done = total >= max_records
                || (!full
                    && ((drained && (total > 0 || self.closed_elsewhere(epoch)))
                        || Instant::now() >= deadline));
            if done
                || self.run.stop.load(Ordering::Relaxed)
                || (drained && self.may_stop_caught_up())
            {
                return Ok((total as u64, drained));
            }
            if full {
                worker.step();
            } else {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }

    /// Whether some worker of this process has closed `epoch` already
    /// (another process' workers close theirs by `max_latency`).
    fn closed_elsewhere(&self, epoch: Time) -> bool {
        self.closed.load(Ordering::SeqCst) >= epoch
    }

    /// This worker's report of the epoch it read, for the committer: where
    /// its partitions stand, what the late filter dropped, and how many
    /// records and bad rows the epoch read here.
    fn report(
        &self,
        worker: usize,
        parts: &mut [(usize, PartitionSource)],
        records: u64,
        bad_rows: u64,
    ) -> EpochReport {
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
        let last_records = parts
            .iter()
            .filter_map(|(input, part)| {
                let (append_ts, event_ts) = part.last_times()?;
                Some(LastRecord {
                    input: self.run.inputs[*input].schema.name.clone(),
                    topic: self.run.inputs[*input].topic.clone(),
                    partition: part.partition(),
                    append_ts,
                    event_ts,
                })
            })
            .collect();
        EpochReport {
            worker,
            offsets,
            records,
            late,
            bad_rows,
            failure: None,
            last_records,
            state: self.take_state(parts),
        }
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
    fn check_replayed(&self, input: usize, part: &PartitionSource) -> Result<(), RunError> {
        let topic = &self.run.inputs[input];
        // Compaction may have removed the records before the log end, so the
        // end is the log's next offset, not where the reader stopped.
        let log_end = topic.log.bounds(part.partition())?.end.max(part.position());
        self.check_log_end(input, part.partition(), log_end)?;
        let lost = |detail| self.log_rewritten(input, part.partition(), log_end, detail);
        let Some(&(offset, crc)) = self.resume().applied.get(&(input, part.partition())) else {
            return Ok(());
        };
        let now = match self.resume().restored {
            // Nothing was replayed: the log is asked for the record.
            true => match last_applied(topic, part.partition(), offset)? {
                Lookup::Deleted => return Ok(()),
                Lookup::Found(record) => record,
            },
            false => part.last_consumed(),
        };
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
        Err(lost(detail))
    }

    /// The partition must not end before what the deployment applied (a
    /// torn tail cut off, an older copy of the log restored).
    fn check_log_end(&self, input: usize, partition: u32, log_end: u64) -> Result<(), RunError> {
        if log_end >= self.resume().next[&(input, partition)] {
            return Ok(());
        }
        Err(self.log_rewritten(
            input,
            partition,
            log_end,
            format!(
                "the partition ends at offset {log_end}, before the offsets the deployment applied"
            ),
        ))
    }

    fn log_rewritten(
        &self,
        input: usize,
        partition: u32,
        log_end: u64,
        detail: String,
    ) -> RunError {
        RunError::LogRewritten {
            deployment: self.resume().name.clone(),
            topic: self.run.inputs[input].log.name().to_string(),
            partition,
            committed: self.resume().next[&(input, partition)],
            log_end,
            detail,
        }
    }

    /// Opens this worker's partitions at their earliest retained offsets.
    fn open_partitions(
        &self,
        index: usize,
        peers: usize,
    ) -> Result<Vec<(usize, PartitionSource)>, RunError> {
        let mut parts = Vec::new();
        for &(input, partition) in self.assignments.iter().skip(index).step_by(peers) {
            let topic = &self.run.inputs[input];
            let committed = self.resume().next[&(input, partition)];
            let read = self.run.plan.inputs[input].clone();
            let mut part = match self.resume().restored {
                true => {
                    // Opening past the log's end is an error of its own: say
                    // what it means first.
                    self.check_log_end(input, partition, log_end(topic, partition, committed)?)?;
                    let part = PartitionSource::open_at(topic, partition, read, committed)?;
                    check_unapplied_kept(topic, partition, committed, part.position())?;
                    part
                }
                false => PartitionSource::open(topic, partition, read)?,
            };
            if self.run.checkpoints.is_some() {
                part.capture();
            }
            if self.resume().restored {
                parts.push((input, part));
                continue;
            }
            if part.position() > 0 && committed > 0 && !topic.compacted {
                // Retention deleted records this deployment applied: its state
                // cannot be rebuilt by replay.
                return Err(RunError::Replay(format!(
                    "topic {} partition {partition}: records below offset {} were deleted by retention, so the state \
                     built from them cannot be rebuilt (use a longer retention, or reprocess from what is left)",
                    topic.log.name(),
                    part.position()
                )));
            }
            parts.push((input, part));
        }
        Ok(parts)
    }

    fn committer(&self, start: &Start, lease: Lease) -> Result<Committer, RunError> {
        // Every partition, committed or not, for the lag.
        let positions = Resume::new(start, &self.run.inputs)
            .next
            .into_iter()
            .map(|((input, partition), at)| ((self.run.inputs[input].topic.clone(), partition), at))
            .collect();
        Ok(Committer::new(CommitterSetup {
            store: crate::table::open(&self.run.table_db)?,
            lease,
            topics: self
                .run
                .inputs
                .iter()
                .map(|i| (i.topic.clone(), i.log.clone()))
                .collect(),
            positions,
            catch_up: self.run.catch_up.clone(),
            quiet: self.run.quiet,
            metrics: self.run.metrics.clone(),
            sinks: self.open_sinks(lease.deployment)?,
            hold: self.hold(),
            keeper: self.run.checkpoints.map(|interval| {
                Keeper::new(self.digest.clone(), interval, self.run.inputs.clone())
            }),
            restored: start.restored,
            lock: self.run.claim.as_ref().map(|c| c.lock.clone()),
        })?)
    }

    /// Merging epochs pays where a later epoch rewrites what an earlier one
    /// wrote: a keyed output's groups. The committer merges up to what the
    /// workers' epochs may make when they grow ([`OUTPUT_BUDGET`]), while
    /// the backlog is at least as large: near the log end, every epoch is
    /// committed as it comes.
    fn hold(&self) -> Option<Hold> {
        if !self.run.plan.outputs.iter().any(is_keyed) {
            return None;
        }
        let workers = self.run.workers.threads * self.run.workers.processes;
        let budget = OUTPUT_BUDGET * self.run.epochs.max_records * workers;
        Some(Hold { budget })
    }

    /// Connects the changelog sinks, each to the output it names.
    fn open_sinks(&self, deployment: i64) -> Result<Vec<Sink>, RunError> {
        let mut sinks = Vec::new();
        for target in &self.run.sinks {
            let error = |message: String| RunError::Sink {
                output: target.output.clone(),
                message,
            };
            let outputs = &self.run.plan.outputs;
            let output = outputs
                .iter()
                .position(|o| o.name == target.output)
                .ok_or_else(|| {
                    let names: Vec<&str> = outputs.iter().map(|o| o.name.as_str()).collect();
                    error(format!(
                        "no such output (the job writes {})",
                        names.join(", ")
                    ))
                })?;
            let sink = target.open(deployment).map_err(error)?;
            if !self.run.quiet {
                say!("kappa stream: sink {}: {}", target.output, sink.describe());
            }
            let name = target.output.clone();
            sinks.push((SinkSpec { name, output }, sink));
        }
        Ok(sinks)
    }
}

/// Keeps `arranged` at the number of updates this worker's arrangements
/// hold, from differential's own batch, merge and drop events (which
/// balance: see `differential_dataflow::logging::DifferentialEvent`). One
/// event per batch, not per record, so it costs next to nothing.
fn count_arranged(
    worker: &mut timely::worker::Worker,
    arranged: Arc<std::sync::atomic::AtomicI64>,
) {
    use differential_dataflow::logging::{DifferentialEvent, DifferentialEventBuilder};
    let Some(mut register) = worker.log_register() else {
        return;
    };
    register.insert::<DifferentialEventBuilder, _>("differential/arrange", move |_time, data| {
        let Some(events) = data else { return };
        let mut change: i64 = 0;
        for (_, event) in events.iter() {
            change += match event {
                DifferentialEvent::Batch(b) => b.length as i64,
                DifferentialEvent::Merge(m) => match m.complete {
                    Some(merged) => merged as i64 - m.length1 as i64 - m.length2 as i64,
                    None => 0,
                },
                DifferentialEvent::Drop(d) => -(d.length as i64),
                _ => 0,
            };
        }
        arranged.fetch_add(change, Ordering::Relaxed);
    });
}

/// Longest wait for the last applied record of a partition to be fetched.
const PROBE_WAIT: Duration = Duration::from_secs(10);

/// What the log holds at a partition's last applied offset.
enum Lookup {
    /// Retention deleted it: nothing to check it against.
    Deleted,
    /// The record there (offset and fingerprint), if any (compaction may
    /// have removed it).
    Found(Option<(u64, u32)>),
}

/// Reads the record at `offset` of `partition` without applying it.
fn last_applied(topic: &TopicInput, partition: u32, offset: u64) -> Result<Lookup, RunError> {
    let mut reader = topic.log.open_at(partition, offset)?;
    if reader.position() > offset {
        return Ok(Lookup::Deleted);
    }
    // A remote log fetches in the background, and a broker's end offset may
    // fall short of its log (so its reader does not wait for the record):
    // ask again until the record, the log's end or the deadline comes.
    let deadline = Instant::now() + PROBE_WAIT;
    while reader.visit(1, Some(offset + 1), &mut |_| {
        std::ops::ControlFlow::Continue(())
    })? == 0
        && reader.position() <= offset
        && !reader.at_end()
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let record = reader
        .last_lent()
        .filter(|r| r.offset == offset)
        .map(|r| (r.offset, r.fingerprint));
    Ok(Lookup::Found(record))
}

/// Where `partition` ends, as far as a restart at `committed` needs to know.
/// A broker's end offset can fall short of its log (Tansu reports its last
/// batch's base offset): below `committed`, the log is asked for the last
/// applied record itself before the log is said to have lost it.
fn log_end(topic: &TopicInput, partition: u32, committed: u64) -> Result<u64, RunError> {
    let end = topic.log.bounds(partition)?.end;
    if end >= committed {
        return Ok(end);
    }
    Ok(match last_applied(topic, partition, committed - 1)? {
        Lookup::Found(Some((at, _))) => end.max(at + 1),
        _ => end,
    })
}

/// A restart from a checkpoint reads on from the committed offset: the
/// records from there on must still be in the log.
fn check_unapplied_kept(
    topic: &TopicInput,
    partition: u32,
    committed: u64,
    position: u64,
) -> Result<(), RunError> {
    if position <= committed {
        return Ok(());
    }
    Err(RunError::Replay(format!(
        "topic {} partition {partition}: records from offset {committed} to {position} were deleted by \
         retention before this deployment applied them (it has applied everything below {committed}); \
         use a longer retention, or reprocess from what is left",
        topic.log.name()
    )))
}

/// The topics a plan reads and what it writes, one fact per line, for the
/// agreement of a cluster run.
pub(super) fn describe_reads(inputs: &[TopicInput], plan: &Plan) -> String {
    let mut lines = Vec::new();
    for (input, read) in inputs.iter().zip(&plan.inputs) {
        lines.push(format!(
            "input {} topic {} ({} partitions{}) read as {read:?}",
            input.schema.name,
            input.topic,
            input.partitions,
            if input.compacted { ", compacted" } else { "" }
        ));
    }
    for o in &plan.outputs {
        lines.push(format!("writes {o:?}"));
    }
    lines.join("\n")
}

/// Another process' failure, as this one reports it.
fn peer(process: usize, message: &str) -> RunError {
    RunError::Peer {
        process,
        message: message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> EpochConfig {
        EpochConfig {
            max_latency: Duration::from_millis(100),
            max_records: 1000,
        }
    }

    /// A sizer for a job with a keyed output (`k`, `n`; key `k`).
    fn sizer() -> EpochSizer {
        EpochSizer::new(&config(), &[output(vec![0])])
    }

    fn output(key: Vec<usize>) -> OutputSchema {
        OutputSchema {
            name: "o".into(),
            columns: vec!["k".into(), "n".into()],
            key,
        }
    }

    #[test]
    fn bags_as_large_as_their_input_do_not_grow_epochs() {
        for bag in [vec![0, 1], vec![]] {
            let mut s = EpochSizer::new(&config(), &[output(bag.clone())]);
            assert_eq!(s.next(false, 1000, 1000, true), 1000);
            assert_eq!(s.next(false, 1000, 500, true), 1000);
            // A bag small beside its input grows as a keyed output does.
            let mut s = EpochSizer::new(&config(), &[output(bag)]);
            assert_eq!(s.next(false, 1000, 499, false), 8016);
            assert_eq!(s.next(false, 1000, 50, false), 16_000);
        }
        let mut s = EpochSizer::new(&config(), &[output(vec![0, 1]), output(vec![0])]);
        assert_eq!(s.next(false, 1000, 1000, false), 4000);
    }

    #[test]
    fn epochs_grow_behind_the_log_end_while_their_output_is_small() {
        // Near the end: back to the limit, whatever the output.
        assert_eq!(sizer().next(true, 1000, 0, false), 1000);
        // A group-by over few keys: as large as may be.
        assert_eq!(sizer().next(false, 1000, 50, false), 16_000);
        assert_eq!(sizer().next(false, 1000, 50, true), 64_000);
        // A projection (one output change per record): the budget's size.
        assert_eq!(sizer().next(false, 1000, 1000, false), 4000);
        assert_eq!(sizer().next(false, 1000, 1000, true), 4000);
        // A join that multiplies its input: never below the limit.
        assert_eq!(sizer().next(false, 1000, 100_000, false), 1000);
    }

    #[test]
    fn an_output_that_saturates_lets_epochs_grow_to_the_cap() {
        // An aggregation over 500 keys: each epoch inserts or rewrites them.
        let mut s = sizer();
        assert_eq!(s.next(false, 1000, 430, true), 9302);
        assert_eq!(s.next(false, 9302, 1000, true), 64_000);
        // A projection keeps to the budget, epoch after epoch.
        let mut s = sizer();
        assert_eq!(s.next(false, 1000, 1000, true), 4000);
        assert_eq!(s.next(false, 4000, 4000, true), 4000);
        // A drained epoch forgets what the earlier ones made.
        let mut s = sizer();
        s.next(false, 1000, 430, true);
        assert_eq!(s.next(true, 9302, 1000, true), 1000);
        assert_eq!(s.next(false, 1000, 430, true), 9302);
    }

    #[test]
    fn saturation_needs_a_larger_epoch_and_a_small_output() {
        assert!(saturates((1000, 430), (9302, 1000)));
        // Output in proportion to the input: a filter, a projection.
        assert!(!saturates((1000, 100), (9000, 900)));
        // Same size: nothing learned.
        assert!(!saturates((1000, 430), (1000, 100)));
        // Output over a quarter of the input.
        assert!(!saturates((1000, 800), (4000, 1500)));
        // Nothing made before: no rate to compare with.
        assert!(!saturates((1000, 0), (9000, 10)));
    }
}
