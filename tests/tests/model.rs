//! Model-based property tests.
//!
//! A small reference model of the four contracts, written from `SPEC.md`
//! (sections 3-6 and the precise answers of section 8) without looking at the
//! component's rules, is run side by side with the real kernel:
//!
//! - **sequential** (`model_*`): random sequences of 1..40 operations and
//!   clock moves are applied to the model and to a fresh kernel (memory,
//!   SQLite, PostgreSQL when reachable); every answer is compared field by
//!   field, errors by variant, then everything observable is read back.
//!   Random tokens are compared structurally: the model mints numbered
//!   handles, the first real token seen for a handle is bound to it, and from
//!   then on the binding must hold both ways (a fresh handle must get a token
//!   never seen before, 128-bit lowercase hex);
//! - **linearizability** (`linearizable_*`): 2-4 threads run 1-3 random
//!   operations each against one shared kernel at a fixed time; the recorded
//!   history (real-time order from a global counter taken before invoking and
//!   after responding) must be explained by some serial order of the model
//!   consistent with real time (Wing-Gong backtracking);
//! - **self-checks**: deliberately wrong models are caught (by hand-made
//!   sequences and by the random search), defective bindings from
//!   `gak_tests::broken` disagree with the model, a binding without isolation
//!   yields a history the checker rejects, hand-made impossible histories are
//!   rejected, and the generator provably reaches every answer of every
//!   operation, expiry boundaries (`now == until`) included;
//! - **build-plan**: random step DAGs and done lists against a model plan.
//!
//! Case counts: `PROPTEST_CASES` overrides the defaults of the `model_*`,
//! `linearizable_*` and build-plan tests (PostgreSQL runs a tenth of it), so
//! `PROPTEST_CASES=5000 cargo test -p gak-tests --test model` soaks; the
//! self-checks use fixed counts and a fixed seed. A failure prints the shrunk
//! operation sequence; `GAK_MODEL_TRACE=1` prints every answer of a run.
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
use std::any::Any;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use gak::blocking::Kernel;
use gak::{
    Acquired, Action, Clock, Error, KeyInfo, KeyState, Lease, ManualClock, Outcome, Plan,
    Resolution, Resolved, RetrySafety, Snapshot, Status, StepDef, Task, TaskSeed, TaskState,
};
use gak_tests::suite::{POSTGRES, Suite};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

// ---------------------------------------------------------------- id space

const TASKS: [&str; 3] = ["t0", "t1", "t2"];
const AGENTS: [&str; 2] = ["a0", "a1"];
const KEYS: [&str; 3] = ["k0", "k1", "k2"];
const RESOURCES: [&str; 2] = ["r0", "r1"];
const RUNS: [&str; 2] = ["run0", "run1"];
const STEPS: [&str; 3] = ["s0", "s1", "s2"];
const FINGERPRINTS: [&str; 2] = ["f0", "f1"];
/// The clock's start (ms).
const START: u64 = 1_000;
/// A token or holder that was never minted (well-formed, so only the triple
/// check / token check can refuse it).
const FORGED: &str = "0123456789abcdef0123456789abcdef";
/// The model's handle for [`FORGED`]: never minted.
const FORGED_H: H = usize::MAX;
/// SPEC 8: `ttl` is 1 ms to 1 year.
const MAX_TTL: u64 = 31_536_000_000;

/// A model token handle: the n-th token minted in the run.
type H = usize;

// ------------------------------------------------------- answers, by token

