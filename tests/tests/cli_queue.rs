//! The job queue through the `gak` binary (SPEC 10): the new task fields in
//! `--json`, tables and `tasks show`; dead tasks listed and revived; group
//! limits shown, set and removed; a seed file with the new fields.
use std::path::Path;

use gak::blocking::Kernel;
use gak_tests::cli::{Operator, Ran, assert_fields, doc};
use gak_tests::worked::assert_error;
use serde_json::{Value, json};

fn sqlite(dir: &Path) -> String {
    format!("sqlite:{}", dir.join("ops.db").display())
}

/// A table's rows as words (the header first).
fn words(ran: &Ran) -> Vec<Vec<String>> {
    ran.expect_code(0);
    ran.stdout
        .lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// The `field value` lines of `tasks show` as pairs (values joined by one
/// space).
fn pairs(ran: &Ran) -> Vec<(String, String)> {
    words(ran)
        .into_iter()
        .map(|w| (w[0].clone(), w[1..].join(" ")))
        .collect()
}

fn field<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn ids(page: &Value) -> Vec<&str> {
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|t| t["id"].as_str().expect("an id"))
        .collect()
}

const BOARD: &str = r#"[
  {"id": "plain", "title": "Plain"},
  {"id": "urgent", "title": "Urgent", "priority": 7, "max-attempts": 3, "group": "mail"},
  {"id": "later", "title": "Later", "not-before": 4000000000000, "priority": -2}
]"#;

