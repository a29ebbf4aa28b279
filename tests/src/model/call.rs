//! Concrete calls: an operation made concrete for one caller.
//!
//! A caller remembers the tokens, leases and deadlines it has been handed
//! ([`Refs`]); [`instantiate`] turns an [`Op`] into the [`Call`] it makes,
//! with tokens as [`H`](super::H) for the model and as `String` for the
//! kernel, so that one operation means the same to both.
use gak::{Action, Outcome, Resolution, Snapshot, Status, TaskSeed};

use super::answer::{AcqV, LeaseV, Out, TaskV};
use super::invalid::invalid_call;
use super::ops::{ItemRef, LeaseRef, Op, Tamper, TokRef};
use super::{AGENTS, FINGERPRINTS, GROUPS, KEYS, RESOURCES, RUNS, START, STEPS, TASKS};

/// One concrete call, with tokens as `T`.
#[derive(Clone, Debug)]
pub enum Call<T> {
    Advance(u64),
    /// Set the clock to this time unless it is already later.
    AdvanceTo(u64),
    Seed(Vec<TaskSeed>),
    List,
    Claim {
        id: String,
        agent: String,
        ttl: u64,
    },
    TRelease {
        id: String,
        token: T,
    },
    TComplete {
        id: String,
        token: T,
    },
    TRenew {
        id: String,
        token: T,
        ttl: u64,
    },
    Acquire {
        action: Action,
        ttl: u64,
    },
    Complete {
        action: Action,
        lease: LeaseV<T>,
        result: Vec<u8>,
    },
    Release {
        action: Action,
        lease: LeaseV<T>,
    },
    Abandon {
        action: Action,
        lease: LeaseV<T>,
    },
    Renew {
        action: Action,
        lease: LeaseV<T>,
        ttl: u64,
    },
    Mark {
        action: Action,
        lease: LeaseV<T>,
        reason: String,
    },
    Begin {
        action: Action,
        ttl: u64,
    },
    Resolve {
        action: Action,
        resolution: Resolution,
    },
    Sink {
        resource: String,
        presented: u64,
        fail: bool,
        marker: String,
    },
    SinkRead {
        resource: String,
        downstream: bool,
    },
    Save(Snapshot),
    Load(String),
    Commit {
        run: String,
        step: Option<String>,
        fence: u64,
        outcome: Outcome,
    },
    Read {
        run: String,
        step: Option<String>,
    },
    KeyGet(String),
    ClaimNext {
        agent: String,
        ttl: u64,
    },
    ClaimBatch {
        agent: String,
        ttl: u64,
        limit: u32,
    },
    CompleteBatch {
        items: Vec<(String, T)>,
    },
    Fail {
        id: String,
        token: T,
        reason: String,
        retry_after: Option<u64>,
    },
    Revive(String),
    SetGroupLimit {
        group: String,
        limit: Option<u32>,
    },
    GetGroup(String),
    /// A call SPEC 8 refuses with `invalid-input`, before anything else.
    Invalid(Box<Call<T>>),
}

/// The tokens and leases one caller has seen so far, in order.
#[derive(Clone, Debug)]
pub struct Refs<T> {
    tokens: Vec<(String, T)>,
    leases: Vec<LeaseV<T>>,
    /// Every deadline handed out (claims, grants, renewals, reconcile claims).
    deadlines: Vec<u64>,
}

impl<T> Default for Refs<T> {
    fn default() -> Self {
        Refs {
            tokens: Vec::new(),
            leases: Vec::new(),
            deadlines: Vec::new(),
        }
    }
}

impl<T: Clone> Refs<T> {
    fn token(&self, task: &str, r: TokRef, forged: &T) -> T {
        let nth_back = |v: Vec<&T>, n: usize| {
            if v.is_empty() {
                forged.clone()
            } else {
                v[v.len() - 1 - n % v.len()].clone()
            }
        };
        match r {
            TokRef::Own(n) => nth_back(
                self.tokens
                    .iter()
                    .filter(|(t, _)| t == task)
                    .map(|(_, tok)| tok)
                    .collect(),
                n,
            ),
            TokRef::Any(n) => nth_back(self.tokens.iter().map(|(_, tok)| tok).collect(), n),
            TokRef::Forged => forged.clone(),
        }
    }

    /// The task and token a queue call presents.
    fn item(&self, r: ItemRef, forged: &T) -> (String, T) {
        match r {
            ItemRef::Task(task, tok) => {
                (TASKS[task].to_owned(), self.token(TASKS[task], tok, forged))
            }
            ItemRef::Recent(n) => match self.tokens.len() {
                0 => (TASKS[0].to_owned(), forged.clone()),
                len => self.tokens[len - 1 - n % len].clone(),
            },
        }
    }

