//! Calls outside SPEC 8's limits, which every binding must refuse with
//! `invalid-input` before anything else (the model answers
//! [`Call::Invalid`] with that without looking further).
use gak::{Action, Outcome, Resolution, Snapshot, Status, TaskSeed};

use super::answer::LeaseV;
use super::call::Call;
use super::{AGENTS, GROUPS, KEYS, MAX_TTL, RESOURCES, RUNS, TASKS};

/// How many kinds of invalid input [`invalid_call`] makes.
pub const INVALID_CALLS: u8 = 29;

/// Inputs outside SPEC 8's limits (ids 1-256 bytes, non-empty status,
/// reason <= 4 KiB, results <= 1 MiB, ttl 1 ms..1 year, numbers < 2^53,
/// fields without duplicate keys, seeds without duplicates or `claimed`;
/// SPEC 10: batch limits 1-1000, complete-batch items 1-1000 with distinct
/// ids, group limits 1-100,000, max-attempts 1-1000, retry-after up to a
/// year, no seeded `dead`, group ids 1-256 bytes).
pub fn invalid_call<T: Clone>(which: u8, action: Action, lease: LeaseV<T>) -> Call<T> {
    const TOO_BIG: u64 = 1 << 53;
    let long = "x".repeat(257);
    let snap = |seq, status: &str, fields: Vec<(String, String)>| Snapshot {
        run_id: RUNS[0].into(),
        seq,
        fence: None,
        status: status.into(),
        done: vec![],
        fields,
    };
    let pair = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    match which {
        0 => Call::Claim {
            id: String::new(),
            agent: AGENTS[0].into(),
            ttl: 50,
        },
        1 => Call::Claim {
            id: TASKS[0].into(),
            agent: long,
            ttl: 50,
        },
        2 => Call::Acquire {
            action: Action::new("", RESOURCES[0]),
            ttl: 50,
        },
        3 => Call::Mark {
            action,
            lease,
            reason: "r".repeat(4097),
        },
        4 => Call::Save(snap(1, "", vec![])),
        5 => Call::Save(snap(1, "ok", vec![pair("a", "1"), pair("a", "2")])),
        6 => Call::Save(snap(TOO_BIG, "ok", vec![])),
        7 => Call::Commit {
            run: RUNS[0].into(),
            step: None,
            fence: TOO_BIG,
            outcome: Outcome {
                status: Status::Succeeded,
                result: vec![],
            },
        },
        8 => Call::Acquire {
            action: Action::new(KEYS[0], RESOURCES[0]),
            ttl: MAX_TTL + 1,
        },
        9 => Call::Seed(vec![TaskSeed::new("")]),
        10 => Call::Complete {
            action,
            lease,
            result: vec![0; (1 << 20) + 1],
        },
        11 => Call::Sink {
            resource: RESOURCES[0].into(),
            presented: TOO_BIG,
            fail: false,
            marker: "too big".into(),
        },
        12 => Call::Begin {
            action: Action::new(&long, RESOURCES[0]),
            ttl: 50,
        },
        13 => Call::Resolve {
            action: Action::new(KEYS[0], RESOURCES[0]),
            resolution: Resolution {
                applied: true,
                result: Some(vec![0; (1 << 20) + 1]),
                force_retryable: false,
                claim: None,
            },
        },
        14 => Call::Seed(vec![TaskSeed::new(TASKS[0]).deps(&[""])]),
        16 => Call::ClaimBatch {
            agent: AGENTS[0].into(),
            ttl: 50,
            limit: 0,
        },
        17 => Call::ClaimBatch {
            agent: AGENTS[0].into(),
            ttl: 50,
            limit: 1001,
        },
        18 => Call::ClaimNext {
            agent: AGENTS[0].into(),
            ttl: 0,
        },
        19 => Call::CompleteBatch { items: vec![] },
        20 => Call::CompleteBatch {
            items: vec![
                (TASKS[0].into(), lease.holder.clone()),
                (TASKS[0].into(), lease.holder.clone()),
            ],
        },
        21 => Call::Fail {
            id: TASKS[0].into(),
            token: lease.holder.clone(),
            reason: "r".repeat(4097),
            retry_after: None,
        },
        22 => Call::Fail {
            id: TASKS[0].into(),
            token: lease.holder.clone(),
            reason: "r".into(),
            retry_after: Some(MAX_TTL + 1),
        },
        23 => Call::SetGroupLimit {
            group: GROUPS[0].into(),
            limit: Some(0),
        },
        24 => Call::SetGroupLimit {
            group: GROUPS[0].into(),
            limit: Some(100_001),
        },
        25 => Call::Seed(vec![TaskSeed::new(TASKS[0]).max_attempts(0)]),
        26 => Call::Seed(vec![TaskSeed {
            state: Some(gak::TaskState::Dead),
            ..TaskSeed::new(TASKS[0])
        }]),
        27 => Call::Seed(vec![TaskSeed::new(TASKS[0]).group("")]),
        28 => Call::GetGroup(String::new()),
        _ => Call::Commit {
            run: RUNS[0].into(),
            step: Some(String::new()),
            fence: 0,
            outcome: Outcome {
                status: Status::Failed,
                result: vec![],
            },
        },
    }
}
