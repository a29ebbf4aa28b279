//! The async API from inside a multi-threaded tokio runtime, on every
//! binding: every operation, the vectors through the async path, the pool,
//! heartbeats, TLS, and errors that compose.
use std::sync::Arc;
use std::time::Duration;

use gak::{
    Acquired, Action, BodyError, Committer, Error, Kernel, ManualClock, Outcome, Ran, Resolution,
    RunError, Runner, Status, StepDef, TaskSeed, TaskState,
};
use gak_cli::conformance::{self, UrlTarget};
use gak_tests::suite::{POSTGRES, Suite};
use gak_tests::{SqliteTarget, pg};

/// Every exported operation once, through the async API.
async fn every_operation(kernel: &Kernel) {
    let tb = kernel.taskboard();
    tb.seed(&[TaskSeed::new("a"), TaskSeed::new("b").deps(&["a"])])
        .await
        .unwrap();
    let a = tb
        .claim_next("w1", 60_000)
        .await
        .unwrap()
        .expect("a is ready");
    assert_eq!((a.id.as_str(), a.fence), ("a", 1));
    let token = a.token.clone().unwrap();
    assert_eq!(tb.claim("a", "w2", 60_000).await, Err(Error::Taken));
    tb.renew("a", &token, 60_000).await.unwrap();
    tb.complete("a", &token).await.unwrap();
    let b = tb.claim("b", "w1", 60_000).await.unwrap();
    tb.release("b", b.token.as_deref().unwrap()).await.unwrap();
    let page = tb.list(Some(TaskState::Open), None, 10).await.unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(tb.get("b").await.unwrap().token, None);

    let cp = kernel.checkpoint();
    let mut committer = Committer::resume(kernel, "run-1", Some(a.fence))
        .await
        .unwrap();
    committer.step_done("s1").await.unwrap();
    let snap = cp.load("run-1").await.unwrap();
    assert_eq!((snap.seq, snap.done.clone()), (1, vec!["s1".to_string()]));
    let plan = cp
        .build_plan(
            &[StepDef::new("s1", &[]), StepDef::new("s2", &["s1"])],
            Some(&snap),
        )
        .await
        .unwrap();
    assert_eq!(
        (plan.skip, plan.run),
        (vec!["s1".into()], vec!["s2".into()])
    );
    let ok = Outcome {
        status: Status::Succeeded,
        result: b"fine".to_vec(),
    };
    let cg = kernel.commitgate();
    assert_eq!(cg.commit("run-1", None, 1, &ok).await.unwrap(), ok);
    assert_eq!(cg.read("run-1", None).await.unwrap(), ok);

    let se = kernel.sideeffect();
    let mail = Action::new("mail-1", "smtp");
    let Acquired::Granted(lease) = se.acquire(&mail, 60_000).await.unwrap() else {
        panic!("fresh key")
    };
    let lease = se.renew(&mail, &lease, 60_000).await.unwrap();
    assert_eq!(se.complete(&mail, &lease, b"sent").await.unwrap(), b"sent");
    let refund = Action::new("refund-1", "payments").unsafe_to_retry();
    let Acquired::Granted(lease) = se.acquire(&refund, 60_000).await.unwrap() else {
        panic!("fresh key")
    };
    se.mark_uncertain(&refund, &lease, "timeout").await.unwrap();
    se.release(&refund, &lease).await.unwrap();
    let claim = se.begin_reconcile(&refund, 60_000).await.unwrap();
    let verdict = Resolution {
        applied: true,
        result: Some(b"settled".to_vec()),
        claim: Some(claim.claim),
        ..Resolution::default()
    };
    se.resolve_uncertain(&refund, &verdict).await.unwrap();
    let keys = se.list(None, None, 10).await.unwrap();
    assert_eq!(keys.items.len(), 2);
    assert!(se.get("refund-1").await.unwrap().completed_at.is_some());
    let other = Action::new("other", "r2");
    let Acquired::Granted(lease) = se.acquire(&other, 60_000).await.unwrap() else {
        panic!("fresh key")
    };
    se.abandon(&other, &lease, "not sent").await.unwrap();

    se.write_fenced("ledger", 3, async |down: &mut gak::Downstream<'_>| {
        down.put("ledger/1", "x").await
    })
    .await
    .unwrap();
    assert_eq!(se.sink_seen("ledger").await.unwrap(), 3);
    let stale = se
        .write_fenced("ledger", 2, async |_: &mut gak::Downstream<'_>| {
            Ok::<_, Error>(())
        })
        .await;
    assert!(matches!(
        stale,
        Err(gak::SinkError::Kernel(Error::FenceStale))
    ));
    let row = kernel
        .with_downstream(async |down: &mut gak::Downstream<'_>| down.get("ledger/1").await)
        .await
        .unwrap();
    assert_eq!(row.as_deref(), Some("x"));

    let pruned = kernel
        .retention()
        .prune_dry_run(u64::MAX >> 12, 10)
        .await
        .unwrap();
    assert_eq!(pruned.removed_runs, 1);
    let pruned = kernel
        .retention()
        .prune(u64::MAX >> 12, 1000)
        .await
        .unwrap();
    assert!(
        pruned.removed_keys >= 2 && pruned.removed_runs == 1,
        "{pruned:?}"
    );
}

