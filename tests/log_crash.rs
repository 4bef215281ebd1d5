//! Crash tests: the real `kappa log produce` and `kappa log compact`
//! killed with SIGKILL at random points (seeded xorshift), then the log is
//! reopened and checked.
//!
//! Produce (fsync per batch, `--ack`): the test reads the child's
//! acknowledgements, kills it after a random number of them plus a random
//! delay (or at a random moment, possibly before the first batch or inside
//! open-time recovery), then checks with the library that every partition
//! holds exactly what it held before plus a prefix of this run's records
//! routed to it (so nothing acknowledged is lost, nothing is duplicated or
//! reordered, and no torn record is served), and that the next produce
//! continues at the right offsets.
//!
//! Compaction (`--step-pause-ms` widens the swap window): the kill lands at
//! a random delay after the first compaction output appears. A plain reader
//! (no recovery) must serve only records that existed before, in order;
//! after a writer reopens the topic, each partition holds exactly the old
//! records or exactly the compacted ones, and the latest value of every key
//! is unchanged. In total the four tests below kill at 60 random points.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kappa::log::rows::{RowFormat, decode_fields};
use kappa::log::{Log, Record, partition_for_key};

use crate::log_cli::{KAPPA, LogDir, read_partition};

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

const PARTITIONS: u32 = 3;
const ROWS: u64 = 400;

/// Rows `id,k,payload` from `first`; returns the CSV text and the rows.
fn rows(rng: &mut Rng, first: u64, n: u64) -> (String, Vec<[String; 3]>) {
    let mut csv = String::from("id,k,payload\n");
    let mut out = Vec::new();
    for id in first..first + n {
        let len = 5 + rng.below(60);
        let payload: String = (0..len)
            .map(|_| char::from(b'a' + rng.below(26) as u8))
            .collect();
        let row = [id.to_string(), format!("k{}", rng.below(13)), payload];
        csv.push_str(&row.join(","));
        csv.push('\n');
        out.push(row);
    }
    (csv, out)
}

fn spawn(d: &LogDir, args: &[&str]) -> Child {
    Command::new(KAPPA)
        .arg("log")
        .args(args)
        .arg("--log-dir")
        .arg(d.log())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kappa")
}

/// Parses `ack P:OFFSET ...` into the highest acknowledged offset per partition.
fn note_ack(line: &str, acked: &mut [Option<u64>]) {
    let Some(rest) = line.strip_suffix('\n').and_then(|l| l.strip_prefix("ack ")) else {
        return; // a line cut by the kill is not an acknowledgement
    };
    for pair in rest.split_whitespace() {
        let (p, o) = pair.split_once(':').unwrap();
        let (p, o): (usize, u64) = (p.parse().unwrap(), o.parse().unwrap());
        acked[p] = acked[p].max(Some(o));
    }
}

