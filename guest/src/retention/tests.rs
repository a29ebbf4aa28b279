use super::*;
use crate::testing::MemTxn;
use crate::{Acquired, Action, Outcome, Snapshot, Status, TaskSeed, checkpoint, commitgate};
use crate::{sideeffect, taskboard};

fn complete_key(tx: &mut MemTxn, key: &str) {
    let action = Action::new(key, &format!("r-{key}"));
    let Acquired::Granted(lease) = sideeffect::acquire(tx, &action, 10).unwrap() else {
        panic!("fresh key")
    };
    sideeffect::complete(tx, &action, &lease, b"r").unwrap();
}

fn finish_task(tx: &mut MemTxn, id: &str) -> u64 {
    let t = taskboard::claim(tx, id, "w", 10).unwrap();
    taskboard::complete(tx, id, t.token.as_deref().unwrap()).unwrap();
    t.fence
}

fn run(tx: &mut MemTxn, run_id: &str) {
    let snap = Snapshot {
        run_id: run_id.into(),
        seq: 1,
        fence: None,
        status: "x".into(),
        done: vec![],
        fields: vec![],
    };
    checkpoint::save_if_newer(tx, &snap).unwrap();
    let ok = Outcome {
        status: Status::Succeeded,
        result: vec![],
    };
    commitgate::commit(tx, run_id, Some("s1"), 0, &ok).unwrap();
    commitgate::commit(tx, run_id, None, 0, &ok).unwrap();
}

#[test]
fn prunes_oldest_first_in_bounded_batches() {
    let mut tx = MemTxn {
        clock: 100,
        ..MemTxn::default()
    };
    complete_key(&mut tx, "k1");
    tx.clock = 200;
    run(&mut tx, "run1");
    tx.clock = 300;
    complete_key(&mut tx, "k2");
    assert_eq!(
        prune(&mut tx, 300, 1).unwrap(),
        Pruned {
            removed_keys: 1,
            more: true,
            ..Pruned::default()
        }
    );
    assert_eq!(sideeffect::get(&mut tx, "k1"), Err(Error::NotFound));
    assert_eq!(
        prune(&mut tx, 300, 10).unwrap(),
        Pruned {
            removed_runs: 1,
            ..Pruned::default()
        }
    );
    assert_eq!(
        checkpoint::load_snapshot(&mut tx, "run1"),
        Err(Error::NotFound)
    );
    assert_eq!(
        commitgate::read(&mut tx, "run1", Some("s1")),
        Err(Error::NotFound)
    );
    // k2 finished at 300: not before 300
    assert!(sideeffect::get(&mut tx, "k2").is_ok());
    // resources keep their fences: a retry of k1 runs again, above the old fence
    let Acquired::Granted(lease) =
        sideeffect::acquire(&mut tx, &Action::new("k1", "r-k1"), 10).unwrap()
    else {
        panic!("a pruned key runs as new")
    };
    assert_eq!(lease.fence, 2);
}

