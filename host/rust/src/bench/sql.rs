//! The `sql` and `ceiling` baselines: the claim and acquire decisions
//! hand-written in SQL on the bench's own tables (`bench_sql_*`,
//! `bench_ceiling`) in the same database — the same schema on PostgreSQL,
//! the same file on SQLite — one connection per worker.
//!
//! What they decide is checked against the rules (`tests/tests/bench.rs`:
//! fresh, held, expired and done tasks; fresh, held and completed keys), so
//! `kernel / sql` compares equal work. They leave out what the kernel does
//! beyond the decision: indexes (claim queue, state listings), dependency
//! checks (bench tasks have none), fingerprints and JSON records.
//!
//! - claim, PostgreSQL: one conditional `UPDATE … RETURNING`, one round
//!   trip; a refusal reads the row to say which (`not-found`, `terminal`,
//!   `taken`). SQLite: the same inside `BEGIN IMMEDIATE`.
//! - acquire, PostgreSQL: one transaction, two round trips: `BEGIN`, a
//!   placeholder insert of each row (so a fresh key has a row to lock:
//!   `FOR UPDATE` locks nothing that does not exist) and both reads
//!   `FOR UPDATE`, pipelined; then the writes and `COMMIT`, pipelined.
//!   SQLite: reads and writes inside `BEGIN IMMEDIATE`.
//! - ceiling: `BEGIN; SELECT … FOR UPDATE; UPDATE; COMMIT`, one statement
//!   per round trip (SQLite: `BEGIN IMMEDIATE; SELECT; UPDATE; COMMIT`).
#[cfg(feature = "sqlite")]
use std::path::{Path, PathBuf};

use gak_rules::{Acquired, Error, Lease};

#[cfg(feature = "postgres")]
use crate::store::postgres::PostgresBackend;
#[cfg(feature = "sqlite")]
use crate::store::sqlite::Synchronous;

/// The reason an expired intent reports (as the rules say it).
const INTENT_EXPIRED: &str = gak_rules::sideeffect::INTENT_EXPIRED;

/// A database the SQL baselines open their own connections to.
#[derive(Clone, Debug)]
pub enum Database {
    /// A SQLite file.
    #[cfg(feature = "sqlite")]
    Sqlite {
        /// The file.
        path: PathBuf,
        /// Its durability, as the binding opened it.
        synchronous: Synchronous,
    },
    /// A PostgreSQL schema.
    #[cfg(feature = "postgres")]
    Postgres(Box<PostgresBackend>),
}

/// A granted claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The task's new fence.
    pub fence: u64,
    /// The claim token (only its digest is stored).
    pub token: String,
    /// When the claim expires.
    pub until: u64,
}

/// What a baseline call answers: the contract's answer, or a database
/// failure (a sentence).
pub type Answer<T> = Result<Result<T, Error>, String>;

fn mint() -> (String, String) {
    let token = gak_rules::format::hex128(super::native::random128());
    let digest = gak_rules::format::digest(&token);
    (token, digest)
}

impl Database {
    /// A SQLite file.
    #[cfg(feature = "sqlite")]
    pub fn sqlite(path: &Path, synchronous: Synchronous) -> Database {
        Database::Sqlite {
            path: path.to_owned(),
            synchronous,
        }
    }

    /// A PostgreSQL schema.
    #[cfg(feature = "postgres")]
    pub fn postgres(backend: PostgresBackend) -> Database {
        Database::Postgres(Box::new(backend))
    }

    /// Create the baselines' tables if missing.
    ///
    /// # Errors
    /// The database's failure.
    pub fn ensure_tables(&self) -> Result<(), String> {
        match self {
            #[cfg(feature = "sqlite")]
            Database::Sqlite { .. } => {
                let conn = self.connect()?;
                let Conn::Sqlite(c) = &conn else {
                    unreachable!()
                };
                c.execute_batch(&sqlite::ddl())
                    .map_err(|e| format!("creating the bench tables: {e}"))
            }
            #[cfg(feature = "postgres")]
            Database::Postgres(backend) => {
                let client = crate::blocking::run(backend.connect())
                    .map_err(|e| format!("connecting: {e}"))?;
                crate::blocking::run(client.batch_execute(&postgres::ddl(backend.schema())))
                    .map_err(|e| format!("creating the bench tables: {e}"))
            }
        }
    }