/// An answer of one operation, generic in how tokens are represented: `H`
/// for the model, `String` for the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Out<T> {
    Unit,
    Task(TaskV<T>),
    Tasks(Vec<TaskV<T>>),
    Acq(AcqV<T>),
    Lease(LeaseV<T>),
    Bytes(Vec<u8>),
    Claim {
        claim: T,
        until: u64,
    },
    Resolved(Resolved),
    Snap(Snapshot),
    Outcome(Outcome),
    /// A sink's seen fence.
    Seen(u64),
    /// The downstream value a sink's body wrote.
    Marker(Option<String>),
    /// A side-effect key as an operator sees it (never a holder or claim).
    Key(KeyInfo),
    /// The error's kebab-case name (`storage: why` for storage failures,
    /// which the model never expects).
    Err(String),
    /// Model only: SPEC leaves the choice between these refusals open.
    ErrOneOf(Vec<&'static str>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct TaskV<T> {
    id: String,
    title: String,
    deps: Vec<String>,
    state: TaskState,
    owner: Option<String>,
    token: Option<T>,
    until: Option<u64>,
    fence: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct LeaseV<T> {
    key: String,
    resource: String,
    fence: u64,
    holder: T,
    until: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum AcqV<T> {
    Granted(LeaseV<T>),
    Replayed(Vec<u8>),
    Uncertain(String),
    InFlight,
    Contended(u64),
}

impl<T> TaskV<T> {
    fn map<U>(self, f: &mut impl FnMut(T) -> U) -> TaskV<U> {
        TaskV {
            id: self.id,
            title: self.title,
            deps: self.deps,
            state: self.state,
            owner: self.owner,
            token: self.token.map(f),
            until: self.until,
            fence: self.fence,
        }
    }
}

impl<T> LeaseV<T> {
    fn map<U>(self, f: &mut impl FnMut(T) -> U) -> LeaseV<U> {
        LeaseV {
            key: self.key,
            resource: self.resource,
            fence: self.fence,
            holder: f(self.holder),
            until: self.until,
        }
    }
}

impl<T> Out<T> {
    fn map<U>(self, f: &mut impl FnMut(T) -> U) -> Out<U> {
        match self {
            Out::Unit => Out::Unit,
            Out::Task(t) => Out::Task(t.map(f)),
            Out::Tasks(ts) => Out::Tasks(ts.into_iter().map(|t| t.map(f)).collect()),
            Out::Acq(a) => Out::Acq(match a {
                AcqV::Granted(l) => AcqV::Granted(l.map(f)),
                AcqV::Replayed(r) => AcqV::Replayed(r),
                AcqV::Uncertain(r) => AcqV::Uncertain(r),
                AcqV::InFlight => AcqV::InFlight,
                AcqV::Contended(u) => AcqV::Contended(u),
            }),
            Out::Lease(l) => Out::Lease(l.map(f)),
            Out::Bytes(b) => Out::Bytes(b),
            Out::Claim { claim, until } => Out::Claim {
                claim: f(claim),
                until,
            },
            Out::Resolved(r) => Out::Resolved(r),
            Out::Snap(s) => Out::Snap(s),
            Out::Outcome(o) => Out::Outcome(o),
            Out::Seen(seen) => Out::Seen(seen),
            Out::Marker(m) => Out::Marker(m),
            Out::Key(k) => Out::Key(k),
            Out::Err(e) => Out::Err(e),
            Out::ErrOneOf(e) => Out::ErrOneOf(e),
        }
    }

    /// The answer with its tokens taken out (in a fixed order).
    fn split(self) -> (Out<()>, Vec<T>) {
        let mut tokens = Vec::new();
        let shape = self.map(&mut |t| tokens.push(t));
        (shape, tokens)
    }
}

/// The bijection between model handles and the kernel's random tokens.
#[derive(Clone, Debug, Default)]
struct Binder {
    real: HashMap<H, String>,
    handle: HashMap<String, H>,
}

impl Binder {
    fn bind(&mut self, h: H, s: &str) -> Result<(), String> {
        if let Some(known) = self.real.get(&h) {
            return if known == s {
                Ok(())
            } else {
                Err(format!("token #{h} was {known}, now {s}"))
            };
        }
        if let Some(other) = self.handle.get(s) {
            return Err(format!(
                "a freshly minted token (#{h}) repeats token #{other} ({s})"
            ));
        }
        if s.len() != 32 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(format!("token {s:?} is not 128 bits of lowercase hex"));
        }
        self.real.insert(h, s.to_owned());
        self.handle.insert(s.to_owned(), h);
        Ok(())
    }
}

/// Does the kernel's answer match the model's? Binds fresh tokens on success
/// (and only then).
fn compare(model: &Out<H>, real: &Out<String>, binder: &mut Binder) -> Result<(), String> {
    let mismatch = || format!("\n    model:  {model:?}\n    kernel: {real:?}");
    if let Out::ErrOneOf(names) = model {
        return match real {
            Out::Err(n) if names.contains(&n.as_str()) => Ok(()),
            _ => Err(mismatch()),
        };
    }
    let (mshape, mtokens) = model.clone().split();
    let (rshape, rtokens) = real.clone().split();
    if mshape != rshape {
        return Err(mismatch());
    }
    let mut next = binder.clone();
    for (h, s) in mtokens.into_iter().zip(rtokens) {
        next.bind(h, &s).map_err(|e| format!("{e}{}", mismatch()))?;
    }
    *binder = next;
    Ok(())
}

// ------------------------------------------------------ generated operations

/// Which earlier task token an operation presents.
#[derive(Clone, Copy, Debug)]
enum TokRef {
    /// The n-th most recent token minted for the same task.
    Own(usize),
    /// The n-th most recent token minted for any task.
    Any(usize),
    /// A well-formed token that was never minted.
    Forged,
}

/// Which earlier lease an operation presents, and how it is tampered with.
#[derive(Clone, Copy, Debug)]
struct LeaseRef {
    /// The n-th most recent grant.
    back: usize,
    tamper: Tamper,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tamper {
    None,
    /// The presented `until` is junk (SPEC 8: it is ignored).
    JunkUntil,
    /// The action names another key than the lease.
    OtherKey,
    /// The action names another resource than the lease.
    OtherResource,
    /// Lease and action both name another key (the holder is not that key's).
    ReKey,
    ForgedHolder,
    FenceUp,
    FenceDown,
}

#[derive(Clone, Debug)]
struct SeedOp {
    task: usize,
    title: Option<u8>,
    /// Bit i: depends on `TASKS[i]`.
    deps: u8,
    state: Option<TaskState>,
}

/// One generated operation; tokens and leases are referred to by position
/// among those returned earlier (so shrinking keeps sequences meaningful).
#[derive(Clone, Debug)]
enum Op {
    Advance(u64),
    /// Move the clock to the n-th most recent deadline handed out, plus
    /// `delta` (-1, 0 or 1): lands on expiry boundaries on purpose.
    AdvanceTo {
        back: usize,
        delta: i8,
    },
    Seed {
        tasks: Vec<SeedOp>,
        /// Repeat the first seed (→ `invalid-input`).
        dup: bool,
    },
    List,
    Claim {
        task: usize,
        agent: usize,
        ttl: u64,
    },
    TRelease {
        task: usize,
        tok: TokRef,
    },
    TComplete {
        task: usize,
        tok: TokRef,
    },
    TRenew {
        task: usize,
        tok: TokRef,
        ttl: u64,
    },
    Acquire {
        key: usize,
        res: usize,
        unsafe_: bool,
        fp: Option<usize>,
        ttl: u64,
    },
    Complete {
        lease: LeaseRef,
        result: u8,
    },
    Release {
        lease: LeaseRef,
    },
    Abandon {
        lease: LeaseRef,
    },
    Renew {
        lease: LeaseRef,
        ttl: u64,
    },
    Mark {
        lease: LeaseRef,
        reason: u8,
    },
    Begin {
        key: usize,
        res: usize,
        ttl: u64,
    },
    Resolve {
        key: usize,
        res: usize,
        applied: bool,
        result: Option<u8>,
        force: bool,
    },
    Sink {
        res: usize,
        presented: u64,
        fail: bool,
        tag: u8,
    },
    /// Read a sink's seen fence, or (`downstream`) what its body wrote: two
    /// transactions, so two operations.
    SinkRead {
        res: usize,
        downstream: bool,
    },
    Save {
        run: usize,
        seq: u64,
        fence: Option<u64>,
        /// Bit i: `STEPS[i]` is done.
        done: u8,
        fields: u8,
    },
    Load {
        run: usize,
    },
    Commit {
        run: usize,
        step: Option<usize>,
        fence: u64,
        failed: bool,
        result: u8,
    },
    Read {
        run: usize,
        step: Option<usize>,
    },
    /// Read a side-effect key (`sideeffect.get`).
    KeyGet {
        key: usize,
    },
    /// One of [`invalid_call`]'s inputs that SPEC 8 makes `invalid-input`.
    Invalid {
        which: u8,
        lease: LeaseRef,
    },
}

/// The id space a strategy draws from.
#[derive(Clone, Copy, Debug)]
struct Space {
    tasks: usize,
    keys: usize,
    res: usize,
    runs: usize,
    /// Clock moves (`Advance`).
    clock: bool,
    /// Clock moves to a deadline handed out (`AdvanceTo`): sequential only,
    /// since "set the clock to t unless it is later" is not atomic between
    /// threads.
    jumps: bool,
}

const FULL: Space = Space {
    tasks: 3,
    keys: 3,
    res: 2,
    runs: 2,
    clock: true,
    jumps: true,
};

/// The concurrent phase: fewer ids (more contention); the clock moves too,
/// so expiry and takeover race claims, renewals and verdicts.
const TIGHT: Space = Space {
    tasks: 2,
    keys: 2,
    res: 1,
    runs: 1,
    clock: true,
    jumps: false,
};

/// TTLs 1..=200, mostly multiples of 50 so that sums of clock moves land
/// exactly on deadlines (`now == until`) often; sometimes 0 (`invalid-input`).
fn ttl() -> BoxedStrategy<u64> {
    prop_oneof![
        12 => (1u64..=4).prop_map(|x| x * 50),
        6 => 1u64..=200,
        1 => Just(0u64),
    ]
    .boxed()
}

/// Clock moves 0..=150, mostly multiples of 50, sometimes 1.
fn advance() -> BoxedStrategy<u64> {
    prop_oneof![
        6 => (0u64..=3).prop_map(|x| x * 50),
        3 => 0u64..=150,
        1 => Just(1u64),
    ]
    .boxed()
}

fn tok_ref() -> BoxedStrategy<TokRef> {
    prop_oneof![
        8 => (0usize..3).prop_map(TokRef::Own),
        2 => (0usize..4).prop_map(TokRef::Any),
        1 => Just(TokRef::Forged),
    ]
    .boxed()
}

fn lease_ref() -> BoxedStrategy<LeaseRef> {
    let back = prop_oneof![6 => Just(0usize), 3 => 1usize..4];
    let tamper = prop_oneof![
        24 => Just(Tamper::None),
        2 => Just(Tamper::JunkUntil),
        1 => Just(Tamper::OtherKey),
        1 => Just(Tamper::OtherResource),
        1 => Just(Tamper::ReKey),
        1 => Just(Tamper::ForgedHolder),
        1 => Just(Tamper::FenceUp),
        1 => Just(Tamper::FenceDown),
    ];
    (back, tamper)
        .prop_map(|(back, tamper)| LeaseRef { back, tamper })
        .boxed()
}

/// A seed of some tasks (all of them when `full`).
fn seed_op(sp: Space, full: bool) -> BoxedStrategy<Op> {
    let state = prop_oneof![
        12 => Just(None),
        2 => Just(Some(TaskState::Open)),
        2 => Just(Some(TaskState::Failed)),
        3 => Just(Some(TaskState::Done)),
        1 => Just(Some(TaskState::Claimed)),
    ];
    let deps = prop_oneof![3 => Just(0u8), 2 => 0u8..(1 << sp.tasks)];
    let one = (prop::option::of(0u8..2), deps, state);
    let all = (1u8 << sp.tasks) - 1;
    let tasks = (
        if full {
            (all..=all).boxed()
        } else {
            (1u8..=all).boxed()
        },
        prop::collection::vec(one, sp.tasks),
    )
        .prop_map(|(mask, parts)| {
            parts
                .into_iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(task, (title, deps, state))| SeedOp {
                    task,
                    title,
                    deps,
                    state,
                })
                .collect::<Vec<_>>()
        });
    (tasks, prop::bool::weighted(0.08))
        .prop_map(|(tasks, dup)| Op::Seed { tasks, dup })
        .boxed()
}

fn op(sp: Space) -> BoxedStrategy<Op> {
    let task = 0..sp.tasks;
    let key = 0..sp.keys;
    let res = 0..sp.res;
    let run = 0..sp.runs;
    let board = prop_oneof![
        2 => seed_op(sp, false),
        1 => Just(Op::List),
        6 => (task.clone(), 0..AGENTS.len(), ttl())
            .prop_map(|(task, agent, ttl)| Op::Claim { task, agent, ttl }),
        2 => (task.clone(), tok_ref()).prop_map(|(task, tok)| Op::TRelease { task, tok }),
        3 => (task.clone(), tok_ref()).prop_map(|(task, tok)| Op::TComplete { task, tok }),
        3 => (task, tok_ref(), ttl()).prop_map(|(task, tok, ttl)| Op::TRenew { task, tok, ttl }),
    ];
    let fp = prop_oneof![4 => Just(None), 3 => Just(Some(0usize)), 1 => Just(Some(1usize))];
    let effect = prop_oneof![
        7 => (key.clone(), res.clone(), prop::bool::weighted(0.3), fp, ttl())
            .prop_map(|(key, res, unsafe_, fp, ttl)| Op::Acquire { key, res, unsafe_, fp, ttl }),
        4 => (lease_ref(), 0u8..3).prop_map(|(lease, result)| Op::Complete { lease, result }),
        3 => lease_ref().prop_map(|lease| Op::Release { lease }),
        2 => lease_ref().prop_map(|lease| Op::Abandon { lease }),
        3 => (lease_ref(), ttl()).prop_map(|(lease, ttl)| Op::Renew { lease, ttl }),
        3 => (lease_ref(), 0u8..2).prop_map(|(lease, reason)| Op::Mark { lease, reason }),
        3 => (key.clone(), res.clone(), ttl()).prop_map(|(key, res, ttl)| Op::Begin { key, res, ttl }),
        3 => (key, res.clone(), any::<bool>(), prop::option::of(0u8..3), prop::bool::weighted(0.3))
            .prop_map(|(key, res, applied, result, force)| Op::Resolve { key, res, applied, result, force }),
    ];
    let sink = prop_oneof![
        3 => (res.clone(), 1u64..=4, prop::bool::weighted(0.2), any::<u8>())
            .prop_map(|(res, presented, fail, tag)| Op::Sink { res, presented, fail, tag }),
        1 => (res, any::<bool>()).prop_map(|(res, downstream)| Op::SinkRead { res, downstream }),
    ];
    let seq = prop_oneof![1 => Just(0u64), 8 => 1u64..=6];
    let fence = prop_oneof![2 => Just(None), 3 => (0u64..=3).prop_map(Some)];
    let ckpt = prop_oneof![
        4 => (run.clone(), seq, fence, 0u8..8, 0u8..3)
            .prop_map(|(run, seq, fence, done, fields)| Op::Save { run, seq, fence, done, fields }),
        1 => run.clone().prop_map(|run| Op::Load { run }),
        3 => (run.clone(), prop::option::of(0..STEPS.len()), 0u64..=3, any::<bool>(), 0u8..2)
            .prop_map(|(run, step, fence, failed, result)| Op::Commit { run, step, fence, failed, result }),
        1 => (run, prop::option::of(0..STEPS.len())).prop_map(|(run, step)| Op::Read { run, step }),
    ];
    if sp.clock && !sp.jumps {
        prop_oneof![
            3 => advance().prop_map(Op::Advance),
            6 => board,
            9 => effect,
            2 => sink,
            3 => ckpt,
            1 => (0..INVALID_CALLS, lease_ref()).prop_map(|(which, lease)| Op::Invalid { which, lease }),
        ]
        .boxed()
    } else if sp.clock {
        prop_oneof![
            4 => advance().prop_map(Op::Advance),
            2 => (0usize..3, -1i8..=1).prop_map(|(back, delta)| Op::AdvanceTo { back, delta }),
            8 => board,
            9 => effect,
            2 => sink,
            3 => ckpt,
            1 => (0..INVALID_CALLS, lease_ref()).prop_map(|(which, lease)| Op::Invalid { which, lease }),
        ]
        .boxed()
    } else {
        prop_oneof![
            6 => board,
            9 => effect,
            2 => sink,
            3 => ckpt,
            1 => (0..INVALID_CALLS, lease_ref()).prop_map(|(which, lease)| Op::Invalid { which, lease }),
        ]
        .boxed()
    }
}

// --------------------------------------------------------- concrete calls

/// One concrete call, with tokens as `T`.
#[derive(Clone, Debug)]
enum Call<T> {
    Advance(u64),
    /// Set the clock to this time unless it is already later.
    AdvanceTo(u64),
    Seed(Vec<TaskSeed>),
    List,
    Claim {
        id: String,
        agent: String,
        ttl: u64,
    },
    TRelease {
        id: String,
        token: T,
    },
    TComplete {
        id: String,
        token: T,
    },
    TRenew {
        id: String,
        token: T,
        ttl: u64,
    },
    Acquire {
        action: Action,
        ttl: u64,
    },
    Complete {
        action: Action,
        lease: LeaseV<T>,
        result: Vec<u8>,
    },
    Release {
        action: Action,
        lease: LeaseV<T>,
    },
    Abandon {
        action: Action,
        lease: LeaseV<T>,
    },
    Renew {
        action: Action,
        lease: LeaseV<T>,
        ttl: u64,
    },
    Mark {
        action: Action,
        lease: LeaseV<T>,
        reason: String,
    },
    Begin {
        action: Action,
        ttl: u64,
    },
    Resolve {
        action: Action,
        resolution: Resolution,
    },
    Sink {
        resource: String,
        presented: u64,
        fail: bool,
        marker: String,
    },
    SinkRead {
        resource: String,
        downstream: bool,
    },
    Save(Snapshot),
    Load(String),
    Commit {
        run: String,
        step: Option<String>,
        fence: u64,
        outcome: Outcome,
    },
    Read {
        run: String,
        step: Option<String>,
    },
    KeyGet(String),
    /// A call SPEC 8 refuses with `invalid-input`, before anything else.
    Invalid(Box<Call<T>>),
}

/// The tokens and leases one caller has seen so far, in order.
#[derive(Clone, Debug)]
struct Refs<T> {
    tokens: Vec<(String, T)>,
    leases: Vec<LeaseV<T>>,
    /// Every deadline handed out (claims, grants, renewals, reconcile claims).
    deadlines: Vec<u64>,
}

impl<T> Default for Refs<T> {
    fn default() -> Self {
        Refs {
            tokens: Vec::new(),
            leases: Vec::new(),
            deadlines: Vec::new(),
        }
    }
}

impl<T: Clone> Refs<T> {
    fn token(&self, task: &str, r: TokRef, forged: &T) -> T {
        let nth_back = |v: Vec<&T>, n: usize| {
            if v.is_empty() {
                forged.clone()
            } else {
                v[v.len() - 1 - n % v.len()].clone()
            }
        };
        match r {
            TokRef::Own(n) => nth_back(
                self.tokens
                    .iter()
                    .filter(|(t, _)| t == task)
                    .map(|(_, tok)| tok)
                    .collect(),
                n,
            ),
            TokRef::Any(n) => nth_back(self.tokens.iter().map(|(_, tok)| tok).collect(), n),
            TokRef::Forged => forged.clone(),
        }
    }

    /// The lease and the action presented with it.
    fn lease(&self, r: LeaseRef, forged: &T) -> (Action, LeaseV<T>) {
        let mut lease = if self.leases.is_empty() {
            LeaseV {
                key: KEYS[0].into(),
                resource: RESOURCES[0].into(),
                fence: 1,
                holder: forged.clone(),
                until: START,
            }
        } else {
            self.leases[self.leases.len() - 1 - r.back % self.leases.len()].clone()
        };
        let other = |names: &[&str], name: &str| {
            let i = names.iter().position(|n| *n == name).unwrap_or(0);
            names[(i + 1) % names.len()].to_owned()
        };
        let mut action = Action::new(&lease.key, &lease.resource);
        match r.tamper {
            Tamper::None => {}
            Tamper::JunkUntil => lease.until = 7,
            Tamper::OtherKey => action.key = other(&KEYS, &lease.key),
            Tamper::OtherResource => action.resource = other(&RESOURCES, &lease.resource),
            Tamper::ReKey => {
                lease.key = other(&KEYS, &lease.key);
                action.key.clone_from(&lease.key);
            }
            Tamper::ForgedHolder => lease.holder = forged.clone(),
            Tamper::FenceUp => lease.fence += 1,
            Tamper::FenceDown => lease.fence = lease.fence.saturating_sub(1),
        }
        (action, lease)
    }

    /// Remember what an answer handed out.
    fn absorb(&mut self, op: &Op, out: &Out<T>) {
        match out {
            Out::Task(TaskV {
                until: Some(until), ..
            })
            | Out::Acq(AcqV::Granted(LeaseV { until, .. }))
            | Out::Lease(LeaseV { until, .. })
            | Out::Claim { until, .. } => self.deadlines.push(*until),
            _ => {}
        }
        match (op, out) {
            (Op::Claim { task, .. }, Out::Task(t)) => {
                if let Some(tok) = &t.token {
                    self.tokens.push((TASKS[*task].to_owned(), tok.clone()));
                }
            }
            (Op::Acquire { .. }, Out::Acq(AcqV::Granted(l))) => self.leases.push(l.clone()),
            _ => {}
        }
    }
}

fn ids(names: &[&str], mask: u8) -> Vec<String> {
    names
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, n)| (*n).to_owned())
        .collect()
}

