//! Concurrent `prune` calls, and `prune` racing a re-seed, on PostgreSQL
//! (whose range reads are snapshots, so a retention entry read by one call
//! may be gone by the time it reads the record): records gone since the
//! index was read are a normal race, never `storage` (issue 17 item 5).
//! SQLite serializes whole calls; it runs the same checks as a control.
use std::sync::{Arc, Barrier};

use gak::blocking::Kernel;
use gak::{TaskSeed, TaskState};
use gak_tests::pg;
use gak_tests::suite::{POSTGRES, Suite};

const TASKS: usize = 400;

fn done_board(kernel: &Kernel, prefix: &str) {
    let seeds: Vec<TaskSeed> = (0..TASKS)
        .map(|i| {
            let mut s = TaskSeed::new(&format!("{prefix}{i:04}"));
            s.state = Some(TaskState::Done);
            s
        })
        .collect();
    kernel.taskboard().seed(&seeds).expect("seed done tasks");
}

fn far_future() -> u64 {
    (1 << 53) - 1
}

/// Two threads prune the same done tasks at once: both succeed, and every
/// task is removed exactly once.
fn two_prunes(open: impl Fn() -> Kernel) {
    for round in 0..3 {
        let kernel = open();
        done_board(&kernel, &format!("r{round}-"));
        let barrier = Arc::new(Barrier::new(2));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (k, b) = (open(), barrier.clone());
                std::thread::spawn(move || {
                    b.wait();
                    let mut removed = 0;
                    loop {
                        let p = k.retention().prune(far_future(), 1000).expect("prune");
                        removed += p.removed_tasks;
                        if !p.more {
                            return removed;
                        }
                    }
                })
            })
            .collect();
        let removed: u32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(removed as usize, TASKS, "round {round}");
        let left = kernel
            .taskboard()
            .list(Some(TaskState::Done), None, 10)
            .unwrap();
        assert!(left.items.is_empty(), "round {round}: {:?}", left.items);
    }
}

/// A prune racing a re-seed of the same tasks (as open): the prune never
/// fails, and every re-seeded task that survived is open and claimable.
fn prune_and_reseed(open: impl Fn() -> Kernel) {
    for round in 0..3 {
        let kernel = open();
        let prefix = format!("s{round}-");
        done_board(&kernel, &prefix);
        let barrier = Arc::new(Barrier::new(2));
        let (k, b) = (open(), barrier.clone());
        let pruner = std::thread::spawn(move || {
            b.wait();
            k.retention().prune(far_future(), 1000).expect("prune")
        });
        let (k, b, p) = (open(), barrier.clone(), prefix.clone());
        let seeder = std::thread::spawn(move || {
            b.wait();
            for chunk in (0..TASKS).collect::<Vec<_>>().chunks(20) {
                let seeds: Vec<TaskSeed> = chunk
                    .iter()
                    .map(|i| TaskSeed::new(&format!("{p}{i:04}")))
                    .collect();
                k.taskboard().seed(&seeds).expect("re-seed");
            }
        });
        pruner.join().unwrap();
        seeder.join().unwrap();
        let page = kernel.taskboard().list(None, Some(&prefix), 1000).unwrap();
        let ours: Vec<_> = page
            .items
            .iter()
            .filter(|t| t.id.starts_with(&prefix))
            .collect();
        assert_eq!(ours.len(), TASKS, "round {round}: every id was re-seeded");
        assert!(ours.iter().all(|t| t.state == TaskState::Open));
        let claimed = kernel
            .taskboard()
            .claim(&format!("{prefix}0000"), "w", 1000)
            .unwrap();
        assert!(claimed.fence >= 1);
    }
}

fn main() {
    let mut suite = Suite::new();
    suite.needs(&POSTGRES, "postgres::two_prunes_of_the_same_tasks", |dsn| {
        let schema = pg::Schema::new(dsn, "prune2");
        two_prunes(|| schema.kernel());
    });
    suite.needs(&POSTGRES, "postgres::prune_racing_a_reseed", |dsn| {
        let schema = pg::Schema::new(dsn, "prunereseed");
        prune_and_reseed(|| schema.kernel());
    });
    suite.test("sqlite::two_prunes_of_the_same_tasks", || {
        let dir = tempfile::tempdir().unwrap();
        let url = format!(
            "sqlite:{}?synchronous=normal",
            dir.path().join("p.db").display()
        );
        two_prunes(|| Kernel::open(&url).unwrap());
    });
    suite.test("sqlite::prune_racing_a_reseed", || {
        let dir = tempfile::tempdir().unwrap();
        let url = format!(
            "sqlite:{}?synchronous=normal",
            dir.path().join("p.db").display()
        );
        prune_and_reseed(|| Kernel::open(&url).unwrap());
    });
    suite.run();
}
