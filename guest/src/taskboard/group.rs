//! Groups: at most N live claims per group (SPEC 10).
//!
//! A group's record (`meta`, `group/<name>`) keeps its limit, its claims
//! (task id to deadline: every claimed task of the group, an expired one
//! until the record is next written), its tasks by state, and its head:
//! the claim-queue key
//! standing in for the group's first ready task. The group's ready tasks
//! wait in its own queue (`qg/<group>/…`, claim order); the head is there
//! exactly while the group has a free slot, so claimers never read a full
//! group's tasks, and the record, read by key by every grant in the group,
//! serializes the grants that count against its limit: two concurrent
//! grants never both take the last slot.
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::record::{QueueEntry, Record};
use crate::count::{Tally, TaskFigures};
use crate::format::V;
use crate::txn::{decode, store};
use crate::{Error, Table, Txn, keys};

/// A group's stored record.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct GroupRecord {
    pub v: V,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Claimed tasks of the group and their deadlines.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub claims: BTreeMap<String, u64>,
    /// The claim-queue key of the group's head, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// The group's tasks by state (those a format-2 kernel wrote: format 1
    /// had no groups), kept by every call that changes one.
    #[serde(default, skip_serializing_if = "TaskFigures::is_empty")]
    pub tasks: TaskFigures,
}

impl GroupRecord {
    /// Live claims at `now`: exact, an expired claim never counts.
    pub fn live(&self, now: u64) -> u32 {
        let live = self.claims.values().filter(|until| now < **until).count();
        u32::try_from(live).unwrap_or(u32::MAX)
    }

    /// Can a grant at `now` take a slot?
    pub fn free(&self, now: u64) -> bool {
        self.limit.is_none_or(|limit| self.live(now) < limit)
    }
}

/// The groups one call reads and changes, written back by [`Groups::flush`].
#[derive(Debug)]
pub(crate) struct Groups {
    /// The call's instant.
    pub now: u64,
    records: BTreeMap<String, GroupRecord>,
    stored: BTreeSet<String>,
    dirty: BTreeSet<String>,
    /// The call's changes to the board's counts by state.
    pub tally: Tally,
    /// The call's changes to each group's tasks by state.
    figures: BTreeMap<String, TaskFigures>,
}

impl Groups {
    pub fn new(now: u64) -> Self {
        Groups {
            now,
            records: BTreeMap::new(),
            stored: BTreeSet::new(),
            dirty: BTreeSet::new(),
            tally: Tally::default(),
            figures: BTreeMap::new(),
        }
    }

    /// A task record changes from `old` to `new` (none: absent): the
    /// board's counts and its groups' figures take the change.
    pub fn change(&mut self, old: Option<&Record>, new: Option<&Record>) {
        self.tally.change(old, new);
        if let Some(o) = old.filter(|o| o.v.0 >= 2)
            && let Some(g) = &o.group
        {
            *self.figures.entry(g.clone()).or_default().state(o.state) -= 1;
        }
        if let Some(n) = new
            && let Some(g) = &n.group
        {
            *self.figures.entry(g.clone()).or_default().state(n.state) += 1;
        }
    }

    /// The group's record, read once per call.
    pub fn load(&mut self, tx: &mut impl Txn, group: &str) -> Result<&mut GroupRecord, Error> {
        if !self.records.contains_key(group) {
            let record = match tx.get(Table::Meta, &keys::group(group))? {
                Some(value) => {
                    self.stored.insert(group.to_owned());
                    decode(Table::Meta, &value)?
                }
                None => GroupRecord::default(),
            };
            self.records.insert(group.to_owned(), record);
        }
        Ok(self.records.get_mut(group).expect("loaded"))
    }

    /// The group changed: its record and head are written when the call ends.
    pub fn touch(&mut self, group: &str) {
        self.dirty.insert(group.to_owned());
    }

    /// Put the group's head where it belongs now: on its first ready task
    /// while it has a free slot, nowhere otherwise. Answers the head.
    pub fn refresh(&mut self, tx: &mut impl Txn, group: &str) -> Result<Option<String>, Error> {
        let now = self.now;
        let free = self.load(tx, group)?.free(now);
        let prefix = keys::group_queue(group);
        let first = if free {
            tx.scan(Table::Indexes, &prefix, None, 1)?
                .into_iter()
                .next()
        } else {
            None
        };
        let wanted = match &first {
            Some((key, value)) => {
                let Some((priority, seq)) = keys::parse_group_ready(&prefix, key) else {
                    return Err(Error::storage(format!("corrupt group-queue entry {key:?}")));
                };
                let entry: QueueEntry = decode(Table::Indexes, value)?;
                Some((keys::head(group, priority, seq), entry))
            }
            None => None,
        };
        let record = self.load(tx, group)?;
        let head = wanted.as_ref().map(|(k, _)| k.clone());
        if record.head != head {
            if let Some(old) = record.head.take() {
                tx.delete(Table::Indexes, &old)?;
            }
            if let Some((key, entry)) = &wanted {
                let head = QueueEntry {
                    group: Some(group.to_owned()),
                    ..entry.clone()
                };
                store(tx, Table::Indexes, key, &head)?;
            }
            record.head = head.clone();
            self.dirty.insert(group.to_owned());
        }
        Ok(head)
    }

    /// End of the call: every changed group gets its figures, its head put
    /// right and its record written (expired claims dropped; an empty
    /// record removed), and the counts by state take the call's changes.
    pub fn flush(&mut self, tx: &mut impl Txn) -> Result<(), Error> {
        self.tally.flush(tx)?;
        for (group, delta) in std::mem::take(&mut self.figures) {
            if !delta.is_empty() {
                self.load(tx, &group)?.tasks.add(&delta);
                self.dirty.insert(group);
            }
        }
        for group in std::mem::take(&mut self.dirty) {
            self.refresh(tx, &group)?;
            let now = self.now;
            let record = self.records.get_mut(&group).expect("loaded by refresh");
            record.claims.retain(|_, until| now < *until);
            let key = keys::group(&group);
            if record.limit.is_none()
                && record.claims.is_empty()
                && record.head.is_none()
                && record.tasks.is_empty()
            {
                if self.stored.remove(&group) {
                    tx.delete(Table::Meta, &key)?;
                }
            } else {
                store(tx, Table::Meta, &key, record)?;
                self.stored.insert(group.clone());
            }
        }
        self.dirty.clear();
        Ok(())
    }
}
