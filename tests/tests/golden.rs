//! Data survives upgrades: the golden databases of stored format 1
//! (`tests/golden/`, written by `gak-golden` under gak:kernel 0.2.0) are
//! opened — a copy, never the checked-in file — by the current kernel
//! (format 2), which must read every record and continue the work in them:
//! the 0.2 calls (`gak_tests::golden::replay`) and the job queue's
//! (`gak_tests::golden::replay_queue`: new fields at their defaults, old
//! tasks in their old seed order among new priorities, the claim from before
//! ended by `complete-batch` or `fail`, `fail` and `revive` on old tasks,
//! every rewritten value format 2). Any change that breaks reading format-1
//! data fails here.
use std::collections::BTreeSet;
use std::sync::Arc;

use gak::ManualClock;
use gak::blocking::Kernel;
use gak::store::postgres::PostgresBackend;
use gak_tests::golden::{self, Capabilities, OldClaim, REPLAY_AT};
use gak_tests::pg;
use gak_tests::suite::{POSTGRES, Suite};

fn capabilities(binding: &str) -> Capabilities {
    let text = std::fs::read_to_string(golden::dir().join("capabilities.json"))
        .expect("tests/golden/capabilities.json");
    let all: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    Capabilities::from_json(&all[binding])
}

fn dump(kernel: &Kernel) -> Vec<(String, String, String)> {
    gak::blocking::run_future(kernel.backend().dump()).expect("dump")
}

/// A copy of the SQLite golden file, opened by the current kernel whose
/// clock reads [`REPLAY_AT`].
fn sqlite_copy() -> (tempfile::TempDir, Kernel, Arc<ManualClock>) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("format1.sqlite");
    std::fs::copy(golden::dir().join("format1.sqlite"), &copy).expect("copy the golden file");
    let clock = Arc::new(ManualClock::at(REPLAY_AT));
    let backend =
        gak::blocking::run_future(gak::store::open(&format!("sqlite:{}", copy.display())))
            .expect("open the golden file");
    let kernel = Kernel::with_backend(backend, clock.clone()).unwrap();
    (dir, kernel, clock)
}

/// The PostgreSQL golden dump restored into a fresh schema exactly as
/// format 1 laid it out, opened by the current kernel at [`REPLAY_AT`].
fn postgres_copy(dsn: &str) -> (pg::Schema, Kernel, Arc<ManualClock>) {
    let schema = pg::Schema::new(dsn, "golden");
    let script = std::fs::read_to_string(golden::dir().join("format1-postgres.sql"))
        .expect("tests/golden/format1-postgres.sql");
    golden::restore_postgres(&schema.kernel(), &schema.name, &script);
    let clock = Arc::new(ManualClock::at(REPLAY_AT));
    let kernel = Kernel::with_backend(
        Arc::new(PostgresBackend::parse(&schema.url).unwrap()),
        clock.clone(),
    )
    .unwrap();
    (schema, kernel, clock)
}

/// The SQLite golden file, copied, covers every table and state and is
/// continued by the current kernel.
fn sqlite_format_1_is_read_and_continued() {
    let (_dir, kernel, clock) = sqlite_copy();
    golden::coverage(&dump(&kernel), golden::GOLDEN_FORMAT).unwrap_or_else(|why| panic!("{why}"));
    golden::replay(&kernel, &clock, &capabilities("sqlite"));
}

/// The PostgreSQL golden dump, restored, covers everything and is continued.
fn postgres_format_1_is_read_and_continued(dsn: &str) {
    let (_schema, kernel, clock) = postgres_copy(dsn);
    golden::coverage(&dump(&kernel), golden::GOLDEN_FORMAT).unwrap_or_else(|why| panic!("{why}"));
    golden::replay(&kernel, &clock, &capabilities("postgres"));
}

/// The job queue goes on in the SQLite golden file: the claim from before
/// the upgrade completed by `complete-batch` on one copy, failed on another.
fn sqlite_format_1_goes_on_as_a_job_queue() {
    for ending in [OldClaim::Complete, OldClaim::Fail] {
        let (_dir, kernel, clock) = sqlite_copy();
        golden::replay_queue(&kernel, &clock, &capabilities("sqlite"), ending);
    }
}

/// The same on the PostgreSQL golden dump.
fn postgres_format_1_goes_on_as_a_job_queue(dsn: &str) {
    for ending in [OldClaim::Complete, OldClaim::Fail] {
        let (_schema, kernel, clock) = postgres_copy(dsn);
        golden::replay_queue(&kernel, &clock, &capabilities("postgres"), ending);
    }
}

