//! The resume plan over a step DAG (SPEC 3 `build-plan`, 8 "Checkpoint").
use std::collections::{BTreeSet, HashMap, HashSet};

use crate::{Error, Plan, Snapshot, StepDef};

/// Validate the DAG and plan a resume from `snap`.
///
/// Only the trusted completion set is skipped: the largest subset T of
/// `snap.done` whose every step's dependencies are also in T. A done record
/// whose dependencies are not trusted is of unknown origin (a partial write,
/// an older plan): running the step once more is safe, skipping it is not.
pub fn build_plan(steps: &[StepDef], snap: Option<&Snapshot>) -> Result<Plan, Error> {
    if steps.len() > crate::input::MAX_ITEMS {
        return Err(Error::InvalidInput("more than 10000 steps".into()));
    }
    let index = validate(steps)?;
    let deps: Vec<Vec<usize>> = steps
        .iter()
        .map(|s| s.depends_on.iter().map(|d| index[d.as_str()]).collect())
        .collect();

    let done: &[String] = snap.map(|s| s.done.as_slice()).unwrap_or(&[]);
    let mut trusted = vec![false; steps.len()];
    for id in done {
        if let Some(&i) = index.get(id.as_str()) {
            trusted[i] = true;
        }
    }
    // Greatest fixpoint: drop steps with an untrusted dependency until stable.
    loop {
        let mut changed = false;
        for i in 0..steps.len() {
            if trusted[i] && deps[i].iter().any(|&d| !trusted[d]) {
                trusted[i] = false;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }

    let claimed: HashSet<&str> = done.iter().map(String::as_str).collect();
    let mut plan = Plan::default();
    for (i, step) in steps.iter().enumerate() {
        if trusted[i] {
            plan.skip.push(step.id.clone());
        } else if claimed.contains(step.id.as_str()) {
            plan.untrusted.push(step.id.clone());
        }
    }
    let mut seen_unknown = HashSet::new();
    for id in done {
        if !index.contains_key(id.as_str()) && seen_unknown.insert(id.as_str()) {
            plan.untrusted.push(id.clone());
        }
    }

    // Kahn's algorithm, trusted steps counting as finished, always taking
    // the earliest-declared ready step so every host computes the same order.
    let mut pending: Vec<usize> = deps
        .iter()
        .map(|d| d.iter().filter(|&&x| !trusted[x]).count())
        .collect();
    let mut dependents = vec![Vec::new(); steps.len()];
    for (i, ds) in deps.iter().enumerate() {
        for &d in ds {
            dependents[d].push(i);
        }
    }
    let mut ready: BTreeSet<usize> = (0..steps.len())
        .filter(|&i| !trusted[i] && pending[i] == 0)
        .collect();
    while let Some(i) = ready.pop_first() {
        plan.run.push(steps[i].id.clone());
        for &j in &dependents[i] {
            pending[j] -= 1;
            if pending[j] == 0 && !trusted[j] {
                ready.insert(j);
            }
        }
    }
    Ok(plan)
}

/// Check ids and dependencies; returns id → declaration index.
fn validate(steps: &[StepDef]) -> Result<HashMap<&str, usize>, Error> {
    let mut index = HashMap::with_capacity(steps.len());
    for (i, step) in steps.iter().enumerate() {
        if step.id.is_empty() || step.id.len() > crate::input::MAX_ID {
            return Err(Error::InvalidPlan(format!(
                "step #{i} has an empty or over-long id"
            )));
        }
        if index.insert(step.id.as_str(), i).is_some() {
            return Err(Error::InvalidPlan(format!(
                "duplicate step id {:?}",
                step.id
            )));
        }
    }
    for step in steps {
        if let Some(dep) = step
            .depends_on
            .iter()
            .find(|d| !index.contains_key(d.as_str()))
        {
            return Err(Error::InvalidPlan(format!(
                "step {:?} depends on unknown step {dep:?}",
                step.id
            )));
        }
    }
    if let Some(culprit) = first_on_cycle(steps, &index) {
        return Err(Error::InvalidPlan(format!(
            "step {:?} is on a dependency cycle",
            steps[culprit].id
        )));
    }
    Ok(index)
}

/// The earliest-declared step that lies on a cycle, if any.
fn first_on_cycle(steps: &[StepDef], index: &HashMap<&str, usize>) -> Option<usize> {
    // Kahn over the whole graph; what remains is on a cycle or downstream of
    // one. A remaining step is on a cycle iff it can reach itself.
    let n = steps.len();
    let mut pending: Vec<usize> = steps.iter().map(|s| s.depends_on.len()).collect();
    let mut dependents = vec![Vec::new(); n];
    for (i, s) in steps.iter().enumerate() {
        for d in &s.depends_on {
            dependents[index[d.as_str()]].push(i);
        }
    }
    let mut queue: Vec<usize> = (0..n).filter(|&i| pending[i] == 0).collect();
    let mut left = n;
    while let Some(i) = queue.pop() {
        left -= 1;
        for &j in &dependents[i] {
            pending[j] -= 1;
            if pending[j] == 0 {
                queue.push(j);
            }
        }
    }
    if left == 0 {
        return None;
    }
    (0..n).find(|&start| {
        pending[start] > 0 && {
            let mut stack = vec![start];
            let mut seen = vec![false; n];
            let mut hit = false;
            while let Some(i) = stack.pop() {
                for &j in &dependents[i] {
                    if j == start {
                        hit = true;
                    } else if !seen[j] {
                        seen[j] = true;
                        stack.push(j);
                    }
                }
            }
            hit
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(done: &[&str]) -> Snapshot {
        Snapshot {
            run_id: "r".into(),
            seq: 1,
            fence: None,
            status: "s".into(),
            done: done.iter().map(|d| (*d).to_owned()).collect(),
            fields: vec![],
        }
    }

    #[test]
    fn skips_only_the_trusted_completion_set() {
        let steps = [
            StepDef::new("a", &[]),
            StepDef::new("b", &["a"]),
            StepDef::new("c", &["b"]),
        ];
        // "c" is done but "b" is not: c's completion is of unknown origin.
        let plan = build_plan(&steps, Some(&snap(&["c", "a", "zz"]))).unwrap();
        assert_eq!(plan.skip, ["a"]);
        assert_eq!(plan.run, ["b", "c"]);
        assert_eq!(plan.untrusted, ["c", "zz"]);
    }

    #[test]
    fn ties_break_by_declaration_order() {
        let steps = [
            StepDef::new("z", &["y"]),
            StepDef::new("y", &[]),
            StepDef::new("x", &[]),
        ];
        let plan = build_plan(&steps, None).unwrap();
        assert_eq!(plan.run, ["y", "z", "x"]);
    }

    #[test]
    fn invalid_dags_name_the_culprit() {
        let dup = [StepDef::new("a", &[]), StepDef::new("a", &[])];
        assert!(
            matches!(build_plan(&dup, None), Err(Error::InvalidPlan(m)) if m.contains("\"a\""))
        );
        let unknown = [StepDef::new("a", &["q"])];
        assert!(
            matches!(build_plan(&unknown, None), Err(Error::InvalidPlan(m)) if m.contains("\"q\""))
        );
        let cycle = [
            StepDef::new("x", &[]),
            StepDef::new("b", &["c"]),
            StepDef::new("c", &["b"]),
            StepDef::new("d", &["b"]),
        ];
        assert!(
            matches!(build_plan(&cycle, None), Err(Error::InvalidPlan(m)) if m.contains("\"b\""))
        );
        assert!(matches!(
            build_plan(&[StepDef::new("", &[])], None),
            Err(Error::InvalidPlan(_))
        ));
    }
}
