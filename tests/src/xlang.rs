//! The cross-language proof: workers written in different host languages run
//! the same protocol (v1, `host/HOSTS.md`) AT THE SAME TIME against one
//! database, then the audit checks what they printed against what the store
//! holds. Any host language joins by adding a [`WorkerCmd`].
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use gak::blocking::Kernel;
use gak::{Acquired, Action, TaskSeed};
use serde_json::Value;

/// How much work each worker does.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// Tasks `t0..t{tasks-1}` seeded before the workers start.
    pub tasks: u64,
    /// Claim rounds per worker.
    pub rounds: u64,
    /// Side-effect keys `key-0..`.
    pub keys: u64,
    /// Fenced ledger writes per worker.
    pub sink_rounds: u64,
}

/// One worker program: `program args… --store URL --worker NAME --index N …`.
#[derive(Debug, Clone)]
pub struct WorkerCmd {
    /// What its lines say in `lang` (`rust`, `python`, `js`, `go`).
    pub lang: String,
    /// The executable.
    pub program: PathBuf,
    /// Arguments before the protocol's (e.g. the Python worker's script).
    pub args: Vec<String>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
}

impl WorkerCmd {
    /// A worker in `lang` run as `program args…`.
    pub fn new(lang: &str, program: impl Into<PathBuf>, args: &[&str]) -> Self {
        WorkerCmd {
            lang: lang.to_owned(),
            program: program.into(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: Vec::new(),
        }
    }
}

/// One line a worker printed.
#[derive(Debug, Clone)]
pub struct Event {
    /// Wall clock, ms.
    pub t: u64,
    /// Worker name.
    pub worker: String,
    /// Host language.
    pub lang: String,
    /// `win`, `taken`, `body`, `replayed`, `in-flight`, `contended`, `sink-ok`, `sink-stale`.
    pub event: String,
    /// `task`, for claim events.
    pub task: Option<String>,
    /// `key`, for effect events.
    pub key: Option<String>,
    /// `fence`, where the event has one.
    pub fence: Option<u64>,
}

impl Event {
    fn parse(line: &str) -> Result<Event, String> {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON ({e}): {line}"))?;
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        Ok(Event {
            t: v.get("t")
                .and_then(Value::as_u64)
                .ok_or(format!("no t: {line}"))?,
            worker: s("worker").ok_or(format!("no worker: {line}"))?,
            lang: s("lang").ok_or(format!("no lang: {line}"))?,
            event: s("event").ok_or(format!("no event: {line}"))?,
            task: s("task"),
            key: s("key"),
            fence: v.get("fence").and_then(Value::as_u64),
        })
    }
}

/// What a passing run showed, for the test's output.
#[derive(Debug, Default)]
pub struct Summary {
    /// Claim epochs won, per language.
    pub wins: BTreeMap<String, usize>,
    /// Effect bodies run, per language.
    pub bodies: BTreeMap<String, usize>,
    /// Refusals seen: `taken`, `in-flight` + `contended`, `sink-stale`.
    pub taken: usize,
    /// `in-flight` or `contended` answers.
    pub busy: usize,
    /// Ledger rows written.
    pub sink_ok: usize,
    /// Ledger writes refused as stale.
    pub sink_stale: usize,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "wins {:?}, bodies {:?}, taken {}, in-flight/contended {}, ledger rows {}, stale ledger writes {}",
            self.wins, self.bodies, self.taken, self.busy, self.sink_ok, self.sink_stale
        )
    }
}

