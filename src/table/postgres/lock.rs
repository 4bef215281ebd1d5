//! The PostgreSQL store's deployment lock: a session advisory lock, held on
//! a connection of its own for as long as the process drives the deployment.
//! The server releases it when that connection ends, so a killed process (on
//! any host) never leaves it behind. It gives the prompt error; the
//! generation in the catalog is what guarantees one owner (see
//! [`crate::table::owner`]), also if this connection is lost and the lock
//! with it.

use super::connect_client;
use crate::table::owner::describe;
use crate::table::{Deployment, DeploymentLock, PgAddr, TableError};

/// The first key of deployment locks ('kapq'); the second is the id.
pub(super) const DEPLOYMENT_CLASS: i32 = 0x6b61_7071;

/// Locks deployment `d`, or fails with `Owned` naming `owner`, the process
/// the catalog says took it over last.
pub(super) fn acquire(
    addr: &PgAddr,
    d: &Deployment,
    owner: Option<String>,
) -> Result<DeploymentLock, TableError> {
    let mut client = connect_client(addr)?;
    let key = (d.id % i64::from(i32::MAX)) as i32;
    let locked: bool = client
        .query_one(
            "SELECT pg_try_advisory_lock($1, $2)",
            &[&DEPLOYMENT_CLASS, &key],
        )
        .map_err(|e| super::name_store(e.into(), &addr.to_string()))?
        .get(0);
    if !locked {
        return Err(TableError::Owned {
            deployment: describe(d),
            holder: owner.unwrap_or_else(|| "another process".into()),
        });
    }
    Ok(DeploymentLock::new(
        client,
        format!("advisory lock ({DEPLOYMENT_CLASS}, {key}) on {addr}"),
    ))
}
