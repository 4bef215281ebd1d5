//! The SQLite table store: one file, the embedded default.
//!
//! # The store
//! One SQLite file (default `./kappa-data/tables.db`; the caller passes the
//! path) in WAL mode, so any SQLite client can read it while a writer runs
//! and sees, in each read transaction, one committed state. Several kappa
//! processes may use it at once (a `stream` process, a `reprocess` process
//! writing another deployment, a CLI reading status): writes serialise on
//! SQLite's write lock, every write transaction is `BEGIN IMMEDIATE` (so it
//! never fails half-way for want of a lock it could have waited for), and a
//! busy handler that tries again every millisecond for [`BUSY_TIMEOUT`] makes
//! a writer wait for another's epoch rather than fail.
//!
//! Durability: `synchronous=FULL`, so a commit that returned survives a power
//! loss. Exactly-once needs only atomicity (a table and its offsets commit
//! together, so a lost commit would just be replayed), but the runner acts on
//! commits — it reports them, swaps on them, and log retention may rely on
//! them — so a returned commit must not go back.
//!
//! # Catalog (tables prefixed `kappa_`; times are unix ms)
//! | table | columns | what |
//! |---|---|---|
//! | `kappa_meta` | `key` PK, `value` | `schema_version` = 7 (older catalogs are migrated on open) |
//! | `kappa_deployments` | `id` PK (autoincrement, never reused), `job`, `job_version`, `version`, `params` (JSON `[[k,v],..]`), `inputs` (JSON `[[input,topic],..]`), `outputs` (JSON `[OutputSchema,..]`), `state` (`building`/`live`/`retired`/`dropped`), `created_at`, `caught_up_at`, `swapped_at`, `records_applied`, `bad_rows`, `epochs`, `last_epoch_at`, `last_epoch_ms`, `records_per_sec`, `lag` (JSON `[{topic,partition,lag},..]`), `note`, `late` (JSON `[[input,dropped],..]`: late events dropped under the `drop` policy), `generation` (bumped by each process that takes the deployment over), `owner` (that process: pid and host), `half_written` (1 while a large epoch of a never-live building version is written in pieces, see `epoch.rs`), `state_digest` (the plan digest of the checkpointed state, null when none is kept), `state_merged_at`, `state_written_at`, `reading` (how the inputs are read: the engine's JSON of the null marker and bad-record policy; null before it was recorded) | one row per deployment, kept after a drop |
//! | `kappa_state` | `deployment`, `seq`, `input`, `partition`, `crc`, `bytes`; PK (`deployment`, `seq`) | the checkpointed state's pieces, in writing order ([`crate::table::state`], `state.rs`) |
//! | `kappa_outputs` | `output` (NOCASE), `version`, `deployment`, `position`; PK (`output`, `version`) | which deployment owns `output__vN`; the primary key is what makes a version number impossible to give out twice |
//! | `kappa_outbox` | `deployment`, `sink`, `seq`, `key`, `value`; PK (`deployment`, `sink`, `seq`) | messages of changelog sinks written with their epoch, deleted once sent ([`crate::table::outbox`]) |
//! | `kappa_offsets` | `deployment`, `input`, `topic`, `partition`, `next_offset`, `last_offset`, `last_crc`; PK (`deployment`, `input`, `partition`) | the next offset to read: everything below it is applied to the deployment's tables; the last applied record's offset and checksum, so a log that lost or rewrote it is noticed on resume |
//!
//! # Output tables and views
//! - `OUTPUT__vN` has the output's columns, without declared types (SQLite
//!   stores each [`Value`](crate::value::Value) as INTEGER, REAL, TEXT or
//!   NULL), and a hidden `kappa_n INTEGER NOT NULL`, the row's multiplicity:
//!   an output collection is a multiset. Each distinct row is stored once,
//!   with `kappa_n >= 1`; for an output whose key is unique it is always 1.
//!   It is a rowid table with a non-unique index on the key columns. Rows are
//!   matched with `IS` and `typeof` on every column, so a null key (a SQL
//!   group-by's null group) matches, and `1` and `1.0` stay distinct values.
//!   (SQLite stores a float NaN as NULL; jobs do not produce NaN.)
//! - The view `OUTPUT` selects the output's columns from the live version's
//!   table. When the key is every column (a bag, e.g. a join's output) it
//!   also has `kappa_count`, the multiplicity; otherwise every row counts once.
//!
//! # Versions
//! A deployment's outputs share a version `N` = 1 + the highest version any
//! deployment ever had for any of those output names, so numbers are never
//! reused, even after a drop. The one exception: a deployment that never
//! committed an epoch, removed by its creator when its run failed
//! (`abandon_unused`), leaves no trace, and its number goes to
//! the next attempt. See [`crate::table::deployment`] for the lifecycle.
//!
//! # One owner per deployment
//! A process that drives a deployment (stream, reprocess, rollback) holds
//! its deployment lock for its whole life and takes the deployment over
//! with `take_over`, which bumps its `generation`. Every
//! write the owner makes (epochs, progress, its own swap) checks, in the
//! same transaction, that the generation is still its own: a process that
//! was taken over is fenced off (`TableError::Fenced`) and writes nothing,
//! even where the OS lock cannot reach (another host, a removed lock file).
//!
//! Every open connection also holds a shared lock on `STORE.locks/store.lock`,
//! taken before SQLite opens the file: `NewStore::remove_if_unused` (a
//! failed first `kappa stream` cleaning up the store it created) removes the
//! files only when it can take that lock exclusively, so never under
//! another kappa process.
//!
//! Files: [`crate::table::ident`] (names), [`crate::table::deployment`] (the model), `catalog.rs`
//! (creating and reading deployments), `owner.rs` (the lock and the lease),
//! `epoch.rs` (the exactly-once commit),
//! `swap.rs` (views, swap, drop), `rows.rs` (values in and out of SQLite),
//! [`crate::table::diff`] (what changed between two versions), [`crate::table::outbox`] (changelog
//! sinks' messages, written with their epoch).

