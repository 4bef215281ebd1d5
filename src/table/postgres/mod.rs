//! The PostgreSQL table store: the output tables on a database server, for
//! readers on other hosts (`psql`, any driver, a BI tool).
//!
//! # Layout
//! - The catalog is in schema `kappa` (`kappa.meta`, `kappa.deployments`,
//!   `kappa.outputs`, `kappa.offsets`, `kappa.outbox`), with the columns and
//!   meaning of the SQLite store's `kappa_*` tables (see [`super::sqlite`]),
//!   plus `kappa.outputs.kinds`: the type each output column has so far.
//! - Version tables `OUTPUT__vN` and the views `OUTPUT` are in the schema the
//!   URL names (`?schema=NAME`, default `public`), fixed when the catalog is
//!   created. Names are quoted identifiers, checked as for SQLite and against
//!   PostgreSQL's 63-byte limit; nothing from data is ever spliced into SQL.
//! - A version table has the output's columns, `kappa_n` (the multiplicity)
//!   and `kappa_id`, the primary key: a SHA-256 of the row's typed values,
//!   so that a row with NULLs, or `1` beside `1.0`, is matched exactly by an
//!   index, and an epoch is applied set by set ([`epoch`]).
//!
//! # Column types ([`values`])
//! SQLite columns hold any value; PostgreSQL columns have a type. A column
//! starts untyped (`text` holding only NULLs) and takes the type of the first
//! value it gets: `bigint`, `double precision` or `text`. Integers and floats
//! in one column (a sum over a column of numbers) make it `numeric`, which
//! keeps both exactly. Text and numbers in one column are refused
//! (`MixedColumn`), naming the table and column. Changing a column's type
//! rewrites the table, and its view when live, in the epoch's transaction.
//!
//! # Transactions and owners
//! Writes that change the catalog's shape (create, swap, drop, abandon,
//! retire, reopen) take an exclusive transaction-level advisory lock;
//! epochs, progress and take-overs take it shared and lock their
//! deployment's catalog row (`FOR UPDATE`), so a take-over and a stale
//! owner's epoch are ordered and the stale one is fenced. The
//! [`DeploymentLock`] is a session advisory lock held on a connection of its
//! own, so a second process on any host is refused at once.
//!
//! # A lost connection
//! A write or read that fails because the connection was lost (the server
//! restarted, the network failed) is reported on stderr, the client
//! reconnects with backoff for up to [`RECONNECT_FOR`], and:
//! - an epoch commit is redone, unless the catalog shows it landed (the
//!   deployment's epoch count moved past the one this commit read), so it
//!   is applied exactly once, never half;
//! - reads and idempotent writes (progress, the outbox) are run again;
//! - other writes (a swap, a drop) return the error, since they may or may
//!   not have committed: the user runs the command again and the store
//!   says where it stands.

mod catalog;
mod epoch;
mod first_use;
mod lock;
mod rows;
mod state;
mod swap;
mod test_database;
mod values;

pub use first_use::NewCatalog;
pub use test_database::TestDatabase;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;
use std::time::{Duration, Instant};

use postgres::config::SslMode;
use postgres::{Client, Config};

use super::addr::TlsMode;
use super::{
    Deployment, DeploymentLock, DeploymentState, EpochStats, InputOffset, Lease, NewDeployment,
    PgAddr, SinkMessage, SinkSpec, StateSummary, StateWrite, StoredState, TableError, TablePage,
    TableStore, ident,
};
use crate::value::Row;

/// How long a lost connection is retried before the error is returned.
pub const RECONNECT_FOR: Duration = Duration::from_secs(60);

/// How long opening a connection may take, unless the URL says otherwise.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The catalog's layout version, in `kappa.meta`.
const SCHEMA_VERSION: &str = "1";

/// The first key of kappa's advisory locks ('kapp'); the second is 0 for
/// the catalog, or a deployment's id in [`lock::DEPLOYMENT_CLASS`].
const CATALOG_LOCK: (i32, i32) = (0x6b61_7070, 0);

