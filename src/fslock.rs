//! Advisory file locks: the one mechanism behind the topic writer lock, the
//! deployment lock and the table store's presence lock.
//!
//! A lock is `flock` on an open file (std's `File::lock` family), so the
//! kernel releases it when the process dies: a killed process never leaves a
//! stale lock. An exclusive lock may carry a line naming its holder (pid and
//! host), which a refused process reads back for its error message; it is
//! only a hint for humans.
//!
//! Invariant for locks whose file may be removed (the store's presence lock):
//! a lock counts only while its path still names the locked file, so
//! [`FileLock::shared`] re-opens until the file it locked is the one at the
//! path.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A held lock; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct FileLock {
    file: File,
    path: PathBuf,
}

/// Why an exclusive lock was not taken.
#[derive(Debug)]
pub enum TryLock {
    /// Another open file holds it; the holder's line, when it wrote one.
    Held(Option<String>),
    /// The lock file could not be opened or locked.
    Io(io::Error),
}

impl FileLock {
    /// Takes the exclusive lock at `path` without waiting, creating the file,
    /// and writes `holder` into it.
    pub fn try_exclusive(path: &Path, holder: &str) -> Result<FileLock, TryLock> {
        let mut file = open(path).map_err(TryLock::Io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                let text = text.trim();
                return Err(TryLock::Held((!text.is_empty()).then(|| text.to_string())));
            }
            Err(TryLockError::Error(e)) => return Err(TryLock::Io(e)),
        }
        let _ = file.set_len(0);
        let _ = writeln!(file, "{holder}");
        Ok(FileLock {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Takes a shared lock at `path`, waiting while an exclusive holder has
    /// it, creating the file if missing.
    pub fn shared(path: &Path) -> io::Result<FileLock> {
        loop {
            // A reader without write permission can still share the lock.
            let file = match open(path) {
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => File::open(path)?,
                other => other?,
            };
            file.lock_shared()?;
            // The exclusive holder may have removed the file before we got
            // the lock: a lock on a removed file protects nothing.
            if same_file(&file, path)? {
                return Ok(FileLock {
                    file,
                    path: path.to_path_buf(),
                });
            }
        }
    }

    /// Turns this shared lock into an exclusive one if no one else holds
    /// it; `false` otherwise. A failed attempt may lose the shared lock
    /// (flock converts by unlocking first), so call it only when about to
    /// let go anyway.
    pub fn try_upgrade(&self) -> io::Result<bool> {
        match self.file.try_lock() {
            Ok(()) => Ok(true),
            Err(TryLockError::WouldBlock) => Ok(false),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

fn open(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
}

fn same_file(file: &File, path: &Path) -> io::Result<bool> {
    let held = file.metadata()?;
    match std::fs::metadata(path) {
        Ok(now) => Ok(now.dev() == held.dev() && now.ino() == held.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exclusive_lock_names_its_holder_to_the_next_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let first = FileLock::try_exclusive(&path, "pid 1 on here").unwrap();
        match FileLock::try_exclusive(&path, "pid 2") {
            Err(TryLock::Held(holder)) => assert_eq!(holder.as_deref(), Some("pid 1 on here")),
            other => panic!("expected Held, got {other:?}"),
        }
        drop(first);
        FileLock::try_exclusive(&path, "pid 2").unwrap();
    }

    #[test]
    fn shared_holders_block_an_upgrade_until_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.lock");
        let a = FileLock::shared(&path).unwrap();
        let b = FileLock::shared(&path).unwrap();
        assert!(!a.try_upgrade().unwrap());
        drop(a);
        assert!(b.try_upgrade().unwrap());
    }

    #[test]
    fn a_shared_lock_is_never_on_a_removed_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.lock");
        let a = FileLock::shared(&path).unwrap();
        assert!(a.try_upgrade().unwrap());
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || FileLock::shared(&path).unwrap())
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        std::fs::remove_file(&path).unwrap();
        drop(a);
        let b = waiter.join().unwrap();
        assert!(same_file(&b.file, &path).unwrap());
    }
}
