//! Generated operations: what a random test does, and the proptest
//! strategies that draw it.
//!
//! An operation refers to tokens and leases by their position among those
//! handed out earlier ([`TokRef`], [`LeaseRef`]), never by value, so that
//! shrinking keeps a sequence meaningful; [`instantiate`](super::instantiate)
//! makes it concrete for one caller. The strategies favour collisions: few
//! ids, and TTLs and clock moves mostly in multiples of 50 ms so that
//! deadlines are hit exactly (`now == until`).
use gak::TaskState;
use proptest::prelude::*;

use super::invalid::INVALID_CALLS;
use super::{AGENTS, STEPS};

/// Which earlier task token an operation presents.
#[derive(Clone, Copy, Debug)]
pub enum TokRef {
    /// The n-th most recent token minted for the same task.
    Own(usize),
    /// The n-th most recent token minted for any task.
    Any(usize),
    /// A well-formed token that was never minted.
    Forged,
}

/// Which earlier lease an operation presents, and how it is tampered with.
#[derive(Clone, Copy, Debug)]
pub struct LeaseRef {
    /// The n-th most recent grant.
    pub back: usize,
    pub tamper: Tamper,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tamper {
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
pub struct SeedOp {
    pub task: usize,
    pub title: Option<u8>,
    /// Bit i: depends on `TASKS[i]`.
    pub deps: u8,
    pub state: Option<TaskState>,
    /// SPEC 10: the priority (0 when absent).
    pub priority: Option<i8>,
    /// SPEC 10: not before `START + 50 * n`.
    pub not_before: Option<u8>,
    /// SPEC 10: at most this many attempts.
    pub max_attempts: Option<u8>,
    /// SPEC 10: in `GROUPS[g]`.
    pub group: Option<usize>,
}

impl SeedOp {
    /// An open task without dependencies or queue fields.
    pub fn plain(task: usize) -> SeedOp {
        SeedOp {
            task,
            title: None,
            deps: 0,
            state: None,
            priority: None,
            not_before: None,
            max_attempts: None,
            group: None,
        }
    }
}

/// A task a queue call names: by id with a token reference, or the n-th
/// most recent claim the caller holds (its task and token).
#[derive(Clone, Copy, Debug)]
pub enum ItemRef {
    Task(usize, TokRef),
    Recent(usize),
}

/// One generated operation; tokens and leases are referred to by position
/// among those returned earlier (so shrinking keeps sequences meaningful).
#[derive(Clone, Debug)]
pub enum Op {
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
    /// SPEC 10: `claim-next`.
    ClaimNext {
        agent: usize,
        ttl: u64,
    },
    /// SPEC 10: `claim-batch`.
    ClaimBatch {
        agent: usize,
        ttl: u64,
        limit: u32,
    },
    /// SPEC 10: `complete-batch`.
    CompleteBatch {
        items: Vec<ItemRef>,
    },
    /// SPEC 10: `fail`.
    Fail {
        item: ItemRef,
        reason: u8,
        retry_after: Option<u64>,
    },
    /// SPEC 10: `revive`.
    Revive {
        task: usize,
    },
    /// SPEC 10: `set-group-limit`.
    SetGroupLimit {
        group: usize,
        limit: Option<u32>,
    },
    /// SPEC 10: `get-group`.
    GetGroup {
        group: usize,
    },
    /// Read a side-effect key (`sideeffect.get`).
    KeyGet {
        key: usize,
    },
    /// One of [`invalid_call`](super::invalid::invalid_call)'s inputs that SPEC 8
    /// makes `invalid-input`.
    Invalid {
        which: u8,
        lease: LeaseRef,
    },
}

/// The id space a strategy draws from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Space {
    tasks: usize,
    groups: usize,
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

pub(crate) const FULL: Space = Space {
    tasks: 3,
    groups: 2,
    keys: 3,
    res: 2,
    runs: 2,
    clock: true,
    jumps: true,
};

/// The concurrent phase: fewer ids (more contention); the clock moves too,
/// so expiry and takeover race claims, renewals and verdicts.
pub(crate) const TIGHT: Space = Space {
    tasks: 2,
    groups: 1,
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
        1 => Just(Some(TaskState::Dead)),
    ];
    let deps = prop_oneof![3 => Just(0u8), 2 => 0u8..(1 << sp.tasks)];
    let queue = (
        prop_oneof![3 => Just(None), 1 => (-1i8..=2).prop_map(Some)],
        prop_oneof![4 => Just(None), 1 => (0u8..=6).prop_map(Some)],
        prop_oneof![3 => Just(None), 2 => (1u8..=3).prop_map(Some)],
        prop_oneof![3 => Just(None), 2 => (0..sp.groups).prop_map(Some)],
    );
    let one = (prop::option::of(0u8..2), deps, state, queue);
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
                .map(
                    |(task, (title, deps, state, (priority, not_before, max_attempts, group)))| {
                        SeedOp {
                            task,
                            title,
                            deps,
                            state,
                            priority,
                            not_before,
                            max_attempts,
                            group,
                        }
                    },
                )
                .collect::<Vec<_>>()
        });
    (tasks, prop::bool::weighted(0.08))
        .prop_map(|(tasks, dup)| Op::Seed { tasks, dup })
        .boxed()
}

