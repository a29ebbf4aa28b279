//! The built-in vectors on every binding, one named test per (binding, file)
//! so a failure names its case; the report lists the failing scenarios.
use gak_cli::conformance::UrlTarget;
use gak_tests::suite::{POSTGRES, Suite};
use gak_tests::{SqliteTarget, run_builtin};

fn check(report: gak_cli::conformance::Report) {
    assert!(report.passed() > 0, "no scenario ran");
    assert_eq!(report.failed(), 0, "\n{}", report.render());
}

/// The vector files, each run on every binding as its own named test.
const FILES: [(&str, &str); 18] = [
    ("checkpoint", "checkpoint.json"),
    ("plan", "plan.json"),
    ("commitgate", "commitgate.json"),
    ("sideeffect_acquire", "sideeffect-acquire.json"),
    ("sideeffect_verdicts", "sideeffect-verdicts.json"),
    ("sideeffect_reconcile", "sideeffect-reconcile.json"),
    ("sink", "sink.json"),
    ("taskboard", "taskboard.json"),
    ("inputs", "inputs.json"),
    ("inputs_payload", "inputs-payload.json"),
    ("taskboard_queue", "taskboard-queue.json"),
    ("lists", "lists.json"),
    ("retention", "retention.json"),
    ("reconcile_claims", "reconcile-claims.json"),
    ("taskboard_jobs", "taskboard-jobs.json"),
    ("board_reads", "board-reads.json"),
    ("board_counts", "board-counts.json"),
    ("key_counts", "key-counts.json"),
];

fn main() {
    let mut suite = Suite::new();
    for (name, file) in FILES {
        suite.test(&format!("memory::{name}"), move || {
            check(run_builtin(
                &mut UrlTarget::new("memory:").unwrap(),
                Some(file),
            ))
        });
        suite.test(&format!("sqlite::{name}"), move || {
            check(run_builtin(&mut SqliteTarget::new(), Some(file)))
        });
        suite.needs(&POSTGRES, &format!("postgres::{name}"), move |dsn| {
            // UrlTarget makes (and drops) a schema per scenario, named after this one.
            let sep = if dsn.contains('?') { '&' } else { '?' };
            let url = format!("{dsn}{sep}schema=v_{name}");
            check(run_builtin(&mut UrlTarget::new(&url).unwrap(), Some(file)));
        });
    }
    suite.test(
        "every_builtin_file_has_a_named_test",
        every_builtin_file_has_a_named_test,
    );
    suite.test("malformed_files_fail_loudly", malformed_files_fail_loudly);
    suite.run();
}

/// Every shipped vector file is covered by a named test above.
fn every_builtin_file_has_a_named_test() {
    for (file, _) in gak_cli::conformance::builtin() {
        assert!(
            FILES.iter().any(|(_, n)| file.ends_with(n)),
            "{file} has no named test"
        );
    }
}

/// A malformed vector file is a failure naming the file, never a skip.
fn malformed_files_fail_loudly() {
    let files = vec![
        ("bad.json".to_string(), "{ not json".to_string()),
        ("two-kinds.json".to_string(),
         r#"{"scenario": "x", "steps": [{"clock": 1, "advance": 2}]}"#.to_string()),
        ("unknown-call.json".to_string(),
         r#"{"scenario": "y", "steps": [{"call": "nope.nope", "ok": null}]}"#.to_string()),
        ("unknown-variant.json".to_string(),
         r#"{"scenario": "z", "steps": [{"call": "taskboard.list", "err": "no-such"}]}"#.to_string()),
        ("unbound.json".to_string(),
         r#"{"scenario": "w", "steps": [{"call": "taskboard.release", "args": {"id": "a", "token": "$t"}, "err": "lease-lost"}]}"#.to_string()),
        ("backwards.json".to_string(),
         r#"{"scenario": "v", "steps": [{"clock": 5}, {"clock": 4}]}"#.to_string()),
    ];
    let report = gak_cli::conformance::run(&mut UrlTarget::new("memory:").unwrap(), &files);
    assert_eq!(report.failed(), files.len(), "\n{}", report.render());
    assert!(report.render().contains("bad.json"));
    assert!(report.render().ends_with("0 passed, 6 failed\n"));
}
