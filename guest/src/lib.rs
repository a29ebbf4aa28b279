//! gak's judgement rules: every decision of the contract (`SPEC.md` sections
//! 2-6 and 8) as plain Rust over a small transaction trait, [`Txn`].
//!
//! The component (`guest/component`) is a thin `wit-bindgen` shim over these
//! modules; the host reuses the same types for its typed API. Nothing here
//! knows about WebAssembly, SQL or threads: an operation reads and writes
//! through one [`Txn`], and whoever supplies it guarantees atomicity.
//!
//! ```
//! use gak_rules::{taskboard, testing::MemTxn, TaskSeed};
//! let mut tx = MemTxn::default();
//! taskboard::seed(&mut tx, &[TaskSeed::new("a")]).unwrap();
//! let task = taskboard::claim(&mut tx, "a", "worker-1", 1_000).unwrap();
//! assert_eq!(task.fence, 1);
//! ```
#![deny(missing_docs)]

pub mod buffer;
pub mod checkpoint;
pub mod commitgate;
mod contract;
pub(crate) mod count;
mod error;
pub mod format;
pub mod input;
pub mod keys;
mod model;
pub mod plan;
pub mod retention;
pub mod sideeffect;
pub mod taskboard;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod txn;

pub use contract::store::{Probe, StoreFault, Table};
pub use contract::*;
pub use error::StorageError;
pub use txn::{Scan, Txn};
