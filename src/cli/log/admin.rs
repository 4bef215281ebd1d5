//! `kappa log delete | alter | groups`: the topic and consumer-group
//! administration of Kafka's tools (`kafka-topics --delete`, `kafka-configs
//! --alter`, `kafka-consumer-groups --list | --describe | --delete |
//! --reset-offsets`), on the embedded log.
//!
//! `delete` refuses a topic that a deployment in the table store still
//! reads (building or live), unless `--force`: its stream would fail at its
//! next read and a reprocess could never replay it.
//!
//! `groups` lists the table store's deployments with the groups, as
//! Kafka's tools list a Streams application's group: a deployment's
//! committed offsets are in its catalog, not in the log.

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use super::show::table;
use crate::log::{Log, ResetTo, TopicChange};
use crate::table::{DeploymentState, StoreAddr, TableError};

#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// The topic.
    topic: String,
    /// Delete it even though a deployment in the table store reads it.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    store: TableDbArg,
}

/// The table store whose deployments read the log.
#[derive(Debug, Args)]
struct TableDbArg {
    /// The table store whose deployments read the topics.
    #[arg(long, value_name = "PATH|URL", env = "KAPPA_TABLE_DB", default_value = crate::table::DEFAULT_PATH)]
    table_db: StoreAddr,
}

#[derive(Debug, Args)]
pub struct AlterArgs {
    /// The topic.
    topic: String,
    /// Delete sealed segments whose newest record is older than this (ms; -1: no limit).
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    retention_ms: Option<i64>,
    /// Keep each partition under this many bytes (-1: no limit).
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true)]
    retention_bytes: Option<i64>,
    /// How long a tombstone survives compaction (ms).
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    delete_retention_ms: Option<i64>,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct GroupsArgs {
    /// Only this topic's groups [default: every topic's].
    topic: Option<String>,
    #[command(flatten)]
    store: TableDbArg,
    #[command(subcommand)]
    command: Option<GroupsCommand>,
}

#[derive(Debug, Subcommand)]
enum GroupsCommand {
    /// Forget a group's committed offsets on a topic.
    Delete(GroupTopic),
    /// Move a group's offsets on every partition of a topic.
    Reset(ResetArgs),
}

#[derive(Debug, Args)]
struct GroupTopic {
    /// The group.
    group: String,
    /// The topic.
    #[arg(long)]
    topic: String,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("to").required(true).multiple(false)))]
struct ResetArgs {
    #[command(flatten)]
    at: GroupTopic,
    /// To the earliest offset each partition holds.
    #[arg(long, group = "to")]
    to_earliest: bool,
    /// To the end of each partition (only new records).
    #[arg(long, group = "to")]
    to_latest: bool,
    /// To this offset (clamped to what each partition holds).
    #[arg(long, group = "to", value_name = "N")]
    to_offset: Option<u64>,
    /// To the first record appended at or after this time (unix ms, or RFC 3339 text).
    #[arg(long, group = "to", value_name = "T")]
    to_time: Option<String>,
    /// Print the moves without committing them.
    #[arg(long)]
    dry_run: bool,
    /// Create the group if the topic has none of that name (a misspelt
    /// group is refused without it).
    #[arg(long)]
    create: bool,
}

pub fn delete(log: &Log, a: DeleteArgs) -> anyhow::Result<()> {
    let readers = readers_of(&a.store.table_db, &a.topic)?;
    if !readers.is_empty() && !a.force {
        bail!(
            "topic '{}' is read by {} in {}: drop or retire {} first, or pass --force",
            a.topic,
            readers.join(", "),
            a.store.table_db.display(),
            if readers.len() == 1 { "it" } else { "them" }
        );
    }
    log.delete_topic(&a.topic)
        .with_context(|| format!("cannot delete topic '{}'", a.topic))?;
    say!("deleted topic '{}'", a.topic);
    Ok(())
}

