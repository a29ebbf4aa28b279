//! The host-protocol cases (`tests/host-protocol/`): what this host does
//! around the component — the transaction's life, conflict re-runs,
//! ambiguous commits, sink bodies, re-entrant calls, oversized payloads,
//! store URLs, the runner — replayed from the same data files every host's
//! suite replays (`host/HOSTS.md`).
//!
//! Call cases run on a [`Scripted`] store (the memory binding, counting
//! transactions and failing what a step's `faults` say), or on a fresh
//! SQLite file or PostgreSQL schema.
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Map, Value};

use super::vector::{matches, run_step, substitute};
use gak::clock::{Clock, ManualClock, SystemClock};
use gak::store::memory::MemoryBackend;
use gak::store::{Backend, Read, Session, Span, StoreFault, StoreFuture, Write};
use gak::{
    Action, Backoff, BodyError, Error, Kernel, Ran, RetrySafety, RunError, Runner, Worked, Worker,
};

/// One case of a call or runner file.
#[derive(Debug, Clone)]
pub struct Case {
    /// Its `case` name.
    pub name: String,
    /// The `host/HOSTS.md` rule it pins.
    pub rule: String,
    /// The stores to run it on (`scripted`, `sqlite`, `postgres`).
    pub stores: Vec<String>,
    /// It runs on the system clock (renewals take real time).
    pub system_clock: bool,
    steps: Vec<Value>,
}

/// One case of `urls.json`: opening `url` must fail without showing
/// `secret`.
#[derive(Debug, Clone)]
pub struct UrlCase {
    /// Its `case` name.
    pub name: String,
    /// The URL to open.
    pub url: String,
    /// What no message may contain.
    pub secret: Option<String>,
}

/// What a host-protocol file holds.
#[derive(Debug, Clone)]
pub enum Item {
    /// A call or runner case.
    Case(Case),
    /// A store-URL case.
    Url(UrlCase),
}

impl Item {
    /// The case's name.
    pub fn name(&self) -> &str {
        match self {
            Item::Case(c) => &c.name,
            Item::Url(u) => &u.name,
        }
    }
}

fn text(obj: &Map<String, Value>, key: &str, at: &str) -> Result<String, String> {
    obj.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("{at}.{key}: expected a string"))
}

/// Parse a host-protocol file: an array of cases.
pub fn parse_cases(json: &str) -> Result<Vec<Item>, String> {
    let value: Value = serde_json::from_str(json).map_err(|e| format!("invalid JSON: {e}"))?;
    let Value::Array(items) = value else {
        return Err("$: expected an array of cases".into());
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let at = format!("$[{i}]");
            let Value::Object(obj) = item else {
                return Err(format!("{at}: expected a case object"));
            };
            let name = text(&obj, "case", &at)?;
            if obj.contains_key("url") {
                return Ok(Item::Url(UrlCase {
                    name,
                    url: text(&obj, "url", &at)?,
                    secret: obj.get("secret").and_then(Value::as_str).map(str::to_owned),
                }));
            }
            let stores = match obj.get("stores") {
                None => vec!["scripted".to_owned()],
                Some(Value::Array(s)) => s
                    .iter()
                    .map(|v| v.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or(format!("{at}.stores: expected strings"))?,
                Some(_) => return Err(format!("{at}.stores: expected an array")),
            };
            let Some(Value::Array(steps)) = obj.get("steps") else {
                return Err(format!("{at}.steps: expected an array"));
            };
            Ok(Item::Case(Case {
                name,
                rule: obj
                    .get("rule")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                stores,
                system_clock: obj.get("clock").and_then(Value::as_str) == Some("system"),
                steps: steps.clone(),
            }))
        })
        .collect()
}

