use super::*;
use crate::testing::MemTxn;

fn page(tx: &mut MemTxn, state: Option<TaskState>) -> Vec<Task> {
    list(tx, state, None, 1000).unwrap().items
}

fn token(task: &Task) -> &str {
    task.token.as_deref().unwrap()
}

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
    complete(&mut tx, "a", token(&t)).unwrap();
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
    let late = token(&first);
    assert_eq!(release(&mut tx, "a", late), Err(Error::LeaseLost));
    assert_eq!(complete(&mut tx, "a", late), Err(Error::LeaseLost));
    complete(&mut tx, "a", token(&second)).unwrap();
    complete(&mut tx, "a", token(&second)).unwrap();
}

#[test]
fn list_hides_tokens_and_reseed_keeps_fence() {
    let mut tx = MemTxn::default();
    seed(&mut tx, &[TaskSeed::new("b"), TaskSeed::new("a")]).unwrap();
    claim(&mut tx, "a", "w", 10).unwrap();
    let listed = page(&mut tx, None);
    assert_eq!(listed[0].id, "a");
    assert_eq!(listed[0].token, None);
    seed(&mut tx, &[TaskSeed::new("a")]).unwrap();
    let a = &page(&mut tx, None)[0];
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
    tx.clock = 5;
    assert_eq!(renew(&mut tx, "a", token(&t), 10).unwrap().until, Some(15));
    tx.clock = 15;
    assert_eq!(renew(&mut tx, "a", token(&t), 10), Err(Error::LeaseLost));
}

#[test]
fn tokens_are_stored_only_as_digests() {
    let mut tx = MemTxn::default();
    seed(&mut tx, &[TaskSeed::new("a")]).unwrap();
    let t = claim(&mut tx, "a", "w", 10).unwrap();
    for value in tx.data.values() {
        assert!(!value.contains(token(&t)), "{value}");
    }
    complete(&mut tx, "a", token(&t)).unwrap();
    for value in tx.data.values() {
        assert!(!value.contains(token(&t)), "{value}");
    }
}

