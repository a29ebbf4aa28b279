//! [`Kernel`]: the core every API — async and blocking — runs through.
//!
//! Every call checks out a worker (a component instance with its own store
//! session) from a bounded pool, runs the export inside one session
//! transaction, commits on success and rolls back on refusal, re-running
//! the whole call on a store conflict. Instances are created once per
//! concurrent caller, never per call.
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use gak_rules::{Error, StorageError};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::Instrument;

use crate::OpenError;
use crate::clock::{Clock, SystemClock};
use crate::downstream::Downstream;
use crate::engine::{self, Compiled, Instance};
use crate::protocol::{Ending, Retry};
use crate::store::Backend;

/// A handle to the kernel over one store. Cheap to clone; share it between
/// tasks. Every method is `async` and never stalls the runtime: SQLite
/// calls, which block their thread, run in place with `block_in_place` on a
/// multi-threaded runtime (its other tasks move to another thread) and on
/// tokio's blocking pool on a current-thread runtime. For code without a runtime, see
/// [`crate::blocking::Kernel`].
#[derive(Clone)]
pub struct Kernel {
    inner: Arc<Inner>,
    /// The caller's own thread may block (the blocking API): calls of a
    /// thread-blocking binding run right here instead of on tokio's pool.
    inline: bool,
}

pub(crate) struct Inner {
    compiled: Arc<Compiled>,
    backend: Arc<dyn Backend>,
    clock: Arc<dyn Clock>,
    pool: Pool,
    retry: Retry,
}

/// Idle instances, and permits bounding how many exist at once (each holds
/// a connection).
struct Pool {
    idle: Mutex<Vec<Instance>>,
    permits: Arc<Semaphore>,
    wait: Duration,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("store", &self.inner.backend.describe())
            .finish()
    }
}

/// What a call is about, for its tracing span (never a token, holder or
/// claim).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallInfo<'a> {
    pub op: &'static str,
    pub subject: Option<&'a str>,
    pub fence: Option<u64>,
}

impl<'a> CallInfo<'a> {
    pub fn new(op: &'static str, subject: Option<&'a str>) -> Self {
        CallInfo {
            op,
            subject,
            fence: None,
        }
    }

    pub fn fence(mut self, fence: u64) -> Self {
        self.fence = Some(fence);
        self
    }
}