/// Where a case runs.
#[derive(Debug, Clone)]
pub enum Store {
    /// The memory binding behind a [`Scripted`] store.
    Scripted,
    /// A fresh SQLite file at this path (removed afterwards).
    Sqlite(std::path::PathBuf),
    /// A fresh schema of this PostgreSQL URL (dropped afterwards).
    #[cfg(feature = "postgres")]
    Postgres(String),
}

/// The longest a case may run: a host that deadlocks fails it instead of
/// hanging the suite.
const CASE_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest a body waits for its heartbeat to report.
const HEARTBEAT_WAIT: Duration = Duration::from_secs(10);

/// Run one call or runner case on `store`, on a thread of its own, bounded
/// in time. `Err` names the step and what went wrong.
pub fn run_case(case: &Case, store: &Store) -> Result<(), String> {
    let (case, store) = (case.clone(), store.clone());
    let (done, answer) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build();
        let result = match runtime {
            Ok(rt) => rt.block_on(run_on(&case, &store)),
            Err(e) => Err(format!("no runtime: {e}")),
        };
        let _ = done.send(result);
    });
    answer.recv_timeout(CASE_TIMEOUT).unwrap_or_else(|_| {
        Err(format!(
            "the case did not finish within {} s (a deadlock?)",
            CASE_TIMEOUT.as_secs()
        ))
    })
}

async fn run_on(case: &Case, store: &Store) -> Result<(), String> {
    let manual = Arc::new(ManualClock::at(0));
    let clock: Arc<dyn Clock> = if case.system_clock {
        Arc::new(SystemClock::default())
    } else {
        manual.clone()
    };
    let script = Script::default();
    let (backend, _cleanup) = open(store, &script).await?;
    let kernel = Kernel::with_backend(backend, clock).map_err(|e| e.to_string())?;
    let manual = (!case.system_clock).then_some(&*manual);
    let mut binds: HashMap<String, Value> = HashMap::new();
    for (i, step) in case.steps.iter().enumerate() {
        let at = |why: String| format!("step {i}: {why}");
        let Value::Object(step) = step else {
            return Err(at("expected an object".into()));
        };
        if step.contains_key("run") {
            run_step_of_runner(&kernel, manual, step, &mut binds)
                .await
                .map_err(at)?;
            continue;
        }
        if step.contains_key("work") {
            run_step_of_worker(&kernel, manual, step, &binds)
                .await
                .map_err(at)?;
            continue;
        }
        let faults = match step.get("faults") {
            None => Vec::new(),
            Some(f) => parse_faults(f).map_err(at)?,
        };
        let scripted = matches!(store, Store::Scripted);
        if (!faults.is_empty() || step.contains_key("tx")) && !scripted {
            return Err(at("faults and tx need the scripted store".into()));
        }
        script.arm(faults);
        let mut plain = step.clone();
        for extension in ["faults", "tx"] {
            plain.remove(extension);
        }
        run_step(&kernel, manual, &plain, &mut binds)
            .await
            .map_err(at)?;
        if let Some(want) = step.get("tx") {
            let got = script.counts();
            let got = serde_json::json!({
                "begin": got.begin, "commit": got.commit, "rollback": got.rollback
            });
            if !matches(want, Some(&got), &binds)? {
                return Err(at(format!("expected transactions {want}, got {got}")));
            }
        }
    }
    Ok(())
}

/// Removes a case's SQLite file or PostgreSQL schema when dropped.
pub(crate) enum Cleanup {
    Nothing,
    File(std::path::PathBuf),
    #[cfg(feature = "postgres")]
    Schema(Box<gak::store::postgres::PostgresBackend>),
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        match self {
            Cleanup::Nothing => {}
            Cleanup::File(path) => {
                for suffix in ["", "-wal", "-shm"] {
                    let mut p = path.clone().into_os_string();
                    p.push(suffix);
                    let _ = std::fs::remove_file(p);
                }
            }
            #[cfg(feature = "postgres")]
            Cleanup::Schema(backend) => {
                let _ = gak::blocking::run_future(backend.drop_schema());
            }
        }
    }
}

