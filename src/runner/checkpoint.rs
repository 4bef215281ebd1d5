//! Checkpoints of a stream run: the state its input partitions made, kept
//! in the table store, so that a restart reads the log only from the
//! committed offsets on.
//!
//! What is stored (see [`crate::source::state`]): per input partition, its
//! contribution to the job's input collection (the projected, typed rows,
//! consolidated; a changelog's current row per key) and the late filter's
//! watermark. By rule 1 a job's outputs, and so every operator's state, are
//! a function of its input collections: inserting these rows into a new
//! dataflow rebuilds exactly the state the replay of the log would have
//! rebuilt, for every job, SQL or Rust, without knowing its operators.
//!
//! When: every epoch's commit carries the deltas its records made, in the
//! same transaction as its changes and offsets, so the stored state always
//! covers exactly the committed offsets (a crash at any point leaves a
//! state and offsets that agree). Every `--checkpoint-interval`, and when
//! the run stops, the committer merges the deltas into one piece per
//! partition, so what is stored stays proportional to the state, not to
//! the epochs. A merge rewrites the whole state, so it waits, past the
//! interval, until what was written since is a quarter of the state (or
//! 1024 pieces): rewrites then cost a constant factor of what is written,
//! and a restart that applies little does not rewrite a big state. A run
//! without checkpoints clears the state with its first commit; a run that
//! has no usable state replays the log and stores what the replay rebuilt
//! before it commits anything.
//!
//! Refusals (rule 3): a state for another plan (its digest), a piece that
//! does not match its checksum or does not decode, or a piece of an input
//! the job does not have, is not used: the run replays the log instead
//! when the log still holds it, and says why; otherwise it refuses.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::job::Plan;
use crate::source::state::{PartitionState, StateDelta};
use crate::source::topic::TopicInput;
use crate::table::{StatePiece, StateSummary, StateWrite, StoredState, TableError, TableStore};

/// Changes to this when what the pieces mean changes: older ones are then
/// not used (the run replays instead).
const FORMAT: &str = "kappa input state 1";

/// Each input partition's state, by `(input index, partition)`.
pub type States = BTreeMap<(usize, u32), PartitionState>;