/// Many tasks at once on one kernel: each key's body runs exactly once.
async fn concurrent_effects(kernel: &Kernel) {
    let runner = Runner::new(kernel, 60_000);
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..64 {
        let (runner, calls) = (runner.clone(), calls.clone());
        tasks.spawn(async move {
            let action = Action::new(&format!("key-{}", i % 16), &format!("res-{}", i % 16));
            loop {
                let ran = runner
                    .run(&action, async |_lease| {
                        calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        tokio::task::yield_now().await;
                        Ok::<_, BodyError<Error>>(b"done".to_vec())
                    })
                    .await;
                match ran {
                    Ok(Ran::Applied(_) | Ran::Replayed(_)) => return,
                    Ok(Ran::InFlight | Ran::Contended(_)) => tokio::task::yield_now().await,
                    other => panic!("{other:?}"),
                }
            }
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.expect("task");
    }
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 16);
}

async fn memory_every_operation() {
    let kernel = Kernel::open("memory:").await.unwrap();
    every_operation(&kernel).await;
    concurrent_effects(&kernel).await;
}

async fn sqlite_every_operation() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("a.db").display());
    let kernel = Kernel::open(&url).await.unwrap();
    every_operation(&kernel).await;
    concurrent_effects(&kernel).await;
}

/// SQLite calls block their thread: on a multi-threaded runtime the kernel
/// runs them in place (`block_in_place`); on a current-thread runtime, which
/// cannot give its only worker away, on the blocking pool. Both answer alike.
fn sqlite_every_operation_on_a_current_thread_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(sqlite_every_operation());
}

async fn postgres_every_operation(dsn: String) {
    let schema = pg::Schema::new(&dsn, "async_ops");
    let kernel = Kernel::open(&schema.url).await.unwrap();
    every_operation(&kernel).await;
    concurrent_effects(&kernel).await;
}

async fn vectors_through_the_async_path() {
    let files = conformance::builtin();
    let report = conformance::run_async(&mut UrlTarget::new("memory:").unwrap(), &files).await;
    assert_eq!(report.failed(), 0, "{}", report.render());
    let report = conformance::run_async(&mut SqliteTarget::new(), &files).await;
    assert_eq!(report.failed(), 0, "{}", report.render());
    assert!(report.passed() > 250);
}

async fn postgres_vectors_through_the_async_path(dsn: String) {
    let sep = if dsn.contains('?') { '&' } else { '?' };
    let url = format!("{dsn}{sep}schema=v_async");
    let files: Vec<_> = conformance::builtin()
        .into_iter()
        .filter(|(name, _)| name.contains("taskboard") || name.contains("sideeffect-acquire"))
        .collect();
    let report = conformance::run_async(&mut UrlTarget::new(&url).unwrap(), &files).await;
    assert_eq!(report.failed(), 0, "{}", report.render());
}

