//! The PostgreSQL binding: many hosts on many machines sharing one database.
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use gak_rules::StoreFault;
use std::collections::HashMap;
use tokio::runtime::Runtime;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use tokio_postgres::{Client, Config, NoTls, Statement};

use super::{Backend, Session, TABLES};
use crate::OpenError;

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
#[derive(Debug)]
pub struct PostgresBackend {
    config: Config,
    schema: String,
    clock: ClockSource,
    /// Highest database time handed out, so expiry never moves backwards.
    last_now: Arc<AtomicU64>,
    target: String,
}

/// A schema name: a plain lowercase identifier, so it can be quoted safely
/// and can never name another schema through punctuation.
pub fn valid_schema(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z' | '_'))
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
        && name.len() <= 63
        && !name.starts_with("pg_")
}

fn fault(e: tokio_postgres::Error) -> StoreFault {
    match e.code() {
        Some(c)
            if *c == SqlState::T_R_SERIALIZATION_FAILURE
                || *c == SqlState::T_R_DEADLOCK_DETECTED =>
        {
            StoreFault::Conflict(e.to_string())
        }
        _ => StoreFault::Failure(match e.as_db_error() {
            Some(db) => format!("{}: {} ({})", db.severity(), db.message(), db.code().code()),
            None => e.to_string(),
        }),
    }
}

fn runtime() -> Result<Runtime, StoreFault> {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| StoreFault::Failure(format!("tokio runtime: {e}")))
}

impl PostgresBackend {
    /// Open `postgres://user@host:port/db?schema=NAME&clock=db`, creating the
    /// schema and its tables if needed.
    pub fn open(url: &str) -> Result<Self, OpenError> {
        let backend = Self::parse(url)?;
        backend.ensure_schema().map_err(OpenError::Store)?;
        Ok(backend)
    }

    /// Parse the URL without touching the server.
    pub fn parse(url: &str) -> Result<Self, OpenError> {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut schema = "gak".to_owned();
        let mut clock = ClockSource::Host;
        let mut passthrough = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("schema", name)) => schema = name.to_owned(),
                Some(("clock", "db" | "database")) => clock = ClockSource::Database,
                Some(("clock", "host")) => clock = ClockSource::Host,
                Some(("clock", other)) => {
                    return Err(OpenError::BadOption(format!(
                        "clock={other} (expected db or host)"
                    )));
                }
                _ => passthrough.push(pair),
            }
        }
        if !valid_schema(&schema) {
            return Err(OpenError::BadOption(format!(
                "schema {schema:?}: expected a lowercase identifier ([a-z_][a-z0-9_]*, at most 63 bytes, not pg_*)"
            )));
        }
        let dsn = if passthrough.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", passthrough.join("&"))
        };
        let mut config: Config = dsn
            .parse()
            .map_err(|e| OpenError::BadOption(format!("postgres URL: {e}")))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let target = describe_target(&config);
        Ok(PostgresBackend {
            config,
            schema,
            clock,
            last_now: Arc::new(AtomicU64::new(0)),
            target,
        })
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
            config: self.config.clone(),
            schema: schema.to_owned(),
            clock: self.clock,
            last_now: Arc::new(AtomicU64::new(0)),
            target: self.target.clone(),
        })
    }

    fn connect(&self, rt: &Runtime) -> Result<Client, StoreFault> {
        let (client, connection) = rt.block_on(self.config.connect(NoTls)).map_err(|e| {
            StoreFault::Failure(format!(
                "cannot connect to PostgreSQL at {}: {e:#}",
                self.target
            ))
        })?;
        rt.spawn(async move {
            // Ends when the client is dropped or the server goes away; the
            // next call then fails with a storage error and reconnects.
            let _ = connection.await;
        });
        Ok(client)
    }

    fn admin<T>(
        &self,
        f: impl AsyncFnOnce(&Client) -> Result<T, tokio_postgres::Error>,
    ) -> Result<T, StoreFault> {
        let rt = runtime()?;
        let client = self.connect(&rt)?;
        rt.block_on(f(&client)).map_err(fault)
    }

    /// Create the schema and its tables if missing (idempotent, safe to race).
    pub fn ensure_schema(&self) -> Result<(), StoreFault> {
        let s = &self.schema;
        let mut ddl =
            format!("SELECT pg_advisory_xact_lock(7135862); CREATE SCHEMA IF NOT EXISTS \"{s}\";");
        for t in TABLES {
            ddl.push_str(&format!(
                "CREATE TABLE IF NOT EXISTS \"{s}\".\"{t}\" (key text COLLATE \"C\" PRIMARY KEY, value {} NOT NULL);",
                column_type(t)
            ));
        }
        self.admin(async |c| c.batch_execute(&format!("BEGIN; {ddl} COMMIT;")).await)
    }

    /// Drop the schema and everything in it.
    pub fn drop_schema(&self) -> Result<(), StoreFault> {
        let s = &self.schema;
        self.admin(async |c| {
            c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{s}\" CASCADE"))
                .await
        })
    }
}

