//! A connection of the PostgreSQL binding, pipelined: a call costs two
//! round trips and, for a `claim` or an `acquire`, four statements.
//!
//! - Point reads are one statement, `gak_read_v1` (`host/sql/postgres.sql`):
//!   it locks every key, then reads them with a fresh snapshot.
//! - `BEGIN` is not sent on its own: it goes out with the transaction's
//!   first statement.
//! - Writes are deferred: the write set (the last write of each key wins)
//!   goes out as one statement, `gak_write_v1`, which locks its keys and
//!   applies them table by table, in front of the next read (so reads still
//!   see the transaction's own writes) or together with `COMMIT`.
//!
//! So a claim is `BEGIN` + `gak_read_v1` (one round trip), then
//! `gak_write_v1` + `COMMIT` (the second). Statements are prepared once per
//! connection.
//!
//! tokio-postgres sends requests in the order their futures are first
//! polled and answers them in order, so joining the futures of one batch
//! puts the whole batch on the wire at once. A failed write surfaces when
//! its batch completes: the transaction is then aborted, so reporting the
//! write's error (a deadlock is a conflict: the kernel re-runs the call) is
//! the truth — nothing of it committed.
use std::any::Any;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use futures_util::future::{try_join, try_join_all, try_join5};
use gak_rules::StoreFault;
use gak_rules::buffer::Overlay;
use tokio_postgres::{Client, Statement};

use super::driver::Driver;
use super::{ClockSource, PostgresBackend, fault};
use crate::store::{Read, Session, Span, StoreFuture, TABLES, Write};

const BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED";

/// A connection of the PostgreSQL binding.
pub struct PostgresSession {
    client: Option<Client>,
    /// The client's connection, driven by the futures that wait for its
    /// answers, on the caller's thread (`driver`).
    driver: Driver,
    /// Prepared once per connection: a call then costs one Bind/Execute per
    /// statement.
    statements: HashMap<String, Statement>,
    backend: PostgresBackend,
    /// A transaction is open (as far as callers know).
    open: bool,
    /// `BEGIN` is still to be sent, with the first statement.
    begin_pending: bool,
    /// Writes still to be sent.
    deferred: Overlay<&'static str>,
    /// The transaction wrote (or will write) something.
    wrote: bool,
    /// Writes (or a body's statements) reached the server: a rollback has
    /// something to undo.
    sent_writes: bool,
    /// A sink body ran statements of its own on the client: the commit
    /// checks that the transaction is still healthy first (PostgreSQL
    /// answers `COMMIT` in an aborted transaction with `ROLLBACK`, not an
    /// error).
    lent: bool,
    /// The transaction's id (`txid_current()`), read with the flush before
    /// a body's first statement of its own: after the body, the same id
    /// proves the transaction is still the one the kernel began, whatever
    /// the body ran (HOSTS.md rule 12).
    xact: Option<i64>,
    /// A body's statement ended the transaction (another id after it).
    lost: bool,
    /// The transaction locked a task's key (a read or a probe): its end is
    /// waited for even when it wrote nothing, since a claimer that skips
    /// held keys would pass over the task while the lock outlives the call
    /// (SPEC 10 allows a pass-over only of what an overlapping call holds).
    locked_tasks: bool,
}

/// The transaction's id; reading it assigns one (the call writes anyway).
pub(crate) const XACT: &str = "SELECT txid_current()";

/// What a batch ends with, after `BEGIN` and the deferred writes.
enum Then<'a> {
    Nothing,
    /// Read the transaction's id after the deferred writes.
    Identify,
    Commit,
    Read {
        keys: &'a [(&'static str, &'a str)],
        spans: &'a [Span<'a>],
    },
    /// Probe the keys (`gak_try_read_v1`): the held ones are passed over.
    Probe {
        keys: &'a [(&'static str, &'a str)],
    },
}

/// A range read, ready to send.
struct Ranged<'a> {
    statement: Statement,
    lower: &'a str,
    end: Option<String>,
    limit: i64,
}