const CATALOG: &str = "
CREATE SCHEMA IF NOT EXISTS kappa;
CREATE TABLE IF NOT EXISTS kappa.meta (
    key text PRIMARY KEY,
    value text NOT NULL
);
CREATE TABLE IF NOT EXISTS kappa.deployments (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job text NOT NULL,
    job_version bigint NOT NULL,
    version bigint NOT NULL,
    params text NOT NULL,
    inputs text NOT NULL,
    outputs text NOT NULL,
    state text NOT NULL CHECK (state IN ('building', 'live', 'retired', 'dropped')),
    created_at bigint NOT NULL,
    caught_up_at bigint,
    swapped_at bigint,
    records_applied bigint NOT NULL DEFAULT 0,
    bad_rows bigint NOT NULL DEFAULT 0,
    epochs bigint NOT NULL DEFAULT 0,
    last_epoch_at bigint,
    last_epoch_ms bigint,
    records_per_sec double precision,
    lag text NOT NULL DEFAULT '[]',
    note text,
    late text NOT NULL DEFAULT '[]',
    generation bigint NOT NULL DEFAULT 0,
    owner text
);
CREATE TABLE IF NOT EXISTS kappa.outputs (
    output text NOT NULL,
    version bigint NOT NULL,
    deployment bigint NOT NULL REFERENCES kappa.deployments (id),
    position integer NOT NULL,
    kinds text NOT NULL DEFAULT '[]',
    PRIMARY KEY (output, version)
);
CREATE UNIQUE INDEX IF NOT EXISTS outputs_by_name ON kappa.outputs (lower(output), version);
CREATE INDEX IF NOT EXISTS outputs_by_deployment ON kappa.outputs (deployment);
CREATE TABLE IF NOT EXISTS kappa.offsets (
    deployment bigint NOT NULL REFERENCES kappa.deployments (id),
    input text NOT NULL,
    topic text NOT NULL,
    partition bigint NOT NULL,
    next_offset bigint NOT NULL,
    last_offset bigint,
    last_crc bigint,
    PRIMARY KEY (deployment, input, partition)
);
CREATE TABLE IF NOT EXISTS kappa.outbox (
    deployment bigint NOT NULL REFERENCES kappa.deployments (id),
    sink text NOT NULL,
    seq bigint NOT NULL,
    key text NOT NULL,
    value text,
    PRIMARY KEY (deployment, sink, seq)
);
ALTER TABLE kappa.deployments ADD COLUMN IF NOT EXISTS state_digest text;
ALTER TABLE kappa.deployments ADD COLUMN IF NOT EXISTS state_merged_at bigint;
ALTER TABLE kappa.deployments ADD COLUMN IF NOT EXISTS state_written_at bigint;
ALTER TABLE kappa.deployments ADD COLUMN IF NOT EXISTS reading text;
CREATE TABLE IF NOT EXISTS kappa.state (
    deployment bigint NOT NULL REFERENCES kappa.deployments (id),
    seq bigint NOT NULL,
    input text NOT NULL,
    partition bigint NOT NULL,
    crc bigint NOT NULL,
    bytes bytea NOT NULL,
    PRIMARY KEY (deployment, seq)
);
";

/// The PostgreSQL store: one connection (reconnected when lost). Not
/// `Sync`; open one per thread or process.
pub struct PgStore {
    addr: PgAddr,
    client: RefCell<Client>,
    /// Per deployment, its outputs and the committed type of their columns.
    writers: HashMap<i64, std::sync::Arc<epoch::Writer>>,
    /// The arities whose temporary change tables exist on this connection.
    temp_tables: RefCell<Vec<usize>>,
    /// The deployment lock of the deployment this store commits for: kept
    /// (taken again if it was lost) after every reconnect, before a
    /// transaction runs again (see [`TableStore::keep_lock_on_reconnect`]).
    lock: Option<std::sync::Arc<DeploymentLock>>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("addr", &self.addr).finish()
    }
}

/// How a failed statement is told apart: whether reconnecting may help.
pub(super) fn is_connection_error(e: &TableError) -> bool {
    matches!(
        e,
        TableError::Postgres {
            connection: true,
            ..
        }
    )
}

