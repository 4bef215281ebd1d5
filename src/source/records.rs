//! Where an input's records come from: a partitioned, offset-addressed log,
//! behind one interface, so that the stream, reprocess and verify runners read
//! the embedded log and Kafka alike without knowing which they have.
//!
//! Invariants every implementation keeps:
//! - offsets within a partition only grow, and a record read at an offset is
//!   the same record (same key, value and timestamps, so the same
//!   [`Record::fingerprint`](crate::log::Record::fingerprint)) every time it
//!   is read again;
//! - a reader returns records in offset order, never skipping one that the
//!   log still holds (compaction and retention may have removed some);
//! - [`Bounds::end`] is the offset the next appended record will get.

use std::fmt;
use std::ops::ControlFlow;
use std::sync::Arc;

use super::SourceError;
use crate::log::{Lent, Log, PartitionReader, RecordRef, Start};

/// A partition's retained range: `earliest` is the first offset still held,
/// `end` the offset the next appended record gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bounds {
    /// The first offset still held (retention may have deleted those below).
    pub earliest: u64,
    /// The next offset to be written.
    pub end: u64,
}

/// One input's log: the embedded log's topic, or a Kafka topic.
pub trait RecordLog: Send + Sync + fmt::Debug {
    /// The topic's name, as messages and bad-row locations give it.
    fn name(&self) -> &str;
    /// The number of partitions.
    fn partitions(&self) -> u32;
    /// A reader of `partition` from its earliest retained offset.
    fn open(&self, partition: u32) -> Result<Box<dyn RecordReader>, SourceError>;
    /// A reader of `partition` from `offset`, or from the earliest retained
    /// offset if that is later (its position then says so).
    fn open_at(&self, partition: u32, offset: u64) -> Result<Box<dyn RecordReader>, SourceError>;
    /// Where `partition` starts and ends now. Decisions rest on it (a
    /// replay's retention check, a resume's lost-data check), so a remote log
    /// waits for the answer as long as it waits to connect.
    fn bounds(&self, partition: u32) -> Result<Bounds, SourceError>;
    /// [`RecordLog::bounds`] for metrics (lag): none rather than a wait when
    /// the log does not answer promptly, so an outage does not hold up the
    /// committer that asks after every epoch.
    fn bounds_for_lag(&self, partition: u32) -> Option<Bounds> {
        self.bounds(partition).ok()
    }
    /// Where the log is, for a message that waits for it: `topic T`, or
    /// for a log behind a server, the server too.
    fn whereabouts(&self) -> String {
        format!("topic {}", self.name())
    }
    /// Told after each commit where the deployment stands (`partition`,
    /// next offset): a log with consumer-group dashboards may show it
    /// there. Informational only: the table store's offsets are the truth.
    fn applied(&self, _offsets: &[(u32, u64)]) {}
}

/// Reads one partition in offset order.
pub trait RecordReader: Send {
    /// Lends `f` up to `max` records that are visible now (possibly none),
    /// in offset order, stopping before the first at or past `until` (it is
    /// lent by a later call) and after the one for which `f` breaks; returns
    /// how many `f` was lent. Records are borrowed from the reader's buffers:
    /// nothing is copied for a consumer that only looks. With `until`,
    /// records below that offset were read before (a replay): a client that
    /// fetches in the background waits for them (bounded) rather than lend
    /// none while they are on their way.
    fn visit(
        &mut self,
        max: usize,
        until: Option<u64>,
        f: &mut dyn FnMut(RecordRef<'_>) -> ControlFlow<()>,
    ) -> Result<usize, SourceError>;
    /// The smallest offset the next returned record can have.
    fn position(&self) -> u64;
    /// The last record lent (its offset, fingerprint and times): where a
    /// consumer stands, checked on resume against what the log holds then.
    fn last_lent(&self) -> Option<Lent>;
    /// Whether the last read reached the end of what the log holds (so a
    /// read that returned less than asked means "nothing more now", not
    /// "not fetched yet").
    fn at_end(&self) -> bool;
}

/// A topic of the embedded log.
#[derive(Clone, Debug)]
pub struct LogTopic {
    log: Log,
    topic: String,
    partitions: u32,
}

impl LogTopic {
    /// `topic` of `log`, with its number of partitions.
    pub fn shared(log: &Log, topic: &str, partitions: u32) -> Arc<dyn RecordLog> {
        Arc::new(LogTopic {
            log: log.clone(),
            topic: topic.to_string(),
            partitions,
        })
    }

    fn open_from(
        &self,
        partition: u32,
        start: Start,
    ) -> Result<Box<dyn RecordReader>, SourceError> {
        let reader = self
            .log
            .reader(&self.topic, partition, start)
            .map_err(|e| self.error(e))?;
        Ok(Box::new(LogReader {
            reader,
            topic: self.topic.clone(),
        }))
    }

    fn error(&self, cause: crate::log::LogError) -> SourceError {
        SourceError::Log {
            topic: self.topic.clone(),
            cause,
        }
    }
}

impl RecordLog for LogTopic {
    fn name(&self) -> &str {
        &self.topic
    }

    fn partitions(&self) -> u32 {
        self.partitions
    }

    fn open(&self, partition: u32) -> Result<Box<dyn RecordReader>, SourceError> {
        self.open_from(partition, Start::Earliest)
    }

    fn open_at(&self, partition: u32, offset: u64) -> Result<Box<dyn RecordReader>, SourceError> {
        let earliest = self.bounds(partition)?.earliest;
        self.open_from(partition, Start::Offset(offset.max(earliest)))
    }

    fn bounds(&self, partition: u32) -> Result<Bounds, SourceError> {
        let info = self.log.topic(&self.topic).map_err(|e| self.error(e))?;
        Ok(info
            .partitions
            .iter()
            .find(|p| p.partition == partition)
            .map_or(Bounds::default(), |p| Bounds {
                earliest: p.earliest,
                end: p.latest,
            }))
    }
}

struct LogReader {
    reader: PartitionReader,
    topic: String,
}

impl RecordReader for LogReader {
    fn visit(
        &mut self,
        max: usize,
        until: Option<u64>,
        f: &mut dyn FnMut(RecordRef<'_>) -> ControlFlow<()>,
    ) -> Result<usize, SourceError> {
        self.reader
            .visit(max, until, f)
            .map_err(|cause| SourceError::Log {
                topic: self.topic.clone(),
                cause,
            })
    }

    fn position(&self) -> u64 {
        self.reader.position()
    }

    fn last_lent(&self) -> Option<Lent> {
        self.reader.last_lent()
    }

    fn at_end(&self) -> bool {
        // Reads are synchronous: a short read is the end, unless it
        // stopped at its `until` before a record it holds.
        !self.reader.holds_records()
    }
}
