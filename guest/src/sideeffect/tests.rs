use super::*;
use crate::testing::MemTxn;

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
