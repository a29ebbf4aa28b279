use super::*;
use crate::testing::MemTxn;
use std::collections::HashMap;

use crate::keys;

fn granted(out: Acquired) -> Lease {
    match out {
        Acquired::Granted(lease) => lease,
        other => panic!("expected a grant, got {other:?}"),
    }
}

#[test]
fn precedence_replayed_beats_everything_but_key_reused() {
    let mut tx = MemTxn::default();
    let act = Action::new("k", "r").with_fingerprint("f1");
    let lease = granted(acquire(&mut tx, &act, 100).unwrap());
    complete(&mut tx, &act, &lease, b"done").unwrap();
    assert_eq!(
        acquire(&mut tx, &act, 100),
        Ok(Acquired::Replayed(b"done".to_vec()))
    );
    let other = Action::new("k", "r").with_fingerprint("f2");
    assert_eq!(acquire(&mut tx, &other, 100), Err(Error::KeyReused));
    // an absent fingerprint never conflicts
    assert!(matches!(
        acquire(&mut tx, &Action::new("k", "r"), 100),
        Ok(Acquired::Replayed(_))
    ));
}

#[test]
fn expired_intent_is_uncertain_never_regranted() {
    let mut tx = MemTxn::default();
    let act = Action::new("k", "r");
    granted(acquire(&mut tx, &act, 100).unwrap());
    tx.clock = 99;
    assert_eq!(acquire(&mut tx, &act, 100), Ok(Acquired::InFlight));
    tx.clock = 100;
    assert_eq!(
        acquire(&mut tx, &act, 100),
        Ok(Acquired::Uncertain(INTENT_EXPIRED.into()))
    );
}

#[test]
fn contended_until_the_hold_expires() {
    let mut tx = MemTxn::default();
    granted(acquire(&mut tx, &Action::new("k1", "r"), 100).unwrap());
    assert_eq!(
        acquire(&mut tx, &Action::new("k2", "r"), 100),
        Ok(Acquired::Contended(100))
    );
    tx.clock = 100;
    let lease = granted(acquire(&mut tx, &Action::new("k2", "r"), 100).unwrap());
    assert_eq!(lease.fence, 2);
}

#[test]
fn triple_check_order() {
    let mut tx = MemTxn::default();
    let act = Action::new("k", "r");
    let lease = granted(acquire(&mut tx, &act, 100).unwrap());
    let mut wrong = lease.clone();
    wrong.resource = "other".into();
    wrong.fence = 99;
    assert_eq!(release(&mut tx, &act, &wrong), Err(Error::ResourceMismatch));
    let mut stale = lease.clone();
    stale.fence = 99;
    stale.holder = "x".into();
    assert_eq!(release(&mut tx, &act, &stale), Err(Error::FenceStale));
    let mut forged = lease.clone();
    forged.holder = "x".into();
    assert_eq!(complete(&mut tx, &act, &forged, b""), Err(Error::NotHolder));
}

#[test]
fn release_keeps_the_intent() {
    let mut tx = MemTxn::default();
    let act = Action::new("k", "r");
    let lease = granted(acquire(&mut tx, &act, 100).unwrap());
    release(&mut tx, &act, &lease).unwrap();
    assert_eq!(acquire(&mut tx, &act, 100), Ok(Acquired::InFlight));
    assert_eq!(renew(&mut tx, &act, &lease, 10), Err(Error::LeaseExpired));
    // a late verdict from the newest holder is still accepted
    assert_eq!(complete(&mut tx, &act, &lease, b"r"), Ok(b"r".to_vec()));
}

