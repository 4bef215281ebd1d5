//! Checkpoints through the real binary: a restart goes on from the state
//! stored with the commits, so the log may lose (retention) or rewrite
//! (compaction) what the deployment applied, and the table still equals
//! the batch run over all the data; a damaged or foreign checkpoint is
//! never used silently.

use std::collections::BTreeMap;

use crate::common::{Rng, World};
use crate::stream::table_csv;

/// `user,amount` rows.
fn events(rng: &mut Rng, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| format!("u{},{}", rng.below(40), rng.below(100)))
        .collect()
}

fn write_csv(w: &World, name: &str, rows: &[String]) -> String {
    w.write(name, &format!("user,amount\n{}\n", rows.join("\n")))
}

const GROUP_BY: [&str; 9] = [
    "stream",
    "group-by",
    "-i",
    "input=ev",
    "-p",
    "key=user",
    "-p",
    "agg=count,sum:amount,count_distinct:amount",
    "--until-caught-up",
];

/// The batch run of the group-by over `files`, as `table_csv` prints a table.
fn batch(w: &World, rows: &[String]) -> String {
    let file = write_csv(w, "all.csv", rows);
    let out = w.path("batch");
    w.ok(&[
        "run",
        "group-by",
        "-i",
        &format!("input={file}"),
        "-p",
        "key=user",
        "-p",
        "agg=count,sum:amount,count_distinct:amount",
        "-o",
        out.to_str().unwrap(),
        "--overwrite",
    ]);
    std::fs::read_to_string(out.join("groups.csv")).unwrap()
}

/// Streams the group-by over a topic that retention empties between runs:
/// every restart goes on from its checkpoint, with 1, 2 or 3 workers.
fn restart_after_retention(w: &World) {
    let mut rng = Rng(0x5eed_cafe);
    w.ok(&[
        "log",
        "create",
        "ev",
        "--partitions",
        "2",
        "--segment-bytes",
        "2000",
        "--retention-bytes",
        "1",
    ]);
    let mut all = Vec::new();
    for (round, workers) in ["2", "1", "3", "2"].iter().enumerate() {
        let rows = events(&mut rng, 700);
        let file = write_csv(w, &format!("ev{round}.csv"), &rows);
        w.ok(&["log", "produce", "ev", "--file", &file]);
        all.extend(rows);
        let mut args = GROUP_BY.to_vec();
        args.extend(["--workers", workers, "--max-batch", "97"]);
        let said = w.ok(&args);
        if round > 0 {
            assert!(said.contains("restoring its checkpoint"), "{said}");
        }
        // Retention deletes every sealed segment: what was applied is gone.
        let retained = w.ok(&["log", "retain", "ev"]);
        assert!(retained.contains("deleted segment"), "{retained}");
    }
    assert_eq!(table_csv(w, "groups"), batch(w, &all));
}

#[test]
fn retention_of_every_applied_segment_does_not_stop_a_restart() {
    restart_after_retention(&World::new());
}

#[test]
fn retention_of_every_applied_segment_does_not_stop_a_restart_on_postgres() {
    let Some(w) = World::on_postgres() else {
        return;
    };
    restart_after_retention(&w);
}

/// The orders of the issue: a compaction while the stream is stopped
/// removes values it applied, and the restart still counts each order once.
#[test]
fn compaction_while_stopped_gives_the_true_answer() {
    let w = World::new();
    w.ok(&["log", "create", "orders", "--compact"]);
    let produce = |name: &str, rows: &str| {
        let file = w.write(name, &format!("id,status\n{rows}"));
        w.ok(&["log", "produce", "orders", "--file", &file, "--key", "id"]);
    };
    let sql = "SELECT status, count(*) AS n FROM orders GROUP BY status";
    let stream = [
        "stream",
        "--sql-text",
        sql,
        "-i",
        "orders=orders",
        "--table",
        "by_status",
    ];
    let stream: Vec<&str> = stream.into_iter().chain(["--until-caught-up"]).collect();
    produce("o1.csv", "1,open\n2,open\n3,paid\n");
    w.ok(&stream);
    assert_eq!(table_csv(&w, "by_status"), "status,n\nopen,2\npaid,1\n");
    produce("o2.csv", "1,paid\n2,refunded\n");
    w.ok(&["log", "compact", "orders"]);
    w.ok(&stream);
    assert_eq!(table_csv(&w, "by_status"), "status,n\npaid,2\nrefunded,1\n");
}

/// Replaces the bytes of the deployment's first state piece.
fn damage_state(w: &World) {
    let conn = rusqlite::Connection::open(w.path("tables.db")).unwrap();
    let changed = conn
        .execute(
            "UPDATE kappa_state SET bytes = zeroblob(length(bytes)) \
             WHERE seq = (SELECT min(seq) FROM kappa_state)",
            [],
        )
        .unwrap();
    assert_eq!(changed, 1);
}

