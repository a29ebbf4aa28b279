//! Bad input (SPEC 2 "Bad input is refused, not stored", SPEC 8 "Inputs").
//!
//! Every exported operation is called with arbitrary arguments: quotes, NULs,
//! SQL fragments, unicode, strings at and over the limits (1 MiB + 1), huge
//! ttls, fences and seqs at and above 2^53 up to `u64::MAX`, arbitrary result
//! bytes. The answer must be a typed refusal or a correct result, never a
//! host panic, never a trapped component, never `storage` (memory and SQLite
//! have no reason to fail). Arguments an oracle knows to be out of the
//! documented limits must be `invalid-input`; arguments it knows to be in
//! them must not be. Every refusal must leave the store exactly as it was.
//! The same calls run on memory and on SQLite, which must answer alike.
//!
//! `PROPTEST_CASES=N` runs N cases per property (default 64) for a soak.
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use gak::blocking::Kernel;
use gak::store::Backend;
use gak::store::memory::MemoryBackend;
use gak::store::postgres::PostgresBackend;
use gak::{
    Acquired, Action, Completion, CompletionAnswer, CompletionResult, Error, GroupInfo, Lease,
    ManualClock, Outcome, Resolution, Resolved, RetrySafety, SinkError, Snapshot, Status, StepDef,
    Task, TaskSeed, TaskState,
};
use gak_cli::conformance::{self, UrlTarget};
use gak_tests::pg;
use gak_tests::suite::{POSTGRES, Suite};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::Value;

const MIB: usize = 1 << 20;
/// The largest number any call may carry (SPEC 8: below 2^53).
const MAX_NUMBER: u64 = (1 << 53) - 1;
const MAX_TTL: u64 = 365 * 24 * 60 * 60 * 1000;
/// Most items in one `claim-batch` or `complete-batch` (SPEC 10).
const MAX_BATCH: u32 = 1000;
/// `max-attempts` is 1 to 1000; a group's limit 1 to 100 000 (SPEC 10).
const MAX_ATTEMPTS: u32 = 1000;
const MAX_GROUP_LIMIT: u32 = 100_000;
/// The fake clock (fixed: every lease granted here stays live).
const T0: u64 = 1_700_000_000_000;

fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    Config {
        cases,
        // No regression files next to the sources; a failure prints its input.
        failure_persistence: None,
        max_shrink_iters: 512,
        max_shrink_time: 60_000,
        ..Config::default()
    }
}

/// Run a property; a failure panics with the (shrunk) input.
fn check<S: Strategy>(strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: fmt::Debug,
{
    let mut runner = TestRunner::new(config());
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{e}");
    }
}

// ---------------------------------------------------------------------------
// Arguments.
//
// Every case is either *tame* (arguments within the limits, names mostly of
// entities that exist, so calls succeed) or *wild* (half of the arguments
// drawn from out-of-limit and hostile values), so each operation is seen
// both succeeding and refused.

/// A string whose `Debug` stays short (a failing 1 MiB input stays readable).
#[derive(Clone, PartialEq, Eq)]
struct Text(String);

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&short(&self.0))
    }
}

/// Bytes whose `Debug` stays short.
#[derive(Clone, PartialEq, Eq)]
struct Bytes(Vec<u8>);

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.len() <= 48 {
            write!(f, "{:?}", self.0)
        } else {
            write!(f, "<{} bytes, first {}>", self.0.len(), self.0[0])
        }
    }
}

fn short(s: &str) -> String {
    if s.len() <= 80 {
        return format!("{s:?}");
    }
    let head: String = s.chars().take(24).collect();
    format!("{head:?}… ({} bytes)", s.len())
}

/// Quotes, SQL fragments, JSON and vector syntax, unicode oddities: all
/// valid ids (1-256 bytes of UTF-8 without U+0000), so all must be plain
/// data. (U+0000 is refused everywhere: see `nul_is_invalid_input_on_*`.)
const SPECIAL: &[&str] = &[
    "'",
    "\"",
    "''",
    "'; DROP TABLE x; --",
    "'; DROP TABLE gak_tasks; --",
    "\"; DROP SCHEMA public CASCADE; --",
    "Robert'); DELETE FROM gak_actions;--",
    "x' OR '1'='1",
    "1; SELECT pg_sleep(10)",
    "%",
    "_",
    "\\",
    "\\0",
    "\\u0000",
    "$any",
    "$none",
    "$$x",
    "{\"$merge\": \"x\"}",
    "null",
    "NULL",
    "{}",
    "[]",
    "\"}]",
    "\u{FEFF}",
    "\u{202E}evil",
    "🦀",
    "日本語のキー",
    "\u{10FFFF}",
    "e\u{301}",
    "\n\r\t",
    " ",
    "../../etc/passwd",
    "snapshots",
    "tasks/../actions",
];

fn special() -> BoxedStrategy<Text> {
    prop::sample::select(SPECIAL)
        .prop_map(|s| Text(s.to_owned()))
        .boxed()
}

/// Strings out of the id limits: empty, over 256 bytes (also by two-byte
/// characters), over 4 KiB, over 1 MiB.
fn oversized() -> BoxedStrategy<Text> {
    prop_oneof![
        Just(Text(String::new())),
        prop::sample::select(vec![257usize, 300, 4096, 4097]).prop_map(|n| Text("x".repeat(n))),
        Just(Text("é".repeat(129))),
        Just(()).prop_map(|()| Text("y".repeat(MIB + 1))),
    ]
    .boxed()
}

/// Anything: specials, arbitrary unicode, strings at and over the limits.
fn nasty() -> BoxedStrategy<Text> {
    let chars = prop::sample::select(vec![
        '\0',
        '\'',
        '"',
        ';',
        '\\',
        '%',
        '_',
        '-',
        '\u{1F980}',
        '\u{202E}',
        'a',
        'é',
        '\n',
    ]);
    prop_oneof![
        3 => special(),
        2 => any::<String>().prop_map(Text),
        2 => vec(chars, 1..24).prop_map(|cs| Text(cs.into_iter().collect())),
        1 => "\\PC{60,90}".prop_map(Text),
        // At the limits: exactly 1 and 256 bytes (valid), 128 two-byte chars.
        1 => prop::sample::select(vec![1usize, 255, 256]).prop_map(|n| Text("x".repeat(n))),
        1 => Just(Text("é".repeat(128))),
        3 => oversized(),
    ]
    .boxed()
}

/// A name: tame, mostly one of `pool`; wild, a third each pool / oversized /
/// anything.
fn name(pool: &'static [&'static str], wild: bool) -> BoxedStrategy<Text> {
    let pool = prop::sample::select(pool).prop_map(|s| Text(s.to_owned()));
    if wild {
        prop_oneof![pool, oversized(), nasty()].boxed()
    } else {
        prop_oneof![4 => pool, 1 => special()].boxed()
    }
}

/// Free text (title, status, reason, sink values).
fn free_text(wild: bool) -> BoxedStrategy<Text> {
    if wild {
        nasty()
    } else {
        prop_oneof![special(), "\\PC{1,40}".prop_map(Text)].boxed()
    }
}

/// Override a prepared (fresh, valid) name with probability `p`.
fn over(pool: &'static [&'static str], wild: bool) -> BoxedStrategy<Option<Text>> {
    option::weighted(if wild { 0.6 } else { 0.2 }, name(pool, wild)).boxed()
}

/// A fence / seq: tame, small or at the top of the range; wild, also at and
/// above 2^53 up to `u64::MAX`.
fn number(wild: bool) -> BoxedStrategy<u64> {
    let tame = prop_oneof![
        3 => 0u64..6,
        1 => 6u64..1_000_000,
        1 => prop::sample::select(vec![MAX_NUMBER - 1, MAX_NUMBER]),
    ];
    if !wild {
        return tame.boxed();
    }
    prop_oneof![
        1 => tame,
        2 => prop::sample::select(vec![
            MAX_NUMBER + 1,
            1 << 53,
            u64::MAX,
            u64::MAX - 1,
            1 << 63,
            i64::MAX as u64,
        ]),
        1 => any::<u64>(),
    ]
    .boxed()
}

fn ttl(wild: bool) -> BoxedStrategy<u64> {
    let tame = prop_oneof![
        3 => 1u64..100_000,
        1 => prop::sample::select(vec![1, MAX_TTL - 1, MAX_TTL]),
    ];
    if !wild {
        return tame.boxed();
    }
    prop_oneof![
        1 => tame,
        2 => prop::sample::select(vec![
            0,
            MAX_TTL + 1,
            MAX_NUMBER,
            1 << 53,
            u64::MAX,
            u64::MAX - T0 + 1,
        ]),
        1 => any::<u64>(),
    ]
    .boxed()
}

/// Result bytes: arbitrary, up to exactly 1 MiB; wild, also 1 MiB + 1.
fn bytes(wild: bool) -> BoxedStrategy<Bytes> {
    let tame = prop_oneof![
        4 => vec(any::<u8>(), 0..48).prop_map(Bytes),
        1 => Just(()).prop_map(|()| Bytes(vec![0; MIB])),
        1 => Just(Bytes(b"'; DROP TABLE gak_actions; --\0\xff\xfe".to_vec())),
    ];
    if !wild {
        return tame.boxed();
    }
    prop_oneof![
        1 => tame,
        1 => Just(()).prop_map(|()| Bytes(vec![0xff; MIB + 1])),
    ]
    .boxed()
}

fn retry_safety() -> impl Strategy<Value = RetrySafety> {
    prop_oneof![Just(RetrySafety::Safe), Just(RetrySafety::Unsafe)]
}

fn status() -> impl Strategy<Value = Status> {
    prop_oneof![Just(Status::Succeeded), Just(Status::Failed)]
}

/// A seeded state: tame, never `claimed` or `dead` (which are refused).
fn task_state(wild: bool) -> BoxedStrategy<TaskState> {
    let mut states = vec![TaskState::Open, TaskState::Done, TaskState::Failed];
    if wild {
        states.push(TaskState::Claimed);
        states.push(TaskState::Dead);
    }
    prop::sample::select(states).boxed()
}

/// A count in `lo..=hi`: tame, within; wild, also 0, just over, `u32::MAX`
/// and anything.
fn count(hi: u32, wild: bool) -> BoxedStrategy<u32> {
    let tame = prop_oneof![
        3 => 1u32..5,
        1 => prop::sample::select(vec![1, hi - 1, hi]),
    ];
    if !wild {
        return tame.boxed();
    }
    prop_oneof![
        1 => tame,
        2 => prop::sample::select(vec![0, hi + 1, u32::MAX]),
        1 => any::<u32>(),
    ]
    .boxed()
}

/// A `retry-after`: tame, 0 ms to a year; wild, also over a year, at and
/// above 2^53, `u64::MAX`.
fn retry_after(wild: bool) -> BoxedStrategy<Option<u64>> {
    let tame = prop_oneof![
        3 => 0u64..100_000,
        1 => prop::sample::select(vec![0, MAX_TTL - 1, MAX_TTL]),
    ];
    let delay = if wild {
        prop_oneof![
            1 => tame,
            2 => prop::sample::select(vec![MAX_TTL + 1, 1 << 53, u64::MAX, u64::MAX - T0 + 1]),
            1 => any::<u64>(),
        ]
        .boxed()
    } else {
        tame.boxed()
    };
    option::weighted(0.8, delay).boxed()
}

/// A property's arguments, tame or wild.
fn cases<S: Strategy + 'static>(
    args: impl Fn(bool) -> S + 'static,
) -> impl Strategy<Value = (bool, S::Value)> {
    any::<bool>().prop_flat_map(move |wild| (Just(wild), args(wild)))
}

const RUNS: &[&str] = &["run-1", "run-2"];
const STEPS: &[&str] = &["s1", "s2", "s3"];
const FIELD_KEYS: &[&str] = &["a", "b", "attempt"];
const AGENTS: &[&str] = &["w1", "w2"];
const TASKS: &[&str] = &[
    "t-open",
    "t-dep",
    "t-claimed",
    "t-done",
    "t-failed",
    "t-dead",
    "t-grouped",
];
/// `g-1` has a limit and a live claim (`t-grouped`); `g-2` has neither.
const GROUPS: &[&str] = &["g-1", "g-2"];
const KEYS: &[&str] = &["k-live", "k-done", "k-unc"];
const RESOURCES: &[&str] = &["r-live", "r-2", "r-3"];
const SINKS: &[&str] = &["sink-1", "sink-2"];
const FINGERPRINTS: &[&str] = &["fp-1", "fp-2"];
const TOKENS: &[&str] = &["0123456789abcdef0123456789abcdef"];
/// A valid id standing for a prepared (fresh) name in the oracle.
const FRESH: &str = "fresh-0";

// ---------------------------------------------------------------------------
// The oracle: which arguments are out of the documented limits.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// In the limits: anything but `invalid-input`.
    Valid,
    /// The docs do not settle it: any typed answer.
    Either,
    /// Out of the limits: `invalid-input`, nothing written.
    Invalid,
}

