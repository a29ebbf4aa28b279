//! The reference model of the four contracts, and the checks built on it
//! (used by `tests/tests/model.rs`).
//!
//! The model ([`Model`]) is written from `SPEC.md` (sections 3-6 and the
//! precise answers of section 8) without looking at the component's rules.
//! The kernel is checked against it one operation at a time ([`run_case`]:
//! every answer compared, then everything observable read back) and, for
//! histories of concurrent threads, by a search for a serial order the
//! model explains ([`linearize()`]). It lives here, apart from the tests, so
//! that each part can be read on its own:
//!
//! - [`answer`]: answers ([`Out`]), generic in how tokens are represented,
//!   and their comparison, which binds the model's numbered token handles
//!   to the kernel's random tokens ([`Binder`]);
//! - [`ops`]: generated operations and their proptest strategies;
//! - [`call`]: an operation made concrete for a caller who has seen some
//!   tokens and leases ([`Refs`]); [`invalid`]: the calls SPEC 8 refuses
//!   with `invalid-input`;
//! - [`reference`](mod@reference): the model itself, and deliberately wrong variants of it
//!   ([`Mutant`]);
//! - [`kernel`]: a call applied to the real kernel; fresh kernels on
//!   memory and SQLite;
//! - [`lockstep`]: model and kernel side by side (the sequential check);
//! - [`history`]: concurrent runs recorded as histories in real-time order;
//! - [`linearize`](mod@linearize): the Wing-Gong linearizability checker;
//! - [`plan`]: a model of `build-plan`;
//! - [`coverage`]: labels of the answers and paths an operation exercised.
//!
//! Readings of the SPEC the model commits to (each one agreed with the
//! kernel when written):
//! - a task token presented for an unknown task: `not-found` or `lease-lost`
//!   (SPEC 6 does not say; both accepted, see [`Out::ErrOneOf`]);
//! - the triple check's third step compares the holder minted for the
//!   lease's (resource, fence) grant *and* the key it was granted to: a
//!   genuine fence and holder relabelled with another key is `not-holder`;
//! - `complete` on a completed key by a lease passing the triple check
//!   returns the first result and changes nothing (SPEC 8's list of what a
//!   lease gets after its verdict; only `release` frees the hold
//!   mark-uncertain left); `resolve-uncertain` leaves the resource hold
//!   alone; a hold of the same key does not make `acquire` `contended` (only
//!   another key's does);
//! - an absent recorded fingerprint never conflicts; re-seeding forgets the
//!   token that completed a task;
//! - a holder's late verdict (`complete`, `abandon`) on a key under
//!   reconciliation ends the reconciliation: the key is no longer
//!   uncertain, so its reconcile claim is cleared with the verdict.

pub mod answer;
pub mod call;
pub mod coverage;
pub mod history;
pub mod invalid;
pub mod kernel;
pub mod linearize;
pub mod lockstep;
pub mod ops;
pub mod plan;
pub mod reference;

pub use answer::{AcqV, Binder, LeaseV, Out, TaskV, compare};
pub use call::{Call, Refs, instantiate};
pub use coverage::labels;
pub use history::{
    ConcCase, Event, Finals, Recorded, conc_strategy, queue_conc_strategy, record, render,
};
pub use kernel::{Fresh, fresh_memory, fresh_sqlite};
pub use linearize::{linearize, touched};
pub use lockstep::{Lockstep, run_case};
pub use ops::{ItemRef, LeaseRef, Op, SeedOp, Tamper, TokRef, ops_strategy};
pub use plan::{PlanCase, model_plan, plan_strategy};
pub use reference::{Model, Mutant, PassOver, err};

// ---------------------------------------------------------------- id space
// Few ids, so that random operations collide.

/// Task ids (the random sequences use the first three; the queue's
/// concurrent cases more).
pub const TASKS: [&str; 8] = ["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"];
/// Task groups (SPEC 10).
pub const GROUPS: [&str; 2] = ["g0", "g1"];
/// Agents that claim tasks.
pub const AGENTS: [&str; 2] = ["a0", "a1"];
/// Side-effect keys.
pub const KEYS: [&str; 3] = ["k0", "k1", "k2"];
/// Resources (fenced; also the sinks).
pub const RESOURCES: [&str; 2] = ["r0", "r1"];
/// Run ids (checkpoints, commit gate).
pub const RUNS: [&str; 2] = ["run0", "run1"];
/// Step ids of a run.
pub const STEPS: [&str; 3] = ["s0", "s1", "s2"];
/// Action fingerprints.
pub const FINGERPRINTS: [&str; 2] = ["f0", "f1"];
/// The clock's start (ms).
pub const START: u64 = 1_000;
/// A token or holder that was never minted (well-formed, so only the triple
/// check / token check can refuse it).
pub const FORGED: &str = "0123456789abcdef0123456789abcdef";
/// The model's handle for [`FORGED`]: never minted.
pub const FORGED_H: H = usize::MAX;
/// SPEC 8: `ttl` is 1 ms to 1 year.
pub const MAX_TTL: u64 = 31_536_000_000;

/// A model token handle: the n-th token minted in the run.
pub type H = usize;
