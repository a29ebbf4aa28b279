//! The board's tasks by state (`count`, `recount`), from the count records
//! ([`crate::count`]).
//!
//! A task counts once a format-2 kernel has written its record. A board a
//! format-1 kernel wrote has tasks that no call has rewritten since: `count`
//! says so (`exact: false`) until `recount` has visited them, in id order,
//! from the position the `counted` marker keeps.
use super::record::{Record, decode_task};
use crate::count::{Counted, Shard, Tally, sums};
use crate::txn::store;
use crate::{Error, Table, TaskCounts, Txn, input, keys};

impl Tally {
    /// A task record changes from `old` to `new` (none: absent). `old`
    /// counts only when a format-2 kernel wrote it; `new` is written now,
    /// so it counts.
    pub fn change(&mut self, old: Option<&Record>, new: Option<&Record>) {
        let Some(place) = new.or(old).map(|r| r.seq) else {
            return;
        };
        let old = old.filter(|o| o.v.0 >= 2).map(|o| o.state);
        self.task(old, new.map(|n| n.state), place);
    }
}

/// A board created by this kernel counts every task from its first seed
/// (and every key, on a store with no key yet).
pub(crate) fn created(tx: &mut impl Txn, marker: Option<&str>) -> Result<(), Error> {
    let mut counted = Counted::decode(marker)?.unwrap_or_default();
    counted.exact = true;
    counted.after = None;
    counted.keys_from_start(tx)?;
    counted.store(tx)?;
    Shard::stamp_all(tx)
}

/// The board's tasks by state: the count records' sums.
pub fn count(tx: &mut impl Txn) -> Result<TaskCounts, Error> {
    let (sum, counted, values, _) = sums(tx, &[(Table::Meta, keys::BOARD)], &[])?;
    // No board record: nothing was ever seeded, nothing to count.
    let exact = counted.is_some_and(|c| c.exact) || values[0].is_none();
    let [open, claimed, done, failed, dead] = sum.tasks.totals()?;
    Ok(TaskCounts {
        open,
        claimed,
        done,
        failed,
        dead,
        exact,
    })
}

/// Count up to `limit` of the tasks the counts do not cover yet, from where
/// the last `recount` stopped; answers whether every task is counted now.
pub fn recount(tx: &mut impl Txn, limit: u32) -> Result<bool, Error> {
    input::limit(limit)?;
    let found = tx.get_many(&[(Table::Meta, keys::COUNTED), (Table::Meta, keys::BOARD)])?;
    let mut counted = match Counted::decode(found[0].as_deref())? {
        Some(c) => c,
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
    counted.store(tx)?;
    Ok(counted.exact)
}
