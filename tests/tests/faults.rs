//! The fault matrix (SPEC 7: "inject storage errors at every store call").
//!
//! For every exported operation, in a realistic precondition state, every
//! store call the operation makes is failed in turn (and, separately, its
//! commit, and its `begin`). Each time the answer must be `storage` — never a
//! contract outcome such as `taken`, `uncertain` or `ok` — and the store must
//! be exactly as it was before the call. Afterwards the same call, unfaulted,
//! must make the same store calls and reach the same outcome as on a store
//! that never saw the fault.
//!
//! Runs on memory, SQLite (a temp file per case) and PostgreSQL (a schema per
//! case, when the suite's PostgreSQL requirement is met).
use std::any::Any;
use std::sync::Arc;

use gak::blocking::Kernel;
use gak::blocking::run_future as run;
use gak::store::Backend;
use gak::store::memory::MemoryBackend;
use gak::store::postgres::PostgresBackend;
use gak::{
    Acquired, Action, Error, Lease, ManualClock, Outcome, Resolution, Resolved, SinkError,
    Snapshot, Status, TaskSeed, TaskState,
};
use gak_tests::faulty::{Fault, FaultPlan, Faulty};
use gak_tests::pg;
use gak_tests::suite::{POSTGRES, Suite};

#[path = "faults/lost_commits.rs"]
mod lost_commits;

/// The fake clock's start.
const T0: u64 = 1_700_000_000_000;
/// The ttl of every lease and claim in the setups.
const TTL: u64 = 10_000;

// ---------------------------------------------------------------------------
// Bindings: each makes fresh, empty stores.

/// A fresh store and whatever keeps it alive (temp dir, schema).
type FreshStore = (Arc<dyn Backend>, Box<dyn Any>);

struct Binding {
    name: &'static str,
    fresh: Box<dyn FnMut() -> FreshStore>,
}

impl Binding {
    fn memory() -> Binding {
        Binding {
            name: "memory",
            fresh: Box::new(|| {
                let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::default());
                (backend, Box::new(()))
            }),
        }
    }

    fn sqlite() -> Binding {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut count = 0usize;
        Binding {
            name: "sqlite",
            fresh: Box::new(move || {
                count += 1;
                let path = dir.path().join(format!("f{count}.db"));
                let backend = gak::blocking::run_future(gak::store::open(&format!(
                    "sqlite:{}",
                    path.display()
                )))
                .expect("open sqlite");
                (backend, Box::new(()))
            }),
        }
    }

    fn postgres(dsn: &str) -> Binding {
        let dsn = dsn.to_owned();
        Binding {
            name: "postgres",
            fresh: Box::new(move || {
                let schema = pg::Schema::new(&dsn, "faults");
                let backend: Arc<dyn Backend> =
                    Arc::new(PostgresBackend::parse(&schema.url).expect("schema url"));
                (backend, Box::new(schema))
            }),
        }
    }
}

/// A kernel over a fault-injecting wrapper of a fresh store, with the
/// operation's precondition set up. Fields drop in order: the kernel (and
/// its connections) before the store's guard.
struct World {
    kernel: Kernel,
    plan: FaultPlan,
    backend: Arc<Faulty>,
    clock: Arc<ManualClock>,
    ctx: Ctx,
    _guard: Box<dyn Any>,
}

impl World {
    fn new(binding: &mut Binding, setup: Setup) -> World {
        let (inner, guard) = (binding.fresh)();
        let (backend, plan) = Faulty::wrap(inner);
        let clock = Arc::new(ManualClock::at(T0));
        let kernel = Kernel::with_backend(backend.clone(), clock.clone()).expect("kernel");
        let ctx = setup(&kernel, &clock);
        World {
            kernel,
            plan,
            backend,
            clock,
            ctx,
            _guard: guard,
        }
    }

    fn dump(&self) -> Vec<(String, String, String)> {
        run(self.backend.dump()).expect("dump the store")
    }
}

// ---------------------------------------------------------------------------
// The operations and their preconditions.

/// What a setup hands to its operation.
#[derive(Default)]
struct Ctx {
    lease: Option<Lease>,
    token: Option<String>,
    /// A fenced sink's body fails after its write (the matrix sets it).
    body_fails: std::cell::Cell<bool>,
}

impl Ctx {
    fn lease(&self) -> &Lease {
        self.lease.as_ref().expect("the setup granted a lease")
    }
    fn token(&self) -> &str {
        self.token.as_deref().expect("the setup claimed a task")
    }
}

type Setup = fn(&Kernel, &ManualClock) -> Ctx;
/// An operation; `Ok` is a label of its outcome that does not depend on
/// random tokens, so two runs can be compared.
type Op = fn(&Kernel, &Ctx) -> Result<String, Error>;

struct Case {
    name: &'static str,
    setup: Setup,
    op: Op,
}

const RUN: &str = "run-7";

fn snap(seq: u64, fence: Option<u64>, done: &[&str]) -> Snapshot {
    Snapshot {
        run_id: RUN.into(),
        seq,
        fence,
        status: "running".into(),
        done: done.iter().map(|d| (*d).to_owned()).collect(),
        fields: vec![("attempt".into(), "1".into())],
    }
}

fn outcome() -> Outcome {
    Outcome {
        status: Status::Succeeded,
        result: b"result".to_vec(),
    }
}

fn action() -> Action {
    Action::new("mail/42", "smtp").with_fingerprint("fp-1")
}

fn unsafe_action() -> Action {
    action().unsafe_to_retry()
}

fn other_action() -> Action {
    Action::new("mail/43", "smtp")
}

