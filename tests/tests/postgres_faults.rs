//! PostgreSQL failure modes: a connection dropped mid-call, hostile schema
//! names, an unreachable server, and the database clock.
use std::sync::Arc;
use std::time::Instant;

use gak::blocking::Kernel;
use gak::store::postgres::{PostgresBackend, valid_schema};
use gak::tokio_postgres;
use gak::{Acquired, Action, Error, ManualClock, SinkError, TaskSeed, TaskState};
use gak_tests::broken::IgnoresDatabaseClock;
use gak_tests::pg;
use gak_tests::proxy::CommitCutter;
use gak_tests::suite::{POSTGRES, Suite};

/// The connection dies inside the transaction (after the fence compare and
/// the body's write): the call is `storage`, nothing of it lands, and the
/// next call reconnects and works.
fn dropped_connection_mid_call_is_storage_and_changes_nothing(dsn: &str) {
    let schema = pg::Schema::new(dsn, "drop");
    let kernel = schema.kernel();
    kernel
        .sideeffect()
        .write_fenced("sink", 1, |d| d.put("sink", "first"))
        .unwrap();

    let r = kernel.sideeffect().write_fenced("sink", 5, |d| {
        d.put("sink", "second")?;
        // The server ends this very connection, mid-transaction.
        d.postgres_execute("SELECT pg_terminate_backend(pg_backend_pid())", &[])
            .expect("postgres")
            .map(drop)
    });
    match r {
        Err(SinkError::Kernel(Error::Storage(_)) | SinkError::Body(Error::Storage(_))) => {}
        other => panic!("expected a storage error, got {other:?}"),
    }
    // Nothing of the failed call landed, and the kernel reconnected.
    assert_eq!(kernel.sideeffect().sink_seen("sink").unwrap(), 1);
    let marker = kernel.with_downstream(|d| d.get("sink")).unwrap();
    assert_eq!(marker.as_deref(), Some("first"));
    kernel.taskboard().seed(&[TaskSeed::new("after")]).unwrap();
    assert_eq!(
        kernel.taskboard().claim("after", "w", 1_000).unwrap().fence,
        1
    );
}

fn schema_names_with_quotes_or_dots_are_refused() {
    for bad in [
        "a\"b",
        "public.tasks",
        "a;drop",
        "UPPER",
        "",
        "pg_catalog",
        &"x".repeat(64),
    ] {
        assert!(!valid_schema(bad), "{bad:?} accepted");
        let url = format!("postgres://postgres@127.0.0.1:5432/test?schema={bad}");
        assert!(
            matches!(
                PostgresBackend::parse(&url),
                Err(gak::OpenError::BadOption(_))
            ),
            "{bad:?}"
        );
    }
    assert!(valid_schema("gak_tenant_7"));
}

fn unreachable_server_fails_fast_naming_host_and_port() {
    let started = Instant::now();
    let err = Kernel::open("postgres://postgres@127.0.0.1:1/test")
        .unwrap_err()
        .to_string();
    assert!(err.contains("127.0.0.1:1"), "{err}");
    // Fail fast: bounded by the connect timeout, not a hang.
    assert!(
        started.elapsed().as_secs() < 30,
        "took {:?}",
        started.elapsed()
    );
}

const HOUR: u64 = 3_600_000;
const TEN_YEARS: u64 = 10 * 365 * 24 * HOUR;

fn system_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as u64
}

/// The server's clock, read directly.
fn server_ms(kernel: &Kernel) -> u64 {
    let rows = kernel
        .with_downstream(|d| {
            d.postgres_query(
                "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint::text",
                &[],
            )
            .expect("postgres")
        })
        .expect("read the server's clock");
    rows[0][0].as_deref().expect("a time").parse().expect("ms")
}

