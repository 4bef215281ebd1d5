//! A deployment's checkpointed state, kept in its table store beside its
//! tables, so that a restart need not replay the log (and may, once the log
//! has deleted or compacted what it applied).
//!
//! To the store a state is opaque pieces of bytes, each tagged with the
//! input partition it belongs to and written in order (`seq`); the runner
//! encodes and merges them (`crate::source::state`). Each piece carries a
//! CRC-32C of its bytes, checked when it is read back; the deployment
//! carries the digest of the plan the pieces were made for.
//!
//! Invariants, kept by both stores:
//! - pieces are written only in a transaction that checks the writer's
//!   lease: with an epoch's changes and offsets ([`StateWrite::Append`]),
//!   so the state always covers exactly the committed offsets; or on their
//!   own, replacing every piece ([`StateWrite::Replace`]: a merge, or the
//!   state a full replay rebuilt, which covers the committed offsets too);
//! - an epoch committed without state ([`StateWrite::Clear`]) removes the
//!   state, which would no longer cover the committed offsets;
//! - a deployment emptied to be replayed (a half-written epoch) loses its
//!   state with its tables.

/// One piece of state: what an input partition's records changed, encoded.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StatePiece {
    /// The job's input name.
    pub input: String,
    /// The partition.
    pub partition: u32,
    /// The encoded state (or delta).
    pub bytes: Vec<u8>,
}

/// What a write does to the stored state.
#[derive(Clone, Copy, Debug)]
pub enum StateWrite<'a> {
    /// No state is kept: remove any (a commit by a run without checkpoints).
    Clear,
    /// Add these pieces after the ones stored (an epoch's deltas).
    Append {
        /// The digest of the plan the state is for.
        digest: &'a str,
        /// The pieces.
        pieces: &'a [StatePiece],
    },
    /// Replace every stored piece with these (a merged checkpoint).
    Replace {
        /// The digest of the plan the state is for.
        digest: &'a str,
        /// The pieces.
        pieces: &'a [StatePiece],
    },
}

/// A deployment's state as read back.
#[derive(Clone, Debug, Default)]
pub struct StoredState {
    /// The digest of the plan it was made for.
    pub digest: String,
    /// The pieces, in the order they were written.
    pub pieces: Vec<StatePiece>,
    /// The first piece whose bytes do not match their checksum, described
    /// (its position, input and partition): the state cannot be trusted.
    pub damaged: Option<String>,
}

/// What `kappa table status` and the metrics show of a deployment's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StateSummary {
    /// Pieces stored.
    pub pieces: u64,
    /// Their bytes.
    pub bytes: u64,
    /// When the pieces were last replaced by a merged state (unix ms).
    pub merged_at: Option<i64>,
    /// When a piece was last written (unix ms).
    pub written_at: Option<i64>,
}

/// The refusal of pieces appended to no state (or another plan's).
pub fn append_without_base(id: i64) -> super::TableError {
    super::TableError::Corrupt {
        what: format!("the checkpointed state of deployment {id}"),
        reason: "pieces were appended to a state for another plan, or to none".into(),
    }
}

/// The checksum stored with a piece.
pub fn checksum(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// Checks pieces read back with their stored checksums: `(seq, crc,
/// piece)` in order. Returns the pieces and the first damaged one.
pub fn verified(
    digest: String,
    rows: impl IntoIterator<Item = (i64, u32, StatePiece)>,
) -> StoredState {
    let mut state = StoredState {
        digest,
        ..StoredState::default()
    };
    for (seq, crc, piece) in rows {
        if state.damaged.is_none() && checksum(&piece.bytes) != crc {
            state.damaged = Some(format!(
                "piece {seq} (input {} partition {}, {} bytes) does not match its checksum",
                piece.input,
                piece.partition,
                piece.bytes.len()
            ));
        }
        state.pieces.push(piece);
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_byte_is_reported_as_damage() {
        let piece = |b: &[u8]| StatePiece {
            input: "ev".into(),
            partition: 1,
            bytes: b.to_vec(),
        };
        let good = verified("d".into(), [(1, checksum(b"abc"), piece(b"abc"))]);
        assert!(good.damaged.is_none());
        let bad = verified(
            "d".into(),
            [
                (1, checksum(b"abc"), piece(b"abc")),
                (2, checksum(b"xyz"), piece(b"xyZ")),
            ],
        );
        let why = bad.damaged.unwrap();
        assert!(why.contains("piece 2 (input ev partition 1"), "{why}");
    }
}