    /// A worker's own connection.
    ///
    /// # Errors
    /// The database's failure.
    pub fn connect(&self) -> Result<Conn, String> {
        match self {
            #[cfg(feature = "sqlite")]
            Database::Sqlite { path, synchronous } => {
                sqlite::connect(path, *synchronous).map(Conn::Sqlite)
            }
            #[cfg(feature = "postgres")]
            Database::Postgres(backend) => postgres::Pg::connect(backend).map(Conn::Postgres),
        }
    }
}

/// One worker's connection.
pub enum Conn {
    /// SQLite.
    #[cfg(feature = "sqlite")]
    Sqlite(rusqlite::Connection),
    /// PostgreSQL, with its prepared statements.
    #[cfg(feature = "postgres")]
    Postgres(Box<postgres::Pg>),
}

impl Conn {
    /// Add open tasks (those already there are left alone).
    ///
    /// # Errors
    /// The database's failure.
    pub fn seed_tasks(&mut self, ids: &[String]) -> Result<(), String> {
        match self {
            #[cfg(feature = "sqlite")]
            Conn::Sqlite(c) => sqlite::seed(c, ids),
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => pg.seed(ids),
        }
    }

    /// Claim task `id` for `agent` at `now`: `not-found`, `terminal`,
    /// `taken`, else the next fence and a fresh token.
    ///
    /// # Errors
    /// The database's failure.
    pub fn claim(&mut self, id: &str, agent: &str, ttl: u64, now: u64) -> Answer<Claim> {
        let (token, digest) = mint();
        let until = now.saturating_add(ttl);
        let fence = match self {
            #[cfg(feature = "sqlite")]
            Conn::Sqlite(c) => sqlite::claim(c, id, agent, &digest, until, now)?,
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => pg.claim(id, agent, &digest, until, now)?,
        };
        Ok(fence.map(|fence| Claim {
            fence,
            token,
            until,
        }))
    }

    /// Mark task `id` done, for the holder of `token`: `lease-lost` when it
    /// does not hold the task.
    ///
    /// # Errors
    /// The database's failure.
    pub fn complete_task(&mut self, id: &str, token: &str) -> Answer<()> {
        let digest = gak_rules::format::digest(token);
        let changed = match self {
            #[cfg(feature = "sqlite")]
            Conn::Sqlite(c) => sqlite::complete_task(c, id, &digest)?,
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => pg.complete_task(id, &digest)?,
        };
        Ok(if changed {
            Ok(())
        } else {
            Err(Error::LeaseLost)
        })
    }

    /// The acquire decision for `key` on `resource` at `now`, in the rules'
    /// precedence: replay, uncertain (expired intent), in-flight, contended,
    /// else a grant with the resource's next fence.
    ///
    /// # Errors
    /// The database's failure.
    pub fn acquire(&mut self, key: &str, resource: &str, ttl: u64, now: u64) -> Answer<Acquired> {
        match self {
            #[cfg(feature = "sqlite")]
            Conn::Sqlite(c) => sqlite::acquire(c, key, resource, ttl, now),
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => pg.acquire(key, resource, ttl, now),
        }
    }

    /// Record `lease`'s attempt completed with `result` and drop the hold;
    /// whether the lease still held the key.
    ///
    /// # Errors
    /// The database's failure.
    pub fn complete(&mut self, lease: &Lease, result: &[u8]) -> Result<bool, String> {
        let digest = gak_rules::format::digest(&lease.holder);
        match self {
            #[cfg(feature = "sqlite")]
            Conn::Sqlite(c) => sqlite::complete(c, lease, &digest, result),
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => pg.complete(lease, &digest, result),
        }
    }

    /// The ceiling's one transaction on row `row`: lock and read it, write
    /// it back incremented, commit.
    ///
    /// # Errors
    /// The database's failure.
    pub fn ceiling(&mut self, row: i64) -> Result<(), String> {
        match self {
            #[cfg(feature = "sqlite")]
            Conn::Sqlite(c) => sqlite::ceiling(c, row),
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => pg.ceiling(row),
        }
    }
}

