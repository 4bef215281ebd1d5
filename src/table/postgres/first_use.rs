//! The catalog a command created, removed again when that command fails
//! before anything was committed to it, so a failed first `kappa stream`
//! leaves the database as it found it.
//!
//! Only what kappa made is removed: the `kappa` schema when it did not
//! exist before the command, its catalog tables, and the output schema when
//! kappa made that too. A schema that holds anything else (a table a user
//! put there meanwhile) stays, and a catalog that holds a deployment (one
//! another process created meanwhile) is kept whole. The check and the
//! removal run in one transaction under the catalog's exclusive lock.

use postgres::Transaction;
use postgres::error::SqlState;

use super::catalog::begin;
use super::{PgStore, connect_client};
use crate::table::{PgAddr, TableError, ident};

/// What a first use of the database would create, found before it.
#[derive(Debug)]
pub struct NewCatalog {
    /// Whether the output schema (`?schema=NAME`) is missing too.
    output_schema: bool,
}

/// kappa's catalog tables, dependents first.
const CATALOG_TABLES: &str =
    "kappa.state, kappa.outbox, kappa.offsets, kappa.outputs, kappa.deployments, kappa.meta";

impl PgStore {
    /// `Some` when the database at `addr` has no `kappa` schema yet.
    pub fn new_catalog(addr: &PgAddr) -> Result<Option<NewCatalog>, TableError> {
        let mut client = connect_client(addr)?;
        let missing = |client: &mut postgres::Client, name: &str| -> Result<bool, TableError> {
            Ok(client
                .query_one(
                    "SELECT NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
                    &[&name],
                )?
                .get(0))
        };
        if !missing(&mut client, "kappa")? {
            return Ok(None);
        }
        Ok(Some(NewCatalog {
            output_schema: missing(&mut client, addr.schema())?,
        }))
    }

    /// Removes the catalog `new` describes if it holds no deployment;
    /// whether it did.
    pub fn remove_new_catalog(addr: &PgAddr, new: NewCatalog) -> Result<bool, TableError> {
        let mut store = PgStore::connect(addr)?;
        store.named(|s| s.remove_catalog(&new))
    }

    fn remove_catalog(&mut self, new: &NewCatalog) -> Result<bool, TableError> {
        let schema = self.addr.schema().to_string();
        let mut tx = begin(self.client.get_mut(), true)?;
        let catalog: bool = tx
            .query_one("SELECT to_regclass('kappa.deployments') IS NOT NULL", &[])?
            .get(0);
        if !catalog {
            return Ok(false);
        }
        let used: bool = tx
            .query_one("SELECT EXISTS (SELECT 1 FROM kappa.deployments)", &[])?
            .get(0);
        if used {
            return Ok(false);
        }
        tx.batch_execute(&format!("DROP TABLE {CATALOG_TABLES}"))?;
        let removed = drop_schema_if_empty(&mut tx, "kappa")?;
        if new.output_schema && schema != "kappa" {
            drop_schema_if_empty(&mut tx, &schema)?;
        }
        tx.commit()?;
        Ok(removed)
    }
}

/// Drops schema `name` unless it holds anything; whether it did.
fn drop_schema_if_empty(tx: &mut Transaction<'_>, name: &str) -> Result<bool, TableError> {
    let mut savepoint = tx.transaction()?;
    // RESTRICT: the server refuses to drop a schema that holds anything.
    let sql = format!("DROP SCHEMA {} RESTRICT", ident::quote(name));
    match savepoint.batch_execute(&sql) {
        Ok(()) => {
            savepoint.commit()?;
            Ok(true)
        }
        Err(e) if e.code() == Some(&SqlState::DEPENDENT_OBJECTS_STILL_EXIST) => {
            savepoint.rollback()?;
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}