/// A bounded pool: the (n+1)-th concurrent caller waits, then fails with a
/// sentence naming the store — never opens a connection beyond the bound.
async fn an_exhausted_pool_waits_then_fails() {
    let kernel = Kernel::builder()
        .store("memory:")
        .max_connections(1)
        .connection_wait(Duration::from_millis(50))
        .open()
        .await
        .unwrap();
    kernel
        .taskboard()
        .seed(&[TaskSeed::new("a")])
        .await
        .unwrap();
    let (entered, release) = (
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
    );
    let holder = {
        let (kernel, entered, release) = (kernel.clone(), entered.clone(), release.clone());
        tokio::spawn(async move {
            let body = async move |_: &mut gak::Downstream<'_>| {
                entered.notify_one();
                release.notified().await;
                Ok::<_, Error>(())
            };
            kernel.sideeffect().write_fenced("s", 1, body).await
        })
    };
    entered.notified().await;
    let refused = kernel.taskboard().get("a").await;
    let Err(Error::Storage(why)) = refused else {
        panic!("expected storage, got {refused:?}")
    };
    assert!(
        why.message()
            .contains("no connection to memory became free"),
        "{why}"
    );
    release.notify_one();
    holder.await.unwrap().unwrap();
    assert!(kernel.taskboard().get("a").await.is_ok());
}

/// The heartbeat renews while the body runs and tells the body as soon as
/// a renewal is refused (here: the manual clock jumps past the lease).
async fn heartbeats_keep_a_long_body_alive_and_report_loss() {
    let clock = Arc::new(ManualClock::at(1_000));
    let kernel = Kernel::builder()
        .store("memory:")
        .clock(clock.clone())
        .open()
        .await
        .unwrap();
    let runner = Runner::new(&kernel, 100).heartbeat(Some(Duration::from_millis(2)));
    let action = Action::new("long", "r");
    let ran = runner
        .run_with_heartbeat(&action, async |_lease, heartbeat| {
            // Two renewals succeed while the body works...
            while heartbeat.renewals() < 2 {
                heartbeat.changed().await;
            }
            assert_eq!(heartbeat.check(), Ok(()));
            // ...then the hold lapses (nobody renewed for longer than the
            // ttl, by the kernel's clock) and the next renewal is refused.
            clock.advance(1_000);
            while heartbeat.check().is_ok() {
                heartbeat.changed().await;
            }
            assert_eq!(heartbeat.refusal(), Some(Error::LeaseExpired));
            Err::<Vec<u8>, _>(BodyError::NotApplied("stopped: lease lost"))
        })
        .await;
    assert!(
        matches!(ran, Err(RunError::NotApplied("stopped: lease lost"))),
        "{ran:?}"
    );
    // The body said it did not apply: the runner abandoned the attempt.
    let key = kernel.sideeffect().get("long").await.unwrap();
    assert_eq!(key.state, gak::KeyState::Cleared);
}