/// The digest of what a plan's state depends on: each input's topic,
/// whether it is a changelog, and how it is read (columns, types, the late
/// rule). A state is used only by a plan with the same digest.
pub fn digest(inputs: &[TopicInput], plan: &Plan) -> String {
    let mut hash = Sha256::new();
    hash.update(FORMAT.as_bytes());
    for (input, read) in inputs.iter().zip(&plan.inputs) {
        let line = format!(
            "\n{} {} compacted={} {read:?}",
            input.schema.name, input.topic, input.compacted
        );
        hash.update(line.as_bytes());
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// What a restart can go on from.
#[derive(Debug)]
pub enum Loaded {
    /// The deployment's state, by partition.
    State(States),
    /// No usable state; `Some(why)` when there was one that cannot be used.
    Replay(Option<String>),
}

/// Reads the deployment's state and decodes it for `inputs` (by name).
pub fn load(
    store: &dyn TableStore,
    id: i64,
    inputs: &[TopicInput],
    digest: &str,
) -> Result<Loaded, TableError> {
    let Some(stored) = store.load_state(id)? else {
        return Ok(Loaded::Replay(None));
    };
    Ok(match decode(stored, inputs, digest) {
        Ok(states) => Loaded::State(states),
        Err(why) => Loaded::Replay(Some(why)),
    })
}

/// Applies the stored pieces in order, per partition.
fn decode(stored: StoredState, inputs: &[TopicInput], digest: &str) -> Result<States, String> {
    if stored.digest != digest {
        return Err(
            "it was made for another plan of the inputs (their topics, columns or \
                    types differ)"
                .into(),
        );
    }
    if let Some(damage) = stored.damaged {
        return Err(damage);
    }
    let mut states = States::new();
    for (n, piece) in stored.pieces.into_iter().enumerate() {
        let Some(input) = inputs.iter().position(|i| i.schema.name == piece.input) else {
            return Err(format!(
                "piece {} is for input {:?}, which the job does not have",
                n + 1,
                piece.input
            ));
        };
        let delta = StateDelta::decode(&piece.bytes).map_err(|e| {
            format!(
                "piece {} (input {} partition {}) does not decode: {e}",
                n + 1,
                piece.input,
                piece.partition
            )
        })?;
        states
            .entry((input, piece.partition))
            .or_default()
            .apply(delta);
    }
    states.values_mut().for_each(PartitionState::settle);
    Ok(states)
}

/// One piece per partition holding its whole state.
pub fn pieces_of(states: &States, inputs: &[TopicInput]) -> Vec<StatePiece> {
    states
        .iter()
        .map(|(&(input, partition), state)| StatePiece {
            input: inputs[input].schema.name.clone(),
            partition,
            bytes: state.to_delta().encode(),
        })
        .collect()
}

/// A merge rewrites the whole state, so it waits until the pieces written
/// since the last one are worth it: this fraction of the state's bytes
/// (so rewrites cost a constant factor of what is written, however big the
/// state), or this many pieces (each is a row to read at a restart).
const MERGE_FRACTION: u64 = 4;
const MERGE_PIECES: u64 = 1024;

/// The committer's side: writes each epoch's pieces and merges them.
#[derive(Debug)]
pub struct Keeper {
    /// The plan digest the state is for.
    pub digest: String,
    /// How often, at most, the pieces are merged.
    pub interval: Duration,
    /// The inputs (names, for merged pieces).
    pub inputs: Vec<TopicInput>,
    /// When they were last merged (or the run started).
    merged: Instant,
    /// The bytes stored as of the last merge (or the run's start).
    base: u64,
    /// Pieces, and their bytes, written since.
    unmerged: u64,
    unmerged_bytes: u64,
}

impl Keeper {
    /// Keeps state for a plan with `digest` over `inputs`.
    pub fn new(digest: String, interval: Duration, inputs: Vec<TopicInput>) -> Keeper {
        Keeper {
            digest,
            interval,
            inputs,
            merged: Instant::now(),
            base: 0,
            unmerged: 0,
            unmerged_bytes: 0,
        }
    }

    /// Goes on from what the store holds now: pieces beyond one per
    /// partition were left unmerged by an earlier run.
    pub fn stored(&mut self, summary: &StateSummary) {
        let partitions: u64 = self.inputs.iter().map(|i| u64::from(i.partitions)).sum();
        self.base = summary.bytes;
        self.unmerged = summary.pieces.saturating_sub(partitions);
        self.unmerged_bytes = 0;
    }

    /// The whole state was written: `bytes` of it.
    pub fn replaced(&mut self, bytes: u64) {
        self.base = bytes;
        self.unmerged = 0;
        self.unmerged_bytes = 0;
    }

    /// What an epoch's commit writes of its pieces.
    pub fn append<'a>(&'a mut self, pieces: &'a [StatePiece]) -> StateWrite<'a> {
        self.unmerged += pieces.len() as u64;
        self.unmerged_bytes += pieces.iter().map(|p| p.bytes.len() as u64).sum::<u64>();
        StateWrite::Append {
            digest: &self.digest,
            pieces,
        }
    }

    /// Whether the pieces written since the last merge are worth merging.
    pub fn worth_merging(&self) -> bool {
        self.unmerged > 0
            && (self.unmerged_bytes * MERGE_FRACTION >= self.base || self.unmerged >= MERGE_PIECES)
    }

    /// Whether the pieces are due to be merged.
    pub fn due(&self) -> bool {
        self.worth_merging() && self.merged.elapsed() >= self.interval
    }

    /// Merges the stored pieces into one per partition (a full checkpoint);
    /// returns its pieces and bytes. Only the deployment's owner calls it,
    /// between commits, so the state read is the committed one.
    pub fn merge(
        &mut self,
        store: &mut dyn TableStore,
        lease: &crate::table::Lease,
    ) -> Result<(usize, usize), TableError> {
        let id = lease.deployment;
        let states = match load(&*store, id, &self.inputs, &self.digest)? {
            Loaded::State(states) => states,
            Loaded::Replay(why) => {
                return Err(TableError::Corrupt {
                    what: format!("the checkpointed state of deployment {id}"),
                    reason: why.unwrap_or_else(|| "it is gone".into()),
                });
            }
        };
        let pieces = pieces_of(&states, &self.inputs);
        let bytes = pieces.iter().map(|p| p.bytes.len()).sum();
        store.write_state(
            lease,
            &StateWrite::Replace {
                digest: &self.digest,
                pieces: &pieces,
            },
        )?;
        self.merged = Instant::now();
        self.replaced(bytes as u64);
        Ok((pieces.len(), bytes))
    }
}