struct Judge(Expect);

impl Judge {
    fn new() -> Judge {
        Judge(Expect::Valid)
    }
    fn flag(&mut self, invalid: bool) -> &mut Self {
        if invalid {
            self.0 = Expect::Invalid;
        }
        self
    }
    fn doubt(&mut self, doubtful: bool) -> &mut Self {
        if doubtful && self.0 == Expect::Valid {
            self.0 = Expect::Either;
        }
        self
    }
    fn id(&mut self, s: &str) -> &mut Self {
        self.flag(s.is_empty() || s.len() > 256 || s.contains('\0'))
    }
    fn over(&mut self, s: &Option<Text>) -> &mut Self {
        self.id(s.as_ref().map_or(FRESH, |t| &t.0))
    }
    fn ids<'a>(&mut self, all: impl IntoIterator<Item = &'a str>) -> &mut Self {
        for s in all {
            self.id(s);
        }
        self
    }
    fn number(&mut self, n: u64) -> &mut Self {
        self.flag(n > MAX_NUMBER)
    }
    fn ttl(&mut self, t: u64) -> &mut Self {
        self.flag(t == 0 || t > MAX_TTL)
    }
    fn reason(&mut self, s: &str) -> &mut Self {
        self.flag(s.len() > 4096 || s.contains('\0'))
    }
    fn payload(&mut self, len: usize) -> &mut Self {
        self.flag(len > MIB)
    }
    fn action(&mut self, a: &ActionIn) -> &mut Self {
        self.over(&a.key).over(&a.resource);
        if let Some(fp) = &a.fingerprint {
            self.id(&fp.0);
        }
        self
    }
    /// A presented lease: its fence is a number (SPEC 8); a malformed key,
    /// resource or holder fails the triple check rather than the input
    /// check, and its `until` is ignored — the docs do not say whether an
    /// over-long holder or an `until` ≥ 2^53 is `invalid-input`.
    fn lease(&mut self, l: &LeaseIn) -> &mut Self {
        if let Some(f) = l.fence {
            self.number(f);
        }
        let odd = |s: &Option<Text>| {
            s.as_ref()
                .is_some_and(|t| t.0.is_empty() || t.0.len() > 256 || t.0.contains('\0'))
        };
        self.doubt(
            odd(&l.key)
                || odd(&l.resource)
                || odd(&l.holder)
                || l.until.is_some_and(|u| u > MAX_NUMBER),
        )
    }
    /// A task token is no id: an empty or over-long one may be refused
    /// either way.
    fn token(&mut self, t: &Option<Text>) -> &mut Self {
        self.doubt(
            t.as_ref()
                .is_some_and(|t| t.0.is_empty() || t.0.len() > 256 || t.0.contains('\0')),
        )
    }
    /// `claim-batch`'s limit (1-1000).
    fn batch(&mut self, n: u32) -> &mut Self {
        self.flag(n == 0 || n > MAX_BATCH)
    }
    /// A seed's `max-attempts` (1-1000).
    fn max_attempts(&mut self, n: Option<u32>) -> &mut Self {
        self.flag(n.is_some_and(|n| n == 0 || n > MAX_ATTEMPTS))
    }
    /// A group's limit (1-100 000; none removes it).
    fn group_limit(&mut self, n: Option<u32>) -> &mut Self {
        self.flag(n.is_some_and(|n| n == 0 || n > MAX_GROUP_LIMIT))
    }
    /// `fail`'s `retry-after` (0 ms to 1 year).
    fn retry_after(&mut self, ms: Option<u64>) -> &mut Self {
        self.flag(ms.is_some_and(|ms| ms > MAX_TTL))
    }
    fn get(&self) -> Expect {
        self.0
    }
}

// ---------------------------------------------------------------------------
// Two bindings with the same realistic state.

struct Side {
    name: &'static str,
    kernel: Kernel,
    /// Names fresh entities; in step on both sides.
    next: AtomicUsize,
    _dir: Option<tempfile::TempDir>,
}

impl Side {
    fn new(name: &'static str, backend: Arc<dyn Backend>, dir: Option<tempfile::TempDir>) -> Side {
        let clock = Arc::new(ManualClock::at(T0));
        let kernel = Kernel::with_backend(backend, clock).expect("kernel");
        populate(&kernel);
        Side {
            name,
            kernel,
            next: AtomicUsize::new(0),
            _dir: dir,
        }
    }

    fn dump(&self) -> Vec<(String, String, String)> {
        self.kernel.dump().expect("dump the store")
    }

    fn fresh(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// `prefix~N`, a name no call has used yet (the same on both sides;
    /// never one of the pools' `prefix-N` names, which `populate` uses).
    fn fresh_name(&self, prefix: &str) -> String {
        format!("{prefix}~{}", self.fresh())
    }

    /// A live lease on a fresh key and resource.
    fn fresh_lease(&self) -> (Action, Lease) {
        self.grant(Action::new(&self.fresh_name("k"), &self.fresh_name("r")))
    }

    fn grant(&self, action: Action) -> (Action, Lease) {
        match self.kernel.sideeffect().acquire(&action, MAX_TTL).unwrap() {
            Acquired::Granted(lease) => (action, lease),
            other => panic!("{}: fresh key not granted: {other:?}", self.name),
        }
    }

    /// A fresh key (safe or unsafe to retry) marked uncertain, its hold
    /// released: ready to reconcile.
    fn fresh_uncertain(&self, unsafe_to_retry: bool) -> Action {
        let mut action = Action::new(&self.fresh_name("k"), &self.fresh_name("r"));
        if unsafe_to_retry {
            action = action.unsafe_to_retry();
        }
        let (action, lease) = self.grant(action);
        self.mark(&action, &lease);
        action
    }

    fn mark(&self, action: &Action, lease: &Lease) {
        let se = self.kernel.sideeffect();
        se.mark_uncertain(action, lease, "timeout").unwrap();
        se.release(action, lease).unwrap();
    }

    /// A fresh task, claimed: (id, token).
    fn fresh_claim(&self) -> (String, String) {
        let id = self.fresh_name("t");
        let tb = self.kernel.taskboard();
        tb.seed(&[TaskSeed::new(&id)]).unwrap();
        let task = tb.claim(&id, "w1", MAX_TTL).unwrap();
        (id, task.token.expect("claim returns the token"))
    }

    /// A fresh task that failed its only attempt: dead.
    fn fresh_dead(&self) -> String {
        let id = self.fresh_name("t");
        let tb = self.kernel.taskboard();
        tb.seed(&[TaskSeed::new(&id).max_attempts(1)]).unwrap();
        let token = tb.claim(&id, "w1", MAX_TTL).unwrap().token.unwrap();
        let dead = tb.fail(&id, &token, "poison", None).unwrap();
        assert_eq!(dead.state, TaskState::Dead, "{}", self.name);
        id
    }
}

fn populate(k: &Kernel) {
    let snap = Snapshot {
        run_id: "run-1".into(),
        seq: 3,
        fence: Some(2),
        status: "running".into(),
        done: vec!["s1".into()],
        fields: vec![("attempt".into(), "1".into())],
    };
    k.checkpoint().save_if_newer(&snap).unwrap();
    let o = Outcome {
        status: Status::Succeeded,
        result: b"ok".to_vec(),
    };
    k.commitgate().commit("run-2", Some("s1"), 0, &o).unwrap();
    let tb = k.taskboard();
    tb.seed(&[
        TaskSeed::new("t-open"),
        TaskSeed::new("t-dep").deps(&["t-open"]),
        TaskSeed::new("t-claimed"),
        TaskSeed {
            state: Some(TaskState::Done),
            ..TaskSeed::new("t-done")
        },
        TaskSeed {
            state: Some(TaskState::Failed),
            ..TaskSeed::new("t-failed")
        },
    ])
    .unwrap();
    tb.claim("t-claimed", "w9", MAX_TTL).unwrap();
    // The queue's states: a group with a limit and a live claim, a dead task.
    tb.set_group_limit("g-1", Some(2)).unwrap();
    tb.seed(&[
        TaskSeed::new("t-grouped").group("g-1").priority(3),
        TaskSeed::new("t-dead").max_attempts(1),
    ])
    .unwrap();
    tb.claim("t-grouped", "w9", MAX_TTL).unwrap();
    let poison = tb.claim("t-dead", "w9", MAX_TTL).unwrap().token.unwrap();
    tb.fail("t-dead", &poison, "poison", None).unwrap();
    let se = k.sideeffect();
    let grant = |a: &Action| match se.acquire(a, MAX_TTL).unwrap() {
        Acquired::Granted(l) => l,
        other => panic!("populate: {other:?}"),
    };
    grant(&Action::new("k-live", "r-live").with_fingerprint("fp-1"));
    let done = Action::new("k-done", "r-2");
    let l = grant(&done);
    se.complete(&done, &l, b"first").unwrap();
    let unc = Action::new("k-unc", "r-3").unsafe_to_retry();
    let l = grant(&unc);
    se.mark_uncertain(&unc, &l, "timeout").unwrap();
    se.release(&unc, &l).unwrap();
    se.write_fenced("sink-1", 5, |d| d.put("sink-1", "m"))
        .unwrap();
}

struct Env {
    /// Memory and SQLite, with the same history. Replaced by fresh ones
    /// every [`RESET`] calls, so a long soak does not dump an ever larger
    /// store twice per call.
    sides: RefCell<Rc<[Side; 2]>>,
    calls: Cell<usize>,
    /// Per operation: how many calls were answered ok, invalid-input, or
    /// with another refusal (on memory).
    seen: Mutex<BTreeMap<String, [usize; 3]>>,
}

/// Calls between two fresh stores (a default run never resets).
const RESET: usize = 64;

impl Env {
    /// The sides for the next call.
    fn sides(&self) -> Rc<[Side; 2]> {
        let n = self.calls.get();
        self.calls.set(n + 1);
        if n > 0 && n.is_multiple_of(RESET) {
            *self.sides.borrow_mut() = Rc::new(fresh_sides());
        }
        self.sides.borrow().clone()
    }