/// Several range reads of one table, ready to send as one statement (a
/// LATERAL join over their bounds, each still served from the key's
/// B-tree, O(limit) entries): a `complete-batch` of 100 reads 200 ranges,
/// which cost 200 statements one by one.
struct Grouped<'a> {
    statement: Statement,
    /// The spans it answers (indexes into the read's spans), in order.
    members: Vec<usize>,
    lowers: Vec<&'a str>,
    strict: Vec<bool>,
    /// Every member's prefix end (the group is of spans that have one), or
    /// none of them.
    ends: Option<Vec<String>>,
    limits: Vec<i64>,
}

/// From how many spans of one table a read sends them as one statement.
/// A claim walk's five short pages stay plain statements (the drain of
/// single jobs measured no gain from joining them, within its noise); a
/// `complete-batch` of 100's 200 ranges as one statement drained batches
/// of 100 with 8 workers at 8,154–9,107 jobs/s, against 7,898 before
/// (`gak drain`, 30,000 jobs, this 2-core machine).
const GROUP_AT: usize = 16;

/// From how many keys (`host/sql/store.json`, shared by every host) a
/// point read or a write set goes out as
/// `gak_read_many_v1` / `gak_write_many_v1` (one statement per table, over
/// the arrays) instead of `gak_read_v1` / `gak_write_v1` (one statement per
/// key, which `host/sql/postgres.sql` measured cheaper for a call's few
/// keys: 2 keys in ~27 µs against ~55-65 µs for one statement over all).
/// A batch's 500-key write sets and
/// 100-key reads are the ones it is for: draining 30,000 jobs in batches of
/// 100 with 8 workers, alternating the two binaries six times, went from
/// 3,657–4,653 to 4,192–5,240 jobs/s (+15 % on average, every pair faster)
/// and from 536–661 to 452–544 µs of the machine's CPU per job (`gak
/// drain`, this 2-core VM, sslmode=disable).
const MANY_AT: usize = crate::store::facts::POSTGRES_MANY_KEYS_FROM;

/// How the spans of one read go out.
enum Ranges<'a> {
    /// The span at this index, alone.
    One(usize, Ranged<'a>),
    Many(Grouped<'a>),
}

/// The lower bound of `span` and whether it is strict (after `after`).
fn lower_bound<'a>(span: &Span<'a>) -> (&'a str, bool) {
    match span.after {
        Some(a) if a >= span.prefix => (a, true),
        _ => (span.prefix, false),
    }
}

impl PostgresSession {
    pub(super) fn new(client: Client, driver: Driver, backend: PostgresBackend) -> Self {
        PostgresSession {
            client: Some(client),
            driver,
            statements: HashMap::new(),
            backend,
            open: false,
            begin_pending: false,
            deferred: Overlay::default(),
            wrote: false,
            sent_writes: false,
            lent: false,
            xact: None,
            lost: false,
            locked_tasks: false,
        }
    }

    /// Whether bodies' statements are lexed before they are sent.
    pub(crate) fn guards_statements(&self) -> bool {
        self.backend.guards_statements()
    }

    /// A body is about to run its own statement on the client: send what is
    /// pending (`BEGIN`, the deferred writes) so the statement runs inside
    /// the transaction and sees its writes, and, the first time, read the
    /// transaction's id in the same round trip.
    pub(crate) async fn lend(&mut self) -> Result<i64, StoreFault> {
        if self.lost {
            return Err(StoreFault::Failure(
                "the kernel's transaction was ended by an earlier statement of the body".into(),
            ));
        }
        if self.xact.is_none() {
            self.batch(Then::Identify).await?;
        } else {
            self.flush().await?;
        }
        self.lent = true;
        self.wrote = true;
        self.sent_writes = true;
        self.xact
            .ok_or_else(|| StoreFault::Failure("the transaction's id was not read".into()))
    }

    /// A body's statement ended the transaction: nothing more goes out on
    /// it, and the body's end reports it.
    pub(crate) fn lost(&mut self) {
        self.lost = true;
    }

