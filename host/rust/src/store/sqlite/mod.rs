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
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use gak_rules::StoreFault;
use rusqlite::{Connection, ErrorCode, OpenFlags};

use super::{Backend, Session, StoreFuture, TABLES, facts, ready};

mod group;
mod session;

pub use group::GroupStats;
use group::GroupWriter;
pub use session::SqliteSession;

/// How long one `BEGIN IMMEDIATE` waits for another writer before the
/// binding reports a conflict (the kernel then retries, with backoff).
const BUSY_TIMEOUT: Duration = Duration::from_millis(facts::SQLITE_BUSY_TIMEOUT_MS);

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
    let ddl = format!("BEGIN IMMEDIATE;{}COMMIT;", facts::SQLITE_SCHEMA);
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

/// Whether a body's statement error came from the database running it
/// (see [`LentSqlite`]).
fn ends_the_call(e: &rusqlite::Error) -> bool {
    match e {
        rusqlite::Error::SqliteFailure(error, _) => {
            error.code != ErrorCode::AuthorizationForStatementDenied
        }
        // A syntax error, with its offset (rusqlite's `modern_sqlite`
        // reports it apart, and without an error code).
        rusqlite::Error::SqlInputError { .. } => true,
        // The driver's own refusals (`MultipleStatement`, parameter counts,
        // conversions): nothing ran.
        _ => false,
    }
}

impl Backend for SqliteBackend {
    fn session(&self) -> StoreFuture<'_, Box<dyn Session>> {
        let session: Box<dyn Session> = Box::new(SqliteSession::new(self.writer.clone()));
        ready(Ok(session))
    }
    fn describe(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }
    fn blocks_thread(&self) -> bool {
        true
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

impl<'a> LentSqlite<'a> {
    /// Lend `conn` to a body; a database error it meets is recorded in
    /// `failure` (which ends the call).
    pub(crate) fn new(conn: &'a Connection, failure: &'a mut Option<String>) -> Self {
        LentSqlite { conn, failure }
    }
}

impl LentSqlite<'_> {
    /// Record an error the database raised running a statement: it ends the
    /// call with `storage`, as on PostgreSQL (where a failed statement
    /// aborts the transaction), however the body handles it. Not recorded,
    /// because nothing reached the database or changed: the authorizer's
    /// refusal of transaction control, a text of several statements, the
    /// driver's own checks (parameters, conversions, no row).
    fn track<T>(&mut self, r: rusqlite::Result<T>) -> rusqlite::Result<T> {
        if let Err(e) = &r
            && ends_the_call(e)
        {
            self.failure.get_or_insert_with(|| {
                format!("a statement of the sink body failed in SQLite: {e}")
            });
        }
        r
    }

    /// Run one statement (a text of several is refused before any runs);
    /// the number of rows it changed. Rows it returns are read and dropped,
    /// as PostgreSQL's `execute` does.
    ///
    /// # Errors
    /// SQLite's error (which also ends the call with `storage`), or the
    /// refusals above (which do not).
    pub fn execute<P: rusqlite::Params>(
        &mut self,
        sql: &str,
        params: P,
    ) -> rusqlite::Result<usize> {
        let conn = self.conn;
        let r = (|| {
            let mut stmt = conn.prepare(sql)?;
            if stmt.expanded_sql().is_none() {
                // Nothing but comments and spaces: nothing to run (SQLite
                // answers "misuse" to stepping it; PostgreSQL, nothing).
                return Ok(0);
            }
            let writes = !stmt.readonly();
            let mut rows = stmt.query(params)?;
            while rows.next()?.is_some() {}
            Ok(if writes { conn.changes() as usize } else { 0 })
        })();
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

#[cfg(test)]
mod tests {
    /// The workspace builds the bundled SQLite without memory statistics
    /// (`.cargo/config.toml`): with them, every allocation SQLite makes
    /// takes a process-wide mutex.
    #[test]
    fn the_bundled_sqlite_keeps_no_memory_statistics() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let mut options = conn.prepare("PRAGMA compile_options").unwrap();
        let options: Vec<String> = options
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(
            options.iter().any(|o| o == "DEFAULT_MEMSTATUS=0"),
            "{options:?}"
        );
    }
}
