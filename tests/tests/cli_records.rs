//! `gak runs` and `gak prune` through the binary: snapshots, outcomes and
//! resume plans explained; pruning in bounded batches, and what it keeps.
use std::path::Path;
use std::sync::Arc;

use gak::blocking::Kernel;
use gak::{Acquired, Action, ManualClock, Outcome, Snapshot, Status, TaskSeed};
use gak_tests::cli::{Operator, assert_fields, doc};
use gak_tests::worked::assert_error;

const DAY: u64 = 86_400_000;

fn sqlite(dir: &Path) -> String {
    format!("sqlite:{}", dir.join("ops.db").display())
}

fn now() -> u64 {
    use gak::Clock;
    gak::SystemClock::default().now()
}

#[test]
fn runs_show_and_plan_explain_a_run_in_tables_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite(dir.path());
    let kernel = Kernel::open(&url).unwrap();
    let snap = Snapshot {
        run_id: "order-7".into(),
        seq: 3,
        fence: Some(2),
        status: "running".into(),
        done: vec!["reserve".into(), "ship".into(), "legacy-step".into()],
        fields: vec![("customer".into(), "c-9".into())],
    };
    kernel.checkpoint().save_if_newer(&snap).unwrap();
    std::fs::write(
        dir.path().join("steps.json"),
        r#"[{"id": "reserve"}, {"id": "charge", "depends-on": ["reserve"]},
            {"id": "ship", "depends-on": ["charge"]}]"#,
    )
    .unwrap();
    let mut op = Operator::new(&url, dir.path());

    let shown = op.json(&["runs", "show", "order-7"]);
    assert_fields("runs show", &shown, doc::RUN);
    assert_fields("snapshot", &shown["snapshot"], doc::SNAPSHOT);
    assert_eq!(shown["snapshot"]["fields"]["customer"], "c-9");
    assert!(shown["outcome"].is_null());

    let plan = op.json(&["runs", "plan", "order-7", "--steps", "steps.json"]);
    assert_fields("runs plan", &plan, doc::PLAN);
    assert_eq!(plan["skip"], serde_json::json!(["reserve"]));
    assert_eq!(plan["run"], serde_json::json!(["charge", "ship"]));
    let untrusted = plan["untrusted"].as_array().unwrap();
    assert_eq!(untrusted.len(), 2, "{plan:#}");
    for u in untrusted {
        assert_fields("untrusted", u, doc::UNTRUSTED);
    }
    assert_eq!(untrusted[0]["step"], "ship");
    assert!(
        untrusted[0]["why"].as_str().unwrap().contains("charge"),
        "{plan:#}"
    );
    assert_eq!(untrusted[1]["step"], "legacy-step");
    assert!(
        untrusted[1]["why"].as_str().unwrap().contains("unknown"),
        "{plan:#}"
    );
    let text = op.run(&["runs", "plan", "order-7", "--steps", "steps.json"]);
    text.expect_code(0);
    let lines: Vec<String> = text
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert!(
        lines.contains(&"run next charge, ship".to_owned()),
        "{}",
        text.stdout
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("untrusted legacy-step: not a step")),
        "{}",
        text.stdout
    );

    kernel
        .commitgate()
        .commit(
            "order-7",
            None,
            2,
            &Outcome {
                status: Status::Succeeded,
                result: b"shipped".to_vec(),
            },
        )
        .unwrap();
    let shown = op.json(&["runs", "show", "order-7"]);
    assert_fields("outcome", &shown["outcome"], doc::OUTCOME);
    assert_eq!(shown["outcome"]["result"], "shipped");
    // Bytes that are not UTF-8 come out as base64, never mangled.
    kernel
        .checkpoint()
        .save_if_newer(&Snapshot {
            run_id: "binary".into(),
            seq: 1,
            fence: None,
            status: "s".into(),
            done: vec![],
            fields: vec![],
        })
        .unwrap();
    kernel
        .commitgate()
        .commit(
            "binary",
            None,
            0,
            &Outcome {
                status: Status::Failed,
                result: vec![0xff, 0xfe],
            },
        )
        .unwrap();
    let binary = op.json(&["runs", "show", "binary"]);
    assert_fields("outcome", &binary["outcome"], &["status", "result-base64"]);
    assert_eq!(binary["outcome"]["result-base64"], "//4=");
    op.run(&["runs", "show", "never-ran"]).expect_code(1);
    let plan_unknown = op.run(&[
        "runs",
        "plan",
        "never-ran",
        "--steps",
        "steps.json",
        "--json",
    ]);
    plan_unknown.expect_code(1);
    assert_error(&plan_unknown, "not-found");
}

