//! Retention: bounded removal of finished records (SPEC 9 `prune`).
//!
//! Driven by the retention index (`rt/<finishing time>/<kind>/<id>`), so a
//! call reads the oldest finished records first and never a whole table;
//! done tasks found still needed wait aside (`rh/<dependent>/…`) until the
//! task that needs them finishes.
//! Resource and sink records are never removed: their fences must never go
//! backwards, or a stale holder or writer could win again.
use crate::keys::{self, Finished};
use crate::sideeffect::{KeyRecord, Phase};
use crate::taskboard::{Groups, Record as TaskRecord, Tally, decode_task, load_board};
use crate::txn::{mark, read_many, scan_all, store};
use crate::{Error, KeyState, Pruned, Table, TaskState, Txn, input};

/// Remove at most `limit` records finished before `before`, oldest first.
///
/// Bounded by the batch, not by the index: a call examines at most
/// `limit + EXAMINE` retention entries. A done task still needed by a
/// not-done dependent is moved aside (held under that dependent until it
/// finishes or is re-seeded), so no later call reads it again; when the
/// budget runs out first, `more` is true and the next call goes on.
pub fn prune(tx: &mut impl Txn, before: u64, limit: u32) -> Result<Pruned, Error> {
    const PAGE: u32 = 64;
    const EXAMINE: u32 = 64;
    input::number("before", before)?;
    input::limit(limit)?;
    let mut pruned = Pruned::default();
    let mut removed = 0;
    let mut budget = limit + EXAMINE;
    let mut fence_floor = None;
    let mut tally = Tally::default();
    // The groups of the removed tasks, which take their figures.
    let mut groups: Option<Groups> = None;
    let mut after: Option<String> = None;
    'scan: loop {
        // One entry past the budget tells whether anything is left.
        let want = PAGE.min(budget + 1);
        let page = tx.scan(Table::Indexes, keys::RETENTION, after.as_deref(), want)?;
        for (entry, _) in &page {
            let Some((at, kind, id)) = keys::parse_retention(entry) else {
                return Err(Error::storage(format!("corrupt retention entry {entry:?}")));
            };
            if at >= before {
                break 'scan;
            }
            if budget == 0 {
                pruned.more = true;
                break 'scan;
            }
            budget -= 1;
            let found = match kind {
                Finished::Key => removable_key(tx, entry, id)?,
                Finished::Task => removable_task(tx, entry, at, id)?,
                Finished::Run => removable_run(tx, entry)?,
            };
            let Verdict::Remove(found) = found else {
                continue;
            };
            if removed == limit {
                pruned.more = true;
                break 'scan;
            }
            removed += 1;
            match found {
                Removal::Key { counted } => {
                    tally.key(counted.then_some(KeyState::Completed), None, id);
                    tx.delete(Table::Actions, id)?;
                    tx.delete(Table::Indexes, &keys::key_state(KeyState::Completed, id))?;
                    pruned.removed_keys += 1;
                }
                Removal::Task(task) => {
                    remove_task(tx, &task)?;
                    // The clock after the first read: it costs no crossing.
                    if groups.is_none() {
                        groups = Some(Groups::new(tx.now()?));
                    }
                    if let Some(groups) = &mut groups {
                        groups.change(Some(&task), None);
                    }
                    let floor = fence_floor.get_or_insert(0);
                    *floor = task.fence.max(*floor);
                    pruned.removed_tasks += 1;
                }
                Removal::Run => {
                    remove_run(tx, id)?;
                    pruned.removed_runs += 1;
                }
            }
            tx.delete(Table::Indexes, entry)?;
        }
        if page.len() < want as usize {
            break;
        }
        after = page.last().map(|(k, _)| k.clone());
    }
    tally.flush(tx)?;
    if let Some(groups) = &mut groups {
        groups.flush(tx)?;
    }
    if let Some(floor) = fence_floor {
        let mut board = load_board(tx)?;
        if floor > board.fence_floor {
            board.fence_floor = floor;
            store(tx, Table::Meta, keys::BOARD, &board)?;
        }
    }
    Ok(pruned)
}

/// What `prune` makes of one retention entry.
enum Verdict {
    /// Remove the record.
    Remove(Removal),
    /// Not this time: the entry is gone since the range read (a concurrent
    /// `prune` or re-seed got there first: a normal race, not corruption),
    /// or the task is still needed and was moved aside.
    Skip,
}

enum Removal {
    /// A completed key, and whether it is in the counts.
    Key {
        counted: bool,
    },
    Task(Box<TaskRecord>),
    Run,
}

