//! Topics: configuration and metadata file, creation, routing, and the
//! single writer (`TopicWriter`) that appends, retains and compacts.
//!
//! Layout of a topic directory:
//! ```text
//! <log dir>/<topic>/topic.json          metadata (JSON, replaced atomically)
//! <log dir>/<topic>/writer.lock         single-writer lock (see lock.rs)
//! <log dir>/<topic>/groups/<group>.json consumer group offsets (offsets.rs)
//! <log dir>/<topic>/partition-<n>/      segments and indexes
//! ```
//! Invariants: a topic directory appears atomically (built under a dot-name
//! and renamed), so every visible topic has its metadata and all partitions.
//! Routing is stable across runs and versions: a keyed record goes to
//! partition `crc32c(key) % partitions` (CRC-32C/Castagnoli of the raw key
//! bytes); a record without a key goes round-robin per writer.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::compaction::{CompactionReport, Steps, compact_partition};
use super::error::{IoContext, LogError, Result};
use super::fsutil::{fsync_dir, read_json, validate_name, write_json};
use super::lock::WriterLock;
use super::partition::{OpenReport, PartitionLog, create_partition_dir};
use super::record::RecordIn;
use super::retention::{DeletedSegment, Limits, retain_partition};
use super::rows::RowFormat;

pub const META_FILE: &str = "topic.json";
pub const META_FORMAT: u32 = 1;

/// Per-topic settings, stored in `topic.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TopicConfig {
    /// Number of partitions (1 to 10000), fixed at creation.
    pub partitions: u32,
    /// Delete sealed segments whose newest record is this old (ms).
    pub retention_ms: Option<i64>,
    /// Per-partition size limit in bytes (oldest sealed segments go first).
    pub retention_bytes: Option<u64>,
    /// Enables key-based compaction (`TopicWriter::compact`).
    pub compact: bool,
    /// How long a tombstone survives compaction after its append time (ms).
    pub delete_retention_ms: i64,
    /// A segment is rolled once the next batch would grow it past this.
    pub segment_bytes: u64,
    /// Column names of the records (CSV/JSON); empty until a producer sets them.
    pub columns: Vec<String>,
    /// How record values encode rows (`rows/`); set with `columns`.
    pub row_format: Option<RowFormat>,
    /// How records are keyed, as the first producer keyed them; `None`
    /// until then (or for a topic written before kappa recorded it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<KeyColumn>,
}

/// The column whose text is each record's key, or none. Routing and
/// compaction depend on it, so every producer of a topic must use the same.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyColumn {
    /// Records carry no key: they are spread round-robin over the
    /// partitions.
    Unkeyed,
    /// Each record's key is the text of this column of its row.
    Column(String),
}

impl std::fmt::Display for KeyColumn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyColumn::Unkeyed => f.write_str("no --key"),
            KeyColumn::Column(c) => write!(f, "--key {c}"),
        }
    }
}

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            partitions: 1,
            retention_ms: None,
            retention_bytes: None,
            compact: false,
            delete_retention_ms: 24 * 3600 * 1000,
            segment_bytes: 64 << 20,
            columns: Vec::new(),
            row_format: None,
            key: None,
        }
    }
}

impl TopicConfig {
    /// `InvalidConfig` unless every setting is in its allowed range
    /// (partitions, segment size, retention times).
    pub fn validate(&self) -> Result<()> {
        let bad = |detail: &str| {
            Err(LogError::InvalidConfig {
                detail: detail.to_string(),
            })
        };
        if self.partitions == 0 || self.partitions > 10_000 {
            return bad("partitions must be between 1 and 10000");
        }
        if !(64..=1 << 30).contains(&self.segment_bytes) {
            return bad("segment_bytes must be between 64 bytes and 1 GiB");
        }
        if self.retention_ms.is_some_and(|ms| ms <= 0) {
            return bad("retention_ms must be positive");
        }
        if self.delete_retention_ms < 0 {
            return bad("delete_retention_ms must not be negative");
        }
        Ok(())
    }
}