mod catalog;
mod epoch;
mod files;
mod outbox;
mod owner;
mod rows;
mod state;
mod swap;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_catalog_rows;
#[cfg(test)]
mod tests_concurrency;
#[cfg(test)]
mod tests_pieces;
#[cfg(test)]
mod tests_versions;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior};

use super::{
    Deployment, DeploymentLock, DeploymentState, EpochStats, InputOffset, Lease, NewDeployment,
    SinkMessage, SinkSpec, StateSummary, StateWrite, StoredState, TableError, TablePage,
    TableStore, deployment, ident, now_ms,
};
use crate::fslock::FileLock;
use crate::value::Row;

/// How long a writer waits for another process's transaction before failing
/// with `SQLITE_BUSY`. Epoch commits take milliseconds; a large replay epoch
/// may take a second or two.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Waits for another writer by trying again every millisecond, for
/// [`BUSY_TIMEOUT`] at least. SQLite's own busy handler backs off to 100 ms
/// sleeps, so a live version's commit that waited behind a replay's long
/// one woke up to 100 ms after the lock was free.
fn poll_busy(tries: i32) -> bool {
    if u128::try_from(tries).unwrap_or(0) >= BUSY_TIMEOUT.as_millis() {
        return false;
    }
    std::thread::sleep(Duration::from_millis(1));
    true
}

/// The catalog's layout version, in `kappa_meta`.
const SCHEMA_VERSION: &str = "7";

/// The sinks' outbox (schema version 4): in the catalog and its migration.
macro_rules! outbox_table {
    () => {
        "
CREATE TABLE IF NOT EXISTS kappa_outbox (
    deployment INTEGER NOT NULL REFERENCES kappa_deployments (id),
    sink TEXT NOT NULL,
    seq INTEGER NOT NULL,
    key TEXT NOT NULL,
    value TEXT,
    PRIMARY KEY (deployment, sink, seq)
);
"
    };
}