impl From<postgres::Error> for TableError {
    fn from(e: postgres::Error) -> TableError {
        let connection = e.is_closed()
            || e.code().is_some_and(|c| {
                let c = c.code();
                c.starts_with("08") || matches!(c, "57P01" | "57P02" | "57P03")
            })
            || (e.as_db_error().is_none()
                && std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>()));
        let message = match e.as_db_error() {
            Some(db) => {
                let mut m = db.message().to_string();
                if let Some(detail) = db.detail() {
                    m.push_str(&format!(" ({detail})"));
                }
                if let Some(hint) = db.hint() {
                    m.push_str(&format!("; hint: {hint}"));
                }
                m
            }
            None => match std::error::Error::source(&e) {
                Some(s) => format!("{e}: {s}"),
                None => e.to_string(),
            },
        };
        TableError::Postgres {
            store: String::new(),
            message,
            connection,
        }
    }
}

impl PgStore {
    /// Connects and creates the catalog (and the output schema) if missing.
    pub fn open(addr: &PgAddr) -> Result<PgStore, TableError> {
        let mut store = PgStore::connect(addr)?;
        store.named(|s| s.ensure_catalog())?;
        Ok(store)
    }

    /// Connects to a database that has kappa's catalog; `StoreNotFound` if
    /// it has none.
    pub fn open_existing(addr: &PgAddr) -> Result<PgStore, TableError> {
        let mut store = PgStore::connect(addr)?;
        let exists: bool = store.named(|s| {
            Ok(s.client
                .get_mut()
                .query_one("SELECT to_regclass('kappa.meta') IS NOT NULL", &[])?
                .get(0))
        })?;
        if !exists {
            return Err(TableError::StoreNotFound {
                addr: addr.to_string(),
            });
        }
        store.named(|s| s.check_catalog())?;
        Ok(store)
    }

    fn connect(addr: &PgAddr) -> Result<PgStore, TableError> {
        let client = connect_client(addr)?;
        Ok(PgStore {
            addr: addr.clone(),
            client: RefCell::new(client),
            writers: HashMap::new(),
            temp_tables: RefCell::new(Vec::new()),
            lock: None,
        })
    }

