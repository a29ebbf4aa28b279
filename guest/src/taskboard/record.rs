//! The taskboard's stored records and the indexes kept beside them.
//!
//! Indexes in `indexes`, each written in the same transaction as the task
//! record it describes, so they are exact (never a hint). A task that is not
//! terminal and whose dependencies are all done has exactly one entry, whose
//! key the record keeps (`entry`, format 2):
//! - in a claim queue while it can be claimed: `qh/` (priority > 0), `q/`
//!   (priority 0: format 1's only queue, unchanged) or `ql/` (priority < 0),
//!   by priority then seed order;
//! - in its group's queue `qg/<group>/…` instead, when it has a group: only
//!   the group's first task stands in the claim queues (the group's head),
//!   and only while the group has a free slot (see `group`);
//! - in the delayed queue `qd/<not-before>/<seq>` while it is not due;
//! - in the claimed queue `qc/<until>/<seq>` while a claim holds it, so
//!   `claim-next` reads the expired claims, never the live ones.
//!
//! Beside them: the state listing `ts/<state>/<id>` (`list` by state), the
//! group listing `tg/<group>/<id>` (`list-group`), the dependents edges `td/<dep>/<id>` (who to re-check when `dep` finishes or
//! is re-seeded) and the retention entry of a done or dead task.
use serde::{Deserialize, Serialize};

use super::group::Groups;
use crate::format::{V, Version};
use crate::txn::{decode, load, mark, store};
use crate::{Error, Table, Task, TaskState, Txn, keys};

/// A task's stored record.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct Record {
    /// The format it was read in (format 1: not in the board's counts).
    pub v: Version,
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
    /// Whether the task has an entry in the claim order's indexes (it is not
    /// terminal and every dependency is done).
    pub queued: bool,
    /// The key of that entry (format 2; a format-1 record leaves it out and
    /// its entry is where format 1 put it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    /// SHA-256 of the token that completed the task (idempotent re-completion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_by_sha256: Option<String>,
    /// SHA-256 of the token that failed the task last (idempotent re-failing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_by_sha256: Option<String>,
    /// When the task became done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_at: Option<u64>,
    /// When the task turned dead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_at: Option<u64>,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub priority: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

fn is_zero_i32(n: &i32) -> bool {
    *n == 0
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
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
            priority: self.priority,
            not_before: self.not_before,
            max_attempts: self.max_attempts,
            group: self.group.clone(),
            attempts: self.attempts,
            last_error: self.last_error.clone(),
        }
    }

    /// Is the task claimed by a lease that is live at `now`?
    pub fn live_claim(&self, now: u64) -> bool {
        self.state == TaskState::Claimed && self.until.is_some_and(|u| now < u)
    }

    /// Are its attempts used up (SPEC 10)?
    pub fn exhausted(&self) -> bool {
        self.max_attempts.is_some_and(|max| self.attempts >= max)
    }

    /// Is it done or dead?
    pub fn terminal(&self) -> bool {
        matches!(self.state, TaskState::Done | TaskState::Dead)
    }

    /// When it finished (done or turned dead): its retention time.
    pub fn finished_at(&self) -> Option<u64> {
        match self.state {
            TaskState::Done => self.done_at,
            TaskState::Dead => self.dead_at,
            _ => None,
        }
    }

    /// The group whose live claims this record counts in, and until when.
    fn claim_in_group(&self) -> Option<(&str, u64)> {
        match (self.state, &self.group, self.until) {
            (TaskState::Claimed, Some(g), Some(until)) => Some((g.as_str(), until)),
            _ => None,
        }
    }

    /// Where its entry belongs at `now`, when it has one (`ready`).
    fn place(&self, now: u64) -> String {
        match (self.state, self.until, self.not_before, &self.group) {
            (TaskState::Claimed, Some(until), _, _) => keys::claimed(until, self.seq),
            (_, _, Some(at), _) if at > now => keys::delayed(at, self.seq),
            (_, _, _, Some(group)) => keys::group_ready(group, self.priority, self.seq),
            _ => keys::ready(self.priority, self.seq),
        }
    }

    /// The keys its entry may live under now: the one it recorded, or, for a
    /// format-1 record, wherever format 1 (or 0.2) put it.
    fn entries(&self) -> Vec<String> {
        if !self.queued {
            return Vec::new();
        }
        if let Some(entry) = &self.entry {
            return vec![entry.clone()];
        }
        let mut legacy = vec![keys::queue(self.seq)];
        if let (TaskState::Claimed, Some(until)) = (self.state, self.until) {
            legacy.push(keys::claimed(until, self.seq));
        }
        legacy
    }

    /// Its index entry's value.
    pub fn queue_entry(&self) -> QueueEntry {
        QueueEntry {
            v: V,
            id: self.id.clone(),
            state: self.state,
            until: self.until.filter(|_| self.state == TaskState::Claimed),
            group: self.group.clone(),
        }
    }
}

