//! The librdkafka side of Kafka inputs: one consumer per partition reader,
//! assigned its partition explicitly at the offset to read (offsets are the
//! table store's, never committed to Kafka), and a metadata consumer per
//! topic for its partitions and watermarks.
//!
//! Errors: a broker that cannot be reached at start, a missing topic and an
//! offset the broker no longer holds are errors; a broker that goes away
//! while reading is reported on stderr (at most every [`REPORT_EVERY`]) and
//! retried by the client, with backoff, until it returns: nothing is read
//! meanwhile, so nothing is lost or read twice.

use std::fmt;
use std::ops::ControlFlow;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::{ClientSettings, KafkaFormat, KafkaUrl};
use crate::log::{Lent, Record, RecordRef};
use crate::source::SourceError;
use crate::source::records::{Bounds, RecordLog, RecordReader};

/// Longest wait for the brokers: metadata at start, and watermarks a
/// decision rests on ([`RecordLog::bounds`]).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest wait for a partition's watermarks for the lag metric: short, so
/// that an outage does not hold the committer up for long.
const WATERMARK_TIMEOUT: Duration = Duration::from_secs(2);

/// Longest wait for records a replay knows are there (see
/// [`RecordReader::visit`]) before the reader lends none.
const REPLAY_WAIT: Duration = Duration::from_secs(30);

/// How often the same client reports that the brokers are unreachable.
const REPORT_EVERY: Duration = Duration::from_secs(5);

/// A Kafka topic, connected.
pub struct KafkaTopic {
    url: KafkaUrl,
    settings: ClientSettings,
    partitions: u32,
    meta: BaseConsumer<Reporter>,
}

impl fmt::Debug for KafkaTopic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} partitions)", self.url, self.partitions)
    }
}

impl KafkaTopic {
    /// Reads the topic's metadata: an error if the brokers cannot be reached
    /// within [`CONNECT_TIMEOUT`] or the topic does not exist.
    pub fn connect(url: &KafkaUrl, settings: &ClientSettings) -> Result<KafkaTopic, SourceError> {
        let meta = consumer(url, settings, "metadata")?;
        let error = |message: String| SourceError::Kafka {
            topic: url.topic.clone(),
            message,
        };
        let metadata = meta
            .fetch_metadata(Some(&url.topic), CONNECT_TIMEOUT)
            .map_err(|e| {
                error(format!(
                    "cannot read its metadata from {} within {} s: {e}",
                    url.brokers,
                    CONNECT_TIMEOUT.as_secs()
                ))
            })?;
        let topic = metadata
            .topics()
            .iter()
            .find(|t| t.name() == url.topic)
            .ok_or_else(|| error(format!("no such topic at {}", url.brokers)))?;
        if let Some(code) = topic.error() {
            let code: rdkafka::types::RDKafkaErrorCode = code.into();
            return Err(error(format!("at {}: {code}", url.brokers)));
        }
        let partitions = topic.partitions().len() as u32;
        if partitions == 0 {
            return Err(error(format!("no such topic at {}", url.brokers)));
        }
        Ok(KafkaTopic {
            url: url.clone(),
            settings: settings.clone(),
            partitions,
            meta,
        })
    }

    fn error(&self, message: String) -> SourceError {
        SourceError::Kafka {
            topic: self.url.topic.clone(),
            message,
        }
    }

    fn watermarks(&self, partition: u32, timeout: Duration) -> Result<Bounds, SourceError> {
        let (low, high) = self
            .meta
            .fetch_watermarks(&self.url.topic, partition as i32, timeout)
            .map_err(|e| self.error(format!("partition {partition}: watermarks: {e}")))?;
        Ok(Bounds {
            earliest: low.max(0) as u64,
            end: high.max(0) as u64,
        })
    }
}

impl RecordLog for KafkaTopic {
    fn name(&self) -> &str {
        &self.url.topic
    }

    fn whereabouts(&self) -> String {
        format!("broker {} (topic {})", self.url.brokers, self.url.topic)
    }

    fn partitions(&self) -> u32 {
        self.partitions
    }

    fn open(&self, partition: u32) -> Result<Box<dyn RecordReader>, SourceError> {
        self.open_at(partition, 0)
    }

    fn open_at(&self, partition: u32, offset: u64) -> Result<Box<dyn RecordReader>, SourceError> {
        let bounds = self.watermarks(partition, CONNECT_TIMEOUT)?;
        let start = bounds.earliest.max(offset);
        let consumer = consumer(&self.url, &self.settings, "reader")?;
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(
                &self.url.topic,
                partition as i32,
                Offset::Offset(start as i64),
            )
            .and_then(|()| consumer.assign(&assignment))
            .map_err(|e| self.error(format!("partition {partition}: cannot assign it: {e}")))?;
        // (Resolving the input checked that the time column is a column.)
        let columns = self.url.columns.as_deref().unwrap_or_default();
        let time = self
            .url
            .time
            .as_ref()
            .and_then(|column| match self.url.format {
                KafkaFormat::Json => Some(TimeField::Json(column.clone())),
                KafkaFormat::Csv => columns.iter().position(|c| c == column).map(TimeField::Csv),
            });
        Ok(Box::new(KafkaReader {
            consumer,
            topic: self.url.topic.clone(),
            partition,
            position: start,
            end_at_open: bounds.end,
            at_end: false,
            time,
            pending: None,
            last: None,
        }))
    }

