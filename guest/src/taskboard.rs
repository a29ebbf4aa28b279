//! The taskboard: atomic claim with a store-minted token and takeover
//! generation; renew / release / complete by token (SPEC 6, 8 "Taskboard").
use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::txn::{decode, load, mint, store};
use crate::{Error, Table, Task, TaskSeed, TaskState, Txn, input};

/// A task's stored record.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Record {
    #[serde(flatten)]
    task: Task,
    /// The token that completed the task, for idempotent re-completion.
    completed_by: Option<String>,
}

/// Load topology; re-seeding overwrites content and clears the lease, but
/// keeps the highest fence so a pre-reseed holder can never be mistaken for
/// a newer one.
pub fn seed(tx: &mut impl Txn, tasks: &[TaskSeed]) -> Result<(), Error> {
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
    let keys: Vec<(Table, &str)> = tasks
        .iter()
        .map(|t| (Table::Tasks, t.id.as_str()))
        .collect();
    let existing = tx.get_many(&keys)?;
    for (t, old) in tasks.iter().zip(existing) {
        let fence = match old {
            Some(v) => decode::<Record>(Table::Tasks, &v)?.task.fence,
            None => 0,
        };
        let record = Record {
            task: Task {
                id: t.id.clone(),
                title: t.title.clone().unwrap_or_default(),
                deps: t.deps.clone(),
                state: t.state.unwrap_or(TaskState::Open),
                owner: None,
                token: None,
                until: None,
                fence,
            },
            completed_by: None,
        };
        store(tx, Table::Tasks, &t.id, &record)?;
    }
    Ok(())
}

/// One consistent snapshot ordered by id. Tokens are capabilities and never
/// leave through `list`.
pub fn list(tx: &mut impl Txn) -> Result<Vec<Task>, Error> {
    tx.scan(Table::Tasks)?
        .iter()
        .map(|(_, v)| {
            let mut task = decode::<Record>(Table::Tasks, v)?.task;
            task.token = None;
            Ok(task)
        })
        .collect()
}

fn get(tx: &mut impl Txn, id: &str) -> Result<Record, Error> {
    input::id("task id", id)?;
    load(tx, Table::Tasks, id)?.ok_or(Error::NotFound)
}

/// Claim: `not-found`, `terminal`, `deps-pending`, `taken`, else a grant with
/// a fresh token and the next fence. An expired claim is taken over.
pub fn claim(tx: &mut impl Txn, id: &str, agent: &str, ttl: u64) -> Result<Task, Error> {
    input::id("agent", agent)?;
    input::ttl(ttl)?;
    let mut record = get(tx, id)?;
    if record.task.state == TaskState::Done {
        return Err(Error::Terminal);
    }
    let deps: Vec<(Table, &str)> = record
        .task
        .deps
        .iter()
        .map(|d| (Table::Tasks, d.as_str()))
        .collect();
    for dep in tx.get_many(&deps)? {
        let done = match dep {
            Some(v) => decode::<Record>(Table::Tasks, &v)?.task.state == TaskState::Done,
            None => false,
        };
        if !done {
            return Err(Error::DepsPending);
        }
    }
    let now = tx.now();
    if record.task.state == TaskState::Claimed && record.task.until.is_some_and(|u| now < u) {
        return Err(Error::Taken);
    }
    let token = mint(tx);
    let task = &mut record.task;
    task.state = TaskState::Claimed;
    task.owner = Some(agent.to_owned());
    task.token = Some(token);
    task.until = Some(now.saturating_add(ttl));
    task.fence += 1;
    record.completed_by = None;
    store(tx, Table::Tasks, id, &record)?;
    Ok(record.task)
}

/// Is `token` the task's current claim token?
fn holds(record: &Record, token: &str) -> bool {
    record.task.state == TaskState::Claimed && record.task.token.as_deref() == Some(token)
}

/// Return the task to open. Identity only: a late loser's token never
/// matches, so it can never release the winner's claim.
pub fn release(tx: &mut impl Txn, id: &str, token: &str) -> Result<(), Error> {
    let mut record = get(tx, id)?;
    if !holds(&record, token) {
        return Err(Error::LeaseLost);
    }
    let task = &mut record.task;
    task.state = TaskState::Open;
    task.owner = None;
    task.token = None;
    task.until = None;
    store(tx, Table::Tasks, id, &record)
}