    fn tally(&self, op: &str, r: &Result<impl Sized, Error>) {
        let slot = match r {
            Ok(_) => 0,
            Err(Error::InvalidInput(_)) => 1,
            Err(_) => 2,
        };
        self.seen.lock().unwrap().entry(op.to_owned()).or_default()[slot] += 1;
    }
}

impl Drop for Env {
    /// The generators must reach both sides of the limits: every operation
    /// was answered ok at least once and refused as invalid-input at least
    /// once (else the property tests nothing). Checked when the property
    /// passed; printed always.
    fn drop(&mut self) {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        // With fewer cases than the default, a miss proves nothing.
        let enough = config().cases >= 64;
        for (op, [ok, invalid, other]) in seen.iter() {
            eprintln!("{op}: {ok} ok, {invalid} invalid-input, {other} other refusals");
            if enough && !std::thread::panicking() {
                assert!(*ok > 0, "{op}: never answered ok");
                assert!(
                    *invalid > 0 || op == "checkpoint.build-plan",
                    "{op}: never refused as invalid-input"
                );
            }
        }
    }
}

fn fresh_sides() -> [Side; 2] {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("fuzz.db");
    let sqlite = gak::blocking::run_future(gak::store::open(&format!("sqlite:{}", path.display())))
        .expect("sqlite");
    [
        Side::new("memory", Arc::new(MemoryBackend::default()), None),
        Side::new("sqlite", sqlite, Some(dir)),
    ]
}

fn env() -> Env {
    Env {
        sides: RefCell::new(Rc::new(fresh_sides())),
        calls: Cell::new(0),
        seen: Mutex::default(),
    }
}

// ---------------------------------------------------------------------------
// One call on both bindings, judged.

fn is_hex128(s: &str) -> bool {
    s.len() == 32
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// How a call is judged.
struct Call<'a> {
    op: &'a str,
    expect: Expect,
    /// The store must not change even on success (reads, build-plan).
    pure: bool,
}

impl<'a> Call<'a> {
    fn new(op: &'a str, expect: Expect) -> Self {
        Call {
            op,
            expect,
            pure: false,
        }
    }
    fn pure(op: &'a str, expect: Expect) -> Self {
        Call {
            op,
            expect,
            pure: true,
        }
    }
}

/// The override, or the prepared name.
fn fresh_or(over: &Option<Text>, fresh: String) -> String {
    over.as_ref().map_or(fresh, |t| t.0.clone())
}

/// Run `call` on each side (after `prepare`), judge it, run `after_ok` on a
/// success; both sides must answer alike (`label` strips random tokens).
fn exercise<P, T>(
    env: &Env,
    how: Call<'_>,
    prepare: impl Fn(&Side) -> P,
    call: impl Fn(&Side, &P) -> Result<T, Error>,
    label: impl Fn(&T) -> String,
    after_ok: impl Fn(&Side, &P, &T) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    let op = how.op;
    let mut answers = Vec::new();
    let sides = env.sides();
    for side in sides.iter() {
        let p = prepare(side);
        let before = side.dump();
        let got = call(side, &p);
        if side.name == "memory" {
            env.tally(op, &got);
        }
        let answer = match &got {
            Ok(v) => format!("ok {}", label(v)),
            Err(e) => format!("err {e}"),
        };
        if let Err(Error::Storage(m)) = &got {
            let trapped = if m.message().contains("trapped") {
                " — the component TRAPPED"
            } else {
                ""
            };
            return Err(TestCaseError::fail(format!(
                "{op} on {}: storage{trapped}: {}",
                side.name,
                short(m.message())
            )));
        }
        match (how.expect, &got) {
            (Expect::Invalid, Err(Error::InvalidInput(_))) => {}
            (Expect::Invalid, _) => {
                return Err(TestCaseError::fail(format!(
                    "{op} on {}: out-of-limit input must be invalid-input, got {}",
                    side.name,
                    short(&answer)
                )));
            }
            (Expect::Valid, Err(Error::InvalidInput(m))) => {
                return Err(TestCaseError::fail(format!(
                    "{op} on {}: input within the limits refused as invalid-input: {m}",
                    side.name
                )));
            }
            _ => {}
        }
        if got.is_err() || how.pure {
            prop_assert!(
                side.dump() == before,
                "{} on {}: answered {} but changed the store",
                op,
                side.name,
                short(&answer)
            );
        }
        if let Ok(v) = &got {
            after_ok(side, &p, v)?;
        }
        answers.push(answer);
    }
    prop_assert!(
        answers[0] == answers[1],
        "{}: memory answered {} but sqlite {}",
        op,
        short(&answers[0]),
        short(&answers[1])
    );
    Ok(())
}

fn nothing(_: &Side) {}

fn no_check<P, T>(_: &Side, _: &P, _: &T) -> Result<(), TestCaseError> {
    Ok(())
}

fn unit(_: &()) -> String {
    String::new()
}

fn acquired_label(a: &Acquired) -> String {
    match a {
        Acquired::Granted(l) => format!("granted fence={} until={}", l.fence, l.until),
        other => short(&format!("{other:?}")),
    }
}

fn task_label(t: &Task) -> String {
    short(&format!(
        "{} {:?} fence={} owner={:?} until={:?} token={}",
        t.id,
        t.state,
        t.fence,
        t.owner,
        t.until,
        t.token.is_some()
    ))
}

fn bytes_label(b: &[u8]) -> String {
    format!("{:?}", Bytes(b.to_vec()))
}

// ---------------------------------------------------------------------------
// Checkpoint.

#[derive(Clone, Debug)]
struct SnapIn {
    run: Option<Text>,
    seq: u64,
    fence: Option<u64>,
    status: Text,
    done: Vec<Text>,
    fields: Vec<(Text, Text)>,
    sorted: bool,
}

impl SnapIn {
    fn build(&self, fresh_run: &str) -> Snapshot {
        let mut fields: Vec<(String, String)> = self
            .fields
            .iter()
            .map(|(k, v)| (k.0.clone(), v.0.clone()))
            .collect();
        if self.sorted {
            fields.sort();
            fields.dedup_by(|a, b| a.0 == b.0);
        }
        Snapshot {
            run_id: self
                .run
                .as_ref()
                .map_or(fresh_run.to_owned(), |t| t.0.clone()),
            seq: self.seq,
            fence: self.fence,
            status: self.status.0.clone(),
            done: self.done.iter().map(|d| d.0.clone()).collect(),
            fields,
        }
    }
}

fn snap_in(wild: bool) -> impl Strategy<Value = SnapIn> {
    (
        over(RUNS, wild),
        number(wild),
        option::of(number(wild)),
        free_text(wild),
        vec(name(STEPS, wild), 0..4),
        vec((name(FIELD_KEYS, wild), free_text(wild)), 0..3),
        prop::bool::weighted(if wild { 0.7 } else { 1.0 }),
    )
        .prop_map(|(run, seq, fence, status, done, fields, sorted)| SnapIn {
            run,
            seq,
            fence,
            status,
            done,
            fields,
            sorted,
        })
}

fn judge_snapshot(j: &mut Judge, s: &Snapshot) {
    j.id(&s.run_id).number(s.seq);
    if let Some(f) = s.fence {
        j.number(f);
    }
    j.flag(s.status.is_empty() || s.status.len() > 256 || s.status.contains('\0'));
    j.flag(
        s.fields
            .iter()
            .any(|(k, v)| k.contains('\0') || v.contains('\0')),
    );
    j.ids(s.done.iter().map(String::as_str));
    let unsorted = s.fields.windows(2).any(|w| w[0].0 >= w[1].0);
    let size: usize = s.fields.iter().map(|(k, v)| k.len() + v.len()).sum();
    j.flag(unsorted || size > MIB);
}

fn save_if_newer_with_arbitrary_snapshots() {
    let env = env();
    check(cases(snap_in), |(_, input)| {
        let mut j = Judge::new();
        judge_snapshot(&mut j, &input.build(FRESH));
        exercise(
            &env,
            Call::new("checkpoint.save-if-newer", j.get()),
            |s| input.build(&s.fresh_name("run")),
            |s, snap| s.kernel.checkpoint().save_if_newer(snap),
            unit,
            |s, snap, ()| {
                // Whatever the strings, they come back byte for byte.
                let loaded = s.kernel.checkpoint().load(&snap.run_id);
                prop_assert!(
                    loaded.as_ref() == Ok(snap),
                    "{}: saved {:?}, loaded back {}",
                    s.name,
                    input,
                    short(&format!("{loaded:?}"))
                );
                Ok(())
            },
        )
    });
}

fn load_with_arbitrary_run_ids() {
    let env = env();
    check(cases(|w| name(RUNS, w)), |(_, run)| {
        let mut j = Judge::new();
        j.id(&run.0);
        exercise(
            &env,
            Call::pure("checkpoint.load", j.get()),
            nothing,
            |s, ()| s.kernel.checkpoint().load(&run.0),
            |snap| short(&format!("{snap:?}")),
            no_check,
        )
    });
}

fn build_plan_with_arbitrary_steps() {
    let env = env();
    let args = |w| {
        (
            vec((name(STEPS, w), vec(name(STEPS, w), 0..3)), 0..6),
            option::weighted(0.5, snap_in(w)),
        )
    };
    check(cases(args), |(_, (steps, snap))| {
        let steps: Vec<StepDef> = steps
            .iter()
            .map(|(id, deps)| StepDef {
                id: id.0.clone(),
                depends_on: deps.iter().map(|d| d.0.clone()).collect(),
            })
            .collect();
        let snap = snap.map(|s| s.build("run-1"));
        let bad_id = |s: &str| s.is_empty() || s.len() > 256;
        let bad_step = steps
            .iter()
            .any(|s| bad_id(&s.id) || s.depends_on.iter().any(|d| bad_id(d)));
        exercise(
            &env,
            // Pure: not even a successful plan may touch the store.
            Call::pure("checkpoint.build-plan", Expect::Either),
            nothing,
            |s, ()| s.kernel.checkpoint().build_plan(&steps, snap.as_ref()),
            |p| short(&format!("{p:?}")),
            |s, (), plan| {
                let mut planned: Vec<&String> = plan.skip.iter().chain(&plan.run).collect();
                let mut declared: Vec<&String> = steps.iter().map(|s| &s.id).collect();
                planned.sort();
                declared.sort();
                prop_assert_eq!(
                    planned,
                    declared,
                    "{}: skip + run must be the steps",
                    s.name
                );
                Ok(())
            },
        )?;
        // SPEC 8: a step id problem inside build-plan is invalid-plan.
        if snap.is_none() && bad_step {
            let plan = env.sides()[0].kernel.checkpoint().build_plan(&steps, None);
            prop_assert!(
                matches!(plan, Err(Error::InvalidPlan(_))),
                "bad step ids must be invalid-plan, got {:?}",
                plan
            );
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------
// Commitgate.

fn commit_with_arbitrary_arguments() {
    let env = env();
    let args = |w| {
        (
            over(RUNS, w),
            option::of(name(STEPS, w)),
            number(w),
            status(),
            bytes(w),
        )
    };
    check(cases(args), |(_, (run, step, fence, status, result))| {
        let step = step.map(|s| s.0);
        let mut j = Judge::new();
        j.over(&run).number(fence).payload(result.0.len());
        if let Some(s) = &step {
            j.id(s);
        }
        let outcome = Outcome {
            status,
            result: result.0.clone(),
        };
        exercise(
            &env,
            Call::new("commitgate.commit", j.get()),
            |s| fresh_or(&run, s.fresh_name("run")),
            |s, run| {
                s.kernel
                    .commitgate()
                    .commit(run, step.as_deref(), fence, &outcome)
            },
            |o| format!("{:?} {:?}", o.status, Bytes(o.result.clone())),
            |s, run, got| {
                prop_assert!(
                    got == &outcome,
                    "{}: commit answered another outcome",
                    s.name
                );
                let read = s.kernel.commitgate().read(run, step.as_deref());
                prop_assert!(
                    read.as_ref() == Ok(&outcome),
                    "{}: read back differs",
                    s.name
                );
                Ok(())
            },
        )
    });
}

fn read_with_arbitrary_arguments() {
    let env = env();
    let args = |w| (name(&["run-2"], w), option::weighted(0.8, name(&["s1"], w)));
    check(cases(args), |(_, (run, step))| {
        let step = step.map(|s| s.0);
        let mut j = Judge::new();
        j.id(&run.0);
        if let Some(s) = &step {
            j.id(s);
        }
        exercise(
            &env,
            Call::pure("commitgate.read", j.get()),
            nothing,
            |s, ()| s.kernel.commitgate().read(&run.0, step.as_deref()),
            |o| short(&format!("{o:?}")),
            no_check,
        )
    });
}

// ---------------------------------------------------------------------------
// Side effects.

/// An action: the prepared one with some fields replaced.
#[derive(Clone, Debug)]
struct ActionIn {
    key: Option<Text>,
    resource: Option<Text>,
    retry_safety: RetrySafety,
    fingerprint: Option<Text>,
}

impl ActionIn {
    fn over(&self, base: &Action) -> Action {
        Action {
            key: fresh_or(&self.key, base.key.clone()),
            resource: fresh_or(&self.resource, base.resource.clone()),
            retry_safety: self.retry_safety,
            fingerprint: self.fingerprint.as_ref().map(|t| t.0.clone()),
        }
    }
}

fn action_in(wild: bool) -> impl Strategy<Value = ActionIn> {
    (
        over(KEYS, wild),
        over(RESOURCES, wild),
        retry_safety(),
        option::weighted(if wild { 0.5 } else { 0.1 }, name(FINGERPRINTS, wild)),
    )
        .prop_map(|(key, resource, retry_safety, fingerprint)| ActionIn {
            key,
            resource,
            retry_safety,
            fingerprint,
        })
}

/// A presented lease: the prepared one with some fields replaced.
#[derive(Clone, Debug)]
struct LeaseIn {
    key: Option<Text>,
    resource: Option<Text>,
    fence: Option<u64>,
    holder: Option<Text>,
    until: Option<u64>,
}

impl LeaseIn {
    fn over(&self, base: &Lease) -> Lease {
        Lease {
            key: fresh_or(&self.key, base.key.clone()),
            resource: fresh_or(&self.resource, base.resource.clone()),
            fence: self.fence.unwrap_or(base.fence),
            holder: fresh_or(&self.holder, base.holder.clone()),
            until: self.until.unwrap_or(base.until),
        }
    }
}

fn lease_in(wild: bool) -> impl Strategy<Value = LeaseIn> {
    let p = if wild { 0.4 } else { 0.05 };
    (
        option::weighted(p, name(KEYS, wild)),
        option::weighted(p, name(RESOURCES, wild)),
        option::weighted(p, number(wild)),
        option::weighted(p, name(TOKENS, wild)),
        option::weighted(p, number(wild)),
    )
        .prop_map(|(key, resource, fence, holder, until)| LeaseIn {
            key,
            resource,
            fence,
            holder,
            until,
        })
}

fn acquire_with_arbitrary_actions() {
    let env = env();
    check(cases(|w| (action_in(w), ttl(w))), |(_, (a, ttl))| {
        let mut j = Judge::new();
        j.action(&a).ttl(ttl);
        exercise(
            &env,
            Call::new("sideeffect.acquire", j.get()),
            |s| {
                let n = s.fresh();
                a.over(&Action::new(&format!("k-{n}"), &format!("r-{n}")))
            },
            |s, action| s.kernel.sideeffect().acquire(action, ttl),
            acquired_label,
            |s, action, got| {
                if let Acquired::Granted(l) = got {
                    prop_assert!(l.key == action.key && l.resource == action.resource);
                    prop_assert!((1..=MAX_NUMBER).contains(&l.fence), "fence {}", l.fence);
                    prop_assert!(is_hex128(&l.holder), "{}: holder {:?}", s.name, l.holder);
                    prop_assert_eq!(l.until, T0 + ttl);
                }
                Ok(())
            },
        )
    });
}

/// What a lease call does.
#[derive(Clone, Copy, Debug)]
enum LeaseOp {
    Complete,
    Release,
    Abandon,
    Renew,
    MarkUncertain,
}

fn lease_property(op: LeaseOp) {
    let env = env();
    let args = |w| (action_in(w), lease_in(w), bytes(w), free_text(w), ttl(w));
    let name = format!("sideeffect.{op:?}");
    check(cases(args), |(_, (a, l, result, reason, ttl))| {
        let mut j = Judge::new();
        j.action(&a).lease(&l);
        match op {
            LeaseOp::Complete => j.payload(result.0.len()),
            LeaseOp::Abandon | LeaseOp::MarkUncertain => j.reason(&reason.0),
            LeaseOp::Renew => j.ttl(ttl),
            LeaseOp::Release => &mut j,
        };
        exercise(
            &env,
            Call::new(&name, j.get()),
            |s| {
                let (base, lease) = s.fresh_lease();
                (a.over(&base), l.over(&lease))
            },
            |s, (action, lease)| {
                let se = s.kernel.sideeffect();
                match op {
                    LeaseOp::Complete => se
                        .complete(action, lease, &result.0)
                        .map(|r| bytes_label(&r)),
                    LeaseOp::Release => se.release(action, lease).map(|()| String::new()),
                    LeaseOp::Abandon => {
                        se.abandon(action, lease, &reason.0).map(|()| String::new())
                    }
                    LeaseOp::Renew => se
                        .renew(action, lease, ttl)
                        .map(|l| format!("fence={} until={}", l.fence, l.until)),
                    LeaseOp::MarkUncertain => se
                        .mark_uncertain(action, lease, &reason.0)
                        .map(|()| String::new()),
                }
            },
            |answer| answer.clone(),
            |s, (action, _), _| {
                // The verdict is readable: the next acquire follows from it.
                let next = s.kernel.sideeffect().acquire(action, 1_000);
                let fits = match op {
                    LeaseOp::Complete => {
                        matches!(next, Ok(Acquired::Replayed(_)) | Err(Error::KeyReused))
                    }
                    LeaseOp::MarkUncertain => {
                        matches!(next, Ok(Acquired::Uncertain(_)) | Err(Error::KeyReused))
                    }
                    LeaseOp::Release | LeaseOp::Renew => {
                        matches!(next, Ok(Acquired::InFlight) | Err(Error::KeyReused))
                    }
                    LeaseOp::Abandon => !matches!(next, Err(Error::Storage(_))),
                };
                prop_assert!(fits, "{}: acquire after {:?}: {:?}", s.name, op, next);
                Ok(())
            },
        )
    });
}

fn complete_with_arbitrary_leases() {
    lease_property(LeaseOp::Complete);
}

fn release_with_arbitrary_leases() {
    lease_property(LeaseOp::Release);
}

fn abandon_with_arbitrary_leases() {
    lease_property(LeaseOp::Abandon);
}

fn renew_with_arbitrary_leases() {
    lease_property(LeaseOp::Renew);
}

fn mark_uncertain_with_arbitrary_leases() {
    lease_property(LeaseOp::MarkUncertain);
}

fn begin_reconcile_with_arbitrary_arguments() {
    let env = env();
    check(
        cases(|w| (action_in(w), ttl(w), any::<bool>())),
        |(_, (a, ttl, unsafe_key))| {
            let mut j = Judge::new();
            j.action(&a).ttl(ttl);
            exercise(
                &env,
                Call::new("sideeffect.begin-reconcile", j.get()),
                |s| a.over(&s.fresh_uncertain(unsafe_key)),
                |s, action| s.kernel.sideeffect().begin_reconcile(action, ttl),
                |c| format!("until={}", c.until),
                |s, _, c| {
                    prop_assert!(is_hex128(&c.claim), "{}: claim {:?}", s.name, c.claim);
                    prop_assert_eq!(c.until, T0 + ttl);
                    Ok(())
                },
            )
        },
    );
}

fn resolve_uncertain_with_arbitrary_arguments() {
    let env = env();
    let args = |w| {
        (
            action_in(w),
            any::<bool>(),
            option::of(bytes(w)),
            any::<bool>(),
            any::<bool>(),
        )
    };
    check(
        cases(args),
        |(_, (a, applied, result, force, unsafe_key))| {
            let mut j = Judge::new();
            j.action(&a);
            if let Some(r) = &result {
                j.payload(r.0.len());
            }
            let resolution = Resolution {
                applied,
                result: result.as_ref().map(|r| r.0.clone()),
                force_retryable: force,
                claim: None,
            };
            exercise(
                &env,
                Call::new("sideeffect.resolve-uncertain", j.get()),
                |s| a.over(&s.fresh_uncertain(unsafe_key)),
                |s, action| s.kernel.sideeffect().resolve_uncertain(action, &resolution),
                |r| short(&format!("{r:?}")),
                |s, action, r| {
                    let next = s.kernel.sideeffect().acquire(action, 1_000);
                    match r {
                        Resolved::Replayed(first) => prop_assert!(
                            matches!(&next, Ok(Acquired::Replayed(x)) if x == first)
                                || next == Err(Error::KeyReused),
                            "{}: resolved applied, then acquire {}",
                            s.name,
                            short(&format!("{next:?}"))
                        ),
                        Resolved::Cleared => prop_assert!(
                            !matches!(next, Err(Error::Storage(_)))
                                && !matches!(next, Ok(Acquired::Uncertain(_))),
                            "{}: cleared, then acquire {:?}",
                            s.name,
                            next
                        ),
                    }
                    Ok(())
                },
            )
        },
    );
}

fn write_fenced_with_arbitrary_arguments() {
    let env = env();
    let args = |w| {
        (
            over(SINKS, w),
            number(w),
            free_text(w),
            prop::bool::weighted(0.25),
        )
    };
    check(cases(args), |(_, (resource, presented, value, fail))| {
        let mut j = Judge::new();
        // A NUL in the body's value: its `put` is refused (invalid-input,
        // no binding stores it alike) — unless the fence is refused first.
        let nul = value.0.contains('\0');
        j.over(&resource).number(presented).doubt(nul);
        exercise(
            &env,
            Call::new("sideeffect.write-fenced", j.get()),
            |s| fresh_or(&resource, s.fresh_name("sink")),
            |s, resource| {
                let written = s
                    .kernel
                    .sideeffect()
                    .write_fenced(resource, presented, |d| {
                        d.put(resource, &value.0)?;
                        if fail {
                            return Err(Error::WriteFailed);
                        }
                        Ok(())
                    });
                match written {
                    Ok(()) => Ok(()),
                    Err(SinkError::Kernel(e)) => Err(e),
                    Err(SinkError::Body(e @ Error::InvalidInput(_))) if nul => Err(e),
                    Err(SinkError::Body(e)) => {
                        assert!(fail, "the body failed unasked: {e:?}");
                        Err(Error::WriteFailed)
                    }
                }
            },
            unit,
            |s, resource, ()| {
                prop_assert!(!fail);
                let seen = s.kernel.sideeffect().sink_seen(resource);
                prop_assert_eq!(seen, Ok(presented), "{}", s.name);
                let stored = s.kernel.with_downstream(|d| d.get(resource));
                prop_assert!(
                    stored.as_ref() == Ok(&Some(value.0.clone())),
                    "{}: the body's write did not round-trip",
                    s.name
                );
                Ok(())
            },
        )
    });
}

fn sink_seen_with_arbitrary_resources() {
    let env = env();
    check(cases(|w| name(SINKS, w)), |(_, resource)| {
        let mut j = Judge::new();
        j.id(&resource.0);
        exercise(
            &env,
            Call::pure("sideeffect.sink-seen", j.get()),
            nothing,
            |s, ()| s.kernel.sideeffect().sink_seen(&resource.0),
            |n| n.to_string(),
            |_, (), n| {
                prop_assert!(*n <= MAX_NUMBER);
                Ok(())
            },
        )
    });
}

// ---------------------------------------------------------------------------
// Taskboard.

#[derive(Clone, Debug)]
struct SeedIn {
    id: Text,
    title: Option<Text>,
    deps: Vec<Text>,
    state: Option<TaskState>,
    priority: Option<i32>,
    not_before: Option<u64>,
    max_attempts: Option<u32>,
    group: Option<Text>,
}

fn seed_in(wild: bool) -> impl Strategy<Value = SeedIn> {
    let priority = prop_oneof![
        3 => -3i32..4,
        1 => prop::sample::select(vec![i32::MIN, i32::MIN + 1, i32::MAX]),
    ];
    // Past, now, future, at the top of the range; wild, also over it.
    let not_before = prop_oneof![
        1 => prop::sample::select(vec![0, T0 - 1, T0, T0 + 1]),
        1 => number(wild),
    ];
    (
        (
            name(TASKS, wild),
            option::of(free_text(wild)),
            vec(name(TASKS, wild), 0..3),
            option::of(task_state(wild)),
        ),
        (
            option::of(priority),
            option::weighted(0.3, not_before),
            option::weighted(0.3, count(MAX_ATTEMPTS, wild)),
            option::weighted(0.3, name(GROUPS, wild)),
        ),
    )
        .prop_map(
            |((id, title, deps, state), (priority, not_before, max_attempts, group))| SeedIn {
                id,
                title,
                deps,
                state,
                priority,
                not_before,
                max_attempts,
                group,
            },
        )
}

fn seed_and_list_with_arbitrary_tasks() {
    let env = env();
    check(cases(|w| vec(seed_in(w), 0..3)), |(_, tasks)| {
        let seeds: Vec<TaskSeed> = tasks
            .iter()
            .map(|t| TaskSeed {
                id: t.id.0.clone(),
                title: t.title.as_ref().map(|x| x.0.clone()),
                deps: t.deps.iter().map(|d| d.0.clone()).collect(),
                state: t.state,
                priority: t.priority,
                not_before: t.not_before,
                max_attempts: t.max_attempts,
                group: t.group.as_ref().map(|g| g.0.clone()),
            })
            .collect();
        let mut j = Judge::new();
        for (i, t) in seeds.iter().enumerate() {
            j.id(&t.id).ids(t.deps.iter().map(String::as_str));
            // Titles: at most 4 KiB, no U+0000 (WIT `types`).
            j.flag(
                t.title
                    .as_ref()
                    .is_some_and(|x| x.len() > 4096 || x.contains('\0')),
            );
            j.flag(matches!(
                t.state,
                Some(TaskState::Claimed | TaskState::Dead)
            ));
            j.flag(seeds[..i].iter().any(|u| u.id == t.id));
            // The queue's fields (SPEC 10): not-before below 2^53,
            // max-attempts 1-1000, a group is an id; any priority.
            if let Some(at) = t.not_before {
                j.number(at);
            }
            j.max_attempts(t.max_attempts);
            if let Some(g) = &t.group {
                j.id(g);
            }
        }
        exercise(
            &env,
            Call::new("taskboard.seed", j.get()),
            nothing,
            |s, ()| s.kernel.taskboard().seed(&seeds),
            unit,
            |s, (), ()| {
                let board = s.kernel.taskboard().list(None, None, 1000).map(|p| p.items);
                let Ok(board) = board else {
                    return Err(TestCaseError::fail(format!("{}: list {board:?}", s.name)));
                };
                prop_assert!(
                    board
                        .windows(2)
                        .all(|w| w[0].id.as_bytes() < w[1].id.as_bytes()),
                    "{}: list not ordered by id",
                    s.name
                );
                prop_assert!(
                    board.iter().all(|t| t.token.is_none()),
                    "{}: list shows a token",
                    s.name
                );
                for seed in &seeds {
                    let Some(t) = board.iter().find(|t| t.id == seed.id) else {
                        return Err(TestCaseError::fail(format!(
                            "{}: seeded {} not listed",
                            s.name,
                            short(&seed.id)
                        )));
                    };
                    prop_assert_eq!(&t.title, seed.title.as_deref().unwrap_or(""));
                    prop_assert_eq!(&t.deps, &seed.deps);
                    prop_assert_eq!(t.state, seed.state.unwrap_or(TaskState::Open));
                    prop_assert!(t.until.is_none(), "{}: re-seeding keeps a lease", s.name);
                    prop_assert_eq!(t.priority, seed.priority.unwrap_or(0));
                    prop_assert_eq!(t.not_before, seed.not_before);
                    prop_assert_eq!(t.max_attempts, seed.max_attempts);
                    prop_assert_eq!(&t.group, &seed.group);
                    prop_assert_eq!(
                        (t.attempts, t.last_error.as_deref()),
                        (0, None),
                        "{}: a seed resets attempts and last-error",
                        s.name
                    );
                }
                Ok(())
            },
        )
    });
}

fn claim_with_arbitrary_arguments() {
    let env = env();
    check(
        cases(|w| (over(TASKS, w), name(AGENTS, w), ttl(w))),
        |(_, (id, agent, ttl))| {
            let mut j = Judge::new();
            j.over(&id).id(&agent.0).ttl(ttl);
            exercise(
                &env,
                Call::new("taskboard.claim", j.get()),
                |s| {
                    let fresh = s.fresh_name("t");
                    s.kernel.taskboard().seed(&[TaskSeed::new(&fresh)]).unwrap();
                    fresh_or(&id, fresh)
                },
                |s, id| s.kernel.taskboard().claim(id, &agent.0, ttl),
                task_label,
                |s, id, t| {
                    prop_assert_eq!(&t.id, id);
                    prop_assert_eq!(t.state, TaskState::Claimed);
                    prop_assert_eq!(t.owner.as_deref(), Some(agent.0.as_str()));
                    prop_assert!(t.token.as_deref().is_some_and(is_hex128), "{}", s.name);
                    prop_assert_eq!(t.until, Some(T0 + ttl));
                    prop_assert!((1..=MAX_NUMBER).contains(&t.fence));
                    Ok(())
                },
            )
        },
    );
}

#[derive(Clone, Copy, Debug)]
enum TokenOp {
    Release,
    Complete,
    Renew,
}

fn token_property(op: TokenOp) {
    let env = env();
    let args = |w: bool| {
        (
            // Wild: mostly overridden, since the token alone is never
            // out of the limits.
            option::weighted(if w { 0.8 } else { 0.2 }, name(TASKS, w)),
            option::weighted(if w { 0.6 } else { 0.1 }, name(TOKENS, w)),
            ttl(w),
        )
    };
    let name = format!("taskboard.{op:?}");
    check(cases(args), |(_, (id, token, ttl))| {
        let mut j = Judge::new();
        j.over(&id).token(&token);
        if let TokenOp::Renew = op {
            j.ttl(ttl);
        }
        exercise(
            &env,
            Call::new(&name, j.get()),
            |s| {
                let (fresh, real) = s.fresh_claim();
                (fresh_or(&id, fresh), fresh_or(&token, real))
            },
            |s, (id, token)| {
                let tb = s.kernel.taskboard();
                match op {
                    TokenOp::Release => tb.release(id, token).map(|()| String::new()),
                    TokenOp::Complete => tb.complete(id, token).map(|()| String::new()),
                    TokenOp::Renew => tb.renew(id, token, ttl).map(|t| task_label(&t)),
                }
            },
            |answer| answer.clone(),
            |s, (id, token), _| {
                let listed = s
                    .kernel
                    .taskboard()
                    .list(None, None, 1000)
                    .map(|p| p.items)
                    .unwrap();
                let t = listed.iter().find(|t| &t.id == id).expect("listed");
                let want = match op {
                    TokenOp::Release => TaskState::Open,
                    TokenOp::Complete => TaskState::Done,
                    TokenOp::Renew => TaskState::Claimed,
                };
                prop_assert_eq!(t.state, want, "{}", s.name);
                if let TokenOp::Renew = op {
                    prop_assert_eq!(t.until, Some(T0 + ttl));
                    let renewed = s.kernel.taskboard().renew(id, token, 1).unwrap();
                    prop_assert_eq!(renewed.token.as_deref(), Some(token.as_str()));
                }
                Ok(())
            },
        )
    });
}

fn release_task_with_arbitrary_arguments() {
    token_property(TokenOp::Release);
}

fn complete_task_with_arbitrary_arguments() {
    token_property(TokenOp::Complete);
}

fn renew_task_with_arbitrary_arguments() {
    token_property(TokenOp::Renew);
}

// ---------------------------------------------------------------------------
// The job queue (SPEC 10).

#[allow(clippy::ptr_arg)] // a label of `exercise`, whose answers are `Vec<Task>`
fn tasks_label(tasks: &Vec<Task>) -> String {
    let all: Vec<String> = tasks.iter().map(task_label).collect();
    format!("[{}]", all.join(", "))
}

fn claim_batch_with_arbitrary_arguments() {
    let env = env();
    check(
        cases(|w| (name(AGENTS, w), ttl(w), count(MAX_BATCH, w))),
        |(_, (agent, ttl, limit))| {
            let mut j = Judge::new();
            j.id(&agent.0).ttl(ttl).batch(limit);
            exercise(
                &env,
                Call::new("taskboard.claim-batch", j.get()),
                |s| {
                    // Something to claim: two fresh tasks, one above the
                    // default priority.
                    let high = s.fresh_name("t");
                    let plain = s.fresh_name("t");
                    s.kernel
                        .taskboard()
                        .seed(&[TaskSeed::new(&high).priority(1), TaskSeed::new(&plain)])
                        .unwrap();
                },
                |s, ()| s.kernel.taskboard().claim_batch(&agent.0, ttl, limit),
                tasks_label,
                |s, (), batch| {
                    prop_assert!(
                        !batch.is_empty() && batch.len() <= limit as usize,
                        "{}: {} tasks for limit {limit}",
                        s.name,
                        batch.len()
                    );
                    let mut ids: Vec<&str> = batch.iter().map(|t| t.id.as_str()).collect();
                    ids.sort_unstable();
                    ids.dedup();
                    prop_assert_eq!(ids.len(), batch.len(), "{}: a task granted twice", s.name);
                    prop_assert!(
                        batch.windows(2).all(|w| w[0].priority >= w[1].priority),
                        "{}: not in priority order",
                        s.name
                    );
                    for t in batch {
                        prop_assert_eq!(t.state, TaskState::Claimed);
                        prop_assert_eq!(t.owner.as_deref(), Some(agent.0.as_str()));
                        prop_assert!(t.token.as_deref().is_some_and(is_hex128), "{}", s.name);
                        prop_assert_eq!(t.until, Some(T0 + ttl));
                        prop_assert!(t.attempts >= 1, "{}: attempts not counted", s.name);
                    }
                    Ok(())
                },
            )
        },
    );
}

/// `complete-batch`'s items: each a prepared (fresh, claimed) task and its
/// token, or an override; or a list out of the limits.
#[derive(Clone, Debug)]
enum BatchIn {
    Items(Vec<(Option<Text>, Option<Text>)>),
    Empty,
    /// 1001 items.
    TooMany,
    /// A prepared item given twice.
    Duplicate,
}

fn batch_in(wild: bool) -> BoxedStrategy<BatchIn> {
    let item = (
        option::weighted(if wild { 0.5 } else { 0.1 }, name(TASKS, wild)),
        option::weighted(if wild { 0.5 } else { 0.1 }, name(TOKENS, wild)),
    );
    let items = vec(item, 1..4).prop_map(BatchIn::Items);
    if wild {
        prop_oneof![
            3 => items,
            1 => Just(BatchIn::Empty),
            1 => Just(BatchIn::TooMany),
            1 => Just(BatchIn::Duplicate),
        ]
        .boxed()
    } else {
        items.boxed()
    }
}

fn complete_batch_with_arbitrary_items() {
    let env = env();
    check(cases(batch_in), |(_, batch)| {
        let mut j = Judge::new();
        match &batch {
            BatchIn::Items(items) => {
                // Ids and tokens are both ids here (1-256 bytes, no NUL);
                // distinct ids (the prepared ones always are).
                for (id, token) in items {
                    j.over(id).over(token);
                }
                let overridden: Vec<&str> = items
                    .iter()
                    .filter_map(|(id, _)| id.as_ref().map(|t| t.0.as_str()))
                    .collect();
                j.flag(
                    overridden
                        .iter()
                        .enumerate()
                        .any(|(i, a)| overridden[..i].contains(a)),
                );
            }
            BatchIn::Empty | BatchIn::TooMany | BatchIn::Duplicate => {
                j.flag(true);
            }
        }
        exercise(
            &env,
            Call::new("taskboard.complete-batch", j.get()),
            |s| -> Vec<(Completion, bool)> {
                match &batch {
                    BatchIn::Items(items) => items
                        .iter()
                        .map(|(id, token)| {
                            let (fresh, real) = s.fresh_claim();
                            let prepared = id.is_none() && token.is_none();
                            (
                                Completion::new(&fresh_or(id, fresh), &fresh_or(token, real)),
                                prepared,
                            )
                        })
                        .collect(),
                    BatchIn::Empty => vec![],
                    BatchIn::TooMany => (0..=MAX_BATCH)
                        .map(|i| (Completion::new(&format!("none-{i}"), TOKENS[0]), false))
                        .collect(),
                    BatchIn::Duplicate => {
                        let (id, token) = s.fresh_claim();
                        let item = Completion::new(&id, &token);
                        vec![(item.clone(), true), (item, true)]
                    }
                }
            },
            |s, items| {
                let items: Vec<Completion> = items.iter().map(|(c, _)| c.clone()).collect();
                s.kernel.taskboard().complete_batch(&items)
            },
            |answers| {
                let all: Vec<String> = answers
                    .iter()
                    .map(|a| format!("{}: {}", short(&a.id), a.answer.name()))
                    .collect();
                all.join(", ")
            },
            |s, items, answers: &Vec<CompletionResult>| {
                prop_assert_eq!(answers.len(), items.len());
                for ((item, prepared), answer) in items.iter().zip(answers) {
                    prop_assert_eq!(&answer.id, &item.id, "{}: answers out of order", s.name);
                    if *prepared {
                        prop_assert_eq!(answer.answer, CompletionAnswer::Completed);
                    }
                    if answer.answer == CompletionAnswer::Completed {
                        let t = s.kernel.taskboard().get(&item.id).unwrap();
                        prop_assert_eq!(t.state, TaskState::Done, "{}", s.name);
                    }
                }
                Ok(())
            },
        )
    });
}

fn fail_with_arbitrary_arguments() {
    let env = env();
    let args = |w: bool| {
        (
            option::weighted(if w { 0.5 } else { 0.1 }, name(TASKS, w)),
            option::weighted(if w { 0.4 } else { 0.1 }, name(TOKENS, w)),
            free_text(w),
            retry_after(w),
        )
    };
    check(cases(args), |(_, (id, token, reason, retry))| {
        let mut j = Judge::new();
        j.over(&id)
            .token(&token)
            .reason(&reason.0)
            .retry_after(retry);
        exercise(
            &env,
            Call::new("taskboard.fail", j.get()),
            |s| {
                let (fresh, real) = s.fresh_claim();
                (fresh_or(&id, fresh), fresh_or(&token, real))
            },
            |s, (id, token)| s.kernel.taskboard().fail(id, token, &reason.0, retry),
            task_label,
            |s, (id, token), t| {
                prop_assert_eq!(&t.id, id);
                // A fresh task has no bound on its attempts: failed, not dead.
                prop_assert_eq!(t.state, TaskState::Failed, "{}", s.name);
                prop_assert_eq!(t.last_error.as_deref(), Some(reason.0.as_str()));
                prop_assert_eq!(t.not_before, retry.map(|ms| T0 + ms));
                prop_assert!(
                    t.owner.is_none() && t.token.is_none() && t.until.is_none(),
                    "{}: the lease outlived fail",
                    s.name
                );
                // Failing again with that token answers the task as it is.
                let again = s.kernel.taskboard().fail(id, token, "other", None);
                prop_assert_eq!(again.as_ref(), Ok(t), "{}", s.name);
                Ok(())
            },
        )
    });
}

fn revive_with_arbitrary_ids() {
    let env = env();
    check(cases(|w| over(TASKS, w)), |(_, id)| {
        let mut j = Judge::new();
        j.over(&id);
        exercise(
            &env,
            Call::new("taskboard.revive", j.get()),
            |s| fresh_or(&id, s.fresh_dead()),
            |s, id| s.kernel.taskboard().revive(id),
            task_label,
            |s, id, t| {
                prop_assert_eq!(&t.id, id);
                prop_assert_eq!(
                    (t.state, t.attempts, t.last_error.as_deref(), t.not_before),
                    (TaskState::Open, 0, None, None),
                    "{}",
                    s.name
                );
                prop_assert_eq!(
                    s.kernel.taskboard().revive(id).map(drop),
                    Err(Error::NotDead)
                );
                Ok(())
            },
        )
    });
}

fn set_group_limit_with_arbitrary_arguments() {
    let env = env();
    check(
        cases(|w| {
            (
                name(GROUPS, w),
                option::weighted(0.8, count(MAX_GROUP_LIMIT, w)),
            )
        }),
        |(_, (group, limit))| {
            let mut j = Judge::new();
            j.id(&group.0).group_limit(limit);
            exercise(
                &env,
                Call::new("taskboard.set-group-limit", j.get()),
                nothing,
                |s, ()| s.kernel.taskboard().set_group_limit(&group.0, limit),
                unit,
                |s, (), ()| {
                    let got = s.kernel.taskboard().get_group(&group.0);
                    match limit {
                        Some(l) => prop_assert_eq!(got.map(|g| g.limit), Ok(l), "{}", s.name),
                        None => prop_assert_eq!(got, Err(Error::NotFound), "{}", s.name),
                    }
                    Ok(())
                },
            )
        },
    );
}

fn get_group_with_arbitrary_groups() {
    let env = env();
    check(cases(|w| name(GROUPS, w)), |(_, group)| {
        let mut j = Judge::new();
        j.id(&group.0);
        exercise(
            &env,
            Call::pure("taskboard.get-group", j.get()),
            nothing,
            |s, ()| s.kernel.taskboard().get_group(&group.0),
            |g: &GroupInfo| format!("{g:?}"),
            |s, (), g| {
                // Only g-1 has a limit: 2, with t-grouped's live claim.
                prop_assert_eq!(&group.0, "g-1", "{}", s.name);
                prop_assert_eq!(*g, GroupInfo { limit: 2, live: 1 });
                Ok(())
            },
        )
    });
}

// ---------------------------------------------------------------------------
// Numbers at and above 2^53 (SPEC 8), and no wrapping at u64::MAX.

fn bindings() -> Vec<(
    &'static str,
    Kernel,
    Arc<ManualClock>,
    Option<tempfile::TempDir>,
)> {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = gak::blocking::run_future(gak::store::open(&format!(
        "sqlite:{}",
        dir.path().join("n.db").display()
    )))
    .unwrap();
    let mut out = Vec::new();
    for (name, backend, dir) in [
        (
            "memory",
            Arc::new(MemoryBackend::default()) as Arc<dyn Backend>,
            None,
        ),
        ("sqlite", sqlite, Some(dir)),
    ] {
        let clock = Arc::new(ManualClock::at(T0));
        let kernel = Kernel::with_backend(backend, clock.clone()).unwrap();
        out.push((name, kernel, clock, dir));
    }
    out
}

fn invalid<T: fmt::Debug>(what: &str, r: Result<T, Error>) {
    assert!(
        matches!(r, Err(Error::InvalidInput(_))),
        "{what}: expected invalid-input, got {r:?}"
    );
}

fn numbers_at_or_above_2_pow_53_are_invalid_input() {
    for (name, k, _clock, _dir) in bindings() {
        populate(&k);
        let before = k.dump().unwrap();
        let snap = |seq, fence| Snapshot {
            run_id: "run-1".into(),
            seq,
            fence,
            status: "running".into(),
            done: vec![],
            fields: vec![],
        };
        let o = Outcome {
            status: Status::Failed,
            result: vec![],
        };
        let action = Action::new("k-live", "r-live");
        let lease = |fence| Lease {
            key: "k-live".into(),
            resource: "r-live".into(),
            fence,
            holder: "0".repeat(32),
            until: 0,
        };
        for n in [1u64 << 53, (1 << 53) + 1, 1 << 63, u64::MAX - 1, u64::MAX] {
            let at = format!("{name} n={n}");
            invalid(&at, k.checkpoint().save_if_newer(&snap(n, None)));
            invalid(&at, k.checkpoint().save_if_newer(&snap(4, Some(n))));
            invalid(&at, k.commitgate().commit("run-1", None, n, &o));
            invalid(&at, k.commitgate().commit("run-9", Some("s"), n, &o));
            invalid(
                &at,
                k.sideeffect()
                    .write_fenced("sink-1", n, |_| Ok::<_, Error>(()))
                    .map_err(|e| e.contract_error()),
            );
            invalid(&at, k.sideeffect().complete(&action, &lease(n), b"x"));
            invalid(&at, k.sideeffect().release(&action, &lease(n)));
            invalid(&at, k.sideeffect().abandon(&action, &lease(n), "r"));
            invalid(&at, k.sideeffect().mark_uncertain(&action, &lease(n), "r"));
            invalid(&at, k.sideeffect().renew(&action, &lease(n), 1_000));
            // ttls: far above a year as well.
            invalid(&at, k.sideeffect().acquire(&Action::new("k-n", "r-n"), n));
            invalid(&at, k.sideeffect().renew(&action, &lease(1), n));
            invalid(
                &at,
                k.sideeffect()
                    .begin_reconcile(&Action::new("k-unc", "r-3"), n),
            );
            invalid(&at, k.taskboard().claim("t-open", "w", n));
            invalid(&at, k.taskboard().renew("t-claimed", "x", n));
            // The queue: a delay, a batch's ttl, a retry-after.
            invalid(
                &at,
                k.taskboard().seed(&[TaskSeed::new("t-late").not_before(n)]),
            );
            invalid(&at, k.taskboard().claim_batch("w", n, 1));
            invalid(&at, k.taskboard().fail("t-claimed", "x", "r", Some(n)));
        }
        assert_eq!(k.dump().unwrap(), before, "{name}: a refusal wrote");
    }
}

fn u64_max_never_wraps() {
    for (name, k, clock, _dir) in bindings() {
        let snap = |seq| Snapshot {
            run_id: "r".into(),
            seq,
            fence: Some(MAX_NUMBER),
            status: "s".into(),
            done: vec![],
            fields: vec![],
        };
        // The largest seq and fence are accepted and stay the largest.
        k.checkpoint().save_if_newer(&snap(MAX_NUMBER)).unwrap();
        invalid(name, k.checkpoint().save_if_newer(&snap(u64::MAX)));
        invalid(name, k.checkpoint().save_if_newer(&snap(MAX_NUMBER + 1)));
        assert_eq!(
            k.checkpoint().save_if_newer(&snap(MAX_NUMBER)),
            Err(Error::StaleSeq)
        );
        assert_eq!(k.checkpoint().save_if_newer(&snap(1)), Err(Error::StaleSeq));
        assert_eq!(k.checkpoint().load("r").unwrap().seq, MAX_NUMBER);
        // The commit gate's fence check at the top of the range.
        let o = Outcome {
            status: Status::Succeeded,
            result: vec![],
        };
        assert_eq!(
            k.commitgate().commit("r", None, MAX_NUMBER - 1, &o),
            Err(Error::FenceStale)
        );
        k.commitgate()
            .commit("r", Some("s"), MAX_NUMBER, &o)
            .unwrap();
        // A sink at the largest fence: nothing can pass it, nothing wraps.
        k.sideeffect()
            .write_fenced("sink", MAX_NUMBER, |_| Ok::<_, Error>(()))
            .unwrap();
        assert_eq!(k.sideeffect().sink_seen("sink"), Ok(MAX_NUMBER));
        for n in [MAX_NUMBER + 1, u64::MAX] {
            let r = k
                .sideeffect()
                .write_fenced("sink", n, |_| Ok::<_, Error>(()));
            invalid(name, r.map_err(|e| e.contract_error()));
        }
        let r = k
            .sideeffect()
            .write_fenced("sink", 0, |_| Ok::<_, Error>(()));
        assert_eq!(r.map_err(|e| e.contract_error()), Err(Error::FenceStale));
        assert_eq!(k.sideeffect().sink_seen("sink"), Ok(MAX_NUMBER));
        // The largest ttl from a late clock: until = now + ttl, no overflow.
        clock.set(MAX_NUMBER - MAX_TTL).unwrap();
        let Acquired::Granted(l) = k
            .sideeffect()
            .acquire(&Action::new("k", "r"), MAX_TTL)
            .unwrap()
        else {
            panic!("{name}: fresh key");
        };
        assert_eq!(l.until, MAX_NUMBER, "{name}");
        let t = {
            k.taskboard().seed(&[TaskSeed::new("t")]).unwrap();
            k.taskboard().claim("t", "w", MAX_TTL).unwrap()
        };
        assert_eq!(t.until, Some(MAX_NUMBER), "{name}");
    }
}

/// A clock beyond 2^53 is the host's mistake (SPEC 8: the clock stays below
/// it), but the component must still answer with a typed value: never trap
/// on `now + ttl`, and never hand out a deadline that wrapped round to the
/// past (a lease or claim already expired when granted).
fn a_clock_at_u64_max_does_not_trap_or_wrap() {
    let now = u64::MAX - 10;
    let mut problems = Vec::new();
    for (name, k, clock, _dir) in bindings() {
        k.taskboard()
            .seed(&[TaskSeed::new("t"), TaskSeed::new("u")])
            .unwrap();
        let token = k.taskboard().claim("u", "w", 1_000).unwrap().token.unwrap();
        let unc = Action::new("k-unc", "r-unc");
        let Acquired::Granted(l) = k.sideeffect().acquire(&unc, 1_000).unwrap() else {
            panic!("{name}: fresh key");
        };
        k.sideeffect().mark_uncertain(&unc, &l, "timeout").unwrap();
        clock.set(now).unwrap();
        let mut judge = |call: &str, until: Result<Option<u64>, Error>| match until {
            Ok(Some(until)) if until <= now => {
                problems.push(format!("{name} {call}: deadline wrapped to {until}"));
            }
            Err(Error::Storage(m)) if m.message().contains("trapped") => {
                problems.push(format!("{name} {call}: {m}"));
            }
            _ => {}
        };
        let acquired = k.sideeffect().acquire(&Action::new("k", "r"), 1_000);
        judge(
            "sideeffect.acquire",
            acquired.map(|a| match a {
                Acquired::Granted(l) => Some(l.until),
                _ => None,
            }),
        );
        let claimed = k.taskboard().claim("t", "w", 1_000);
        judge("taskboard.claim", claimed.map(|t| t.until));
        let renewed = k.taskboard().renew("u", &token, 1_000);
        judge("taskboard.renew", renewed.map(|t| t.until));
        let reconcile = k.sideeffect().begin_reconcile(&unc, 1_000);
        judge(
            "sideeffect.begin-reconcile",
            reconcile.map(|c| Some(c.until)),
        );
    }
    assert!(
        problems.is_empty(),
        "at now = u64::MAX - 10:\n{}",
        problems.join("\n")
    );
}

/// SPEC 8: the clock stays below 2^53. A host whose clock reads past it
/// fails the call with `storage`, naming the clock, and writes nothing
/// (the component would otherwise judge expiry by a broken clock).
fn a_clock_past_2_pow_53_fails_the_call() {
    for (name, k, clock, _dir) in bindings() {
        k.taskboard().seed(&[TaskSeed::new("t")]).unwrap();
        let before = k.dump().unwrap();
        clock.set(MAX_NUMBER + 1).unwrap();
        match k.taskboard().claim("t", "w", 1_000) {
            Err(Error::Storage(m)) if m.message().contains("beyond 2^53") => {}
            other => panic!("{name}: a claim at 2^53 answered {other:?}"),
        }
        assert_eq!(k.dump().unwrap(), before, "{name}: the store changed");
    }
}

/// SPEC 8: "The fake clock never moves backwards." `advance` by an amount
/// that overflows must not wrap the clock round to the past (the vector
/// runner's `{"advance": N}` takes any u64).
fn the_manual_clock_never_moves_backwards() {
    use gak::Clock;
    let clock = ManualClock::at(T0);
    clock.advance(u64::MAX);
    assert!(
        clock.now() >= T0,
        "advance(u64::MAX) moved the clock back to {}",
        clock.now()
    );
}

// ---------------------------------------------------------------------------
// Limits on list sizes.

fn list_limits() {
    for (name, k, _clock, _dir) in bindings() {
        populate(&k);
        let before = k.dump().unwrap();
        let many: Vec<TaskSeed> = (0..10_001)
            .map(|i| TaskSeed::new(&format!("m{i}")))
            .collect();
        invalid(name, k.taskboard().seed(&many));
        let mut dup = vec![TaskSeed::new("x"), TaskSeed::new("y")];
        dup.push(TaskSeed::new("x"));
        invalid(name, k.taskboard().seed(&dup));
        invalid(
            name,
            k.taskboard().seed(&[TaskSeed {
                state: Some(TaskState::Claimed),
                ..TaskSeed::new("c")
            }]),
        );
        let many_deps: Vec<&str> = vec!["d"; 10_001];
        invalid(
            name,
            k.taskboard().seed(&[TaskSeed::new("z").deps(&many_deps)]),
        );
        let snap = Snapshot {
            run_id: "r".into(),
            seq: 1,
            fence: None,
            status: "s".into(),
            done: vec!["d".into(); 10_001],
            fields: vec![],
        };
        invalid(name, k.checkpoint().save_if_newer(&snap));
        // The queue's limits (SPEC 10).
        let tb = k.taskboard();
        invalid(
            name,
            tb.seed(&[TaskSeed {
                state: Some(TaskState::Dead),
                ..TaskSeed::new("c")
            }]),
        );
        for max in [0, MAX_ATTEMPTS + 1, u32::MAX] {
            invalid(name, tb.seed(&[TaskSeed::new("m").max_attempts(max)]));
        }
        for group in [
            String::new(),
            "g".repeat(257),
            "é".repeat(129),
            "g\0".into(),
        ] {
            invalid(name, tb.seed(&[TaskSeed::new("m").group(&group)]));
            invalid(name, tb.set_group_limit(&group, Some(1)));
            invalid(name, tb.get_group(&group));
        }
        for limit in [0, MAX_BATCH + 1, u32::MAX] {
            invalid(name, tb.claim_batch("w", 1_000, limit));
        }
        for limit in [0, MAX_GROUP_LIMIT + 1, u32::MAX] {
            invalid(name, tb.set_group_limit("g-2", Some(limit)));
        }
        invalid(name, tb.complete_batch(&[]));
        let many: Vec<Completion> = (0..=MAX_BATCH)
            .map(|i| Completion::new(&format!("t{i}"), TOKENS[0]))
            .collect();
        invalid(name, tb.complete_batch(&many));
        let twice = Completion::new("t-claimed", TOKENS[0]);
        invalid(name, tb.complete_batch(&[twice.clone(), twice]));
        for token in [String::new(), "x".repeat(257), "a\0b".into()] {
            invalid(
                name,
                tb.complete_batch(&[Completion::new("t-claimed", &token)]),
            );
        }
        invalid(name, tb.fail("t-claimed", "x", &"r".repeat(4097), None));
        invalid(name, tb.fail("t-claimed", "x", "r", Some(MAX_TTL + 1)));
        assert_eq!(k.dump().unwrap(), before, "{name}: a refusal wrote");
        // ...and just within them: answered, but not invalid-input.
        tb.seed(&[TaskSeed::new("m").max_attempts(MAX_ATTEMPTS)])
            .unwrap();
        assert_eq!(
            tb.fail("t-claimed", "x", &"r".repeat(4096), Some(MAX_TTL)),
            Err(Error::LeaseLost)
        );
        assert_eq!(
            tb.claim_batch("w", 1_000, MAX_BATCH).map(|b| b.len()),
            Ok(3)
        );
        let m = tb.get("m").unwrap();
        assert_eq!(m.max_attempts, Some(MAX_ATTEMPTS));
        tb.set_group_limit("g-2", Some(MAX_GROUP_LIMIT)).unwrap();
        assert_eq!(
            tb.get_group("g-2"),
            Ok(GroupInfo {
                limit: MAX_GROUP_LIMIT,
                live: 0
            })
        );
    }
}

fn large_plans_answer_without_trapping() {
    let k = Kernel::open("memory:").unwrap();
    let chain: Vec<StepDef> = (0..10_000)
        .map(|i| StepDef {
            id: format!("s{i}"),
            depends_on: if i == 0 {
                vec![]
            } else {
                vec![format!("s{}", i - 1)]
            },
        })
        .collect();
    let plan = k.checkpoint().build_plan(&chain, None).unwrap();
    assert_eq!(plan.run.len(), 10_000);
    // Declared backwards: the deepest Kahn's order.
    let backwards: Vec<StepDef> = chain.iter().rev().cloned().collect();
    assert_eq!(
        k.checkpoint().build_plan(&backwards, None).unwrap().run,
        plan.run
    );
    // One 10 000-step cycle.
    let mut cycle = chain.clone();
    cycle[0].depends_on = vec!["s9999".into()];
    assert!(matches!(
        k.checkpoint().build_plan(&cycle, None),
        Err(Error::InvalidPlan(_))
    ));
}

/// types.wit: "a plan at most 10 000 steps" is an input limit (`invalid-input`);
/// SPEC 8 makes only step *id* problems `invalid-plan`.
fn a_plan_over_10_000_steps_is_invalid_input() {
    let k = Kernel::open("memory:").unwrap();
    let steps: Vec<StepDef> = (0..10_001)
        .map(|i| StepDef::new(&format!("s{i}"), &[]))
        .collect();
    invalid("10 001 steps", k.checkpoint().build_plan(&steps, None));
}

// ---------------------------------------------------------------------------
// SQL fragments and odd strings are data, on every binding.

const INJECTIONS: &[&str] = &[
    "'; DROP TABLE gak_tasks; --",
    "'); DELETE FROM gak_actions; --",
    "\"; DROP SCHEMA public CASCADE; --",
    "x' OR '1'='1",
    "1; SELECT pg_sleep(10); --",
    "$1",
    "%",
    "\\",
];

fn injections_are_data(name: &str, k: &Kernel, strings: &[&str]) {
    let tb = k.taskboard();
    let seeds: Vec<TaskSeed> = strings
        .iter()
        .map(|s| TaskSeed::new(s).title(s).deps(&[s]))
        .collect();
    tb.seed(&seeds)
        .unwrap_or_else(|e| panic!("{name}: seed: {e}"));
    tb.seed(&[TaskSeed::new("plain")]).unwrap();
    let board = tb.list(None, None, 1000).map(|p| p.items).unwrap();
    assert_eq!(board.len(), strings.len() + 1, "{name}: {board:?}");
    for s in strings {
        let t = board
            .iter()
            .find(|t| t.id == *s)
            .unwrap_or_else(|| panic!("{name}: {s:?} not listed"));
        assert_eq!(t.title, *s);
        assert_eq!(t.deps, [*s]);
        // It depends on itself, so it can never be claimed: deps-pending.
        assert_eq!(
            tb.claim(s, s, 1_000),
            Err(Error::DepsPending),
            "{name} {s:?}"
        );
    }
    for s in strings {
        let id = format!("{s}/claimable");
        tb.seed(&[TaskSeed::new(&id)]).unwrap();
        let t = tb.claim(&id, s, 1_000).unwrap();
        assert_eq!(t.owner.as_deref(), Some(*s));
        tb.complete(&id, t.token.as_deref().unwrap()).unwrap();

        let action = Action::new(s, s).with_fingerprint(s);
        let Acquired::Granted(l) = k.sideeffect().acquire(&action, 1_000).unwrap() else {
            panic!("{name}: {s:?} not granted");
        };
        assert_eq!((l.key.as_str(), l.resource.as_str()), (*s, *s));
        k.sideeffect().complete(&action, &l, s.as_bytes()).unwrap();
        assert_eq!(
            k.sideeffect().acquire(&action, 1_000),
            Ok(Acquired::Replayed(s.as_bytes().to_vec())),
            "{name} {s:?}"
        );

        let snap = Snapshot {
            run_id: (*s).into(),
            seq: 1,
            fence: None,
            status: (*s).into(),
            done: vec![(*s).into()],
            fields: vec![((*s).into(), (*s).into())],
        };
        k.checkpoint().save_if_newer(&snap).unwrap();
        assert_eq!(k.checkpoint().load(s).unwrap(), snap, "{name}");
        let o = Outcome {
            status: Status::Succeeded,
            result: s.as_bytes().to_vec(),
        };
        k.commitgate().commit(s, Some(s), 0, &o).unwrap();
        assert_eq!(k.commitgate().read(s, Some(s)).unwrap(), o);

        // As a group (a key of `meta` and of the group's queue) and as a
        // failure's reason.
        let grouped = format!("{s}/grouped");
        tb.set_group_limit(s, Some(1)).unwrap();
        tb.seed(&[TaskSeed::new(&grouped).group(s)]).unwrap();
        let t = tb.claim(&grouped, s, 1_000).unwrap();
        assert_eq!(t.group.as_deref(), Some(*s));
        assert_eq!(tb.get_group(s), Ok(GroupInfo { limit: 1, live: 1 }));
        let failed = tb
            .fail(&grouped, t.token.as_deref().unwrap(), s, None)
            .unwrap();
        assert_eq!(failed.last_error.as_deref(), Some(*s), "{name}");
        assert_eq!(tb.get_group(s), Ok(GroupInfo { limit: 1, live: 0 }));

        k.sideeffect()
            .write_fenced(s, 1, |d| d.put(s, s))
            .unwrap_or_else(|e| panic!("{name}: write_fenced {s:?}: {e:?}"));
        assert_eq!(k.sideeffect().sink_seen(s), Ok(1));
        assert_eq!(
            k.with_downstream(|d| d.get(s)).unwrap().as_deref(),
            Some(*s)
        );
    }
    // Every table is still there and holds everything.
    assert_eq!(
        tb.list(None, None, 1000).map(|p| p.items).unwrap().len(),
        3 * strings.len() + 1,
        "{name}"
    );
    let dump = k.dump().unwrap();
    for table in gak::store::TABLES {
        assert!(
            dump.iter().any(|(t, _, _)| t == table),
            "{name}: table {table} is empty"
        );
    }
}

fn sql_fragments_are_data_on_memory_and_sqlite() {
    for (name, k, _clock, _dir) in bindings() {
        injections_are_data(name, &k, INJECTIONS);
    }
}

fn sql_fragments_are_data_on_postgres(dsn: &str) {
    let schema = pg::Schema::new(dsn, "inject");
    let k = schema.kernel_with(Arc::new(ManualClock::at(T0)));
    injections_are_data("postgres", &k, INJECTIONS);
    // The schema's own tables are intact: a second kernel sees it all.
    let again = Kernel::with_backend(
        Arc::new(PostgresBackend::parse(&schema.url).unwrap()),
        Arc::new(ManualClock::at(T0)),
    )
    .unwrap();
    assert_eq!(
        again
            .taskboard()
            .list(None, None, 1000)
            .map(|p| p.items)
            .unwrap()
            .len(),
        3 * INJECTIONS.len() + 1
    );
}

/// Unicode beyond ASCII (astral, combining, bidi, BOM, newline) is valid
/// UTF-8, so valid ids and data (SPEC 8: ids are 1-256 bytes of UTF-8): it
/// must round-trip on every binding. (U+0000 is the one exception, refused
/// everywhere: see `nul_is_invalid_input_on_*`.)
const ODD: &[&str] = &["🦀", "日本語", "\u{202E}x", "e\u{301}", "\u{FEFF}", "\n"];

/// U+0000 cannot be stored by PostgreSQL (`text` and `jsonb` refuse it), so
/// every binding refuses it up front, alike, writing nothing.
fn nul_is_invalid_input(name: &str, k: &Kernel) {
    let before = k.dump().unwrap();
    for s in ["\0", "a\0b"] {
        let seeded = k.taskboard().seed(&[TaskSeed::new(s)]);
        assert!(
            matches!(seeded, Err(Error::InvalidInput(_))),
            "{name}: seed {s:?}: {seeded:?}"
        );
        let titled = k.taskboard().seed(&[TaskSeed::new("t").title(s)]);
        assert!(
            matches!(titled, Err(Error::InvalidInput(_))),
            "{name}: title {s:?}"
        );
        let acquired = k.sideeffect().acquire(&Action::new("k", s), 1_000);
        assert!(
            matches!(acquired, Err(Error::InvalidInput(_))),
            "{name}: resource {s:?}"
        );
        // The queue's strings.
        let tb = k.taskboard();
        let at = format!("{name} {s:?}");
        invalid(&at, tb.seed(&[TaskSeed::new("t").group(s)]));
        invalid(&at, tb.set_group_limit(s, Some(1)));
        invalid(&at, tb.get_group(s));
        invalid(&at, tb.claim_batch(s, 1_000, 1));
        invalid(&at, tb.fail("t", "x", s, None));
        invalid(&at, tb.revive(s));
        invalid(&at, tb.complete_batch(&[Completion::new(s, TOKENS[0])]));
        invalid(&at, tb.complete_batch(&[Completion::new("t", s)]));
    }
    assert_eq!(k.dump().unwrap(), before, "{name}: a refusal wrote");
}

fn nul_is_invalid_input_on_memory_and_sqlite() {
    for (name, k, _clock, _dir) in bindings() {
        nul_is_invalid_input(name, &k);
    }
}

fn nul_is_invalid_input_on_postgres(dsn: &str) {
    let schema = pg::Schema::new(dsn, "nul");
    nul_is_invalid_input(
        "postgres",
        &schema.kernel_with(Arc::new(ManualClock::at(T0))),
    );
}

fn unicode_is_data_on_memory_and_sqlite() {
    for (name, k, _clock, _dir) in bindings() {
        injections_are_data(name, &k, ODD);
    }
}

fn unicode_is_data_on_postgres(dsn: &str) {
    // One schema per string, so the failure names every string that does
    // not round-trip.
    let mut failed = Vec::new();
    for s in ODD {
        let schema = pg::Schema::new(dsn, "odd");
        let k = schema.kernel_with(Arc::new(ManualClock::at(T0)));
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            injections_are_data("postgres", &k, &[s])
        }));
        if let Err(why) = run {
            let why = why
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| why.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            failed.push(format!("{s:?}: {why}"));
        }
    }
    assert!(
        failed.is_empty(),
        "not data on postgres:\n{}",
        failed.join("\n")
    );
}

// ---------------------------------------------------------------------------
// The vector runner never panics, whatever the file says.

fn run_vectors(name: &str, text: String) -> Result<(), TestCaseError> {
    let mut target = UrlTarget::new("memory:").expect("memory target");
    let report = conformance::run(&mut target, &[(name.to_owned(), text)]);
    prop_assert!(
        !report.verdicts.is_empty(),
        "a file yields at least one verdict"
    );
    let _ = report.render();
    Ok(())
}

fn vector_runner_survives_arbitrary_text() {
    let text = prop_oneof![
        any::<String>(),
        "[\\[\\]{}\",:0-9a-z$ .-]{0,120}",
        Just("[".repeat(10_000)),
        Just("{\"scenario\": \"x\", \"steps\": [".to_owned() + &"[".repeat(5_000)),
    ];
    check(text, |text| run_vectors("arbitrary.json", text));
}

/// Every scenario of the built-in vectors, one at a time.
fn builtin_scenarios() -> Vec<Value> {
    let mut all = Vec::new();
    for (_, text) in conformance::builtin() {
        match serde_json::from_str::<Value>(&text).expect("built-in vectors parse") {
            Value::Array(items) => all.extend(items),
            one => all.push(one),
        }
    }
    all
}

/// JSON values a vector file should never contain.
fn odd_json() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        Just(Value::Bool(true)),
        Just(serde_json::json!(-1)),
        Just(serde_json::json!(1.5)),
        Just(serde_json::json!(1e308)),
        Just(serde_json::json!(u64::MAX)),
        Just(serde_json::json!(1u64 << 53)),
        Just(serde_json::json!(0)),
        Just(serde_json::json!({})),
        Just(serde_json::json!([])),
        Just(serde_json::json!({"$merge": "nope"})),
        Just(serde_json::json!({"$ne": 5})),
        Just(serde_json::json!({"clock": 1, "call": "taskboard.list", "ok": []})),
        Just(serde_json::json!({"call": "taskboard.list", "ok": "$any", "bind": {"any": ""}})),
        Just(serde_json::json!({"call": "taskboard.list", "ok": [], "bind": {"x": "0.a.b.999"}})),
        Just(serde_json::json!({"advance": u64::MAX})),
        Just(serde_json::json!({"clock": u64::MAX})),
        Just(
            serde_json::json!({"call": "sideeffect.acquire", "args": {"action": {"key": "k", "resource": "r"}, "ttl": u64::MAX}, "ok": "$any"})
        ),
        Just(Value::String("y".repeat(MIB + 1))),
        nasty().prop_map(|t| Value::String(t.0)),
        prop::sample::select(vec![
            "$any",
            "$none",
            "$hex128",
            "$",
            "$$",
            "$x",
            "$$$",
            "taskboard.claim",
            "sideeffect.write-fenced",
            "sink.write-fenced",
            "sink.read",
            "nope.nope",
            "succeeded",
            "unsafe",
            "claimed",
            "storage",
            "invalid-input",
        ])
        .prop_map(|s| Value::String(s.to_owned())),
    ]
}

