//! PostgreSQL for tests: the DSN comes from `GAK_PG_DSN`, else the local
//! server at 127.0.0.1:5432. Whether a test runs without it is decided in
//! one place, [`crate::suite::POSTGRES`]: ignored (and counted) on a
//! developer's machine, a failure under `CI=true`.
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use gak::ManualClock;
use gak::blocking::{Kernel, run_future as run};
use gak::store::postgres::PostgresBackend;

const LOCAL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The DSN to test against if the server answers, else why not. Use it
/// through [`crate::suite::Suite::needs`] with [`crate::suite::POSTGRES`].
/// It makes a schema of this process's own (the whole set-up a test's
/// schema gets) and drops it: the probe leaves nothing behind.
pub fn probe() -> Result<String, String> {
    let dsn = std::env::var("GAK_PG_DSN").unwrap_or_else(|_| LOCAL.to_owned());
    PostgresBackend::parse(&dsn)
        .map_err(|e| e.to_string())
        .and_then(|b| {
            b.with_schema(&format!("gak_probe_{}", std::process::id()))
                .map_err(|e| e.to_string())
        })
        .and_then(|b| {
            run(b.ensure_schema()).map_err(|e| e.to_string())?;
            run(b.drop_schema()).map_err(|e| e.to_string())
        })
        .map(|()| dsn.clone())
        .map_err(|why| format!("unreachable at {dsn}: {why}"))
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A schema of its own for one test, dropped on drop.
pub struct Schema {
    backend: PostgresBackend,
    /// `dsn?schema=NAME`, for child processes.
    pub url: String,
    /// The schema's name.
    pub name: String,
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
            name,
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