/// The concrete call of `op` for a caller who has seen `refs`.
fn instantiate<T: Clone>(op: &Op, refs: &Refs<T>, forged: &T) -> Call<T> {
    match op {
        Op::Advance(ms) => Call::Advance(*ms),
        Op::AdvanceTo { back, delta } => match refs.deadlines.len() {
            0 => Call::Advance(0),
            n => Call::AdvanceTo(
                refs.deadlines[n - 1 - back % n].saturating_add_signed(i64::from(*delta)),
            ),
        },
        Op::Seed { tasks, dup } => {
            let mut seeds: Vec<TaskSeed> = tasks
                .iter()
                .map(|s| TaskSeed {
                    id: TASKS[s.task].into(),
                    title: s.title.map(|t| format!("title {t}")),
                    deps: ids(&TASKS, s.deps),
                    state: s.state,
                })
                .collect();
            if *dup && let Some(first) = seeds.first().cloned() {
                seeds.push(first.title("again"));
            }
            Call::Seed(seeds)
        }
        Op::List => Call::List,
        Op::Claim { task, agent, ttl } => Call::Claim {
            id: TASKS[*task].into(),
            agent: AGENTS[*agent].into(),
            ttl: *ttl,
        },
        Op::TRelease { task, tok } => Call::TRelease {
            id: TASKS[*task].into(),
            token: refs.token(TASKS[*task], *tok, forged),
        },
        Op::TComplete { task, tok } => Call::TComplete {
            id: TASKS[*task].into(),
            token: refs.token(TASKS[*task], *tok, forged),
        },
        Op::TRenew { task, tok, ttl } => Call::TRenew {
            id: TASKS[*task].into(),
            token: refs.token(TASKS[*task], *tok, forged),
            ttl: *ttl,
        },
        Op::Acquire {
            key,
            res,
            unsafe_,
            fp,
            ttl,
        } => {
            let mut action = Action::new(KEYS[*key], RESOURCES[*res]);
            if *unsafe_ {
                action = action.unsafe_to_retry();
            }
            if let Some(f) = fp {
                action = action.with_fingerprint(FINGERPRINTS[*f]);
            }
            Call::Acquire { action, ttl: *ttl }
        }
        Op::Complete { lease, result } => {
            let (action, lease) = refs.lease(*lease, forged);
            Call::Complete {
                action,
                lease,
                result: vec![*result],
            }
        }
        Op::Release { lease } => {
            let (action, lease) = refs.lease(*lease, forged);
            Call::Release { action, lease }
        }
        Op::Abandon { lease } => {
            let (action, lease) = refs.lease(*lease, forged);
            Call::Abandon { action, lease }
        }
        Op::Renew { lease, ttl } => {
            let (action, lease) = refs.lease(*lease, forged);
            Call::Renew {
                action,
                lease,
                ttl: *ttl,
            }
        }
        Op::Mark { lease, reason } => {
            let (action, lease) = refs.lease(*lease, forged);
            Call::Mark {
                action,
                lease,
                reason: format!("reason {reason}"),
            }
        }
        Op::Begin { key, res, ttl } => Call::Begin {
            action: Action::new(KEYS[*key], RESOURCES[*res]),
            ttl: *ttl,
        },
        Op::Resolve {
            key,
            res,
            applied,
            result,
            force,
        } => Call::Resolve {
            action: Action::new(KEYS[*key], RESOURCES[*res]),
            resolution: Resolution {
                applied: *applied,
                result: result.map(|r| vec![100 + r]),
                force_retryable: *force,
                claim: None,
            },
        },
        Op::Sink {
            res,
            presented,
            fail,
            tag,
        } => Call::Sink {
            resource: RESOURCES[*res].into(),
            presented: *presented,
            fail: *fail,
            marker: format!("w{tag}@{presented}"),
        },
        Op::SinkRead { res, downstream } => Call::SinkRead {
            resource: RESOURCES[*res].into(),
            downstream: *downstream,
        },
        Op::Save {
            run,
            seq,
            fence,
            done,
            fields,
        } => Call::Save(Snapshot {
            run_id: RUNS[*run].into(),
            seq: *seq,
            fence: *fence,
            status: format!("running {seq}"),
            done: ids(&STEPS, *done),
            fields: match fields {
                0 => vec![],
                1 => vec![("a".into(), format!("{seq}"))],
                _ => vec![("a".into(), "x".into()), ("b".into(), "y".into())],
            },
        }),
        Op::Load { run } => Call::Load(RUNS[*run].into()),
        Op::Commit {
            run,
            step,
            fence,
            failed,
            result,
        } => Call::Commit {
            run: RUNS[*run].into(),
            step: step.map(|s| STEPS[s].to_owned()),
            fence: *fence,
            outcome: Outcome {
                status: if *failed {
                    Status::Failed
                } else {
                    Status::Succeeded
                },
                result: vec![*result],
            },
        },
        Op::Read { run, step } => Call::Read {
            run: RUNS[*run].into(),
            step: step.map(|s| STEPS[s].to_owned()),
        },
        Op::KeyGet { key } => Call::KeyGet(KEYS[*key].into()),
        Op::Invalid { which, lease } => {
            let (action, lease) = refs.lease(*lease, forged);
            Call::Invalid(Box::new(invalid_call(*which, action, lease)))
        }
    }
}

/// How many kinds of invalid input [`invalid_call`] makes.
const INVALID_CALLS: u8 = 16;

/// Inputs outside SPEC 8's limits (ids 1-256 bytes, non-empty status,
/// reason <= 4 KiB, results <= 1 MiB, ttl 1 ms..1 year, numbers < 2^53,
/// fields without duplicate keys, seeds without duplicates or `claimed`).
fn invalid_call<T>(which: u8, action: Action, lease: LeaseV<T>) -> Call<T> {
    const TOO_BIG: u64 = 1 << 53;
    let long = "x".repeat(257);
    let snap = |seq, status: &str, fields: Vec<(String, String)>| Snapshot {
        run_id: RUNS[0].into(),
        seq,
        fence: None,
        status: status.into(),
        done: vec![],
        fields,
    };
    let pair = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    match which {
        0 => Call::Claim {
            id: String::new(),
            agent: AGENTS[0].into(),
            ttl: 50,
        },
        1 => Call::Claim {
            id: TASKS[0].into(),
            agent: long,
            ttl: 50,
        },
        2 => Call::Acquire {
            action: Action::new("", RESOURCES[0]),
            ttl: 50,
        },
        3 => Call::Mark {
            action,
            lease,
            reason: "r".repeat(4097),
        },
        4 => Call::Save(snap(1, "", vec![])),
        5 => Call::Save(snap(1, "ok", vec![pair("a", "1"), pair("a", "2")])),
        6 => Call::Save(snap(TOO_BIG, "ok", vec![])),
        7 => Call::Commit {
            run: RUNS[0].into(),
            step: None,
            fence: TOO_BIG,
            outcome: Outcome {
                status: Status::Succeeded,
                result: vec![],
            },
        },
        8 => Call::Acquire {
            action: Action::new(KEYS[0], RESOURCES[0]),
            ttl: MAX_TTL + 1,
        },
        9 => Call::Seed(vec![TaskSeed::new("")]),
        10 => Call::Complete {
            action,
            lease,
            result: vec![0; (1 << 20) + 1],
        },
        11 => Call::Sink {
            resource: RESOURCES[0].into(),
            presented: TOO_BIG,
            fail: false,
            marker: "too big".into(),
        },
        12 => Call::Begin {
            action: Action::new(&long, RESOURCES[0]),
            ttl: 50,
        },
        13 => Call::Resolve {
            action: Action::new(KEYS[0], RESOURCES[0]),
            resolution: Resolution {
                applied: true,
                result: Some(vec![0; (1 << 20) + 1]),
                force_retryable: false,
                claim: None,
            },
        },
        14 => Call::Seed(vec![TaskSeed::new(TASKS[0]).deps(&[""])]),
        _ => Call::Commit {
            run: RUNS[0].into(),
            step: Some(String::new()),
            fence: 0,
            outcome: Outcome {
                status: Status::Failed,
                result: vec![],
            },
        },
    }
}

// ------------------------------------------------------------------ model

/// A deliberately wrong model, to prove the comparison can fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutant {
    /// A claim is still live at `now == until` (off by one).
    TaskLiveAtUntil,
    /// An expired execution intent still counts as in flight.
    IntentNeverExpires,
    /// Renewing a task claim mints a new token.
    RenewMintsToken,
    /// A fenced sink accepts a fence below the one it has seen.
    SinkAcceptsStale,
}

#[derive(Clone, Debug)]
struct MTask {
    title: String,
    deps: Vec<String>,
    state: TaskState,
    owner: Option<String>,
    token: Option<H>,
    until: Option<u64>,
    fence: u64,
    /// The token that completed it (for idempotent re-completion).
    completed_by: Option<H>,
}

impl MTask {
    fn view(&self, id: &str, with_token: bool) -> TaskV<H> {
        TaskV {
            id: id.to_owned(),
            title: self.title.clone(),
            deps: self.deps.clone(),
            state: self.state,
            owner: self.owner.clone(),
            token: if with_token { self.token } else { None },
            until: self.until,
            fence: self.fence,
        }
    }
}

/// The execution intent of a key's current attempt.
#[derive(Clone, Debug)]
struct Intent {
    resource: String,
    fence: u64,
    until: u64,
}

/// A key, from its first grant on.
#[derive(Clone, Debug)]
struct MKey {
    /// Recorded at the first grant, kept for the key's life.
    fingerprint: Option<String>,
    safety: RetrySafety,
    /// The resource of the latest grant.
    resource: String,
    /// When the first result was recorded.
    completed_at: Option<u64>,
    intent: Option<Intent>,
    /// Marked uncertain, with the caller's reason.
    marked: Option<String>,
    completed: Option<Vec<u8>>,
    /// A reconcile claim's deadline.
    claim: Option<u64>,
}

/// The live hold of a resource's newest grant (`None` once released).
#[derive(Clone, Debug)]
struct Hold {
    key: String,
    until: u64,
}

#[derive(Clone, Debug, Default)]
struct MRes {
    max_fence: u64,
    hold: Option<Hold>,
}

#[derive(Clone, Debug)]
struct Model {
    now: u64,
    minted: H,
    mutant: Option<Mutant>,
    tasks: BTreeMap<String, MTask>,
    keys: BTreeMap<String, MKey>,
    resources: BTreeMap<String, MRes>,
    /// (resource, fence) → (key, holder) of every grant.
    grants: BTreeMap<(String, u64), (String, H)>,
    /// resource → (seen fence, downstream marker).
    sinks: BTreeMap<String, (u64, Option<String>)>,
    snaps: BTreeMap<String, Snapshot>,
    outcomes: BTreeMap<(String, Option<String>), Outcome>,
}

fn err(name: &str) -> Out<H> {
    Out::Err(name.to_owned())
}

fn bad_ttl(ttl: u64) -> bool {
    !(1..=MAX_TTL).contains(&ttl)
}

impl Model {
    fn new(mutant: Option<Mutant>) -> Model {
        Model {
            now: START,
            minted: 0,
            mutant,
            tasks: BTreeMap::new(),
            keys: BTreeMap::new(),
            resources: BTreeMap::new(),
            grants: BTreeMap::new(),
            sinks: BTreeMap::new(),
            snaps: BTreeMap::new(),
            outcomes: BTreeMap::new(),
        }
    }

    fn mint(&mut self) -> H {
        self.minted += 1;
        self.minted - 1
    }

    fn apply(&mut self, call: &Call<H>) -> Out<H> {
        match call {
            Call::Advance(ms) => {
                self.now += ms;
                Out::Unit
            }
            Call::AdvanceTo(t) => {
                self.now = self.now.max(*t);
                Out::Unit
            }
            Call::Seed(seeds) => self.seed(seeds),
            Call::List => Out::Tasks(self.tasks.iter().map(|(id, t)| t.view(id, false)).collect()),
            Call::Claim { id, agent, ttl } => self.claim(id, agent, *ttl),
            Call::TRelease { id, token } => self.task_release(id, *token),
            Call::TComplete { id, token } => self.task_complete(id, *token),
            Call::TRenew { id, token, ttl } => self.task_renew(id, *token, *ttl),
            Call::Acquire { action, ttl } => self.acquire(action, *ttl),
            Call::Complete {
                action,
                lease,
                result,
            } => self.complete(action, lease, result),
            Call::Release { action, lease } => self.release(action, lease),
            Call::Abandon { action, lease } => self.abandon(action, lease),
            Call::Renew { action, lease, ttl } => self.renew(action, lease, *ttl),
            Call::Mark {
                action,
                lease,
                reason,
            } => self.mark(action, lease, reason),
            Call::Begin { action, ttl } => self.begin(action, *ttl),
            Call::Resolve { action, resolution } => self.resolve(action, resolution),
            Call::Sink {
                resource,
                presented,
                fail,
                marker,
            } => self.sink(resource, *presented, *fail, marker),
            Call::SinkRead {
                resource,
                downstream,
            } => {
                let (seen, marker) = self.sinks.get(resource).cloned().unwrap_or((0, None));
                if *downstream {
                    Out::Marker(marker)
                } else {
                    Out::Seen(seen)
                }
            }
            Call::Save(snap) => self.save(snap),
            Call::Load(run) => self
                .snaps
                .get(run)
                .map_or_else(|| err("not-found"), |s| Out::Snap(s.clone())),
            Call::Commit {
                run,
                step,
                fence,
                outcome,
            } => self.commit(run, step, *fence, outcome),
            Call::Invalid(_) => err("invalid-input"),
            Call::KeyGet(key) => self.key_info(key),
            Call::Read { run, step } => self
                .outcomes
                .get(&(run.clone(), step.clone()))
                .map_or_else(|| err("not-found"), |o| Out::Outcome(o.clone())),
        }
    }

    // ---- taskboard (SPEC 6, 8)

    fn seed(&mut self, seeds: &[TaskSeed]) -> Out<H> {
        let mut ids = BTreeSet::new();
        for s in seeds {
            if !ids.insert(&s.id) || s.state == Some(TaskState::Claimed) {
                return err("invalid-input");
            }
        }
        for s in seeds {
            // Re-seeding overwrites content, clears the lease, keeps the fence.
            let fence = self.tasks.get(&s.id).map_or(0, |t| t.fence);
            self.tasks.insert(
                s.id.clone(),
                MTask {
                    title: s.title.clone().unwrap_or_default(),
                    deps: s.deps.clone(),
                    state: s.state.unwrap_or(TaskState::Open),
                    owner: None,
                    token: None,
                    until: None,
                    fence,
                    completed_by: None,
                },
            );
        }
        Out::Unit
    }

    fn task_live(&self, until: Option<u64>) -> bool {
        let until = until.expect("a claimed task has a deadline");
        if self.mutant == Some(Mutant::TaskLiveAtUntil) {
            self.now <= until
        } else {
            self.now < until
        }
    }

