//! Where input topics are found: the embedded log's directory and the
//! settings of Kafka clients (shared by stream, reprocess, rollback, verify).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::run::name_value;
use super::stream::LogDirArg;
use crate::log::Log;
use crate::source::inputs::Sources;

/// Kafka client settings, for `kafka://` inputs.
#[derive(Debug, Args)]
pub struct KafkaArgs {
    /// A Kafka client setting (librdkafka's names), K=V, for every kafka://
    /// input: e.g. security.protocol=SASL_SSL. Repeatable; overrides the file.
    #[arg(long, value_name = "K=V", value_parser = name_value::<String>)]
    pub kafka_config: Vec<(String, String)>,
    /// A file of Kafka client settings in librdkafka's properties format
    /// (K=V per line, # comments).
    #[arg(long, value_name = "PATH")]
    pub kafka_config_file: Option<PathBuf>,
}

impl KafkaArgs {
    /// The settings: the file's first, then the flags'.
    pub fn settings(&self) -> anyhow::Result<Vec<(String, String)>> {
        let mut settings = Vec::new();
        if let Some(path) = &self.kafka_config_file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read Kafka settings {}", path.display()))?;
            settings = parse_properties(&text)
                .with_context(|| format!("bad Kafka settings in {}", path.display()))?;
        }
        settings.extend(self.kafka_config.iter().cloned());
        Ok(settings)
    }
}

/// The log directory and the Kafka settings.
#[derive(Debug, Args)]
pub struct SourceArgs {
    #[command(flatten)]
    pub log: LogDirArg,
    #[command(flatten)]
    pub kafka: KafkaArgs,
}

impl SourceArgs {
    /// Opens the log, with the Kafka settings beside it.
    pub fn open(&self) -> anyhow::Result<Sources> {
        let dir = &self.log.log_dir;
        let log = Log::open(dir)
            .with_context(|| format!("cannot open log directory {}", dir.display()))?;
        Ok(Sources {
            log,
            kafka: self.kafka.settings()?,
        })
    }
}

/// `K=V` lines, `#` comments and blank lines skipped.
fn parse_properties(text: &str) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            anyhow::bail!("line {}: expected KEY=VALUE, found {line:?}", n + 1);
        };
        out.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_files_are_read_like_librdkafka_reads_them() {
        let text = "# a cluster\nsecurity.protocol = SASL_SSL\n\nsasl.username=u\n";
        let got = parse_properties(text).unwrap();
        assert_eq!(
            got,
            vec![
                ("security.protocol".into(), "SASL_SSL".into()),
                ("sasl.username".into(), "u".into())
            ]
        );
        let err = parse_properties("a=1\noops\n").unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
    }
}