    fn ensure_catalog(&mut self) -> Result<(), TableError> {
        let schema = self.addr.schema().to_string();
        let client = self.client.get_mut();
        let mut tx = client.transaction()?;
        tx.execute(
            "SELECT pg_advisory_xact_lock($1, $2)",
            &[&CATALOG_LOCK.0, &CATALOG_LOCK.1],
        )?;
        tx.batch_execute(CATALOG)?;
        tx.execute(
            "INSERT INTO kappa.meta (key, value) VALUES ('schema_version', $1), \
             ('output_schema', $2) ON CONFLICT (key) DO NOTHING",
            &[&SCHEMA_VERSION, &schema],
        )?;
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {}",
            ident::quote(&schema)
        ))?;
        tx.commit()?;
        self.check_catalog()
    }

    /// The catalog's version is this kappa's, and its output schema is the
    /// URL's.
    fn check_catalog(&mut self) -> Result<(), TableError> {
        let client = self.client.get_mut();
        let meta: HashMap<String, String> = client
            .query("SELECT key, value FROM kappa.meta", &[])?
            .into_iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let version = meta.get("schema_version").map(String::as_str);
        if version != Some(SCHEMA_VERSION) {
            return Err(TableError::Corrupt {
                what: self.addr.to_string(),
                reason: format!(
                    "catalog schema version is {version:?}, this kappa reads {SCHEMA_VERSION}"
                ),
            });
        }
        let schema = meta.get("output_schema").map_or("public", String::as_str);
        if schema != self.addr.schema() {
            return Err(TableError::BadAddress {
                addr: self.addr.to_string(),
                reason: format!(
                    "this database's kappa catalog keeps its tables in schema '{schema}' \
                     (add ?schema={schema} to the URL)"
                ),
            });
        }
        Ok(())
    }

    /// The output tables' schema, quoted.
    fn schema(&self) -> String {
        ident::quote(self.addr.schema())
    }

    /// `schema.name`, quoted.
    fn qualified(&self, name: &str) -> String {
        format!("{}.{}", self.schema(), ident::quote(name))
    }

    /// Runs `f`, naming this store in a PostgreSQL error.
    fn named<T>(
        &mut self,
        f: impl FnOnce(&mut PgStore) -> Result<T, TableError>,
    ) -> Result<T, TableError> {
        let shown = self.addr.to_string();
        f(self).map_err(|e| name_store(e, &shown))
    }

    /// Runs `f`; when the connection was lost, reconnects and, if `again`,
    /// runs it once more (see the module docs). `landed` tells, after a
    /// reconnect, whether a commit that failed had committed after all.
    fn retrying<T>(
        &mut self,
        again: bool,
        mut f: impl FnMut(&mut PgStore) -> Result<T, TableError>,
        mut landed: impl FnMut(&mut PgStore) -> Result<Option<T>, TableError>,
    ) -> Result<T, TableError> {
        let shown = self.addr.to_string();
        loop {
            let err = match f(self) {
                Ok(v) => return Ok(v),
                Err(e) if is_connection_error(&e) => e,
                Err(e) => return Err(name_store(e, &shown)),
            };
            let err = name_store(err, &shown);
            say!("kappa: table store {shown}: {err}; reconnecting");
            self.reconnect().map_err(|e| name_store(e, &shown))?;
            self.keep_lock()?;
            if let Some(v) = landed(self).map_err(|e| name_store(e, &shown))? {
                say!("kappa: table store {shown}: reconnected; the last commit had landed");
                return Ok(v);
            }
            if !again {
                say!("kappa: table store {shown}: reconnected");
                return Err(err);
            }
            say!("kappa: table store {shown}: reconnected; running the transaction again");
        }
    }

    /// A reconnect means the server may have restarted, and the deployment
    /// lock's session with it: the lock is taken again before anything is
    /// committed, so that no other process can take it in between.
    fn keep_lock(&self) -> Result<(), TableError> {
        match &self.lock {
            Some(lock) => lock.keep_and_report(),
            None => Ok(()),
        }
    }

    /// Replaces the connection (see [`connect_with_backoff`]). The writers'
    /// column kinds are read again from the catalog: a commit that failed
    /// may or may not have changed them.
    fn reconnect(&mut self) -> Result<(), TableError> {
        *self.client.get_mut() = connect_with_backoff(&self.addr)?;
        self.temp_tables.get_mut().clear();
        self.writers.clear();
        Ok(())
    }

    /// A read, run again once after a lost connection.
    fn read<T>(&self, f: impl Fn(&mut Client) -> Result<T, TableError>) -> Result<T, TableError> {
        let shown = self.addr.to_string();
        // Bound first, so the borrow ends before a reconnect replaces the client.
        let first = f(&mut self.client.borrow_mut());
        match first {
            Err(e) if is_connection_error(&e) => {
                let e = name_store(e, &shown);
                say!("kappa: table store {shown}: {e}; reconnecting");
                let client = connect_with_backoff(&self.addr).map_err(|e| name_store(e, &shown))?;
                *self.client.borrow_mut() = client;
                self.temp_tables.borrow_mut().clear();
                say!("kappa: table store {shown}: reconnected");
                f(&mut self.client.borrow_mut()).map_err(|e| name_store(e, &shown))
            }
            other => other.map_err(|e| name_store(e, &shown)),
        }
    }
}

