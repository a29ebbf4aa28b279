//! The `gak` binary's conventions, driven through the binary: exit codes,
//! usage errors, paging, and the `--json` documents of runs and prune.
use std::path::Path;
use std::sync::Arc;

use gak::{Acquired, Action, Kernel, ManualClock, Outcome, Snapshot, Status, TaskSeed};
use gak_tests::cli::{Operator, assert_fields, doc, run_gak};
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
fn wrong_arguments_are_usage_errors_with_exit_2_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.json"), "[{\"id\": 1}]").unwrap();
    std::fs::write(
        dir.path().join("typo.json"),
        "[{\"id\": \"a\", \"dependencies\": []}]",
    )
    .unwrap();
    let store = sqlite(dir.path());
    let cases: &[&[&str]] = &[
        &[],
        &["frobnicate"],
        &["tasks"],
        &["tasks", "list"], // no --store and no GAK_STORE
        &["tasks", "list", "--store", "nosuch://x"],
        &["tasks", "list", "--store", &store, "--state", "bogus"],
        &["tasks", "list", "--store", &store, "--limit", "ten"],
        &[
            "tasks", "claim", "t", "--store", &store, "--agent", "a", "--ttl", "30",
        ],
        &[
            "tasks", "claim", "t", "--store", &store, "--agent", "a", "--ttl", "0s",
        ],
        &["tasks", "claim", "t", "--store", &store, "--ttl", "30s"],
        &["tasks", "release", "t", "--store", &store],
        &["tasks", "seed", "--store", &store, "bad.json"],
        &["tasks", "seed", "--store", &store, "typo.json"],
        &["tasks", "seed", "--store", &store, "missing.json"],
        &["effects", "resolve", "k", "--store", &store],
        &[
            "effects",
            "resolve",
            "k",
            "--store",
            &store,
            "--applied",
            "--not-applied",
        ],
        &[
            "effects",
            "resolve",
            "k",
            "--store",
            &store,
            "--not-applied",
            "--result",
            "x",
        ],
        &[
            "effects",
            "resolve",
            "k",
            "--store",
            &store,
            "--applied",
            "--force",
        ],
        &["effects", "list", "--store", &store, "--state", "done"],
        &["runs", "plan", "r", "--store", &store],
        &[
            "runs",
            "plan",
            "r",
            "--store",
            &store,
            "--steps",
            "missing.json",
        ],
        &["prune", "--store", &store],
        &["prune", "--store", &store, "--older-than", "7"],
        &["component"],
        &["demo", "extra"],
        &["demo", "--store", "sqlite:x.db?clock=db"],
        &["conformance", "--store", "nosuch:"],
    ];
    for args in cases {
        let ran = run_gak(dir.path(), args, &[], &[], None);
        assert_eq!(
            ran.code,
            2,
            "gak {} → {}\n{}",
            args.join(" "),
            ran.code,
            ran.all()
        );
        assert!(
            !ran.stderr.trim().is_empty(),
            "gak {}: no message",
            args.join(" ")
        );
        assert!(
            !ran.stderr.contains("Some(") && !ran.stderr.contains("Failure("),
            "{}",
            ran.stderr
        );
    }
    // With --json, a usage error is a JSON document too.
    let ran = run_gak(
        dir.path(),
        &[
            "tasks", "list", "--store", &store, "--state", "bogus", "--json",
        ],
        &[],
        &[],
        None,
    );
    assert_eq!(ran.code, 2);
    assert_error(&ran, "usage");
    assert!(ran.stderr.contains("bogus"), "{}", ran.stderr);
    // Bad input for the board left nothing behind: no database was made.
    assert!(!dir.path().join("ops.db").exists());
}