/// The building and live deployments of the store at `table_db`, with
/// their committed offsets (none when there is no store).
fn deployments_reading(
    table_db: &StoreAddr,
) -> anyhow::Result<Vec<(crate::table::Deployment, Vec<crate::table::InputOffset>)>> {
    let store = match crate::table::open_read_only(table_db) {
        Ok(store) => store,
        Err(TableError::StoreNotFound { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e).context("cannot read the deployments of the table store"),
    };
    let mut out = Vec::new();
    for d in store.deployments()? {
        if matches!(d.state, DeploymentState::Building | DeploymentState::Live) {
            let offsets = store.input_offsets(d.id)?;
            out.push((d, offsets));
        }
    }
    Ok(out)
}

/// The building or live deployments of the store at `table_db` that read
/// `topic` (none when there is no store).
fn readers_of(table_db: &StoreAddr, topic: &str) -> anyhow::Result<Vec<String>> {
    let store = match crate::table::open_read_only(table_db) {
        Ok(store) => store,
        Err(TableError::StoreNotFound { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e).context("cannot check which deployments read the topic"),
    };
    let deployments = store.deployments()?;
    Ok(deployments
        .iter()
        .filter(|d| matches!(d.state, DeploymentState::Building | DeploymentState::Live))
        .filter(|d| d.inputs.iter().any(|(_, t)| t == topic))
        .map(|d| format!("{d} ({})", d.state))
        .collect())
}

/// A limit flag's value: -1 (no limit) or a number from 0 up.
fn limit_flag(flag: &str, value: Option<i64>, unit: &str) -> anyhow::Result<Option<Option<u64>>> {
    match value {
        None => Ok(None),
        Some(-1) => Ok(Some(None)),
        Some(v) => match u64::try_from(v) {
            Ok(v) => Ok(Some(Some(v))),
            Err(_) => {
                bail!("{flag} must be -1 (no limit) or a number of {unit} from 0 up, not {v}")
            }
        },
    }
}

pub fn alter(log: &Log, a: AlterArgs) -> anyhow::Result<()> {
    let retention_ms = limit_flag("--retention-ms", a.retention_ms, "milliseconds")?;
    let retention_bytes = limit_flag("--retention-bytes", a.retention_bytes, "bytes")?;
    let delete_retention_ms = match a.delete_retention_ms {
        Some(ms) if ms < 0 => {
            bail!("--delete-retention-ms must be a number of milliseconds from 0 up, not {ms}")
        }
        other => other,
    };
    let change = TopicChange {
        retention_ms: retention_ms.map(|ms| ms.map(|ms| ms as i64)),
        retention_bytes,
        delete_retention_ms,
    };
    if change == TopicChange::default() {
        bail!("nothing to alter: give --retention-ms, --retention-bytes or --delete-retention-ms");
    }
    let (before, after) = log
        .alter_topic(&a.topic, &change)
        .with_context(|| format!("cannot alter topic '{}'", a.topic))?;
    let limit = |v: Option<String>| v.unwrap_or_else(|| "none".into());
    let rows = [
        (
            "retention_ms",
            limit(before.retention_ms.map(|v| v.to_string())),
            limit(after.retention_ms.map(|v| v.to_string())),
        ),
        (
            "retention_bytes",
            limit(before.retention_bytes.map(|v| v.to_string())),
            limit(after.retention_bytes.map(|v| v.to_string())),
        ),
        (
            "delete_retention_ms",
            before.delete_retention_ms.to_string(),
            after.delete_retention_ms.to_string(),
        ),
    ];
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .filter(|(_, b, a)| b != a)
        .map(|(k, b, a)| vec![k.to_string(), b, a])
        .collect();
    out!("{}", table(&["SETTING", "WAS", "NOW"], &rows))?;
    say!(
        "altered topic '{}'; `kappa log retain {}` applies the limits now",
        a.topic,
        a.topic
    );
    Ok(())
}

pub fn groups(log: &Log, a: GroupsArgs) -> anyhow::Result<()> {
    match a.command {
        None => list(log, a.topic.as_deref(), &a.store.table_db),
        Some(GroupsCommand::Delete(g)) => {
            let deleted = log
                .delete_group(&g.topic, &g.group)
                .with_context(|| format!("cannot delete group '{}'", g.group))?;
            if !deleted {
                bail!("group '{}' has no offsets on topic '{}'", g.group, g.topic);
            }
            say!("deleted group '{}' from topic '{}'", g.group, g.topic);
            Ok(())
        }
        Some(GroupsCommand::Reset(r)) => reset(log, r),
    }
}

/// Every group of `topic` (or of every topic), and every building or live
/// deployment of `table_db` reading it: partitions committed, lag.
fn list(log: &Log, topic: Option<&str>, table_db: &StoreAddr) -> anyhow::Result<()> {
    let topics = match topic {
        Some(t) => vec![t.to_string()],
        None => log.list_topics().context("cannot list topics")?,
    };
    let deployments = deployments_reading(table_db).unwrap_or_else(|e| {
        say!("kappa: listing the groups only: {e:#}");
        Vec::new()
    });
    let mut rows = Vec::new();
    for t in topics {
        let info = log
            .topic(&t)
            .with_context(|| format!("cannot read topic '{t}'"))?;
        for (d, offsets) in &deployments {
            if !d.inputs.iter().any(|(_, topic)| *topic == t) {
                continue;
            }
            let next = |p: u32| {
                offsets
                    .iter()
                    .find(|o| o.topic == t && o.partition == p)
                    .map(|o| o.next)
            };
            let committed = info
                .partitions
                .iter()
                .filter(|p| next(p.partition).is_some())
                .count();
            let lag: u64 = info
                .partitions
                .iter()
                .map(|p| {
                    p.latest
                        .saturating_sub(next(p.partition).unwrap_or(p.earliest))
                })
                .sum();
            rows.push(vec![
                format!("{d} ({} deployment)", d.state),
                t.clone(),
                format!("{committed}/{}", info.partitions.len()),
                lag.to_string(),
            ]);
        }
        for g in &info.groups {
            let committed = g
                .partitions
                .iter()
                .filter(|p| p.committed.is_some())
                .count();
            let lag: u64 = g.partitions.iter().map(|p| p.lag).sum();
            rows.push(vec![
                g.group.clone(),
                t.clone(),
                format!("{committed}/{}", g.partitions.len()),
                lag.to_string(),
            ]);
        }
    }
    if rows.is_empty() {
        say!("no consumer groups, and no deployment reads the topics");
        return Ok(());
    }
    out!(
        "{}",
        table(&["GROUP", "TOPIC", "COMMITTED_PARTITIONS", "LAG"], &rows)
    )?;
    Ok(())
}

fn reset(log: &Log, r: ResetArgs) -> anyhow::Result<()> {
    let to = match (r.to_earliest, r.to_latest, r.to_offset, &r.to_time) {
        (true, ..) => ResetTo::Earliest,
        (_, true, ..) => ResetTo::Latest,
        (_, _, Some(n), _) => ResetTo::Offset(n),
        (.., Some(t)) => ResetTo::Time(
            crate::time::parse_event_time(t)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("--to-time '{t}'"))?,
        ),
        _ => unreachable!("clap requires one --to-*"),
    };
    let (group, topic) = (&r.at.group, &r.at.topic);
    let info = log
        .topic(topic)
        .with_context(|| format!("cannot read topic '{topic}'"))?;
    if !r.create && !info.groups.iter().any(|g| &g.group == group) {
        let known: Vec<&str> = info.groups.iter().map(|g| g.group.as_str()).collect();
        bail!(
            "topic '{topic}' has no group '{group}' (its groups: {}); pass --create to make it",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        );
    }
    let moves = log
        .reset_group(topic, group, to, r.dry_run)
        .with_context(|| format!("cannot reset group '{group}' on topic '{topic}'"))?;
    let rows: Vec<Vec<String>> = moves
        .iter()
        .map(|m| {
            vec![
                m.partition.to_string(),
                m.from.map_or("-".into(), |o| o.to_string()),
                m.to.to_string(),
            ]
        })
        .collect();
    out!("{}", table(&["PARTITION", "FROM", "TO"], &rows))?;
    match r.dry_run {
        true => say!("dry run: group '{group}' not moved"),
        false => say!("moved group '{group}' on topic '{topic}'"),
    }
    Ok(())
}
