//! The linearizability checker: Wing and Gong's backtracking search.
//!
//! A history is linearizable when some serial order of its operations,
//! consistent with real time (an operation may go next only if no pending
//! one returned before it was invoked), is explained by the model: every
//! answer agrees, tokens bind consistently, and the model ends in the
//! state the threads left ([`Finals`]). Each thread presents the tokens
//! and leases it has seen itself.
use super::answer::{Binder, compare};
use super::call::{Refs, instantiate};
use super::history::{Event, Finals, render, render_finals};
use super::lockstep::Lockstep;
use super::reference::Model;
use super::{FORGED_H, H};

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
