//! Ambiguous commits: the failure real deployments hit.
//!
//! A commit can succeed at the database and still fail at the caller (the
//! connection drops before the acknowledgement arrives). The caller sees
//! `storage` and cannot tell it from a commit that never reached the
//! database. The kernel must never re-run such a call as if it had not
//! happened, and every later call must behave per the spec *whichever of the
//! two happened*: a claim whose token the caller never learned simply
//! expires; an acquire whose lease the caller never learned turns its key
//! `uncertain`, never a second grant.
use super::*;

/// The store with every capability digest blanked: two worlds whose random
/// tokens differ compare equal when they hold the same records.
fn normalized(dump: Vec<(String, String, String)>) -> Vec<(String, String, String)> {
    fn blank(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    if k.ends_with("-sha256") {
                        *v = serde_json::Value::String("<digest>".into());
                    } else {
                        blank(v);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(blank),
            _ => {}
        }
    }
    // The count records a call adds to are drawn at random: what two runs
    // of one call must agree on is their sums, state by state.
    let mut sums: std::collections::BTreeMap<String, i64> = std::collections::BTreeMap::new();
    let mut out: Vec<(String, String, String)> = dump
        .into_iter()
        .filter(|(t, k, v)| {
            if t != "meta" || !k.starts_with("count/") {
                return true;
            }
            let json: serde_json::Value = serde_json::from_str(v).expect("a count record");
            // (`keys-decided` is a stamp, not a figure: which records carry
            // it depends on the draw too.)
            for (state, n) in json.as_object().expect("an object") {
                if state != "v" && state != "keys-decided" {
                    *sums.entry(state.clone()).or_default() += n.as_i64().expect("a count");
                }
            }
            false
        })
        .map(
            |(t, k, v)| match serde_json::from_str::<serde_json::Value>(&v) {
                Ok(mut json) => {
                    blank(&mut json);
                    (t, k, json.to_string())
                }
                Err(_) => (t, k, v),
            },
        )
        .collect();
    sums.retain(|_, n| *n != 0);
    if !sums.is_empty() {
        out.push((
            "meta".into(),
            "count/*".into(),
            serde_json::to_string(&sums).expect("sums"),
        ));
    }
    out
}

/// Every operation of the matrix that commits, with its acknowledgement
/// lost: `storage`, exactly one transaction (never re-run), the store holds
/// exactly what one unfaulted call leaves, and the next call answers as it
/// does after an acknowledged one.
pub(super) fn lost_acknowledgements(binding: &mut Binding) {
    let mut checked = 0;
    for case in cases() {
        let acked = World::new(binding, case.setup);
        let expected = (case.op)(&acked.kernel, &acked.ctx);
        if expected.is_err() {
            // A refusal rolls back: it never reaches commit.
            continue;
        }
        let landed = normalized(acked.dump());
        let next = (case.op)(&acked.kernel, &acked.ctx);
        let after_next = normalized(acked.dump());
        drop(acked);

        let lost = World::new(binding, case.setup);
        let started = lost.plan.transactions();
        lost.plan.arm(Fault::CommitLost);
        let got = (case.op)(&lost.kernel, &lost.ctx);
        let name = format!("{} {}", binding.name, case.name);
        assert!(lost.plan.fired(), "{name}: the commit was never reached");
        assert!(
            is_storage(&got),
            "{name}: a lost acknowledgement must be `storage`, got {got:?}"
        );
        assert_eq!(
            lost.plan.transactions() - started,
            1,
            "{name}: a call whose commit may have landed was re-run"
        );
        assert_eq!(
            normalized(lost.dump()),
            landed,
            "{name}: the store must hold the call's effect exactly once"
        );
        let again = (case.op)(&lost.kernel, &lost.ctx);
        assert_eq!(
            again, next,
            "{name}: after a lost acknowledgement the next call must answer as after an acknowledged one"
        );
        assert_eq!(normalized(lost.dump()), after_next, "{name}");
        checked += 1;
    }
    // 36 of the matrix's operation states commit today.
    assert!(checked >= 30, "{}: only {checked} cases", binding.name);
    eprintln!(
        "lost acknowledgements {}: {checked} committing operations",
        binding.name
    );
}

