//! The single error type of the table store.
//!
//! Invariant: the variants fall in groups a caller can act on separately,
//! and none of them is a bare string:
//! - *not found* (`DeploymentNotFound`, `OutputNotFound`, `TableNotFound`,
//!   `StoreNotFound`): the caller named something the catalog does not have;
//! - *invalid name* (`InvalidName`) and *invalid request* (`InvalidDeployment`, `NotComparable`, `BadAddress`, `MixedColumn`,
//!   `Arity`, `OutputCount`): the request is malformed and nothing was written;
//! - *state conflict* (`StateConflict`, `LiveConflict`, `OffsetRegression`,
//!   `RetractMissing`, and the ownership conflicts `Owned` and `Fenced`): the request is well formed but contradicts what the
//!   store holds (a retired deployment's commit, a retraction of a row that is
//!   not there); the transaction was rolled back, so the store is as it was.
//!   A stream process that gets `StateConflict` from `commit_epoch` has been
//!   swapped out or dropped and should stop;
//! - *corrupt catalog* (`Corrupt`): the file holds something kappa never
//!   writes (a catalog JSON that does not parse, a BLOB in an output table);
//! - *database / I/O* (`Sqlite`, `DiskFull`, `Postgres`, `Io`): the database, the
//!   network or the disk failed; the
//!   data itself may be fine and a retry may succeed (`SQLITE_BUSY` after the
//!   busy timeout, a full disk).

use std::path::PathBuf;

use super::deployment::DeploymentState;

