//! Coverage labels: which answer an operation got, and which expiry
//! boundary (`now == until`) or path through the rules it was judged on,
//! read off the model's state before the operation. The generator test
//! counts them to show that random sequences reach every answer.
use gak::{Resolved, TaskState};

use super::answer::AcqV;
use super::call::Call;
use super::reference::{MKey, Model};
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