fn grant(k: &Kernel, a: &Action) -> Lease {
    match k.sideeffect().acquire(a, TTL).expect("acquire") {
        Acquired::Granted(lease) => lease,
        other => panic!("setup: expected a grant, got {other:?}"),
    }
}

fn acquired(a: Acquired) -> String {
    match a {
        Acquired::Granted(l) => format!("granted fence={}", l.fence),
        Acquired::Replayed(r) => format!("replayed {}", String::from_utf8_lossy(&r)),
        Acquired::Uncertain(why) => format!("uncertain {why}"),
        Acquired::InFlight => "in-flight".into(),
        Acquired::Contended(until) => format!("contended until={until}"),
        other => format!("unknown {other:?}"),
    }
}

fn resolved(r: Resolved) -> String {
    match r {
        Resolved::Replayed(r) => format!("replayed {}", String::from_utf8_lossy(&r)),
        Resolved::Cleared => "cleared".into(),
    }
}

fn ok<T>(r: Result<T, Error>) -> Result<String, Error> {
    r.map(|_| "ok".to_owned())
}

fn none(_: &Kernel, _: &ManualClock) -> Ctx {
    Ctx::default()
}

/// Grant `action()`; the lease is in the context.
fn granted(k: &Kernel, _: &ManualClock) -> Ctx {
    // Another key used the resource first, so the grant is fence 2.
    let first = grant(k, &other_action());
    k.sideeffect()
        .complete(&other_action(), &first, b"other")
        .unwrap();
    Ctx {
        lease: Some(grant(k, &action())),
        token: None,
        ..Ctx::default()
    }
}

/// `unsafe_action()` marked uncertain and released: ready to reconcile.
fn uncertain(k: &Kernel, _: &ManualClock) -> Ctx {
    let lease = grant(k, &unsafe_action());
    k.sideeffect()
        .mark_uncertain(&unsafe_action(), &lease, "timeout talking to smtp")
        .unwrap();
    k.sideeffect().release(&unsafe_action(), &lease).unwrap();
    Ctx {
        lease: Some(lease),
        token: None,
        ..Ctx::default()
    }
}

/// `uncertain`, with a reconciler's claim.
fn reconciling(k: &Kernel, c: &ManualClock) -> Ctx {
    let ctx = uncertain(k, c);
    k.sideeffect()
        .begin_reconcile(&unsafe_action(), TTL)
        .unwrap();
    ctx
}

/// A board: `base` done, `t` depending on it and open, `other` claimed.
fn board(k: &Kernel, _: &ManualClock) -> Ctx {
    k.taskboard()
        .seed(&[
            TaskSeed::new("base").title("Base"),
            TaskSeed::new("t").title("Task").deps(&["base"]),
            TaskSeed::new("other"),
            TaskSeed::new("blocked").deps(&["t"]),
        ])
        .unwrap();
    let base = k.taskboard().claim("base", "w0", TTL).unwrap();
    k.taskboard()
        .complete("base", base.token.as_deref().unwrap())
        .unwrap();
    k.taskboard().claim("other", "w9", TTL).unwrap();
    Ctx::default()
}

/// `board`, with `t` claimed; the token is in the context.
fn claimed(k: &Kernel, c: &ManualClock) -> Ctx {
    board(k, c);
    let task = k.taskboard().claim("t", "w1", TTL).unwrap();
    Ctx {
        token: task.token,
        ..Ctx::default()
    }
}

fn sink_body(d: &mut gak::blocking::Downstream<'_, '_>) -> Result<(), Error> {
    let marker = d.get("mailbox")?.unwrap_or_default();
    d.put("mailbox", &format!("{marker}m"))
}

/// A fenced write whose body appends to `mailbox`; with `ctx.body_fails`
/// the body fails after its write, answering `write-failed`.
fn write_fenced(k: &Kernel, fence: u64, ctx: &Ctx) -> Result<String, Error> {
    let body = |d: &mut gak::blocking::Downstream<'_, '_>| {
        sink_body(d)?;
        if ctx.body_fails.get() {
            // The body's own failure (not a store fault): the contract's
            // `write-failed`, and its write above must roll back.
            return Err(Error::WriteFailed);
        }
        Ok(())
    };
    match k.sideeffect().write_fenced("mailbox", fence, body) {
        Ok(()) => Ok("written".into()),
        Err(SinkError::Kernel(e)) => Err(e),
        // The body's own error: a storage fault reaching the body stays one.
        Err(SinkError::Body(e)) => Err(e),
    }
}

