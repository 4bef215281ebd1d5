//! The Kafka changelog sink: librdkafka's idempotent producer, inside a
//! transaction per batch of outbox messages where the broker supports
//! transactions (then readers with `isolation.level=read_committed` see an
//! epoch's messages all at once, and a newer producer of the same
//! deployment fences an older one off), else idempotent only.

use std::sync::Mutex;
use std::time::Duration;

use rdkafka::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::error::KafkaError;
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};

use super::changelog::{ChangelogSink, SinkTarget};
use crate::table::SinkMessage;

/// Longest wait for the broker to take a batch (or to set up transactions).
const TIMEOUT: Duration = Duration::from_secs(30);

/// The producer of one sink.
pub struct KafkaSink {
    producer: BaseProducer<Deliveries>,
    topic: String,
    /// Transactions are in use; else why not.
    transactions: Result<(), String>,
}

impl KafkaSink {
    /// A transactional producer (`transactional.id` = `kappa-DEPLOYMENT-OUTPUT`),
    /// or an idempotent one when the broker refuses transactions.
    pub fn connect(target: &SinkTarget, deployment: i64) -> Result<KafkaSink, String> {
        let id = format!("kappa-{deployment}-{}", target.output);
        let transactional = producer(target, Some(&id))?;
        let transactions = transactional
            .init_transactions(TIMEOUT)
            .map_err(|e| e.to_string());
        let producer = match &transactions {
            Ok(()) => transactional,
            Err(_) => producer(target, None)?,
        };
        Ok(KafkaSink {
            producer,
            topic: target.url.topic.clone(),
            transactions,
        })
    }

    fn send_all(&mut self, messages: &[SinkMessage]) -> Result<(), KafkaError> {
        for m in messages {
            let mut record: BaseRecord<'_, str, str> = BaseRecord::to(&self.topic).key(&m.key);
            if let Some(value) = &m.value {
                record = record.payload(value);
            }
            let mut record = Some(record);
            while let Some(r) = record.take() {
                match self.producer.send(r) {
                    Ok(()) => {}
                    Err((
                        KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull),
                        r,
                    )) => {
                        self.producer.poll(Duration::from_millis(10));
                        record = Some(r);
                    }
                    Err((e, _)) => return Err(e),
                }
            }
        }
        Ok(())
    }
}

impl ChangelogSink for KafkaSink {
    fn describe(&self) -> String {
        match &self.transactions {
            Ok(()) => format!(
                "kafka topic {}, idempotent producer in transactions",
                self.topic
            ),
            Err(why) => format!(
                "kafka topic {}, idempotent producer without transactions (the broker refused them: {why})",
                self.topic
            ),
        }
    }

    fn send(&mut self, messages: &[SinkMessage]) -> Result<(), String> {
        let transactional = self.transactions.is_ok();
        if transactional {
            self.producer
                .begin_transaction()
                .map_err(|e| e.to_string())?;
        }
        let sent = self.send_all(messages).and_then(|()| match transactional {
            true => self.producer.commit_transaction(TIMEOUT),
            false => self.producer.flush(TIMEOUT),
        });
        let failed = self.producer.context().take_failure();
        match (sent, failed) {
            (Ok(()), None) => Ok(()),
            (Err(e), _) | (Ok(()), Some(e)) => {
                if transactional {
                    let _ = self.producer.abort_transaction(TIMEOUT);
                }
                Err(e.to_string())
            }
        }
    }
}

fn producer(
    target: &SinkTarget,
    transactional_id: Option<&str>,
) -> Result<BaseProducer<Deliveries>, String> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &target.url.brokers)
        .set("client.id", "kappa-sink")
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .set_log_level(RDKafkaLogLevel::Error);
    if let Some(id) = transactional_id {
        config.set("transactional.id", id);
    }
    for (key, value) in &target.settings {
        config.set(key, value);
    }
    config
        .create_with_context(Deliveries::default())
        .map_err(|e| format!("cannot create a Kafka producer: {e}"))
}

/// Remembers the first failed delivery (an idempotent producer's flush does
/// not say whether every message arrived).
#[derive(Default)]
struct Deliveries {
    failure: Mutex<Option<KafkaError>>,
}

impl Deliveries {
    fn take_failure(&self) -> Option<KafkaError> {
        self.failure.lock().expect("deliveries poisoned").take()
    }
}

impl ClientContext for Deliveries {
    fn log(&self, _: RDKafkaLogLevel, _: &str, _: &str) {}
}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            self.failure
                .lock()
                .expect("deliveries poisoned")
                .get_or_insert_with(|| e.clone());
        }
    }
}
