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
use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use gak_rules::StoreFault;

pub mod facts;
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod url;

/// The tables a binding must provide (generated from the WIT and
/// `host/sql/store.json`): the kernel's, plus `downstream`, a key-value
/// space sink bodies may write in the sink's transaction.
pub use facts::{TABLES, prefix_end};

pub use url::hide_password;

/// One entry of a write set: `Some(value)` inserts or overwrites the key,
/// `None` removes it if present.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Write<'a> {
    /// One of [`TABLES`].
    pub table: &'static str,
    /// The key.
    pub key: &'a str,
    /// The new value, or `None` to delete.
    pub value: Option<&'a str>,
}

/// A bounded range read: at most `limit` entries of `table` whose key
/// starts with `prefix` and sorts strictly after `after`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span<'a> {
    /// One of [`TABLES`].
    pub table: &'static str,
    /// The key prefix (empty: every key).
    pub prefix: &'a str,
    /// Keys strictly after this.
    pub after: Option<&'a str>,
    /// At most this many entries.
    pub limit: u32,
}

/// What one [`Session::read`] answers: a value per key, a page per span.
pub type Read = (Vec<Option<String>>, Vec<Vec<(String, String)>>);

/// What every store call returns: a boxed future, so bindings can be
/// chosen at run time (`Box<dyn Session>`). Bindings that never wait
/// (memory, SQLite) return futures that are ready at once.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreFault>> + Send + 'a>>;

/// A future that is ready at once with `value`: what synchronous bindings
/// return.
pub fn ready<'a, T: Send + 'a>(value: Result<T, StoreFault>) -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

/// A database (or map) the kernel can run against.
pub trait Backend: Send + Sync + 'static {
    /// A new session (connection) for one worker.
    fn session(&self) -> StoreFuture<'_, Box<dyn Session>>;
    /// A human description, without secrets.
    fn describe(&self) -> String;
    /// Whether this binding's calls block the calling thread (SQLite waits
    /// for the disk and for other writers): the async API then runs each
    /// call in place with `block_in_place` (or on tokio's blocking pool on a
    /// current-thread runtime).
    fn blocks_thread(&self) -> bool {
        false
    }

    /// Every entry of every table, as (table, key, value), in one
    /// transaction: for operators, and for tests comparing store states.
    fn dump(&self) -> StoreFuture<'_, Vec<(String, String, String)>> {
        Box::pin(async move {
            let mut session = self.session().await?;
            session.begin().await?;
            let all = dump_tables(&mut *session).await;
            session.rollback().await;
            all
        })
    }
}

async fn dump_tables(
    session: &mut dyn Session,
) -> Result<Vec<(String, String, String)>, StoreFault> {
    let mut all = Vec::new();
    for table in TABLES {
        let mut after: Option<String> = None;
        loop {
            let page = session.scan(table, "", after.as_deref(), 1000).await?;
            let full = page.len() == 1000;
            after = page.last().map(|(k, _)| k.clone());
            all.extend(page.into_iter().map(|(k, v)| (table.to_owned(), k, v)));
            if !full {
                break;
            }
        }
    }
    Ok(all)
}

