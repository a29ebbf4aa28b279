//! Several OS processes on one SQLite file get the semantics of one process:
//! exactly one winner per claim epoch, at most one body execution per key.
use gak::blocking::Kernel;
use gak::{Acquired, Action, TaskSeed, TaskState};
use gak_tests::hammer::{self, Start};

const WORKERS: usize = 4;
const ROUNDS: usize = 200;
const KEYS: usize = 60;
/// Tasks the workers drain with `claim-next`.
const QUEUED: usize = 80;

#[test]
fn processes_sharing_a_sqlite_file() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("shared.db").display());
    let kernel = Kernel::open(&url).unwrap();
    let tasks: Vec<TaskSeed> = (0..4).map(|i| TaskSeed::new(&format!("t{i}"))).collect();
    kernel.taskboard().seed(&tasks).unwrap();

    let (rounds, keys) = (ROUNDS.to_string(), KEYS.to_string());
    let audit = hammer::run(
        env!("CARGO_BIN_EXE_gak-hammer"),
        WORKERS,
        &[&url, &rounds, &keys],
    );

    let epochs = audit.check_claims(&kernel);
    assert!(epochs >= ROUNDS / 4, "too few epochs: {epochs}");
    let overlap = audit
        .check_overlap(WORKERS / 2)
        .unwrap_or_else(|why| panic!("the processes did not race: {why}"));
    assert!(
        kernel
            .taskboard()
            .list(None, None, 1000)
            .map(|p| p.items)
            .unwrap()
            .iter()
            .all(|t| t.state == TaskState::Open)
    );
    audit.check_bodies(KEYS);
    // The key now only replays.
    for n in 0..KEYS {
        let action = Action::new(&format!("k{n}"), &format!("res{}", n % 3));
        let answer = kernel.sideeffect().acquire(&action, 1_000).unwrap();
        assert!(matches!(answer, Acquired::Replayed(_)), "k{n}: {answer:?}");
    }
    eprintln!(
        "multiprocess: {WORKERS} processes, {epochs} claim epochs, {KEYS} keys each applied once; {overlap}"
    );
}

/// The overlap check has teeth: the same workers run one after another
/// Processes drain one board with `claim-next`: every task handed out once,
/// dependents only after their dependency, the work spread over processes.
#[test]
fn processes_draining_a_queue_with_claim_next() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("queue.db").display());
    let kernel = Kernel::open(&url).unwrap();
    kernel
        .taskboard()
        .seed(&hammer::queue_seeds(QUEUED))
        .unwrap();
    let audit = hammer::run_queue(env!("CARGO_BIN_EXE_gak-hammer"), WORKERS, &url);
    let served = audit.check_queue(&kernel, QUEUED, 2);
    gak_tests::assert_counted(&kernel);
    eprintln!("multiprocess: {QUEUED} tasks drained by {served} processes with claim-next");
}

/// Processes drain a SQLite board with limited groups with the queue worker:
/// no group ever exceeds its limit (see [`hammer::group_limits_hold`]).
#[test]
fn group_limits_hold_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("groups.db").display());
    let kernel = Kernel::open(&url).unwrap();
    let most =
        hammer::group_limits_hold(env!("CARGO_BIN_EXE_gak-hammer"), &kernel, &url, WORKERS, 30);
    gak_tests::assert_counted(&kernel);
    eprintln!("multiprocess: most handlers at once (g0 limit 2, g1 limit 3, ungrouped): {most:?}");
}

/// pass every correctness check, and the overlap check rejects them.
#[test]
fn a_serial_run_fails_the_overlap_check() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("serial.db").display());
    let kernel = Kernel::open(&url).unwrap();
    let tasks: Vec<TaskSeed> = (0..4).map(|i| TaskSeed::new(&format!("t{i}"))).collect();
    kernel.taskboard().seed(&tasks).unwrap();
    let audit = hammer::run_with(
        env!("CARGO_BIN_EXE_gak-hammer"),
        2,
        &[&url, "40", "6"],
        Start::Serially,
    );
    audit.check_claims(&kernel);
    audit.check_bodies(6);
    let verdict = audit.check_overlap(1);
    assert!(verdict.is_err(), "a serial run passed: {verdict:?}");
}
