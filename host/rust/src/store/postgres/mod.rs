//! The PostgreSQL binding: many hosts on many machines sharing one database.
//!
//! Every call awaits tokio-postgres on the caller's runtime (the blocking API
//! supplies one), and drives its session's connection on the caller's
//! thread (`driver`); statements are prepared once per connection and pipelined
//! where the protocol allows. TLS follows the URL's `sslmode` (`disable`,
//! `prefer` — the default — or `require`), with rustls and the webpki roots;
//! `statement_timeout_ms` bounds every statement server-side.
//!
//! # Isolation: advisory locks, not SERIALIZABLE
//! Every key a transaction reads or writes is first locked with
//! `pg_advisory_xact_lock(hashtextextended('<schema>/<table>/<key>', 0))`
//! (hashed by the server, so hosts in every language lock the same ids;
//! schema and table names cannot contain `/`), then read in a *separate*
//! statement under READ COMMITTED, so the read's snapshot is taken after the
//! lock is held and sees the previous holder's commit. Unlike row locks
//! (`SELECT … FOR UPDATE`), an advisory lock also covers a key whose row does
//! not exist yet: two claimers of a fresh key serialize instead of both
//! reading "absent". SERIALIZABLE would give the same safety, but on a hot
//! key it turns contention into a storm of aborted transactions (measured:
//! ~16 k serialization failures in 20 s at 8 clients on one row), where a lock
//! makes the loser simply wait its turn. The two statements of a read are
//! pipelined, so the lock costs no extra network round trip. Deadlocks
//! (40P01) and serialization failures (40001) are conflicts: the kernel
//! re-runs the whole call with backoff. A hash collision between two keys
//! only makes them wait for each other.
//!
//! # Layout
//! One schema per kernel (`?schema=NAME`, default `gak`), validated as a
//! plain identifier and never spliced from anything else. Each table is
//! `key text primary key, value jsonb`: readable with `psql`, e.g.
//! `SELECT key, value->>'state' FROM gak.tasks`.
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use gak_rules::StoreFault;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Config, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::{Backend, Session, StoreFuture, facts};
use crate::OpenError;

pub(crate) mod driver;
pub(crate) mod lex;
mod session;
#[cfg(target_os = "linux")]
mod socket;
mod tls;

pub use lex::Refusal;

pub(crate) use driver::Driver;
pub use session::PostgresSession;
pub(crate) use session::XACT;

/// The port of a host the URL gives none for.
const DEFAULT_PORT: u16 = 5432;

/// How long connecting may take before the binding gives up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Which clock judges expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockSource {
    /// The kernel's injected clock (system time by default).
    Host,
    /// The database server's `clock_timestamp()`: one clock for every host,
    /// whatever their own clocks say. Recommended when hosts run on several
    /// machines.
    Database,
}

/// A schema in a PostgreSQL database.
#[derive(Clone)]
pub struct PostgresBackend {
    config: Config,
    tls: Option<MakeRustlsConnect>,
    schema: String,
    clock: ClockSource,
    /// Highest database time handed out, so expiry never moves backwards.
    last_now: Arc<AtomicU64>,
    target: String,
    /// Sink bodies' statements are lexed and refused when they would end
    /// the transaction (always, but in the host's own test of the check
    /// behind it).
    guard_statements: bool,
}

impl std::fmt::Debug for PostgresBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresBackend")
            .field("target", &self.target)
            .field("schema", &self.schema)
            .field("clock", &self.clock)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// A schema name: a plain lowercase identifier, so it can be quoted safely
/// and can never name another schema through punctuation.
pub use crate::store::facts::valid_schema;

pub(crate) fn fault(e: tokio_postgres::Error) -> StoreFault {
    match e.code() {
        Some(c)
            if *c == SqlState::T_R_SERIALIZATION_FAILURE
                || *c == SqlState::T_R_DEADLOCK_DETECTED =>
        {
            StoreFault::Conflict(e.to_string())
        }
        // `lock_timeout` (the connection wait): the lock's holder kept it
        // longer — a busy server, or a transaction that waits for this one
        // (a sink body waiting for a call of its own). Busy, as SQLite's
        // busy timeout is: the call re-runs, and after the retry bound ends
        // with `storage`. Nothing of the transaction committed.
        Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE => StoreFault::Conflict(format!(
            "waited longer than the lock timeout (the connection wait): {}",
            said(&e)
        )),
        _ => StoreFault::Failure(said(&e)),
    }
}

