//! The SQLite side: every call inside `BEGIN IMMEDIATE`, one connection
//! per worker, statements cached by rusqlite.
use std::path::Path;
use std::time::Duration;

use gak::rusqlite::{Connection, OptionalExtension, params};
use gak_rules::{Acquired, Lease};

use super::{Answer, decide_acquire, mint};
use gak::store::sqlite::Synchronous;

fn e(what: &str) -> impl Fn(gak::rusqlite::Error) -> String + '_ {
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
     CREATE INDEX IF NOT EXISTS bench_sql_tasks_open ON bench_sql_tasks (id) WHERE state = 'open';
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

/// Claim up to `limit` open tasks in one statement (SQLite has one writer:
/// no rows to skip).
pub fn drain(
    c: &Connection,
    limit: u32,
    agent: &str,
    digest: &str,
    until: u64,
) -> Result<Vec<String>, String> {
    immediate(c, |c| {
        let mut st = c
            .prepare_cached(
                "UPDATE bench_sql_tasks SET state = 'claimed', owner = ?2, token_sha256 = ?3, until = ?4,
                   fence = fence + 1
                 WHERE id IN (SELECT id FROM bench_sql_tasks WHERE state = 'open' ORDER BY id LIMIT ?1)
                 RETURNING id",
            )
            .map_err(e("prepare"))?;
        let rows = st
            .query_map(params![limit, agent, digest, until], |r| {
                r.get::<_, String>(0)
            })
            .map_err(e("drain"))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(e("drain"))
    })
}

/// Mark the drained tasks done where still claimed.
pub fn complete_drained(c: &Connection, ids: &[String]) -> Result<u64, String> {
    immediate(c, |c| {
        let mut st = c
            .prepare_cached(
                "UPDATE bench_sql_tasks SET state = 'done', token_sha256 = NULL, until = NULL
                 WHERE id = ?1 AND state = 'claimed'",
            )
            .map_err(e("prepare"))?;
        let mut done = 0;
        for id in ids {
            done += st.execute([id]).map_err(e("complete drained"))? as u64;
        }
        Ok(done)
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

pub fn acquire(c: &Connection, key: &str, resource: &str, ttl: u64, now: u64) -> Answer<Acquired> {
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