/// The outcome a caller cannot tell apart: the commit landed (its
/// acknowledgement was lost), or it never reached the database.
const AMBIGUOUS: [(Fault, bool); 2] = [(Fault::CommitLost, true), (Fault::Commit, false)];

/// A claim answered `storage`: if it landed, its token is known to no one,
/// the task stays taken until the claim expires, and then anyone takes it
/// over with the next fence; if it did not land, the task is still open.
pub(super) fn lost_claim_expires(binding: &mut Binding) {
    for (fault, landed) in AMBIGUOUS {
        let world = World::new(binding, board);
        let tb = world.kernel.taskboard();
        world.plan.arm(fault);
        let claimed = tb.claim("t", "w1", TTL);
        let name = format!("{} {fault:?}", binding.name);
        assert!(is_storage(&claimed), "{name}: {claimed:?}");
        if landed {
            let task = tb.get("t").unwrap();
            assert_eq!(
                (task.state, task.owner.as_deref(), task.fence),
                (TaskState::Claimed, Some("w1"), 1),
                "{name}"
            );
            assert_eq!(tb.claim("t", "w2", TTL), Err(Error::Taken), "{name}");
            world.clock.advance(TTL - 1);
            assert_eq!(tb.claim("t", "w2", TTL), Err(Error::Taken), "{name}");
            world.clock.advance(1);
            let taken_over = tb.claim("t", "w2", TTL).unwrap();
            assert_eq!(
                (taken_over.owner.as_deref(), taken_over.fence),
                (Some("w2"), 2),
                "{name}: the unknown claim expires and is taken over"
            );
        } else {
            let task = tb.get("t").unwrap();
            assert_eq!((task.state, task.fence), (TaskState::Open, 0), "{name}");
            assert_eq!(tb.claim("t", "w2", TTL).unwrap().fence, 1, "{name}");
        }
    }
}

/// An acquire answered `storage`: if it landed, the key has an intent whose
/// holder no one knows: `in-flight` (and the resource held) until it
/// expires, then `uncertain`, never a second grant, until a reconciler
/// resolves it. If it did not land, the key is granted as if fresh.
pub(super) fn lost_acquire_turns_uncertain(binding: &mut Binding) {
    for (fault, landed) in AMBIGUOUS {
        let world = World::new(binding, none);
        let se = world.kernel.sideeffect();
        world.plan.arm(fault);
        let first = se.acquire(&action(), TTL);
        let name = format!("{} {fault:?}", binding.name);
        assert!(is_storage(&first), "{name}: {first:?}");
        if landed {
            assert_eq!(se.acquire(&action(), TTL), Ok(Acquired::InFlight), "{name}");
            assert_eq!(
                se.acquire(&other_action(), TTL),
                Ok(Acquired::Contended(T0 + TTL)),
                "{name}: the unknown lease holds its resource"
            );
            world.clock.advance(TTL);
            for _ in 0..2 {
                assert_eq!(
                    se.acquire(&action(), TTL),
                    Ok(Acquired::Uncertain("intent-expired".into())),
                    "{name}: never a second grant"
                );
            }
            se.begin_reconcile(&action(), TTL).unwrap();
            let verdict = Resolution {
                applied: true,
                result: Some(b"sent".to_vec()),
                force_retryable: false,
                claim: None,
            };
            se.resolve_uncertain(&action(), &verdict).unwrap();
            assert_eq!(
                se.acquire(&action(), TTL),
                Ok(Acquired::Replayed(b"sent".to_vec())),
                "{name}"
            );
        } else {
            match se.acquire(&action(), TTL) {
                Ok(Acquired::Granted(lease)) => assert_eq!(lease.fence, 1, "{name}"),
                other => panic!("{name}: expected a fresh grant, got {other:?}"),
            }
        }
    }
}
