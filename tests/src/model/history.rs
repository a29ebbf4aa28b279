//! Concurrent runs, recorded as histories.
//!
//! A [`ConcCase`] is a sequential prefix (run in lock step with the model)
//! and then 2-4 threads running 1-3 operations each against one shared
//! kernel and its one clock, which threads move. Each operation is stamped
//! from one global counter before it is invoked and after it returns
//! ([`Event`]): the real-time order a serial explanation must respect.
//! After the threads finish, everything observable is read back
//! ([`Finals`]).
//!
//! Each event also says whether the host re-ran the call after a store
//! conflict (a PostgreSQL deadlock, SQLite busy): the host warns once per
//! re-run, on the thread that drives the call, and [`Reruns`] counts those
//! warnings per thread. An aborted run of a claim may have held any task
//! before it rolled back, which the linearizability checker must know.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

use gak::ManualClock;
use gak::blocking::Kernel;
use proptest::prelude::*;

use super::call::instantiate;
use super::kernel::apply_real;
use super::lockstep::{Lockstep, observe_all};
use super::ops::{FULL, ItemRef, Op, SeedOp, TIGHT, TokRef, op};
use super::{AGENTS, FORGED, Out};

/// The global real-time order: taken before invoking and after responding.
static SEQ: AtomicU64 = AtomicU64::new(0);

/// One operation of a concurrent history.
#[derive(Clone, Debug)]
pub struct Event {
    /// The thread that ran it (0-based).
    pub thread: usize,
    /// The operation.
    pub op: Op,
    /// The kernel's answer.
    pub out: Out<String>,
    /// The global counter before invoking.
    pub invoked: u64,
    /// The global counter after the answer.
    pub returned: u64,
    /// Did the host re-run the call after a store conflict?
    pub reran: bool,
}

/// A tracing subscriber, installed on one recording thread, that counts the
/// host's re-runs of that thread's calls: the warnings that carry the
/// `attempt` field (`protocol::attempts`). Everything else is disabled.
struct Reruns(Arc<AtomicU64>);

impl Reruns {
    fn counts(meta: &tracing::Metadata<'_>) -> bool {
        meta.is_event()
            && *meta.level() == tracing::Level::WARN
            && meta.fields().field("attempt").is_some()
    }
}