fn cases() -> Vec<Case> {
    vec![
        // ------------------------------------------------------ checkpoint
        Case {
            name: "checkpoint.save-if-newer (first)",
            setup: none,
            op: |k, _| ok(k.checkpoint().save_if_newer(&snap(1, None, &[]))),
        },
        Case {
            name: "checkpoint.save-if-newer (newer)",
            setup: |k, _| {
                k.checkpoint()
                    .save_if_newer(&snap(1, Some(1), &["a"]))
                    .unwrap();
                Ctx::default()
            },
            op: |k, _| ok(k.checkpoint().save_if_newer(&snap(2, Some(1), &["a", "b"]))),
        },
        Case {
            name: "checkpoint.save-if-newer (stale-seq)",
            setup: |k, _| {
                k.checkpoint().save_if_newer(&snap(5, None, &[])).unwrap();
                Ctx::default()
            },
            op: |k, _| ok(k.checkpoint().save_if_newer(&snap(3, None, &[]))),
        },
        Case {
            name: "checkpoint.save-if-newer (fence-stale)",
            setup: |k, _| {
                k.checkpoint()
                    .save_if_newer(&snap(5, Some(2), &[]))
                    .unwrap();
                Ctx::default()
            },
            op: |k, _| ok(k.checkpoint().save_if_newer(&snap(6, Some(1), &[]))),
        },
        Case {
            name: "checkpoint.save-if-newer (terminal)",
            setup: |k, _| {
                k.checkpoint().save_if_newer(&snap(1, None, &[])).unwrap();
                k.commitgate().commit(RUN, None, 0, &outcome()).unwrap();
                Ctx::default()
            },
            op: |k, _| ok(k.checkpoint().save_if_newer(&snap(2, None, &[]))),
        },
        Case {
            name: "checkpoint.load",
            setup: |k, _| {
                k.checkpoint()
                    .save_if_newer(&snap(3, Some(1), &["a"]))
                    .unwrap();
                Ctx::default()
            },
            op: |k, _| k.checkpoint().load(RUN).map(|s| format!("seq={}", s.seq)),
        },
        Case {
            name: "checkpoint.load (not-found)",
            setup: none,
            op: |k, _| k.checkpoint().load(RUN).map(|s| format!("seq={}", s.seq)),
        },
        // ------------------------------------------------------ commitgate
        Case {
            name: "commitgate.commit (step)",
            setup: |k, _| {
                k.checkpoint()
                    .save_if_newer(&snap(1, Some(1), &[]))
                    .unwrap();
                Ctx::default()
            },
            op: |k, _| ok(k.commitgate().commit(RUN, Some("s1"), 1, &outcome())),
        },
        Case {
            name: "commitgate.commit (run)",
            setup: |k, _| {
                k.checkpoint()
                    .save_if_newer(&snap(1, Some(1), &[]))
                    .unwrap();
                k.commitgate()
                    .commit(RUN, Some("s1"), 1, &outcome())
                    .unwrap();
                Ctx::default()
            },
            op: |k, _| ok(k.commitgate().commit(RUN, None, 1, &outcome())),
        },
        Case {
            name: "commitgate.commit (idempotent)",
            setup: |k, _| {
                k.commitgate().commit(RUN, None, 0, &outcome()).unwrap();
                Ctx::default()
            },
            op: |k, _| ok(k.commitgate().commit(RUN, None, 0, &outcome())),
        },
        Case {
            name: "commitgate.commit (fence-stale)",
            setup: |k, _| {
                k.checkpoint()
                    .save_if_newer(&snap(1, Some(3), &[]))
                    .unwrap();
                Ctx::default()
            },
            op: |k, _| ok(k.commitgate().commit(RUN, None, 2, &outcome())),
        },
        Case {
            name: "commitgate.commit (already-committed)",
            setup: |k, _| {
                k.commitgate().commit(RUN, None, 0, &outcome()).unwrap();
                Ctx::default()
            },
            op: |k, _| {
                let failed = Outcome {
                    status: Status::Failed,
                    result: vec![],
                };
                ok(k.commitgate().commit(RUN, None, 0, &failed))
            },
        },
        Case {
            name: "commitgate.read",
            setup: |k, _| {
                k.commitgate()
                    .commit(RUN, Some("s1"), 0, &outcome())
                    .unwrap();
                Ctx::default()
            },
            op: |k, _| {
                k.commitgate()
                    .read(RUN, Some("s1"))
                    .map(|o| format!("{:?}", o.status))
            },
        },
        Case {
            name: "commitgate.read (not-found)",
            setup: none,
            op: |k, _| ok(k.commitgate().read(RUN, None)),
        },
        // ------------------------------------------------------ sideeffect
        Case {
            name: "sideeffect.acquire (granted)",
            setup: |k, c| {
                let ctx = granted(k, c);
                k.sideeffect()
                    .complete(&action(), ctx.lease(), b"sent")
                    .unwrap();
                Ctx::default()
            },
            op: |k, _| {
                k.sideeffect()
                    .acquire(&Action::new("mail/44", "smtp"), TTL)
                    .map(acquired)
            },
        },
        Case {
            name: "sideeffect.acquire (replayed)",
            setup: |k, c| {
                let ctx = granted(k, c);
                k.sideeffect()
                    .complete(&action(), ctx.lease(), b"sent")
                    .unwrap();
                ctx
            },
            op: |k, _| k.sideeffect().acquire(&action(), TTL).map(acquired),
        },
        Case {
            name: "sideeffect.acquire (in-flight)",
            setup: granted,
            op: |k, _| k.sideeffect().acquire(&action(), TTL).map(acquired),
        },
        Case {
            name: "sideeffect.acquire (uncertain: intent-expired)",
            setup: |k, c| {
                let ctx = granted(k, c);
                c.advance(TTL);
                ctx
            },
            op: |k, _| k.sideeffect().acquire(&action(), TTL).map(acquired),
        },
        Case {
            name: "sideeffect.acquire (uncertain: marked)",
            setup: uncertain,
            op: |k, _| k.sideeffect().acquire(&unsafe_action(), TTL).map(acquired),
        },
        Case {
            name: "sideeffect.acquire (contended)",
            setup: granted,
            op: |k, _| {
                k.sideeffect()
                    .acquire(&Action::new("mail/44", "smtp"), TTL)
                    .map(acquired)
            },
        },
        Case {
            name: "sideeffect.acquire (key-reused)",
            setup: granted,
            op: |k, _| {
                k.sideeffect()
                    .acquire(&action().with_fingerprint("fp-2"), TTL)
                    .map(acquired)
            },
        },
        Case {
            name: "sideeffect.acquire (granted again after abandon)",
            setup: |k, c| {
                let ctx = granted(k, c);
                k.sideeffect()
                    .abandon(&action(), ctx.lease(), "smtp refused")
                    .unwrap();
                ctx
            },
            op: |k, _| k.sideeffect().acquire(&action(), TTL).map(acquired),
        },
        Case {
            name: "sideeffect.complete",
            setup: granted,
            op: |k, c| {
                k.sideeffect()
                    .complete(&action(), c.lease(), b"sent")
                    .map(|r| String::from_utf8_lossy(&r).into_owned())
            },
        },
        Case {
            name: "sideeffect.complete (late, after expiry)",
            setup: |k, c| {
                let ctx = granted(k, c);
                c.advance(2 * TTL);
                ctx
            },
            op: |k, c| {
                k.sideeffect()
                    .complete(&action(), c.lease(), b"sent")
                    .map(|r| String::from_utf8_lossy(&r).into_owned())
            },
        },
        Case {
            name: "sideeffect.complete (already completed)",
            setup: |k, c| {
                let ctx = granted(k, c);
                k.sideeffect()
                    .complete(&action(), ctx.lease(), b"first")
                    .unwrap();
                ctx
            },
            op: |k, c| {
                k.sideeffect()
                    .complete(&action(), c.lease(), b"second")
                    .map(|r| String::from_utf8_lossy(&r).into_owned())
            },
        },
        Case {
            name: "sideeffect.complete (not-holder)",
            setup: granted,
            op: |k, c| {
                let mut forged = c.lease().clone();
                forged.holder = "0".repeat(32);
                ok(k.sideeffect().complete(&action(), &forged, b"x"))
            },
        },
        Case {
            name: "sideeffect.release",
            setup: granted,
            op: |k, c| ok(k.sideeffect().release(&action(), c.lease())),
        },
        Case {
            name: "sideeffect.abandon",
            setup: granted,
            op: |k, c| ok(k.sideeffect().abandon(&action(), c.lease(), "refused")),
        },
        Case {
            name: "sideeffect.renew",
            setup: |k, c| {
                let ctx = granted(k, c);
                c.advance(TTL / 2);
                ctx
            },
            op: |k, c| {
                k.sideeffect()
                    .renew(&action(), c.lease(), TTL)
                    .map(|l| format!("until=T0+{}", l.until - T0))
            },
        },
        Case {
            name: "sideeffect.renew (lease-expired)",
            setup: |k, c| {
                let ctx = granted(k, c);
                c.advance(TTL);
                ctx
            },
            op: |k, c| ok(k.sideeffect().renew(&action(), c.lease(), TTL)),
        },
        Case {
            name: "sideeffect.mark-uncertain",
            setup: granted,
            op: |k, c| {
                ok(k.sideeffect()
                    .mark_uncertain(&action(), c.lease(), "timeout"))
            },
        },
        Case {
            name: "sideeffect.mark-uncertain (fence-stale)",
            setup: |k, c| {
                let ctx = granted(k, c);
                k.sideeffect()
                    .complete(&action(), ctx.lease(), b"sent")
                    .unwrap();
                // A newer fence on the resource.
                grant(k, &Action::new("mail/44", "smtp"));
                ctx
            },
            op: |k, c| {
                ok(k.sideeffect()
                    .mark_uncertain(&action(), c.lease(), "timeout"))
            },
        },
        Case {
            name: "sideeffect.begin-reconcile",
            setup: uncertain,
            op: |k, _| {
                k.sideeffect()
                    .begin_reconcile(&unsafe_action(), TTL)
                    .map(|c| format!("until=T0+{}", c.until - T0))
            },
        },
        Case {
            name: "sideeffect.begin-reconcile (taken over after expiry)",
            setup: |k, c| {
                let ctx = reconciling(k, c);
                c.advance(TTL);
                ctx
            },
            op: |k, _| ok(k.sideeffect().begin_reconcile(&unsafe_action(), TTL)),
        },
        Case {
            name: "sideeffect.begin-reconcile (reconcile-taken)",
            setup: reconciling,
            op: |k, _| ok(k.sideeffect().begin_reconcile(&unsafe_action(), TTL)),
        },
        Case {
            name: "sideeffect.begin-reconcile (not-uncertain)",
            setup: granted,
            op: |k, _| ok(k.sideeffect().begin_reconcile(&action(), TTL)),
        },
        Case {
            name: "sideeffect.resolve-uncertain (applied)",
            setup: reconciling,
            op: |k, _| {
                let verdict = Resolution {
                    applied: true,
                    result: Some(b"sent".to_vec()),
                    force_retryable: false,
                    claim: None,
                };
                k.sideeffect()
                    .resolve_uncertain(&unsafe_action(), &verdict)
                    .map(resolved)
            },
        },
        Case {
            name: "sideeffect.resolve-uncertain (not applied, forced)",
            setup: uncertain,
            op: |k, _| {
                let verdict = Resolution {
                    applied: false,
                    result: None,
                    force_retryable: true,
                    claim: None,
                };
                k.sideeffect()
                    .resolve_uncertain(&unsafe_action(), &verdict)
                    .map(resolved)
            },
        },
        Case {
            name: "sideeffect.resolve-uncertain (unsafe-not-retryable)",
            setup: reconciling,
            op: |k, _| {
                k.sideeffect()
                    .resolve_uncertain(&unsafe_action(), &Resolution::default())
                    .map(resolved)
            },
        },
        Case {
            name: "sink.write-fenced",
            setup: |k, _| {
                write_fenced(k, 1, &Ctx::default()).unwrap();
                Ctx::default()
            },
            op: |k, c| write_fenced(k, 2, c),
        },
        Case {
            name: "sink.write-fenced (fence-stale)",
            setup: |k, _| {
                write_fenced(k, 3, &Ctx::default()).unwrap();
                Ctx::default()
            },
            op: |k, c| write_fenced(k, 2, c),
        },
        Case {
            name: "sink.sink-seen",
            setup: |k, _| {
                write_fenced(k, 4, &Ctx::default()).unwrap();
                Ctx::default()
            },
            op: |k, _| {
                k.sideeffect()
                    .sink_seen("mailbox")
                    .map(|s| format!("seen={s}"))
            },
        },
        // ------------------------------------------------------- taskboard
        Case {
            name: "taskboard.seed (fresh)",
            setup: none,
            op: |k, _| {
                ok(k.taskboard().seed(&[
                    TaskSeed::new("a").title("A"),
                    TaskSeed::new("b").deps(&["a"]),
                ]))
            },
        },
        Case {
            name: "taskboard.seed (re-seed over claims)",
            setup: claimed,
            op: |k, _| {
                ok(k.taskboard().seed(&[
                    TaskSeed::new("t").title("Task v2").deps(&["base"]),
                    TaskSeed::new("new"),
                ]))
            },
        },
        Case {
            name: "taskboard.list",
            setup: claimed,
            op: |k, _| {
                k.taskboard()
                    .list(None, None, 1000)
                    .map(|p| p.items)
                    .map(|ts| {
                        let states: Vec<String> = ts
                            .iter()
                            .map(|t| format!("{}:{:?}:{}", t.id, t.state, t.fence))
                            .collect();
                        states.join(",")
                    })
            },
        },
        Case {
            name: "taskboard.claim",
            setup: board,
            op: |k, _| {
                k.taskboard()
                    .claim("t", "w1", TTL)
                    .map(|t| format!("fence={}", t.fence))
            },
        },
        Case {
            name: "taskboard.claim (takeover after expiry)",
            setup: |k, c| {
                let ctx = claimed(k, c);
                c.advance(TTL);
                ctx
            },
            op: |k, _| {
                k.taskboard()
                    .claim("t", "w2", TTL)
                    .map(|t| format!("fence={}", t.fence))
            },
        },
        Case {
            name: "taskboard.claim (taken)",
            setup: claimed,
            op: |k, _| ok(k.taskboard().claim("t", "w2", TTL)),
        },
        Case {
            name: "taskboard.claim (deps-pending)",
            setup: board,
            op: |k, _| ok(k.taskboard().claim("blocked", "w2", TTL)),
        },
        Case {
            name: "taskboard.claim (terminal)",
            setup: board,
            op: |k, _| ok(k.taskboard().claim("base", "w2", TTL)),
        },
        Case {
            name: "taskboard.release",
            setup: claimed,
            op: |k, c| ok(k.taskboard().release("t", c.token())),
        },
        Case {
            name: "taskboard.release (lease-lost)",
            setup: claimed,
            op: |k, _| ok(k.taskboard().release("t", &"0".repeat(32))),
        },
        Case {
            name: "taskboard.complete",
            setup: claimed,
            op: |k, c| ok(k.taskboard().complete("t", c.token())),
        },
        Case {
            name: "taskboard.complete (again, idempotent)",
            setup: |k, c| {
                let ctx = claimed(k, c);
                k.taskboard().complete("t", ctx.token()).unwrap();
                ctx
            },
            op: |k, c| ok(k.taskboard().complete("t", c.token())),
        },
        Case {
            name: "taskboard.renew",
            setup: |k, c| {
                let ctx = claimed(k, c);
                c.advance(TTL / 2);
                ctx
            },
            op: |k, c| {
                k.taskboard()
                    .renew("t", c.token(), TTL)
                    .map(|t| format!("until=T0+{}", t.until.unwrap_or(0) - T0))
            },
        },
        Case {
            name: "taskboard.renew (lease-lost after expiry)",
            setup: |k, c| {
                let ctx = claimed(k, c);
                c.advance(TTL);
                ctx
            },
            op: |k, c| ok(k.taskboard().renew("t", c.token(), TTL)),
        },
    ]
}

