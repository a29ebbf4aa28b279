//! `store.try-read` on every Rust binding (SPEC 10's skip-locked claiming,
//! `host/HOSTS.md` rule 1): a key another transaction holds is answered
//! held at once — neither read nor locked — and every other key is read
//! (and locked) as a point read is: absent keys, this transaction's own
//! writes, keys this transaction holds already. Memory and SQLite, whose
//! transactions exclude each other, never answer held.
use std::time::Duration;

use gak::blocking::run_future as run;
use gak::store::{Backend, Write};
use gak_tests::suite::{POSTGRES, Suite};

const X: &str = "{\"v\": \"x\"}";
const Y: &str = "{\"v\": \"y\"}";
const OWN: &str = "{\"v\": \"own\"}";

/// A probe that answers within this is not waiting for a lock (a probe
/// that waited for the other transaction would never answer: it holds its
/// lock until the test ends it).
const ANSWERS_WITHIN: Duration = Duration::from_secs(20);

fn seeded(backend: &dyn Backend) {
    run(async {
        let mut s = backend.session().await.expect("session");
        s.begin().await.expect("begin");
        let writes = [
            Write {
                table: "tasks",
                key: "x",
                value: Some(X),
            },
            Write {
                table: "tasks",
                key: "y",
                value: Some(Y),
            },
        ];
        s.write(&writes).await.expect("write");
        s.commit().await.expect("commit");
    });
}

/// Alone, a probe reads every key: present, absent, written by itself.
fn probes_read_what_nobody_holds(backend: &dyn Backend) {
    seeded(backend);
    run(async {
        let mut s = backend.session().await.expect("session");
        s.begin().await.expect("begin");
        let own = [Write {
            table: "tasks",
            key: "own",
            value: Some(OWN),
        }];
        s.write(&own).await.expect("own write");
        let keys = [
            ("tasks", "x"),
            ("tasks", "nope"),
            ("tasks", "own"),
            ("indexes", "x"),
        ];
        let found = s.try_get_many(&keys).await.expect("probe");
        assert_eq!(
            found,
            vec![
                Some(Some(X.to_owned())),
                Some(None),
                Some(Some(OWN.to_owned())),
                Some(None)
            ]
        );
        // A key it already holds (read by key before) is never held.
        s.get_many(&[("tasks", "y")]).await.expect("read");
        let again = s.try_get_many(&[("tasks", "y")]).await.expect("probe");
        assert_eq!(again, vec![Some(Some(Y.to_owned()))]);
        s.rollback().await;
    });
}

/// PostgreSQL: a key another transaction holds is answered held without
/// waiting, and the probe takes no lock on it: once that transaction ends,
/// a third one locks it at once.
fn a_held_key_is_passed_over_unlocked(backend: &dyn Backend) {
    seeded(backend);
    run(async {
        let mut a = backend.session().await.expect("session a");
        let mut b = backend.session().await.expect("session b");
        let mut c = backend.session().await.expect("session c");
        a.begin().await.expect("begin a");
        a.get_many(&[("tasks", "x")]).await.expect("a locks x");
        b.begin().await.expect("begin b");
        let keys = [("tasks", "x"), ("tasks", "y"), ("tasks", "nope")];
        let found = tokio::time::timeout(ANSWERS_WITHIN, b.try_get_many(&keys))
            .await
            .expect("a probe waited for a held key")
            .expect("probe");
        assert_eq!(found, vec![None, Some(Some(Y.to_owned())), Some(None)]);
        a.rollback().await;
        // A rollback of a transaction that wrote nothing may be sent
        // unwaited: the next request on a's connection is answered after
        // it, so x is free once that answer is in.
        a.begin().await.expect("begin a again");
        a.get_many(&[("meta", "unheld")])
            .await
            .expect("a reads a key nobody holds");
        // b passed x over without locking it: c probes it free.
        c.begin().await.expect("begin c");
        let free = tokio::time::timeout(ANSWERS_WITHIN, c.try_get_many(&[("tasks", "x")]))
            .await
            .expect("x is still locked")
            .expect("probe");
        assert_eq!(free, vec![Some(Some(X.to_owned()))]);
        // b still holds y (probed free, so locked): c passes it over.
        let held = tokio::time::timeout(ANSWERS_WITHIN, c.try_get_many(&[("tasks", "y")]))
            .await
            .expect("a probe waited for a held key")
            .expect("probe");
        assert_eq!(held, vec![None]);
        a.rollback().await;
        b.rollback().await;
        c.rollback().await;
    });
}