#[test]
fn never_prunes_unfinished_or_needed_records() {
    let mut tx = MemTxn::default();
    let uncertain = Action::new("u", "ru");
    let Acquired::Granted(lease) = sideeffect::acquire(&mut tx, &uncertain, 10).unwrap() else {
        panic!()
    };
    sideeffect::mark_uncertain(&mut tx, &uncertain, &lease, "lost").unwrap();
    sideeffect::acquire(&mut tx, &Action::new("f", "rf"), 10).unwrap();
    taskboard::seed(
        &mut tx,
        &[
            TaskSeed::new("dep"),
            TaskSeed::new("child").deps(&["dep"]),
            TaskSeed::new("alone"),
        ],
    )
    .unwrap();
    finish_task(&mut tx, "dep");
    let fence = finish_task(&mut tx, "alone");
    let ok = Outcome {
        status: Status::Succeeded,
        result: vec![],
    };
    commitgate::commit(&mut tx, "r", Some("s"), 0, &ok).unwrap();
    tx.clock = 1_000;
    let pruned = prune(&mut tx, 1_000, 1000).unwrap();
    assert_eq!(
        pruned,
        Pruned {
            removed_tasks: 1,
            ..Pruned::default()
        }
    );
    assert!(taskboard::get(&mut tx, "dep").is_ok());
    assert!(commitgate::read(&mut tx, "r", Some("s")).is_ok());
    // a task seeded again after pruning starts above the floor
    taskboard::seed(&mut tx, &[TaskSeed::new("alone")]).unwrap();
    let again = taskboard::claim(&mut tx, "alone", "w", 10).unwrap();
    assert!(again.fence > fence, "{} <= {fence}", again.fence);
    // once child is done, dep may go
    finish_task(&mut tx, "child");
    tx.clock = 2_000;
    let pruned = prune(&mut tx, 2_000, 1000).unwrap();
    assert_eq!(pruned.removed_tasks, 2);
    assert_eq!(taskboard::get(&mut tx, "dep"), Err(Error::NotFound));
    assert_eq!(prune(&mut tx, 2_000, 1000).unwrap(), Pruned::default());
}

#[test]
fn bad_arguments_are_invalid_input() {
    let mut tx = MemTxn::default();
    assert!(matches!(prune(&mut tx, 1, 0), Err(Error::InvalidInput(_))));
    assert!(matches!(
        prune(&mut tx, 1, 1001),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        prune(&mut tx, 1 << 53, 1),
        Err(Error::InvalidInput(_))
    ));
}

/// Counts the rows a call reads (entries `get`, `get-many` and `scan`
/// return), over a [`MemTxn`].
struct Counting<'a> {
    inner: &'a mut MemTxn,
    rows: u64,
}

impl crate::Txn for Counting<'_> {
    fn get(&mut self, table: Table, key: &str) -> Result<Option<String>, crate::StoreFault> {
        let found = self.inner.get(table, key)?;
        self.rows += u64::from(found.is_some());
        Ok(found)
    }
    fn put(&mut self, table: Table, key: &str, value: &str) -> Result<(), crate::StoreFault> {
        self.inner.put(table, key, value)
    }
    fn delete(&mut self, table: Table, key: &str) -> Result<(), crate::StoreFault> {
        self.inner.delete(table, key)
    }
    fn scan(
        &mut self,
        table: Table,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, String)>, crate::StoreFault> {
        let page = self.inner.scan(table, prefix, after, limit)?;
        self.rows += page.len() as u64;
        Ok(page)
    }
    fn now(&mut self) -> Result<u64, crate::StoreFault> {
        self.inner.now()
    }
    fn random128(&mut self) -> Result<u128, crate::StoreFault> {
        self.inner.random128()
    }
}

