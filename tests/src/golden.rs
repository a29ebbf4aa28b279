//! Data survives upgrades: golden databases written by stored format 1.
//!
//! [`write()`] puts a store in every state format 1 can hold (open, claimed,
//! done and failed tasks; cleared, in-flight, expired, uncertain and
//! completed keys; a live reconcile claim; resources, a sink and its
//! downstream write; snapshots, step and run outcomes; every index kind; the
//! board's meta record). `gak-golden` (`src/bin/golden.rs`) ran it once
//! under gak:kernel 0.2.0 and the result is checked in under
//! `tests/golden/`; `tests/tests/golden.rs` opens a copy with the current
//! kernel and [`replay`]s a fixed scenario on it, and on another copy
//! continues it with the job queue's calls ([`replay_queue`], format 2).
//! A change that cannot read format 1 fails there.
//!
//! [`write_queue`] adds the states only format 2 can hold (priorities,
//! delays, failed and dead tasks, groups and their limits); the format test
//! (`tests/tests/format.rs`) checks what it writes with [`queue_coverage`].
use std::collections::BTreeSet;

use gak::blocking::Kernel;
use gak::{
    Acquired, Action, Completion, CompletionAnswer, CompletionResult, Error, GroupInfo, Lease,
    ManualClock, Outcome, Pruned, Resolution, Resolved, Snapshot, Status, StepDef, Task, TaskSeed,
    TaskState,
};
use serde_json::{Value, json};

/// The generator's clock: every time stored in the golden databases is
/// relative to it.
pub const T0: u64 = 1_700_000_000_000;
const MINUTE: u64 = 60_000;
/// When the replay runs: an hour after the golden data was written.
pub const REPLAY_AT: u64 = T0 + 60 * MINUTE;
const DAY: u64 = 24 * 60 * MINUTE;

/// The stored format the golden files hold.
pub const GOLDEN_FORMAT: u64 = 1;
/// The stored format the current kernel writes (`guest/src/format.rs`).
pub const FORMAT: u64 = 2;

/// The capabilities the generator was handed (the store keeps only their
/// digests): a replay presents them, as a worker that survived the upgrade
/// would.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// The token of task `c`'s live claim.
    pub claim_token: String,
    /// The token that completed task `g`.
    pub done_token: String,
    /// The lease of key `k-inflight` (live).
    pub lease: Lease,
    /// The live reconcile claim on key `k-uncertain`.
    pub reconcile_claim: String,
}

impl Capabilities {
    /// As JSON, for `tests/golden/capabilities.json`.
    pub fn to_json(&self) -> Value {
        json!({
            "claim-token": self.claim_token,
            "done-token": self.done_token,
            "lease": {
                "key": self.lease.key,
                "resource": self.lease.resource,
                "fence": self.lease.fence,
                "holder": self.lease.holder,
                "until": self.lease.until,
            },
            "reconcile-claim": self.reconcile_claim,
        })
    }

    /// From [`Capabilities::to_json`]'s output.
    pub fn from_json(v: &Value) -> Capabilities {
        let s = |v: &Value| v.as_str().expect("a string").to_owned();
        let l = &v["lease"];
        Capabilities {
            claim_token: s(&v["claim-token"]),
            done_token: s(&v["done-token"]),
            lease: Lease {
                key: s(&l["key"]),
                resource: s(&l["resource"]),
                fence: l["fence"].as_u64().expect("fence"),
                holder: s(&l["holder"]),
                until: l["until"].as_u64().expect("until"),
            },
            reconcile_claim: s(&v["reconcile-claim"]),
        }
    }
}

fn uncertain_action() -> Action {
    Action::new("k-uncertain", "r-e")
        .unsafe_to_retry()
        .with_fingerprint("fp-1")
}

fn snap(run: &str, seq: u64, fence: u64, done: &[&str]) -> Snapshot {
    Snapshot {
        run_id: run.into(),
        seq,
        fence: Some(fence),
        status: "running".into(),
        done: done.iter().map(|d| (*d).to_owned()).collect(),
        fields: vec![("attempt".into(), "1".into())],
    }
}

fn succeeded(result: &[u8]) -> Outcome {
    Outcome {
        status: Status::Succeeded,
        result: result.to_vec(),
    }
}

fn grant(kernel: &Kernel, action: &Action, ttl: u64) -> Lease {
    match kernel.sideeffect().acquire(action, ttl) {
        Ok(Acquired::Granted(lease)) => lease,
        other => panic!("{}: {other:?}", action.key),
    }
}

