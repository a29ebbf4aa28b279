//! Model and kernel side by side, one operation at a time: the sequential
//! check.
//!
//! [`run_case`] applies a sequence of operations to the model and to a
//! fresh kernel, compares every answer (tokens through the [`Binder`]),
//! then reads back everything observable ([`observe_all`]); the first
//! disagreement is the error. `GAK_MODEL_TRACE` (set to anything) prints
//! every answer of a run.
use std::sync::Arc;

use gak::ManualClock;
use gak::blocking::Kernel;

use super::answer::{Binder, compare};
use super::call::{Refs, instantiate};
use super::kernel::{Fresh, apply_real};
use super::ops::Op;
use super::reference::{Model, Mutant};
use super::{FORGED, FORGED_H, GROUPS, H, KEYS, Out, RESOURCES, RUNS, START, STEPS};

/// Model, token binding and both callers' views, in lock step.
#[derive(Clone, Debug)]
pub struct Lockstep {
    /// The model.
    pub model: Model,
    /// Model handles bound to the kernel's tokens.
    pub binder: Binder,
    /// What the model's caller has been handed.
    pub refs: Refs<H>,
    /// What the kernel's caller has been handed.
    pub real_refs: Refs<String>,
}

impl Lockstep {
    /// A fresh model (wrong as `mutant` says) and nothing bound yet.
    pub fn new(mutant: Option<Mutant>) -> Self {
        Lockstep {
            model: Model::new(mutant),
            binder: Binder::default(),
            refs: Refs::default(),
            real_refs: Refs::default(),
        }
    }

    /// Apply `op` to both; the kernel's answer when they agree.
    pub fn step(
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
pub fn observe_all() -> Vec<Op> {
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
    for group in 0..GROUPS.len() {
        ops.push(Op::GetGroup { group });
    }
    ops
}

/// Run `ops` (then [`observe_all`]) on the model and a fresh kernel.
pub fn run_case(fresh: &Fresh<'_>, ops: &[Op], mutant: Option<Mutant>) -> Result<(), String> {
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