/// The checkpointed state's pieces (schema version 6), see
/// [`crate::table::state`].
macro_rules! state_table {
    () => {
        "
CREATE TABLE IF NOT EXISTS kappa_state (
    deployment INTEGER NOT NULL REFERENCES kappa_deployments (id),
    seq INTEGER NOT NULL,
    input TEXT NOT NULL,
    partition INTEGER NOT NULL,
    crc INTEGER NOT NULL,
    bytes BLOB NOT NULL,
    PRIMARY KEY (deployment, seq)
);
"
    };
}

const CATALOG: &str = concat!(
    "
CREATE TABLE IF NOT EXISTS kappa_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT OR IGNORE INTO kappa_meta (key, value) VALUES ('schema_version', '7');
CREATE TABLE IF NOT EXISTS kappa_deployments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL,
    job_version INTEGER NOT NULL,
    version INTEGER NOT NULL,
    params TEXT NOT NULL,
    inputs TEXT NOT NULL,
    outputs TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('building', 'live', 'retired', 'dropped')),
    created_at INTEGER NOT NULL,
    caught_up_at INTEGER,
    swapped_at INTEGER,
    records_applied INTEGER NOT NULL DEFAULT 0,
    bad_rows INTEGER NOT NULL DEFAULT 0,
    epochs INTEGER NOT NULL DEFAULT 0,
    last_epoch_at INTEGER,
    last_epoch_ms INTEGER,
    records_per_sec REAL,
    lag TEXT NOT NULL DEFAULT '[]',
    note TEXT,
    late TEXT NOT NULL DEFAULT '[]',
    generation INTEGER NOT NULL DEFAULT 0,
    owner TEXT,
    half_written INTEGER NOT NULL DEFAULT 0,
    state_digest TEXT,
    state_merged_at INTEGER,
    state_written_at INTEGER,
    reading TEXT
);
CREATE TABLE IF NOT EXISTS kappa_outputs (
    output TEXT NOT NULL COLLATE NOCASE,
    version INTEGER NOT NULL,
    deployment INTEGER NOT NULL REFERENCES kappa_deployments (id),
    position INTEGER NOT NULL,
    PRIMARY KEY (output, version)
);
CREATE INDEX IF NOT EXISTS kappa_outputs_deployment ON kappa_outputs (deployment);
CREATE TABLE IF NOT EXISTS kappa_offsets (
    deployment INTEGER NOT NULL REFERENCES kappa_deployments (id),
    input TEXT NOT NULL,
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    next_offset INTEGER NOT NULL,
    last_offset INTEGER,
    last_crc INTEGER,
    PRIMARY KEY (deployment, input, partition)
);
",
    outbox_table!(),
    state_table!()
);

const MIGRATE_1_TO_2: &str = "
ALTER TABLE kappa_deployments ADD COLUMN late TEXT NOT NULL DEFAULT '[]';
UPDATE kappa_meta SET value = '2' WHERE key = 'schema_version';
";

const MIGRATE_2_TO_3: &str = "
ALTER TABLE kappa_deployments ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE kappa_deployments ADD COLUMN owner TEXT;
ALTER TABLE kappa_offsets ADD COLUMN last_offset INTEGER;
ALTER TABLE kappa_offsets ADD COLUMN last_crc INTEGER;
UPDATE kappa_meta SET value = '3' WHERE key = 'schema_version';
";

const MIGRATE_3_TO_4: &str = concat!(
    outbox_table!(),
    "UPDATE kappa_meta SET value = '4' WHERE key = 'schema_version';"
);

const MIGRATE_4_TO_5: &str = "
ALTER TABLE kappa_deployments ADD COLUMN half_written INTEGER NOT NULL DEFAULT 0;
UPDATE kappa_meta SET value = '5' WHERE key = 'schema_version';
";
const MIGRATE_5_TO_6: &str = concat!(
    state_table!(),
    "ALTER TABLE kappa_deployments ADD COLUMN state_digest TEXT;
ALTER TABLE kappa_deployments ADD COLUMN state_merged_at INTEGER;
ALTER TABLE kappa_deployments ADD COLUMN state_written_at INTEGER;
UPDATE kappa_meta SET value = '6' WHERE key = 'schema_version';"
);
const MIGRATE_6_TO_7: &str = "
ALTER TABLE kappa_deployments ADD COLUMN reading TEXT;
UPDATE kappa_meta SET value = '7' WHERE key = 'schema_version';
";

