//! The host-protocol fuzzers (`tests/host-protocol/fuzz/`, README there)
//! through the Rust host: SQL texts through a sink body on SQLite and
//! PostgreSQL, passwords through every entry point that takes a store URL
//! (the CLI included), retry sequences on the scripted store and on
//! PostgreSQL. Also: the committed files are what the generator writes,
//! and the SQL labels hold against the real databases, without any guard.
//! `GAK_HOST_FUZZ_DIR` replays another directory (`just soak`).
use std::path::PathBuf;

use gak_cli::conformance::fuzz::{self, Expect, SqlCase};
use gak_cli::conformance::protocol::Store;
use gak_tests::hostfuzz;
use gak_tests::suite::{POSTGRES, Suite};

fn committed() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("host-protocol/fuzz")
}

fn dir() -> PathBuf {
    std::env::var_os("GAK_HOST_FUZZ_DIR").map_or_else(committed, PathBuf::from)
}

fn read(name: &str) -> String {
    let path = dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn sql_cases() -> Vec<SqlCase> {
    fuzz::parse_sql(&read("sql.json")).expect("sql.json parses")
}

fn schema_url(dsn: &str, label: &str) -> String {
    let sep = if dsn.contains('?') { '&' } else { '?' };
    format!("{dsn}{sep}schema=fz_{label}_{}", std::process::id())
}

fn main() {
    let mut suite = Suite::new();
    suite.test("the committed cases are what the generator writes", || {
        for (name, text) in hostfuzz::files(
            hostfuzz::SEED,
            hostfuzz::SQL_CASES,
            hostfuzz::PASSWORD_CASES,
            hostfuzz::RETRY_CASES,
        ) {
            let path = committed().join(name);
            let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                on_disk == text,
                "{} is not what `cargo run -p gak-tests --bin gak-hostfuzz` writes: run it and commit the result",
                path.display()
            );
        }
    });
    suite.test("sql: the SQLite labels hold against SQLite itself", || {
        let n = oracle::sqlite(&sql_cases());
        println!("{n} texts checked against SQLite");
    });
    suite.needs(
        &POSTGRES,
        "sql: the PostgreSQL labels hold against the server",
        |dsn| {
            let n = oracle::postgres(dsn, &sql_cases());
            println!("{n} texts checked against the server");
        },
    );
    suite.test("sql: every text through a sink body on sqlite", || {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::Sqlite(dir.path().join("fuzz.db"));
        match fuzz::run_sql(&sql_cases(), &store) {
            Ok(n) => println!("{n} texts through a sink body on SQLite"),
            Err(why) => panic!("{why}"),
        }
    });
    suite.needs(
        &POSTGRES,
        "sql: every text through a sink body on postgres",
        |dsn| {
            let store = Store::Postgres(schema_url(dsn, "sql"));
            match fuzz::run_sql(&sql_cases(), &store) {
                Ok(n) => println!("{n} texts through a sink body on PostgreSQL"),
                Err(why) => panic!("{why}"),
            }
        },
    );
    suite.needs_tokio(
        &POSTGRES,
        "sql: with the lexer off, the transaction-id check alone keeps a body's ending from being reported committed",
        |dsn| async move { second_line(&schema_url(&dsn, "xact")).await },
    );
    suite.test(
        "sql: a database error ends the call on sqlite, a refusal does not",
        || {
            let dir = tempfile::tempdir().expect("temp dir");
            let url = format!("sqlite:{}", dir.path().join("alike.db").display());
            gak::blocking::run_future(alike(&url));
        },
    );
    suite.needs_tokio(
        &POSTGRES,
        "sql: a database error ends the call on postgres, a refusal does not",
        |dsn| async move {
            let url = schema_url(&dsn, "alike");
            alike(&url).await;
            let backend = gak::store::postgres::PostgresBackend::parse(&url).expect("parse");
            backend.drop_schema().await.expect("drop");
        },
    );
    suite.test("passwords: no entry point shows one", || {
        let (templates, cases) =
            fuzz::parse_passwords(&read("passwords.json")).expect("passwords.json parses");
        let scratch = tempfile::tempdir().expect("temp dir");
        let cli = |i: usize, url: &str| -> Option<Result<String, String>> {
            // The CLI: a process each, so the first 8 passwords only.
            (i < 8).then(|| {
                let ran = gak_tests::cli::run_gak(
                    scratch.path(),
                    &["tasks", "list", "--store", url],
                    &[],
                    &[],
                    None,
                );
                if ran.code == 0 {
                    Err(format!("gak tasks list opened {url:?}"))
                } else {
                    Ok(format!("{}\n{}", ran.stdout, ran.stderr))
                }
            })
        };
        match fuzz::check_passwords(&templates, &cases, cli) {
            Ok(n) => println!(
                "{} passwords × {} URLs: {n} failures checked",
                cases.len(),
                templates.len()
            ),
            Err(why) => panic!("{why}"),
        }
    });
    suite.test(
        "retries: the answer is the last attempt's on scripted",
        || {
            let cases = fuzz::parse_retries(&read("retries.json")).expect("retries.json parses");
            match fuzz::run_retries(&cases, &Store::Scripted) {
                Ok(n) => println!("{n} retry sequences on the scripted store"),
                Err(why) => panic!("{why}"),
            }
        },
    );
    suite.needs(
        &POSTGRES,
        "retries: the answer is the last attempt's on postgres",
        |dsn| {
            let cases = fuzz::parse_retries(&read("retries.json")).expect("retries.json parses");
            let mut n = 0;
            for (i, case) in cases.iter().enumerate() {
                let store = Store::Postgres(schema_url(dsn, &format!("rt{i}")));
                match fuzz::run_retries(std::slice::from_ref(case), &store) {
                    Ok(k) => n += k,
                    Err(why) => panic!("case {i}: {why}"),
                }
            }
            println!("{n} retry sequences on PostgreSQL");
        },
    );
    suite.run()
}

