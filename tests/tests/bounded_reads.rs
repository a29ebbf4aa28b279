//! Bounded reads, shown (SPEC 9): a store binding that counts the rows each
//! call reads proves that listing, getting and claiming read a number of rows
//! independent of the board's size, at 1,000 and at 100,000 tasks (10,000
//! side-effect keys). Then `gak tasks list --limit 10` on the big board, timed
//! and printed (speed is measured, never asserted).
use std::sync::Arc;
use std::time::Instant;

use gak::blocking::Kernel;
use gak::{Acquired, Action, KeyState, SystemClock, TaskSeed, TaskState};
use gak_tests::cli::run_gak;
use gak_tests::counting::{Counting, Reads};

/// Rows a call with `limit 10` may read: the page itself (index entries and
/// the records they point to), plus a few board records. A whole-table read
/// of the small board alone would be 1,000.
const BOUND: u64 = 4 * 10 + 10;
const BATCH: usize = 10_000;

/// Grow the board to `n` tasks: every third done, every seventh failed, the
/// rest open; every fifth depends on the task before it.
fn grow_board(kernel: &Kernel, from: usize, n: usize) {
    for start in (from..n).step_by(BATCH) {
        let batch: Vec<TaskSeed> = (start..(start + BATCH).min(n))
            .map(|i| {
                let mut seed = TaskSeed::new(&format!("t{i:06}")).title(&format!("task {i}"));
                seed.state = match i {
                    _ if i % 3 == 0 => Some(TaskState::Done),
                    _ if i % 7 == 0 => Some(TaskState::Failed),
                    _ => None,
                };
                if i % 5 == 0 && i > 0 {
                    seed = seed.deps(&[&format!("t{:06}", i - 1)]);
                }
                seed
            })
            .collect();
        kernel.taskboard().seed(&batch).expect("seed a batch");
    }
}

/// Grow the side-effect keys to `n`: completed, every tenth left in flight.
fn grow_keys(kernel: &Kernel, from: usize, n: usize) {
    for i in from..n {
        let action = Action::new(&format!("k{i:06}"), &format!("r{i:06}"));
        let Acquired::Granted(lease) = kernel.sideeffect().acquire(&action, 3_600_000).unwrap()
        else {
            panic!("a fresh key is granted");
        };
        if i % 10 != 0 {
            kernel
                .sideeffect()
                .complete(&action, &lease, b"ok")
                .unwrap();
        }
    }
}

/// The rows each call reads on the board as it is now.
fn measure(kernel: &Kernel, reads: &Reads) -> Vec<(&'static str, u64)> {
    let board = kernel.taskboard();
    let effects = kernel.sideeffect();
    let mut rows = Vec::new();
    let (page, n) = reads.during(|| board.list(None, None, 10).unwrap());
    assert_eq!(page.items.len(), 10);
    rows.push(("taskboard.list(limit 10)", n));
    let (page, n) = reads.during(|| board.list(Some(TaskState::Open), None, 10).unwrap());
    assert_eq!(page.items.len(), 10);
    assert!(page.items.iter().all(|t| t.state == TaskState::Open));
    rows.push(("taskboard.list(open, limit 10)", n));
    let (page, n) = reads.during(|| {
        board
            .list(Some(TaskState::Done), Some("t000500"), 10)
            .unwrap()
    });
    assert_eq!(page.items.len(), 10);
    rows.push(("taskboard.list(done, after, limit 10)", n));
    let (task, n) = reads.during(|| board.get("t000400").unwrap());
    assert_eq!(task.id, "t000400");
    rows.push(("taskboard.get", n));
    let (claimed, n) = reads.during(|| board.claim_next("measure", 600_000).unwrap());
    assert!(claimed.is_some(), "a ready task is claimed");
    rows.push(("taskboard.claim_next", n));
    let (page, n) = reads.during(|| effects.list(None, None, 10).unwrap());
    assert_eq!(page.items.len(), 10);
    rows.push(("sideeffect.list(limit 10)", n));
    let (page, n) = reads.during(|| effects.list(Some(KeyState::Completed), None, 10).unwrap());
    assert_eq!(page.items.len(), 10);
    rows.push(("sideeffect.list(completed, limit 10)", n));
    rows
}