#[derive(Clone, Debug)]
enum Mutation {
    /// Replace the n-th node with a value.
    Replace(usize, Value),
    /// Remove the n-th node from its parent.
    Remove(usize),
    /// Duplicate the n-th node inside its parent array.
    Duplicate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<usize>(), odd_json()).prop_map(|(n, v)| Mutation::Replace(n, v)),
        1 => any::<usize>().prop_map(Mutation::Remove),
        1 => any::<usize>().prop_map(Mutation::Duplicate),
    ]
}

/// JSON pointers to every node below the root.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                pointers(x, p, out);
            }
        }
        Value::Object(obj) => {
            for (k, x) in obj {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                pointers(x, p, out);
            }
        }
        _ => {}
    }
}

fn mutate(root: &mut Value, m: &Mutation) {
    let mut all = Vec::new();
    pointers(root, String::new(), &mut all);
    if all.is_empty() {
        if let Mutation::Replace(_, v) = m {
            *root = v.clone();
        }
        return;
    }
    let pick = |n: usize| all[n % all.len()].clone();
    match m {
        Mutation::Replace(n, v) => {
            if let Some(node) = root.pointer_mut(&pick(*n)) {
                *node = v.clone();
            }
        }
        Mutation::Remove(n) | Mutation::Duplicate(n) => {
            let p = pick(*n);
            let (parent, last) = p.rsplit_once('/').expect("a pointer below the root");
            let last = last.replace("~1", "/").replace("~0", "~");
            let duplicate = matches!(m, Mutation::Duplicate(_));
            match root.pointer_mut(parent) {
                Some(Value::Array(items)) => {
                    let i: usize = last.parse().expect("an index");
                    if duplicate {
                        let copy = items[i].clone();
                        items.insert(i, copy);
                    } else {
                        items.remove(i);
                    }
                }
                Some(Value::Object(obj)) if !duplicate => {
                    obj.remove(&last);
                }
                _ => {}
            }
        }
    }
}

