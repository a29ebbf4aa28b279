//! The CLI's PostgreSQL variants, on the suite runner: with no server they
//! are reported as *ignored* with the reason, never as passed; under
//! `CI=true` a missing server fails them.
use gak_tests::cli::Operator;
use gak_tests::suite::{POSTGRES, Suite};
use gak_tests::{pg, worked};
use libtest_mimic::Failed;

const WORKER: &str = env!("CARGO_BIN_EXE_gak-effect-worker");

fn main() {
    let mut suite = Suite::new();
    suite.needs(
        &POSTGRES,
        "a_stuck_uncertain_refund_is_resolved_from_the_cli_on_postgres",
        |dsn| stuck_refund(dsn).unwrap_or_else(|e| panic!("{e:?}")),
    );
    suite.run();
}

/// The worked example on a schema of its own, through a URL that carries a
/// password (trust auth ignores it): the password must never be printed.
fn stuck_refund(dsn: &str) -> Result<(), Failed> {
    let schema = pg::Schema::new(dsn, "cli_refund");
    let secret = "pw-never-printed-7d1f";
    let url = with_password(&schema.url, secret);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut op = Operator::new(&url, dir.path());
    worked::stuck_refund(&mut op, WORKER.as_ref(), dir.path());
    // An error that names the store: it must not carry the password either.
    let refused = op.run(&["tasks", "show", "no-such-task", "--store", &url]);
    refused.expect_code(1);
    for ran in &op.log {
        if ran.all().contains(secret) {
            return Err(format!("`gak {}` printed the password", ran.args.join(" ")).into());
        }
    }
    Ok(())
}

/// `postgres://user@host…` → `postgres://user:SECRET@host…`.
fn with_password(url: &str, secret: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    match rest.split_once('@') {
        Some((user, host)) => format!("{scheme}://{user}:{secret}@{host}"),
        None => format!("{scheme}://postgres:{secret}@{rest}"),
    }
}