/// Write the golden state on a fresh store whose clock reads [`T0`].
pub fn write(kernel: &Kernel) -> Capabilities {
    let tb = kernel.taskboard();
    tb.seed(&[
        TaskSeed::new("a").title("Open"),
        TaskSeed::new("b").title("Waits for a").deps(&["a"]),
        TaskSeed::new("c").title("Claimed"),
        TaskSeed {
            state: Some(TaskState::Failed),
            ..TaskSeed::new("d").title("Failed")
        },
        TaskSeed {
            state: Some(TaskState::Done),
            ..TaskSeed::new("e").title("Seeded done")
        },
        TaskSeed::new("f").title("Claim expires"),
        TaskSeed::new("g").title("Done by a worker"),
    ])
    .unwrap();
    let claim_token = tb.claim("c", "w-c", DAY).unwrap().token.unwrap();
    tb.claim("f", "w-f", 10 * MINUTE).unwrap();
    let done_token = tb.claim("g", "w-g", DAY).unwrap().token.unwrap();
    tb.complete("g", &done_token).unwrap();

    let se = kernel.sideeffect();
    let cleared = Action::new("k-cleared", "r-a");
    let lease = grant(kernel, &cleared, DAY);
    se.abandon(&cleared, &lease, "refused by the remote")
        .unwrap();
    let completed = Action::new("k-completed", "r-b");
    let lease = grant(kernel, &completed, DAY);
    se.complete(&completed, &lease, b"receipt-1").unwrap();
    let in_flight = grant(kernel, &Action::new("k-inflight", "r-c"), DAY);
    grant(kernel, &Action::new("k-expired", "r-d"), 10 * MINUTE);
    let uncertain = uncertain_action();
    let lease = grant(kernel, &uncertain, DAY);
    se.mark_uncertain(&uncertain, &lease, "smtp timeout")
        .unwrap();
    se.release(&uncertain, &lease).unwrap();
    let reconcile_claim = se.begin_reconcile(&uncertain, DAY).unwrap().claim;
    se.write_fenced("ledger", 3, |d| d.put("ledger", "entry-3"))
        .unwrap();

    let ck = kernel.checkpoint();
    let gate = kernel.commitgate();
    ck.save_if_newer(&snap("run-live", 1, 1, &[])).unwrap();
    ck.save_if_newer(&snap("run-live", 2, 1, &["s1"])).unwrap();
    gate.commit("run-live", Some("s1"), 1, &succeeded(b"s1-out"))
        .unwrap();
    ck.save_if_newer(&snap("run-done", 1, 2, &["s1"])).unwrap();
    gate.commit("run-done", Some("s1"), 2, &succeeded(b"s1-out"))
        .unwrap();
    gate.commit("run-done", None, 2, &succeeded(b"final"))
        .unwrap();
    Capabilities {
        claim_token,
        done_token,
        lease: in_flight,
        reconcile_claim,
    }
}

/// Err names what the golden rows (table, key, value) do not cover, or
/// the values that are not of stored format `format`.
pub fn coverage(rows: &[(String, String, String)], format: u64) -> Result<(), String> {
    let mut missing = Vec::new();
    for table in gak::store::TABLES {
        if !rows.iter().any(|(t, _, _)| t == table) {
            missing.push(format!("table {table}"));
        }
    }
    for prefix in ["q/", "ts/", "td/", "ks/", "rt/"] {
        if !rows
            .iter()
            .any(|(t, k, _)| t == "indexes" && k.starts_with(prefix))
        {
            missing.push(format!("index {prefix}"));
        }
    }
    let values: Vec<(String, Value)> = rows
        .iter()
        .filter(|(t, _, _)| t != "downstream")
        .map(|(t, _, v)| (t.clone(), serde_json::from_str(v).expect("a JSON value")))
        .collect();
    for (table, v) in &values {
        if v["v"] != format {
            missing.push(format!("a {table} value without v: {format}: {v}"));
        }
    }
    let states = |table: &str| -> BTreeSet<String> {
        values
            .iter()
            .filter(|(t, _)| t == table)
            .filter_map(|(_, v)| v["state"].as_str().map(str::to_owned))
            .collect()
    };
    for state in ["open", "claimed", "done", "failed"] {
        if !states("tasks").contains(state) {
            missing.push(format!("a {state} task"));
        }
    }
    for state in ["cleared", "in-flight", "uncertain", "completed"] {
        if !states("actions").contains(state) {
            missing.push(format!("a {state} key"));
        }
    }
    let has = |table: &str, field: &str| {
        values
            .iter()
            .any(|(t, v)| t == table && v.get(field).is_some_and(|f| !f.is_null()))
    };
    for (table, field) in [
        ("actions", "reconcile"),
        ("tasks", "token-sha256"),
        ("tasks", "completed-by-sha256"),
        ("resources", "hold-until"),
        ("outcomes", "step"),
        ("meta", "next-seq"),
    ] {
        if !has(table, field) {
            missing.push(format!("{table} with {field}"));
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("the golden data lacks: {}", missing.join(", ")))
    }
}