/// HOSTS.md rule 12: a statement the database ran and failed ends the call
/// (`storage`) even when the body swallowed the error; a statement the host
/// refused before sending changes nothing and the call commits — alike on
/// both databases.
async fn alike(url: &str) {
    let kernel = gak::Kernel::open(url).await.expect("open");
    for (i, (sql, ends)) in [
        ("SELEC 1", true),
        ("SELECT no_such_column", true),
        ("SELECT * FROM gak_no_such_table", true),
        ("SELECT 1; SELECT 2", false),
        ("COMMIT", false),
        ("ROLLBACK", false),
        ("SELECT 1", false),
    ]
    .into_iter()
    .enumerate()
    {
        let resource = format!("alike-{i}");
        let answer = kernel
            .sideeffect()
            .write_fenced(&resource, 1, async move |down| {
                let raised = {
                    #[allow(clippy::option_map_unit_fn)]
                    if let Some(mut conn) = down.sqlite() {
                        conn.execute(sql, []).is_err()
                    } else {
                        let r = down.postgres_execute(sql, &[]).await.expect("a SQL store");
                        r.is_err()
                    }
                };
                assert_eq!(raised, sql != "SELECT 1", "{sql:?}: raised {raised}");
                Ok::<(), ()>(())
            })
            .await;
        match (ends, &answer) {
            (true, Err(gak::SinkError::Kernel(gak::Error::Storage(_)))) | (false, Ok(())) => {}
            _ => panic!("{sql:?} on {url}: answered {answer:?}"),
        }
        let fence = kernel
            .sideeffect()
            .sink_seen(&resource)
            .await
            .expect("seen");
        assert_eq!(fence, u64::from(!ends), "{sql:?}");
    }
}

/// The check behind the lexer (HOSTS.md rule 12): after a body's own
/// statements the transaction must still be the one the kernel began. With
/// the lexer turned off, a body runs each ending plainly: the call is never
/// `ok`, and an ending that rolled back leaves nothing written — the
/// kernel's own writes and the body's `downstream` puts, which it defers,
/// never go out in a transaction that is not the call's.
async fn second_line(url: &str) {
    use gak::store::postgres::PostgresBackend;
    let backend = PostgresBackend::parse(url)
        .expect("parse")
        .without_statement_guard_for_tests();
    backend.drop_schema().await.expect("drop");
    backend.ensure_schema().await.expect("set up");
    let clock: std::sync::Arc<dyn gak::Clock> = std::sync::Arc::new(gak::ManualClock::at(0));
    let kernel =
        gak::Kernel::with_backend(std::sync::Arc::new(backend.clone()), clock).expect("kernel");
    for (i, (ending, rolls_back)) in [
        ("COMMIT", false),
        ("END", false),
        ("COMMIT AND CHAIN", false),
        ("ROLLBACK", true),
        ("ABORT", true),
        ("ROLLBACK AND CHAIN", true),
    ]
    .into_iter()
    .enumerate()
    {
        let resource = format!("x-{i}");
        let after = format!("x/{i}/after");
        let key = after.clone();
        let answer = kernel
            .sideeffect()
            .write_fenced(&resource, 5, async move |down| {
                // It runs (the lexer is off); the id read behind it in the
                // same round trip reports the ending to the body.
                let ran = down
                    .postgres_execute(ending, &[])
                    .await
                    .expect("a PostgreSQL store");
                assert!(
                    ran.as_ref()
                        .is_err_and(|e| e.to_string().contains("ended the kernel's transaction")),
                    "{ending}: {ran:?}"
                );
                // And nothing more goes out on it.
                let again = down
                    .postgres_execute("SELECT 1", &[])
                    .await
                    .expect("a PostgreSQL store");
                assert!(again.is_err(), "{ending}: a later statement ran: {again:?}");
                let _ = down.put(&key, "1").await;
                Ok::<(), ()>(())
            })
            .await;
        assert!(answer.is_err(), "{ending}: the call answered ok");
        let fence = kernel
            .sideeffect()
            .sink_seen(&resource)
            .await
            .expect("sink_seen");
        let put = kernel
            .with_downstream(async move |down| down.get(&after).await)
            .await
            .expect("read downstream");
        assert_eq!(put, None, "{ending}: the body's put after it went out");
        if rolls_back {
            assert_eq!(fence, 0, "{ending}: the fence was written");
        }
    }
    backend.drop_schema().await.expect("drop");
}