    fn claim(&mut self, id: &str, agent: &str, ttl: u64) -> Out<H> {
        if bad_ttl(ttl) {
            return err("invalid-input");
        }
        let Some(t) = self.tasks.get(id) else {
            return err("not-found");
        };
        if t.state == TaskState::Done {
            return err("terminal");
        }
        let deps_done = t.deps.iter().all(|d| {
            self.tasks
                .get(d)
                .is_some_and(|d| d.state == TaskState::Done)
        });
        if !deps_done {
            return err("deps-pending");
        }
        if t.state == TaskState::Claimed && self.task_live(t.until) {
            return err("taken");
        }
        let token = self.mint();
        let now = self.now;
        let t = self.tasks.get_mut(id).expect("checked");
        t.state = TaskState::Claimed;
        t.fence += 1;
        t.owner = Some(agent.to_owned());
        t.token = Some(token);
        t.until = Some(now + ttl);
        Out::Task(t.view(id, true))
    }

    /// SPEC 6 does not say whether a token presented for an unknown task is
    /// `not-found` or `lease-lost`: either is accepted.
    fn unknown_task() -> Out<H> {
        Out::ErrOneOf(vec!["not-found", "lease-lost"])
    }

    fn task_release(&mut self, id: &str, token: H) -> Out<H> {
        let Some(t) = self.tasks.get_mut(id) else {
            return Self::unknown_task();
        };
        if t.state != TaskState::Claimed || t.token != Some(token) {
            return err("lease-lost");
        }
        t.state = TaskState::Open;
        t.owner = None;
        t.token = None;
        t.until = None;
        Out::Unit
    }

    fn task_complete(&mut self, id: &str, token: H) -> Out<H> {
        let Some(t) = self.tasks.get_mut(id) else {
            return Self::unknown_task();
        };
        if t.state == TaskState::Claimed && t.token == Some(token) {
            t.state = TaskState::Done;
            t.token = None;
            t.until = None;
            t.completed_by = Some(token);
            Out::Unit
        } else if t.state == TaskState::Done && t.completed_by == Some(token) {
            Out::Unit
        } else {
            err("lease-lost")
        }
    }

    fn task_renew(&mut self, id: &str, token: H, ttl: u64) -> Out<H> {
        if bad_ttl(ttl) {
            return err("invalid-input");
        }
        let now = self.now;
        let Some(t) = self.tasks.get(id) else {
            return Self::unknown_task();
        };
        if t.state != TaskState::Claimed || t.token != Some(token) || now >= t.until.unwrap_or(0) {
            return err("lease-lost");
        }
        let fresh = (self.mutant == Some(Mutant::RenewMintsToken)).then(|| self.mint());
        let t = self.tasks.get_mut(id).expect("checked");
        t.until = Some(now + ttl);
        if let Some(fresh) = fresh {
            t.token = Some(fresh);
        }
        Out::Task(t.view(id, true))
    }

    // ---- side effects (SPEC 5, 8)

    fn acquire(&mut self, action: &Action, ttl: u64) -> Out<H> {
        if bad_ttl(ttl) {
            return err("invalid-input");
        }
        let now = self.now;
        if let Some(k) = self.keys.get(&action.key) {
            // 0. one key, one logical action (an absent fingerprint never conflicts)
            if let (Some(recorded), Some(presented)) = (&k.fingerprint, &action.fingerprint)
                && recorded != presented
            {
                return err("key-reused");
            }
            // 1. completed
            if let Some(result) = &k.completed {
                return Out::Acq(AcqV::Replayed(result.clone()));
            }
            // 2. uncertain: marked, or intent expired without a verdict
            if let Some(reason) = &k.marked {
                return Out::Acq(AcqV::Uncertain(reason.clone()));
            }
            if let Some(intent) = &k.intent {
                let expired =
                    now >= intent.until && self.mutant != Some(Mutant::IntentNeverExpires);
                // 3. in flight
                return Out::Acq(if expired {
                    AcqV::Uncertain("intent-expired".into())
                } else {
                    AcqV::InFlight
                });
            }
        }
        // 4. the resource is held by a live lease of another key
        let res = self.resources.entry(action.resource.clone()).or_default();
        if let Some(hold) = &res.hold
            && hold.key != action.key
            && now < hold.until
        {
            return Out::Acq(AcqV::Contended(hold.until));
        }
        // 5. grant
        res.max_fence += 1;
        let fence = res.max_fence;
        let until = now + ttl;
        res.hold = Some(Hold {
            key: action.key.clone(),
            until,
        });
        let holder = self.mint();
        self.grants.insert(
            (action.resource.clone(), fence),
            (action.key.clone(), holder),
        );
        let key = self.keys.entry(action.key.clone()).or_insert_with(|| MKey {
            fingerprint: action.fingerprint.clone(),
            safety: action.retry_safety,
            resource: action.resource.clone(),
            completed_at: None,
            intent: None,
            marked: None,
            completed: None,
            claim: None,
        });
        key.resource.clone_from(&action.resource);
        // A new attempt: no reconciliation of an earlier one carries over.
        key.claim = None;
        key.intent = Some(Intent {
            resource: action.resource.clone(),
            fence,
            until,
        });
        Out::Acq(AcqV::Granted(LeaseV {
            key: action.key.clone(),
            resource: action.resource.clone(),
            fence,
            holder,
            until,
        }))
    }

    /// The triple check: key/resource, newest fence, holder minted at grant.
    fn triple(&self, action: &Action, lease: &LeaseV<H>) -> Result<(), &'static str> {
        if lease.key != action.key || lease.resource != action.resource {
            return Err("resource-mismatch");
        }
        let newest = self
            .resources
            .get(&lease.resource)
            .map_or(0, |r| r.max_fence);
        if newest == 0 || lease.fence != newest {
            return Err("fence-stale");
        }
        // (3) the holder minted at the grant of this key: a genuine fence
        // and holder relabelled with another key is a forged lease.
        match self.grants.get(&(lease.resource.clone(), lease.fence)) {
            Some((key, holder)) if *holder == lease.holder && *key == lease.key => Ok(()),
            _ => Err("not-holder"),
        }
    }

    /// The lease's attempt has no verdict yet (its intent is the key's).
    fn attempt_open(&self, lease: &LeaseV<H>) -> bool {
        self.keys
            .get(&lease.key)
            .and_then(|k| k.intent.as_ref())
            .is_some_and(|i| i.resource == lease.resource && i.fence == lease.fence)
    }

    /// Release the resource's hold (after a passed triple check it is this
    /// lease's, if any).
    fn drop_hold(&mut self, resource: &str) {
        if let Some(r) = self.resources.get_mut(resource) {
            r.hold = None;
        }
    }

    fn key_mut(&mut self, key: &str) -> &mut MKey {
        self.keys.get_mut(key).expect("a granted key is recorded")
    }

    fn complete(&mut self, action: &Action, lease: &LeaseV<H>, result: &[u8]) -> Out<H> {
        if let Err(e) = self.triple(action, lease) {
            return err(e);
        }
        if let Some(first) = self.keys.get(&lease.key).and_then(|k| k.completed.clone()) {
            // SPEC 8: once the attempt has a verdict, its lease's `complete`
            // on a completed key gets the first result, and nothing else
            // happens (only `release` frees a hold mark-uncertain left).
            return Out::Bytes(first);
        }
        if !self.attempt_open(lease) {
            return err("not-holder");
        }
        let now = self.now;
        let key = self.key_mut(&lease.key);
        key.completed = Some(result.to_vec());
        key.completed_at = Some(now);
        key.intent = None;
        // The holder's late verdict ends any reconciliation (see above).
        key.claim = None;
        self.drop_hold(&lease.resource);
        Out::Bytes(result.to_vec())
    }

    fn release(&mut self, action: &Action, lease: &LeaseV<H>) -> Out<H> {
        if let Err(e) = self.triple(action, lease) {
            return err(e);
        }
        self.drop_hold(&lease.resource);
        Out::Unit
    }

    fn abandon(&mut self, action: &Action, lease: &LeaseV<H>) -> Out<H> {
        if let Err(e) = self.triple(action, lease) {
            return err(e);
        }
        if !self.attempt_open(lease) {
            return err("not-holder");
        }
        let key = self.key_mut(&lease.key);
        key.intent = None;
        key.claim = None;
        self.drop_hold(&lease.resource);
        Out::Unit
    }

    fn renew(&mut self, action: &Action, lease: &LeaseV<H>, ttl: u64) -> Out<H> {
        if bad_ttl(ttl) {
            return err("invalid-input");
        }
        if let Err(e) = self.triple(action, lease) {
            return err(e);
        }
        if !self.attempt_open(lease) {
            return err("not-holder");
        }
        let now = self.now;
        let until = now + ttl;
        let res = self.resources.get_mut(&lease.resource).expect("granted");
        match &mut res.hold {
            Some(hold) if now < hold.until => hold.until = until,
            _ => return err("lease-expired"),
        }
        self.key_mut(&lease.key)
            .intent
            .as_mut()
            .expect("open attempt")
            .until = until;
        Out::Lease(LeaseV {
            until,
            ..lease.clone()
        })
    }

    fn mark(&mut self, action: &Action, lease: &LeaseV<H>, reason: &str) -> Out<H> {
        if let Err(e) = self.triple(action, lease) {
            return err(e);
        }
        if !self.attempt_open(lease) {
            return err("not-holder");
        }
        let key = self.key_mut(&lease.key);
        key.marked = Some(reason.to_owned());
        key.intent = None;
        Out::Unit
    }

    fn uncertain(&self, key: &MKey) -> bool {
        key.completed.is_none()
            && (key.marked.is_some() || key.intent.as_ref().is_some_and(|i| self.now >= i.until))
    }

    fn begin(&mut self, action: &Action, ttl: u64) -> Out<H> {
        if bad_ttl(ttl) {
            return err("invalid-input");
        }
        let now = self.now;
        match self.keys.get(&action.key) {
            Some(k) if self.uncertain(k) => {
                if k.claim.is_some_and(|until| now < until) {
                    return err("reconcile-taken");
                }
            }
            _ => return err("not-uncertain"),
        }
        let claim = self.mint();
        self.key_mut(&action.key).claim = Some(now + ttl);
        Out::Claim {
            claim,
            until: now + ttl,
        }
    }

    fn resolve(&mut self, action: &Action, resolution: &Resolution) -> Out<H> {
        let now = self.now;
        let Some(k) = self.keys.get(&action.key) else {
            return err("not-uncertain");
        };
        if let Some(first) = &k.completed {
            return Out::Resolved(Resolved::Replayed(first.clone()));
        }
        if !self.uncertain(k) {
            return err("not-uncertain");
        }
        if !resolution.applied && k.safety == RetrySafety::Unsafe && !resolution.force_retryable {
            return err("unsafe-not-retryable");
        }
        let key = self.key_mut(&action.key);
        key.intent = None;
        key.marked = None;
        key.claim = None;
        if resolution.applied {
            let result = resolution.result.clone().unwrap_or_default();
            key.completed = Some(result.clone());
            key.completed_at = Some(now);
            Out::Resolved(Resolved::Replayed(result))
        } else {
            Out::Resolved(Resolved::Cleared)
        }
    }

    fn sink(&mut self, resource: &str, presented: u64, fail: bool, marker: &str) -> Out<H> {
        let stale_ok = self.mutant == Some(Mutant::SinkAcceptsStale);
        let (seen, mark) = self.sinks.entry(resource.to_owned()).or_insert((0, None));
        if presented < *seen && !stale_ok {
            return err("fence-stale");
        }
        if fail {
            return err("write-failed");
        }
        *seen = presented;
        *mark = Some(marker.to_owned());
        Out::Unit
    }

    /// SPEC 9: a key as `sideeffect.get` shows it: an expired intent is
    /// `uncertain` (`intent-expired`); a reconcile claim only while live.
    fn key_info(&self, key: &str) -> Out<H> {
        let Some(k) = self.keys.get(key) else {
            return err("not-found");
        };
        let now = self.now;
        let mut info = KeyInfo {
            key: key.to_owned(),
            state: KeyState::Cleared,
            retry_safety: k.safety,
            fingerprint: k.fingerprint.clone(),
            resource: k.resource.clone(),
            until: None,
            reason: None,
            completed_at: None,
            reconciling_until: k.claim.filter(|until| now < *until),
        };
        if k.completed.is_some() {
            info.state = KeyState::Completed;
            info.completed_at = k.completed_at;
        } else if let Some(reason) = &k.marked {
            info.state = KeyState::Uncertain;
            info.reason = Some(reason.clone());
        } else if let Some(intent) = &k.intent {
            info.until = Some(intent.until);
            if now >= intent.until {
                info.state = KeyState::Uncertain;
                info.reason = Some("intent-expired".into());
            } else {
                info.state = KeyState::InFlight;
            }
        }
        Out::Key(info)
    }

    // ---- checkpoint and commitgate (SPEC 3, 4, 8)

    fn save(&mut self, snap: &Snapshot) -> Out<H> {
        if self.outcomes.contains_key(&(snap.run_id.clone(), None)) {
            return err("terminal");
        }
        if let Some(persisted) = self.snaps.get(&snap.run_id) {
            if snap.fence.unwrap_or(0) < persisted.fence.unwrap_or(0) {
                return err("fence-stale");
            }
            if snap.seq <= persisted.seq {
                return err("stale-seq");
            }
        }
        if snap.seq == 0 {
            return err("stale-seq");
        }
        self.snaps.insert(snap.run_id.clone(), snap.clone());
        Out::Unit
    }

    fn commit(
        &mut self,
        run: &str,
        step: &Option<String>,
        fence: u64,
        outcome: &Outcome,
    ) -> Out<H> {
        if let Some(persisted) = self.snaps.get(run).and_then(|s| s.fence)
            && fence < persisted
        {
            return err("fence-stale");
        }
        if step.is_some() && self.outcomes.contains_key(&(run.to_owned(), None)) {
            return err("terminal");
        }
        match self.outcomes.get(&(run.to_owned(), step.clone())) {
            Some(first) if first == outcome => Out::Outcome(first.clone()),
            Some(_) => err("already-committed"),
            None => {
                self.outcomes
                    .insert((run.to_owned(), step.clone()), outcome.clone());
                Out::Outcome(outcome.clone())
            }
        }
    }
}