    /// After a body that ran statements of its own: the transaction must
    /// still be the kernel's, open and healthy. A body's `COMMIT` or
    /// `ROLLBACK` — a spelling the guard missed — shows as another id (the
    /// statement then runs in a transaction of its own) or as an error; an
    /// aborted transaction answers 25P02. Either way the kernel sends
    /// nothing more of its own and the call ends with `storage`.
    async fn check_identity(&mut self) -> Result<(), StoreFault> {
        let Some(began) = self.xact else {
            return Ok(());
        };
        if self.lost {
            return Err(StoreFault::Failure(
                "a statement of the sink body ended the kernel's transaction".into(),
            ));
        }
        let client = self.open_client()?;
        let r = client.query_one(XACT, &[]).await;
        let now: i64 = self.check(r)?.get(0);
        if now == began {
            Ok(())
        } else {
            Err(StoreFault::Failure(format!(
                "the sink body ended the kernel's transaction (it began as {began}, it is now {now}): nothing of the call is committed by the kernel"
            )))
        }
    }

    /// End a transaction that wrote nothing and locked no task: its end
    /// matters only for releasing locks that other calls wait for (none
    /// passes over them), so the `COMMIT` / `ROLLBACK` is sent and not
    /// waited for (a read-only call costs one round trip). The connection
    /// runs requests in order, so the next transaction starts after it.
    fn end_unwaited(&mut self, sql: &'static str) {
        if let Some(client) = &self.client {
            use futures_util::FutureExt as _;
            // Polling once queues the request, polling the connection
            // sends it; the dropped answer is discarded by the connection
            // when the next call drives it.
            let _ = client.batch_execute(sql).now_or_never();
            self.driver.push();
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

    /// The prepared range read of `span`: the key column is COLLATE "C"
    /// (byte order, like every other binding), so the range is served by the
    /// primary key's B-tree. One statement: one consistent snapshot.
    async fn range<'a>(&mut self, span: &Span<'a>) -> Result<Ranged<'a>, StoreFault> {
        let (lower, strict) = lower_bound(span);
        let end = crate::store::prefix_end(span.prefix);
        let op = if strict { ">" } else { ">=" };
        let upper = if end.is_some() {
            "AND key COLLATE \"C\" < $2"
        } else {
            "AND $2::text IS NULL"
        };
        let sql = format!(
            "SELECT key, value::text FROM {} WHERE key COLLATE \"C\" {op} $1 {upper} ORDER BY key COLLATE \"C\" LIMIT $3",
            self.table(span.table)?
        );
        Ok(Ranged {
            statement: self.prepared(&sql).await?,
            lower,
            end,
            limit: i64::from(span.limit),
        })
    }

