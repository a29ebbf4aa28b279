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
// A build without any SQL binding (`--no-default-features --features cli`)
// keeps these types, uninhabited: nothing here runs, nothing is used.
#![cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(unused_variables, unreachable_code, dead_code)
)]
#[cfg(feature = "sqlite")]
use std::path::{Path, PathBuf};

use gak_rules::{Acquired, Error, Lease};

#[cfg(feature = "postgres")]
use gak::store::postgres::PostgresBackend;
#[cfg(feature = "sqlite")]
use gak::store::sqlite::Synchronous;

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
    /// No SQL binding in this build (never made).
    #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
    Unavailable(std::convert::Infallible),
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
    let token = gak_rules::format::hex128(gak::measure::random128());
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
            Database::Sqlite { path, synchronous } => sqlite::connect(path, *synchronous)?
                .execute_batch(&sqlite::ddl())
                .map_err(|e| format!("creating the bench tables: {e}")),
            #[cfg(feature = "postgres")]
            Database::Postgres(backend) => {
                let client = gak::blocking::run_future(backend.connect())
                    .map_err(|e| format!("connecting: {e}"))?;
                gak::blocking::run_future(client.batch_execute(&postgres::ddl(backend.schema())))
                    .map_err(|e| format!("creating the bench tables: {e}"))
            }
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Database::Unavailable(never) => match *never {},
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
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Database::Unavailable(never) => match *never {},
        }
    }
}

/// One worker's connection.
pub enum Conn {
    /// SQLite.
    #[cfg(feature = "sqlite")]
    Sqlite(gak::rusqlite::Connection),
    /// PostgreSQL, with its prepared statements.
    #[cfg(feature = "postgres")]
    Postgres(Box<postgres::Pg>),
    /// No SQL binding in this build (never made).
    #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
    Unavailable(std::convert::Infallible),
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
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Conn::Unavailable(never) => match *never {},
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
        let fence: Result<u64, Error> = match self {
            #[cfg(feature = "sqlite")]
            Conn::Sqlite(c) => sqlite::claim(c, id, agent, &digest, until, now)?,
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => pg.claim(id, agent, &digest, until, now)?,
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Conn::Unavailable(never) => match *never {},
        };
        Ok(fence.map(|fence| Claim {
            fence,
            token,
            until,
        }))
    }

    /// Claim up to `limit` open tasks for `agent` at `now` in one
    /// statement (the queues' `FOR UPDATE SKIP LOCKED … LIMIT n` shape),
    /// answering their ids.
    ///
    /// # Errors
    /// The database's failure.
    pub fn drain(
        &mut self,
        limit: u32,
        agent: &str,
        ttl: u64,
        now: u64,
    ) -> Result<Vec<String>, String> {
        let (_token, digest) = mint();
        let until = now.saturating_add(ttl);
        match self {
            #[cfg(feature = "sqlite")]
            Conn::Sqlite(c) => sqlite::drain(c, limit, agent, &digest, until),
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => pg.drain(limit, agent, &digest, until),
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Conn::Unavailable(never) => match *never {},
        }
    }

    /// Mark drained tasks done where still claimed (`id = ANY($1) AND
    /// state = 'claimed'`); answers how many.
    ///
    /// # Errors
    /// The database's failure.
    pub fn complete_drained(&mut self, ids: &[String]) -> Result<u64, String> {
        match self {
            #[cfg(feature = "sqlite")]
            Conn::Sqlite(c) => sqlite::complete_drained(c, ids),
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => pg.complete_drained(ids),
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Conn::Unavailable(never) => match *never {},
        }
    }

    /// Mark task `id` done, for the holder of `token`: `lease-lost` when it
    /// does not hold the task.
    ///
    /// # Errors
    /// The database's failure.
    pub fn complete_task(&mut self, id: &str, token: &str) -> Answer<()> {
        let digest = gak_rules::format::digest(token);
        let changed: bool = match self {
            #[cfg(feature = "sqlite")]
            Conn::Sqlite(c) => sqlite::complete_task(c, id, &digest)?,
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => pg.complete_task(id, &digest)?,
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Conn::Unavailable(never) => match *never {},
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
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Conn::Unavailable(never) => match *never {},
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
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Conn::Unavailable(never) => match *never {},
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
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Conn::Unavailable(never) => match *never {},
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
mod sqlite;

#[cfg(feature = "postgres")]
pub mod postgres;

/// Which refusal a claim that changed nothing gets, from the task's state.
fn refusal(state: Option<&str>) -> Error {
    match state {
        None => Error::NotFound,
        Some("done") => Error::Terminal,
        Some(_) => Error::Taken,
    }
}
