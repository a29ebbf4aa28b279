//! A model of `build-plan` (SPEC 3, 8), and random plans for it.
//!
//! [`model_plan`] computes the plan the SPEC describes from the steps and
//! a snapshot's done list: invalid plans (empty or duplicate ids, unknown
//! dependencies, cycles) are refused; the trusted part of `done` is its
//! largest subset whose dependencies are all inside it; the rest runs in
//! Kahn's order, earliest-declared ready step first.
use std::collections::{HashMap, HashSet};

use gak::{Plan, StepDef};
use proptest::prelude::*;

/// Steps, and the done list of a snapshot (`None`: no snapshot).
#[derive(Clone, Debug)]
pub struct PlanCase {
    pub steps: Vec<StepDef>,
    pub done: Option<Vec<String>>,
}

/// How a generated plan is made invalid, if at all.
#[derive(Clone, Copy, Debug)]
enum Corrupt {
    None,
    Cycle,
    SelfLoop,
    UnknownDep,
    DuplicateId,
    EmptyId,
}

/// Up to 6 steps with random edges to earlier-numbered ones, declared in
/// random order, sometimes corrupted; done lists may name unknown steps.
pub fn plan_strategy() -> impl Strategy<Value = PlanCase> {
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

/// The plan SPEC 3 and 8 describe, or `None` for an invalid plan.
pub fn model_plan(steps: &[StepDef], done: Option<&[String]>) -> Option<Plan> {
    let mut known = HashSet::new();
    for s in steps {
        if s.id.is_empty() || !known.insert(s.id.clone()) {
            return None;
        }
    }
    if steps
        .iter()
        .any(|s| s.depends_on.iter().any(|d| !known.contains(d)))
    {
        return None;
    }
    if kahn(steps, &HashSet::new()).len() != steps.len() {
        return None;
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
    Some(Plan {
        skip,
        run,
        untrusted,
    })
}