fn vector_runner_survives_mutated_vectors() {
    let scenarios = builtin_scenarios();
    assert!(
        scenarios.len() > 20,
        "only {} built-in scenarios",
        scenarios.len()
    );
    let args = (
        any::<usize>(),
        vec(mutation(), 0..4),
        option::weighted(0.2, any::<usize>()),
    );
    check(args, |(pick, mutations, cut)| {
        let mut scenario = scenarios[pick % scenarios.len()].clone();
        for m in &mutations {
            mutate(&mut scenario, m);
        }
        let mut text = serde_json::to_string(&scenario).expect("serialize");
        if let Some(cut) = cut {
            // A truncated file: cut at a character boundary.
            let mut at = cut % (text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            text.truncate(at);
        }
        let unmutated = mutations.is_empty() && cut.is_none();
        let mut target = UrlTarget::new("memory:").expect("memory target");
        let report = conformance::run(&mut target, &[("mutated.json".to_owned(), text)]);
        prop_assert_eq!(report.verdicts.len(), 1);
        if unmutated {
            // The harness itself is sound: an untouched vector passes.
            prop_assert_eq!(report.failed(), 0, "{}", report.render());
        }
        Ok(())
    });
}

/// A scenario that binds and merges huge or odd values still just reports.
fn vector_runner_reports_instead_of_panicking_on_known_edge_cases() {
    let cases = [
        r#"{"scenario": "a", "steps": [{"advance": 18446744073709551615}, {"call": "taskboard.list", "ok": []}]}"#,
        r#"{"scenario": "b", "steps": [{"clock": 18446744073709551615}, {"call": "sideeffect.acquire", "args": {"action": {"key": "k", "resource": "r"}, "ttl": 1000}, "ok": "$any"}]}"#,
        r#"{"scenario": "c", "steps": [{"call": "taskboard.list", "ok": [], "bind": {"x": ""}}, {"call": "sideeffect.acquire", "args": {"$merge": "x"}, "ok": "$any"}]}"#,
        r#"{"scenario": "d", "steps": [{"call": "taskboard.seed", "args": {"tasks": [{"id": "a"}]}, "ok": null}, {"call": "taskboard.list", "ok": "$any", "bind": {"t": "0"}}, {"call": "taskboard.claim", "args": {"$merge": "t", "agent": "w", "ttl": -1}, "ok": "$any"}]}"#,
        r#"{"scenario": "e", "steps": [{"call": "checkpoint.save-if-newer", "args": {"snapshot": {"run-id": "r", "seq": 1.5, "status": "s"}}, "err": "invalid-input"}]}"#,
        r#"{"scenario": "f", "steps": [{"call": "sink.write-fenced", "args": {"resource": "s", "fence": 18446744073709551615}, "err": "invalid-input"}]}"#,
        r#"{"scenario": "g", "steps": [{"call": "checkpoint.save-if-newer", "args": {"snapshot": {"run-id": "r", "seq": 1, "status": "s", "fields": {"b": "1", "a": "2"}}}, "ok": null}]}"#,
        r#"[]"#,
        r#"[1, "x", null]"#,
        r#"{"steps": {}}"#,
        r#"{"scenario": 5, "steps": []}"#,
    ];
    for (i, text) in cases.iter().enumerate() {
        let mut target = UrlTarget::new("memory:").unwrap();
        let report = conformance::run(
            &mut target,
            &[(format!("edge{i}.json"), (*text).to_owned())],
        );
        eprintln!(
            "edge {i}: {}",
            report.render().trim_end().replace('\n', " | ")
        );
    }
}

fn main() {
    let mut suite = Suite::new();
    suite.test(
        "save_if_newer_with_arbitrary_snapshots",
        save_if_newer_with_arbitrary_snapshots,
    );
    suite.test("load_with_arbitrary_run_ids", load_with_arbitrary_run_ids);
    suite.test(
        "build_plan_with_arbitrary_steps",
        build_plan_with_arbitrary_steps,
    );
    suite.test(
        "commit_with_arbitrary_arguments",
        commit_with_arbitrary_arguments,
    );
    suite.test(
        "read_with_arbitrary_arguments",
        read_with_arbitrary_arguments,
    );
    suite.test(
        "acquire_with_arbitrary_actions",
        acquire_with_arbitrary_actions,
    );
    suite.test(
        "complete_with_arbitrary_leases",
        complete_with_arbitrary_leases,
    );
    suite.test(
        "release_with_arbitrary_leases",
        release_with_arbitrary_leases,
    );
    suite.test(
        "abandon_with_arbitrary_leases",
        abandon_with_arbitrary_leases,
    );
    suite.test("renew_with_arbitrary_leases", renew_with_arbitrary_leases);
    suite.test(
        "mark_uncertain_with_arbitrary_leases",
        mark_uncertain_with_arbitrary_leases,
    );
    suite.test(
        "begin_reconcile_with_arbitrary_arguments",
        begin_reconcile_with_arbitrary_arguments,
    );
    suite.test(
        "resolve_uncertain_with_arbitrary_arguments",
        resolve_uncertain_with_arbitrary_arguments,
    );
    suite.test(
        "write_fenced_with_arbitrary_arguments",
        write_fenced_with_arbitrary_arguments,
    );
    suite.test(
        "sink_seen_with_arbitrary_resources",
        sink_seen_with_arbitrary_resources,
    );
    suite.test(
        "seed_and_list_with_arbitrary_tasks",
        seed_and_list_with_arbitrary_tasks,
    );
    suite.test(
        "claim_with_arbitrary_arguments",
        claim_with_arbitrary_arguments,
    );
    suite.test(
        "release_task_with_arbitrary_arguments",
        release_task_with_arbitrary_arguments,
    );
    suite.test(
        "complete_task_with_arbitrary_arguments",
        complete_task_with_arbitrary_arguments,
    );
    suite.test(
        "renew_task_with_arbitrary_arguments",
        renew_task_with_arbitrary_arguments,
    );
    suite.test(
        "claim_batch_with_arbitrary_arguments",
        claim_batch_with_arbitrary_arguments,
    );
    suite.test(
        "complete_batch_with_arbitrary_items",
        complete_batch_with_arbitrary_items,
    );
    suite.test(
        "fail_with_arbitrary_arguments",
        fail_with_arbitrary_arguments,
    );
    suite.test("revive_with_arbitrary_ids", revive_with_arbitrary_ids);
    suite.test(
        "set_group_limit_with_arbitrary_arguments",
        set_group_limit_with_arbitrary_arguments,
    );
    suite.test(
        "get_group_with_arbitrary_groups",
        get_group_with_arbitrary_groups,
    );
    suite.test(
        "numbers_at_or_above_2_pow_53_are_invalid_input",
        numbers_at_or_above_2_pow_53_are_invalid_input,
    );
    suite.test("u64_max_never_wraps", u64_max_never_wraps);
    suite.test(
        "a_clock_at_u64_max_does_not_trap_or_wrap",
        a_clock_at_u64_max_does_not_trap_or_wrap,
    );
    suite.test(
        "a_clock_past_2_pow_53_fails_the_call",
        a_clock_past_2_pow_53_fails_the_call,
    );
    suite.test(
        "the_manual_clock_never_moves_backwards",
        the_manual_clock_never_moves_backwards,
    );
    suite.test("list_limits", list_limits);
    suite.test(
        "large_plans_answer_without_trapping",
        large_plans_answer_without_trapping,
    );
    suite.test(
        "a_plan_over_10_000_steps_is_invalid_input",
        a_plan_over_10_000_steps_is_invalid_input,
    );
    suite.test(
        "sql_fragments_are_data_on_memory_and_sqlite",
        sql_fragments_are_data_on_memory_and_sqlite,
    );
    suite.needs(
        &POSTGRES,
        "sql_fragments_are_data_on_postgres",
        sql_fragments_are_data_on_postgres,
    );
    suite.test(
        "nul_is_invalid_input_on_memory_and_sqlite",
        nul_is_invalid_input_on_memory_and_sqlite,
    );
    suite.needs(
        &POSTGRES,
        "nul_is_invalid_input_on_postgres",
        nul_is_invalid_input_on_postgres,
    );
    suite.test(
        "unicode_is_data_on_memory_and_sqlite",
        unicode_is_data_on_memory_and_sqlite,
    );
    suite.needs(
        &POSTGRES,
        "unicode_is_data_on_postgres",
        unicode_is_data_on_postgres,
    );
    suite.test(
        "vector_runner_survives_arbitrary_text",
        vector_runner_survives_arbitrary_text,
    );
    suite.test(
        "vector_runner_survives_mutated_vectors",
        vector_runner_survives_mutated_vectors,
    );
    suite.test(
        "vector_runner_reports_instead_of_panicking_on_known_edge_cases",
        vector_runner_reports_instead_of_panicking_on_known_edge_cases,
    );
    suite.run();
}
