//! Eight OS processes on one PostgreSQL schema: one winner per claim epoch,
//! each key's effect exactly once in a real downstream table, and a fenced
//! sink whose seen fence never decreases; and eight processes draining one
//! board with `claim-next`.
use std::collections::BTreeSet;

use gak::{Acquired, Action, TaskSeed};
use gak_tests::suite::{POSTGRES, Suite};
use gak_tests::{hammer, pg};

const WORKERS: usize = 8;
const ROUNDS: usize = 100;
const KEYS: usize = 40;
const QUEUED: usize = 120;

fn eight_processes_on_one_postgres_schema(dsn: &str) {
    let schema = pg::Schema::new(dsn, "mp");
    let kernel = schema.kernel();
    let name = schema.url.rsplit("schema=").next().unwrap().to_owned();
    let tasks: Vec<TaskSeed> = (0..4).map(|i| TaskSeed::new(&format!("t{i}"))).collect();
    kernel.taskboard().seed(&tasks).unwrap();
    kernel
        .with_downstream(|d| {
            for ddl in [
                format!("CREATE TABLE \"{name}\".effects (key text, worker text, fence int8)"),
                format!("CREATE TABLE \"{name}\".ledger (id bigserial PRIMARY KEY, fence int8, worker text)"),
            ] {
                d.postgres_execute(&ddl, &[]).expect("postgres")?;
            }
            Ok(())
        })
        .unwrap();

    let (rounds, keys) = (ROUNDS.to_string(), KEYS.to_string());
    let audit = hammer::run(
        env!("CARGO_BIN_EXE_gak-hammer"),
        WORKERS,
        &[&schema.url, &rounds, &keys, &name],
    );
    let epochs = audit.check_claims(&kernel);
    let overlap = audit
        .check_overlap(WORKERS / 2)
        .unwrap_or_else(|why| panic!("the processes did not race: {why}"));
    assert!(
        audit.sink_stale > 0,
        "no stale sink write was refused: the sink phase did not overlap"
    );

    // Effects: exactly one body run and one downstream row per key.
    audit.check_bodies(KEYS);
    let rows = query(
        &kernel,
        &format!("SELECT key, count(*)::text FROM \"{name}\".effects GROUP BY key"),
    );
    assert_eq!(rows.len(), KEYS);
    assert!(rows.iter().all(|(_, n)| *n == 1), "{rows:?}");
    for n in 0..KEYS {
        let action = Action::new(&format!("k{n}"), &format!("res{}", n % 3));
        assert!(matches!(
            kernel.sideeffect().acquire(&action, 1_000).unwrap(),
            Acquired::Replayed(_)
        ));
    }

    // Sink: the ledger in commit order never goes back in fence, and holds
    // exactly the writes that were accepted.
    let ledger = query(
        &kernel,
        &format!("SELECT worker, fence::text FROM \"{name}\".ledger ORDER BY id"),
    );
    let fences: Vec<i64> = ledger.iter().map(|(_, f)| *f).collect();
    assert!(
        fences.windows(2).all(|w| w[0] <= w[1]),
        "a stale write landed: {fences:?}"
    );
    assert_eq!(
        fences.iter().copied().collect::<BTreeSet<_>>(),
        audit.sink_ok
    );
    assert_eq!(
        kernel.sideeffect().sink_seen("ledger").unwrap() as i64,
        *fences.last().unwrap()
    );
    eprintln!(
        "pg multiprocess: {WORKERS} processes, {epochs} claim epochs, {KEYS} keys each applied once, {} sink writes landed, {} refused stale; {overlap}",
        fences.len(),
        audit.sink_stale
    );
}

/// Eight processes drain one PostgreSQL board with `claim-next`.
fn eight_processes_draining_a_postgres_queue(dsn: &str) {
    let schema = pg::Schema::new(dsn, "mq");
    let kernel = schema.kernel();
    kernel
        .taskboard()
        .seed(&hammer::queue_seeds(QUEUED))
        .unwrap();
    let audit = hammer::run_queue(env!("CARGO_BIN_EXE_gak-hammer"), WORKERS, &schema.url);
    let served = audit.check_queue(&kernel, QUEUED, 2);
    gak_tests::assert_counted(&kernel);
    eprintln!("pg multiprocess: {QUEUED} tasks drained by {served} processes with claim-next");
}

/// Eight processes drain a board with groups limited to 2 and 3 live
/// claims with the queue worker: no group ever exceeds its limit, sampled
/// throughout and counted from the handlers' own start and end lines.
fn group_limits_hold_across_postgres_processes(dsn: &str) {
    let schema = pg::Schema::new(dsn, "mg");
    let kernel = schema.kernel();
    let most = hammer::group_limits_hold(
        env!("CARGO_BIN_EXE_gak-hammer"),
        &kernel,
        &schema.url,
        WORKERS,
        40,
    );
    gak_tests::assert_counted(&kernel);
    eprintln!(
        "pg multiprocess: most handlers at once (g0 limit 2, g1 limit 3, ungrouped): {most:?}"
    );
}

/// Rows of (text, number) through the kernel's own session (tests only).
fn query(kernel: &gak::blocking::Kernel, sql: &str) -> Vec<(String, i64)> {
    kernel
        .with_downstream(|d| d.postgres_query(sql, &[]).expect("postgres"))
        .unwrap()
        .into_iter()
        .map(|row| {
            let text = row[0].clone().unwrap_or_default();
            (text, row[1].as_deref().unwrap_or("0").parse().unwrap())
        })
        .collect()
}

fn main() {
    let mut suite = Suite::new();
    suite.needs(
        &POSTGRES,
        "eight_processes_on_one_postgres_schema",
        eight_processes_on_one_postgres_schema,
    );
    suite.needs(
        &POSTGRES,
        "eight_processes_draining_a_postgres_queue",
        eight_processes_draining_a_postgres_queue,
    );
    suite.needs(
        &POSTGRES,
        "group_limits_hold_across_postgres_processes",
        group_limits_hold_across_postgres_processes,
    );
    suite.run();
}
