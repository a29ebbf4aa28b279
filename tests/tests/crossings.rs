//! Few crossings, few statements (WIT 0.3, issue 18): a `claim` and an
//! `acquire` cross the component boundary at most three times — the export,
//! one `store.read`, one `store.write` — on a board of any size and on every
//! binding; on PostgreSQL each is four statements (`BEGIN`, the locking
//! read, the write set, `COMMIT`), counted at the wire by a proxy. A refusal
//! hands over no write set, and a call that only reads writes nothing.
use gak::blocking::Kernel;
use gak::{Acquired, Action, Completion, Error, TaskSeed, TaskState};
use gak_tests::pg;
use gak_tests::proxy::CommitCutter;
use gak_tests::suite::{POSTGRES, Suite};

/// Crossings of one call: its export plus the store imports it made.
fn crossings<T>(kernel: &Kernel, call: impl FnOnce() -> T) -> (T, u64) {
    let before = kernel.store_crossings();
    let out = call();
    (out, 1 + kernel.store_crossings() - before)
}

/// Claim and acquire on boards of 10 and 10,000 tasks: at most 3 each, and
/// the same count on both boards.
fn claim_and_acquire_cross_three_times(kernel: &Kernel) {
    let mut seen = Vec::new();
    for (round, board) in [10usize, 10_000].into_iter().enumerate() {
        let seeds: Vec<TaskSeed> = (0..board)
            .map(|i| TaskSeed::new(&format!("b{round}-{i:05}")))
            .collect();
        for chunk in seeds.chunks(2_000) {
            kernel.taskboard().seed(chunk).unwrap();
        }
        let id = format!("b{round}-{:05}", board / 2);
        let (task, claim) = crossings(kernel, || kernel.taskboard().claim(&id, "w", 60_000));
        assert_eq!(task.unwrap().fence, 1);
        let action = Action::new(&format!("key-{round}"), &format!("res-{round}"));
        let (acquired, acquire) =
            crossings(kernel, || kernel.sideeffect().acquire(&action, 60_000));
        let Ok(Acquired::Granted(lease)) = acquired else {
            panic!("a fresh key is granted: {acquired:?}");
        };
        let (done, complete) = crossings(kernel, || {
            kernel.sideeffect().complete(&action, &lease, b"r")
        });
        done.unwrap();
        assert!(claim <= 3, "claim on a board of {board}: {claim} crossings");
        assert!(
            acquire <= 3,
            "acquire with {board} tasks: {acquire} crossings"
        );
        seen.push((claim, acquire, complete));
    }
    assert_eq!(seen[0], seen[1], "crossings grew with the board");

    // A refusal reads and hands over no write set; so does a read-only call.
    let (taken, n) = crossings(kernel, || kernel.taskboard().claim("b0-00005", "x", 1_000));
    assert_eq!(taken.unwrap_err(), Error::Taken);
    assert_eq!(n, 2, "a refused claim: the export and one read");
    let (got, n) = crossings(kernel, || kernel.taskboard().get("b0-00005"));
    got.unwrap();
    assert_eq!(n, 2, "a get: the export and one read");
}

/// On PostgreSQL, through a proxy that records what the server ran: a claim,
/// an acquire and a complete are each `BEGIN`, one `gak_read_v1`, one
/// `gak_write_v1`, `COMMIT`; a `complete-batch` of 20 one
/// `gak_read_many_v1` and one `gak_write_many_v1`.
fn four_statements_each(dsn: &str) {
    let schema = pg::Schema::new(dsn, "statements");
    let proxy = CommitCutter::start(dsn);
    let kernel = gak::Kernel::builder()
        .postgres(proxy.config(), &schema.name)
        .open_blocking()
        .expect("a kernel through the proxy");
    kernel.taskboard().seed(&[TaskSeed::new("t")]).unwrap();
    let ran = |call: &dyn Fn()| {
        let before = proxy.statements().len();
        call();
        proxy.statements()[before..].to_vec()
    };
    let shape = |what: &str, statements: Vec<String>| {
        let kinds: Vec<&str> = statements
            .iter()
            .map(|sql| match sql.as_str() {
                s if s.starts_with("BEGIN") => "BEGIN",
                s if s.contains(".gak_read_v1(") => "read",
                s if s.contains(".gak_write_v1(") => "write",
                "COMMIT" => "COMMIT",
                _ => "other",
            })
            .collect();
        assert_eq!(
            kinds,
            ["BEGIN", "read", "write", "COMMIT"],
            "{what}: {statements:#?}"
        );
    };
    shape(
        "claim",
        ran(&|| drop(kernel.taskboard().claim("t", "w", 60_000).unwrap())),
    );
    let action = Action::new("k", "r");
    let lease = std::cell::RefCell::new(None);
    shape(
        "acquire",
        ran(
            &|| match kernel.sideeffect().acquire(&action, 60_000).unwrap() {
                Acquired::Granted(l) => *lease.borrow_mut() = Some(l),
                other => panic!("granted, not {other:?}"),
            },
        ),
    );
    let lease = lease.into_inner().unwrap();
    shape(
        "complete",
        ran(&|| drop(kernel.sideeffect().complete(&action, &lease, b"r").unwrap())),
    );

    // A batch's many keys go out as the `_many` functions: a
    // `complete-batch` of 20 reads its 20 task records and writes its
    // 100-odd keys with one statement each, never key by key.
    let tb = kernel.taskboard();
    let ids: Vec<String> = (0..20).map(|i| format!("b{i:02}")).collect();
    let seeds: Vec<TaskSeed> = ids.iter().map(|id| TaskSeed::new(id)).collect();
    tb.seed(&seeds).unwrap();
    let batch = tb.claim_batch("w", 60_000, 20).unwrap();
    assert_eq!(batch.len(), 20, "{batch:?}");
    let items: Vec<Completion> = batch
        .iter()
        .map(|t| Completion::new(&t.id, t.token.as_deref().unwrap()))
        .collect();
    let statements = ran(&|| {
        let answers = tb.complete_batch(&items).unwrap();
        assert_eq!(answers.len(), 20);
    });
    let named = |f: &str| {
        statements
            .iter()
            .filter(|sql| sql.contains(&format!(".{f}(")))
            .count()
    };
    assert_eq!(
        (named("gak_read_many_v1"), named("gak_write_many_v1")),
        (1, 1),
        "{statements:#?}"
    );
    assert_eq!(
        (named("gak_read_v1"), named("gak_write_v1")),
        (0, 0),
        "{statements:#?}"
    );
    for id in &ids {
        assert_eq!(tb.get(id).unwrap().state, TaskState::Done, "{id}");
    }
}

fn main() {
    let mut suite = Suite::new();
    suite.test("memory::claim_and_acquire_cross_three_times", || {
        claim_and_acquire_cross_three_times(&Kernel::open("memory:").unwrap());
    });
    suite.test("sqlite::claim_and_acquire_cross_three_times", || {
        let dir = tempfile::tempdir().unwrap();
        let url = format!(
            "sqlite:{}?synchronous=normal",
            dir.path().join("c.db").display()
        );
        claim_and_acquire_cross_three_times(&Kernel::open(&url).unwrap());
    });
    suite.needs(
        &POSTGRES,
        "postgres::claim_and_acquire_cross_three_times",
        |dsn| {
            let schema = pg::Schema::new(dsn, "crossings");
            claim_and_acquire_cross_three_times(&schema.kernel());
        },
    );
    suite.needs(&POSTGRES, "postgres::four_statements_a_decision", |dsn| {
        four_statements_each(dsn);
    });
    suite.run();
}
