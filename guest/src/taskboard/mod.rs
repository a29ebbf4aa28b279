//! The taskboard: atomic claim with a store-minted token and takeover
//! generation; renew / release / complete by token (SPEC 6, 8 "Taskboard");
//! `claim-next` and bounded listings (SPEC 9).
use std::collections::{HashMap, HashSet};

use crate::format::{V, digest};
use crate::txn::{decode, mark, mint, read_many, scan_all, store};
use crate::{Error, Table, Task, TaskPage, TaskSeed, TaskState, Txn, input, keys};

mod held;
mod record;

use record::{Board, QueueEntry, write};
pub(crate) use record::{Record, decode_task, load_board};

/// Load topology; re-seeding overwrites content and clears the lease, but
/// keeps the highest fence (so a pre-reseed holder can never be mistaken for
/// a newer one) and the task's place in the claim order.
pub fn seed(tx: &mut impl Txn, tasks: &[TaskSeed]) -> Result<(), Error> {
    validate_seed(tasks)?;
    let mut wanted: Vec<(Table, &str)> = tasks
        .iter()
        .map(|t| (Table::Tasks, t.id.as_str()))
        .collect();
    wanted.push((Table::Meta, keys::BOARD));
    let mut found = read_many(tx, &wanted)?;
    let now = tx.now()?;
    let board_before: Board = match found.pop().flatten() {
        Some(v) => decode(Table::Meta, &v)?,
        None => Board::default(),
    };
    let old: Vec<Option<Record>> = found
        .iter()
        .map(|v| v.as_deref().map(decode_task).transpose())
        .collect::<Result<_, _>>()?;

    let mut board = board_before.clone();
    let mut new: Vec<Record> = Vec::with_capacity(tasks.len());
    for (t, old) in tasks.iter().zip(&old) {
        let state = t.state.unwrap_or(TaskState::Open);
        let seq = match old {
            Some(o) => o.seq,
            None => {
                board.next_seq += 1;
                board.next_seq
            }
        };
        // Re-seeding a done task as done keeps its finishing time, so a
        // re-seed does not hold back its retention.
        let done_at =
            (state == TaskState::Done).then(|| old.as_ref().and_then(|o| o.done_at).unwrap_or(now));
        new.push(Record {
            v: V,
            id: t.id.clone(),
            title: t.title.clone().unwrap_or_default(),
            deps: t.deps.clone(),
            state,
            owner: None,
            token_sha256: None,
            until: None,
            fence: old.as_ref().map_or(board.fence_floor, |o| o.fence),
            seq,
            queued: false,
            completed_by_sha256: None,
            done_at,
        });
    }

    // Whether each dependency is done once this seed lands: the seeded
    // tasks' new states win over what is stored.
    let mut done: HashMap<String, bool> = new
        .iter()
        .map(|r| (r.id.clone(), r.state == TaskState::Done))
        .collect();
    let outside: Vec<String> = new
        .iter()
        .flat_map(|r| r.deps.iter())
        .filter(|d| !done.contains_key(d.as_str()))
        .cloned()
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    note_done(tx, &outside, &mut done)?;

    for (i, record) in new.iter_mut().enumerate() {
        let ready = record.state != TaskState::Done && record.deps.iter().all(|d| done[d]);
        let old = old[i].as_ref();
        let old_deps: HashSet<&str> = old.map_or(HashSet::new(), |o| {
            o.deps.iter().map(String::as_str).collect()
        });
        let new_deps: HashSet<&str> = record.deps.iter().map(String::as_str).collect();
        for gone in old_deps.difference(&new_deps) {
            tx.delete(Table::Indexes, &keys::dependent(gone, &record.id))?;
        }
        for added in new_deps.difference(&old_deps) {
            mark(tx, &keys::dependent(added, &record.id))?;
        }
        // Done tasks held back from pruning because this one needed them:
        // it may need them no more.
        let finished =
            record.state == TaskState::Done && old.is_some_and(|o| o.state != TaskState::Done);
        let release = old.is_some() && (finished || old_deps != new_deps);
        write(tx, old, record, ready)?;
        if release {
            held::release_held(tx, &record.id)?;
        }
    }

    // A seeded task whose doneness changed can make tasks outside this call
    // ready (or not ready any more).
    let seeded: HashSet<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
    for (record, old) in new.iter().zip(&old) {
        let was_done = old.as_ref().is_some_and(|o| o.state == TaskState::Done);
        if was_done != (record.state == TaskState::Done) {
            recheck_dependents(tx, &record.id, &seeded, &mut done)?;
        }
    }
    if board.next_seq != board_before.next_seq {
        store(tx, Table::Meta, keys::BOARD, &board)?;
    }
    Ok(())
}

