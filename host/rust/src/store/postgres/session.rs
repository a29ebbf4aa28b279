//! A connection of the PostgreSQL binding, pipelined: a call costs two
//! round trips, whatever it writes.
//!
//! - `BEGIN` is not sent on its own: it goes out with the transaction's
//!   first statement (the first read's locks and selects).
//! - Writes are deferred: they go out, with their advisory locks, in front
//!   of the next read or range read (so reads still see the transaction's
//!   own writes) or together with `COMMIT`.
//! - Deferred writes are coalesced: the last write of each key wins, the
//!   locks not yet held are taken by one statement (in lock-id order), and
//!   each table gets one `INSERT … SELECT FROM unnest(…) ON CONFLICT` for
//!   its puts and one `DELETE … WHERE key = ANY(…)` for its deletes. Round
//!   trips were already two; what this saves is statements, which is what a
//!   call costs the server (a claim went from eleven statements to eight).
//! - An advisory lock this transaction already holds is not taken again.
//!
//! tokio-postgres sends requests in the order their futures are first
//! polled and answers them in order, so joining the futures of one batch
//! puts the whole batch on the wire at once. A failed write surfaces when
//! its batch completes: the transaction is then aborted, so reporting the
//! write's error (a deadlock is a conflict: the kernel re-runs the call) is
//! the truth — nothing of it committed.
use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;

use futures_util::future::{try_join, try_join_all, try_join3};
use gak_rules::StoreFault;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

use super::{ClockSource, PostgresBackend, column_type, fault};
use crate::store::{Session, StoreFuture, TABLES, Write};

const BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED";
/// One lock order for every transaction (by lock id) keeps deadlocks rare.
const LOCK_MANY: &str = "SELECT pg_advisory_xact_lock(h) FROM (SELECT DISTINCT hashtextextended(x, 0) AS h FROM unnest($1::text[]) AS x) AS l ORDER BY h";

/// A write not sent yet.
struct Deferred {
    table: &'static str,
    key: String,
    /// None: delete.
    value: Option<String>,
}

/// One statement applying coalesced writes: a table's deletes (`values`
/// none) or its puts.
struct WriteStatement {
    sql: String,
    keys: Vec<String>,
    values: Option<Vec<String>>,
}

/// A table's coalesced writes.
#[derive(Default)]
struct TableWrites {
    put_keys: Vec<String>,
    put_values: Vec<String>,
    deletes: Vec<String>,
}

/// A connection of the PostgreSQL binding.
pub struct PostgresSession {
    client: Option<Client>,
    /// Prepared once per connection: a call then costs one Bind/Execute per
    /// statement.
    statements: HashMap<String, Statement>,
    backend: PostgresBackend,
    /// A transaction is open (as far as callers know).
    open: bool,
    /// `BEGIN` is still to be sent, with the first statement.
    begin_pending: bool,
    /// Writes still to be sent.
    deferred: Vec<Deferred>,
    /// Advisory locks this transaction holds.
    locked: HashSet<String>,
    /// The transaction wrote (or will write) something.
    wrote: bool,
    /// A sink body ran statements of its own on the client: the commit
    /// checks that the transaction is still healthy first (PostgreSQL
    /// answers `COMMIT` in an aborted transaction with `ROLLBACK`, not an
    /// error).
    lent: bool,
}

/// What a batch ends with, after `BEGIN` and the deferred writes.
enum Then<'a> {
    Nothing,
    Commit,
    Read(&'a [(&'static str, &'a str)]),
    Range {
        table: &'static str,
        lower: &'a str,
        strict: bool,
        end: Option<String>,
        limit: u32,
    },
}

/// What a batch answered.
enum Answer {
    Done,
    Rows(Vec<Option<String>>),
    Entries(Vec<(String, String)>),
}

impl PostgresSession {
    pub(super) fn new(client: Client, backend: PostgresBackend) -> Self {
        PostgresSession {
            client: Some(client),
            statements: HashMap::new(),
            backend,
            open: false,
            begin_pending: false,
            deferred: Vec::new(),
            locked: HashSet::new(),
            wrote: false,
            lent: false,
        }
    }

    /// A body is about to run its own statement on the client.
    pub(super) fn lend(&mut self) {
        self.lent = true;
        self.wrote = true;
    }

    /// End a transaction that wrote nothing: its end matters only for
    /// releasing its locks, so the `COMMIT` / `ROLLBACK` is sent and not
    /// waited for (a read-only call costs one round trip). The connection
    /// runs requests in order, so the next transaction starts after it.
    fn end_unwaited(&mut self, sql: &'static str) {
        if let Some(client) = &self.client {
            use futures_util::FutureExt as _;
            // Polling once sends the request; the dropped answer is
            // discarded by the connection.
            let _ = client.batch_execute(sql).now_or_never();
        }
    }

