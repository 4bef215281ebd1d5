//! The connections between the processes of a cluster run, made here and
//! handed to timely (`initialize_networking_from_sockets`), rather than by
//! timely's own setup, which retries a missing peer every second for ever,
//! reports on stdout, and panics on a stray connection. Here a run starts
//! as soon as its peers are up, waits for them at most a bounded time, and
//! names the one that did not come.
//!
//! Process `i` binds its address from the host file, connects to every
//! process below it (retrying while that one starts), then accepts every
//! process above it. Each pair has two connections: timely's, and one for
//! heartbeats ([`super::heartbeat`]), so that a peer gone silent ends the
//! run instead of hanging it. Each connection opens with a hello — a magic
//! word, the process index, the process count, which of the two it is —
//! so that a connection from anything else, or from a process started with
//! another host file, is refused with a clear error instead of being taken
//! for a peer.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets;
use timely::communication::allocator::{AllocatorBuilder, ProcessBuilder};
use timely::communication::{Hooks, WorkerGuards};
use timely::worker::Worker;

use super::heartbeat::{Heartbeats, Peer};
use super::{RunError, WorkerConfig};

const MAGIC: &[u8; 8] = b"kappa-c2";

/// The connections of a pair of processes, numbered in their hello:
/// timely's (0) and the heartbeats' (1).
const CHANNELS: usize = 2;

/// Runs `func` on this process' workers of the cluster run `config`; the
/// heartbeats (unless `--peer-timeout` is off) last until dropped.
pub fn execute<T, F>(
    config: &WorkerConfig,
    addresses: &[String],
    func: F,
) -> Result<(WorkerGuards<T>, Option<Heartbeats>), RunError>
where
    T: Send + 'static,
    F: Fn(&mut Worker) -> T + Send + Sync + 'static,
{
    watch_for_lost_peers();
    let [sockets, beats] = connect(addresses, config.process, config.connect_timeout)?;
    let heartbeats = match config.peer_timeout {
        Some(timeout) => Some(start_heartbeats(&sockets, beats, timeout)?),
        None => None,
    };
    let hooks = Hooks::default();
    let local =
        ProcessBuilder::new_typed_vector(config.threads, hooks.refill.clone(), hooks.spill.clone());
    let (builders, guard) =
        initialize_networking_from_sockets(local, sockets, config.process, config.threads, hooks)
            .map_err(|e| RunError::Cluster(format!("cannot start the network threads: {e}")))?;
    let builders = builders.into_iter().map(AllocatorBuilder::Tcp).collect();
    let guards = timely::execute::execute_from(
        builders,
        Box::new(guard),
        timely::WorkerConfig::default(),
        func,
    )
    .map_err(RunError::Timely)?;
    Ok((guards, heartbeats))
}

/// Beats to and watches every peer (see [`super::heartbeat`]).
fn start_heartbeats(
    timely: &[Option<TcpStream>],
    beats: Vec<Option<TcpStream>>,
    timeout: Duration,
) -> Result<Heartbeats, RunError> {
    let cannot = |e: std::io::Error| RunError::Cluster(format!("cannot start the heartbeats: {e}"));
    let mut peers = Vec::new();
    for (process, (beats, timely)) in beats.into_iter().zip(timely).enumerate() {
        if let (Some(beats), Some(timely)) = (beats, timely) {
            let timely = timely.try_clone().map_err(cannot)?;
            peers.push(Peer {
                process,
                beats,
                timely,
            });
        }
    }
    Heartbeats::start(peers, timeout, std::sync::Arc::new(lose)).map_err(cannot)
}

