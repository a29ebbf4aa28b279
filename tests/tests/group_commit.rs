//! SQLite group commit: calls that arrive together share one transaction
//! and one COMMIT, each in its own savepoint — a refusal undoes only itself
//! — and nothing is answered before its batch is durable.
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use gak::blocking::Kernel;
use gak::store::sqlite::SqliteBackend;
use gak::{Error, ManualClock, TaskSeed, TaskState};

fn open(dir: &tempfile::TempDir) -> (Kernel, Arc<SqliteBackend>) {
    let path = dir.path().join("g.db");
    let backend = Arc::new(SqliteBackend::open(&path.display().to_string()).unwrap());
    let kernel = Kernel::with_backend(backend.clone(), Arc::new(ManualClock::at(1_000))).unwrap();
    (kernel, backend)
}

/// Wait (bounded) until `n` calls queue for the connection.
fn until_waiting(backend: &SqliteBackend, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while backend.group_stats().waiting < n {
        assert!(Instant::now() < deadline, "{:?}", backend.group_stats());
        std::thread::yield_now();
    }
}

#[test]
fn queued_calls_share_one_commit_and_a_refusal_undoes_only_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (kernel, backend) = open(&dir);
    kernel
        .taskboard()
        .seed(&[TaskSeed::new("a"), TaskSeed::new("b")])
        .unwrap();
    let before = backend.group_stats();
    let (inside, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    std::thread::scope(|s| {
        // The first call holds the connection inside its sink body...
        let holder = {
            let (kernel, inside, release) = (kernel.clone(), inside.clone(), release.clone());
            s.spawn(move || {
                kernel.sideeffect().write_fenced("ledger", 1, |down| {
                    down.put("ledger/1", "first")?;
                    inside.wait();
                    release.wait();
                    Ok::<_, Error>(())
                })
            })
        };
        inside.wait();
        // ...while three more queue behind it: a claim, a claim of the same
        // task (refused: it sees the first claim, uncommitted, in the
        // batch), and a claim of another task.
        let claims: Vec<_> = ["a", "a", "b"]
            .into_iter()
            .enumerate()
            .map(|(i, id)| {
                let kernel = kernel.clone();
                let agent = format!("w{i}");
                let r = s.spawn(move || kernel.taskboard().claim(id, &agent, 60_000));
                until_waiting(&backend, i + 1);
                r
            })
            .collect();
        release.wait();
        holder.join().unwrap().unwrap();
        let answers: Vec<_> = claims.into_iter().map(|c| c.join().unwrap()).collect();
        assert!(answers[0].is_ok(), "{answers:?}");
        assert_eq!(answers[1], Err(Error::Taken));
        assert!(answers[2].is_ok(), "{answers:?}");
    });
    let after = backend.group_stats();
    assert_eq!(after.calls - before.calls, 4);
    assert_eq!(after.commits - before.commits, 1, "{before:?} -> {after:?}");
    // Everything the batch kept is durable; the refused call left nothing.
    let reopened = open(&dir).0;
    let a = reopened.taskboard().get("a").unwrap();
    assert_eq!(
        (a.state, a.owner.as_deref(), a.fence),
        (TaskState::Claimed, Some("w0"), 1)
    );
    assert_eq!(
        reopened.taskboard().get("b").unwrap().owner.as_deref(),
        Some("w2")
    );
    assert_eq!(reopened.sideeffect().sink_seen("ledger").unwrap(), 1);
}

#[test]
fn a_lone_call_commits_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (kernel, backend) = open(&dir);
    let before = backend.group_stats();
    kernel.taskboard().seed(&[TaskSeed::new("a")]).unwrap();
    assert_eq!(
        kernel.taskboard().claim("zz", "w", 10),
        Err(Error::NotFound)
    );
    let after = backend.group_stats();
    assert_eq!(
        (after.calls - before.calls, after.commits - before.commits),
        (2, 2)
    );
}
