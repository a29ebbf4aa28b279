//! Field-by-field conversions between the WIT types and the rules' types.
use crate::exports::gak::kernel::{checkpoint, commitgate, sideeffect, taskboard};
use crate::gak::kernel::{store, types::Error};
use gak_rules as rules;

pub fn table(t: rules::Table) -> store::Table {
    match t {
        rules::Table::Snapshots => store::Table::Snapshots,
        rules::Table::Outcomes => store::Table::Outcomes,
        rules::Table::Actions => store::Table::Actions,
        rules::Table::Resources => store::Table::Resources,
        rules::Table::Sinks => store::Table::Sinks,
        rules::Table::Tasks => store::Table::Tasks,
        rules::Table::Indexes => store::Table::Indexes,
        rules::Table::Meta => store::Table::Meta,
    }
}

pub fn fault(e: store::StoreError) -> rules::StoreFault {
    match e {
        store::StoreError::Conflict(m) => rules::StoreFault::Conflict(m),
        store::StoreError::Failure(m) => rules::StoreFault::Failure(m),
    }
}

pub fn error(e: rules::Error) -> Error {
    use rules::Error as R;
    match e {
        R::NotFound => Error::NotFound,
        R::StaleSeq => Error::StaleSeq,
        R::Terminal => Error::Terminal,
        R::InvalidPlan(m) => Error::InvalidPlan(m),
        R::FenceStale => Error::FenceStale,
        R::AlreadyCommitted => Error::AlreadyCommitted,
        R::NotHolder => Error::NotHolder,
        R::ResourceMismatch => Error::ResourceMismatch,
        R::LeaseExpired => Error::LeaseExpired,
        R::ReconcileTaken => Error::ReconcileTaken,
        R::NotUncertain => Error::NotUncertain,
        R::UnsafeNotRetryable => Error::UnsafeNotRetryable,
        R::KeyReused => Error::KeyReused,
        R::WriteFailed => Error::WriteFailed,
        R::Taken => Error::Taken,
        R::DepsPending => Error::DepsPending,
        R::LeaseLost => Error::LeaseLost,
        R::InvalidInput(m) => Error::InvalidInput(m),
        R::Storage(m) => Error::Storage(m.message().to_owned()),
        // `rules::Error` is non_exhaustive for the host's sake; a new variant
        // must be added to the WIT first.
        other => Error::Storage(format!("unmapped error {other}")),
    }
}

pub fn snapshot_in(s: checkpoint::Snapshot) -> rules::Snapshot {
    rules::Snapshot {
        run_id: s.run_id,
        seq: s.seq,
        fence: s.fence,
        status: s.status,
        done: s.done,
        fields: s.fields,
    }
}

pub fn snapshot_out(s: rules::Snapshot) -> checkpoint::Snapshot {
    checkpoint::Snapshot {
        run_id: s.run_id,
        seq: s.seq,
        fence: s.fence,
        status: s.status,
        done: s.done,
        fields: s.fields,
    }
}

pub fn outcome_in(o: commitgate::Outcome) -> rules::Outcome {
    rules::Outcome {
        status: match o.status {
            commitgate::Status::Succeeded => rules::Status::Succeeded,
            commitgate::Status::Failed => rules::Status::Failed,
        },
        result: o.result,
    }
}

pub fn outcome_out(o: rules::Outcome) -> commitgate::Outcome {
    commitgate::Outcome {
        status: match o.status {
            rules::Status::Succeeded => commitgate::Status::Succeeded,
            rules::Status::Failed => commitgate::Status::Failed,
        },
        result: o.result,
    }
}

pub fn action_in(a: sideeffect::Action) -> rules::Action {
    rules::Action {
        key: a.key,
        resource: a.resource,
        retry_safety: match a.retry_safety {
            sideeffect::RetrySafety::Safe => rules::RetrySafety::Safe,
            sideeffect::RetrySafety::Unsafe => rules::RetrySafety::Unsafe,
        },
        fingerprint: a.fingerprint,
    }
}

