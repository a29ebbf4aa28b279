//! Coverage labels: which answer an operation got, and which expiry
//! boundary (`now == until`) or path through the rules it was judged on,
//! read off the model's state before the operation. The generator test
//! counts them to show that random sequences reach every answer.
use gak::{Resolved, TaskState};

use super::answer::AcqV;
use super::call::Call;
use super::reference::{MKey, Model};

/// Paths through SPEC 10's rules: what a claim call met on the way, how a
/// `fail` ended.
fn queue_paths(
    model: &Model,
    call: &Call<H>,
    out: &Out<H>,
    kind: &str,
    answer: &str,
) -> Vec<String> {
    let mut after = model.clone();
    after.apply(call);
    let mut paths = Vec::new();
    let mut path = |p: &str| paths.push(format!("{kind}:{answer}/{p}"));
    match call {
        Call::ClaimNext { .. } | Call::ClaimBatch { .. } => {
            let turned_dead = after.tasks.iter().any(|(id, t)| {
                t.state == TaskState::Dead && model.tasks[id].state != TaskState::Dead
            });
            if turned_dead {
                path("turned-dead");
            }
            let granted: Vec<&str> = match out {
                Out::Tasks(ts) => ts.iter().map(|t| t.id.as_str()).collect(),
                _ => vec![],
            };
            // A task left behind only because its group is full.
            let group_skip = model.tasks.iter().any(|(id, t)| {
                !granted.contains(&id.as_str())
                    && t.group.is_some()
                    && after.group_full(&after.tasks[id])
                    && matches!(t.state, TaskState::Open | TaskState::Failed)
                    && model.deps_done(t)
                    && model.due(t)
            });
            if group_skip {
                path("group-full");
            }
            let delayed = model
                .tasks
                .values()
                .any(|t| matches!(t.state, TaskState::Open | TaskState::Failed) && !model.due(t));
            if delayed {
                path("not-due");
            }
            if granted.len() > 1 {
                path("several");
            }
            // Priority beat seed order.
            if granted.windows(2).any(|w| w[0] > w[1])
                || granted.first().is_some_and(|g| {
                    model
                        .tasks
                        .iter()
                        .any(|(id, t)| id.as_str() < *g && model.ready(t) && !Model::exhausted(t))
                })
            {
                path("priority");
            }
        }
        Call::Claim { id, .. }
            if answer == "terminal"
                && model
                    .tasks
                    .get(id)
                    .is_some_and(|t| !matches!(t.state, TaskState::Done | TaskState::Dead)) =>
        {
            path("exhausted");
        }
        Call::Fail {
            id,
            token,
            retry_after,
            ..
        } => {
            if let Some(t) = model.tasks.get(id) {
                if t.failed_by == Some(*token) {
                    path("again");
                } else if after.tasks[id].state == TaskState::Dead {
                    path("dead");
                } else if retry_after.is_some() && answer == "ok" {
                    path("backoff");
                }
            }
        }
        Call::TRelease { id, .. } if answer == "ok" && model.tasks[id].attempts > 0 => {
            path("attempt-back");
        }
        _ => {}
    }
    paths
}
use super::{H, Out};

/// Labels of what an operation exercised: its answer, and any expiry
/// boundary (`now == until`) it was judged on.
pub fn labels(model: &Model, call: &Call<H>, out: &Out<H>) -> Vec<String> {
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
        Out::Tasks(ts) if ts.is_empty() && !matches!(call, Call::List) => "none".into(),
        Out::Items(items) => {
            let mut names: Vec<String> = items
                .iter()
                .map(|(_, o)| match o {
                    Out::Err(e) => e.clone(),
                    Out::ErrOneOf(_) => "unknown-task".into(),
                    _ => "completed".into(),
                })
                .collect();
            names.sort();
            names.dedup();
            names.join("+")
        }
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
    // SPEC 10: judged exactly when a delay ends (`now == not-before`).
    let due_now = |t: &crate::model::reference::MTask| t.not_before == Some(now);
    let at_due = match call {
        Call::Claim { id, .. } => model.tasks.get(id).is_some_and(due_now),
        Call::ClaimNext { .. } | Call::ClaimBatch { .. } => model.tasks.values().any(due_now),
        _ => false,
    };
    if at_due {
        labels.push(format!("{kind}:{answer}@not-before"));
    }
    labels.extend(queue_paths(model, call, out, &kind, &answer));
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