/// PostgreSQL: a claim puts expired claims back into the claim order by
/// probing them, not by waiting for them. With t0's record held by another
/// transaction (reading it, as every PostgreSQL read locks), a claim-next
/// answers at once with t1, the other expired claim; t0 is claimed again
/// once that transaction ends. (A claim that waited there, holding the
/// group records its walk had read, could deadlock with the holder.)
fn a_held_expired_claim_is_passed_over(dsn: &str) {
    let schema = gak_tests::pg::Schema::new(dsn, "probes_expired");
    let clock = std::sync::Arc::new(gak::ManualClock::at(1_000));
    let kernel = schema.kernel_with(clock.clone());
    let tb = kernel.taskboard();
    tb.seed(&[gak::TaskSeed::new("t0"), gak::TaskSeed::new("t1")])
        .expect("seed");
    for id in ["t0", "t1"] {
        tb.claim(id, "crashed", 100).expect("claim");
    }
    clock.advance(100);
    let backend = gak::store::postgres::PostgresBackend::parse(&schema.url).expect("url");
    let mut holder = run(backend.session()).expect("session");
    run(holder.begin()).expect("begin");
    run(holder.get_many(&[("tasks", "t0")])).expect("hold t0");
    let (sent, answered) = std::sync::mpsc::channel();
    let first = std::thread::scope(|s| {
        s.spawn(|| sent.send(tb.claim_next("a", 100)).expect("send"));
        let first = answered.recv_timeout(ANSWERS_WITHIN);
        // The holder ends before anything is asserted: a claim that waited
        // for it then finishes at once (and the scope joins it), where it
        // would otherwise hang until the statement timeout.
        run(holder.rollback());
        first
    });
    let first = first
        .expect("the claim waited for the held expired claim")
        .expect("claim-next")
        .expect("a task");
    assert_eq!((first.id.as_str(), first.fence), ("t1", 2));
    let second = tb
        .claim_next("a", 100)
        .expect("claim-next")
        .expect("a task");
    assert_eq!((second.id.as_str(), second.fence), ("t0", 2));
}

fn main() {
    let mut suite = Suite::new();
    suite.test("probes_read_what_nobody_holds_memory", || {
        probes_read_what_nobody_holds(&gak::store::memory::MemoryBackend::default());
    });
    suite.test("probes_read_what_nobody_holds_sqlite", || {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite:{}", dir.path().join("p.db").display());
        let backend = run(gak::store::open(&url)).expect("sqlite");
        probes_read_what_nobody_holds(&*backend);
    });
    suite.needs(
        &POSTGRES,
        "probes_read_what_nobody_holds_postgres",
        |dsn: &str| {
            let schema = gak_tests::pg::Schema::new(dsn, "probes");
            let backend = gak::store::postgres::PostgresBackend::parse(&schema.url).expect("url");
            probes_read_what_nobody_holds(&backend);
        },
    );
    suite.needs(
        &POSTGRES,
        "a_held_key_is_passed_over_unlocked_postgres",
        |dsn: &str| {
            let schema = gak_tests::pg::Schema::new(dsn, "probes_held");
            let backend = gak::store::postgres::PostgresBackend::parse(&schema.url).expect("url");
            a_held_key_is_passed_over_unlocked(&backend);
        },
    );
    suite.needs(
        &POSTGRES,
        "a_held_expired_claim_is_passed_over_postgres",
        a_held_expired_claim_is_passed_over,
    );
    suite.run();
}
