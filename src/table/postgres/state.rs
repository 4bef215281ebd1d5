//! The checkpointed state's pieces in PostgreSQL (`kappa.state`, and the
//! digest and times in `kappa.deployments`): see [`crate::table::state`].
//! Every function runs inside its caller's transaction.

use postgres::GenericClient;

use super::{StateSummary, StateWrite, StoredState, TableError};
use crate::table::now_ms;
use crate::table::state::{StatePiece, checksum, verified};

/// Applies `write` to deployment `id`'s state.
pub(super) fn write(
    c: &mut impl GenericClient,
    id: i64,
    write: &StateWrite<'_>,
) -> Result<(), TableError> {
    let (digest, pieces, replace) = match *write {
        StateWrite::Clear => {
            let cleared = c.execute(
                "UPDATE kappa.deployments SET state_digest = NULL, state_merged_at = NULL, \
                 state_written_at = NULL WHERE id = $1 AND state_digest IS NOT NULL",
                &[&id],
            )?;
            if cleared > 0 {
                c.execute("DELETE FROM kappa.state WHERE deployment = $1", &[&id])?;
            }
            return Ok(());
        }
        StateWrite::Append { digest, pieces } => (digest, pieces, false),
        StateWrite::Replace { digest, pieces } => (digest, pieces, true),
    };
    let stored: Option<String> = c
        .query_opt(
            "SELECT state_digest FROM kappa.deployments WHERE id = $1",
            &[&id],
        )?
        .and_then(|r| r.get(0));
    // Pieces added to a state for another plan, or to none, would make a
    // state that covers only the epochs since: a bug in the caller.
    if !replace && stored.as_deref() != Some(digest) {
        return Err(crate::table::state::append_without_base(id));
    }
    if replace {
        c.execute("DELETE FROM kappa.state WHERE deployment = $1", &[&id])?;
    }
    let mut seq: i64 = c
        .query_one(
            "SELECT coalesce(max(seq), 0) FROM kappa.state WHERE deployment = $1",
            &[&id],
        )?
        .get(0);
    let insert = c.prepare(
        "INSERT INTO kappa.state (deployment, seq, input, partition, crc, bytes) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )?;
    for p in pieces {
        seq += 1;
        let crc = i64::from(checksum(&p.bytes));
        let partition = i64::from(p.partition);
        c.execute(&insert, &[&id, &seq, &p.input, &partition, &crc, &p.bytes])?;
    }
    c.execute(
        "UPDATE kappa.deployments SET state_digest = $2, state_written_at = $3, \
         state_merged_at = CASE WHEN $4 THEN $3 ELSE state_merged_at END WHERE id = $1",
        &[&id, &digest, &now_ms(), &replace],
    )?;
    Ok(())
}

/// Deployment `id`'s state, checked; `None` when it keeps none.
pub(super) fn load(c: &mut impl GenericClient, id: i64) -> Result<Option<StoredState>, TableError> {
    let digest: Option<String> = c
        .query_opt(
            "SELECT state_digest FROM kappa.deployments WHERE id = $1",
            &[&id],
        )?
        .and_then(|r| r.get(0));
    let Some(digest) = digest else {
        return Ok(None);
    };
    let rows = c.query(
        "SELECT seq, crc, input, partition, bytes FROM kappa.state \
         WHERE deployment = $1 ORDER BY seq",
        &[&id],
    )?;
    let pieces = rows.into_iter().map(|r| {
        let piece = StatePiece {
            input: r.get(2),
            partition: r.get::<_, i64>(3) as u32,
            bytes: r.get(4),
        };
        (r.get::<_, i64>(0), r.get::<_, i64>(1) as u32, piece)
    });
    Ok(Some(verified(digest, pieces)))
}

/// How much state deployment `id` keeps.
pub(super) fn summary(
    c: &mut impl GenericClient,
    id: i64,
) -> Result<Option<StateSummary>, TableError> {
    let row = c.query_opt(
        "SELECT d.state_digest, d.state_merged_at, d.state_written_at, \
         (SELECT count(*) FROM kappa.state s WHERE s.deployment = d.id), \
         (SELECT coalesce(sum(length(s.bytes)), 0)::bigint FROM kappa.state s WHERE s.deployment = d.id) \
         FROM kappa.deployments d WHERE d.id = $1",
        &[&id],
    )?;
    let Some(row) = row else { return Ok(None) };
    if row.get::<_, Option<String>>(0).is_none() {
        return Ok(None);
    }
    Ok(Some(StateSummary {
        merged_at: row.get(1),
        written_at: row.get(2),
        pieces: row.get::<_, i64>(3) as u64,
        bytes: row.get::<_, i64>(4) as u64,
    }))
}
