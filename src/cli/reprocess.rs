//! `kappa reprocess`: replay the log into the next table version beside the
//! live one, and swap the views when it has caught up; and the rollback
//! that runs the same path backwards (`kappa table rollback`).

use anyhow::Context;
use clap::Args;

use super::sources::SourceArgs;
use super::stream::{JobOnLogArgs, StoreArgs, StreamOptions, plan_on_log, run_and_report};
use crate::engine::OnLog;
use crate::registry::Registry;
use crate::runner::stream::{CatchUp, SwapPolicy};
use crate::table::{StoreAddr, SwapRule};

/// When and how a building version goes live.
#[derive(Debug, Args)]
pub struct SwapArgs {
    /// When the caught-up version goes live: `auto` (at once), `manual` (at
    /// `kappa table swap`), or `auto-if RULE`: only if its diff against the
    /// live version meets RULE (e.g. 'changed <= 1%', 'added <= 100 and
    /// removed = 0'), else it waits as with `manual` and says why.
    #[arg(long, num_args = 1..=2, value_names = ["MODE", "RULE"], default_value = "auto")]
    pub swap: Vec<String>,
    /// Caught up when the total lag behind the log end is at most this [default: one epoch, --max-batch].
    #[arg(long, value_name = "N")]
    pub max_lag: Option<u64>,
    /// Retired versions to keep after the swap; older ones are dropped.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub keep: usize,
}

impl SwapArgs {
    fn catch_up(&self, options: &StreamOptions) -> anyhow::Result<CatchUp> {
        let swap = swap_policy(&self.swap)?;
        Ok(CatchUp {
            max_lag: self.max_lag.unwrap_or(options.max_batch as u64),
            swap,
            keep: self.keep,
        })
    }
}

/// `--swap`'s words: `auto`, `manual`, or `auto-if` and its rule, given as
/// a second word or quoted together with it (`--swap "auto-if changed <= 1%"`).
fn swap_policy(words: &[String]) -> anyhow::Result<SwapPolicy> {
    let text = words.join(" ");
    match text.trim() {
        "auto" => Ok(SwapPolicy::Auto),
        "manual" => Ok(SwapPolicy::Manual),
        other => match other.strip_prefix("auto-if").map(str::trim) {
            Some("") => {
                anyhow::bail!("--swap auto-if needs a rule, e.g. --swap auto-if 'changed <= 1%'")
            }
            Some(rule) if other.starts_with("auto-if ") => Ok(SwapPolicy::AutoIf(
                SwapRule::parse(rule).map_err(anyhow::Error::msg)?,
            )),
            _ => anyhow::bail!("--swap takes auto, manual or auto-if RULE, not '{text}'"),
        },
    }
}

#[derive(Debug, Args)]
pub struct ReprocessArgs {
    #[command(flatten)]
    pub job: JobOnLogArgs,
    #[command(flatten)]
    pub swap: SwapArgs,
    /// Go on even though retention has deleted the start of a (non-compacted) input topic.
    #[arg(long)]
    pub from_earliest_available: bool,
    /// Build a new version even when the live one runs exactly this job version, parameters and inputs.
    #[arg(long)]
    pub force: bool,
}