/// The acquire decision on what was read, shared by both databases: `key`
/// is (state, fence, until, result) and `resource` (key, fence, hold_until),
/// `None` when absent. `Ok(Err(fence))` means grant with that fence.
fn decide_acquire(
    key: &str,
    record: Option<(String, Option<u64>, Option<Vec<u8>>)>,
    resource: Option<(String, u64, Option<u64>)>,
    now: u64,
) -> Result<Acquired, u64> {
    if let Some((state, until, result)) = record {
        match state.as_str() {
            "completed" => return Ok(Acquired::Replayed(result.unwrap_or_default())),
            "in-flight" if until.is_some_and(|u| now >= u) => {
                return Ok(Acquired::Uncertain(INTENT_EXPIRED.to_owned()));
            }
            "in-flight" => return Ok(Acquired::InFlight),
            _ => {}
        }
    }
    if let Some((holder_key, _, Some(until))) = &resource
        && now < *until
        && holder_key != key
    {
        return Ok(Acquired::Contended(*until));
    }
    Err(resource.map_or(0, |(_, fence, _)| fence) + 1)
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use std::path::Path;
    use std::time::Duration;

    use gak_rules::{Acquired, Lease};
    use rusqlite::{Connection, OptionalExtension, params};

    use super::{Answer, decide_acquire, mint};
    use crate::store::sqlite::Synchronous;

    fn e(what: &str) -> impl Fn(rusqlite::Error) -> String + '_ {
        move |err| format!("{what}: {err}")
    }

    pub fn ddl() -> String {
        "BEGIN IMMEDIATE;
         CREATE TABLE IF NOT EXISTS bench_sql_tasks (id TEXT PRIMARY KEY NOT NULL, state TEXT NOT NULL,
           owner TEXT, token_sha256 TEXT, until INTEGER, fence INTEGER NOT NULL) WITHOUT ROWID;
         CREATE TABLE IF NOT EXISTS bench_sql_actions (key TEXT PRIMARY KEY NOT NULL, resource TEXT NOT NULL,
           state TEXT NOT NULL, fence INTEGER NOT NULL, holder_sha256 TEXT, until INTEGER, result BLOB) WITHOUT ROWID;
         CREATE TABLE IF NOT EXISTS bench_sql_resources (resource TEXT PRIMARY KEY NOT NULL, key TEXT NOT NULL,
           fence INTEGER NOT NULL, holder_sha256 TEXT NOT NULL, hold_until INTEGER) WITHOUT ROWID;
         CREATE TABLE IF NOT EXISTS bench_ceiling (id INTEGER PRIMARY KEY, n INTEGER NOT NULL);
         COMMIT;"
            .to_owned()
    }

    fn poll_briefly(tries: i32) -> bool {
        std::thread::sleep(Duration::from_micros(50));
        tries < 300_000
    }

    pub fn connect(path: &Path, synchronous: Synchronous) -> Result<Connection, String> {
        let c = Connection::open(path).map_err(e("opening the bench connection"))?;
        // SQLite's own busy handler sleeps up to 100 ms between tries: with
        // eight connections queueing for one write lock, waiters oversleep
        // and the baseline measures SQLite's back-off, not SQL. A short,
        // steady poll (bounded to ~30 s) is what a tuned application does.
        c.busy_handler(Some(poll_briefly))
            .map_err(e("busy_handler"))?;
        c.pragma_update(None, "journal_mode", "WAL")
            .map_err(e("journal_mode"))?;
        let sync = match synchronous {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        };
        c.pragma_update(None, "synchronous", sync)
            .map_err(e("synchronous"))?;
        Ok(c)
    }

    /// Run `f` inside `BEGIN IMMEDIATE … COMMIT` (rolled back on error).
    fn immediate<T>(
        c: &Connection,
        f: impl FnOnce(&Connection) -> Result<T, String>,
    ) -> Result<T, String> {
        c.execute_batch("BEGIN IMMEDIATE").map_err(e("BEGIN"))?;
        match f(c) {
            Ok(v) => {
                c.execute_batch("COMMIT").map_err(e("COMMIT"))?;
                Ok(v)
            }
            Err(why) => {
                let _ = c.execute_batch("ROLLBACK");
                Err(why)
            }
        }
    }

    pub fn seed(c: &Connection, ids: &[String]) -> Result<(), String> {
        immediate(c, |c| {
            let mut st = c
                .prepare_cached(
                    "INSERT INTO bench_sql_tasks (id, state, fence) VALUES (?1, 'open', 0) ON CONFLICT DO NOTHING",
                )
                .map_err(e("prepare"))?;
            for id in ids {
                st.execute([id]).map_err(e("seeding"))?;
            }
            Ok(())
        })
    }

    pub fn claim(
        c: &Connection,
        id: &str,
        agent: &str,
        digest: &str,
        until: u64,
        now: u64,
    ) -> Answer<u64> {
        immediate(c, |c| {
            let fence: Option<u64> = c
                .prepare_cached(
                    "UPDATE bench_sql_tasks SET state = 'claimed', owner = ?2, token_sha256 = ?3, until = ?4,
                       fence = fence + 1
                     WHERE id = ?1 AND state IN ('open', 'failed', 'claimed') AND (until IS NULL OR until <= ?5)
                     RETURNING fence",
                )
                .map_err(e("prepare"))?
                .query_row(params![id, agent, digest, until, now], |r| r.get(0))
                .optional()
                .map_err(e("claim"))?;
            if let Some(fence) = fence {
                return Ok(Ok(fence));
            }
            let state: Option<String> = c
                .prepare_cached("SELECT state FROM bench_sql_tasks WHERE id = ?1")
                .map_err(e("prepare"))?
                .query_row([id], |r| r.get(0))
                .optional()
                .map_err(e("claim"))?;
            Ok(Err(super::refusal(state.as_deref())))
        })
    }

    pub fn complete_task(c: &Connection, id: &str, digest: &str) -> Result<bool, String> {
        immediate(c, |c| {
            c.prepare_cached(
                "UPDATE bench_sql_tasks SET state = 'done', token_sha256 = NULL, until = NULL
                 WHERE id = ?1 AND state = 'claimed' AND token_sha256 = ?2",
            )
            .map_err(e("prepare"))?
            .execute([id, digest])
            .map(|n| n == 1)
            .map_err(e("complete"))
        })
    }

    pub fn acquire(
        c: &Connection,
        key: &str,
        resource: &str,
        ttl: u64,
        now: u64,
    ) -> Answer<Acquired> {
        immediate(c, |c| {
            let record = c
                .prepare_cached("SELECT state, until, result FROM bench_sql_actions WHERE key = ?1")
                .map_err(e("prepare"))?
                .query_row([key], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()
                .map_err(e("acquire"))?;
            let held = c
                .prepare_cached(
                    "SELECT key, fence, hold_until FROM bench_sql_resources WHERE resource = ?1",
                )
                .map_err(e("prepare"))?
                .query_row([resource], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()
                .map_err(e("acquire"))?;
            let fence = match decide_acquire(key, record, held, now) {
                Ok(answer) => return Ok(Ok(answer)),
                Err(fence) => fence,
            };
            let (holder, digest) = mint();
            let until = now.saturating_add(ttl);
            c.prepare_cached(
                "INSERT INTO bench_sql_resources (resource, key, fence, holder_sha256, hold_until)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (resource) DO UPDATE SET key = excluded.key, fence = excluded.fence,
                   holder_sha256 = excluded.holder_sha256, hold_until = excluded.hold_until",
            )
            .map_err(e("prepare"))?
            .execute(params![resource, key, fence, digest, until])
            .map_err(e("acquire"))?;
            c.prepare_cached(
                "INSERT INTO bench_sql_actions (key, resource, state, fence, holder_sha256, until)
                 VALUES (?1, ?2, 'in-flight', ?3, ?4, ?5)
                 ON CONFLICT (key) DO UPDATE SET resource = excluded.resource, state = 'in-flight',
                   fence = excluded.fence, holder_sha256 = excluded.holder_sha256, until = excluded.until",
            )
            .map_err(e("prepare"))?
            .execute(params![key, resource, fence, digest, until])
            .map_err(e("acquire"))?;
            Ok(Ok(Acquired::Granted(Lease {
                key: key.to_owned(),
                resource: resource.to_owned(),
                fence,
                holder,
                until,
            })))
        })
    }

    pub fn complete(
        c: &Connection,
        lease: &Lease,
        digest: &str,
        result: &[u8],
    ) -> Result<bool, String> {
        immediate(c, |c| {
            let done = c
                .prepare_cached(
                    "UPDATE bench_sql_actions SET state = 'completed', result = ?3, until = NULL
                     WHERE key = ?1 AND state = 'in-flight' AND fence = ?2 AND holder_sha256 = ?4",
                )
                .map_err(e("prepare"))?
                .execute(params![lease.key, lease.fence, result, digest])
                .map_err(e("complete"))?;
            c.prepare_cached(
                "UPDATE bench_sql_resources SET hold_until = NULL
                 WHERE resource = ?1 AND fence = ?2 AND holder_sha256 = ?3",
            )
            .map_err(e("prepare"))?
            .execute(params![lease.resource, lease.fence, digest])
            .map_err(e("complete"))?;
            Ok(done == 1)
        })
    }

    pub fn ceiling(c: &Connection, row: i64) -> Result<(), String> {
        c.execute_batch("BEGIN IMMEDIATE").map_err(e("BEGIN"))?;
        let n: Option<i64> = c
            .prepare_cached("SELECT n FROM bench_ceiling WHERE id = ?1")
            .map_err(e("prepare"))?
            .query_row([row], |r| r.get(0))
            .optional()
            .map_err(e("ceiling"))?;
        c.prepare_cached("INSERT OR REPLACE INTO bench_ceiling (id, n) VALUES (?1, ?2)")
            .map_err(e("prepare"))?
            .execute([row, n.unwrap_or(0) + 1])
            .map_err(e("ceiling"))?;
        c.execute_batch("COMMIT").map_err(e("COMMIT"))
    }
}

#[cfg(feature = "postgres")]
pub mod postgres {
    //! The PostgreSQL side: prepared statements, pipelined where the
    //! protocol allows.
    use futures_util::future::{try_join, try_join3, try_join4};
    use gak_rules::{Acquired, Lease};
    use tokio_postgres::types::ToSql;
    use tokio_postgres::{Client, Statement};

    use super::{Answer, decide_acquire, mint};
    use crate::blocking::run;
    use crate::store::postgres::PostgresBackend;

    pub(super) fn ddl(schema: &str) -> String {
        format!(
            "SELECT pg_advisory_xact_lock(7135863);
             CREATE TABLE IF NOT EXISTS \"{schema}\".bench_sql_tasks (id text COLLATE \"C\" PRIMARY KEY,
               state text NOT NULL, owner text, token_sha256 text, until bigint, fence bigint NOT NULL);
             CREATE TABLE IF NOT EXISTS \"{schema}\".bench_sql_actions (key text COLLATE \"C\" PRIMARY KEY,
               resource text NOT NULL, state text NOT NULL, fence bigint NOT NULL, holder_sha256 text,
               until bigint, result bytea);
             CREATE TABLE IF NOT EXISTS \"{schema}\".bench_sql_resources (resource text COLLATE \"C\" PRIMARY KEY,
               key text NOT NULL, fence bigint NOT NULL, holder_sha256 text NOT NULL, hold_until bigint);
             CREATE TABLE IF NOT EXISTS \"{schema}\".bench_ceiling (id bigint PRIMARY KEY, n bigint NOT NULL);"
        )
    }

    fn e(what: &'static str) -> impl Fn(tokio_postgres::Error) -> String {
        move |err| match err.as_db_error() {
            Some(db) => format!("{what}: {} ({})", db.message(), db.code().code()),
            None => format!("{what}: {err}"),
        }
    }

    /// A worker's PostgreSQL connection and its prepared statements.
    pub struct Pg {
        client: Client,
        seed: Statement,
        claim: Statement,
        state: Statement,
        complete_task: Statement,
        key_placeholder: Statement,
        resource_placeholder: Statement,
        read_key: Statement,
        read_resource: Statement,
        write_resource: Statement,
        write_key: Statement,
        complete_key: Statement,
        release_hold: Statement,
        ceiling_read: Statement,
        ceiling_write: Statement,
    }

    fn n(v: u64) -> i64 {
        v as i64
    }

    impl Pg {
        pub(super) fn connect(backend: &PostgresBackend) -> Result<Box<Pg>, String> {
            run(async {
                let client = backend.connect().await.map_err(|f| f.to_string())?;
                let s = backend.schema();
                let prep = async |sql: String| client.prepare(&sql).await.map_err(e("prepare"));
                Ok(Box::new(Pg {
                    seed: prep(format!(
                        "INSERT INTO \"{s}\".bench_sql_tasks (id, state, fence) SELECT unnest($1::text[]), 'open', 0 ON CONFLICT DO NOTHING"
                    )).await?,
                    claim: prep(format!(
                        "UPDATE \"{s}\".bench_sql_tasks SET state = 'claimed', owner = $2, token_sha256 = $3, until = $4,
                           fence = fence + 1
                         WHERE id = $1 AND state IN ('open', 'failed', 'claimed') AND (until IS NULL OR until <= $5)
                         RETURNING fence"
                    )).await?,
                    state: prep(format!("SELECT state FROM \"{s}\".bench_sql_tasks WHERE id = $1")).await?,
                    complete_task: prep(format!(
                        "UPDATE \"{s}\".bench_sql_tasks SET state = 'done', token_sha256 = NULL, until = NULL
                         WHERE id = $1 AND state = 'claimed' AND token_sha256 = $2"
                    )).await?,
                    key_placeholder: prep(format!(
                        "INSERT INTO \"{s}\".bench_sql_actions (key, resource, state, fence) VALUES ($1, $2, 'new', 0)
                         ON CONFLICT DO NOTHING"
                    )).await?,
                    resource_placeholder: prep(format!(
                        "INSERT INTO \"{s}\".bench_sql_resources (resource, key, fence, holder_sha256) VALUES ($1, '', 0, '')
                         ON CONFLICT DO NOTHING"
                    )).await?,
                    read_key: prep(format!(
                        "SELECT state, until, result FROM \"{s}\".bench_sql_actions WHERE key = $1 FOR UPDATE"
                    )).await?,
                    read_resource: prep(format!(
                        "SELECT key, fence, hold_until FROM \"{s}\".bench_sql_resources WHERE resource = $1 FOR UPDATE"
                    )).await?,
                    write_resource: prep(format!(
                        "UPDATE \"{s}\".bench_sql_resources SET key = $2, fence = $3, holder_sha256 = $4, hold_until = $5
                         WHERE resource = $1"
                    )).await?,
                    write_key: prep(format!(
                        "UPDATE \"{s}\".bench_sql_actions SET resource = $2, state = 'in-flight', fence = $3,
                           holder_sha256 = $4, until = $5 WHERE key = $1"
                    )).await?,
                    complete_key: prep(format!(
                        "UPDATE \"{s}\".bench_sql_actions SET state = 'completed', result = $3, until = NULL
                         WHERE key = $1 AND state = 'in-flight' AND fence = $2 AND holder_sha256 = $4"
                    )).await?,
                    release_hold: prep(format!(
                        "UPDATE \"{s}\".bench_sql_resources SET hold_until = NULL
                         WHERE resource = $1 AND fence = $2 AND holder_sha256 = $3"
                    )).await?,
                    ceiling_read: prep(format!(
                        "SELECT n FROM \"{s}\".bench_ceiling WHERE id = $1 FOR UPDATE"
                    )).await?,
                    ceiling_write: prep(format!(
                        "INSERT INTO \"{s}\".bench_ceiling (id, n) VALUES ($1, $2)
                         ON CONFLICT (id) DO UPDATE SET n = excluded.n"
                    )).await?,
                    client,
                }))
            })
        }

        pub(super) fn seed(&mut self, ids: &[String]) -> Result<(), String> {
            run(self.client.execute(&self.seed, &[&ids]))
                .map(drop)
                .map_err(e("seeding"))
        }

        pub(super) fn claim(
            &mut self,
            id: &str,
            agent: &str,
            digest: &str,
            until: u64,
            now: u64,
        ) -> Answer<u64> {
            let c = &self.client;
            let row = run(c.query_opt(&self.claim, &[&id, &agent, &digest, &n(until), &n(now)]))
                .map_err(e("claim"))?;
            if let Some(row) = row {
                return Ok(Ok(row.get::<_, i64>(0) as u64));
            }
            let state = run(c.query_opt(&self.state, &[&id]))
                .map_err(e("claim"))?
                .map(|r| r.get::<_, String>(0));
            Ok(Err(super::refusal(state.as_deref())))
        }

        pub(super) fn complete_task(&mut self, id: &str, digest: &str) -> Result<bool, String> {
            run(self.client.execute(&self.complete_task, &[&id, &digest]))
                .map(|n| n == 1)
                .map_err(e("complete"))
        }

        pub(super) fn acquire(
            &mut self,
            key: &str,
            resource: &str,
            ttl: u64,
            now: u64,
        ) -> Answer<Acquired> {
            let c = &self.client;
            let key_params: [&(dyn ToSql + Sync); 2] = [&key, &resource];
            let key_only: [&(dyn ToSql + Sync); 1] = [&key];
            let resource_only: [&(dyn ToSql + Sync); 1] = [&resource];
            let first = run(try_join4(
                c.batch_execute("BEGIN"),
                try_join(
                    c.execute(&self.key_placeholder, &key_params),
                    c.execute(&self.resource_placeholder, &resource_only),
                ),
                c.query_one(&self.read_key, &key_only),
                c.query_one(&self.read_resource, &resource_only),
            ));
            let (_, _, record, held) = match first {
                Ok(found) => found,
                Err(err) => {
                    let _ = run(c.batch_execute("ROLLBACK"));
                    return Err(e("acquire")(err));
                }
            };
            let state: String = record.get(0);
            let record = (state != "new").then(|| {
                (
                    state,
                    record.get::<_, Option<i64>>(1).map(|u| u as u64),
                    record.get::<_, Option<Vec<u8>>>(2),
                )
            });
            let holder_key: String = held.get(0);
            let held = (!holder_key.is_empty()).then(|| {
                (
                    holder_key,
                    held.get::<_, i64>(1) as u64,
                    held.get::<_, Option<i64>>(2).map(|u| u as u64),
                )
            });
            let fence = match decide_acquire(key, record, held, now) {
                Ok(answer) => {
                    // Nothing to keep (a fresh key's placeholder included).
                    run(c.batch_execute("ROLLBACK")).map_err(e("ROLLBACK"))?;
                    return Ok(Ok(answer));
                }
                Err(fence) => fence,
            };
            let (holder, digest) = mint();
            let until = now.saturating_add(ttl);
            let written = run(try_join3(
                c.execute(
                    &self.write_resource,
                    &[&resource, &key, &n(fence), &digest, &n(until)],
                ),
                c.execute(
                    &self.write_key,
                    &[&key, &resource, &n(fence), &digest, &n(until)],
                ),
                c.batch_execute("COMMIT"),
            ));
            if let Err(err) = written {
                let _ = run(c.batch_execute("ROLLBACK"));
                return Err(e("acquire")(err));
            }
            Ok(Ok(Acquired::Granted(Lease {
                key: key.to_owned(),
                resource: resource.to_owned(),
                fence,
                holder,
                until,
            })))
        }

        pub(super) fn complete(
            &mut self,
            lease: &Lease,
            digest: &str,
            result: &[u8],
        ) -> Result<bool, String> {
            let c = &self.client;
            let fence = n(lease.fence);
            let r = run(async {
                try_join(
                    c.batch_execute("BEGIN"),
                    try_join3(
                        c.execute(&self.complete_key, &[&lease.key, &fence, &result, &digest]),
                        c.execute(&self.release_hold, &[&lease.resource, &fence, &digest]),
                        c.batch_execute("COMMIT"),
                    ),
                )
                .await
            });
            match r {
                Ok((_, (done, _, _))) => Ok(done == 1),
                Err(err) => {
                    let _ = run(c.batch_execute("ROLLBACK"));
                    Err(e("complete")(err))
                }
            }
        }

        pub(super) fn ceiling(&mut self, row: i64) -> Result<(), String> {
            let c = &self.client;
            run(async {
                c.batch_execute("BEGIN").await?;
                let found = c.query_opt(&self.ceiling_read, &[&row]).await?;
                let v = found.map_or(0, |r| r.get::<_, i64>(0)) + 1;
                c.execute(&self.ceiling_write, &[&row, &v]).await?;
                c.batch_execute("COMMIT").await
            })
            .map_err(|err| {
                let _ = run(c.batch_execute("ROLLBACK"));
                e("ceiling")(err)
            })
        }
    }
}

/// Which refusal a claim that changed nothing gets, from the task's state.
fn refusal(state: Option<&str>) -> Error {
    match state {
        None => Error::NotFound,
        Some("done") => Error::Terminal,
        Some(_) => Error::Taken,
    }
}