/// A new connection, retried with backoff (0.1 s doubling to 2 s) for up to
/// [`RECONNECT_FOR`]: a server restart takes seconds.
fn connect_with_backoff(addr: &PgAddr) -> Result<Client, TableError> {
    let start = Instant::now();
    let mut wait = Duration::from_millis(100);
    loop {
        match connect_client(addr) {
            Ok(client) => return Ok(client),
            Err(e) if start.elapsed() + wait < RECONNECT_FOR => {
                tracing::debug!("reconnecting to the table store: {e}");
                std::thread::sleep(wait);
                wait = (wait * 2).min(Duration::from_secs(2));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Fills in which store a PostgreSQL error came from.
fn name_store(e: TableError, shown: &str) -> TableError {
    match e {
        TableError::Postgres {
            store,
            message,
            connection,
        } if store.is_empty() => TableError::Postgres {
            store: shown.to_string(),
            message,
            connection,
        },
        other => other,
    }
}

/// A new connection to `addr`.
pub(super) fn connect_client(addr: &PgAddr) -> Result<Client, TableError> {
    let mut config = Config::from_str(addr.conninfo()).map_err(|e| TableError::BadAddress {
        addr: addr.to_string(),
        reason: e.to_string(),
    })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_password().is_none()
        && let Some(password) = password_for(&config)
    {
        config.password(password);
    }
    if config.get_application_name().is_none() {
        config.application_name("kappa");
    }
    let tls = addr.tls();
    config.ssl_mode(match tls.mode {
        TlsMode::Disable => SslMode::Disable,
        TlsMode::Prefer => SslMode::Prefer,
        _ => SslMode::Require,
    });
    let connector = tls_connector(addr)?;
    let mut client = config.connect(connector).map_err(|e| {
        let TableError::Postgres { message, .. } = TableError::from(e) else {
            unreachable!("a client error converts to Postgres")
        };
        TableError::Postgres {
            store: addr.to_string(),
            message: format!("cannot connect: {message}"),
            connection: true,
        }
    })?;
    // Floats as text round-trip exactly (the default since PostgreSQL 12).
    client.batch_execute("SET extra_float_digits = 1")?;
    Ok(client)
}

/// A password for a URL without one, as libpq finds it: `$PGPASSWORD`, else
/// the first matching line of `$PGPASSFILE` or `~/.pgpass`
/// (`host:port:database:user:password`, `*` matching anything).
fn password_for(config: &Config) -> Option<String> {
    if let Ok(p) = std::env::var("PGPASSWORD") {
        return Some(p);
    }
    let file = std::env::var_os("PGPASSFILE")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".pgpass")))?;
    let text = std::fs::read_to_string(file).ok()?;
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "localhost".to_string(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or_default().to_string();
    let db = config
        .get_dbname()
        .map_or_else(|| user.clone(), str::to_string);
    pgpass_lookup(&text, [&host, &port, &db, &user])
}

/// The password of the first `.pgpass` line whose fields match `wanted`.
fn pgpass_lookup(text: &str, wanted: [&str; 4]) -> Option<String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .find_map(|line| {
            let fields = pgpass_fields(line);
            let [h, p, d, u, password] = <[String; 5]>::try_from(fields).ok()?;
            let matches = [h, p, d, u]
                .iter()
                .zip(wanted)
                .all(|(f, w)| f == "*" || f == w);
            matches.then_some(password)
        })
}

/// A `.pgpass` line's fields: `:` separates them, `\` escapes `:` and `\`.
fn pgpass_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => fields.last_mut().unwrap().extend(chars.next()),
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut().unwrap().push(c),
        }
    }
    fields
}

