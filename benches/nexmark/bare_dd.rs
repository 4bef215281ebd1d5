//! Nexmark q0, q1 and q4 in bare differential dataflow: the same CSV files
//! as `kappa run nexmark-qN`, parsed by hand into tuples of integers, fed
//! to the same differential operators, with no engine layer (no `Row` of
//! `Value`s, no projection, no typed sources, no output files). The ratio of
//! its time to kappa's is the engine's own overhead (benches/nexmark/run.sh).
//!
//! Each worker reads a byte range of each file (cut at line ends; the
//! generated fields hold no commas, quotes or newlines, which is checked),
//! inserts its rows at time 0, and collects and consolidates its share of
//! the output in memory; the process prints the output's row count.
//!
//! Run with: `cargo run --profile perf --features bench-tools --bin nexmark_dd -- q4 DIR [WORKERS]`

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use differential_dataflow::VecCollection;
use differential_dataflow::consolidation::consolidate;
use differential_dataflow::input::Input;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::operator::Operator;

/// A bid as q0 and q1 read it: auction, bidder, price, date_time, extra.
type Bid = (i64, i64, i64, i64, String);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: nexmark_dd q0|q1|q4 CSV_DIR [WORKERS]";
    let query = args.get(1).expect(usage).clone();
    let dir = PathBuf::from(args.get(2).expect(usage));
    let workers: usize = args.get(3).map_or(2, |w| w.parse().expect(usage));
    assert!(matches!(query.as_str(), "q0" | "q1" | "q4"), "{usage}");
    let started = Instant::now();
    let dir = Arc::new(dir);
    let guards = timely::execute(timely::Config::process(workers), move |worker| {
        let (index, peers) = (worker.index(), worker.peers());
        let bids_path = dir.join("bid.csv");
        let auctions_path = dir.join("auction.csv");
        let query = query.clone();
        let out = std::rc::Rc::new(std::cell::RefCell::new(0usize));
        let sink_out = out.clone();
        let (mut bids, mut auctions, probe) = worker.dataflow::<u64, _, _>(|scope| {
            let (bids_in, bids) = scope.new_collection::<Bid, isize>();
            let (auctions_in, auctions) = scope.new_collection::<(i64, i64, i64, i64), isize>();
            let probe = match query.as_str() {
                "q0" => count_into(bids, sink_out),
                "q1" => count_into(
                    bids.map(|(a, b, p, t, e)| (a, b, (0.908 * p as f64).to_bits(), t, e)),
                    sink_out,
                ),
                _ => count_into(q4(auctions, bids), sink_out),
            };
            (bids_in, auctions_in, probe)
        });
        let mut n = 0usize;
        if query == "q4" {
            for_lines(&auctions_path, index, peers, |f| {
                // id, item_name, description, initial_bid, reserve, date_time, expires, seller, category, extra
                auctions.insert((int(f[0]), int(f[5]), int(f[6]), int(f[8])));
            });
        }
        for_lines(&bids_path, index, peers, |f| {
            // auction, bidder, price, channel, url, date_time, extra
            bids.insert((int(f[0]), int(f[1]), int(f[2]), int(f[5]), f[6].to_string()));
            n += 1;
            if n.is_multiple_of(100_000) {
                bids.flush();
                worker.step();
            }
        });
        drop((bids, auctions));
        while !probe.done() {
            worker.step();
        }
        *out.borrow()
    })
    .expect("timely");
    let rows: usize = guards.join().into_iter().map(|r| r.expect("worker")).sum();
    eprintln!(
        "nexmark_dd: {rows} output rows in {:.2} s on {workers} workers",
        started.elapsed().as_secs_f64()
    );
}

/// q4 as `jobs/nexmark/q4.rs` computes it, on tuples: winning price per
/// auction within its lifetime, then the average per category (as the
/// integer sum and count; the division is left out, it is per category).
fn q4<'s>(
    auctions: VecCollection<'s, u64, (i64, i64, i64, i64)>,
    bids: VecCollection<'s, u64, Bid>,
) -> VecCollection<'s, u64, (i64, (i128, i128))> {
    let auctions = auctions
        .map(|(id, t, expires, category)| (id, (t, expires, category)))
        .arrange_by_key();
    bids.map(|(a, _, p, t, _)| (a, (t, p)))
        .arrange_by_key()
        .join_core(auctions, |id, (t, p), (start, expires, category)| {
            (start <= t && t <= expires).then_some(((*id, *category), *p))
        })
        .reduce(|_, prices, out| out.push((*prices.last().unwrap().0, 1isize)))
        .map(|((_, category), price)| (category, price))
        .reduce(|_, finals, out| {
            let (mut sum, mut n) = (0i128, 0i128);
            for (p, m) in finals {
                sum += **p as i128 * *m as i128;
                n += *m as i128;
            }
            out.push(((sum, n), 1isize));
        })
}

/// Collects the worker's output updates, consolidates them at the end and
/// stores the number of distinct rows in `out`.
fn count_into<'s, D: differential_dataflow::Data>(
    c: VecCollection<'s, u64, D>,
    out: std::rc::Rc<std::cell::RefCell<usize>>,
) -> timely::dataflow::ProbeHandle<u64> {
    let (probe, c) = c.probe();
    let mut all: Vec<(D, isize)> = Vec::new();
    c.inner.sink(Pipeline, "Collect", move |(input, frontier)| {
        input.for_each(|_cap, data| all.extend(data.drain(..).map(|(d, _t, r)| (d, r))));
        if frontier.is_empty() {
            consolidate(&mut all);
            *out.borrow_mut() = all.len();
        }
    });
    probe
}

fn int(field: &str) -> i64 {
    field
        .parse()
        .unwrap_or_else(|_| panic!("not an integer: {field:?}"))
}

/// Calls `f` with the fields of every line of `path` in this worker's byte
/// range (the header skipped).
fn for_lines(path: &Path, index: usize, peers: usize, mut f: impl FnMut(&[&str])) {
    let len = std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .len();
    let (lo, hi) = (
        len * index as u64 / peers as u64,
        len * (index as u64 + 1) / peers as u64,
    );
    let mut file = BufReader::with_capacity(1 << 20, File::open(path).expect("open"));
    // A range starts after the first line end at or after lo - 1, so every
    // line belongs to the range holding its first byte; range 0 skips the header.
    let mut pos = lo.saturating_sub(1);
    file.seek(SeekFrom::Start(pos)).expect("seek");
    let mut line = String::new();
    pos += file.read_line(&mut line).expect("read") as u64;
    loop {
        if pos >= hi {
            break;
        }
        line.clear();
        let n = file.read_line(&mut line).expect("read");
        if n == 0 {
            break;
        }
        pos += n as u64;
        assert!(
            !line.contains('"'),
            "quoted CSV field in {}",
            path.display()
        );
        let fields: Vec<&str> = line.trim_end_matches('\n').split(',').collect();
        f(&fields);
    }
}
