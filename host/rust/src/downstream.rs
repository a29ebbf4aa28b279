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
    /// `storage` when the store fails (a conflict re-runs the whole call).
    pub async fn get(&mut self, key: &str) -> Result<Option<String>, Error> {
        let r = store::get_one(&mut *self.session, "downstream", key).await;
        self.track(r)
    }

    /// Write a key of the binding's `downstream` table.
    ///
    /// # Errors
    /// `storage` when the store fails (a conflict re-runs the whole call).
    pub async fn put(&mut self, key: &str, value: &str) -> Result<(), Error> {
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
impl Downstream<'_> {
    /// The PostgreSQL client inside the same transaction (`None` when the
    /// binding is not PostgreSQL), for the vetted calls below: transaction
    /// control would let a body end the kernel's transaction, so the raw
    /// client is never handed out.
    async fn postgres(
        &mut self,
        sql: &str,
    ) -> Option<Result<&tokio_postgres::Client, gak_rules::Error>> {
        self.session_as::<crate::store::postgres::PostgresSession>()?;
        if let Some(keyword) = crate::store::transaction_control(sql) {
            return Some(Err(gak_rules::Error::InvalidInput(format!(
                "a sink body cannot run `{keyword}`: the kernel's transaction is not the body's to end"
            ))));
        }
        let flushed = self
            .session_as::<crate::store::postgres::PostgresSession>()?
            .flush()
            .await;
        if let Err(fault) = flushed {
            return Some(self.track(Err(fault)));
        }
        let session = self.session_as::<crate::store::postgres::PostgresSession>()?;
        session.lend();
        Some(
            session
                .client()
                .ok_or_else(|| gak_rules::Error::storage("no open transaction")),
        )
    }

    /// Run a statement inside the same transaction, when the binding is
    /// PostgreSQL (`None` otherwise). A deadlock or serialization failure
    /// re-runs the whole call; any other failure ends it with `storage`,
    /// even if the body catches it (PostgreSQL has aborted the transaction).
    /// Transaction control (`COMMIT`, `ROLLBACK`, `SAVEPOINT`, …) is refused
    /// with `invalid-input`. Parameters only: never splice data into `sql`.
    pub async fn postgres_execute(
        &mut self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Option<Result<u64, gak_rules::Error>> {
        let client = match self.postgres(sql).await? {
            Ok(client) => client,
            Err(e) => return Some(Err(e)),
        };
        let r = client
            .execute(sql, params)
            .await
            .map_err(crate::store::postgres::fault);
        Some(self.track(r))
    }

    /// Run a query inside the same transaction, when the binding is
    /// PostgreSQL; every column must be `text` (cast in SQL).
    pub async fn postgres_query(
        &mut self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Option<Result<Vec<Vec<Option<String>>>, gak_rules::Error>> {
        let client = match self.postgres(sql).await? {
            Ok(client) => client,
            Err(e) => return Some(Err(e)),
        };
        let r = client
            .query(sql, params)
            .await
            .map_err(crate::store::postgres::fault)
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
