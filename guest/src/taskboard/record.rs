//! The taskboard's stored records and the indexes kept beside them.
//!
//! Three indexes in `indexes`, each written in the same transaction as the
//! task record it describes, so they are exact (never a hint):
//! - the claim queue: a task has an entry exactly when it is not done and
//!   every dependency is done — in `q/<seq>` (seed order) while no claim
//!   holds it, in `qc/<until>/<seq>` (deadline order) while one does, so
//!   `claim-next` reads the first unclaimed ready task and the expired
//!   claims, never the live ones;
//! - the state listing `ts/<state>/<id>` (`list` by state);
//! - the dependents edges `td/<dep>/<id>` (who to re-check when `dep`
//!   finishes or is re-seeded).
use serde::{Deserialize, Serialize};

use crate::format::V;
use crate::txn::{decode, load, mark, store};
use crate::{Error, Table, Task, TaskState, Txn, keys};

/// A task's stored record.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct Record {
    pub v: V,
    pub id: String,
    pub title: String,
    pub deps: Vec<String>,
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// SHA-256 of the current claim token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<u64>,
    pub fence: u64,
    /// Place in the claim order: the task's first appearance in a seed.
    pub seq: u64,
    /// Whether the task has an entry in the claim queue.
    pub queued: bool,
    /// SHA-256 of the token that completed the task (idempotent re-completion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_by_sha256: Option<String>,
    /// When the task became done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_at: Option<u64>,
}

impl Record {
    /// The task as callers see it; `token` only for the caller who holds it.
    pub fn task(&self, token: Option<String>) -> Task {
        Task {
            id: self.id.clone(),
            title: self.title.clone(),
            deps: self.deps.clone(),
            state: self.state,
            owner: self.owner.clone(),
            token,
            until: self.until,
            fence: self.fence,
        }
    }

    /// Is the task claimed by a lease that is live at `now`?
    pub fn live_claim(&self, now: u64) -> bool {
        self.state == TaskState::Claimed && self.until.is_some_and(|u| now < u)
    }
}

/// A claim-queue entry: enough for `claim-next` to skip live claims without
/// reading their tasks.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct QueueEntry {
    pub v: V,
    pub id: String,
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<u64>,
}

impl QueueEntry {
    /// Could a claim take this task at `now` (as far as the index knows)?
    pub fn claimable(&self, now: u64) -> bool {
        self.state != TaskState::Claimed || self.until.is_none_or(|u| now >= u)
    }

    /// Where the entry of a task with place `seq` in the claim order lives:
    /// the claimed queue while a claim holds it, else the claim queue.
    pub fn place(&self, seq: u64) -> String {
        match (self.state, self.until) {
            (TaskState::Claimed, Some(until)) => keys::claimed(until, seq),
            _ => keys::queue(seq),
        }
    }
}

/// The board-wide record.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct Board {
    pub v: V,
    /// The next first-appearance number.
    pub next_seq: u64,
    /// The highest fence of any pruned task: tasks seeded later start here,
    /// so a pruned task's stale holder can never match a new claim's fence.
    pub fence_floor: u64,
}

pub(crate) fn load_board(tx: &mut impl Txn) -> Result<Board, Error> {
    Ok(load(tx, Table::Meta, keys::BOARD)?.unwrap_or_default())
}

pub(crate) fn decode_task(value: &str) -> Result<Record, Error> {
    decode(Table::Tasks, value)
}

/// Write `new` and keep every index exact, given the record it replaces.
/// `ready` is whether `new` belongs in the claim queue (not done, every
/// dependency done); the caller knows the dependencies' states.
pub(crate) fn write(
    tx: &mut impl Txn,
    old: Option<&Record>,
    new: &mut Record,
    ready: bool,
) -> Result<(), Error> {
    if old.is_none_or(|o| o.state != new.state) {
        if let Some(o) = old {
            tx.delete(Table::Indexes, &keys::task_state(o.state, &o.id))?;
        }
        mark(tx, &keys::task_state(new.state, &new.id))?;
    }
    let entry = ready.then(|| QueueEntry {
        v: V,
        id: new.id.clone(),
        state: new.state,
        until: new.until.filter(|_| new.state == TaskState::Claimed),
    });
    let place = entry.as_ref().map(|e| e.place(new.seq));
    if let Some(o) = old.filter(|o| o.queued) {
        // A claimed task's entry sits in the claimed queue, or back in the
        // claim queue once `claim-next` found it expired (and always there
        // in a database written before 0.3): clear both.
        let was = QueueEntry {
            v: V,
            id: o.id.clone(),
            state: o.state,
            until: o.until.filter(|_| o.state == TaskState::Claimed),
        };
        let mut stale = vec![was.place(o.seq), keys::queue(o.seq)];
        stale.dedup();
        for key in stale {
            if place.as_deref() != Some(key.as_str()) {
                tx.delete(Table::Indexes, &key)?;
            }
        }
    }
    if let (Some(entry), Some(place)) = (&entry, &place) {
        store(tx, Table::Indexes, place, entry)?;
    }
    new.queued = ready;
    match (old.and_then(|o| o.done_at), new.done_at) {
        (Some(a), Some(b)) if a == b => {}
        (before, after) => {
            if let Some(at) = before {
                tx.delete(
                    Table::Indexes,
                    &keys::retention(at, keys::Finished::Task, &new.id),
                )?;
            }
            if let Some(at) = after {
                mark(tx, &keys::retention(at, keys::Finished::Task, &new.id))?;
            }
        }
    }
    store(tx, Table::Tasks, &new.id.clone(), new)
}
