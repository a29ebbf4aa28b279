//! Fault injection: a binding that wraps any other and fails one chosen
//! store call — or the commit, or the database clock — of the next
//! transaction.
//!
//! Its sessions count the store calls (`get`, `get_many`, `put`, `delete`,
//! `scan`) made since `begin`. A shared [`FaultPlan`] says what the *next*
//! transaction suffers; the plan is consumed at that transaction's `begin`,
//! so a call re-run by the kernel (after a conflict) runs clean. The plan also
//! records how many store calls the last transaction made, and which, so a
//! test can enumerate every call of an operation.
//!
//! The wrapper forwards the database clock (`Session::now`) but not the
//! binding-specific escape hatches (`sqlite`, `execute`, `query_text`: this
//! crate does not depend on `rusqlite` / `tokio-postgres`), so a fenced
//! sink's body over it must use `Downstream::get` / `put`, which are counted
//! store calls like any other.
use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};

use gak::store::{Backend, Session, StoreFault, StoreFuture, Write, ready};

/// What the next transaction suffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Fault {
    /// Nothing.
    #[default]
    None,
    /// `begin` fails with [`StoreFault::Failure`] (the inner binding is not
    /// asked to begin).
    Begin,
    /// The k-th store call (1-based) fails with [`StoreFault::Failure`],
    /// without reaching the inner binding.
    Call(usize),
    /// The k-th store call (1-based) reports [`StoreFault::Conflict`]; the
    /// kernel re-runs the whole call, and the re-run is clean.
    Conflict(usize),
    /// `commit` fails with [`StoreFault::Failure`] after rolling the inner
    /// transaction back: nothing is committed (the commit never reached the
    /// database).
    Commit,
    /// `commit` reaches the database and succeeds there, then the binding
    /// reports [`StoreFault::Failure`]: the acknowledgement was lost. The
    /// caller cannot tell this from [`Fault::Commit`], and the kernel must
    /// never re-run the call as if nothing had happened.
    CommitLost,
    /// The database clock (`Session::now`) fails with
    /// [`StoreFault::Failure`], as a binding judging expiry by its
    /// database's clock would when the read fails. (Without this fault the
    /// wrapper forwards the inner binding's clock, usually none.)
    Now,
}

#[derive(Debug, Default)]
struct PlanState {
    armed: Fault,
    /// The fault taken by the current (or last) transaction.
    current: Fault,
    /// Store calls of the current (or last) transaction.
    calls: usize,
    /// `"get tasks"`, `"write actions,indexes"`…, one per store call.
    trace: Vec<String>,
    /// Whether the fault armed last was injected.
    fired: bool,
    /// Transactions begun since the wrapper was made.
    transactions: usize,
}

/// The shared plan of a [`Faulty`] binding: arm a fault, read back what the
/// last transaction did.
#[derive(Clone, Debug, Default)]
pub struct FaultPlan(Arc<Mutex<PlanState>>);

impl FaultPlan {
    fn state(&self) -> MutexGuard<'_, PlanState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next transaction suffers `fault` (replaces any armed fault).
    pub fn arm(&self, fault: Fault) {
        let mut state = self.state();
        state.armed = fault;
        state.fired = false;
    }

    /// Forget any armed fault.
    pub fn disarm(&self) {
        self.arm(Fault::None);
    }

    /// How many store calls the last (or current) transaction made.
    pub fn last_calls(&self) -> usize {
        self.state().calls
    }

    /// The store calls of the last (or current) transaction, in order, as
    /// `"<call> <table>"`.
    pub fn last_trace(&self) -> Vec<String> {
        self.state().trace.clone()
    }

    /// Whether the fault armed last has been injected (false when none was
    /// armed, or its transaction ended before reaching it). Stays true
    /// through the kernel's re-run after an injected conflict.
    pub fn fired(&self) -> bool {
        self.state().fired
    }

    /// The fault the last (or current) transaction was armed with.
    pub fn last_fault(&self) -> Fault {
        self.state().current
    }

    /// Transactions begun through the wrapper so far (re-runs included).
    pub fn transactions(&self) -> usize {
        self.state().transactions
    }
}

/// A binding that injects the faults its [`FaultPlan`] says.
pub struct Faulty {
    inner: Arc<dyn Backend>,
    plan: FaultPlan,
}

impl Faulty {
    /// Wrap `inner`; the plan starts disarmed.
    pub fn wrap(inner: Arc<dyn Backend>) -> (Arc<Faulty>, FaultPlan) {
        let plan = FaultPlan::default();
        (
            Arc::new(Faulty {
                inner,
                plan: plan.clone(),
            }),
            plan,
        )
    }