    /// The lease and the action presented with it.
    fn lease(&self, r: LeaseRef, forged: &T) -> (Action, LeaseV<T>) {
        let mut lease = if self.leases.is_empty() {
            LeaseV {
                key: KEYS[0].into(),
                resource: RESOURCES[0].into(),
                fence: 1,
                holder: forged.clone(),
                until: START,
            }
        } else {
            self.leases[self.leases.len() - 1 - r.back % self.leases.len()].clone()
        };
        let other = |names: &[&str], name: &str| {
            let i = names.iter().position(|n| *n == name).unwrap_or(0);
            names[(i + 1) % names.len()].to_owned()
        };
        let mut action = Action::new(&lease.key, &lease.resource);
        match r.tamper {
            Tamper::None => {}
            Tamper::JunkUntil => lease.until = 7,
            Tamper::OtherKey => action.key = other(&KEYS, &lease.key),
            Tamper::OtherResource => action.resource = other(&RESOURCES, &lease.resource),
            Tamper::ReKey => {
                lease.key = other(&KEYS, &lease.key);
                action.key.clone_from(&lease.key);
            }
            Tamper::ForgedHolder => lease.holder = forged.clone(),
            Tamper::FenceUp => lease.fence += 1,
            Tamper::FenceDown => lease.fence = lease.fence.saturating_sub(1),
        }
        (action, lease)
    }

    /// Remember what an answer handed out.
    pub fn absorb(&mut self, op: &Op, out: &Out<T>) {
        match out {
            Out::Task(TaskV {
                until: Some(until), ..
            })
            | Out::Acq(AcqV::Granted(LeaseV { until, .. }))
            | Out::Lease(LeaseV { until, .. })
            | Out::Claim { until, .. } => self.deadlines.push(*until),
            Out::Tasks(ts) => self.deadlines.extend(ts.iter().filter_map(|t| t.until)),
            _ => {}
        }
        match (op, out) {
            // When a back-off ends, and when a seeded delay ends.
            (
                Op::Fail { .. },
                Out::Task(TaskV {
                    not_before: Some(at),
                    ..
                }),
            ) => self.deadlines.push(*at),
            (Op::Seed { tasks, .. }, Out::Unit) => self.deadlines.extend(
                tasks
                    .iter()
                    .filter_map(|s| s.not_before.map(|n| START + 50 * u64::from(n))),
            ),
            (Op::Claim { task, .. }, Out::Task(t)) => {
                if let Some(tok) = &t.token {
                    self.tokens.push((TASKS[*task].to_owned(), tok.clone()));
                }
            }
            (Op::ClaimNext { .. } | Op::ClaimBatch { .. }, Out::Tasks(ts)) => {
                for t in ts {
                    if let Some(tok) = &t.token {
                        self.tokens.push((t.id.clone(), tok.clone()));
                    }
                }
            }
            (Op::Acquire { .. }, Out::Acq(AcqV::Granted(l))) => self.leases.push(l.clone()),
            _ => {}
        }
    }
}

fn ids(names: &[&str], mask: u8) -> Vec<String> {
    names
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, n)| (*n).to_owned())
        .collect()
}