/// Mark the task done; idempotent for the token that completed it.
pub fn complete(tx: &mut impl Txn, id: &str, token: &str) -> Result<(), Error> {
    let mut record = get(tx, id)?;
    if record.task.state == TaskState::Done && record.completed_by.as_deref() == Some(token) {
        return Ok(());
    }
    if !holds(&record, token) {
        return Err(Error::LeaseLost);
    }
    record.task.state = TaskState::Done;
    record.task.token = None;
    record.task.until = None;
    record.completed_by = Some(token.to_owned());
    store(tx, Table::Tasks, id, &record)
}

/// Qualification check: current token and a live lease, else `lease-lost`.
pub fn renew(tx: &mut impl Txn, id: &str, token: &str, ttl: u64) -> Result<Task, Error> {
    input::ttl(ttl)?;
    let mut record = get(tx, id)?;
    let now = tx.now();
    if !holds(&record, token) || record.task.until.is_none_or(|u| now >= u) {
        return Err(Error::LeaseLost);
    }
    record.task.until = Some(now.saturating_add(ttl));
    store(tx, Table::Tasks, id, &record)?;
    Ok(record.task)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemTxn;

    #[test]
    fn claim_checks_in_order() {
        let mut tx = MemTxn::default();
        seed(
            &mut tx,
            &[TaskSeed::new("a"), TaskSeed::new("b").deps(&["a"])],
        )
        .unwrap();
        assert_eq!(claim(&mut tx, "zz", "w", 10), Err(Error::NotFound));
        assert_eq!(claim(&mut tx, "b", "w", 10), Err(Error::DepsPending));
        let t = claim(&mut tx, "a", "w1", 10).unwrap();
        assert_eq!(claim(&mut tx, "a", "w2", 10), Err(Error::Taken));
        complete(&mut tx, "a", t.token.as_deref().unwrap()).unwrap();
        assert_eq!(claim(&mut tx, "a", "w2", 10), Err(Error::Terminal));
        assert!(claim(&mut tx, "b", "w2", 10).is_ok());
    }

    #[test]
    fn expired_claim_is_taken_over_and_loser_is_lease_lost() {
        let mut tx = MemTxn::default();
        seed(&mut tx, &[TaskSeed::new("a")]).unwrap();
        let first = claim(&mut tx, "a", "w1", 10).unwrap();
        tx.clock = 9;
        assert_eq!(claim(&mut tx, "a", "w2", 10), Err(Error::Taken));
        tx.clock = 10;
        let second = claim(&mut tx, "a", "w2", 10).unwrap();
        assert_eq!(second.fence, 2);
        let late = first.token.unwrap();
        assert_eq!(release(&mut tx, "a", &late), Err(Error::LeaseLost));
        assert_eq!(complete(&mut tx, "a", &late), Err(Error::LeaseLost));
        let token = second.token.unwrap();
        complete(&mut tx, "a", &token).unwrap();
        complete(&mut tx, "a", &token).unwrap();
    }

    #[test]
    fn list_hides_tokens_and_reseed_keeps_fence() {
        let mut tx = MemTxn::default();
        seed(&mut tx, &[TaskSeed::new("b"), TaskSeed::new("a")]).unwrap();
        claim(&mut tx, "a", "w", 10).unwrap();
        let listed = list(&mut tx).unwrap();
        assert_eq!(listed[0].id, "a");
        assert_eq!(listed[0].token, None);
        seed(&mut tx, &[TaskSeed::new("a")]).unwrap();
        let a = &list(&mut tx).unwrap()[0];
        assert_eq!(
            (a.state, a.fence, a.owner.clone()),
            (TaskState::Open, 1, None)
        );
    }

    #[test]
    fn renew_requires_a_live_lease() {
        let mut tx = MemTxn::default();
        seed(&mut tx, &[TaskSeed::new("a")]).unwrap();
        let t = claim(&mut tx, "a", "w", 10).unwrap();
        let token = t.token.unwrap();
        tx.clock = 5;
        assert_eq!(renew(&mut tx, "a", &token, 10).unwrap().until, Some(15));
        tx.clock = 15;
        assert_eq!(renew(&mut tx, "a", &token, 10), Err(Error::LeaseLost));
    }
}