#[test]
fn the_new_task_fields_show_in_json_tables_and_show() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("board.json"), BOARD).unwrap();
    let mut op = Operator::new(&sqlite(dir.path()), dir.path());
    let seeded = op.json(&["tasks", "seed", "board.json"]);
    assert_eq!(seeded["seeded"], 3);

    let page = op.json(&["tasks", "list"]);
    assert_fields("tasks list", &page, doc::PAGE);
    for item in page["items"].as_array().unwrap() {
        assert_fields("tasks list item", item, doc::TASK);
    }
    let [later, plain, urgent] = [0, 1, 2].map(|i| page["items"][i].clone());
    assert_eq!(
        (later["id"].as_str(), later["priority"].as_i64()),
        (Some("later"), Some(-2))
    );
    assert_eq!(later["not-before"], 4_000_000_000_000u64);
    // Absent values are null, as the other optional fields are.
    for name in ["not-before", "max-attempts", "group", "last-error"] {
        assert!(plain[name].is_null(), "{name}: {plain:#}");
    }
    assert_eq!(
        (plain["priority"].as_i64(), plain["attempts"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(urgent["max-attempts"], 3);
    assert_eq!(urgent["group"], "mail");

    // The table: TRIES always, PRI/DUE/GROUP only because some row has one.
    let table = words(&op.run(&["tasks", "list"]));
    assert_eq!(
        table[0],
        [
            "ID", "STATE", "PRI", "OWNER", "FENCE", "TRIES", "UNTIL", "DUE", "GROUP", "DEPS",
            "TITLE"
        ]
    );
    assert_eq!(
        table[2],
        [
            "plain", "open", "0", "-", "0", "0", "-", "-", "-", "-", "Plain"
        ]
    );
    assert_eq!(
        table[3],
        [
            "urgent", "open", "7", "-", "0", "0/3", "-", "-", "mail", "-", "Urgent"
        ]
    );
    assert_eq!(&table[1][..6], ["later", "open", "-2", "-", "0", "0"]);
    assert!(table[1][7].ends_with('Z'), "{:?}", table[1]);
    // A page without any of them keeps the plain columns.
    let open = words(&op.run(&["tasks", "list", "--after", "later", "--limit", "1"]));
    assert_eq!(
        open[0],
        [
            "ID", "STATE", "OWNER", "FENCE", "TRIES", "UNTIL", "DEPS", "TITLE"
        ]
    );

    // `tasks show`: attempts always, the others when set.
    let shown = pairs(&op.run(&["tasks", "show", "plain"]));
    assert_eq!(field(&shown, "attempts"), Some("0"));
    for name in [
        "priority",
        "not-before",
        "max-attempts",
        "group",
        "last-error",
    ] {
        assert_eq!(field(&shown, name), None, "{name}: {shown:?}");
    }
    let shown = pairs(&op.run(&["tasks", "show", "urgent"]));
    assert_eq!(field(&shown, "priority"), Some("7"));
    assert_eq!(field(&shown, "max-attempts"), Some("3"));
    assert_eq!(field(&shown, "group"), Some("mail"));
    let shown = pairs(&op.run(&["tasks", "show", "later"]));
    assert!(
        field(&shown, "not-before").is_some_and(|v| v.starts_with("2096-")),
        "{shown:?}"
    );

    // A claim shows the attempt it took; the highest priority goes first.
    let claimed = op.json(&["tasks", "claim-next", "--agent", "w", "--ttl", "1m"]);
    assert_fields("tasks claim-next", &claimed, doc::CLAIMED_TASK);
    assert_eq!(
        (claimed["id"].as_str(), claimed["attempts"].as_u64()),
        (Some("urgent"), Some(1))
    );
    let shown = op.json(&["tasks", "show", "urgent"]);
    assert_fields("tasks show", &shown, doc::TASK);
    assert_eq!(shown["attempts"], 1);
}

#[test]
fn seed_files_take_the_queue_fields_and_refuse_the_shown_only_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut op = Operator::new(&sqlite(dir.path()), dir.path());
    for (board, code, error) in [
        // Attempts and last errors are the kernel's to record.
        (r#"[{"id": "a", "attempts": 2}]"#, 2, "usage"),
        (r#"[{"id": "a", "last-error": "x"}]"#, 2, "usage"),
        (r#"[{"id": "a", "priority": "high"}]"#, 2, "usage"),
        // Dead is reached, never seeded; the kernel refuses it.
        (r#"[{"id": "a", "state": "dead"}]"#, 1, "invalid-input"),
        (r#"[{"id": "a", "max-attempts": 0}]"#, 1, "invalid-input"),
    ] {
        let ran = op.run_with(&["tasks", "seed", "-", "--json"], &[], Some(board));
        assert_eq!(ran.code, code, "{board}: {}", ran.all());
        assert_error(&ran, error);
    }
    let board =
        r#"[{"id": "a", "priority": -5, "not-before": 1000, "max-attempts": 2, "group": "g"}]"#;
    op.run_with(&["tasks", "seed", "-"], &[], Some(board))
        .expect_code(0);
    let a = op.json(&["tasks", "show", "a"]);
    assert_eq!(
        [
            &a["priority"],
            &a["not-before"],
            &a["max-attempts"],
            &a["group"],
            &a["attempts"]
        ],
        [&json!(-5), &json!(1000), &json!(2), &json!("g"), &json!(0)]
    );
}

#[test]
fn a_dead_task_is_listed_and_revived_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite(dir.path());
    let mut op = Operator::new(&url, dir.path());
    let board = r#"[{"id": "job", "title": "Send mail", "max-attempts": 1, "group": "mail"},
                    {"id": "ok", "title": "Fine"}]"#;
    op.run_with(&["tasks", "seed", "-"], &[], Some(board))
        .expect_code(0);
    assert_eq!(
        ids(&op.json(&["tasks", "list", "--state", "dead"])),
        Vec::<&str>::new()
    );

    // Its one attempt fails: the task is dead.
    let claimed = op.json(&["tasks", "claim", "job", "--agent", "w", "--ttl", "1m"]);
    let token = claimed["token"].as_str().unwrap().to_owned();
    let kernel = Kernel::open(&url).unwrap();
    let failed = kernel
        .taskboard()
        .fail("job", &token, "smtp said 550", None)
        .unwrap();
    assert_eq!(failed.state.name(), "dead");
    drop(kernel);

    let dead = op.json(&["tasks", "list", "--state", "dead"]);
    assert_eq!(ids(&dead), ["job"]);
    let item = &dead["items"][0];
    assert_fields("tasks list item", item, doc::TASK);
    assert_eq!(item["state"], "dead");
    assert_eq!(item["attempts"], 1);
    assert_eq!(item["last-error"], "smtp said 550");
    assert!(
        item["owner"].is_null() && item["until"].is_null(),
        "{item:#}"
    );
    let table = words(&op.run(&["tasks", "list", "--state", "dead"]));
    assert_eq!(
        table[0],
        [
            "ID",
            "STATE",
            "OWNER",
            "FENCE",
            "TRIES",
            "UNTIL",
            "GROUP",
            "DEPS",
            "TITLE",
            "LAST-ERROR"
        ]
    );
    assert_eq!(
        table[1],
        [
            "job", "dead", "-", "1", "1/1", "-", "mail", "-", "Send", "mail", "smtp", "said", "550"
        ]
    );
    let shown = pairs(&op.run(&["tasks", "show", "job"]));
    assert_eq!(field(&shown, "state"), Some("dead"));
    assert_eq!(field(&shown, "attempts"), Some("1"));
    assert_eq!(field(&shown, "last-error"), Some("smtp said 550"));
    // Dead is terminal for claims.
    let claim = op.run(&[
        "tasks", "claim", "job", "--agent", "w", "--ttl", "1m", "--json",
    ]);
    claim.expect_code(1);
    assert_error(&claim, "terminal");

    // Revive: open, attempts 0, last error cleared, fence and group kept.
    let revived = op.json(&["tasks", "revive", "job"]);
    assert_fields("tasks revive", &revived, doc::TASK);
    assert_eq!(
        [
            &revived["state"],
            &revived["attempts"],
            &revived["last-error"],
            &revived["fence"],
            &revived["group"]
        ],
        [
            &json!("open"),
            &json!(0),
            &Value::Null,
            &json!(1),
            &json!("mail")
        ]
    );
    assert!(!revived.to_string().contains(&token), "{revived:#}");
    assert_eq!(
        ids(&op.json(&["tasks", "list", "--state", "dead"])),
        Vec::<&str>::new()
    );
    assert_eq!(
        ids(&op.json(&["tasks", "list", "--state", "open"])),
        ["job", "ok"]
    );

    // Only a dead task is revived: a live claim is never cleared.
    let live = op.json(&["tasks", "claim", "job", "--agent", "w2", "--ttl", "1m"]);
    let again = op.run(&["tasks", "revive", "job", "--json"]);
    again.expect_code(1);
    assert_error(&again, "not-dead");
    let text = op.run(&["tasks", "revive", "job"]);
    text.expect_code(1);
    assert!(
        text.stderr.starts_with("gak: refused (not-dead): task job"),
        "{}",
        text.stderr
    );
    let still = op.json(&["tasks", "show", "job"]);
    assert_eq!(
        (still["state"].as_str(), &still["fence"]),
        (Some("claimed"), &live["fence"])
    );
    let missing = op.run(&["tasks", "revive", "nope", "--json"]);
    missing.expect_code(1);
    assert_error(&missing, "not-found");

    // The text form prints the task as `tasks show` does.
    let kernel = Kernel::open(&url).unwrap();
    let live_token = live["token"].as_str().unwrap();
    kernel
        .taskboard()
        .fail("job", live_token, "again", None)
        .unwrap();
    drop(kernel);
    let shown = pairs(&op.run(&["tasks", "revive", "job"]));
    assert_eq!(field(&shown, "state"), Some("open"));
    assert_eq!(field(&shown, "attempts"), Some("0"));
    assert_eq!(field(&shown, "last-error"), None);
    assert_eq!(field(&shown, "token"), None);
    op.assert_shown_only_by("task token", &token, |r| r.args[..2] == ["tasks", "claim"]);
}

#[test]
fn groups_show_limit_and_remove() {
    let dir = tempfile::tempdir().unwrap();
    let mut op = Operator::new(&sqlite(dir.path()), dir.path());
    let board = r#"[{"id": "m1", "group": "mail"}, {"id": "m2", "group": "mail"}]"#;
    op.run_with(&["tasks", "seed", "-"], &[], Some(board))
        .expect_code(0);

    // No limit yet: get-group knows only limited groups.
    let none = op.run(&["groups", "show", "mail", "--json"]);
    none.expect_code(1);
    assert_error(&none, "not-found");
    let none = op.run(&["groups", "show", "mail"]);
    none.expect_code(1);
    assert!(
        none.stderr
            .starts_with("gak: refused (not-found): group mail has no limit"),
        "{}",
        none.stderr
    );

    let set = op.json(&["groups", "limit", "mail", "1"]);
    assert_fields("groups limit", &set, doc::GROUP);
    assert_eq!(set, json!({"group": "mail", "limit": 1, "live": 0}));
    let first = op.json(&["tasks", "claim-next", "--agent", "w", "--ttl", "1m"]);
    assert_eq!(first["id"], "m1");
    // The group is full: claim-next skips it, claim is refused.
    let next = op.json(&["tasks", "claim-next", "--agent", "w", "--ttl", "1m"]);
    assert!(next.is_null(), "{next:#}");
    let full = op.run(&[
        "tasks", "claim", "m2", "--agent", "w", "--ttl", "1m", "--json",
    ]);
    full.expect_code(1);
    assert_error(&full, "group-full");
    let shown = op.json(&["groups", "show", "mail"]);
    assert_fields("groups show", &shown, doc::GROUP);
    assert_eq!(shown, json!({"group": "mail", "limit": 1, "live": 1}));
    let text = pairs(&op.run(&["groups", "show", "mail"]));
    assert_eq!(
        text,
        [("group", "mail"), ("limit", "1"), ("live", "1")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
    );
    let raised = pairs(&op.run(&["groups", "limit", "mail", "2"]));
    assert_eq!(field(&raised, "limit"), Some("2"));
    assert_eq!(field(&raised, "live"), Some("1"));
    op.json(&["groups", "limit", "mail", "1"]);

    // Out of range: the kernel refuses it; nothing changes.
    for bad in ["0", "100001"] {
        let ran = op.run(&["groups", "limit", "mail", bad, "--json"]);
        ran.expect_code(1);
        assert_error(&ran, "invalid-input");
    }
    assert_eq!(op.json(&["groups", "show", "mail"])["limit"], 1);

    // Removed: no limit, the next task is claimable.
    let removed = op.json(&["groups", "limit", "mail", "--remove"]);
    assert_fields("groups limit --remove", &removed, doc::GROUP);
    assert_eq!(
        removed,
        json!({"group": "mail", "limit": null, "live": null})
    );
    let text = op.run(&["groups", "limit", "mail", "--remove"]);
    text.expect_code(0);
    assert_eq!(text.stdout, "removed the limit of group mail\n");
    op.run(&["groups", "show", "mail"]).expect_code(1);
    let second = op.json(&["tasks", "claim-next", "--agent", "w", "--ttl", "1m"]);
    assert_eq!(second["id"], "m2");

    // Exactly one of LIMIT and --remove.
    for args in [
        &["groups", "limit", "mail"][..],
        &["groups", "limit", "mail", "2", "--remove"],
        &["groups", "limit", "mail", "two"],
        &["groups", "show"],
    ] {
        let ran = op.run(args);
        assert_eq!(ran.code, 2, "gak {}: {}", args.join(" "), ran.all());
    }
}

#[test]
fn groups_list_and_delayed_tasks_page() {
    let dir = tempfile::tempdir().unwrap();
    let mut op = Operator::new(&sqlite(dir.path()), dir.path());
    let far = 4_000_000_000_000u64;
    let board = format!(
        r#"[{{"id": "m1", "group": "mail"}}, {{"id": "s1", "group": "sms"}},
            {{"id": "later", "not-before": {far}}}, {{"id": "sooner", "not-before": {}}}]"#,
        far - 1
    );
    op.run_with(&["tasks", "seed", "-"], &[], Some(&board))
        .expect_code(0);
    op.json(&["groups", "limit", "mail", "2"]);
    op.json(&["tasks", "claim", "s1", "--agent", "w", "--ttl", "1m"]);

    let page = op.json(&["groups", "list"]);
    assert_fields("groups list", &page, doc::PAGE);
    for item in page["items"].as_array().unwrap() {
        assert_fields(
            "groups list items",
            item,
            &[doc::GROUP, &["tasks"]].concat(),
        );
        assert_fields("groups list items' tasks", &item["tasks"], doc::TASK_STATES);
    }
    let tasks = |open: u64, claimed: u64| json!({"open": open, "claimed": claimed, "done": 0, "failed": 0, "dead": 0});
    assert_eq!(
        page,
        json!({"items": [
            {"group": "mail", "limit": 2, "live": 0, "tasks": tasks(1, 0)},
            {"group": "sms", "limit": null, "live": 1, "tasks": tasks(0, 1)}
        ], "next": null})
    );
    let first = op.json(&["groups", "list", "--limit", "1"]);
    assert_eq!(first["next"], "mail");
    let rest = op.json(&["groups", "list", "--after", "mail"]);
    assert_eq!(rest["items"][0]["group"], "sms");
    let table = words(&op.run(&["groups", "list"]));
    assert_eq!(
        table[0],
        [
            "GROUP", "LIMIT", "LIVE", "OPEN", "CLAIMED", "DONE", "FAILED", "DEAD"
        ]
    );
    assert_eq!(table[1], ["mail", "2", "0", "1", "0", "0", "0", "0"]);
    assert_eq!(table[2], ["sms", "-", "1", "0", "1", "0", "0", "0"]);

    let mail = op.json(&["tasks", "list", "--group", "mail"]);
    assert_fields("tasks list --group", &mail, doc::PAGE);
    assert_eq!(ids(&mail), ["m1"]);
    let sms = op.json(&["tasks", "list", "--group", "sms"]);
    assert_eq!(
        (ids(&sms), sms["items"][0]["state"].as_str()),
        (vec!["s1"], Some("claimed"))
    );
    op.run(&["tasks", "list", "--group", "mail", "--state", "open"])
        .expect_code(2);
    let delayed = op.json(&["tasks", "delayed", "--limit", "1"]);
    assert_fields("tasks delayed", &delayed, doc::PAGE);
    assert_eq!(ids(&delayed), ["sooner"]);
    let next = delayed["next"].as_str().unwrap().to_owned();
    let rest = op.json(&["tasks", "delayed", "--after", &next]);
    assert_eq!(ids(&rest), ["later"]);
    assert!(rest["next"].is_null());
    let bad = op.run(&["tasks", "delayed", "--after", "m1", "--json"]);
    bad.expect_code(1);
    assert_error(&bad, "invalid-input");
}

#[test]
fn tasks_count_by_state_and_recount_a_format_1_board() {
    let dir = tempfile::tempdir().unwrap();
    let mut op = Operator::new(&sqlite(dir.path()), dir.path());
    op.run_with(
        &["tasks", "seed", "-"],
        &[],
        Some(r#"[{"id": "a"}, {"id": "b", "state": "done"}, {"id": "c", "max-attempts": 1}]"#),
    )
    .expect_code(0);
    op.json(&["tasks", "claim", "c", "--agent", "w", "--ttl", "1m"]);
    op.json(&["tasks", "claim", "a", "--agent", "w", "--ttl", "1m"]);
    let counts = op.json(&["tasks", "count"]);
    assert_fields("tasks count", &counts, doc::COUNTS);
    assert_eq!(
        counts,
        json!({"open": 0, "claimed": 2, "done": 1, "failed": 0, "dead": 0, "total": 3, "exact": true})
    );
    let table = words(&op.run(&["tasks", "count"]));
    assert_eq!(table[0], ["STATE", "TASKS"]);
    assert_eq!(table[2], ["claimed", "2"]);
    assert_eq!(table.len(), 6, "no note on an exact board: {table:?}");

    // The format-1 golden board: nothing counted until a recount.
    let old = dir.path().join("format1.sqlite");
    std::fs::copy(gak_tests::golden::dir().join("format1.sqlite"), &old).unwrap();
    let mut op = Operator::new(&format!("sqlite:{}", old.display()), dir.path());
    let before = op.json(&["tasks", "count"]);
    assert_eq!(
        (before["total"].as_u64(), before["exact"].as_bool()),
        (Some(0), Some(false))
    );
    let note = op.run(&["tasks", "count"]);
    assert!(note.stdout.contains("gak tasks recount"), "{}", note.stdout);
    let after = op.json(&["tasks", "recount", "--page", "3"]);
    assert_fields("tasks recount", &after, &[doc::COUNTS, &["pages"]].concat());
    assert_eq!(
        (
            after["total"].as_u64(),
            after["exact"].as_bool(),
            after["pages"].as_u64()
        ),
        (Some(7), Some(true), Some(3))
    );
    let bad = op.run(&["tasks", "recount", "--page", "0", "--json"]);
    bad.expect_code(1);
    assert_error(&bad, "invalid-input");
}

#[test]
fn effects_count_by_state_and_recount_a_format_1_store() {
    let dir = tempfile::tempdir().unwrap();
    // A new store: nothing to count, and exact.
    let mut op = Operator::new(&sqlite(dir.path()), dir.path());
    op.run_with(&["tasks", "seed", "-"], &[], Some(r#"[{"id": "a"}]"#))
        .expect_code(0);
    let empty = op.json(&["effects", "count"]);
    assert_fields("effects count", &empty, doc::KEY_COUNTS);
    assert_eq!(
        (empty["total"].as_u64(), empty["exact"].as_bool()),
        (Some(0), Some(true))
    );
    assert!(empty["oldest-uncertain"].is_null());

    // The format-1 golden store: no key counted until a recount; then the
    // counts are what the listing shows, state by state.
    let old = dir.path().join("format1.sqlite");
    std::fs::copy(gak_tests::golden::dir().join("format1.sqlite"), &old).unwrap();
    let mut op = Operator::new(&format!("sqlite:{}", old.display()), dir.path());
    let before = op.json(&["effects", "count"]);
    assert_eq!(
        (before["total"].as_u64(), before["exact"].as_bool()),
        (Some(0), Some(false))
    );
    let note = op.run(&["effects", "count"]);
    assert!(
        note.stdout.contains("gak effects recount"),
        "{}",
        note.stdout
    );
    let after = op.json(&["effects", "recount", "--page", "2"]);
    assert_fields(
        "effects recount",
        &after,
        &[doc::KEY_COUNTS, &["pages"]].concat(),
    );
    assert_eq!(after["exact"].as_bool(), Some(true));
    assert!(after["pages"].as_u64().unwrap() >= 2, "{after}");
    let listed = |op: &mut Operator, state: &str| -> u64 {
        let page = op.json(&["effects", "list", "--state", state, "--limit", "1000"]);
        page["items"].as_array().unwrap().len() as u64
    };
    let mut total = 0;
    for state in ["cleared", "in-flight", "uncertain", "completed"] {
        let n = listed(&mut op, state);
        assert_eq!(after[state].as_u64(), Some(n), "{state}: {after}");
        total += n;
    }
    assert!(after["uncertain"].as_u64().unwrap() >= 2, "{after}");
    assert_eq!(after["total"].as_u64(), Some(total));
    let age = after["oldest-uncertain-age-ms"].as_u64().unwrap();
    assert!(age > 0, "{after}");
    let table = words(&op.run(&["effects", "count"]));
    assert_eq!(table[0], ["STATE", "KEYS"]);
    assert!(
        table.iter().any(|row| row[..2] == ["oldest", "uncertain"]),
        "{table:?}"
    );
    let bad = op.run(&["effects", "recount", "--page", "0", "--json"]);
    bad.expect_code(1);
    assert_error(&bad, "invalid-input");
}