impl tracing::Subscriber for Reruns {
    fn enabled(&self, meta: &tracing::Metadata<'_>) -> bool {
        Self::counts(meta)
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        // Never called: no span is enabled.
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if Self::counts(event.metadata()) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// What was read back after the threads finished: each read and its
/// answer.
pub type Finals = [(Op, Out<String>)];

/// A concurrent case: sequential prefix, then threads at a fixed time.
#[derive(Clone, Debug)]
pub struct ConcCase {
    /// Run in lock step with the model first.
    pub prefix: Vec<Op>,
    /// Each thread's operations, run concurrently.
    pub threads: Vec<Vec<Op>>,
}

/// A seed of two tasks (one depending on the other), up to 5 more
/// operations, then 2-4 threads of 1-3 operations on fewer ids.
pub fn conc_strategy() -> impl Strategy<Value = ConcCase> {
    let prefix = prop::collection::vec(op(FULL), 0..6);
    let threads = prop::collection::vec(prop::collection::vec(op(TIGHT), 1..=3), 2..=4);
    (prefix, threads).prop_map(|(mut prefix, threads)| {
        // Two tasks on the board, one depending on the other.
        prefix.insert(
            0,
            Op::Seed {
                tasks: vec![
                    SeedOp::plain(0),
                    SeedOp {
                        deps: 1,
                        ..SeedOp::plain(1)
                    },
                ],
                dup: false,
            },
        );
        ConcCase { prefix, threads }
    })
}

/// SPEC 10's claimers: a board of 6 tasks (random priorities, groups and
/// attempt bounds; group `g0` limited to 1-2 live claims), then 2-4 threads
/// of 1-3 queue calls each — mostly `claim-batch` / `claim-next`, and
/// completing, failing or releasing what they got; a rare clock move
/// expires claims.
pub fn queue_conc_strategy() -> impl Strategy<Value = ConcCase> {
    let seed = (
        prop_oneof![2 => Just(None), 1 => (0i8..=1).prop_map(Some)],
        prop_oneof![1 => Just(None), 2 => Just(Some(0usize)), 1 => Just(Some(1usize))],
        prop_oneof![3 => Just(None), 1 => (1u8..=2).prop_map(Some)],
    );
    let board = (prop::collection::vec(seed, 6), 1u32..=2);
    let thread_op = prop_oneof![
        6 => (0..AGENTS.len(), 1u32..=3).prop_map(|(agent, limit)| Op::ClaimBatch { agent, ttl: 100, limit }),
        3 => (0..AGENTS.len()).prop_map(|agent| Op::ClaimNext { agent, ttl: 100 }),
        3 => (1usize..=2).prop_map(|n| Op::CompleteBatch {
            items: (0..n).map(ItemRef::Recent).collect(),
        }),
        2 => prop_oneof![Just(None), Just(Some(0u64)), Just(Some(50))].prop_map(|retry_after| Op::Fail {
            item: ItemRef::Recent(0),
            reason: 0,
            retry_after,
        }),
        1 => Just(Op::TRelease { task: 0, tok: TokRef::Any(0) }),
        1 => Just(Op::Advance(100)),
        1 => Just(Op::GetGroup { group: 0 }),
    ];
    let threads = prop::collection::vec(prop::collection::vec(thread_op, 1..=3), 2..=4);
    (board, threads).prop_map(|((seeds, limit), threads)| {
        let tasks = seeds
            .into_iter()
            .enumerate()
            .map(|(task, (priority, group, max_attempts))| SeedOp {
                priority,
                group,
                max_attempts,
                ..SeedOp::plain(task)
            })
            .collect();
        ConcCase {
            prefix: vec![
                Op::SetGroupLimit {
                    group: 0,
                    limit: Some(limit),
                },
                Op::Seed { tasks, dup: false },
            ],
            threads,
        }
    })
}

/// A recorded concurrent run: the model state after the prefix, the
/// history, and the end state read back after the threads finished.
pub struct Recorded {
    /// Model, bindings and both callers' views after the prefix.
    pub start: Lockstep,
    /// The threads' operations.
    pub events: Vec<Event>,
    /// Everything observable, read back afterwards.
    pub finals: Vec<(Op, Out<String>)>,
}

/// Run the prefix in lock step with the model, call `ready`, then run the
/// threads against the one kernel (and its one clock, which threads move),
/// then read everything observable back.
pub fn record(
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
                    let reruns = Arc::new(AtomicU64::new(0));
                    let _counting = tracing::subscriber::set_default(Reruns(reruns.clone()));
                    barrier.wait();
                    let mut events = Vec::new();
                    for op in ops {
                        let call = instantiate(op, &refs, &FORGED.to_owned());
                        let before = reruns.load(Ordering::Relaxed);
                        let invoked = SEQ.fetch_add(1, Ordering::SeqCst);
                        let out = apply_real(kernel, clock, &call);
                        let returned = SEQ.fetch_add(1, Ordering::SeqCst);
                        let reran = reruns.load(Ordering::Relaxed) > before;
                        refs.absorb(op, &out);
                        events.push(Event {
                            thread,
                            op: op.clone(),
                            out,
                            invoked,
                            returned,
                            reran,
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

/// The reads taken after a run, one per line with its answer.
pub(crate) fn render_finals(finals: &Finals) -> String {
    finals
        .iter()
        .map(|(op, out)| format!("    {op:?}\n      -> {out:?}\n"))
        .collect()
}

/// A history in invocation order, with each call's span and answer.
pub fn render(events: &[Event]) -> String {
    let mut sorted: Vec<&Event> = events.iter().collect();
    sorted.sort_by_key(|e| e.invoked);
    sorted
        .iter()
        .map(|e| {
            format!(
                "  [{:>4}..{:>4}] thread {}: {:?}{}\n               -> {:?}\n",
                e.invoked,
                e.returned,
                e.thread,
                e.op,
                if e.reran { " (re-run by the host)" } else { "" },
                e.out
            )
        })
        .collect()
}