/// A fresh store of `store`'s kind (the scripted one with no faults), and
/// what removes it.
pub(crate) async fn open_store(store: &Store) -> Result<(Arc<dyn Backend>, Cleanup), String> {
    open(store, &Script::default()).await
}

/// A kernel on a scripted store whose faults (as a step's `faults`) stay
/// armed for every call, on the manual clock at 0.
pub(crate) async fn open_scripted(faults: &Value) -> Result<(Kernel, Cleanup), String> {
    let script = Script::default();
    script.arm(parse_faults(faults)?);
    let (backend, cleanup) = open(&Store::Scripted, &script).await?;
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::at(0));
    let kernel = Kernel::with_backend(backend, clock).map_err(|e| e.to_string())?;
    Ok((kernel, cleanup))
}

async fn open(store: &Store, script: &Script) -> Result<(Arc<dyn Backend>, Cleanup), String> {
    Ok(match store {
        Store::Scripted => {
            let backend = Scripted {
                inner: MemoryBackend::default(),
                script: script.clone(),
            };
            (Arc::new(backend), Cleanup::Nothing)
        }
        #[cfg(feature = "sqlite")]
        Store::Sqlite(path) => {
            let cleanup = Cleanup::File(path.clone());
            let backend = gak::store::sqlite::SqliteBackend::open(&path.display().to_string())
                .map_err(|e| e.to_string())?;
            (Arc::new(backend), cleanup)
        }
        #[cfg(not(feature = "sqlite"))]
        Store::Sqlite(_) => return Err("this build has no SQLite binding".into()),
        #[cfg(feature = "postgres")]
        Store::Postgres(url) => {
            use gak::store::postgres::PostgresBackend;
            let backend = PostgresBackend::parse(url).map_err(|e| e.to_string())?;
            backend.drop_schema().await.map_err(|e| e.to_string())?;
            backend.ensure_schema().await.map_err(|e| e.to_string())?;
            let cleanup = Cleanup::Schema(Box::new(
                PostgresBackend::parse(url).map_err(|e| e.to_string())?,
            ));
            (Arc::new(backend), cleanup)
        }
    })
}

/// Open `case.url`: it must fail, and no message may show the secret.
pub fn check_url(case: &UrlCase) -> Result<(), String> {
    let opened = gak::blocking::run_future(Kernel::open(&case.url));
    let error = match opened {
        Ok(_) => return Err(format!("{} opened", case.url)),
        Err(e) => e,
    };
    let mut shown = format!("{error} / {error:?}");
    let mut source = std::error::Error::source(&error);
    while let Some(s) = source {
        shown.push_str(&format!(" / {s}"));
        source = s.source();
    }
    match &case.secret {
        Some(secret) if shown.contains(secret.as_str()) => {
            Err(format!("the error shows the password: {shown}"))
        }
        _ => Ok(()),
    }
}

// --- the scripted store ------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Begin,
    Read,
    Write,
    Commit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    Conflict,
    Failure,
    Lost,
}

#[derive(Clone, Debug)]
struct Fault {
    on: Op,
    table: Option<String>,
    nth: usize,
    /// None: every matching operation from the n-th on.
    times: Option<usize>,
    answer: Answer,
    seen: usize,
}