/// The table store: one connection to the SQLite file. Not `Sync`; open one
/// per thread or process.
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    /// Per deployment, the SQL that applies changes to each output table.
    /// A deployment's outputs never change, so entries never go stale.
    writers: HashMap<i64, Arc<[epoch::TableSql]>>,
    /// Most changes a building version's epoch writes per transaction
    /// ([`epoch::PIECE_ROWS`]; lowered by tests).
    piece_rows: usize,
    /// Shared while the connection is open, so that removing the file
    /// ([`crate::table::NewStore::remove_if_unused`]) can tell that no other kappa
    /// process has it open. A reader that cannot make the lock file (a
    /// full disk, no write permission) goes without: it never removes.
    _presence: Option<FileLock>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish()
    }
}

impl SqliteStore {
    /// Opens the store at `path`, creating the file, its parent directories
    /// and the catalog if missing.
    pub fn open(path: &Path) -> Result<SqliteStore, TableError> {
        SqliteStore::open_writer(path).map_err(|e| files::on_full_disk(path, e))
    }

    fn open_writer(path: &Path) -> Result<SqliteStore, TableError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|cause| TableError::Io {
                path: dir.to_path_buf(),
                cause,
            })?;
        }
        let presence = Some(files::presence_lock(path)?);
        let conn = Connection::open(path)?;
        let mut store = SqliteStore {
            conn,
            path: path.to_path_buf(),
            writers: HashMap::new(),
            piece_rows: epoch::PIECE_ROWS,
            _presence: presence,
        };
        store.configure()?;
        store.ensure_catalog()?;
        Ok(store)
    }

    /// Opens an existing store for reading only (`kappa table show`,
    /// `status`, `diff`, `verify`, the status page): the database is never
    /// written (at most the empty presence lock file is made beside it), so
    /// it works on a full disk and for a user who may not write the file.
    /// A catalog of an older schema is migrated by a writing open instead.
    pub fn open_read_only(path: &Path) -> Result<SqliteStore, TableError> {
        if !path.is_file() {
            return Err(TableError::StoreNotFound {
                addr: path.display().to_string(),
            });
        }
        // The presence lock first, as a writer takes it: a failed first run
        // never removes the file under an open reader.
        let presence = files::presence_lock(path).ok();
        let conn = files::open_reader(path).map_err(|e| files::on_full_disk(path, e))?;
        let mut store = SqliteStore {
            conn,
            path: path.to_path_buf(),
            writers: HashMap::new(),
            piece_rows: epoch::PIECE_ROWS,
            _presence: presence,
        };
        store.conn.busy_handler(Some(poll_busy))?;
        let version = store.schema_version()?;
        let older = version
            .as_deref()
            .and_then(|v| v.parse::<u32>().ok())
            .is_some_and(|v| v < SCHEMA_VERSION.parse::<u32>().expect("a number"));
        match version.as_deref() {
            Some(SCHEMA_VERSION) => Ok(store),
            // Migrated by a writing open, as any command of this kappa would.
            Some(_) if older => {
                drop(store);
                SqliteStore::open(path)
            }
            other => Err(TableError::Corrupt {
                what: path.display().to_string(),
                reason: match other {
                    None => "it holds no kappa catalog".into(),
                    Some(v) => {
                        format!("catalog schema version is {v}, this kappa reads {SCHEMA_VERSION}")
                    }
                },
            }),
        }
    }

    /// Removes the store at `path` when a failed first run left it holding
    /// nothing, even if it cannot be opened for writing (see
    /// [`crate::table::NewStore::remove_if_unused`]).
    pub fn remove_if_unused_at(path: &Path) -> Result<bool, TableError> {
        files::remove_if_unused_at(path)
    }

    /// Opens an existing store; `StoreNotFound` if there is no file (what the
    /// read-only CLI commands want, rather than creating an empty store).
    pub fn open_existing(path: &Path) -> Result<SqliteStore, TableError> {
        if !path.is_file() {
            return Err(TableError::StoreNotFound {
                addr: path.display().to_string(),
            });
        }
        SqliteStore::open(path)
    }

    /// The file this store is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn configure(&mut self) -> Result<(), TableError> {
        self.conn.busy_handler(Some(poll_busy))?;
        let mode: String = self
            .conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(TableError::Corrupt {
                what: self.path.display().to_string(),
                reason: format!("cannot switch to WAL mode (journal mode is {mode})"),
            });
        }
        // A 16 MiB page cache: the OS caches the file anyway, and 64 MiB
        // was measured no faster (a 1M-key count, a 100k-key replay, 9.2M
        // rows of Nexmark q0) while it filled to its size (q0: 350 -> 290
        // MiB peak).
        self.conn.execute_batch(
            "PRAGMA synchronous = FULL;
             PRAGMA foreign_keys = ON;
             PRAGMA cache_size = -16384;",
        )?;
        // Four statements per output table plus the catalog's: room for a
        // few deployments with several outputs each.
        self.conn.set_prepared_statement_cache_capacity(128);
        Ok(())
    }

    /// Creates the catalog unless it is there, and checks its version.
    fn ensure_catalog(&mut self) -> Result<(), TableError> {
        let version = self.schema_version()?;
        if version.is_none() {
            let tx = self.write_txn()?;
            tx.execute_batch(CATALOG)?;
            tx.commit()?;
        }
        // Version 2 added the late-event counts; version 3 the owner's
        // generation (fencing) and the last applied record of each
        // partition; version 4 the sinks' outbox; version 5 the mark of
        // an epoch written in pieces; version 6 the checkpointed state;
        // version 7 how the inputs are read.
        let migrations = [
            ("1", MIGRATE_1_TO_2),
            ("2", MIGRATE_2_TO_3),
            ("3", MIGRATE_3_TO_4),
            ("4", MIGRATE_4_TO_5),
            ("5", MIGRATE_5_TO_6),
            ("6", MIGRATE_6_TO_7),
        ];
        for (from, migration) in migrations {
            if self.schema_version()?.as_deref() == Some(from) {
                let tx = self.write_txn()?;
                tx.execute_batch(migration)?;
                tx.commit()?;
            }
        }
        match self.schema_version()? {
            Some(v) if v == SCHEMA_VERSION => Ok(()),
            other => Err(TableError::Corrupt {
                what: self.path.display().to_string(),
                reason: format!(
                    "catalog schema version is {other:?}, this kappa reads {SCHEMA_VERSION}"
                ),
            }),
        }
    }

    fn schema_version(&self) -> Result<Option<String>, TableError> {
        let exists: bool = self.conn.query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'kappa_meta'",
            [],
            |r| r.get(0),
        )?;
        if !exists {
            return Ok(None);
        }
        Ok(self
            .conn
            .query_row(
                "SELECT value FROM kappa_meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// A write transaction that holds the write lock from its start.
    fn write_txn(&mut self) -> Result<Transaction<'_>, TableError> {
        Ok(self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?)
    }
}