/// Contents of `topic.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMeta {
    pub format: u32,
    pub name: String,
    pub config: TopicConfig,
}

pub fn partition_dir(topic_dir: &Path, partition: u32) -> PathBuf {
    topic_dir.join(format!("partition-{partition}"))
}

pub fn read_meta(topic_dir: &Path) -> Result<TopicMeta> {
    let path = topic_dir.join(META_FILE);
    let meta: TopicMeta = read_json(&path)?;
    if meta.format != META_FORMAT {
        let detail = format!(
            "unsupported metadata format {} (this build reads {META_FORMAT})",
            meta.format
        );
        return Err(LogError::BadMetadata { path, detail });
    }
    Ok(meta)
}

/// Builds the whole topic under a temporary dot-name, then renames it into place.
pub fn create_topic_dir(root: &Path, name: &str, config: &TopicConfig) -> Result<()> {
    validate_name("topic", name)?;
    config.validate()?;
    let target = root.join(name);
    if target.exists() {
        return Err(LogError::TopicExists {
            topic: name.to_string(),
        });
    }
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let tmp = root.join(format!(".{name}.creating-{}-{nonce}", std::process::id()));
    std::fs::create_dir(&tmp).ctx(&tmp)?;
    let meta = TopicMeta {
        format: META_FORMAT,
        name: name.to_string(),
        config: config.clone(),
    };
    write_json(&tmp.join(META_FILE), &meta)?;
    for p in 0..config.partitions {
        create_partition_dir(&partition_dir(&tmp, p))?;
    }
    fsync_dir(&tmp)?;
    if let Err(e) = std::fs::rename(&tmp, &target) {
        let _ = std::fs::remove_dir_all(&tmp);
        if target.exists() {
            return Err(LogError::TopicExists {
                topic: name.to_string(),
            });
        }
        return Err(e).ctx(&target);
    }
    fsync_dir(root)
}

/// When appended data is forced to disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// Every successful `append` is durable when it returns.
    #[default]
    EveryBatch,
    /// Sync at the first append at least this many ms after the last sync.
    IntervalMs(u64),
    /// Only on `sync`/`flush`, segment rolls, and when the writer is dropped.
    Never,
}

/// How a [`TopicWriter`] writes.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriterOptions {
    /// When appended data is forced to disk.
    pub fsync: FsyncPolicy,
}

/// Wall clock in ms since the Unix epoch; injectable for tests.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The real wall clock, as a [`Clock`].
pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    })
}

/// Stable partition for a key: `crc32c(key) % partitions`.
pub fn partition_for_key(key: &[u8], partitions: u32) -> u32 {
    crc32c::crc32c(key) % partitions
}

/// The one writer of a topic; holds the lock until dropped.
pub struct TopicWriter {
    name: String,
    dir: PathBuf,
    meta: TopicMeta,
    _lock: WriterLock,
    parts: Vec<PartitionLog>,
    round_robin: u32,
    opts: WriterOptions,
    clock: Clock,
    report: OpenReport,
    last_sync: Instant,
}

impl TopicWriter {
    pub(crate) fn open(
        topic_dir: &Path,
        name: &str,
        opts: WriterOptions,
        clock: Clock,
    ) -> Result<Self> {
        let lock = WriterLock::acquire(topic_dir, name)?;
        let meta = read_meta(topic_dir)?;
        let mut report = OpenReport::default();
        let mut parts = Vec::new();
        for p in 0..meta.config.partitions {
            let dir = partition_dir(topic_dir, p);
            let part = PartitionLog::open(&dir, p, meta.config.segment_bytes, &mut report)?;
            if !meta.config.compact {
                part.check_contiguous(name)?;
            }
            parts.push(part);
        }
        Ok(TopicWriter {
            name: name.to_string(),
            dir: topic_dir.to_path_buf(),
            meta,
            _lock: lock,
            parts,
            round_robin: 0,
            opts,
            clock,
            report,
            last_sync: Instant::now(),
        })
    }