/// The exported operations (build-plan aside: pure) that every matrix must
/// cover at least once.
const EXPORTS: [&str; 20] = [
    "checkpoint.save-if-newer",
    "checkpoint.load",
    "commitgate.commit",
    "commitgate.read",
    "sideeffect.acquire",
    "sideeffect.complete",
    "sideeffect.release",
    "sideeffect.abandon",
    "sideeffect.renew",
    "sideeffect.mark-uncertain",
    "sideeffect.begin-reconcile",
    "sideeffect.resolve-uncertain",
    "sink.write-fenced",
    "sink.sink-seen",
    "taskboard.seed",
    "taskboard.list",
    "taskboard.claim",
    "taskboard.release",
    "taskboard.complete",
    "taskboard.renew",
];

// ---------------------------------------------------------------------------
// The matrix.

fn is_storage<T>(r: &Result<T, Error>) -> bool {
    matches!(r, Err(Error::Storage(_)))
}

#[derive(Default)]
struct Tally {
    operations: usize,
    calls: usize,
    commits: usize,
    begins: usize,
    /// Operations that read the (database) clock, failed there.
    clocks: usize,
    /// Fenced writes whose body failed (`write-failed`).
    bodies: usize,
}

impl Tally {
    /// (operation, k) pairs: every store call plus the commit.
    fn pairs(&self) -> usize {
        self.calls + self.commits
    }
}

