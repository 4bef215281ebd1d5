//! The PostgreSQL store's deployment lock: a session advisory lock, held on
//! a connection of its own for as long as the process drives the deployment.
//! The server releases it when that connection ends, so a killed process (on
//! any host) never leaves it behind. It gives the prompt error; the
//! generation in the catalog is what guarantees one owner (see
//! [`crate::table::owner`]).
//!
//! The connection can be lost while the process lives: a server restart,
//! `pg_terminate_backend`, `idle_session_timeout`, a network cut. The lock
//! goes with it, so a thread of the driving process checks it every
//! [`KEEP_EVERY`] ([`SessionLock::keep`]) and takes it again on a new
//! connection; if another process took it meanwhile, the driving process
//! stops with the "already driven by" error before its next commit. The
//! check is a statement on the connection, which also keeps it from being
//! idle.

use std::time::{Duration, Instant};

use postgres::Client;

use super::{connect_client, connect_with_backoff, is_connection_error};
use crate::table::owner::{Holder, Kept, describe};
use crate::table::{Deployment, DeploymentLock, PgAddr, TableError};

/// The first key of deployment locks ('kapq'); the second is the id.
pub(super) const DEPLOYMENT_CLASS: i32 = 0x6b61_7071;

/// How often the lock's session is checked (and so kept from idling).
const KEEP_EVERY: Duration = Duration::from_millis(200);

/// How long a lost session of this process may still hold the lock on the
/// server after it was ended (the backend exits asynchronously).
const RELEASE_WAIT: Duration = Duration::from_secs(10);

/// Locks deployment `d`, or fails with `Owned` naming `owner`, the process
/// the catalog says took it over last.
pub(super) fn acquire(
    addr: &PgAddr,
    d: &Deployment,
    owner: Option<String>,
) -> Result<DeploymentLock, TableError> {
    let shown = addr.to_string();
    let mut client = named(connect_client(addr)?, &shown)?;
    let key = (d.id % i64::from(i32::MAX)) as i32;
    if !try_lock(&mut client, key, &shown)? {
        return Err(TableError::Owned {
            deployment: describe(d),
            holder: owner.unwrap_or_else(|| "not yet named in the catalog".into()),
        });
    }
    let pid = backend_pid(&mut client, &shown)?;
    Ok(DeploymentLock::new(
        SessionLock {
            client,
            addr: addr.clone(),
            key,
            pid,
            deployment: describe(d),
        },
        format!("advisory lock ({DEPLOYMENT_CLASS}, {key}) on {addr}"),
    ))
}

/// The connection that holds a deployment's session lock.
struct SessionLock {
    client: Client,
    addr: PgAddr,
    key: i32,
    /// The server process of `client`'s session.
    pid: i32,
    deployment: String,
}

impl Holder for SessionLock {
    fn keep(&mut self) -> Result<Kept, TableError> {
        let shown = self.addr.to_string();
        let lost = match self.client.simple_query("SELECT 1") {
            Ok(_) => return Ok(Kept::Held),
            Err(e) => super::name_store(e.into(), &shown),
        };
        if !is_connection_error(&lost) {
            return Err(lost);
        }
        let mut client = named(connect_with_backoff(&self.addr)?, &shown)?;
        if !self.take_again(&mut client, &shown)? {
            return Err(TableError::Owned {
                deployment: self.deployment.clone(),
                holder: "it took the lock while this process's connection to the \
                         store was lost"
                    .into(),
            });
        }
        self.pid = backend_pid(&mut client, &shown)?;
        self.client = client;
        Ok(Kept::Retaken(lost.to_string()))
    }

    fn keep_every(&self) -> Option<Duration> {
        Some(KEEP_EVERY)
    }
}

impl SessionLock {
    /// Takes the lock on `client`. The lost session may still hold it (a
    /// network cut leaves it open on the server until its keepalives fail):
    /// it is this process's own, so it is ended, and the lock awaited.
    fn take_again(&self, client: &mut Client, shown: &str) -> Result<bool, TableError> {
        let deadline = Instant::now() + RELEASE_WAIT;
        loop {
            if try_lock(client, self.key, shown)? {
                return Ok(true);
            }
            let holders: Vec<i32> = client
                .query(
                    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted \
                     AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 2",
                    &[&i64::from(DEPLOYMENT_CLASS), &i64::from(self.key)],
                )
                .map_err(|e| super::name_store(e.into(), shown))?
                .iter()
                .map(|r| r.get(0))
                .collect();
            let ours = holders.iter().all(|&pid| pid == self.pid);
            if !ours || Instant::now() >= deadline {
                return Ok(false);
            }
            if !holders.is_empty() {
                client
                    .execute("SELECT pg_terminate_backend($1)", &[&self.pid])
                    .map_err(|e| super::name_store(e.into(), shown))?;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The lock's connection, named for `pg_stat_activity`.
fn named(mut client: Client, shown: &str) -> Result<Client, TableError> {
    client
        .simple_query("SET application_name = 'kappa deployment lock'")
        .map_err(|e| super::name_store(e.into(), shown))?;
    Ok(client)
}

fn try_lock(client: &mut Client, key: i32, shown: &str) -> Result<bool, TableError> {
    Ok(client
        .query_one(
            "SELECT pg_try_advisory_lock($1, $2)",
            &[&DEPLOYMENT_CLASS, &key],
        )
        .map_err(|e| super::name_store(e.into(), shown))?
        .get(0))
}

fn backend_pid(client: &mut Client, shown: &str) -> Result<i32, TableError> {
    Ok(client
        .query_one("SELECT pg_backend_pid()", &[])
        .map_err(|e| super::name_store(e.into(), shown))?
        .get(0))
}