/// Continue the golden store with the current kernel, whose clock reads
/// [`REPLAY_AT`]: resume a run, replay a key, take over a claim, resolve an
/// `uncertain`, claim-next, prune, and present the capabilities handed out
/// before the upgrade.
pub fn replay(kernel: &Kernel, clock: &ManualClock, caps: &Capabilities) {
    assert_eq!(gak::Clock::now(clock), REPLAY_AT);
    let (ck, gate, se, tb) = (
        kernel.checkpoint(),
        kernel.commitgate(),
        kernel.sideeffect(),
        kernel.taskboard(),
    );

    // Resume a run: the trusted steps are skipped, the owner fence holds.
    let live = ck.load("run-live").unwrap();
    assert_eq!(live, snap("run-live", 2, 1, &["s1"]));
    let steps = [
        StepDef::new("s1", &[]),
        StepDef::new("s2", &["s1"]),
        StepDef::new("s3", &["s2"]),
    ];
    let plan = ck.build_plan(&steps, Some(&live)).unwrap();
    assert_eq!(
        (plan.skip, plan.run),
        (
            vec!["s1".to_owned()],
            vec!["s2".to_owned(), "s3".to_owned()]
        )
    );
    let next = snap("run-live", 3, 1, &["s1", "s2"]);
    ck.save_if_newer(&next).unwrap();
    assert_eq!(ck.save_if_newer(&next), Err(Error::StaleSeq));
    assert_eq!(
        ck.save_if_newer(&snap("run-live", 4, 0, &[])),
        Err(Error::FenceStale)
    );
    assert_eq!(gate.read("run-live", Some("s1")), Ok(succeeded(b"s1-out")));
    // A finished run stays finished.
    assert_eq!(
        ck.save_if_newer(&snap("run-done", 5, 2, &[])),
        Err(Error::Terminal)
    );
    assert_eq!(gate.read("run-done", None), Ok(succeeded(b"final")));
    let failed = Outcome {
        status: Status::Failed,
        result: vec![],
    };
    assert_eq!(
        gate.commit("run-done", None, 2, &failed),
        Err(Error::AlreadyCommitted)
    );

    // Replay a key; an expired intent is uncertain; a cleared key is
    // granted again above the resource's old fence.
    let completed = Action::new("k-completed", "r-b");
    assert_eq!(
        se.acquire(&completed, DAY),
        Ok(Acquired::Replayed(b"receipt-1".to_vec()))
    );
    assert_eq!(
        se.acquire(&Action::new("k-expired", "r-d"), DAY),
        Ok(Acquired::Uncertain("intent-expired".into()))
    );
    assert_eq!(
        grant(kernel, &Action::new("k-cleared", "r-a"), DAY).fence,
        2
    );
    // The live lease from before the upgrade still holds, and its holder
    // records the verdict.
    let in_flight = Action::new("k-inflight", "r-c");
    assert_eq!(se.acquire(&in_flight, DAY), Ok(Acquired::InFlight));
    assert_eq!(
        se.complete(&in_flight, &caps.lease, b"late"),
        Ok(b"late".to_vec())
    );
    assert_eq!(
        se.acquire(&in_flight, DAY),
        Ok(Acquired::Replayed(b"late".to_vec()))
    );

    // Resolve an uncertain key under the reconcile claim from before.
    let uncertain = uncertain_action();
    assert_eq!(
        se.acquire(&uncertain, DAY),
        Ok(Acquired::Uncertain("smtp timeout".into()))
    );
    assert_eq!(
        se.begin_reconcile(&uncertain, DAY).map(drop),
        Err(Error::ReconcileTaken)
    );
    let key = se.get("k-uncertain").unwrap();
    assert_eq!(key.fingerprint.as_deref(), Some("fp-1"));
    assert_eq!(key.reconciling_until, Some(T0 + DAY));
    let verdict = Resolution {
        applied: true,
        result: Some(b"sent".to_vec()),
        force_retryable: false,
        claim: Some(caps.reconcile_claim.clone()),
    };
    assert_eq!(
        se.resolve_uncertain(&uncertain, &verdict),
        Ok(Resolved::Replayed(b"sent".to_vec()))
    );
    assert_eq!(
        se.acquire(&uncertain, DAY),
        Ok(Acquired::Replayed(b"sent".to_vec()))
    );

    // The fenced sink kept its fence and its downstream write.
    assert_eq!(se.sink_seen("ledger"), Ok(3));
    let stale = se.write_fenced("ledger", 2, |d| d.put("ledger", "stale"));
    assert!(
        matches!(stale, Err(gak::SinkError::Kernel(Error::FenceStale))),
        "{stale:?}"
    );
    assert_eq!(
        kernel.with_downstream(|d| d.get("ledger")),
        Ok(Some("entry-3".into()))
    );

    // Tasks: the live claim holds and its token still works; the expired
    // one is taken over; the completing token re-completes.
    assert_eq!(tb.claim("c", "w2", DAY).map(drop), Err(Error::Taken));
    let renewed = tb.renew("c", &caps.claim_token, DAY).unwrap();
    assert_eq!((renewed.fence, renewed.until), (1, Some(REPLAY_AT + DAY)));
    tb.release("c", &caps.claim_token).unwrap();
    let taken_over = tb.claim("f", "w2", DAY).unwrap();
    assert_eq!(
        (taken_over.owner.as_deref(), taken_over.fence),
        (Some("w2"), 2)
    );
    tb.complete("g", &caps.done_token).unwrap();
    assert_eq!(tb.claim("b", "w2", DAY).map(drop), Err(Error::DepsPending));
    assert_eq!(tb.claim("e", "w2", DAY).map(drop), Err(Error::Terminal));
    // claim-next: the first-seeded ready task.
    let next = tb.claim_next("w3", DAY).unwrap().expect("a ready task");
    assert_eq!((next.id.as_str(), next.fence), ("a", 1));
    let next = tb.claim_next("w3", DAY).unwrap().expect("a ready task");
    assert_eq!(next.id, "c");

    // Prune what finished before the upgrade: the completed key, the two
    // done tasks nobody waits for, the finished run.
    let pruned = kernel.retention().prune(T0 + 1, 100).unwrap();
    assert_eq!(
        pruned,
        Pruned {
            removed_keys: 1,
            removed_tasks: 2,
            removed_runs: 1,
            more: false,
        }
    );
    assert_eq!(gate.read("run-done", None), Err(Error::NotFound));
    assert_eq!(tb.get("g").map(drop), Err(Error::NotFound));
    // A pruned key runs as new, above its resource's fence.
    assert_eq!(grant(kernel, &completed, DAY).fence, 2);
    assert_eq!(
        crate::board(kernel)
            .unwrap()
            .iter()
            .map(|t| t.id.as_str())
            .collect::<Vec<_>>(),
        ["a", "b", "c", "d", "f"]
    );
}