#[test]
fn unsafe_key_stays_blocked_without_force() {
    let mut tx = MemTxn::default();
    let act = Action::new("k", "r").unsafe_to_retry();
    let lease = granted(acquire(&mut tx, &act, 100).unwrap());
    mark_uncertain(&mut tx, &act, &lease, "timeout").unwrap();
    release(&mut tx, &act, &lease).unwrap();
    // the recorded retry-safety counts, not the presented one
    let presented_safe = Action::new("k", "r");
    let not_applied = Resolution::default();
    assert_eq!(
        resolve_uncertain(&mut tx, &presented_safe, &not_applied),
        Err(Error::UnsafeNotRetryable)
    );
    assert_eq!(
        acquire(&mut tx, &act, 100),
        Ok(Acquired::Uncertain("timeout".into()))
    );
    let forced = Resolution {
        force_retryable: true,
        ..Resolution::default()
    };
    assert_eq!(
        resolve_uncertain(&mut tx, &act, &forced),
        Ok(Resolved::Cleared)
    );
    assert_eq!(granted(acquire(&mut tx, &act, 100).unwrap()).fence, 2);
}

#[test]
fn one_reconciler_at_a_time() {
    let mut tx = MemTxn::default();
    let act = Action::new("k", "r");
    granted(acquire(&mut tx, &act, 10).unwrap());
    assert_eq!(begin_reconcile(&mut tx, &act, 50), Err(Error::NotUncertain));
    tx.clock = 10;
    let first = begin_reconcile(&mut tx, &act, 50).unwrap();
    assert_eq!(first.until, 60);
    assert_eq!(
        begin_reconcile(&mut tx, &act, 50),
        Err(Error::ReconcileTaken)
    );
    tx.clock = 60;
    let second = begin_reconcile(&mut tx, &act, 50).unwrap();
    assert_ne!(first.claim, second.claim);
}

#[test]
fn sink_never_goes_backwards() {
    let mut tx = MemTxn::default();
    assert_eq!(sink_seen(&mut tx, "s"), Ok(0));
    sink_advance(&mut tx, "s", 3).unwrap();
    sink_advance(&mut tx, "s", 3).unwrap();
    assert_eq!(sink_advance(&mut tx, "s", 2), Err(Error::FenceStale));
    assert_eq!(sink_seen(&mut tx, "s"), Ok(3));
}

#[test]
fn a_relabelled_lease_is_not_the_holder() {
    let mut tx = MemTxn::default();
    let first = Action::new("k0", "r");
    let lease0 = granted(acquire(&mut tx, &first, 100).unwrap());
    complete(&mut tx, &first, &lease0, b"one").unwrap();
    let second = Action::new("k2", "r");
    let lease2 = granted(acquire(&mut tx, &second, 100).unwrap());
    // k2's genuine fence and holder, presented as k0's lease.
    let mut forged = lease2.clone();
    forged.key = "k0".into();
    assert_eq!(
        complete(&mut tx, &first, &forged, b"x"),
        Err(Error::NotHolder)
    );
    assert_eq!(release(&mut tx, &first, &forged), Err(Error::NotHolder));
    // k2's hold is untouched.
    assert_eq!(
        renew(&mut tx, &second, &lease2, 10).map(|l| l.fence),
        Ok(lease2.fence)
    );
}

fn states(tx: &mut MemTxn, state: Option<crate::KeyState>) -> Vec<(String, crate::KeyState)> {
    list(tx, state, None, 1000)
        .unwrap()
        .items
        .into_iter()
        .map(|i| (i.key, i.state))
        .collect()
}