/// The board's counts on the SQLite golden file: counted once written, the
/// rest by `recount`.
fn sqlite_format_1_is_recounted() {
    let (_dir, kernel, _clock) = sqlite_copy();
    golden::recount(&kernel);
}

/// The same on the PostgreSQL golden dump.
fn postgres_format_1_is_recounted(dsn: &str) {
    let (_schema, kernel, _clock) = postgres_copy(dsn);
    golden::recount(&kernel);
}

/// The checked-in files are format 1 and stay so: this test suite never
/// writes them (it opens copies), and `gak-golden` writes the current
/// format's files under other names.
fn the_golden_files_stay_format_1() {
    let conn = gak::rusqlite::Connection::open_with_flags(
        golden::dir().join("format1.sqlite"),
        gak::rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut versions = BTreeSet::new();
    for table in gak::store::TABLES.iter().filter(|t| **t != "downstream") {
        let mut stmt = conn
            .prepare(&format!("SELECT value FROM gak_{table}"))
            .unwrap();
        let rows = stmt.query_map([], |r| r.get::<_, String>(0)).unwrap();
        for value in rows {
            let v: serde_json::Value = serde_json::from_str(&value.unwrap()).unwrap();
            versions.insert(v["v"].to_string());
        }
    }
    assert_eq!(versions, BTreeSet::from(["1".to_owned()]));
    let script = std::fs::read_to_string(golden::dir().join("format1-postgres.sql")).unwrap();
    assert!(script.contains(r#"{"v": 1"#), "format-1 values in the dump");
    assert!(
        !script.contains(r#""v": 2"#),
        "a format-2 value in the dump"
    );
}

/// The coverage check has teeth: it rejects a store lacking states.
fn the_coverage_check_rejects_thin_data() {
    let clock = Arc::new(ManualClock::at(golden::T0));
    let kernel = Kernel::with_backend(
        gak::blocking::run_future(gak::store::open("memory:")).unwrap(),
        clock,
    )
    .unwrap();
    assert!(golden::coverage(&dump(&kernel), golden::FORMAT).is_err());
    kernel
        .taskboard()
        .seed(&[gak::TaskSeed::new("only")])
        .unwrap();
    let thin = golden::coverage(&dump(&kernel), golden::FORMAT).unwrap_err();
    assert!(
        thin.contains("a claimed task") && thin.contains("table actions"),
        "{thin}"
    );
    // Values of another format than the one asked for.
    let old = golden::coverage(&dump(&kernel), golden::GOLDEN_FORMAT).unwrap_err();
    assert!(old.contains("a tasks value without v: 1"), "{old}");
    // The queue's coverage: a store without its states.
    let thin = golden::queue_coverage(&dump(&kernel)).unwrap_err();
    assert!(
        thin.contains("a dead task") && thin.contains("index qd/"),
        "{thin}"
    );
}

/// The generator still writes data that covers every table and state, in
/// the current format, and that the replay continues (so regenerating for a
/// new format starts from a scenario known to work).
fn the_generator_covers_every_table_and_state() {
    let clock = Arc::new(ManualClock::at(golden::T0));
    let kernel = Kernel::with_backend(
        gak::blocking::run_future(gak::store::open("memory:")).unwrap(),
        clock.clone(),
    )
    .unwrap();
    let caps = golden::write(&kernel);
    golden::coverage(&dump(&kernel), golden::FORMAT).unwrap_or_else(|why| panic!("{why}"));
    clock.set(REPLAY_AT).unwrap();
    golden::replay(&kernel, &clock, &caps);
}

fn main() {
    let mut suite = Suite::new();
    suite.test(
        "sqlite_format_1_is_read_and_continued",
        sqlite_format_1_is_read_and_continued,
    );
    suite.needs(
        &POSTGRES,
        "postgres_format_1_is_read_and_continued",
        postgres_format_1_is_read_and_continued,
    );
    suite.test(
        "sqlite_format_1_goes_on_as_a_job_queue",
        sqlite_format_1_goes_on_as_a_job_queue,
    );
    suite.needs(
        &POSTGRES,
        "postgres_format_1_goes_on_as_a_job_queue",
        postgres_format_1_goes_on_as_a_job_queue,
    );
    suite.test("sqlite_format_1_is_recounted", sqlite_format_1_is_recounted);
    suite.needs(
        &POSTGRES,
        "postgres_format_1_is_recounted",
        postgres_format_1_is_recounted,
    );
    suite.test(
        "the_golden_files_stay_format_1",
        the_golden_files_stay_format_1,
    );
    suite.test(
        "the_coverage_check_rejects_thin_data",
        the_coverage_check_rejects_thin_data,
    );
    suite.test(
        "the_generator_covers_every_table_and_state",
        the_generator_covers_every_table_and_state,
    );
    suite.run();
}
