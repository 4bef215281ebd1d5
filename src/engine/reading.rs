//! How a deployment reads its inputs (the null marker, the bad-record
//! policy), recorded in the catalog when a stream, reprocess or rollback
//! starts, so that every later run and `table verify` read them alike.
//!
//! Invariants:
//! - The null marker never changes over a deployment's life: a restart
//!   with another one is refused. Its tables were built with one meaning of
//!   the text they read, and a replay or a checkpoint with the other would
//!   mix two.
//! - The recorded policy is `skip` once any run skipped: only then can the
//!   applied offsets hold records that are not in the tables, and a verify
//!   must skip them too. A `fail` run never commits past a bad record, so
//!   it may follow a `skip` one.

use super::EngineError;
use crate::source::{BadRowPolicy, ReadOptions};
use crate::table::{Deployment, TableStore};

/// What `d` recorded, or `None` for a deployment from before kappa recorded
/// it (or created and not started yet).
pub fn recorded(d: &Deployment) -> Result<Option<ReadOptions>, EngineError> {
    let Some(text) = &d.reading else {
        return Ok(None);
    };
    serde_json::from_str(text).map(Some).map_err(|e| {
        EngineError::Refused(format!(
            "{d}: the catalog's record of how its inputs are read is damaged ({e}): {text}"
        ))
    })
}

/// Checks a run reading with `options` against what `d` recorded, and
/// records what the deployment reads with from now on.
pub fn agree(
    store: &mut dyn TableStore,
    d: &Deployment,
    options: &ReadOptions,
) -> Result<(), EngineError> {
    let next = match recorded(d)? {
        None => options.clone(),
        Some(was) if was.null != options.null => {
            return Err(EngineError::Refused(format!(
                "{d} was built reading {} as null; this run reads {}. Its tables would mix two \
                 meanings of the same text: run it with {}, or build a version with the new \
                 marker with `kappa reprocess`",
                marker(&was.null),
                marker(&options.null),
                match &was.null {
                    Some(m) => format!("--null '{m}'"),
                    None => "no --null".into(),
                }
            )));
        }
        Some(was) if was.on_bad_row == BadRowPolicy::Skip => return Ok(()),
        Some(was) if was == *options => return Ok(()),
        Some(_) => options.clone(),
    };
    let text = serde_json::to_string(&next).expect("read options serialise");
    store.set_reading(d.id, &text)?;
    Ok(())
}

fn marker(null: &Option<String>) -> String {
    match null {
        Some(m) => format!("empty fields and '{m}'"),
        None => "only empty fields".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::{DeploymentState, NewDeployment, StoreAddr};

    fn options(null: Option<&str>, on_bad_row: BadRowPolicy) -> ReadOptions {
        ReadOptions {
            null: null.map(str::to_string),
            on_bad_row,
        }
    }

    #[test]
    fn the_null_marker_is_fixed_and_skip_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let addr = StoreAddr::Sqlite(dir.path().join("t.db"));
        let mut store = crate::table::open(&addr).unwrap();
        let d = store
            .create_deployment(&NewDeployment {
                job: "j".into(),
                job_version: 1,
                params: Vec::new(),
                inputs: vec![("i".into(), "t".into())],
                outputs: vec![crate::schema::OutputSchema {
                    name: "o".into(),
                    columns: vec!["k".into()],
                    key: vec![0],
                }],
                state: DeploymentState::Live,
                note: None,
            })
            .unwrap();
        let now = |store: &dyn TableStore| recorded(&store.deployment(d.id).unwrap()).unwrap();
        assert_eq!(now(&*store), None);
        let fail = options(Some("NA"), BadRowPolicy::Fail);
        let skip = options(Some("NA"), BadRowPolicy::Skip);
        let at = store.deployment(d.id).unwrap();
        agree(&mut *store, &at, &fail).unwrap();
        assert_eq!(now(&*store), Some(fail.clone()));
        let at = store.deployment(d.id).unwrap();
        agree(&mut *store, &at, &skip).unwrap();
        assert_eq!(now(&*store), Some(skip.clone()));
        // A fail run after a skip one keeps skip: the offsets hold skipped records.
        let at = store.deployment(d.id).unwrap();
        agree(&mut *store, &at, &fail).unwrap();
        assert_eq!(now(&*store), Some(skip.clone()));
        let other = options(None, BadRowPolicy::Skip);
        let at = store.deployment(d.id).unwrap();
        let e = agree(&mut *store, &at, &other).unwrap_err().to_string();
        assert!(
            e.contains(
                "was built reading empty fields and 'NA' as null; this run reads only empty fields"
            ),
            "{e}"
        );
        assert!(e.contains("--null 'NA'"), "{e}");
    }
}
