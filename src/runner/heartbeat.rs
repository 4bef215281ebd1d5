//! Heartbeats between the processes of a cluster run, so that a silent
//! peer (a network partition, a stopped process) ends the run instead of
//! hanging it.
//!
//! A killed peer is noticed at once: its sockets close, and timely's
//! network threads fail. A partition closes nothing: TCP keeps the
//! connection open and queues what is sent, so timely would wait for ever,
//! and so would a signal's stop at the next epoch boundary. So every pair
//! of processes has a second connection, made with timely's
//! ([`super::network`]), on which each side writes a byte every
//! [`interval`] and expects to read one within the timeout.
//!
//! Invariants:
//! - silence for the timeout is a lost peer: it is recorded as the run's
//!   loss ([`super::network::lose`]) and timely's connection to the peer
//!   is shut down, so that timely's threads fail as if the peer had died
//!   and the run ends with `lost process P (HOST:PORT): ...`, having
//!   committed nothing of the current epoch (commits are atomic);
//! - a peer that closes the heartbeat connection (it ended its run, or
//!   died) is no longer watched: a death is timely's to report, since its
//!   connection closes too;
//! - dropping [`Heartbeats`] (the run ended here) stops the beats and
//!   closes the connections, so peers stop watching this process.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// One peer's connections: the heartbeat one, and timely's (a clone of it,
/// to shut down).
pub struct Peer {
    /// The peer's process index.
    pub process: usize,
    /// The heartbeat connection.
    pub beats: TcpStream,
    /// Timely's connection to the same peer.
    pub timely: TcpStream,
}

/// The heartbeats of this process' run; dropping it stops them.
pub struct Heartbeats {
    stop: Arc<AtomicBool>,
    sockets: Vec<TcpStream>,
}

/// How often a beat is sent for a timeout: five beats per timeout, at
/// most one a second and at least one every 100 ms.
pub fn interval(timeout: Duration) -> Duration {
    (timeout / 5).clamp(Duration::from_millis(100), Duration::from_secs(1))
}

impl Heartbeats {
    /// Beats to, and watches, every peer; a peer silent for `timeout` is
    /// reported to `lost` (with why) before its timely connection is shut.
    pub fn start(
        peers: Vec<Peer>,
        timeout: Duration,
        lost: Arc<dyn Fn(usize, String) + Send + Sync>,
    ) -> std::io::Result<Heartbeats> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut sockets = Vec::new();
        for peer in peers {
            peer.beats.set_nodelay(true)?;
            peer.beats.set_read_timeout(Some(timeout))?;
            sockets.push(peer.beats.try_clone()?);
            let sender = peer.beats.try_clone()?;
            let stopped = stop.clone();
            std::thread::Builder::new()
                .name(format!("kappa:beat-{}", peer.process))
                .spawn(move || beat(sender, interval(timeout), &stopped))?;
            let stopped = stop.clone();
            let lost = lost.clone();
            std::thread::Builder::new()
                .name(format!("kappa:watch-{}", peer.process))
                .spawn(move || {
                    if let Some(why) = watch(peer.beats, timeout, &stopped) {
                        lost(peer.process, why);
                        let _ = peer.timely.shutdown(Shutdown::Both);
                    }
                })?;
        }
        Ok(Heartbeats { stop, sockets })
    }
}

impl Drop for Heartbeats {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for socket in &self.sockets {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

/// Writes a byte every `every` until stopped or the connection fails.
fn beat(mut socket: TcpStream, every: Duration, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        // A write that fails (the peer closed) ends the beats; one that
        // blocks (a partition filled the send buffer) is what the peer's
        // watch notices.
        if socket.write_all(&[1]).is_err() {
            return;
        }
        std::thread::sleep(every);
    }
}

/// Reads beats until the connection closes (`None`) or stays silent for
/// `timeout` (`Some(why)`).
fn watch(mut socket: TcpStream, timeout: Duration, stop: &AtomicBool) -> Option<String> {
    let mut buffer = [0u8; 64];
    loop {
        match socket.read(&mut buffer) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if stop.load(Ordering::SeqCst) {
                    return None;
                }
                return Some(format!(
                    "no heartbeat for {} s (the network to it is cut, or it is stopped; \
                     --peer-timeout sets how long to wait)",
                    seconds(timeout)
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
        if stop.load(Ordering::SeqCst) {
            return None;
        }
    }
}

/// A timeout in seconds, as the flag gives it (fractions for tests).
fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}", s as u64)
    } else {
        format!("{s:.1}")
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::sync::Mutex;
    use std::time::Instant;

    use super::*;

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (b, _) = listener.accept().unwrap();
        (a, b)
    }

    type Losses = Arc<Mutex<Vec<(usize, String)>>>;

    fn start(beats: TcpStream, timely: TcpStream, timeout: Duration) -> (Heartbeats, Losses) {
        let losses: Losses = Arc::default();
        let into = losses.clone();
        let hb = Heartbeats::start(
            vec![Peer {
                process: 1,
                beats,
                timely,
            }],
            timeout,
            Arc::new(move |p, why| into.lock().unwrap().push((p, why))),
        )
        .unwrap();
        (hb, losses)
    }

    fn wait_for(what: impl Fn() -> bool, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if what() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        what()
    }

    #[test]
    fn a_silent_peer_is_lost_and_its_timely_connection_shut() {
        let (beats, _silent) = pair();
        let (timely, mut far_end) = pair();
        let timeout = Duration::from_millis(300);
        let (_hb, losses) = start(beats, timely, timeout);
        assert!(wait_for(
            || !losses.lock().unwrap().is_empty(),
            Duration::from_secs(5)
        ));
        let (peer, why) = losses.lock().unwrap()[0].clone();
        assert_eq!(peer, 1);
        assert!(why.contains("no heartbeat for 0.3 s"), "{why}");
        // The far end of timely's connection sees it closed.
        far_end
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(far_end.read(&mut [0u8; 8]).unwrap(), 0);
    }

    #[test]
    fn two_beating_processes_do_not_lose_each_other_and_a_close_is_not_a_loss() {
        let (a, b) = pair();
        let (ta, _tb) = pair();
        let (tc, _td) = pair();
        let timeout = Duration::from_millis(300);
        let (hb_a, lost_a) = start(a, ta, timeout);
        let (hb_b, lost_b) = start(b, tc, timeout);
        std::thread::sleep(timeout * 4);
        assert!(lost_a.lock().unwrap().is_empty());
        assert!(lost_b.lock().unwrap().is_empty());
        // One side ends its run: the other stops watching it, silently.
        drop(hb_a);
        std::thread::sleep(timeout * 3);
        assert!(
            lost_b.lock().unwrap().is_empty(),
            "{:?}",
            lost_b.lock().unwrap()
        );
        drop(hb_b);
    }

    #[test]
    fn the_interval_is_a_fifth_of_the_timeout_within_bounds() {
        assert_eq!(interval(Duration::from_secs(10)), Duration::from_secs(1));
        assert_eq!(interval(Duration::from_secs(2)), Duration::from_millis(400));
        assert_eq!(
            interval(Duration::from_millis(50)),
            Duration::from_millis(100)
        );
    }
}
