//! The SQLite store's side of one owner per deployment (see
//! [`crate::table::owner`]): the generation in the catalog, and a lock file
//! per deployment in `STORE.locks/` beside the store.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use super::super::owner::describe;
use super::catalog::{deployment_in, require_accepting};
use super::{SqliteStore, TableError};
use crate::fslock::{FileLock, TryLock};
use crate::table::{Deployment, DeploymentLock, Lease, this_process};

impl SqliteStore {
    /// Makes this process the deployment's owner: bumps its generation and
    /// records `owner`, in one transaction. Any lease taken before is void
    /// from the moment this commits. Refuses a retired or dropped deployment.
    pub(super) fn take_over(&mut self, id: i64, owner: &str) -> Result<Lease, TableError> {
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

    /// The process that last took the deployment over, if any.
    pub(super) fn owner(&self, id: i64) -> Result<Option<String>, TableError> {
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

/// Locks deployment `d` of the store at `store`, or fails with `Owned`
/// naming the process that holds it.
pub(super) fn lock_file(store: &Path, d: &Deployment) -> Result<DeploymentLock, TableError> {
    let dir = lock_dir(store);
    std::fs::create_dir_all(&dir).map_err(|cause| TableError::Io {
        path: dir.clone(),
        cause,
    })?;
    let path = dir.join(format!("deployment-{}.lock", d.id));
    match FileLock::try_exclusive(&path, &this_process()) {
        Ok(lock) => Ok(DeploymentLock::new(lock, path.display().to_string())),
        Err(TryLock::Held(holder)) => Err(TableError::Owned {
            deployment: describe(d),
            holder: holder.unwrap_or_else(|| "another process".into()),
        }),
        Err(TryLock::Io(cause)) => Err(TableError::Io { path, cause }),
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
    use crate::table::TableStore;
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
        let held = store.lock(&d).unwrap();
        assert!(
            held.describe()
                .starts_with(&dir.path().display().to_string())
        );
        let err = store.lock(&d).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("sessions v1 is already driven by another process (pid ")
                && text.contains(&std::process::id().to_string()),
            "{text}"
        );
        drop(held);
        store.lock(&d).unwrap();
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