/// Expiry under `kernel` follows the server's clock while the host clock
/// reads `host` (far from it). Err names the first promise broken.
fn expiry_follows_the_server(
    kernel: &Kernel,
    direct: &Kernel,
    host: u64,
    label: &str,
) -> Result<(), String> {
    let se = kernel.sideeffect();
    // Deadlines are computed from the server's clock.
    let long = Action::new(&format!("long-{label}"), &format!("r-long-{label}"));
    let before = server_ms(direct);
    let Ok(Acquired::Granted(lease)) = se.acquire(&long, HOUR) else {
        return Err("a fresh key is granted".into());
    };
    let after = server_ms(direct);
    let granted_at = lease.until - HOUR;
    if !(before.saturating_sub(1_000)..=after + 1_000).contains(&granted_at) {
        return Err(format!(
            "granted at {granted_at}: not the server's clock ({before}..{after}), host clock {host}"
        ));
    }
    // A lease live by the server's clock is live, whatever the host says.
    match se.acquire(&long, HOUR) {
        Ok(Acquired::InFlight) => {}
        other => return Err(format!("a one-hour intent live on the server: {other:?}")),
    }
    // A 1 ms lease expires by the server's clock, within a bounded wait.
    let short = Action::new(&format!("short-{label}"), &format!("r-short-{label}"));
    let Ok(Acquired::Granted(_)) = se.acquire(&short, 1) else {
        return Err("a fresh key is granted".into());
    };
    let deadline = Instant::now() + std::time::Duration::from_secs(20);
    loop {
        match se.acquire(&short, 1) {
            Ok(Acquired::Uncertain(why)) if why == "intent-expired" => return Ok(()),
            Ok(Acquired::InFlight) if Instant::now() < deadline => std::thread::yield_now(),
            other => {
                return Err(format!(
                    "a 1 ms intent must expire by the server's clock: still {other:?} after 20 s"
                ));
            }
        }
    }
}

/// With `clock=db` expiry is judged by the server's clock. The host clock is
/// a manual clock ten years in the past, then ten years in the future: a
/// kernel judging by it would grant deadlines far from the server's time,
/// keep a 1 ms lease live forever (past) or call a one-hour lease expired at
/// once (future). The same check on a binding that ignores its database
/// clock must fail, or the check proves nothing.
fn database_clock_judges_expiry(dsn: &str) {
    let schema = pg::Schema::new(dsn, "clock");
    let direct = schema.kernel();
    let url = format!("{}&clock=db", schema.url);
    for (label, host) in [
        ("past", system_ms() - TEN_YEARS),
        ("future", system_ms() + TEN_YEARS),
    ] {
        let clock = Arc::new(ManualClock::at(host));
        let kernel = gak::Kernel::builder()
            .store(&url)
            .clock(clock.clone())
            .open_blocking()
            .unwrap();
        expiry_follows_the_server(&kernel, &direct, host, label)
            .unwrap_or_else(|why| panic!("host clock in the {label}: {why}"));

        // Teeth: the database clock ignored.
        let backend = gak::blocking::run_future(gak::store::open(&url)).unwrap();
        let ignoring =
            Kernel::with_backend(Arc::new(IgnoresDatabaseClock(backend)), clock).unwrap();
        let caught =
            expiry_follows_the_server(&ignoring, &direct, host, &format!("{label}-broken"));
        assert!(
            caught.is_err(),
            "a kernel ignoring clock=db passed ({label})"
        );
    }
}