#[test]
fn a_damaged_checkpoint_is_replayed_around_or_refused() {
    let w = World::new();
    let mut rng = Rng(7);
    w.ok(&[
        "log",
        "create",
        "ev",
        "--segment-bytes",
        "2000",
        "--retention-bytes",
        "1",
    ]);
    let first = events(&mut rng, 300);
    w.ok(&[
        "log",
        "produce",
        "ev",
        "--file",
        &write_csv(&w, "a.csv", &first),
    ]);
    w.ok(&GROUP_BY);
    // The log still holds everything: the restart replays it, and says why.
    damage_state(&w);
    let second = events(&mut rng, 50);
    w.ok(&[
        "log",
        "produce",
        "ev",
        "--file",
        &write_csv(&w, "b.csv", &second),
    ]);
    let said = w.ok(&GROUP_BY);
    assert!(
        said.contains("its checkpoint cannot be used") && said.contains("checksum"),
        "{said}"
    );
    let mut all = first.clone();
    all.extend(second);
    assert_eq!(table_csv(&w, "groups"), batch(&w, &all));
    // That run stored a good checkpoint again: retention may go on.
    w.ok(&["log", "retain", "ev"]);
    let third = events(&mut rng, 50);
    w.ok(&[
        "log",
        "produce",
        "ev",
        "--file",
        &write_csv(&w, "c.csv", &third),
    ]);
    let said = w.ok(&GROUP_BY);
    assert!(said.contains("restoring its checkpoint"), "{said}");
    all.extend(third);
    assert_eq!(table_csv(&w, "groups"), batch(&w, &all));
    // Damaged again, with the applied records gone: a refusal that says why.
    damage_state(&w);
    w.ok(&["log", "retain", "ev"]);
    let err = w.fails(&GROUP_BY);
    assert!(
        err.contains("deleted by retention") && err.contains("cannot be rebuilt"),
        "{err}"
    );
}

#[test]
fn records_retention_deleted_before_they_were_applied_are_refused() {
    let w = World::new();
    let mut rng = Rng(11);
    w.ok(&[
        "log",
        "create",
        "ev",
        "--segment-bytes",
        "2000",
        "--retention-bytes",
        "1",
    ]);
    let first = events(&mut rng, 200);
    w.ok(&[
        "log",
        "produce",
        "ev",
        "--file",
        &write_csv(&w, "a.csv", &first),
    ]);
    w.ok(&GROUP_BY);
    let second = events(&mut rng, 400);
    w.ok(&[
        "log",
        "produce",
        "ev",
        "--file",
        &write_csv(&w, "b.csv", &second),
    ]);
    w.ok(&["log", "retain", "ev"]);
    let err = w.fails(&GROUP_BY);
    assert!(
        err.contains("were deleted by retention before this deployment applied them"),
        "{err}"
    );
}

#[test]
fn without_checkpoints_a_restart_replays_and_the_state_is_dropped() {
    let w = World::new();
    let mut rng = Rng(5);
    w.ok(&["log", "create", "ev"]);
    let mut all = events(&mut rng, 100);
    w.ok(&[
        "log",
        "produce",
        "ev",
        "--file",
        &write_csv(&w, "a.csv", &all),
    ]);
    w.ok(&GROUP_BY);
    let pieces = |w: &World| -> i64 {
        let conn = rusqlite::Connection::open(w.path("tables.db")).unwrap();
        conn.query_row("SELECT count(*) FROM kappa_state", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(pieces(&w), 1, "one merged piece for the one partition");
    let more = events(&mut rng, 100);
    w.ok(&[
        "log",
        "produce",
        "ev",
        "--file",
        &write_csv(&w, "b.csv", &more),
    ]);
    let mut off = GROUP_BY.to_vec();
    off.extend(["--checkpoint-interval", "off"]);
    let said = w.ok(&off);
    assert!(!said.contains("restoring"), "{said}");
    assert_eq!(
        pieces(&w),
        0,
        "a commit without state drops the stored state"
    );
    all.extend(more);
    assert_eq!(table_csv(&w, "groups"), batch(&w, &all));
    // The next run with checkpoints stores the state its replay rebuilt.
    let said = w.ok(&GROUP_BY);
    assert!(
        said.contains("checkpointed the state the replay rebuilt"),
        "{said}"
    );
    assert_eq!(pieces(&w), 1);
    let bad = w.fails(&[
        "stream",
        "group-by",
        "-i",
        "input=ev",
        "-p",
        "key=user",
        "--checkpoint-interval",
        "0s",
    ]);
    assert!(bad.contains("give a positive duration"), "{bad}");
}

/// Late events under `drop`: the watermark is part of the state, so a
/// restart drops exactly what a run without a restart drops.
#[test]
fn the_late_filter_goes_on_from_its_checkpointed_watermark() {
    let w = World::new();
    w.ok(&[
        "log",
        "create",
        "ev",
        "--segment-bytes",
        "200",
        "--retention-bytes",
        "1",
    ]);
    let produce = |name: &str, rows: &str| {
        let file = w.write(name, &format!("user,ts\n{rows}"));
        w.ok(&["log", "produce", "ev", "--file", &file]);
    };
    let stream = [
        "stream",
        "window-agg",
        "-i",
        "input=ev",
        "-p",
        "key=user",
        "-p",
        "time=ts",
        "-p",
        "window=tumbling:1s",
        "--late",
        "drop",
        "--until-caught-up",
    ];
    produce("a.csv", "a,100\nb,200\nc,300\n");
    w.ok(&stream);
    w.ok(&["log", "retain", "ev"]);
    // 150 is older than the watermark (300): dropped, as without a restart.
    produce("b.csv", "d,150\ne,400\n");
    w.ok(&stream);
    let mut counts = BTreeMap::new();
    for line in table_csv(&w, "windows").lines().skip(1) {
        let (user, rest) = line.split_once(',').unwrap();
        counts.insert(user.to_string(), rest.to_string());
    }
    let users: Vec<&str> = counts.keys().map(String::as_str).collect();
    assert_eq!(users, ["a", "b", "c", "e"], "{counts:?}");
}
