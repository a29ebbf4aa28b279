//! SIGKILL inside a transaction (SQLite): a process killed between the
//! component's writes and COMMIT leaves none of the operation; one killed
//! right after COMMIT leaves all of it.
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use gak::blocking::Kernel;

/// Run OPERATION in a child, kill it with SIGKILL at `at`, return the
/// store's entries per table afterwards.
fn kill_at(op: &str, at: &str) -> (usize, usize, usize) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tx.db").display().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gak-txkill"))
        .args([&path, at, op])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(
        line.trim(),
        format!("PAUSED {at}"),
        "the worker must reach the hook"
    );
    child.kill().unwrap(); // SIGKILL on Unix
    let status = child.wait().unwrap();
    assert!(!status.success());

    // A new process opens the file: SQLite recovers from the WAL.
    let kernel = Kernel::open(&format!("sqlite:{path}")).unwrap();
    let dump = kernel.dump().unwrap();
    let count = |t: &str| dump.iter().filter(|(table, _, _)| table == t).count();
    (count("tasks"), count("resources"), count("actions"))
}

#[test]
fn killed_before_commit_leaves_nothing() {
    assert_eq!(kill_at("seed", "before-commit"), (0, 0, 0));
    assert_eq!(kill_at("acquire", "before-commit"), (0, 0, 0));
}

#[test]
fn killed_after_commit_leaves_everything() {
    assert_eq!(kill_at("seed", "after-commit"), (200, 0, 0));
    assert_eq!(kill_at("acquire", "after-commit"), (0, 1, 1));
}
