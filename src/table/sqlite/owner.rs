//! The SQLite store's side of one owner per deployment (see
//! [`crate::table::owner`]): the generation in the catalog, and a lock file
//! per deployment in `STORE.locks/` beside the store.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use super::super::owner::describe;
use super::catalog::{deployment_in, require_accepting};
use super::epoch::reset_half_written;
use super::{SqliteStore, TableError};
use crate::fslock::{FileLock, TryLock};
use crate::table::{Deployment, DeploymentLock, Lease, this_process};

impl SqliteStore {
    /// Makes this process the deployment's owner: bumps its generation and
    /// records `owner`, in one transaction. Any lease taken before is void
    /// from the moment this commits. Refuses a retired or dropped deployment.
    /// A deployment whose last owner stopped half-way through an epoch is
    /// emptied here, to be replayed from the start (see [`super::epoch::PIECE_ROWS`]).
    pub(super) fn take_over(&mut self, id: i64, owner: &str) -> Result<Lease, TableError> {
        let tx = self.write_txn()?;
        require_accepting(&tx, id, "be taken over")?;
        let reset = reset_half_written(&tx, id)?.then(|| super::catalog::name_in(&tx, id));
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
        if let Some(name) = reset {
            // The tables were made anew: their statements are prepared anew.
            self.writers.remove(&id);
            tracing::warn!(
                "{name}: the previous process stopped in the middle of writing an epoch; \
                 rebuilding this version from the start of its inputs"
            );
        }
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

/// A lock file cannot be lost while the process lives.
impl crate::table::owner::Holder for FileLock {}

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
            holder: holder.unwrap_or_else(|| "its lock file names no process".into()),
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