// ------------------------------------------------------------ the kernel

fn real_err<T>(e: Error) -> Out<T> {
    match e {
        Error::Storage(why) => Out::Err(format!("storage: {why}")),
        e => Out::Err(e.name().to_owned()),
    }
}

fn real<T, U>(r: Result<T, Error>, f: impl FnOnce(T) -> Out<U>) -> Out<U> {
    r.map_or_else(real_err, f)
}

fn task_v(t: Task) -> TaskV<String> {
    TaskV {
        id: t.id,
        title: t.title,
        deps: t.deps,
        state: t.state,
        owner: t.owner,
        token: t.token,
        until: t.until,
        fence: t.fence,
    }
}

fn lease_v(l: Lease) -> LeaseV<String> {
    LeaseV {
        key: l.key,
        resource: l.resource,
        fence: l.fence,
        holder: l.holder,
        until: l.until,
    }
}

fn lease_in(l: &LeaseV<String>) -> Lease {
    Lease {
        key: l.key.clone(),
        resource: l.resource.clone(),
        fence: l.fence,
        holder: l.holder.clone(),
        until: l.until,
    }
}

fn sink_key(resource: &str) -> String {
    format!("gak-model/{resource}")
}

fn apply_real(k: &Kernel, clock: &ManualClock, call: &Call<String>) -> Out<String> {
    let unit = |r: Result<(), Error>| real(r, |()| Out::Unit);
    let se = k.sideeffect();
    let tb = k.taskboard();
    match call {
        Call::Advance(ms) => {
            clock.advance(*ms);
            Out::Unit
        }
        Call::AdvanceTo(t) => {
            if *t > clock.now() {
                clock.set(*t).expect("forward");
            }
            Out::Unit
        }
        Call::Seed(seeds) => unit(tb.seed(seeds)),
        Call::List => real(tb.list(None, None, 1000).map(|p| p.items), |ts| {
            Out::Tasks(ts.into_iter().map(task_v).collect())
        }),
        Call::Claim { id, agent, ttl } => real(tb.claim(id, agent, *ttl), |t| Out::Task(task_v(t))),
        Call::TRelease { id, token } => unit(tb.release(id, token)),
        Call::TComplete { id, token } => unit(tb.complete(id, token)),
        Call::TRenew { id, token, ttl } => {
            real(tb.renew(id, token, *ttl), |t| Out::Task(task_v(t)))
        }
        Call::Acquire { action, ttl } => real(se.acquire(action, *ttl), |a| {
            Out::Acq(match a {
                Acquired::Granted(l) => AcqV::Granted(lease_v(l)),
                Acquired::Replayed(r) => AcqV::Replayed(r),
                Acquired::Uncertain(why) => AcqV::Uncertain(why),
                Acquired::InFlight => AcqV::InFlight,
                Acquired::Contended(until) => AcqV::Contended(until),
                other => panic!("an acquire outcome the model does not know: {other:?}"),
            })
        }),
        Call::Complete {
            action,
            lease,
            result,
        } => real(se.complete(action, &lease_in(lease), result), Out::Bytes),
        Call::Release { action, lease } => unit(se.release(action, &lease_in(lease))),
        Call::Abandon { action, lease } => {
            unit(se.abandon(action, &lease_in(lease), "did not apply"))
        }
        Call::Renew { action, lease, ttl } => real(se.renew(action, &lease_in(lease), *ttl), |l| {
            Out::Lease(lease_v(l))
        }),
        Call::Mark {
            action,
            lease,
            reason,
        } => unit(se.mark_uncertain(action, &lease_in(lease), reason)),
        Call::Begin { action, ttl } => real(se.begin_reconcile(action, *ttl), |c| Out::Claim {
            claim: c.claim,
            until: c.until,
        }),
        Call::Resolve { action, resolution } => {
            real(se.resolve_uncertain(action, resolution), Out::Resolved)
        }
        Call::Sink {
            resource,
            presented,
            fail,
            marker,
        } => {
            let key = sink_key(resource);
            // Err(None): the body's deliberate failure, after a write that
            // must roll back; Err(Some(e)): a storage failure.
            let r = se.write_fenced(resource, *presented, |d| {
                if *fail {
                    d.put(&key, "ROLLED BACK").map_err(Some)?;
                    Err(None)
                } else {
                    d.put(&key, marker).map_err(Some)
                }
            });
            match r {
                Ok(()) => Out::Unit,
                Err(gak::SinkError::Body(Some(e))) => real_err(e),
                Err(e) => real_err(e.contract_error()),
            }
        }
        Call::SinkRead {
            resource,
            downstream: false,
        } => real(se.sink_seen(resource), Out::Seen),
        Call::SinkRead {
            resource,
            downstream: true,
        } => {
            let key = sink_key(resource);
            real(k.with_downstream(|d| d.get(&key)), Out::Marker)
        }
        Call::Save(snap) => unit(k.checkpoint().save_if_newer(snap)),
        Call::Load(run) => real(k.checkpoint().load(run), Out::Snap),
        Call::Commit {
            run,
            step,
            fence,
            outcome,
        } => real(
            k.commitgate().commit(run, step.as_deref(), *fence, outcome),
            Out::Outcome,
        ),
        Call::Read { run, step } => real(k.commitgate().read(run, step.as_deref()), Out::Outcome),
        Call::KeyGet(key) => real(se.get(key), Out::Key),
        Call::Invalid(call) => apply_real(k, clock, call),
    }
}

// --------------------------------------------------------- sequential runs

/// Model, token binding and both callers' views, in lock step.
#[derive(Clone, Debug)]
struct Lockstep {
    model: Model,
    binder: Binder,
    refs: Refs<H>,
    real_refs: Refs<String>,
}

impl Lockstep {
    fn new(mutant: Option<Mutant>) -> Self {
        Lockstep {
            model: Model::new(mutant),
            binder: Binder::default(),
            refs: Refs::default(),
            real_refs: Refs::default(),
        }
    }

    /// Apply `op` to both; the kernel's answer when they agree.
    fn step(
        &mut self,
        kernel: &Kernel,
        clock: &ManualClock,
        op: &Op,
    ) -> Result<Out<String>, String> {
        let want = self.model.apply(&instantiate(op, &self.refs, &FORGED_H));
        let got = apply_real(
            kernel,
            clock,
            &instantiate(op, &self.real_refs, &FORGED.into()),
        );
        compare(&want, &got, &mut self.binder)?;
        self.refs.absorb(op, &want);
        self.real_refs.absorb(op, &got);
        Ok(got)
    }
}

/// Reads of everything observable, run after each sequence.
fn observe_all() -> Vec<Op> {
    let mut ops = vec![Op::List];
    for run in 0..RUNS.len() {
        ops.push(Op::Load { run });
        ops.push(Op::Read { run, step: None });
        for step in 0..STEPS.len() {
            ops.push(Op::Read {
                run,
                step: Some(step),
            });
        }
    }
    for res in 0..RESOURCES.len() {
        for downstream in [false, true] {
            ops.push(Op::SinkRead { res, downstream });
        }
    }
    for key in 0..KEYS.len() {
        ops.push(Op::KeyGet { key });
    }
    ops
}

/// Makes a fresh kernel on a binding, with whatever must outlive it.
type Fresh<'a> = dyn Fn(Arc<ManualClock>) -> (Kernel, Box<dyn Any>) + 'a;

fn fresh_memory(clock: Arc<ManualClock>) -> (Kernel, Box<dyn Any>) {
    let backend = gak::blocking::run_future(gak::store::open("memory:")).expect("memory store");
    (
        Kernel::with_backend(backend, clock).expect("kernel"),
        Box::new(()),
    )
}

fn fresh_sqlite(clock: Arc<ManualClock>) -> (Kernel, Box<dyn Any>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("model.db").display());
    let backend = gak::blocking::run_future(gak::store::open(&url)).expect("sqlite store");
    (
        Kernel::with_backend(backend, clock).expect("kernel"),
        Box::new(dir),
    )
}

/// Run `ops` (then [`observe_all`]) on the model and a fresh kernel.
fn run_case(fresh: &Fresh<'_>, ops: &[Op], mutant: Option<Mutant>) -> Result<(), String> {
    let clock = Arc::new(ManualClock::at(START));
    let (kernel, _guard) = fresh(clock.clone());
    let mut st = Lockstep::new(mutant);
    let observe = observe_all();
    let trace = std::env::var_os("GAK_MODEL_TRACE").is_some();
    for (i, op) in ops.iter().chain(&observe).enumerate() {
        let phase = if i < ops.len() { "op" } else { "final read" };
        let now = st.model.now;
        let got = st
            .step(&kernel, &clock, op)
            .map_err(|e| format!("{phase} #{i} {op:?} at now={now} (start {START}): {e}"))?;
        if trace {
            eprintln!("{i:>3} now={now} {op:?}\n      -> {got:?}");
        }
    }
    Ok(())
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn config(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..Config::default()
    }
}

/// 1..40 operations, usually after seeding the board (a board never seeded
/// answers every claim with `not-found`).
fn ops_strategy() -> impl Strategy<Value = Vec<Op>> {
    (
        prop::option::weighted(0.85, seed_op(FULL, true)),
        prop::collection::vec(op(FULL), 1..40),
    )
        .prop_map(|(seed, ops)| seed.into_iter().chain(ops).collect())
}

/// Run the model test on a binding; panics with the shrunk sequence.
fn model_test(binding: &str, cases: u32, fresh: &Fresh<'_>) {
    let started = Instant::now();
    let mut runner = TestRunner::new(config(cases));
    let result = runner.run(&ops_strategy(), |ops| {
        run_case(fresh, &ops, None).map_err(TestCaseError::fail)
    });
    match result {
        Ok(()) => eprintln!(
            "model[{binding}]: {cases} cases agree ({:.1?})",
            started.elapsed()
        ),
        Err(TestError::Fail(why, ops)) => panic!(
            "model[{binding}]: the kernel disagrees with the model\n{why}\nshrunk sequence ({} ops):\n{ops:#?}",
            ops.len()
        ),
        Err(e) => panic!("model[{binding}]: {e}"),
    }
}

fn model_memory() {
    model_test("memory", cases(1000), &fresh_memory);
}

fn model_sqlite() {
    model_test("sqlite", cases(300), &fresh_sqlite);
}

fn model_postgres(dsn: &str) {
    let fresh = move |clock: Arc<ManualClock>| -> (Kernel, Box<dyn Any>) {
        let schema = gak_tests::pg::Schema::new(dsn, "model");
        (schema.kernel_with(clock), Box::new(schema))
    };
    model_test("postgres", pg_cases(60), &fresh);
}

/// PostgreSQL runs a tenth of `PROPTEST_CASES` (a fresh schema per case).
fn pg_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .map_or(default, |n| (n / 10).max(1))
}

// ----------------------------------------------------- linearizability

/// The global real-time order: taken before invoking and after responding.
static SEQ: AtomicU64 = AtomicU64::new(0);

/// One operation of a concurrent history.
#[derive(Clone, Debug)]
struct Event {
    thread: usize,
    op: Op,
    out: Out<String>,
    invoked: u64,
    returned: u64,
}

/// A model state while searching for a serial order.
#[derive(Clone)]
struct LinState {
    model: Model,
    binder: Binder,
    refs: Vec<Refs<H>>,
}

/// Search budget (model steps); histories are at most 12 operations.
const SEARCH_BUDGET: u64 = 2_000_000;

/// What was read back after the threads finished: each read and its
/// answer.
type Finals = [(Op, Out<String>)];

fn dfs(
    st: &LinState,
    events: &[Event],
    finals: &Finals,
    remaining: u32,
    order: &mut Vec<usize>,
    steps: &mut u64,
) -> Result<bool, String> {
    if remaining == 0 {
        // The serial order must also explain the state the threads left:
        // every answer agreeing is not enough (a write lost by a thread's
        // last operation shows only here).
        let mut end = st.clone();
        for (op, out) in finals {
            let want = end.model.apply(&instantiate(op, &end.refs[0], &FORGED_H));
            if compare(&want, out, &mut end.binder).is_err() {
                return Ok(false);
            }
        }
        return Ok(true);
    }
    let pending = || (0..events.len()).filter(|i| remaining & (1 << i) != 0);
    // An operation may go next only if no pending one returned before it was
    // invoked.
    let first_return = pending()
        .map(|i| events[i].returned)
        .min()
        .expect("pending");
    for i in pending() {
        let e = &events[i];
        if e.invoked > first_return {
            continue;
        }
        *steps += 1;
        if *steps > SEARCH_BUDGET {
            return Err("search budget exhausted".into());
        }
        let mut next = st.clone();
        let want = next
            .model
            .apply(&instantiate(&e.op, &next.refs[e.thread], &FORGED_H));
        if compare(&want, &e.out, &mut next.binder).is_err() {
            continue;
        }
        next.refs[e.thread].absorb(&e.op, &want);
        order.push(i);
        if dfs(&next, events, finals, remaining & !(1 << i), order, steps)? {
            return Ok(true);
        }
        order.pop();
    }
    Ok(false)
}

