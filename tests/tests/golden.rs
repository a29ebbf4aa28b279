//! Data survives upgrades: the golden databases of stored format 1
//! (`tests/golden/`, written by `gak-golden`) are opened — a copy, never the
//! checked-in file — by the current kernel, which must read every record
//! and continue the work in them (`gak_tests::golden::replay`). Any change
//! that breaks reading format-1 data fails here.
use std::sync::Arc;

use gak::ManualClock;
use gak::blocking::Kernel;
use gak::store::postgres::PostgresBackend;
use gak_tests::golden::{self, Capabilities, REPLAY_AT};
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

/// The SQLite golden file, copied, covers every table and state and is
/// continued by the current kernel.
fn sqlite_format_1_is_read_and_continued() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("format1.sqlite");
    std::fs::copy(golden::dir().join("format1.sqlite"), &copy).expect("copy the golden file");
    let clock = Arc::new(ManualClock::at(REPLAY_AT));
    let backend =
        gak::blocking::run_future(gak::store::open(&format!("sqlite:{}", copy.display())))
            .expect("open the golden file");
    let kernel = Kernel::with_backend(backend, clock.clone()).unwrap();
    golden::coverage(&dump(&kernel)).unwrap_or_else(|why| panic!("{why}"));
    golden::replay(&kernel, &clock, &capabilities("sqlite"));
}

/// The PostgreSQL golden dump, restored into a fresh schema exactly as
/// format 1 laid it out, covers everything and is continued.
fn postgres_format_1_is_read_and_continued(dsn: &str) {
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
    golden::coverage(&dump(&kernel)).unwrap_or_else(|why| panic!("{why}"));
    golden::replay(&kernel, &clock, &capabilities("postgres"));
}

/// The coverage check has teeth: it rejects a store lacking states.
fn the_coverage_check_rejects_thin_data() {
    let clock = Arc::new(ManualClock::at(golden::T0));
    let kernel = Kernel::with_backend(
        gak::blocking::run_future(gak::store::open("memory:")).unwrap(),
        clock,
    )
    .unwrap();
    assert!(golden::coverage(&dump(&kernel)).is_err());
    kernel
        .taskboard()
        .seed(&[gak::TaskSeed::new("only")])
        .unwrap();
    let thin = golden::coverage(&dump(&kernel)).unwrap_err();
    assert!(
        thin.contains("a claimed task") && thin.contains("table actions"),
        "{thin}"
    );
}

/// The generator still writes data that covers every table and state, and
/// that the replay continues (so regenerating for a new format starts from
/// a scenario known to work).
fn the_generator_covers_every_table_and_state() {
    let clock = Arc::new(ManualClock::at(golden::T0));
    let kernel = Kernel::with_backend(
        gak::blocking::run_future(gak::store::open("memory:")).unwrap(),
        clock.clone(),
    )
    .unwrap();
    let caps = golden::write(&kernel);
    golden::coverage(&dump(&kernel)).unwrap_or_else(|why| panic!("{why}"));
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
        "the_coverage_check_rejects_thin_data",
        the_coverage_check_rejects_thin_data,
    );
    suite.test(
        "the_generator_covers_every_table_and_state",
        the_generator_covers_every_table_and_state,
    );
    suite.run();
}
