//! The host-protocol cases (`tests/host-protocol/*.json`), replayed through
//! the Rust host: one named trial per case and store. The Python and
//! JavaScript suites replay the same files (`host/HOSTS.md`). A case for a
//! store this run cannot reach (PostgreSQL) is IGNORED with the reason,
//! and FAILS under `CI=true`.
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use gak_cli::conformance::protocol::{Item, Store, check_url, parse_cases, run_case};
use gak_tests::suite::{POSTGRES, Suite};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("host-protocol")
}

static FILES: AtomicUsize = AtomicUsize::new(0);

fn main() {
    let mut suite = Suite::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir())
        .expect("tests/host-protocol")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "the host-protocol files are missing");
    for path in files {
        let file = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).expect("read a case file");
        let items = match parse_cases(&text) {
            Ok(items) => items,
            Err(why) => {
                suite.test(&format!("{file}::parses"), move || {
                    panic!("{}: {why}", path.display())
                });
                continue;
            }
        };
        for item in items {
            let name = item.name().to_owned();
            match item {
                Item::Url(case) => {
                    suite.test(&name, move || {
                        if let Err(why) = check_url(&case) {
                            panic!("{}: {why}", case.name);
                        }
                    });
                }
                Item::Case(case) => {
                    for store in case.stores.clone() {
                        let case = case.clone();
                        let label = format!("{name}::{store}");
                        match store.as_str() {
                            "scripted" => {
                                suite.test(&label, move || {
                                    expect(run_case(&case, &Store::Scripted), &case.name)
                                });
                            }
                            "sqlite" => {
                                suite.test(&label, move || {
                                    let dir = tempfile::tempdir().expect("temp dir");
                                    let n = FILES.fetch_add(1, Ordering::Relaxed);
                                    let store =
                                        Store::Sqlite(dir.path().join(format!("case-{n}.db")));
                                    expect(run_case(&case, &store), &case.name);
                                });
                            }
                            "postgres" => {
                                suite.needs(&POSTGRES, &label, move |dsn| {
                                    let n = FILES.fetch_add(1, Ordering::Relaxed);
                                    let sep = if dsn.contains('?') { '&' } else { '?' };
                                    let url =
                                        format!("{dsn}{sep}schema=hp_{}_{n}", std::process::id());
                                    expect(run_case(&case, &Store::Postgres(url)), &case.name);
                                });
                            }
                            other => panic!("{name}: unknown store {other:?}"),
                        }
                    }
                }
            }
        }
    }
    suite.run();
}

fn expect(result: Result<(), String>, name: &str) {
    if let Err(why) = result {
        panic!("{name}: {why}");
    }
}