#[test]
fn refusals_exit_1_with_their_code_and_storage_failures_exit_3_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let mut op = Operator::new(&sqlite(dir.path()), dir.path());
    op.run_with(&["tasks", "seed", "-"], &[], Some(r#"[{"id": "a"}]"#))
        .expect_code(0);
    let first = op.json(&["tasks", "claim-next", "--agent", "w", "--ttl", "1m"]);
    assert_eq!(first["id"], "a");
    let none = op.json(&["tasks", "claim-next", "--agent", "w", "--ttl", "1m"]);
    assert!(none.is_null(), "no task is ready: {none}");
    let limit = op.run(&["tasks", "list", "--limit", "0", "--json"]);
    limit.expect_code(1);
    assert_error(&limit, "invalid-input");
    let missing = op.run(&["tasks", "show", "nope"]);
    missing.expect_code(1);
    assert!(
        missing
            .stderr
            .starts_with("gak: refused (not-found): task nope"),
        "{}",
        missing.stderr
    );
    let not_uncertain = op.run(&["effects", "reconcile", "k", "--json"]);
    not_uncertain.expect_code(1);
    assert_error(&not_uncertain, "not-found");

    let secret = "hunter2-secret";
    for url in [
        format!("postgres://ops:{secret}@127.0.0.1:1/db"),
        format!("postgresql://ops:{secret}@127.0.0.1:1/db?schema=x&password={secret}"),
    ] {
        let ran = op.run(&["tasks", "list", "--store", &url]);
        ran.expect_code(3);
        assert!(
            ran.stderr.contains("127.0.0.1:1"),
            "names the store: {}",
            ran.stderr
        );
        assert!(!ran.all().contains(secret), "{}", ran.all());
        let json = op.run(&["tasks", "list", "--store", &url, "--json"]);
        json.expect_code(3);
        assert_error(&json, "storage");
        assert!(!json.all().contains(secret), "{}", json.all());
    }
    let typo = op.run(&[
        "tasks",
        "list",
        "--store",
        &format!("postgress://ops:{secret}@db/x"),
    ]);
    typo.expect_code(2);
    assert!(
        !typo.all().contains(secret) && typo.stderr.contains("ops:***@db"),
        "{}",
        typo.stderr
    );
    // A record the kernel cannot read (no format version): storage, naming
    // the store, and nothing else is changed.
    let backend = gak::store::open(&sqlite(dir.path())).unwrap();
    let mut session = backend.session().unwrap();
    session.begin().unwrap();
    session
        .put("tasks", "corrupt", r#"{"id": "corrupt"}"#)
        .unwrap();
    session.commit().unwrap();
    let corrupt = op.run(&["tasks", "show", "corrupt"]);
    corrupt.expect_code(3);
    let named = format!("the store {} failed", sqlite(dir.path()));
    assert!(corrupt.stderr.contains(&named), "{}", corrupt.stderr);
    // A directory where the database file should be: the store cannot open.
    std::fs::create_dir(dir.path().join("dir.db")).unwrap();
    let dir_store = format!("sqlite:{}", dir.path().join("dir.db").display());
    op.run(&["tasks", "list", "--store", &dir_store])
        .expect_code(3);
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
    let kernel = Kernel::with_backend(gak::store::open(&url).unwrap(), clock).unwrap();
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

#[test]
fn lists_page_with_the_next_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let mut op = Operator::new(&sqlite(dir.path()), dir.path());
    let seeds =
        r#"[{"id": "a"}, {"id": "b"}, {"id": "c", "state": "done"}, {"id": "d"}, {"id": "e"}]"#;
    op.run_with(&["tasks", "seed", "-"], &[], Some(seeds))
        .expect_code(0);
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut args = vec!["tasks", "list", "--limit", "2"];
        if let Some(a) = after.as_deref() {
            args.extend(["--after", a]);
        }
        let page = op.json(&args);
        let items = page["items"].as_array().unwrap();
        assert!(items.len() <= 2, "{page:#}");
        seen.extend(items.iter().map(|t| t["id"].as_str().unwrap().to_owned()));
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, ["a", "b", "c", "d", "e"]);
    let open = op.json(&["tasks", "list", "--state", "open", "--after", "b"]);
    let ids: Vec<&str> = open["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["d", "e"]);
    let text = op.run(&["tasks", "list", "--limit", "2"]);
    assert!(
        text.stdout.ends_with("(more: --after b)\n"),
        "{}",
        text.stdout
    );
}
