//! `kappa cluster`: one cluster run on this host, without the shell loop.
//! It picks a free port per process on 127.0.0.1, writes the host file,
//! starts the processes (this binary, with the command given and
//! `--processes N --process I --hostfile FILE`), prefixes each one's
//! stderr with `[pI]`, and exits with the first failure: once one process
//! fails, the others are stopped if they have not ended a few seconds
//! later (one that waits for the failed one to connect would wait long).
//! SIGINT or SIGTERM to the launcher is passed on to every process as
//! SIGTERM, so a stream across processes stops at an epoch boundary as one.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;

#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// Processes to start on this host.
    #[arg(long, short = 'n', value_name = "N")]
    processes: usize,
    /// The command every process runs, after `--` (e.g. `-- run count-by -i ... -o out`).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// How long the others may take to end by themselves after a failure.
const GRACE: Duration = Duration::from_secs(3);

/// The most processes the launcher starts on one host.
const MAX_PROCESSES: usize = 64;

pub fn cluster(args: ClusterArgs) -> anyhow::Result<ExitCode> {
    if !(2..=MAX_PROCESSES).contains(&args.processes) {
        bail!("--processes must be from 2 to {MAX_PROCESSES}");
    }
    if let Some(flag) = args
        .command
        .iter()
        .find(|a| ["--processes", "--process", "--hostfile"].contains(&a.as_str()))
    {
        bail!("the command must not set {flag}: `kappa cluster` sets it for each process");
    }
    let hostfile = std::env::temp_dir().join(format!("kappa-cluster-{}.hosts", std::process::id()));
    std::fs::write(&hostfile, free_addresses(args.processes)?.join("\n") + "\n")
        .context("cannot write the host file")?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone())
            .context("cannot install signal handler")?;
    }
    let code = start_and_wait(&args, &hostfile, &stop);
    let _ = std::fs::remove_file(&hostfile);
    code
}

fn start_and_wait(
    args: &ClusterArgs,
    hostfile: &std::path::Path,
    stop: &AtomicBool,
) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("cannot find the kappa binary")?;
    let mut children: Vec<Process> = Vec::new();
    for i in 0..args.processes {
        let n = args.processes.to_string();
        let child = Command::new(&exe)
            .args(&args.command)
            .args(["--processes", &n, "--process", &i.to_string()])
            .arg("--hostfile")
            .arg(hostfile)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start process {i}"));
        let child = match child {
            Ok(child) => child,
            Err(e) => {
                for mut p in children {
                    let _ = p.child.kill();
                    let _ = p.child.wait();
                }
                return Err(e);
            }
        };
        children.push(prefixed(i, child));
    }
    Ok(wait_all(children, stop))
}

/// `n` addresses on 127.0.0.1 whose ports were free a moment ago (the
/// system picked them; the processes bind them right away).
fn free_addresses(n: usize) -> anyhow::Result<Vec<String>> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .context("cannot find free ports on 127.0.0.1")?;
    listeners
        .iter()
        .map(|l| Ok(l.local_addr()?.to_string()))
        .collect()
}

/// A started process whose stderr lines are copied to ours, prefixed.
struct Process {
    index: usize,
    child: Child,
    copier: Option<std::thread::JoinHandle<()>>,
}

fn prefixed(index: usize, mut child: Child) -> Process {
    let stderr = child.stderr.take().expect("stderr is piped");
    let copier = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = writeln!(std::io::stderr().lock(), "[p{index}] {line}");
        }
    });
    Process {
        index,
        child,
        copier: Some(copier),
    }
}

/// Waits for every process; after the first failure, stops the others.
/// The exit code is the first failure's, or success.
fn wait_all(mut processes: Vec<Process>, stop: &AtomicBool) -> ExitCode {
    let mut forwarded = false;
    let mut failed: Option<(usize, i32)> = None;
    let mut stopped = false;
    let mut failed_at = None;
    let mut running = processes.len();
    while running > 0 {
        for p in processes.iter_mut().filter(|p| p.copier.is_some()) {
            let status = match p.child.try_wait() {
                Ok(Some(status)) => status,
                Ok(None) => continue,
                Err(_) => continue,
            };
            if let Some(copier) = p.copier.take() {
                let _ = copier.join();
            }
            running -= 1;
            if !status.success() && failed.is_none() {
                failed = Some((p.index, status.code().unwrap_or(1)));
                failed_at = Some(Instant::now());
            }
        }
        if !forwarded && stop.load(Ordering::Relaxed) {
            forwarded = true;
            for p in processes.iter().filter(|p| p.copier.is_some()) {
                if let Ok(pid) = libc::pid_t::try_from(p.child.id()) {
                    // SAFETY: kill(2) on the pid of a child not yet waited for.
                    unsafe { libc::kill(pid, libc::SIGTERM) };
                }
            }
        }
        // The others see the failure too and end by themselves; the grace
        // is for one that never will (it waits for the failed one to connect).
        if failed_at.is_some_and(|at: Instant| at.elapsed() > GRACE) {
            for p in processes.iter_mut().filter(|p| p.copier.is_some()) {
                stopped |= p.child.kill().is_ok();
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    match failed {
        None => ExitCode::SUCCESS,
        Some((index, code)) => {
            let others = if stopped {
                "; the others were stopped"
            } else {
                ""
            };
            say!("kappa cluster: process {index} failed first (exit code {code}){others}");
            ExitCode::from(u8::try_from(code).unwrap_or(1).max(1))
        }
    }
}