/// Seed the board, start every worker at once, wait for all, audit.
/// `kernel` opens the store for the parent; it is called twice (to seed,
/// then to audit), so the parent holds no connection while the workers run.
/// With `GAK_XLANG_LOGS=DIR` every worker's stdout and stderr are kept there.
pub fn run(
    url: &str,
    kernel: impl Fn() -> Result<Kernel, String>,
    workers: &[WorkerCmd],
    p: Params,
) -> Result<Summary, String> {
    let tasks: Vec<TaskSeed> = (0..p.tasks)
        .map(|i| TaskSeed::new(&format!("t{i}")))
        .collect();
    kernel()?
        .taskboard()
        .seed(&tasks)
        .map_err(|e| format!("seed: {e}"))?;
    // Every worker waits at this start line until all are set up (protocol
    // step 0): start-up differs by hundreds of milliseconds between
    // languages, and a worker that finished before another began would
    // prove nothing about sharing a database.
    let barrier = tempfile::tempdir().map_err(|e| format!("barrier folder: {e}"))?;
    let barrier_dir = barrier.path().to_string_lossy().into_owned();
    let parties = workers.len().to_string();
    let mut children = Vec::new();
    for (index, w) in workers.iter().enumerate() {
        let name = format!("{}-{index}", w.lang);
        let child = Command::new(&w.program)
            .args(&w.args)
            .args(["--store", url, "--worker", &name])
            .args(["--index", &index.to_string()])
            .args(["--tasks", &p.tasks.to_string()])
            .args(["--rounds", &p.rounds.to_string()])
            .args(["--keys", &p.keys.to_string()])
            .args(["--sink-rounds", &p.sink_rounds.to_string()])
            .args(["--barrier", &barrier_dir, "--parties", &parties])
            .envs(w.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", w.program.display()))?;
        children.push((name, child));
    }
    // Drain every child's pipes at once: a worker blocked on a full stdout
    // pipe would hold its lease and stall all the others.
    let outputs: Vec<_> = children
        .into_iter()
        .map(|(name, child)| (name, std::thread::spawn(move || child.wait_with_output())))
        .collect();
    let mut events = Vec::new();
    let mut failures = Vec::new();
    for (name, waiter) in outputs {
        let out = waiter
            .join()
            .map_err(|_| format!("wait {name}: thread panicked"))?
            .map_err(|e| format!("wait {name}: {e}"))?;
        if !out.status.success() {
            failures.push(format!(
                "{name} exited {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        if let Some(dir) = std::env::var_os("GAK_XLANG_LOGS") {
            let dir = PathBuf::from(dir);
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::write(dir.join(format!("{name}.jsonl")), &out.stdout);
            let _ = std::fs::write(dir.join(format!("{name}.err")), &out.stderr);
        }
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            events.push(Event::parse(line)?);
        }
    }
    if !failures.is_empty() {
        return Err(failures.join("\n"));
    }
    audit(&events, &kernel()?, p)
}

/// The whole audit: the events against the store, then the overlap proof.
pub fn audit(events: &[Event], kernel: &Kernel, p: Params) -> Result<Summary, String> {
    let summary = audit_store(events, kernel, p)?;
    audit_overlap(events)?;
    Ok(summary)
}

fn count(events: &[Event], kinds: &[&str]) -> usize {
    events
        .iter()
        .filter(|e| kinds.contains(&e.event.as_str()))
        .count()
}

/// What the workers printed agrees with the store: one winner per claim
/// epoch, one body per key (recorded downstream by that worker, replayed
/// now), a ledger in commit order with one row per accepted write.
pub fn audit_store(events: &[Event], kernel: &Kernel, p: Params) -> Result<Summary, String> {
    crate::counted(kernel)?;
    let mut summary = Summary::default();
    let mut wins: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut bodies: BTreeMap<String, Vec<&Event>> = BTreeMap::new();
    for e in events {
        match e.event.as_str() {
            "win" => {
                let task = e.task.clone().ok_or("win without task")?;
                wins.entry(task)
                    .or_default()
                    .push(e.fence.ok_or("win without fence")?);
                *summary.wins.entry(e.lang.clone()).or_default() += 1;
            }
            "body" => {
                bodies
                    .entry(e.key.clone().ok_or("body without key")?)
                    .or_default()
                    .push(e);
                *summary.bodies.entry(e.lang.clone()).or_default() += 1;
            }
            _ => {}
        }
    }
    summary.taken = count(events, &["taken"]);
    summary.busy = count(events, &["in-flight", "contended"]);
    summary.sink_ok = count(events, &["sink-ok"]);
    summary.sink_stale = count(events, &["sink-stale"]);

    for i in 0..p.tasks {
        let task = format!("t{i}");
        let board = kernel
            .taskboard()
            .get(&task)
            .map_err(|e| format!("get {task}: {e}"))?;
        let mut won = wins.remove(&task).unwrap_or_default();
        won.sort_unstable();
        let expected: Vec<u64> = (1..=board.fence).collect();
        if won != expected {
            return Err(format!(
                "{task}: won fences {won:?}, but the board's fence is {} (each epoch must be won exactly once)",
                board.fence
            ));
        }
    }
    if !wins.is_empty() {
        return Err(format!("wins of unseeded tasks: {wins:?}"));
    }

    for i in 0..p.keys {
        let key = format!("key-{i}");
        let ran = bodies.remove(&key).unwrap_or_default();
        let [body] = ran.as_slice() else {
            return Err(format!(
                "{key}: {} body runs (exactly one expected)",
                ran.len()
            ));
        };
        let row = kernel
            .with_downstream(|d| d.get(&format!("effect/{key}")))
            .map_err(|e| format!("downstream effect/{key}: {e}"))?;
        if row.as_deref() != Some(body.worker.as_str()) {
            return Err(format!(
                "{key}: downstream says {row:?}, the body ran in {}",
                body.worker
            ));
        }
        match kernel
            .sideeffect()
            .acquire(&Action::new(&key, &format!("res-{i}")), 60_000)
        {
            Ok(Acquired::Replayed(_)) => {}
            other => {
                return Err(format!(
                    "{key}: acquire now answers {other:?}, not replayed"
                ));
            }
        }
    }

    let (count_row, rows) = kernel
        .with_downstream(|d| {
            let count: u64 = d
                .get("ledger/count")?
                .map_or(0, |c| c.parse().unwrap_or(u64::MAX));
            let mut rows = Vec::new();
            for n in 1..=count.min(1_000_000) {
                rows.push(d.get(&format!("ledger/{n:08}"))?);
            }
            Ok((count, rows))
        })
        .map_err(|e| format!("ledger: {e}"))?;
    let mut last = 0;
    for (n, row) in rows.iter().enumerate() {
        let row = row
            .as_deref()
            .ok_or(format!("ledger row {} missing", n + 1))?;
        let v: Value = serde_json::from_str(row).map_err(|e| format!("ledger row {row}: {e}"))?;
        let fence = v["fence"].as_u64().ok_or(format!("ledger row {row}"))?;
        if fence < last {
            return Err(format!(
                "ledger row {} has fence {fence} after {last}: not commit order",
                n + 1
            ));
        }
        last = fence;
    }
    if count_row as usize != summary.sink_ok {
        return Err(format!(
            "ledger has {count_row} rows, workers reported {} sink-ok",
            summary.sink_ok
        ));
    }
    Ok(summary)
}

/// Overlap is proven, not assumed: every language won a claim epoch, wins of
/// different languages interleave in time, workers of different languages
/// provably ran at the same time, and refusals were observed. A serial run
/// fails here.
pub fn audit_overlap(events: &[Event]) -> Result<(), String> {
    let langs: BTreeSet<&str> = events.iter().map(|e| e.lang.as_str()).collect();
    let mut wins: Vec<&Event> = events.iter().filter(|e| e.event == "win").collect();
    for lang in &langs {
        if !wins.iter().any(|e| e.lang == *lang) {
            return Err(format!("{lang} never won a claim epoch"));
        }
    }
    if langs.len() > 1 {
        // The protocol's rule: some win of language A lies strictly (in
        // time) between two wins of language B.
        wins.sort_by_key(|e| e.t);
        let between = |same_worker: bool| {
            wins.iter().any(|a| {
                let split = wins.partition_point(|x| x.t < a.t);
                let (before, after) = wins.split_at(split);
                before.iter().any(|x| {
                    x.lang != a.lang
                        && after.iter().any(|y| {
                            y.t > a.t && y.lang == x.lang && (!same_worker || y.worker == x.worker)
                        })
                })
            })
        };
        if !between(false) {
            return Err(
                "the wins of different languages never interleave in time: the run was serial"
                    .into(),
            );
        }
        // That alone also holds for workers run one after another (rust-0,
        // python-0, rust-1). Concurrency itself is shown by either: a win of
        // A between two wins of ONE worker of B (that worker's claim phase
        // was running), or an in-flight answer to a worker of A on a key
        // whose body a worker of B ran (B's intent was live while A ran).
        let body_lang: BTreeMap<&str, &str> = events
            .iter()
            .filter(|e| e.event == "body")
            .filter_map(|e| Some((e.key.as_deref()?, e.lang.as_str())))
            .collect();
        let cross_in_flight = events.iter().any(|e| {
            e.event == "in-flight"
                && e.key
                    .as_deref()
                    .and_then(|k| body_lang.get(k))
                    .is_some_and(|owner| *owner != e.lang)
        });
        if !between(true) && !cross_in_flight {
            return Err("no sign that workers of different languages ran at the same time: the run was serial".into());
        }
    }
    for (what, kinds) in [
        ("taken", &["taken"][..]),
        ("in-flight or contended", &["in-flight", "contended"][..]),
        ("sink-stale", &["sink-stale"][..]),
    ] {
        if count(events, kinds) == 0 {
            return Err(format!("no {what} refusal was observed: no contention"));
        }
    }
    Ok(())
}