/// `sslmode` has libpq's meaning: `require` encrypts without verifying
/// (the local server's certificate is self-signed), `verify-full` refuses
/// a certificate no trusted root signed, with a sentence naming the server.
async fn postgres_tls_follows_sslmode(dsn: String) {
    let schema = pg::Schema::new(&dsn, "tls");
    let ssl_on = gak::blocking::Kernel::open(&schema.url)
        .unwrap()
        .with_downstream(|d| {
            d.postgres_query(
                "SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .expect("postgres")
        })
        .unwrap();
    if ssl_on.first().and_then(|r| r[0].as_deref()) != Some("true") {
        eprintln!("the server does not offer TLS; only sslmode=disable is checked");
    } else {
        let kernel = Kernel::open(&format!("{}&sslmode=require", schema.url))
            .await
            .unwrap();
        kernel
            .taskboard()
            .seed(&[TaskSeed::new("t")])
            .await
            .unwrap();
        let refused = Kernel::open(&format!(
            "{}&sslmode=verify-full&sslrootcert=system",
            schema.url
        ))
        .await;
        let why = refused
            .expect_err("a self-signed certificate is not trusted")
            .to_string();
        assert!(why.contains("cannot connect to PostgreSQL at"), "{why}");
    }
    // As libpq: a verified mode trusts only `sslrootcert`, so it needs one.
    if std::env::var_os("HOME").is_none_or(|h| {
        !std::path::Path::new(&h)
            .join(".postgresql/root.crt")
            .is_file()
    }) {
        let rootless = Kernel::open(&format!("{}&sslmode=verify-full", schema.url)).await;
        let why = rootless.expect_err("no root to trust").to_string();
        assert!(why.contains("sslrootcert"), "{why}");
    }
    let plain = Kernel::open(&format!("{}&sslmode=disable", schema.url))
        .await
        .unwrap();
    plain.taskboard().seed(&[TaskSeed::new("p")]).await.unwrap();
    let bad = Kernel::open(&format!("{}&sslmode=sometimes", schema.url)).await;
    assert!(bad.unwrap_err().to_string().contains("sslmode=sometimes"));
}

/// Errors compose: Display sentences, sources, conflict flags.
async fn errors_compose() {
    let open = Kernel::open("nosuch:thing").await.unwrap_err();
    assert!(open.to_string().contains("postgres://"), "{open}");
    let unreachable = Kernel::open("postgres://postgres@127.0.0.1:1/test")
        .await
        .unwrap_err();
    let as_error: Error = unreachable.into();
    assert!(as_error.is_retryable() && !as_error.is_conflict());
    let source = std::error::Error::source(&as_error).expect("a storage error keeps its cause");
    assert!(source.to_string().contains("127.0.0.1:1"), "{source}");
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(Error::Taken);
    assert_eq!(boxed.to_string(), "taken");
    let body: BodyError<std::io::Error> = std::io::Error::other("reset").into();
    assert!(matches!(body, BodyError::Failed(_)));
}

/// The blocking Runner's heartbeat thread renews while a synchronous body
/// runs, and reports the loss as soon as a renewal is refused.
fn blocking_heartbeats_report_loss_to_a_synchronous_body() {
    let clock = Arc::new(ManualClock::at(1_000));
    let kernel = gak::blocking::Kernel::with_backend(
        Arc::new(gak::store::memory::MemoryBackend::default()),
        clock.clone(),
    )
    .unwrap();
    let runner = gak::blocking::Runner::new(&kernel, 100).heartbeat(Some(Duration::from_millis(2)));
    let action = Action::new("long", "r");
    let ran = runner.run_with_heartbeat(&action, |_lease, heartbeat| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while heartbeat.renewals() < 2 {
            assert!(std::time::Instant::now() < deadline, "no renewal arrived");
            heartbeat.wait_changed(Duration::from_millis(100));
        }
        clock.advance(1_000);
        while heartbeat.check().is_ok() {
            assert!(
                std::time::Instant::now() < deadline,
                "the loss was never reported"
            );
            heartbeat.wait_changed(Duration::from_millis(100));
        }
        Err::<Vec<u8>, _>(BodyError::NotApplied(heartbeat.refusal()))
    });
    assert!(
        matches!(ran, Err(RunError::NotApplied(Some(Error::LeaseExpired)))),
        "{ran:?}"
    );
}

/// `Builder::statement_timeout` bounds every statement server-side: a sink
/// body stuck in a slow statement fails with `storage`, nothing written.
async fn postgres_statement_timeout_bounds_a_stuck_statement(dsn: String) {
    let schema = pg::Schema::new(&dsn, "stmt_timeout");
    let kernel = Kernel::builder()
        .store(&schema.url)
        .statement_timeout(Duration::from_millis(100))
        .open()
        .await
        .unwrap();
    let stuck = kernel
        .sideeffect()
        .write_fenced(
            "ledger",
            1,
            async |down: &mut gak::Downstream<'_>| match down
                .postgres_execute("SELECT pg_sleep(5)", &[])
                .await
            {
                Some(Ok(_)) => Ok(()),
                Some(Err(e)) => Err(e),
                None => Err(Error::storage("not postgres")),
            },
        )
        .await;
    // A store error inside the call's transaction ends the call with
    // `storage` whatever the body did with it (HOSTS.md rule 12).
    let Err(gak::SinkError::Kernel(Error::Storage(why))) = stuck else {
        panic!("expected the call to end with storage, got {stuck:?}")
    };
    assert!(why.message().contains("statement timeout"), "{why}");
    assert_eq!(kernel.sideeffect().sink_seen("ledger").await.unwrap(), 0);
}