tokio::task_local! {
    /// The kernels whose call this task is inside (a fenced sink's body runs
    /// there). A call into one of them from inside would need a second
    /// transaction while the first holds its locks: a deadlock on SQLite and
    /// PostgreSQL. It is refused instead (HOSTS.md rule 13).
    static INSIDE: Vec<usize>;
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Kernel {
    pub(crate) fn assemble(
        backend: Arc<dyn Backend>,
        clock: Arc<dyn Clock>,
        max_instances: usize,
        wait: Duration,
        retry: Retry,
    ) -> Result<Kernel, OpenError> {
        let compiled = engine::compiled().map_err(OpenError::Component)?;
        Ok(Kernel {
            inner: Arc::new(Inner {
                compiled,
                backend,
                clock,
                pool: Pool {
                    idle: Mutex::new(Vec::new()),
                    permits: Arc::new(Semaphore::new(max_instances)),
                    wait,
                },
                retry,
            }),
            inline: false,
        })
    }

    /// The same kernel for a caller whose thread may block (what
    /// [`crate::blocking::Kernel`] drives): a call on a binding that blocks
    /// its thread (SQLite) runs on the calling thread, never moved off a
    /// runtime worker. For drivers such as the conformance runner that
    /// await the async API from a thread of their own.
    pub fn on_calling_thread(&self) -> Kernel {
        Kernel {
            inner: self.inner.clone(),
            inline: true,
        }
    }

    /// The same kernel for async callers.
    pub(crate) fn detached(&self) -> Kernel {
        Kernel {
            inner: self.inner.clone(),
            inline: false,
        }
    }

    /// The store binding.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.inner.backend
    }

    /// The clock judging expiry.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    fn id(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    /// `invalid-input` when this task is inside a call of this kernel.
    fn refuse_reentry(&self) -> Result<(), Error> {
        let me = self.id();
        if INSIDE
            .try_with(|inside| inside.contains(&me))
            .unwrap_or(false)
        {
            return Err(Error::InvalidInput(
                "a kernel call cannot be made from inside another call on the same kernel (a fenced sink's body runs inside its call's transaction)".into(),
            ));
        }
        Ok(())
    }

    /// Run `fut` marked as inside a call of this kernel.
    async fn inside<F: std::future::Future>(&self, fut: F) -> F::Output {
        let mut inside = INSIDE.try_with(Clone::clone).unwrap_or_default();
        inside.push(self.id());
        INSIDE.scope(inside, fut).await
    }

    /// An instance and the permit it exists under: an idle one, else a new
    /// one while the pool has room, else wait up to the configured time.
    async fn checkout(&self) -> Result<(Instance, OwnedSemaphorePermit), Error> {
        let pool = &self.inner.pool;
        let permit = match pool.permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => tokio::time::timeout(pool.wait, pool.permits.clone().acquire_owned())
                .await
                .map_err(|_| {
                    Error::Storage(StorageError::new(format!(
                        "no connection to {} became free within {} ms (the pool is at its maximum; raise Builder::max_connections or the wait)",
                        self.inner.backend.describe(),
                        pool.wait.as_millis()
                    )))
                })?
                .map_err(|_| Error::storage("the kernel's pool was closed"))?,
        };
        if let Some(inst) = lock(&pool.idle).pop() {
            return Ok((inst, permit));
        }
        let session = self.inner.backend.session().await.map_err(Error::from)?;
        let inst = Instance::new(&self.inner.compiled, session, self.inner.clock.clone())
            .await
            .map_err(Error::storage)?;
        Ok((inst, permit))
    }

    fn checkin(&self, inst: Instance) {
        lock(&self.inner.pool.idle).push(inst);
    }

    /// Run `call` inside one store transaction, re-running it on conflicts,
    /// ending the transaction as `ending` says when it succeeds. From async
    /// code, a binding that blocks its thread runs in place with
    /// `block_in_place` (multi-threaded runtime) or on tokio's blocking pool.
    ///
    /// `call` MUST be re-runnable: it may run several times, each in a fresh
    /// transaction whose earlier attempts were rolled back.
    pub(crate) async fn transact<T, C>(
        &self,
        info: CallInfo<'_>,
        ending: Ending,
        call: C,
    ) -> Result<T, Error>
    where
        T: Send + 'static,
        C: AsyncFnMut(&mut Instance) -> wasmtime::Result<Result<T, Error>> + Send + 'static,
    {
        traced(info, async move {
            self.refuse_reentry()?;
            let (inst, permit) = self.checkout().await?;
            let (result, inst) = self.on_some_thread(inst, ending, call).await;
            self.finish(inst, permit);
            result
        })
        .await
    }

    /// [`Kernel::transact`] on the calling thread, for callers whose thread
    /// may block (the blocking API) and whose `call` borrows from them.
    pub(crate) async fn transact_local<T, C>(
        &self,
        info: CallInfo<'_>,
        ending: Ending,
        call: C,
    ) -> Result<T, Error>
    where
        C: AsyncFnMut(&mut Instance) -> wasmtime::Result<Result<T, Error>>,
    {
        traced(info, async move {
            self.refuse_reentry()?;
            let (mut inst, permit) = self.checkout().await?;
            let (result, usable) = self.inside(self.attempts(&mut inst, ending, call)).await;
            self.finish(usable.then_some(inst), permit);
            result
        })
        .await
    }

    /// Return a usable instance to the pool; drop a trapped one.
    fn finish(&self, inst: Option<Instance>, permit: OwnedSemaphorePermit) {
        if let Some(inst) = inst {
            self.checkin(inst);
        }
        drop(permit);
    }

    /// Run the attempts here, or — for a binding that blocks its thread,
    /// called from async code — in place with `block_in_place` on a
    /// multi-threaded runtime, else on tokio's blocking pool. Returns the
    /// instance unless it trapped.
    async fn on_some_thread<T, C>(
        &self,
        mut inst: Instance,
        ending: Ending,
        call: C,
    ) -> (Result<T, Error>, Option<Instance>)
    where
        T: Send + 'static,
        C: AsyncFnMut(&mut Instance) -> wasmtime::Result<Result<T, Error>> + Send + 'static,
    {
        let runtime = tokio::runtime::Handle::try_current();
        match runtime {
            Ok(handle)
                if !self.inline
                    && self.inner.backend.blocks_thread()
                    && handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread =>
            {
                // The runtime moves this worker's other tasks to another
                // thread while the call blocks this one: no hop to the
                // blocking pool and back (~40 µs a call on SQLite).
                let (result, usable) = tokio::task::block_in_place(|| {
                    futures_executor::block_on(self.inside(self.attempts(&mut inst, ending, call)))
                });
                (result, usable.then_some(inst))
            }
            Ok(handle) if !self.inline && self.inner.backend.blocks_thread() => {
                let kernel = self.clone();
                let span = tracing::Span::current();
                let joined = tokio::task::spawn_blocking(move || {
                    let _runtime = handle.enter();
                    let _span = span.enter();
                    let (result, usable) = futures_executor::block_on(
                        kernel.inside(kernel.attempts(&mut inst, ending, call)),
                    );
                    (result, usable.then_some(inst))
                })
                .await;
                joined.unwrap_or_else(|e| {
                    (
                        Err(Error::storage(format!("the blocking call failed: {e}"))),
                        None,
                    )
                })
            }
            _ => {
                let (result, usable) = self.inside(self.attempts(&mut inst, ending, call)).await;
                (result, usable.then_some(inst))
            }
        }
    }

    /// The retry loop (`crate::protocol`). Returns the answer and whether
    /// the instance may be reused (a trapped one may hold broken state).
    async fn attempts<T, C>(
        &self,
        inst: &mut Instance,
        ending: Ending,
        call: C,
    ) -> (Result<T, Error>, bool)
    where
        C: AsyncFnMut(&mut Instance) -> wasmtime::Result<Result<T, Error>>,
    {
        crate::protocol::attempts(inst, &self.inner.retry, self.inner.pool.wait, ending, call).await
    }

    /// Call a pure export (one that MUST NOT touch the store, such as
    /// `checkpoint.build-plan`) without opening a transaction. Should it
    /// touch the store anyway, the binding refuses (no open transaction) and
    /// the call fails with `storage`.
    pub(crate) async fn pure<T>(
        &self,
        call: impl AsyncFnOnce(&mut Instance) -> wasmtime::Result<Result<T, Error>>,
    ) -> Result<T, Error> {
        self.refuse_reentry()?;
        let (mut inst, _permit) = self.checkout().await?;
        match call(&mut inst).await {
            Ok(result) => {
                self.checkin(inst);
                result
            }
            Err(trap) => Err(Error::storage(format!("component trapped: {trap:#}"))),
        }
    }

    /// Run `f` on a worker's session in a transaction of its own, without
    /// the component: for reading (or seeding) a sink's downstream data.
    ///
    /// # Errors
    /// What `f` returns, or `storage` when the transaction fails.
    pub async fn with_downstream<T, F>(&self, f: F) -> Result<T, Error>
    where
        T: Send + 'static,
        F: AsyncFnMut(&mut Downstream<'_>) -> Result<T, Error> + Send + 'static,
    {
        let mut f = f;
        let info = CallInfo::new("downstream", None);
        let call = async move |inst: &mut Instance| {
            Ok(Downstream::run(inst.store.data_mut(), &mut f).await)
        };
        self.transact(info, Ending::Commit, call).await
    }

    /// How many store imports (`read`, `write`) this kernel's idle
    /// instances have answered so far. A call crosses the component
    /// boundary once for its export plus once per store import: what tests
    /// and `examples/latency.rs` show per call.
    pub fn store_crossings(&self) -> u64 {
        lock(&self.inner.pool.idle)
            .iter()
            .map(|i| i.store.data().store_crossings)
            .sum()
    }
}