// ------------------------------------------------------------ format 2

/// The group [`write_queue`] fills to its limit, and the one it leaves room in.
const FULL_GROUP: &str = "grp-full";
const ROOMY_GROUP: &str = "grp-roomy";

/// Put the store, whose clock reads [`T0`], in the states only format 2 can
/// hold: open tasks of positive and negative priority, a delayed task, a
/// failed task backing off (`not-before`, `last-error`, `failed-by`), a
/// dead task, a full group (its live claim, its limit and a task waiting in
/// the group's queue) and a group with a free slot (its head in the claim
/// queue). Task ids differ from [`write`]'s, so both can run on one store.
/// `Job_7`'s id is a key of its group record's `claims`: ids are data, not
/// field names.
pub fn write_queue(kernel: &Kernel) {
    let tb = kernel.taskboard();
    tb.set_group_limit(FULL_GROUP, Some(1)).unwrap();
    tb.set_group_limit(ROOMY_GROUP, Some(3)).unwrap();
    tb.seed(&[
        TaskSeed::new("q-hi").title("Priority 7").priority(7),
        TaskSeed::new("q-lo").title("Priority -3").priority(-3),
        TaskSeed::new("q-later")
            .title("Scheduled")
            .priority(2)
            .not_before(T0 + DAY),
        TaskSeed::new("q-failed")
            .title("Backing off")
            .max_attempts(3),
        TaskSeed::new("q-dead").title("Poison").max_attempts(1),
        TaskSeed::new("q-g1")
            .title("Holds the slot")
            .group(FULL_GROUP),
        TaskSeed::new("q-g2")
            .title("Waits for a slot")
            .group(FULL_GROUP),
        TaskSeed::new("Job_7")
            .title("Claimed in a group")
            .group(ROOMY_GROUP),
        TaskSeed::new("q-p2").title("Group head").group(ROOMY_GROUP),
    ])
    .unwrap();
    let token = |id: &str| tb.claim(id, "w-q", DAY).unwrap().token.unwrap();
    let failing = token("q-failed");
    let failed = tb
        .fail("q-failed", &failing, "smtp 421", Some(5 * MINUTE))
        .unwrap();
    assert_eq!(
        (failed.state, failed.not_before, failed.attempts),
        (TaskState::Failed, Some(T0 + 5 * MINUTE), 1)
    );
    let poison = token("q-dead");
    let dead = tb.fail("q-dead", &poison, "bad payload", None).unwrap();
    assert_eq!(dead.state, TaskState::Dead);
    token("q-g1");
    token("Job_7");
    assert_eq!(
        tb.claim("q-g2", "w-q", DAY).map(drop),
        Err(Error::GroupFull)
    );
    assert_eq!(
        tb.get_group(FULL_GROUP),
        Ok(GroupInfo { limit: 1, live: 1 })
    );
}

/// Err names the format-2 states [`write_queue`] should have written and
/// the rows (table, key, value) lack.
pub fn queue_coverage(rows: &[(String, String, String)]) -> Result<(), String> {
    let mut missing = Vec::new();
    for prefix in ["q/", "qh/", "ql/", "qd/", "qg/", "qc/"] {
        if !rows
            .iter()
            .any(|(t, k, _)| t == "indexes" && k.starts_with(prefix))
        {
            missing.push(format!("index {prefix}"));
        }
    }
    let values: Vec<(&str, &str, Value)> = rows
        .iter()
        .filter(|(t, _, _)| t != "downstream")
        .map(|(t, k, v)| {
            (
                t.as_str(),
                k.as_str(),
                serde_json::from_str(v).expect("a JSON value"),
            )
        })
        .collect();
    let has = |table: &str, field: &str| {
        values
            .iter()
            .any(|(t, _, v)| *t == table && v.get(field).is_some_and(|f| !f.is_null()))
    };
    for field in [
        "priority",
        "not-before",
        "max-attempts",
        "group",
        "attempts",
        "last-error",
        "failed-by-sha256",
        "dead-at",
        "entry",
    ] {
        if !has("tasks", field) {
            missing.push(format!("tasks with {field}"));
        }
    }
    if !values
        .iter()
        .any(|(t, _, v)| *t == "tasks" && v["state"] == "dead")
    {
        missing.push("a dead task".into());
    }
    if !values
        .iter()
        .any(|(t, k, v)| *t == "indexes" && k.starts_with("q/") && v.get("group").is_some())
    {
        missing.push("a group's head in the claim queue".into());
    }
    for field in ["limit", "claims", "head"] {
        if !values
            .iter()
            .any(|(t, k, v)| *t == "meta" && k.starts_with("group/") && v.get(field).is_some())
        {
            missing.push(format!("a group record with {field}"));
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("the format-2 data lacks: {}", missing.join(", ")))
    }
}