/// Run the whole matrix on one binding; returns what was covered.
fn run_matrix(binding: &mut Binding) -> Tally {
    let mut tally = Tally::default();
    for case in cases() {
        // Measure: the unfaulted call, its outcome and its store calls.
        let world = World::new(binding, case.setup);
        let expected = (case.op)(&world.kernel, &world.ctx);
        assert!(
            !is_storage(&expected),
            "{} {}: the unfaulted call failed: {expected:?}",
            binding.name,
            case.name
        );
        let trace = world.plan.last_trace();
        let n = trace.len();
        assert!(n > 0, "{} {}: makes no store call", binding.name, case.name);
        drop(world);

        let mut faults = vec![Fault::Begin, Fault::Now];
        faults.extend((1..=n).map(Fault::Call));
        if expected.is_ok() {
            // A refusal rolls back: it never reaches commit.
            faults.push(Fault::Commit);
        }
        for fault in faults {
            let what = match fault {
                Fault::Call(k) => format!("store call {k}/{n} ({})", trace[k - 1]),
                Fault::Now => "the database clock".to_owned(),
                other => format!("{other:?}"),
            };
            let world = World::new(binding, case.setup);
            let before = world.dump();
            let started = world.plan.transactions();
            world.plan.arm(fault);
            let got = (case.op)(&world.kernel, &world.ctx);
            if fault == Fault::Now && !world.plan.fired() {
                // This operation does not read the clock: it ran clean.
                assert_eq!(got, expected, "{} {}", binding.name, case.name);
                continue;
            }
            assert!(
                world.plan.fired(),
                "{} {}: {what} was never reached (store calls {:?})",
                binding.name,
                case.name,
                world.plan.last_trace()
            );
            assert!(
                is_storage(&got),
                "{} {}: a failure at {what} must be `storage`, got {got:?} (unfaulted: {expected:?})",
                binding.name,
                case.name
            );
            // A failure (not a conflict) is never re-run: the kernel cannot
            // know whether a failed commit reached the database.
            assert_eq!(
                world.plan.transactions() - started,
                1,
                "{} {}: a failure at {what} was re-run",
                binding.name,
                case.name
            );
            let after = world.dump();
            assert_eq!(
                before, after,
                "{} {}: a failure at {what} changed the store",
                binding.name, case.name
            );
            // The store and the kernel are intact: the same call, unfaulted,
            // makes the same calls and reaches the same outcome.
            let again = (case.op)(&world.kernel, &world.ctx);
            assert_eq!(
                again, expected,
                "{} {}: after a failure at {what}, the call answers differently",
                binding.name, case.name
            );
            assert_eq!(
                world.plan.last_trace(),
                trace,
                "{} {}: after a failure at {what}, the call makes other store calls",
                binding.name,
                case.name
            );
            match fault {
                Fault::Begin => tally.begins += 1,
                Fault::Commit => tally.commits += 1,
                Fault::Now => tally.clocks += 1,
                _ => tally.calls += 1,
            }
        }
        if case.name.starts_with("sink.write-fenced") && expected.is_ok() {
            // The body itself fails after its write: `write-failed`, and
            // neither the body's write nor the fence advance lands.
            let world = World::new(binding, case.setup);
            let before = world.dump();
            world.ctx.body_fails.set(true);
            let got = (case.op)(&world.kernel, &world.ctx);
            assert_eq!(
                got,
                Err(Error::WriteFailed),
                "{} {}: a failing body",
                binding.name,
                case.name
            );
            assert_eq!(
                world.dump(),
                before,
                "{} {}: a failing body left a write behind",
                binding.name,
                case.name
            );
            world.ctx.body_fails.set(false);
            let again = (case.op)(&world.kernel, &world.ctx);
            assert_eq!(again, expected, "{} {}", binding.name, case.name);
            tally.bodies += 1;
        }
        tally.operations += 1;
    }
    let covered: Vec<&str> = cases().iter().map(|c| c.name).collect();
    for export in EXPORTS {
        assert!(
            covered.iter().any(|c| c.starts_with(export)),
            "{export} is not in the matrix"
        );
    }
    eprintln!(
        "fault matrix {}: {} (operation, k) pairs clean ({} store calls + {} commits over {} operation states; plus {} begin failures, {} database-clock failures, {} failing sink bodies)",
        binding.name,
        tally.pairs(),
        tally.calls,
        tally.commits,
        tally.operations,
        tally.begins,
        tally.clocks,
        tally.bodies
    );
    tally
}