/// The TLS connector for `addr`'s `sslmode` and certificate files: OpenSSL
/// (through native-tls), as libpq uses it.
fn tls_connector(addr: &PgAddr) -> Result<postgres_native_tls::MakeTlsConnector, TableError> {
    let tls = addr.tls();
    let bad = |what: &str, e: &dyn std::fmt::Display| TableError::BadAddress {
        addr: addr.to_string(),
        reason: format!("{what}: {e}"),
    };
    let read = |path: &std::path::Path| {
        std::fs::read(path).map_err(|e| bad(&format!("cannot read {}", path.display()), &e))
    };
    let mut builder = native_tls::TlsConnector::builder();
    match tls.mode {
        TlsMode::Disable | TlsMode::Prefer | TlsMode::Require => {
            builder
                .danger_accept_invalid_certs(true)
                .danger_accept_invalid_hostnames(true);
        }
        TlsMode::VerifyCa => {
            builder.danger_accept_invalid_hostnames(true);
        }
        TlsMode::VerifyFull => {}
    }
    if let Some(path) = &tls.root_cert {
        let cert = native_tls::Certificate::from_pem(&read(path)?)
            .map_err(|e| bad(&format!("sslrootcert {}", path.display()), &e))?;
        builder.add_root_certificate(cert);
    }
    if let Some((cert, key)) = &tls.client_cert {
        let identity = native_tls::Identity::from_pkcs8(&read(cert)?, &read(key)?)
            .map_err(|e| bad("sslcert/sslkey", &e))?;
        builder.identity(identity);
    }
    let connector = builder.build().map_err(|e| bad("TLS", &e))?;
    Ok(postgres_native_tls::MakeTlsConnector::new(connector))
}

impl TableStore for PgStore {
    fn keep_lock_on_reconnect(&mut self, lock: std::sync::Arc<DeploymentLock>) {
        self.lock = Some(lock);
    }

    fn describe(&self) -> String {
        self.addr.to_string()
    }

    fn lock(&self, d: &Deployment) -> Result<DeploymentLock, TableError> {
        let owner = self.owner(d.id)?;
        lock::acquire(&self.addr, d, owner)
    }

    fn create_deployment(&mut self, d: &NewDeployment) -> Result<Deployment, TableError> {
        self.retrying(false, |s| s.create_in(d), |_| Ok(None))
    }

    fn deployment(&self, id: i64) -> Result<Deployment, TableError> {
        self.read(|c| catalog::deployment_in(c, id))
    }

    fn deployments(&self) -> Result<Vec<Deployment>, TableError> {
        self.read(|c| catalog::query_deployments(c, "ORDER BY id", &[]))
    }

    fn deployments_of(&self, output: &str) -> Result<Vec<Deployment>, TableError> {
        self.read(|c| {
            catalog::query_deployments(
                c,
                "WHERE id IN (SELECT deployment FROM kappa.outputs WHERE lower(output) = lower($1)) \
                 ORDER BY version",
                &[&output],
            )
        })
    }

    fn find_by_output(&self, output: &str, version: Option<u32>) -> Result<Deployment, TableError> {
        self.read(|c| catalog::find_by_output(c, output, version))
    }

    fn input_offsets(&self, id: i64) -> Result<Vec<InputOffset>, TableError> {
        self.read(|c| catalog::input_offsets(c, id))
    }

    fn offsets(&self, id: i64) -> Result<BTreeMap<(String, u32), u64>, TableError> {
        Ok(self
            .input_offsets(id)?
            .into_iter()
            .map(|o| ((o.input, o.partition), o.next))
            .collect())
    }

    fn set_progress(&mut self, lease: &Lease, stats: &EpochStats) -> Result<(), TableError> {
        self.retrying(
            true,
            |s| catalog::set_progress(s.client.get_mut(), lease, stats),
            |_| Ok(None),
        )
    }

    fn mark_caught_up(&mut self, lease: &Lease) -> Result<(), TableError> {
        self.retrying(
            true,
            |s| catalog::mark_caught_up(s.client.get_mut(), lease),
            |_| Ok(None),
        )
    }

    fn set_note(&mut self, id: i64, note: Option<&str>) -> Result<(), TableError> {
        self.retrying(
            true,
            |s| catalog::set_note(s.client.get_mut(), id, note),
            |_| Ok(None),
        )
    }

    fn set_reading(&mut self, id: i64, reading: &str) -> Result<(), TableError> {
        self.retrying(
            true,
            |s| catalog::set_reading(s.client.get_mut(), id, reading),
            |_| Ok(None),
        )
    }

    fn reopen(&mut self, id: i64) -> Result<(), TableError> {
        self.retrying(
            false,
            |s| catalog::reopen(s.client.get_mut(), id),
            |_| Ok(None),
        )
    }

