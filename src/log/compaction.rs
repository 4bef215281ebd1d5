//! Key-based compaction of sealed segments and its crash-safe swap protocol.
//!
//! Rules (per partition): a keyed record in a sealed segment is kept only if
//! it is the latest record for its key in the whole partition (records in
//! the active segment count as newer but the active segment itself is never
//! rewritten). A latest record with an empty value is a tombstone: it is kept
//! while `now < append_ts + delete_retention_ms` and removed afterwards.
//! Records without a key cannot be superseded and are always kept. Kept
//! records keep their offsets and timestamps, so offsets become sparse.
//! Each changed segment is rewritten one-to-one under its own base offset,
//! in this build's segment version (record batches, `batch.rs`);
//! a rewritten segment that ends up empty is deleted, except the partition's
//! first segment, which is kept so the earliest offset never moves.
//!
//! Swap protocol (crash at any point leaves the old or the new complete set):
//! 1. write every output as `{base}.log.cleaned`, fsync each, fsync the dir;
//! 2. rename every `.cleaned` to `{base}.log.swap`, then fsync the dir. The
//!    first rename is the commit point: from then on the new set wins;
//! 3. for each `.swap`: delete `{base}.index`, then either rename it over
//!    `{base}.log` (atomic replace) or, if empty and not the first segment,
//!    delete `{base}.log` and the `.swap`; fsync the dir.
//!
//! On open (`recover_leftovers`), if any `.swap` exists the compaction had
//! committed: remaining `.cleaned` files are renamed to `.swap` and step 3 is
//! finished. Otherwise leftover `.cleaned` files are deleted (roll back).
//! Steps 2–3 are idempotent, so a crash during recovery is also safe.

use std::collections::HashMap;
use std::path::Path;

use super::error::{IoContext, Result};
use super::fsutil::{fsync_dir, remove_if_exists};
use super::partition::{OpenReport, PartitionLog};
use super::record::Record;
use super::segment::{
    FrameWriter, HEADER_LEN, SegFile, SegmentCursor, VERSION, file_name, index_path, list_dir,
    log_path, scan_rest, write_segment_file,
};

/// What one partition's compaction did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// The partition compacted.
    pub partition: u32,
    /// Sealed segments replaced by a cleaned copy that still holds records.
    pub segments_rewritten: usize,
    /// Sealed segments removed because no record of theirs was kept.
    pub segments_deleted: usize,
    /// Records dropped: superseded by a later record with the same key, or
    /// tombstones older than the delete retention.
    pub records_removed: u64,
    /// Bytes of the segments that changed, before compaction.
    pub bytes_before: u64,
    /// Bytes of the same segments after compaction (headers included).
    pub bytes_after: u64,
}

/// Counts protocol steps so tests can simulate a crash after any of them,
/// and optionally pauses before each one so that crash tests with a real
/// process can kill it inside the swap window.
pub(crate) struct Steps {
    budget: Option<usize>,
    pause: std::time::Duration,
}

impl Steps {
    pub fn unlimited() -> Self {
        Steps {
            budget: None,
            pause: std::time::Duration::ZERO,
        }
    }
    pub fn paced(pause: std::time::Duration) -> Self {
        Steps {
            pause,
            ..Steps::unlimited()
        }
    }
    #[cfg(test)]
    pub fn stop_after(n: usize) -> Self {
        Steps {
            budget: Some(n),
            ..Steps::unlimited()
        }
    }
    /// False once the simulated crash point is reached.
    fn go(&mut self) -> bool {
        if !self.pause.is_zero() {
            std::thread::sleep(self.pause);
        }
        match &mut self.budget {
            None => true,
            Some(0) => false,
            Some(n) => {
                *n -= 1;
                true
            }
        }
    }
}

/// Compacts one partition. Returns `None` only when `steps` ran out
/// (a simulated crash; the files are left exactly as a crash would).
pub(crate) fn compact_partition(
    p: &mut PartitionLog,
    now: i64,
    delete_retention_ms: i64,
    steps: &mut Steps,
) -> Result<Option<CompactionReport>> {
    let mut report = CompactionReport {
        partition: p.id,
        ..Default::default()
    };
    if p.sealed.is_empty() {
        return Ok(Some(report));
    }
    let latest = latest_offsets(p)?;
    let keep = |r: &Record| match &r.key {
        None => true,
        Some(k) if latest.get(k) != Some(&r.offset) => false,
        Some(_) => !r.is_tombstone() || now < r.append_ts.saturating_add(delete_retention_ms),
    };
    let mut outputs = Vec::new();
    for seg in p.sealed.clone() {
        let path = log_path(&p.dir, seg.base);
        let (body, removed) = filter_segment(&path, seg.base, &keep)?;
        if removed > 0 {
            report.records_removed += removed;
            report.bytes_before += seg.size;
            report.bytes_after += HEADER_LEN + body.len() as u64;
            outputs.push((seg.base, body));
        }
    }
    if outputs.is_empty() {
        return Ok(Some(report));
    }
    for (base, body) in &outputs {
        if !steps.go() {
            return Ok(None);
        }
        write_segment_file(&p.dir, *base, ".log.cleaned", body)?;
    }
    fsync_dir(&p.dir)?;
    for (base, _) in &outputs {
        if !steps.go() {
            return Ok(None);
        }
        rename(&p.dir, *base, ".log.cleaned", ".log.swap")?;
    }
    fsync_dir(&p.dir)?;
    let Some(deleted) = finish_swaps(&p.dir, steps)? else {
        return Ok(None);
    };
    report.segments_deleted = deleted;
    report.segments_rewritten = outputs.len() - deleted;
    p.reload_sealed()?;
    Ok(Some(report))
}

