//! Retained, partitioned, append-only log (Kafka semantics, embedded).
//!
//! A log directory holds topics; a topic has N partitions; a partition is an
//! ordered sequence of records with strictly increasing `u64` offsets, stored
//! in segment files (`segment.rs`; records framed in batches, `batch.rs`,
//! or one by one in segments written before batches, `record.rs`) with sparse indexes
//! (`index.rs`). One writer per topic (`lock.rs`, `topic.rs`), any number of
//! lock-free readers (`reader.rs`), retention (`retention.rs`), compaction
//! (`compaction.rs`), consumer group offsets (`offsets.rs`), and deleting
//! topics, altering their settings and resetting groups (`admin.rs`). Topics that
//! carry rows encode them in record values as described in [`rows`]; event
//! times are parsed by [`crate::time`].
//!
//! Invariants upheld across the module:
//! - offsets never change and are never reused; order holds within a partition;
//! - an append that returned `Ok` under `FsyncPolicy::EveryBatch` survives a
//!   crash; a crash can only tear the tail of a partition's last segment,
//!   and opening a writer cuts such a tail off and reports it (`Recovery`);
//! - damaged data anywhere else is reported as `LogError::Corruption` and is
//!   never served;
//! - every metadata file is replaced atomically.

mod admin;
mod batch;
mod compaction;
mod error;
mod fsutil;
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzz;
mod index;
mod lock;
mod offsets;
mod partition;
mod reader;
mod record;
mod retention;
pub mod rows;
mod segment;
mod topic;
mod varint;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_format;
#[cfg(test)]
mod tests_model;
#[cfg(test)]
mod tests_ops;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use crate::time::{event_time_from_json, parse_event_time};
pub use admin::{OffsetMove, ResetTo, TopicChange};
pub use compaction::CompactionReport;
pub use error::{LogError, Result};
pub use partition::{OpenReport, Recovery};
pub use reader::{Lent, PartitionReader, Start};
pub use record::{Record, RecordIn, RecordRef};
pub use retention::{DeleteReason, DeletedSegment};
pub use rows::RowFormat;
pub use topic::{
    Clock, FsyncPolicy, KeyColumn, TopicConfig, TopicWriter, WriterOptions, partition_for_key,
    system_clock,
};

use error::IoContext;
use topic::{META_FILE, partition_dir, read_meta};

/// Handle on a log directory. Cheap; holds no files open.
#[derive(Clone)]
pub struct Log {
    root: PathBuf,
    clock: Clock,
    warnings: Vec<String>,
}

/// State of one partition as visible to readers now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionInfo {
    /// The partition's number within its topic.
    pub partition: u32,
    /// Earliest retained offset (base of the first segment).
    pub earliest: u64,
    /// Next offset to be written.
    pub latest: u64,
    /// Bytes of its segment files (record data; indexes not counted).
    pub bytes: u64,
    /// Segment files it has (sealed ones and the active one).
    pub segments: usize,
}

/// Committed position and lag of a group on one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupPartition {
    /// The partition's number within its topic.
    pub partition: u32,
    /// The group's committed offset: the next offset it will read. `None`
    /// when it never committed for this partition.
    pub committed: Option<u64>,
    /// `latest - committed`, or `latest - earliest` when the group never
    /// committed for this partition (all of it is still to read).
    pub lag: u64,
}

/// A consumer group of a topic and where it stands on each partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupInfo {
    /// The group's name.
    pub group: String,
    /// Its position on every partition of the topic, in partition order.
    pub partitions: Vec<GroupPartition>,
}