fn parse_faults(v: &Value) -> Result<Vec<Fault>, String> {
    let Value::Array(items) = v else {
        return Err("faults: expected an array".into());
    };
    items
        .iter()
        .map(|f| {
            let on = match f.get("on").and_then(Value::as_str) {
                Some("begin") => Op::Begin,
                Some("read") => Op::Read,
                Some("write") => Op::Write,
                Some("commit") => Op::Commit,
                other => return Err(format!("faults: unknown op {other:?}")),
            };
            let answer = match f.get("answer").and_then(Value::as_str) {
                Some("conflict") => Answer::Conflict,
                Some("failure") => Answer::Failure,
                Some("lost") if on == Op::Commit => Answer::Lost,
                other => return Err(format!("faults: unknown answer {other:?} for {on:?}")),
            };
            let times = match f.get("times") {
                None => Some(1),
                Some(Value::String(s)) if s == "all" => None,
                Some(n) => Some(n.as_u64().ok_or("faults: times")? as usize),
            };
            Ok(Fault {
                on,
                table: f.get("table").and_then(Value::as_str).map(str::to_owned),
                nth: f.get("nth").and_then(Value::as_u64).unwrap_or(1) as usize,
                times,
                answer,
                seen: 0,
            })
        })
        .collect()
}

/// Transactions begun, committed and rolled back during a step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    begin: u64,
    commit: u64,
    rollback: u64,
}

#[derive(Default)]
struct ScriptState {
    faults: Vec<Fault>,
    counts: Counts,
}

/// The current step's faults and transaction counts, shared by every
/// session of a [`Scripted`] store.
#[derive(Clone, Default)]
struct Script(Arc<Mutex<ScriptState>>);

impl Script {
    fn state(&self) -> MutexGuard<'_, ScriptState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn arm(&self, faults: Vec<Fault>) {
        let mut state = self.state();
        state.faults = faults;
        state.counts = Counts::default();
    }

    fn counts(&self) -> Counts {
        self.state().counts
    }

    /// The answer for one operation on `tables`, if a fault takes it.
    fn take(&self, op: Op, tables: &[&str]) -> Option<Answer> {
        let mut state = self.state();
        let mut answer = None;
        for f in &mut state.faults {
            let touches = f.table.as_deref().is_none_or(|t| tables.contains(&t));
            if f.on != op || !touches {
                continue;
            }
            f.seen += 1;
            let firing = f.seen >= f.nth && f.times.is_none_or(|t| f.seen < f.nth + t);
            if firing && answer.is_none() {
                answer = Some(f.answer);
            }
        }
        answer
    }
}

fn fault(answer: Answer, what: &str) -> StoreFault {
    match answer {
        Answer::Conflict => StoreFault::Conflict(format!("scripted conflict at {what}")),
        Answer::Failure | Answer::Lost => {
            StoreFault::Failure(format!("scripted failure at {what}"))
        }
    }
}

/// The memory binding, counting transactions and failing the operations
/// the current step's faults name.
pub struct Scripted {
    inner: MemoryBackend,
    script: Script,
}

impl Backend for Scripted {
    fn session(&self) -> StoreFuture<'_, Box<dyn Session>> {
        Box::pin(async move {
            let inner = self.inner.session().await?;
            let session: Box<dyn Session> = Box::new(ScriptedSession {
                inner,
                script: self.script.clone(),
            });
            Ok(session)
        })
    }
    fn describe(&self) -> String {
        "scripted memory".into()
    }
}

struct ScriptedSession {
    inner: Box<dyn Session>,
    script: Script,
}

