//! One owner per deployment: the OS lock that a driving process holds for
//! its whole life, and the lease that every one of its writes is checked
//! against.
//!
//! Two mechanisms, because either alone leaves a hole:
//! - [`DeploymentLock`] is an advisory lock (`flock`) on a file beside the
//!   store, `STORE.locks/deployment-ID.lock`. The kernel releases it when
//!   the process dies, so a killed process never leaves a stale lock. It
//!   gives the prompt, clear refusal; but it only works between processes
//!   that see the same lock file on the same host.
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

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use super::catalog::{deployment_in, require_accepting};
use super::deployment::Deployment;
use super::{TableError, TableStore};
use crate::fslock::{FileLock, TryLock};

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

impl TableStore {
    /// Makes this process the deployment's owner: bumps its generation and
    /// records `owner`, in one transaction. Any lease taken before is void
    /// from the moment this commits. Refuses a retired or dropped deployment.
    pub fn take_over(&mut self, id: i64, owner: &str) -> Result<Lease, TableError> {
        let tx = self.write_txn()?;
        require_accepting(&tx, id, "be taken over")?;
        tx.execute(
            "UPDATE kappa_deployments SET generation = generation + 1, owner = ?2 WHERE id = ?1",
            params![id, owner],
        )?;
        let generation = tx.query_row(
            "SELECT generation FROM kappa_deployments WHERE id = ?1",
            [id],
            |r| r.get(0),
        )?;
        tx.commit()?;
        Ok(Lease {
            deployment: id,
            generation,
        })
    }

    /// Fails with `Fenced` when another process took the deployment over
    /// since `lease` was taken (what an idle owner checks now and then).
    pub fn check_lease(&self, lease: &Lease) -> Result<(), TableError> {
        require_lease(&self.conn, lease)
    }

