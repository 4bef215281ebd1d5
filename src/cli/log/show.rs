//! `kappa log list` and `kappa log describe`: read-only views of topics as
//! aligned text tables on stdout.
//!
//! Neither takes the writer lock, so both work while a producer runs. The
//! record count of a partition is `latest - earliest`: exact for ordinary
//! topics (retention only removes whole segments from the front), an upper
//! bound for compacted ones, shown as `<=N`, since compaction leaves gaps
//! in the offsets and counting exactly would mean reading every record.

use anyhow::Context;

use crate::log::{KeyColumn, Log, PartitionInfo, TopicConfig, TopicInfo};

pub fn list(log: &Log) -> anyhow::Result<()> {
    let topics = log.list_topics().context("cannot list topics")?;
    if topics.is_empty() {
        say!("no topics in {}", log.root().display());
        return Ok(());
    }
    let mut rows = Vec::new();
    for name in topics {
        let info = log
            .topic(&name)
            .with_context(|| format!("cannot read topic '{name}'"))?;
        let bytes: u64 = info.partitions.iter().map(|p| p.bytes).sum();
        let records: u64 = info.partitions.iter().map(span).sum();
        rows.push(vec![
            name,
            info.config.partitions.to_string(),
            count(records, info.config.compact),
            human_bytes(bytes),
            columns(&info.config),
        ]);
    }
    out!(
        "{}",
        table(
            &["TOPIC", "PARTITIONS", "RECORDS", "SIZE", "COLUMNS"],
            &rows
        )
    )?;
    Ok(())
}

pub fn describe(log: &Log, topic: &str) -> anyhow::Result<()> {
    let info = log
        .topic(topic)
        .with_context(|| format!("cannot describe topic '{topic}'"))?;
    out!("{}", config_block(&info))?;
    outln!()?;
    out!("{}", partitions_table(&info))?;
    outln!("(LATEST is the next offset to be written)")?;
    outln!()?;
    if info.groups.is_empty() {
        outln!("no consumer groups")?;
    } else {
        out!("{}", groups_table(&info))?;
    }
    Ok(())
}

fn config_block(info: &TopicInfo) -> String {
    let c = &info.config;
    let opt = |v: Option<String>| v.unwrap_or_else(|| "none".to_string());
    let lines = [
        ("topic", info.name.clone()),
        ("partitions", c.partitions.to_string()),
        ("retention-ms", opt(c.retention_ms.map(|v| v.to_string()))),
        (
            "retention-bytes",
            opt(c.retention_bytes.map(|v| v.to_string())),
        ),
        ("compact", if c.compact { "yes" } else { "no" }.to_string()),
        ("delete-retention-ms", c.delete_retention_ms.to_string()),
        ("segment-bytes", c.segment_bytes.to_string()),
        ("columns", columns(c)),
        ("row format", opt(c.row_format.map(|f| f.to_string()))),
        (
            "key",
            match &c.key {
                Some(KeyColumn::Column(col)) => format!("column {col}"),
                Some(KeyColumn::Unkeyed) => "none".to_string(),
                None => "not recorded".to_string(),
            },
        ),
    ];
    lines
        .iter()
        .map(|(k, v)| format!("{k:<20} {v}\n"))
        .collect()
}

fn partitions_table(info: &TopicInfo) -> String {
    let rows: Vec<Vec<String>> = info
        .partitions
        .iter()
        .map(|p| {
            vec![
                p.partition.to_string(),
                p.earliest.to_string(),
                p.latest.to_string(),
                count(span(p), info.config.compact),
                human_bytes(p.bytes),
                p.segments.to_string(),
            ]
        })
        .collect();
    let head = [
        "PARTITION",
        "EARLIEST",
        "LATEST",
        "RECORDS",
        "SIZE",
        "SEGMENTS",
    ];
    table(&head, &rows)
}

fn groups_table(info: &TopicInfo) -> String {
    let mut rows = Vec::new();
    for g in &info.groups {
        for (gp, p) in g.partitions.iter().zip(&info.partitions) {
            let dash = || "-".to_string();
            rows.push(vec![
                g.group.clone(),
                gp.partition.to_string(),
                gp.committed.map_or_else(dash, |c| c.to_string()),
                p.latest.to_string(),
                gp.lag.to_string(),
            ]);
        }
    }
    table(&["GROUP", "PARTITION", "COMMITTED", "LATEST", "LAG"], &rows)
}

fn span(p: &PartitionInfo) -> u64 {
    p.latest - p.earliest
}

fn count(n: u64, compacted: bool) -> String {
    if compacted && n > 0 {
        format!("<={n}")
    } else {
        n.to_string()
    }
}

fn columns(c: &TopicConfig) -> String {
    if c.columns.is_empty() {
        "(not set yet)".to_string()
    } else {
        c.columns.join(",")
    }
}

pub use crate::english::bytes as human_bytes;

/// Left-aligned columns separated by two spaces.
pub(super) fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(head.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_and_bytes_read_well() {
        let t = table(
            &["A", "LONGER"],
            &[vec!["xyz".into(), "1".into()], vec!["q".into(), "".into()]],
        );
        assert_eq!(t, "A    LONGER\nxyz  1\nq\n");
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
        assert_eq!(count(5, true), "<=5");
        assert_eq!(count(0, true), "0");
    }
}
