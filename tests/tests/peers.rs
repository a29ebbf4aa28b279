//! The peers harness (`bench/peers/run.mjs`: graphile-worker and pg-boss
//! draining the same trivial jobs as gak, on the same PostgreSQL), run small
//! by `cargo test --workspace` so it keeps working between the times someone
//! measures with it:
//!
//! - `drain_200_jobs_json`: first `node bench/peers/run.mjs --install-only`,
//!   which runs `npm ci` into `bench/peers/node_modules` when the lock or Node
//!   changed since the last install (the harness's own stamp), then
//!   `--jobs 200 --workers 2 --json`: every default workload present once
//!   (gak's two rows too, run with `GAK_BIN` set to the binary this test
//!   build uses, so the harness never builds a release binary here), every
//!   row well-formed. One trial, so no two installs race.
//! - `gak_drain_postgres`: the hidden `gak drain` the harness runs for gak's
//!   rows, on PostgreSQL, 200 jobs, 4 workers, batch 1 (`claim-next` +
//!   `complete`) and batch 10 (`claim-batch` + `complete-batch`): every job
//!   completed exactly once (the command checks, and says so in its row),
//!   and its own schema dropped afterwards.
//! - `gak_drain_memory`: the same on `memory:` (needs nothing outside).
//!
//! Speed is measured, never asserted: a row only has to say it drained the
//! 200 jobs at some positive rate. Without Node 20+ (and npm) or PostgreSQL
//! the trials are reported ignored, with the reason; under `CI=true` they
//! fail instead.
use std::process::{Command, Output};

use gak::blocking::run_future;
use gak::store::postgres::PostgresBackend;
use gak_tests::cli::{gak_bin, run_gak};
use gak_tests::suite::{POSTGRES, Requirement, Suite};
use gak_tests::{jsenv, pg, pyenv};
use serde_json::Value;

static NODE_AND_POSTGRES: Requirement = Requirement::new(
    "Node 20+, npm and PostgreSQL",
    "install Node 20+ and set GAK_PG_DSN to a reachable server to run it",
    || jsenv::toolchain().clone().and_then(|_| pg::probe()),
);

/// The workloads a run without `--only` measures (the opt-in ones are not).
const DEFAULT_WORKLOADS: [&str; 6] = [
    "graphile-worker/unbatched",
    "graphile-worker/batched",
    "pg-boss/work-burst",
    "pg-boss/fetch-complete",
    "gak/unbatched",
    "gak/batched",
];

fn harness(args: &[&str]) -> Output {
    let out = Command::new("node")
        .arg("bench/peers/run.mjs")
        .args(args)
        .env("GAK_BIN", gak_bin())
        .current_dir(pyenv::repo())
        .output()
        .expect("run node");
    assert!(
        out.status.success(),
        "{}",
        jsenv::report(
            &format!("node bench/peers/run.mjs {}", args.join(" ")),
            &out
        )
    );
    out
}

fn number(row: &Value, field: &str) -> f64 {
    row[field]
        .as_f64()
        .filter(|n| n.is_finite())
        .unwrap_or_else(|| panic!("{field} is not a finite number in {row}"))
}

fn drain_200_jobs_json(dsn: &str) {
    harness(&["--install-only"]);
    let out = harness(&["--jobs", "200", "--workers", "2", "--json", "--dsn", dsn]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut seen = Vec::new();
    for line in stdout.lines() {
        let row: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("stdout under --json holds only JSON rows: {line:?}: {e}"));
        let text = |field: &str| {
            row[field]
                .as_str()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| panic!("{field} is not a non-empty string in {row}"))
                .to_owned()
        };
        seen.push(format!("{}/{}", text("peer"), text("mode")));
        text("version");
        text("node");
        text("postgres");
        assert_eq!(row["jobs"], 200, "{row}");
        assert_eq!(row["workers"], 2, "{row}");
        assert!(row["batch"].as_u64().is_some_and(|b| b >= 1), "{row}");
        assert!(row["settings"].is_object(), "{row}");
        let seconds = number(&row, "seconds");
        let rate = number(&row, "jobs_per_s");
        assert!(seconds > 0.0 && rate > 0.0, "{row}");
        assert!(
            (rate * seconds - 200.0).abs() < 1e-6 * 200.0,
            "jobs_per_s is jobs / seconds: {row}"
        );
        assert!(number(&row, "client_cpu_seconds") >= 0.0, "{row}");
        if row["peer"] == "gak" {
            assert!(row.get("node_cpu_seconds").is_none(), "{row}");
            assert_eq!(
                row["settings"]["claims"].as_u64().map(|c| c > 0),
                Some(true),
                "{row}"
            );
        } else {
            assert!(number(&row, "node_cpu_seconds") >= 0.0, "{row}");
        }
    }
    assert_eq!(seen, DEFAULT_WORKLOADS, "one row per default workload");
}

/// `gak drain --store URL --jobs 200 --workers 4 --batch B --json`: its row.
fn gak_drain(store: &str, batch: u32) -> Value {
    let row = gak_drain_with(store, batch, 4, &[]);
    assert_eq!(
        row["settings"]["max_connections"], 5,
        "a connection per worker and one more: {row}"
    );
    row
}

