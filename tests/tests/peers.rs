//! The peers harness (`bench/peers/run.mjs`: graphile-worker and pg-boss
//! draining the same trivial jobs as gak, on the same PostgreSQL), run small
//! by `cargo test --workspace` so it keeps working between the times someone
//! measures with it:
//!
//! - `drain_200_jobs_json`: first `node bench/peers/run.mjs --install-only`,
//!   which runs `npm ci` into `bench/peers/node_modules` when the lock or Node
//!   changed since the last install (the harness's own stamp), then
//!   `--jobs 200 --workers 2 --json`: every default workload present once,
//!   every row well-formed. One trial, so no two installs race.
//!
//! Speed is measured, never asserted: a row only has to say it drained the
//! 200 jobs at some positive rate. Without Node 20+ (and npm) or PostgreSQL
//! the trials are reported ignored, with the reason; under `CI=true` they
//! fail instead.
use std::process::{Command, Output};

use gak_tests::suite::{Requirement, Suite};
use gak_tests::{jsenv, pg, pyenv};
use serde_json::Value;

static NODE_AND_POSTGRES: Requirement = Requirement::new(
    "Node 20+, npm and PostgreSQL",
    "install Node 20+ and set GAK_PG_DSN to a reachable server to run it",
    || jsenv::toolchain().clone().and_then(|_| pg::probe()),
);

/// The workloads a run without `--only` measures (the opt-in ones are not).
const DEFAULT_WORKLOADS: [&str; 4] = [
    "graphile-worker/unbatched",
    "graphile-worker/batched",
    "pg-boss/work-burst",
    "pg-boss/fetch-complete",
];

fn harness(args: &[&str]) -> Output {
    let out = Command::new("node")
        .arg("bench/peers/run.mjs")
        .args(args)
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
        assert!(number(&row, "node_cpu_seconds") >= 0.0, "{row}");
    }
    assert_eq!(seen, DEFAULT_WORKLOADS, "one row per default workload");
}

fn main() {
    let mut suite = Suite::new();
    suite.needs(
        &NODE_AND_POSTGRES,
        "drain_200_jobs_json",
        drain_200_jobs_json,
    );
    suite.run();
}
