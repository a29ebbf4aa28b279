//! The SQLite binding: the embedded default.
//!
//! A file database in WAL mode. Transactions are `BEGIN IMMEDIATE`: they
//! take the write lock up front, so two transactions — in threads or in
//! separate OS processes — never interleave their read-decide-write. (A
//! deferred `BEGIN` would let two claimers both read "open" and then race
//! to upgrade; one would fail late with SQLITE_BUSY mid-decision.) Within
//! a process, calls share one writing connection and commit in groups
//! (see `group`): one fsync for every call that arrived together.
//!
//! Each kernel table is `gak_<name>(key TEXT PRIMARY KEY, value TEXT)`
//! holding JSON, readable with `sqlite3` and its `->>` operator.
use std::any::Any;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use gak_rules::StoreFault;
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension};

use super::{Backend, Session, StoreFuture, TABLES, Write, ready};

mod group;

pub use group::GroupStats;
use group::{Call, GroupWriter};

/// How long one `BEGIN IMMEDIATE` waits for another writer before the
/// binding reports a conflict (the kernel then retries, with backoff).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Durability of commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Synchronous {
    /// fsync at every commit: survives power loss (the default).
    Full,
    /// fsync at checkpoints: survives process crashes, may lose the last
    /// commits on power loss; several times faster.
    Normal,
}

/// A SQLite database file.
pub struct SqliteBackend {
    path: PathBuf,
    synchronous: Synchronous,
    writer: Arc<GroupWriter>,
}

impl std::fmt::Debug for SqliteBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteBackend")
            .field("path", &self.path)
            .field("synchronous", &self.synchronous)
            .finish()
    }
}

fn fault(e: rusqlite::Error) -> StoreFault {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            StoreFault::Conflict(e.to_string())
        }
        _ => StoreFault::Failure(e.to_string()),
    }
}

impl SqliteBackend {
    /// Open (creating if needed) the database at `spec`: a path, optionally
    /// followed by `?synchronous=normal`.
    pub fn open(spec: &str) -> Result<Self, crate::OpenError> {
        let (path, query) = spec.split_once('?').unwrap_or((spec, ""));
        let mut synchronous = Synchronous::Full;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair {
                "synchronous=full" => synchronous = Synchronous::Full,
                "synchronous=normal" => synchronous = Synchronous::Normal,
                other => return Err(crate::OpenError::BadOption(other.to_owned())),
            }
        }
        if path.is_empty() {
            return Err(crate::OpenError::BadOption("empty sqlite path".into()));
        }
        if let Some(parent) = Path::new(path)
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
        {
            std::fs::create_dir_all(parent)
                .map_err(|e| crate::OpenError::Store(StoreFault::Failure(e.to_string())))?;
        }
        let path = PathBuf::from(path);
        let conn = connect(&path, synchronous).map_err(crate::OpenError::Store)?;
        ensure_tables(&conn).map_err(crate::OpenError::Store)?;
        Ok(SqliteBackend {
            path,
            synchronous,
            writer: Arc::new(GroupWriter::new(conn, BUSY_TIMEOUT)),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How commits are made durable.
    pub fn synchronous(&self) -> Synchronous {
        self.synchronous
    }

    /// How many calls this process's handle has ended, in how many shared
    /// commits (group commit's yield), and how many wait right now.
    pub fn group_stats(&self) -> GroupStats {
        self.writer.stats()
    }
}

fn connect(path: &Path, synchronous: Synchronous) -> Result<Connection, StoreFault> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(fault)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(fault)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(fault)?;
    let sync = match synchronous {
        Synchronous::Full => "FULL",
        Synchronous::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", sync)
        .map_err(fault)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

fn ensure_tables(conn: &Connection) -> Result<(), StoreFault> {
    let mut ddl = String::from("BEGIN IMMEDIATE;");
    for t in TABLES {
        ddl.push_str(&format!(
            "CREATE TABLE IF NOT EXISTS gak_{t} (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;"
        ));
    }
    ddl.push_str("COMMIT;");
    with_busy_retry(|| conn.execute_batch(&ddl)).map_err(fault)
}

/// `BEGIN IMMEDIATE` waits `BUSY_TIMEOUT` inside SQLite; a few more tries
/// cover the rare busy that SQLite returns without waiting (WAL recovery).
fn with_busy_retry<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let mut attempt = 0;
    loop {
        match f() {
            Err(e)
                if attempt < 5
                    && matches!(
                        e.sqlite_error_code(),
                        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                    ) =>
            {
                attempt += 1;
                thread::sleep(Duration::from_millis(1 << attempt));
            }
            other => return other,
        }
    }
}

impl Backend for SqliteBackend {
    fn session(&self) -> StoreFuture<'_, Box<dyn Session>> {
        let session: Box<dyn Session> = Box::new(SqliteSession {
            writer: self.writer.clone(),
            call: None,
        });
        ready(Ok(session))
    }
    fn describe(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }
    fn blocks_thread(&self) -> bool {
        true
    }
}

/// A worker's handle on the SQLite binding: while a call runs it holds the
/// process's writing connection (see `group`). Its calls do their work
/// before returning (the futures are ready at once): SQLite blocks the
/// thread on disk and on other writers, so the async API runs them on
/// tokio's blocking pool.
pub struct SqliteSession {
    writer: Arc<GroupWriter>,
    call: Option<Call>,
}

/// A session dropped mid-call (a panic unwinding through it) still hands
/// the shared connection back, undoing its call.
impl Drop for SqliteSession {
    fn drop(&mut self) {
        self.rollback();
    }
}

impl SqliteSession {
    /// The connection, while a transaction is open: a fenced sink's body
    /// writes its own tables here, committed or rolled back with the fence.
    pub fn connection(&self) -> Option<&Connection> {
        self.call.as_ref().map(|c| &c.conn)
    }
}

/// The SQLite connection lent to a fenced sink's body (or a
/// `with_downstream` body): statements run inside the call's transaction
/// and commit or roll back with the fence compare. Parameters only: never
/// splice data into SQL.
///
/// Two rules keep the transaction the kernel's (HOSTS.md rule 12): any
/// error a statement meets in the database ends the call with `storage`,
/// even if the body handles it — write "insert if absent" as `INSERT …
/// ON CONFLICT DO NOTHING`, which works alike on PostgreSQL, where a failed
/// statement aborts the transaction; and transaction control (`COMMIT`,
/// `ROLLBACK`, `SAVEPOINT`, …) is refused (SQLite answers "not authorized").
pub struct LentSqlite<'a> {
    conn: &'a Connection,
    failure: &'a mut Option<String>,
}

