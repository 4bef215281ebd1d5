//! Helpers shared by the integration tests that drive the real binary with
//! a log and a table store of their own.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

pub const KAPPA: &str = env!("CARGO_BIN_EXE_kappa");

/// A small deterministic generator (xorshift), so failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A temporary directory holding a log (`log/`) and a table store: the
/// SQLite file `tables.db`, or a PostgreSQL database of its own.
pub struct World {
    pub dir: tempfile::TempDir,
    /// `--table-db` for every command of this world.
    pub table_db: String,
    _database: Option<kappa::table::postgres::TestDatabase>,
}

impl World {
    pub fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        World {
            table_db: dir.path().join("tables.db").display().to_string(),
            dir,
            _database: None,
        }
    }
    /// A world whose table store is a fresh PostgreSQL database; `None`
    /// (with the reason printed) when no server is configured.
    pub fn on_postgres() -> Option<World> {
        let db = kappa::table::postgres::TestDatabase::create()?;
        Some(World {
            table_db: db.url.clone(),
            dir: tempfile::tempdir().unwrap(),
            _database: Some(db),
        })
    }
    /// This world's table store.
    pub fn addr(&self) -> kappa::table::StoreAddr {
        self.table_db.parse().unwrap()
    }
    /// Opens this world's table store (it must exist).
    pub fn store(&self) -> Box<dyn kappa::table::TableStore> {
        kappa::table::open_existing(&self.addr()).unwrap()
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    /// `kappa ARGS` with this world's log and table store.
    pub fn kappa(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(KAPPA);
        cmd.args(args)
            .env("KAPPA_LOG_DIR", self.path("log"))
            .env("KAPPA_TABLE_DB", &self.table_db)
            .env("RUST_LOG", "warn");
        cmd
    }
    /// Starts `kappa ARGS` in the background with its output discarded
    /// (a process the test is going to kill).
    pub fn spawn_silent(&self, args: &[String]) -> std::process::Child {
        self.kappa(&args.iter().map(String::as_str).collect::<Vec<_>>())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// Runs kappa, expecting success; returns stdout then stderr.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.output(args, NO_COMMAND_TAKES);
        assert!(
            out.status.success(),
            "kappa {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }
    /// Runs kappa, expecting failure; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        self.fails_within(args, NO_COMMAND_TAKES)
    }
    /// [`World::fails`], failing the test if kappa runs longer than `limit`.
    pub fn fails_within(&self, args: &[&str], limit: Duration) -> String {
        let out = self.output(args, limit);
        assert!(!out.status.success(), "kappa {args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
    /// `kappa ARGS`'s output; the test fails if it runs longer than `limit`
    /// (it is killed), so that no test hangs on a command that does not end.
    fn output(&self, args: &[&str], limit: Duration) -> std::process::Output {
        output_within(self.kappa(args).stdin(Stdio::null()), limit)
            .unwrap_or_else(|| panic!("kappa {args:?} did not end within {limit:?}"))
    }
    /// Writes a file in the world; returns its path.
    pub fn write(&self, name: &str, text: &str) -> String {
        std::fs::write(self.path(name), text).unwrap();
        self.path(name).display().to_string()
    }

    /// Produces `rows` (CSV lines under `header`) into `topic` from another
    /// thread, `chunk` rows per `kappa log produce`, pausing `pause` between.
    pub fn produce_in_background(
        &self,
        topic: &str,
        header: &str,
        rows: Vec<String>,
        chunk: usize,
        pause: Duration,
    ) -> JoinHandle<()> {
        let (dir, log) = (self.dir.path().to_path_buf(), self.path("log"));
        let (topic, header) = (topic.to_string(), header.to_string());
        std::thread::spawn(move || {
            for (i, rows) in rows.chunks(chunk).enumerate() {
                let file = dir.join(format!("{topic}-bg{i}.csv"));
                std::fs::write(&file, format!("{header}\n{}\n", rows.join("\n"))).unwrap();
                let status = Command::new(KAPPA)
                    .args(["log", "produce", &topic, "--file", file.to_str().unwrap()])
                    .env("KAPPA_LOG_DIR", &log)
                    .stderr(Stdio::null())
                    .status()
                    .unwrap();
                assert!(status.success(), "background produce failed");
                std::thread::sleep(pause);
            }
        })
    }
}

/// Longer than any command of a test runs: one that runs longer hangs.
const NO_COMMAND_TAKES: Duration = Duration::from_secs(600);

/// Runs `cmd` (in its own process group) and returns its output, or `None`
/// after killing the group if it has not ended within `limit`.
pub fn output_within(cmd: &mut Command, limit: Duration) -> Option<std::process::Output> {
    use std::os::unix::process::CommandExt;
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    match rx.recv_timeout(limit) {
        Ok(out) => Some(out.unwrap()),
        Err(_) => {
            let group = libc::pid_t::try_from(pid).expect("a pid");
            assert!(group > 1, "no process group to kill");
            // SAFETY: kill(2) with a negative pid signals that process group
            // (the child's own, from `process_group(0)`), nothing else.
            unsafe { libc::kill(-group, libc::SIGKILL) };
            None
        }
    }
}