/// The concrete call of `op` for a caller who has seen `refs`.
pub fn instantiate<T: Clone>(op: &Op, refs: &Refs<T>, forged: &T) -> Call<T> {
    match op {
        Op::Advance(ms) => Call::Advance(*ms),
        Op::AdvanceTo { back, delta } => match refs.deadlines.len() {
            0 => Call::Advance(0),
            n => Call::AdvanceTo(
                refs.deadlines[n - 1 - back % n].saturating_add_signed(i64::from(*delta)),
            ),
        },
        Op::Seed { tasks, dup } => {
            let mut seeds: Vec<TaskSeed> = tasks
                .iter()
                .map(|s| TaskSeed {
                    id: TASKS[s.task].into(),
                    title: s.title.map(|t| format!("title {t}")),
                    deps: ids(&TASKS, s.deps),
                    state: s.state,
                    priority: s.priority.map(i32::from),
                    not_before: s.not_before.map(|n| START + 50 * u64::from(n)),
                    max_attempts: s.max_attempts.map(u32::from),
                    group: s.group.map(|g| GROUPS[g].to_owned()),
                })
                .collect();
            if *dup && let Some(first) = seeds.first().cloned() {
                seeds.push(first.title("again"));
            }
            Call::Seed(seeds)
        }
        Op::List => Call::List,
        Op::Claim { task, agent, ttl } => Call::Claim {
            id: TASKS[*task].into(),
            agent: AGENTS[*agent].into(),
            ttl: *ttl,
        },
        Op::TRelease { task, tok } => Call::TRelease {
            id: TASKS[*task].into(),
            token: refs.token(TASKS[*task], *tok, forged),
        },
        Op::TComplete { task, tok } => Call::TComplete {
            id: TASKS[*task].into(),
            token: refs.token(TASKS[*task], *tok, forged),
        },
        Op::TRenew { task, tok, ttl } => Call::TRenew {
            id: TASKS[*task].into(),
            token: refs.token(TASKS[*task], *tok, forged),
            ttl: *ttl,
        },
        Op::Acquire {
            key,
            res,
            unsafe_,
            fp,
            ttl,
        } => {
            let mut action = Action::new(KEYS[*key], RESOURCES[*res]);
            if *unsafe_ {
                action = action.unsafe_to_retry();
            }
            if let Some(f) = fp {
                action = action.with_fingerprint(FINGERPRINTS[*f]);
            }
            Call::Acquire { action, ttl: *ttl }
        }
        Op::Complete { lease, result } => {
            let (action, lease) = refs.lease(*lease, forged);
            Call::Complete {
                action,
                lease,
                result: vec![*result],
            }
        }
        Op::Release { lease } => {
            let (action, lease) = refs.lease(*lease, forged);
            Call::Release { action, lease }
        }
        Op::Abandon { lease } => {
            let (action, lease) = refs.lease(*lease, forged);
            Call::Abandon { action, lease }
        }
        Op::Renew { lease, ttl } => {
            let (action, lease) = refs.lease(*lease, forged);
            Call::Renew {
                action,
                lease,
                ttl: *ttl,
            }
        }
        Op::Mark { lease, reason } => {
            let (action, lease) = refs.lease(*lease, forged);
            Call::Mark {
                action,
                lease,
                reason: format!("reason {reason}"),
            }
        }
        Op::Begin { key, res, ttl } => Call::Begin {
            action: Action::new(KEYS[*key], RESOURCES[*res]),
            ttl: *ttl,
        },
        Op::Resolve {
            key,
            res,
            applied,
            result,
            force,
        } => Call::Resolve {
            action: Action::new(KEYS[*key], RESOURCES[*res]),
            resolution: Resolution {
                applied: *applied,
                result: result.map(|r| vec![100 + r]),
                force_retryable: *force,
                claim: None,
            },
        },
        Op::Sink {
            res,
            presented,
            fail,
            tag,
        } => Call::Sink {
            resource: RESOURCES[*res].into(),
            presented: *presented,
            fail: *fail,
            marker: format!("w{tag}@{presented}"),
        },
        Op::SinkRead { res, downstream } => Call::SinkRead {
            resource: RESOURCES[*res].into(),
            downstream: *downstream,
        },
        Op::Save {
            run,
            seq,
            fence,
            done,
            fields,
        } => Call::Save(Snapshot {
            run_id: RUNS[*run].into(),
            seq: *seq,
            fence: *fence,
            status: format!("running {seq}"),
            done: ids(&STEPS, *done),
            fields: match fields {
                0 => vec![],
                1 => vec![("a".into(), format!("{seq}"))],
                _ => vec![("a".into(), "x".into()), ("b".into(), "y".into())],
            },
        }),
        Op::Load { run } => Call::Load(RUNS[*run].into()),
        Op::Commit {
            run,
            step,
            fence,
            failed,
            result,
        } => Call::Commit {
            run: RUNS[*run].into(),
            step: step.map(|s| STEPS[s].to_owned()),
            fence: *fence,
            outcome: Outcome {
                status: if *failed {
                    Status::Failed
                } else {
                    Status::Succeeded
                },
                result: vec![*result],
            },
        },
        Op::Read { run, step } => Call::Read {
            run: RUNS[*run].into(),
            step: step.map(|s| STEPS[s].to_owned()),
        },
        Op::KeyGet { key } => Call::KeyGet(KEYS[*key].into()),
        Op::ClaimNext { agent, ttl } => Call::ClaimNext {
            agent: AGENTS[*agent].into(),
            ttl: *ttl,
        },
        Op::ClaimBatch { agent, ttl, limit } => Call::ClaimBatch {
            agent: AGENTS[*agent].into(),
            ttl: *ttl,
            limit: *limit,
        },
        Op::CompleteBatch { items } => Call::CompleteBatch {
            items: items.iter().map(|r| refs.item(*r, forged)).collect(),
        },
        Op::Fail {
            item,
            reason,
            retry_after,
        } => {
            let (id, token) = refs.item(*item, forged);
            Call::Fail {
                id,
                token,
                reason: format!("failure {reason}"),
                retry_after: *retry_after,
            }
        }
        Op::Revive { task } => Call::Revive(TASKS[*task].into()),
        Op::SetGroupLimit { group, limit } => Call::SetGroupLimit {
            group: GROUPS[*group].into(),
            limit: *limit,
        },
        Op::GetGroup { group } => Call::GetGroup(GROUPS[*group].into()),
        Op::Invalid { which, lease } => {
            let (action, lease) = refs.lease(*lease, forged);
            Call::Invalid(Box::new(invalid_call(*which, action, lease)))
        }
    }
}
