//! [`Kernel`]: the typed Rust API over the component.
//!
//! Every call checks out a worker (a component instance with its own store
//! session), runs the export inside one session transaction, commits on
//! success and rolls back on refusal. Workers are pooled and reused: an
//! instance is created once per concurrent caller, not per call.
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use gak_rules::{Error, StoreFault};

use crate::OpenError;
use crate::clock::{Clock, SystemClock};
use crate::engine::{self, Compiled, Instance};
use crate::store::{self, Backend, Session};

/// How many times one call is re-run after store conflicts before giving up
/// with `storage`. Each re-run is a fresh decision (the component is
/// deterministic given its reads), never a partial one.
const MAX_ATTEMPTS: u32 = 10;

/// A handle to the kernel over one store. Cheap to clone; share it between
/// threads.
#[derive(Clone)]
pub struct Kernel {
    inner: Arc<Inner>,
}

struct Inner {
    compiled: Arc<Compiled>,
    backend: Arc<dyn Backend>,
    clock: Arc<dyn Clock>,
    idle: Mutex<Vec<Instance>>,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("store", &self.inner.backend.describe())
            .finish()
    }
}

impl Kernel {
    /// Open a kernel on a store URL (`memory:`, `sqlite:PATH`) with the
    /// system clock.
    pub fn open(url: &str) -> Result<Kernel, OpenError> {
        Kernel::with_backend(store::open(url)?, Arc::new(SystemClock::default()))
    }

    /// A kernel over any binding and clock.
    pub fn with_backend(
        backend: Arc<dyn Backend>,
        clock: Arc<dyn Clock>,
    ) -> Result<Kernel, OpenError> {
        let compiled = engine::compiled().map_err(OpenError::Component)?;
        Ok(Kernel {
            inner: Arc::new(Inner {
                compiled,
                backend,
                clock,
                idle: Mutex::new(Vec::new()),
            }),
        })
    }

    /// The store binding.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.inner.backend
    }

    /// The clock judging expiry.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    fn checkout(&self) -> Result<Instance, Error> {
        if let Some(inst) = self
            .inner
            .idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
        {
            return Ok(inst);
        }
        let session = self.inner.backend.session().map_err(Error::from)?;
        Instance::new(&self.inner.compiled, session, self.inner.clock.clone())
            .map_err(Error::Storage)
    }

    fn checkin(&self, inst: Instance) {
        self.inner
            .idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(inst);
    }

    /// Run `call` inside one store transaction, re-running it on conflicts.
    ///
    /// `call` MUST be re-runnable: it may run several times, each in a fresh
    /// transaction whose earlier attempts were rolled back.
    pub(crate) fn transact<T>(
        &self,
        call: impl FnMut(&mut Instance) -> wasmtime::Result<Result<T, Error>>,
    ) -> Result<T, Error> {
        self.transact_as(Ending::Commit, call)
    }

    /// Like [`Kernel::transact`], ending the transaction as `ending` says:
    /// [`Ending::RollBack`] answers what the call would do and keeps the
    /// store as it was (a dry run).
    pub(crate) fn transact_as<T>(
        &self,
        ending: Ending,
        mut call: impl FnMut(&mut Instance) -> wasmtime::Result<Result<T, Error>>,
    ) -> Result<T, Error> {
        let mut inst = self.checkout()?;
        let mut attempt = 0;
        let result = loop {
            attempt += 1;
            let retry = attempt < MAX_ATTEMPTS;
            inst.store.data_mut().conflict = false;
            inst.store.data_mut().failure = None;
            match inst.store.data_mut().session.begin() {
                Ok(()) => {}
                Err(StoreFault::Conflict(_)) if retry => {
                    backoff(attempt);
                    continue;
                }
                Err(fault) => break Err(fault.into()),
            }
            let out = call(&mut inst);
            let state = inst.store.data_mut();
            match out {
                Err(trap) => {
                    state.session.rollback();
                    // A trapped instance may hold broken state: drop it.
                    return Err(Error::Storage(format!("component trapped: {trap:#}")));
                }
                Ok(_) if state.conflict && retry => {
                    state.session.rollback();
                    backoff(attempt);
                }
                Ok(_) if state.failure.is_some() || state.conflict => {
                    state.session.rollback();
                    let why = state
                        .failure
                        .take()
                        .unwrap_or_else(|| "store conflicts persisted".into());
                    break Err(Error::Storage(why));
                }
                Ok(Ok(value)) if ending == Ending::RollBack => {
                    state.session.rollback();
                    break Ok(value);
                }
                Ok(Ok(value)) => match state.session.commit() {
                    Ok(()) => break Ok(value),
                    Err(StoreFault::Conflict(_)) if retry => backoff(attempt),
                    Err(fault) => break Err(fault.into()),
                },
                Ok(Err(refusal)) => {
                    state.session.rollback();
                    break Err(refusal);
                }
            }
        };
        self.checkin(inst);
        result
    }

    /// Call a pure export (one that MUST NOT touch the store, such as
    /// `checkpoint.build-plan`) without opening a transaction. Should it
    /// touch the store anyway, the binding refuses (no open transaction) and
    /// the call fails with `storage`.
    pub(crate) fn pure<T>(
        &self,
        call: impl FnOnce(&mut Instance) -> wasmtime::Result<Result<T, Error>>,
    ) -> Result<T, Error> {
        let mut inst = self.checkout()?;
        match call(&mut inst) {
            Ok(result) => {
                self.checkin(inst);
                result
            }
            Err(trap) => Err(Error::Storage(format!("component trapped: {trap:#}"))),
        }
    }

    /// Run `f` on a worker's session in a transaction of its own, without
    /// the component: for reading (or seeding) a sink's downstream data.
    pub fn with_downstream<T>(
        &self,
        mut f: impl FnMut(&mut Downstream<'_>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.transact(|inst| Ok(Downstream::run(inst.store.data_mut(), &mut f)))
    }
}

