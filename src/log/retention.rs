//! Retention: deleting whole old segments by age and by size.
//!
//! Rules (per partition, applied oldest segment first, never the active one):
//! - by age: a sealed segment is deleted when its newest record's append
//!   timestamp is at least `retention_ms` old (`now - max_append_ts >=
//!   retention_ms`); an empty sealed segment counts as expired. Age deletion
//!   stops at the first segment that is not expired, so retained data stays
//!   contiguous from the earliest offset;
//! - by size: while the partition's total bytes exceed `retention_bytes`,
//!   the oldest sealed segment is deleted.
//!
//! Offsets never change: deleting a segment only raises the earliest offset.

use super::error::Result;
use super::partition::{PartitionLog, SegmentMeta};

/// One deleted segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeletedSegment {
    /// The partition it belonged to.
    pub partition: u32,
    /// Its base offset (the number in its file name): every record it held
    /// had an offset at least this.
    pub base_offset: u64,
    /// Bytes of its segment file.
    pub bytes: u64,
    /// Which limit it was deleted for.
    pub reason: DeleteReason,
}

/// Which retention limit deleted a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteReason {
    /// Its newest record was appended at least `retention_ms` ago (or it
    /// was empty).
    Age,
    /// The partition was over `retention_bytes`.
    Size,
}

/// The retention limits that apply to one partition.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    pub retention_ms: Option<i64>,
    pub retention_bytes: Option<u64>,
}

/// Applies `limits` to `p` at time `now`; returns what was deleted.
pub fn retain_partition(
    p: &mut PartitionLog,
    limits: Limits,
    now: i64,
) -> Result<Vec<DeletedSegment>> {
    let mut out = Vec::new();
    while let Some(reason) = next_deletion(p, limits, now) {
        match p.delete_oldest()? {
            Some(meta) => out.push(DeletedSegment {
                partition: p.id,
                base_offset: meta.base,
                bytes: meta.size,
                reason,
            }),
            None => break,
        }
    }
    Ok(out)
}

/// Why the oldest sealed segment should go, if it should.
fn next_deletion(p: &PartitionLog, limits: Limits, now: i64) -> Option<DeleteReason> {
    let oldest = p.sealed.first()?;
    if limits
        .retention_ms
        .is_some_and(|ms| expired(oldest, ms, now))
    {
        return Some(DeleteReason::Age);
    }
    let total: u64 = p.segments().map(|s| s.size).sum();
    if limits.retention_bytes.is_some_and(|max| total > max) {
        return Some(DeleteReason::Size);
    }
    None
}

fn expired(seg: &SegmentMeta, retention_ms: i64, now: i64) -> bool {
    seg.max_append_ts
        .is_none_or(|ts| now.saturating_sub(ts) >= retention_ms)
}
