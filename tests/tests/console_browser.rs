//! The console in a real browser (headless Chromium through ChromeDriver):
//! an operator revives a dead task, limits and frees a group, resolves an
//! uncertain key and runs a dry-run prune by clicking through the pages,
//! and the store (read back through the library) holds what each should
//! have done. Screenshots of the board and the keys page land in
//! `target/console-screenshots/`; with `GAK_BLESS=1` also in `docs/console/`,
//! where the README shows them.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them
//! when missing): without them the tests are reported ignored, and under
//! `CI=true` they fail.
use std::path::{Path, PathBuf};

use gak::blocking::Kernel;
use gak::{Acquired, Action, Error, TaskSeed, TaskState};
use gak_tests::console::{Browser, Server};
use gak_tests::suite::{Requirement, Suite};

static CHROMIUM: Requirement = Requirement::new(
    "Chromium and ChromeDriver",
    "apt-get install -y chromium chromium-driver (or set CHROMIUM and CHROMEDRIVER)",
    probe,
);

/// `chromedriver|chromium`, from the environment or the PATH.
fn probe() -> Result<String, String> {
    let find = |env: &str, names: &[&str]| -> Option<String> {
        if let Ok(p) = std::env::var(env) {
            return Some(p);
        }
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
            .find(|p| p.is_file())
            .map(|p| p.display().to_string())
    };
    let driver = find("CHROMEDRIVER", &["chromedriver"]).ok_or("no chromedriver on the PATH")?;
    let browser = find(
        "CHROMIUM",
        &["chromium", "chromium-browser", "google-chrome"],
    )
    .ok_or("no chromium on the PATH")?;
    Ok(format!("{driver}|{browser}"))
}

