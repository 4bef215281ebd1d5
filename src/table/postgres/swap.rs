//! Version tables and views in PostgreSQL: creating a version's tables,
//! pointing an output's view at the live version (the swap), dropping
//! versions, and keeping only the newest retired ones. The invariants are
//! the SQLite store's (see `sqlite/swap.rs`); PostgreSQL's transactional
//! DDL makes a view's redefinition and the catalog's states one atomic step
//! for readers, who see the old version or the new one, never neither.

use postgres::GenericClient;

use super::PgStore;
use super::catalog::{
    begin, deployment_in, live_owner, name_in, require_lease, set_state, state_in,
};
use crate::schema::OutputSchema;
use crate::table::deployment::is_bag;
use crate::table::ident::quote;
use crate::table::{DeploymentState, Lease, TableError, now_ms};

impl PgStore {
    pub(super) fn swap_in(
        &mut self,
        id: i64,
        lease: Option<&Lease>,
    ) -> Result<Vec<i64>, TableError> {
        let schema = self.schema();
        let mut tx = begin(self.client.get_mut(), true)?;
        if let Some(lease) = lease {
            require_lease(&mut tx, lease, true)?;
        }
        let d = deployment_in(&mut tx, id)?;
        match d.state {
            DeploymentState::Live => return Ok(Vec::new()),
            DeploymentState::Dropped => {
                return Err(TableError::StateConflict {
                    id,
                    name: d.to_string(),
                    state: d.state,
                    action: "be swapped in (its tables were dropped)",
                });
            }
            DeploymentState::Building | DeploymentState::Retired => {}
        }
        let mut retired: Vec<i64> = Vec::new();
        for o in &d.outputs {
            if let Some(old) = live_owner(&mut tx, &o.name)?.filter(|old| !retired.contains(old)) {
                retired.push(old);
            }
        }
        for &old in &retired {
            set_state(&mut tx, old, DeploymentState::Retired)?;
            for o in deployment_in(&mut tx, old)?.outputs {
                if d.output_index(&o.name).is_none() {
                    drop_view(&mut tx, &schema, &o.name)?;
                }
            }
        }
        set_state(&mut tx, id, DeploymentState::Live)?;
        tx.execute(
            "UPDATE kappa.deployments SET swapped_at = $2 WHERE id = $1",
            &[&id, &now_ms()],
        )?;
        for (i, o) in d.outputs.iter().enumerate() {
            point_view(&mut tx, &schema, o, &d.table(i))?;
            check_single_live(&mut tx, &o.name)?;
        }
        crate::table::pause_inside_swap();
        tx.commit()?;
        Ok(retired)
    }

    pub(super) fn drop_in(&mut self, id: i64) -> Result<(), TableError> {
        let schema = self.schema();
        let mut tx = begin(self.client.get_mut(), true)?;
        drop_tables(&mut tx, &schema, id)?;
        tx.commit()?;
        self.writers.remove(&id);
        Ok(())
    }

    pub(super) fn abandon_in(
        &mut self,
        lease: &Lease,
        created_as: DeploymentState,
    ) -> Result<bool, TableError> {
        let schema = self.schema();
        let id = lease.deployment;
        let mut tx = begin(self.client.get_mut(), true)?;
        require_lease(&mut tx, lease, true)?;
        if state_in(&mut tx, id)? != created_as {
            return Ok(false);
        }
        let used: bool = tx
            .query_one(
                "SELECT epochs > 0 OR EXISTS (SELECT 1 FROM kappa.offsets WHERE deployment = $1) \
                 FROM kappa.deployments WHERE id = $1",
                &[&id],
            )?
            .get(0);
        if used {
            return Ok(false);
        }
        let d = deployment_in(&mut tx, id)?;
        if d.state == DeploymentState::Live {
            for o in &d.outputs {
                drop_view(&mut tx, &schema, &o.name)?;
            }
        }
        for table in d.tables() {
            tx.batch_execute(&format!("DROP TABLE IF EXISTS {schema}.{}", quote(&table)))?;
        }
        for sql in [
            "DELETE FROM kappa.outbox WHERE deployment = $1",
            "DELETE FROM kappa.outputs WHERE deployment = $1",
            "DELETE FROM kappa.offsets WHERE deployment = $1",
            "DELETE FROM kappa.deployments WHERE id = $1",
        ] {
            tx.execute(sql, &[&id])?;
        }
        tx.commit()?;
        self.writers.remove(&id);
        Ok(true)
    }