/// How [`replay_queue`] ends the claim on task `c` handed out before the
/// upgrade.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OldClaim {
    /// By `complete-batch`, with the token from before.
    Complete,
    /// By `fail`, with the token from before.
    Fail,
}

fn ids(tasks: &[Task]) -> Vec<&str> {
    tasks.iter().map(|t| t.id.as_str()).collect()
}

/// Continue the golden store (format 1) with the job queue's calls, clock
/// at [`REPLAY_AT`]: old tasks read with the new fields at their defaults;
/// `claim-next` and `claim-batch` take the old tasks in their old seed order
/// among new ones of other priorities, groups and delays; the claim handed
/// out before the upgrade ends by `complete-batch` or `fail`; `fail` and
/// `revive` work on old tasks; every value rewritten is format 2, every
/// value left alone stays format 1.
pub fn replay_queue(
    kernel: &Kernel,
    clock: &ManualClock,
    caps: &Capabilities,
    old_claim: OldClaim,
) {
    assert_eq!(gak::Clock::now(clock), REPLAY_AT);
    let tb = kernel.taskboard();
    let before = kernel.dump().unwrap();

    // Format-1 tasks read with the new fields at their defaults; reading
    // writes nothing.
    let old = crate::board(kernel).unwrap();
    assert_eq!(ids(&old), ["a", "b", "c", "d", "e", "f", "g"]);
    for t in &old {
        assert_eq!(
            (
                t.priority,
                t.not_before,
                t.max_attempts,
                t.group.as_deref(),
                t.attempts,
                t.last_error.as_deref()
            ),
            (0, None, None, None, 0, None),
            "old task {}",
            t.id
        );
    }
    assert_eq!(tb.get("c").unwrap().owner.as_deref(), Some("w-c"));
    assert_eq!(tb.get_group("grp"), Err(Error::NotFound));
    assert_eq!(tb.revive("e").map(drop), Err(Error::NotDead));
    assert_eq!(kernel.dump().unwrap(), before, "a read wrote");

    // New tasks of other priorities, a delay and a group, seeded after
    // the old ones.
    tb.set_group_limit("grp", Some(1)).unwrap();
    tb.seed(&[
        TaskSeed::new("n-hi").priority(5),
        TaskSeed::new("n-mid"),
        TaskSeed::new("n-lo").priority(-5),
        TaskSeed::new("n-late")
            .priority(9)
            .not_before(REPLAY_AT + MINUTE),
        TaskSeed::new("n-g1").group("grp"),
        TaskSeed::new("n-g2").group("grp"),
    ])
    .unwrap();

    // Claim order: priority, then seed order — the old priority-0 tasks
    // (a, the failed d, f's expired claim taken over) before the new one,
    // c's live claim from before the upgrade passed over, b still waiting
    // for a, the full group's second task and the delayed one left alone.
    let first = tb.claim_next("w", DAY).unwrap().expect("a ready task");
    assert_eq!((first.id.as_str(), first.attempts), ("n-hi", 1));
    let batch = tb.claim_batch("w", DAY, 10).unwrap();
    assert_eq!(ids(&batch), ["a", "d", "f", "n-mid", "n-g1", "n-lo"]);
    for t in &batch {
        assert_eq!(
            (t.state, t.owner.as_deref(), t.until, t.attempts),
            (TaskState::Claimed, Some("w"), Some(REPLAY_AT + DAY), 1),
            "{}",
            t.id
        );
    }
    let fences: Vec<u64> = batch.iter().map(|t| t.fence).collect();
    assert_eq!(fences, [1, 1, 2, 1, 1, 1], "f was taken over above fence 1");
    let tokens: BTreeSet<&str> = batch.iter().map(|t| t.token.as_deref().unwrap()).collect();
    assert_eq!(tokens.len(), batch.len(), "tokens repeat");
    let token = |id: &str| -> String {
        batch
            .iter()
            .find(|t| t.id == id)
            .and_then(|t| t.token.clone())
            .unwrap()
    };
    assert_eq!(tb.claim_batch("w", DAY, 10), Ok(vec![]));
    assert_eq!(tb.get_group("grp"), Ok(GroupInfo { limit: 1, live: 1 }));
    assert_eq!(tb.claim("n-g2", "w", DAY).map(drop), Err(Error::GroupFull));
    assert_eq!(tb.claim("n-late", "w", DAY).map(drop), Err(Error::NotDue));
    assert_eq!(tb.claim("c", "w", DAY).map(drop), Err(Error::Taken));

    // The claim handed out before the upgrade ends with the new calls.
    let answer = |id: &str, answer| CompletionResult {
        id: id.into(),
        answer,
    };
    match old_claim {
        OldClaim::Complete => {
            let items = [
                Completion::new("c", &caps.claim_token),
                Completion::new("a", &token("a")),
                Completion::new("g", &caps.done_token),
                Completion::new("ghost", &"0".repeat(32)),
            ];
            assert_eq!(
                tb.complete_batch(&items),
                Ok(vec![
                    answer("c", CompletionAnswer::Completed),
                    answer("a", CompletionAnswer::Completed),
                    answer("g", CompletionAnswer::Completed),
                    answer("ghost", CompletionAnswer::NotFound),
                ])
            );
            assert_eq!(tb.get("c").unwrap().state, TaskState::Done);
        }
        OldClaim::Fail => {
            let failed = tb
                .fail("c", &caps.claim_token, "remote 503", Some(MINUTE))
                .unwrap();
            assert_eq!(
                (
                    failed.state,
                    failed.not_before,
                    failed.last_error.as_deref(),
                    failed.fence,
                    failed.attempts,
                    failed.owner.as_deref(),
                ),
                (
                    TaskState::Failed,
                    Some(REPLAY_AT + MINUTE),
                    Some("remote 503"),
                    1,
                    0,
                    None
                )
            );
            // Failing again with that token answers the task as it is.
            assert_eq!(
                tb.fail("c", &caps.claim_token, "remote 503", Some(MINUTE)),
                Ok(failed)
            );
            assert_eq!(
                tb.complete_batch(&[
                    Completion::new("c", &caps.claim_token),
                    Completion::new("a", &token("a")),
                ]),
                Ok(vec![
                    answer("c", CompletionAnswer::LeaseLost),
                    answer("a", CompletionAnswer::Completed),
                ])
            );
            assert_eq!(tb.claim("c", "w", DAY).map(drop), Err(Error::NotDue));
        }
    }
    // a is done, so b (seeded second, before every new task) is next.
    let next = tb.claim_next("w", DAY).unwrap().expect("b is ready");
    assert_eq!((next.id.as_str(), next.fence), ("b", 1));

    // fail and revive on old tasks. d fails without a delay and is ready
    // again; a dead task's revive keeps its place in the old seed order.
    let failed = tb.fail("d", &token("d"), "boom", None).unwrap();
    assert_eq!(
        (
            failed.state,
            failed.not_before,
            failed.last_error.as_deref()
        ),
        (TaskState::Failed, None, Some("boom"))
    );
    assert_eq!(tb.revive("d").map(drop), Err(Error::NotDead));
    // Re-seeding f (claimed by w) with a bound clears the claim, keeps its
    // fence and its place.
    tb.seed(&[TaskSeed::new("f").title("Claim expires").max_attempts(1)])
        .unwrap();
    let f = tb.get("f").unwrap();
    assert_eq!(
        (f.state, f.fence, f.attempts, f.max_attempts),
        (TaskState::Open, 2, 0, Some(1))
    );
    assert_eq!(
        tb.fail("f", &token("f"), "late", None).map(drop),
        Err(Error::LeaseLost)
    );
    let claimed = tb.claim_batch("w", DAY, 2).unwrap();
    assert_eq!(ids(&claimed), ["d", "f"]);
    let f_token = claimed[1].token.clone().unwrap();
    let dead = tb.fail("f", &f_token, "poison", Some(MINUTE)).unwrap();
    assert_eq!(
        (
            dead.state,
            dead.attempts,
            dead.last_error.as_deref(),
            dead.not_before
        ),
        (TaskState::Dead, 1, Some("poison"), None)
    );
    assert_eq!(tb.claim("f", "w", DAY).map(drop), Err(Error::Terminal));
    let revived = tb.revive("f").unwrap();
    assert_eq!(
        (
            revived.state,
            revived.attempts,
            revived.last_error.as_deref(),
            revived.fence,
            revived.max_attempts
        ),
        (TaskState::Open, 0, None, 3, Some(1))
    );
    let again = tb.claim_next("w", DAY).unwrap().expect("f is ready");
    assert_eq!((again.id.as_str(), again.fence), ("f", 4));

    // The delays come due: the delayed new task first (priority 9), then,
    // when it failed, the old claim's task in its old place.
    clock.set(REPLAY_AT + 2 * MINUTE).unwrap();
    let due = tb.claim_batch("w", DAY, 10).unwrap();
    match old_claim {
        OldClaim::Complete => assert_eq!(ids(&due), ["n-late"]),
        OldClaim::Fail => {
            assert_eq!(ids(&due), ["n-late", "c"]);
            assert_eq!((due[1].fence, due[1].attempts), (2, 1));
        }
    }

    // Every value rewritten is format 2; a value nothing touched stays as
    // format 1 wrote it.
    let after = kernel.dump().unwrap();
    let version = |text: &str| serde_json::from_str::<Value>(text).expect("JSON")["v"].clone();
    let mut rewritten = 0;
    for (table, key, value) in after.iter().filter(|(t, _, _)| t != "downstream") {
        let old = before
            .iter()
            .find(|(t, k, _)| t == table && k == key)
            .map(|(_, _, v)| v);
        if old == Some(value) {
            assert_eq!(
                version(value),
                1,
                "{table}/{key} untouched but not format 1"
            );
        } else {
            assert_eq!(version(value), 2, "{table}/{key} rewritten as {value}");
            rewritten += 1;
        }
    }
    assert!(rewritten > 20, "only {rewritten} values rewritten");
    let value = |table: &str, key: &str| {
        after
            .iter()
            .find(|(t, k, _)| t == table && k == key)
            .map(|(_, _, v)| v.clone())
            .unwrap_or_else(|| panic!("no {table}/{key}"))
    };
    for id in ["a", "b", "c", "d", "f"] {
        assert_eq!(version(&value("tasks", id)), 2, "task {id}");
    }
    assert_eq!(version(&value("tasks", "e")), 1, "untouched task e");
    assert_eq!(version(&value("meta", "taskboard")), 2);
    assert_eq!(version(&value("meta", "group/grp")), 2);
    // No format-1 claim-queue entry outlives its task's move.
    for (table, key, v) in &after {
        if table == "indexes" && (key.starts_with("q/") || key.starts_with("qc/")) {
            assert_eq!(version(v), 2, "{key} left over from format 1");
        }
    }
}