/// `gak drain` with `workers` workers and the `extra` arguments: its row.
fn gak_drain_with(store: &str, batch: u32, workers: usize, extra: &[&str]) -> Value {
    let batch = batch.to_string();
    let workers_arg = workers.to_string();
    let mut args = vec![
        "drain",
        "--store",
        store,
        "--jobs",
        "200",
        "--workers",
        &workers_arg,
        "--batch",
        &batch,
        "--json",
    ];
    args.extend_from_slice(extra);
    let ran = run_gak(&std::env::temp_dir(), &args, &[], &[], None);
    ran.expect_code(0);
    let row = ran.json();
    let mode = if batch == "1" { "unbatched" } else { "batched" };
    assert_eq!(row["peer"], "gak", "{row}");
    assert_eq!(row["mode"], mode, "{row}");
    assert_eq!(row["batch"].to_string(), batch, "{row}");
    assert_eq!(row["workers"], workers, "{row}");
    assert_eq!(row["jobs"], 200, "{row}");
    // Every job completed exactly once: the command fails otherwise, and
    // counts the completions it got back.
    assert_eq!(row["completed"], 200, "{row}");
    let claims = row["claims"].as_u64().expect("claims");
    let least = 200u64.div_ceil(batch.parse::<u64>().unwrap());
    assert!(claims >= least, "at least {least} claim calls: {row}");
    let seconds = number(&row, "seconds");
    let rate = number(&row, "jobs_per_s");
    assert!(seconds > 0.0 && rate > 0.0, "{row}");
    assert!(
        (rate * seconds - 200.0).abs() < 1e-6 * 200.0,
        "jobs_per_s is jobs / seconds: {row}"
    );
    row
}

fn gak_drain_postgres(dsn: &str) {
    for batch in [1, 10] {
        let row = gak_drain(dsn, batch);
        let schema = row["schema"].as_str().expect("a schema of its own");
        let mode = row["mode"].as_str().unwrap();
        assert!(
            schema.starts_with(&format!("gak_peers_gak_{mode}_")),
            "{row}"
        );
        let left: Option<String> = run_future(async {
            let backend = PostgresBackend::parse(dsn).expect("dsn");
            let client = backend.connect().await.expect("connect");
            client
                .query_one("SELECT to_regnamespace($1)::text", &[&schema])
                .await
                .expect("to_regnamespace")
                .get(0)
        });
        assert_eq!(left, None, "gak drain dropped its schema {schema}");
    }
}

fn gak_drain_memory() {
    for batch in [1, 10] {
        let row = gak_drain("memory:", batch);
        assert!(row["schema"].is_null(), "{row}");
    }
}

/// `gak drain --max-connections 2` with 8 workers: six of them wait for a
/// connection at any time, and every job is still completed once.
fn gak_drain_small_pool(store: &str) {
    for batch in [1, 10] {
        let row = gak_drain_with(store, batch, 8, &["--max-connections", "2"]);
        assert_eq!(row["settings"]["max_connections"], 2, "{row}");
    }
    let refused = run_gak(
        &std::env::temp_dir(),
        &["drain", "--store", store, "--max-connections", "0"],
        &[],
        &[],
        None,
    );
    refused.expect_code(2);
}

/// `gak drain --group-limit 2`: every tenth job in a group of at most two
/// live claims, sampled throughout by the drain itself, which fails (exit
/// 1) if it ever sees more; the other jobs' rate reported apart.
fn gak_drain_group_limit(store: &str) {
    let args = [
        "drain",
        "--store",
        store,
        "--jobs",
        "300",
        "--workers",
        "4",
        "--batch",
        "10",
        "--group-limit",
        "2",
        "--json",
    ];
    let ran = run_gak(&std::env::temp_dir(), &args, &[], &[], None);
    ran.expect_code(0);
    let row = ran.json();
    assert_eq!(row["completed"], 300, "{row}");
    let group = &row["group"];
    assert_eq!(group["name"], "limited", "{row}");
    assert_eq!(group["limit"], 2, "{row}");
    assert_eq!(group["jobs"], 30, "every tenth job: {row}");
    let max = group["max_live_sampled"]
        .as_u64()
        .expect("max_live_sampled");
    assert!(max <= 2, "{row}");
    assert!(group["samples"].as_u64().expect("samples") >= 1, "{row}");
    assert_eq!(row["others"]["jobs"], 270, "{row}");
    assert!(number(&row["others"], "jobs_per_s") > 0.0, "{row}");
    // Without the flag there is no group to report.
    let plain = gak_drain(store, 10);
    assert!(
        plain["group"].is_null() && plain["others"].is_null(),
        "{plain}"
    );
}

fn main() {
    let mut suite = Suite::new();
    suite.needs(
        &NODE_AND_POSTGRES,
        "drain_200_jobs_json",
        drain_200_jobs_json,
    );
    suite.needs(&POSTGRES, "gak_drain_postgres", gak_drain_postgres);
    suite.test("gak_drain_memory", gak_drain_memory);
    suite.test("gak_drain_small_pool_memory", || {
        gak_drain_small_pool("memory:")
    });
    suite.needs(&POSTGRES, "gak_drain_small_pool_postgres", |dsn: &str| {
        gak_drain_small_pool(dsn)
    });
    suite.test("gak_drain_group_limit_memory", || {
        gak_drain_group_limit("memory:")
    });
    suite.needs(&POSTGRES, "gak_drain_group_limit_postgres", |dsn: &str| {
        gak_drain_group_limit(dsn)
    });
    suite.run();
}