impl std::fmt::Debug for LentSqlite<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LentSqlite").finish_non_exhaustive()
    }
}

impl LentSqlite<'_> {
    /// Record a database error (not the authorizer's refusal of transaction
    /// control, which the body sees and which changes nothing).
    fn track<T>(&mut self, r: rusqlite::Result<T>) -> rusqlite::Result<T> {
        if let Err(e) = &r {
            let refused = e.sqlite_error_code() == Some(ErrorCode::AuthorizationForStatementDenied);
            if e.sqlite_error_code().is_some() && !refused {
                self.failure.get_or_insert_with(|| {
                    format!("a statement of the sink body failed in SQLite: {e}")
                });
            }
        }
        r
    }

    /// Run one statement; the number of rows it changed.
    ///
    /// # Errors
    /// SQLite's error (which also ends the call with `storage`).
    pub fn execute<P: rusqlite::Params>(
        &mut self,
        sql: &str,
        params: P,
    ) -> rusqlite::Result<usize> {
        let r = self.conn.execute(sql, params);
        self.track(r)
    }

    /// Run statements separated by `;`, without parameters.
    ///
    /// # Errors
    /// SQLite's error (which also ends the call with `storage`).
    pub fn execute_batch(&mut self, sql: &str) -> rusqlite::Result<()> {
        let r = self.conn.execute_batch(sql);
        self.track(r)
    }

    /// The first row of a query, mapped by `f`.
    ///
    /// # Errors
    /// SQLite's error (which also ends the call with `storage`), or
    /// `QueryReturnedNoRows` (which does not).
    pub fn query_row<T, P, F>(&mut self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    {
        let r = self.conn.query_row(sql, params, f);
        self.track(r)
    }

    /// Every row of a query, mapped by `f`.
    ///
    /// # Errors
    /// SQLite's error (which also ends the call with `storage`).
    pub fn query<T, P, F>(&mut self, sql: &str, params: P, f: F) -> rusqlite::Result<Vec<T>>
    where
        P: rusqlite::Params,
        F: FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    {
        let r = (|| {
            let mut stmt = self.conn.prepare_cached(sql)?;
            let rows = stmt.query_map(params, f)?;
            rows.collect()
        })();
        self.track(r)
    }
}

impl crate::Downstream<'_> {
    /// The SQLite connection inside the same transaction, when the binding
    /// is SQLite (`None` otherwise): write your own tables here and they
    /// commit atomically with the fence compare (see [`LentSqlite`]).
    pub fn sqlite(&mut self) -> Option<LentSqlite<'_>> {
        let (session, failure) = self.lend::<SqliteSession>()?;
        let conn = session.connection()?;
        Some(LentSqlite { conn, failure })
    }
}

impl crate::blocking::Downstream<'_, '_> {
    /// The SQLite connection inside the same transaction, when the binding
    /// is SQLite (`None` otherwise).
    pub fn sqlite(&mut self) -> Option<LentSqlite<'_>> {
        self.as_async().sqlite()
    }
}