    /// The wrapped binding.
    pub fn inner(&self) -> &Arc<dyn Backend> {
        &self.inner
    }

    /// The plan.
    pub fn plan(&self) -> &FaultPlan {
        &self.plan
    }
}

impl Backend for Faulty {
    fn session(&self) -> StoreFuture<'_, Box<dyn Session>> {
        Box::pin(async move {
            let session: Box<dyn Session> = Box::new(FaultySession {
                inner: self.inner.session().await?,
                plan: self.plan.clone(),
                fault: Fault::None,
                calls: 0,
            });
            Ok(session)
        })
    }

    fn describe(&self) -> String {
        format!("{} with fault injection", self.inner.describe())
    }

    fn blocks_thread(&self) -> bool {
        self.inner.blocks_thread()
    }

    /// The inner binding's dump: reading the store never consumes the plan.
    fn dump(&self) -> StoreFuture<'_, Vec<(String, String, String)>> {
        self.inner.dump()
    }
}

struct FaultySession {
    inner: Box<dyn Session>,
    plan: FaultPlan,
    /// The fault of the open transaction.
    fault: Fault,
    calls: usize,
}

impl FaultySession {
    /// Count one store call; fail it if it is the chosen one.
    fn tick(&mut self, call: &str, table: &str) -> Result<(), StoreFault> {
        self.calls += 1;
        let k = self.calls;
        let mut state = self.plan.state();
        state.calls = k;
        state.trace.push(format!("{call} {table}"));
        match self.fault {
            Fault::Call(n) if n == k => {
                state.fired = true;
                Err(StoreFault::Failure(format!(
                    "injected failure at store call {k} ({call} {table})"
                )))
            }
            Fault::Conflict(n) if n == k => {
                state.fired = true;
                Err(StoreFault::Conflict(format!(
                    "injected conflict at store call {k} ({call} {table})"
                )))
            }
            _ => Ok(()),
        }
    }
}

impl Session for FaultySession {
    fn begin(&mut self) -> StoreFuture<'_, ()> {
        self.calls = 0;
        {
            let mut state = self.plan.state();
            self.fault = std::mem::take(&mut state.armed);
            state.current = self.fault;
            state.calls = 0;
            state.trace.clear();
            state.transactions += 1;
            if self.fault == Fault::Begin {
                state.fired = true;
                return ready(Err(StoreFault::Failure("injected failure at begin".into())));
            }
        }
        self.inner.begin()
    }

    fn get_many<'a>(
        &'a mut self,
        keys: &'a [(&'static str, &'a str)],
    ) -> StoreFuture<'a, Vec<Option<String>>> {
        let tables: Vec<&str> = keys.iter().map(|(t, _)| *t).collect();
        let call = if keys.len() == 1 { "get" } else { "get_many" };
        if let Err(e) = self.tick(call, &tables.join(",")) {
            return ready(Err(e));
        }
        self.inner.get_many(keys)
    }

    fn write<'a>(&'a mut self, writes: &'a [Write<'a>]) -> StoreFuture<'a, ()> {
        let mut tables: Vec<&str> = writes.iter().map(|w| w.table).collect();
        tables.dedup();
        if let Err(e) = self.tick("write", &tables.join(",")) {
            return ready(Err(e));
        }
        self.inner.write(writes)
    }

    fn scan<'a>(
        &'a mut self,
        table: &'static str,
        prefix: &'a str,
        after: Option<&'a str>,
        limit: u32,
    ) -> StoreFuture<'a, Vec<(String, String)>> {
        if let Err(e) = self.tick("scan", table) {
            return ready(Err(e));
        }
        self.inner.scan(table, prefix, after, limit)
    }

    fn commit(&mut self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            match std::mem::take(&mut self.fault) {
                Fault::Commit => {
                    self.plan.state().fired = true;
                    self.inner.rollback().await;
                    Err(StoreFault::Failure("injected failure at commit".into()))
                }
                Fault::CommitLost => {
                    self.inner.commit().await?;
                    self.plan.state().fired = true;
                    Err(StoreFault::Failure(
                        "injected: the commit reached the database, its acknowledgement was lost"
                            .into(),
                    ))
                }
                _ => self.inner.commit().await,
            }
        })
    }

    fn rollback(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        self.fault = Fault::None;
        self.inner.rollback()
    }

    fn now(&mut self) -> Option<StoreFuture<'_, u64>> {
        if self.fault == Fault::Now {
            self.plan.state().fired = true;
            return Some(ready(Err(StoreFault::Failure(
                "injected failure reading the database clock".into(),
            ))));
        }
        self.inner.now()
    }

    fn as_any(&mut self) -> &mut dyn Any {
        self
    }
}
