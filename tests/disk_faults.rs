//! A full disk and a permission error, for real: `produce`, `stream`,
//! `reprocess` and `run` fail with a clear error naming the path, leave the
//! log, the tables and the outputs as they were before the failed batch or
//! epoch, and succeed when retried with space.
//!
//! The full disk is a small tmpfs mounted by the test. So that no mount
//! outlives it (or is seen by other tests), the test body runs in a private
//! mount namespace: the test re-executes its own binary under `unshare`.
//! Without `unshare` and a mount namespace (root, or unprivileged user
//! namespaces) it fails saying so; it never passes without having run.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use crate::common::World;

const INSIDE: &str = "KAPPA_TEST_IN_MOUNT_NAMESPACE";

/// Runs the test `name` again in a private mount namespace; returns `false`
/// there (the caller then runs the body), `true` after the child passed.
fn reexec_in_mount_namespace(name: &str) -> bool {
    if std::env::var_os(INSIDE).is_some() {
        return false;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("unshare")
        .args(["--mount", "--map-root-user", "--propagation", "private"])
        .arg(exe)
        .args([name, "--exact", "--nocapture", "--test-threads", "1"])
        .env(INSIDE, "1")
        .output()
        .unwrap_or_else(|e| panic!("this test needs `unshare` (util-linux) to mount a tmpfs: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("1 passed"),
        "the test in its own mount namespace failed (it needs root or unprivileged user \
         namespaces to mount a tmpfs):\n{text}"
    );
    true
}

/// Mounts a tmpfs of `kib` KiB at `dir` (inside the test's namespace).
fn mount_tmpfs(dir: &Path, kib: u64) {
    std::fs::create_dir_all(dir).unwrap();
    remount(dir, kib, false);
}

/// Grows (or shrinks) the tmpfs at `dir`.
fn remount(dir: &Path, kib: u64, again: bool) {
    let options = if again {
        format!("remount,size={kib}k")
    } else {
        format!("size={kib}k")
    };
    let status = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &options, "tmpfs"])
        .arg(dir)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "mount -o {options} {} failed",
        dir.display()
    );
}

/// Fills the tmpfs at `dir` to the last byte with a file `fill`.
fn fill(dir: &Path) {
    use std::io::Write;
    let mut file = std::fs::File::create(dir.join("fill")).unwrap();
    let block = vec![0u8; 4096];
    while file.write_all(&block).is_ok() {}
    while file.write_all(&block[..1]).is_ok() {}
}

fn rows_csv(w: &World, n: usize) -> String {
    let mut text = String::from("k,v\n");
    for i in 0..n {
        text.push_str(&format!("k{},{i}\n", i % 100));
    }
    w.write("rows.csv", &text)
}