fn validate_seed(tasks: &[TaskSeed]) -> Result<(), Error> {
    if tasks.len() > input::MAX_ITEMS {
        return Err(Error::InvalidInput("more than 10000 tasks".into()));
    }
    let mut ids = HashSet::new();
    for t in tasks {
        input::id("task id", &t.id)?;
        input::ids("deps", &t.deps)?;
        if let Some(title) = &t.title {
            input::text("title", title, input::MAX_REASON)?;
        }
        if t.state == Some(TaskState::Claimed) {
            return Err(Error::InvalidInput(
                "a task cannot be seeded as claimed".into(),
            ));
        }
        if !ids.insert(t.id.as_str()) {
            return Err(Error::InvalidInput(format!("duplicate task id {:?}", t.id)));
        }
    }
    Ok(())
}

/// Read whether each of `ids` is done (absent counts as not done) into `done`.
fn note_done(
    tx: &mut impl Txn,
    ids: &[String],
    done: &mut HashMap<String, bool>,
) -> Result<(), Error> {
    let wanted: Vec<(Table, &str)> = ids.iter().map(|d| (Table::Tasks, d.as_str())).collect();
    for (id, value) in ids.iter().zip(read_many(tx, &wanted)?) {
        let is_done = match value {
            Some(v) => decode_task(&v)?.state == TaskState::Done,
            None => false,
        };
        done.insert(id.clone(), is_done);
    }
    Ok(())
}

/// Re-derive the queue membership of every task that depends on `dep`
/// (except those in `skip`, already handled). Bounded by `dep`'s fan-out.
fn recheck_dependents(
    tx: &mut impl Txn,
    dep: &str,
    skip: &HashSet<&str>,
    done: &mut HashMap<String, bool>,
) -> Result<(), Error> {
    let prefix = keys::dependents(dep);
    let ids: Vec<String> = scan_all(tx, Table::Indexes, &prefix)?
        .into_iter()
        .map(|(k, _)| k[prefix.len()..].to_owned())
        .filter(|id| !skip.contains(id.as_str()))
        .collect();
    let wanted: Vec<(Table, &str)> = ids.iter().map(|d| (Table::Tasks, d.as_str())).collect();
    for value in read_many(tx, &wanted)?.into_iter().flatten() {
        let record = decode_task(&value)?;
        if record.state == TaskState::Done {
            continue;
        }
        let unknown: Vec<String> = record
            .deps
            .iter()
            .filter(|d| !done.contains_key(d.as_str()))
            .cloned()
            .collect();
        note_done(tx, &unknown, done)?;
        let ready = record.deps.iter().all(|d| done[d]);
        if ready != record.queued {
            let mut updated = record.clone();
            write(tx, Some(&record), &mut updated, ready)?;
        }
    }
    Ok(())
}

/// One page of the board, ordered by id, optionally of one state, never a
/// token. Reads at most `limit + 1` entries (plus the page's tasks when
/// filtering by state).
pub fn list(
    tx: &mut impl Txn,
    state: Option<TaskState>,
    after: Option<&str>,
    limit: u32,
) -> Result<TaskPage, Error> {
    input::limit(limit)?;
    if let Some(after) = after {
        input::id("after", after)?;
    }
    let records: Vec<Record> = match state {
        None => tx
            .scan(Table::Tasks, "", after, limit + 1)?
            .iter()
            .map(|(_, v)| decode_task(v))
            .collect::<Result<_, _>>()?,
        Some(state) => {
            let prefix = keys::task_states(state);
            let after = after.map(|a| format!("{prefix}{a}"));
            let ids: Vec<String> = tx
                .scan(Table::Indexes, &prefix, after.as_deref(), limit + 1)?
                .into_iter()
                .map(|(k, _)| k[prefix.len()..].to_owned())
                .collect();
            let wanted: Vec<(Table, &str)> =
                ids.iter().map(|i| (Table::Tasks, i.as_str())).collect();
            read_many(tx, &wanted)?
                .iter()
                .flatten()
                .map(|v| decode_task(v))
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                // A binding whose range reads are snapshots (PostgreSQL) can
                // see a task change state between the index and the record.
                .filter(|r| r.state == state)
                .collect()
        }
    };
    let mut items: Vec<Task> = records.iter().map(|r| r.task(None)).collect();
    let next = if items.len() > limit as usize {
        items.truncate(limit as usize);
        items.last().map(|t| t.id.clone())
    } else {
        None
    };
    Ok(TaskPage { items, next })
}