pub fn lease_in(l: sideeffect::Lease) -> rules::Lease {
    rules::Lease {
        key: l.key,
        resource: l.resource,
        fence: l.fence,
        holder: l.holder,
        until: l.until,
    }
}

pub fn lease_out(l: rules::Lease) -> sideeffect::Lease {
    sideeffect::Lease {
        key: l.key,
        resource: l.resource,
        fence: l.fence,
        holder: l.holder,
        until: l.until,
    }
}

pub fn acquired_out(a: rules::Acquired) -> sideeffect::Acquired {
    match a {
        rules::Acquired::Granted(l) => sideeffect::Acquired::Granted(lease_out(l)),
        rules::Acquired::Replayed(r) => sideeffect::Acquired::Replayed(r),
        rules::Acquired::Uncertain(r) => sideeffect::Acquired::Uncertain(r),
        rules::Acquired::InFlight => sideeffect::Acquired::InFlight,
        rules::Acquired::Contended(u) => sideeffect::Acquired::Contended(u),
        // `Acquired` is non_exhaustive for the host's users; a new outcome
        // must be added to the WIT (and here) in the same change, so this
        // arm is unreachable in any build that compiles.
        _ => unreachable!("an acquire outcome the WIT does not know"),
    }
}

pub fn state_in(s: taskboard::State) -> rules::TaskState {
    match s {
        taskboard::State::Open => rules::TaskState::Open,
        taskboard::State::Claimed => rules::TaskState::Claimed,
        taskboard::State::Done => rules::TaskState::Done,
        taskboard::State::Failed => rules::TaskState::Failed,
    }
}

fn state_out(s: rules::TaskState) -> taskboard::State {
    match s {
        rules::TaskState::Open => taskboard::State::Open,
        rules::TaskState::Claimed => taskboard::State::Claimed,
        rules::TaskState::Done => taskboard::State::Done,
        rules::TaskState::Failed => taskboard::State::Failed,
    }
}

pub fn seed_in(s: taskboard::TaskSeed) -> rules::TaskSeed {
    rules::TaskSeed {
        id: s.id,
        title: s.title,
        deps: s.deps,
        state: s.state.map(state_in),
    }
}

pub fn task_out(t: rules::Task) -> taskboard::Task {
    taskboard::Task {
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

pub fn key_state_in(s: sideeffect::KeyState) -> rules::KeyState {
    match s {
        sideeffect::KeyState::Cleared => rules::KeyState::Cleared,
        sideeffect::KeyState::InFlight => rules::KeyState::InFlight,
        sideeffect::KeyState::Uncertain => rules::KeyState::Uncertain,
        sideeffect::KeyState::Completed => rules::KeyState::Completed,
    }
}

fn key_state_out(s: rules::KeyState) -> sideeffect::KeyState {
    match s {
        rules::KeyState::Cleared => sideeffect::KeyState::Cleared,
        rules::KeyState::InFlight => sideeffect::KeyState::InFlight,
        rules::KeyState::Uncertain => sideeffect::KeyState::Uncertain,
        rules::KeyState::Completed => sideeffect::KeyState::Completed,
    }
}

pub fn key_info_out(i: rules::KeyInfo) -> sideeffect::KeyInfo {
    sideeffect::KeyInfo {
        key: i.key,
        state: key_state_out(i.state),
        retry_safety: match i.retry_safety {
            rules::RetrySafety::Safe => sideeffect::RetrySafety::Safe,
            rules::RetrySafety::Unsafe => sideeffect::RetrySafety::Unsafe,
        },
        fingerprint: i.fingerprint,
        resource: i.resource,
        until: i.until,
        reason: i.reason,
        completed_at: i.completed_at,
        reconciling_until: i.reconciling_until,
    }
}