impl Session for ScriptedSession {
    fn begin(&mut self) -> StoreFuture<'_, ()> {
        self.script.state().counts.begin += 1;
        match self.script.take(Op::Begin, &[]) {
            Some(answer) => gak::store::ready(Err(fault(answer, "begin"))),
            None => self.inner.begin(),
        }
    }
    fn get_many<'a>(
        &'a mut self,
        keys: &'a [(&'static str, &'a str)],
    ) -> StoreFuture<'a, Vec<Option<String>>> {
        let tables: Vec<&str> = keys.iter().map(|(t, _)| *t).collect();
        match self.script.take(Op::Read, &tables) {
            Some(answer) => gak::store::ready(Err(fault(answer, "a read"))),
            None => self.inner.get_many(keys),
        }
    }
    fn write<'a>(&'a mut self, writes: &'a [Write<'a>]) -> StoreFuture<'a, ()> {
        let tables: Vec<&str> = writes.iter().map(|w| w.table).collect();
        match self.script.take(Op::Write, &tables) {
            Some(answer) => gak::store::ready(Err(fault(answer, "a write"))),
            None => self.inner.write(writes),
        }
    }
    fn read<'a>(
        &'a mut self,
        keys: &'a [(&'static str, &'a str)],
        spans: &'a [Span<'a>],
    ) -> StoreFuture<'a, Read> {
        // One read of the component's (WIT `store.read`) is one operation,
        // however many keys and ranges it carries.
        let tables: Vec<&str> = keys
            .iter()
            .map(|(t, _)| *t)
            .chain(spans.iter().map(|s| s.table))
            .collect();
        match self.script.take(Op::Read, &tables) {
            Some(answer) => gak::store::ready(Err(fault(answer, "a read"))),
            None => self.inner.read(keys, spans),
        }
    }
    fn scan<'a>(
        &'a mut self,
        table: &'static str,
        prefix: &'a str,
        after: Option<&'a str>,
        limit: u32,
    ) -> StoreFuture<'a, Vec<(String, String)>> {
        match self.script.take(Op::Read, &[table]) {
            Some(answer) => gak::store::ready(Err(fault(answer, "a range read"))),
            None => self.inner.scan(table, prefix, after, limit),
        }
    }
    fn commit(&mut self) -> StoreFuture<'_, ()> {
        self.script.state().counts.commit += 1;
        let answer = self.script.take(Op::Commit, &[]);
        Box::pin(async move {
            match answer {
                None => self.inner.commit().await,
                // The commit landed; its acknowledgement did not.
                Some(Answer::Lost) => {
                    self.inner.commit().await?;
                    Err(fault(Answer::Lost, "commit (acknowledgement lost)"))
                }
                // Refused, and the binding knows nothing landed.
                Some(answer) => {
                    self.inner.rollback().await;
                    Err(fault(answer, "commit"))
                }
            }
        })
    }
    fn rollback(&mut self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        self.script.state().counts.rollback += 1;
        self.inner.rollback()
    }
    fn body_started(&mut self) {
        self.inner.body_started();
    }
    fn body_ended(&mut self) -> StoreFuture<'_, ()> {
        self.inner.body_ended()
    }
    fn as_any(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

// --- runner steps ---------------------------------------------------------

/// The runner's answers as the cases name them.
fn outcome_name<E>(ran: &Result<Ran, RunError<E>>) -> (String, Option<Value>) {
    let text = |b: &[u8]| Value::String(String::from_utf8_lossy(b).into_owned());
    match ran {
        Ok(Ran::Applied(v)) => ("applied".into(), Some(text(v))),
        Ok(Ran::Replayed(v)) => ("replayed".into(), Some(text(v))),
        Ok(Ran::Uncertain(_)) => ("uncertain".into(), None),
        Ok(Ran::InFlight) => ("in-flight".into(), None),
        Ok(Ran::Contended(_)) => ("contended".into(), None),
        Err(RunError::Uncertain(_)) => ("body-failed".into(), None),
        Err(RunError::NotApplied(_)) => ("not-applied".into(), None),
        Err(RunError::Kernel(e)) => (format!("error {}", e.name()), None),
        _ => ("an answer this runner does not know".into(), None),
    }
}

async fn run_step_of_runner(
    kernel: &Kernel,
    clock: Option<&ManualClock>,
    step: &Map<String, Value>,
    binds: &mut HashMap<String, Value>,
) -> Result<(), String> {
    let run = substitute(&step["run"], binds)?;
    let a = run.get("action").ok_or("run.action: missing")?;
    let field = |k: &str| a.get(k).and_then(Value::as_str).map(str::to_owned);
    let mut action = Action::new(
        &field("key").ok_or("run.action.key")?,
        &field("resource").ok_or("run.action.resource")?,
    );
    if field("retry-safety").as_deref() == Some("unsafe") {
        action.retry_safety = RetrySafety::Unsafe;
    }
    action.fingerprint = field("fingerprint");
    let ttl = run.get("ttl").and_then(Value::as_u64).ok_or("run.ttl")?;
    let body = run
        .get("body")
        .and_then(Value::as_str)
        .ok_or("run.body")?
        .to_owned();
    let result = run
        .get("result")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .as_bytes()
        .to_vec();
    let inside: Vec<Value> = match run.get("inside") {
        Some(Value::Array(steps)) => steps.clone(),
        _ => Vec::new(),
    };
    let calls = Arc::new(Mutex::new(0u64));
    let trouble: Arc<Mutex<Option<String>>> = Arc::default();
    let runner = Runner::new(kernel, ttl);
    let (counted, troubled, inner_binds) = (calls.clone(), trouble.clone(), binds.clone());
    let ran = runner
        .run_with_heartbeat(&action, async |lease, heartbeat| {
            *counted.lock().unwrap_or_else(|p| p.into_inner()) += 1;
            let fail = |why: &str| Err(BodyError::Failed(why.to_owned()));
            match body.as_str() {
                "return" => Ok(result.clone()),
                "fail" => fail("the body failed on purpose"),
                "not-applied" => Err(BodyError::NotApplied("surely not sent".to_owned())),
                "outlive" => {
                    while heartbeat.renewals() < 3 {
                        if tokio::time::timeout(HEARTBEAT_WAIT, heartbeat.changed())
                            .await
                            .is_err()
                        {
                            *troubled.lock().unwrap_or_else(|p| p.into_inner()) =
                                Some("the heartbeat reported no renewal within 10 s".into());
                            return fail("no renewal");
                        }
                    }
                    let mut binds = inner_binds.clone();
                    for (i, step) in inside.iter().enumerate() {
                        let Value::Object(step) = step else { continue };
                        if let Err(why) = run_step(kernel, clock, step, &mut binds).await {
                            *troubled.lock().unwrap_or_else(|p| p.into_inner()) =
                                Some(format!("inside step {i}: {why}"));
                        }
                    }
                    Ok(result.clone())
                }
                "lose" => {
                    let marked = kernel
                        .sideeffect()
                        .mark_uncertain(&action, lease, "lost on purpose")
                        .await;
                    if let Err(e) = marked {
                        *troubled.lock().unwrap_or_else(|p| p.into_inner()) =
                            Some(format!("mark-uncertain: {e}"));
                    }
                    while heartbeat.check().is_ok() {
                        if tokio::time::timeout(HEARTBEAT_WAIT, heartbeat.changed())
                            .await
                            .is_err()
                        {
                            *troubled.lock().unwrap_or_else(|p| p.into_inner()) =
                                Some("the heartbeat never reported the lease lost".into());
                            break;
                        }
                    }
                    fail("the lease was lost")
                }
                other => fail(&format!("unknown body {other:?}")),
            }
        })
        .await;
    if let Some(why) = trouble.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(why);
    }
    let (outcome, value) = outcome_name(&ran);
    let want = step
        .get("outcome")
        .and_then(Value::as_str)
        .ok_or("outcome: expected a name")?;
    if outcome != want {
        return Err(format!("run: expected {want}, got {outcome}"));
    }
    if let Some(want) = step.get("value")
        && !matches(want, value.as_ref(), binds)?
    {
        return Err(format!("run: expected value {want}, got {value:?}"));
    }
    let called = *calls.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(want) = step.get("calls").and_then(Value::as_u64)
        && want != called
    {
        return Err(format!(
            "run: expected the body called {want} times, got {called}"
        ));
    }
    Ok(())
}

