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

use std::sync::{Arc, Mutex};
use std::time::Duration;

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

    /// How often a thread of its own keeps it (see [`DeploymentLock`]);
    /// `None` for a lock that cannot be lost.
    fn keep_every(&self) -> Option<Duration> {
        None
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

type Shared<T> = Arc<Mutex<T>>;

/// The lock a process holds while it drives a deployment (from
/// [`TableStore::lock`](super::TableStore::lock)); released when dropped or
/// when the process dies.
///
/// A lock that can be lost with its connection is kept by a thread of its
/// own, every [`Holder::keep_every`]: its session never idles, and a lost
/// session is taken again at once, however long the driving process's
/// commit or dataflow step takes. Between the loss and the retake another
/// process may take the lock; it then takes the deployment over, and this
/// process is fenced off by the lease. What the thread could not repair
/// waits for the driving process's next [`DeploymentLock::keep`].
pub struct DeploymentLock {
    /// The file lock or the connection that holds the session lock.
    held: Shared<Box<dyn Holder>>,
    /// The keeper thread's failure, not yet reported.
    failed: Shared<Option<TableError>>,
    /// Whether a keeper thread runs (see [`DeploymentLock::check`]).
    kept_by_thread: bool,
    what: String,
}

impl DeploymentLock {
    pub(super) fn new(held: impl Holder + 'static, what: String) -> DeploymentLock {
        let every = held.keep_every();
        let mut lock = DeploymentLock {
            held: Arc::new(Mutex::new(Box::new(held))),
            failed: Arc::default(),
            kept_by_thread: false,
            what,
        };
        if let Some(every) = every {
            lock.kept_by_thread = lock.spawn_keeper(every);
        }
        lock
    }

    /// Keeps the lock every `every` until it is dropped (the thread holds
    /// it only weakly, so dropping the lock releases it) or a keep fails;
    /// whether the thread runs.
    fn spawn_keeper(&self, every: Duration) -> bool {
        let held = Arc::downgrade(&self.held);
        let failed = self.failed.clone();
        let what = self.what.clone();
        let keeper = move || {
            loop {
                std::thread::sleep(every);
                let Some(held) = held.upgrade() else { return };
                let Ok(mut held) = held.lock() else { return };
                match held.keep() {
                    Ok(Kept::Held) => {}
                    Ok(Kept::Retaken(why)) => report_retaken(&what, &why),
                    Err(e) => {
                        if let Ok(mut failed) = failed.lock() {
                            *failed = Some(e);
                        }
                        return;
                    }
                }
            }
        };
        // Without the thread the driving process still keeps the lock
        // between commits.
        match std::thread::Builder::new()
            .name("kappa-lock".into())
            .spawn(keeper)
        {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!("no thread to keep the deployment lock: {e}");
                false
            }
        }
    }

    /// What holds it: the lock file, or the advisory lock's key.
    pub fn describe(&self) -> &str {
        &self.what
    }

    /// Checks that it is still held, and takes it again if what held it
    /// was lost (see [`Holder::keep`]); the keeper thread's failure first.
    /// The driving process calls it between commits, so that it stops when
    /// another process holds the lock now.
    pub fn keep(&self) -> Result<Kept, TableError> {
        if let Some(e) = self.failed.lock().expect("deployment lock poisoned").take() {
            return Err(e);
        }
        self.held.lock().expect("deployment lock poisoned").keep()
    }

    /// What the driving process calls between commits: the keeper
    /// thread's failure when a thread keeps the lock (it has kept it within
    /// [`Holder::keep_every`], so no round trip is needed), else
    /// [`DeploymentLock::keep_and_report`].
    pub fn check(&self) -> Result<(), TableError> {
        if !self.kept_by_thread {
            return self.keep_and_report();
        }
        match self.failed.lock().expect("deployment lock poisoned").take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// [`DeploymentLock::keep`], saying on stderr when it was taken again.
    pub fn keep_and_report(&self) -> Result<(), TableError> {
        if let Kept::Retaken(why) = self.keep()? {
            report_retaken(&self.what, &why);
        }
        Ok(())
    }
}

/// Says on stderr that the lock `what` was lost (`why`) and taken again.
fn report_retaken(what: &str, why: &str) {
    tracing::warn!("the deployment lock was lost ({why}) and is held again");
    say!("kappa: the deployment lock ({what}) was lost with its connection ({why}); took it again");
}

impl std::fmt::Debug for DeploymentLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploymentLock")
            .field("what", &self.what)
            .finish()
    }
}
