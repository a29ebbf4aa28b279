//! What one worker does for each op and implementation.
//!
//! Every implementation of an op runs the same loop with the same names
//! and TTLs; only who decides differs (the component, the rules natively,
//! hand-written SQL). Names carry a tag unique to the figure and process, so
//! figures, runs and `--processes` children never meet each other's tasks
//! and keys, except the hot set, which every process of a figure shares.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use gak_rules::{
    Acquired, Action, Completion, CompletionAnswer, Error, Lease, Snapshot, StepDef, TaskSeed,
};

use super::{DRAIN_BATCH, Impl, Op, sql};
use gak::Retry;
use gak::blocking::{Kernel, run_future as run};
use gak::clock::Clock;
use gak::measure::Caller;
use gak::store::Backend;

/// How one call of a worker's loop went.
pub(crate) enum Done {
    /// An op, answered as expected.
    Ok,
    /// An op refused by the contract as the op expects under contention
    /// (`taken` on the hot set): counted, and reported apart.
    Refused,
    /// No op: the worker refilled its supply (seeded tasks). Not timed.
    Setup,
}

/// One worker of one implementation.
pub(crate) trait Worker: Send {
    /// One op.
    fn op(&mut self) -> Result<Done, String>;
    /// Before a sample, untimed: make ready for about `hint` ops.
    fn prepare(&mut self, _hint: usize) -> Result<(), String> {
        Ok(())
    }
}

/// What the workers of one figure share.
pub(crate) struct Context {
    pub kernel: Kernel,
    pub backend: Arc<dyn Backend>,
    pub sql: Option<sql::Database>,
    /// The figure's tag, shared by every process of it (the hot set).
    pub shared: String,
    /// The figure's tag in this process (everything else).
    pub own: String,
    /// A small number unique to this process, for ceiling rows.
    pub process: i64,
    /// The memory store's ceiling: a map under a mutex.
    pub map: Arc<Mutex<HashMap<i64, i64>>>,
}

const AGENT: &str = "bench";
/// A claim or intent that outlives any sample.
const LONG_TTL: u64 = 600_000;
/// The hot set's leases: short, so claims keep expiring and being taken over.
const HOT_TTL: u64 = 1;
/// The hot set's size.
const HOT_TASKS: usize = 10;
/// At most this many tasks per seed call (the contract allows 10,000; a
/// seed takes a few transaction-scoped locks per task, and a default
/// PostgreSQL's lock table holds 6,400: 5,000 ran out of shared memory when
/// `drain-batch` seeded its queue).
const SEED_CHUNK: usize = 1_000;

/// A contract answer; a storage failure becomes the bench's failure.
fn answer<T>(r: Result<T, Error>) -> Result<Result<T, Error>, String> {
    match r {
        Err(Error::Storage(e)) => Err(e.to_string()),
        other => Ok(other),
    }
}