/// The topic's per-partition LATEST offsets, from `describe`.
fn log_ends(w: &World, log: &Path, topic: &str) -> Vec<u64> {
    let out = w.ok(&["log", "describe", topic, "--log-dir", log.to_str().unwrap()]);
    out.lines()
        .skip_while(|l| !l.starts_with("PARTITION"))
        .skip(1)
        .take_while(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .map(|l| l.split_whitespace().nth(2).unwrap().parse().unwrap())
        .collect()
}

#[test]
fn a_full_disk_fails_the_batch_and_a_retry_with_space_succeeds() {
    if reexec_in_mount_namespace(
        "disk_faults::a_full_disk_fails_the_batch_and_a_retry_with_space_succeeds",
    ) {
        return;
    }
    let w = World::new();
    let rows = rows_csv(&w, 40_000);
    let small = w.path("small");
    mount_tmpfs(&small, 400);
    let log = small.join("log");
    let log_arg = log.to_str().unwrap();

    // produce: the batch that does not fit leaves no record in any
    // partition, and the error names the segment file.
    w.ok(&[
        "log",
        "create",
        "t",
        "--partitions",
        "2",
        "--log-dir",
        log_arg,
    ]);
    let err = w.fails(&["log", "produce", "t", "--file", &rows, "--log-dir", log_arg]);
    assert!(err.contains("No space left on device"), "{err}");
    assert!(
        err.contains("partition-"),
        "the error names the file: {err}"
    );
    let before = log_ends(&w, &log, "t");
    let acknowledged: u64 = err
        .split("; the ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of appended records in: {err}"));
    assert_eq!(before.iter().sum::<u64>(), acknowledged, "{err}");
    let err = w.fails(&["log", "produce", "t", "--file", &rows, "--log-dir", log_arg]);
    assert!(err.contains("nothing was written"), "{err}");
    assert_eq!(log_ends(&w, &log, "t"), before);
    remount(&small, 20_000, true);
    w.ok(&["log", "produce", "t", "--file", &rows, "--log-dir", log_arg]);
    assert_eq!(
        log_ends(&w, &log, "t").iter().sum::<u64>(),
        acknowledged + 40_000
    );

    // stream and reprocess: the tables on a full disk; every committed
    // epoch is whole (verify), and a retry with space finishes.
    w.ok(&["log", "create", "u", "--partitions", "2"]);
    w.ok(&["log", "produce", "u", "--file", &rows]);
    let tables = w.path("tables");
    mount_tmpfs(&tables, 400);
    let db = tables.join("tables.db");
    let db_arg = db.to_str().unwrap();
    let stream = |verb: &'static str| {
        vec![
            verb,
            "count-by",
            "-i",
            "input=u",
            "-p",
            "key=v",
            "--until-caught-up",
            "--quiet",
            "--max-batch",
            "500",
            "--table-db",
            db_arg,
        ]
    };
    let err = w.fails(&stream("stream"));
    assert!(err.contains(&format!("table store {db_arg}")), "{err}");
    assert!(err.contains("disk is full"), "{err}");
    let verify = ["table", "verify", "counts", "--table-db", db_arg];
    assert!(w.ok(&verify).contains("identical"));
    remount(&tables, 20_000, true);
    w.ok(&stream("stream"));
    assert!(w.ok(&verify).contains("identical (40000 rows"));

    // Read-only commands on a full disk: with no write-ahead log left (the
    // last connection checkpointed it away), SQLite cannot even make its
    // shared-memory index there, and kappa reads without one.
    rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    assert!(!tables.join("tables.db-wal").exists());
    fill(&tables);
    assert!(w.ok(&verify).contains("identical (40000 rows"));
    let show = w.ok(&["table", "show", "counts", "--table-db", db_arg, "--csv"]);
    assert!(show.starts_with("v,count\n0,1\n"), "{}", &show[..200]);
    assert!(
        w.ok(&["table", "status", "--table-db", db_arg])
            .contains("counts")
    );
    std::fs::remove_file(tables.join("fill")).unwrap();

    // A first stream on a full disk names the disk and leaves nothing behind.
    let fresh = w.path("fresh");
    mount_tmpfs(&fresh, 200);
    fill(&fresh);
    let fresh_db = fresh.join("tables.db");
    let mut first = stream("stream");
    *first.last_mut().unwrap() = fresh_db.to_str().unwrap();
    let err = w.fails(&first);
    assert!(
        err.contains(&format!(
            "the disk of table store {} is full",
            fresh_db.display()
        )) && err.contains(&format!("free in {}", fresh.display())),
        "{err}"
    );
    let left: Vec<String> = std::fs::read_dir(&fresh)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["fill"], "a failed first stream left files behind");
    let used_kib: u64 = std::fs::read_dir(&tables)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum::<u64>()
        / 1024;
    remount(&tables, used_kib + 600, true);
    // The same job and parameters again: without --force, kappa would say
    // that nothing changed and build nothing.
    let reprocess = [stream("reprocess"), vec!["--force"]].concat();
    let err = w.fails(&reprocess);
    assert!(err.contains("disk is full"), "{err}");
    assert!(w.ok(&verify).contains("counts v1: identical (40000 rows"));
    remount(&tables, 40_000, true);
    let out = w.ok(&reprocess);
    assert!(out.contains("swapped counts to v2"), "{out}");
    assert!(w.ok(&verify).contains("counts v2: identical (40000 rows"));

    // run: a full output disk leaves no partial output file.
    let outputs = w.path("outputs");
    mount_tmpfs(&outputs, 100);
    let dir = outputs.join("counts");
    let run = [
        "run",
        "count-by",
        "-i",
        &format!("input={rows}"),
        "-p",
        "key=v",
        "-o",
        dir.to_str().unwrap(),
    ];
    let err = w.fails(&run);
    assert!(
        err.contains("No space left on device") && err.contains("counts"),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(&dir).map_or(vec![], |d| d.collect());
    assert!(left.is_empty(), "a failed run left {left:?}");
    remount(&outputs, 20_000, true);
    w.ok(&run[..]);
    assert!(dir.join("_SUCCESS").exists());
}