/// The task without its token, or `not-found`.
pub fn get(tx: &mut impl Txn, id: &str) -> Result<Task, Error> {
    Ok(load_task(tx, id)?.task(None))
}

fn load_task(tx: &mut impl Txn, id: &str) -> Result<Record, Error> {
    input::id("task id", id)?;
    match tx.get(Table::Tasks, id)? {
        Some(v) => decode_task(&v),
        None => Err(Error::NotFound),
    }
}

/// Claim: `not-found`, `terminal`, `deps-pending`, `taken`, else a grant with
/// a fresh token and the next fence. An expired claim is taken over.
pub fn claim(tx: &mut impl Txn, id: &str, agent: &str, ttl: u64) -> Result<Task, Error> {
    input::id("agent", agent)?;
    input::ttl(ttl)?;
    let record = load_task(tx, id)?;
    grant(tx, record, agent, ttl)
}

/// The checks and the grant of `claim`, on a task already read.
fn grant(tx: &mut impl Txn, record: Record, agent: &str, ttl: u64) -> Result<Task, Error> {
    if record.state == TaskState::Done {
        return Err(Error::Terminal);
    }
    let deps: Vec<(Table, &str)> = record
        .deps
        .iter()
        .map(|d| (Table::Tasks, d.as_str()))
        .collect();
    for dep in read_many(tx, &deps)? {
        let done = match dep {
            Some(v) => decode_task(&v)?.state == TaskState::Done,
            None => false,
        };
        if !done {
            return Err(Error::DepsPending);
        }
    }
    let now = tx.now()?;
    if record.live_claim(now) {
        return Err(Error::Taken);
    }
    let (token, token_sha256) = mint(tx)?;
    let mut claimed = record.clone();
    claimed.state = TaskState::Claimed;
    claimed.owner = Some(agent.to_owned());
    claimed.token_sha256 = Some(token_sha256);
    claimed.until = Some(now.saturating_add(ttl));
    claimed.fence += 1;
    claimed.completed_by_sha256 = None;
    write(tx, Some(&record), &mut claimed, true)?;
    Ok(claimed.task(Some(token)))
}

/// Claim the first-seeded ready task, or none. First every claim that has
/// expired since the last call moves from the claimed queue back to its
/// place in the claim queue (each expired claim moves once, so the work is
/// bounded by what expired, never by the live claims); then the claim queue
/// is walked in seed order. Each candidate is judged by `claim`'s own checks
/// on its freshly read record, so a stale range read (a concurrent claimer
/// got there first) only moves on.
pub fn claim_next(tx: &mut impl Txn, agent: &str, ttl: u64) -> Result<Option<Task>, Error> {
    const PAGE: u32 = 32;
    input::id("agent", agent)?;
    input::ttl(ttl)?;
    let now = requeue_expired(tx)?;
    let mut after: Option<String> = None;
    loop {
        let page = tx.scan(Table::Indexes, keys::QUEUE, after.as_deref(), PAGE)?;
        for (_, value) in &page {
            let entry: QueueEntry = decode(Table::Indexes, value)?;
            if !entry.claimable(now) {
                continue;
            }
            let Some(value) = tx.get(Table::Tasks, &entry.id)? else {
                continue;
            };
            match grant(tx, decode_task(&value)?, agent, ttl) {
                Ok(task) => return Ok(Some(task)),
                Err(Error::Terminal | Error::DepsPending | Error::Taken) => {}
                Err(other) => return Err(other),
            }
        }
        if page.len() < PAGE as usize {
            return Ok(None);
        }
        after = page.last().map(|(k, _)| k.clone());
    }
}