/// Find a serial order of `events`, consistent with real time, that the
/// model (starting from `start`, each thread seeing `start`'s refs) explains,
/// answers and end state (`finals`, read after every thread finished).
fn linearize(
    start: &Lockstep,
    threads: usize,
    events: &[Event],
    finals: &Finals,
) -> Result<Vec<usize>, String> {
    assert!(events.len() <= 20, "history too long to search");
    let st = LinState {
        model: start.model.clone(),
        binder: start.binder.clone(),
        refs: vec![start.refs.clone(); threads],
    };
    let mut order = Vec::new();
    let mut steps = 0;
    let all = (1u32 << events.len()) - 1;
    match dfs(&st, events, finals, all, &mut order, &mut steps) {
        Ok(true) => Ok(order),
        Ok(false) => Err(format!(
            "no serial order explains the history and the state it left ({steps} model steps tried):\n{}\n  read back afterwards:\n{}",
            render(events),
            render_finals(finals)
        )),
        Err(e) => Err(format!("{e}:\n{}", render(events))),
    }
}

fn render_finals(finals: &Finals) -> String {
    finals
        .iter()
        .map(|(op, out)| format!("    {op:?}\n      -> {out:?}\n"))
        .collect()
}

fn render(events: &[Event]) -> String {
    let mut sorted: Vec<&Event> = events.iter().collect();
    sorted.sort_by_key(|e| e.invoked);
    sorted
        .iter()
        .map(|e| {
            format!(
                "  [{:>4}..{:>4}] thread {}: {:?}\n               -> {:?}\n",
                e.invoked, e.returned, e.thread, e.op, e.out
            )
        })
        .collect()
}

/// A concurrent case: sequential prefix, then threads at a fixed time.
#[derive(Clone, Debug)]
struct ConcCase {
    prefix: Vec<Op>,
    threads: Vec<Vec<Op>>,
}

fn conc_strategy() -> impl Strategy<Value = ConcCase> {
    let prefix = prop::collection::vec(op(FULL), 0..6);
    let threads = prop::collection::vec(prop::collection::vec(op(TIGHT), 1..=3), 2..=4);
    (prefix, threads).prop_map(|(mut prefix, threads)| {
        // Two tasks on the board, one depending on the other.
        prefix.insert(
            0,
            Op::Seed {
                tasks: vec![
                    SeedOp {
                        task: 0,
                        title: None,
                        deps: 0,
                        state: None,
                    },
                    SeedOp {
                        task: 1,
                        title: None,
                        deps: 1,
                        state: None,
                    },
                ],
                dup: false,
            },
        );
        ConcCase { prefix, threads }
    })
}

/// How contended the concurrent histories were.
#[derive(Debug, Default)]
struct ConcStats {
    histories: u64,
    /// Histories in which ops of different threads overlapped in time.
    overlapping: u64,
    /// Histories whose serial order differs from invocation order.
    reordered: u64,
    /// Histories in which a clock move overlapped another thread's call.
    clock_raced: u64,
}

/// A recorded concurrent run: the model state after the prefix, the
/// history, and the end state read back after the threads finished.
struct Recorded {
    start: Lockstep,
    events: Vec<Event>,
    finals: Vec<(Op, Out<String>)>,
}

