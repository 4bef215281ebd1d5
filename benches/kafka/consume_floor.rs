//! The floor of `benches/kafka/run.sh`: the librdkafka client alone reading
//! every message of a topic's partitions once (a consumer per partition on its
//! own thread, assigned from the beginning to the end, as kappa reads them),
//! counting them and their bytes.
//!
//!   consume_floor BROKERS TOPIC PARTITIONS

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, brokers, topic, partitions] = &args[..] else {
        eprintln!("usage: consume_floor BROKERS TOPIC PARTITIONS");
        std::process::exit(2);
    };
    let partitions: i32 = partitions.parse().expect("a partition count");
    let start = Instant::now();
    // One consumer per partition, each on its own thread, as kappa's workers read.
    let readers: Vec<_> = (0..partitions)
        .map(|p| {
            let (brokers, topic) = (brokers.clone(), topic.clone());
            std::thread::spawn(move || read_partition(&brokers, &topic, p))
        })
        .collect();
    let (mut messages, mut bytes) = (0u64, 0u64);
    for reader in readers {
        let (m, b) = reader.join().expect("a reader");
        messages += m;
        bytes += b;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{messages} messages, {bytes} bytes in {secs:.2} s: {:.0} messages/s",
        messages as f64 / secs
    );
}

/// Reads partition `p` from its beginning to its end: (messages, bytes).
fn read_partition(brokers: &str, topic: &str, p: i32) -> (u64, u64) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "kappa-floor")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .expect("a consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, p, Offset::Beginning)
        .expect("a partition");
    consumer.assign(&assignment).expect("assigned");
    let (mut messages, mut bytes) = (0u64, 0u64);
    loop {
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Ok(m)) => {
                messages += 1;
                bytes += m.payload().map_or(0, <[u8]>::len) as u64;
            }
            Some(Err(KafkaError::PartitionEOF(_))) => return (messages, bytes),
            Some(Err(e)) => panic!("{e}"),
        }
    }
}