/// `table` comes from the fixed set (`&'static str` chosen by code, checked
/// here), never from data; keys and values are always bound parameters.
fn checked(table: &'static str) -> Result<&'static str, StoreFault> {
    if TABLES.contains(&table) {
        Ok(table)
    } else {
        Err(StoreFault::Failure(format!("unknown table {table}")))
    }
}

impl SqliteSession {
    fn conn(&self) -> Result<&Connection, StoreFault> {
        self.connection()
            .ok_or_else(|| StoreFault::Failure("no open transaction".into()))
    }

    fn begin(&mut self) -> Result<(), StoreFault> {
        if self.call.is_some() {
            return Err(StoreFault::Failure("transaction already open".into()));
        }
        self.call = Some(self.writer.begin()?);
        Ok(())
    }

    fn get(&mut self, table: &'static str, key: &str) -> Result<Option<String>, StoreFault> {
        let sql = format!("SELECT value FROM gak_{} WHERE key = ?1", checked(table)?);
        let mut stmt = self.conn()?.prepare_cached(&sql).map_err(fault)?;
        stmt.query_row([key], |row| row.get(0))
            .optional()
            .map_err(fault)
    }

    /// A write set: each entry one execution of a cached statement (one per
    /// table and kind, prepared once per connection).
    fn write(&mut self, writes: &[Write<'_>]) -> Result<(), StoreFault> {
        let conn = self.conn()?;
        for w in writes {
            let table = checked(w.table)?;
            match w.value {
                Some(value) => {
                    let sql = format!(
                        "INSERT INTO gak_{table} (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value"
                    );
                    let mut stmt = conn.prepare_cached(&sql).map_err(fault)?;
                    stmt.execute([w.key, value]).map_err(fault)?;
                }
                None => {
                    let sql = format!("DELETE FROM gak_{table} WHERE key = ?1");
                    let mut stmt = conn.prepare_cached(&sql).map_err(fault)?;
                    stmt.execute([w.key]).map_err(fault)?;
                }
            }
        }
        Ok(())
    }

    fn scan(
        &mut self,
        table: &'static str,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreFault> {
        // A range on the primary key (BINARY collation: byte order), so the
        // B-tree serves it: O(limit) rows, never a table scan.
        let table = checked(table)?;
        let lower = match after {
            Some(a) if a >= prefix => a,
            _ => prefix,
        };
        let strict = after.is_some_and(|a| a >= prefix);
        let op = if strict { ">" } else { ">=" };
        let end = super::prefix_end(prefix);
        let sql = match end {
            Some(_) => format!(
                "SELECT key, value FROM gak_{table} WHERE key {op} ?1 AND key < ?2 ORDER BY key LIMIT ?3"
            ),
            None => format!(
                "SELECT key, value FROM gak_{table} WHERE key {op} ?1 ORDER BY key LIMIT ?3"
            ),
        };
        let mut stmt = self.conn()?.prepare_cached(&sql).map_err(fault)?;
        let rows = stmt
            .query_map(
                rusqlite::params![lower, end.as_deref().unwrap_or(""), limit],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .map_err(fault)?;
        rows.collect::<Result<_, _>>().map_err(fault)
    }

    /// Keep this call's writes; answers once its batch is durable.
    fn commit(&mut self) -> Result<(), StoreFault> {
        let call = self
            .call
            .take()
            .ok_or_else(|| StoreFault::Failure("no open transaction".into()))?;
        self.writer.guard_body(false);
        self.writer.end(call, true)
    }

    /// Undo this call's writes (only this call's: others in the batch keep
    /// theirs); returns once its batch is durable.
    fn rollback(&mut self) {
        if let Some(call) = self.call.take() {
            // A body that panicked never reached `body_ended` (only the
            // call holding the connection may touch its guard).
            self.writer.guard_body(false);
            let _ = self.writer.end(call, false);
        }
    }
}

impl Session for SqliteSession {
    fn begin(&mut self) -> StoreFuture<'_, ()> {
        ready(SqliteSession::begin(self))
    }
    fn get_many<'a>(
        &'a mut self,
        keys: &'a [(&'static str, &'a str)],
    ) -> StoreFuture<'a, Vec<Option<String>>> {
        ready(keys.iter().map(|(t, k)| self.get(t, k)).collect())
    }
    fn write<'a>(&'a mut self, writes: &'a [Write<'a>]) -> StoreFuture<'a, ()> {
        ready(SqliteSession::write(self, writes))
    }
    fn scan<'a>(
        &'a mut self,
        table: &'static str,
        prefix: &'a str,
        after: Option<&'a str>,
        limit: u32,
    ) -> StoreFuture<'a, Vec<(String, String)>> {
        ready(SqliteSession::scan(self, table, prefix, after, limit))
    }
    fn commit(&mut self) -> StoreFuture<'_, ()> {
        ready(SqliteSession::commit(self))
    }
    fn rollback(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        SqliteSession::rollback(self);
        Box::pin(std::future::ready(()))
    }
    fn body_started(&mut self) {
        if self.call.is_some() {
            self.writer.guard_body(true);
        }
    }
    fn body_ended(&mut self) -> StoreFuture<'_, ()> {
        if self.call.is_some() {
            self.writer.guard_body(false);
        }
        // The authorizer denies transaction control while a body runs; this
        // is the account of what it could not stop.
        let open = self.call.as_ref().is_some_and(|c| !c.conn.is_autocommit());
        ready(if open {
            Ok(())
        } else {
            Err(StoreFault::Failure(
                "the sink body ended the kernel's transaction".into(),
            ))
        })
    }
    fn as_any(&mut self) -> &mut dyn Any {
        self
    }
}
