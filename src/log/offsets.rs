//! Consumer group offsets: `<topic>/groups/<group>.json`.
//!
//! File content (JSON): `{"format": 1, "group": "...", "offsets": {"<partition>": <next_offset>}}`
//! where `next_offset` is the offset of the next record the group will read.
//!
//! Invariants: the file is replaced atomically (temp + fsync + rename + dir
//! fsync), so a crash leaves the previous or the new commit. Commits merge
//! into the stored map under an exclusive lock on `groups/.<group>.lock`, so
//! concurrent committers of different partitions do not lose each other's
//! updates. Committing the same offsets again is a no-op (idempotent).

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::{IoContext, LogError, Result};
use super::fsutil::{fsync_dir, read_json, remove_if_exists, validate_name, write_json};

const GROUPS_DIR: &str = "groups";
const FORMAT: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
struct GroupFile {
    format: u32,
    group: String,
    offsets: BTreeMap<u32, u64>,
}

fn group_path(topic_dir: &Path, group: &str) -> PathBuf {
    topic_dir.join(GROUPS_DIR).join(format!("{group}.json"))
}

/// Stores `offsets` (partition, next offset) for `group`, merging with what
/// is already committed for other partitions.
pub fn commit(
    topic_dir: &Path,
    topic: &str,
    partitions: u32,
    group: &str,
    offsets: &[(u32, u64)],
) -> Result<()> {
    validate_name("group", group)?;
    if let Some(&(partition, _)) = offsets.iter().find(|(p, _)| *p >= partitions) {
        return Err(LogError::PartitionOutOfRange {
            topic: topic.to_string(),
            partition,
            partitions,
        });
    }
    let (lock, lock_path) = lock_group(topic_dir, group)?;
    let mut stored = fetch(topic_dir, group)?;
    let before = stored.clone();
    stored.extend(offsets.iter().copied());
    if stored != before || !group_path(topic_dir, group).exists() {
        let file = GroupFile {
            format: FORMAT,
            group: group.to_string(),
            offsets: stored,
        };
        write_json(&group_path(topic_dir, group), &file)?;
    }
    lock.unlock().ctx(&lock_path)
}

/// Removes `group`'s offsets; false when it had none.
pub fn delete(topic_dir: &Path, group: &str) -> Result<bool> {
    validate_name("group", group)?;
    let (lock, lock_path) = lock_group(topic_dir, group)?;
    let removed = remove_if_exists(&group_path(topic_dir, group))?;
    if removed {
        fsync_dir(&topic_dir.join(GROUPS_DIR))?;
    }
    lock.unlock().ctx(&lock_path)?;
    Ok(removed)
}

/// The group's lock, taken: commits and deletes of one group serialise.
fn lock_group(topic_dir: &Path, group: &str) -> Result<(std::fs::File, PathBuf)> {
    let dir = topic_dir.join(GROUPS_DIR);
    std::fs::create_dir_all(&dir).ctx(&dir)?;
    let lock_path = dir.join(format!(".{group}.lock"));
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .ctx(&lock_path)?;
    lock.lock().ctx(&lock_path)?;
    Ok((lock, lock_path))
}

/// The committed offsets of `group` (empty if it never committed).
pub fn fetch(topic_dir: &Path, group: &str) -> Result<BTreeMap<u32, u64>> {
    validate_name("group", group)?;
    let path = group_path(topic_dir, group);
    if !path.exists() {
        return Ok(BTreeMap::new());
    }
    let file: GroupFile = read_json(&path)?;
    if file.format != FORMAT {
        let detail = format!("unsupported group file format {}", file.format);
        return Err(LogError::BadMetadata { path, detail });
    }
    Ok(file.offsets)
}

/// Names of the groups that have committed offsets for the topic.
pub fn list_groups(topic_dir: &Path) -> Result<Vec<String>> {
    let dir = topic_dir.join(GROUPS_DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for e in entries {
        let name = e.ctx(&dir)?.file_name().to_string_lossy().into_owned();
        if let Some(group) = name.strip_suffix(".json").filter(|g| !g.starts_with('.')) {
            out.push(group.to_string());
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_merges_and_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        assert!(fetch(t, "g").unwrap().is_empty());
        commit(t, "t", 3, "g", &[(0, 5), (1, 7)]).unwrap();
        commit(t, "t", 3, "g", &[(1, 9)]).unwrap();
        commit(t, "t", 3, "g", &[(1, 9)]).unwrap();
        let got = fetch(t, "g").unwrap();
        assert_eq!(got, BTreeMap::from([(0, 5), (1, 9)]));
        assert_eq!(list_groups(t).unwrap(), vec!["g".to_string()]);
        assert!(matches!(
            commit(t, "t", 3, "g", &[(3, 1)]),
            Err(LogError::PartitionOutOfRange { .. })
        ));
        assert!(matches!(
            commit(t, "t", 3, "../x", &[(0, 1)]),
            Err(LogError::InvalidName { .. })
        ));
        std::fs::write(group_path(t, "g"), b"{not json").unwrap();
        assert!(fetch(t, "g").unwrap_err().is_corruption());
    }
}
