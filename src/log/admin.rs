//! Administration of topics and consumer groups — what Kafka users reach
//! for with `kafka-topics --delete`, `kafka-configs --alter` and
//! `kafka-consumer-groups --reset-offsets | --delete`.
//!
//! Invariants:
//! - a topic is deleted under its writer lock (never under a producer), by
//!   one rename out of the way (`.deleted.NAME.PID`, which listings skip)
//!   and a directory fsync, so it disappears whole; the files go after, and
//!   leftovers of an interrupted delete are removed by the next one;
//! - settings change under the writer lock, validated, with `topic.json`
//!   replaced atomically; they apply at the next retention pass;
//! - a group reset lands on every partition at once (one atomic file), at
//!   offsets clamped to what the partition still holds, as Kafka does.

use super::error::{IoContext, Result};
use super::fsutil::fsync_dir;
use super::lock::WriterLock;
use super::reader::{self, Start};
use super::topic::{META_FILE, TopicConfig, partition_dir, read_meta};
use super::{Log, offsets};
use crate::log::fsutil::write_json;

/// A change to a topic's retention settings; `None` keeps a setting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicChange {
    /// New time limit (`Some(None)`: unlimited).
    pub retention_ms: Option<Option<i64>>,
    /// New size limit per partition (`Some(None)`: unlimited).
    pub retention_bytes: Option<Option<u64>>,
    /// New lifetime of tombstones in a compacted topic.
    pub delete_retention_ms: Option<i64>,
}

/// Where [`Log::reset_group`] moves a group, on every partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResetTo {
    /// The earliest offset each partition still holds.
    Earliest,
    /// The end of each partition: only new records are read.
    Latest,
    /// This offset, clamped to what each partition holds.
    Offset(u64),
    /// The first record appended at or after this time (unix ms), or the end.
    Time(i64),
}

/// One partition's move in a reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetMove {
    /// The partition.
    pub partition: u32,
    /// The group's committed offset before (`None`: never committed).
    pub from: Option<u64>,
    /// The offset after.
    pub to: u64,
}

const TRASH_PREFIX: &str = ".deleted.";

/// Whether a log directory entry is a deleted topic's leftovers.
pub(super) fn is_trash(name: &str) -> bool {
    name.starts_with(TRASH_PREFIX)
}

impl Log {
    /// Deletes topic `name` with its records and groups. `Locked` while a
    /// producer writes it. Readers of it fail at their next read.
    pub fn delete_topic(&self, name: &str) -> Result<()> {
        let dir = self.topic_dir(name)?;
        let lock = WriterLock::acquire(&dir, name)?;
        let trash = self
            .root
            .join(format!("{TRASH_PREFIX}{name}.{}", std::process::id()));
        std::fs::rename(&dir, &trash).ctx(&dir)?;
        fsync_dir(&self.root)?;
        drop(lock);
        for entry in std::fs::read_dir(&self.root).ctx(&self.root)? {
            let path = entry.ctx(&self.root)?.path();
            let leftover = path
                .file_name()
                .is_some_and(|n| is_trash(&n.to_string_lossy()));
            if leftover {
                std::fs::remove_dir_all(&path).ctx(&path)?;
            }
        }
        Ok(())
    }

    /// Changes a topic's retention settings; the settings before and after.
    pub fn alter_topic(
        &self,
        name: &str,
        change: &TopicChange,
    ) -> Result<(TopicConfig, TopicConfig)> {
        let dir = self.topic_dir(name)?;
        let _lock = WriterLock::acquire(&dir, name)?;
        let mut meta = read_meta(&dir)?;
        let before = meta.config.clone();
        let c = &mut meta.config;
        if let Some(ms) = change.retention_ms {
            c.retention_ms = ms;
        }
        if let Some(bytes) = change.retention_bytes {
            c.retention_bytes = bytes;
        }
        if let Some(ms) = change.delete_retention_ms {
            c.delete_retention_ms = ms;
        }
        c.validate()?;
        write_json(&dir.join(META_FILE), &meta)?;
        Ok((before, meta.config))
    }

    /// Removes a group's committed offsets from a topic; false if it had none.
    pub fn delete_group(&self, topic: &str, group: &str) -> Result<bool> {
        offsets::delete(&self.topic_dir(topic)?, group)
    }

    /// Moves `group` on every partition of `topic` to `to` (committed
    /// unless `dry_run`); each partition's move.
    pub fn reset_group(
        &self,
        topic: &str,
        group: &str,
        to: ResetTo,
        dry_run: bool,
    ) -> Result<Vec<OffsetMove>> {
        let dir = self.topic_dir(topic)?;
        let config = read_meta(&dir)?.config;
        let committed = offsets::fetch(&dir, group)?;
        let mut moves = Vec::new();
        for p in 0..config.partitions {
            let (earliest, latest) = reader::bounds(&partition_dir(&dir, p))?;
            let target = match to {
                ResetTo::Earliest => earliest,
                ResetTo::Latest => latest,
                ResetTo::Offset(o) => o.clamp(earliest, latest),
                ResetTo::Time(ms) => self.first_at_or_after(topic, p, ms)?.unwrap_or(latest),
            };
            moves.push(OffsetMove {
                partition: p,
                from: committed.get(&p).copied(),
                to: target,
            });
        }
        if !dry_run {
            let offsets: Vec<(u32, u64)> = moves.iter().map(|m| (m.partition, m.to)).collect();
            offsets::commit(&dir, topic, config.partitions, group, &offsets)?;
        }
        Ok(moves)
    }

    /// The offset of the first record of a partition appended at or after
    /// `ms`. A scan from the start: the log keeps no time index.
    fn first_at_or_after(&self, topic: &str, partition: u32, ms: i64) -> Result<Option<u64>> {
        let mut r = self.reader(topic, partition, Start::Earliest)?;
        loop {
            let batch = r.next_batch(4096)?;
            if batch.is_empty() {
                return Ok(None);
            }
            if let Some(rec) = batch.iter().find(|rec| rec.append_ts >= ms) {
                return Ok(Some(rec.offset));
            }
        }
    }
}