// ------------------------------------------------------------------ files

/// The golden files' folder.
pub fn dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("golden")
}

/// Make a SQLite file self-contained (its WAL checkpointed into it, journal
/// mode back to DELETE) so it can be copied and checked in alone.
pub fn seal_sqlite(path: &std::path::Path) {
    let conn = gak::rusqlite::Connection::open(path).expect("open the golden file");
    conn.pragma_update(None, "wal_checkpoint", "TRUNCATE")
        .expect("checkpoint");
    conn.pragma_update(None, "journal_mode", "DELETE")
        .expect("journal mode");
    conn.execute_batch("VACUUM").expect("vacuum");
}

/// The placeholder for the schema's name in the PostgreSQL dump.
pub const SCHEMA: &str = "{{schema}}";

fn sql_text(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A restore script of `schema` (which `kernel` uses): each table as the
/// catalogue describes it (`DROP TABLE IF EXISTS` + `CREATE TABLE`), then its
/// rows as `INSERT`s, one statement per line, the schema's name replaced by
/// [`SCHEMA`].
pub fn dump_postgres(kernel: &Kernel, schema: &str) -> String {
    let schema = schema.to_owned();
    kernel
        .with_downstream(move |d| {
            let mut out = format!(
                "-- gak stored format {FORMAT}: a PostgreSQL schema written by tests/src/bin/golden.rs\n",
            );
            let mut q = |sql: &str, params: &[&(dyn gak::tokio_postgres::types::ToSql + Sync)]| {
                d.postgres_query(sql, params).expect("postgres")
            };
            let tables = q(
                "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name",
                &[&schema],
            )?;
            for t in tables {
                let table = t[0].clone().expect("a name");
                let columns = q(
                    "SELECT column_name::text, data_type::text, coalesce(collation_name::text, ''), is_nullable::text \
                     FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position",
                    &[&schema, &table],
                )?;
                let key = q(
                    "SELECT k.column_name::text FROM information_schema.table_constraints c \
                     JOIN information_schema.key_column_usage k USING (constraint_schema, constraint_name) \
                     WHERE c.table_schema = $1 AND c.table_name = $2 AND c.constraint_type = 'PRIMARY KEY' ORDER BY k.ordinal_position",
                    &[&schema, &table],
                )?;
                let mut defs: Vec<String> = columns
                    .iter()
                    .map(|c| {
                        let get = |i: usize| c[i].clone().unwrap_or_default();
                        let mut def = format!("\"{}\" {}", get(0), get(1));
                        if !get(2).is_empty() {
                            def.push_str(&format!(" COLLATE \"{}\"", get(2)));
                        }
                        if get(3) == "NO" {
                            def.push_str(" NOT NULL");
                        }
                        def
                    })
                    .collect();
                let key: Vec<String> = key
                    .iter()
                    .map(|k| format!("\"{}\"", k[0].clone().unwrap_or_default()))
                    .collect();
                if !key.is_empty() {
                    defs.push(format!("PRIMARY KEY ({})", key.join(", ")));
                }
                let name = format!("\"{SCHEMA}\".\"{table}\"");
                out.push_str(&format!("DROP TABLE IF EXISTS {name}\n"));
                out.push_str(&format!("CREATE TABLE {name} ({})\n", defs.join(", ")));
                let names: Vec<String> = columns
                    .iter()
                    .map(|c| format!("\"{}\"", c[0].clone().unwrap_or_default()))
                    .collect();
                let select: Vec<String> = names.iter().map(|n| format!("{n}::text")).collect();
                let rows = q(
                    &format!(
                        "SELECT {} FROM \"{schema}\".\"{table}\" ORDER BY 1",
                        select.join(", ")
                    ),
                    &[],
                )?;
                for row in rows {
                    let values: Vec<String> = row
                        .iter()
                        .map(|v| v.as_deref().map_or("NULL".to_owned(), sql_text))
                        .collect();
                    out.push_str(&format!(
                        "INSERT INTO {name} ({}) VALUES ({})\n",
                        names.join(", "),
                        values.join(", ")
                    ));
                }
            }
            Ok(out)
        })
        .expect("dump the schema")
}

/// Run a [`dump_postgres`] script into `schema` (which `kernel` uses), in
/// one transaction. Open a new kernel on the schema afterwards: the tables
/// were replaced under this one's connections.
pub fn restore_postgres(kernel: &Kernel, schema: &str, script: &str) {
    let statements: Vec<String> = script
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("--"))
        .map(|l| l.replace(SCHEMA, schema))
        .collect();
    assert!(
        statements.len() > 20,
        "a short dump: {} statements",
        statements.len()
    );
    kernel
        .with_downstream(move |d| {
            for s in &statements {
                d.postgres_execute(s, &[]).expect("postgres")?;
            }
            Ok(())
        })
        .expect("restore the golden schema");
}

