//! `verify`: recompute a table version with the batch path over exactly
//! the log offsets it has applied, with the job that built it, and compare
//! each output with its table (see [`crate::runner::verify`]). It reads the
//! inputs as the deployment recorded ([`super::reading`]): a stream that
//! skipped bad records is verified skipping them.

use super::{EngineError, OnLog};
use crate::registry::Registry;
use crate::runner::WorkerConfig;
use crate::runner::verify::{OutputCheck, Recompute, compare};
use crate::source::inputs::Sources;
use crate::source::{BadRowPolicy, BadRows, ReadOptions};
use crate::table::{Deployment, TableStore, TableVersion};

/// How a table version compares with its recomputation.
#[derive(Debug)]
pub struct Verification {
    /// The deployment verified.
    pub deployment: Deployment,
    /// Records of the log it has applied (and the recomputation read).
    pub applied: u64,
    /// Per output, how its table compares.
    pub outputs: Vec<OutputCheck>,
    /// Bad records the recomputation skipped (under the skip policy).
    pub bad_rows: BadRows,
    /// How the recomputation read the inputs: as the deployment recorded,
    /// unless overridden.
    pub options: ReadOptions,
}

/// What a verify reads differently from what the deployment recorded
/// (`None`: as recorded; a deployment from before kappa recorded it reads
/// with the defaults).
#[derive(Clone, Debug, Default)]
pub struct ReadingOverride {
    /// The bad-record policy.
    pub on_bad_row: Option<BadRowPolicy>,
    /// The null marker.
    pub null: Option<String>,
}

impl ReadingOverride {
    fn apply(&self, recorded: Option<ReadOptions>) -> ReadOptions {
        let recorded = recorded.unwrap_or_default();
        ReadOptions {
            null: self.null.clone().or(recorded.null),
            on_bad_row: self.on_bad_row.unwrap_or(recorded.on_bad_row),
        }
    }
}

impl Verification {
    /// Whether every output's table is identical to its recomputation.
    pub fn identical(&self) -> bool {
        self.outputs.iter().all(OutputCheck::identical)
    }
}

/// Verifies version `version` (default: the live one) of output `output`
/// on `workers`. In a cluster run every process calls this with the same
/// arguments; the first reads the offsets and the tables and compares
/// (`Some`), the others read only the catalog, for the job that built the
/// version, and recompute their share (`None`).
pub fn verify(
    registry: &Registry,
    store: &dyn TableStore,
    sources: &Sources,
    output: &str,
    version: Option<TableVersion>,
    reading: &ReadingOverride,
    workers: &WorkerConfig,
) -> Result<Option<Verification>, EngineError> {
    let d = store.find_by_output(output, version.map(|v| v.0))?;
    let options = reading.apply(super::reading::recorded(&d)?);
    let on_log = OnLog::for_deployment(registry, &d, sources)?;
    let first = workers.is_first_process();
    let offsets = first.then(|| store.offsets(d.id)).transpose()?;
    let recompute = Recompute {
        fingerprint: format!(
            "{}\nverifies {} {}",
            on_log.fingerprint(),
            output,
            d.version
        ),
        plan: on_log.plan,
        inputs: on_log.inputs,
        options: options.clone(),
        workers: workers.clone(),
    };
    let applied = offsets.as_ref().map(|o| o.values().sum());
    let expected = recompute.run(offsets)?;
    let Some(applied) = applied else {
        return Ok(None);
    };
    let mut outputs = Vec::new();
    for (i, (out, expected)) in d.outputs.iter().zip(&expected.outputs).enumerate() {
        let table = store.read_rows(&d.table(i))?;
        outputs.push(compare(&out.name, &table, expected));
    }
    Ok(Some(Verification {
        applied,
        deployment: d,
        outputs,
        bad_rows: expected.bad_rows,
        options,
    }))
}