/// The workers of `imp` for `op`, set up (hot set and replay keys seeded).
pub(crate) fn build(
    ctx: &Context,
    imp: Impl,
    op: Op,
    count: usize,
) -> Result<Vec<Box<dyn Worker>>, String> {
    let mut all: Vec<Box<dyn Worker>> = Vec::with_capacity(count);
    for w in 0..count {
        let own = format!("{}-{}-w{w}", ctx.own, imp.name());
        let worker: Box<dyn Worker> = match (op, imp) {
            (Op::Claim, Impl::Ceiling) => ceiling(ctx, w)?,
            (Op::Claim, _) => Box::new(FreshClaims::new(side(ctx, imp)?, own)),
            (Op::ClaimHot, _) => {
                let hot: Vec<String> = (0..HOT_TASKS)
                    .map(|i| format!("{}-{}-hot{i}", ctx.shared, imp.name()))
                    .collect();
                let mut side = side(ctx, imp)?;
                if w == 0 {
                    side.seed(&hot)?;
                }
                Box::new(HotClaims {
                    side,
                    hot,
                    rng: 0x9E37_79B9_7F4A_7C15 ^ (w as u64 + 1) ^ ((ctx.process as u64) << 32),
                })
            }
            (Op::AcquireComplete, _) => Box::new(FreshKeys {
                side: side(ctx, imp)?,
                resource: format!("{own}-r"),
                prefix: own,
                next: 0,
            }),
            (Op::AcquireReplay, _) => {
                let mut side = side(ctx, imp)?;
                let action = Action::new(&format!("{own}-replayed"), &format!("{own}-r"));
                match side.acquire(&action, LONG_TTL)? {
                    Acquired::Granted(lease) => side.complete(&action, &lease)?,
                    other => return Err(format!("a fresh key was not granted: {other:?}")),
                }
                Box::new(Replays { side, action })
            }
            (Op::SaveIfNewer, _) => Box::new(Saves {
                side: side(ctx, imp)?,
                snap: Snapshot {
                    run_id: format!("{own}-run"),
                    seq: 0,
                    fence: None,
                    status: "running".into(),
                    done: vec!["fetch".into(), "transform".into()],
                    fields: vec![("attempt".into(), "1".into())],
                },
            }),
            (Op::BuildPlan, _) => Box::new(Plans {
                side: side(ctx, imp)?,
                steps: dag(1_000),
            }),
            (Op::Drain | Op::DrainBatch, _) => Box::new(Drain {
                side: side(ctx, imp)?,
                prefix: format!("{own}-job"),
                seeded: 0,
                batch: if op == Op::Drain { 1 } else { DRAIN_BATCH },
                held: Vec::new(),
                done: Vec::new(),
            }),
        };
        all.push(worker);
    }
    Ok(all)
}

/// A DAG of `n` steps: each depends on the one before and on the one at
/// half its index, so the plan walks a real graph, not a list.
fn dag(n: usize) -> Vec<StepDef> {
    (0..n)
        .map(|i| {
            let mut deps = Vec::new();
            if i > 0 {
                deps.push(format!("s{}", i - 1));
            }
            if i > 2 {
                deps.push(format!("s{}", i / 2));
            }
            StepDef {
                id: format!("s{i}"),
                depends_on: deps,
            }
        })
        .collect()
}

fn ceiling(ctx: &Context, w: usize) -> Result<Box<dyn Worker>, String> {
    let row = ctx.process * 10_000 + w as i64;
    Ok(match &ctx.sql {
        Some(db) => Box::new(SqlCeiling {
            conn: db.connect()?,
            row,
        }),
        None => Box::new(MapCeiling {
            map: ctx.map.clone(),
            row,
        }),
    })
}

/// Who decides: the component, the rules natively, or SQL.
enum Side {
    Kernel(Kernel),
    Native(Box<Caller>),
    Sql(Box<sql::Conn>, Arc<dyn Clock>),
}

fn side(ctx: &Context, imp: Impl) -> Result<Side, String> {
    Ok(match imp {
        Impl::Kernel => Side::Kernel(ctx.kernel.clone()),
        Impl::Native => {
            let session = run(ctx.backend.session()).map_err(|f| f.to_string())?;
            Side::Native(Box::new(Caller::new(
                session,
                ctx.kernel.clock().clone(),
                Retry::default(),
            )))
        }
        Impl::Sql => {
            let db = ctx.sql.as_ref().ok_or("sql needs a database store")?;
            Side::Sql(Box::new(db.connect()?), ctx.kernel.clock().clone())
        }
        Impl::Ceiling => return Err("the ceiling has only a claim loop".into()),
    })
}

impl Side {
    fn seed(&mut self, ids: &[String]) -> Result<(), String> {
        for chunk in ids.chunks(SEED_CHUNK) {
            let seeds: Vec<TaskSeed> = chunk.iter().map(|id| TaskSeed::new(id)).collect();
            let r = match self {
                Side::Kernel(k) => k.taskboard().seed(&seeds),
                Side::Native(c) => c.call(0, true, |tx| gak_rules::taskboard::seed(tx, &seeds)),
                Side::Sql(conn, _) => conn.seed_tasks(chunk).map_err(Error::storage),
            };
            r.map_err(|e| format!("seeding tasks: {e}"))?;
        }
        Ok(())
    }