    /// The statements of `spans`: one per span, except where a table (and
    /// kind of upper bound) has [`GROUP_AT`] spans or more: one for them all,
    /// answering
    /// `(member, key, value)` rows in member then key order. One statement:
    /// one snapshot, as one statement per span gives each of them.
    async fn ranges<'a>(&mut self, spans: &[Span<'a>]) -> Result<Vec<Ranges<'a>>, StoreFault> {
        let mut groups: Vec<(&'static str, bool, Vec<usize>)> = Vec::new();
        for (i, span) in spans.iter().enumerate() {
            let bounded = crate::store::prefix_end(span.prefix).is_some();
            match groups
                .iter_mut()
                .find(|(t, b, _)| *t == span.table && *b == bounded)
            {
                Some((_, _, members)) => members.push(i),
                None => groups.push((span.table, bounded, vec![i])),
            }
        }
        let mut out = Vec::with_capacity(groups.len());
        for (table, bounded, members) in groups {
            if members.len() < GROUP_AT {
                for i in members {
                    out.push(Ranges::One(i, self.range(&spans[i]).await?));
                }
                continue;
            }
            let (upper, arrays, columns) = if bounded {
                (
                    "AND t.key COLLATE \"C\" < x.upper",
                    "$1::text[], $2::bool[], $3::int8[], $4::text[]",
                    "lower, strict, lim, upper, i",
                )
            } else {
                (
                    "",
                    "$1::text[], $2::bool[], $3::int8[]",
                    "lower, strict, lim, i",
                )
            };
            let sql = format!(
                "SELECT x.i, r.key, r.value FROM unnest({arrays}) WITH ORDINALITY AS x({columns}) \
                 CROSS JOIN LATERAL (SELECT t.key, t.value::text AS value FROM {} t \
                 WHERE t.key COLLATE \"C\" >= x.lower {upper} \
                 AND (NOT x.strict OR t.key COLLATE \"C\" > x.lower) \
                 ORDER BY t.key COLLATE \"C\" LIMIT x.lim) r ORDER BY x.i, r.key COLLATE \"C\"",
                self.table(table)?
            );
            let statement = self.prepared(&sql).await?;
            let bounds: Vec<(&str, bool)> =
                members.iter().map(|&i| lower_bound(&spans[i])).collect();
            out.push(Ranges::Many(Grouped {
                statement,
                lowers: bounds.iter().map(|(l, _)| *l).collect(),
                strict: bounds.iter().map(|(_, s)| *s).collect(),
                ends: bounded.then(|| {
                    members
                        .iter()
                        .filter_map(|&i| crate::store::prefix_end(spans[i].prefix))
                        .collect()
                }),
                limits: members.iter().map(|&i| i64::from(spans[i].limit)).collect(),
                members,
            }));
        }
        Ok(out)
    }

    /// Send `BEGIN` (if still pending), the deferred writes and `then` as
    /// one batch (one round trip), answering what `then` read.
    async fn batch(&mut self, then: Then<'_>) -> Result<Read, StoreFault> {
        self.exchange(then).await.map(|(_, read)| read)
    }

    /// [`Self::batch`], with which of a probe's keys were held (empty for
    /// any other `then`).
    async fn exchange(&mut self, then: Then<'_>) -> Result<(Vec<bool>, Read), StoreFault> {
        // Prepare everything first (a round trip only the first time a
        // connection sees a statement).
        let schema = self.backend.schema.clone();
        let writes = std::mem::take(&mut self.deferred);
        let write = if writes.is_empty() {
            None
        } else {
            let (mut tables, mut keys, mut values) = (Vec::new(), Vec::new(), Vec::new());
            for (t, k, v) in writes.drain() {
                tables.push(t);
                keys.push(k);
                values.push(v);
            }
            let function = if keys.len() >= MANY_AT {
                "gak_write_many_v1"
            } else {
                "gak_write_v1"
            };
            let sql = format!("SELECT \"{schema}\".{function}($1::text[], $2::text[], $3::text[])");
            Some((self.prepared(&sql).await?, tables, keys, values))
        };
        let (keys, spans): (&[(&'static str, &str)], &[Span<'_>]) = match &then {
            Then::Read { keys, spans } => (keys, spans),
            Then::Probe { keys } => (keys, &[]),
            _ => (&[], &[]),
        };
        let probe = matches!(then, Then::Probe { .. });
        self.locked_tasks |= keys.iter().any(|(t, _)| *t == "tasks");
        let point = if keys.is_empty() {
            None
        } else {
            let sql = if probe {
                format!(
                    "SELECT held, vals FROM \"{schema}\".gak_try_read_v1($1::text[], $2::text[])"
                )
            } else if keys.len() >= MANY_AT {
                format!("SELECT \"{schema}\".gak_read_many_v1($1::text[], $2::text[], false)")
            } else {
                format!("SELECT \"{schema}\".gak_read_v1($1::text[], $2::text[], false)")
            };
            let tables: Vec<&str> = keys.iter().map(|(t, _)| *t).collect();
            let names: Vec<&str> = keys.iter().map(|(_, k)| *k).collect();
            Some((self.prepared(&sql).await?, tables, names))
        };
        let ranged = self.ranges(spans).await?;
        let span_count = spans.len();
        // From here on `BEGIN` counts as sent, whatever the batch answers: a
        // batch failing inside the server (a deadlock, a statement timeout)
        // leaves a transaction open there that `rollback` must end, or the
        // connection's next call fails with 25P02.
        let begin_pending = std::mem::replace(&mut self.begin_pending, false);
        let lent = self.lent;
        let commit = matches!(then, Then::Commit);
        let identify = matches!(then, Then::Identify);
        let client = self.open_client()?;

        // Joined futures go on the wire in the order they are first polled:
        // BEGIN, the writes, the reads, COMMIT.
        let begin = async {
            if begin_pending {
                client.batch_execute(BEGIN).await?;
            }
            Ok::<_, tokio_postgres::Error>(())
        };
        let apply = async {
            if let Some((st, tables, keys, values)) = &write {
                client.execute(st, &[tables, keys, values]).await?;
            }
            Ok::<_, tokio_postgres::Error>(())
        };
        let read = async {
            let (held, values): (Vec<bool>, Vec<Option<String>>) = match &point {
                Some((st, tables, names)) if probe => {
                    let row = client.query_one(st, &[tables, names]).await?;
                    (row.get(0), row.get(1))
                }
                Some((st, tables, names)) => (
                    Vec::new(),
                    client.query_one(st, &[tables, names]).await?.get(0),
                ),
                None => (Vec::new(), Vec::new()),
            };
            Ok::<_, tokio_postgres::Error>((held, values))
        };
        let xact = async {
            Ok::<_, tokio_postgres::Error>(if identify {
                Some(client.query_one(XACT, &[]).await?.get::<_, i64>(0))
            } else {
                None
            })
        };
        let pages = async {
            let answered = try_join_all(ranged.iter().map(|r| async move {
                Ok::<_, tokio_postgres::Error>(match r {
                    Ranges::One(_, one) => (
                        r,
                        client
                            .query(&one.statement, &[&one.lower, &one.end, &one.limit])
                            .await?,
                    ),
                    Ranges::Many(g) => (
                        r,
                        match &g.ends {
                            Some(ends) => {
                                client
                                    .query(&g.statement, &[&g.lowers, &g.strict, &g.limits, ends])
                                    .await?
                            }
                            None => {
                                client
                                    .query(&g.statement, &[&g.lowers, &g.strict, &g.limits])
                                    .await?
                            }
                        },
                    ),
                })
            }))
            .await?;
            let mut pages: Vec<Vec<(String, String)>> = vec![Vec::new(); span_count];
            for (how, rows) in answered {
                match how {
                    Ranges::One(member, _) => {
                        pages[*member] = rows
                            .into_iter()
                            .map(|row| (row.get(0), row.get(1)))
                            .collect();
                    }
                    Ranges::Many(g) => {
                        for row in rows {
                            let at: i64 = row.get(0);
                            let member = usize::try_from(at - 1)
                                .ok()
                                .and_then(|m| g.members.get(m))
                                .copied()
                                .unwrap_or(usize::MAX);
                            if let Some(page) = pages.get_mut(member) {
                                page.push((row.get(1), row.get(2)));
                            }
                        }
                    }
                }
            }
            Ok::<_, tokio_postgres::Error>(pages)
        };
        let end = async {
            if commit {
                // With a body's statements in the transaction, a guard goes
                // first: it fails (25P02) if the transaction was aborted, so
                // the COMMIT pipelined behind it (which PostgreSQL then
                // answers with `ROLLBACK`, not an error) is never reported
                // as committed. Both are on the wire at once: the COMMIT
                // ends the transaction either way.
                let guard = async {
                    if lent {
                        client.batch_execute("SELECT 1").await?;
                    }
                    Ok::<_, tokio_postgres::Error>(())
                };
                try_join(guard, client.batch_execute("COMMIT")).await?;
            }
            Ok::<_, tokio_postgres::Error>(())
        };
        let r = try_join5(begin, apply, try_join(read, xact), pages, end)
            .await
            .map(|(_, _, (values, xact), pages, _)| (values, xact, pages));
        if write.is_some() {
            self.sent_writes = true;
        }
        let ((held, values), xact, pages) = self.check(r)?;
        if xact.is_some() {
            self.xact = xact;
        }
        if values.len() != keys.len() || (probe && held.len() != keys.len()) {
            return Err(StoreFault::Failure(format!(
                "the store answered {} values for {} keys",
                values.len(),
                keys.len()
            )));
        }
        Ok((held, (values, pages)))
    }

    /// Point reads that pass over held keys (`store.try-read`).
    async fn probe_batch(
        &mut self,
        keys: &[(&'static str, &str)],
    ) -> Result<Vec<Option<Option<String>>>, StoreFault> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let (held, (values, _)) = self.exchange(Then::Probe { keys }).await?;
        Ok(values
            .into_iter()
            .zip(held)
            .map(|(value, held)| (!held).then_some(value))
            .collect())
    }

    async fn read_batch(
        &mut self,
        keys: &[(&'static str, &str)],
        spans: &[Span<'_>],
    ) -> Result<Read, StoreFault> {
        if keys.is_empty() && spans.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        self.batch(Then::Read { keys, spans }).await
    }

    /// Send what is pending (BEGIN, deferred writes) so statements run
    /// directly on the client (a sink body's own) are inside the
    /// transaction and see its writes.
    pub(crate) async fn flush(&mut self) -> Result<(), StoreFault> {
        if self.begin_pending || !self.deferred.is_empty() {
            self.batch(Then::Nothing).await?;
        }
        Ok(())
    }

    /// The client, while a transaction is open (after [`Self::flush`]).
    /// Its answers come only while its connection is driven: await its
    /// futures through [`Self::driver`].
    pub(crate) fn client(&self) -> Option<&Client> {
        self.client.as_ref().filter(|_| self.open)
    }

    /// What drives the client's connection.
    pub(crate) fn driver(&self) -> Driver {
        self.driver.clone()
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
        self.deferred = Overlay::default();
        self.wrote = false;
        self.sent_writes = false;
        self.lent = false;
        self.xact = None;
        self.lost = false;
        self.locked_tasks = false;
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
                self.client = None;
                let (client, connection) = self.backend.connect_driven().await?;
                self.driver.replace(connection);
                self.client = Some(client);
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
        let driver = self.driver();
        Box::pin(async move { Ok(driver.drive(self.read_batch(keys, &[])).await?.0) })
    }

    fn try_get_many<'a>(
        &'a mut self,
        keys: &'a [(&'static str, &'a str)],
    ) -> StoreFuture<'a, Vec<Option<Option<String>>>> {
        let driver = self.driver();
        Box::pin(async move { driver.drive(self.probe_batch(keys)).await })
    }

    fn write<'a>(&'a mut self, writes: &'a [Write<'a>]) -> StoreFuture<'a, ()> {
        let r = self.open_client().map(drop).and_then(|()| {
            for w in writes {
                if !TABLES.contains(&w.table) {
                    return Err(StoreFault::Failure(format!("unknown table {}", w.table)));
                }
            }
            Ok(())
        });
        if r.is_ok() && !writes.is_empty() {
            self.wrote = true;
            for w in writes {
                self.deferred.set(w.table, w.key, w.value);
            }
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
        Box::pin(async move {
            let span = [Span {
                table,
                prefix,
                after,
                limit,
            }];
            let driver = self.driver();
            let (_, mut pages) = driver.drive(self.read_batch(&[], &span)).await?;
            Ok(pages.pop().unwrap_or_default())
        })
    }

    fn read<'a>(
        &'a mut self,
        keys: &'a [(&'static str, &'a str)],
        spans: &'a [Span<'a>],
    ) -> StoreFuture<'a, Read> {
        let driver = self.driver();
        Box::pin(async move { driver.drive(self.read_batch(keys, spans)).await })
    }

    fn commit(&mut self) -> StoreFuture<'_, ()> {
        Box::pin(self.driver().drive_owned(async move {
            self.open_client()?;
            let result = if self.begin_pending && !self.wrote {
                // Nothing was ever sent: nothing to end.
                Ok(())
            } else if !self.wrote && !self.locked_tasks {
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
        }))
    }

    fn rollback(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.driver().drive_owned(async move {
            let sent = self.open && !self.begin_pending;
            let wrote = self.sent_writes;
            let locked_tasks = self.locked_tasks;
            self.end();
            if !sent {
                return;
            }
            if !wrote && !locked_tasks {
                // Nothing was written on the server: only the locks go, as
                // with a read-only commit.
                return self.end_unwaited("ROLLBACK");
            }
            if let Some(client) = &self.client
                && client.batch_execute("ROLLBACK").await.is_err()
            {
                self.client = None;
                self.statements.clear();
            }
        }))
    }

    fn body_ended(&mut self) -> StoreFuture<'_, ()> {
        Box::pin(self.driver().drive_owned(self.check_identity()))
    }

    fn now(&mut self) -> Option<StoreFuture<'_, u64>> {
        if self.backend.clock != ClockSource::Database {
            return None;
        }
        Some(Box::pin(self.driver().drive_owned(self.database_now())))
    }

    fn as_any(&mut self) -> &mut dyn Any {
        self
    }
}

impl Drop for PostgresSession {
    fn drop(&mut self) {
        // The client first: its closed channel asks the connection for a
        // `Terminate`, which the connection's last poll sends.
        self.client = None;
        self.driver.close();
    }
}