/// Kernel tables hold the component's JSON records; `downstream` holds
/// whatever sink bodies write, so it is plain text.
fn column_type(table: &str) -> &'static str {
    if table == "downstream" {
        "text"
    } else {
        "jsonb"
    }
}

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
    fn session(&self) -> Result<Box<dyn Session>, StoreFault> {
        let rt = runtime()?;
        let client = self.connect(&rt)?;
        Ok(Box::new(PostgresSession {
            rt,
            client: Some(client),
            statements: HashMap::new(),
            backend: PostgresBackend {
                config: self.config.clone(),
                schema: self.schema.clone(),
                clock: self.clock,
                last_now: self.last_now.clone(),
                target: self.target.clone(),
            },
            open: false,
        }))
    }

    fn describe(&self) -> String {
        format!("postgres://{}/ (schema {})", self.target, self.schema)
    }
}

struct PostgresSession {
    rt: Runtime,
    client: Option<Client>,
    /// Prepared once per connection: a call then costs one Bind/Execute per
    /// statement, and pipelined statements go out in the order issued.
    statements: HashMap<String, Statement>,
    backend: PostgresBackend,
    open: bool,
}

impl PostgresSession {
    fn client(&self) -> Result<&Client, StoreFault> {
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

    /// A write under the key's advisory lock (already held if the key was
    /// read first, as the component always does; re-taking it is free).
    fn locked_write(
        &mut self,
        table: &'static str,
        key: &str,
        sql: &str,
        value: Option<&str>,
    ) -> Result<(), StoreFault> {
        let lock_id = self.lock_name(table, key);
        let lock = self.prepared("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")?;
        let write = self.prepared(sql)?;
        let client = self.client()?;
        let lock_params: [&(dyn ToSql + Sync); 1] = [&lock_id];
        let with_value: [&(dyn ToSql + Sync); 2] = [&key, &value];
        let params: &[&(dyn ToSql + Sync)] = if value.is_some() {
            &with_value
        } else {
            &with_value[..1]
        };
        let r = self.rt.block_on(async {
            let l = client.execute(&lock, &lock_params);
            let w = client.execute(&write, params);
            futures_util::future::try_join(l, w).await.map(drop)
        });
        self.check(r)
    }

    fn prepared(&mut self, sql: &str) -> Result<Statement, StoreFault> {
        if let Some(st) = self.statements.get(sql) {
            return Ok(st.clone());
        }
        let client = self.client()?;
        let r = self.rt.block_on(client.prepare(sql));
        let st = self.check(r)?;
        self.statements.insert(sql.to_owned(), st.clone());
        Ok(st)
    }

    /// What a key's advisory lock is named by; the server hashes it with
    /// `hashtextextended(name, 0)` (see the module docs, `host/HOSTS.md`).
    fn lock_name(&self, table: &str, key: &str) -> String {
        format!("{}/{table}/{key}", self.backend.schema)
    }

    /// Drop a connection that failed mid-transaction: the server rolls the
    /// transaction back when the connection goes; the next `begin` reconnects.
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
}

impl Session for PostgresSession {
    fn begin(&mut self) -> Result<(), StoreFault> {
        if self.open {
            return Err(StoreFault::Failure("transaction already open".into()));
        }
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.statements.clear();
            self.client = Some(self.backend.connect(&self.rt)?);
        }
        let client = self.client.as_ref().expect("connected above");
        let r = self
            .rt
            .block_on(client.batch_execute("BEGIN ISOLATION LEVEL READ COMMITTED"));
        self.check(r)?;
        self.open = true;
        Ok(())
    }

    fn get(&mut self, table: &'static str, key: &str) -> Result<Option<String>, StoreFault> {
        Ok(self.get_many(&[(table, key)])?.pop().flatten())
    }

