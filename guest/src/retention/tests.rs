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
