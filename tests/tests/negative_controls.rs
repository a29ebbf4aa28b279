//! Negative controls: each deliberately broken binding must be caught. If
//! one of these tests fails, the suite has lost its teeth.
use std::sync::Arc;

use gak::ManualClock;
use gak::blocking::Kernel;
use gak_tests::broken::{Defect, Defective, NoIsolation};
use gak_tests::{FnTarget, claim_race, claim_race_after, run_builtin};

/// Writes visible before commit, no isolation: two claimers that both read
/// "open" before either writes must both win — the race check catches it.
#[test]
fn no_isolation_is_caught_by_the_claim_race() {
    let (backend, rendezvous) = NoIsolation::backend();
    let kernel = Kernel::with_backend(backend, Arc::new(ManualClock::at(0))).unwrap();
    // Fresh instances (sessions) are made during the race, after arming.
    let winners = claim_race_after(&kernel, "hot", 2, || rendezvous.arm(2));
    assert_eq!(
        winners, 2,
        "the broken binding should let both claimers win"
    );
    // ...and the same check on a real binding finds exactly one.
    let kernel = Kernel::open("memory:").unwrap();
    assert_eq!(claim_race(&kernel, "hot", 2), 1);
}

/// A clock that never moves: every expiry rule fails.
#[test]
fn frozen_clock_is_caught_by_the_vectors() {
    let mut target = FnTarget(|_runner_clock| {
        let frozen = Arc::new(ManualClock::at(0));
        Kernel::with_backend(
            gak::blocking::run_future(gak::store::open("memory:")).unwrap(),
            frozen,
        )
        .map_err(|e| e.to_string())
    });
    let report = run_builtin(&mut target, None);
    let failures = report.failures();
    assert!(
        failures
            .iter()
            .any(|f| f.contains("taskboard/expired-claim-taken-over")),
        "expected the expiry scenarios to fail, got {failures:?}"
    );
    assert!(
        failures.iter().any(|f| f.contains("sideeffect")),
        "{failures:?}"
    );
}

/// Dropping the last write of each transaction: grants lose their intent,
/// completions their result.
#[test]
fn dropped_last_write_is_caught_by_the_vectors() {
    let mut target = FnTarget(|clock: Arc<ManualClock>| {
        Kernel::with_backend(Defective::backend(Defect::DropLastWrite), clock)
            .map_err(|e| e.to_string())
    });
    let report = run_builtin(&mut target, None);
    assert!(
        report.failed() > 50,
        "only {} failures:\n{}",
        report.failed(),
        report.render()
    );
}

/// The sink's fence compare committed apart from its body: a failed body
/// leaves the fence advanced.
#[test]
fn split_sink_is_caught_by_the_vectors() {
    let mut target = FnTarget(|clock: Arc<ManualClock>| {
        Kernel::with_backend(Defective::backend(Defect::SplitSink), clock)
            .map_err(|e| e.to_string())
    });
    let report = run_builtin(&mut target, Some("sink.json"));
    let failures = report.failures();
    assert!(
        failures
            .iter()
            .any(|f| f.contains("sink/failed-body-rolls-back")),
        "{}",
        report.render()
    );
}

/// Tokens and holders not checked. Built as a binding that stores every
/// capability digest as the all-zero capability's, rather than as a second
/// kernel build with the check compiled out: the product's source keeps no
/// switch that disables a safety check, no extra component build costs CI
/// time, and the defect is observable exactly where the check lives (the
/// stored digest the presented capability is compared with). It accepts the
/// all-zero token the vectors' forged leases and wrong tokens use and
/// refuses every genuine one, so the suite must fail it by name on both
/// sides: a forgery accepted, a genuine capability refused.
#[test]
fn unchecked_tokens_and_holders_are_caught_by_the_vectors() {
    let mut target = FnTarget(|clock: Arc<ManualClock>| {
        Kernel::with_backend(Defective::backend(Defect::ZeroDigests), clock)
            .map_err(|e| e.to_string())
    });
    let report = run_builtin(&mut target, None);
    let failures = report.failures();
    for forged_accepted in [
        "taskboard/release-wrong-token-lease-lost",
        "taskboard/complete-wrong-token-lease-lost",
        "sideeffect/triple-check-complete",
        "sideeffect/triple-check-release",
        "reconcile-claims/verdict-under-a-taken-over-claim-refused",
    ] {
        assert!(
            failures.iter().any(|f| f.contains(forged_accepted)),
            "{forged_accepted} passed an unchecked token:\n{}",
            report.render()
        );
    }
    assert!(
        failures
            .iter()
            .any(|f| f.contains("taskboard/complete-is-idempotent-with-completing-token")),
        "a genuine token refused must fail too:\n{}",
        report.render()
    );
}

/// The controls are only meaningful if the same suite passes the real
/// memory binding.
#[test]
fn the_same_suite_passes_the_real_binding() {
    let mut target = FnTarget(|clock: Arc<ManualClock>| {
        Kernel::with_backend(
            gak::blocking::run_future(gak::store::open("memory:")).unwrap(),
            clock,
        )
        .map_err(|e| e.to_string())
    });
    let report = run_builtin(&mut target, None);
    assert_eq!(report.failed(), 0, "\n{}", report.render());
}