/// What the server (or the connection) said: the server's own message and
/// code for a database error — not tokio-postgres's bare "db error" — and
/// the chain of causes otherwise. (No server message holds a password.)
pub(crate) fn said(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{}: {} ({})", db.severity(), db.message(), db.code().code());
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

impl PostgresBackend {
    /// Open `postgres://user@host:port/db?schema=NAME&clock=db`, creating the
    /// schema and its tables if needed.
    pub async fn open(url: &str) -> Result<Self, OpenError> {
        let backend = Self::parse(url)?;
        backend.ensure_schema().await.map_err(OpenError::Store)?;
        Ok(backend)
    }

    /// Parse the URL without touching the server (the grammar every host
    /// shares: [`crate::store::url`]). Besides libpq's parameters:
    /// `schema=NAME`, `clock=db|host`, `statement_timeout_ms=N`; `sslmode`
    /// and `sslrootcert` as in libpq (see the `tls` module). No message
    /// holds a byte of the URL's user information.
    pub fn parse(url: &str) -> Result<Self, OpenError> {
        let parts = crate::store::url::parse_postgres(url)
            .map_err(|e| OpenError::BadOption(format!("postgres URL: {e}")))?;
        let mut config = Config::new();
        if let Some(user) = &parts.user {
            config.user(user);
        }
        if let Some(password) = &parts.password {
            config.password(password);
        }
        for (host, port) in &parts.hosts {
            config.host(host);
            config.port(port.unwrap_or(DEFAULT_PORT));
        }
        if let Some(db) = &parts.dbname {
            config.dbname(db);
        }
        let mut schema = facts::POSTGRES_DEFAULT_SCHEMA.to_owned();
        let mut clock = ClockSource::Host;
        let mut statement_timeout = None;
        let (mut sslmode, mut rootcert) = (None, None);
        for (name, value) in &parts.params {
            let value = value.as_str();
            match name.as_str() {
                "sslmode" => sslmode = Some(value),
                "sslrootcert" => rootcert = Some(value),
                "schema" => schema = value.to_owned(),
                "clock" => {
                    clock = match value {
                        "db" | "database" => ClockSource::Database,
                        "host" => ClockSource::Host,
                        other => {
                            return Err(OpenError::BadOption(format!(
                                "clock={other} (expected db or host)"
                            )));
                        }
                    }
                }
                "statement_timeout_ms" => {
                    let ms: u64 = value.parse().map_err(|_| {
                        OpenError::BadOption(format!("statement_timeout_ms={value} (expected ms)"))
                    })?;
                    statement_timeout = Some(Duration::from_millis(ms));
                }
                other => libpq_param(&mut config, other, value)?,
            }
        }
        if !valid_schema(&schema) {
            return Err(OpenError::BadOption(format!(
                "schema {schema:?}: expected a lowercase identifier ([a-z_][a-z0-9_]*, at most 63 bytes, not pg_*)"
            )));
        }
        let tls = tls::Mode::parse(sslmode, rootcert)?;
        config.ssl_mode(tls.ssl_mode());
        let mut backend = PostgresBackend::with_tls(config, &schema, &tls)?;
        backend.clock = clock;
        if let Some(timeout) = statement_timeout {
            backend.set_statement_timeout(timeout);
        }
        Ok(backend)
    }

    /// A backend over an existing connection configuration (host, user,
    /// password, `ssl_mode`, …) and a schema. `prefer` and `require`
    /// encrypt without verifying the server, as in libpq.
    pub fn from_config(config: Config, schema: &str) -> Result<Self, OpenError> {
        let tls = tls::Mode::of(config.get_ssl_mode());
        PostgresBackend::with_tls(config, schema, &tls)
    }

    fn with_tls(mut config: Config, schema: &str, mode: &tls::Mode) -> Result<Self, OpenError> {
        if !valid_schema(schema) {
            return Err(OpenError::BadOption(format!("schema {schema:?}")));
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let tls = mode.connector()?;
        let target = describe_target(&config);
        Ok(PostgresBackend {
            config,
            tls,
            schema: schema.to_owned(),
            clock: ClockSource::Host,
            last_now: Arc::new(AtomicU64::new(0)),
            target,
            guard_statements: true,
        })
    }

    /// Turn off the guard that lexes sink bodies' statements, leaving only
    /// the check behind it (the transaction id after the body): for the
    /// host's own test that the check alone keeps a body's `COMMIT` or
    /// `ROLLBACK` from being reported as a committed call. Never for use
    /// otherwise.
    #[doc(hidden)]
    pub fn without_statement_guard_for_tests(mut self) -> Self {
        self.guard_statements = false;
        self
    }

    pub(crate) fn guards_statements(&self) -> bool {
        self.guard_statements
    }

    /// Bound every statement server-side (`statement_timeout`): a call stuck
    /// behind a lock fails with `storage` instead of hanging.
    pub fn set_statement_timeout(&mut self, timeout: Duration) {
        self.add_option("statement_timeout", timeout);
    }

    /// Bound every wait for a lock server-side (`lock_timeout`; the kernel's
    /// connection wait): a call that waits for a transaction that waits for
    /// it — a sink body waiting for a call of its own on the same kernel,
    /// from another thread — fails with `storage` instead of hanging.
    pub fn set_lock_timeout(&mut self, timeout: Duration) {
        self.add_option("lock_timeout", timeout);
    }

    fn add_option(&mut self, name: &str, timeout: Duration) {
        let option = format!("-c {name}={}", timeout.as_millis().max(1));
        let options = match self.config.get_options() {
            Some(existing) if !existing.is_empty() => format!("{existing} {option}"),
            _ => option,
        };
        self.config.options(&options);
    }

    /// Judge expiry by the server's clock (`clock=db`).
    pub fn set_clock(&mut self, clock: ClockSource) {
        self.clock = clock;
    }

    /// The schema this backend uses.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The same database, another schema.
    pub fn with_schema(&self, schema: &str) -> Result<Self, OpenError> {
        if !valid_schema(schema) {
            return Err(OpenError::BadOption(format!("schema {schema:?}")));
        }
        Ok(PostgresBackend {
            schema: schema.to_owned(),
            last_now: Arc::new(AtomicU64::new(0)),
            ..self.clone()
        })
    }

    /// A new connection to the server, as this binding's sessions get one
    /// (TLS, timeouts and options from the URL): for tools that run their
    /// own SQL beside the kernel. The connection's driver runs as a task on
    /// the current tokio runtime, ending when the client is dropped or the
    /// server goes away.
    ///
    /// # Errors
    /// `StoreFault::Failure` when the server cannot be reached.
    pub async fn connect(&self) -> Result<Client, StoreFault> {
        let (client, connection) = self.connect_driven().await?;
        tokio::spawn(connection);
        Ok(client)
    }

    /// A new connection whose I/O is left to the caller: a session drives
    /// it from the futures that wait for its answers ([`driver`]), on the
    /// caller's thread, instead of a task on the runtime's worker. Made on
    /// a calling thread of the blocking API, its socket's readiness is
    /// that thread's to wait for too ([`socket`]).
    pub(crate) async fn connect_driven(&self) -> Result<(Client, driver::Connection), StoreFault> {
        let failed = |e: tokio_postgres::Error| {
            StoreFault::Failure(format!(
                "cannot connect to PostgreSQL at {}: {}",
                self.target,
                said(&e)
            ))
        };
        #[cfg(target_os = "linux")]
        if crate::drive::on_caller_thread() && socket::follows(&self.config) {
            let failed = |e: String| {
                StoreFault::Failure(format!(
                    "cannot connect to PostgreSQL at {}: {e}",
                    self.target
                ))
            };
            return match &self.tls {
                None => socket::connect(&self.config, NoTls).await.map_err(failed),
                Some(tls) => socket::connect(&self.config, tls.clone())
                    .await
                    .map_err(failed),
            };
        }
        match &self.tls {
            None => {
                let (client, connection) = self.config.connect(NoTls).await.map_err(failed)?;
                Ok((client, Box::pin(async move { drop(connection.await) })))
            }
            Some(tls) => {
                let (client, connection) =
                    self.config.connect(tls.clone()).await.map_err(failed)?;
                Ok((client, Box::pin(async move { drop(connection.await) })))
            }
        }
    }

    async fn admin(&self, sql: &str) -> Result<(), StoreFault> {
        let client = self.connect().await?;
        client.batch_execute(sql).await.map_err(fault)
    }

    /// Create the schema, its tables and its functions if missing
    /// (`host/sql/postgres.sql`, shared with every host; idempotent, safe to
    /// race: set-ups serialize on one advisory lock).
    pub async fn ensure_schema(&self) -> Result<(), StoreFault> {
        // The schema name is validated (`valid_schema`): an identifier, never data.
        let ddl = SCHEMA_SQL.replace("@schema@", &self.schema);
        let lock = facts::POSTGRES_SETUP_LOCK;
        self.admin(&format!(
            "BEGIN; SELECT pg_advisory_xact_lock({lock}); {ddl} COMMIT;"
        ))
        .await
    }

    /// Drop the schema and everything in it.
    pub async fn drop_schema(&self) -> Result<(), StoreFault> {
        let s = &self.schema;
        self.admin(&format!("DROP SCHEMA IF EXISTS \"{s}\" CASCADE"))
            .await
    }
}

/// A libpq parameter of the URL's query, onto `config`. The value is never
/// the user information (that ended at the last `@`), but a `password=`
/// parameter's is a password too, and never shown.
fn libpq_param(config: &mut Config, name: &str, value: &str) -> Result<(), OpenError> {
    let bad = |expected: &str| {
        let shown = if name == "password" { "***" } else { value };
        OpenError::BadOption(format!("{name}={shown} (expected {expected})"))
    };
    let seconds = |v: &str| v.parse::<u64>().map(Duration::from_secs);
    match name {
        "host" => {
            for h in value.split(',') {
                config.host(h);
            }
        }
        "hostaddr" => {
            for h in value.split(',') {
                config.hostaddr(h.parse().map_err(|_| bad("an IP address"))?);
            }
        }
        "port" => {
            for p in value.split(',') {
                config.port(p.parse().map_err(|_| bad("a port"))?);
            }
        }
        "user" => {
            config.user(value);
        }
        "password" => {
            config.password(value);
        }
        "dbname" => {
            config.dbname(value);
        }
        "application_name" => {
            config.application_name(value);
        }
        "options" => {
            config.options(value);
        }
        "connect_timeout" => {
            config.connect_timeout(seconds(value).map_err(|_| bad("seconds"))?);
        }
        "keepalives" => {
            config.keepalives(match value {
                "1" => true,
                "0" => false,
                _ => return Err(bad("0 or 1")),
            });
        }
        "keepalives_idle" => {
            config.keepalives_idle(seconds(value).map_err(|_| bad("seconds"))?);
        }
        "target_session_attrs" => {
            config.target_session_attrs(match value {
                "any" => tokio_postgres::config::TargetSessionAttrs::Any,
                "read-write" => tokio_postgres::config::TargetSessionAttrs::ReadWrite,
                "read-only" => tokio_postgres::config::TargetSessionAttrs::ReadOnly,
                _ => return Err(bad("any, read-write or read-only")),
            });
        }
        "channel_binding" => {
            config.channel_binding(match value {
                "disable" => tokio_postgres::config::ChannelBinding::Disable,
                "prefer" => tokio_postgres::config::ChannelBinding::Prefer,
                "require" => tokio_postgres::config::ChannelBinding::Require,
                _ => return Err(bad("disable, prefer or require")),
            });
        }
        other => {
            return Err(OpenError::BadOption(format!(
                "unknown PostgreSQL option {other:?} (gak takes schema, clock, statement_timeout_ms, sslmode, sslrootcert and libpq's host, hostaddr, port, user, password, dbname, application_name, options, connect_timeout, keepalives, keepalives_idle, target_session_attrs, channel_binding)"
            )));
        }
    }
    Ok(())
}

/// The tables and the two functions every host creates in a schema
/// (`@schema@` stands for its name).
const SCHEMA_SQL: &str = include_str!("../../../sql/postgres.sql");

fn describe_target(config: &Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            #[allow(unreachable_patterns)]
            other => format!("{other:?}"),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}")
}

impl Backend for PostgresBackend {
    fn session(&self) -> StoreFuture<'_, Box<dyn Session>> {
        Box::pin(async move {
            let (client, connection) = self.connect_driven().await?;
            let session: Box<dyn Session> = Box::new(PostgresSession::new(
                client,
                driver::Driver::new(connection),
                self.clone(),
            ));
            Ok(session)
        })
    }

    fn describe(&self) -> String {
        format!("postgres://{}/ (schema {})", self.target, self.schema)
    }
}
