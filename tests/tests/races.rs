//! Real threads racing on one store, released together by a barrier:
//! exactly one winner per decision.
use std::sync::Barrier;

use gak::blocking::Kernel;
use gak::{Acquired, Action, Error};
use gak_tests::claim_race;

fn kernels() -> Vec<(Kernel, tempfile::TempDir)> {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Kernel::open(&format!("sqlite:{}", dir.path().join("race.db").display())).unwrap();
    vec![
        (
            Kernel::open("memory:").unwrap(),
            tempfile::tempdir().unwrap(),
        ),
        (sqlite, dir),
    ]
}

#[test]
fn n_claimers_one_winner_every_round() {
    for (kernel, _dir) in kernels() {
        for round in 0..20 {
            let winners = claim_race(&kernel, &format!("task-{round}"), 8);
            assert_eq!(winners, 1, "{kernel:?} round {round}");
        }
    }
}

#[test]
fn one_key_racing_acquirers_get_one_grant() {
    for (kernel, _dir) in kernels() {
        for round in 0..20 {
            let action = Action::new(&format!("key-{round}"), &format!("res-{round}"));
            let start = Barrier::new(8);
            let outcomes: Vec<Result<Acquired, Error>> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..8)
                    .map(|_| {
                        s.spawn(|| {
                            start.wait();
                            kernel.sideeffect().acquire(&action, 60_000)
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let grants = outcomes
                .iter()
                .filter(|o| matches!(o, Ok(Acquired::Granted(_))))
                .count();
            let in_flight = outcomes
                .iter()
                .filter(|o| matches!(o, Ok(Acquired::InFlight)))
                .count();
            assert_eq!((grants, in_flight), (1, 7), "{kernel:?}: {outcomes:?}");
        }
    }
}

#[test]
fn one_resource_racing_keys_one_holder_and_increasing_fences() {
    for (kernel, _dir) in kernels() {
        let mut last_fence = 0;
        for round in 0..10 {
            let start = Barrier::new(6);
            let outcomes: Vec<(Action, Acquired)> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..6)
                    .map(|i| {
                        let (kernel, start) = (&kernel, &start);
                        s.spawn(move || {
                            start.wait();
                            let action = Action::new(&format!("r{round}-k{i}"), "printer");
                            let out = kernel.sideeffect().acquire(&action, 60_000).unwrap();
                            (action, out)
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let granted: Vec<_> = outcomes
                .iter()
                .filter_map(|(a, o)| match o {
                    Acquired::Granted(l) => Some((a, l)),
                    _ => None,
                })
                .collect();
            assert_eq!(granted.len(), 1, "{outcomes:?}");
            let (action, lease) = granted[0];
            assert!(lease.fence > last_fence, "fences must strictly increase");
            last_fence = lease.fence;
            for (_, o) in &outcomes {
                assert!(
                    matches!(o, Acquired::Granted(_) | Acquired::Contended(_)),
                    "{o:?}"
                );
            }
            kernel
                .sideeffect()
                .complete(action, lease, b"done")
                .unwrap();
        }
    }
}
