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
