//! Operators' view of side-effect keys: bounded pages by state (SPEC 9).
//! Never a holder, a fence-holder pair or a reconcile claim.
use super::record::{INTENT_EXPIRED, KeyRecord, KeyStateEntry, Phase};
use crate::txn::{decode, read_many};
use crate::{Error, KeyInfo, KeyPage, KeyState, Table, Txn, input, keys};

/// The key as an operator sees it at `now`.
fn info(record: KeyRecord, now: u64) -> KeyInfo {
    let mut info = KeyInfo {
        key: record.key,
        state: KeyState::Cleared,
        retry_safety: record.retry_safety,
        fingerprint: record.fingerprint,
        resource: record.resource,
        until: None,
        reason: None,
        completed_at: None,
        reconciling_until: record.reconcile.map(|r| r.until).filter(|u| now < *u),
    };
    match record.phase {
        Phase::Cleared => {}
        Phase::Intent { until, .. } => {
            info.until = Some(until);
            if now >= until {
                info.state = KeyState::Uncertain;
                info.reason = Some(INTENT_EXPIRED.to_owned());
            } else {
                info.state = KeyState::InFlight;
            }
        }
        Phase::Uncertain { reason, .. } => {
            info.state = KeyState::Uncertain;
            info.reason = Some(reason);
        }
        Phase::Completed { at, .. } => {
            info.state = KeyState::Completed;
            info.completed_at = Some(at);
        }
    }
    info
}

/// The key as `list` shows it, or `not-found`.
pub fn get(tx: &mut impl Txn, key: &str) -> Result<KeyInfo, Error> {
    input::id("key", key)?;
    let record = tx.get(Table::Actions, key)?.ok_or(Error::NotFound)?;
    let now = tx.now()?;
    Ok(info(KeyRecord::decode(&record)?, now))
}

/// One page of keys ordered by key, optionally of one state.
pub fn list(
    tx: &mut impl Txn,
    state: Option<KeyState>,
    after: Option<&str>,
    limit: u32,
) -> Result<KeyPage, Error> {
    input::limit(limit)?;
    if let Some(after) = after {
        input::id("after", after)?;
    }
    let want = limit as usize + 1;
    let mut items: Vec<KeyInfo> = match state {
        None => {
            let page = tx.scan(Table::Actions, "", after, limit + 1)?;
            // The clock after the first read: it then costs no crossing.
            let now = tx.now()?;
            page.iter()
                .map(|(_, v)| Ok(info(KeyRecord::decode(v)?, now)))
                .collect::<Result<_, Error>>()?
        }
        Some(state) => {
            let keys = match state {
                KeyState::Cleared | KeyState::Completed => {
                    indexed(tx, state, after, want, |_, _| true)?
                }
                KeyState::InFlight => {
                    indexed(tx, state, after, want, |u, now| u.is_some_and(|u| now < u))?
                }
                // Marked uncertain, merged with intents that expired without
                // a verdict (their holders may have applied the effect).
                KeyState::Uncertain => {
                    let mut keys = indexed(tx, KeyState::Uncertain, after, want, |_, _| true)?;
                    keys.extend(indexed(tx, KeyState::InFlight, after, want, |u, now| {
                        u.is_some_and(|u| now >= u)
                    })?);
                    keys.sort();
                    keys.truncate(want);
                    keys
                }
            };
            let now = tx.now()?;
            let wanted: Vec<(Table, &str)> =
                keys.iter().map(|k| (Table::Actions, k.as_str())).collect();
            read_many(tx, &wanted)?
                .iter()
                .flatten()
                .map(|v| Ok(info(KeyRecord::decode(v)?, now)))
                .collect::<Result<Vec<_>, Error>>()?
                .into_iter()
                // A snapshot range read (PostgreSQL) can see a key move on
                // between the index and the record.
                .filter(|i| i.state == state)
                .collect()
        }
    };
    let next = if items.len() > limit as usize {
        items.truncate(limit as usize);
        items.last().map(|i| i.key.clone())
    } else {
        None
    };
    Ok(KeyPage { items, next })
}

/// Up to `want` keys of the key-state index for `phase` after `after`
/// whose intent deadline passes `keep` (given the call's instant, read
/// after the first page), in key order.
fn indexed(
    tx: &mut impl Txn,
    phase: KeyState,
    after: Option<&str>,
    want: usize,
    keep: impl Fn(Option<u64>, u64) -> bool,
) -> Result<Vec<String>, Error> {
    const PAGE: u32 = 256;
    let prefix = keys::key_states(phase);
    let mut cursor = after.map(|a| format!("{prefix}{a}"));
    let mut keys = Vec::new();
    loop {
        let page_size = PAGE.min(want as u32 + 1);
        let page = tx.scan(Table::Indexes, &prefix, cursor.as_deref(), page_size)?;
        let now = tx.now()?;
        for (k, v) in &page {
            let entry: KeyStateEntry = decode(Table::Indexes, v)?;
            if keep(entry.until, now) {
                keys.push(k[prefix.len()..].to_owned());
                if keys.len() == want {
                    return Ok(keys);
                }
            }
        }
        if page.len() < page_size as usize {
            return Ok(keys);
        }
        cursor = page.last().map(|(k, _)| k.clone());
    }
}
