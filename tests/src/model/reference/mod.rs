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
}

#[derive(Clone, Debug)]
pub(crate) struct MTask {
    title: String,
    deps: Vec<String>,
    pub(crate) state: TaskState,
    owner: Option<String>,
    token: Option<H>,
    pub(crate) until: Option<u64>,
    fence: u64,
    /// The token that completed it (for idempotent re-completion).
    completed_by: Option<H>,
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
            Call::KeyGet(key) => self.key_info(key),
            Call::Read { run, step } => self
                .outcomes
                .get(&(run.clone(), step.clone()))
                .map_or_else(|| err("not-found"), |o| Out::Outcome(o.clone())),
        }
    }
}