/// A commit that reaches the server but whose answer never comes back (the
/// proxy forwards `COMMIT`, withholds the reply and cuts both sockets), at
/// a claim, an acquire, a snapshot save and a fenced write: each call is
/// `storage` and is never re-run (one `COMMIT` each), the server did commit,
/// and every later call behaves per the spec: the unknown claim expires and
/// is taken over, the unknown intent turns `uncertain`, the saved snapshot
/// is the newest, the sink's write landed once.
fn a_commit_whose_answer_is_lost_is_never_rerun(dsn: &str) {
    const T0: u64 = 1_700_000_000_000;
    const TTL: u64 = 10_000;
    let schema = pg::Schema::new(dsn, "lost");
    let proxy = CommitCutter::start(dsn);
    let clock = Arc::new(ManualClock::at(T0));
    let kernel = gak::Kernel::builder()
        .postgres(proxy.config(), &schema.name)
        .clock(clock.clone())
        .open_blocking()
        .expect("a kernel through the proxy");
    let direct = schema.kernel_with(clock.clone());
    let mut lost = 0;
    let mut lose = |what: &str, call: &dyn Fn() -> Result<(), Error>| {
        let commits = proxy.commits();
        proxy.arm();
        let r = call();
        assert!(
            matches!(r, Err(Error::Storage(_))),
            "{what}: a lost answer must be `storage`, got {r:?}"
        );
        lost += 1;
        assert_eq!(proxy.cuts(), lost, "{what}: the proxy never cut");
        assert_eq!(
            proxy.withheld().last().map(String::as_str),
            Some("COMMIT"),
            "{what}: the server must have committed"
        );
        assert_eq!(
            proxy.commits() - commits,
            1,
            "{what}: a call whose commit may have landed was re-run"
        );
    };

    // A claim: the token is lost with the answer.
    kernel.taskboard().seed(&[TaskSeed::new("t")]).unwrap();
    lose("claim", &|| {
        kernel.taskboard().claim("t", "w1", TTL).map(drop)
    });
    let task = direct.taskboard().get("t").unwrap();
    assert_eq!((task.state, task.fence), (TaskState::Claimed, 1));
    assert_eq!(kernel.taskboard().claim("t", "w2", TTL), Err(Error::Taken));
    clock.advance(TTL);
    let taken_over = kernel.taskboard().claim("t", "w2", TTL).unwrap();
    assert_eq!(
        (taken_over.owner.as_deref(), taken_over.fence),
        (Some("w2"), 2)
    );

    // An acquire: the holder is lost with the answer.
    let mail = Action::new("mail/1", "smtp");
    lose("acquire", &|| {
        kernel.sideeffect().acquire(&mail, TTL).map(drop)
    });
    assert_eq!(
        kernel.sideeffect().acquire(&mail, TTL),
        Ok(Acquired::InFlight)
    );
    clock.advance(TTL);
    assert_eq!(
        kernel.sideeffect().acquire(&mail, TTL),
        Ok(Acquired::Uncertain("intent-expired".into())),
        "never a second grant"
    );

    // A snapshot save: it landed, so saving it again is stale.
    let snap = gak::Snapshot {
        run_id: "run".into(),
        seq: 1,
        fence: None,
        status: "running".into(),
        done: vec!["a".into()],
        fields: vec![],
    };
    lose("save-if-newer", &|| {
        kernel.checkpoint().save_if_newer(&snap)
    });
    assert_eq!(direct.checkpoint().load("run").unwrap(), snap);
    assert_eq!(
        kernel.checkpoint().save_if_newer(&snap),
        Err(Error::StaleSeq)
    );

    // A fenced write: its body's write landed with the fence, once.
    lose("write-fenced", &|| {
        kernel
            .sideeffect()
            .write_fenced("ledger", 5, |d| {
                let n: u32 = d.get("ledger")?.map_or(0, |v| v.parse().unwrap_or(0));
                d.put("ledger", &(n + 1).to_string())
            })
            .map_err(|e| e.contract_error())
    });
    assert_eq!(direct.sideeffect().sink_seen("ledger"), Ok(5));
    let ledger = direct.with_downstream(|d| d.get("ledger")).unwrap();
    assert_eq!(ledger.as_deref(), Some("1"));
}

/// A call whose first statements fail inside the server (here its lock wait
/// hits the statement timeout; in production a deadlock) leaves its
/// connection usable: the transaction `BEGIN` opened is rolled back, so the
/// next call on the same connection starts clean instead of failing with
/// "current transaction is aborted" (25P02).
fn a_failed_first_statement_leaves_the_connection_usable(dsn: &str) {
    let schema = pg::Schema::new(dsn, "first_fails");
    // One connection, so the second call reuses the first one's.
    let kernel = gak::Kernel::builder()
        .store(&schema.url)
        .max_connections(1)
        .statement_timeout(std::time::Duration::from_millis(200))
        .open_blocking()
        .unwrap();
    kernel.taskboard().seed(&[TaskSeed::new("t")]).unwrap();
    // Another connection holds the task's advisory lock (a session lock,
    // kept across its transactions) — the lock the claim's read waits for.
    let holder = gak::Kernel::builder()
        .store(&schema.url)
        .max_connections(1)
        .open_blocking()
        .unwrap();
    let lock = format!("{}/tasks/t", schema.name);
    let sql = |f: &str| format!("SELECT {f}(hashtextextended($1, 0))::text");
    holder
        .with_downstream(|d| {
            d.postgres_query(&sql("pg_advisory_lock"), &[&lock])
                .expect("postgres")
        })
        .unwrap();
    let stuck = kernel.taskboard().claim("t", "w1", 60_000);
    assert!(
        matches!(&stuck, Err(Error::Storage(why)) if why.message().contains("statement timeout")),
        "expected the lock wait to time out, got {stuck:?}"
    );
    holder
        .with_downstream(|d| {
            d.postgres_query(&sql("pg_advisory_unlock"), &[&lock])
                .expect("postgres")
        })
        .unwrap();
    let task = kernel
        .taskboard()
        .claim("t", "w2", 60_000)
        .expect("the next call on the same connection works");
    assert_eq!((task.fence, task.owner.as_deref()), (1, Some("w2")));
}

