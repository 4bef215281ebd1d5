//! Output tables: a job's outputs as database tables, one version per
//! deployment, with a view per output that readers query and that a swap
//! moves from one version to the next in one transaction.
//!
//! Two stores behind one interface, [`TableStore`]: [`sqlite`] (one file,
//! the embedded default) and [`postgres`] (a database server, for readers on
//! other hosts). [`open`] picks one from `--table-db` ([`StoreAddr`]: a path
//! or a `postgresql://` URL); runners, the engine and the CLI never know
//! which they have.
//!
//! What both keep (each store's module says how):
//! - **The catalog**: deployments (job, parameters, inputs, output schemas,
//!   state, progress, generation and owner), which deployment owns each
//!   `OUTPUT__vN`, the committed offsets of each input partition, and the
//!   changelog sinks' outbox.
//! - **Version tables** `OUTPUT__vN`: the output's columns and a hidden
//!   multiplicity `kappa_n` (an output is a multiset; each distinct row is
//!   stored once). The view `OUTPUT` selects from the live version (with
//!   `kappa_count` for a bag, an output keyed by every column).
//! - **Versions** are 1 + the highest any deployment ever had for those
//!   output names, never reused, except that a deployment that never
//!   committed an epoch, abandoned by its creator, leaves no trace.
//! - **One owner per deployment** ([`owner`]): a lock for the prompt error,
//!   a generation checked in every write's transaction for the guarantee.
//! - **The exactly-once commit**: an epoch's changes, its offsets and its
//!   figures in one transaction; readers see whole epochs and whole swaps.
//!
//! Shared files: [`ident`] (names), [`deployment`] (the model), `catalog.rs`
//! (checks and parsing of catalog rows), [`owner`], [`diff`] (what changed
//! between two versions), [`outbox`] (changelog sinks' messages), `addr.rs`
//! (where a store is, and masking its password).

mod addr;
mod catalog;
pub mod deployment;
pub mod diff;
mod error;
pub mod ident;
pub mod outbox;
mod owner;
pub mod postgres;
pub mod sqlite;
pub mod state;
mod store;

#[cfg(test)]
mod contract;

pub use addr::{PgAddr, StoreAddr, Tls, TlsMode, mask};
pub use deployment::{
    Deployment, DeploymentState, EpochStats, InputOffset, NewDeployment, PartitionLag, Progress,
    TablePage, TableVersion,
};
pub use diff::{Change, DiffCounts, SwapRule, TableDiff};
pub use error::TableError;
pub use outbox::{SinkMessage, SinkSpec};
pub use owner::{DeploymentLock, Kept, Lease, this_process};
pub use postgres::PgStore;
pub use sqlite::SqliteStore;
pub use state::{StatePiece, StateSummary, StateWrite, StoredState};
pub use store::TableStore;

/// The default store: a SQLite file, relative to the working directory.
pub const DEFAULT_PATH: &str = "kappa-data/tables.db";

/// Opens the store at `addr`, creating it (the file, or the catalog schema
/// in the database) if missing.
pub fn open(addr: &StoreAddr) -> Result<Box<dyn TableStore>, TableError> {
    Ok(match addr {
        StoreAddr::Sqlite(path) => Box::new(SqliteStore::open(path)?),
        StoreAddr::Postgres(pg) => Box::new(PgStore::open(pg)?),
    })
}

/// Opens an existing store; `StoreNotFound` if there is none (what the
/// read-only commands want, rather than creating an empty store).
pub fn open_existing(addr: &StoreAddr) -> Result<Box<dyn TableStore>, TableError> {
    Ok(match addr {
        StoreAddr::Sqlite(path) => Box::new(SqliteStore::open_existing(path)?),
        StoreAddr::Postgres(pg) => Box::new(PgStore::open_existing(pg)?),
    })
}

/// Opens an existing store for reading only: a SQLite file is opened
/// read-only (so this works on a full disk and without write permission);
/// a server's store as [`open_existing`] does. Its write methods fail.
pub fn open_read_only(addr: &StoreAddr) -> Result<Box<dyn TableStore>, TableError> {
    Ok(match addr {
        StoreAddr::Sqlite(path) => Box::new(SqliteStore::open_read_only(path)?),
        StoreAddr::Postgres(pg) => Box::new(PgStore::open_existing(pg)?),
    })
}

/// A store that does not exist yet, found before a command first opens it,
/// so that a command that creates it and then fails before committing
/// anything removes what it made, and nothing else.
#[derive(Debug)]
pub enum NewStore {
    /// A SQLite file that is not there yet.
    Sqlite(std::path::PathBuf),
    /// A database without kappa's catalog (see [`postgres::NewCatalog`]).
    Postgres(PgAddr, postgres::NewCatalog),
}

impl NewStore {
    /// `None` when the store at `addr` exists, or the server cannot be
    /// asked (the command that opens it then says why).
    pub fn find(addr: &StoreAddr) -> Option<NewStore> {
        match addr {
            StoreAddr::Sqlite(path) => (!path.exists()).then(|| NewStore::Sqlite(path.clone())),
            StoreAddr::Postgres(pg) => PgStore::new_catalog(pg)
                .ok()
                .flatten()
                .map(|new| NewStore::Postgres(pg.clone(), new)),
        }
    }

    /// Removes the store when it holds no deployment and (SQLite) no other
    /// kappa process has it open; whether it did. A SQLite file is removed
    /// even when it cannot be opened for writing, as on a full disk.
    pub fn remove_if_unused(self) -> Result<bool, TableError> {
        match self {
            NewStore::Sqlite(path) => SqliteStore::remove_if_unused_at(&path),
            NewStore::Postgres(addr, new) => PgStore::remove_new_catalog(&addr, new),
        }
    }
}

/// The test hook of the crash campaign: with `KAPPA_TEST_SWAP_PAUSE_MS=N`,
/// a swap (`kappa reprocess`, `table swap`, `table rollback`) says
/// `kappa: pausing inside the swap's transaction` on stderr and waits N ms
/// after its writes, before its commit, so that a test can kill the process
/// there and check that readers and restarts see the old version or the new
/// one whole. Unset, it costs an environment lookup a swap.
pub(crate) fn pause_inside_swap() {
    let Some(ms) = std::env::var("KAPPA_TEST_SWAP_PAUSE_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return;
    };
    crate::say!("kappa: pausing inside the swap's transaction");
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

/// Now, in unix milliseconds.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
