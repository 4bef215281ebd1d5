//! Kafka topics as inputs: `--input NAME=kafka://HOST:PORT[,HOST:PORT...]/TOPIC[?OPTIONS]`.
//!
//! Partitions are assigned to workers explicitly (never by consumer-group
//! rebalancing) and offsets live in the table store with each epoch, never
//! in Kafka: the broker is read like the embedded log, through
//! [`RecordLog`](super::records::RecordLog). The URL (options included) is
//! the input's identity in a deployment; client settings (`--kafka-config`,
//! security) are not, so credentials never reach the catalog.
//!
//! Options (URL query parameters):
//! - `format=json` (the default: one JSON object per message, columns by
//!   name) or `format=csv` (one CSV line per message, no header);
//! - `columns=a,b,c`: the message's columns (needed for CSV; for JSON the
//!   job's declared input columns are the default);
//! - `changelog=true`: a compacted topic read as a table (the message key is
//!   the row key, a new value replaces the old row, a null value deletes it);
//! - `time=COL`: the column holding each message's event time (epoch ms or
//!   RFC 3339), for the event-time lag metric.

#[cfg(feature = "kafka")]
mod client;
mod url;

pub use url::{KafkaFormat, KafkaUrl};

use std::sync::Arc;

use super::SourceError;
use super::records::RecordLog;

/// Client settings passed through to librdkafka (`--kafka-config K=V`,
/// `--kafka-config-file PATH`), e.g. `security.protocol=SASL_SSL`.
pub type ClientSettings = Vec<(String, String)>;

/// The URL scheme of Kafka inputs.
pub const SCHEME: &str = "kafka://";

/// Whether `topic` names a Kafka topic (rather than one of the embedded log).
pub fn is_kafka(topic: &str) -> bool {
    topic.starts_with(SCHEME)
}

/// Connects to the topic `url` names: its partitions, ready to read.
#[cfg(feature = "kafka")]
pub fn open(url: &KafkaUrl, settings: &ClientSettings) -> Result<Arc<dyn RecordLog>, SourceError> {
    Ok(Arc::new(client::KafkaTopic::connect(url, settings)?))
}

/// Without the `kafka` feature, a clear refusal.
#[cfg(not(feature = "kafka"))]
pub fn open(url: &KafkaUrl, _: &ClientSettings) -> Result<Arc<dyn RecordLog>, SourceError> {
    Err(SourceError::Kafka {
        topic: url.topic.clone(),
        message: "this kappa was built without Kafka support (build it with --features kafka)"
            .into(),
    })
}
