//! The demo's promises, checked on every embedded binding.
use std::sync::Arc;

use gak::ManualClock;
use gak::blocking::Kernel;
use gak_tests::pg;
use gak_tests::suite::{POSTGRES, Suite};

fn run_demo(url: &str) -> (gak_cli::demo::DemoReport, String) {
    let clock = Arc::new(ManualClock::at(1_700_000_000_000));
    let kernel = Kernel::with_backend(
        gak::blocking::run_future(gak::store::open(url)).unwrap(),
        clock.clone(),
    )
    .unwrap();
    let mut out = Vec::new();
    let report = gak_cli::demo::run(&kernel, clock, &mut out).unwrap();
    (report, String::from_utf8(out).unwrap())
}

fn main() {
    let mut suite = Suite::new();
    suite.test("demo_resumes_without_replaying_on_memory", || {
        check_demo("memory:")
    });
    suite.test("demo_resumes_without_replaying_on_sqlite", || {
        let dir = tempfile::tempdir().unwrap();
        check_demo(&format!("sqlite:{}", dir.path().join("demo.db").display()));
    });
    suite.needs(
        &POSTGRES,
        "demo_resumes_without_replaying_on_postgres",
        |dsn| {
            let schema = pg::Schema::new(dsn, "demo");
            check_demo(&schema.url);
        },
    );
    suite.run();
}

fn check_demo(url: &str) {
    let (report, out) = run_demo(url);
    let numbered: Vec<&str> = out.lines().collect();
    assert_eq!(numbered.len(), 6, "{out}");
    for (i, line) in numbered.iter().enumerate() {
        assert!(line.starts_with(&format!("{}. ", i + 1)), "{line}");
    }
    assert_eq!(report.skipped, ["reserve-stock", "charge-card"]);
    assert_eq!(report.resumed, ["ship-parcel"]);
    for (step, calls) in &report.body_calls {
        assert_eq!(*calls, 1, "{step} body ran {calls} times on {url}");
    }
    assert_eq!(report.body_calls.len(), 4);
    assert_eq!((report.race_winners, report.race_claimers), (1, 8));
    assert!(
        report.retry_refused && report.replayed_after_resolve,
        "{report:?}"
    );
    assert!(
        out.contains("fence-stale"),
        "the zombie save must be fenced: {out}"
    );
}