fn check_matrix(binding: &mut Binding) {
    let tally = run_matrix(binding);
    // 56 operation states, each with at least one store call, two thirds of
    // them committing: 139 pairs today (the kernel batches its reads with
    // get-many). 120 leaves room for the kernel to batch more, and fails a
    // matrix that lost cases or stopped enumerating calls.
    assert!(
        tally.pairs() >= 120,
        "fault matrix {}: only {} pairs",
        binding.name,
        tally.pairs()
    );
    assert!(
        tally.operations >= 50,
        "only {} operations",
        tally.operations
    );
    // Every operation that judges time reads the clock: 29 of the 56 today.
    assert!(
        tally.clocks >= 25,
        "fault matrix {}: only {} operations failed at the clock",
        binding.name,
        tally.clocks
    );
    assert!(tally.bodies >= 1, "no failing sink body");
}

fn fault_matrix_memory() {
    check_matrix(&mut Binding::memory());
}

fn fault_matrix_sqlite() {
    check_matrix(&mut Binding::sqlite());
}

fn fault_matrix_postgres(dsn: &str) {
    check_matrix(&mut Binding::postgres(dsn));
}

// ---------------------------------------------------------------------------
// SPEC 5: "If the marking cannot be written, the intent must still be there."

fn unwritten_mark_keeps_the_intent(binding: &mut Binding) {
    let world = World::new(binding, granted);
    world
        .kernel
        .sideeffect()
        .mark_uncertain(&action(), world.ctx.lease(), "timeout")
        .unwrap();
    let trace = world.plan.last_trace();
    drop(world);
    let mut faults: Vec<Fault> = trace
        .iter()
        .enumerate()
        .filter(|(_, call)| call.starts_with("write"))
        .map(|(i, _)| Fault::Call(i + 1))
        .collect();
    assert!(
        !faults.is_empty(),
        "mark-uncertain writes nothing? {trace:?}"
    );
    faults.push(Fault::Commit);
    for fault in faults {
        let world = World::new(binding, granted);
        let lease = world.ctx.lease().clone();
        let se = world.kernel.sideeffect();
        world.plan.arm(fault);
        let marked = se.mark_uncertain(&action(), &lease, "timeout");
        assert!(
            is_storage(&marked),
            "{} {fault:?}: {marked:?}",
            binding.name
        );
        // Before expiry: the attempt is still in flight.
        world.clock.set(lease.until - 1).unwrap();
        assert_eq!(
            se.acquire(&action(), TTL),
            Ok(Acquired::InFlight),
            "{} {fault:?}: before expiry",
            binding.name
        );
        // From expiry: uncertain, never a second grant.
        world.clock.set(lease.until).unwrap();
        for _ in 0..2 {
            assert_eq!(
                se.acquire(&action(), TTL),
                Ok(Acquired::Uncertain("intent-expired".into())),
                "{} {fault:?}: after expiry",
                binding.name
            );
        }
        // The holder can still record its verdict (its fence is the newest).
        se.mark_uncertain(&action(), &lease, "timeout").unwrap();
        assert_eq!(
            se.acquire(&action(), TTL),
            Ok(Acquired::Uncertain("timeout".into())),
            "{} {fault:?}: marked late",
            binding.name
        );
    }
}

