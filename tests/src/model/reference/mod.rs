//! The reference model: the four contracts as `SPEC.md` states them
//! (sections 3-6 and the precise answers of section 8), written without
//! looking at the component's rules.
//!
//! [`Model::apply`] answers a [`Call`] with tokens as numbered handles
//! ([`H`]), minted in order; where SPEC leaves room, the model commits to
//! the readings listed in [the module above](super). This file holds the
//! state and the dispatch; the rules are in one file per contract:
//! `taskboard.rs` (SPEC 6), `sideeffect.rs` (SPEC 5 and 9, sinks
//! included) and `checkpoint.rs` (checkpoint and commit gate, SPEC 3 and
//! 4). A [`Mutant`] makes the model deliberately wrong, to prove that the
//! comparison can fail.
use std::collections::BTreeMap;

use gak::{Outcome, RetrySafety, Snapshot, TaskState};

use super::answer::{Out, TaskV};
use super::call::Call;
use super::{H, MAX_TTL, START};

mod checkpoint;
mod sideeffect;
mod taskboard;

/// A deliberately wrong model, to prove the comparison can fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutant {
    /// A claim is still live at `now == until` (off by one).
    TaskLiveAtUntil,
    /// An expired execution intent still counts as in flight.
    IntentNeverExpires,
    /// Renewing a task claim mints a new token.
    RenewMintsToken,
    /// A fenced sink accepts a fence below the one it has seen.
    SinkAcceptsStale,
    /// SPEC 10: a batch skips the attempts bound — `claim-batch` /
    /// `claim-next` grant an exhausted task instead of turning it dead.
    BatchSkipsAttemptsBound,
    /// SPEC 10: a group's count ignores expiry — expired claims still
    /// count against its limit (and in `get-group`'s `live`).
    GroupCountIgnoresExpiry,
    /// SPEC 10: a release keeps its attempt (attempts not given back).
    ReleaseKeepsAttempt,
    /// SPEC 10, a checker mutant: the linearizability checker lets
    /// `claim-next` / `claim-batch` pass over a ready task that no
    /// overlapping call touched (only a held task may be passed over).
    PassOverUnheld,
    /// SPEC 10, fail's back-off: a task failed with `retry-after` is still
    /// not due at `now == not-before` (the back-off's end taken as
    /// exclusive).
    BackoffEndsLate,
}

/// What a concurrent history says about one claim call, for the
/// linearizability checker (SPEC 10's pass-over): the tasks overlapping
/// calls touched (which the call may pass over) and the tasks it granted.
#[derive(Clone, Debug, Default)]
pub struct PassOver {
    pub held: std::collections::BTreeSet<String>,
    pub granted: Vec<String>,
    /// The held tasks whose attempts are used up that the call read and
    /// turned dead (the overlapping call had committed when this one met
    /// them); the other held ones it passed over unread (held then). The
    /// answer does not tell which, and each task may differ (one call's
    /// commit came before the walk met its task, another's after): the
    /// checker tries every subset ([`Model::used_up`]).
    pub kill: std::collections::BTreeSet<String>,
}

#[derive(Clone, Debug)]
pub struct MTask {
    title: String,
    pub(crate) deps: Vec<String>,
    pub(crate) state: TaskState,
    owner: Option<String>,
    token: Option<H>,
    pub(crate) until: Option<u64>,
    fence: u64,
    /// The token that completed it (for idempotent re-completion).
    completed_by: Option<H>,
    // SPEC 10
    priority: i32,
    pub(crate) not_before: Option<u64>,
    max_attempts: Option<u32>,
    pub(crate) group: Option<String>,
    pub(crate) attempts: u32,
    pub(crate) last_error: Option<String>,
    /// The token whose `fail` put it in its state (for idempotent
    /// re-failing), until the next grant, revive or re-seed.
    pub(crate) failed_by: Option<H>,
    /// Its place in seed order (first appearance).
    order: u64,
}

impl MTask {
    fn view(&self, id: &str, with_token: bool) -> TaskV<H> {
        TaskV {
            id: id.to_owned(),
            title: self.title.clone(),
            deps: self.deps.clone(),
            state: self.state,
            owner: self.owner.clone(),
            token: if with_token { self.token } else { None },
            until: self.until,
            fence: self.fence,
            priority: self.priority,
            not_before: self.not_before,
            max_attempts: self.max_attempts,
            group: self.group.clone(),
            attempts: self.attempts,
            last_error: self.last_error.clone(),
        }
    }
}

/// The execution intent of a key's current attempt.
#[derive(Clone, Debug)]
pub(crate) struct Intent {
    resource: String,
    fence: u64,
    pub(crate) until: u64,
}

/// A key, from its first grant on.
#[derive(Clone, Debug)]
pub(crate) struct MKey {
    /// Recorded at the first grant, kept for the key's life.
    fingerprint: Option<String>,
    safety: RetrySafety,
    /// The resource of the latest grant.
    resource: String,
    /// When the first result was recorded.
    completed_at: Option<u64>,
    pub(crate) intent: Option<Intent>,
    /// Marked uncertain, with the caller's reason.
    marked: Option<String>,
    pub(crate) completed: Option<Vec<u8>>,
    /// A reconcile claim's deadline.
    pub(crate) claim: Option<u64>,
}

