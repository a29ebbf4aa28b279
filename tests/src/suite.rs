//! A test binary's own runner: a skipped test is never a passed test.
//!
//! `cargo test`'s built-in harness has no way for a test to say "I did not
//! run": a test that returns early because its database is unreachable shows
//! as `ok`. Test files that need something outside the process (a PostgreSQL
//! server, an interpreter) set `harness = false` and list their tests in a
//! [`Suite`] (libtest-mimic), which reports every test whose [`Requirement`]
//! is missing as **ignored, with the reason**, so the runner's own summary
//! counts what did not run:
//!
//! ```text
//! test postgres::checkpoint ... ignored (needs PostgreSQL: unreachable at …)
//! test result: ok. 28 passed; 0 failed; 14 ignored; 0 measured; 0 filtered out
//! ```
//!
//! The policy lives here and nowhere else: a missing requirement is a skip
//! on a developer's machine and a **failure under `CI=true`** (CI promises
//! every suite runs). A requirement is probed once per test binary.
//!
//! A new requirement is one `static` ([`Requirement::new`] with a probe);
//! [`POSTGRES`] is the one this crate's suites use.
//!
//! ```no_run
//! use gak_tests::suite::{POSTGRES, Suite};
//!
//! fn main() {
//!     let mut suite = Suite::new();
//!     suite.test("memory_works", || assert_eq!(1 + 1, 2));
//!     suite.needs(&POSTGRES, "postgres_works", |dsn| assert!(!dsn.is_empty()));
//!     suite.run();
//! }
//! ```
use std::future::Future;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use libtest_mimic::{Arguments, Completion, Failed, Trial};

/// Something outside the test process that some tests need.
pub struct Requirement {
    what: &'static str,
    hint: &'static str,
    probe: fn() -> Result<String, String>,
    found: OnceLock<Result<String, String>>,
    skipped: AtomicUsize,
}

impl std::fmt::Debug for Requirement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Requirement")
            .field("what", &self.what)
            .finish_non_exhaustive()
    }
}

/// What a test gets from its requirement.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Present: the probe's handle (a DSN, a path).
    Run(String),
    /// Missing on a developer's machine: the test is reported ignored.
    Skip(String),
    /// Missing under `CI=true`: the test fails.
    Fail(String),
}

/// Whether this run promises that every requirement is present.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

impl Requirement {
    /// `what` names it in messages ("PostgreSQL"); `hint` says how to
    /// provide it; `probe` returns a handle for the tests or why it is
    /// missing.
    pub const fn new(
        what: &'static str,
        hint: &'static str,
        probe: fn() -> Result<String, String>,
    ) -> Requirement {
        Requirement {
            what,
            hint,
            probe,
            found: OnceLock::new(),
            skipped: AtomicUsize::new(0),
        }
    }

    /// The policy, in one place: present → run; missing → ignored with
    /// the reason, or a failure under `CI=true`.
    pub fn verdict(&self) -> Verdict {
        Self::judge(self.what, self.found.get_or_init(self.probe), under_ci())
    }

    /// [`Requirement::verdict`] for a given probe result (a pure function,
    /// so the policy itself is tested).
    pub fn judge(what: &str, found: &Result<String, String>, ci: bool) -> Verdict {
        match found {
            Ok(handle) => Verdict::Run(handle.clone()),
            Err(why) if ci => Verdict::Fail(format!(
                "CI=true promises every suite runs, but {what} is missing: {why}"
            )),
            Err(why) => Verdict::Skip(format!("needs {what}: {why}")),
        }
    }

    /// How many tests of this binary it skipped so far.
    pub fn skipped(&self) -> usize {
        self.skipped.load(Ordering::Relaxed)
    }
}

/// PostgreSQL at `GAK_PG_DSN` (default `postgres://postgres@127.0.0.1:5432/test`).
pub static POSTGRES: Requirement = Requirement::new(
    "PostgreSQL",
    "set GAK_PG_DSN to a reachable server to run it",
    crate::pg::probe,
);

/// The tests of one binary.
#[derive(Default)]
pub struct Suite {
    trials: Vec<Trial>,
    requirements: Vec<&'static Requirement>,
    defects: Vec<(String, &'static str)>,
}

impl std::fmt::Debug for Suite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Suite")
            .field("trials", &self.trials.len())
            .finish()
    }
}

impl Suite {
    /// No tests yet.
    pub fn new() -> Suite {
        Suite::default()
    }

    /// A test that needs nothing outside the process: a panic fails it.
    pub fn test(&mut self, name: &str, f: impl FnOnce() + Send + 'static) -> &mut Suite {
        self.trials.push(Trial::test(name, move || {
            f();
            Ok(())
        }));
        self
    }

