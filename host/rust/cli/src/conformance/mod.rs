//! The conformance runner for the language-neutral vectors
//! (`shared/VECTORS.md`): `gak conformance [--store URL] [FILE_OR_DIR...]`.
//!
//! Each scenario runs on a fresh, empty store with the fake clock at 0. The
//! same runner drives every binding, and the negative controls in `tests/`
//! (deliberately broken bindings) must fail it.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gak::clock::ManualClock;
#[cfg(feature = "postgres")]
use gak::store::postgres::PostgresBackend;
use gak::{Kernel, OpenError};

mod calls;
mod exports;
pub mod fuzz;
pub mod protocol;
mod vector;

pub use vector::{Scenario, parse_file};

/// The vectors shipped in the repository (`tests/vectors/*.json`).
pub fn builtin() -> Vec<(String, String)> {
    let files: &[(&str, &str)] = &include!(concat!(env!("OUT_DIR"), "/builtin_vectors.rs"));
    files
        .iter()
        .map(|(name, text)| (format!("builtin:{name}"), (*text).to_owned()))
        .collect()
}

/// Something the suite can run against: makes a kernel over a fresh, empty
/// store driven by the given clock.
pub trait Target {
    /// A kernel on an empty store. The runner moves `clock`.
    fn fresh(&mut self, clock: Arc<ManualClock>) -> Result<Kernel, String>;
}

impl<T: Target + ?Sized> Target for &mut T {
    fn fresh(&mut self, clock: Arc<ManualClock>) -> Result<Kernel, String> {
        (**self).fresh(clock)
    }
}

/// A target from a store URL: `memory:`; `sqlite:PATH` (each scenario a
/// new database file next to PATH, removed afterwards); `postgres://…`
/// (each scenario a new schema, dropped afterwards).
pub struct UrlTarget {
    url: String,
    count: usize,
    last: Option<PathBuf>,
    #[cfg(feature = "postgres")]
    last_schema: Option<PostgresBackend>,
}

impl UrlTarget {
    /// Check the URL now so a typo fails before any scenario runs.
    pub fn new(url: &str) -> Result<Self, OpenError> {
        let postgres = url.starts_with("postgres://") || url.starts_with("postgresql://");
        if postgres {
            #[cfg(feature = "postgres")]
            PostgresBackend::parse(url)?;
        } else if !(url == "memory" || url == "memory:" || url.starts_with("sqlite:")) {
            return Err(OpenError::UnknownStore(url.to_owned()));
        }
        Ok(UrlTarget {
            url: url.to_owned(),
            count: 0,
            last: None,
            #[cfg(feature = "postgres")]
            last_schema: None,
        })
    }

    fn cleanup(&mut self) {
        if let Some(path) = self.last.take() {
            remove_db(&path);
        }
        #[cfg(feature = "postgres")]
        if let Some(schema) = self.last_schema.take() {
            let _ = gak::blocking::run_future(schema.drop_schema());
        }
    }

    #[cfg(feature = "postgres")]
    fn fresh_postgres(&mut self, clock: Arc<ManualClock>) -> Result<Kernel, String> {
        let base = PostgresBackend::parse(&self.url).map_err(|e| e.to_string())?;
        let name = format!("{}_c{}_{}", base.schema(), std::process::id(), self.count);
        let backend = base.with_schema(&name).map_err(|e| e.to_string())?;
        gak::blocking::run_future(async {
            backend.drop_schema().await?;
            backend.ensure_schema().await
        })
        .map_err(|e| e.to_string())?;
        self.last_schema = Some(base.with_schema(&name).map_err(|e| e.to_string())?);
        Kernel::with_backend(Arc::new(backend), clock).map_err(|e| e.to_string())
    }
}

impl Drop for UrlTarget {
    fn drop(&mut self) {
        self.cleanup();
    }
}