/// What [`Log::topic`] reports on a topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicInfo {
    /// The topic's name.
    pub name: String,
    /// Its configuration, as stored in its metadata file.
    pub config: TopicConfig,
    /// Every partition, in partition order.
    pub partitions: Vec<PartitionInfo>,
    /// The consumer groups that committed offsets on it, by name.
    pub groups: Vec<GroupInfo>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl Log {
    /// Opens (creating if needed) a log directory.
    pub fn open(dir: impl AsRef<Path>) -> Result<Log> {
        Self::open_with_clock(dir, system_clock())
    }

    /// Like `open`, with an injected wall clock for append timestamps.
    pub fn open_with_clock(dir: impl AsRef<Path>, clock: Clock) -> Result<Log> {
        let root = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&root).ctx(&root)?;
        let mut log = Log {
            root,
            clock,
            warnings: Vec::new(),
        };
        log.warnings = log.scan_root()?.1;
        Ok(log)
    }

    /// The log directory (topics are its subdirectories).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Unknown entries found in the log directory when it was opened.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    fn scan_root(&self) -> Result<(Vec<String>, Vec<String>)> {
        let (mut topics, mut warnings) = (Vec::new(), Vec::new());
        for entry in std::fs::read_dir(&self.root).ctx(&self.root)? {
            let path = entry.ctx(&self.root)?.path();
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if path.join(META_FILE).is_file() && fsutil::validate_name("topic", &name).is_ok() {
                topics.push(name);
            } else if !admin::is_trash(&name) {
                warnings.push(format!(
                    "ignoring {} (not a topic directory)",
                    path.display()
                ));
            }
        }
        topics.sort();
        Ok((topics, warnings))
    }

    fn topic_dir(&self, name: &str) -> Result<PathBuf> {
        fsutil::validate_name("topic", name)?;
        let dir = self.root.join(name);
        if !dir.join(META_FILE).is_file() {
            return Err(LogError::TopicNotFound {
                topic: name.to_string(),
            });
        }
        Ok(dir)
    }

    /// Creates topic `name` with `config` (validated first) atomically:
    /// its directory appears complete or not at all; `TopicExists` if it is
    /// already there.
    pub fn create_topic(&self, name: &str, config: TopicConfig) -> Result<()> {
        topic::create_topic_dir(&self.root, name, &config)
    }

    /// The names of the topics in the log directory, sorted.
    pub fn list_topics(&self) -> Result<Vec<String>> {
        Ok(self.scan_root()?.0)
    }

    /// Metadata, per-partition offsets and sizes, and group lag of a topic.
    pub fn topic(&self, name: &str) -> Result<TopicInfo> {
        let dir = self.topic_dir(name)?;
        let config = read_meta(&dir)?.config;
        let mut partitions = Vec::new();
        for p in 0..config.partitions {
            let part = partition_dir(&dir, p);
            if !config.compact {
                reader::check_contiguous(&part, name, p)?;
            }
            partitions.push(partition_info(&part, p)?);
        }
        let mut groups = Vec::new();
        for group in offsets::list_groups(&dir)? {
            let committed = offsets::fetch(&dir, &group)?;
            let parts = partitions
                .iter()
                .map(|pi| {
                    let c = committed.get(&pi.partition).copied();
                    // As Kafka counts it: a group that never committed on a
                    // partition has all of it still to read.
                    let from = c.unwrap_or(pi.earliest);
                    GroupPartition {
                        partition: pi.partition,
                        committed: c,
                        lag: pi.latest.saturating_sub(from),
                    }
                })
                .collect();
            groups.push(GroupInfo {
                group,
                partitions: parts,
            });
        }
        Ok(TopicInfo {
            name: name.to_string(),
            config,
            partitions,
            groups,
        })
    }

    /// The topic's single writer (default options: fsync every batch).
    pub fn writer(&self, topic: &str) -> Result<TopicWriter> {
        self.writer_with(topic, WriterOptions::default())
    }

    /// The topic's single writer, with these options (the fsync policy).
    pub fn writer_with(&self, topic: &str, opts: WriterOptions) -> Result<TopicWriter> {
        let dir = self.topic_dir(topic)?;
        TopicWriter::open(&dir, topic, opts, self.clock.clone())
    }

    /// A lock-free reader of one partition.
    pub fn reader(&self, topic: &str, partition: u32, from: Start) -> Result<PartitionReader> {
        let dir = self.topic_dir(topic)?;
        let config = read_meta(&dir)?.config;
        if partition >= config.partitions {
            return Err(LogError::PartitionOutOfRange {
                topic: topic.to_string(),
                partition,
                partitions: config.partitions,
            });
        }
        let dir = partition_dir(&dir, partition);
        PartitionReader::open(&dir, topic, partition, from, !config.compact)
    }

    /// Applies retention; takes the writer lock for the duration.
    pub fn retain(&self, topic: &str, now: i64) -> Result<Vec<DeletedSegment>> {
        self.writer(topic)?.retain(now)
    }

    /// Compacts a compacted topic; takes the writer lock for the duration.
    pub fn compact(&self, topic: &str, now: i64) -> Result<Vec<CompactionReport>> {
        self.writer(topic)?.compact(now)
    }

    /// Records `(partition, next_offset)` pairs for a consumer group.
    pub fn commit_offsets(&self, topic: &str, group: &str, offsets: &[(u32, u64)]) -> Result<()> {
        let dir = self.topic_dir(topic)?;
        let partitions = read_meta(&dir)?.config.partitions;
        offsets::commit(&dir, topic, partitions, group, offsets)
    }

    /// Committed `partition -> next_offset` of a group (empty if none).
    pub fn fetch_offsets(&self, topic: &str, group: &str) -> Result<BTreeMap<u32, u64>> {
        offsets::fetch(&self.topic_dir(topic)?, group)
    }
}

fn partition_info(dir: &Path, partition: u32) -> Result<PartitionInfo> {
    let (earliest, latest) = reader::bounds(dir)?;
    let bases = segment::list_segments(dir)?;
    let mut bytes = 0;
    for &b in &bases {
        let path = segment::log_path(dir, b);
        // A segment may vanish under retention meanwhile; it no longer counts.
        bytes += std::fs::metadata(&path).map_or(0, |m| m.len());
    }
    Ok(PartitionInfo {
        partition,
        earliest,
        latest,
        bytes,
        segments: bases.len(),
    })
}