/// The offset of the newest record of every key in the partition.
fn latest_offsets(p: &PartitionLog) -> Result<HashMap<Vec<u8>, u64>> {
    let mut latest = HashMap::new();
    for seg in p.segments() {
        let path = log_path(&p.dir, seg.base);
        let mut cur = SegmentCursor::open(&path, seg.base)?;
        scan_rest(&mut cur, |r, pos| {
            if let Some(k) = r.key.as_ref().filter(|_| pos < seg.size) {
                latest.insert(k.clone(), r.offset);
            }
        })?;
    }
    Ok(latest)
}

/// Re-encodes the records of one segment that `keep` accepts, in batches.
fn filter_segment(
    path: &Path,
    base: u64,
    keep: &dyn Fn(&Record) -> bool,
) -> Result<(Vec<u8>, u64)> {
    let mut cur = SegmentCursor::open(path, base)?;
    let mut body = Vec::new();
    let mut frames = FrameWriter::new(VERSION);
    let mut removed = 0;
    let s = scan_rest(&mut cur, |r, _| {
        if keep(r) {
            frames.push(&mut body, &r.as_in(), r.offset, r.append_ts);
        } else {
            removed += 1;
        }
    })?;
    frames.close(&mut body);
    if let Some(detail) = s.tail_detail {
        return Err(cur.corruption(format!("sealed segment ends in damaged data: {detail}")));
    }
    Ok((body, removed))
}

fn rename(dir: &Path, base: u64, from: &str, to: &str) -> Result<()> {
    let (a, b) = (
        dir.join(file_name(base, from)),
        dir.join(file_name(base, to)),
    );
    std::fs::rename(&a, &b).ctx(&b)
}

/// Step 3 of the protocol for every `.swap` in `dir`. Returns how many
/// segments were deleted (empty outputs), or `None` on a simulated crash.
fn finish_swaps(dir: &Path, steps: &mut Steps) -> Result<Option<usize>> {
    let files = list_dir(dir)?;
    let first = files
        .iter()
        .filter_map(|(_, k)| match k {
            SegFile::Log(b) | SegFile::Swap(b) => Some(*b),
            _ => None,
        })
        .min();
    let mut deleted = 0;
    for (_, kind) in &files {
        let SegFile::Swap(base) = *kind else { continue };
        let swap = dir.join(file_name(base, ".log.swap"));
        let empty = std::fs::metadata(&swap).ctx(&swap)?.len() <= HEADER_LEN;
        if !steps.go() {
            return Ok(None);
        }
        remove_if_exists(&index_path(dir, base))?;
        if !steps.go() {
            return Ok(None);
        }
        if empty && Some(base) != first {
            remove_if_exists(&log_path(dir, base))?;
            if !steps.go() {
                return Ok(None);
            }
            remove_if_exists(&swap)?;
            deleted += 1;
        } else {
            rename(dir, base, ".log.swap", ".log")?;
        }
    }
    fsync_dir(dir)?;
    Ok(Some(deleted))
}

/// Repairs what a crash can leave in a partition directory (see the module
/// doc) and reports unknown files. Needs the writer lock.
pub(crate) fn recover_leftovers(dir: &Path, report: &mut OpenReport) -> Result<()> {
    let files = list_dir(dir)?;
    let has = |f: &dyn Fn(&SegFile) -> bool| files.iter().any(|(_, k)| f(k));
    let committed = has(&|k| matches!(k, SegFile::Swap(_)));
    let mut changed = false;
    for (name, kind) in &files {
        let path = dir.join(name);
        match *kind {
            SegFile::Cleaned(base) if committed => rename(dir, base, ".log.cleaned", ".log.swap")?,
            SegFile::Cleaned(_) | SegFile::New(_) => {
                remove_if_exists(&path)?;
            }
            SegFile::Index(base) if !has(&|k| *k == SegFile::Log(base)) => {
                if !has(&|k| *k == SegFile::Swap(base)) {
                    remove_if_exists(&path)?;
                }
            }
            SegFile::Other => {
                report
                    .warnings
                    .push(format!("ignoring unknown file {}", path.display()));
                continue;
            }
            _ => continue,
        }
        changed = true;
    }
    if committed {
        finish_swaps(dir, &mut Steps::unlimited())?;
        report.warnings.push(format!(
            "completed an interrupted compaction in {}",
            dir.display()
        ));
    } else if has(&|k| matches!(k, SegFile::Cleaned(_))) {
        report.warnings.push(format!(
            "rolled back an interrupted compaction in {}",
            dir.display()
        ));
    }
    if changed {
        fsync_dir(dir)?;
    }
    Ok(())
}
