//! The single-writer lock of a topic: `writer.lock` in the topic directory.
//!
//! Invariant: at most one `TopicWriter` (in any process) holds the lock at a
//! time. The lock is an OS advisory lock on the open file (`File::try_lock`,
//! flock on Unix), so it disappears with the process: a killed writer never
//! leaves a stale lock behind. The file's content (the holder's pid) is only
//! a hint for humans. Readers never take the lock.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::Path;

use super::error::{IoContext, LogError, Result};

pub const LOCK_FILE: &str = "writer.lock";

/// Held for the lifetime of a writer; released when dropped.
#[derive(Debug)]
pub struct WriterLock {
    file: File,
}

impl WriterLock {
    pub fn acquire(topic_dir: &Path, topic: &str) -> Result<Self> {
        let path = topic_dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .ctx(&path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(LogError::Locked {
                    topic: topic.to_string(),
                    path,
                });
            }
            Err(TryLockError::Error(e)) => return Err(e).ctx(&path),
        }
        // Best effort: the pid helps an operator find the holder.
        let _ = file.set_len(0);
        let _ = writeln!(file, "{}", std::process::id());
        Ok(WriterLock { file })
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}