    /// The process that last took the deployment over, if any.
    pub fn owner(&self, id: i64) -> Result<Option<String>, TableError> {
        Ok(self
            .conn
            .query_row(
                "SELECT owner FROM kappa_deployments WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .optional()?
            .flatten())
    }
}

/// Fails with `Fenced` unless `lease` is still the deployment's current one.
/// Called inside the transaction whose writes it guards.
pub(super) fn require_lease(conn: &Connection, lease: &Lease) -> Result<(), TableError> {
    let current: Option<(i64, Option<String>)> = conn
        .prepare_cached("SELECT generation, owner FROM kappa_deployments WHERE id = ?1")?
        .query_row([lease.deployment], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let (generation, owner) = current.ok_or(TableError::DeploymentNotFound {
        id: lease.deployment,
    })?;
    if generation == lease.generation {
        return Ok(());
    }
    Err(TableError::Fenced {
        deployment: describe(&deployment_in(conn, lease.deployment)?),
        owner: owner.unwrap_or_else(|| "another process".into()),
    })
}

/// The lock a process holds while it drives a deployment; released when
/// dropped or when the process dies.
#[derive(Debug)]
pub struct DeploymentLock {
    lock: FileLock,
}

impl DeploymentLock {
    /// Locks deployment `d` of the store at `store`, or fails with `Owned`
    /// naming the process that holds it.
    pub fn acquire(store: &Path, d: &Deployment) -> Result<DeploymentLock, TableError> {
        let dir = lock_dir(store);
        std::fs::create_dir_all(&dir).map_err(|cause| TableError::Io {
            path: dir.clone(),
            cause,
        })?;
        let path = dir.join(format!("deployment-{}.lock", d.id));
        match FileLock::try_exclusive(&path, &this_process()) {
            Ok(lock) => Ok(DeploymentLock { lock }),
            Err(TryLock::Held(holder)) => Err(TableError::Owned {
                deployment: describe(d),
                holder: holder.unwrap_or_else(|| "another process".into()),
            }),
            Err(TryLock::Io(cause)) => Err(TableError::Io { path, cause }),
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        self.lock.path()
    }
}

/// `STORE.locks`, beside the store file.
pub(super) fn lock_dir(store: &Path) -> PathBuf {
    let mut name = store.file_name().unwrap_or_default().to_os_string();
    name.push(".locks");
    store.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{new_deployment, offset, row, schema, store};
    use super::*;
    use crate::table::{DeploymentState, EpochStats};
    use crate::value::Value;

    #[test]
    fn a_stale_owner_is_fenced_off_and_writes_nothing() {
        let (_dir, mut store) = store();
        let d = store
            .create_deployment(&new_deployment(
                "j",
                vec![schema("o", &["k"], &[0])],
                DeploymentState::Building,
            ))
            .unwrap();
        let stats = EpochStats::default();
        let epoch = |k: &str, next| {
            (
                vec![vec![(row(&[Value::str(k)]), 1)]],
                vec![offset("events", "clicks", 0, next)],
            )
        };
        let first = store.take_over(d.id, "pid 1 on a").unwrap();
        let (changes, offsets) = epoch("a", 1);
        store
            .commit_epoch(&first, &changes, &offsets, &stats)
            .unwrap();
        // Two owners forced: the second takes over, as if the lock had not
        // reached the first one.
        let second = store.take_over(d.id, "pid 2 on b").unwrap();
        assert_eq!(second.generation, first.generation + 1);
        assert_eq!(store.owner(d.id).unwrap().as_deref(), Some("pid 2 on b"));
        let (changes, offsets) = epoch("b", 2);
        let err = store
            .commit_epoch(&first, &changes, &offsets, &stats)
            .unwrap_err();
        assert!(
            matches!(&err, TableError::Fenced { deployment, owner }
                if deployment == "o v1" && owner == "pid 2 on b"),
            "{err}"
        );
        assert!(err.is_state_conflict());
        for refused in [
            store.set_progress(&first, &stats),
            store.mark_caught_up(&first),
            store.swap_owned(&first).map(|_| ()),
            store.check_lease(&first),
        ] {
            assert!(matches!(refused, Err(TableError::Fenced { .. })));
        }
        // Nothing of the stale owner's epoch landed; the new owner goes on.
        assert_eq!(store.read_rows(&d.table(0)).unwrap().len(), 1);
        assert_eq!(store.offsets(d.id).unwrap()[&("events".into(), 0)], 1);
        assert_eq!(
            store.deployment(d.id).unwrap().state,
            DeploymentState::Building
        );
        store
            .commit_epoch(&second, &changes, &offsets, &stats)
            .unwrap();
        assert_eq!(store.read_rows(&d.table(0)).unwrap().len(), 2);
    }

    #[test]
    fn the_lock_refuses_a_second_holder_until_the_first_lets_go() {
        let (dir, mut store) = store();
        let d = store
            .create_deployment(&new_deployment(
                "j",
                vec![schema("sessions", &["k"], &[0])],
                DeploymentState::Live,
            ))
            .unwrap();
        let path = store.path().to_path_buf();
        let held = DeploymentLock::acquire(&path, &d).unwrap();
        assert!(held.path().starts_with(dir.path()));
        let err = DeploymentLock::acquire(&path, &d).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("sessions v1 is already driven by another process (pid ")
                && text.contains(&std::process::id().to_string()),
            "{text}"
        );
        drop(held);
        DeploymentLock::acquire(&path, &d).unwrap();
    }

    #[test]
    fn a_retired_deployment_cannot_be_taken_over() {
        let (_dir, mut store) = store();
        let out = || vec![schema("o", &["k"], &[0])];
        let v1 = store
            .create_deployment(&new_deployment("j", out(), DeploymentState::Live))
            .unwrap();
        let v2 = store
            .create_deployment(&new_deployment("j", out(), DeploymentState::Building))
            .unwrap();
        store.swap(v2.id).unwrap();
        assert!(matches!(
            store.take_over(v1.id, "me"),
            Err(TableError::StateConflict { .. })
        ));
    }
}
