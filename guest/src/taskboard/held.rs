//! Done tasks held back from pruning while a not-done task needs them
//! (SPEC 9: a pruned dependency would block its dependents for ever), and
//! dead ones while an open, failed or claimed task needs them (SPEC 10). The
//! retention index parks such an entry under the task that needs it; when
//! that task finishes or is re-seeded, the entries go back. A taskboard
//! change triggers it, so it lives here and retention only reads the board.
use crate::keys::{self, Finished};
use crate::taskboard::decode_task;
use crate::txn::{mark, read_many, scan_all};
use crate::{Error, Table, Txn};

/// `dependent` finished or was re-seeded: the retention entries held under
/// it go back to the retention index, each checked against its task (one
/// re-seeded since it was held is dropped: its own entry is current).
/// Bounded by `dependent`'s dependencies.
pub(crate) fn release_held(tx: &mut impl Txn, dependent: &str) -> Result<(), Error> {
    release_held_ahead(tx, dependent, &super::Ahead::new())
}

/// [`release_held`], with the held entries taken from `ahead` when a batch
/// read them already.
pub(crate) fn release_held_ahead(
    tx: &mut impl Txn,
    dependent: &str,
    ahead: &super::Ahead,
) -> Result<(), Error> {
    let prefix = keys::held_by(dependent);
    let held = match ahead.get(&prefix) {
        Some(entries) => entries.clone(),
        None => scan_all(tx, Table::Indexes, &prefix)?,
    };
    if held.is_empty() {
        return Ok(());
    }
    let mut parsed = Vec::with_capacity(held.len());
    for (key, _) in &held {
        let Some((at, id)) = keys::parse_held(&prefix, key) else {
            return Err(Error::storage(format!(
                "corrupt held retention entry {key:?}"
            )));
        };
        parsed.push((key.as_str(), at, id));
    }
    let wanted: Vec<(Table, &str)> = parsed
        .iter()
        .map(|(_, _, id)| (Table::Tasks, *id))
        .collect();
    for ((key, at, id), value) in parsed.iter().zip(read_many(tx, &wanted)?) {
        tx.delete(Table::Indexes, key)?;
        let task = value.as_deref().map(decode_task).transpose()?;
        if task.is_some_and(|t| t.finished_at() == Some(*at)) {
            mark(tx, &keys::retention(*at, Finished::Task, id))?;
        }
    }
    Ok(())
}