#[test]
fn listing_getting_and_claiming_read_rows_independent_of_board_size() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite:{}?synchronous=normal",
        dir.path().join("big.db").display()
    );
    let (backend, reads) =
        Counting::wrap(gak::blocking::run_future(gak::store::open(&url)).unwrap());
    let kernel = Kernel::with_backend(backend, Arc::new(SystemClock::default())).unwrap();

    let started = Instant::now();
    grow_board(&kernel, 0, 1_000);
    grow_keys(&kernel, 0, 1_000);
    let small = measure(&kernel, &reads);
    grow_board(&kernel, 1_000, 100_000);
    grow_keys(&kernel, 1_000, 10_000);
    println!(
        "seeded 100,000 tasks and 10,000 keys in {:?}",
        started.elapsed()
    );
    let big = measure(&kernel, &reads);

    println!("{:<40} {:>12} {:>14}", "call", "rows @1k", "rows @100k");
    for ((call, at_small), (_, at_big)) in small.iter().zip(&big) {
        println!("{call:<40} {at_small:>12} {at_big:>14}");
    }
    for ((call, at_small), (_, at_big)) in small.iter().zip(&big) {
        assert!(
            *at_big <= BOUND,
            "{call} read {at_big} rows on 100,000 tasks (bound {BOUND})"
        );
        // claim_next also reads the live claims ahead of the first ready
        // task: the big board has one more (the small measurement's).
        let slack = u64::from(*call == "taskboard.claim_next");
        assert!(
            *at_big <= at_small + slack,
            "{call} read {at_small} rows at 1,000 tasks but {at_big} at 100,000"
        );
    }

    // The operator's view of the same board, through the binary.
    drop(kernel);
    gak_tests::cli::gak_bin(); // built (or found fresh) before the clock starts
    for args in [
        &["tasks", "list", "--limit", "10", "--store", &url][..],
        &["effects", "list", "--limit", "10", "--store", &url],
    ] {
        let asked = Instant::now();
        let ran = run_gak(dir.path(), args, &[], &[], None);
        let took = asked.elapsed();
        ran.expect_code(0);
        assert_eq!(
            ran.stdout.lines().count(),
            12,
            "header, 10 rows, more:\n{}",
            ran.stdout
        );
        println!(
            "gak {} answered in {took:?} (whole process)",
            args[..4].join(" ")
        );
    }
}

/// The two shapes issue 17 found unbounded: `prune(limit 1)` behind 3,000
/// done tasks that an open task still needs (it read 6,001 rows, on every
/// call), and `claim-next` behind 4,999 live claims (5,000 queue entries).
/// Now each call reads rows bounded by its page, and the needed tasks are
/// read once, then wait aside until their dependent finishes.
#[test]
fn prune_and_claim_next_are_bounded_by_their_page_not_by_what_sits_before_it() {
    let (backend, reads) = Counting::wrap(Arc::new(gak::store::memory::MemoryBackend::default()));
    let clock = Arc::new(gak::ManualClock::at(1_000));
    let kernel = Kernel::with_backend(backend, clock.clone()).unwrap();
    let board = kernel.taskboard();

    // 3,000 done tasks, all needed by one open task; then an old completed key.
    let deps: Vec<String> = (0..3_000).map(|i| format!("d{i:04}")).collect();
    let mut seeds: Vec<TaskSeed> = deps
        .iter()
        .map(|d| {
            let mut s = TaskSeed::new(d);
            s.state = Some(TaskState::Done);
            s
        })
        .collect();
    let refs: Vec<&str> = deps.iter().map(String::as_str).collect();
    seeds.push(TaskSeed::new("needs-all").deps(&refs));
    board.seed(&seeds).unwrap();
    clock.advance(10);
    let key = Action::new("late-key", "r");
    let Acquired::Granted(lease) = kernel.sideeffect().acquire(&key, 60_000).unwrap() else {
        panic!("fresh key")
    };
    kernel.sideeffect().complete(&key, &lease, b"ok").unwrap();
    clock.advance(10);
    let before = gak::Clock::now(&*clock);

    let mut most = 0;
    let mut calls = 0;
    loop {
        calls += 1;
        let (pruned, rows) = reads.during(|| kernel.retention().prune(before, 1).unwrap());
        most = most.max(rows);
        assert_eq!(pruned.removed_tasks, 0);
        if !pruned.more {
            break;
        }
        assert!(calls <= 100, "prune never ends");
    }
    assert!(
        kernel.sideeffect().get("late-key").is_err(),
        "the key was pruned"
    );
    println!("prune(limit 1) behind 3,000 needed tasks: {calls} calls, at most {most} rows each");
    assert!(most <= 400, "a prune call read {most} rows");
    let (_, again) = reads.during(|| kernel.retention().prune(before, 1).unwrap());
    assert!(again <= 2, "the needed tasks were read again: {again} rows");

    // 4,999 live claims (5,000 with needs-all) ahead of the one ready task.
    board.claim("needs-all", "w", 600_000).unwrap();
    let tasks: Vec<TaskSeed> = (0..5_000)
        .map(|i| TaskSeed::new(&format!("q{i:04}")))
        .collect();
    board.seed(&tasks).unwrap();
    for i in 0..4_999 {
        board.claim(&format!("q{i:04}"), "w", 600_000).unwrap();
    }
    let (next, rows) = reads.during(|| board.claim_next("w2", 600_000).unwrap());
    assert_eq!(next.map(|t| t.id).as_deref(), Some("q4999"));
    println!("claim-next behind 4,999 live claims read {rows} rows");
    assert!(rows <= 50, "claim-next read {rows} rows");
}