/// Runs one produce child and kills it at a random point; returns the acks.
fn produce_and_kill(d: &LogDir, rng: &mut Rng, file: &str) -> Vec<Option<u64>> {
    let batch = (1 + rng.below(25)).to_string();
    let args = [
        "produce", "t", "--key", "k", "--batch", &batch, "--ack", "--file", file,
    ];
    let mut child = spawn(d, &args);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut acked = vec![None; PARTITIONS as usize];
    let mut line = String::new();
    if rng.below(5) == 0 {
        std::thread::sleep(Duration::from_micros(rng.below(20_000)));
    } else {
        for _ in 0..1 + rng.below(ROWS / batch.parse::<u64>().unwrap()) {
            line.clear();
            if out.read_line(&mut line).unwrap() == 0 {
                break;
            }
            note_ack(&line, &mut acked);
        }
        std::thread::sleep(Duration::from_micros(rng.below(1500)));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    loop {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        note_ack(&line, &mut acked);
    }
    acked
}

/// Checks every partition against the model and extends the model.
fn check_produced(
    log: &Path,
    all: &[[String; 3]],
    routed: &[Vec<u64>],
    stored: &mut [Vec<u64>],
    acked: &[Option<u64>],
) {
    for p in 0..PARTITIONS {
        let (pi, recs) = (p as usize, read_partition(log, "t", p));
        let mut ids = Vec::new();
        for (i, r) in recs.iter().enumerate() {
            assert_eq!(r.offset, i as u64, "partition {p}: offsets must be dense");
            let fields = decode_fields(&r.value, RowFormat::Csv, 3).unwrap();
            let got: Vec<&str> = fields.iter().map(|f| f.as_str().unwrap()).collect();
            let id: u64 = got[0].parse().unwrap();
            assert_eq!(
                got,
                all[id as usize]
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
            );
            assert_eq!(r.key.as_deref(), Some(got[1].as_bytes()));
            ids.push(id);
        }
        let before = stored[pi].len();
        assert!(ids.len() >= before, "partition {p} lost records");
        assert_eq!(
            ids[..before],
            stored[pi][..],
            "partition {p}: old records changed"
        );
        let new = &ids[before..];
        assert!(new.len() <= routed[pi].len(), "partition {p}: duplicates");
        assert_eq!(new, &routed[pi][..new.len()], "partition {p}: not a prefix");
        if let Some(a) = acked[pi] {
            assert!(
                a < ids.len() as u64,
                "partition {p}: acknowledged offset {a} lost"
            );
        }
        stored[pi] = ids;
    }
}

fn produce_kills(seed: u64, kills: usize) {
    let mut rng = Rng(seed);
    let d = LogDir::new();
    d.ok(
        &[
            "create",
            "t",
            "--partitions",
            "3",
            "--segment-bytes",
            "1024",
        ],
        "",
    );
    let (csv, mut all) = rows(&mut rng, 0, ROWS);
    let file = d.file("in.csv", &csv);
    let route = |rows: &[[String; 3]], p: u32| -> Vec<u64> {
        let mine = |r: &&[String; 3]| partition_for_key(r[1].as_bytes(), PARTITIONS) == p;
        rows.iter()
            .filter(mine)
            .map(|r| r[0].parse().unwrap())
            .collect()
    };
    let routed: Vec<Vec<u64>> = (0..PARTITIONS).map(|p| route(&all, p)).collect();
    let mut stored = vec![Vec::new(); PARTITIONS as usize];
    for _ in 0..kills {
        let acked = produce_and_kill(&d, &mut rng, &file);
        check_produced(&d.log(), &all, &routed, &mut stored, &acked);
    }
    // A normal produce afterwards recovers and continues the offsets.
    let (more_csv, more) = rows(&mut rng, ROWS, 30);
    all.extend(more.iter().cloned());
    let more_routed: Vec<Vec<u64>> = (0..PARTITIONS).map(|p| route(&more, p)).collect();
    let before: Vec<usize> = stored.iter().map(Vec::len).collect();
    d.ok(&["produce", "t", "--key", "k"], &more_csv);
    check_produced(&d.log(), &all, &more_routed, &mut stored, &[None; 3]);
    for p in 0..PARTITIONS as usize {
        assert_eq!(
            stored[p].len(),
            before[p] + more_routed[p].len(),
            "partition {p}"
        );
    }
}

#[test]
fn produce_killed_at_random_points_a() {
    produce_kills(0x5EED_0001, 20);
}

#[test]
fn produce_killed_at_random_points_b() {
    produce_kills(0x5EED_0002, 20);
}

/// Whether any partition of topic `c` holds a file ending in `suffix`.
fn has_file(log: &Path, suffix: &str) -> bool {
    (0..2).any(|p| {
        let dir = log.join("c").join(format!("partition-{p}"));
        std::fs::read_dir(dir)
            .unwrap()
            .any(|e| e.unwrap().file_name().to_string_lossy().ends_with(suffix))
    })
}

/// What compaction must leave: the latest record per key in sealed
/// segments, everything in the active segment.
fn compacted(old: &[Record], active: u64) -> Vec<Record> {
    let latest: BTreeMap<&[u8], u64> = old
        .iter()
        .map(|r| (r.key.as_deref().unwrap(), r.offset))
        .collect();
    let keep = |r: &&Record| r.offset >= active || latest[r.key.as_deref().unwrap()] == r.offset;
    old.iter().filter(keep).cloned().collect()
}

fn latest_values(recs: &[Record]) -> BTreeMap<Vec<u8>, Vec<u8>> {
    recs.iter()
        .map(|r| (r.key.clone().unwrap(), r.value.clone()))
        .collect()
}

/// Kills `kappa log compact` at a random point: a random delay after it
/// started, after its first output file appeared, or after it committed
/// (the first `.swap`), so that every phase of the protocol gets hit.
/// Returns whether the kill left the swap protocol unfinished.
fn compact_and_kill(d: &LogDir, rng: &mut Rng) -> bool {
    let mut child = spawn(d, &["compact", "c", "--step-pause-ms", "1"]);
    let (phase, started) = (rng.below(3), Instant::now());
    let suffix = [None, Some(".cleaned"), Some(".swap")][phase as usize];
    while let Some(suffix) = suffix {
        let exited = child.try_wait().unwrap().is_some();
        if exited || started.elapsed() > Duration::from_secs(5) || has_file(&d.log(), suffix) {
            break;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let delay = if phase == 0 { 40_000 } else { 4_000 };
    std::thread::sleep(Duration::from_micros(rng.below(delay)));
    child.kill().unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        !err.contains("panicked") && !err.contains("error"),
        "{status}: {err}"
    );
    has_file(&d.log(), ".cleaned") || has_file(&d.log(), ".swap")
}

fn compaction_kills(seed: u64, kills: usize) {
    let mut rng = Rng(seed);
    let d = LogDir::new();
    d.ok(
        &[
            "create",
            "c",
            "--partitions",
            "2",
            "--compact",
            "--segment-bytes",
            "400",
        ],
        "",
    );
    let produce = [
        "produce", "c", "--key", "k", "--batch", "7", "--fsync", "never",
    ];
    let (mut leftovers, mut outcomes) = (0, [0; 2]);
    for round in 0..kills {
        let (csv, _) = rows(&mut rng, round as u64 * 1000, 150);
        d.ok(&produce, &csv);
        let old: Vec<Vec<Record>> = (0..2).map(|p| read_partition(&d.log(), "c", p)).collect();
        let new: Vec<Vec<Record>> = (0..2)
            // An explicit compaction first seals the segment being written,
            // so it reaches every record.
            .map(|p| compacted(&old[p as usize], u64::MAX))
            .collect();
        leftovers += usize::from(compact_and_kill(&d, &mut rng));
        for (p, old_p) in (0..).zip(&old) {
            // Before recovery, a reader sees a mix of old and new segments:
            // only records that existed, each once, in order.
            let by_offset: BTreeMap<u64, &Record> = old_p.iter().map(|r| (r.offset, r)).collect();
            let seen = read_partition(&d.log(), "c", p);
            assert!(seen.windows(2).all(|w| w[0].offset < w[1].offset));
            assert!(seen.iter().all(|r| by_offset.get(&r.offset) == Some(&r)));
        }
        drop(Log::open(d.log()).unwrap().writer("c").unwrap()); // recovery
        for p in 0..2 {
            let now = read_partition(&d.log(), "c", p as u32);
            let outcome = if now == old[p] { 0 } else { 1 };
            assert!(
                outcome == 0 || now == new[p],
                "round {round} p{p}: neither old nor new"
            );
            outcomes[outcome] += 1;
            assert_eq!(latest_values(&now), latest_values(&old[p]));
        }
    }
    assert!(leftovers > 0, "no kill landed inside the swap window");
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "outcomes {outcomes:?}");
}

#[test]
fn compaction_killed_at_random_points_a() {
    compaction_kills(0xC0FF_EE01, 10);
}

#[test]
fn compaction_killed_at_random_points_b() {
    compaction_kills(0xC0FF_EE02, 10);
}
