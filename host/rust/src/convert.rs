//! Field-by-field conversions between the contract's Rust types
//! (`gak_rules`) and the host-side WIT bindings.
use crate::engine::{checkpoint as cp, commitgate as cg, sideeffect as se, taskboard as tb};
use gak_rules as r;

pub fn snapshot_in(s: &r::Snapshot) -> cp::Snapshot {
    cp::Snapshot {
        run_id: s.run_id.clone(),
        seq: s.seq,
        fence: s.fence,
        status: s.status.clone(),
        done: s.done.clone(),
        fields: s.fields.clone(),
    }
}

pub fn snapshot_out(s: cp::Snapshot) -> r::Snapshot {
    r::Snapshot {
        run_id: s.run_id,
        seq: s.seq,
        fence: s.fence,
        status: s.status,
        done: s.done,
        fields: s.fields,
    }
}

pub fn step_in(s: &r::StepDef) -> cp::StepDef {
    cp::StepDef {
        id: s.id.clone(),
        depends_on: s.depends_on.clone(),
    }
}

pub fn plan_out(p: cp::Plan) -> r::Plan {
    r::Plan {
        skip: p.skip,
        run: p.run,
        untrusted: p.untrusted,
    }
}

pub fn outcome_in(o: &r::Outcome) -> cg::Outcome {
    cg::Outcome {
        status: match o.status {
            r::Status::Succeeded => cg::Status::Succeeded,
            r::Status::Failed => cg::Status::Failed,
        },
        result: o.result.clone(),
    }
}

pub fn outcome_out(o: cg::Outcome) -> r::Outcome {
    r::Outcome {
        status: match o.status {
            cg::Status::Succeeded => r::Status::Succeeded,
            cg::Status::Failed => r::Status::Failed,
        },
        result: o.result,
    }
}

pub fn action_in(a: &r::Action) -> se::Action {
    se::Action {
        key: a.key.clone(),
        resource: a.resource.clone(),
        retry_safety: match a.retry_safety {
            r::RetrySafety::Safe => se::RetrySafety::Safe,
            r::RetrySafety::Unsafe => se::RetrySafety::Unsafe,
        },
        fingerprint: a.fingerprint.clone(),
    }
}

pub fn lease_in(l: &r::Lease) -> se::Lease {
    se::Lease {
        key: l.key.clone(),
        resource: l.resource.clone(),
        fence: l.fence,
        holder: l.holder.clone(),
        until: l.until,
    }
}

pub fn lease_out(l: se::Lease) -> r::Lease {
    r::Lease {
        key: l.key,
        resource: l.resource,
        fence: l.fence,
        holder: l.holder,
        until: l.until,
    }
}

pub fn acquired_out(a: se::Acquired) -> r::Acquired {
    match a {
        se::Acquired::Granted(l) => r::Acquired::Granted(lease_out(l)),
        se::Acquired::Replayed(b) => r::Acquired::Replayed(b),
        se::Acquired::Uncertain(m) => r::Acquired::Uncertain(m),
        se::Acquired::InFlight => r::Acquired::InFlight,
        se::Acquired::Contended(u) => r::Acquired::Contended(u),
    }
}

pub fn resolution_in(x: &r::Resolution) -> se::Resolution {
    se::Resolution {
        applied: x.applied,
        result: x.result.clone(),
        force_retryable: x.force_retryable,
        claim: x.claim.clone(),
    }
}

pub fn resolved_out(x: se::Resolved) -> r::Resolved {
    match x {
        se::Resolved::Replayed(b) => r::Resolved::Replayed(b),
        se::Resolved::Cleared => r::Resolved::Cleared,
    }
}

pub fn state_in(s: r::TaskState) -> tb::State {
    match s {
        r::TaskState::Open => tb::State::Open,
        r::TaskState::Claimed => tb::State::Claimed,
        r::TaskState::Done => tb::State::Done,
        r::TaskState::Failed => tb::State::Failed,
    }
}

fn state_out(s: tb::State) -> r::TaskState {
    match s {
        tb::State::Open => r::TaskState::Open,
        tb::State::Claimed => r::TaskState::Claimed,
        tb::State::Done => r::TaskState::Done,
        tb::State::Failed => r::TaskState::Failed,
    }
}

pub fn seed_in(s: &r::TaskSeed) -> tb::TaskSeed {
    tb::TaskSeed {
        id: s.id.clone(),
        title: s.title.clone(),
        deps: s.deps.clone(),
        state: s.state.map(state_in),
    }
}

pub fn task_out(t: tb::Task) -> r::Task {
    r::Task {
        id: t.id,
        title: t.title,
        deps: t.deps,
        state: state_out(t.state),
        owner: t.owner,
        token: t.token,
        until: t.until,
        fence: t.fence,
    }
}

pub fn task_page_out(p: tb::TaskPage) -> r::TaskPage {
    r::TaskPage {
        items: p.items.into_iter().map(task_out).collect(),
        next: p.next,
    }
}

pub fn key_state_in(s: r::KeyState) -> se::KeyState {
    match s {
        r::KeyState::Cleared => se::KeyState::Cleared,
        r::KeyState::InFlight => se::KeyState::InFlight,
        r::KeyState::Uncertain => se::KeyState::Uncertain,
        r::KeyState::Completed => se::KeyState::Completed,
    }
}

fn key_state_out(s: se::KeyState) -> r::KeyState {
    match s {
        se::KeyState::Cleared => r::KeyState::Cleared,
        se::KeyState::InFlight => r::KeyState::InFlight,
        se::KeyState::Uncertain => r::KeyState::Uncertain,
        se::KeyState::Completed => r::KeyState::Completed,
    }
}

pub fn key_info_out(i: se::KeyInfo) -> r::KeyInfo {
    r::KeyInfo {
        key: i.key,
        state: key_state_out(i.state),
        retry_safety: match i.retry_safety {
            se::RetrySafety::Safe => r::RetrySafety::Safe,
            se::RetrySafety::Unsafe => r::RetrySafety::Unsafe,
        },
        fingerprint: i.fingerprint,
        resource: i.resource,
        until: i.until,
        reason: i.reason,
        completed_at: i.completed_at,
        reconciling_until: i.reconciling_until,
    }
}

pub fn key_page_out(p: se::KeyPage) -> r::KeyPage {
    r::KeyPage {
        items: p.items.into_iter().map(key_info_out).collect(),
        next: p.next,
    }
}
