//! The keys by state (`count`, `recount`), from the count records
//! ([`crate::count`]) and the index of keys by the time they turn uncertain
//! (`kt/`).
//!
//! The count records hold keys by *stored* state, where an expired intent
//! is still an intent; `count` answers them as `list` shows them, moving
//! the expired intents it finds at the head of `kt/` to `uncertain`.
use super::record::{KeyRecord, KeyTimeEntry, write_key};
use crate::count::{Counted, sums, total};
use crate::txn::decode;
use crate::{Error, KeyCounts, KeyState, Scan, Table, Txn, input, keys};

/// How many uncertain keys' index entries `count` reads at most.
const UNCERTAIN: u32 = 1000;

/// The keys by state: the count records' sums, with the expired intents
/// moved from `in-flight` to `uncertain`.
pub fn count(tx: &mut impl Txn) -> Result<KeyCounts, Error> {
    let (mut sum, counted, _, pages) = sums(
        tx,
        &[],
        &[
            Scan {
                table: Table::Indexes,
                prefix: keys::KEY_TIMES,
                after: None,
                limit: UNCERTAIN,
            },
            Scan {
                table: Table::Actions,
                prefix: "",
                after: None,
                limit: 1,
            },
        ],
    )?;
    let now = tx.now()?;
    // Entries in time order: those at or before now are the uncertain keys
    // (every marked one, and the expired intents), oldest first.
    let (mut expired, mut oldest, mut past) = (0i64, None, 0usize);
    for (entry, value) in &pages[0] {
        let Some(at) = keys::parse_key_time(entry) else {
            return Err(Error::storage(format!("corrupt key-time entry {entry:?}")));
        };
        if at > now {
            break;
        }
        past += 1;
        oldest.get_or_insert(at);
        let timed: KeyTimeEntry = decode(Table::Indexes, value)?;
        if timed.state == KeyState::InFlight {
            expired += 1;
        }
    }
    let capped = past == UNCERTAIN as usize;
    *sum.keys.state(KeyState::InFlight) -= expired;
    *sum.keys.state(KeyState::Uncertain) += expired;
    let exact = counted.is_some_and(|c| c.keys_counted()) || pages[1].is_empty();
    Ok(KeyCounts {
        cleared: total(sum.keys.keys_cleared)?,
        in_flight: total(sum.keys.keys_in_flight)?,
        uncertain: total(sum.keys.keys_uncertain)?,
        completed: total(sum.keys.keys_completed)?,
        oldest_uncertain: oldest,
        capped,
        exact,
    })
}

/// Count up to `limit` of the keys the counts do not cover yet, from where
/// the last `recount` stopped; answers whether every key is counted now.
pub fn recount(tx: &mut impl Txn, limit: u32) -> Result<bool, Error> {
    input::limit(limit)?;
    let found = tx.get(Table::Meta, keys::COUNTED)?;
    let mut counted = Counted::decode(found.as_deref())?.unwrap_or_default();
    if counted.keys_counted() {
        return Ok(true);
    }
    let page = tx.scan(Table::Actions, "", counted.keys_after.as_deref(), limit + 1)?;
    let more = page.len() > limit as usize;
    let mut visit: Vec<&str> = Vec::new();
    for (key, value) in page.iter().take(limit as usize) {
        if KeyRecord::decode(value)?.v.0 < 2 {
            visit.push(key);
        }
    }
    // Read again by key (locked as every change locks them): a range read
    // is a snapshot, and a concurrent call may have counted one since.
    let wanted: Vec<(Table, &str)> = visit.iter().map(|k| (Table::Actions, *k)).collect();
    for value in crate::txn::read_many(tx, &wanted)?.into_iter().flatten() {
        let record = KeyRecord::decode(&value)?;
        if record.v.0 < 2 {
            // Rewritten as it is: counted, and timed if it has a time.
            write_key(tx, Some(&record), &record)?;
        }
    }
    counted.keys_after = page[..page.len().min(limit as usize)]
        .last()
        .map(|(k, _)| k.clone());
    counted.keys_exact = Some(!more);
    if !more {
        counted.keys_after = None;
    }
    counted.store(tx)?;
    Ok(!more)
}