/// Two sockets to every other process, in process order (`None` at
/// `me`): timely's, and the heartbeats'.
fn connect(
    addresses: &[String],
    me: usize,
    timeout: Duration,
) -> Result<[Vec<Option<TcpStream>>; CHANNELS], RunError> {
    let deadline = Instant::now() + timeout;
    let listener = TcpListener::bind(&addresses[me]).map_err(|e| {
        RunError::Cluster(format!(
            "process {me} cannot listen on {}: {e}",
            addresses[me]
        ))
    })?;
    let none = || {
        (0..addresses.len())
            .map(|_| None)
            .collect::<Vec<Option<TcpStream>>>()
    };
    let mut sockets = [none(), none()];
    for (peer, address) in addresses.iter().enumerate().take(me) {
        for (channel, sockets) in sockets.iter_mut().enumerate() {
            let mut stream = dial(address, deadline).map_err(|e| {
                RunError::Cluster(format!(
                    "process {me} cannot reach process {peer} at {address} within {}s: {e}",
                    timeout.as_secs()
                ))
            })?;
            hello(&mut stream, me, addresses.len(), channel).map_err(|e| {
                RunError::Cluster(format!("cannot greet process {peer} at {address}: {e}"))
            })?;
            sockets[peer] = Some(stream);
        }
    }
    listener
        .set_nonblocking(true)
        .map_err(|e| RunError::Cluster(format!("cannot poll {}: {e}", addresses[me])))?;
    let missing = |sockets: &[Vec<Option<TcpStream>>; CHANNELS]| {
        (me + 1..addresses.len()).find(|&p| sockets.iter().any(|s| s[p].is_none()))
    };
    while let Some(missing) = missing(&sockets) {
        match listener.accept() {
            Ok((mut stream, from)) => {
                let (peer, channel) = greeted(&mut stream, me, addresses.len()).map_err(|e| {
                    RunError::Cluster(format!(
                        "process {me}: a connection from {from} is not a peer: {e}"
                    ))
                })?;
                sockets[channel][peer] = Some(stream);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(RunError::Cluster(format!(
                        "process {missing} ({}) did not connect to process {me} within {}s: is it started, \
                         with the same host file?",
                        addresses[missing],
                        timeout.as_secs()
                    )));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => {
                return Err(RunError::Cluster(format!(
                    "cannot accept on {}: {e}",
                    addresses[me]
                )));
            }
        }
    }
    Ok(sockets)
}

/// Connects to `address`, retrying while the process there starts.
fn dial(address: &str, deadline: Instant) -> std::io::Result<TcpStream> {
    loop {
        match TcpStream::connect(address) {
            Ok(stream) => {
                stream.set_nodelay(true)?;
                return Ok(stream);
            }
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

fn hello(
    stream: &mut TcpStream,
    me: usize,
    processes: usize,
    channel: usize,
) -> std::io::Result<()> {
    let mut message = MAGIC.to_vec();
    for word in [me, processes, channel] {
        message.extend_from_slice(&(word as u64).to_be_bytes());
    }
    stream.write_all(&message)
}

/// The index of the peer that says hello on `stream`, and which of its
/// connections this is.
fn greeted(stream: &mut TcpStream, me: usize, processes: usize) -> Result<(usize, usize), String> {
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let mut message = [0u8; 32];
    stream
        .read_exact(&mut message)
        .map_err(|e| format!("no hello ({e})"))?;
    if &message[..8] != MAGIC {
        return Err("it does not speak kappa's cluster protocol".into());
    }
    let word =
        |i: usize| u64::from_be_bytes(message[i..i + 8].try_into().expect("8 bytes")) as usize;
    let (peer, theirs, channel) = (word(8), word(16), word(24));
    if theirs != processes {
        return Err(format!(
            "it is process {peer} of {theirs}, this run has {processes} processes"
        ));
    }
    if peer <= me || peer >= processes {
        return Err(format!(
            "it says it is process {peer}, which does not connect to process {me}"
        ));
    }
    if channel >= CHANNELS {
        return Err(format!(
            "it names connection {channel} of a pair, which has {CHANNELS}"
        ));
    }
    stream.set_read_timeout(None).map_err(|e| e.to_string())?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    Ok((peer, channel))
}

/// The first connection lost in this process: timely's network threads
/// (named `timely:send-P` and `timely:recv-P`, for peer process `P`)
/// panic when a peer goes away, and then every worker and the guard that
/// joins them panic after them.
static LOST: Mutex<Option<(usize, String)>> = Mutex::new(None);

/// Turns the panics that follow a lost peer into one recorded loss, and
/// keeps them off stderr (the run reports the loss as its error); any
/// other panic is reported as before.
pub fn watch_for_lost_peers() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current();
            let peer = thread.name().and_then(|name| {
                let rest = name
                    .strip_prefix("timely:send-")
                    .or_else(|| name.strip_prefix("timely:recv-"))?;
                rest.parse::<usize>().ok()
            });
            let mut lost = LOST.lock().unwrap_or_else(|e| e.into_inner());
            match peer {
                Some(peer) => {
                    let message = panic_message(info.payload());
                    lost.get_or_insert((peer, message));
                }
                // A consequence of the loss (a poisoned queue, the guard).
                None if lost.is_some() => {}
                None => {
                    drop(lost);
                    previous(info)
                }
            }
        }));
    });
}

/// Records that this process lost `peer`, and how, unless it lost one
/// before.
pub fn lose(peer: usize, how: String) {
    let mut lost = LOST.lock().unwrap_or_else(|e| e.into_inner());
    lost.get_or_insert((peer, how));
}

/// The peer this process lost, and how, if it lost one.
pub fn lost_peer() -> Option<(usize, String)> {
    LOST.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The text of a panic's payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}
