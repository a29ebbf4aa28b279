//! The operator's worked example, end to end through the `gak` binary: a
//! worker claims a refund task, acquires the refund's side-effect key and is
//! SIGKILLed mid-effect; its intent expires and the key turns `uncertain`;
//! the operator finds it, takes the reconcile claim, records the verdict from
//! the payment provider's facts, and the next attempt replays instead of
//! refunding twice. Run on SQLite and PostgreSQL.
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::cli::{Operator, Ran, assert_fields, doc};

/// The refund's idempotency key, resource and the worker's lease (ms).
pub const KEY: &str = "refund/order-42";
/// The resource the refund fences on.
pub const RESOURCE: &str = "payments";
/// Short, so the dead worker's intent expires quickly.
pub const LEASE_MS: &str = "300";
/// The result the payment provider reports for the refund.
pub const REFUND_ID: &str = "re_3PqX9";
/// How long a dead worker's intent may take to show as uncertain.
pub const EXPIRY_DEADLINE: Duration = Duration::from_secs(30);

/// The board of the example.
pub const TASKS: &str = r#"[
  {"id": "refund-42", "title": "Refund order 42"},
  {"id": "notify-42", "title": "Tell the customer", "deps": ["refund-42"]}
]"#;

/// A worker that acquired the key and is blocked applying it.
pub struct HeldKey {
    child: Child,
    /// The holder the kernel minted for it (a capability).
    pub holder: String,
}

/// Start `gak-effect-worker hold` and wait for its grant line.
pub fn hold(worker: &Path, store: &str) -> HeldKey {
    let mut child = Command::new(worker)
        .args([store, "hold", KEY, RESOURCE, LEASE_MS, "unsafe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the effect worker");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("read the worker's grant");
    let holder = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("holder="))
        .unwrap_or_else(|| panic!("the worker was not granted the key: {line:?}"))
        .to_owned();
    HeldKey { child, holder }
}

impl HeldKey {
    /// SIGKILL the worker mid-effect: no verdict is ever recorded.
    pub fn kill(mut self) -> String {
        self.child.kill().expect("SIGKILL the worker");
        let status = self.child.wait().expect("reap the worker");
        assert_eq!(status.signal(), Some(9), "the worker died by SIGKILL");
        self.holder
    }
}

