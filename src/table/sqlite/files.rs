//! The store's files on their disk: what a full disk is reported as,
//! opening for reading only, and removing a store that a failed first run
//! created.
//!
//! Invariants:
//! - A reader never writes: [`open_reader`] opens `SQLITE_OPEN_READ_ONLY`,
//!   so read-only commands work on a full disk and without write
//!   permission.
//! - The immutable fallback (SQLite reads the file with no locks and no
//!   shared-memory index) is taken only when the index cannot be made for
//!   lack of space *and* no write-ahead log holds changes: then the file
//!   alone is the whole store, and no writer can start on that disk.
//! - Files are removed only under the exclusive presence lock (no other
//!   kappa process has the store open) and only when the catalog holds no
//!   deployment and the file no table kappa did not create.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, ErrorCode, OpenFlags};

use super::owner;
use crate::fslock::FileLock;
use crate::table::TableError;

/// Free space below which an I/O error of SQLite is taken for a full disk.
const LOW_SPACE: u64 = 1 << 20;

/// The directory the store's files are in.
fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Bytes an unprivileged process may still write on the filesystem of
/// `dir`, or `None` when it cannot be told.
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `name` is a NUL-terminated path and `stat` points to writable
    // memory of the struct's size; statvfs fills it in full when it
    // returns 0, and only then is it read.
    let stat = unsafe {
        if libc::statvfs(name.as_ptr(), stat.as_mut_ptr()) != 0 {
            return None;
        }
        stat.assume_init()
    };
    Some(u64::from(stat.f_bavail).saturating_mul(u64::from(stat.f_frsize)))
}

/// `e`, or, when SQLite failed for want of space, a [`TableError::DiskFull`]
/// naming the store and its directory. SQLite reports some of those
/// failures as plain I/O errors (growing the shared-memory index), so an
/// I/O error on a nearly full disk counts too.
pub(super) fn on_full_disk(path: &Path, e: TableError) -> TableError {
    let TableError::Sqlite(rusqlite::Error::SqliteFailure(failure, message)) = &e else {
        return e;
    };
    let dir = dir_of(path);
    let free = free_bytes(dir);
    let full = match failure.code {
        ErrorCode::DiskFull => true,
        ErrorCode::SystemIoFailure => free.is_some_and(|f| f < LOW_SPACE),
        _ => false,
    };
    if !full {
        return e;
    }
    TableError::DiskFull {
        store: path.to_path_buf(),
        dir: dir.to_path_buf(),
        free,
        sqlite: message.clone().unwrap_or_else(|| failure.to_string()),
    }
}

/// A read-only connection to the store at `path` (which exists).
///
/// A reader of a store in WAL mode needs its `-shm` file, which it creates
/// when the store's last writer has closed. Where it cannot (a full disk, or
/// a user who may read the store but not write its directory) and the WAL
/// holds nothing, the file alone is the whole store, and it is opened as
/// immutable. Where the WAL holds changes, they cannot be read without the
/// `-shm` file, and the open fails, saying why.
pub(super) fn open_reader(path: &Path) -> Result<Connection, TableError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags)?;
    match conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    }) {
        Ok(_) => Ok(conn),
        Err(rusqlite::Error::SqliteFailure(f, _)) if needs_shm_file(f.extended_code) => {
            drop(conn);
            if wal_has_changes(path) {
                return Err(TableError::Io {
                    path: suffixed(path, "-shm"),
                    cause: std::io::Error::other(format!(
                        "cannot be created, and the store's write-ahead log {} holds changes \
                         that cannot be read without it; run this as a user who may write \
                         {}, or once its writer has closed it (SQLite: {f})",
                        suffixed(path, "-wal").display(),
                        path.parent().unwrap_or(Path::new(".")).display()
                    )),
                });
            }
            let uri = format!("file:{}?immutable=1", uri_path(path));
            Ok(Connection::open_with_flags(uri, flags)?)
        }
        Err(e) => Err(e.into()),
    }
}

