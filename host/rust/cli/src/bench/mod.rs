//! `gak bench`: what the component costs, measured beside two baselines on
//! the same database, the same worker count and in the same run.
//!
//! - `kernel`: the blocking API, one kernel shared by the worker threads.
//! - `native`: the same `gak-rules` functions compiled natively, over the
//!   same binding's [`Session`](gak::store::Session), with the kernel's
//!   call loop ([`native`]): the difference is the WebAssembly boundary.
//! - `sql`: claim and acquire hand-written in SQL on the bench's own tables
//!   ([`sql`]): the difference is the generic key-value store interface.
//! - `ceiling`: the raw single-row transaction loop of the database.
//!
//! Each figure (store × op × workers) is a warm-up, then `samples` samples
//! with the implementations interleaved sample by sample, so drift hits them
//! all alike. The `gak bench` command (in the binary) parses the command
//! line and prints; this module measures. It is compiled with the `cli`
//! feature only and is not part of the library's supported API.
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use gak::store::Backend;

mod measure;
pub mod plot;
pub mod process;
pub mod report;
pub mod sql;
mod startup;
mod workload;

pub use measure::{Figure, percentile, run_figure};
pub use report::{Machine, Report, ResultRow};
pub use startup::Startup;

/// What a worker does once per op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// Claim a fresh task: many tasks seeded ahead, each worker claims its
    /// own (low contention).
    Claim,
    /// Claim one of 10 hot tasks every worker fights over, with a 1 ms
    /// lease so claims keep expiring and being taken over (high
    /// contention); a `taken` refusal counts as an op, reported apart.
    ClaimHot,
    /// Acquire a fresh side-effect key, then complete it (two calls).
    AcquireComplete,
    /// Acquire a key already completed: the replay answer.
    AcquireReplay,
    /// Save a checkpoint snapshot with the next sequence number.
    SaveIfNewer,
    /// Plan a resume over a 1,000-step DAG (pure: no store access).
    BuildPlan,
    /// Drain a queue one job at a time: `claim-next`, then `complete` (an op
    /// is one job claimed and completed). Every worker drains the figure's
    /// shared board.
    Drain,
    /// Drain a queue in batches of [`DRAIN_BATCH`]: `claim-batch`, then
    /// one `complete-batch` (an op is one job; a batch's calls land on its
    /// first and last op).
    DrainBatch,
}

/// Jobs per batch of [`Op::DrainBatch`].
pub const DRAIN_BATCH: u32 = 100;

impl Op {
    /// Every op, in report order.
    pub const ALL: [Op; 8] = [
        Op::Claim,
        Op::ClaimHot,
        Op::AcquireComplete,
        Op::AcquireReplay,
        Op::SaveIfNewer,
        Op::BuildPlan,
        Op::Drain,
        Op::DrainBatch,
    ];

    /// The op's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Op::Claim => "claim",
            Op::ClaimHot => "claim-hot",
            Op::AcquireComplete => "acquire-complete",
            Op::AcquireReplay => "acquire-replay",
            Op::SaveIfNewer => "save-if-newer",
            Op::BuildPlan => "build-plan",
            Op::Drain => "drain",
            Op::DrainBatch => "drain-batch",
        }
    }

    /// The op named `name`.
    pub fn parse(name: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|op| op.name() == name)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Who does the op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Impl {
    /// Through the component.
    Kernel,
    /// The same rules compiled natively, over the same binding.
    Native,
    /// Hand-written SQL on the bench's own tables.
    Sql,
    /// The database's raw single-row transaction loop.
    Ceiling,
}

impl Impl {
    /// Every implementation, in report order.
    pub const ALL: [Impl; 4] = [Impl::Kernel, Impl::Native, Impl::Sql, Impl::Ceiling];

    /// The implementation's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Impl::Kernel => "kernel",
            Impl::Native => "native",
            Impl::Sql => "sql",
            Impl::Ceiling => "ceiling",
        }
    }

    /// The implementation named `name`.
    pub fn parse(name: &str) -> Option<Impl> {
        Impl::ALL.into_iter().find(|i| i.name() == name)
    }

    /// Whether this implementation measures `op` on a store of `kind`.
    pub fn applies(self, op: Op, kind: StoreKind) -> bool {
        match self {
            Impl::Kernel | Impl::Native => true,
            Impl::Sql => {
                kind != StoreKind::Memory
                    && matches!(
                        op,
                        Op::Claim
                            | Op::ClaimHot
                            | Op::AcquireComplete
                            | Op::AcquireReplay
                            | Op::Drain
                            | Op::DrainBatch
                    )
            }
            // The memory "ceiling" is a map under a mutex: trivial, and it
            // shows what the map itself costs.
            Impl::Ceiling => op == Op::Claim,
        }
    }
}

