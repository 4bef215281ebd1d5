//! The single error type of the retained log.
//!
//! Invariant: variants describing *corrupt data* (`Corruption`, `BadHeader`,
//! `BadMetadata`) are kept apart from the *I/O* variant (`Io`), so a caller can
//! decide whether retrying makes sense (I/O) or an operator must look at the
//! files (corruption). Every variant carries the structured fields needed to
//! print an actionable message (path, offset, expected, actual).

use std::io;
use std::path::{Path, PathBuf};

/// Result alias used across the log module.
pub type Result<T> = std::result::Result<T, LogError>;

/// Everything that can go wrong in the retained log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// An operating-system call failed; the data itself may be fine.
    #[error("I/O error on {path}: {cause}")]
    Io { path: PathBuf, cause: io::Error },

    /// Record data failed validation somewhere it cannot be a torn tail.
    /// Data at and after `position` in that segment is never served.
    #[error("corrupt data in {path} ({}): {detail}", location(.offset, .position))]
    Corruption {
        path: PathBuf,
        /// The offset that was expected at `position`, when known.
        offset: Option<u64>,
        /// Byte position in the file where the bad data starts.
        position: Option<u64>,
        detail: String,
    },

    /// A segment file header is truncated, has the wrong magic, version or
    /// checksum, or disagrees with the file name.
    #[error("bad segment header in {path}: {detail}")]
    BadHeader { path: PathBuf, detail: String },

    /// A JSON metadata file (topic or consumer group) cannot be parsed.
    #[error("bad metadata file {path}: {detail}")]
    BadMetadata { path: PathBuf, detail: String },

    /// Another writer holds the topic's lock file.
    #[error("topic '{topic}' is locked by another writer (lock file {path})")]
    Locked { topic: String, path: PathBuf },

    /// A read position outside the retained range.
    #[error(
        "offset {requested} is out of range for topic '{topic}' partition {partition}: \
         earliest available offset is {earliest}, next offset to be written is {latest}"
    )]
    OffsetOutOfRange {
        topic: String,
        partition: u32,
        requested: u64,
        earliest: u64,
        latest: u64,
    },

    /// A plain topic's partition lacks offsets between two segments: a
    /// segment file was removed or lost (retention only ever removes the
    /// oldest ones, and only compacted topics have gaps between segments).
    #[error(
        "topic '{topic}' partition {partition} is missing offsets {from} to {to} (a segment file \
         was removed or lost); nothing is read across the hole: restore the segment from a copy"
    )]
    MissingSegment {
        topic: String,
        partition: u32,
        from: u64,
        to: u64,
    },

    #[error("topic '{topic}' does not exist")]
    TopicNotFound { topic: String },

    #[error("topic '{topic}' already exists")]
    TopicExists { topic: String },

    #[error("partition {partition} does not exist in topic '{topic}' (it has {partitions})")]
    PartitionOutOfRange {
        topic: String,
        partition: u32,
        partitions: u32,
    },

    #[error("invalid {kind} name '{name}': {reason}")]
    InvalidName {
        kind: &'static str,
        name: String,
        reason: &'static str,
    },

    #[error("invalid topic configuration: {detail}")]
    InvalidConfig { detail: String },

    #[error("topic '{topic}' carries columns {expected:?} but the producer has {actual:?}")]
    ColumnsMismatch {
        topic: String,
        expected: Vec<String>,
        actual: Vec<String>,
    },

    #[error(
        "topic '{topic}' was first produced with {expected}, this producer uses {actual}: \
         records with equal keys must share a partition, so every producer of a topic keys it alike"
    )]
    KeyMismatch {
        topic: String,
        expected: String,
        actual: String,
    },

    #[error("topic '{topic}' holds {expected} rows but the producer writes {actual} rows")]
    RowFormatMismatch {
        topic: String,
        expected: super::rows::RowFormat,
        actual: super::rows::RowFormat,
    },

    #[error("record of {size} bytes exceeds the maximum of {max} bytes")]
    RecordTooLarge { size: u64, max: u64 },
}

impl LogError {
    /// True for the variants that describe damaged files rather than a failed call.
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            LogError::Corruption { .. } | LogError::BadHeader { .. } | LogError::BadMetadata { .. }
        )
    }

    pub(crate) fn corrupt(
        path: &Path,
        offset: Option<u64>,
        position: Option<u64>,
        detail: impl Into<String>,
    ) -> Self {
        LogError::Corruption {
            path: path.to_path_buf(),
            offset,
            position,
            detail: detail.into(),
        }
    }
}

fn location(offset: &Option<u64>, position: &Option<u64>) -> String {
    match (offset, position) {
        (Some(o), Some(p)) => format!("at offset {o}, file position {p}"),
        (Some(o), None) => format!("at offset {o}"),
        (None, Some(p)) => format!("at file position {p}"),
        (None, None) => "location unknown".to_string(),
    }
}

/// Attaches the path to a raw `io::Error`; used as `.ctx(path)?`.
pub(crate) trait IoContext<T> {
    fn ctx(self, path: &Path) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx(self, path: &Path) -> Result<T> {
        self.map_err(|cause| LogError::Io {
            path: path.to_path_buf(),
            cause,
        })
    }
}