/// A `work` step (`tests/host-protocol/workers.json`): the queue worker
/// until idle, each task's handler scripted by name; the counts it answers
/// and the order the handlers ran in.
async fn run_step_of_worker(
    kernel: &Kernel,
    clock: Option<&ManualClock>,
    step: &Map<String, Value>,
    binds: &HashMap<String, Value>,
) -> Result<(), String> {
    let work = substitute(&step["work"], binds)?;
    let num = |k: &str, default: u64| work.get(k).and_then(Value::as_u64).unwrap_or(default);
    let ttl = num("ttl", 30_000);
    let mut worker = Worker::new(
        kernel,
        work.get("agent").and_then(Value::as_str).unwrap_or("w"),
    )
    .batch(u32::try_from(num("batch", 10)).map_err(|e| e.to_string())?)
    .ttl(ttl)
    .idle(Duration::from_millis(10));
    if let Some(n) = work.get("concurrency").and_then(Value::as_u64) {
        worker = worker.concurrency(usize::try_from(n).map_err(|e| e.to_string())?);
    }
    if let Some(b) = work.get("backoff") {
        let n = |k: &str| {
            b.get(k)
                .and_then(Value::as_u64)
                .ok_or(format!("backoff.{k}"))
        };
        worker = worker.backoff(Backoff {
            base: n("base")?,
            max: n("max")?,
            jitter: b.get("jitter").and_then(Value::as_f64).unwrap_or(0.0),
        });
    }
    let handlers = work.get("handlers").cloned().unwrap_or(Value::Null);
    let default = work
        .get("default")
        .and_then(Value::as_str)
        .unwrap_or("ok")
        .to_owned();
    let stop = worker.stopper();
    let order: Arc<Mutex<Vec<String>>> = Arc::default();
    let trouble: Arc<Mutex<Option<String>>> = Arc::default();
    let worked = worker
        .run_until_idle(async |task| {
            lock(&order).push(task.id.clone());
            let script = handlers
                .get(&task.id)
                .and_then(Value::as_str)
                .unwrap_or(&default)
                .to_owned();
            let note = |why: String| *lock(&trouble) = Some(why);
            match script.as_str() {
                "ok" => Ok(()),
                "throw" => Err("boom".to_owned()),
                "throw-long" => Err("é".repeat(3_000)),
                "throw-nul" => Err("a\0b".to_owned()),
                "panic" => panic!("boom"),
                "stop" => {
                    stop.stop();
                    Ok(())
                }
                "lose" => {
                    // The claim expires and another worker takes it over.
                    match clock {
                        Some(c) => c.advance(ttl),
                        None => note("lose needs the manual clock".into()),
                    }
                    if let Err(e) = kernel.taskboard().claim(&task.id, "thief", ttl).await {
                        note(format!("the thief's claim: {e}"));
                    }
                    Ok(())
                }
                "outlive" => {
                    // Real time past the ttl: the worker's renewals keep the
                    // claim live, so a thief is refused.
                    tokio::time::sleep(Duration::from_millis(ttl * 3)).await;
                    match kernel.taskboard().claim(&task.id, "thief", ttl).await {
                        Err(Error::Taken) => {}
                        other => note(format!("the thief's claim answered {other:?}")),
                    }
                    Ok(())
                }
                other => Err(format!("unknown handler {other:?}")),
            }
        })
        .await
        .map_err(|e| format!("the worker: {e}"))?;
    if let Some(why) = lock(&trouble).take() {
        return Err(why);
    }
    let Worked {
        claimed,
        completed,
        failed,
        released,
        lost,
    } = worked;
    let got = serde_json::json!({
        "claimed": claimed, "completed": completed, "failed": failed,
        "released": released, "lost": lost,
    });
    if let Some(want) = step.get("worked")
        && !matches(want, Some(&got), binds)?
    {
        return Err(format!("work: expected {want}, got {got}"));
    }
    let ran = Value::from(lock(&order).clone());
    if let Some(want) = step.get("order")
        && *want != ran
    {
        return Err(format!(
            "work: expected the handlers in order {want}, got {ran}"
        ));
    }
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
