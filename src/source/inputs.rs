//! Input topics, resolved: `--input NAME=TOPIC` names a topic of the
//! embedded log, or a Kafka topic by its `kafka://` URL. This is the one
//! place that knows which inputs exist; the runners see only
//! [`TopicInput`]s and their [`RecordLog`](super::records::RecordLog)s.

use super::SourceError;
use super::kafka::{self, ClientSettings, KafkaFormat, KafkaUrl};
use super::topic::{TopicInput, ValueFormat};
use crate::log::Log;
use crate::schema::InputSchema;

/// What input topics are resolved against.
#[derive(Clone, Debug)]
pub struct Sources {
    /// The embedded log.
    pub log: Log,
    /// Settings for every Kafka client (`--kafka-config`).
    pub kafka: ClientSettings,
}

impl Sources {
    /// The embedded log only, default Kafka settings.
    pub fn new(log: Log) -> Sources {
        Sources {
            log,
            kafka: Vec::new(),
        }
    }

    /// Binds input `name` to `topic`; `declared` are the columns the job
    /// declares for it (the default columns of a JSON Kafka topic).
    pub fn resolve(
        &self,
        name: &str,
        topic: &str,
        declared: &[&str],
    ) -> Result<TopicInput, SourceError> {
        if !kafka::is_kafka(topic) {
            return TopicInput::resolve(&self.log, name, topic);
        }
        let bad = |message: String| SourceError::BadUrl {
            input: name.to_string(),
            message,
        };
        let url = KafkaUrl::parse(topic).map_err(bad)?;
        let columns = match (&url.columns, declared) {
            (Some(columns), _) => columns.clone(),
            (None, []) => {
                return Err(bad(format!(
                    "{topic}: the job declares no columns for it; name the message's fields in the \
                     URL (?columns=a,b,c)"
                )));
            }
            (None, declared) => declared.iter().map(|c| c.to_string()).collect(),
        };
        if let Some(time) = url.time.as_ref().filter(|t| !columns.contains(t)) {
            return Err(bad(format!(
                "{topic}: time={time} is not one of its columns ({})",
                columns.join(",")
            )));
        }
        let log = kafka::open(&url, &self.kafka)?;
        Ok(TopicInput {
            topic: topic.to_string(),
            partitions: log.partitions(),
            log,
            schema: InputSchema {
                name: name.to_string(),
                columns,
            },
            format: match url.format {
                KafkaFormat::Json => ValueFormat::Object,
                KafkaFormat::Csv => ValueFormat::CsvLine,
            },
            compacted: url.changelog,
        })
    }
}
