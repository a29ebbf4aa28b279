//! The transaction a fenced sink's body (or a `with_downstream` body) runs
//! in: the binding's `downstream` table, and each binding's own driver
//! handle, guarded so the body can never end the kernel's transaction
//! (HOSTS.md rule 12).
use gak_rules::{Error, StoreFault};

use crate::store::{self, Session};

/// The open transaction of a fenced sink's body (or of `with_downstream`).
///
/// Everything written through it commits or rolls back together with the
/// sink's fence compare. The bindings' own handles (`sqlite()`,
/// `postgres_execute()`, `postgres_query()`) are below, one per feature.
pub struct Downstream<'a> {
    session: &'a mut dyn Session,
    /// A store conflict passed through here: the whole call is re-run.
    conflict: bool,
    /// A store failure passed through here: the call ends with `storage`,
    /// even if the body caught the error and returned normally (HOSTS.md
    /// rule 12: the transaction may be broken, e.g. aborted on PostgreSQL).
    failure: Option<String>,
}

impl Downstream<'_> {
    pub(crate) fn track<T>(&mut self, r: Result<T, StoreFault>) -> Result<T, Error> {
        match &r {
            Err(StoreFault::Conflict(_)) => self.conflict = true,
            Err(StoreFault::Failure(why)) => {
                self.failure
                    .get_or_insert_with(|| format!("a store call inside the body failed: {why}"));
            }
            Ok(_) => {}
        }
        r.map_err(Error::from)
    }

    /// The binding's session, if it is an `S`.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn session_as<S: 'static>(&mut self) -> Option<&mut S> {
        self.session.as_any().downcast_mut::<S>()
    }

    /// The binding's session, if it is an `S`, with the slot where a
    /// statement run on its lent driver handle records a failure (which
    /// ends the call, as for [`Downstream::get`] / [`Downstream::put`]).
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub(crate) fn lend<S: 'static>(&mut self) -> Option<(&mut S, &mut Option<String>)> {
        let session = self.session.as_any().downcast_mut::<S>()?;
        Some((session, &mut self.failure))
    }

    /// Read a key of the binding's `downstream` table.
    ///
    /// # Errors
    /// `invalid-input` for a key holding a NUL character (nothing read; the
    /// call goes on); `storage` when the store fails (a conflict re-runs the
    /// whole call).
    pub async fn get(&mut self, key: &str) -> Result<Option<String>, Error> {
        storable(key, "key")?;
        let r = store::get_one(&mut *self.session, "downstream", key).await;
        self.track(r)
    }

    /// Write a key of the binding's `downstream` table.
    ///
    /// # Errors
    /// `invalid-input` for a key or value holding a NUL character (nothing
    /// written; the call goes on); `storage` when the store fails (a
    /// conflict re-runs the whole call).
    pub async fn put(&mut self, key: &str, value: &str) -> Result<(), Error> {
        storable(key, "key")?;
        storable(value, "value")?;
        let r = self.session.put("downstream", key, value).await;
        self.track(r)
    }

    /// Run `body` on the open transaction of `state`'s session; a conflict
    /// seen by the body marks the call for a re-run.
    pub(crate) async fn run<T>(
        state: &mut crate::engine::HostState,
        body: &mut impl AsyncFnMut(&mut Downstream<'_>) -> T,
    ) -> T {
        state.session.body_started();
        let mut down = Downstream {
            session: &mut *state.session,
            conflict: false,
            failure: None,
        };
        let out = body(&mut down).await;
        let (conflict, failure) = (down.conflict, down.failure);
        state.conflict |= conflict;
        if let Some(why) = failure {
            state.failure.get_or_insert(why);
        }
        // The binding's own account of the body: a transaction it can no
        // longer commit (aborted by a failed statement, or ended by the body).
        match state.session.body_ended().await {
            Ok(()) => {}
            Err(StoreFault::Conflict(_)) => state.conflict = true,
            Err(StoreFault::Failure(why)) => {
                state.failure.get_or_insert(why);
            }
        }
        out
    }
}

/// PostgreSQL cannot store a NUL character in text; memory and SQLite can.
/// Refused up front on every binding, so a body behaves alike on all three
/// (and never fails only at the commit, on one of them).
fn storable(text: &str, what: &str) -> Result<(), Error> {
    if text.contains('\0') {
        return Err(Error::InvalidInput(format!(
            "a downstream {what} cannot hold a NUL character (no binding stores it alike)"
        )));
    }
    Ok(())
}

#[cfg(feature = "sqlite")]
impl Downstream<'_> {
    /// The SQLite connection inside the same transaction, when the binding
    /// is SQLite (`None` otherwise): write your own tables here and they
    /// commit atomically with the fence compare (see [`crate::store::sqlite::LentSqlite`]).
    pub fn sqlite(&mut self) -> Option<crate::store::sqlite::LentSqlite<'_>> {
        let (session, failure) = self.lend::<crate::store::sqlite::SqliteSession>()?;
        let conn = session.connection()?;
        Some(crate::store::sqlite::LentSqlite::new(conn, failure))
    }
}