    /// With `group.id` among the client settings, the applied offsets are
    /// committed to that consumer group too (asynchronously, without joining
    /// it), for the lag dashboards Kafka users have.
    fn applied(&self, offsets: &[(u32, u64)]) {
        if !self.settings.iter().any(|(k, _)| k == "group.id") || offsets.is_empty() {
            return;
        }
        let mut list = TopicPartitionList::new();
        for &(partition, next) in offsets {
            let at = Offset::Offset(next as i64);
            if list
                .add_partition_offset(&self.url.topic, partition as i32, at)
                .is_err()
            {
                return;
            }
        }
        if let Err(e) = self
            .meta
            .commit(&list, rdkafka::consumer::CommitMode::Async)
        {
            self.meta
                .context()
                .error(e, "committing the applied offsets to the group");
        }
    }

    fn bounds(&self, partition: u32) -> Result<Bounds, SourceError> {
        // Serves the metadata client's error reports (it reads no messages).
        let _ = self.meta.poll(Duration::ZERO);
        self.watermarks(partition, CONNECT_TIMEOUT)
    }

    fn bounds_for_lag(&self, partition: u32) -> Option<Bounds> {
        let _ = self.meta.poll(Duration::ZERO);
        self.watermarks(partition, WATERMARK_TIMEOUT).ok()
    }
}

/// A consumer that never joins a group (partitions are assigned to it) and
/// never commits offsets, with the user's settings on top.
fn consumer(
    url: &KafkaUrl,
    settings: &ClientSettings,
    role: &str,
) -> Result<BaseConsumer<Reporter>, SourceError> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &url.brokers)
        .set("client.id", format!("kappa-{role}"))
        .set("group.id", "kappa")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        // An offset the broker no longer holds is an error, never a silent
        // jump to the start or the end.
        .set("auto.offset.reset", "error")
        // The end of a partition is reported: what `--until-caught-up` and
        // the epoch cutting go by (a poll that returns nothing may only mean
        // that the next fetch has not come back yet).
        .set("enable.partition.eof", "true")
        .set_log_level(RDKafkaLogLevel::Error);
    for (key, value) in settings {
        config.set(key, value);
    }
    config
        .create_with_context(Reporter::new(&url.topic))
        .map_err(|e| SourceError::Kafka {
            topic: url.topic.clone(),
            message: format!("cannot create a client: {e}"),
        })
}

/// Where a record's event time is, for the event-time lag.
enum TimeField {
    /// A field of the JSON object.
    Json(String),
    /// A field of the CSV line.
    Csv(usize),
}

impl TimeField {
    fn read(&self, value: &[u8]) -> Option<i64> {
        match self {
            TimeField::Json(column) => {
                let object: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_slice(value).ok()?;
                crate::time::event_time_from_json(object.get(column)?).ok()
            }
            TimeField::Csv(i) => {
                let record = crate::source::topic::csv_line(value).ok()?;
                crate::time::parse_event_time(record.get(*i)?).ok()
            }
        }
    }
}

/// Reads one partition.
struct KafkaReader {
    consumer: BaseConsumer<Reporter>,
    topic: String,
    partition: u32,
    /// The next offset to read.
    position: u64,
    /// The partition's end when the reader opened: a replay waits for
    /// records below it only (a partition that ends before the offsets it
    /// is asked for lost them; the runner says so).
    end_at_open: u64,
    /// The client said the partition's end was reached, and no record came since.
    at_end: bool,
    time: Option<TimeField>,
    /// A record fetched at or past a read's `until`, for the next read.
    pending: Option<Record>,
    /// The last record lent, copied into the buffers of the one before.
    last: Option<Record>,
}

/// Keeps a copy of `record`, the last one lent, in `last` (in the buffers
/// of the one before: no allocation per record).
fn remember(last: &mut Option<Record>, record: RecordRef<'_>) {
    match last {
        Some(last) => record.copy_into(last),
        None => *last = Some(record.to_record()),
    }
}

