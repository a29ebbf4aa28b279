//! The console's big-board measurement (`bench/console/board.py`), run
//! small by `cargo test --workspace` so it keeps working between the times
//! someone measures with it: a board of 2,000 tasks built through `gak
//! tasks seed` in chunks, with groups, limits and live claims, served by
//! `gak serve`, every page and `/metrics` timed. Speed is measured, never
//! asserted: each row only has to say its page answered (positive time,
//! some bytes). On SQLite, and on a PostgreSQL schema of its own (ignored
//! with the reason without a server, failed under `CI=true`).
use std::process::Command;

use gak_tests::cli::gak_bin;
use gak_tests::suite::{POSTGRES, Suite};
use gak_tests::{pg, pyenv};
use serde_json::Value;

/// The paths the script times, as it names them.
const PATHS: [&str; 9] = [
    "/tasks?limit=100",
    "/tasks?state=open&limit=100",
    "/tasks?state=done&limit=100",
    "/tasks?state=delayed&limit=100",
    "/tasks?group=tenant-007&limit=100",
    "/groups",
    "/api/tasks?limit=100",
    "/api/counts",
    "/metrics",
];

fn measure(store: &str) {
    let out = Command::new("python3")
        .arg("bench/console/board.py")
        .args(["--store", store, "--tasks", "2000", "--chunk", "1000"])
        .args(["--requests", "3", "--json", "--gak"])
        .arg(gak_bin())
        .current_dir(pyenv::repo())
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "board.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON report");
    assert_eq!(report["tasks"], 2000);
    assert!(
        report["built_s"].as_f64().is_some_and(|s| s > 0.0),
        "{report}"
    );
    let rows = report["rows"].as_array().expect("rows");
    let paths: Vec<&str> = rows.iter().map(|r| r["path"].as_str().unwrap()).collect();
    assert_eq!(paths, PATHS);
    for row in rows {
        assert!(row["p50_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{row}");
        assert!(row["p99_ms"].as_f64() >= row["p50_ms"].as_f64(), "{row}");
        assert!(row["bytes"].as_u64().is_some_and(|b| b > 0), "{row}");
    }
    // Run again on the same store: the board is reused, not seeded twice.
    let again = Command::new("python3")
        .arg("bench/console/board.py")
        .args([
            "--store",
            store,
            "--tasks",
            "2000",
            "--requests",
            "1",
            "--json",
            "--gak",
        ])
        .arg(gak_bin())
        .current_dir(pyenv::repo())
        .output()
        .expect("run python3");
    assert!(again.status.success());
    let again: Value = serde_json::from_slice(&again.stdout).expect("one JSON report");
    assert!(again["built_s"].is_null(), "{again}");
}

fn main() {
    let mut suite = Suite::new();
    suite.test("sqlite::a_small_board_is_built_served_and_timed", || {
        let dir = tempfile::tempdir().unwrap();
        measure(&format!("sqlite:{}", dir.path().join("board.db").display()));
    });
    suite.needs(
        &POSTGRES,
        "postgres::a_small_board_is_built_served_and_timed",
        |dsn| {
            let schema = pg::Schema::new(dsn, "board");
            measure(&schema.url);
        },
    );
    suite.run();
}
