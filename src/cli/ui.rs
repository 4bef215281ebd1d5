//! `kappa ui`: the status page of every deployment in a table store, served
//! from the catalog alone, without running a job (a running `stream` or
//! `reprocess` serves the same page, and its metrics, with
//! `--metrics-addr`). Runs until SIGINT or SIGTERM.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use crate::table::StoreAddr;

#[derive(Debug, Args)]
pub struct UiArgs {
    /// The table store: a SQLite file, or a PostgreSQL database
    /// (`postgresql://USER@HOST:PORT/DB[?schema=NAME]`).
    #[arg(
        long,
        value_name = "PATH|URL",
        env = "KAPPA_TABLE_DB",
        default_value = crate::table::DEFAULT_PATH
    )]
    table_db: StoreAddr,
    /// Where to serve the page: HOST:PORT, or :PORT for 127.0.0.1.
    #[arg(long, value_name = "ADDR", default_value = ":9187")]
    addr: String,
}

pub fn run(args: UiArgs) -> anyhow::Result<()> {
    // Refuse a path with no store at once, rather than serve an error page.
    drop(crate::table::open_read_only(&args.table_db)?);
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone())
            .context("cannot install signal handler")?;
    }
    let server = super::stream::serve_status(&args.addr, &args.table_db, None)?;
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(server);
    Ok(())
}