#[test]
fn keys_list_by_effective_state() {
    use crate::KeyState as S;
    let mut tx = MemTxn::default();
    let (a, b, c, d) = (
        Action::new("a", "ra"),
        Action::new("b", "rb"),
        Action::new("c", "rc"),
        Action::new("d", "rd"),
    );
    let la = granted(acquire(&mut tx, &a, 100).unwrap());
    complete(&mut tx, &a, &la, b"ok").unwrap();
    let lb = granted(acquire(&mut tx, &b, 100).unwrap());
    mark_uncertain(&mut tx, &b, &lb, "timeout").unwrap();
    granted(acquire(&mut tx, &c, 50).unwrap());
    let ld = granted(acquire(&mut tx, &d, 100).unwrap());
    abandon(&mut tx, &d, &ld, "nope").unwrap();
    tx.clock = 10;
    assert_eq!(
        states(&mut tx, None),
        [
            ("a".into(), S::Completed),
            ("b".into(), S::Uncertain),
            ("c".into(), S::InFlight),
            ("d".into(), S::Cleared)
        ]
    );
    assert_eq!(
        states(&mut tx, Some(S::InFlight)),
        [("c".into(), S::InFlight)]
    );
    assert_eq!(
        states(&mut tx, Some(S::Uncertain)),
        [("b".into(), S::Uncertain)]
    );
    // c's intent expires: it is uncertain now, merged in key order
    tx.clock = 50;
    assert_eq!(
        states(&mut tx, Some(S::Uncertain)),
        [("b".into(), S::Uncertain), ("c".into(), S::Uncertain)]
    );
    assert_eq!(states(&mut tx, Some(S::InFlight)), []);
    let c_info = get(&mut tx, "c").unwrap();
    assert_eq!(
        (c_info.reason.as_deref(), c_info.until),
        (Some(INTENT_EXPIRED), Some(50))
    );
    let a_info = get(&mut tx, "a").unwrap();
    assert_eq!(
        (a_info.completed_at, a_info.resource.as_str()),
        (Some(0), "ra")
    );
    assert_eq!(get(&mut tx, "zz"), Err(Error::NotFound));
    // pages: one at a time through the merged listing
    let first = list(&mut tx, Some(S::Uncertain), None, 1).unwrap();
    assert_eq!(first.next.as_deref(), Some("b"));
    let second = list(&mut tx, Some(S::Uncertain), Some("b"), 1).unwrap();
    assert_eq!((second.items[0].key.as_str(), second.next), ("c", None));
    // no holder, claim or fence-holder pair in any listing
    let claim = begin_reconcile(&mut tx, &b, 100).unwrap();
    let shown = format!("{:?}", list(&mut tx, None, None, 1000).unwrap());
    assert!(!shown.contains(&claim.claim) && !shown.contains(&lb.holder));
    assert_eq!(get(&mut tx, "b").unwrap().reconciling_until, Some(150));
}

#[test]
fn a_verdict_under_a_taken_over_claim_is_refused() {
    let mut tx = MemTxn::default();
    let act = Action::new("k", "r");
    let lease = granted(acquire(&mut tx, &act, 10).unwrap());
    mark_uncertain(&mut tx, &act, &lease, "lost").unwrap();
    let first = begin_reconcile(&mut tx, &act, 10).unwrap();
    tx.clock = 10;
    let second = begin_reconcile(&mut tx, &act, 10).unwrap();
    let stale = Resolution {
        applied: true,
        claim: Some(first.claim),
        ..Resolution::default()
    };
    assert_eq!(
        resolve_uncertain(&mut tx, &act, &stale),
        Err(Error::ReconcileTaken)
    );
    let current = Resolution {
        applied: true,
        claim: Some(second.claim),
        ..Resolution::default()
    };
    assert_eq!(
        resolve_uncertain(&mut tx, &act, &current),
        Ok(Resolved::Replayed(vec![]))
    );
    // first verdict wins, whatever claim comes later
    assert_eq!(
        resolve_uncertain(&mut tx, &act, &stale),
        Ok(Resolved::Replayed(vec![]))
    );
}

#[test]
fn capabilities_are_stored_only_as_digests() {
    let mut tx = MemTxn::default();
    let act = Action::new("k", "r");
    let lease = granted(acquire(&mut tx, &act, 10).unwrap());
    mark_uncertain(&mut tx, &act, &lease, "lost").unwrap();
    let claim = begin_reconcile(&mut tx, &act, 10).unwrap();
    for value in tx.data.values() {
        assert!(!value.contains(&lease.holder), "{value}");
        assert!(!value.contains(&claim.claim), "{value}");
    }
}