impl RecordReader for KafkaReader {
    fn visit(
        &mut self,
        max: usize,
        until: Option<u64>,
        f: &mut dyn FnMut(RecordRef<'_>) -> ControlFlow<()>,
    ) -> Result<usize, SourceError> {
        let below = |offset: u64| until.is_none_or(|u| offset < u);
        let mut lent = 0;
        if let Some(r) = self.pending.take_if(|r| max > 0 && below(r.offset)) {
            lent = 1;
            remember(&mut self.last, r.view());
            if f(r.view()).is_break() {
                return Ok(lent);
            }
        }
        if self.pending.is_some() {
            return Ok(0); // it lies at or past `until` (or `max` is 0)
        }
        let deadline = Instant::now() + REPLAY_WAIT;
        while lent < max {
            // Fetching runs in the background: records a replay knows are
            // there may not have arrived yet.
            let awaited = lent == 0
                && until.is_some_and(|u| self.position < u.min(self.end_at_open))
                && Instant::now() < deadline;
            let wait = if awaited {
                Duration::from_millis(100)
            } else {
                Duration::ZERO
            };
            let message = match self.consumer.poll(wait) {
                None if awaited => continue,
                None => break,
                Some(Ok(message)) => message,
                // The fetch position reached the high watermark (past any
                // transaction markers or compacted-away offsets).
                Some(Err(KafkaError::PartitionEOF(_))) => {
                    self.at_end = true;
                    break;
                }
                Some(Err(e)) if is_fatal(&e) => return Err(self.fail(e)),
                Some(Err(e)) => {
                    // Connection trouble: the client retries by itself.
                    self.consumer.context().error(e, "while reading");
                    continue;
                }
            };
            self.at_end = false;
            let offset = message.offset().max(0) as u64;
            if offset < self.position {
                continue;
            }
            self.position = offset + 1;
            let value = message.payload().unwrap_or_default();
            let record = RecordRef {
                offset,
                key: message.key(),
                value,
                event_ts: self.time.as_ref().and_then(|t| t.read(value)),
                append_ts: message.timestamp().to_millis().unwrap_or(0),
            };
            if !below(offset) {
                self.pending = Some(record.to_record());
                break;
            }
            lent += 1;
            remember(&mut self.last, record);
            if f(record).is_break() {
                break;
            }
        }
        if lent > 0 {
            self.consumer.context().recovered();
        }
        Ok(lent)
    }

    fn position(&self) -> u64 {
        self.pending.as_ref().map_or(self.position, |r| r.offset)
    }

    fn last_lent(&self) -> Option<Lent> {
        self.last.as_ref().map(|r| Lent {
            offset: r.offset,
            fingerprint: r.fingerprint(),
            append_ts: r.append_ts,
            event_ts: r.event_ts,
        })
    }

    fn at_end(&self) -> bool {
        self.at_end && self.pending.is_none()
    }
}

/// Whether a consumption error ends the read: the data is gone (an offset
/// out of range, the topic or partition deleted), access is denied, or the
/// client says it is fatal. Anything else (a broker down, a timeout) the
/// client retries, and reading resumes where it stopped.
fn is_fatal(e: &KafkaError) -> bool {
    use rdkafka::types::RDKafkaErrorCode as Code;
    match e {
        KafkaError::MessageConsumptionFatal(_) => true,
        KafkaError::MessageConsumption(code) => matches!(
            code,
            Code::OffsetOutOfRange
                | Code::AutoOffsetReset
                | Code::UnknownTopicOrPartition
                | Code::UnknownTopic
                | Code::UnknownPartition
                | Code::TopicAuthorizationFailed
                | Code::GroupAuthorizationFailed
                | Code::ClusterAuthorizationFailed
                | Code::SaslAuthenticationFailed
                | Code::Authentication
        ),
        _ => false,
    }
}

impl KafkaReader {
    /// A consumption error the client cannot retry.
    fn fail(&self, e: KafkaError) -> SourceError {
        SourceError::Kafka {
            topic: self.topic.clone(),
            message: format!(
                "partition {} at offset {}: {e}",
                self.partition, self.position
            ),
        }
    }
}

/// Reports the client's connection errors on stderr, at most every
/// [`REPORT_EVERY`], and when reading works again.
struct Reporter {
    topic: String,
    last: Mutex<Option<Instant>>,
}

impl Reporter {
    fn new(topic: &str) -> Reporter {
        Reporter {
            topic: topic.to_string(),
            last: Mutex::new(None),
        }
    }

    fn recovered(&self) {
        if self
            .last
            .lock()
            .expect("reporter poisoned")
            .take()
            .is_some()
        {
            say!("kappa: kafka topic {}: reading again", self.topic);
        }
    }
}

impl ClientContext for Reporter {
    fn log(&self, _: RDKafkaLogLevel, _: &str, _: &str) {}

    fn error(&self, error: KafkaError, reason: &str) {
        use rdkafka::types::RDKafkaErrorCode;
        if matches!(
            error,
            KafkaError::PartitionEOF(_) | KafkaError::Global(RDKafkaErrorCode::PartitionEOF)
        ) {
            return; // the end of a partition, not trouble
        }
        let mut last = self.last.lock().expect("reporter poisoned");
        if last.is_some_and(|t| t.elapsed() < REPORT_EVERY) {
            return;
        }
        *last = Some(Instant::now());
        say!(
            "kappa: kafka topic {}: {error} ({reason}); the client retries",
            self.topic
        );
    }
}

impl ConsumerContext for Reporter {}