fn browser(found: &str) -> Browser {
    let (driver, chromium) = found.split_once('|').expect("driver|browser");
    Browser::start(driver, chromium)
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn keep_screenshot(name: &str, png: &[u8]) {
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let dir = repo().join("target/console-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    std::fs::write(dir.join(name), png).expect("write the screenshot");
    if std::env::var("GAK_BLESS").is_ok_and(|v| v == "1") {
        let docs = repo().join("docs/console");
        std::fs::create_dir_all(&docs).expect("docs/console");
        std::fs::write(docs.join(name), png).expect("bless the screenshot");
    }
}

/// A board with something in every state, a limited group and an
/// uncertain key: what the screenshots show.
fn board(store: &str) -> Kernel {
    let kernel = Kernel::open(store).unwrap();
    let tb = kernel.taskboard();
    tb.seed(&[
        TaskSeed::new("invoice/2041").title("send invoice 2041"),
        TaskSeed::new("invoice/2042")
            .title("send invoice 2042")
            .priority(5),
        TaskSeed::new("refund/order-42")
            .title("refund order 42")
            .max_attempts(1),
        TaskSeed::new("report/weekly")
            .title("weekly report")
            .group("tenant-acme"),
        TaskSeed::new("email/welcome-7")
            .title("welcome e-mail")
            .group("tenant-acme"),
        TaskSeed::new("sync/crm").title("sync the CRM"),
    ])
    .unwrap();
    tb.set_group_limit("tenant-acme", Some(2)).unwrap();
    tb.claim("report/weekly", "worker-3", 600_000).unwrap();
    let t = tb.claim("sync/crm", "worker-1", 600_000).unwrap();
    tb.complete("sync/crm", t.token.as_deref().unwrap())
        .unwrap();
    let t = tb.claim("refund/order-42", "worker-2", 600_000).unwrap();
    tb.fail(
        "refund/order-42",
        t.token.as_deref().unwrap(),
        "payments API answered 502 Bad Gateway",
        None,
    )
    .unwrap();
    let se = kernel.sideeffect();
    for (key, resource) in [("refund/order-42", "payments"), ("email/welcome-7", "smtp")] {
        let action = Action::new(key, resource);
        let Acquired::Granted(lease) = se.acquire(&action, 600_000).unwrap() else {
            panic!("granted")
        };
        if key.starts_with("refund") {
            se.mark_uncertain(
                &action,
                &lease,
                "worker died while the provider was processing",
            )
            .unwrap();
        }
    }
    kernel
}

fn store(dir: &Path) -> String {
    format!("sqlite:{}", dir.join("console.db").display())
}

fn revive_a_dead_task(found: &str) {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let kernel = board(&store);
    let server = Server::start(&store, &[]);
    let b = browser(found);
    let base = format!("http://{}", server.addr);
    b.open(&format!("{base}/tasks"));
    keep_screenshot("board.png", &b.screenshot());
    let counts = kernel.taskboard().count().unwrap();
    assert_eq!(counts.dead, 1);
    assert!(
        b.source().contains("class=\"state-dead\">dead <b>1</b>"),
        "the counts by state show: {}",
        b.source()
    );
    b.open(&format!("{base}/tasks?state=dead"));
    assert!(
        b.source().contains("payments API answered 502"),
        "the last error shows"
    );
    b.follow("a[href='/tasks/refund%2Forder-42']");
    assert!(b.url().ends_with("/tasks/refund%2Forder-42"), "{}", b.url());
    b.follow("form[action$='/revive'] button");
    assert!(b.url().ends_with("?done=revived"), "{}", b.url());
    assert!(b.source().contains("Revived"));
    let t = kernel.taskboard().get("refund/order-42").unwrap();
    assert_eq!((t.state, t.attempts), (TaskState::Open, 0));
    assert_eq!(t.last_error, None);
}

fn limit_and_free_a_group(found: &str) {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let kernel = board(&store);
    let server = Server::start(&store, &[]);
    let b = browser(found);
    b.open(&format!("http://{}/groups", server.addr));
    b.type_into("input[name='name']", "tenant-acme");
    b.follow("form[action='/groups'] button");
    assert!(
        b.source().contains("<dt>live claims</dt><dd>1</dd>"),
        "{}",
        b.source()
    );
    b.type_into("input[name='limit']", "4");
    b.follow("form[action='/groups/limit'] button:not([name])");
    assert!(b.source().contains("The limit is set"), "{}", b.source());
    assert_eq!(
        kernel.taskboard().get_group("tenant-acme").unwrap().limit,
        4
    );
    b.follow("button[name='remove']");
    assert!(b.source().contains("The limit is removed"));
    assert_eq!(
        kernel.taskboard().get_group("tenant-acme"),
        Err(Error::NotFound)
    );
    // The group's tasks, from its page.
    b.follow("a[href='/tasks?group=tenant-acme']");
    let source = b.source();
    assert!(
        source.contains("href=\"/tasks/report%2Fweekly\""),
        "{source}"
    );
    assert!(
        source.contains("href=\"/tasks/email%2Fwelcome-7\""),
        "{source}"
    );
    assert!(!source.contains("href=\"/tasks/sync%2Fcrm\""), "{source}");
}

fn resolve_an_uncertain_key(found: &str) {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let kernel = board(&store);
    let server = Server::start(&store, &[]);
    let b = browser(found);
    b.open(&format!("http://{}/keys", server.addr));
    keep_screenshot("keys.png", &b.screenshot());
    // The counts strip shows the keys as the kernel counts them, and since
    // when the oldest uncertain key is.
    let counts = kernel.sideeffect().count().unwrap();
    assert!(counts.uncertain >= 1 && counts.oldest_uncertain.is_some());
    assert!(
        b.source().contains(&format!(
            "class=\"state-uncertain\">uncertain <b>{}</b>",
            counts.uncertain
        )) && b.source().contains("oldest uncertain since"),
        "{}",
        b.source()
    );
    b.open(&format!("http://{}/keys?state=uncertain", server.addr));
    b.follow("a[href='/keys/refund%2Forder-42']");
    // Without the confirmation nothing happens.
    b.click("input[value='applied']");
    b.type_into("textarea[name='result']", "re_3PqL9x");
    b.follow("form[action$='/resolve'] button");
    assert!(
        b.source().contains("confirm that you checked"),
        "{}",
        b.source()
    );
    let action = Action::new("refund/order-42", "payments");
    assert!(matches!(
        kernel.sideeffect().acquire(&action, 1_000).unwrap(),
        Acquired::Uncertain(_)
    ));
    // Begin reconcile: confirmed, it holds other reconcilers off.
    b.open(&format!("http://{}/keys/refund%2Forder-42", server.addr));
    b.click("form[action$='/reconcile'] input[name='confirm']");
    b.follow("form[action$='/reconcile'] button");
    assert!(b.url().ends_with("?done=reconciling"), "{}", b.url());
    assert!(
        kernel
            .sideeffect()
            .get("refund/order-42")
            .unwrap()
            .reconciling_until
            .is_some()
    );
    assert_eq!(
        kernel.sideeffect().begin_reconcile(&action, 1_000),
        Err(gak::Error::ReconcileTaken)
    );
    b.click("input[value='applied']");
    b.type_into("textarea[name='result']", "re_3PqL9x");
    b.click("form[action$='/resolve'] input[name='confirm']");
    b.follow("form[action$='/resolve'] button");
    assert!(b.url().ends_with("?done=completed"), "{}", b.url());
    match kernel.sideeffect().acquire(&action, 1_000).unwrap() {
        Acquired::Replayed(result) => assert_eq!(result, b"re_3PqL9x"),
        other => panic!("{other:?}"),
    }
}

fn dry_run_then_prune(found: &str) {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let kernel = board(&store);
    let server = Server::start(&store, &[]);
    let b = browser(found);
    b.open(&format!("http://{}/retention", server.addr));
    b.replace_text("input[name='older-than']", "1ms");
    b.follow("button[value='dry-run']");
    assert!(
        b.source().contains("Would remove 0 keys, 2 tasks"),
        "{}",
        b.source()
    );
    assert!(
        kernel.taskboard().get("sync/crm").is_ok(),
        "a dry run removes nothing"
    );
    b.replace_text("input[name='older-than']", "1ms");
    b.follow("button[value='prune']");
    assert!(
        b.source().contains("Removed 0 keys, 2 tasks"),
        "{}",
        b.source()
    );
    assert_eq!(kernel.taskboard().get("sync/crm"), Err(Error::NotFound));
    // The dead task went too: nothing depends on it.
    assert_eq!(
        kernel.taskboard().get("refund/order-42"),
        Err(Error::NotFound)
    );
}

fn main() {
    let mut suite = Suite::new();
    suite.needs(&CHROMIUM, "revive_a_dead_task", revive_a_dead_task);
    suite.needs(&CHROMIUM, "limit_and_free_a_group", limit_and_free_a_group);
    suite.needs(
        &CHROMIUM,
        "resolve_an_uncertain_key",
        resolve_an_uncertain_key,
    );
    suite.needs(&CHROMIUM, "dry_run_then_prune", dry_run_then_prune);
    suite.run();
}