    fn take_over(&mut self, id: i64, owner: &str) -> Result<Lease, TableError> {
        // Taken again after a lost connection: a second bump only voids the
        // lease this call would have returned.
        self.retrying(
            true,
            |s| catalog::take_over(s.client.get_mut(), id, owner),
            |_| Ok(None),
        )
    }

    fn check_lease(&self, lease: &Lease) -> Result<(), TableError> {
        self.read(|c| catalog::require_lease(c, lease, false))
    }

    fn owner(&self, id: i64) -> Result<Option<String>, TableError> {
        self.read(|c| {
            Ok(
                c.query_opt("SELECT owner FROM kappa.deployments WHERE id = $1", &[&id])?
                    .and_then(|r| r.get(0)),
            )
        })
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
        let before = std::cell::Cell::new(None);
        let epoch = epoch::EpochWrite {
            changes,
            offsets,
            stats,
            sinks,
            state,
        };
        self.retrying(
            true,
            |s| s.commit_in(lease, &epoch, &before),
            |s| epoch::landed(s.client.get_mut(), lease, before.get()),
        )
    }

    fn write_state(&mut self, lease: &Lease, state: &StateWrite<'_>) -> Result<(), TableError> {
        self.retrying(
            true,
            |s| {
                let mut tx = catalog::begin(s.client.get_mut(), false)?;
                catalog::require_lease(&mut tx, lease, true)?;
                state::write(&mut tx, lease.deployment, state)?;
                tx.commit()?;
                Ok(())
            },
            |_| Ok(None),
        )
    }

    fn load_state(&self, id: i64) -> Result<Option<StoredState>, TableError> {
        self.read(|c| state::load(c, id))
    }

    fn state_summary(&self, id: i64) -> Result<Option<StateSummary>, TableError> {
        self.read(|c| state::summary(c, id))
    }

    fn swap(&mut self, id: i64) -> Result<Vec<i64>, TableError> {
        self.retrying(false, |s| s.swap_in(id, None), |_| Ok(None))
    }

    fn swap_owned(&mut self, lease: &Lease) -> Result<Vec<i64>, TableError> {
        self.retrying(
            false,
            |s| s.swap_in(lease.deployment, Some(lease)),
            |_| Ok(None),
        )
    }

    fn drop_deployment(&mut self, id: i64) -> Result<(), TableError> {
        self.retrying(false, |s| s.drop_in(id), |_| Ok(None))
    }

    fn abandon_unused(
        &mut self,
        lease: &Lease,
        created_as: DeploymentState,
    ) -> Result<bool, TableError> {
        self.retrying(false, |s| s.abandon_in(lease, created_as), |_| Ok(None))
    }

    fn retire_old(&mut self, outputs: &[String], keep: usize) -> Result<Vec<i64>, TableError> {
        self.retrying(false, |s| s.retire_in(outputs, keep), |_| Ok(None))
    }

    fn read_rows(&self, table: &str) -> Result<Vec<(Row, isize)>, TableError> {
        self.read(|c| {
            let (d, index, kinds) = rows::resolve_table(c, table)?;
            let mut rows = rows::select(c, &self.schema(), &d, index, &kinds, None)?;
            rows.sort();
            Ok(rows)
        })
    }

    fn read_page(&self, table: &str, limit: usize) -> Result<TablePage, TableError> {
        self.read(|c| rows::read_page(c, &self.schema(), table, limit))
    }

    fn row_counts(&self, table: &str) -> Result<(u64, u64), TableError> {
        self.read(|c| {
            let (d, index, _) = rows::resolve_table(c, table)?;
            rows::counts(c, &self.qualified(&d.table(index)))
        })
    }

    fn outbox(&self, id: i64) -> Result<Vec<SinkMessage>, TableError> {
        self.read(|c| epoch::outbox(c, id))
    }

    fn clear_outbox(&mut self, lease: &Lease, sink: &str, seq: i64) -> Result<(), TableError> {
        self.retrying(
            true,
            |s| epoch::clear_outbox(s.client.get_mut(), lease, sink, seq),
            |_| Ok(None),
        )
    }
}

#[cfg(test)]
mod tests;
