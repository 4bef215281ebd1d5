//! Small filesystem helpers shared by the log: directory fsync, atomic
//! replacement of small files, disk space reservation, and name validation.
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

/// Allocates `len` bytes of `file` from `from` on without changing its
/// length (`fallocate` with `FALLOC_FL_KEEP_SIZE`): the writes that follow
/// into that range cannot fail for lack of space. A filesystem that cannot
/// reserve (no `fallocate`) is not an error; the writes then find out.
pub fn reserve(file: &File, path: &Path, from: u64, len: u64) -> Result<()> {
    use std::os::fd::AsRawFd;
    if len == 0 {
        return Ok(());
    }
    let (Ok(from), Ok(len)) = (libc::off_t::try_from(from), libc::off_t::try_from(len)) else {
        return Ok(());
    };
    // SAFETY: fallocate reads no memory of ours; the fd is open for writing.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, from, len) };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(()),
        _ => Err(e).ctx(path),
    }
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