impl TableStore for SqliteStore {
    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    fn lock(&self, d: &Deployment) -> Result<DeploymentLock, TableError> {
        owner::lock_file(&self.path, d)
    }

    fn create_deployment(&mut self, d: &NewDeployment) -> Result<Deployment, TableError> {
        SqliteStore::create_deployment(self, d)
    }

    fn deployment(&self, id: i64) -> Result<Deployment, TableError> {
        catalog::deployment_in(&self.conn, id)
    }

    fn deployments(&self) -> Result<Vec<Deployment>, TableError> {
        SqliteStore::deployments(self)
    }

    fn deployments_of(&self, output: &str) -> Result<Vec<Deployment>, TableError> {
        SqliteStore::deployments_of(self, output)
    }

    fn find_by_output(&self, output: &str, version: Option<u32>) -> Result<Deployment, TableError> {
        SqliteStore::find_by_output(self, output, version)
    }

    fn offsets(&self, id: i64) -> Result<BTreeMap<(String, u32), u64>, TableError> {
        SqliteStore::offsets(self, id)
    }

    fn input_offsets(&self, id: i64) -> Result<Vec<InputOffset>, TableError> {
        SqliteStore::input_offsets(self, id)
    }

    fn set_progress(&mut self, lease: &Lease, stats: &EpochStats) -> Result<(), TableError> {
        SqliteStore::set_progress(self, lease, stats)
    }