/// The live hold of a resource's newest grant (`None` once released).
#[derive(Clone, Debug)]
pub(crate) struct Hold {
    pub(crate) key: String,
    pub(crate) until: u64,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct MRes {
    max_fence: u64,
    pub(crate) hold: Option<Hold>,
}

#[derive(Clone, Debug)]
pub struct Model {
    pub(crate) now: u64,
    minted: H,
    mutant: Option<Mutant>,
    pub(crate) tasks: BTreeMap<String, MTask>,
    /// Seed order: the next task's place.
    seeded: u64,
    /// SPEC 10: group → limit.
    pub(crate) groups: BTreeMap<String, u32>,
    /// Set by the linearizability checker around a claim call (SPEC 10's
    /// pass-over); never in the sequential check.
    pub pass_over: Option<PassOver>,
    pub(crate) keys: BTreeMap<String, MKey>,
    pub(crate) resources: BTreeMap<String, MRes>,
    /// (resource, fence) → (key, holder) of every grant.
    grants: BTreeMap<(String, u64), (String, H)>,
    /// resource → (seen fence, downstream marker).
    sinks: BTreeMap<String, (u64, Option<String>)>,
    snaps: BTreeMap<String, Snapshot>,
    pub(crate) outcomes: BTreeMap<(String, Option<String>), Outcome>,
}

pub fn err(name: &str) -> Out<H> {
    Out::Err(name.to_owned())
}

fn bad_ttl(ttl: u64) -> bool {
    !(1..=MAX_TTL).contains(&ttl)
}

impl Model {
    pub fn new(mutant: Option<Mutant>) -> Model {
        Model {
            now: START,
            minted: 0,
            mutant,
            tasks: BTreeMap::new(),
            seeded: 0,
            groups: BTreeMap::new(),
            pass_over: None,
            keys: BTreeMap::new(),
            resources: BTreeMap::new(),
            grants: BTreeMap::new(),
            sinks: BTreeMap::new(),
            snaps: BTreeMap::new(),
            outcomes: BTreeMap::new(),
        }
    }

    fn mint(&mut self) -> H {
        self.minted += 1;
        self.minted - 1
    }

    /// The mutant this model carries.
    pub fn mutant(&self) -> Option<Mutant> {
        self.mutant
    }

    pub fn apply(&mut self, call: &Call<H>) -> Out<H> {
        match call {
            Call::Advance(ms) => {
                self.now += ms;
                Out::Unit
            }
            Call::AdvanceTo(t) => {
                self.now = self.now.max(*t);
                Out::Unit
            }
            Call::Seed(seeds) => self.seed(seeds),
            Call::List => Out::Tasks(self.tasks.iter().map(|(id, t)| t.view(id, false)).collect()),
            Call::Claim { id, agent, ttl } => self.claim(id, agent, *ttl),
            Call::TRelease { id, token } => self.task_release(id, *token),
            Call::TComplete { id, token } => self.task_complete(id, *token),
            Call::TRenew { id, token, ttl } => self.task_renew(id, *token, *ttl),
            Call::Acquire { action, ttl } => self.acquire(action, *ttl),
            Call::Complete {
                action,
                lease,
                result,
            } => self.complete(action, lease, result),
            Call::Release { action, lease } => self.release(action, lease),
            Call::Abandon { action, lease } => self.abandon(action, lease),
            Call::Renew { action, lease, ttl } => self.renew(action, lease, *ttl),
            Call::Mark {
                action,
                lease,
                reason,
            } => self.mark(action, lease, reason),
            Call::Begin { action, ttl } => self.begin(action, *ttl),
            Call::Resolve { action, resolution } => self.resolve(action, resolution),
            Call::Sink {
                resource,
                presented,
                fail,
                marker,
            } => self.sink(resource, *presented, *fail, marker),
            Call::SinkRead {
                resource,
                downstream,
            } => {
                let (seen, marker) = self.sinks.get(resource).cloned().unwrap_or((0, None));
                if *downstream {
                    Out::Marker(marker)
                } else {
                    Out::Seen(seen)
                }
            }
            Call::Save(snap) => self.save(snap),
            Call::Load(run) => self
                .snaps
                .get(run)
                .map_or_else(|| err("not-found"), |s| Out::Snap(s.clone())),
            Call::Commit {
                run,
                step,
                fence,
                outcome,
            } => self.commit(run, step, *fence, outcome),
            Call::Invalid(_) => err("invalid-input"),
            Call::ClaimNext { agent, ttl } => self.claim_batch(agent, *ttl, 1),
            Call::ClaimBatch { agent, ttl, limit } => self.claim_batch(agent, *ttl, *limit),
            Call::CompleteBatch { items } => self.complete_batch(items),
            Call::Fail {
                id,
                token,
                reason,
                retry_after,
            } => self.fail(id, *token, reason, *retry_after),
            Call::Revive(id) => self.revive(id),
            Call::SetGroupLimit { group, limit } => self.set_group_limit(group, *limit),
            Call::GetGroup(group) => self.get_group(group),
            Call::KeyGet(key) => self.key_info(key),
            Call::Read { run, step } => self
                .outcomes
                .get(&(run.clone(), step.clone()))
                .map_or_else(|| err("not-found"), |o| Out::Outcome(o.clone())),
        }
    }
}