/// Sets the mode of every directory and file under `dir` (and `dir`).
fn set_modes(dir: &Path, dir_mode: u32, file_mode: u32) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            set_modes(&path, dir_mode, file_mode);
        } else {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(file_mode)).unwrap();
        }
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(dir_mode)).unwrap();
}

/// Whether this process runs as root (for whom permissions do not apply).
fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn a_permission_error_names_the_path_and_changes_nothing() {
    let w = World::new();
    let rows = rows_csv(&w, 1000);
    w.ok(&["log", "create", "t"]);
    w.ok(&["log", "produce", "t", "--file", &rows]);
    let stream = [
        "stream",
        "count-by",
        "-i",
        "input=t",
        "-p",
        "key=v",
        "--until-caught-up",
    ];
    w.ok(&stream);
    std::fs::create_dir(w.path("out")).unwrap();
    // Root ignores permissions: the commands then run as nobody, on files
    // nobody may read but not write; others lose write permission. Nobody
    // may not reach the build directory, so it runs a copy of the binary.
    let root = is_root();
    let bin = w.path("kappa");
    std::fs::copy(crate::common::KAPPA, &bin).unwrap();
    if root {
        set_modes(w.dir.path(), 0o755, 0o644);
    } else {
        set_modes(w.dir.path(), 0o555, 0o444);
    }
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run_unprivileged = |args: &[&str]| {
        let base = w.kappa(args);
        let mut cmd = Command::new(&bin);
        cmd.args(base.get_args());
        for (key, value) in base.get_envs() {
            if let Some(value) = value {
                cmd.env(key, value);
            }
        }
        if root {
            cmd.uid(65534).gid(65534);
        }
        cmd.output().unwrap()
    };
    let unprivileged = |args: &[&str]| {
        let out = run_unprivileged(args);
        assert!(!out.status.success(), "kappa {args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // Who may read the store but not write its directory can still read
    // it: no `-shm` file can be made, and the store is read as it is.
    for args in [
        &["table", "status"][..],
        &["table", "show", "counts"],
        &["table", "verify", "counts"],
    ] {
        let out = run_unprivileged(args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && text.contains("counts"),
            "kappa {args:?}: {text}"
        );
    }
    let err = unprivileged(&["log", "produce", "t", "--file", &rows]);
    assert!(
        err.contains("Permission denied") && err.contains("log/t/"),
        "{err}"
    );
    let err = unprivileged(&stream);
    assert!(err.contains("tables.db"), "{err}");
    let err = unprivileged(&["reprocess", "count-by", "-i", "input=t", "-p", "key=v"]);
    assert!(err.contains("tables.db"), "{err}");
    let out = w.path("out/counts");
    let err = unprivileged(&[
        "run",
        "count-by",
        "-i",
        &format!("input={rows}"),
        "-p",
        "key=v",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(
        err.contains("Permission denied") && err.contains("out/counts"),
        "{err}"
    );
    set_modes(w.dir.path(), 0o755, 0o644);
    let status = w.ok(&["table", "status", "--csv"]);
    assert_eq!(status.lines().count(), 2, "{status}");
    assert!(
        w.ok(&["table", "verify", "counts"])
            .contains("identical (1000 rows")
    );
    let ends = log_ends(&w, &w.path("log"), "t");
    assert_eq!(ends, vec![1000]);
}
