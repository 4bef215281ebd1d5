//! Changelog sinks: each committed epoch's output changes, sent on as
//! upserts by key to an external log (a Kafka topic), from the outbox the
//! epoch's transaction filled (see [`crate::table::outbox`]). The committer
//! uses them through [`ChangelogSink`] without knowing which it has.

use crate::source::kafka::{self, ClientSettings, KafkaUrl};
use crate::table::SinkMessage;

/// A changelog sink, open.
pub trait ChangelogSink: Send {
    /// How it delivers (for the startup line): e.g. "Kafka transactions".
    fn describe(&self) -> String;
    /// Sends `messages` in order and returns once the sink holds every one
    /// (or fails, and then any of them may have to be sent again).
    fn send(&mut self, messages: &[SinkMessage]) -> Result<(), String>;
}

/// A sink asked for on the command line: `--sink OUTPUT=kafka://HOST:PORT/TOPIC`.
#[derive(Clone, Debug)]
pub struct SinkTarget {
    /// The output it carries (its name).
    pub output: String,
    /// Where to.
    pub url: KafkaUrl,
    /// Client settings (`--kafka-config`).
    pub settings: ClientSettings,
}

impl SinkTarget {
    /// Parses `OUTPUT=kafka://...`'s URL part.
    pub fn new(output: &str, url: &str, settings: ClientSettings) -> Result<SinkTarget, String> {
        if !kafka::is_kafka(url) {
            return Err(format!(
                "--sink {output}={url}: sinks are Kafka topics, kafka://HOST:PORT/TOPIC"
            ));
        }
        let url = KafkaUrl::parse(url)?;
        if url.columns.is_some() || url.time.is_some() || url.changelog {
            return Err(format!(
                "--sink {output}: the options of input URLs do not apply to a sink (its messages are \
                 JSON objects by column name, keyed by the output's key)"
            ));
        }
        Ok(SinkTarget {
            output: output.to_string(),
            url,
            settings,
        })
    }

    /// Connects the sink of `deployment` (its producer's identity).
    #[cfg(feature = "kafka")]
    pub fn open(&self, deployment: i64) -> Result<Box<dyn ChangelogSink>, String> {
        let sink = super::kafka::KafkaSink::connect(self, deployment)?;
        Ok(Box::new(sink))
    }

    /// Without the `kafka` feature, a clear refusal.
    #[cfg(not(feature = "kafka"))]
    pub fn open(&self, _: i64) -> Result<Box<dyn ChangelogSink>, String> {
        Err("this kappa was built without Kafka support (build it with --features kafka)".into())
    }
}
