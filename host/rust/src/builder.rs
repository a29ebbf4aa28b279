//! [`Builder`]: every setting of a kernel beyond its store URL.
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::OpenError;
use crate::clock::Clock;
use crate::kernel::{Kernel, system_clock};
use crate::protocol::Retry;
use crate::store::{self, Backend};

impl Kernel {
    /// Open a kernel on a store URL (`memory:`, `sqlite:PATH`,
    /// `postgres://…`) with the system clock and default settings; see
    /// [`Kernel::builder`] for the rest.
    ///
    /// # Errors
    /// [`OpenError`] when the URL names no binding, an option is malformed,
    /// the store cannot be reached, or the component cannot be loaded.
    pub async fn open(url: &str) -> Result<Kernel, OpenError> {
        Kernel::builder().store(url).open().await
    }

    /// Settings beyond the URL: clock, pool size, timeouts, retries, TLS.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// A kernel over any binding and clock, with default settings.
    ///
    /// # Errors
    /// [`OpenError::Component`] when the component cannot be loaded.
    pub fn with_backend(
        backend: Arc<dyn Backend>,
        clock: Arc<dyn Clock>,
    ) -> Result<Kernel, OpenError> {
        Kernel::builder().backend(backend).clock(clock).build()
    }
}

/// Every setting of a kernel. Start from [`Kernel::builder`].
///
/// ```
/// # async fn demo() -> Result<(), gak::OpenError> {
/// use std::time::Duration;
/// let kernel = gak::Kernel::builder()
///     .store("memory:")
///     .max_connections(8)
///     .connection_wait(Duration::from_secs(2))
///     .open()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Default)]
#[must_use]
pub struct Builder {
    url: Option<String>,
    backend: Option<Arc<dyn Backend>>,
    #[cfg(feature = "postgres")]
    postgres: Option<(tokio_postgres::Config, String)>,
    clock: Option<Arc<dyn Clock>>,
    max_connections: Option<usize>,
    connection_wait: Option<Duration>,
    statement_timeout: Option<Duration>,
    retry: Retry,
    cache_dir: Option<PathBuf>,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("max_connections", &self.max_connections)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// Connections (and component instances) a kernel keeps at most, unless
/// told otherwise.
pub const DEFAULT_MAX_CONNECTIONS: usize = store::facts::MAX_CONNECTIONS;
/// How long a call waits for a free connection — and for a lock another
/// transaction holds — unless told otherwise (HOSTS.md rule 15; the same
/// in every host).
pub const DEFAULT_CONNECTION_WAIT: Duration =
    Duration::from_millis(store::facts::CONNECTION_WAIT_MS);

impl Builder {
    /// The store: `memory:`, `sqlite:PATH[?synchronous=normal]`,
    /// `postgres://USER@HOST:PORT/DB?schema=NAME&clock=db&sslmode=…`.
    pub fn store(mut self, url: &str) -> Self {
        self.url = Some(url.to_owned());
        self
    }

    /// Any binding, already opened (a custom one, or one shared with other
    /// kernels).
    pub fn backend(mut self, backend: Arc<dyn Backend>) -> Self {
        self.backend = Some(backend);
        self
    }

    /// PostgreSQL from an existing connection configuration (host, user,
    /// password, `ssl_mode`, …) and the schema to use.
    #[cfg(feature = "postgres")]
    pub fn postgres(mut self, config: tokio_postgres::Config, schema: &str) -> Self {
        self.postgres = Some((config, schema.to_owned()));
        self
    }

    /// The clock judging expiry (default: the system clock, never moving
    /// backwards).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// At most `n` connections (each with its component instance) at once;
    /// a call beyond that waits for one to be free (default 16).
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = Some(n.max(1));
        self
    }

    /// How long a call waits for a free connection, and for a lock another
    /// transaction holds (the memory binding's; PostgreSQL's `lock_timeout`),
    /// before failing with `storage` (default 5 s).
    pub fn connection_wait(mut self, wait: Duration) -> Self {
        self.connection_wait = Some(wait);
        self
    }

    /// PostgreSQL: fail any statement that runs longer (server-side
    /// `statement_timeout`), so a call stuck behind a lock becomes `storage`.
    pub fn statement_timeout(mut self, timeout: Duration) -> Self {
        self.statement_timeout = Some(timeout);
        self
    }

    /// How calls are re-run on store conflicts.
    pub fn retry(mut self, retry: Retry) -> Self {
        self.retry = retry;
        self
    }

    /// Where the compiled component is cached (default: `$GAK_CACHE_DIR`,
    /// else the user's cache dir). The compiled component is shared by the
    /// whole process: this applies when the first kernel is opened.
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Open the kernel: connect to the store and create its tables if
    /// missing.
    ///
    /// # Errors
    /// [`OpenError`] when no store was given, the URL is unknown or
    /// malformed, the store cannot be reached, or the component cannot be
    /// loaded.
    pub async fn open(mut self) -> Result<Kernel, OpenError> {
        if self.backend.is_none() {
            let backend = self.open_store().await?;
            self.backend = Some(backend);
        }
        self.build()
    }

    #[cfg(not(feature = "postgres"))]
    async fn open_store(&mut self) -> Result<Arc<dyn Backend>, OpenError> {
        match self.url.as_deref() {
            Some(url) => store::open(url).await,
            None => Err(OpenError::BadOption("no store given".into())),
        }
    }

    #[cfg(feature = "postgres")]
    async fn open_store(&mut self) -> Result<Arc<dyn Backend>, OpenError> {
        use store::postgres::PostgresBackend;
        let pg = match (self.postgres.take(), self.url.as_deref()) {
            (Some((config, schema)), _) => Some(PostgresBackend::from_config(config, &schema)?),
            (None, Some(url))
                if store::facts::store_kind(url) == Some(store::facts::StoreKind::Postgres) =>
            {
                Some(PostgresBackend::parse(url)?)
            }
            (None, Some(url)) => return store::open(url).await,
            (None, None) => return Err(OpenError::BadOption("no store given".into())),
        };
        let mut pg = pg.expect("a PostgreSQL backend");
        if let Some(timeout) = self.statement_timeout {
            pg.set_statement_timeout(timeout);
        }
        pg.set_lock_timeout(self.connection_wait.unwrap_or(DEFAULT_CONNECTION_WAIT));
        pg.ensure_schema().await.map_err(OpenError::Store)?;
        Ok(Arc::new(pg))
    }

    /// Build the kernel over the binding given with [`Builder::backend`]
    /// (no I/O).
    ///
    /// # Errors
    /// [`OpenError`] when no binding was given or the component cannot be
    /// loaded.
    pub fn build(self) -> Result<Kernel, OpenError> {
        let backend = self
            .backend
            .ok_or_else(|| OpenError::BadOption("no store given: use Builder::open".into()))?;
        if let Some(dir) = &self.cache_dir {
            crate::engine::set_cache_dir(dir.clone());
        }
        Kernel::assemble(
            backend,
            self.clock.unwrap_or_else(system_clock),
            self.max_connections.unwrap_or(DEFAULT_MAX_CONNECTIONS),
            self.connection_wait.unwrap_or(DEFAULT_CONNECTION_WAIT),
            Retry {
                attempts: self.retry.attempts.max(1),
                ..self.retry
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_grow_and_stay_bounded() {
        let retry = Retry::default();
        for attempt in 1..40 {
            let d = retry.delay(attempt);
            assert!(d <= retry.max, "{attempt}: {d:?}");
        }
        assert!(retry.delay(1) <= Duration::from_millis(1));
        assert!(retry.delay(12) >= Duration::from_millis(250));
    }
}
