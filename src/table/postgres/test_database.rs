//! A database per test, for tests of code that uses the PostgreSQL store
//! (kappa's own, and a user's): created on the server that
//! `KAPPA_TEST_POSTGRES` names (`.ci/run` starts one and sets it), dropped,
//! with its connections, when the guard is. Without that variable a test is
//! skipped with a printed reason, or fails when `KAPPA_REQUIRE_SERVICES` is
//! set (as in CI): a test never passes silently without its server.

use std::sync::atomic::{AtomicUsize, Ordering};

/// A database created for one test on the server `KAPPA_TEST_POSTGRES`
/// names, dropped (with its connections) when this is.
pub struct TestDatabase {
    admin: String,
    name: String,
    /// The new database's URL.
    pub url: String,
}

impl TestDatabase {
    /// A fresh database, or `None` (with the reason printed) when no server
    /// is configured; panics then under `KAPPA_REQUIRE_SERVICES`.
    pub fn create() -> Option<TestDatabase> {
        static N: AtomicUsize = AtomicUsize::new(0);
        let Ok(admin) = std::env::var("KAPPA_TEST_POSTGRES") else {
            let why = "no PostgreSQL server: set KAPPA_TEST_POSTGRES=postgresql://USER@HOST:PORT/DB \
                       (.ci/run starts one and sets it)";
            assert!(std::env::var("KAPPA_REQUIRE_SERVICES").is_err(), "{why}");
            say!("SKIPPED what needs PostgreSQL in this test: {why}");
            return None;
        };
        let name = format!(
            "kappa_unit_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let mut client = ::postgres::Client::connect(&admin, ::postgres::NoTls)
            .unwrap_or_else(|e| panic!("cannot connect to KAPPA_TEST_POSTGRES: {e}"));
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        let base = admin.split('?').next().unwrap();
        let url = format!("{}/{name}", &base[..base.rfind('/').unwrap()]);
        Some(TestDatabase { admin, name, url })
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if let Ok(mut c) = ::postgres::Client::connect(&self.admin, ::postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}
