//! Concurrent runs, recorded as histories.
//!
//! A [`ConcCase`] is a sequential prefix (run in lock step with the model)
//! and then 2-4 threads running 1-3 operations each against one shared
//! kernel and its one clock, which threads move. Each operation is stamped
//! from one global counter before it is invoked and after it returns
//! ([`Event`]): the real-time order a serial explanation must respect.
//! After the threads finish, everything observable is read back
//! ([`Finals`]).
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};

use gak::ManualClock;
use gak::blocking::Kernel;
use proptest::prelude::*;

use super::call::instantiate;
use super::kernel::apply_real;
use super::lockstep::{Lockstep, observe_all};
use super::ops::{FULL, Op, SeedOp, TIGHT, op};
use super::{FORGED, Out};

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
                "  [{:>4}..{:>4}] thread {}: {:?}\n               -> {:?}\n",
                e.invoked, e.returned, e.thread, e.op, e.out
            )
        })
        .collect()
}
