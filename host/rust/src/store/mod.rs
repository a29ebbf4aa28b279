//! Store bindings: where the component's decisions are persisted.
//!
//! A [`Backend`] hands each worker a [`Session`] (its own connection). The
//! kernel wraps every exported call in one session transaction:
//! `begin` → the component's reads and writes → `commit` on success,
//! `rollback` on any refusal or failure.
//!
//! # The contract every binding MUST keep
//! - **Atomicity**: a transaction's writes become visible all at once at
//!   `commit`, or never.
//! - **Isolation**: transactions touching the same keys are serializable:
//!   two of them must behave as if one ran entirely before the other. That
//!   covers keys that do not exist yet (two claimers of a fresh key).
//! - **Own writes**: reads inside a transaction see its earlier writes.
//! - **Conflicts** (busy database, serialization failure, deadlock) are
//!   reported as [`StoreFault::Conflict`]; the kernel re-runs the whole call.
//! - **Data is never SQL**: table names come from a fixed set
//!   (`&'static str`), keys and values are bound parameters.
//!
//! The negative controls in `tests/` are bindings that break one of these
//! promises each; the conformance suite must catch every one.
use std::sync::Arc;

pub use gak_rules::StoreFault;

pub mod memory;
pub mod postgres;
pub mod sqlite;

/// The tables a binding must provide: the kernel's six, plus `downstream`,
/// a key-value space sink bodies may write in the sink's transaction.
pub const TABLES: [&str; 7] = [
    "snapshots",
    "outcomes",
    "actions",
    "resources",
    "sinks",
    "tasks",
    "downstream",
];

/// A database (or map) the kernel can run against.
pub trait Backend: Send + Sync + 'static {
    /// A new session for one worker.
    fn session(&self) -> Result<Box<dyn Session>, StoreFault>;
    /// A human description, without secrets.
    fn describe(&self) -> String;

    /// Every entry of every table, as (table, key, value), in one
    /// transaction: for operators, and for tests comparing store states.
    fn dump(&self) -> Result<Vec<(String, String, String)>, StoreFault> {
        let mut session = self.session()?;
        session.begin()?;
        let mut all = Vec::new();
        for table in TABLES {
            match session.scan(table) {
                Ok(rows) => all.extend(rows.into_iter().map(|(k, v)| (table.to_owned(), k, v))),
                Err(e) => {
                    session.rollback();
                    return Err(e);
                }
            }
        }
        session.rollback();
        Ok(all)
    }
}

/// One worker's connection. At most one transaction is open at a time.
pub trait Session: Send + 'static {
    /// Open a transaction, taking what it needs to write up front.
    fn begin(&mut self) -> Result<(), StoreFault>;
    /// Read a key.
    fn get(&mut self, table: &'static str, key: &str) -> Result<Option<String>, StoreFault>;
    /// Read several keys in order.
    fn get_many(
        &mut self,
        keys: &[(&'static str, &str)],
    ) -> Result<Vec<Option<String>>, StoreFault> {
        keys.iter().map(|(t, k)| self.get(t, k)).collect()
    }
    /// Insert or overwrite.
    fn put(&mut self, table: &'static str, key: &str, value: &str) -> Result<(), StoreFault>;
    /// Remove if present.
    fn delete(&mut self, table: &'static str, key: &str) -> Result<(), StoreFault>;
    /// Every entry, ordered by key bytes.
    fn scan(&mut self, table: &'static str) -> Result<Vec<(String, String)>, StoreFault>;
    /// Make the transaction's writes durable and visible.
    fn commit(&mut self) -> Result<(), StoreFault>;
    /// Discard the transaction's writes. Never fails: a binding that cannot
    /// roll back must drop its connection.
    fn rollback(&mut self);
    /// The SQLite connection, when the session is one, so a fenced sink's
    /// body can write its own tables in the same transaction.
    fn sqlite(&mut self) -> Option<&rusqlite::Connection> {
        None
    }
    /// The database's clock, when the binding judges expiry by it.
    fn now(&mut self) -> Option<Result<u64, StoreFault>> {
        None
    }
    /// Run a statement inside the open transaction, when the session is a
    /// PostgreSQL one (for fenced sink bodies writing their own tables).
    fn execute(
        &mut self,
        _sql: &str,
        _params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Option<Result<u64, StoreFault>> {
        None
    }
    /// Run a query inside the open transaction, when the session is a
    /// PostgreSQL one; every column must be `text` (cast in SQL).
    fn query_text(
        &mut self,
        _sql: &str,
        _params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Option<Result<Vec<Vec<Option<String>>>, StoreFault>> {
        None
    }
}

/// Open a backend from a store URL: `memory:`, `sqlite:PATH` (or a bare
/// path ending in `.db`), `postgres://user@host:port/db?schema=NAME&clock=db`.
pub fn open(url: &str) -> Result<Arc<dyn Backend>, crate::OpenError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(Arc::new(postgres::PostgresBackend::open(url)?));
    }
    if url == "memory" || url == "memory:" {
        return Ok(Arc::new(memory::MemoryBackend::default()));
    }
    if let Some(path) = url.strip_prefix("sqlite:") {
        return Ok(Arc::new(sqlite::SqliteBackend::open(path)?));
    }
    if url.ends_with(".db") || url.ends_with(".sqlite") {
        return Ok(Arc::new(sqlite::SqliteBackend::open(url)?));
    }
    Err(crate::OpenError::UnknownStore(url.to_owned()))
}