/// An index entry of the claim order: enough to skip live claims and to
/// know a group's head without reading the task.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct QueueEntry {
    pub v: V,
    pub id: String,
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<u64>,
    /// Set on a group's head in the claim queues (and on group-queue entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
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
/// `ready` is whether `new` belongs in the claim order's indexes (not
/// terminal, every dependency done); the caller knows the dependencies'
/// states. The groups the change touches are noted in `groups` (their live
/// claims, and their heads once the call ends: [`Groups::flush`]).
pub(crate) fn write(
    tx: &mut impl Txn,
    groups: &mut Groups,
    old: Option<&Record>,
    new: &mut Record,
    ready: bool,
) -> Result<(), Error> {
    let at = ready.then(|| new.place(groups.now));
    place(tx, groups, old, new, at)
}

/// [`write`] with the entry at `at` (none: no entry).
pub(crate) fn place(
    tx: &mut impl Txn,
    groups: &mut Groups,
    old: Option<&Record>,
    new: &mut Record,
    at: Option<String>,
) -> Result<(), Error> {
    if old.is_none_or(|o| o.state != new.state) {
        if let Some(o) = old {
            tx.delete(Table::Indexes, &keys::task_state(o.state, &o.id))?;
        }
        mark(tx, &keys::task_state(new.state, &new.id))?;
    }
    let old_group = old.and_then(|o| o.group.as_deref());
    if old_group != new.group.as_deref() {
        if let Some(g) = old_group {
            tx.delete(Table::Indexes, &keys::group_task(g, &new.id))?;
        }
        if let Some(g) = &new.group {
            mark(tx, &keys::group_task(g, &new.id))?;
        }
    }
    let before = old.map(Record::entries).unwrap_or_default();
    for key in &before {
        if at.as_deref() != Some(key.as_str()) {
            tx.delete(Table::Indexes, key)?;
        }
    }
    if let Some(at) = &at {
        store(tx, Table::Indexes, at, &new.queue_entry())?;
    }
    // A group's queue changed: its head may have to move.
    for key in before.iter().chain(&at) {
        if key.starts_with("qg/") {
            let group = new.group.iter().chain(old.and_then(|o| o.group.as_ref()));
            for g in group {
                if key.starts_with(&keys::group_queue(g)) {
                    groups.touch(g);
                }
            }
        }
    }
    new.queued = at.is_some();
    new.entry = at;
    // The groups' live claims.
    let was = old.and_then(Record::claim_in_group);
    let is = new.claim_in_group();
    if was != is {
        if let Some((g, _)) = was {
            groups.load(tx, g)?.claims.remove(&new.id);
            groups.touch(g);
        }
        if let Some((g, until)) = is {
            groups.load(tx, g)?.claims.insert(new.id.clone(), until);
            groups.touch(g);
        }
    }
    groups.change(old, Some(new));
    new.v = Version::CURRENT;
    match (old.and_then(Record::finished_at), new.finished_at()) {
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
