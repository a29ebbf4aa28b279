//! The `gak` binary's conventions, driven through the binary: exit codes,
//! usage errors, refusals, storage failures and paging.
use std::path::Path;

use gak_tests::cli::{Operator, run_gak};
use gak_tests::worked::assert_error;

fn sqlite(dir: &Path) -> String {
    format!("sqlite:{}", dir.join("ops.db").display())
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
        &["tasks", "revive", "--store", &store],
        &["groups", "show", "--store", &store],
        &["groups", "limit", "g", "--store", &store],
        &["groups", "limit", "g", "2", "--remove", "--store", &store],
        &["groups", "limit", "g", "-1", "--store", &store],
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
        !typo.all().contains(secret) && typo.stderr.contains("postgress://***@db"),
        "{}",
        typo.stderr
    );
    // A record the kernel cannot read (no format version): storage, naming
    // the store, and nothing else is changed.
    let backend = gak::blocking::run_future(gak::store::open(&sqlite(dir.path()))).unwrap();
    gak::blocking::run_future(async {
        let mut session = backend.session().await?;
        session.begin().await?;
        session
            .put("tasks", "corrupt", r#"{"id": "corrupt"}"#)
            .await?;
        session.commit().await
    })
    .unwrap();
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
