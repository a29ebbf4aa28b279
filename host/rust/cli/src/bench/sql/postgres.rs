//! The PostgreSQL side: prepared statements, pipelined where the
//! protocol allows.
use futures_util::future::{try_join, try_join3, try_join4};
use gak::tokio_postgres::types::ToSql;
use gak::tokio_postgres::{Client, Statement};
use gak_rules::{Acquired, Lease};

use super::{Answer, decide_acquire, mint};
use gak::blocking::run_future as run;
use gak::store::postgres::PostgresBackend;

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
         CREATE TABLE IF NOT EXISTS \"{schema}\".bench_ceiling (id bigint PRIMARY KEY, n bigint NOT NULL);
         CREATE INDEX IF NOT EXISTS bench_sql_tasks_open ON \"{schema}\".bench_sql_tasks (id) WHERE state = 'open';"
    )
}

fn e(what: &'static str) -> impl Fn(gak::tokio_postgres::Error) -> String {
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
    drain: Statement,
    complete_drained: Statement,
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
                // The anchors' shape (River, graphile-worker, Oban, pg-boss):
                // lock N open jobs skipping the locked ones, claim them in the
                // same statement; complete by id, where still claimed.
                drain: prep(format!(
                    "WITH c AS (SELECT id FROM \"{s}\".bench_sql_tasks WHERE state = 'open'
                                ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
                     UPDATE \"{s}\".bench_sql_tasks t SET state = 'claimed', owner = $2, token_sha256 = $3,
                       until = $4, fence = t.fence + 1
                     FROM c WHERE t.id = c.id RETURNING t.id"
                )).await?,
                complete_drained: prep(format!(
                    "UPDATE \"{s}\".bench_sql_tasks SET state = 'done', token_sha256 = NULL, until = NULL
                     WHERE id = ANY($1) AND state = 'claimed'"
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

    pub(super) fn drain(
        &mut self,
        limit: u32,
        agent: &str,
        digest: &str,
        until: u64,
    ) -> Result<Vec<String>, String> {
        let limit = i64::from(limit);
        run(self
            .client
            .query(&self.drain, &[&limit, &agent, &digest, &n(until)]))
        .map(|rows| rows.iter().map(|r| r.get::<_, String>(0)).collect())
        .map_err(e("drain"))
    }

    pub(super) fn complete_drained(&mut self, ids: &[String]) -> Result<u64, String> {
        run(self.client.execute(&self.complete_drained, &[&ids])).map_err(e("complete drained"))
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
