//! Running `gak-hammer` workers and auditing what they printed.
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};

use gak::blocking::Kernel;

/// What all workers reported.
#[derive(Debug, Default)]
pub struct Audit {
    /// Claim wins: task → the fences won.
    pub wins: BTreeMap<String, Vec<u64>>,
    /// Effect body runs per key.
    pub bodies: BTreeMap<String, usize>,
    /// Fences accepted by the fenced sink.
    pub sink_ok: BTreeSet<i64>,
    /// Fenced writes refused as stale.
    pub sink_stale: usize,
}

/// Start `workers` hammer processes at once (`bin` is the test's
/// `CARGO_BIN_EXE_gak-hammer`), wait for all, and parse their reports.
pub fn run(bin: &str, workers: usize, args: &[&str]) -> Audit {
    let children: Vec<_> = (0..workers)
        .map(|w| {
            let (url, rest) = args.split_first().expect("a store URL");
            Command::new(bin)
                .arg(url)
                .arg(format!("w{w}"))
                .args(rest)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn gak-hammer")
        })
        .collect();
    let mut audit = Audit::default();
    for child in children {
        let out = child.wait_with_output().expect("wait for gak-hammer");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "worker failed: {stderr}");
        for line in String::from_utf8(out.stdout).expect("utf-8").lines() {
            match line.split(' ').collect::<Vec<_>>().as_slice() {
                ["WIN", task, fence] => audit
                    .wins
                    .entry((*task).into())
                    .or_default()
                    .push(fence.parse().expect("fence")),
                ["BODY", key, ..] => *audit.bodies.entry((*key).into()).or_default() += 1,
                ["SINK", fence] => assert!(audit.sink_ok.insert(fence.parse().expect("fence"))),
                ["STALE", _] => audit.sink_stale += 1,
                other => panic!("unexpected line {other:?}"),
            }
        }
    }
    audit
}

impl Audit {
    /// Every claim epoch of every task was won exactly once and the board's
    /// fence equals the number of epochs (no grant lost or unreported).
    /// Returns the number of epochs.
    pub fn check_claims(&self, kernel: &Kernel) -> usize {
        let board: BTreeMap<String, u64> = kernel
            .taskboard()
            .list(None, None, 1000)
            .map(|p| p.items)
            .expect("list")
            .into_iter()
            .map(|t| (t.id, t.fence))
            .collect();
        let mut epochs = 0;
        for (task, fences) in &self.wins {
            let unique: BTreeSet<u64> = fences.iter().copied().collect();
            assert_eq!(
                unique.len(),
                fences.len(),
                "{task}: an epoch had two winners"
            );
            assert_eq!(
                unique,
                (1..=board[task]).collect(),
                "{task}: fences must be 1..=n"
            );
            epochs += fences.len();
        }
        epochs
    }

    /// Each of `keys` effect bodies ran exactly once across all processes.
    pub fn check_bodies(&self, keys: usize) {
        assert_eq!(self.bodies.len(), keys, "{:?}", self.bodies);
        for (key, n) in &self.bodies {
            assert_eq!(*n, 1, "{key} ran {n} times");
        }
    }
}