pub fn reprocess(registry: &Registry, args: ReprocessArgs) -> anyhow::Result<()> {
    let options = &args.job.options;
    let sources = args.job.store.sources.open()?;
    let on_log = plan_on_log(registry, &args.job, &sources)?;
    let catch_up = args.swap.catch_up(options)?;
    if !options.first_process()? {
        return run_and_report(
            on_log,
            None,
            options,
            &args.job.store,
            Some(catch_up),
            Vec::new(),
        );
    }
    let mut store = args.job.store.open_store()?;
    let outputs = on_log.output_names().join(",");
    let reading = options.on_bad_row.read_options(options.null.clone());
    // Across processes the others would wait for process 0's run: a
    // cluster's reprocess always builds.
    if !args.force
        && options.workers.config()?.processes == 1
        && let Some(live) = on_log.same_as_live(&*store, &reading)?
    {
        say!(
            "kappa reprocess: nothing changed: {outputs} {} is live and runs {} v{} with the same \
             parameters and inputs, so a new version would be a copy of it; nothing was built \
             (pass --force to build one anyway)",
            live.version,
            live.job,
            live.job_version
        );
        return Ok(());
    }
    let started = on_log.start_building(&mut *store, args.from_earliest_available)?;
    let version = started.deployment.version;
    match started.created {
        true => say!("kappa reprocess: building {outputs} {version} beside the live version"),
        false => say!(
            "kappa reprocess: resuming the build of {outputs} {version} from its committed offsets"
        ),
    }
    drop(store);
    run_and_report(
        on_log,
        Some(started),
        options,
        &args.job.store,
        Some(catch_up),
        Vec::new(),
    )
}

/// `kappa table rollback NAME`.
#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// The output (view) to roll back.
    pub name: String,
    /// The retired version to resume (3 or v3) [default: the one that was live before the live one].
    #[arg(long, value_name = "N")]
    pub version: Option<crate::table::TableVersion>,
    #[command(flatten)]
    pub swap: SwapArgs,
    #[command(flatten)]
    pub options: StreamOptions,
    #[command(flatten)]
    pub sources: SourceArgs,
}

/// Resumes the previous version of `NAME` from its own offsets, lets it
/// catch up with what arrived since it was retired, and swaps it back in.
pub fn rollback(
    registry: &Registry,
    args: RollbackArgs,
    table_db: &StoreAddr,
) -> anyhow::Result<()> {
    let paths = StoreArgs {
        sources: args.sources,
        table_db: table_db.clone(),
    };
    let catch_up = args.swap.catch_up(&args.options)?;
    if !args.options.first_process()? {
        // The catalog is read for the version's job and parameters, never written.
        let sources = paths.sources.open()?;
        let store = crate::table::open_read_only(table_db)
            .with_context(|| format!("cannot read table store {}", table_db.display()))?;
        let on_log = OnLog::rollback_plan(registry, &*store, &sources, &args.name, args.version)?;
        drop(store);
        return run_and_report(
            on_log,
            None,
            &args.options,
            &paths,
            Some(catch_up),
            Vec::new(),
        );
    }
    let (sources, mut store) = paths.open()?;
    let (on_log, started) = OnLog::start_rollback(
        registry,
        &mut *store,
        &sources,
        &args.name,
        args.version,
        &args
            .options
            .on_bad_row
            .read_options(args.options.null.clone()),
    )?;
    say!(
        "kappa table rollback: resuming {} {} from its committed offsets; it goes live once caught up",
        args.name,
        started.deployment.version
    );
    drop(store);
    run_and_report(
        on_log,
        Some(started),
        &args.options,
        &paths,
        Some(catch_up),
        Vec::new(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(words: &[&str]) -> anyhow::Result<SwapPolicy> {
        swap_policy(&words.iter().map(|w| w.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn an_auto_if_rule_is_taken_as_a_second_word_or_quoted_with_the_keyword() {
        assert!(matches!(policy(&["auto"]), Ok(SwapPolicy::Auto)));
        assert!(matches!(policy(&["manual"]), Ok(SwapPolicy::Manual)));
        for words in [
            &["auto-if", "changed <= 10%"][..],
            &["auto-if changed <= 10%"],
        ] {
            assert!(
                matches!(policy(words), Ok(SwapPolicy::AutoIf(_))),
                "{words:?}"
            );
        }
        let e = policy(&["auto-if"]).unwrap_err().to_string();
        assert!(e.contains("needs a rule"), "{e}");
        let e = policy(&["auto-iff", "x"]).unwrap_err().to_string();
        assert!(e.contains("not 'auto-iff x'"), "{e}");
    }
}