/// The entry itself and its record, read together with `get` (which
/// serializes against writers): the range read that found the entry is a
/// snapshot and may be older than a concurrent prune or re-seed. None when
/// the entry is gone; then the record does not matter.
fn reread(
    tx: &mut impl Txn,
    entry: &str,
    table: Table,
    id: &str,
) -> Result<Option<Option<String>>, Error> {
    let mut found = tx.get_many(&[(Table::Indexes, entry), (table, id)])?;
    let record = found.pop().flatten();
    Ok(found.pop().flatten().map(|_| record))
}

/// A completed key. The entry is written and removed in the same
/// transactions as the key's record, so an entry that is still there with
/// a record that is not completed is corruption.
fn removable_key(tx: &mut impl Txn, entry: &str, key: &str) -> Result<Verdict, Error> {
    let Some(value) = reread(tx, entry, Table::Actions, key)? else {
        return Ok(Verdict::Skip);
    };
    let Some(value) = value else {
        return Err(Error::storage(format!(
            "retention lists missing key {key:?}"
        )));
    };
    let record = KeyRecord::decode(&value)?;
    match record.phase {
        Phase::Completed { .. } => Ok(Verdict::Remove(Removal::Key {
            counted: record.v.0 >= 2,
        })),
        _ => Err(Error::storage(format!(
            "retention lists key {key:?}, which is not completed"
        ))),
    }
}

/// A run with a terminal outcome.
fn removable_run(tx: &mut impl Txn, entry: &str) -> Result<Verdict, Error> {
    Ok(match tx.get(Table::Indexes, entry)? {
        Some(_) => Verdict::Remove(Removal::Run),
        None => Verdict::Skip,
    })
}

/// A done task that no not-done task depends on, or a dead one that no
/// open, failed or claimed task depends on (SPEC 10: tasks blocked behind a
/// dead dependency stay until it is revived or they are seeded anew). One
/// that is still needed is held under the first dependent found that needs
/// it (a pruned dependency would block its dependents forever).
fn removable_task(tx: &mut impl Txn, entry: &str, at: u64, id: &str) -> Result<Verdict, Error> {
    let Some(value) = reread(tx, entry, Table::Tasks, id)? else {
        return Ok(Verdict::Skip);
    };
    let Some(value) = value else {
        return Err(Error::storage(format!(
            "retention lists missing task {id:?}"
        )));
    };
    let task = decode_task(&value)?;
    if task.finished_at() != Some(at) {
        return Err(Error::storage(format!(
            "retention lists task {id:?}, which did not finish at {at}"
        )));
    }
    let prefix = keys::dependents(id);
    let dependents: Vec<String> = scan_all(tx, Table::Indexes, &prefix)?
        .into_iter()
        .map(|(k, _)| k[prefix.len()..].to_owned())
        .collect();
    let wanted: Vec<(Table, &str)> = dependents
        .iter()
        .map(|d| (Table::Tasks, d.as_str()))
        .collect();
    for value in read_many(tx, &wanted)?.into_iter().flatten() {
        let dependent = decode_task(&value)?;
        let needs = match task.state {
            TaskState::Done => dependent.state != TaskState::Done,
            _ => matches!(
                dependent.state,
                TaskState::Open | TaskState::Failed | TaskState::Claimed
            ),
        };
        if needs && dependent.deps.iter().any(|d| d == id) {
            tx.delete(Table::Indexes, entry)?;
            mark(tx, &keys::held(&dependent.id, at, id))?;
            return Ok(Verdict::Skip);
        }
    }
    Ok(Verdict::Remove(Removal::Task(Box::new(task))))
}

/// Remove a done or dead task, its state entry and its own dependency
/// edges. Edges pointing at it stay with their dependents, which still list
/// it. Entries it held back from pruning go back (a dead task held the done
/// tasks it depends on).
fn remove_task(tx: &mut impl Txn, task: &TaskRecord) -> Result<(), Error> {
    tx.delete(Table::Tasks, &task.id)?;
    tx.delete(Table::Indexes, &keys::task_state(task.state, &task.id))?;
    if let Some(group) = &task.group {
        tx.delete(Table::Indexes, &keys::group_task(group, &task.id))?;
    }
    for dep in &task.deps {
        tx.delete(Table::Indexes, &keys::dependent(dep, &task.id))?;
    }
    crate::taskboard::release_held(tx, &task.id)
}

/// Remove a run's snapshot and every outcome of it.
fn remove_run(tx: &mut impl Txn, run_id: &str) -> Result<(), Error> {
    tx.delete(Table::Snapshots, run_id)?;
    for (key, _) in scan_all(tx, Table::Outcomes, &keys::run_outcomes(run_id))? {
        tx.delete(Table::Outcomes, &key)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