/// Run the prefix in lock step with the model, call `ready`, then run the
/// threads against the one kernel (and its one clock, which threads move),
/// then read everything observable back.
fn record(
    kernel: &Kernel,
    clock: &ManualClock,
    case: &ConcCase,
    ready: impl FnOnce(),
) -> Result<Recorded, String> {
    let mut st = Lockstep::new(None);
    for (i, op) in case.prefix.iter().enumerate() {
        st.step(kernel, clock, op)
            .map_err(|e| format!("prefix op #{i} {op:?}: {e}"))?;
    }
    ready();
    let barrier = Barrier::new(case.threads.len());
    let events: Vec<Event> = std::thread::scope(|s| {
        let handles: Vec<_> = case
            .threads
            .iter()
            .enumerate()
            .map(|(thread, ops)| {
                let barrier = &barrier;
                let mut refs = st.real_refs.clone();
                s.spawn(move || {
                    barrier.wait();
                    let mut events = Vec::new();
                    for op in ops {
                        let call = instantiate(op, &refs, &FORGED.to_owned());
                        let invoked = SEQ.fetch_add(1, Ordering::SeqCst);
                        let out = apply_real(kernel, clock, &call);
                        let returned = SEQ.fetch_add(1, Ordering::SeqCst);
                        refs.absorb(op, &out);
                        events.push(Event {
                            thread,
                            op: op.clone(),
                            out,
                            invoked,
                            returned,
                        });
                    }
                    events
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("thread"))
            .collect()
    });
    let finals = observe_all()
        .into_iter()
        .map(|op| {
            let out = apply_real(
                kernel,
                clock,
                &instantiate(&op, &st.real_refs, &FORGED.into()),
            );
            (op, out)
        })
        .collect();
    Ok(Recorded {
        start: st,
        events,
        finals,
    })
}

fn run_concurrent(
    fresh: &Fresh<'_>,
    case: &ConcCase,
    stats: &std::sync::Mutex<ConcStats>,
) -> Result<(), String> {
    let clock = Arc::new(ManualClock::at(START));
    let (kernel, _guard) = fresh(clock.clone());
    let Recorded {
        start: st,
        events,
        finals,
    } = record(&kernel, &clock, case, || {})?;
    for e in events
        .iter()
        .map(|e| &e.out)
        .chain(finals.iter().map(|(_, out)| out))
    {
        if let Out::Err(name) = e
            && name.starts_with("storage")
        {
            return Err(format!(
                "a storage failure under concurrency:\n{}",
                render(&events)
            ));
        }
    }
    let order = linearize(&st, case.threads.len(), &events, &finals)?;
    let overlaps = |a: &Event, b: &Event| {
        a.thread != b.thread && a.invoked < b.returned && b.invoked < a.returned
    };
    let overlap = events.iter().any(|a| events.iter().any(|b| overlaps(a, b)));
    let clock_raced = events.iter().any(|a| {
        matches!(a.op, Op::Advance(ms) if ms > 0) && events.iter().any(|b| overlaps(a, b))
    });
    let mut by_invocation: Vec<usize> = (0..events.len()).collect();
    by_invocation.sort_by_key(|&i| events[i].invoked);
    let mut stats = stats.lock().expect("stats");
    stats.histories += 1;
    stats.overlapping += u64::from(overlap);
    stats.clock_raced += u64::from(clock_raced);
    stats.reordered += u64::from(order != by_invocation);
    Ok(())
}

fn linearizability_test(binding: &str, cases: u32, fresh: &Fresh<'_>) {
    let started = Instant::now();
    let mut runner = TestRunner::new(config(cases));
    let stats = std::sync::Mutex::new(ConcStats::default());
    let result = runner.run(&conc_strategy(), |case| {
        run_concurrent(fresh, &case, &stats).map_err(TestCaseError::fail)
    });
    let stats = stats.into_inner().expect("stats");
    match result {
        Ok(()) => {
            eprintln!(
                "linearizability[{binding}]: {cases} histories explained ({:.1?}): {stats:?}",
                started.elapsed()
            );
            // Without overlap the check would prove nothing. (How much
            // overlaps depends on the machine's load: typically a half on
            // memory, four fifths on SQLite and PostgreSQL; a tenth is the
            // floor.) Clock moves racing other calls: 1 in 15 histories on
            // memory, 1 in 3 on SQLite and PostgreSQL; 1 in 40 is the floor.
            assert!(
                stats.histories < 20 || stats.overlapping * 10 >= stats.histories,
                "too few histories overlapped: {stats:?}"
            );
            assert!(
                stats.histories < 20 || stats.clock_raced * 40 >= stats.histories,
                "too few clock moves raced other calls: {stats:?}"
            );
        }
        Err(TestError::Fail(why, case)) => {
            panic!("linearizability[{binding}]: {why}\nshrunk case:\n{case:#?}")
        }
        Err(e) => panic!("linearizability[{binding}]: {e}"),
    }
}

fn linearizable_memory() {
    linearizability_test("memory", cases(400), &fresh_memory);
}

fn linearizable_sqlite() {
    linearizability_test("sqlite", cases(100), &fresh_sqlite);
}

fn linearizable_postgres(dsn: &str) {
    let fresh = move |clock: Arc<ManualClock>| -> (Kernel, Box<dyn Any>) {
        let schema = gak_tests::pg::Schema::new(dsn, "model_lin");
        (schema.kernel_with(clock), Box::new(schema))
    };
    linearizability_test("postgres", pg_cases(60), &fresh);
}

// ------------------------------------------------------------ self-checks

/// Each wrong model is caught by a hand-made sequence, while the right
/// model passes the same sequence.
fn wrong_models_are_detected() {
    let seed_t0 = Op::Seed {
        tasks: vec![SeedOp {
            task: 0,
            title: None,
            deps: 0,
            state: None,
        }],
        dup: false,
    };
    let claim = |agent| Op::Claim {
        task: 0,
        agent,
        ttl: 50,
    };
    let acquire = Op::Acquire {
        key: 0,
        res: 0,
        unsafe_: false,
        fp: None,
        ttl: 50,
    };
    let sink = |presented| Op::Sink {
        res: 0,
        presented,
        fail: false,
        tag: 1,
    };
    let cases = [
        (
            Mutant::TaskLiveAtUntil,
            vec![seed_t0.clone(), claim(0), Op::Advance(50), claim(1)],
        ),
        (
            Mutant::IntentNeverExpires,
            vec![acquire.clone(), Op::Advance(50), acquire],
        ),
        (
            Mutant::RenewMintsToken,
            vec![
                seed_t0,
                claim(0),
                Op::TRenew {
                    task: 0,
                    tok: TokRef::Own(0),
                    ttl: 50,
                },
            ],
        ),
        (Mutant::SinkAcceptsStale, vec![sink(2), sink(1)]),
    ];
    for (mutant, ops) in cases {
        run_case(&fresh_memory, &ops, None)
            .unwrap_or_else(|e| panic!("the right model fails {ops:?}: {e}"));
        let caught = run_case(&fresh_memory, &ops, Some(mutant));
        let why = caught.expect_err(&format!("{mutant:?} went unnoticed on {ops:?}"));
        eprintln!("{mutant:?} caught: {why}");
    }
}

/// The random search itself finds the boundary mutants (deterministic RNG).
fn random_search_finds_wrong_models() {
    for mutant in [Mutant::TaskLiveAtUntil, Mutant::IntentNeverExpires] {
        let mut runner = TestRunner::new_with_rng(
            config(500),
            TestRng::deterministic_rng(RngAlgorithm::ChaCha),
        );
        let result = runner.run(&ops_strategy(), |ops| {
            run_case(&fresh_memory, &ops, Some(mutant)).map_err(TestCaseError::fail)
        });
        match result {
            Err(TestError::Fail(why, ops)) => {
                eprintln!("{mutant:?} found and shrunk to {} ops: {why}", ops.len());
                assert!(ops.len() <= 8, "shrinking left {ops:#?}");
                // The failure is the mutant's, not a kernel/model disagreement.
                run_case(&fresh_memory, &ops, None)
                    .unwrap_or_else(|e| panic!("the right model fails {ops:?}: {e}"));
            }
            other => panic!("{mutant:?} survived 500 random cases: {other:?}"),
        }
    }
}

fn claim_answer(agent: &str, token: &str, fence: u64) -> Out<String> {
    Out::Task(TaskV {
        id: "t0".into(),
        title: String::new(),
        deps: vec![],
        state: TaskState::Claimed,
        owner: Some(agent.into()),
        token: Some(token.into()),
        until: Some(START + 100),
        fence,
    })
}

fn event(thread: usize, op: Op, out: Out<String>, invoked: u64, returned: u64) -> Event {
    Event {
        thread,
        op,
        out,
        invoked,
        returned,
    }
}

/// The checker rejects impossible histories and accepts possible ones.
fn checker_rejects_impossible_histories() {
    let mut start = Lockstep::new(None);
    start.model.apply(&Call::Seed(vec![TaskSeed::new("t0")]));
    let claim = |agent| Op::Claim {
        task: 0,
        agent,
        ttl: 100,
    };
    let (tok_a, tok_b) = ("a".repeat(32), "b".repeat(32));
    let taken = || Out::Err("taken".to_owned());

    // Two winners of the same claim (same epoch, overlapping in time).
    let two_winners = [
        event(0, claim(0), claim_answer("a0", &tok_a, 1), 0, 3),
        event(1, claim(1), claim_answer("a1", &tok_b, 1), 1, 2),
    ];
    assert!(linearize(&start, 2, &two_winners, &[]).is_err());
    // Two winners one after the other (the first is still live).
    let takeover = [
        event(0, claim(0), claim_answer("a0", &tok_a, 1), 0, 1),
        event(1, claim(1), claim_answer("a1", &tok_b, 2), 2, 3),
    ];
    assert!(linearize(&start, 2, &takeover, &[]).is_err());
    // Two winners sharing one token.
    let shared = [
        event(0, claim(0), claim_answer("a0", &tok_a, 1), 0, 1),
        event(1, Op::Advance(100), Out::Unit, 2, 3),
        event(1, claim(1), claim_answer("a1", &tok_a, 2), 4, 5),
    ];
    assert!(linearize(&start, 2, &shared, &[]).is_err());
    // Refused as taken although nobody had claimed yet (real time!).
    let early_loser = [
        event(1, claim(1), taken(), 0, 1),
        event(0, claim(0), claim_answer("a0", &tok_a, 1), 2, 3),
    ];
    assert!(linearize(&start, 2, &early_loser, &[]).is_err());
    // ... but possible when the two overlap.
    let overlapping = [
        event(1, claim(1), taken(), 0, 3),
        event(0, claim(0), claim_answer("a0", &tok_a, 1), 1, 2),
    ];
    assert_eq!(linearize(&start, 2, &overlapping, &[]), Ok(vec![1, 0]));
    // One winner, one loser, the winner completes with its own token.
    let fine = [
        event(0, claim(0), claim_answer("a0", &tok_a, 1), 0, 3),
        event(1, claim(1), taken(), 1, 2),
        event(
            0,
            Op::TComplete {
                task: 0,
                tok: TokRef::Own(0),
            },
            Out::Unit,
            4,
            5,
        ),
    ];
    assert!(linearize(&start, 2, &fine, &[]).is_ok());

    // Two grants of one key, each with the same fence.
    let acquire = Op::Acquire {
        key: 0,
        res: 0,
        unsafe_: false,
        fp: None,
        ttl: 100,
    };
    let granted = |holder: &str| {
        Out::Acq(AcqV::Granted(LeaseV {
            key: "k0".into(),
            resource: "r0".into(),
            fence: 1,
            holder: holder.into(),
            until: START + 100,
        }))
    };
    let double_grant = [
        event(0, acquire.clone(), granted(&tok_a), 0, 3),
        event(1, acquire.clone(), granted(&tok_b), 1, 2),
    ];
    assert!(linearize(&start, 2, &double_grant, &[]).is_err());
    let in_flight = [
        event(0, acquire.clone(), granted(&tok_a), 0, 3),
        event(1, acquire, Out::Acq(AcqV::InFlight), 1, 2),
    ];
    assert!(linearize(&start, 2, &in_flight, &[]).is_ok());

    // A lost write in a thread's last operation: two overlapping saves both
    // answer ok (a serial order explains the answers: seq 3, then seq 5),
    // but seq 3 is what was stored. Only the end state shows it.
    let save = |seq| Op::Save {
        run: 0,
        seq,
        fence: None,
        done: 0,
        fields: 0,
    };
    let saves = [
        event(0, save(3), Out::Unit, 0, 3),
        event(1, save(5), Out::Unit, 1, 2),
    ];
    let stored = |seq| {
        let Call::Save(snap) = instantiate(&save(seq), &Refs::<String>::default(), &FORGED.into())
        else {
            unreachable!("a save")
        };
        vec![(Op::Load { run: 0 }, Out::Snap(snap))]
    };
    assert!(linearize(&start, 2, &saves, &[]).is_ok());
    assert!(linearize(&start, 2, &saves, &stored(5)).is_ok());
    let lost = linearize(&start, 2, &saves, &stored(3));
    assert!(lost.is_err(), "a lost write was accepted: {lost:?}");
}

/// The comparison rejects a wrong field and an inconsistent token.
fn comparison_is_strict() {
    let mut b = Binder::default();
    let model = |fence, token| {
        Out::Task(TaskV {
            id: "t0".into(),
            title: String::new(),
            deps: vec![],
            state: TaskState::Claimed,
            owner: Some("a0".into()),
            token: Some(token),
            until: Some(START + 100),
            fence,
        })
    };
    let tok = "c".repeat(32);
    assert!(compare(&model(2, 0), &claim_answer("a0", &tok, 1), &mut b).is_err());
    assert!(b.real.is_empty(), "a failed comparison binds nothing");
    assert!(compare(&model(1, 0), &claim_answer("a0", &tok, 1), &mut b).is_ok());
    // The same handle must keep its token, a new handle needs a new token.
    assert!(
        compare(
            &model(1, 0),
            &claim_answer("a0", &"d".repeat(32), 1),
            &mut b
        )
        .is_err()
    );
    assert!(compare(&model(1, 1), &claim_answer("a0", &tok, 1), &mut b).is_err());
    assert!(compare(&model(1, 1), &claim_answer("a0", "not-hex", 1), &mut b).is_err());
    assert!(compare(&err("taken"), &Out::Err("lease-lost".into()), &mut b).is_err());
    assert!(compare(&err("taken"), &Out::Err("storage: x".into()), &mut b).is_err());
}

// ------------------------------------------------------------- build-plan

#[derive(Clone, Debug)]
struct PlanCase {
    steps: Vec<StepDef>,
    done: Option<Vec<String>>,
}

#[derive(Clone, Copy, Debug)]
enum Corrupt {
    None,
    Cycle,
    SelfLoop,
    UnknownDep,
    DuplicateId,
    EmptyId,
}

fn plan_strategy() -> impl Strategy<Value = PlanCase> {
    (0usize..=6)
        .prop_flat_map(|n| {
            let deps =
                prop::collection::vec(prop::collection::vec(prop::bool::weighted(0.35), n), n);
            let order = Just((0..n).collect::<Vec<_>>()).prop_shuffle();
            let corrupt = prop_oneof![
                12 => Just(Corrupt::None),
                1 => Just(Corrupt::Cycle),
                1 => Just(Corrupt::SelfLoop),
                1 => Just(Corrupt::UnknownDep),
                1 => Just(Corrupt::DuplicateId),
                1 => Just(Corrupt::EmptyId),
            ];
            let done = prop::option::of(prop::collection::vec(0..n + 2, 0..=8));
            (Just(n), deps, order, corrupt, done)
        })
        .prop_map(|(n, deps, order, corrupt, done)| {
            let name = |i: usize| format!("s{i}");
            let mut steps: Vec<StepDef> = order
                .iter()
                .map(|&i| StepDef {
                    id: name(i),
                    // Edges only to lower numbers: acyclic by construction.
                    depends_on: (0..i).filter(|&j| deps[i][j]).map(name).collect(),
                })
                .collect();
            if n > 0 {
                match corrupt {
                    Corrupt::None => {}
                    Corrupt::Cycle if n >= 2 => {
                        let (a, b) = (name(0), name(n - 1));
                        for s in &mut steps {
                            if s.id == a && !s.depends_on.contains(&b) {
                                s.depends_on.push(b.clone());
                            }
                            if s.id == b && !s.depends_on.contains(&a) {
                                s.depends_on.push(a.clone());
                            }
                        }
                    }
                    Corrupt::Cycle | Corrupt::SelfLoop => {
                        let id = steps[0].id.clone();
                        steps[0].depends_on.push(id);
                    }
                    Corrupt::UnknownDep => steps[n / 2].depends_on.push("zz".into()),
                    Corrupt::DuplicateId => {
                        let dup = StepDef::new(&steps[n - 1].id, &[]);
                        steps.insert(0, dup);
                    }
                    Corrupt::EmptyId => steps[n / 2].id = String::new(),
                }
            }
            let done = done.map(|d| {
                d.into_iter()
                    .map(|i| if i < n { name(i) } else { format!("x{i}") })
                    .collect()
            });
            PlanCase { steps, done }
        })
}

/// Kahn's algorithm from `finished`, always taking the earliest-declared
/// ready step.
fn kahn(steps: &[StepDef], finished: &HashSet<String>) -> Vec<String> {
    let mut fin = finished.clone();
    let mut order = Vec::new();
    while let Some(s) = steps
        .iter()
        .find(|s| !fin.contains(&s.id) && s.depends_on.iter().all(|d| fin.contains(d)))
    {
        fin.insert(s.id.clone());
        order.push(s.id.clone());
    }
    order
}

/// The plan SPEC 3 and 8 describe, or `Err` for an invalid plan.
fn model_plan(steps: &[StepDef], done: Option<&[String]>) -> Result<Plan, ()> {
    let mut known = HashSet::new();
    for s in steps {
        if s.id.is_empty() || !known.insert(s.id.clone()) {
            return Err(());
        }
    }
    if steps
        .iter()
        .any(|s| s.depends_on.iter().any(|d| !known.contains(d)))
    {
        return Err(());
    }
    if kahn(steps, &HashSet::new()).len() != steps.len() {
        return Err(());
    }
    let done = done.unwrap_or(&[]);
    let deps: HashMap<&str, &[String]> = steps
        .iter()
        .map(|s| (s.id.as_str(), s.depends_on.as_slice()))
        .collect();
    // The largest subset of done whose dependencies are all inside it.
    let mut trusted: HashSet<String> = done
        .iter()
        .filter(|d| known.contains(*d))
        .cloned()
        .collect();
    loop {
        let out: Vec<String> = trusted
            .iter()
            .filter(|t| deps[t.as_str()].iter().any(|d| !trusted.contains(d)))
            .cloned()
            .collect();
        if out.is_empty() {
            break;
        }
        for t in out {
            trusted.remove(&t);
        }
    }
    let skip = steps
        .iter()
        .filter(|s| trusted.contains(&s.id))
        .map(|s| s.id.clone())
        .collect();
    let run = kahn(steps, &trusted);
    let mut untrusted: Vec<String> = steps
        .iter()
        .filter(|s| done.contains(&s.id) && !trusted.contains(&s.id))
        .map(|s| s.id.clone())
        .collect();
    for d in done {
        if !known.contains(d) && !untrusted.contains(d) {
            untrusted.push(d.clone());
        }
    }
    Ok(Plan {
        skip,
        run,
        untrusted,
    })
}

fn build_plan_matches_model() {
    let clock = Arc::new(ManualClock::at(START));
    let (kernel, _guard) = fresh_memory(clock);
    let mut runner = TestRunner::new(config(cases(300)));
    let result = runner.run(&plan_strategy(), |case| {
        let snap = case.done.as_ref().map(|done| Snapshot {
            run_id: "run0".into(),
            seq: 1,
            fence: None,
            status: "running".into(),
            done: done.clone(),
            fields: vec![],
        });
        let got = kernel.checkpoint().build_plan(&case.steps, snap.as_ref());
        let want = model_plan(&case.steps, case.done.as_deref());
        match (&want, &got) {
            (Ok(w), Ok(g)) if w == g => Ok(()),
            (Err(()), Err(Error::InvalidPlan(_))) => Ok(()),
            _ => Err(TestCaseError::fail(format!(
                "model {want:?}\n kernel {got:?}"
            ))),
        }
    });
    if let Err(e) = result {
        panic!("build-plan disagrees with the model: {e}");
    }
}

// ------------------------------------------------------------- coverage

/// Labels of what an operation exercised: its answer, and any expiry
/// boundary (`now == until`) it was judged on.
fn labels(model: &Model, call: &Call<H>, out: &Out<H>) -> Vec<String> {
    let kind = format!("{call:?}");
    let kind = kind
        .split([' ', '(', '{'])
        .next()
        .unwrap_or_default()
        .to_owned();
    let answer = match out {
        Out::Err(e) => e.clone(),
        Out::ErrOneOf(_) => "unknown-task".into(),
        Out::Acq(AcqV::Granted(_)) => "granted".into(),
        Out::Acq(AcqV::Replayed(_)) => "replayed".into(),
        Out::Acq(AcqV::Uncertain(why)) => format!("uncertain/{why}"),
        Out::Acq(AcqV::InFlight) => "in-flight".into(),
        Out::Acq(AcqV::Contended(_)) => "contended".into(),
        Out::Resolved(Resolved::Cleared) => "cleared".into(),
        Out::Resolved(Resolved::Replayed(_)) => "replayed".into(),
        _ => "ok".into(),
    };
    let mut labels = vec![format!("{kind}:{answer}")];
    let now = model.now;
    let at = |until: Option<u64>| until == Some(now);
    let boundary = match call {
        Call::Claim { id, .. } | Call::TRenew { id, .. } => model
            .tasks
            .get(id)
            .is_some_and(|t| t.state == TaskState::Claimed && at(t.until)),
        Call::Acquire { action, .. } => {
            model
                .keys
                .get(&action.key)
                .and_then(|k| k.intent.as_ref())
                .is_some_and(|i| at(Some(i.until)))
                || model
                    .resources
                    .get(&action.resource)
                    .and_then(|r| r.hold.as_ref())
                    .is_some_and(|h| h.key != action.key && at(Some(h.until)))
        }
        Call::Renew { lease, .. } => model
            .resources
            .get(&lease.resource)
            .and_then(|r| r.hold.as_ref())
            .is_some_and(|h| at(Some(h.until))),
        Call::Begin { action, .. } => model
            .keys
            .get(&action.key)
            .is_some_and(|k| at(k.claim) || k.intent.as_ref().is_some_and(|i| at(Some(i.until)))),
        _ => false,
    };
    if boundary {
        labels.push(format!("{kind}:{answer}@until"));
    }
    // Paths through the rules that the answer alone does not show.
    let key = |k: &str| model.keys.get(k);
    let expired = |k: &MKey| k.intent.as_ref().is_some_and(|i| now >= i.until);
    let path = match call {
        Call::TComplete { id, .. } => model
            .tasks
            .get(id)
            .is_some_and(|t| t.state == TaskState::Done)
            .then_some("done-task"),
        Call::Complete { lease, .. } => key(&lease.key)
            .is_some_and(|k| k.completed.is_some())
            .then_some("completed-key"),
        Call::Release { lease, .. } => model
            .resources
            .get(&lease.resource)
            .is_some_and(|r| r.hold.is_none())
            .then_some("no-hold"),
        Call::Abandon { lease, .. } | Call::Mark { lease, .. } => key(&lease.key)
            .is_some_and(expired)
            .then_some("expired-intent"),
        Call::Begin { action, .. } | Call::Resolve { action, .. } => key(&action.key)
            .is_some_and(expired)
            .then_some("expired-intent"),
        Call::Acquire { action, .. } => model
            .resources
            .get(&action.resource)
            .and_then(|r| r.hold.as_ref())
            .is_some_and(|h| h.key == action.key && now < h.until)
            .then_some("own-hold"),
        Call::Commit {
            run, step, outcome, ..
        } => model
            .outcomes
            .get(&(run.clone(), step.clone()))
            .is_some_and(|o| o == outcome)
            .then_some("again"),
        _ => None,
    };
    if let Some(path) = path {
        labels.push(format!("{kind}:{answer}/{path}"));
    }
    labels
}

/// The generator reaches every answer of every operation, and expiry
/// boundaries, often enough (model only: fast).
fn generator_covers_the_contract() {
    let mut runner = TestRunner::new_with_rng(
        config(2000),
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let seen = std::sync::Mutex::new(BTreeMap::<String, u32>::new());
    runner
        .run(&ops_strategy(), |ops| {
            let mut model = Model::new(None);
            let mut refs = Refs::<H>::default();
            let mut seen = seen.lock().expect("stats");
            for op in &ops {
                let call = instantiate(op, &refs, &FORGED_H);
                let before = model.clone();
                let out = model.apply(&call);
                for l in labels(&before, &call, &out) {
                    *seen.entry(l).or_default() += 1;
                }
                refs.absorb(op, &out);
            }
            Ok(())
        })
        .expect("model only");
    let seen = seen.into_inner().expect("stats");
    let table: String = seen
        .iter()
        .map(|(l, n)| format!("  {n:>6}  {l}\n"))
        .collect();
    eprintln!("coverage over 2000 sequences:\n{table}");
    let required = [
        "Claim:ok",
        "Claim:taken",
        "Claim:terminal",
        "Claim:deps-pending",
        "Claim:not-found",
        "Claim:invalid-input",
        "Claim:ok@until",
        "TRelease:ok",
        "TRelease:lease-lost",
        "TComplete:ok",
        "TComplete:lease-lost",
        "TRenew:ok",
        "TRenew:lease-lost",
        "TRenew:lease-lost@until",
        "Seed:ok",
        "Seed:invalid-input",
        "Acquire:granted",
        "Acquire:replayed",
        "Acquire:uncertain/intent-expired",
        "Acquire:uncertain/reason 0",
        "Acquire:in-flight",
        "Acquire:contended",
        "Acquire:key-reused",
        "Acquire:uncertain/intent-expired@until",
        "Acquire:granted@until",
        "Complete:ok",
        "Complete:not-holder",
        "Complete:fence-stale",
        "Complete:resource-mismatch",
        "Release:ok",
        "Release:fence-stale",
        "Release:not-holder",
        "Abandon:ok",
        "Abandon:not-holder",
        "Renew:ok",
        "Renew:lease-expired",
        "Renew:lease-expired@until",
        "Renew:not-holder",
        "Renew:fence-stale",
        "Mark:ok",
        "Mark:not-holder",
        "Begin:ok",
        "Begin:reconcile-taken",
        "Begin:not-uncertain",
        "Begin:ok@until",
        "Resolve:cleared",
        "Resolve:replayed",
        "Resolve:not-uncertain",
        "Resolve:unsafe-not-retryable",
        "Sink:ok",
        "Sink:fence-stale",
        "Sink:write-failed",
        "Save:ok",
        "Save:stale-seq",
        "Save:fence-stale",
        "Save:terminal",
        "Load:ok",
        "Load:not-found",
        "Commit:ok",
        "Commit:fence-stale",
        "Commit:terminal",
        "Commit:already-committed",
        "Read:ok",
        "Read:not-found",
        "TComplete:ok/done-task",
        "TComplete:lease-lost/done-task",
        "Complete:ok/completed-key",
        "Release:ok/no-hold",
        "Abandon:ok/expired-intent",
        "Mark:ok/expired-intent",
        "Begin:ok/expired-intent",
        "Resolve:cleared/expired-intent",
        "Resolve:replayed/expired-intent",
        "Commit:ok/again",
        "Invalid:invalid-input",
    ];
    let missing: Vec<_> = required
        .iter()
        .filter(|l| seen.get(**l).copied().unwrap_or(0) < 3)
        .collect();
    assert!(missing.is_empty(), "rarely or never generated: {missing:?}");
}

/// Rare paths the random search seldom reaches, as fixed sequences checked
/// against the model on memory and SQLite.
fn rare_paths_match_the_model() {
    let acquire = |key, unsafe_, ttl| Op::Acquire {
        key,
        res: 0,
        unsafe_,
        fp: None,
        ttl,
    };
    let latest = LeaseRef {
        back: 0,
        tamper: Tamper::None,
    };
    let resolve = |key, applied, force| Op::Resolve {
        key,
        res: 0,
        applied,
        result: None,
        force,
    };
    let begin = |key, ttl| Op::Begin { key, res: 0, ttl };
    let scenarios: Vec<(&str, Vec<Op>)> = vec![
        (
            // mark-uncertain keeps the hold; a "not applied" verdict clears
            // the key; the same key may be granted while its own hold lives.
            "own hold after a verdict",
            vec![
                acquire(0, false, 100),
                Op::Mark {
                    lease: latest,
                    reason: 0,
                },
                resolve(0, false, false),
                acquire(1, false, 100),
                acquire(0, false, 100),
                Op::Release {
                    lease: LeaseRef {
                        back: 1,
                        tamper: Tamper::None,
                    },
                },
                Op::Renew {
                    lease: latest,
                    ttl: 50,
                },
            ],
        ),
        (
            // A completed key: the holder's late `complete` gets the first
            // result and leaves the hold; `release` frees it.
            "complete after an applied verdict",
            vec![
                acquire(0, false, 100),
                Op::Mark {
                    lease: latest,
                    reason: 0,
                },
                Op::Resolve {
                    key: 0,
                    res: 0,
                    applied: true,
                    result: Some(2),
                    force: false,
                },
                acquire(1, false, 100),
                Op::Complete {
                    lease: latest,
                    result: 1,
                },
                acquire(1, false, 100),
                Op::Release { lease: latest },
                acquire(1, false, 100),
            ],
        ),
        (
            // A late mark-uncertain of an expired intent under reconciliation
            // keeps the reconciler's claim.
            "late mark under reconciliation",
            vec![
                acquire(0, false, 50),
                Op::Advance(50),
                begin(0, 100),
                Op::Mark {
                    lease: latest,
                    reason: 1,
                },
                begin(0, 100),
                acquire(0, false, 50),
            ],
        ),
        (
            // A late abandon clears the key and its reconcile claim.
            "late abandon under reconciliation",
            vec![
                acquire(0, false, 50),
                Op::Advance(50),
                begin(0, 100),
                Op::Abandon { lease: latest },
                begin(0, 100),
                acquire(0, false, 50),
                Op::Advance(50),
                begin(0, 100),
            ],
        ),
        (
            // A verdict clears any reconcile claim, also a live one.
            "verdict clears the claim",
            vec![
                acquire(0, false, 50),
                Op::Advance(50),
                begin(0, 200),
                resolve(0, false, false),
                acquire(0, false, 50),
                Op::Advance(50),
                begin(0, 100),
            ],
        ),
        (
            // Re-seeding forgets the token that completed the task.
            "re-seeded done task",
            vec![
                Op::Seed {
                    tasks: vec![SeedOp {
                        task: 0,
                        title: None,
                        deps: 0,
                        state: None,
                    }],
                    dup: false,
                },
                Op::Claim {
                    task: 0,
                    agent: 0,
                    ttl: 50,
                },
                Op::TComplete {
                    task: 0,
                    tok: TokRef::Own(0),
                },
                Op::TComplete {
                    task: 0,
                    tok: TokRef::Own(0),
                },
                Op::Seed {
                    tasks: vec![SeedOp {
                        task: 0,
                        title: Some(1),
                        deps: 0,
                        state: Some(TaskState::Done),
                    }],
                    dup: false,
                },
                Op::TComplete {
                    task: 0,
                    tok: TokRef::Own(0),
                },
            ],
        ),
        (
            // After the verdict, release still frees the hold it holds.
            "release after mark-uncertain",
            vec![
                acquire(0, false, 100),
                Op::Mark {
                    lease: latest,
                    reason: 0,
                },
                acquire(1, false, 100),
                Op::Release { lease: latest },
                Op::Renew {
                    lease: latest,
                    ttl: 50,
                },
                acquire(1, false, 100),
                Op::Release {
                    lease: LeaseRef {
                        back: 1,
                        tamper: Tamper::None,
                    },
                },
            ],
        ),
        (
            // One reconciler at a time; an expired claim can be taken over;
            // a late verdict from the holder still lands.
            "reconcile takeover and a late verdict",
            vec![
                acquire(0, true, 50),
                Op::Advance(50),
                begin(0, 20),
                begin(0, 20),
                Op::Advance(20),
                begin(0, 20),
                Op::Complete {
                    lease: latest,
                    result: 1,
                },
                begin(0, 20),
                resolve(0, false, false),
                acquire(0, true, 50),
            ],
        ),
        (
            // An unsafe key stays blocked until forced.
            "unsafe not retryable",
            vec![
                acquire(0, true, 50),
                Op::Mark {
                    lease: latest,
                    reason: 1,
                },
                resolve(0, false, false),
                acquire(0, true, 50),
                resolve(0, false, true),
                acquire(0, true, 50),
            ],
        ),
        (
            // Renew exactly at the deadline is too late; release keeps the intent.
            "renew at the deadline",
            vec![
                acquire(0, false, 50),
                Op::Release { lease: latest },
                Op::Renew {
                    lease: latest,
                    ttl: 50,
                },
                acquire(0, false, 50),
                acquire(1, false, 50),
                Op::Advance(50),
                acquire(0, false, 50),
            ],
        ),
    ];
    for fresh in [&fresh_memory as &Fresh<'_>, &fresh_sqlite] {
        for (name, ops) in &scenarios {
            run_case(fresh, ops, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}

// ------------------------------------------------- negative controls

/// Bindings that break the store contract (from `gak_tests::broken`) are
/// caught by the sequential model test.
fn defective_bindings_disagree_with_the_model() {
    use gak_tests::broken::{Defect, Defective};
    for defect in [
        Defect::DropLastWrite,
        Defect::SplitSink,
        Defect::ZeroDigests,
    ] {
        let fresh = move |clock: Arc<ManualClock>| -> (Kernel, Box<dyn Any>) {
            let kernel = Kernel::with_backend(Defective::backend(defect), clock).expect("kernel");
            (kernel, Box::new(()))
        };
        let mut runner = TestRunner::new_with_rng(
            config(500),
            TestRng::deterministic_rng(RngAlgorithm::ChaCha),
        );
        let result = runner.run(&ops_strategy(), |ops| {
            run_case(&fresh, &ops, None).map_err(TestCaseError::fail)
        });
        match result {
            Err(TestError::Fail(why, ops)) => {
                eprintln!("{defect:?} caught, shrunk to {} ops: {why}", ops.len());
                run_case(&fresh_memory, &ops, None)
                    .unwrap_or_else(|e| panic!("a sound binding fails {ops:?} too: {e}"));
            }
            other => panic!("{defect:?} passed 500 model cases: {other:?}"),
        }
    }
}

/// A binding without isolation ("read, decide, write" as separate steps),
/// driven into the worst interleaving, produces a history of real threads
/// that the linearizability checker rejects; the same case on a sound
/// binding is accepted.
fn non_atomic_binding_is_not_linearizable() {
    use gak_tests::broken::NoIsolation;
    let seed = Op::Seed {
        tasks: vec![SeedOp {
            task: 0,
            title: None,
            deps: 0,
            state: None,
        }],
        dup: false,
    };
    let threads = 3;
    let case = ConcCase {
        prefix: vec![seed],
        threads: (0..threads)
            .map(|i| {
                vec![Op::Claim {
                    task: 0,
                    agent: i % AGENTS.len(),
                    ttl: 100,
                }]
            })
            .collect(),
    };
    let clock = Arc::new(ManualClock::at(START));
    let (backend, rendezvous) = NoIsolation::backend();
    let kernel = Kernel::with_backend(backend, clock.clone()).expect("kernel");
    let Recorded {
        start: st,
        events,
        finals,
    } = record(&kernel, &clock, &case, || rendezvous.arm(threads)).expect("prefix");
    let winners = events
        .iter()
        .filter(|e| matches!(e.out, Out::Task(_)))
        .count();
    assert!(
        winners > 1,
        "the rendezvous should let every claimer win: {events:?}"
    );
    let verdict = linearize(&st, threads, &events, &finals);
    assert!(
        verdict.is_err(),
        "a history with {winners} winners was accepted"
    );
    eprintln!("non-atomic binding rejected: {}", verdict.unwrap_err());

    let (kernel, _guard) = fresh_memory(clock.clone());
    let run = record(&kernel, &clock, &case, || {}).expect("prefix");
    linearize(&run.start, threads, &run.events, &run.finals)
        .expect("a sound binding is linearizable");
}

fn main() {
    let mut suite = Suite::new();
    suite.test("model_memory", model_memory);
    suite.test("model_sqlite", model_sqlite);
    suite.needs(&POSTGRES, "model_postgres", model_postgres);
    suite.test("linearizable_memory", linearizable_memory);
    suite.test("linearizable_sqlite", linearizable_sqlite);
    suite.needs(&POSTGRES, "linearizable_postgres", linearizable_postgres);
    suite.test("wrong_models_are_detected", wrong_models_are_detected);
    suite.test(
        "random_search_finds_wrong_models",
        random_search_finds_wrong_models,
    );
    suite.test(
        "checker_rejects_impossible_histories",
        checker_rejects_impossible_histories,
    );
    suite.test("comparison_is_strict", comparison_is_strict);
    suite.test("build_plan_matches_model", build_plan_matches_model);
    suite.test(
        "generator_covers_the_contract",
        generator_covers_the_contract,
    );
    suite.test("rare_paths_match_the_model", rare_paths_match_the_model);
    suite.test(
        "defective_bindings_disagree_with_the_model",
        defective_bindings_disagree_with_the_model,
    );
    suite.test(
        "non_atomic_binding_is_not_linearizable",
        non_atomic_binding_is_not_linearizable,
    );
    suite.run();
}
