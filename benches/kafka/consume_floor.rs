//! The floor of `benches/kafka/run.sh`: the librdkafka client alone reading
//! every message of a topic's partitions once (explicit assignment from the
//! beginning to the end, as kappa reads them), counting them and their bytes.
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
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "kappa-floor")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .expect("a consumer");
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .expect("a partition");
    }
    consumer.assign(&assignment).expect("assigned");
    let start = Instant::now();
    let (mut messages, mut bytes, mut ended) = (0u64, 0u64, 0);
    while ended < partitions {
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Ok(m)) => {
                messages += 1;
                bytes += m.payload().map_or(0, <[u8]>::len) as u64;
            }
            Some(Err(KafkaError::PartitionEOF(_))) => ended += 1,
            Some(Err(e)) => panic!("{e}"),
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{messages} messages, {bytes} bytes in {secs:.2} s: {:.0} messages/s",
        messages as f64 / secs
    );
}
