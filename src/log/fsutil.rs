//! Small filesystem helpers shared by the log: directory fsync, atomic
//! replacement of small files, and name validation.
//!
//! Invariant: `write_atomic` leaves either the old or the new content at the
//! target path after a crash at any point (temp file, fsync, rename, fsync of
//! the directory so the rename itself is durable).

use std::fs::File;
use std::io::Write;
use std::path::Path;

use super::error::{IoContext, LogError, Result};

/// Makes creations, renames and deletions inside `dir` durable.
pub fn fsync_dir(dir: &Path) -> Result<()> {
    // Directories cannot be opened for sync on every platform; on Unix
    // opening read-only and calling fsync is the documented way.
    let d = File::open(dir).ctx(dir)?;
    d.sync_all().ctx(dir)
}

/// Replaces `path` with `bytes` atomically and durably.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut f = File::create(&tmp).ctx(&tmp)?;
    f.write_all(bytes).ctx(&tmp)?;
    f.sync_all().ctx(&tmp)?;
    drop(f);
    std::fs::rename(&tmp, path).ctx(path)?;
    fsync_dir(dir)
}

/// Reads a JSON file, mapping parse failures to `BadMetadata`.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let bytes = std::fs::read(path).ctx(path)?;
    serde_json::from_slice(&bytes).map_err(|e| LogError::BadMetadata {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })
}

pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).expect("metadata serializes");
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// Topic and group names become file names, so they are restricted to a
/// portable character set and may not start with a dot (dot files are ours).
pub fn validate_name(kind: &'static str, name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        Some("must not be empty")
    } else if name.len() > 200 {
        Some("must be at most 200 bytes")
    } else if name.starts_with('.') {
        Some("must not start with '.'")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        Some("may only contain ASCII letters, digits, '.', '_' and '-'")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(LogError::InvalidName {
            kind,
            name: name.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Removes a file, treating "already gone" as success (recovery re-runs steps).
pub fn remove_if_exists(path: &Path) -> Result<bool> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(LogError::Io {
            path: path.to_path_buf(),
            cause: e,
        }),
    }
}