#[cfg(feature = "postgres")]
use futures_util::future::join;

#[cfg(feature = "postgres")]
impl Downstream<'_> {
    /// The PostgreSQL client inside the same transaction (`None` when the
    /// binding is not PostgreSQL), for the vetted calls below, with the
    /// transaction's id: transaction control would let a body end the
    /// kernel's transaction, so the raw client is never handed out.
    async fn postgres(
        &mut self,
        sql: &str,
    ) -> Option<
        Result<(&tokio_postgres::Client, i64, crate::store::postgres::Driver), gak_rules::Error>,
    > {
        let guarded = self
            .session_as::<crate::store::postgres::PostgresSession>()?
            .guards_statements();
        // Lexed as the server lexes it: no spelling hides transaction
        // control, and one statement per call (HOSTS.md rule 12).
        if guarded && let Err(refusal) = crate::store::postgres::lex::check(sql) {
            return Some(Err(gak_rules::Error::InvalidInput(refusal.to_string())));
        }
        let session = self.session_as::<crate::store::postgres::PostgresSession>()?;
        let lent = session.driver().drive_owned(session.lend()).await;
        let began = match lent {
            Ok(began) => began,
            Err(fault) => return Some(self.track(Err(fault))),
        };
        let session = self.session_as::<crate::store::postgres::PostgresSession>()?;
        Some(
            session
                .client()
                .map(|c| (c, began, session.driver()))
                .ok_or_else(|| gak_rules::Error::storage("no open transaction")),
        )
    }

    /// After a body's statement, the transaction's id read in the same round
    /// trip: another id means the statement ended the kernel's transaction
    /// (a spelling the lexer missed), and nothing more — of the body's or
    /// the kernel's — is sent on it.
    fn still_ours(
        &mut self,
        began: i64,
        now: Result<tokio_postgres::Row, tokio_postgres::Error>,
    ) -> Result<(), StoreFault> {
        let now: i64 = now.map_err(crate::store::postgres::fault)?.get(0);
        if now == began {
            return Ok(());
        }
        if let Some(session) = self.session_as::<crate::store::postgres::PostgresSession>() {
            session.lost();
        }
        Err(StoreFault::Failure(format!(
            "a statement of the sink body ended the kernel's transaction (it began as {began}, it is now {now}): nothing more is sent on it and nothing of the call is committed by the kernel"
        )))
    }

    /// Run a statement inside the same transaction, when the binding is
    /// PostgreSQL (`None` otherwise). A deadlock or serialization failure
    /// re-runs the whole call; any other failure ends it with `storage`,
    /// even if the body catches it (PostgreSQL has aborted the transaction).
    /// Transaction control (`COMMIT`, `ROLLBACK`, `SAVEPOINT`, … however
    /// spelt) and a text of more than one statement are refused with
    /// `invalid-input` before anything is sent (the body sees it; it does
    /// not end the call). Parameters only: never splice data into `sql`.
    pub async fn postgres_execute(
        &mut self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Option<Result<u64, gak_rules::Error>> {
        let (client, began, driver) = match self.postgres(sql).await? {
            Ok(lent) => lent,
            Err(e) => return Some(Err(e)),
        };
        let xact = crate::store::postgres::XACT;
        let (r, now) = driver
            .drive(join(
                client.execute(sql, params),
                client.query_one(xact, &[]),
            ))
            .await;
        // The statement's own failure first (the id's read then failed too).
        let r = r
            .map_err(crate::store::postgres::fault)
            .and_then(|n| self.still_ours(began, now).map(|()| n));
        Some(self.track(r))
    }

    /// Run a query inside the same transaction, when the binding is
    /// PostgreSQL; every column must be `text` (cast in SQL).
    pub async fn postgres_query(
        &mut self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Option<Result<Vec<Vec<Option<String>>>, gak_rules::Error>> {
        let (client, began, driver) = match self.postgres(sql).await? {
            Ok(lent) => lent,
            Err(e) => return Some(Err(e)),
        };
        let xact = crate::store::postgres::XACT;
        let (r, now) = driver
            .drive(join(client.query(sql, params), client.query_one(xact, &[])))
            .await;
        let r = r
            .map_err(crate::store::postgres::fault)
            .and_then(|rows| self.still_ours(began, now).map(|()| rows))
            .and_then(|rows| {
                rows.iter()
                    .map(|row| {
                        (0..row.len())
                            .map(|i| row.try_get::<_, Option<String>>(i))
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(|e| StoreFault::Failure(format!("non-text column: {e}")))
                    })
                    .collect()
            });
        Some(self.track(r))
    }
}