/// How a call's transaction ends when the call succeeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Commit: the normal case.
    Commit,
    /// Roll back: a dry run.
    RollBack,
}

/// Exponential backoff with jitter, 1 ms to ~0.5 s.
fn backoff(attempt: u32) {
    let base = 1u64 << attempt.min(9);
    let jitter = u64::from(std::process::id() ^ attempt.wrapping_mul(2_654_435_761)) % base.max(1);
    thread::sleep(Duration::from_millis(base / 2 + jitter / 2));
}

/// The open transaction of a fenced sink's body (or of `with_downstream`).
///
/// Everything written through it commits or rolls back together with the
/// sink's fence compare.
pub struct Downstream<'a> {
    session: &'a mut dyn Session,
    /// A store conflict passed through here: the whole call is re-run.
    conflict: bool,
}

impl Downstream<'_> {
    fn track<T>(&mut self, r: Result<T, StoreFault>) -> Result<T, Error> {
        if let Err(StoreFault::Conflict(_)) = &r {
            self.conflict = true;
        }
        r.map_err(Error::from)
    }

    /// Read a key of the binding's `downstream` table.
    pub fn get(&mut self, key: &str) -> Result<Option<String>, Error> {
        let r = self.session.get("downstream", key);
        self.track(r)
    }

    /// Write a key of the binding's `downstream` table.
    pub fn put(&mut self, key: &str, value: &str) -> Result<(), Error> {
        let r = self.session.put("downstream", key, value);
        self.track(r)
    }

    /// The SQLite connection inside the same transaction, when the binding
    /// is SQLite: write your own tables here and they commit atomically with
    /// the fence compare.
    pub fn sqlite(&mut self) -> Option<&rusqlite::Connection> {
        self.session.sqlite()
    }

    /// Run a statement inside the same transaction, when the binding is
    /// PostgreSQL (`None` otherwise). Parameters only: never splice data
    /// into `sql`.
    pub fn postgres_execute(
        &mut self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Option<Result<u64, Error>> {
        let r = self.session.execute(sql, params)?;
        Some(self.track(r))
    }

    /// Run a query inside the same transaction, when the binding is
    /// PostgreSQL; every column must be `text` (cast in SQL).
    pub fn postgres_query(
        &mut self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Option<Result<Vec<Vec<Option<String>>>, Error>> {
        let r = self.session.query_text(sql, params)?;
        Some(self.track(r))
    }

    /// Run `body` on the open transaction of `state`'s session; a conflict
    /// seen by the body marks the call for a re-run.
    pub(crate) fn run<T>(
        state: &mut crate::engine::HostState,
        body: impl FnOnce(&mut Downstream<'_>) -> T,
    ) -> T {
        let mut down = Downstream {
            session: &mut *state.session,
            conflict: false,
        };
        let out = body(&mut down);
        state.conflict |= down.conflict;
        out
    }
}

/// Map a WIT error to the contract's error.
pub(crate) fn refusal(e: engine::WitError) -> Error {
    use engine::WitError as W;
    match e {
        W::NotFound => Error::NotFound,
        W::StaleSeq => Error::StaleSeq,
        W::Terminal => Error::Terminal,
        W::InvalidPlan(m) => Error::InvalidPlan(m),
        W::FenceStale => Error::FenceStale,
        W::AlreadyCommitted => Error::AlreadyCommitted,
        W::NotHolder => Error::NotHolder,
        W::ResourceMismatch => Error::ResourceMismatch,
        W::LeaseExpired => Error::LeaseExpired,
        W::ReconcileTaken => Error::ReconcileTaken,
        W::NotUncertain => Error::NotUncertain,
        W::UnsafeNotRetryable => Error::UnsafeNotRetryable,
        W::KeyReused => Error::KeyReused,
        W::WriteFailed => Error::WriteFailed,
        W::Taken => Error::Taken,
        W::DepsPending => Error::DepsPending,
        W::LeaseLost => Error::LeaseLost,
        W::InvalidInput(m) => Error::InvalidInput(m),
        W::Storage(m) => Error::Storage(m),
    }
}