fn rows_read<T>(tx: &mut MemTxn, f: impl FnOnce(&mut Counting<'_>) -> T) -> (T, u64) {
    let mut counting = Counting { inner: tx, rows: 0 };
    let out = f(&mut counting);
    (out, counting.rows)
}

fn index_keys(tx: &MemTxn, prefix: &str) -> Vec<String> {
    tx.data
        .keys()
        .filter(|(t, k)| *t == Table::Indexes && k.starts_with(prefix))
        .map(|(_, k)| k.clone())
        .collect()
}

/// 300 done tasks needed by one open task, then a completed key: each call
/// reads a bounded number of rows; the needed tasks are read once, moved
/// aside, and come back when their dependent finishes.
#[test]
fn needed_tasks_are_read_once_then_held_until_their_dependent_finishes() {
    let mut tx = MemTxn::default();
    let deps: Vec<String> = (0..300).map(|i| format!("d{i:03}")).collect();
    let mut seeds: Vec<TaskSeed> = deps.iter().map(|d| TaskSeed::new(d)).collect();
    let dep_refs: Vec<&str> = deps.iter().map(String::as_str).collect();
    seeds.push(TaskSeed::new("child").deps(&dep_refs));
    taskboard::seed(&mut tx, &seeds).unwrap();
    for d in &deps {
        finish_task(&mut tx, d);
    }
    tx.clock = 10;
    complete_key(&mut tx, "late-key");
    tx.clock = 100;

    let mut calls = 0;
    let mut removed_key = false;
    loop {
        calls += 1;
        let (pruned, rows) = rows_read(&mut tx, |c| prune(c, 100, 1).unwrap());
        // a page of the index and one more entry, then per examined entry
        // the entry, its task, its dependent's edge and its dependent:
        // never the 300 needed tasks at once
        assert!(rows <= 64 + 2 + 65 * 4, "call {calls} read {rows} rows");
        removed_key |= pruned.removed_keys == 1;
        assert_eq!(pruned.removed_tasks, 0);
        if !pruned.more {
            break;
        }
        assert!(calls < 10, "prune never finished");
    }
    assert!(removed_key, "the key behind the needed tasks was pruned");
    assert!(calls <= 6, "{calls} calls");
    assert_eq!(index_keys(&tx, "rt/"), Vec::<String>::new());
    assert_eq!(index_keys(&tx, "rh/").len(), 300);
    // nothing is read again while the dependent is open
    let (pruned, rows) = rows_read(&mut tx, |c| prune(c, 100, 1).unwrap());
    assert_eq!(pruned, Pruned::default());
    assert!(rows <= 1, "{rows}");

    // the dependent finishes: every held task comes back and is removable
    tx.clock = 200;
    finish_task(&mut tx, "child");
    assert_eq!(index_keys(&tx, "rh/"), Vec::<String>::new());
    let mut removed = 0;
    loop {
        let pruned = prune(&mut tx, 1_000, 1000).unwrap();
        removed += pruned.removed_tasks;
        if !pruned.more {
            break;
        }
    }
    assert_eq!(removed, 301);
}

/// A held task that is re-seeded (not done any more) is dropped from the
/// held entries when its dependent finishes, not put back as done.
#[test]
fn a_held_task_reseeded_meanwhile_is_not_put_back() {
    let mut tx = MemTxn::default();
    taskboard::seed(
        &mut tx,
        &[TaskSeed::new("dep"), TaskSeed::new("child").deps(&["dep"])],
    )
    .unwrap();
    finish_task(&mut tx, "dep");
    tx.clock = 100;
    assert_eq!(prune(&mut tx, 100, 10).unwrap(), Pruned::default());
    assert_eq!(index_keys(&tx, "rh/").len(), 1);
    taskboard::seed(&mut tx, &[TaskSeed::new("dep")]).unwrap();
    finish_task(&mut tx, "dep");
    finish_task(&mut tx, "child");
    assert_eq!(index_keys(&tx, "rh/"), Vec::<String>::new());
    // dep's current entry (finished at 100) and child's: both removable once
    let pruned = prune(&mut tx, 1_000, 10).unwrap();
    assert_eq!(pruned.removed_tasks, 2);
    assert_eq!(index_keys(&tx, "rt/"), Vec::<String>::new());
}

/// Re-seeding the dependent without the dependency lets the held task go.
#[test]
fn reseeding_the_dependent_releases_what_it_held() {
    let mut tx = MemTxn::default();
    taskboard::seed(
        &mut tx,
        &[TaskSeed::new("dep"), TaskSeed::new("child").deps(&["dep"])],
    )
    .unwrap();
    finish_task(&mut tx, "dep");
    tx.clock = 100;
    assert_eq!(prune(&mut tx, 100, 10).unwrap(), Pruned::default());
    taskboard::seed(&mut tx, &[TaskSeed::new("child")]).unwrap();
    assert_eq!(prune(&mut tx, 100, 10).unwrap().removed_tasks, 1);
    assert_eq!(taskboard::get(&mut tx, "dep"), Err(Error::NotFound));
}
