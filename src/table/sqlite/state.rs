//! The checkpointed state's pieces in SQLite (`kappa_state`, and the
//! digest and times in `kappa_deployments`): see [`crate::table::state`].
//! Every function runs inside its caller's transaction.

use rusqlite::{Connection, OptionalExtension, params};

use super::{StateSummary, StateWrite, StoredState, TableError, now_ms};
use crate::table::state::{StatePiece, append_without_base, checksum, verified};

/// Applies `write` to deployment `id`'s state.
pub(super) fn write(conn: &Connection, id: i64, write: &StateWrite<'_>) -> Result<(), TableError> {
    let (digest, pieces, replace) = match *write {
        StateWrite::Clear => {
            let cleared = conn
                .prepare_cached(
                    "UPDATE kappa_deployments SET state_digest = NULL, state_merged_at = NULL, \
                     state_written_at = NULL WHERE id = ?1 AND state_digest IS NOT NULL",
                )?
                .execute([id])?;
            if cleared > 0 {
                conn.execute("DELETE FROM kappa_state WHERE deployment = ?1", [id])?;
            }
            return Ok(());
        }
        StateWrite::Append { digest, pieces } => (digest, pieces, false),
        StateWrite::Replace { digest, pieces } => (digest, pieces, true),
    };
    let stored: Option<Option<String>> = conn
        .prepare_cached("SELECT state_digest FROM kappa_deployments WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?;
    // Pieces added to a state for another plan, or to none, would make a
    // state that covers only the epochs since: a bug in the caller.
    if !replace && stored.flatten().as_deref() != Some(digest) {
        return Err(append_without_base(id));
    }
    if replace {
        conn.prepare_cached("DELETE FROM kappa_state WHERE deployment = ?1")?
            .execute([id])?;
    }
    let mut seq: i64 = conn
        .prepare_cached("SELECT coalesce(max(seq), 0) FROM kappa_state WHERE deployment = ?1")?
        .query_row([id], |r| r.get(0))?;
    let mut insert = conn.prepare_cached(
        "INSERT INTO kappa_state (deployment, seq, input, partition, crc, bytes) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for p in pieces {
        seq += 1;
        insert.execute(params![
            id,
            seq,
            p.input,
            p.partition,
            checksum(&p.bytes),
            p.bytes
        ])?;
    }
    let now = now_ms();
    conn.prepare_cached(
        "UPDATE kappa_deployments SET state_digest = ?2, state_written_at = ?3, \
         state_merged_at = CASE WHEN ?4 THEN ?3 ELSE state_merged_at END WHERE id = ?1",
    )?
    .execute(params![id, digest, now, replace])?;
    Ok(())
}

/// Deployment `id`'s state, checked; `None` when it keeps none.
pub(super) fn load(conn: &Connection, id: i64) -> Result<Option<StoredState>, TableError> {
    let Some(digest) = digest(conn, id)? else {
        return Ok(None);
    };
    let mut select = conn.prepare_cached(
        "SELECT seq, crc, input, partition, bytes FROM kappa_state \
         WHERE deployment = ?1 ORDER BY seq",
    )?;
    let rows = select
        .query_map([id], |r| {
            let piece = StatePiece {
                input: r.get(2)?,
                partition: r.get(3)?,
                bytes: r.get(4)?,
            };
            Ok((r.get::<_, i64>(0)?, r.get::<_, u32>(1)?, piece))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(verified(digest, rows)))
}

/// How much state deployment `id` keeps.
pub(super) fn summary(conn: &Connection, id: i64) -> Result<Option<StateSummary>, TableError> {
    let times: Option<(Option<String>, Option<i64>, Option<i64>)> = conn
        .prepare_cached(
            "SELECT state_digest, state_merged_at, state_written_at FROM kappa_deployments \
             WHERE id = ?1",
        )?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    let Some((Some(_), merged_at, written_at)) = times else {
        return Ok(None);
    };
    let (pieces, bytes): (i64, i64) = conn
        .prepare_cached(
            "SELECT count(*), coalesce(sum(length(bytes)), 0) FROM kappa_state WHERE deployment = ?1",
        )?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(Some(StateSummary {
        pieces: pieces as u64,
        bytes: bytes as u64,
        merged_at,
        written_at,
    }))
}

fn digest(conn: &Connection, id: i64) -> Result<Option<String>, TableError> {
    Ok(conn
        .prepare_cached("SELECT state_digest FROM kappa_deployments WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?
        .flatten())
}