    pub(super) fn retire_in(
        &mut self,
        outputs: &[String],
        keep: usize,
    ) -> Result<Vec<i64>, TableError> {
        let schema = self.schema();
        let mut tx = begin(self.client.get_mut(), true)?;
        let names: Vec<String> = outputs.iter().map(|o| o.to_lowercase()).collect();
        let mut retired: Vec<(i64, i64)> = tx
            .query(
                "SELECT DISTINCT coalesce(d.swapped_at, d.created_at), d.id FROM kappa.outputs o \
                 JOIN kappa.deployments d ON d.id = o.deployment \
                 WHERE lower(o.output) = ANY($1) AND d.state = 'retired'",
                &[&names],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        retired.sort_unstable_by(|a, b| b.cmp(a));
        retired.dedup();
        let doomed: Vec<i64> = retired.into_iter().skip(keep).map(|(_, id)| id).collect();
        for &id in &doomed {
            drop_tables(&mut tx, &schema, id)?;
        }
        tx.commit()?;
        for id in &doomed {
            self.writers.remove(id);
        }
        Ok(doomed)
    }
}

fn drop_tables(c: &mut impl GenericClient, schema: &str, id: i64) -> Result<(), TableError> {
    let state = state_in(c, id)?;
    if matches!(state, DeploymentState::Live | DeploymentState::Dropped) {
        return Err(TableError::StateConflict {
            id,
            name: name_in(c, id),
            state,
            action: "be dropped (only a building or retired deployment can)",
        });
    }
    let d = deployment_in(c, id)?;
    for table in d.tables() {
        c.batch_execute(&format!("DROP TABLE IF EXISTS {schema}.{}", quote(&table)))?;
    }
    set_state(c, id, DeploymentState::Dropped)
}

/// Creates a version table: the output's columns (untyped until they get a
/// value, see `values.rs`), the multiplicity, and the row's identity.
pub(super) fn create_table(
    c: &mut impl GenericClient,
    schema: &str,
    table: &str,
    o: &OutputSchema,
) -> Result<(), TableError> {
    let columns: Vec<String> = o
        .columns
        .iter()
        .map(|c| format!("{} text", quote(c)))
        .collect();
    c.batch_execute(&format!(
        "CREATE TABLE {schema}.{} ({}, kappa_n bigint NOT NULL CHECK (kappa_n > 0), \
         kappa_id bytea PRIMARY KEY)",
        quote(table),
        columns.join(", ")
    ))?;
    Ok(())
}

/// (Re)defines the view `OUTPUT` to select from `table`.
pub(super) fn point_view(
    c: &mut impl GenericClient,
    schema: &str,
    o: &OutputSchema,
    table: &str,
) -> Result<(), TableError> {
    let mut columns: Vec<String> = o.columns.iter().map(|c| quote(c)).collect();
    if is_bag(o) {
        columns.push("kappa_n AS kappa_count".to_string());
    }
    drop_view(c, schema, &o.name)?;
    c.batch_execute(&format!(
        "CREATE VIEW {schema}.{} AS SELECT {} FROM {schema}.{}",
        quote(&o.name),
        columns.join(", "),
        quote(table)
    ))?;
    Ok(())
}

pub(super) fn drop_view(
    c: &mut impl GenericClient,
    schema: &str,
    output: &str,
) -> Result<(), TableError> {
    c.batch_execute(&format!("DROP VIEW IF EXISTS {schema}.{}", quote(output)))?;
    Ok(())
}

/// Fails (so the transaction rolls back) unless exactly one deployment is
/// live for `output`.
fn check_single_live(c: &mut impl GenericClient, output: &str) -> Result<(), TableError> {
    let live: Vec<i64> = c
        .query(
            "SELECT d.id FROM kappa.outputs o JOIN kappa.deployments d ON d.id = o.deployment \
             WHERE lower(o.output) = lower($1) AND d.state = 'live'",
            &[&output],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if live.len() != 1 {
        return Err(TableError::Corrupt {
            what: format!("output '{output}'"),
            reason: format!("a swap would leave live deployments {live:?}"),
        });
    }
    Ok(())
}