    fn mark_caught_up(&mut self, lease: &Lease) -> Result<(), TableError> {
        SqliteStore::mark_caught_up(self, lease)
    }

    fn set_note(&mut self, id: i64, note: Option<&str>) -> Result<(), TableError> {
        SqliteStore::set_note(self, id, note)
    }

    fn set_reading(&mut self, id: i64, reading: &str) -> Result<(), TableError> {
        SqliteStore::set_reading(self, id, reading)
    }

    fn reopen(&mut self, id: i64) -> Result<(), TableError> {
        SqliteStore::reopen(self, id)
    }

    fn take_over(&mut self, id: i64, owner: &str) -> Result<Lease, TableError> {
        SqliteStore::take_over(self, id, owner)
    }

    fn check_lease(&self, lease: &Lease) -> Result<(), TableError> {
        owner::require_lease(&self.conn, lease)
    }

    fn owner(&self, id: i64) -> Result<Option<String>, TableError> {
        SqliteStore::owner(self, id)
    }

    fn commit_epoch_with_state(
        &mut self,
        lease: &Lease,
        changes: &[Vec<(Row, isize)>],
        offsets: &[InputOffset],
        stats: &EpochStats,
        sinks: &[SinkSpec],
        state: &StateWrite<'_>,
    ) -> Result<(), TableError> {
        SqliteStore::commit_epoch_with_state(self, lease, changes, offsets, stats, sinks, state)
            .map_err(|e| files::on_full_disk(&self.path, e))
    }

    fn write_state(&mut self, lease: &Lease, state: &StateWrite<'_>) -> Result<(), TableError> {
        let mut write = || {
            let tx = self.write_txn()?;
            owner::require_lease(&tx, lease)?;
            state::write(&tx, lease.deployment, state)?;
            tx.commit()?;
            Ok(())
        };
        write().map_err(|e| files::on_full_disk(&self.path, e))
    }

    fn load_state(&self, id: i64) -> Result<Option<StoredState>, TableError> {
        state::load(&self.conn, id)
    }

    fn state_summary(&self, id: i64) -> Result<Option<StateSummary>, TableError> {
        state::summary(&self.conn, id)
    }

    fn swap(&mut self, id: i64) -> Result<Vec<i64>, TableError> {
        self.swap_checked(id, None)
    }

    fn swap_owned(&mut self, lease: &Lease) -> Result<Vec<i64>, TableError> {
        self.swap_checked(lease.deployment, Some(lease))
    }

    fn drop_deployment(&mut self, id: i64) -> Result<(), TableError> {
        SqliteStore::drop_deployment(self, id)
    }

    fn abandon_unused(
        &mut self,
        lease: &Lease,
        created_as: DeploymentState,
    ) -> Result<bool, TableError> {
        SqliteStore::abandon_unused(self, lease, created_as)
    }

    fn retire_old(&mut self, outputs: &[String], keep: usize) -> Result<Vec<i64>, TableError> {
        SqliteStore::retire_old(self, outputs, keep)
    }

    fn read_rows(&self, table: &str) -> Result<Vec<(Row, isize)>, TableError> {
        SqliteStore::read_rows(self, table)
    }

    fn read_page(&self, table: &str, limit: usize) -> Result<TablePage, TableError> {
        SqliteStore::read_page(self, table, limit)
    }

    fn row_counts(&self, table: &str) -> Result<(u64, u64), TableError> {
        SqliteStore::row_counts(self, table)
    }

    fn outbox(&self, id: i64) -> Result<Vec<SinkMessage>, TableError> {
        SqliteStore::outbox(self, id)
    }

    fn clear_outbox(&mut self, lease: &Lease, sink: &str, seq: i64) -> Result<(), TableError> {
        SqliteStore::clear_outbox(self, lease, sink, seq)
    }
}