fn unwritten_mark_uncertain_keeps_the_intent_memory() {
    unwritten_mark_keeps_the_intent(&mut Binding::memory());
}

fn unwritten_mark_uncertain_keeps_the_intent_sqlite() {
    unwritten_mark_keeps_the_intent(&mut Binding::sqlite());
}

fn unwritten_mark_uncertain_keeps_the_intent_postgres(dsn: &str) {
    unwritten_mark_keeps_the_intent(&mut Binding::postgres(dsn));
}

// ---------------------------------------------------------------------------
// Conflicts are re-run, whole: a conflict at any store call ends in the same
// outcome as no conflict at all, after exactly one re-run.

fn conflicts_rerun_cleanly(binding: &mut Binding) {
    let mut pairs = 0;
    for case in cases() {
        let world = World::new(binding, case.setup);
        let expected = (case.op)(&world.kernel, &world.ctx);
        let trace = world.plan.last_trace();
        drop(world);
        for k in 1..=trace.len() {
            if trace[k - 1].ends_with(" downstream") {
                // A sink body's own store call: see
                // `a_conflict_inside_a_sink_body_is_rerun`.
                continue;
            }
            let world = World::new(binding, case.setup);
            let started = world.plan.transactions();
            world.plan.arm(Fault::Conflict(k));
            let got = (case.op)(&world.kernel, &world.ctx);
            assert!(
                world.plan.fired(),
                "{} {}: conflict {k}",
                binding.name,
                case.name
            );
            assert_eq!(
                got,
                expected,
                "{} {}: a conflict at call {k} ({}) changed the outcome",
                binding.name,
                case.name,
                trace[k - 1]
            );
            assert_eq!(
                world.plan.transactions() - started,
                2,
                "{} {}: a conflict is re-run exactly once",
                binding.name,
                case.name
            );
            assert_eq!(
                world.plan.last_trace(),
                trace,
                "{} {}",
                binding.name,
                case.name
            );
            pairs += 1;
        }
    }
    eprintln!(
        "conflict re-runs {}: {pairs} (operation, k) pairs",
        binding.name
    );
}

fn conflicts_are_rerun_to_the_same_outcome_memory() {
    conflicts_rerun_cleanly(&mut Binding::memory());
}

fn conflicts_are_rerun_to_the_same_outcome_sqlite() {
    conflicts_rerun_cleanly(&mut Binding::sqlite());
}

fn conflicts_are_rerun_to_the_same_outcome_postgres(dsn: &str) {
    conflicts_rerun_cleanly(&mut Binding::postgres(dsn));
}

/// `write_fenced` documents that "`body` may run more than once if the store
/// reports a conflict": a conflict reported to the body's own store calls
/// (`Downstream::get` / `put`, e.g. a PostgreSQL serialization failure on the
/// downstream write) must re-run the whole call like any other conflict,
/// not end it as the body's `storage` error.
fn sink_body_conflict_is_rerun(binding: &mut Binding) {
    let setup: Setup = |k, _| {
        write_fenced(k, 1, &Ctx::default()).unwrap();
        Ctx::default()
    };
    let world = World::new(binding, setup);
    assert_eq!(
        write_fenced(&world.kernel, 2, &world.ctx),
        Ok("written".into())
    );
    let trace = world.plan.last_trace();
    drop(world);
    let body_calls: Vec<usize> = (1..=trace.len())
        .filter(|k| trace[k - 1].ends_with(" downstream"))
        .collect();
    assert!(!body_calls.is_empty(), "{trace:?}");
    for k in body_calls {
        let world = World::new(binding, setup);
        world.plan.arm(Fault::Conflict(k));
        let got = write_fenced(&world.kernel, 2, &world.ctx);
        assert!(world.plan.fired());
        assert_eq!(
            got,
            Ok("written".into()),
            "{}: a conflict at the sink body's call {k} ({}) is not re-run",
            binding.name,
            trace[k - 1]
        );
        assert_eq!(world.kernel.sideeffect().sink_seen("mailbox"), Ok(2));
        let marker = world.kernel.with_downstream(|d| d.get("mailbox"));
        assert_eq!(marker, Ok(Some("mm".into())), "{}", binding.name);
    }
}

