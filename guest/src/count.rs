//! Counts by state, for tasks and side-effect keys (`taskboard.count`,
//! `sideeffect.count`), and the `counted` marker both are exact by.
//!
//! Every call that writes or removes a task or a key record adds its change
//! to a [`Tally`] and writes the sum into one of [`keys::COUNT_SHARDS`]
//! count records (`meta`, `count/<shard>`) at its end, in the same
//! transaction: the counts are the records' sums, exact at every commit.
//! The record is drawn at random per call ([`Txn::count_shard`]; without
//! one, the first changed record's place picks it), so concurrent calls
//! rarely write the same one (on PostgreSQL two that do wait for each
//! other's commit, never abort).
//!
//! A record counts once a format-2 kernel has written it. A store a format-1
//! kernel wrote has records no call has rewritten since: the counts say so
//! (`exact: false`) until `recount` has visited them, in id order, from the
//! position the `counted` marker keeps (one position for tasks, one for
//! keys).
use serde::{Deserialize, Serialize};

use crate::format::V;
use crate::txn::{decode, load, store};
use crate::{Error, KeyState, Table, TaskState, Txn, keys};

/// Tasks by state: a count record's changes, or a group's tasks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct TaskFigures {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub open: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub claimed: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub done: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dead: i64,
}

impl TaskFigures {
    fn figures(&mut self) -> [&mut i64; 5] {
        [
            &mut self.open,
            &mut self.claimed,
            &mut self.done,
            &mut self.failed,
            &mut self.dead,
        ]
    }

    /// Add other figures to these.
    pub fn add(&mut self, other: &TaskFigures) {
        let mut other = other.clone();
        for (mine, theirs) in self.figures().into_iter().zip(other.figures()) {
            *mine += *theirs;
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == TaskFigures::default()
    }

    pub fn state(&mut self, state: TaskState) -> &mut i64 {
        match state {
            TaskState::Open => &mut self.open,
            TaskState::Claimed => &mut self.claimed,
            TaskState::Done => &mut self.done,
            TaskState::Failed => &mut self.failed,
            TaskState::Dead => &mut self.dead,
        }
    }

    /// The figures as counts (none may be negative).
    pub fn totals(&self) -> Result<[u64; 5], Error> {
        Ok([
            total(self.open)?,
            total(self.claimed)?,
            total(self.done)?,
            total(self.failed)?,
            total(self.dead)?,
        ])
    }
}

/// Keys by stored state: an expired intent is still `in-flight` here.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct KeyFigures {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub keys_cleared: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub keys_in_flight: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub keys_uncertain: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub keys_completed: i64,
}

impl KeyFigures {
    fn add(&mut self, o: &KeyFigures) {
        self.keys_cleared += o.keys_cleared;
        self.keys_in_flight += o.keys_in_flight;
        self.keys_uncertain += o.keys_uncertain;
        self.keys_completed += o.keys_completed;
    }

    pub fn state(&mut self, state: KeyState) -> &mut i64 {
        match state {
            KeyState::Cleared => &mut self.keys_cleared,
            KeyState::InFlight => &mut self.keys_in_flight,
            KeyState::Uncertain => &mut self.keys_uncertain,
            KeyState::Completed => &mut self.keys_completed,
        }
    }
}

/// One count record: how much each state's count changed in the calls that
/// wrote it (a record's own figures can be negative; the sums cannot).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct Shard {
    v: V,
    #[serde(flatten)]
    pub tasks: TaskFigures,
    #[serde(flatten)]
    pub keys: KeyFigures,
    /// The `counted` marker had decided whether every key is counted when
    /// this record was stamped: a call adding key figures to it need not
    /// read the marker (see [`Tally::flush`]).
    #[serde(default, skip_serializing_if = "is_false")]
    pub keys_decided: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl Shard {
    /// Add another record's figures to these.
    pub fn add(&mut self, other: &Shard) {
        self.tasks.add(&other.tasks);
        self.keys.add(&other.keys);
    }

    fn is_empty(&self) -> bool {
        self.tasks.is_empty() && self.keys == KeyFigures::default()
    }

    /// Every count record no other call holds, stamped with the marker's
    /// decision on keys, by the call that made it (one that another call
    /// holds is stamped by that call, which reads the decision): after it,
    /// no call reads the marker again.
    pub fn stamp_all(tx: &mut impl Txn) -> Result<(), Error> {
        let names: Vec<String> = (0..keys::COUNT_SHARDS).map(keys::count_shard).collect();
        let wanted: Vec<(Table, &str)> = names.iter().map(|k| (Table::Meta, k.as_str())).collect();
        let found = tx.try_get_many(&wanted)?;
        for (key, probe) in names.iter().zip(found) {
            let Some(value) = probe else {
                continue;
            };
            let mut record: Shard = match value {
                Some(v) => decode(Table::Meta, &v)?,
                None => Shard::default(),
            };
            if !record.keys_decided {
                record.keys_decided = true;
                store(tx, Table::Meta, key, &record)?;
            }
        }
        Ok(())
    }
}

