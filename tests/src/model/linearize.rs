//! The linearizability checker: Wing and Gong's backtracking search.
//!
//! A history is linearizable when some serial order of its operations,
//! consistent with real time (an operation may go next only if no pending
//! one returned before it was invoked), is explained by the model: every
//! answer agrees, tokens bind consistently, and the model ends in the
//! state the threads left ([`Finals`]). Each thread presents the tokens
//! and leases it has seen itself.
//!
//! SPEC 10 lets `claim-next` / `claim-batch` pass over a task that an
//! overlapping call holds: the checker accepts a pass-over of task X only
//! when a call of another thread that overlaps the claim in real time
//! touched X ([`touched`], or read it by key as a dependency or a dependent
//! of a task it names, or as an expired claim or a due delay a claim put
//! back ([`requeueable`]); a claim the host re-ran may have touched any) —
//! or a task of X's group: a grouped task's place
//! in the claim order is its group's (one head per group), which only a
//! call holding the group's record moves — and then exactly as the kernel
//! answered (the model is guided by [`PassOver`]); any other out-of-order
//! grant is rejected.
use std::collections::{BTreeMap, BTreeSet};

use gak::TaskState;

use super::answer::{Binder, compare};
use super::call::Call;
use super::call::{Refs, instantiate};
use super::history::{Event, Finals, render, render_finals};
use super::lockstep::Lockstep;
use super::ops::Op;
use super::reference::{Model, PassOver};
use super::{FORGED, FORGED_H, H, Out, TASKS};

/// The tasks a call may hold a lock on, from the call, its answer and
/// whether the host re-ran it (`reran`): those it names, and those a claim
/// answered; a claim call that failed, or that the host re-ran after a
/// store conflict (a deadlock its walk was part of), may have held any task
/// before a run rolled back. Reads (`list`) and refused input lock nothing.
pub fn touched(call: &Call<String>, out: &Out<String>, reran: bool) -> BTreeSet<String> {
    match call {
        Call::Claim { id, .. }
        | Call::TRelease { id, .. }
        | Call::TComplete { id, .. }
        | Call::TRenew { id, .. }
        | Call::Fail { id, .. }
        | Call::Revive(id) => BTreeSet::from([id.clone()]),
        Call::Seed(seeds) => seeds.iter().map(|s| s.id.clone()).collect(),
        Call::CompleteBatch { items } => items.iter().map(|(id, _)| id.clone()).collect(),
        Call::ClaimNext { .. } | Call::ClaimBatch { .. } => match out {
            Out::Tasks(ts) if !reran => ts.iter().map(|t| t.id.clone()).collect(),
            _ => TASKS.iter().map(|t| (*t).to_owned()).collect(),
        },
        _ => BTreeSet::new(),
    }
}

/// Tasks joined by a dependency, either way, in the start state or by any
/// seed of the history. A call that names a task also reads its neighbours
/// by key — a claim its dependencies (`deps-pending`), a completion its
/// dependents (which may join the claim order) — and on PostgreSQL a read
/// by key locks as much as a write.
fn neighbours<'a>(
    model: &'a Model,
    calls: impl Iterator<Item = &'a Call<String>>,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut join = |a: &str, b: &str| {
        edges.entry(a.to_owned()).or_default().insert(b.to_owned());
        edges.entry(b.to_owned()).or_default().insert(a.to_owned());
    };
    for (id, task) in &model.tasks {
        task.deps.iter().for_each(|d| join(id, d));
    }
    for call in calls {
        if let Call::Seed(seeds) = call {
            for s in seeds {
                s.deps.iter().for_each(|d| join(&s.id, d));
            }
        }
    }
    edges
}

/// The tasks a claim call returning at `returned` may have put back into
/// the claim order, reading each by key (which locks it on PostgreSQL)
/// whether or not it then granted it: every claim whose lease could have
/// expired by then and every delay that could have come due: the tasks
/// claimed or failed at the start, and those granted by a call invoked
/// before it returned once the clock may have moved or a `fail` may have
/// set a delay.
fn requeueable(model: &Model, events: &[Event], returned: u64) -> BTreeSet<String> {
    let mut put_back: BTreeSet<String> = model
        .tasks
        .iter()
        .filter(|(_, t)| matches!(t.state, TaskState::Claimed | TaskState::Failed))
        .map(|(id, _)| id.clone())
        .collect();
    let before = || events.iter().filter(move |o| o.invoked < returned);
    let moved = before().any(|o| {
        matches!(
            o.op,
            Op::Advance(_) | Op::AdvanceTo { .. } | Op::Fail { .. }
        )
    });
    if moved {
        put_back.extend(before().flat_map(|o| match &o.out {
            Out::Tasks(ts) => ts.iter().map(|t| t.id.clone()).collect(),
            Out::Task(t) if t.state == TaskState::Claimed => vec![t.id.clone()],
            _ => Vec::new(),
        }));
    }
    put_back
}

