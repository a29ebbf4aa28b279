//! The taskboard's stored records and the indexes kept beside them.
//!
//! Three indexes in `indexes`, each written in the same transaction as the
//! task record it describes, so they are exact (never a hint):
//! - the claim queue `q/<seq>`: a task is in it exactly when it is not done
//!   and every dependency is done (`claim-next` reads it in seed order);
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
    let queue_key = keys::queue(new.seq);
    if ready {
        let entry = QueueEntry {
            v: V,
            id: new.id.clone(),
            state: new.state,
            until: new.until.filter(|_| new.state == TaskState::Claimed),
        };
        store(tx, Table::Indexes, &queue_key, &entry)?;
    } else if old.is_some_and(|o| o.queued) {
        tx.delete(Table::Indexes, &queue_key)?;
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