/// A PostgreSQL connection is driven by the call that waits for it (on the
/// caller's thread), so between calls nobody drives it: a call that wrote
/// nothing ends with a `COMMIT` it does not wait for, and that `COMMIT`
/// must still leave at once. Here a kernel reads a task (locking its key),
/// then sits idle; another kernel's claim of that task must not wait for
/// the lock — with a connection wait (the lock timeout) of 300 ms and one
/// attempt, a lock still held would end it with `storage`. Both APIs.
fn postgres_an_idle_session_holds_no_locks(dsn: &str) {
    let schema = pg::Schema::new(dsn, "idle_locks");
    let open = || {
        Kernel::builder()
            .store(&schema.url)
            .max_connections(1)
            .connection_wait(Duration::from_millis(300))
            .retry(gak::Retry {
                attempts: 1,
                ..gak::Retry::default()
            })
    };
    let reader = open().open_blocking().unwrap();
    let claimer = open().open_blocking().unwrap();
    reader
        .taskboard()
        .seed(&[TaskSeed::new("a"), TaskSeed::new("b")])
        .unwrap();
    // Blocking: a read-only call, then nothing more on that connection.
    assert_eq!(reader.taskboard().get("a").unwrap().state, TaskState::Open);
    let claimed = claimer.taskboard().claim("a", "w", 60_000);
    assert!(claimed.is_ok(), "the idle reader still held a: {claimed:?}");
    // Async, on a runtime of its own: the same.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let reader = runtime.block_on(async {
        let reader = open().open().await.unwrap();
        assert_eq!(
            reader.taskboard().get("b").await.unwrap().state,
            TaskState::Open
        );
        reader
    });
    let claimed = claimer.taskboard().claim("b", "w", 60_000);
    assert!(
        claimed.is_ok(),
        "the idle async reader still held b: {claimed:?}"
    );
    drop(reader);
}

fn main() {
    let mut suite = Suite::new();
    suite.tokio("memory_every_operation", memory_every_operation);
    suite.tokio("sqlite_every_operation", sqlite_every_operation);
    suite.test(
        "sqlite_every_operation_on_a_current_thread_runtime",
        sqlite_every_operation_on_a_current_thread_runtime,
    );
    suite.needs_tokio(
        &POSTGRES,
        "postgres_every_operation",
        postgres_every_operation,
    );
    suite.tokio(
        "vectors_through_the_async_path",
        vectors_through_the_async_path,
    );
    suite.needs_tokio(
        &POSTGRES,
        "postgres_vectors_through_the_async_path",
        postgres_vectors_through_the_async_path,
    );
    suite.tokio(
        "an_exhausted_pool_waits_then_fails",
        an_exhausted_pool_waits_then_fails,
    );
    suite.tokio(
        "heartbeats_keep_a_long_body_alive_and_report_loss",
        heartbeats_keep_a_long_body_alive_and_report_loss,
    );
    suite.needs_tokio(
        &POSTGRES,
        "postgres_tls_follows_sslmode",
        postgres_tls_follows_sslmode,
    );
    suite.tokio("errors_compose", errors_compose);
    suite.test(
        "blocking_heartbeats_report_loss_to_a_synchronous_body",
        blocking_heartbeats_report_loss_to_a_synchronous_body,
    );
    suite.needs_tokio(
        &POSTGRES,
        "postgres_statement_timeout_bounds_a_stuck_statement",
        postgres_statement_timeout_bounds_a_stuck_statement,
    );
    suite.needs(
        &POSTGRES,
        "postgres_an_idle_session_holds_no_locks",
        postgres_an_idle_session_holds_no_locks,
    );
    suite.run();
}