/// The board's counts on a format-1 board: a task no call has rewritten
/// since the upgrade is not counted (`count` says `exact: false`); a task a
/// call changes is counted from then on, once; `recount` visits the rest a
/// page at a time, and then the counts are the board's, exactly.
pub fn recount(kernel: &Kernel) {
    let tb = kernel.taskboard();
    let truth = |tasks: &[Task]| {
        let mut n = [0u64; 5];
        for t in tasks {
            n[match t.state {
                TaskState::Open => 0,
                TaskState::Claimed => 1,
                TaskState::Done => 2,
                TaskState::Failed => 3,
                TaskState::Dead => 4,
            }] += 1;
        }
        n
    };
    let of = |c: &gak::TaskCounts| [c.open, c.claimed, c.done, c.failed, c.dead];
    let c = tb.count().unwrap();
    assert!(!c.exact, "a format-1 board is not counted yet: {c:?}");
    assert_eq!(
        of(&c),
        [0; 5],
        "no format-1 task counts before a call writes it"
    );

    // A new task and a format-1 task a claim rewrites count, once each.
    tb.seed(&[TaskSeed::new("z-new")]).unwrap();
    let claimed = tb.claim_next("w", 60_000).unwrap().expect("a ready task");
    let c = tb.count().unwrap();
    assert_eq!(
        of(&c),
        [1, 1, 0, 0, 0],
        "after a seed and a claim of {}",
        claimed.id
    );
    assert!(!c.exact);

    // Two at a time: as many calls as pages, then exact.
    let all = crate::board(kernel).unwrap();
    let mut calls = 0;
    while !tb.recount(2).unwrap() {
        calls += 1;
        assert!(calls <= all.len(), "recount never finishes");
    }
    assert_eq!(
        calls,
        all.len().div_ceil(2) - 1,
        "one call a page, the last one says so"
    );
    let c = tb.count().unwrap();
    assert!(c.exact);
    assert_eq!(of(&c), truth(&all));
    assert!(tb.recount(1).unwrap(), "nothing left to count");
    assert_eq!(of(&tb.count().unwrap()), truth(&all));
    recount_keys(kernel);
}