impl Target for UrlTarget {
    fn fresh(&mut self, clock: Arc<ManualClock>) -> Result<Kernel, String> {
        self.cleanup();
        self.count += 1;
        #[cfg(feature = "postgres")]
        if self.url.starts_with("postgres") {
            return self.fresh_postgres(clock);
        }
        let url = match self.url.strip_prefix("sqlite:") {
            Some(spec) => {
                let (base, query) = spec.split_once('?').map_or((spec, ""), |(b, q)| (b, q));
                let base = if base.is_empty() {
                    "gak-conformance.db"
                } else {
                    base
                };
                let stem = base.strip_suffix(".db").unwrap_or(base);
                let path =
                    PathBuf::from(format!("{stem}-{}-{}.db", std::process::id(), self.count));
                remove_db(&path);
                self.last = Some(path.clone());
                let q = if query.is_empty() {
                    String::new()
                } else {
                    format!("?{query}")
                };
                format!("sqlite:{}{q}", path.display())
            }
            None => self.url.clone(),
        };
        let backend =
            gak::blocking::run_future(gak::store::open(&url)).map_err(|e| e.to_string())?;
        Kernel::with_backend(backend, clock).map_err(|e| e.to_string())
    }
}

/// Remove a SQLite database file and its WAL companions.
fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.to_path_buf().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
}

/// One scenario's verdict.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// `file :: scenario`.
    pub name: String,
    /// None when it passed; else what went wrong.
    pub failure: Option<String>,
}

/// The verdicts of a run.
#[derive(Debug, Default)]
pub struct Report {
    /// One per scenario (a file that does not parse counts as one).
    pub verdicts: Vec<Verdict>,
}

impl Report {
    /// How many passed.
    pub fn passed(&self) -> usize {
        self.verdicts.iter().filter(|v| v.failure.is_none()).count()
    }

    /// How many failed.
    pub fn failed(&self) -> usize {
        self.verdicts.len() - self.passed()
    }

    /// The failures' names.
    pub fn failures(&self) -> Vec<&str> {
        self.verdicts
            .iter()
            .filter(|v| v.failure.is_some())
            .map(|v| v.name.as_str())
            .collect()
    }

    /// The report in the runner's output format: a line per scenario, then
    /// `N passed, M failed`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for v in &self.verdicts {
            match &v.failure {
                None => out.push_str(&format!("ok   {}\n", v.name)),
                Some(why) => out.push_str(&format!("FAIL {}: {why}\n", v.name)),
            }
        }
        out.push_str(&format!(
            "{} passed, {} failed\n",
            self.passed(),
            self.failed()
        ));
        out
    }
}

/// Run every scenario of the given files (name, JSON text) on `target`,
/// blocking: each call runs on this thread.
pub fn run(target: &mut dyn Target, files: &[(String, String)]) -> Report {
    gak::blocking::run_future(run_all(target, files, true))
}

/// Run every scenario through the async API from the caller's runtime (a
/// SQLite target's calls then go through tokio's blocking pool).
pub async fn run_async(target: &mut dyn Target, files: &[(String, String)]) -> Report {
    run_all(target, files, false).await
}

async fn run_all(target: &mut dyn Target, files: &[(String, String)], inline: bool) -> Report {
    let mut report = Report::default();
    for (name, text) in files {
        match parse_file(text) {
            Err(why) => report.verdicts.push(Verdict {
                name: name.clone(),
                failure: Some(format!("cannot parse: {why}")),
            }),
            Ok(scenarios) => {
                for (i, scenario) in scenarios.iter().enumerate() {
                    let label = scenario.name.clone().unwrap_or_else(|| format!("#{i}"));
                    let clock = Arc::new(ManualClock::at(0));
                    let failure = match target.fresh(clock.clone()) {
                        Err(e) => Some(format!("cannot open a fresh store: {e}")),
                        Ok(kernel) => {
                            let kernel = if inline {
                                kernel.on_calling_thread()
                            } else {
                                kernel
                            };
                            vector::run_scenario(&kernel, &clock, scenario, name, i)
                                .await
                                .err()
                        }
                    };
                    report.verdicts.push(Verdict {
                        name: format!("{name} :: {label}"),
                        failure,
                    });
                }
            }
        }
    }
    report
}

/// Read vector files from paths (files, or directories of `*.json`).
pub fn load_paths(paths: &[PathBuf]) -> Vec<(String, String)> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
                .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
                .unwrap_or_default();
            entries.retain(|p| p.extension().is_some_and(|e| e == "json"));
            entries.sort();
            files.extend(entries.into_iter().map(read_one));
        } else {
            files.push(read_one(path.clone()));
        }
    }
    files
}

fn read_one(path: PathBuf) -> (String, String) {
    let name = path.display().to_string();
    // An unreadable file becomes text that does not parse: a failure naming
    // the file, never a skip.
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| format!("<unreadable: {e}>"));
    (name, text)
}
