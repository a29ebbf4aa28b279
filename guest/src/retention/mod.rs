//! Retention: bounded removal of finished records (SPEC 9 `prune`).
//!
//! Driven by the retention index (`rt/<finishing time>/<kind>/<id>`), so a
//! call reads the oldest finished records first and never a whole table.
//! Resource and sink records are never removed: their fences must never go
//! backwards, or a stale holder or writer could win again.
use crate::keys::{self, Finished};
use crate::sideeffect::{KeyRecord, Phase};
use crate::taskboard::{Record as TaskRecord, decode_task, load_board};
use crate::txn::{read_many, scan_all, store};
use crate::{Error, KeyState, Pruned, Table, TaskState, Txn, input};

/// Remove at most `limit` records finished before `before`, oldest first.
pub fn prune(tx: &mut impl Txn, before: u64, limit: u32) -> Result<Pruned, Error> {
    const PAGE: u32 = 64;
    input::number("before", before)?;
    input::limit(limit)?;
    let mut pruned = Pruned::default();
    let mut removed = 0;
    let mut fence_floor = None;
    let mut after: Option<String> = None;
    'scan: loop {
        let page = tx.scan(Table::Indexes, keys::RETENTION, after.as_deref(), PAGE)?;
        for (entry, _) in &page {
            let Some((at, kind, id)) = keys::parse_retention(entry) else {
                return Err(Error::storage(format!("corrupt retention entry {entry:?}")));
            };
            if at >= before {
                break 'scan;
            }
            let found = match kind {
                Finished::Key => removable_key(tx, id)?.map(|()| Removal::Key),
                Finished::Task => removable_task(tx, id)?.map(Removal::Task),
                Finished::Run => Some(Removal::Run),
            };
            let Some(found) = found else { continue };
            if removed == limit {
                pruned.more = true;
                break 'scan;
            }
            removed += 1;
            match found {
                Removal::Key => {
                    tx.delete(Table::Actions, id)?;
                    tx.delete(Table::Indexes, &keys::key_state(KeyState::Completed, id))?;
                    pruned.removed_keys += 1;
                }
                Removal::Task(task) => {
                    remove_task(tx, &task)?;
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
        if page.len() < PAGE as usize {
            break;
        }
        after = page.last().map(|(k, _)| k.clone());
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

enum Removal {
    Key,
    Task(TaskRecord),
    Run,
}

/// A completed key (the index is exact, so anything else is corruption).
fn removable_key(tx: &mut impl Txn, key: &str) -> Result<Option<()>, Error> {
    let Some(value) = tx.get(Table::Actions, key)? else {
        return Err(Error::storage(format!(
            "retention lists missing key {key:?}"
        )));
    };
    match KeyRecord::decode(&value)?.phase {
        Phase::Completed { .. } => Ok(Some(())),
        _ => Err(Error::storage(format!(
            "retention lists key {key:?}, which is not completed"
        ))),
    }
}

/// A done task that no not-done task depends on; none while one does (a
/// pruned dependency would block its dependents forever).
fn removable_task(tx: &mut impl Txn, id: &str) -> Result<Option<TaskRecord>, Error> {
    let Some(value) = tx.get(Table::Tasks, id)? else {
        return Err(Error::storage(format!(
            "retention lists missing task {id:?}"
        )));
    };
    let task = decode_task(&value)?;
    if task.state != TaskState::Done {
        return Err(Error::storage(format!(
            "retention lists task {id:?}, which is not done"
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
        if decode_task(&value)?.state != TaskState::Done {
            return Ok(None);
        }
    }
    Ok(Some(task))
}

/// Remove a done task, its state entry and its own dependency edges. Edges
/// pointing at it stay with their (done) dependents, which still list it.
fn remove_task(tx: &mut impl Txn, task: &TaskRecord) -> Result<(), Error> {
    tx.delete(Table::Tasks, &task.id)?;
    tx.delete(Table::Indexes, &keys::task_state(TaskState::Done, &task.id))?;
    for dep in &task.deps {
        tx.delete(Table::Indexes, &keys::dependent(dep, &task.id))?;
    }
    Ok(())
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
