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
    Io {
        /// The file or directory the call was about.
        path: PathBuf,
        /// The operating system's error.
        cause: io::Error,
    },

    /// Record data failed validation somewhere it cannot be a torn tail.
    /// Data at and after `position` in that segment is never served.
    #[error("corrupt data in {path} ({}): {detail}", location(.offset, .position))]
    Corruption {
        /// The segment or index file holding the bad data.
        path: PathBuf,
        /// The offset that was expected at `position`, when known.
        offset: Option<u64>,
        /// Byte position in the file where the bad data starts.
        position: Option<u64>,
        /// What failed validation (a checksum, a length, an offset).
        detail: String,
    },

    /// A segment file header is truncated, has the wrong magic, version or
    /// checksum, or disagrees with the file name.
    #[error("bad segment header in {path}: {detail}")]
    BadHeader {
        /// The segment file.
        path: PathBuf,
        /// What is wrong with the header.
        detail: String,
    },

    /// A JSON metadata file (topic or consumer group) cannot be parsed.
    #[error("bad metadata file {path}: {detail}")]
    BadMetadata {
        /// The metadata file.
        path: PathBuf,
        /// The parser's complaint.
        detail: String,
    },

    /// Another writer holds the topic's lock file.
    #[error("topic '{topic}' is locked by another writer (lock file {path})")]
    Locked {
        /// The topic a writer was opened for.
        topic: String,
        /// The lock file another process holds.
        path: PathBuf,
    },

    /// A read position outside the retained range.
    #[error(
        "offset {requested} is out of range for topic '{topic}' partition {partition}: \
         earliest available offset is {earliest}, next offset to be written is {latest}"
    )]
    OffsetOutOfRange {
        /// The topic read.
        topic: String,
        /// The partition read.
        partition: u32,
        /// The offset asked for (or a reader's position that retention
        /// removed from under it).
        requested: u64,
        /// The oldest offset still retained.
        earliest: u64,
        /// The next offset to be written.
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
        /// The topic.
        topic: String,
        /// The partition with the hole.
        partition: u32,
        /// The first missing offset.
        from: u64,
        /// The last missing offset (inclusive).
        to: u64,
    },

    /// A topic opened, read or changed has no directory (with metadata) in
    /// the log.
    #[error("topic '{topic}' does not exist")]
    TopicNotFound {
        /// The name asked for.
        topic: String,
    },

    /// Creating a topic whose directory is already there.
    #[error("topic '{topic}' already exists")]
    TopicExists {
        /// The name asked for.
        topic: String,
    },

    /// A partition number at or past the topic's partition count.
    #[error("partition {partition} does not exist in topic '{topic}' (it has {partitions})")]
    PartitionOutOfRange {
        /// The topic.
        topic: String,
        /// The partition asked for.
        partition: u32,
        /// How many partitions the topic has (valid ones are below it).
        partitions: u32,
    },

    /// A topic or consumer-group name that is empty, too long, starts with
    /// `.` or has characters other than ASCII letters, digits, `.`, `_`, `-`.
    #[error("invalid {kind} name '{name}': {reason}")]
    InvalidName {
        /// What the name names: `"topic"` or `"group"`.
        kind: &'static str,
        /// The name given.
        name: String,
        /// The rule it breaks.
        reason: &'static str,
    },

    /// A topic configuration with a value outside its allowed range
    /// (partitions, segment size, retention).
    #[error("invalid topic configuration: {detail}")]
    InvalidConfig {
        /// Which setting and its allowed range.
        detail: String,
    },

    /// A producer's columns differ from those the topic was first
    /// produced with.
    #[error("topic '{topic}' carries columns {expected:?} but the producer has {actual:?}")]
    ColumnsMismatch {
        /// The topic.
        topic: String,
        /// The columns the topic records.
        expected: Vec<String>,
        /// The producer's columns.
        actual: Vec<String>,
    },

    /// A producer keys its records by another column (or none) than the
    /// topic was first produced with.
    #[error(
        "topic '{topic}' was first produced with {expected}, this producer uses {actual}: \
         records with equal keys must share a partition, so every producer of a topic keys it alike"
    )]
    KeyMismatch {
        /// The topic.
        topic: String,
        /// The key the topic records.
        expected: String,
        /// The producer's key.
        actual: String,
    },

    /// A producer writes rows in another encoding than the topic was first
    /// produced with.
    #[error("topic '{topic}' holds {expected} rows but the producer writes {actual} rows")]
    RowFormatMismatch {
        /// The topic.
        topic: String,
        /// The row format the topic records.
        expected: super::rows::RowFormat,
        /// The producer's row format.
        actual: super::rows::RowFormat,
    },

    /// Appending a record whose encoded frame, less its length prefix, is
    /// over the limit; nothing of the batch is written.
    #[error("record of {size} bytes exceeds the maximum of {max} bytes")]
    RecordTooLarge {
        /// The record's frame after the length prefix, in bytes.
        size: u64,
        /// The limit, in bytes (64 MiB).
        max: u64,
    },
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
