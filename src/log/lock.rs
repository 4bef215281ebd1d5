//! The single-writer lock of a topic: `writer.lock` in the topic directory.
//!
//! Invariant: at most one `TopicWriter` (in any process) holds the lock at a
//! time. The lock is an OS advisory lock on the open file (`File::try_lock`,
//! flock on Unix), so it disappears with the process: a killed writer never
//! leaves a stale lock behind. The file's content (the holder's pid) is only
//! a hint for humans. Readers never take the lock.

use std::path::Path;

use super::error::{IoContext, LogError, Result};
use crate::fslock::{FileLock, TryLock};

pub const LOCK_FILE: &str = "writer.lock";

/// Held for the lifetime of a writer; released when dropped.
#[derive(Debug)]
pub struct WriterLock {
    _lock: FileLock,
}

impl WriterLock {
    pub fn acquire(topic_dir: &Path, topic: &str) -> Result<Self> {
        let path = topic_dir.join(LOCK_FILE);
        match FileLock::try_exclusive(&path, &std::process::id().to_string()) {
            Ok(lock) => Ok(WriterLock { _lock: lock }),
            Err(TryLock::Held(_)) => Err(LogError::Locked {
                topic: topic.to_string(),
                path,
            }),
            Err(TryLock::Io(e)) => Err(e).ctx(&path),
        }
    }
}
