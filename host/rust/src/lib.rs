//! gak: a crash-safe coordination kernel for orchestration runtimes.
//!
//! When a process dies in the middle of a run, the run **resumes; it is not
//! redone**. Every judgement lives in one WebAssembly component (built from
//! `guest/`); this crate hosts it with wasmtime and binds its store import to
//! memory, SQLite or PostgreSQL.
//!
//! [`Kernel`] is async (tokio) and never stalls the runtime;
//! [`blocking::Kernel`] is the same core for code without a runtime.
//!
//! ```
//! use gak::{Action, Acquired, Kernel, TaskSeed};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let kernel = Kernel::open("memory:").await?;
//! kernel.taskboard().seed(&[TaskSeed::new("send-invoice")]).await?;
//! let task = kernel.taskboard().claim("send-invoice", "worker-1", 30_000).await?;
//! assert_eq!(task.fence, 1);
//!
//! let action = Action::new("invoice-42/email", "smtp");
//! let Acquired::Granted(lease) = kernel.sideeffect().acquire(&action, 30_000).await? else {
//!     panic!("a fresh key is granted");
//! };
//! kernel.sideeffect().complete(&action, &lease, b"sent").await?;
//! // The same key again only replays: the e-mail is never sent twice.
//! let again = kernel.sideeffect().acquire(&action, 30_000).await?;
//! assert_eq!(again, Acquired::Replayed(b"sent".to_vec()));
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

/// The README's Rust code, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod api;
mod bindings;
pub mod blocking;
mod builder;
pub mod clock;
mod committer;
mod convert;
mod downstream;
mod drive;
mod engine;
mod kernel;
mod limits;
mod native;
mod protocol;
mod runner;
pub mod store;
mod worker;

pub mod measure;

pub use api::{Checkpoint, Commitgate, Retention, Sideeffect, SinkError, Taskboard};
pub use builder::{Builder, DEFAULT_CONNECTION_WAIT, DEFAULT_MAX_CONNECTIONS};
pub use clock::{Clock, ManualClock, SystemClock};
pub use committer::Committer;
pub use downstream::Downstream;
pub use engine::COMPONENT_WASM;
pub use gak_rules::{
    Acquired, Action, Completion, CompletionAnswer, CompletionResult, Error, GroupEntry, GroupInfo,
    GroupPage, KeyCounts, KeyInfo, KeyPage, KeyState, Lease, Outcome, Plan, Pruned, ReconcileClaim,
    Resolution, Resolved, RetrySafety, Snapshot, Status, StepDef, StorageError, Task, TaskCounts,
    TaskPage, TaskSeed, TaskState,
};
pub use kernel::Kernel;
pub use protocol::Retry;
pub use runner::{BodyError, Heartbeat, Ran, RunError, Runner};
/// The SQLite driver the API exposes (`Downstream::sqlite`), re-exported
/// so embedders use the version this crate was built with.
#[cfg(feature = "sqlite")]
pub use rusqlite;
/// The PostgreSQL driver the API exposes (`Builder::postgres`, the
/// parameters of `Downstream::postgres_execute`), re-exported likewise.
#[cfg(feature = "postgres")]
pub use tokio_postgres;
pub use worker::{Backoff, MAX_REASON, Stop, Worked, Worker, reason};

/// Why a kernel could not be opened. Neither `Display` nor `Debug` shows a
/// password the URL carried.
#[non_exhaustive]
pub enum OpenError {
    /// The store URL names no known binding.
    UnknownStore(String),
    /// A store option is malformed.
    BadOption(String),
    /// The store could not be opened.
    Store(gak_rules::StoreFault),
    /// The component could not be compiled or linked.
    Component(String),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::UnknownStore(url) => {
                write!(
                    f,
                    "unknown store \"{}\": expected memory:, sqlite:PATH or postgres://USER@HOST:PORT/DB",
                    store::hide_password(url)
                )
            }
            OpenError::BadOption(o) => write!(f, "bad store option: {}", store::hide_password(o)),
            OpenError::Store(gak_rules::StoreFault::Failure(m)) => {
                write!(f, "cannot open the store: {m}")
            }
            OpenError::Store(gak_rules::StoreFault::Conflict(m)) => {
                write!(f, "cannot open the store: it stayed busy ({m})")
            }
            OpenError::Component(m) => write!(f, "cannot load the kernel component: {m}"),
        }
    }
}

impl std::fmt::Debug for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::UnknownStore(url) => f
                .debug_tuple("UnknownStore")
                .field(&store::hide_password(url))
                .finish(),
            OpenError::BadOption(o) => f
                .debug_tuple("BadOption")
                .field(&store::hide_password(o))
                .finish(),
            OpenError::Store(fault) => f.debug_tuple("Store").field(fault).finish(),
            OpenError::Component(m) => f.debug_tuple("Component").field(m).finish(),
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OpenError::Store(fault) => Some(fault),
            _ => None,
        }
    }
}

impl From<OpenError> for Error {
    fn from(e: OpenError) -> Self {
        Error::Storage(StorageError::new(e.to_string()).caused_by(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_errors_never_show_a_password() {
        let secret = "s3cr3t-pw";
        for e in [
            OpenError::UnknownStore(format!("postgress://alice:{secret}@db:5432/x")),
            OpenError::UnknownStore(format!("mysql://alice:{secret}@db/x?password={secret}&a=b")),
            OpenError::BadOption(format!("postgres URL: host=db password={secret}")),
            OpenError::UnknownStore(format!("mysql://alice:p/a?{secret}#s w0rd@db/x")),
            OpenError::UnknownStore(format!("x+y://alice:{secret}@@db/x")),
        ] {
            let shown = format!("{e} {e:?}");
            assert!(!shown.contains(secret), "{shown}");
            assert!(shown.contains("***"), "{shown}");
        }
        // The whole user information goes: a user name is half a credential,
        // and where a password holding `:` or `@` begins is never guessed.
        let shown = OpenError::UnknownStore("postgress://alice@db/x".into()).to_string();
        assert!(shown.contains("postgress://***@db/x"), "{shown}");
        let shown = OpenError::UnknownStore("nosuch://db/x".into()).to_string();
        assert!(shown.contains("nosuch://db/x"), "{shown}");
        let fault = OpenError::Store(gak_rules::StoreFault::Failure("disk full".into()));
        assert_eq!(fault.to_string(), "cannot open the store: disk full");
    }
}
