//! One owner per deployment: the lock that a driving process holds for its
//! whole life, and the lease that every one of its writes is checked
//! against. Both stores keep both.
//!
//! Two mechanisms, because either alone leaves a hole:
//! - [`DeploymentLock`] gives the prompt, clear refusal of a second owner.
//!   The SQLite store takes an advisory lock (`flock`) on a file beside the
//!   store; the PostgreSQL store a session advisory lock on a connection of
//!   its own. Either is released when the process dies, so a killed process
//!   never leaves a stale lock; but a file lock only works between processes
//!   that see the same file on the same host.
//! - [`Lease`] is the compare-and-set. [`TableStore::take_over`] bumps the
//!   deployment's `generation` and records the owner; every write of the
//!   owner (an epoch, progress, its own swap) checks in the same transaction
//!   that the generation is still the one it took. A process that another
//!   took over (the lock file removed, a store shared by hosts) is fenced
//!   off: its transaction is rolled back with `TableError::Fenced`.
//!
//! Invariant: the new owner reads the committed offsets only after its
//! take-over has committed, so from then on no commit of an older owner can
//! land under the offsets it resumes from.
//!
//! [`TableStore::take_over`]: super::TableStore::take_over

use super::TableError;
use super::deployment::Deployment;

/// A process's right to write a deployment: valid while the deployment's
/// generation is still `generation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The id of the deployment it lets the process write.
    pub deployment: i64,
    /// The deployment's generation when the process took it over; every
    /// take-over bumps it, voiding older leases.
    pub generation: i64,
}

/// How a process names itself in the catalog and in errors.
pub fn this_process() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty());
    match host {
        Some(host) => format!("pid {} on {host}", std::process::id()),
        None => format!("pid {}", std::process::id()),
    }
}

/// What errors call a deployment: its outputs and version (`sessions v2`).
pub(super) fn describe(d: &Deployment) -> String {
    d.to_string()
}

/// What holds a deployment lock: a lock file, or a server session.
pub(super) trait Holder: Send {
    /// Whether the lock is still held, taken again where what held it was
    /// lost (a connection); `Err(Owned)` when another process holds it now.
    /// A file lock cannot be lost while the process lives.
    fn keep(&mut self) -> Result<Kept, TableError> {
        Ok(Kept::Held)
    }
}

/// What [`DeploymentLock::keep`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    /// Still held.
    Held,
    /// It had been lost (why), and is held again.
    Retaken(String),
}

/// The lock a process holds while it drives a deployment (from
/// [`TableStore::lock`](super::TableStore::lock)); released when dropped or
/// when the process dies.
pub struct DeploymentLock {
    /// The file lock or the connection that holds the session lock.
    held: std::sync::Mutex<Box<dyn Holder>>,
    what: String,
}

impl DeploymentLock {
    pub(super) fn new(held: impl Holder + 'static, what: String) -> DeploymentLock {
        DeploymentLock {
            held: std::sync::Mutex::new(Box::new(held)),
            what,
        }
    }

    /// What holds it: the lock file, or the advisory lock's key.
    pub fn describe(&self) -> &str {
        &self.what
    }

    /// Checks that it is still held, and takes it again if what held it
    /// was lost (see [`Holder::keep`]). The driving process calls it
    /// between commits, so that a second process is refused also after the
    /// lock's connection was lost.
    pub fn keep(&self) -> Result<Kept, TableError> {
        self.held.lock().expect("deployment lock poisoned").keep()
    }

    /// [`DeploymentLock::keep`], saying on stderr when it was taken again.
    pub fn keep_and_report(&self) -> Result<(), TableError> {
        if let Kept::Retaken(why) = self.keep()? {
            tracing::warn!("the deployment lock was lost ({why}) and is held again");
            say!(
                "kappa: the deployment lock ({}) was lost with its connection ({why}); took it again",
                self.what
            );
        }
        Ok(())
    }
}

impl std::fmt::Debug for DeploymentLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploymentLock")
            .field("what", &self.what)
            .finish()
    }
}
