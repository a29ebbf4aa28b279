//! The kernel for code without an async runtime: scripts, CLIs, tests,
//! thread-per-worker runtimes. Every call blocks the calling thread until
//! its answer is in. It is a thin layer over the async core — same rules,
//! same bindings, same pool — not a second implementation.
//!
//! ```
//! use gak::blocking::Kernel;
//! use gak::TaskSeed;
//!
//! let kernel = Kernel::open("memory:")?;
//! kernel.taskboard().seed(&[TaskSeed::new("send-invoice")])?;
//! let task = kernel.taskboard().claim("send-invoice", "worker-1", 30_000)?;
//! assert_eq!(task.fence, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! PostgreSQL connections are driven on the calling thread, by the call
//! that waits for them, and on Linux the calling thread also waits for
//! their sockets itself (`poll(2)`); one small runtime shared by the
//! process (one thread, `gak-io`) runs the timers of retries and pool waits
//! (and elsewhere watches the sockets). Calling the blocking API from inside an
//! async task blocks that task's worker thread: use [`crate::Kernel`] there.
use std::future::Future;
use std::sync::Arc;

pub(crate) use crate::drive::run;

mod api;
mod runner;
mod worker;

pub use api::{Checkpoint, Commitgate, Downstream, Retention, Sideeffect, Taskboard};
pub use runner::{Committer, Runner};
pub use worker::Worker;

/// Drive any of this crate's futures (an admin call such as
/// `PostgresBackend::drop_schema`, `store::open`) to completion on this
/// thread.
pub fn run_future<F: Future>(fut: F) -> F::Output {
    run(fut)
}

impl crate::Builder {
    /// Open a kernel for code without an async runtime (see
    /// [`crate::blocking`]).
    ///
    /// # Errors
    /// As [`crate::Builder::open`].
    pub fn open_blocking(self) -> Result<Kernel, crate::OpenError> {
        run(self.open()).map(Kernel::from)
    }
}

/// A blocking handle to the kernel over one store. Cheap to clone; share it
/// between threads.
#[derive(Clone, Debug)]
pub struct Kernel {
    core: crate::Kernel,
}

impl From<crate::Kernel> for Kernel {
    fn from(core: crate::Kernel) -> Kernel {
        Kernel {
            core: core.on_calling_thread(),
        }
    }
}

impl From<Kernel> for crate::Kernel {
    fn from(kernel: Kernel) -> crate::Kernel {
        kernel.as_async()
    }
}

impl Kernel {
    /// Open a kernel on a store URL (`memory:`, `sqlite:PATH`,
    /// `postgres://…`) with the system clock; see [`crate::Builder`] and
    /// [`crate::Builder::open_blocking`] for the rest.
    ///
    /// # Errors
    /// [`crate::OpenError`] when the URL names no binding, an option is
    /// malformed, the store cannot be reached, or the component cannot be
    /// loaded.
    pub fn open(url: &str) -> Result<Kernel, crate::OpenError> {
        run(crate::Kernel::open(url)).map(Kernel::from)
    }

    /// A kernel over any binding and clock.
    ///
    /// # Errors
    /// [`crate::OpenError::Component`] when the component cannot be loaded.
    pub fn with_backend(
        backend: Arc<dyn crate::store::Backend>,
        clock: Arc<dyn crate::Clock>,
    ) -> Result<Kernel, crate::OpenError> {
        crate::Kernel::with_backend(backend, clock).map(Kernel::from)
    }

    /// The async kernel over the same pool, for code that mixes both.
    pub fn as_async(&self) -> crate::Kernel {
        self.core.detached()
    }

    /// The store binding.
    pub fn backend(&self) -> &Arc<dyn crate::store::Backend> {
        self.core.backend()
    }

    /// The clock judging expiry.
    pub fn clock(&self) -> &Arc<dyn crate::Clock> {
        self.core.clock()
    }

    /// Store imports answered so far by this kernel's idle instances (a
    /// call crosses the boundary once more, for its export).
    pub fn store_crossings(&self) -> u64 {
        self.core.store_crossings()
    }

    /// Every entry of every table (see [`crate::store::Backend::dump`]).
    ///
    /// # Errors
    /// The binding's failure.
    pub fn dump(&self) -> Result<Vec<(String, String, String)>, crate::store::StoreFault> {
        run(self.core.backend().dump())
    }

    /// Checkpoint calls.
    pub fn checkpoint(&self) -> Checkpoint<'_> {
        Checkpoint(&self.core)
    }
    /// Commitgate calls.
    pub fn commitgate(&self) -> Commitgate<'_> {
        Commitgate(&self.core)
    }
    /// Side-effect calls.
    pub fn sideeffect(&self) -> Sideeffect<'_> {
        Sideeffect(&self.core)
    }
    /// Taskboard calls.
    pub fn taskboard(&self) -> Taskboard<'_> {
        Taskboard(&self.core)
    }
    /// Retention calls.
    pub fn retention(&self) -> Retention<'_> {
        Retention(&self.core)
    }

    /// Run `f` on a worker's session in a transaction of its own, without
    /// the component: for reading (or seeding) a sink's downstream data.
    ///
    /// # Errors
    /// What `f` returns, or `storage` when the transaction fails.
    pub fn with_downstream<T>(
        &self,
        mut f: impl FnMut(&mut Downstream<'_, '_>) -> Result<T, crate::Error>,
    ) -> Result<T, crate::Error> {
        let call = crate::kernel::downstream_call(async |down: &mut crate::Downstream<'_>| {
            f(&mut Downstream(down))
        });
        let info = crate::kernel::CallInfo::new("downstream", None);
        run(self
            .core
            .transact_local(info, crate::protocol::Ending::Commit, call))
    }
}