    fn claim(&mut self, id: &str, ttl: u64) -> Result<Result<(), Error>, String> {
        match self {
            Side::Kernel(k) => answer(k.taskboard().claim(id, AGENT, ttl).map(drop)),
            Side::Native(c) => answer(
                c.call(1, true, |tx| {
                    gak_rules::taskboard::claim(tx, id, AGENT, ttl)
                })
                .map(drop),
            ),
            Side::Sql(conn, clock) => Ok(conn.claim(id, AGENT, ttl, clock.now())?.map(drop)),
        }
    }

    /// Claim up to `n` ready tasks (`claim-next` when `n` is 1): their
    /// ids and tokens.
    fn claim_some(&mut self, n: u32, ttl: u64) -> Result<Vec<(String, String)>, String> {
        let pairs = |tasks: Vec<gak_rules::Task>| {
            tasks
                .into_iter()
                .map(|t| (t.id, t.token.unwrap_or_default()))
                .collect()
        };
        let r = match self {
            Side::Kernel(k) if n == 1 => k
                .taskboard()
                .claim_next(AGENT, ttl)
                .map(|t| pairs(t.into_iter().collect())),
            Side::Kernel(k) => k.taskboard().claim_batch(AGENT, ttl, n).map(pairs),
            Side::Native(c) => c
                .call(2, true, |tx| {
                    gak_rules::taskboard::claim_batch(tx, AGENT, ttl, n)
                })
                .map(pairs),
            Side::Sql(conn, clock) => {
                let ids = conn.drain(n, AGENT, ttl, clock.now())?;
                Ok(ids.into_iter().map(|id| (id, String::new())).collect())
            }
        };
        r.map_err(|e| format!("claim-batch refused: {e}"))
    }

    /// Complete claimed tasks (`complete` for one): every one must succeed.
    fn complete_some(&mut self, done: &[(String, String)]) -> Result<(), String> {
        let items: Vec<Completion> = done.iter().map(|(i, t)| Completion::new(i, t)).collect();
        let completed = match self {
            Side::Kernel(k) if done.len() == 1 => {
                answer(k.taskboard().complete(&done[0].0, &done[0].1))?.is_ok() as usize
            }
            Side::Kernel(k) => answer(k.taskboard().complete_batch(&items))?
                .map_err(|e| format!("complete-batch refused: {e}"))?
                .iter()
                .filter(|a| a.answer == CompletionAnswer::Completed)
                .count(),
            Side::Native(c) if done.len() == 1 => answer(c.call(0, true, |tx| {
                gak_rules::taskboard::complete(tx, &done[0].0, &done[0].1)
            }))?
            .is_ok() as usize,
            Side::Native(c) => answer(c.call(0, true, |tx| {
                gak_rules::taskboard::complete_batch(tx, &items)
            }))?
            .map_err(|e| format!("complete-batch refused: {e}"))?
            .iter()
            .filter(|a| a.answer == CompletionAnswer::Completed)
            .count(),
            Side::Sql(conn, _) => {
                let ids: Vec<String> = done.iter().map(|(i, _)| i.clone()).collect();
                conn.complete_drained(&ids)? as usize
            }
        };
        if completed == done.len() {
            Ok(())
        } else {
            Err(format!(
                "{} of {} completions refused",
                done.len() - completed,
                done.len()
            ))
        }
    }

    fn acquire(&mut self, action: &Action, ttl: u64) -> Result<Acquired, String> {
        let r = match self {
            Side::Kernel(k) => answer(k.sideeffect().acquire(action, ttl))?,
            Side::Native(c) => answer(c.call(1, true, |tx| {
                gak_rules::sideeffect::acquire(tx, action, ttl)
            }))?,
            Side::Sql(conn, clock) => {
                conn.acquire(&action.key, &action.resource, ttl, clock.now())?
            }
        };
        r.map_err(|e| format!("acquire of {} refused: {e}", action.key))
    }

