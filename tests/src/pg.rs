//! PostgreSQL for tests: the DSN comes from `GAK_PG_DSN`, else the local
//! server at 127.0.0.1:5432. Unreachable → the test is skipped with a loud
//! message, except under `CI=true`, where it fails.
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use gak::ManualClock;
use gak::blocking::{Kernel, run_future as run};
use gak::store::postgres::PostgresBackend;

const LOCAL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The DSN to test against, or `None` (after a loud message) to skip.
pub fn dsn() -> Option<String> {
    let dsn = std::env::var("GAK_PG_DSN").unwrap_or_else(|_| LOCAL.to_owned());
    let reachable = PostgresBackend::parse(&dsn)
        .map_err(|e| e.to_string())
        .and_then(|b| b.with_schema("gak_probe").map_err(|e| e.to_string()))
        .and_then(|b| run(b.ensure_schema()).map_err(|e| e.to_string()));
    match reachable {
        Ok(()) => Some(dsn),
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true and PostgreSQL is unreachable at {dsn}: {why}")
        }
        Err(why) => {
            eprintln!(
                "\n!!!!!!!! SKIPPING: PostgreSQL unreachable at {dsn}: {why}\n!!!!!!!! set GAK_PG_DSN to run the Postgres suites\n"
            );
            None
        }
    }
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A schema of its own for one test, dropped on drop.
pub struct Schema {
    backend: PostgresBackend,
    /// `dsn?schema=NAME`, for child processes.
    pub url: String,
}

impl Schema {
    /// A fresh, empty schema named after the test.
    pub fn new(dsn: &str, label: &str) -> Schema {
        let name = format!(
            "t_{label}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let base = PostgresBackend::parse(dsn).expect("dsn");
        let backend = base.with_schema(&name).expect("schema name");
        run(backend.drop_schema()).expect("drop stale schema");
        run(backend.ensure_schema()).expect("create schema");
        let sep = if dsn.contains('?') { '&' } else { '?' };
        Schema {
            url: format!("{dsn}{sep}schema={name}"),
            backend,
        }
    }

    /// A kernel on this schema with the system clock.
    pub fn kernel(&self) -> Kernel {
        Kernel::open(&self.url).expect("open postgres kernel")
    }

    /// A kernel on this schema with a manual clock.
    pub fn kernel_with(&self, clock: Arc<ManualClock>) -> Kernel {
        let backend = PostgresBackend::parse(&self.url).expect("url");
        Kernel::with_backend(Arc::new(backend), clock).expect("kernel")
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let _ = run(self.backend.drop_schema());
    }
}

/// Whether a missing server must fail the run (`CI=true`).
pub fn required() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The DSN when the server answers, else why not — without printing or
/// panicking, for harnesses that report an unreachable server as *ignored*
/// (or, when [`required`], as failed) instead of passing silently.
pub fn probe() -> Result<String, String> {
    let dsn = std::env::var("GAK_PG_DSN").unwrap_or_else(|_| LOCAL.to_owned());
    PostgresBackend::parse(&dsn)
        .map_err(|e| e.to_string())
        .and_then(|b| b.with_schema("gak_probe").map_err(|e| e.to_string()))
        .and_then(|b| {
            run(b.ensure_schema()).map_err(|e| match e {
                gak::store::StoreFault::Conflict(m) | gak::store::StoreFault::Failure(m) => m,
            })
        })
        .map(|()| dsn.clone())
        .map_err(|why| format!("PostgreSQL is unreachable at {dsn}: {why} (set GAK_PG_DSN)"))
}