/// What the next attempt at the key sees.
pub fn probe(worker: &Path, store: &str) -> String {
    let out = Command::new(worker)
        .args([store, "probe", KEY, RESOURCE, LEASE_MS, "unsafe"])
        .output()
        .expect("run the probe");
    assert!(
        out.status.success(),
        "probe failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The whole story on `op`'s store, checking every `--json` document against
/// the documented fields and every capability against every other output.
pub fn stuck_refund(op: &mut Operator, worker: &Path, dir: &Path) {
    std::fs::write(dir.join("tasks.json"), TASKS).expect("write tasks.json");
    let seeded = op.json(&["tasks", "seed", "tasks.json"]);
    assert_fields("tasks seed", &seeded, doc::SEED);
    assert_eq!(seeded["seeded"], 2);

    let claimed = op.json(&[
        "tasks",
        "claim",
        "refund-42",
        "--agent",
        "worker-1",
        "--ttl",
        "30s",
    ]);
    assert_fields("tasks claim", &claimed, doc::CLAIMED_TASK);
    assert_eq!(
        (claimed["state"].as_str(), claimed["fence"].as_u64()),
        (Some("claimed"), Some(1))
    );
    let token = claimed["token"]
        .as_str()
        .expect("a minted token")
        .to_owned();
    let shown = op.json(&["tasks", "show", "refund-42"]);
    assert_fields("tasks show", &shown, doc::TASK);
    let taken = op.run(&[
        "tasks",
        "claim",
        "refund-42",
        "--agent",
        "worker-2",
        "--ttl",
        "30s",
    ]);
    taken.expect_code(1);
    assert!(taken.stderr.contains("(taken)"), "{}", taken.stderr);

    // The worker acquires the refund's key and dies applying it.
    let holder = hold(worker, op.store()).kill();

    let page = op.poll_json(
        &["effects", "list", "--state", "uncertain"],
        EXPIRY_DEADLINE,
        |doc| {
            doc["items"]
                .as_array()
                .is_some_and(|i| i.iter().any(|k| k["key"] == KEY))
        },
    );
    assert_fields("effects list", &page, doc::PAGE);
    for item in page["items"].as_array().expect("items") {
        assert_fields("effects list item", item, doc::KEY);
    }
    let info = op.json(&["effects", "show", KEY]);
    assert_fields("effects show", &info, doc::KEY);
    assert_eq!(info["state"], "uncertain");
    assert_eq!(info["reason"], "intent-expired");
    assert_eq!(info["resource"], RESOURCE);
    assert_eq!(info["retry-safety"], "unsafe");
    assert_eq!(probe(worker, op.store()), "UNCERTAIN intent-expired");

    let claim_doc = op.json(&["effects", "reconcile", KEY, "--ttl", "5m"]);
    assert_fields("effects reconcile", &claim_doc, doc::RECONCILE);
    let claim = claim_doc["claim"]
        .as_str()
        .expect("a minted claim")
        .to_owned();
    let second = op.run(&["effects", "reconcile", KEY, "--json"]);
    second.expect_code(1);
    assert_error(&second, "reconcile-taken");
    let info = op.json(&["effects", "show", KEY]);
    assert!(info["reconciling-until"].is_u64(), "{info:#}");
    // An unsafe refund cannot be reopened without --force: the kernel says so.
    let reopen = op.run(&[
        "effects",
        "resolve",
        KEY,
        "--claim",
        &claim,
        "--not-applied",
        "--json",
    ]);
    reopen.expect_code(1);
    assert_error(&reopen, "unsafe-not-retryable");
    let stale = op.run(&[
        "effects",
        "resolve",
        KEY,
        "--claim",
        "0123456789abcdef0123456789abcdef",
        "--applied",
    ]);
    stale.expect_code(1);
    assert!(
        stale.stderr.contains("(reconcile-taken)"),
        "{}",
        stale.stderr
    );

    // The payment provider shows the refund went through: record it.
    let resolved = op.json(&[
        "effects",
        "resolve",
        KEY,
        "--claim",
        &claim,
        "--applied",
        "--result",
        REFUND_ID,
    ]);
    assert_fields("effects resolve", &resolved, doc::RESOLVED_APPLIED);
    assert_eq!(
        (resolved["resolved"].as_str(), resolved["result"].as_str()),
        (Some("completed"), Some(REFUND_ID))
    );
    assert_eq!(probe(worker, op.store()), format!("REPLAYED {REFUND_ID}"));
    let done = op.json(&["effects", "list", "--state", "completed"]);
    assert!(
        done["items"]
            .as_array()
            .is_some_and(|i| i.iter().any(|k| k["key"] == KEY)),
        "{done:#}"
    );
    assert_eq!(
        op.json(&["effects", "list", "--state", "uncertain"])["items"],
        Value::Array(vec![])
    );

    // The worker's task: a wrong token is refused, the real one completes it.
    let wrong = op.run(&[
        "tasks",
        "complete",
        "refund-42",
        "--token",
        "ffffffffffffffffffffffffffffffff",
    ]);
    wrong.expect_code(1);
    assert!(wrong.stderr.contains("(lease-lost)"), "{}", wrong.stderr);
    let renewed = op.json(&[
        "tasks",
        "renew",
        "refund-42",
        "--token",
        &token,
        "--ttl",
        "1m",
    ]);
    assert_fields("tasks renew", &renewed, doc::TASK);
    let completed = op.run_with(
        &["tasks", "complete", "refund-42", "--json"],
        &[("GAK_TOKEN", &token)],
        None,
    );
    completed.expect_code(0);
    assert_fields("tasks complete", &completed.json(), doc::COMPLETED);
    let next = op.json(&["tasks", "claim-next", "--agent", "worker-2", "--ttl", "30s"]);
    assert_fields("tasks claim-next", &next, doc::CLAIMED_TASK);
    assert_eq!(next["id"], "notify-42");
    let next_token = next["token"].as_str().expect("a minted token").to_owned();
    let released = op.json(&["tasks", "release", "notify-42", "--token", &next_token]);
    assert_fields("tasks release", &released, doc::RELEASED);
    assert_eq!(released["state"], "open");
    let board = op.json(&["tasks", "list"]);
    assert_fields("tasks list", &board, doc::PAGE);
    for item in board["items"].as_array().expect("items") {
        assert_fields("tasks list item", item, doc::TASK);
    }
    let none = op.json(&["tasks", "list", "--state", "claimed"]);
    assert_eq!(none["items"], Value::Array(vec![]));

    // Capabilities: each appears only where it was minted (the holder was
    // minted for the worker, so no `gak` output may show it at all).
    op.assert_shown_only_by("task token", &token, |r| {
        is(r, &["tasks", "claim", "refund-42"])
    });
    op.assert_shown_only_by("task token", &next_token, |r| {
        is(r, &["tasks", "claim-next"])
    });
    op.assert_shown_only_by("reconcile claim", &claim, |r| {
        is(r, &["effects", "reconcile"])
    });
    op.assert_shown_only_by("holder", &holder, |_| false);
}

/// Whether `ran` is the command `prefix…`.
pub fn is(ran: &Ran, prefix: &[&str]) -> bool {
    ran.args.len() >= prefix.len() && ran.args.iter().zip(prefix).all(|(a, p)| a == p)
}

/// A `--json` refusal: one JSON object on stderr with the documented fields.
pub fn assert_error(ran: &Ran, code: &str) {
    let err: Value = serde_json::from_str(ran.stderr.trim())
        .unwrap_or_else(|e| panic!("stderr is not a JSON error ({e}): {}", ran.stderr));
    assert_fields("error", &err, doc::ERROR);
    assert_eq!(err["error"], code, "{err:#}");
    assert_eq!(err["exit"].as_i64(), Some(i64::from(ran.code)));
}