    fn get_many(
        &mut self,
        keys: &[(&'static str, &str)],
    ) -> Result<Vec<Option<String>>, StoreFault> {
        let locks: Vec<String> = keys.iter().map(|(t, k)| self.lock_name(t, k)).collect();
        // One lock order for every transaction (by lock id) keeps deadlocks rare.
        let lock = self.prepared(
            "SELECT pg_advisory_xact_lock(h) FROM (SELECT DISTINCT hashtextextended(x, 0) AS h FROM unnest($1::text[]) AS x) AS l ORDER BY h",
        )?;
        let selects: Vec<Statement> = keys
            .iter()
            .map(|(t, _)| {
                let sql = format!("SELECT value::text FROM {} WHERE key = $1", self.table(t)?);
                self.prepared(&sql)
            })
            .collect::<Result<_, StoreFault>>()?;
        let client = self.client()?;
        let lock_params: [&(dyn ToSql + Sync); 1] = [&locks];
        let key_params: Vec<[&(dyn ToSql + Sync); 1]> = keys
            .iter()
            .map(|(_, k)| [k as &(dyn ToSql + Sync)])
            .collect();
        let r = self.rt.block_on(async {
            // Pipelined: the locks, then the reads, in one round trip; each
            // read is its own statement, so its snapshot starts after every
            // lock is held and sees the previous holder's commit.
            let lock = client.execute(&lock, &lock_params);
            let reads = futures_util::future::try_join_all(
                selects
                    .iter()
                    .zip(&key_params)
                    .map(|(st, p)| client.query_opt(st, p)),
            );
            let (_, rows) = futures_util::future::try_join(lock, reads).await?;
            Ok::<_, tokio_postgres::Error>(
                rows.into_iter()
                    .map(|r| r.map(|row| row.get::<_, String>(0)))
                    .collect(),
            )
        });
        self.check(r)
    }

    fn put(&mut self, table: &'static str, key: &str, value: &str) -> Result<(), StoreFault> {
        let sql = format!(
            "INSERT INTO {} (key, value) VALUES ($1, $2::text::{}) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            self.table(table)?,
            column_type(table)
        );
        self.locked_write(table, key, &sql, Some(value))
    }

    fn delete(&mut self, table: &'static str, key: &str) -> Result<(), StoreFault> {
        let sql = format!("DELETE FROM {} WHERE key = $1", self.table(table)?);
        self.locked_write(table, key, &sql, None)
    }

    fn scan(
        &mut self,
        table: &'static str,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreFault> {
        // The key column is COLLATE "C" (byte order, like every other
        // binding), so this range is served by the primary key's B-tree.
        // One statement: one consistent snapshot, no locks taken.
        let table = self.table(table)?;
        let (lower, strict) = match after {
            Some(a) if a >= prefix => (a, true),
            _ => (prefix, false),
        };
        let op = if strict { ">" } else { ">=" };
        let end = super::prefix_end(prefix);
        let upper = if end.is_some() {
            "AND key COLLATE \"C\" < $2"
        } else {
            "AND $2::text IS NULL"
        };
        let sql = format!(
            "SELECT key, value::text FROM {table} WHERE key COLLATE \"C\" {op} $1 {upper} ORDER BY key COLLATE \"C\" LIMIT $3"
        );
        let st = self.prepared(&sql)?;
        let client = self.client()?;
        let limit = i64::from(limit);
        let r = self.rt.block_on(client.query(&st, &[&lower, &end, &limit]));
        let rows = self.check(r)?;
        Ok(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    fn commit(&mut self) -> Result<(), StoreFault> {
        let client = self.client()?;
        let r = self.rt.block_on(client.batch_execute("COMMIT"));
        self.open = false;
        self.check(r)
    }

    fn rollback(&mut self) {
        if self.open {
            self.open = false;
            if let Some(client) = &self.client
                && self.rt.block_on(client.batch_execute("ROLLBACK")).is_err()
            {
                self.client = None;
            }
        }
    }

    fn now(&mut self) -> Option<Result<u64, StoreFault>> {
        if self.backend.clock != ClockSource::Database {
            return None;
        }
        let client = match self.client() {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        let r = self.rt.block_on(client.query_one(
            "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::int8",
            &[],
        ));
        Some(self.check(r).map(|row| {
            let db = row.get::<_, i64>(0).max(0) as u64;
            let prev = self.backend.last_now.fetch_max(db, Ordering::AcqRel);
            prev.max(db)
        }))
    }

    fn execute(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Option<Result<u64, StoreFault>> {
        let client = match self.client() {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        let r = self.rt.block_on(client.execute(sql, params));
        Some(self.check(r))
    }

    fn query_text(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Option<Result<Vec<Vec<Option<String>>>, StoreFault>> {
        let client = match self.client() {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        let r = self.rt.block_on(client.query(sql, params));
        Some(self.check(r).and_then(|rows| {
            rows.iter()
                .map(|row| {
                    (0..row.len())
                        .map(|i| row.try_get::<_, Option<String>>(i))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| StoreFault::Failure(format!("non-text column: {e}")))
                })
                .collect()
        }))
    }
}