/// A sum that must not be negative, as a count.
pub(crate) fn total(n: i64) -> Result<u64, Error> {
    u64::try_from(n).map_err(|_| Error::storage(format!("a count is negative ({n})")))
}

/// The `counted` marker: whether every task and every key is counted, and
/// where an unfinished `recount` of each goes on.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct Counted {
    v: V,
    #[serde(default)]
    pub exact: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// Whether the counts cover every key: absent until a call finds out
    /// (the first key written, a seed creating a board, a `recount`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys_exact: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys_after: Option<String>,
}

impl Counted {
    pub fn decode(value: Option<&str>) -> Result<Option<Counted>, Error> {
        value.map(|v| decode(Table::Meta, v)).transpose()
    }

    pub fn store(&self, tx: &mut impl Txn) -> Result<(), Error> {
        store(tx, Table::Meta, keys::COUNTED, self)
    }

    /// Every key is counted.
    pub fn keys_counted(&self) -> bool {
        self.keys_exact == Some(true)
    }

    /// Find out, once per store, whether the counts cover every key: they
    /// do on a store with no key yet (the call deciding has not written its
    /// own); on one with keys (a format-1 kernel wrote them) only once
    /// `recount` has visited them.
    pub fn keys_from_start(&mut self, tx: &mut impl Txn) -> Result<(), Error> {
        if self.keys_exact.is_none() {
            self.keys_exact = Some(tx.scan(Table::Actions, "", None, 1)?.is_empty());
            self.keys_after = None;
        }
        Ok(())
    }
}

/// One call's changes to the counts, written by [`Tally::flush`].
#[derive(Debug, Default)]
pub(crate) struct Tally {
    delta: Shard,
    shard: Option<u64>,
}

impl Tally {
    /// A task changes from state `old` (none: absent, or not counted) to
    /// `new` (none: removed). `place` picks the record when the call was
    /// given none.
    pub fn task(&mut self, old: Option<TaskState>, new: Option<TaskState>, place: u64) {
        if let Some(o) = old {
            *self.delta.tasks.state(o) -= 1;
        }
        if let Some(n) = new {
            *self.delta.tasks.state(n) += 1;
        }
        self.shard.get_or_insert(place);
    }

    /// A key record changes from `old` (when counted) to `new`.
    pub fn key(&mut self, old: Option<KeyState>, new: Option<KeyState>, key: &str) {
        if let Some(o) = old {
            *self.delta.keys.state(o) -= 1;
        }
        if let Some(n) = new {
            *self.delta.keys.state(n) += 1;
        }
        self.shard.get_or_insert_with(|| fnv1a(key));
    }

    /// End of the call: add the changes to one count record. A record not
    /// stamped with the marker's decision on whether every key is counted
    /// makes the call read the marker, and decide (stamping every record)
    /// if nobody has: the marker is read once per store, never by every
    /// call (its read locks it, and all calls would wait for each other).
    pub fn flush(&mut self, tx: &mut impl Txn) -> Result<(), Error> {
        let delta = std::mem::take(&mut self.delta);
        let Some(shard) = self.shard.take() else {
            return Ok(());
        };
        if delta.is_empty() {
            return Ok(());
        }
        let key = keys::count_shard(tx.count_shard().unwrap_or(shard));
        let mut record: Shard = load(tx, Table::Meta, &key)?.unwrap_or_default();
        if delta.keys != KeyFigures::default() && !record.keys_decided {
            let found = tx.get(Table::Meta, keys::COUNTED)?;
            let mut counted = Counted::decode(found.as_deref())?.unwrap_or_default();
            if counted.keys_exact.is_none() {
                counted.keys_from_start(tx)?;
                counted.store(tx)?;
                Shard::stamp_all(tx)?;
            }
            record.keys_decided = true;
        }
        record.add(&delta);
        store(tx, Table::Meta, &key, &record)
    }
}

/// FNV-1a: a key's place among the count records when the call was given
/// none.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// What [`sums`] read: the count records' sums, the `counted` marker, and
/// the extra point and range reads.
pub(crate) type Sums = (
    Shard,
    Option<Counted>,
    Vec<Option<String>>,
    Vec<Vec<(String, String)>>,
);

/// The count records' sums and the `counted` marker, with `extra` point
/// and range reads in the same crossing.
pub(crate) fn sums(
    tx: &mut impl Txn,
    extra: &[(Table, &str)],
    ranges: &[crate::Scan<'_>],
) -> Result<Sums, Error> {
    let mut wanted = vec![(Table::Meta, keys::COUNTED)];
    wanted.extend_from_slice(extra);
    let mut scans = vec![crate::Scan {
        table: Table::Meta,
        prefix: keys::COUNTS,
        after: None,
        limit: keys::COUNT_SHARDS as u32,
    }];
    scans.extend_from_slice(ranges);
    let (mut values, mut pages) = tx.read(&wanted, &scans)?;
    let counted = Counted::decode(values.remove(0).as_deref())?;
    let mut sum = Shard::default();
    for (_, value) in &pages.remove(0) {
        sum.add(&decode(Table::Meta, value)?);
    }
    Ok((sum, counted, values, pages))
}
