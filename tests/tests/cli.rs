//! The `gak` binary driven as an operator would, on SQLite (the PostgreSQL
//! variants are in `cli_postgres.rs`, reported as ignored when no server is
//! reachable).
use gak_tests::cli::Operator;
use gak_tests::worked;

const WORKER: &str = env!("CARGO_BIN_EXE_gak-effect-worker");

fn sqlite(dir: &std::path::Path) -> String {
    format!("sqlite:{}", dir.join("ops.db").display())
}

#[test]
fn a_stuck_uncertain_refund_is_resolved_from_the_cli_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let mut op = Operator::new(&sqlite(dir.path()), dir.path());
    worked::stuck_refund(&mut op, WORKER.as_ref(), dir.path());
}