#[test]
fn pages_follow_the_cursor_and_filter_by_state() {
    let mut tx = MemTxn::default();
    let ids = ["e", "a", "d", "b", "c"];
    let seeds: Vec<_> = ids.iter().map(|i| TaskSeed::new(i)).collect();
    seed(&mut tx, &seeds).unwrap();
    claim(&mut tx, "b", "w", 10).unwrap();
    claim(&mut tx, "d", "w", 10).unwrap();
    let first = list(&mut tx, None, None, 2).unwrap();
    assert_eq!(
        first
            .items
            .iter()
            .map(|t| t.id.as_str())
            .collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(first.next.as_deref(), Some("b"));
    let second = list(&mut tx, None, first.next.as_deref(), 3).unwrap();
    assert_eq!(second.items.len(), 3);
    assert_eq!(second.next, None);
    let claimed = list(&mut tx, Some(TaskState::Claimed), None, 1).unwrap();
    assert_eq!(claimed.items[0].id, "b");
    assert_eq!(claimed.next.as_deref(), Some("b"));
    let rest = list(&mut tx, Some(TaskState::Claimed), Some("b"), 1).unwrap();
    assert_eq!((rest.items[0].id.as_str(), rest.next), ("d", None));
    assert!(rest.items.iter().all(|t| t.token.is_none()));
    assert_eq!(
        list(&mut tx, None, None, 0),
        Err(Error::InvalidInput("limit must be 1 to 1000".into()))
    );
    assert!(matches!(
        list(&mut tx, None, None, 1001),
        Err(Error::InvalidInput(_))
    ));
}

#[test]
fn claim_next_takes_the_first_seeded_ready_task() {
    let mut tx = MemTxn::default();
    seed(
        &mut tx,
        &[
            TaskSeed::new("z"),
            TaskSeed::new("y").deps(&["z"]),
            TaskSeed::new("x"),
        ],
    )
    .unwrap();
    seed(&mut tx, &[TaskSeed::new("a")]).unwrap();
    let z = claim_next(&mut tx, "w", 10).unwrap().unwrap();
    assert_eq!((z.id.as_str(), z.fence), ("z", 1));
    assert!(z.token.is_some());
    // y waits for z; x was seeded before a
    assert_eq!(claim_next(&mut tx, "w", 10).unwrap().unwrap().id, "x");
    assert_eq!(claim_next(&mut tx, "w", 10).unwrap().unwrap().id, "a");
    assert_eq!(claim_next(&mut tx, "w", 10), Ok(None));
    complete(&mut tx, "z", token(&z)).unwrap();
    assert_eq!(claim_next(&mut tx, "w", 10).unwrap().unwrap().id, "y");
    assert_eq!(claim_next(&mut tx, "w", 10), Ok(None));
    // expired claims keep their place in the order: y was seeded before x
    tx.clock = 10;
    let again = claim_next(&mut tx, "w2", 10).unwrap().unwrap();
    assert_eq!((again.id.as_str(), again.fence), ("y", 2));
    assert_eq!(claim_next(&mut tx, "w2", 10).unwrap().unwrap().id, "x");
}

#[test]
fn released_and_reseeded_tasks_keep_their_place() {
    let mut tx = MemTxn::default();
    seed(&mut tx, &[TaskSeed::new("b"), TaskSeed::new("a")]).unwrap();
    let b = claim_next(&mut tx, "w", 10).unwrap().unwrap();
    assert_eq!(b.id, "b");
    release(&mut tx, "b", token(&b)).unwrap();
    assert_eq!(claim_next(&mut tx, "w", 10).unwrap().unwrap().id, "b");
    seed(&mut tx, &[TaskSeed::new("a"), TaskSeed::new("b")]).unwrap();
    assert_eq!(claim_next(&mut tx, "w", 10).unwrap().unwrap().id, "b");
}

#[test]
fn reseeding_a_dependency_takes_dependents_out_of_the_queue() {
    let mut tx = MemTxn::default();
    seed(
        &mut tx,
        &[
            TaskSeed::new("d").title("dep"),
            TaskSeed::new("t").deps(&["d"]),
        ],
    )
    .unwrap();
    let d = claim_next(&mut tx, "w", 10).unwrap().unwrap();
    complete(&mut tx, "d", token(&d)).unwrap();
    // d goes back to open: t must wait again
    seed(&mut tx, &[TaskSeed::new("d")]).unwrap();
    assert_eq!(claim_next(&mut tx, "w", 10).unwrap().unwrap().id, "d");
    assert_eq!(claim_next(&mut tx, "w", 10), Ok(None));
    // a dependency seeded later as done releases its dependents
    seed(&mut tx, &[TaskSeed::new("u").deps(&["later"])]).unwrap();
    assert_eq!(claim_next(&mut tx, "w", 10), Ok(None));
    let mut done = TaskSeed::new("later");
    done.state = Some(TaskState::Done);
    seed(&mut tx, &[done]).unwrap();
    assert_eq!(claim_next(&mut tx, "w", 10).unwrap().unwrap().id, "u");
}

#[test]
fn failed_tasks_are_claimed_next() {
    let mut tx = MemTxn::default();
    let mut failed = TaskSeed::new("f");
    failed.state = Some(TaskState::Failed);
    seed(&mut tx, &[failed]).unwrap();
    let f = claim_next(&mut tx, "w", 10).unwrap().unwrap();
    assert_eq!((f.id.as_str(), f.state), ("f", TaskState::Claimed));
}

/// A tiny deterministic generator, so the shuffle below is repeatable.
struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// Rebuild every taskboard index from the task records and compare.
fn assert_indexes_exact(tx: &MemTxn) {
    let tasks: HashMap<String, Record> = tx
        .data
        .iter()
        .filter(|((t, _), _)| *t == Table::Tasks)
        .map(|((_, k), v)| (k.clone(), decode_task(v).unwrap()))
        .collect();
    let done = |id: &str| tasks.get(id).is_some_and(|r| r.state == TaskState::Done);
    let mut expected: Vec<String> = Vec::new();
    for r in tasks.values() {
        expected.push(keys::task_state(r.state, &r.id));
        let ready = r.state != TaskState::Done && r.deps.iter().all(|d| done(d));
        assert_eq!(ready, r.queued, "queued flag of {}", r.id);
        if ready {
            // A claimed task's entry is in the claimed queue by deadline, or
            // back in the claim queue once `claim-next` found it expired.
            let place = match (r.state, r.until) {
                (TaskState::Claimed, Some(until)) => {
                    let claimed = keys::claimed(until, r.seq);
                    let requeued = keys::queue(r.seq);
                    let has = |k: &String| tx.data.contains_key(&(Table::Indexes, k.clone()));
                    assert!(
                        has(&claimed) != has(&requeued),
                        "claimed task {} must have exactly one queue entry",
                        r.id
                    );
                    if has(&claimed) { claimed } else { requeued }
                }
                _ => keys::queue(r.seq),
            };
            expected.push(place);
        }
        for d in &r.deps {
            expected.push(keys::dependent(d, &r.id));
        }
        if let Some(at) = r.done_at {
            expected.push(keys::retention(at, keys::Finished::Task, &r.id));
        }
    }
    expected.sort();
    expected.dedup();
    let actual: Vec<String> = tx
        .data
        .keys()
        .filter(|(t, k)| *t == Table::Indexes && !k.starts_with("ks/"))
        .map(|(_, k)| k.clone())
        .collect();
    assert_eq!(actual, expected);
}

#[test]
fn indexes_stay_exact_under_every_operation() {
    let ids = ["a", "b", "c", "d", "e", "f"];
    for run in 0..40 {
        let mut rng = Lcg(run);
        let mut tx = MemTxn::default();
        let mut tokens: HashMap<String, String> = HashMap::new();
        for _ in 0..60 {
            let id = ids[rng.below(6) as usize];
            match rng.below(7) {
                0 => {
                    let n = 1 + rng.below(3) as usize;
                    let mut seeds: Vec<TaskSeed> = Vec::new();
                    for i in 0..n {
                        let sid = ids[(rng.below(6) as usize + i) % 6];
                        if seeds.iter().any(|s| s.id == sid) {
                            continue;
                        }
                        let mut s = TaskSeed::new(sid);
                        s.deps = (0..rng.below(3))
                            .map(|_| ids[rng.below(6) as usize].to_owned())
                            .filter(|d| d != sid)
                            .collect::<HashSet<_>>()
                            .into_iter()
                            .collect();
                        s.state = [None, Some(TaskState::Done), Some(TaskState::Failed)]
                            [rng.below(3) as usize];
                        seeds.push(s);
                    }
                    seed(&mut tx, &seeds).unwrap();
                }
                1 => {
                    if let Ok(t) = claim(&mut tx, id, "w", 5) {
                        tokens.insert(id.into(), t.token.unwrap());
                    }
                }
                2 => {
                    if let Ok(Some(t)) = claim_next(&mut tx, "w", 5) {
                        tokens.insert(t.id.clone(), t.token.unwrap());
                    }
                }
                3 => {
                    if let Some(t) = tokens.get(id) {
                        let _ = complete(&mut tx, id, t);
                    }
                }
                4 => {
                    if let Some(t) = tokens.get(id) {
                        let _ = release(&mut tx, id, t);
                    }
                }
                5 => {
                    if let Some(t) = tokens.get(id) {
                        let _ = renew(&mut tx, id, t, 5);
                    }
                }
                _ => tx.clock += rng.below(4),
            }
            assert_indexes_exact(&tx);
        }
    }
}

/// `claim-next` never reads the live claims ahead of the first ready task:
/// they wait in the claimed queue, by deadline. Expired claims come back in
/// their seed-order place, once.
#[test]
fn claim_next_reads_no_live_claims_and_takes_expired_ones_in_seed_order() {
    struct Rows<'a>(&'a mut MemTxn, u64);
    impl Txn for Rows<'_> {
        fn get(&mut self, t: Table, k: &str) -> Result<Option<String>, crate::StoreFault> {
            let v = self.0.get(t, k)?;
            self.1 += u64::from(v.is_some());
            Ok(v)
        }
        fn put(&mut self, t: Table, k: &str, v: &str) -> Result<(), crate::StoreFault> {
            self.0.put(t, k, v)
        }
        fn delete(&mut self, t: Table, k: &str) -> Result<(), crate::StoreFault> {
            self.0.delete(t, k)
        }
        fn scan(
            &mut self,
            t: Table,
            p: &str,
            a: Option<&str>,
            l: u32,
        ) -> Result<Vec<(String, String)>, crate::StoreFault> {
            let page = self.0.scan(t, p, a, l)?;
            self.1 += page.len() as u64;
            Ok(page)
        }
        fn now(&mut self) -> Result<u64, crate::StoreFault> {
            self.0.now()
        }
        fn random128(&mut self) -> Result<u128, crate::StoreFault> {
            self.0.random128()
        }
    }
    let mut tx = MemTxn::default();
    let seeds: Vec<TaskSeed> = (0..500)
        .map(|i| TaskSeed::new(&format!("t{i:03}")))
        .collect();
    seed(&mut tx, &seeds).unwrap();
    for i in 0..499 {
        // the first ten expire at 100, the rest live long
        let ttl = if i < 10 { 100 } else { 1_000_000 };
        claim(&mut tx, &format!("t{i:03}"), "w", ttl).unwrap();
    }
    let mut rows = Rows(&mut tx, 0);
    let next = claim_next(&mut rows, "w", 100).unwrap().unwrap();
    assert_eq!(next.id, "t499");
    assert!(
        rows.1 <= 24,
        "claim-next read {} rows past 499 live claims",
        rows.1
    );

    tx.clock = 100;
    let mut taken = Vec::new();
    for _ in 0..11 {
        let mut rows = Rows(&mut tx, 0);
        let next = claim_next(&mut rows, "w2", 1_000_000).unwrap();
        assert!(rows.1 <= 64, "claim-next read {} rows", rows.1);
        taken.extend(next.map(|t| t.id));
    }
    // the ten expired claims in seed order, then t499 (expired at 100 too)
    let expected: Vec<String> = (0..10)
        .map(|i| format!("t{i:03}"))
        .chain(["t499".to_owned()])
        .collect();
    assert_eq!(taken, expected);
    assert_eq!(claim_next(&mut tx, "w3", 10).unwrap(), None);
}