    fn complete(&mut self, action: &Action, lease: &Lease) -> Result<(), String> {
        let done = match self {
            Side::Kernel(k) => answer(k.sideeffect().complete(action, lease, b"ok"))?.is_ok(),
            Side::Native(c) => answer(c.call(0, true, |tx| {
                gak_rules::sideeffect::complete(tx, action, lease, b"ok")
            }))?
            .is_ok(),
            Side::Sql(conn, _) => conn.complete(lease, b"ok")?,
        };
        if done {
            Ok(())
        } else {
            Err(format!("complete of {} refused", action.key))
        }
    }
}

/// `claim`: fresh tasks of this worker's own, seeded ahead.
struct FreshClaims {
    side: Side,
    prefix: String,
    next: u64,
    seeded: u64,
    batch: u64,
}

impl FreshClaims {
    fn new(side: Side, prefix: String) -> FreshClaims {
        FreshClaims {
            side,
            prefix,
            next: 0,
            seeded: 0,
            batch: 256,
        }
    }

    fn refill(&mut self, count: u64) -> Result<(), String> {
        let ids: Vec<String> = (self.seeded..self.seeded + count)
            .map(|i| format!("{}-{i}", self.prefix))
            .collect();
        self.side.seed(&ids)?;
        self.seeded += count;
        Ok(())
    }
}

impl Worker for FreshClaims {
    fn op(&mut self) -> Result<Done, String> {
        if self.next == self.seeded {
            self.refill(self.batch)?;
            self.batch = (self.batch * 2).min(SEED_CHUNK as u64);
            return Ok(Done::Setup);
        }
        let id = format!("{}-{}", self.prefix, self.next);
        self.next += 1;
        match self.side.claim(&id, LONG_TTL)? {
            Ok(()) => Ok(Done::Ok),
            Err(e) => Err(format!("claim of the fresh task {id} refused: {e}")),
        }
    }

    fn prepare(&mut self, hint: usize) -> Result<(), String> {
        let want = hint as u64 + hint as u64 / 3 + 16;
        let left = self.seeded - self.next;
        if left < want {
            self.refill(want - left)?;
        }
        Ok(())
    }
}

/// `claim-hot`: every worker claims one of the same 10 tasks.
struct HotClaims {
    side: Side,
    hot: Vec<String>,
    rng: u64,
}

impl Worker for HotClaims {
    fn op(&mut self) -> Result<Done, String> {
        // xorshift64: a cheap, per-worker spread over the hot set.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let id = &self.hot[(self.rng % self.hot.len() as u64) as usize];
        match self.side.claim(id, HOT_TTL)? {
            Ok(()) => Ok(Done::Ok),
            Err(Error::Taken) => Ok(Done::Refused),
            Err(e) => Err(format!("claim of the hot task {id} refused: {e}")),
        }
    }
}

/// `acquire-complete`: a fresh key each time, on the worker's resource.
struct FreshKeys {
    side: Side,
    prefix: String,
    resource: String,
    next: u64,
}

impl Worker for FreshKeys {
    fn op(&mut self) -> Result<Done, String> {
        let action = Action::new(&format!("{}-k{}", self.prefix, self.next), &self.resource);
        self.next += 1;
        match self.side.acquire(&action, LONG_TTL)? {
            Acquired::Granted(lease) => self.side.complete(&action, &lease)?,
            other => return Err(format!("a fresh key was not granted: {other:?}")),
        }
        Ok(Done::Ok)
    }
}

/// `acquire-replay`: the same completed key again and again.
struct Replays {
    side: Side,
    action: Action,
}