/// Whether SQLite's `code` says a reader could not create or map the
/// store's `-shm` file.
fn needs_shm_file(code: std::ffi::c_int) -> bool {
    use rusqlite::ffi;
    matches!(
        code,
        ffi::SQLITE_IOERR_SHMSIZE
            | ffi::SQLITE_IOERR_SHMOPEN
            | ffi::SQLITE_READONLY_CANTINIT
            | ffi::SQLITE_READONLY_CANTLOCK
            | ffi::SQLITE_READONLY_RECOVERY
            | ffi::SQLITE_READONLY_DIRECTORY
            | ffi::SQLITE_CANTOPEN
    )
}

/// Whether the write-ahead log beside `path` exists with content (or
/// cannot be looked at).
fn wal_has_changes(path: &Path) -> bool {
    match std::fs::metadata(suffixed(path, "-wal")) {
        Ok(m) => m.len() > 0,
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

/// `path` for a `file:` URI: absolute, with `%`, `?` and `#` escaped.
fn uri_path(path: &Path) -> String {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        match c {
            '%' => out.push_str("%25"),
            '?' => out.push_str("%3f"),
            '#' => out.push_str("%23"),
            c => out.push(c),
        }
    }
    out
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

/// The presence lock of the store at `path`: shared while a process has it
/// open.
pub(super) fn presence_lock(path: &Path) -> Result<FileLock, TableError> {
    let dir = owner::lock_dir(path);
    std::fs::create_dir_all(&dir).map_err(|cause| TableError::Io {
        path: dir.clone(),
        cause,
    })?;
    let lock = dir.join("store.lock");
    FileLock::shared(&lock).map_err(|cause| TableError::Io { path: lock, cause })
}

/// Removes the store at `path` (its file, write-ahead log, index and
/// locks) when no other kappa process has it open and it holds no
/// deployment; returns whether it did. `presence` is this process's
/// shared presence lock, let go of here.
pub(super) fn remove_unused(path: &Path, presence: FileLock) -> Result<bool, TableError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |cause| TableError::Io { path, cause }
    };
    if !presence.try_upgrade().map_err(io(presence.path()))? || !holds_nothing(path)? {
        return Ok(false);
    }
    for suffix in ["", "-wal", "-shm"] {
        let name = suffixed(path, suffix);
        match std::fs::remove_file(&name) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&name)(e)),
            _ => {}
        }
    }
    // With no deployment in the catalog, the deployment locks lock
    // nothing (ids are never reused); the presence lock goes last.
    let lock_dir = owner::lock_dir(path);
    for entry in std::fs::read_dir(&lock_dir).map_err(io(&lock_dir))? {
        let entry = entry.map_err(io(&lock_dir))?;
        if entry.path() != presence.path() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    std::fs::remove_file(presence.path()).map_err(io(presence.path()))?;
    let _ = std::fs::remove_dir(&lock_dir);
    Ok(true)
}

/// Removes the store at `path` if a failed first run left it unused (see
/// [`remove_unused`]), even when it cannot be opened for writing (a full
/// disk). A store whose presence lock cannot be taken is left alone.
pub(super) fn remove_if_unused_at(path: &Path) -> Result<bool, TableError> {
    // Also when the file itself was never made: the lock directory was.
    let lock = owner::lock_dir(path).join("store.lock");
    let Ok(presence) = FileLock::shared(&lock) else {
        return Ok(false);
    };
    remove_unused(path, presence)
}

/// Whether the file at `path` holds no deployment and no table but
/// kappa's: empty, or a catalog with no deployment in it.
fn holds_nothing(path: &Path) -> Result<bool, TableError> {
    if std::fs::metadata(path).map_or(true, |m| m.len() == 0) && !wal_has_changes(path) {
        return Ok(true);
    }
    let conn = open_reader(path)?;
    let foreign: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' \
         AND name NOT LIKE 'kappa\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
        [],
        |r| r.get(0),
    )?;
    let has_catalog: bool = conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'kappa_deployments'",
        [],
        |r| r.get(0),
    )?;
    if foreign > 0 {
        return Ok(false);
    }
    if !has_catalog {
        return Ok(true);
    }
    Ok(conn.query_row(
        "SELECT NOT EXISTS (SELECT 1 FROM kappa_deployments)",
        [],
        |r| r.get(0),
    )?)
}