pub(crate) fn op(sp: Space) -> BoxedStrategy<Op> {
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
        3 => (task.clone(), tok_ref(), ttl()).prop_map(|(task, tok, ttl)| Op::TRenew { task, tok, ttl }),
    ];
    let queue = queue_op(sp);
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
            6 => queue,
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
            8 => queue,
            9 => effect,
            2 => sink,
            3 => ckpt,
            1 => (0..INVALID_CALLS, lease_ref()).prop_map(|(which, lease)| Op::Invalid { which, lease }),
        ]
        .boxed()
    } else {
        prop_oneof![
            6 => board,
            6 => queue,
            9 => effect,
            2 => sink,
            3 => ckpt,
            1 => (0..INVALID_CALLS, lease_ref()).prop_map(|(which, lease)| Op::Invalid { which, lease }),
        ]
        .boxed()
    }
}

fn item_ref(tasks: usize) -> BoxedStrategy<ItemRef> {
    prop_oneof![
        1 => (0..tasks, tok_ref()).prop_map(|(task, tok)| ItemRef::Task(task, tok)),
        2 => (0usize..3).prop_map(ItemRef::Recent),
    ]
    .boxed()
}

/// Retry-after of `fail`: absent, 0, or mostly multiples of 50 ms.
fn retry_after() -> BoxedStrategy<Option<u64>> {
    prop_oneof![
        2 => Just(None),
        1 => Just(Some(0u64)),
        3 => (1u64..=3).prop_map(|x| Some(x * 50)),
        1 => (1u64..=120).prop_map(Some),
    ]
    .boxed()
}

/// The job-queue calls of SPEC 10.
pub(crate) fn queue_op(sp: Space) -> BoxedStrategy<Op> {
    let agent = 0..AGENTS.len();
    let group = 0..sp.groups;
    let limit = prop_oneof![2 => Just(None), 3 => (1u32..=2).prop_map(Some)];
    prop_oneof![
        4 => (agent.clone(), ttl()).prop_map(|(agent, ttl)| Op::ClaimNext { agent, ttl }),
        4 => (agent, ttl(), 1u32..=3).prop_map(|(agent, ttl, limit)| Op::ClaimBatch { agent, ttl, limit }),
        3 => prop::collection::vec(item_ref(sp.tasks), 1..=3)
            .prop_map(|items| Op::CompleteBatch { items }),
        4 => (item_ref(sp.tasks), 0u8..2, retry_after())
            .prop_map(|(item, reason, retry_after)| Op::Fail { item, reason, retry_after }),
        2 => (0..sp.tasks).prop_map(|task| Op::Revive { task }),
        1 => (group.clone(), limit).prop_map(|(group, limit)| Op::SetGroupLimit { group, limit }),
        1 => group.prop_map(|group| Op::GetGroup { group }),
    ]
    .boxed()
}

/// 1..40 operations, usually after seeding the board (a board never seeded
/// answers every claim with `not-found`).
pub fn ops_strategy() -> impl Strategy<Value = Vec<Op>> {
    (
        prop::option::weighted(0.4, (0usize..2, 1u32..=2)),
        prop::option::weighted(0.85, seed_op(FULL, true)),
        prop::collection::vec(op(FULL), 1..40),
    )
        .prop_map(|(limit, seed, ops)| {
            // Often a group limit first (SPEC 10), so that groups fill up.
            let limit = limit.map(|(group, limit)| Op::SetGroupLimit {
                group,
                limit: Some(limit),
            });
            limit.into_iter().chain(seed).chain(ops).collect()
        })
}