#[test]
fn results_are_stored_as_base64() {
    let mut tx = MemTxn::default();
    let act = Action::new("k", "r");
    let lease = granted(acquire(&mut tx, &act, 10).unwrap());
    complete(&mut tx, &act, &lease, &[0xff; 300]).unwrap();
    let stored = tx.data.get(&(Table::Actions, "k".to_owned())).unwrap();
    // 400 bytes of base64 plus the record; as an array of numbers it was ~1200
    assert!(stored.len() < 600, "{}", stored.len());
    assert!(stored.starts_with(r#"{"v":2,"#), "{stored}");
}

struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// `count` must equal the key records a format-2 kernel wrote, state by
/// state as `list` shows them at now, with the oldest uncertain key's time;
/// and the key-time index must hold exactly their intents and marked keys.
fn assert_key_counts_exact(tx: &mut MemTxn) {
    use crate::KeyState as S;
    let now = tx.clock;
    let (mut want, mut oldest, mut timed) = ([0u64; 4], None::<u64>, Vec::new());
    for ((table, key), value) in &tx.data {
        if *table != Table::Actions {
            continue;
        }
        let r = KeyRecord::decode(value).unwrap();
        if r.v.0 < 2 {
            continue;
        }
        let (state, uncertain_at) = match &r.phase {
            Phase::Cleared => (S::Cleared, None),
            Phase::Intent { until, .. } if now >= *until => (S::Uncertain, Some(*until)),
            Phase::Intent { .. } => (S::InFlight, None),
            Phase::Uncertain { since, .. } => (S::Uncertain, Some(since.unwrap())),
            Phase::Completed { .. } => (S::Completed, None),
        };
        let slot = [S::Cleared, S::InFlight, S::Uncertain, S::Completed]
            .iter()
            .position(|s| *s == state)
            .unwrap();
        want[slot] += 1;
        if let Some(at) = uncertain_at {
            oldest = Some(oldest.map_or(at, |o: u64| o.min(at)));
        }
        match &r.phase {
            Phase::Intent { until, .. } => timed.push(keys::key_time(*until, key)),
            Phase::Uncertain { since, .. } => timed.push(keys::key_time(since.unwrap(), key)),
            _ => {}
        }
    }
    timed.sort();
    let index: Vec<String> = tx
        .data
        .keys()
        .filter(|(t, k)| *t == Table::Indexes && k.starts_with(keys::KEY_TIMES))
        .map(|(_, k)| k.clone())
        .collect();
    assert_eq!(index, timed);
    let c = count(tx).unwrap();
    assert_eq!([c.cleared, c.in_flight, c.uncertain, c.completed], want);
    assert_eq!(c.oldest_uncertain, oldest);
    assert!(!c.capped);
}

/// Turn the store into what a format-1 kernel left: every key record
/// `"v": 1` with no marking time, no count records, no `counted` marker,
/// no key-time index.
fn keys_as_format_1(tx: &mut MemTxn) {
    tx.data.retain(|(t, k), _| {
        !(*t == Table::Meta && (k.starts_with(keys::COUNTS) || k == keys::COUNTED))
            && !(*t == Table::Indexes && k.starts_with(keys::KEY_TIMES))
    });
    for ((t, _), v) in tx.data.iter_mut() {
        if *t == Table::Actions {
            let mut row: serde_json::Value = serde_json::from_str(v).unwrap();
            row["v"] = 1.into();
            row.as_object_mut().unwrap().remove("since");
            *v = row.to_string();
        }
    }
}

#[test]
fn key_counts_stay_exact_under_every_operation() {
    let keys_ = ["k0", "k1", "k2", "k3", "k4"];
    for run in 0..40 {
        let mut rng = Lcg(run);
        let mut tx = MemTxn::default();
        let mut leases: HashMap<String, Lease> = HashMap::new();
        let mut claims: HashMap<String, String> = HashMap::new();
        for _ in 0..80 {
            let key = keys_[rng.below(5) as usize];
            let safety = if run % 2 == 0 {
                RetrySafety::Safe
            } else {
                RetrySafety::Unsafe
            };
            let act = Action {
                retry_safety: safety,
                ..Action::new(key, ["r0", "r1", "r2"][rng.below(3) as usize])
            };
            let act_of = |l: &Lease| Action {
                retry_safety: safety,
                ..Action::new(&l.key, &l.resource)
            };
            // A quarter of the runs continue a store a format-1 kernel wrote.
            if run % 4 == 3 && rng.below(10) == 0 && count(&mut tx).unwrap().exact {
                keys_as_format_1(&mut tx);
                let c = count(&mut tx).unwrap();
                let any = tx.data.keys().any(|(t, _)| *t == Table::Actions);
                assert_eq!(c.exact, !any);
            }
            match rng.below(10) {
                0 | 1 => {
                    if let Ok(Acquired::Granted(l)) = acquire(&mut tx, &act, 1 + rng.below(5)) {
                        leases.insert(key.into(), l);
                    }
                }
                2 => {
                    if let Some(l) = leases.get(key) {
                        let _ = complete(&mut tx, &act_of(l), l, b"r");
                    }
                }
                3 => {
                    if let Some(l) = leases.get(key) {
                        let _ = abandon(&mut tx, &act_of(l), l, "no");
                    }
                }
                4 => {
                    if let Some(l) = leases.get(key) {
                        let _ = mark_uncertain(&mut tx, &act_of(l), l, "maybe");
                    }
                }
                5 => {
                    if let Some(l) = leases.get(key)
                        && let Ok(l) = renew(&mut tx, &act_of(l), l, 1 + rng.below(5))
                    {
                        leases.insert(key.into(), l);
                    }
                }
                6 => {
                    if let Ok(c) = begin_reconcile(&mut tx, &act, 3) {
                        claims.insert(key.into(), c.claim);
                    }
                }
                7 => {
                    let resolution = Resolution {
                        applied: rng.below(2) == 0,
                        result: Some(b"x".to_vec()),
                        force_retryable: rng.below(2) == 0,
                        claim: claims.get(key).cloned().filter(|_| rng.below(2) == 0),
                    };
                    let _ = resolve_uncertain(&mut tx, &act, &resolution);
                }
                8 => {
                    let before = tx.clock + 1;
                    crate::retention::prune(&mut tx, before, 1 + rng.below(3) as u32).unwrap();
                }
                _ => tx.clock += rng.below(4),
            }
            assert_key_counts_exact(&mut tx);
        }
        // `recount` covers the rest, a page at a time, then `count` is exact.
        while !recount(&mut tx, 2).unwrap() {
            assert_key_counts_exact(&mut tx);
        }
        assert_key_counts_exact(&mut tx);
        let c = count(&mut tx).unwrap();
        let all = tx.data.keys().filter(|(t, _)| *t == Table::Actions).count() as u64;
        assert!(c.exact);
        assert_eq!(c.cleared + c.in_flight + c.uncertain + c.completed, all);
    }
}

#[test]
fn key_counts_cap_the_uncertain_keys_they_read() {
    let mut tx = MemTxn::default();
    for i in 0..1001 {
        granted(
            acquire(
                &mut tx,
                &Action::new(&format!("k{i:04}"), &format!("r{i}")),
                10,
            )
            .unwrap(),
        );
    }
    let c = count(&mut tx).unwrap();
    assert_eq!((c.in_flight, c.uncertain, c.capped), (1001, 0, false));
    assert_eq!(c.oldest_uncertain, None);
    tx.clock = 10;
    let c = count(&mut tx).unwrap();
    assert_eq!((c.in_flight, c.uncertain, c.capped), (1, 1000, true));
    assert_eq!(c.oldest_uncertain, Some(10));
}