/// A blocking kernel's round trips wake the calling thread through its own
/// socket (`poll(2)` on the caller, not the `gak-io` reactor thread, then
/// a wake-up): at least one such wake per claim, counted on this thread.
fn blocking_calls_wait_for_their_own_sockets(dsn: &str) {
    let schema = pg::Schema::new(dsn, "caller");
    let kernel = schema.kernel();
    let seeds: Vec<TaskSeed> = (0..10).map(|i| TaskSeed::new(&format!("t{i}"))).collect();
    kernel.taskboard().seed(&seeds).unwrap();
    let before = gak::measure::caller_socket_wakes();
    for i in 0..10 {
        let task = kernel
            .taskboard()
            .claim(&format!("t{i}"), "w", 60_000)
            .unwrap();
        assert_eq!(task.fence, 1);
    }
    let woken = gak::measure::caller_socket_wakes() - before;
    assert!(
        woken >= 10,
        "10 claims woke the caller by its socket {woken} times"
    );
}

/// The connection settings of `dsn` with `hosts` (host, port) in its place.
fn with_hosts(dsn: &str, hosts: &[(&str, u16)]) -> tokio_postgres::Config {
    let base: tokio_postgres::Config = dsn.parse().expect("GAK_PG_DSN as libpq reads it");
    let mut config = tokio_postgres::Config::new();
    if let Some(user) = base.get_user() {
        config.user(user);
    }
    if let Some(password) = base.get_password() {
        config.password(password);
    }
    if let Some(db) = base.get_dbname() {
        config.dbname(db);
    }
    config.ssl_mode(base.get_ssl_mode());
    for (host, port) in hosts {
        config.host(*host).port(*port);
    }
    config
}

/// The server of `dsn`, as a TCP host and port.
fn tcp_server(dsn: &str) -> (String, u16) {
    let base: tokio_postgres::Config = dsn.parse().expect("GAK_PG_DSN as libpq reads it");
    let host = match base.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(name)) => name.clone(),
        _ => "127.0.0.1".to_owned(),
    };
    (host, base.get_ports().first().copied().unwrap_or(5432))
}

/// Sessions made on a calling thread connect as tokio-postgres does: hosts
/// in order (a refused one, then the server), `target_session_attrs`
/// checked (the server is a primary: `read-write` connects, `read-only`
/// is refused with libpq's reason, naming no password).
fn hosts_are_tried_in_order_with_their_session_attributes(dsn: &str) {
    use tokio_postgres::config::TargetSessionAttrs;
    let schema = pg::Schema::new(dsn, "hosts");
    let (host, port) = tcp_server(dsn);
    let open = |attrs| {
        let mut config = with_hosts(dsn, &[(host.as_str(), 1), (host.as_str(), port)]);
        config.target_session_attrs(attrs);
        gak::Kernel::builder()
            .postgres(config, &schema.name)
            .open_blocking()
    };
    let kernel = open(TargetSessionAttrs::ReadWrite).expect("open");
    kernel.taskboard().seed(&[TaskSeed::new("t")]).unwrap();
    let before = gak::measure::caller_socket_wakes();
    assert_eq!(kernel.taskboard().claim("t", "w", 60_000).unwrap().fence, 1);
    assert!(
        gak::measure::caller_socket_wakes() > before,
        "a caller's socket"
    );

    let refused = open(TargetSessionAttrs::ReadOnly).unwrap_err().to_string();
    assert!(refused.contains("database is not read only"), "{refused}");
}

/// This thread's CPU time so far, in clock ticks (`/proc/thread-self/stat`).
fn thread_cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("procfs");
    let fields: Vec<&str> = stat.rsplit_once(") ").expect("stat").1.split(' ').collect();
    // utime and stime, fields 14 and 15 of stat(5), 12 and 13 after the name.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// A session a blocking call made, used next by the async view of the same
