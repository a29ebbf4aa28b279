//! A worker's handle on the SQLite binding: while a call runs it holds the
//! process's writing connection (see `group`), from its first read to its
//! commit. Its calls do their work before returning (the futures are ready
//! at once): SQLite blocks the thread on disk and on other writers, so the
//! async API runs them off the runtime's workers.
//!
//! Why a call does not decide on a snapshot and take the writer only to
//! check and apply its write set (tried for gak:kernel 0.3.0, so that calls
//! decide in parallel): the clock. A call's instant is read when it
//! decides; with the writer held from the first read, nobody can observe
//! the state between that instant and the commit (PostgreSQL's key locks
//! ensure the same). A snapshot call left that window open — a refusal
//! could read the state before a commit whose instant preceded the
//! refusal's own start — and the linearizability check
//! (`tests/tests/model.rs`) found histories no serial order explains.
//! Checking the clock again at commit would make most commits conflict.
use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use gak_rules::StoreFault;
use rusqlite::{Connection, OptionalExtension};

use super::group::{Call, GroupWriter};
use super::{TABLES, fault};
use crate::store::{Session, StoreFuture, Write, ready};

/// A worker's handle on the SQLite binding (see the module docs).
pub struct SqliteSession {
    writer: Arc<GroupWriter>,
    /// The call holding the writing connection.
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
    pub(super) fn new(writer: Arc<GroupWriter>) -> Self {
        SqliteSession { writer, call: None }
    }

    /// The connection, while a transaction is open: a fenced sink's body
    /// writes its own tables here, committed or rolled back with the fence.
    pub fn connection(&self) -> Option<&Connection> {
        self.call.as_ref().map(|c| &c.conn)
    }

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

/// `table` comes from the fixed set (`&'static str` chosen by code, checked
/// here), never from data; keys and values are always bound parameters.
pub(super) fn checked(table: &'static str) -> Result<&'static str, StoreFault> {
    if TABLES.contains(&table) {
        Ok(table)
    } else {
        Err(StoreFault::Failure(format!("unknown table {table}")))
    }
}

fn get_on(conn: &Connection, table: &'static str, key: &str) -> Result<Option<String>, StoreFault> {
    let sql = format!("SELECT value FROM gak_{} WHERE key = ?1", checked(table)?);
    let mut stmt = conn.prepare_cached(&sql).map_err(fault)?;
    stmt.query_row([key], |row| row.get(0))
        .optional()
        .map_err(fault)
}

/// A range on the primary key (BINARY collation: byte order), so the
/// B-tree serves it: O(limit) rows, never a table scan.
fn scan_on(
    conn: &Connection,
    table: &'static str,
    prefix: &str,
    after: Option<&str>,
    limit: u32,
) -> Result<Vec<(String, String)>, StoreFault> {
    let table = checked(table)?;
    let lower = match after {
        Some(a) if a >= prefix => a,
        _ => prefix,
    };
    let strict = after.is_some_and(|a| a >= prefix);
    let op = if strict { ">" } else { ">=" };
    let end = crate::store::prefix_end(prefix);
    let sql = match end {
        Some(_) => format!(
            "SELECT key, value FROM gak_{table} WHERE key {op} ?1 AND key < ?2 ORDER BY key LIMIT ?3"
        ),
        None => {
            format!("SELECT key, value FROM gak_{table} WHERE key {op} ?1 ORDER BY key LIMIT ?3")
        }
    };
    let mut stmt = conn.prepare_cached(&sql).map_err(fault)?;
    let rows = stmt
        .query_map(
            rusqlite::params![lower, end.as_deref().unwrap_or(""), limit],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .map_err(fault)?;
    rows.collect::<Result<_, _>>().map_err(fault)
}

/// A write set: each entry one execution of a cached statement (one per
/// table and kind, prepared once per connection).
fn write_on(conn: &Connection, writes: &[Write<'_>]) -> Result<(), StoreFault> {
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

impl Session for SqliteSession {
    fn begin(&mut self) -> StoreFuture<'_, ()> {
        ready(SqliteSession::begin(self))
    }
    fn get_many<'a>(
        &'a mut self,
        keys: &'a [(&'static str, &'a str)],
    ) -> StoreFuture<'a, Vec<Option<String>>> {
        ready(
            self.conn()
                .and_then(|conn| keys.iter().map(|(t, k)| get_on(conn, t, k)).collect()),
        )
    }
    fn write<'a>(&'a mut self, writes: &'a [Write<'a>]) -> StoreFuture<'a, ()> {
        ready(self.conn().and_then(|conn| write_on(conn, writes)))
    }
    fn scan<'a>(
        &'a mut self,
        table: &'static str,
        prefix: &'a str,
        after: Option<&'a str>,
        limit: u32,
    ) -> StoreFuture<'a, Vec<(String, String)>> {
        ready(
            self.conn()
                .and_then(|conn| scan_on(conn, table, prefix, after, limit)),
        )
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