/// One worker's connection. At most one transaction is open at a time.
///
/// Every call but `begin` acts inside the open transaction; a call without
/// one fails (never silently autocommits).
pub trait Session: Send + 'static {
    /// Open a transaction, taking what it needs to write up front.
    fn begin(&mut self) -> StoreFuture<'_, ()>;
    /// Read several keys in order, serialized against every transaction that
    /// writes them (see the contract above).
    fn get_many<'a>(
        &'a mut self,
        keys: &'a [(&'static str, &'a str)],
    ) -> StoreFuture<'a, Vec<Option<String>>>;
    /// Point reads that pass over keys an overlapping transaction holds at
    /// this moment (WIT `store.try-read`, SPEC 10's skip-locked claiming):
    /// `None` for such a key (neither read nor locked, answered without
    /// waiting), else its value, read and locked as [`Session::get_many`]
    /// does. A binding whose transactions exclude each other (memory,
    /// SQLite) never holds one: the default reads every key.
    fn try_get_many<'a>(
        &'a mut self,
        keys: &'a [(&'static str, &'a str)],
    ) -> StoreFuture<'a, Vec<Option<Option<String>>>> {
        Box::pin(async move { Ok(self.get_many(keys).await?.into_iter().map(Some).collect()) })
    }
    /// Apply a write set (every key at most once) inside the transaction,
    /// taking the locks a read of its keys would. A binding MAY defer the
    /// statements until the next read or the commit (PostgreSQL sends them
    /// with `COMMIT`); reads MUST still see them.
    fn write<'a>(&'a mut self, writes: &'a [Write<'a>]) -> StoreFuture<'a, ()>;
    /// At most `limit` entries whose key starts with `prefix` and sorts
    /// strictly after `after`, ordered by key bytes, served from the key
    /// index (never a filter over the table). A snapshot read: it need not
    /// lock the range.
    fn scan<'a>(
        &'a mut self,
        table: &'static str,
        prefix: &'a str,
        after: Option<&'a str>,
        limit: u32,
    ) -> StoreFuture<'a, Vec<(String, String)>>;
    /// Point reads and range reads together, answered in order: what one
    /// decision reads (WIT `store.read`). A binding that talks to a server
    /// sends them in one round trip.
    fn read<'a>(
        &'a mut self,
        keys: &'a [(&'static str, &'a str)],
        spans: &'a [Span<'a>],
    ) -> StoreFuture<'a, Read> {
        Box::pin(async move {
            let values = if keys.is_empty() {
                Vec::new()
            } else {
                self.get_many(keys).await?
            };
            let mut pages = Vec::with_capacity(spans.len());
            for s in spans {
                pages.push(self.scan(s.table, s.prefix, s.after, s.limit).await?);
            }
            Ok((values, pages))
        })
    }
    /// Insert or overwrite one key (a one-entry [`Session::write`]).
    fn put<'a>(
        &'a mut self,
        table: &'static str,
        key: &'a str,
        value: &'a str,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let one = [Write {
                table,
                key,
                value: Some(value),
            }];
            self.write(&one).await
        })
    }
    /// Remove one key if present (a one-entry [`Session::write`]).
    fn delete<'a>(&'a mut self, table: &'static str, key: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let one = [Write {
                table,
                key,
                value: None,
            }];
            self.write(&one).await
        })
    }
    /// Make the transaction's writes durable and visible. An error means the
    /// outcome is unknown unless the binding knows the commit never reached
    /// the database.
    fn commit(&mut self) -> StoreFuture<'_, ()>;
    /// Discard the transaction's writes. Never fails: a binding that cannot
    /// roll back must drop its connection.
    fn rollback(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
    /// A fenced sink's body (or a `with_downstream` body) is about to run on
    /// the open transaction: a binding that lends the body its driver handle
    /// refuses transaction control through it from now on (HOSTS.md 12).
    fn body_started(&mut self) {}
    /// The body returned. An error when the transaction can no longer be
    /// committed as the kernel opened it: a statement of it failed (a
    /// PostgreSQL transaction is then aborted and its `COMMIT` would answer
    /// `ROLLBACK`), or the transaction is no longer open.
    fn body_ended(&mut self) -> StoreFuture<'_, ()> {
        ready(Ok(()))
    }
    /// The database's clock, when the binding judges expiry by it.
    fn now(&mut self) -> Option<StoreFuture<'_, u64>> {
        None
    }
    /// The binding's own session type, for the accessors each binding adds
    /// to [`crate::Downstream`] (the SQLite connection, the PostgreSQL
    /// client) without this trait naming any database.
    fn as_any(&mut self) -> &mut dyn Any;
}

/// Read one key (a convenience over [`Session::get_many`]).
pub async fn get_one(
    session: &mut dyn Session,
    table: &'static str,
    key: &str,
) -> Result<Option<String>, StoreFault> {
    Ok(session.get_many(&[(table, key)]).await?.pop().flatten())
}

/// Open a backend from a store URL: `memory:`, `sqlite:PATH` (or a bare
/// path ending in `.db`), `postgres://user@host:port/db?schema=NAME&clock=db`.
pub async fn open(url: &str) -> Result<Arc<dyn Backend>, crate::OpenError> {
    match facts::store_kind(url) {
        Some(facts::StoreKind::Postgres) => {
            #[cfg(feature = "postgres")]
            return Ok(Arc::new(postgres::PostgresBackend::open(url).await?));
            #[cfg(not(feature = "postgres"))]
            return Err(crate::OpenError::BadOption(
                "this build of gak has no PostgreSQL binding (cargo feature `postgres`)".into(),
            ));
        }
        Some(facts::StoreKind::Memory) => Ok(Arc::new(memory::MemoryBackend::default())),
        Some(facts::StoreKind::Sqlite) => {
            let path = url.strip_prefix(facts::SQLITE_SCHEME).unwrap_or(url);
            #[cfg(feature = "sqlite")]
            return Ok(Arc::new(sqlite::SqliteBackend::open(path)?));
            #[cfg(not(feature = "sqlite"))]
            return Err(crate::OpenError::BadOption(format!(
                "this build of gak has no SQLite binding (cargo feature `sqlite`) for {path}"
            )));
        }
        None => Err(crate::OpenError::UnknownStore(url.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn prefix_end_bounds_exactly_the_prefixed_strings() {
        assert_eq!(prefix_end(""), None);
        assert_eq!(prefix_end("ts/open/").as_deref(), Some("ts/open0"));
        assert_eq!(prefix_end("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_end("\u{D7FF}").as_deref(), Some("\u{E000}"));
        assert_eq!(prefix_end("\u{10FFFF}"), None);
        let end = prefix_end("ab").unwrap();
        for inside in ["ab", "ab\u{10FFFF}\u{10FFFF}", "abz"] {
            assert!(inside < end.as_str(), "{inside}");
        }
        assert!("ac" >= end.as_str());
    }
}