/// Move every claim that expired by `now` from the claimed queue back to its
/// place in the claim queue (its record unchanged: still claimed, now
/// claimable). The claimed queue is ordered by deadline, so the walk stops
/// at the first live claim. Each entry is checked against its task, read
/// with `get`: a range read may be older than a concurrent re-claim.
/// Answers the call's instant, read with the first page.
fn requeue_expired(tx: &mut impl Txn) -> Result<u64, Error> {
    const PAGE: u32 = 16;
    let mut after: Option<String> = None;
    loop {
        let page = tx.scan(Table::Indexes, keys::CLAIMED, after.as_deref(), PAGE)?;
        let now = tx.now()?;
        let mut expired: Vec<(String, QueueEntry)> = Vec::new();
        for (key, value) in &page {
            match keys::parse_claimed(key) {
                Some(until) if until <= now => {
                    expired.push((key.clone(), decode(Table::Indexes, value)?));
                }
                Some(_) => break,
                None => {
                    return Err(Error::storage(format!(
                        "corrupt claimed-queue entry {key:?}"
                    )));
                }
            }
        }
        let ended = expired.len() < page.len() || page.len() < PAGE as usize;
        after = expired.last().map(|(k, _)| k.clone());
        let wanted: Vec<(Table, &str)> = expired
            .iter()
            .map(|(_, e)| (Table::Tasks, e.id.as_str()))
            .collect();
        for ((key, entry), value) in expired.iter().zip(read_many(tx, &wanted)?) {
            let Some(record) = value.as_deref().map(decode_task).transpose()? else {
                continue;
            };
            let current = record.queued
                && record.state == TaskState::Claimed
                && record.until == entry.until
                && entry.place(record.seq) == *key;
            if current {
                tx.delete(Table::Indexes, key)?;
                store(tx, Table::Indexes, &keys::queue(record.seq), entry)?;
            }
        }
        if ended {
            return Ok(now);
        }
    }
}

/// Is `token` the task's current claim token?
fn holds(record: &Record, token_sha256: &str) -> bool {
    record.state == TaskState::Claimed && record.token_sha256.as_deref() == Some(token_sha256)
}

/// Return the task to open. Identity only: a late loser's token never
/// matches, so it can never release the winner's claim.
pub fn release(tx: &mut impl Txn, id: &str, token: &str) -> Result<(), Error> {
    let record = load_task(tx, id)?;
    if !holds(&record, &digest(token)) {
        return Err(Error::LeaseLost);
    }
    let mut open = record.clone();
    open.state = TaskState::Open;
    open.owner = None;
    open.token_sha256 = None;
    open.until = None;
    let ready = record.queued;
    write(tx, Some(&record), &mut open, ready)
}

/// Mark the task done; idempotent for the token that completed it. Tasks
/// waiting on it join the claim queue in the same transaction.
pub fn complete(tx: &mut impl Txn, id: &str, token: &str) -> Result<(), Error> {
    let record = load_task(tx, id)?;
    let token_sha256 = digest(token);
    if record.state == TaskState::Done
        && record.completed_by_sha256.as_deref() == Some(token_sha256.as_str())
    {
        return Ok(());
    }
    if !holds(&record, &token_sha256) {
        return Err(Error::LeaseLost);
    }
    let mut done = record.clone();
    done.state = TaskState::Done;
    done.token_sha256 = None;
    done.until = None;
    done.completed_by_sha256 = Some(token_sha256);
    done.done_at = Some(tx.now()?);
    write(tx, Some(&record), &mut done, false)?;
    let mut known = HashMap::from([(id.to_owned(), true)]);
    recheck_dependents(tx, id, &HashSet::new(), &mut known)?;
    held::release_held(tx, id)
}

/// Qualification check: current token and a live lease, else `lease-lost`.
pub fn renew(tx: &mut impl Txn, id: &str, token: &str, ttl: u64) -> Result<Task, Error> {
    input::ttl(ttl)?;
    let record = load_task(tx, id)?;
    let now = tx.now()?;
    if !holds(&record, &digest(token)) || !record.live_claim(now) {
        return Err(Error::LeaseLost);
    }
    let mut renewed = record.clone();
    renewed.until = Some(now.saturating_add(ttl));
    let ready = record.queued;
    write(tx, Some(&record), &mut renewed, ready)?;
    Ok(renewed.task(Some(token.to_owned())))
}

#[cfg(test)]
mod tests;