/// The keys' counts on a format-1 store: none counted, a key written since
/// counts (and does not make the others counted), `recount` counts the
/// rest a page at a time, and then the counts are the listing's, state by
/// state, with the oldest uncertain key's time among them.
fn recount_keys(kernel: &Kernel) {
    let gate = kernel.sideeffect();
    let listing = || {
        let mut n = [0u64; 4];
        let page = gate.list(None, None, 1000).unwrap();
        assert!(page.next.is_none());
        for k in &page.items {
            n[match k.state {
                gak::KeyState::Cleared => 0,
                gak::KeyState::InFlight => 1,
                gak::KeyState::Uncertain => 2,
                gak::KeyState::Completed => 3,
            }] += 1;
        }
        (n, page.items)
    };
    let of = |c: &gak::KeyCounts| [c.cleared, c.in_flight, c.uncertain, c.completed];
    let c = gate.count().unwrap();
    assert!(
        !c.exact,
        "a format-1 store's keys are not counted yet: {c:?}"
    );
    assert_eq!((of(&c), c.oldest_uncertain), ([0; 4], None));
    let fresh = gak::Action::new("z-new-key", "z-new-resource");
    assert!(matches!(
        gate.acquire(&fresh, 60_000).unwrap(),
        gak::Acquired::Granted(_)
    ));
    let c = gate.count().unwrap();
    assert_eq!((of(&c), c.exact), ([0, 1, 0, 0], false));
    let mut calls = 0;
    while !gate.recount(2).unwrap() {
        calls += 1;
        assert!(calls <= 100, "recount never finishes");
    }
    let (truth, keys) = listing();
    assert!(
        truth[2] >= 2,
        "the golden store has uncertain keys: {truth:?}"
    );
    let c = gate.count().unwrap();
    assert!(c.exact && !c.capped, "{c:?}");
    assert_eq!(of(&c), truth);
    // An expired intent is uncertain since its deadline; a key a format-1
    // kernel marked, since the recount (format 1 kept no time): the oldest
    // is no later than every expired intent's deadline.
    let expired = keys
        .iter()
        .filter(|k| k.state == gak::KeyState::Uncertain)
        .filter_map(|k| k.until);
    let oldest = c.oldest_uncertain.expect("an uncertain key");
    for until in expired {
        assert!(oldest <= until, "oldest {oldest} after a deadline {until}");
    }
    assert!(gate.recount(1).unwrap(), "nothing left to count");
}