fn a_conflict_inside_a_sink_body_is_rerun_memory() {
    sink_body_conflict_is_rerun(&mut Binding::memory());
}

fn a_conflict_inside_a_sink_body_is_rerun_sqlite() {
    sink_body_conflict_is_rerun(&mut Binding::sqlite());
}

fn a_conflict_inside_a_sink_body_is_rerun_postgres(dsn: &str) {
    sink_body_conflict_is_rerun(&mut Binding::postgres(dsn));
}

/// The wrapper itself: the plan is consumed by one transaction, commit
/// faults commit nothing, and the dump never consumes the plan.
fn the_wrapper_injects_what_it_is_told() {
    let (backend, plan) = Faulty::wrap(Arc::new(MemoryBackend::default()));
    let mut s = run(backend.session()).unwrap();
    let get = |s: &mut Box<dyn gak::store::Session>, key: &str| {
        run(gak::store::get_one(&mut **s, "tasks", key))
    };
    plan.arm(Fault::Call(2));
    run(backend.dump()).unwrap();
    run(s.begin()).unwrap();
    run(s.put("tasks", "a", "1")).unwrap();
    assert!(get(&mut s, "a").is_err());
    assert!(plan.fired());
    run(s.rollback());
    run(s.begin()).unwrap();
    run(s.put("tasks", "a", "1")).unwrap();
    get(&mut s, "a").unwrap();
    get(&mut s, "b").unwrap();
    run(s.commit()).unwrap();
    plan.disarm();
    assert!(!plan.fired());
    assert_eq!(plan.last_calls(), 3);
    assert_eq!(plan.last_trace(), ["write tasks", "get tasks", "get tasks"]);
    plan.arm(Fault::Commit);
    run(s.begin()).unwrap();
    run(s.put("tasks", "b", "2")).unwrap();
    assert!(run(s.commit()).is_err());
    assert_eq!(plan.last_fault(), Fault::Commit);
    assert_eq!(
        run(backend.dump()).unwrap(),
        [("tasks".to_string(), "a".to_string(), "1".to_string())]
    );
    // A rejected commit left no transaction open: the next begins.
    run(s.begin()).unwrap();
    run(s.rollback());
}

fn main() {
    let mut suite = Suite::new();
    suite.test("fault_matrix_memory", fault_matrix_memory);
    suite.test("fault_matrix_sqlite", fault_matrix_sqlite);
    suite.needs(&POSTGRES, "fault_matrix_postgres", fault_matrix_postgres);
    suite.test(
        "unwritten_mark_uncertain_keeps_the_intent_memory",
        unwritten_mark_uncertain_keeps_the_intent_memory,
    );
    suite.test(
        "unwritten_mark_uncertain_keeps_the_intent_sqlite",
        unwritten_mark_uncertain_keeps_the_intent_sqlite,
    );
    suite.needs(
        &POSTGRES,
        "unwritten_mark_uncertain_keeps_the_intent_postgres",
        unwritten_mark_uncertain_keeps_the_intent_postgres,
    );
    suite.test(
        "conflicts_are_rerun_to_the_same_outcome_memory",
        conflicts_are_rerun_to_the_same_outcome_memory,
    );
    suite.test(
        "conflicts_are_rerun_to_the_same_outcome_sqlite",
        conflicts_are_rerun_to_the_same_outcome_sqlite,
    );
    suite.needs(
        &POSTGRES,
        "conflicts_are_rerun_to_the_same_outcome_postgres",
        conflicts_are_rerun_to_the_same_outcome_postgres,
    );
    suite.test(
        "a_conflict_inside_a_sink_body_is_rerun_memory",
        a_conflict_inside_a_sink_body_is_rerun_memory,
    );
    suite.test(
        "a_conflict_inside_a_sink_body_is_rerun_sqlite",
        a_conflict_inside_a_sink_body_is_rerun_sqlite,
    );
    suite.needs(
        &POSTGRES,
        "a_conflict_inside_a_sink_body_is_rerun_postgres",
        a_conflict_inside_a_sink_body_is_rerun_postgres,
    );
    suite.test(
        "the_wrapper_injects_what_it_is_told",
        the_wrapper_injects_what_it_is_told,
    );
    type Check = fn(&mut Binding);
    let lost: [(&str, Check); 3] = [
        (
            "lost_acknowledgements_are_never_rerun",
            lost_commits::lost_acknowledgements,
        ),
        ("a_lost_claim_expires", lost_commits::lost_claim_expires),
        (
            "a_lost_acquire_turns_uncertain",
            lost_commits::lost_acquire_turns_uncertain,
        ),
    ];
    for (name, check) in lost {
        suite.test(&format!("{name}_memory"), move || {
            check(&mut Binding::memory())
        });
        suite.test(&format!("{name}_sqlite"), move || {
            check(&mut Binding::sqlite())
        });
        suite.needs(&POSTGRES, &format!("{name}_postgres"), move |dsn| {
            check(&mut Binding::postgres(dsn))
        });
    }
    suite.run();
}
