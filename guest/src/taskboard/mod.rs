//! The taskboard: atomic claim with a store-minted token and takeover
//! generation; renew / release / complete by token (SPEC 6, 8 "Taskboard");
//! `claim-next` and bounded listings (SPEC 9); the job queue's batches,
//! retries, dead tasks, priorities, delays and group limits (SPEC 10).
use std::collections::{HashMap, HashSet};

use crate::format::{Version, digest};
use crate::txn::{Minter, Scan, decode, mint, read_many, scan_all, store};
use crate::{
    Completion, CompletionAnswer, CompletionResult, Error, GroupEntry, GroupInfo, GroupPage, Table,
    Task, TaskPage, TaskSeed, TaskState, Txn, input, keys,
};

mod count;
mod group;
mod held;
mod record;

pub(crate) use crate::count::Tally;
pub use count::{count, recount};
use group::GroupRecord;
pub(crate) use group::Groups;
pub(crate) use held::release_held;
use record::{Board, QueueEntry, place, write};
pub(crate) use record::{Record, decode_task, load_board};

/// The reason a task turned dead by a claimer records (SPEC 10).
pub const ATTEMPTS_EXHAUSTED: &str = "attempts-exhausted";

/// Most attempts a task may be given.
pub const MAX_ATTEMPTS: u32 = 1000;

/// Largest group limit.
pub const MAX_GROUP_LIMIT: u32 = 100_000;

/// Index pages a batch read ahead in one crossing, by prefix: complete
/// pages only (a prefix whose page came back full is read again in full).
pub(crate) type Ahead = HashMap<String, Vec<(String, String)>>;

/// Read every prefix's entries in one crossing; keep the complete pages.
fn read_ahead(tx: &mut impl Txn, prefixes: &[String]) -> Result<Ahead, Error> {
    const PAGE: u32 = 256;
    if prefixes.is_empty() {
        return Ok(Ahead::new());
    }
    let scans: Vec<Scan<'_>> = prefixes
        .iter()
        .map(|p| Scan {
            table: Table::Indexes,
            prefix: p,
            after: None,
            limit: PAGE,
        })
        .collect();
    let pages = tx.scan_many(&scans)?;
    Ok(prefixes
        .iter()
        .cloned()
        .zip(pages)
        .filter(|(_, page)| page.len() < PAGE as usize)
        .collect())
}

