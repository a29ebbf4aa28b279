//! The conformance kit: targets for every binding, deliberately broken
//! bindings (negative controls), and the concurrency checks shared by the
//! suites in `tests/tests/`.
use std::sync::{Arc, Barrier, Mutex};

use gak::blocking::Kernel;
use gak::{Error, ManualClock, Task, TaskSeed};
use gak_cli::conformance::{self, Report, Target};

pub mod broken;
pub mod cenv;
pub mod cli;
pub mod console;
pub mod counting;
pub mod faulty;
pub mod goenv;
pub mod golden;
pub mod hammer;
pub mod hostfuzz;
pub mod jsenv;
pub mod model;
pub mod pg;
pub mod proxy;
pub mod pyenv;
pub mod suite;
pub mod worked;
pub mod xlang;

/// The whole board, read page by page (for checks after a run; the API
/// itself never reads a whole table in one call).
pub fn board(kernel: &Kernel) -> Result<Vec<Task>, Error> {
    let mut all = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = kernel.taskboard().list(None, after.as_deref(), 1000)?;
        all.extend(page.items);
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(all),
        }
    }
}

/// The board's counts (`count`) are exact and equal its tasks by state,
/// read page by page, and the keys' too ([`keys_counted`]): what the multi-process, cross-language and crash
/// tests check at their end, so concurrent writers of the count records and
/// killed transactions are caught leaving them off.
pub fn counted(kernel: &Kernel) -> Result<(), String> {
    let tasks = board(kernel).map_err(|e| format!("the board: {e}"))?;
    let mut want = [0u64; 5];
    for t in &tasks {
        want[match t.state {
            gak::TaskState::Open => 0,
            gak::TaskState::Claimed => 1,
            gak::TaskState::Done => 2,
            gak::TaskState::Failed => 3,
            gak::TaskState::Dead => 4,
        }] += 1;
    }
    let c = kernel
        .taskboard()
        .count()
        .map_err(|e| format!("count: {e}"))?;
    let got = [c.open, c.claimed, c.done, c.failed, c.dead];
    if !c.exact || got != want {
        return Err(format!(
            "the count records say {got:?} (exact: {}), the board's {} tasks {want:?}",
            c.exact,
            tasks.len()
        ));
    }
    keys_counted(kernel)
}

/// The keys' counts (`sideeffect.count`) are exact and equal the keys by
/// state, read page by page. In-flight and uncertain are compared as one
/// figure: an intent may expire between the listing and the count.
pub fn keys_counted(kernel: &Kernel) -> Result<(), String> {
    let mut want = [0u64; 3];
    let mut after: Option<String> = None;
    loop {
        let page = kernel
            .sideeffect()
            .list(None, after.as_deref(), 1000)
            .map_err(|e| format!("the keys: {e}"))?;
        for k in &page.items {
            want[match k.state {
                gak::KeyState::Cleared => 0,
                gak::KeyState::InFlight | gak::KeyState::Uncertain => 1,
                gak::KeyState::Completed => 2,
            }] += 1;
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let c = kernel
        .sideeffect()
        .count()
        .map_err(|e| format!("sideeffect count: {e}"))?;
    let got = [c.cleared, c.in_flight + c.uncertain, c.completed];
    if !c.exact || got != want {
        return Err(format!(
            "the count records say keys {got:?} (cleared, in flight or uncertain, completed; exact: {}), the listing {want:?}",
            c.exact
        ));
    }
    Ok(())
}

/// [`counted`], or panic.
pub fn assert_counted(kernel: &Kernel) {
    if let Err(why) = counted(kernel) {
        panic!("{why}");
    }
}

/// A target made from a closure.
pub struct FnTarget<F>(pub F);

impl<K, F> Target for FnTarget<F>
where
    K: Into<gak::Kernel>,
    F: FnMut(Arc<ManualClock>) -> Result<K, String>,
{
    fn fresh(&mut self, clock: Arc<ManualClock>) -> Result<gak::Kernel, String> {
        (self.0)(clock).map(Into::into)
    }
}

/// A fresh SQLite database per scenario, in a temp dir removed on drop.
pub struct SqliteTarget {
    dir: tempfile::TempDir,
    count: usize,
}

impl SqliteTarget {
    /// A new temp dir.
    pub fn new() -> Self {
        SqliteTarget {
            dir: tempfile::tempdir().expect("temp dir"),
            count: 0,
        }
    }
}

impl Default for SqliteTarget {
    fn default() -> Self {
        Self::new()
    }
}

impl Target for SqliteTarget {
    fn fresh(&mut self, clock: Arc<ManualClock>) -> Result<gak::Kernel, String> {
        self.count += 1;
        let path = self.dir.path().join(format!("s{}.db", self.count));
        let url = format!("sqlite:{}", path.display());
        let backend =
            gak::blocking::run_future(gak::store::open(&url)).map_err(|e| e.to_string())?;
        gak::Kernel::with_backend(backend, clock).map_err(|e| e.to_string())
    }
}

/// Run the built-in vectors of one file (or all, with `None`) on a target.
pub fn run_builtin(target: &mut dyn Target, file: Option<&str>) -> Report {
    let files: Vec<(String, String)> = conformance::builtin()
        .into_iter()
        .filter(|(name, _)| file.is_none_or(|f| name.ends_with(f)))
        .collect();
    assert!(
        !files.is_empty(),
        "no built-in vector file matches {file:?}"
    );
    conformance::run(target, &files)
}

/// How many scenarios the built-in vectors hold, as the Rust runner parses
/// them: another host's runner must report exactly this many passed.
pub fn builtin_scenarios() -> usize {
    conformance::builtin()
        .iter()
        .map(|(name, text)| {
            conformance::parse_file(text)
                .unwrap_or_else(|e| panic!("{name}: {e}"))
                .len()
        })
        .sum()
}

/// `n` threads claim one open task at the same instant; returns how many won.
/// Every loser must be refused with `taken`.
pub fn claim_race(kernel: &Kernel, task: &str, n: usize) -> usize {
    claim_race_after(kernel, task, n, || {})
}

/// [`claim_race`], calling `ready` after seeding and before the race.
pub fn claim_race_after(kernel: &Kernel, task: &str, n: usize, ready: impl FnOnce()) -> usize {
    kernel
        .taskboard()
        .seed(&[TaskSeed::new(task)])
        .expect("seed");
    ready();
    let start = Arc::new(Barrier::new(n));
    let results = Arc::new(Mutex::new(Vec::new()));
    std::thread::scope(|s| {
        for i in 0..n {
            let (kernel, start, results) = (kernel.clone(), start.clone(), results.clone());
            s.spawn(move || {
                start.wait();
                let r = kernel.taskboard().claim(task, &format!("w{i}"), 60_000);
                results.lock().expect("results").push(r);
            });
        }
    });
    let results = results.lock().expect("results");
    for r in results.iter() {
        if let Err(e) = r {
            assert_eq!(*e, Error::Taken, "a loser must be refused as taken");
        }
    }
    results.iter().filter(|r| r.is_ok()).count()
}