    /// The topic written.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The topic's configuration, as stored (columns, row format and key
    /// included once a producer set them).
    pub fn config(&self) -> &TopicConfig {
        &self.meta.config
    }

    /// Torn tails truncated and files ignored while opening.
    pub fn open_report(&self) -> &OpenReport {
        &self.report
    }

    /// The next offset of every partition.
    pub fn next_offsets(&self) -> Vec<u64> {
        self.parts.iter().map(|p| p.next_offset()).collect()
    }

    /// Routes one record (advances the round-robin counter for keyless ones).
    pub fn partition_for(&mut self, key: Option<&[u8]>) -> u32 {
        let n = self.meta.config.partitions;
        match key {
            Some(k) => partition_for_key(k, n),
            None => {
                let p = self.round_robin % n;
                self.round_robin = self.round_robin.wrapping_add(1);
                p
            }
        }
    }

    /// Routes and appends `recs`; returns `(partition, offset)` per record, in
    /// input order. Order is preserved within each partition.
    pub fn append(&mut self, recs: &[RecordIn<'_>]) -> Result<Vec<(u32, u64)>> {
        let route: Vec<usize> = recs
            .iter()
            .map(|r| self.partition_for(r.key) as usize)
            .collect();
        // Sized groups: growing them record by record showed up in profiles.
        let mut counts = vec![0; self.parts.len()];
        route.iter().for_each(|&p| counts[p] += 1);
        let mut groups: Vec<Vec<RecordIn<'_>>> =
            counts.iter().map(|&n| Vec::with_capacity(n)).collect();
        let mut slots = Vec::with_capacity(recs.len());
        for (r, &p) in recs.iter().zip(&route) {
            slots.push((p, groups[p].len() as u64));
            groups[p].push(*r);
        }
        // Space for every partition first: a full disk fails the batch
        // before any partition has appended a record of it.
        for (p, group) in groups.iter().enumerate() {
            self.parts[p].reserve(group)?;
        }
        let now = (self.clock)();
        let mut starts = vec![0; self.parts.len()];
        for (p, group) in groups.iter().enumerate().filter(|(_, g)| !g.is_empty()) {
            starts[p] = self.parts[p].append(group, now)?.start;
        }
        self.after_append()?;
        Ok(slots
            .into_iter()
            .map(|(p, i)| (p as u32, starts[p] + i))
            .collect())
    }

    /// Appends `recs` to one partition, bypassing routing.
    pub fn append_batch(&mut self, partition: u32, recs: &[RecordIn<'_>]) -> Result<Range<u64>> {
        let now = (self.clock)();
        let part = self.part_mut(partition)?;
        part.reserve(recs)?;
        let range = part.append(recs, now)?;
        self.after_append()?;
        Ok(range)
    }

    fn after_append(&mut self) -> Result<()> {
        match self.opts.fsync {
            FsyncPolicy::EveryBatch => self.sync(),
            FsyncPolicy::IntervalMs(ms)
                if self.last_sync.elapsed().as_millis() >= u128::from(ms) =>
            {
                self.sync()
            }
            _ => Ok(()),
        }
    }

    /// Makes everything appended so far durable.
    pub fn sync(&mut self) -> Result<()> {
        for p in &mut self.parts {
            p.sync()?;
        }
        self.last_sync = Instant::now();
        Ok(())
    }

    /// Same as `sync`; named for callers that think in streams.
    pub fn flush(&mut self) -> Result<()> {
        self.sync()
    }

    /// Sets the topic's columns and row format if unset (durably, before
    /// any row is appended), else checks that they match.
    pub fn ensure_columns(&mut self, columns: &[String], format: RowFormat) -> Result<()> {
        let c = &self.meta.config;
        if c.columns.as_slice() == columns && c.row_format == Some(format) {
            return Ok(());
        }
        if let Some(expected) = c.row_format.filter(|&f| f != format) {
            return Err(LogError::RowFormatMismatch {
                topic: self.name.clone(),
                expected,
                actual: format,
            });
        }
        if !c.columns.is_empty() && c.columns.as_slice() != columns {
            return Err(LogError::ColumnsMismatch {
                topic: self.name.clone(),
                expected: c.columns.clone(),
                actual: columns.to_vec(),
            });
        }
        let mut meta = self.meta.clone();
        meta.config.columns = columns.to_vec();
        meta.config.row_format = Some(format);
        write_json(&self.dir.join(META_FILE), &meta)?;
        self.meta = meta;
        Ok(())
    }

    /// Records how the topic's records are keyed if not yet recorded
    /// (durably, before any row is appended), else checks that `key` is
    /// the same: a producer with another key would route equal keys to
    /// other partitions, and compaction would keep the wrong rows.
    pub fn ensure_key(&mut self, key: KeyColumn) -> Result<()> {
        match &self.meta.config.key {
            Some(recorded) if *recorded == key => Ok(()),
            Some(recorded) => Err(LogError::KeyMismatch {
                topic: self.name.clone(),
                expected: recorded.to_string(),
                actual: key.to_string(),
            }),
            None => {
                let mut meta = self.meta.clone();
                meta.config.key = Some(key);
                write_json(&self.dir.join(META_FILE), &meta)?;
                self.meta = meta;
                Ok(())
            }
        }
    }

    /// Applies the topic's retention limits at time `now` (ms).
    pub fn retain(&mut self, now: i64) -> Result<Vec<DeletedSegment>> {
        let c = &self.meta.config;
        let limits = Limits {
            retention_ms: c.retention_ms,
            retention_bytes: c.retention_bytes,
        };
        let mut out = Vec::new();
        for p in &mut self.parts {
            out.extend(retain_partition(p, limits, now)?);
        }
        Ok(out)
    }

    /// Compacts every partition (a no-op unless the topic is compacted).
    pub fn compact(&mut self, now: i64) -> Result<Vec<CompactionReport>> {
        Ok(self
            .compact_with(now, &mut Steps::unlimited())?
            .unwrap_or_default())
    }

    /// `compact` with a pause before every step of the swap protocol: only
    /// for crash tests, which kill the process inside that window.
    #[doc(hidden)]
    pub fn compact_paced(
        &mut self,
        now: i64,
        pause: std::time::Duration,
    ) -> Result<Vec<CompactionReport>> {
        Ok(self
            .compact_with(now, &mut Steps::paced(pause))?
            .unwrap_or_default())
    }

    pub(crate) fn compact_with(
        &mut self,
        now: i64,
        steps: &mut Steps,
    ) -> Result<Option<Vec<CompactionReport>>> {
        if !self.meta.config.compact {
            return Ok(Some(Vec::new()));
        }
        let retention = self.meta.config.delete_retention_ms;
        let mut out = Vec::new();
        for p in &mut self.parts {
            // Compaction never rewrites the active segment: an explicit one
            // first seals it, so that it covers everything up to the log end.
            p.seal_active()?;
            match compact_partition(p, now, retention, steps)? {
                Some(r) => out.push(r),
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    fn part_mut(&mut self, partition: u32) -> Result<&mut PartitionLog> {
        let partitions = self.meta.config.partitions;
        self.parts
            .get_mut(partition as usize)
            .ok_or_else(|| LogError::PartitionOutOfRange {
                topic: self.name.clone(),
                partition,
                partitions,
            })
    }
}

impl Drop for TopicWriter {
    fn drop(&mut self) {
        // A clean shutdown should not lose data even under `Never`.
        let _ = self.sync();
    }
}