impl Worker for Replays {
    fn op(&mut self) -> Result<Done, String> {
        match self.side.acquire(&self.action, LONG_TTL)? {
            Acquired::Replayed(_) => Ok(Done::Ok),
            other => Err(format!("a completed key did not replay: {other:?}")),
        }
    }
}

/// `save-if-newer`: the worker's run, one sequence number further each time.
struct Saves {
    side: Side,
    snap: Snapshot,
}

impl Worker for Saves {
    fn op(&mut self) -> Result<Done, String> {
        self.snap.seq += 1;
        let snap = &self.snap;
        let r = match &mut self.side {
            Side::Kernel(k) => k.checkpoint().save_if_newer(snap),
            Side::Native(c) => c.call(0, false, |tx| {
                gak_rules::checkpoint::save_if_newer(tx, snap)
            }),
            Side::Sql(..) => return Err("save-if-newer has no sql baseline".into()),
        };
        r.map(|()| Done::Ok)
            .map_err(|e| format!("save-if-newer refused: {e}"))
    }
}

/// `build-plan`: a pure call over a 1,000-step DAG.
struct Plans {
    side: Side,
    steps: Vec<StepDef>,
}

impl Worker for Plans {
    fn op(&mut self) -> Result<Done, String> {
        let r = match &self.side {
            Side::Kernel(k) => k.checkpoint().build_plan(&self.steps, None),
            Side::Native(_) => gak_rules::plan::build_plan(&self.steps, None),
            Side::Sql(..) => return Err("build-plan has no sql baseline".into()),
        };
        match r {
            Ok(plan) if plan.run.len() == self.steps.len() => Ok(Done::Ok),
            Ok(plan) => Err(format!("the plan runs {} steps", plan.run.len())),
            Err(e) => Err(format!("build-plan refused: {e}")),
        }
    }
}

/// `drain` and `drain-batch`: jobs from the figure's shared board, claimed
/// one at a time or in batches and completed the same way. Each worker
/// seeds its share of the jobs before a sample (untimed).
struct Drain {
    side: Side,
    prefix: String,
    seeded: u64,
    batch: u32,
    /// Claimed, not yet handled: (id, token).
    held: Vec<(String, String)>,
    /// Handled, not yet completed.
    done: Vec<(String, String)>,
}

impl Worker for Drain {
    fn op(&mut self) -> Result<Done, String> {
        if self.held.is_empty() {
            let mut claimed = self.side.claim_some(self.batch, LONG_TTL)?;
            if claimed.is_empty() {
                // The board ran dry mid-sample: refill, untimed.
                self.prepare(self.batch as usize * 4)?;
                return Ok(Done::Setup);
            }
            claimed.reverse();
            self.held = claimed;
        }
        let job = self.held.pop().expect("held");
        self.done.push(job);
        if self.held.is_empty() {
            let done = std::mem::take(&mut self.done);
            self.side.complete_some(&done)?;
        }
        Ok(Done::Ok)
    }

    fn prepare(&mut self, hint: usize) -> Result<(), String> {
        let want = (hint + hint / 3 + self.batch as usize * 2) as u64;
        let ids: Vec<String> = (self.seeded..self.seeded + want)
            .map(|i| format!("{}-{i}", self.prefix))
            .collect();
        self.side.seed(&ids)?;
        self.seeded += want;
        Ok(())
    }
}

/// The database's raw single-row transaction loop.
struct SqlCeiling {
    conn: sql::Conn,
    row: i64,
}

impl Worker for SqlCeiling {
    fn op(&mut self) -> Result<Done, String> {
        self.conn.ceiling(self.row).map(|()| Done::Ok)
    }
}

/// The memory store's ceiling: read and write one entry under a mutex.
struct MapCeiling {
    map: Arc<Mutex<HashMap<i64, i64>>>,
    row: i64,
}

impl Worker for MapCeiling {
    fn op(&mut self) -> Result<Done, String> {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let n = map.get(&self.row).copied().unwrap_or(0);
        map.insert(self.row, n + 1);
        Ok(Done::Ok)
    }
}
