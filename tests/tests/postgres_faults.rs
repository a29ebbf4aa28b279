//! PostgreSQL failure modes: a connection dropped mid-call, hostile schema
//! names, an unreachable server, and the database clock.
use std::time::Instant;

use gak::blocking::Kernel;
use gak::store::postgres::{PostgresBackend, valid_schema};
use gak::{Acquired, Action, Error, SinkError, TaskSeed};
use gak_tests::pg;
use gak_tests::suite::{POSTGRES, Suite};

/// The connection dies inside the transaction (after the fence compare and
/// the body's write): the call is `storage`, nothing of it lands, and the
/// next call reconnects and works.
fn dropped_connection_mid_call_is_storage_and_changes_nothing(dsn: &str) {
    let schema = pg::Schema::new(&dsn, "drop");
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

/// With `clock=db` expiry is judged by the server's clock: a lease granted
/// for 1 ms is expired by the next call, whatever the host's clock says.
fn database_clock_judges_expiry(dsn: &str) {
    let schema = pg::Schema::new(&dsn, "clock");
    let kernel = Kernel::open(&format!("{}&clock=db", schema.url)).unwrap();
    let action = Action::new("k", "r");
    let Acquired::Granted(lease) = kernel.sideeffect().acquire(&action, 1).unwrap() else {
        panic!("fresh key");
    };
    // Poll until the server's clock has passed `until` (1 ms): no sleeping.
    let mut answer = kernel.sideeffect().acquire(&action, 1).unwrap();
    while answer == Acquired::InFlight {
        answer = kernel.sideeffect().acquire(&action, 1).unwrap();
    }
    assert_eq!(answer, Acquired::Uncertain("intent-expired".into()));
    let server_now_ms = lease.until - 1;
    let host_now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    // Same machine here, so the two clocks agree to within seconds.
    assert!(server_now_ms.abs_diff(host_now_ms) < 60_000);
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
    suite.run();
}