/// The call that runs `f` on the open transaction's downstream access.
pub(crate) fn downstream_call<T, F>(
    mut f: F,
) -> impl AsyncFnMut(&mut Instance) -> wasmtime::Result<Result<T, Error>>
where
    F: AsyncFnMut(&mut Downstream<'_>) -> Result<T, Error>,
{
    async move |inst: &mut Instance| Ok(Downstream::run(inst.store.data_mut(), &mut f).await)
}

/// Run one call inside its tracing span, recording its outcome; storage
/// failures are logged at `warn`.
async fn traced<T>(
    info: CallInfo<'_>,
    call: impl std::future::Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let span = tracing::debug_span!(
        "gak.call",
        op = info.op,
        subject = info.subject,
        fence = info.fence,
        outcome = tracing::field::Empty,
        attempts = tracing::field::Empty,
    );
    let result = call.instrument(span.clone()).await;
    let outcome = match &result {
        Ok(_) => "ok",
        Err(e) => e.name(),
    };
    span.record("outcome", outcome);
    if let Err(Error::Storage(e)) = &result {
        let _inside = span.enter();
        tracing::warn!(op = info.op, error = %e, "storage failure");
    }
    result
}

/// The clock default.
pub(crate) fn system_clock() -> Arc<dyn Clock> {
    Arc::new(SystemClock::default())
}
