//! The read-only HTTP server behind `--metrics-addr` (on `stream`,
//! `reprocess` and `table rollback`) and `kappa ui`:
//!
//! - `/metrics`: the running deployment's [`StreamMetrics`] in the
//!   OpenMetrics text format (404 under `kappa ui`, which runs no job);
//! - `/`: the status page of every deployment in the table store, rendered
//!   on the server from the catalog (see [`page`]) and reloaded every two
//!   seconds by the browser;
//! - `/healthz`: `ok`.
//!
//! It serves pages and metrics only: no request changes anything. A bare
//! `:PORT` binds 127.0.0.1, never every interface; the address is the
//! operator's choice. Requests are answered one at a time on one thread,
//! and a sampler thread reads the catalog every [`SAMPLE_EVERY`] to keep the
//! last minutes of lag and throughput for the page's charts. Both stop
//! when the [`StatusServer`] is dropped.

mod history;
pub mod page;

use std::net::{SocketAddr, ToSocketAddrs};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub use history::{History, Sample};

use crate::metrics::StreamMetrics;
use crate::table::StoreAddr;

/// How often the sampler reads the catalog for the charts.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// The address is not `HOST:PORT` or `:PORT`.
    #[error("bad address '{addr}': {reason} (HOST:PORT, or :PORT for 127.0.0.1)")]
    BadAddress {
        /// What was given.
        addr: String,
        /// Why it is not an address.
        reason: String,
    },
    /// The address could not be bound (in use, not this host's, no permission).
    #[error("cannot listen on {addr}: {reason}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The system's reason.
        reason: String,
    },
}

/// `:9187` is 127.0.0.1:9187; anything else is resolved as `HOST:PORT`.
pub fn parse_addr(text: &str) -> Result<SocketAddr, StatusError> {
    let bad = |reason: String| StatusError::BadAddress {
        addr: text.to_string(),
        reason,
    };
    let full = match text.strip_prefix(':') {
        Some(port) => format!("127.0.0.1:{port}"),
        None => text.to_string(),
    };
    let mut addrs = full.to_socket_addrs().map_err(|e| bad(e.to_string()))?;
    addrs
        .next()
        .ok_or_else(|| bad("it resolves to no address".into()))
}

/// What the server shows.
struct Shared {
    table_db: StoreAddr,
    metrics: Option<Arc<StreamMetrics>>,
    history: Mutex<History>,
    stop: AtomicBool,
}

/// A running server; dropping it stops it.
pub struct StatusServer {
    addr: SocketAddr,
    server: Arc<tiny_http::Server>,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl StatusServer {
    /// Serves the store at `table_db` (and `metrics`, when a job runs) on `addr`.
    pub fn start(
        addr: SocketAddr,
        table_db: StoreAddr,
        metrics: Option<Arc<StreamMetrics>>,
    ) -> Result<StatusServer, StatusError> {
        let server = tiny_http::Server::http(addr).map_err(|e| StatusError::Bind {
            addr,
            reason: e.to_string(),
        })?;
        let addr = server.server_addr().to_ip().unwrap_or(addr);
        let server = Arc::new(server);
        let shared = Arc::new(Shared {
            table_db,
            metrics,
            history: Mutex::new(History::default()),
            stop: AtomicBool::new(false),
        });
        let serve = {
            let (server, shared) = (server.clone(), shared.clone());
            std::thread::Builder::new()
                .name("kappa-status".into())
                .spawn(move || serve(&server, &shared))
                .expect("spawn the status server thread")
        };
        let sample = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("kappa-status-sampler".into())
                .spawn(move || sample(&shared))
                .expect("spawn the status sampler thread")
        };
        Ok(StatusServer {
            addr,
            server,
            shared,
            threads: vec![serve, sample],
        })
    }

    /// The address it listens on (the port the system chose for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for StatusServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.server.unblock();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn serve(server: &tiny_http::Server, shared: &Shared) {
    for request in server.incoming_requests() {
        let (status, content_type, body) = respond(request.url(), shared);
        let header = tiny_http::Header::from_bytes(&b"Content-Type"[..], content_type.as_bytes())
            .expect("a valid header");
        let response = tiny_http::Response::from_string(body)
            .with_status_code(status)
            .with_header(header);
        // A client that went away is its own business.
        let _ = request.respond(response);
    }
}

fn respond(url: &str, shared: &Shared) -> (u16, &'static str, String) {
    const HTML: &str = "text/html; charset=utf-8";
    const TEXT: &str = "text/plain; charset=utf-8";
    let path = url.split('?').next().unwrap_or("");
    match (path, &shared.metrics) {
        ("/metrics", Some(m)) => (
            200,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            m.encode(),
        ),
        ("/metrics", None) => (
            404,
            TEXT,
            "no job runs here: `kappa ui` serves the status page only\n".into(),
        ),
        ("/healthz", _) => (200, TEXT, "ok\n".into()),
        ("/", _) => {
            let metrics = shared.metrics.is_some();
            let history = shared
                .history
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            match read_catalog(shared) {
                Ok(deployments) => (
                    200,
                    HTML,
                    page::render(&shared.table_db, metrics, &deployments, &history),
                ),
                Err(e) => (503, HTML, page::unavailable(&shared.table_db, metrics, &e)),
            }
        }
        _ => (404, TEXT, "not found: try / or /metrics\n".into()),
    }
}

fn read_catalog(shared: &Shared) -> Result<Vec<crate::table::Deployment>, String> {
    let store = crate::table::open_read_only(&shared.table_db).map_err(|e| e.to_string())?;
    store.deployments().map_err(|e| e.to_string())
}

fn sample(shared: &Shared) {
    while !shared.stop.load(Ordering::SeqCst) {
        if let Ok(deployments) = read_catalog(shared) {
            let now = crate::table::now_ms();
            let mut history = shared.history.lock().unwrap_or_else(|e| e.into_inner());
            history.record(now, &deployments);
        }
        // Sleep in short steps so that a drop does not wait a whole period.
        let mut slept = Duration::ZERO;
        while slept < SAMPLE_EVERY && !shared.stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
            slept += Duration::from_millis(50);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_port_is_loopback_only() {
        assert_eq!(
            parse_addr(":9187").unwrap(),
            "127.0.0.1:9187".parse().unwrap()
        );
        assert_eq!(
            parse_addr("0.0.0.0:80").unwrap(),
            "0.0.0.0:80".parse().unwrap()
        );
        assert!(parse_addr("9187").is_err());
        assert!(parse_addr(":x").is_err());
    }
}
