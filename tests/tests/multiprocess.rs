//! Several OS processes on one SQLite file get the semantics of one process:
//! exactly one winner per claim epoch, at most one body execution per key.
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use gak::{Acquired, Action, Kernel, TaskSeed, TaskState};

const WORKERS: usize = 4;
const ROUNDS: usize = 200;
const KEYS: usize = 60;

#[test]
fn processes_sharing_a_sqlite_file() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("shared.db").display());
    let kernel = Kernel::open(&url).unwrap();
    let tasks: Vec<TaskSeed> = (0..4).map(|i| TaskSeed::new(&format!("t{i}"))).collect();
    kernel.taskboard().seed(&tasks).unwrap();

    let children: Vec<_> = (0..WORKERS)
        .map(|w| {
            Command::new(env!("CARGO_BIN_EXE_gak-hammer"))
                .args([
                    &url,
                    &format!("v{w}"),
                    &ROUNDS.to_string(),
                    &KEYS.to_string(),
                ])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn gak-hammer")
        })
        .collect();
    let mut wins: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut bodies: BTreeMap<String, usize> = BTreeMap::new();
    let mut lines = 0;
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "worker failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            lines += 1;
            let parts: Vec<&str> = line.split(' ').collect();
            match parts.as_slice() {
                ["WIN", task, fence] => wins
                    .entry((*task).into())
                    .or_default()
                    .push(fence.parse().unwrap()),
                ["BODY", key, ..] => *bodies.entry((*key).into()).or_default() += 1,
                other => panic!("unexpected line {other:?}"),
            }
        }
    }
    assert!(lines > 0);

    // Claims: every epoch (fence) of every task was won exactly once, and the
    // board's fence is the number of epochs: no grant went unreported.
    let board: BTreeMap<String, gak::Task> = kernel
        .taskboard()
        .list()
        .unwrap()
        .into_iter()
        .map(|t| (t.id.clone(), t))
        .collect();
    let mut epochs = 0;
    for (task, fences) in &wins {
        let unique: BTreeSet<u64> = fences.iter().copied().collect();
        assert_eq!(
            unique.len(),
            fences.len(),
            "{task}: an epoch had two winners"
        );
        let t = &board[task];
        assert_eq!(t.state, TaskState::Open);
        assert_eq!(
            unique,
            (1..=t.fence).collect(),
            "{task}: fences must be 1..=n"
        );
        epochs += fences.len();
    }
    assert!(epochs >= ROUNDS / 4, "too few epochs: {epochs}");

    // Effects: each key's body ran exactly once across all processes, and
    // the key now only replays.
    assert_eq!(bodies.len(), KEYS);
    for (key, n) in &bodies {
        assert_eq!(*n, 1, "{key} ran {n} times");
    }
    for n in 0..KEYS {
        let action = Action::new(&format!("k{n}"), &format!("res{}", n % 3));
        assert!(matches!(
            kernel.sideeffect().acquire(&action, 1_000).unwrap(),
            Acquired::Replayed(_)
        ));
    }
    eprintln!(
        "multiprocess: {epochs} claim epochs, {} keys, {lines} lines audited",
        bodies.len()
    );
}