#[test]
fn prune_loops_bounded_batches_and_dry_run_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite(dir.path());
    // Records finished ten days ago, by a clock set back.
    let clock = Arc::new(ManualClock::at(now() - 10 * DAY));
    let kernel = Kernel::with_backend(
        gak::blocking::run_future(gak::store::open(&url)).unwrap(),
        clock,
    )
    .unwrap();
    for i in 0..5 {
        let action = Action::new(&format!("mail/{i}"), &format!("smtp-{i}"));
        let Acquired::Granted(lease) = kernel.sideeffect().acquire(&action, 60_000).unwrap() else {
            panic!("fresh key");
        };
        kernel
            .sideeffect()
            .complete(&action, &lease, b"sent")
            .unwrap();
    }
    kernel.taskboard().seed(&[TaskSeed::new("old")]).unwrap();
    let t = kernel.taskboard().claim("old", "w", 60_000).unwrap();
    kernel
        .taskboard()
        .complete("old", t.token.as_deref().unwrap())
        .unwrap();
    // A safe key whose worker died ten days ago: uncertain by expiry.
    let lost = Action::new("mail/lost", "smtp-lost");
    let Acquired::Granted(_) = kernel.sideeffect().acquire(&lost, 60_000).unwrap() else {
        panic!("fresh key");
    };
    let mut op = Operator::new(&url, dir.path());
    let cleared = op.json(&["effects", "resolve", "mail/lost", "--not-applied"]);
    assert_fields(
        "effects resolve --not-applied",
        &cleared,
        doc::RESOLVED_CLEARED,
    );
    assert_eq!(cleared["resolved"], "cleared");
    assert_eq!(
        op.json(&["effects", "show", "mail/lost"])["state"],
        "cleared"
    );

    let dry = op.json(&["prune", "--older-than", "7d", "--limit", "2", "--dry-run"]);
    assert_fields("prune --dry-run", &dry, doc::PRUNE);
    assert_eq!(
        (dry["dry-run"].as_bool(), dry["more"].as_bool()),
        (Some(true), Some(true))
    );
    let kept = op.json(&["effects", "list", "--state", "completed"]);
    assert_eq!(
        kept["items"].as_array().unwrap().len(),
        5,
        "a dry run removes nothing"
    );

    let young = op.json(&["prune", "--older-than", "11d"]);
    assert_eq!(
        young["removed-keys"], 0,
        "nothing finished 11 days ago: {young:#}"
    );

    let pruned = op.json(&["prune", "--older-than", "7d", "--limit", "2", "--progress"]);
    assert_fields("prune", &pruned, doc::PRUNE);
    assert_eq!(pruned["removed-keys"], 5);
    assert_eq!(pruned["removed-tasks"], 1);
    assert_eq!(pruned["more"], false);
    assert!(
        pruned["batches"].as_u64().unwrap() >= 3,
        "limit 2 needs 3 batches: {pruned:#}"
    );
    let left = op.json(&["effects", "list"]);
    let left: Vec<&str> = left["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["key"].as_str().unwrap())
        .collect();
    assert_eq!(left, ["mail/lost"], "prune keeps cleared keys");
    let help = op.run(&["prune", "--help"]);
    assert!(
        help.stdout.contains("runs its effect again") && help.stdout.contains("starts over"),
        "{}",
        help.stdout
    );
}
