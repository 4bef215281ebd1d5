//! Every number a user gives kappa, at its extremes: job parameters (`k`,
//! `salts`, sample rates, sizes, durations, window sizes and hops), runner
//! flags (`--workers`, `--max-batch`, `--max-latency-ms`, `--keep`,
//! `--max-lag`), log flags (`--partitions`, `--segment-bytes`, retention,
//! `--offset`, `--max`), `table show --limit` and `nexmark gen
//! --events/--rate`. Each must end in a clean error (exit 1 or 2, a message,
//! no panic) or a correct result (exit 0), never a panic, an abort, a
//! signal or a hang.
//!
//! Every template meets a fixed list of extremes (0, ±1, the ends of u32,
//! i64 and u64, one past them, non-numbers), and a property test adds random
//! 64-bit values.

use std::time::Duration;

use proptest::prelude::*;

use crate::common::{World, output_within};

/// Command lines with `{}` where the number goes. Inputs come from `data/`
/// and from topic `o` (orders), which `world()` produces.
const TEMPLATES: &[&str] = &[
    "run top-k -i input=DATA/orders.csv -p by=amount -p k={} -o OUT",
    "run group-by -i input=DATA/orders.csv -p key=status -p strategy=skew -p salts={} -o OUT",
    "run group-by -i input=DATA/orders.csv -p key=status -p sample_rate={} -o OUT",
    "run group-by -i input=DATA/orders.csv -p key=status -p hot_threshold={} -o OUT",
    "run join -i left=DATA/orders.csv -i right=DATA/customers.csv -p on=customer -p broadcast_limit={} -o OUT",
    "run join -i left=DATA/orders.csv -i right=DATA/customers.csv -p on=customer -p strategy=skew -p hot=c01 -p salts={} -o OUT",
    "run window-agg -i input=DATA/events.csv -p time=ts -p unit=s -p key=user -p window=tumbling:{}s -o OUT",
    "run window-agg -i input=DATA/events.csv -p time=ts -p unit=s -p key=user -p window=hopping:{}ms/1s -o OUT",
    "run window-agg -i input=DATA/events.csv -p time=ts -p unit=s -p key=user -p window=hopping:1h/{}s -o OUT",
    "run window-agg -i input=DATA/events.csv -p time=ts -p unit=s -p key=user -p window=session:{}m -o OUT",
    "run window-agg -i input=DATA/events.csv -p time=ts -p unit=s -p key=user -p window=hopping:1h/1s -p max_windows={} -o OUT",
    "run sessionize -i events=DATA/events.csv -p gap={} -o OUT",
    "run ad-clicks -i impressions=DATA/impressions.csv -i clicks=DATA/clicks.csv -p within={}d -o OUT",
    "run count-by -i input=DATA/orders.csv -p key=status --workers {} -o OUT",
    "stream count-by -i input=o -p key=status --until-caught-up --quiet --max-batch {} --table OUTNAME",
    "stream count-by -i input=o -p key=status --until-caught-up --quiet --max-latency-ms {} --table OUTNAME",
    "reprocess count-by -i input=o -p key=customer --until-caught-up --quiet --keep {} --table live",
    "reprocess count-by -i input=o -p key=customer --until-caught-up --quiet --max-lag {} --table live",
    "log create OUTNAME --partitions {}",
    "log create OUTNAME --segment-bytes {}",
    "log create OUTNAME --retention-ms {} --retention-bytes 1000",
    "log create OUTNAME --retention-bytes {}",
    "log consume o --offset {}",
    "log consume o --max {}",
    "table show live --limit {}",
    "nexmark gen --events 100 --rate {} --output OUT",
    "nexmark gen --events {} --output OUT",
];

const EXTREMES: &[&str] = &[
    "0",
    "1",
    "-1",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "1e400",
    "NaN",
    "abc",
    "",
];

/// A world with topic `o` holding the orders and a live deployment `live`.
fn world() -> World {
    let w = World::new();
    w.ok(&["log", "create", "o", "--partitions", "2"]);
    w.ok(&["log", "produce", "o", "--file", &data("orders.csv")]);
    w.ok(&[
        "stream",
        "count-by",
        "-i",
        "input=o",
        "-p",
        "key=status",
        "--table",
        "live",
        "--until-caught-up",
        "--quiet",
    ]);
    w
}

fn data(name: &str) -> String {
    format!("{}/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Runs `template` with `value` in `w`; panics unless it ends cleanly.
fn check(w: &World, n: usize, template: &str, value: &str) {
    let out = w.path(&format!("out{n}"));
    let line = template
        .replace("DATA/", &data(""))
        .replace("OUTNAME", &format!("x{n}"))
        .replace("OUT", out.to_str().unwrap());
    // Split before substituting, so an empty value stays one argument.
    let args: Vec<String> = line
        .split_whitespace()
        .map(|a| a.replace("{}", value))
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let what = format!("kappa {}", args.join(" "));
    // Generating an astronomical number of events is a correct, endless
    // run: it only has to start cleanly.
    let endless = template.starts_with("nexmark gen --events {}");
    let limit = Duration::from_secs(if endless { 3 } else { 60 });
    let Some(result) = output_within(&mut w.kappa(&args), limit) else {
        assert!(endless, "{what}: did not end within {limit:?}");
        return;
    };
    let stderr = String::from_utf8_lossy(&result.stderr);
    let code = result.status.code();
    assert!(
        matches!(code, Some(0..=2)),
        "{what}: ended with {:?}:\n{stderr}",
        result.status
    );
    for bad in ["panicked", "RUST_BACKTRACE", "overflow", "stack backtrace"] {
        assert!(!stderr.contains(bad), "{what}: {bad}:\n{stderr}");
    }
    if code != Some(0) {
        assert!(
            stderr.contains("error"),
            "{what}: failed without an error:\n{stderr}"
        );
    } else if args[0] == "run" {
        assert!(
            out.join("_SUCCESS").exists(),
            "{what}: exit 0 without _SUCCESS"
        );
    }
}

#[test]
fn every_user_number_at_its_extremes_ends_cleanly() {
    let w = world();
    let mut n = 0;
    for template in TEMPLATES {
        for value in EXTREMES {
            n += 1;
            check(&w, n, template, value);
        }
    }
}

proptest! {
    // No shrinking: the failure names its whole command line already, and
    // each shrink step may wait out a hang's 60 s limit again.
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        max_shrink_iters: 0,
        ..ProptestConfig::default()
    })]
    #[test]
    fn random_numbers_end_cleanly(
        template in 0..TEMPLATES.len(),
        value in prop_oneof![
            any::<u64>().prop_map(|v| v.to_string()),
            any::<i64>().prop_map(|v| v.to_string()),
            (0u32..64).prop_map(|b| (1u64 << b).to_string()),
        ],
        n in 0usize..1_000_000,
    ) {
        let w = world();
        check(&w, n, TEMPLATES[template], &value);
    }
}