    /// An async test, on a multi-threaded runtime with two workers.
    pub fn tokio<F>(&mut self, name: &str, f: impl FnOnce() -> F + Send + 'static) -> &mut Suite
    where
        F: Future<Output = ()>,
    {
        self.test(name, move || runtime().block_on(f()))
    }

    /// A test that needs `req`; it gets the probe's handle.
    pub fn needs(
        &mut self,
        req: &'static Requirement,
        name: &str,
        f: impl FnOnce(&str) + Send + 'static,
    ) -> &mut Suite {
        if !self.requirements.iter().any(|r| std::ptr::eq(*r, req)) {
            self.requirements.push(req);
        }
        self.trials
            .push(Trial::ignorable_test(name, move || match req.verdict() {
                Verdict::Run(handle) => {
                    f(&handle);
                    Ok(Completion::Completed)
                }
                Verdict::Skip(why) => {
                    req.skipped.fetch_add(1, Ordering::Relaxed);
                    Ok(Completion::ignored_with(why))
                }
                Verdict::Fail(why) => Err(Failed::from(why)),
            }));
        self
    }

    /// A test that needs `req` and is IGNORED unless asked for
    /// (`-- --include-ignored`): a known defect, named in `why` (printed
    /// with the summary), whose test must keep running where someone works
    /// on it but must not fail every run until it is fixed.
    pub fn known_defect(
        &mut self,
        req: &'static Requirement,
        name: &str,
        why: &'static str,
        f: impl FnOnce(&str) + Send + 'static,
    ) -> &mut Suite {
        self.needs(req, name, f);
        let trial = self.trials.pop().expect("just pushed");
        self.trials.push(trial.with_ignored_flag(true));
        self.defects.push((name.to_owned(), why));
        self
    }

    /// An async test that needs `req`.
    pub fn needs_tokio<F>(
        &mut self,
        req: &'static Requirement,
        name: &str,
        f: impl FnOnce(String) -> F + Send + 'static,
    ) -> &mut Suite
    where
        F: Future<Output = ()>,
    {
        self.needs(req, name, move |handle| {
            runtime().block_on(f(handle.to_owned()))
        })
    }

    /// The test names, in order (for checks on the suite itself).
    pub fn names(&self) -> Vec<String> {
        self.trials.iter().map(|t| t.name().to_owned()).collect()
    }

    /// Run the tests the command line selects, print the summary and what
    /// did not run, and exit with the runner's status.
    pub fn run(self) -> ! {
        let args = Arguments::from_args();
        let conclusion = libtest_mimic::run(&args, self.trials);
        if !args.ignored && !args.include_ignored {
            for (name, why) in &self.defects {
                println!("NOTE: {name} is IGNORED (a known defect, not passed): {why}");
            }
        }
        for req in &self.requirements {
            let n = req.skipped();
            if n > 0 {
                println!(
                    "NOTE: {n} test(s) needing {} did NOT run (reported as ignored, not passed): {}",
                    req.what, req.hint
                );
            }
        }
        conclusion.exit()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_requirement_is_a_skip_locally_and_a_failure_in_ci() {
        let missing: Result<String, String> = Err("connection refused".into());
        let present: Result<String, String> = Ok("postgres://x".into());
        assert_eq!(
            Requirement::judge("PostgreSQL", &present, true),
            Verdict::Run("postgres://x".into())
        );
        assert!(matches!(
            Requirement::judge("PostgreSQL", &missing, false),
            Verdict::Skip(why) if why.contains("connection refused") && why.contains("PostgreSQL")
        ));
        assert!(matches!(
            Requirement::judge("PostgreSQL", &missing, true),
            Verdict::Fail(why) if why.contains("CI=true")
        ));
    }

    /// A file that lists its tests in a `Suite` but is not declared
    /// `harness = false` compiles under libtest and runs **zero** tests,
    /// silently; a file with `#[test]`s under `harness = false` runs none of
    /// them. Every test file is one or the other, and declared so.
    #[test]
    fn every_suite_file_is_declared_harness_false() {
        let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut checked = 0;
        for krate in [crates.to_path_buf(), crates.join("../examples")] {
            let manifest = std::fs::read_to_string(krate.join("Cargo.toml")).expect("manifest");
            let no_harness: Vec<String> = manifest
                .split("[[test]]")
                .skip(1)
                .filter(|t| {
                    let t = t.split("\n[").next().unwrap_or_default();
                    t.contains("harness = false")
                })
                .filter_map(|t| {
                    t.lines()
                        .find_map(|l| l.strip_prefix("name = "))
                        .map(|n| n.trim_matches('"').to_owned())
                })
                .collect();
            for entry in std::fs::read_dir(krate.join("tests")).expect("tests dir") {
                let path = entry.expect("entry").path();
                if path.extension().is_none_or(|e| e != "rs") {
                    continue;
                }
                let name = path
                    .file_stem()
                    .expect("stem")
                    .to_string_lossy()
                    .into_owned();
                let text = std::fs::read_to_string(&path).expect("source");
                // A Suite, or a libtest-mimic harness of its own (js.rs).
                let suite = text.contains("Suite::new()") || text.contains("libtest_mimic::run(");
                let declared = no_harness.contains(&name);
                assert_eq!(
                    suite,
                    declared,
                    "{}: a Suite file must be `harness = false` in its Cargo.toml, and only a Suite file may be",
                    path.display()
                );
                if suite {
                    assert!(
                        !text.contains("#[test]"),
                        "{}: #[test] under a Suite never runs",
                        path.display()
                    );
                }
                checked += 1;
            }
        }
        assert!(checked > 10, "only {checked} test files");
    }
}