/// Everything that can go wrong in the table store.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// No table store at this address: no SQLite file, or a PostgreSQL
    /// database without kappa's catalog (only from `open_existing`).
    #[error("no table store at {addr} (it is created by `kappa stream` or `kappa reprocess`)")]
    StoreNotFound {
        /// The store looked for (a URL without its password).
        addr: String,
    },

    /// `--table-db` is a PostgreSQL URL the client cannot read.
    #[error("{addr} is not a PostgreSQL URL kappa can use: {reason}")]
    BadAddress {
        /// The URL given, without its password.
        addr: String,
        /// What is wrong with it.
        reason: String,
    },

    /// No deployment has this id.
    #[error("deployment {id} does not exist")]
    DeploymentNotFound {
        /// The deployment id asked for.
        id: i64,
    },

    /// No deployment (of the given version, or live when none is given) has
    /// this output.
    #[error("output '{output}' has no {} deployment", version.map_or("live".to_string(), |v| format!("v{v}")))]
    OutputNotFound {
        /// The output name asked for.
        output: String,
        /// The version asked for; `None` asks for the live one.
        version: Option<u32>,
    },

    /// The name is not an output table the catalog knows (or it was dropped).
    #[error("table '{table}' is not an output table in the store")]
    TableNotFound {
        /// The table name given.
        table: String,
    },

    /// Two versions of an output that cannot be compared row by row.
    #[error("cannot compare {output} v{from} with v{to}: {reason}")]
    NotComparable {
        /// The output.
        output: String,
        /// The old version.
        from: u32,
        /// The new version.
        to: u32,
        /// What differs (their columns or keys).
        reason: String,
    },

    /// A table, view or column name that is not a valid identifier.
    #[error("invalid {kind} name '{name}': {reason}")]
    InvalidName {
        /// What the name is for: `"output"` or `"column"`.
        kind: &'static str,
        /// The name given.
        name: String,
        /// The rule it breaks.
        reason: &'static str,
    },

    /// A new deployment that does not describe a usable set of tables.
    #[error("invalid deployment of job '{job}': {reason}")]
    InvalidDeployment {
        /// The job the deployment is of.
        job: String,
        /// What makes it unusable (no outputs, a duplicate name, its state).
        reason: String,
    },

    /// The action is not allowed in the deployment's current state.
    #[error("{name} is {state}: cannot {action}")]
    StateConflict {
        /// The deployment's id.
        id: i64,
        /// How users know it: its outputs and version (`sessions v2`).
        name: String,
        /// The state it is in.
        state: DeploymentState,
        /// What was refused, to follow "cannot" (`commit an epoch`).
        action: &'static str,
    },

    /// Another live process holds the deployment's lock.
    #[error(
        "{deployment} is already driven by another process ({holder}); \
         stop that process first (a killed process releases it at once)"
    )]
    Owned {
        /// The deployment (its outputs and version).
        deployment: String,
        /// Who holds the lock, as its lock file says (pid and host).
        holder: String,
    },

    /// Another process took the deployment over since this one did: this
    /// process's write was refused, and it must stop without writing.
    #[error(
        "{deployment} was taken over by another process ({owner}); \
         this process stops without writing anything more"
    )]
    Fenced {
        /// The deployment (its outputs and version).
        deployment: String,
        /// Its owner now, as the catalog records it (pid and host).
        owner: String,
    },

    /// A second live deployment for an output was requested.
    #[error(
        "output '{output}' already has a live version ({}); create a building one and swap",
        live_version
    )]
    LiveConflict {
        /// The output that already has a live deployment.
        output: String,
        /// The id of that live deployment.
        live: i64,
        /// Its version.
        live_version: super::deployment::TableVersion,
    },

    /// An epoch's offset is below the one already committed: the caller is
    /// replaying from the wrong place, and applying would count twice.
    #[error(
        "{name}: offset for input '{input}' partition {partition} would go back \
         from {committed} to {given}"
    )]
    OffsetRegression {
        /// The deployment's id.
        id: i64,
        /// How users know it: its outputs and version.
        name: String,
        /// The job input the offset is for.
        input: String,
        /// The partition of that input's topic.
        partition: u32,
        /// The next offset already committed.
        committed: u64,
        /// The next offset this epoch gave, lower.
        given: u64,
    },

    /// A retraction of more copies of a row than the table holds: the changes
    /// do not continue what was committed.
    #[error("table '{table}': retraction of {diff} copies of {row} which the table does not hold")]
    RetractMissing {
        /// The output table.
        table: String,
        /// The row, in debug form.
        row: String,
        /// The copies the retraction removes (positive).
        diff: i64,
    },

    /// `commit_epoch` got a number of change lists other than the
    /// deployment's number of outputs.
    #[error("deployment {id} has {expected} outputs, but changes were given for {actual}")]
    OutputCount {
        /// The deployment's id.
        id: i64,
        /// Its number of outputs.
        expected: usize,
        /// The number of change lists given.
        actual: usize,
    },

    /// A row whose length is not the table's number of columns.
    #[error("table '{table}' has {expected} columns, but a row has {actual}")]
    Arity {
        /// The output table.
        table: String,
        /// Its number of columns.
        expected: usize,
        /// The row's length.
        actual: usize,
    },

    /// The store holds something kappa never writes.
    #[error("corrupt table store ({what}): {reason}")]
    Corrupt {
        /// Where: the store file, a deployment's catalog field, a table's
        /// column.
        what: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A file beside the store (its directory, a lock file) failed.
    #[error("{path}: {cause}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        cause: std::io::Error,
    },

    /// An output column of a PostgreSQL table holds values of one kind;
    /// this change brings another that it cannot hold exactly.
    #[error(
        "column '{column}' of table '{table}' holds {had}, and a row brings {got}: \
         a PostgreSQL column has one type (cast the column in the job, or use the SQLite store)"
    )]
    MixedColumn {
        /// The version table.
        table: String,
        /// The column.
        column: String,
        /// What it holds.
        had: &'static str,
        /// What the row brings.
        got: &'static str,
    },

    /// PostgreSQL refused or failed a statement (a permission, a constraint,
    /// a lost connection after the retries). The server's message names the
    /// object, and kappa adds which store it was.
    #[error("PostgreSQL ({store}): {message}")]
    Postgres {
        /// The store (its URL without the password).
        store: String,
        /// The server's or the client's message, with its detail and hint.
        message: String,
        /// Whether the connection was lost (the server went away, a
        /// network failure), so that reconnecting may help.
        connection: bool,
    },

    /// The disk of a SQLite store has no room for what SQLite had to write:
    /// the transaction was rolled back.
    #[error(
        "the disk of table store {} is full ({} free in {}); free space there and run again (SQLite: {sqlite})",
        store.display(),
        free.map_or("no room".to_string(), crate::english::bytes),
        dir.display()
    )]
    DiskFull {
        /// The store's file.
        store: PathBuf,
        /// The directory it is in.
        dir: PathBuf,
        /// What the filesystem says is free, when it says.
        free: Option<u64>,
        /// SQLite's message.
        sqlite: String,
    },

    /// SQLite failed (busy past the timeout, disk full, I/O error, ...).
    /// Not a `source`: SQLite's own message is the whole cause, and its
    /// inner error only repeats it.
    #[error("SQLite: {}", sqlite_message(.0))]
    Sqlite(rusqlite::Error),
}

impl From<rusqlite::Error> for TableError {
    fn from(e: rusqlite::Error) -> Self {
        TableError::Sqlite(e)
    }
}

fn sqlite_message(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(_, Some(message)) => message.clone(),
        rusqlite::Error::SqliteFailure(code, None) => code.to_string(),
        other => other.to_string(),
    }
}

impl TableError {
    /// True for the *state conflict* group (see the module docs): the store
    /// is consistent, but not in the state the caller assumed.
    pub fn is_state_conflict(&self) -> bool {
        matches!(
            self,
            TableError::StateConflict { .. }
                | TableError::LiveConflict { .. }
                | TableError::Owned { .. }
                | TableError::Fenced { .. }
                | TableError::OffsetRegression { .. }
                | TableError::RetractMissing { .. }
        )
    }

    /// True for the *not found* group.
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            TableError::StoreNotFound { .. }
                | TableError::DeploymentNotFound { .. }
                | TableError::OutputNotFound { .. }
                | TableError::TableNotFound { .. }
        )
    }
}