impl fmt::Display for Impl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which database a store URL names, as [`gak::store::open`] reads it.
pub use gak::store::facts::StoreKind;

/// Everything one `gak bench` run measures.
#[derive(Clone, Debug)]
pub struct Options {
    /// Store URLs.
    pub stores: Vec<String>,
    /// Ops.
    pub ops: Vec<Op>,
    /// Implementations (each measured where it applies).
    pub impls: Vec<Impl>,
    /// Worker counts.
    pub workers: Vec<usize>,
    /// Measured time per implementation per figure, split into the samples.
    pub seconds: f64,
    /// Samples per figure.
    pub samples: usize,
    /// Separate OS processes on one database (1: threads only).
    pub processes: usize,
}

impl Options {
    /// The time of one sample.
    pub fn sample_time(&self) -> Duration {
        Duration::from_secs_f64(self.seconds / self.samples.max(1) as f64)
    }

    /// The figures to measure, in order: (store, op, workers).
    pub fn figures(&self) -> Vec<(String, Op, usize)> {
        let mut all = Vec::new();
        for store in &self.stores {
            for op in &self.ops {
                for workers in &self.workers {
                    all.push((store.clone(), *op, *workers));
                }
            }
        }
        all
    }

    /// The implementations measured for `op` on `store`.
    pub fn impls_for(&self, op: Op, store: &str) -> Vec<Impl> {
        let Some(kind) = gak::store::facts::store_kind(store) else {
            return Vec::new();
        };
        self.impls
            .iter()
            .copied()
            .filter(|i| i.applies(op, kind))
            .collect()
    }
}

/// One store opened for the bench: its binding (shared by every figure, so
/// SQLite keeps one group writer per file) and its description.
pub struct OpenStore {
    /// The URL as given.
    pub url: String,
    /// The database kind.
    pub kind: StoreKind,
    /// The binding.
    pub backend: Arc<dyn Backend>,
    /// For the SQL baselines: how to open their own connections.
    pub sql: Option<sql::Database>,
}

impl OpenStore {
    /// Open `url` (creating the kernel's tables, and the SQL baselines' own
    /// tables when `with_sql`).
    ///
    /// # Errors
    /// A sentence naming the store.
    pub fn open(url: &str, with_sql: bool) -> Result<OpenStore, String> {
        let kind = gak::store::facts::store_kind(url)
            .ok_or_else(|| gak::OpenError::UnknownStore(url.to_owned()).to_string())?;
        let (backend, sql): (Arc<dyn Backend>, Option<sql::Database>) = match kind {
            StoreKind::Memory => (Arc::new(gak::store::memory::MemoryBackend::default()), None),
            #[cfg(feature = "sqlite")]
            StoreKind::Sqlite => {
                let spec = url.strip_prefix("sqlite:").unwrap_or(url);
                let backend =
                    gak::store::sqlite::SqliteBackend::open(spec).map_err(|e| e.to_string())?;
                let db = sql::Database::sqlite(backend.path(), backend.synchronous());
                (Arc::new(backend), Some(db))
            }
            #[cfg(feature = "postgres")]
            StoreKind::Postgres => {
                let backend =
                    gak::blocking::run_future(gak::store::postgres::PostgresBackend::open(url))
                        .map_err(|e| e.to_string())?;
                let db = sql::Database::postgres(backend.clone());
                (Arc::new(backend), Some(db))
            }
            #[allow(unreachable_patterns)]
            _ => {
                return Err(format!(
                    "this build of gak has no binding for {}",
                    gak::store::hide_password(url)
                ));
            }
        };
        if with_sql && let Some(db) = &sql {
            db.ensure_tables()?;
        }
        Ok(OpenStore {
            url: url.to_owned(),
            kind,
            backend,
            sql,
        })
    }

    /// The store as reports name it: the binding's description, never a
    /// password.
    pub fn describe(&self) -> String {
        self.backend.describe()
    }

    /// A fresh binding for one figure: `memory:` starts empty each time (a
    /// figure's millions of seeded tasks are freed after it); databases are
    /// shared.
    pub fn backend_for_figure(&self) -> Arc<dyn Backend> {
        match self.kind {
            StoreKind::Memory => Arc::new(gak::store::memory::MemoryBackend::default()),
            _ => self.backend.clone(),
        }
    }
}

/// The measured startup figures (see [`Startup`]).
///
/// # Errors
/// When the component cannot be compiled or instantiated.
pub fn measure_startup() -> Result<Startup, String> {
    startup::measure()
}
