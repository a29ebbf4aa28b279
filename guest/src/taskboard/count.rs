//! The board's tasks by state (`count`, `recount`).
//!
//! Every call that writes or removes a task record adds its change to a
//! [`Tally`] and writes the sum into one of [`keys::COUNT_SHARDS`] count
//! records (`meta`, `count/<shard>`) at its end, in the same transaction:
//! the counts are the records' sums, exact at every commit. The shard is
//! chosen by the first changed task's place in the seed order, so
//! concurrent calls on different tasks rarely write the same record (on
//! PostgreSQL two that do wait for each other's commit, never abort).
//!
//! A task counts once a format-2 kernel has written its record. A board a
//! format-1 kernel wrote has tasks that no call has rewritten since: `count`
//! says so (`exact: false`) until `recount` has visited them, in id order,
//! from the position the `counted` marker keeps.
use serde::{Deserialize, Serialize};

use super::record::{Record, decode_task};
use crate::format::V;
use crate::txn::{decode, load, store};
use crate::{Error, Table, TaskCounts, TaskState, Txn, input, keys};

/// One count record: how much each state's count changed in the calls that
/// wrote it (a shard's own figures can be negative; the sums cannot).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Shard {
    v: V,
    #[serde(default, skip_serializing_if = "is_zero")]
    open: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    claimed: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    done: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    failed: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    dead: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl Shard {
    /// Add another record's figures to these.
    fn add(&mut self, other: &Shard) {
        self.open += other.open;
        self.claimed += other.claimed;
        self.done += other.done;
        self.failed += other.failed;
        self.dead += other.dead;
    }

    fn slot(&mut self, state: TaskState) -> &mut i64 {
        match state {
            TaskState::Open => &mut self.open,
            TaskState::Claimed => &mut self.claimed,
            TaskState::Done => &mut self.done,
            TaskState::Failed => &mut self.failed,
            TaskState::Dead => &mut self.dead,
        }
    }
}

/// The `counted` marker: whether every task is counted, and where an
/// unfinished `recount` goes on.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct Counted {
    v: V,
    #[serde(default)]
    exact: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    after: Option<String>,
}

/// A board created by this kernel counts every task from its first seed.
pub(crate) fn created(tx: &mut impl Txn) -> Result<(), Error> {
    store(
        tx,
        Table::Meta,
        keys::COUNTED,
        &Counted {
            v: V,
            exact: true,
            after: None,
        },
    )
}

/// One call's changes to the counts, written by [`Tally::flush`].
#[derive(Debug, Default)]
pub(crate) struct Tally {
    delta: Shard,
    shard: Option<u64>,
}

impl Tally {
    /// A task record changes from `old` to `new` (none: absent). `old`
    /// counts only when a format-2 kernel wrote it; `new` is written now,
    /// so it counts.
    pub fn change(&mut self, old: Option<&Record>, new: Option<&Record>) {
        if let Some(o) = old.filter(|o| o.v.0 >= 2) {
            *self.delta.slot(o.state) -= 1;
        }
        if let Some(n) = new {
            *self.delta.slot(n.state) += 1;
        }
        if let Some(r) = new.or(old) {
            self.shard.get_or_insert(r.seq);
        }
    }

    /// End of the call: add the changes to one count record.
    pub fn flush(&mut self, tx: &mut impl Txn) -> Result<(), Error> {
        let delta = std::mem::take(&mut self.delta);
        let Some(shard) = self.shard.take() else {
            return Ok(());
        };
        let shard = tx.count_shard().unwrap_or(shard);
        if [
            delta.open,
            delta.claimed,
            delta.done,
            delta.failed,
            delta.dead,
        ] == [0; 5]
        {
            return Ok(());
        }
        let key = keys::count_shard(shard);
        let mut record: Shard = load(tx, Table::Meta, &key)?.unwrap_or_default();
        record.add(&delta);
        store(tx, Table::Meta, &key, &record)
    }
}

/// The board's tasks by state: the count records' sums.
pub fn count(tx: &mut impl Txn) -> Result<TaskCounts, Error> {
    let (values, pages) = tx.read(
        &[(Table::Meta, keys::COUNTED), (Table::Meta, keys::BOARD)],
        &[crate::Scan {
            table: Table::Meta,
            prefix: keys::COUNTS,
            after: None,
            limit: keys::COUNT_SHARDS as u32,
        }],
    )?;
    let counted: Option<Counted> = values[0]
        .as_deref()
        .map(|v| decode(Table::Meta, v))
        .transpose()?;
    // No board record: nothing was ever seeded, nothing to count.
    let exact = counted.is_some_and(|c| c.exact) || values[1].is_none();
    let mut sum = Shard::default();
    for (_, value) in &pages[0] {
        sum.add(&decode(Table::Meta, value)?);
    }
    let total = |n: i64| {
        u64::try_from(n).map_err(|_| Error::storage(format!("a task count is negative ({n})")))
    };
    Ok(TaskCounts {
        open: total(sum.open)?,
        claimed: total(sum.claimed)?,
        done: total(sum.done)?,
        failed: total(sum.failed)?,
        dead: total(sum.dead)?,
        exact,
    })
}

/// Count up to `limit` of the tasks the counts do not cover yet, from where
/// the last `recount` stopped; answers whether every task is counted now.
pub fn recount(tx: &mut impl Txn, limit: u32) -> Result<bool, Error> {
    input::limit(limit)?;
    let found = tx.get_many(&[(Table::Meta, keys::COUNTED), (Table::Meta, keys::BOARD)])?;
    let mut counted: Counted = match &found[0] {
        Some(v) => decode(Table::Meta, v)?,
        None if found[1].is_none() => return Ok(true),
        None => Counted::default(),
    };
    if counted.exact {
        return Ok(true);
    }
    let page = tx.scan(Table::Tasks, "", counted.after.as_deref(), limit + 1)?;
    let more = page.len() > limit as usize;
    let mut visit: Vec<&str> = Vec::new();
    for (id, value) in page.iter().take(limit as usize) {
        if decode_task(value)?.v.0 < 2 {
            visit.push(id);
        }
    }
    // Read again by key (locked as every change locks them): a range read
    // is a snapshot, and a concurrent call may have counted one since.
    let keys: Vec<(Table, &str)> = visit.iter().map(|id| (Table::Tasks, *id)).collect();
    let mut tally = Tally::default();
    for value in crate::txn::read_many(tx, &keys)?.into_iter().flatten() {
        let record = decode_task(&value)?;
        if record.v.0 < 2 {
            tally.change(None, Some(&record));
            store(tx, Table::Tasks, &record.id.clone(), &record)?;
        }
    }
    tally.flush(tx)?;
    counted.after = page[..page.len().min(limit as usize)]
        .last()
        .map(|(k, _)| k.clone());
    counted.exact = !more;
    if counted.exact {
        counted.after = None;
    }
    store(tx, Table::Meta, keys::COUNTED, &counted)?;
    Ok(counted.exact)
}