/// The labels, checked against the databases themselves with no guard in
/// the way: `run` texts run and leave the transaction open; texts that
/// `end` it do.
mod oracle {
    use super::{Expect, SqlCase};

    pub fn sqlite(cases: &[SqlCase]) -> usize {
        let conn = gak::rusqlite::Connection::open_in_memory().expect("SQLite in memory");
        let mut checked = 0;
        for (i, case) in cases.iter().enumerate() {
            conn.execute_batch("BEGIN").expect("BEGIN");
            let ran = (|| {
                let mut stmt = conn.prepare(&case.sql)?;
                let mut rows = stmt.query([])?;
                while rows.next()?.is_some() {}
                Ok::<_, gak::rusqlite::Error>(())
            })();
            let open = !conn.is_autocommit();
            match case.sqlite {
                Expect::Run => {
                    assert!(
                        ran.is_ok() && open,
                        "case {i} {:?}: {ran:?}, open {open}",
                        case.sql
                    );
                    checked += 1;
                }
                Expect::Refuse => {
                    // Unguarded, the statement either fails or changes the
                    // transaction (ends it, or opens a savepoint).
                    let savepoint = case
                        .sql
                        .trim_start()
                        .to_ascii_uppercase()
                        .starts_with("SAVEPOINT");
                    assert!(
                        ran.is_err() || !open || savepoint,
                        "case {i} {:?}: ran and kept the transaction",
                        case.sql
                    );
                    checked += 1;
                }
                Expect::Any => {}
            }
            if !conn.is_autocommit() {
                conn.execute_batch("ROLLBACK").expect("ROLLBACK");
            }
        }
        checked
    }

    pub fn postgres(dsn: &str, cases: &[SqlCase]) -> usize {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let (client, connection) =
                gak::tokio_postgres::connect(dsn, gak::tokio_postgres::NoTls)
                    .await
                    .expect("connect");
            tokio::spawn(connection);
            let txid = async || -> i64 {
                client
                    .query_one("SELECT txid_current()", &[])
                    .await
                    .expect("txid")
                    .get(0)
            };
            let mut checked = 0;
            for (i, case) in cases.iter().enumerate() {
                client.batch_execute("BEGIN").await.expect("BEGIN");
                let before = txid().await;
                match (case.postgres, &case.ends) {
                    (Expect::Run, _) => {
                        // One statement, on the extended protocol.
                        let r = client.execute(case.sql.as_str(), &[]).await;
                        assert!(r.is_ok(), "case {i} {:?}: {r:?}", case.sql);
                        assert_eq!(txid().await, before, "case {i} {:?}", case.sql);
                        checked += 1;
                    }
                    (_, Some(ends)) => {
                        // Every statement, on the simple protocol.
                        let _ = client.batch_execute(&case.sql).await;
                        let after = client.query_one("SELECT txid_current()", &[]).await;
                        let ended = after.map_or(true, |row| row.get::<_, i64>(0) != before);
                        assert!(
                            ended,
                            "case {i} {:?} did not end the transaction ({ends})",
                            case.sql
                        );
                        checked += 1;
                    }
                    _ => {}
                }
                let _ = client.batch_execute("ROLLBACK").await;
            }
            checked
        })
    }
}