/// pool on a tokio runtime (`as_async`), waits through that runtime's
/// reactor: a half-second server-side sleep costs the thread next to no
/// CPU (a stream that spun for want of a watcher would burn the half
/// second), and the blocking kernel goes on afterwards.
fn a_caller_s_session_used_from_async_code_waits_without_spinning(dsn: &str) {
    let schema = pg::Schema::new(dsn, "mixed");
    let kernel = gak::Kernel::builder()
        .store(&schema.url)
        .max_connections(1)
        .open_blocking()
        .expect("open");
    kernel
        .taskboard()
        .seed(&[TaskSeed::new("a"), TaskSeed::new("b")])
        .unwrap();
    kernel.taskboard().claim("a", "w", 60_000).unwrap();
    let core = kernel.as_async();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let started = thread_cpu_ticks();
    let slept = runtime.block_on(core.with_downstream(async |d| {
        d.postgres_query("SELECT pg_sleep(0.5)::text", &[])
            .await
            .expect("postgres")
    }));
    let spent = thread_cpu_ticks() - started;
    assert_eq!(slept.expect("slept").len(), 1);
    assert!(
        spent < 10,
        "{spent} ticks of CPU while the server slept 0.5 s"
    );
    assert_eq!(kernel.taskboard().claim("b", "w", 60_000).unwrap().fence, 1);
}

/// A call that read a task and wrote nothing has released the task's lock
/// when it returns: a claimer that passes over held tasks (SPEC 10) may
/// pass over only what an overlapping call holds. The proxy holds the
/// end of every transaction that wrote nothing for 300 ms; a binding that
/// answered before its `COMMIT` was through would leave the task locked
/// after the call, and the claim below would find nothing.
fn a_read_only_call_leaves_no_task_held_after_it_returns(dsn: &str) {
    let schema = pg::Schema::new(dsn, "quiet");
    let proxy = CommitCutter::start(dsn);
    let kernel = gak::Kernel::builder()
        .postgres(proxy.config(), &schema.name)
        .open_blocking()
        .expect("a kernel through the proxy");
    let direct = schema.kernel();
    direct.taskboard().seed(&[TaskSeed::new("t")]).unwrap();
    // Once without the delay: the connection and its statements are ready.
    assert_eq!(kernel.taskboard().get("t").unwrap().state, TaskState::Open);
    proxy.slow_quiet_ends(300);
    let get = || kernel.taskboard().get("t").map(drop);
    let refused = || match kernel.taskboard().complete("t", "0123456789abcdef") {
        Err(_) => Ok(()),
        Ok(()) => panic!("a complete without a claim succeeded"),
    };
    let after = |what: &str, call: &dyn Fn() -> Result<(), Error>| {
        call().unwrap();
        let claimed = direct.taskboard().claim_next("w", 60_000).unwrap();
        let claimed = claimed.unwrap_or_else(|| {
            panic!("after {what}, the open task was passed over: its lock outlived the call")
        });
        assert_eq!(claimed.id, "t");
        let token = claimed.token.expect("a claim's token");
        direct.taskboard().release("t", &token).expect("release");
    };
    after("a get", &get);
    after("a refused complete", &refused);
    proxy.slow_quiet_ends(0);
}

fn main() {
    let mut suite = Suite::new();
    suite.needs(
        &POSTGRES,
        "dropped_connection_mid_call_is_storage_and_changes_nothing",
        dropped_connection_mid_call_is_storage_and_changes_nothing,
    );
    suite.test(
        "schema_names_with_quotes_or_dots_are_refused",
        schema_names_with_quotes_or_dots_are_refused,
    );
    suite.test(
        "unreachable_server_fails_fast_naming_host_and_port",
        unreachable_server_fails_fast_naming_host_and_port,
    );
    suite.needs(
        &POSTGRES,
        "database_clock_judges_expiry",
        database_clock_judges_expiry,
    );
    suite.needs(
        &POSTGRES,
        "a_commit_whose_answer_is_lost_is_never_rerun",
        a_commit_whose_answer_is_lost_is_never_rerun,
    );
    suite.needs(
        &POSTGRES,
        "a_failed_first_statement_leaves_the_connection_usable",
        a_failed_first_statement_leaves_the_connection_usable,
    );
    suite.needs(
        &POSTGRES,
        "a_read_only_call_leaves_no_task_held_after_it_returns",
        a_read_only_call_leaves_no_task_held_after_it_returns,
    );
    suite.needs(
        &POSTGRES,
        "blocking_calls_wait_for_their_own_sockets",
        blocking_calls_wait_for_their_own_sockets,
    );
    suite.needs(
        &POSTGRES,
        "hosts_are_tried_in_order_with_their_session_attributes",
        hosts_are_tried_in_order_with_their_session_attributes,
    );
    suite.needs(
        &POSTGRES,
        "a_caller_s_session_used_from_async_code_waits_without_spinning",
        a_caller_s_session_used_from_async_code_waits_without_spinning,
    );
    suite.run();
}