/// For each event, the tasks calls of other threads overlapping it in real
/// time touched.
fn held_by_overlapping(
    start: &Refs<String>,
    model: &Model,
    events: &[Event],
) -> Vec<BTreeSet<String>> {
    // Each thread's calls as it made them (with the tokens it had seen).
    let mut calls: Vec<Option<Call<String>>> = vec![None; events.len()];
    let threads = events.iter().map(|e| e.thread + 1).max().unwrap_or(0);
    for thread in 0..threads {
        let mut mine: Vec<usize> = (0..events.len())
            .filter(|&i| events[i].thread == thread)
            .collect();
        mine.sort_by_key(|&i| events[i].invoked);
        let mut refs = start.clone();
        for i in mine {
            let e = &events[i];
            calls[i] = Some(instantiate(&e.op, &refs, &FORGED.to_owned()));
            refs.absorb(&e.op, &e.out);
        }
    }
    let near = neighbours(model, calls.iter().flatten());
    let touched: Vec<BTreeSet<String>> = calls
        .iter()
        .zip(events)
        .map(|(call, e)| {
            let named = call
                .as_ref()
                .map_or_else(BTreeSet::new, |c| self::touched(c, &e.out, e.reran));
            let read = named.iter().filter_map(|t| near.get(t)).flatten().cloned();
            let put_back = match call {
                Some(Call::ClaimNext { .. } | Call::ClaimBatch { .. }) => {
                    requeueable(model, events, e.returned)
                }
                _ => BTreeSet::new(),
            };
            named.iter().cloned().chain(read).chain(put_back).collect()
        })
        .collect();
    events
        .iter()
        .map(|a| {
            events
                .iter()
                .zip(&touched)
                .filter(|(b, _)| {
                    a.thread != b.thread && a.invoked < b.returned && b.invoked < a.returned
                })
                .flat_map(|(_, t)| t.iter().cloned())
                .collect()
        })
        .collect()
}

/// The guide for a claim call: what overlapping calls held, what it granted.
fn pass_over(e: &Event, held: &BTreeSet<String>) -> Option<PassOver> {
    match (&e.op, &e.out) {
        (Op::ClaimNext { .. } | Op::ClaimBatch { .. }, Out::Tasks(ts)) => Some(PassOver {
            held: held.clone(),
            granted: ts.iter().map(|t| t.id.clone()).collect(),
            kill: BTreeSet::new(),
        }),
        _ => None,
    }
}

/// Every subset of `set` (histories have at most six tasks).
fn subsets(set: &BTreeSet<String>) -> Vec<BTreeSet<String>> {
    let items: Vec<&String> = set.iter().collect();
    (0..1u32 << items.len())
        .map(|bits| {
            (0..items.len())
                .filter(|i| bits & (1 << i) != 0)
                .map(|i| items[i].clone())
                .collect()
        })
        .collect()
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

fn dfs(
    st: &LinState,
    events: &[Event],
    held: &[BTreeSet<String>],
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
        let guide = pass_over(e, &held[i]);
        // A claim that passed over held tasks may have met each used-up one
        // unread or read it and turned it dead: every subset is tried.
        let kills: Vec<BTreeSet<String>> = match &guide {
            Some(p) if !p.held.is_empty() => subsets(&st.model.used_up()),
            _ => vec![BTreeSet::new()],
        };
        for kill in kills {
            let mut next = st.clone();
            next.model.pass_over = guide.clone().map(|p| PassOver { kill, ..p });
            let want = next
                .model
                .apply(&instantiate(&e.op, &next.refs[e.thread], &FORGED_H));
            next.model.pass_over = None;
            if compare(&want, &e.out, &mut next.binder).is_err() {
                continue;
            }
            next.refs[e.thread].absorb(&e.op, &want);
            order.push(i);
            if dfs(
                &next,
                events,
                held,
                finals,
                remaining & !(1 << i),
                order,
                steps,
            )? {
                return Ok(true);
            }
            order.pop();
        }
    }
    Ok(false)
}

/// Find a serial order of `events`, consistent with real time, that the
/// model (starting from `start`, each thread seeing `start`'s refs) explains,
/// answers and end state (`finals`, read after every thread finished).
pub fn linearize(
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
    let held = held_by_overlapping(&start.real_refs, &start.model, events);
    match dfs(&st, events, &held, finals, all, &mut order, &mut steps) {
        Ok(true) => Ok(order),
        Ok(false) => Err(format!(
            "no serial order explains the history and the state it left ({steps} model steps tried):\n{}\n  read back afterwards:\n{}",
            render(events),
            render_finals(finals)
        )),
        Err(e) => Err(format!("{e}:\n{}", render(events))),
    }
}