    fn open_client(&self) -> Result<&Client, StoreFault> {
        if !self.open {
            return Err(StoreFault::Failure("no open transaction".into()));
        }
        self.client
            .as_ref()
            .ok_or_else(|| StoreFault::Failure("connection lost".into()))
    }

    fn table(&self, table: &'static str) -> Result<String, StoreFault> {
        if TABLES.contains(&table) {
            Ok(format!("\"{}\".\"{table}\"", self.backend.schema))
        } else {
            Err(StoreFault::Failure(format!("unknown table {table}")))
        }
    }

    async fn prepared(&mut self, sql: &str) -> Result<Statement, StoreFault> {
        if let Some(st) = self.statements.get(sql) {
            return Ok(st.clone());
        }
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| StoreFault::Failure("connection lost".into()))?;
        let r = client.prepare(sql).await;
        let st = self.check(r)?;
        self.statements.insert(sql.to_owned(), st.clone());
        Ok(st)
    }

    /// What a key's advisory lock is named by; the server hashes it with
    /// `hashtextextended(name, 0)` (see the module docs, `host/HOSTS.md`).
    fn lock_name(&self, table: &str, key: &str) -> String {
        format!("{}/{table}/{key}", self.backend.schema)
    }

    /// Forget a connection that failed: the server rolls its transaction
    /// back when it goes; the next `begin` reconnects.
    fn check<T>(&mut self, r: Result<T, tokio_postgres::Error>) -> Result<T, StoreFault> {
        r.map_err(|e| {
            if e.is_closed() || self.client.as_ref().is_some_and(Client::is_closed) {
                self.client = None;
                self.statements.clear();
                self.open = false;
            }
            fault(e)
        })
    }

    /// The statements that apply `deferred` writes, one per table and kind.
    fn write_statements(&self, deferred: Vec<Deferred>) -> Result<Vec<WriteStatement>, StoreFault> {
        use std::collections::BTreeMap;
        // The last write of each key wins; BTreeMap: a stable statement order.
        let mut last: BTreeMap<(&'static str, String), Option<String>> = BTreeMap::new();
        for w in deferred {
            last.insert((w.table, w.key), w.value);
        }
        let mut by_table: BTreeMap<&'static str, TableWrites> = BTreeMap::new();
        for ((table, key), value) in last {
            let writes = by_table.entry(table).or_default();
            match value {
                Some(v) => {
                    writes.put_keys.push(key);
                    writes.put_values.push(v);
                }
                None => writes.deletes.push(key),
            }
        }
        let mut out = Vec::new();
        for (table, writes) in by_table {
            let name = self.table(table)?;
            if !writes.deletes.is_empty() {
                out.push(WriteStatement {
                    sql: format!("DELETE FROM {name} WHERE key = ANY($1::text[])"),
                    keys: writes.deletes,
                    values: None,
                });
            }
            if !writes.put_keys.is_empty() {
                out.push(WriteStatement {
                    sql: format!(
                        "INSERT INTO {name} (key, value) SELECT k, v::{} FROM unnest($1::text[], $2::text[]) AS w(k, v) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                        column_type(table)
                    ),
                    keys: writes.put_keys,
                    values: Some(writes.put_values),
                });
            }
        }
        Ok(out)
    }

    /// Send `BEGIN` (if still pending), the deferred writes and `then` as
    /// one batch, and end the transaction's pending state accordingly.
    async fn batch(&mut self, then: Then<'_>) -> Result<Answer, StoreFault> {
        // Prepare everything first (a round trip only the first time a
        // connection sees a statement).
        let deferred = std::mem::take(&mut self.deferred);
        let mut lock_now: HashSet<String> = HashSet::new();
        for w in &deferred {
            let name = self.lock_name(w.table, &w.key);
            if !self.locked.contains(&name) {
                lock_now.insert(name);
            }
        }
        let write_locks: Vec<&String> = lock_now.iter().collect();
        let mut writes: Vec<(Statement, Vec<String>, Option<Vec<String>>)> = Vec::new();
        for w in self.write_statements(deferred)? {
            writes.push((self.prepared(&w.sql).await?, w.keys, w.values));
        }
        let lock_many = self.prepared(LOCK_MANY).await?;
        let mut read_locks: Vec<String> = Vec::new();
        let main: Option<(Statement, Vec<Statement>)> = match &then {
            Then::Read(keys) => {
                for (t, k) in keys.iter() {
                    let name = self.lock_name(t, k);
                    if !self.locked.contains(&name) && !lock_now.contains(&name) {
                        read_locks.push(name);
                    }
                }
                let lock_many = lock_many.clone();
                let mut selects = Vec::with_capacity(keys.len());
                for (t, _) in keys.iter() {
                    let sql = format!("SELECT value::text FROM {} WHERE key = $1", self.table(t)?);
                    selects.push(self.prepared(&sql).await?);
                }
                Some((lock_many, selects))
            }
            Then::Range {
                table, strict, end, ..
            } => {
                // The key column is COLLATE "C" (byte order, like every
                // other binding), so this range is served by the primary
                // key's B-tree. One statement: one consistent snapshot.
                let op = if *strict { ">" } else { ">=" };
                let upper = if end.is_some() {
                    "AND key COLLATE \"C\" < $2"
                } else {
                    "AND $2::text IS NULL"
                };
                let sql = format!(
                    "SELECT key, value::text FROM {} WHERE key COLLATE \"C\" {op} $1 {upper} ORDER BY key COLLATE \"C\" LIMIT $3",
                    self.table(table)?
                );
                Some((self.prepared(&sql).await?, Vec::new()))
            }
            Then::Nothing | Then::Commit => None,
        };
        // From here on `BEGIN` counts as sent, whatever the batch answers: a
        // batch failing inside the server (a deadlock, a statement timeout)
        // leaves a transaction open there that `rollback` must end, or the
        // connection's next call fails with 25P02.
        let begin_pending = std::mem::replace(&mut self.begin_pending, false);
        let lent = self.lent;
        let client = self.open_client()?;

        let begin = async {
            if begin_pending {
                client.batch_execute(BEGIN).await?;
            }
            Ok::<_, tokio_postgres::Error>(())
        };
        // The locks first, then the writes: joined futures go on the wire
        // in the order they are first polled.
        let take_locks = async {
            if !write_locks.is_empty() {
                client.execute(&lock_many, &[&write_locks]).await?;
            }
            Ok::<_, tokio_postgres::Error>(())
        };
        let apply = try_join_all(writes.iter().map(|(st, keys, values)| async move {
            match values {
                Some(values) => client.execute(st, &[keys, values]).await,
                None => client.execute(st, &[keys]).await,
            }
        }));
        let sent_writes = try_join(take_locks, apply);
        let limit_i64 = match &then {
            Then::Range { limit, .. } => i64::from(*limit),
            _ => 0,
        };
        let key_params: Vec<[&(dyn ToSql + Sync); 1]> = match &then {
            Then::Read(keys) => keys
                .iter()
                .map(|(_, k)| [k as &(dyn ToSql + Sync)])
                .collect(),
            _ => Vec::new(),
        };
        let last = async {
            Ok::<_, tokio_postgres::Error>(match (&then, &main) {
                (Then::Commit, _) => {
                    // With a body's statements in the transaction, a guard
                    // goes first: it fails (25P02) if the transaction was
                    // aborted, so the COMMIT pipelined behind it (which
                    // PostgreSQL then answers with `ROLLBACK`, not an
                    // error) is never reported as committed. Both are on
                    // the wire at once: the COMMIT ends the transaction
                    // either way.
                    let guard = async {
                        if lent {
                            client.batch_execute("SELECT 1").await?;
                        }
                        Ok::<_, tokio_postgres::Error>(())
                    };
                    try_join(guard, client.batch_execute("COMMIT")).await?;
                    Answer::Done
                }
                (Then::Read(keys), Some((lock_many, selects))) => {
                    let lock = async {
                        if !read_locks.is_empty() {
                            client.execute(lock_many, &[&read_locks]).await?;
                        }
                        Ok::<_, tokio_postgres::Error>(())
                    };
                    // Each read is its own statement, so its snapshot starts
                    // after every lock is held and sees the previous
                    // holder's commit.
                    let reads = try_join_all(
                        selects
                            .iter()
                            .zip(&key_params)
                            .map(|(st, p)| client.query_opt(st, p)),
                    );
                    let _ = keys;
                    let (_, rows) = try_join(lock, reads).await?;
                    Answer::Rows(
                        rows.into_iter()
                            .map(|r| r.map(|row| row.get::<_, String>(0)))
                            .collect(),
                    )
                }
                (Then::Range { lower, end, .. }, Some((st, _))) => {
                    let rows = client.query(st, &[lower, end, &limit_i64]).await?;
                    Answer::Entries(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
                }
                _ => Answer::Done,
            })
        };
        let r = try_join3(begin, sent_writes, last)
            .await
            .map(|(_, _, answer)| answer);
        let answer = self.check(r)?;
        self.locked.extend(lock_now);
        self.locked.extend(read_locks);
        Ok(answer)
    }

    async fn read(
        &mut self,
        keys: &[(&'static str, &str)],
    ) -> Result<Vec<Option<String>>, StoreFault> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        match self.batch(Then::Read(keys)).await? {
            Answer::Rows(rows) => Ok(rows),
            _ => unreachable!("a read answers rows"),
        }
    }

    async fn range(
        &mut self,
        table: &'static str,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreFault> {
        let (lower, strict) = match after {
            Some(a) if a >= prefix => (a, true),
            _ => (prefix, false),
        };
        let then = Then::Range {
            table,
            lower,
            strict,
            end: crate::store::prefix_end(prefix),
            limit,
        };
        match self.batch(then).await? {
            Answer::Entries(entries) => Ok(entries),
            _ => unreachable!("a range read answers entries"),
        }
    }

    /// Send what is pending (BEGIN, deferred writes) so statements run
    /// directly on the client (a sink body's own) are inside the
    /// transaction and see its writes.
    pub(super) async fn flush(&mut self) -> Result<(), StoreFault> {
        if self.begin_pending || !self.deferred.is_empty() {
            self.batch(Then::Nothing).await?;
        }
        Ok(())
    }

    /// The client, while a transaction is open (after [`Self::flush`]).
    pub(super) fn client(&self) -> Option<&Client> {
        self.client.as_ref().filter(|_| self.open)
    }

    async fn database_now(&mut self) -> Result<u64, StoreFault> {
        self.flush().await?;
        let client = self.open_client()?;
        let r = client
            .query_one(
                "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::int8",
                &[],
            )
            .await;
        let row = self.check(r)?;
        let db = row.get::<_, i64>(0).max(0) as u64;
        let prev = self
            .backend
            .last_now
            .fetch_max(db, std::sync::atomic::Ordering::AcqRel);
        Ok(prev.max(db))
    }

    fn end(&mut self) {
        self.open = false;
        self.begin_pending = false;
        self.deferred.clear();
        self.locked.clear();
        self.wrote = false;
        self.lent = false;
    }
}

impl Session for PostgresSession {
    fn begin(&mut self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            if self.open {
                return Err(StoreFault::Failure("transaction already open".into()));
            }
            if self.client.as_ref().is_none_or(Client::is_closed) {
                self.statements.clear();
                self.client = Some(self.backend.connect().await?);
            }
            self.end();
            self.open = true;
            self.begin_pending = true;
            Ok(())
        })
    }

    fn get_many<'a>(
        &'a mut self,
        keys: &'a [(&'static str, &'a str)],
    ) -> StoreFuture<'a, Vec<Option<String>>> {
        Box::pin(self.read(keys))
    }

    fn write<'a>(&'a mut self, writes: &'a [Write<'a>]) -> StoreFuture<'a, ()> {
        let r = self.open_client().map(drop);
        if r.is_ok() && !writes.is_empty() {
            self.wrote = true;
            self.deferred.extend(writes.iter().map(|w| Deferred {
                table: w.table,
                key: w.key.to_owned(),
                value: w.value.map(str::to_owned),
            }));
        }
        crate::store::ready(r)
    }

    fn scan<'a>(
        &'a mut self,
        table: &'static str,
        prefix: &'a str,
        after: Option<&'a str>,
        limit: u32,
    ) -> StoreFuture<'a, Vec<(String, String)>> {
        Box::pin(self.range(table, prefix, after, limit))
    }

    fn commit(&mut self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            self.open_client()?;
            let result = if self.begin_pending && !self.wrote {
                // Nothing was ever sent: nothing to end.
                Ok(())
            } else if !self.wrote {
                self.end_unwaited("COMMIT");
                Ok(())
            } else {
                self.batch(Then::Commit).await.map(drop)
            };
            if result.is_err()
                && let Some(client) = &self.client
                && client.batch_execute("ROLLBACK").await.is_err()
            {
                // A commit that failed must leave no transaction open: a
                // connection that cannot say so is dropped.
                self.client = None;
                self.statements.clear();
            }
            self.end();
            result
        })
    }

    fn rollback(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let sent = self.open && !self.begin_pending;
            let wrote = self.wrote;
            self.end();
            if !sent {
                return;
            }
            if !wrote {
                // Nothing to undo: only the locks go, as with a read-only
                // commit.
                return self.end_unwaited("ROLLBACK");
            }
            if let Some(client) = &self.client
                && client.batch_execute("ROLLBACK").await.is_err()
            {
                self.client = None;
                self.statements.clear();
            }
        })
    }

    fn now(&mut self) -> Option<StoreFuture<'_, u64>> {
        if self.backend.clock != ClockSource::Database {
            return None;
        }
        Some(Box::pin(self.database_now()))
    }

    fn as_any(&mut self) -> &mut dyn Any {
        self
    }
}