/// Load topology; re-seeding overwrites content and clears the lease, but
/// keeps the highest fence (so a pre-reseed holder can never be mistaken for
/// a newer one) and the task's place in the claim order.
pub fn seed(tx: &mut impl Txn, tasks: &[TaskSeed]) -> Result<(), Error> {
    validate_seed(tasks)?;
    let mut wanted: Vec<(Table, &str)> = tasks
        .iter()
        .map(|t| (Table::Tasks, t.id.as_str()))
        .collect();
    wanted.push((Table::Meta, keys::COUNTED));
    wanted.push((Table::Meta, keys::BOARD));
    let mut found = read_many(tx, &wanted)?;
    let now = tx.now()?;
    let mut groups = Groups::new(now);
    let board = found.pop().flatten();
    let counted = found.pop().flatten();
    let board_before: Board = match board {
        Some(v) => decode(Table::Meta, &v)?,
        None => {
            // A new board: its counts cover every task from the start.
            count::created(tx, counted.as_deref())?;
            Board::default()
        }
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
            v: Version::CURRENT,
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
            entry: None,
            completed_by_sha256: None,
            failed_by_sha256: None,
            done_at,
            dead_at: None,
            priority: t.priority.unwrap_or(0),
            not_before: t.not_before,
            max_attempts: t.max_attempts,
            group: t.group.clone(),
            attempts: 0,
            last_error: None,
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
        let ready = !record.terminal() && record.deps.iter().all(|d| done[d]);
        let old = old[i].as_ref();
        let old_deps: HashSet<&str> = old.map_or(HashSet::new(), |o| {
            o.deps.iter().map(String::as_str).collect()
        });
        let new_deps: HashSet<&str> = record.deps.iter().map(String::as_str).collect();
        for gone in old_deps.difference(&new_deps) {
            tx.delete(Table::Indexes, &keys::dependent(gone, &record.id))?;
        }
        for added in new_deps.difference(&old_deps) {
            crate::txn::mark(tx, &keys::dependent(added, &record.id))?;
        }
        // Done tasks held back from pruning because this one needed them:
        // it may need them no more.
        let finished =
            record.state == TaskState::Done && old.is_some_and(|o| o.state != TaskState::Done);
        let release = old.is_some() && (finished || old_deps != new_deps);
        write(tx, &mut groups, old, record, ready)?;
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
            recheck_dependents(
                tx,
                &mut groups,
                &record.id,
                &seeded,
                &mut done,
                &Ahead::new(),
            )?;
        }
    }
    if board.next_seq != board_before.next_seq {
        store(tx, Table::Meta, keys::BOARD, &board)?;
    }
    groups.flush(tx)
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
        match t.state {
            Some(TaskState::Claimed) => {
                return Err(Error::InvalidInput(
                    "a task cannot be seeded as claimed".into(),
                ));
            }
            Some(TaskState::Dead) => {
                return Err(Error::InvalidInput(
                    "a task cannot be seeded as dead".into(),
                ));
            }
            _ => {}
        }
        if let Some(at) = t.not_before {
            input::number("not-before", at)?;
        }
        if let Some(max) = t.max_attempts
            && (max == 0 || max > MAX_ATTEMPTS)
        {
            return Err(Error::InvalidInput("max-attempts must be 1 to 1000".into()));
        }
        if let Some(group) = &t.group {
            input::id("group", group)?;
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
/// Answers the ids it rewrote.
fn recheck_dependents(
    tx: &mut impl Txn,
    groups: &mut Groups,
    dep: &str,
    skip: &HashSet<&str>,
    done: &mut HashMap<String, bool>,
    ahead: &Ahead,
) -> Result<Vec<String>, Error> {
    let prefix = keys::dependents(dep);
    let edges = match ahead.get(&prefix) {
        Some(entries) => entries.clone(),
        None => scan_all(tx, Table::Indexes, &prefix)?,
    };
    let ids: Vec<String> = edges
        .into_iter()
        .map(|(k, _)| k[prefix.len()..].to_owned())
        .filter(|id| !skip.contains(id.as_str()))
        .collect();
    let wanted: Vec<(Table, &str)> = ids.iter().map(|d| (Table::Tasks, d.as_str())).collect();
    let mut rewritten = Vec::new();
    for value in read_many(tx, &wanted)?.into_iter().flatten() {
        let record = decode_task(&value)?;
        if record.terminal() {
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
            write(tx, groups, Some(&record), &mut updated, ready)?;
            rewritten.push(record.id);
        }
    }
    Ok(rewritten)
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

/// One page of the tasks of `group`, by id, never a token. Reads at most
/// `limit + 1` entries and the page's tasks.
pub fn list_group(
    tx: &mut impl Txn,
    group: &str,
    after: Option<&str>,
    limit: u32,
) -> Result<TaskPage, Error> {
    input::id("group", group)?;
    input::limit(limit)?;
    if let Some(after) = after {
        input::id("after", after)?;
    }
    let prefix = keys::group_tasks(group);
    let after = after.map(|a| format!("{prefix}{a}"));
    let ids: Vec<String> = tx
        .scan(Table::Indexes, &prefix, after.as_deref(), limit + 1)?
        .into_iter()
        .map(|(k, _)| k[prefix.len()..].to_owned())
        .collect();
    let wanted: Vec<(Table, &str)> = ids.iter().map(|i| (Table::Tasks, i.as_str())).collect();
    let mut items: Vec<Task> = Vec::with_capacity(ids.len());
    for value in read_many(tx, &wanted)?.iter().flatten() {
        let record = decode_task(value)?;
        // A binding whose range reads are snapshots (PostgreSQL) can see a
        // task re-seeded into another group between the entry and the record.
        if record.group.as_deref() == Some(group) {
            items.push(record.task(None));
        }
    }
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

/// Claim: `not-found`, `terminal`, `deps-pending`, `not-due`, `taken`,
/// `group-full`, `terminal` (attempts used up), else a grant with a fresh
/// token and the next fence. An expired claim is taken over.
pub fn claim(tx: &mut impl Txn, id: &str, agent: &str, ttl: u64) -> Result<Task, Error> {
    input::id("agent", agent)?;
    input::ttl(ttl)?;
    let record = load_task(tx, id)?;
    if record.terminal() {
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
    let mut groups = Groups::new(now);
    if record.not_before.is_some_and(|at| now < at) {
        return Err(Error::NotDue);
    }
    if record.live_claim(now) {
        return Err(Error::Taken);
    }
    if let Some(g) = &record.group
        && !groups.load(tx, g)?.free(now)
    {
        return Err(Error::GroupFull);
    }
    if record.exhausted() {
        return Err(Error::Terminal);
    }
    let (token, token_sha256) = mint(tx)?;
    let task = grant(tx, &mut groups, record, agent, ttl, token, token_sha256)?;
    groups.flush(tx)?;
    Ok(task)
}

/// The grant itself, on a task the caller has judged claimable.
fn grant(
    tx: &mut impl Txn,
    groups: &mut Groups,
    record: Record,
    agent: &str,
    ttl: u64,
    token: String,
    token_sha256: String,
) -> Result<Task, Error> {
    let mut claimed = record.clone();
    claimed.state = TaskState::Claimed;
    claimed.owner = Some(agent.to_owned());
    claimed.token_sha256 = Some(token_sha256);
    claimed.until = Some(groups.now.saturating_add(ttl));
    claimed.fence += 1;
    claimed.attempts = claimed.attempts.saturating_add(1);
    claimed.completed_by_sha256 = None;
    claimed.failed_by_sha256 = None;
    write(tx, groups, Some(&record), &mut claimed, true)?;
    Ok(claimed.task(Some(token)))
}

/// Turn a task dead (its attempts used up, or `fail` on its last attempt):
/// lease cleared, out of the claim order, retained from `now`.
fn turn_dead(
    tx: &mut impl Txn,
    groups: &mut Groups,
    record: &Record,
    reason: &str,
    failed_by: Option<String>,
) -> Result<Record, Error> {
    let mut dead = record.clone();
    dead.state = TaskState::Dead;
    dead.owner = None;
    dead.token_sha256 = None;
    dead.until = None;
    dead.last_error = Some(reason.to_owned());
    dead.failed_by_sha256 = failed_by;
    dead.dead_at = Some(groups.now);
    write(tx, groups, Some(record), &mut dead, false)?;
    // Dead tasks it held back from pruning may go now (done ones are held
    // again: a dead task still needs its dependencies).
    held::release_held(tx, &record.id)?;
    Ok(dead)
}

/// `claim-batch` with limit 1.
pub fn claim_next(tx: &mut impl Txn, agent: &str, ttl: u64) -> Result<Option<Task>, Error> {
    Ok(claim_batch(tx, agent, ttl, 1)?.pop())
}

/// Claim up to `limit` ready tasks in claim order (SPEC 10). First the
/// claims that expired and the delays that came due since the last call
/// move back into the claim order (each once: the work is bounded by what
/// expired or came due, never by the live claims or the waiting delays);
/// then the claim queues are walked, higher priority first. Each candidate
/// is judged on its freshly read record (a range read may be older than a
/// concurrent claimer's grant, which only moves the walk on).
pub fn claim_batch(
    tx: &mut impl Txn,
    agent: &str,
    ttl: u64,
    limit: u32,
) -> Result<Vec<Task>, Error> {
    input::id("agent", agent)?;
    input::ttl(ttl)?;
    input::limit(limit)?;
    let page = (limit + 8).min(input::MAX_PAGE);
    // One crossing: the expired claims, the due delays and the head of
    // every claim queue, with the clock. Walks do not wait for each other:
    // each reads its candidates with probes that pass over the tasks an
    // overlapping call holds (SPEC 10's skip-locked claiming).
    let (_, mut first) = tx.read(
        &[],
        &[
            Scan {
                table: Table::Indexes,
                prefix: keys::CLAIMED,
                after: None,
                limit: REQUEUE_PAGE,
            },
            Scan {
                table: Table::Indexes,
                prefix: keys::DELAYED,
                after: None,
                limit: REQUEUE_PAGE,
            },
            Scan {
                table: Table::Indexes,
                prefix: keys::HIGHER,
                after: None,
                limit: page,
            },
            Scan {
                table: Table::Indexes,
                prefix: keys::QUEUE,
                after: None,
                limit: page,
            },
            Scan {
                table: Table::Indexes,
                prefix: keys::LOWER,
                after: None,
                limit: page,
            },
        ],
    )?;
    let now = tx.now()?;
    let mut groups = Groups::new(now);
    let mut queues: Vec<Vec<(String, String)>> = first.split_off(2);
    let due = first.pop().unwrap_or_default();
    let expired = first.pop().unwrap_or_default();
    let moved = requeue(tx, &mut groups, keys::CLAIMED, expired)?
        | requeue(tx, &mut groups, keys::DELAYED, due)?;
    if moved {
        // Heads of groups that got a task back, then fresh pages.
        groups.flush(tx)?;
        queues.clear();
    }

    let mut minter: Option<Minter> = None;
    // Each grant with its place in the claim order.
    let mut granted: Vec<((std::cmp::Reverse<i32>, u64), Task)> = Vec::new();
    // Walks begun again from the first queue because a group's head had
    // moved under an overlapping call (bounded: past it, such a head is
    // passed over, as a task that call holds).
    let mut rewalks = 0;
    let mut qi = 0;
    'queues: while let Some(prefix) = keys::QUEUES.get(qi) {
        let mut pending: Option<Vec<(String, String)>> = queues.get_mut(qi).map(std::mem::take);
        let mut after: Option<String> = None;
        qi += 1;
        loop {
            let entries = match pending.take() {
                Some(entries) => entries,
                None => tx.scan(Table::Indexes, prefix, after.as_deref(), page)?,
            };
            let full = entries.len() >= page as usize;
            let candidates: Vec<(String, QueueEntry)> = entries
                .iter()
                .map(|(k, v)| Ok((k.clone(), decode(Table::Indexes, v)?)))
                .collect::<Result<Vec<(String, QueueEntry)>, Error>>()?
                .into_iter()
                .filter(|(_, e)| e.claimable(now))
                .collect();
            // Probe the candidates' records only as many at a time as the
            // call still needs: a record read by key is locked (or
            // conflict-checked) by the store, and a claimer must not hold
            // tasks it will not take. A record an overlapping call holds is
            // passed over, not waited for (SPEC 10): that call is taking it,
            // putting it back, or rolling back.
            let mut at = 0;
            while at < candidates.len() {
                let need = limit as usize - granted.len();
                // A grouped candidate ends its chunk: granting it (or
                // finding it moved) walks again from the first queue, and
                // the candidates probed after it would stay held, untaken.
                let end = candidates[at..]
                    .iter()
                    .take(need)
                    .position(|(_, e)| e.group.is_some())
                    .map_or(need, |i| i + 1);
                let chunk = &candidates[at..candidates.len().min(at + end)];
                at += chunk.len();
                let wanted: Vec<(Table, &str)> = chunk
                    .iter()
                    .map(|(_, e)| (Table::Tasks, e.id.as_str()))
                    .collect();
                let records = tx.try_get_many(&wanted)?;
                for ((key, entry), value) in chunk.iter().zip(records) {
                    after = Some(key.clone());
                    let Some(value) = value else {
                        continue; // held by an overlapping call: passed over
                    };
                    let Some(record) = value.as_deref().map(decode_task).transpose()? else {
                        continue;
                    };
                    let stale = !stands_at(tx, &mut groups, &record, key, entry)?
                        || record.terminal()
                        || record.live_claim(now);
                    if stale {
                        if entry.group.is_some() && rewalks < MAX_REWALKS {
                            // A group's head that an overlapping call moved
                            // (its records, read by key, waited for that
                            // call): the group's first task stands
                            // elsewhere now, maybe in a queue already
                            // walked. Walk again from the first queue, with
                            // fresh reads, so it is not passed over.
                            rewalks += 1;
                            queues.clear();
                            qi = 0;
                            // That call may also have left claims that
                            // have expired by now, or delays now due.
                            let expired =
                                tx.scan(Table::Indexes, keys::CLAIMED, None, REQUEUE_PAGE)?;
                            let due = tx.scan(Table::Indexes, keys::DELAYED, None, REQUEUE_PAGE)?;
                            if requeue(tx, &mut groups, keys::CLAIMED, expired)?
                                | requeue(tx, &mut groups, keys::DELAYED, due)?
                            {
                                groups.flush(tx)?;
                            }
                            continue 'queues;
                        }
                        continue;
                    }
                    let group = record.group.clone();
                    let group_full = match &entry.group {
                        Some(g) => !groups.load(tx, g)?.free(now),
                        None => false,
                    };
                    if record.not_before.is_some_and(|at| now < at) {
                        // Not due (a format-1 place or a stale one): to the
                        // delayed queue, where it waits without being read.
                        let mut moved = record.clone();
                        write(tx, &mut groups, Some(&record), &mut moved, true)?;
                    } else if record.exhausted() {
                        turn_dead(tx, &mut groups, &record, ATTEMPTS_EXHAUSTED, None)?;
                    } else if group_full {
                        // A full group (a limit lowered, or claims this
                        // call granted): its head leaves the queues when
                        // the call ends.
                        if let Some(g) = &entry.group {
                            groups.touch(g);
                        }
                        continue;
                    } else {
                        let minter = match &mut minter {
                            Some(m) => m,
                            None => minter.insert(Minter::new(tx)?),
                        };
                        let (token, token_sha256) = minter.mint();
                        let place = (std::cmp::Reverse(record.priority), record.seq);
                        let task = grant(tx, &mut groups, record, agent, ttl, token, token_sha256)?;
                        granted.push((place, task));
                        if granted.len() == limit as usize {
                            break 'queues;
                        }
                    }
                    if let Some(g) = group {
                        // The group's next task may stand in the queues
                        // now, and overlapping calls may have moved other
                        // groups' heads: walk again from the first queue,
                        // afresh (what this call took has left the queues,
                        // so little is read twice).
                        groups.refresh(tx, &g)?;
                        queues.clear();
                        qi = 0;
                        continue 'queues;
                    }
                }
            }
            if !full {
                break;
            }
        }
    }
    groups.flush(tx)?;
    // Answered in claim order. A walk can meet a task late: a group's slot
    // freed, or a task put back, by a call that committed while this one
    // walked (a store whose range reads see such commits: PostgreSQL under
    // READ COMMITTED). The call is then serialized after that commit, where
    // the late task stands before the ones granted earlier.
    granted.sort_by_key(|(place, _)| *place);
    Ok(granted.into_iter().map(|(_, task)| task).collect())
}

/// How many times one call walks the claim queues again (see
/// [`claim_batch`]).
const MAX_REWALKS: u32 = 8;

/// How many expired claims or due delays one read takes back at a time.
const REQUEUE_PAGE: u32 = 16;

/// Is the claim-queue entry `key` the task's current place (a range read is
/// a snapshot; a group's head must be the head its group records)?
fn stands_at(
    tx: &mut impl Txn,
    groups: &mut Groups,
    record: &Record,
    key: &str,
    entry: &QueueEntry,
) -> Result<bool, Error> {
    if !record.queued {
        return Ok(false);
    }
    match (&entry.group, &record.entry) {
        (Some(g), Some(own)) => Ok(record.group.as_ref() == Some(g)
            && *own == keys::group_ready(g, record.priority, record.seq)
            && key == keys::head(g, record.priority, record.seq)
            && groups.load(tx, g)?.head.as_deref() == Some(key)),
        (Some(_), None) => Ok(false),
        (None, Some(own)) => Ok(own == key),
        // Format 1: its claim-queue place.
        (None, None) => Ok(key == keys::queue(record.seq)),
    }
}

/// Move the expired claims (`qc/`) or due delays (`qd/`) at the start of
/// `first` (and of the pages after it) back into the claim order, each
/// checked against its task: a range read may be older than a concurrent
/// change. A task an overlapping call holds is passed over. Answers whether
/// anything moved.
fn requeue(
    tx: &mut impl Txn,
    groups: &mut Groups,
    prefix: &str,
    first: Vec<(String, String)>,
) -> Result<bool, Error> {
    let now = groups.now;
    let mut page = first;
    let mut moved = false;
    loop {
        let mut ripe: Vec<(String, QueueEntry)> = Vec::new();
        for (key, value) in &page {
            let at = if prefix == keys::CLAIMED {
                keys::parse_claimed(key)
            } else {
                keys::parse_delayed(key)
            };
            match at {
                Some(at) if at <= now => ripe.push((key.clone(), decode(Table::Indexes, value)?)),
                Some(_) => break,
                None => return Err(Error::storage(format!("corrupt queue entry {key:?}"))),
            }
        }
        let ended = ripe.len() < page.len() || page.len() < REQUEUE_PAGE as usize;
        let after = ripe.last().map(|(k, _)| k.clone());
        let wanted: Vec<(Table, &str)> = ripe
            .iter()
            .map(|(_, e)| (Table::Tasks, e.id.as_str()))
            .collect();
        // Probed, not waited for: a task an overlapping call holds is being
        // finished, failed, released or put back by it, and is passed over
        // (SPEC 10). Waiting here, holding the group records the walk has
        // read, is what let two calls wait for each other on PostgreSQL (a
        // deadlock, detected after a second and the call re-run).
        for ((key, _), value) in ripe.iter().zip(tx.try_get_many(&wanted)?) {
            let Some(value) = value else {
                continue; // held by an overlapping call: passed over
            };
            let Some(record) = value.as_deref().map(decode_task).transpose()? else {
                continue;
            };
            let current = record.queued
                && match &record.entry {
                    Some(own) => own == key,
                    // Format 1 kept a claimed task's entry in `qc/` too.
                    None => *key == keys::claimed(record.until.unwrap_or(0), record.seq),
                };
            if !current {
                // Moved by a call that held it while this one waited (a
                // concurrent walk put it back, or claimed it): the pages
                // read before are older than that call's commit. Read the
                // claim order afresh, so what it put back is not passed
                // over.
                moved = true;
                continue;
            }
            // Its place in the claim order; a claim stays as it is
            // (expired: claimable, and still counted nowhere).
            let at = match &record.group {
                Some(g) => keys::group_ready(g, record.priority, record.seq),
                None => keys::ready(record.priority, record.seq),
            };
            let mut back = record.clone();
            place(tx, groups, Some(&record), &mut back, Some(at))?;
            if let Some(g) = &record.group {
                groups.touch(g);
            }
            moved = true;
        }
        if ended {
            return Ok(moved);
        }
        page = tx.scan(Table::Indexes, prefix, after.as_deref(), REQUEUE_PAGE)?;
    }
}

/// Is `token` the task's current claim token?
fn holds(record: &Record, token_sha256: &str) -> bool {
    record.state == TaskState::Claimed && record.token_sha256.as_deref() == Some(token_sha256)
}

/// Return the task to open and give its attempt back. Identity only: a late
/// loser's token never matches, so it can never release the winner's claim.
pub fn release(tx: &mut impl Txn, id: &str, token: &str) -> Result<(), Error> {
    let record = load_task(tx, id)?;
    if !holds(&record, &digest(token)) {
        return Err(Error::LeaseLost);
    }
    let mut groups = Groups::new(tx.now()?);
    let mut open = record.clone();
    open.state = TaskState::Open;
    open.owner = None;
    open.token_sha256 = None;
    open.until = None;
    open.attempts = open.attempts.saturating_sub(1);
    let ready = record.queued;
    write(tx, &mut groups, Some(&record), &mut open, ready)?;
    groups.flush(tx)
}

/// Mark the task done; idempotent for the token that completed it. Tasks
/// waiting on it join the claim queue in the same transaction.
pub fn complete(tx: &mut impl Txn, id: &str, token: &str) -> Result<(), Error> {
    let record = load_task(tx, id)?;
    let mut groups = Groups::new(tx.now()?);
    finish(tx, &mut groups, record, &digest(token), &Ahead::new())?;
    groups.flush(tx)
}

/// `complete` on a task already read. Answers the ids of tasks it rewrote
/// besides this one (dependents that became ready).
fn finish(
    tx: &mut impl Txn,
    groups: &mut Groups,
    record: Record,
    token_sha256: &str,
    ahead: &Ahead,
) -> Result<Vec<String>, Error> {
    if record.state == TaskState::Done
        && record.completed_by_sha256.as_deref() == Some(token_sha256)
    {
        return Ok(Vec::new());
    }
    if !holds(&record, token_sha256) {
        return Err(Error::LeaseLost);
    }
    let mut done = record.clone();
    done.state = TaskState::Done;
    done.token_sha256 = None;
    done.until = None;
    done.completed_by_sha256 = Some(token_sha256.to_owned());
    done.done_at = Some(groups.now);
    write(tx, groups, Some(&record), &mut done, false)?;
    let mut known = HashMap::from([(record.id.clone(), true)]);
    let rewritten = recheck_dependents(tx, groups, &record.id, &HashSet::new(), &mut known, ahead)?;
    held::release_held_ahead(tx, &record.id, ahead)?;
    Ok(rewritten)
}

/// Complete many claims in one transaction; each item answers what
/// `complete` would have answered for it alone, in order.
pub fn complete_batch(
    tx: &mut impl Txn,
    items: &[Completion],
) -> Result<Vec<CompletionResult>, Error> {
    if items.is_empty() || items.len() > input::MAX_PAGE as usize {
        return Err(Error::InvalidInput("items must be 1 to 1000".into()));
    }
    let mut ids = HashSet::new();
    for item in items {
        input::id("task id", &item.id)?;
        input::id("token", &item.token)?;
        if !ids.insert(item.id.as_str()) {
            return Err(Error::InvalidInput(format!(
                "duplicate task id {:?}",
                item.id
            )));
        }
    }
    let wanted: Vec<(Table, &str)> = items
        .iter()
        .map(|i| (Table::Tasks, i.id.as_str()))
        .collect();
    let found = read_many(tx, &wanted)?
        .iter()
        .map(|v| v.as_deref().map(decode_task).transpose())
        .collect::<Result<Vec<_>, _>>()?;
    // Each token's digest, once: a SHA-256 per item.
    let digests: Vec<String> = items.iter().map(|i| digest(&i.token)).collect();
    // The items that will complete: their dependents and held entries in
    // one crossing, not two per item.
    let mut prefixes = Vec::new();
    for ((item, record), sha) in items.iter().zip(&found).zip(&digests) {
        if record.as_ref().is_some_and(|r| holds(r, sha)) {
            prefixes.push(keys::dependents(&item.id));
            prefixes.push(keys::held_by(&item.id));
        }
    }
    let ahead = read_ahead(tx, &prefixes)?;
    let mut groups = Groups::new(tx.now()?);
    let mut stale: HashSet<String> = HashSet::new();
    let mut answers = Vec::with_capacity(items.len());
    for ((item, record), sha) in items.iter().zip(found).zip(&digests) {
        // An earlier item may have rewritten this task (a dependent that
        // became ready): read it again.
        let record = if stale.contains(&item.id) {
            tx.get(Table::Tasks, &item.id)?
                .as_deref()
                .map(decode_task)
                .transpose()?
        } else {
            record
        };
        let answer = match record {
            None => CompletionAnswer::NotFound,
            Some(record) => match finish(tx, &mut groups, record, sha, &ahead) {
                Ok(rewritten) => {
                    stale.extend(rewritten);
                    CompletionAnswer::Completed
                }
                Err(Error::LeaseLost) => CompletionAnswer::LeaseLost,
                Err(other) => return Err(other),
            },
        };
        answers.push(CompletionResult {
            id: item.id.clone(),
            answer,
        });
    }
    groups.flush(tx)?;
    Ok(answers)
}

/// The handler failed (SPEC 10): `last-error`, lease cleared, fence kept;
/// dead when its attempts are used up, else failed and due again after
/// `retry_after`.
pub fn fail(
    tx: &mut impl Txn,
    id: &str,
    token: &str,
    reason: &str,
    retry_after: Option<u64>,
) -> Result<Task, Error> {
    input::reason(reason)?;
    if retry_after.is_some_and(|ms| ms > input::MAX_TTL) {
        return Err(Error::InvalidInput(
            "retry-after must be 0 ms to 1 year".into(),
        ));
    }
    let record = load_task(tx, id)?;
    let token_sha256 = digest(token);
    if matches!(record.state, TaskState::Failed | TaskState::Dead)
        && record.failed_by_sha256.as_deref() == Some(token_sha256.as_str())
    {
        return Ok(record.task(None));
    }
    if !holds(&record, &token_sha256) {
        return Err(Error::LeaseLost);
    }
    let mut groups = Groups::new(tx.now()?);
    let task = if record.exhausted() {
        turn_dead(tx, &mut groups, &record, reason, Some(token_sha256))?.task(None)
    } else {
        let mut failed = record.clone();
        failed.state = TaskState::Failed;
        failed.owner = None;
        failed.token_sha256 = None;
        failed.until = None;
        failed.last_error = Some(reason.to_owned());
        failed.failed_by_sha256 = Some(token_sha256);
        failed.not_before =
            retry_after.map(|ms| groups.now.saturating_add(ms).min(input::MAX_NUMBER));
        write(tx, &mut groups, Some(&record), &mut failed, record.queued)?;
        failed.task(None)
    };
    groups.flush(tx)?;
    Ok(task)
}

/// Bring a dead task back: open, attempts 0, `last-error` and `not-before`
/// cleared, fence and every other field kept.
pub fn revive(tx: &mut impl Txn, id: &str) -> Result<Task, Error> {
    let record = load_task(tx, id)?;
    if record.state != TaskState::Dead {
        return Err(Error::NotDead);
    }
    let mut done = HashMap::new();
    note_done(tx, &record.deps, &mut done)?;
    let mut groups = Groups::new(tx.now()?);
    let mut open = record.clone();
    open.state = TaskState::Open;
    open.attempts = 0;
    open.last_error = None;
    open.not_before = None;
    open.dead_at = None;
    open.failed_by_sha256 = None;
    let ready = record.deps.iter().all(|d| done[d]);
    write(tx, &mut groups, Some(&record), &mut open, ready)?;
    groups.flush(tx)?;
    Ok(open.task(None))
}

/// Renew: current token and a live lease, else `lease-lost`.
pub fn renew(tx: &mut impl Txn, id: &str, token: &str, ttl: u64) -> Result<Task, Error> {
    input::ttl(ttl)?;
    let record = load_task(tx, id)?;
    let now = tx.now()?;
    if !holds(&record, &digest(token)) || !record.live_claim(now) {
        return Err(Error::LeaseLost);
    }
    let mut groups = Groups::new(now);
    let mut renewed = record.clone();
    renewed.until = Some(now.saturating_add(ttl));
    let ready = record.queued;
    write(tx, &mut groups, Some(&record), &mut renewed, ready)?;
    groups.flush(tx)?;
    Ok(renewed.task(Some(token.to_owned())))
}

/// Set or remove a group's limit. Lowering it revokes no claim; raising or
/// removing it lets the group's head back into the claim order.
pub fn set_group_limit(tx: &mut impl Txn, group: &str, limit: Option<u32>) -> Result<(), Error> {
    input::id("group", group)?;
    if limit.is_some_and(|l| l == 0 || l > MAX_GROUP_LIMIT) {
        return Err(Error::InvalidInput("limit must be 1 to 100000".into()));
    }
    let mut groups = Groups::new(tx.now()?);
    groups.load(tx, group)?.limit = limit;
    groups.touch(group);
    groups.flush(tx)
}

/// A group's limit and exact live claims; `not-found` without a limit.
pub fn get_group(tx: &mut impl Txn, group: &str) -> Result<GroupInfo, Error> {
    input::id("group", group)?;
    let now = tx.now()?;
    let mut groups = Groups::new(now);
    let record = groups.load(tx, group)?;
    match record.limit {
        Some(limit) => Ok(GroupInfo {
            limit,
            live: record.live(now),
        }),
        None => Err(Error::NotFound),
    }
}

/// One page of the groups that have a record (a limit, a claim, a ready
/// task or any task), by name, each with its limit, exact live claims and
/// tasks by state.
/// Reads at most `limit + 1` records.
pub fn list_groups(tx: &mut impl Txn, after: Option<&str>, limit: u32) -> Result<GroupPage, Error> {
    input::limit(limit)?;
    if let Some(after) = after {
        input::id("after", after)?;
    }
    let after = after.map(keys::group);
    let page = tx.scan(Table::Meta, keys::GROUPS, after.as_deref(), limit + 1)?;
    let now = tx.now()?;
    let mut items = Vec::with_capacity(page.len().min(limit as usize));
    for (key, value) in page.iter().take(limit as usize) {
        let record: GroupRecord = decode(Table::Meta, value)?;
        let [open, claimed, done, failed, dead] = record.tasks.totals()?;
        items.push(GroupEntry {
            name: key[keys::GROUPS.len()..].to_owned(),
            limit: record.limit,
            live: record.live(now),
            open,
            claimed,
            done,
            failed,
            dead,
        });
    }
    let next = (page.len() > limit as usize)
        .then(|| items.last().map(|g| g.name.clone()))
        .flatten();
    Ok(GroupPage { items, next })
}

/// One page of the tasks waiting for their `not-before`, by due time then
/// seed order, after the cursor `after` (a previous page's `next`). An
/// entry a concurrent change moved since the range read (a snapshot on
/// PostgreSQL) is left out. Reads at most `limit + 1` entries and `limit`
/// tasks.
pub fn list_delayed(tx: &mut impl Txn, after: Option<&str>, limit: u32) -> Result<TaskPage, Error> {
    input::limit(limit)?;
    let after = match after {
        Some(cursor) => Some(keys::delayed_cursor(cursor).ok_or_else(|| {
            Error::InvalidInput(format!("after: not a list-delayed cursor: {cursor:?}"))
        })?),
        None => None,
    };
    let mut page = tx.scan(Table::Indexes, keys::DELAYED, after.as_deref(), limit + 1)?;
    let more = page.len() > limit as usize;
    page.truncate(limit as usize);
    let entries: Vec<QueueEntry> = page
        .iter()
        .map(|(_, v)| decode(Table::Indexes, v))
        .collect::<Result<_, _>>()?;
    let wanted: Vec<(Table, &str)> = entries
        .iter()
        .map(|e| (Table::Tasks, e.id.as_str()))
        .collect();
    let mut items = Vec::with_capacity(page.len());
    for ((key, _), value) in page.iter().zip(read_many(tx, &wanted)?) {
        let Some(record) = value.as_deref().map(decode_task).transpose()? else {
            continue;
        };
        if record.queued && record.entry.as_deref() == Some(key.as_str()) {
            items.push(record.task(None));
        }
    }
    let next = more
        .then(|| {
            page.last()
                .map(|(k, _)| k[keys::DELAYED.len()..].to_owned())
        })
        .flatten();
    Ok(TaskPage { items, next })
}

#[cfg(test)]
mod tests;
