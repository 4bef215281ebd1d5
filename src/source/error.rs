//! Errors of the source layer: files that cannot be read, and rows that do
//! not fit their schema (always located by file, line and column).

use std::fmt;
use std::path::PathBuf;

use thiserror::Error;

/// Where a bad row comes from: a line of a file, or a record of a log topic.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Place {
    /// A 1-based line of a file.
    Line {
        /// The file.
        path: PathBuf,
        /// The line number, from 1.
        line: u64,
    },
    /// A record of a log topic.
    Record {
        /// The topic.
        topic: String,
        /// The partition of the topic.
        partition: u32,
        /// The record's offset in the partition.
        offset: u64,
    },
}

/// Where a bad row (or field) is, and the column to blame if there is one.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct RowLocation {
    /// The line or record the row came from.
    pub place: Place,
    /// 1-based column number and name.
    pub column: Option<(usize, String)>,
}

impl fmt::Display for RowLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.place {
            Place::Line { path, line } => write!(f, "{}: line {line}", path.display())?,
            Place::Record {
                topic,
                partition,
                offset,
            } => write!(f, "topic {topic}, partition {partition}, offset {offset}")?,
        }
        if let Some((n, name)) = &self.column {
            write!(f, ", column {n} ({name})")?;
        }
        Ok(())
    }
}

/// A failure to read an input.
#[derive(Debug, Error)]
pub enum SourceError {
    /// The path does not exist.
    #[error("input {input}: {path} does not exist")]
    Missing {
        /// The job input it was given for.
        input: String,
        /// The path given.
        path: PathBuf,
    },
    /// A directory with no data files in it.
    #[error("input {input}: directory {path} holds no data files")]
    EmptyDir {
        /// The job input it was given for.
        input: String,
        /// The directory.
        path: PathBuf,
    },
    /// An I/O error while reading.
    #[error("cannot read {path}: {cause}")]
    Io {
        /// The file or directory read.
        path: PathBuf,
        /// The operating system's error.
        cause: std::io::Error,
    },
    /// A CSV or JSON lines file with no header line / first object.
    #[error("{path}: empty file: expected a header line")]
    NoHeader {
        /// The empty file.
        path: PathBuf,
    },
    /// A header that cannot be used (duplicate or invalid names, bad JSON).
    #[error("{path}: bad header: {problem}")]
    BadHeader {
        /// The file.
        path: PathBuf,
        /// What is wrong with its header.
        problem: String,
    },
    /// Part files of one input whose headers differ.
    #[error("{path}: columns [{found}] differ from [{expected}] in {first}")]
    HeaderMismatch {
        /// The part file whose header differs.
        path: PathBuf,
        /// Its columns, comma-separated.
        found: String,
        /// The columns of the first part file, comma-separated.
        expected: String,
        /// The first part file (in name order), whose header sets the columns.
        first: PathBuf,
    },
    /// A log topic could not be read.
    #[error("{}", log_message(topic, cause))]
    Log {
        /// The topic read.
        topic: String,
        /// The log's error.
        cause: crate::log::LogError,
    },
    /// An input URL that is wrong (the message names it and says why).
    #[error("input {input}: {message}")]
    BadUrl {
        /// The job input it was given for.
        input: String,
        /// What is wrong, and what is expected.
        message: String,
    },
    /// A Kafka topic that cannot be read.
    #[error("kafka topic {topic}: {message}")]
    Kafka {
        /// The topic.
        topic: String,
        /// What went wrong.
        message: String,
    },
    /// A topic that carries no rows yet, so its columns are unknown.
    #[error(
        "topic {topic} has no columns yet: produce rows to it first (kappa log produce {topic})"
    )]
    NoColumns {
        /// The topic.
        topic: String,
    },
    /// A row that does not fit (wrong field count, bad value, bad UTF-8, bad JSON).
    #[error("{at}: {problem}")]
    BadRow {
        /// Where the row is, and the column to blame.
        at: RowLocation,
        /// What does not fit.
        problem: String,
    },
}

impl SourceError {
    /// An [`SourceError::Io`] on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SourceError::Io {
            path: path.into(),
            cause: source,
        }
    }
}

/// A log error as a source error: the log's messages mostly name the topic
/// already; the others get it in front.
fn log_message(topic: &str, cause: &crate::log::LogError) -> String {
    let text = cause.to_string();
    if text.contains(&format!("'{topic}'")) {
        text
    } else {
        format!("topic {topic}: {text}")
    }
}
