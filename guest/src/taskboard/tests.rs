use super::*;
use crate::testing::MemTxn;
use std::collections::BTreeMap;

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

/// Rebuild every taskboard index from the task records and group records,
/// and compare; check each group's claims and head too.
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
        let ready = !r.terminal() && r.deps.iter().all(|d| done(d));
        assert_eq!(ready, r.queued, "queued flag of {}", r.id);
        if ready {
            let entry = r.entry.clone().expect("format 2 records keep their entry");
            let fits = match (r.state, r.until, r.not_before, &r.group) {
                (TaskState::Claimed, Some(until), _, _) => {
                    entry == keys::claimed(until, r.seq)
                        || (until <= tx.clock
                            && entry
                                == r.group
                                    .as_ref()
                                    .map_or(keys::ready(r.priority, r.seq), |g| {
                                        keys::group_ready(g, r.priority, r.seq)
                                    }))
                }
                (_, _, Some(at), _) if entry.starts_with(keys::DELAYED) => {
                    entry == keys::delayed(at, r.seq)
                }
                (_, _, _, Some(g)) => entry == keys::group_ready(g, r.priority, r.seq),
                _ => entry == keys::ready(r.priority, r.seq),
            };
            assert!(fits, "entry {entry:?} of {r:?}");
            expected.push(entry);
        } else {
            assert_eq!(r.entry, None, "{r:?}");
        }
        for d in &r.deps {
            expected.push(keys::dependent(d, &r.id));
        }
        if let Some(g) = &r.group {
            expected.push(keys::group_task(g, &r.id));
        }
        if let Some(at) = r.finished_at() {
            // Unless `prune` found it still needed and held it aside.
            let held = format!("{at:016x}/{}", r.id);
            let aside = tx
                .data
                .keys()
                .any(|(t, k)| *t == Table::Indexes && k.starts_with("rh/") && k.ends_with(&held));
            // (A held entry can outlive a re-seed that finished the task
            // again at the same instant: releasing it marks the entry again.)
            let entry = keys::retention(at, keys::Finished::Task, &r.id);
            if !aside || tx.data.contains_key(&(Table::Indexes, entry.clone())) {
                expected.push(entry);
            }
        }
    }
    // Groups: claims are the group's claimed tasks (expired ones may have
    // been dropped), the head stands on the first ready task while a slot
    // is free.
    for ((table, key), value) in &tx.data {
        let Some(name) = key.strip_prefix("group/").filter(|_| *table == Table::Meta) else {
            continue;
        };
        let record: group::GroupRecord = serde_json::from_str(value).unwrap();
        for (id, until) in &record.claims {
            let t = &tasks[id];
            assert_eq!(
                (t.state, t.until, t.group.as_deref()),
                (TaskState::Claimed, Some(*until), Some(name))
            );
        }
        for t in tasks.values() {
            if t.group.as_deref() == Some(name) && t.live_claim(tx.clock) {
                assert!(
                    record.claims.contains_key(&t.id),
                    "live claim of {} uncounted",
                    t.id
                );
            }
        }
        let first = tx
            .data
            .keys()
            .find(|(t, k)| *t == Table::Indexes && k.starts_with(&keys::group_queue(name)))
            .map(|(_, k)| k.clone());
        let first = first.map(|k| {
            let (p, seq) = keys::parse_group_ready(&keys::group_queue(name), &k).unwrap();
            keys::head(name, p, seq)
        });
        // A slot may have freed by expiry since the last call: the head
        // comes back with the next call that meets the expired claim.
        if record.head.is_some()
            || record.free(tx.clock) && record.claims.values().all(|u| *u > tx.clock)
        {
            assert_eq!(record.head, first, "head of group {name}");
        }
        expected.extend(record.head.clone());
    }
    // Each group's figures are its tasks by state (those a format-2 kernel
    // wrote), and a group with such a task has a record.
    let mut figures: BTreeMap<String, crate::count::TaskFigures> = BTreeMap::new();
    for t in tasks.values().filter(|t| t.v.0 >= 2) {
        if let Some(g) = &t.group {
            *figures.entry(g.clone()).or_default().state(t.state) += 1;
        }
    }
    let stored: BTreeMap<String, crate::count::TaskFigures> = tx
        .data
        .iter()
        .filter_map(|((t, k), v)| {
            let name = k.strip_prefix("group/").filter(|_| *t == Table::Meta)?;
            let record: group::GroupRecord = serde_json::from_str(v).unwrap();
            (!record.tasks.is_empty()).then(|| (name.to_owned(), record.tasks))
        })
        .collect();
    assert_eq!(stored, figures, "the groups' tasks by state");
    expected.sort();
    expected.dedup();
    let actual: Vec<String> = tx
        .data
        .keys()
        .filter(|(t, k)| *t == Table::Indexes && !k.starts_with("ks/") && !k.starts_with("rh/"))
        .map(|(_, k)| k.clone())
        .collect();
    assert_eq!(actual, expected);
}

/// The count records' sums must equal the task records a format-2 kernel
/// wrote, state by state; `count` answers those sums.
fn assert_counts_exact(tx: &mut MemTxn) {
    let states = [
        TaskState::Open,
        TaskState::Claimed,
        TaskState::Done,
        TaskState::Failed,
        TaskState::Dead,
    ];
    let mut want = [0u64; 5];
    for ((table, _), value) in &tx.data {
        if *table == Table::Tasks {
            let r = decode_task(value).unwrap();
            if r.v.0 >= 2 {
                want[states.iter().position(|s| *s == r.state).unwrap()] += 1;
            }
        }
    }
    let c = count(tx).unwrap();
    assert_eq!([c.open, c.claimed, c.done, c.failed, c.dead], want);
}

/// Turn the board into what a format-1 kernel left: every task record
/// `"v": 1` (uncounted), no count records, no `counted` marker.
fn as_format_1(tx: &mut MemTxn) {
    tx.data.retain(|(t, k), _| {
        !(*t == Table::Meta && (k.starts_with(keys::COUNTS) || k == keys::COUNTED))
    });
    for ((t, k), v) in tx.data.iter_mut() {
        if *t == Table::Tasks {
            *v = v.replacen("{\"v\":2,", "{\"v\":1,", 1);
        }
        // (Format 1 had no groups; the tests' uncounted tasks may have one.)
        if *t == Table::Meta && k.starts_with(keys::GROUPS) {
            let mut record: group::GroupRecord = serde_json::from_str(v).unwrap();
            record.tasks = Default::default();
            *v = serde_json::to_string(&record).unwrap();
        }
    }
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
            // A quarter of the runs continue a board a format-1 kernel wrote.
            if run % 4 == 3
                && rng.below(8) == 0
                && tx.data.contains_key(&(Table::Meta, keys::BOARD.to_owned()))
                && count(&mut tx).unwrap().exact
            {
                as_format_1(&mut tx);
                assert!(!count(&mut tx).unwrap().exact);
            }
            match rng.below(13) {
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
                        s.priority = [None, Some(2), Some(-1)][rng.below(3) as usize];
                        s.group =
                            [None, Some("g"), Some("h")][rng.below(3) as usize].map(str::to_owned);
                        s.max_attempts = [None, Some(1), Some(2)][rng.below(3) as usize];
                        s.not_before = [None, Some(tx.clock + rng.below(6))][rng.below(2) as usize];
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
                6 => {
                    if let Some(t) = tokens.get(id) {
                        let _ = fail(&mut tx, id, t, "r", Some(rng.below(5)));
                    }
                }
                7 => {
                    let _ = revive(&mut tx, id);
                }
                8 => {
                    let n = 1 + rng.below(4) as u32;
                    for t in claim_batch(&mut tx, "w", 5, n).unwrap() {
                        tokens.insert(t.id.clone(), t.token.unwrap());
                    }
                }
                9 => {
                    let limit = [None, Some(1), Some(2)][rng.below(3) as usize];
                    set_group_limit(&mut tx, ["g", "h"][rng.below(2) as usize], limit).unwrap();
                }
                10 => {
                    let items: Vec<Completion> = tokens
                        .iter()
                        .take(3)
                        .map(|(i, t)| Completion::new(i, t))
                        .collect();
                    if !items.is_empty() {
                        complete_batch(&mut tx, &items).unwrap();
                    }
                }
                11 => {
                    let before = tx.clock + 1;
                    crate::retention::prune(&mut tx, before, 1 + rng.below(3) as u32).unwrap();
                }
                _ => tx.clock += rng.below(4),
            }
            assert_indexes_exact(&tx);
            assert_counts_exact(&mut tx);
        }
        // `recount` covers the rest, a page at a time, then `count` is exact.
        while !recount(&mut tx, 2).unwrap() {
            assert_counts_exact(&mut tx);
        }
        assert_counts_exact(&mut tx);
        let c = count(&mut tx).unwrap();
        let all = tx.data.keys().filter(|(t, _)| *t == Table::Tasks).count() as u64;
        assert!(c.exact);
        assert_eq!(c.open + c.claimed + c.done + c.failed + c.dead, all);
    }
}

/// `claim-next` never reads the live claims ahead of the first ready task:
/// they wait in the claimed queue, by deadline. Expired claims come back in
/// their seed-order place, once.
#[test]
fn claim_next_reads_no_live_claims_and_takes_expired_ones_in_seed_order() {
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

// ---- SPEC 10: the job queue ----

fn ids(tasks: &[Task]) -> Vec<&str> {
    tasks.iter().map(|t| t.id.as_str()).collect()
}

#[test]
fn a_batch_claims_in_priority_then_seed_order_with_distinct_tokens() {
    let mut tx = MemTxn::default();
    seed(
        &mut tx,
        &[
            TaskSeed::new("low").priority(-5),
            TaskSeed::new("a"),
            TaskSeed::new("urgent").priority(10),
            TaskSeed::new("b"),
            TaskSeed::new("high").priority(3),
            TaskSeed::new("lower").priority(-6),
        ],
    )
    .unwrap();
    let batch = claim_batch(&mut tx, "w", 100, 4).unwrap();
    assert_eq!(ids(&batch), ["urgent", "high", "a", "b"]);
    let tokens: HashSet<&str> = batch.iter().map(token).collect();
    assert_eq!(tokens.len(), 4);
    for t in &batch {
        assert_eq!((t.state, t.fence, t.attempts), (TaskState::Claimed, 1, 1));
        assert_eq!(t.owner.as_deref(), Some("w"));
        assert_eq!(t.until, Some(100));
    }
    let rest = claim_batch(&mut tx, "w", 100, 10).unwrap();
    assert_eq!(ids(&rest), ["low", "lower"]);
    assert!(claim_batch(&mut tx, "w", 100, 10).unwrap().is_empty());
    assert!(matches!(
        claim_batch(&mut tx, "w", 100, 0),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        claim_batch(&mut tx, "w", 100, 1001),
        Err(Error::InvalidInput(_))
    ));
    assert_indexes_exact(&tx);
}

#[test]
fn delayed_tasks_wait_and_come_due_in_claim_order() {
    let mut tx = MemTxn::default();
    seed(
        &mut tx,
        &[
            TaskSeed::new("later").not_before(50),
            TaskSeed::new("soon").not_before(20),
            TaskSeed::new("now"),
        ],
    )
    .unwrap();
    assert_eq!(claim(&mut tx, "soon", "w", 10), Err(Error::NotDue));
    assert_eq!(ids(&claim_batch(&mut tx, "w", 1_000, 10).unwrap()), ["now"]);
    tx.clock = 50;
    // Both due: seed order between them (later was seeded first).
    assert_eq!(
        ids(&claim_batch(&mut tx, "w", 10, 10).unwrap()),
        ["later", "soon"]
    );
    assert_indexes_exact(&tx);
}

#[test]
fn attempts_count_grants_and_a_release_gives_its_attempt_back() {
    let mut tx = MemTxn::default();
    seed(&mut tx, &[TaskSeed::new("a").max_attempts(2)]).unwrap();
    let t = claim(&mut tx, "a", "w", 10).unwrap();
    assert_eq!(t.attempts, 1);
    release(&mut tx, "a", token(&t)).unwrap();
    assert_eq!(get(&mut tx, "a").unwrap().attempts, 0);
    let t = claim(&mut tx, "a", "w", 10).unwrap();
    tx.clock = 10;
    // a takeover counts one
    let t2 = claim_next(&mut tx, "w2", 10).unwrap().unwrap();
    assert_eq!((t2.attempts, t2.fence), (2, 3));
    assert_eq!(complete(&mut tx, "a", token(&t)), Err(Error::LeaseLost));
    tx.clock = 20;
    // expired with its attempts used up: claim refuses and writes nothing
    let before = tx.data.clone();
    assert_eq!(claim(&mut tx, "a", "w3", 10), Err(Error::Terminal));
    assert_eq!(tx.data, before);
    assert_eq!(get(&mut tx, "a").unwrap().state, TaskState::Claimed);
    // a claimer that meets it turns it dead and moves on
    assert_eq!(claim_next(&mut tx, "w3", 10).unwrap(), None);
    let dead = get(&mut tx, "a").unwrap();
    assert_eq!(dead.state, TaskState::Dead);
    assert_eq!(dead.last_error.as_deref(), Some(ATTEMPTS_EXHAUSTED));
    assert_eq!((dead.owner, dead.until, dead.attempts), (None, None, 2));
    assert_eq!(complete(&mut tx, "a", token(&t2)), Err(Error::LeaseLost));
    assert_eq!(
        fail(&mut tx, "a", token(&t2), "late", None),
        Err(Error::LeaseLost)
    );
    assert_eq!(claim(&mut tx, "a", "w", 10), Err(Error::Terminal));
    assert_indexes_exact(&tx);
}

#[test]
fn a_batch_turns_exhausted_tasks_dead_and_takes_the_next() {
    let mut tx = MemTxn::default();
    seed(
        &mut tx,
        &[TaskSeed::new("x").max_attempts(1), TaskSeed::new("y")],
    )
    .unwrap();
    claim(&mut tx, "x", "w", 5).unwrap();
    tx.clock = 5;
    let batch = claim_batch(&mut tx, "w2", 5, 2).unwrap();
    assert_eq!(ids(&batch), ["y"]);
    assert_eq!(get(&mut tx, "x").unwrap().state, TaskState::Dead);
    assert_indexes_exact(&tx);
}

#[test]
fn fail_backs_off_then_dies_and_revive_brings_it_back() {
    let mut tx = MemTxn::default();
    seed(
        &mut tx,
        &[TaskSeed::new("a").max_attempts(2).priority(4).group("g")],
    )
    .unwrap();
    let t = claim_next(&mut tx, "w", 100).unwrap().unwrap();
    assert!(matches!(
        fail(&mut tx, "a", token(&t), &"x".repeat(4097), None),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        fail(&mut tx, "a", token(&t), "r", Some(input::MAX_TTL + 1)),
        Err(Error::InvalidInput(_))
    ));
    assert_eq!(fail(&mut tx, "a", "nope", "r", None), Err(Error::LeaseLost));
    let failed = fail(&mut tx, "a", token(&t), "boom", Some(30)).unwrap();
    assert_eq!(failed.state, TaskState::Failed);
    assert_eq!(failed.not_before, Some(30));
    assert_eq!(failed.last_error.as_deref(), Some("boom"));
    assert_eq!(
        (failed.owner.clone(), failed.token.clone(), failed.until),
        (None, None, None)
    );
    assert_eq!(failed.fence, 1);
    // idempotent for the token that failed it
    assert_eq!(
        fail(&mut tx, "a", token(&t), "again", None).unwrap(),
        failed
    );
    assert_eq!(claim_next(&mut tx, "w", 100).unwrap(), None);
    assert_eq!(claim(&mut tx, "a", "w", 100), Err(Error::NotDue));
    tx.clock = 30;
    let t = claim_next(&mut tx, "w", 100).unwrap().unwrap();
    assert_eq!(t.attempts, 2);
    let dead = fail(&mut tx, "a", token(&t), "boom 2", Some(10)).unwrap();
    assert_eq!(dead.state, TaskState::Dead);
    assert_eq!(dead.not_before, Some(30), "not-before unchanged when dead");
    assert_eq!(fail(&mut tx, "a", token(&t), "x", None).unwrap(), dead);
    assert_eq!(revive(&mut tx, "zz"), Err(Error::NotFound));
    let revived = revive(&mut tx, "a").unwrap();
    assert_eq!(revived.state, TaskState::Open);
    assert_eq!(
        (
            revived.attempts,
            revived.last_error.clone(),
            revived.not_before
        ),
        (0, None, None)
    );
    assert_eq!(
        (
            revived.priority,
            revived.group.as_deref(),
            revived.max_attempts
        ),
        (4, Some("g"), Some(2))
    );
    assert_eq!(revived.fence, 2);
    assert_eq!(revive(&mut tx, "a"), Err(Error::NotDead));
    assert_eq!(claim_next(&mut tx, "w", 100).unwrap().unwrap().id, "a");
    assert_indexes_exact(&tx);
}

#[test]
fn a_reseed_revives_and_dead_is_not_done_for_dependents() {
    let mut tx = MemTxn::default();
    seed(
        &mut tx,
        &[
            TaskSeed::new("a").max_attempts(1),
            TaskSeed::new("b").deps(&["a"]),
        ],
    )
    .unwrap();
    let t = claim(&mut tx, "a", "w", 10).unwrap();
    fail(&mut tx, "a", token(&t), "r", None).unwrap();
    assert_eq!(claim(&mut tx, "b", "w", 10), Err(Error::DepsPending));
    assert_eq!(claim_next(&mut tx, "w", 10).unwrap(), None);
    let mut dead = TaskSeed::new("a");
    dead.state = Some(TaskState::Dead);
    assert!(matches!(
        seed(&mut tx, &[dead]),
        Err(Error::InvalidInput(_))
    ));
    seed(&mut tx, &[TaskSeed::new("a")]).unwrap();
    let a = get(&mut tx, "a").unwrap();
    assert_eq!(
        (a.state, a.attempts, a.last_error, a.max_attempts),
        (TaskState::Open, 0, None, None)
    );
    assert_indexes_exact(&tx);
}

#[test]
fn groups_hold_at_most_their_limit_of_live_claims() {
    let mut tx = MemTxn::default();
    let seeds: Vec<TaskSeed> = (0..5)
        .map(|i| TaskSeed::new(&format!("g{i}")).group("tenant"))
        .chain([TaskSeed::new("free")])
        .collect();
    seed(&mut tx, &seeds).unwrap();
    assert_eq!(get_group(&mut tx, "tenant"), Err(Error::NotFound));
    set_group_limit(&mut tx, "tenant", Some(2)).unwrap();
    assert_eq!(
        get_group(&mut tx, "tenant").unwrap(),
        GroupInfo { limit: 2, live: 0 }
    );
    let batch = claim_batch(&mut tx, "w", 10, 10).unwrap();
    assert_eq!(
        ids(&batch),
        ["g0", "g1", "free"],
        "a batch counts its own grants"
    );
    assert_eq!(get_group(&mut tx, "tenant").unwrap().live, 2);
    assert_eq!(claim(&mut tx, "g4", "w", 10), Err(Error::GroupFull));
    assert_indexes_exact(&tx);
    // a completion frees a slot
    complete(&mut tx, "g0", token(&batch[0])).unwrap();
    assert_eq!(ids(&claim_batch(&mut tx, "w", 10, 10).unwrap()), ["g2"]);
    // expiry frees every slot: exact counting ignores expired claims
    tx.clock = 10;
    assert_eq!(get_group(&mut tx, "tenant").unwrap().live, 0);
    let next = claim_batch(&mut tx, "w", 10, 10).unwrap();
    assert_eq!(
        ids(&next),
        ["g1", "g2", "free"],
        "expired claims taken over in order"
    );
    // lowering revokes nothing; removing lets everything through
    set_group_limit(&mut tx, "tenant", Some(1)).unwrap();
    assert_eq!(
        get_group(&mut tx, "tenant").unwrap(),
        GroupInfo { limit: 1, live: 2 }
    );
    assert!(claim_batch(&mut tx, "w", 10, 10).unwrap().is_empty());
    set_group_limit(&mut tx, "tenant", None).unwrap();
    assert_eq!(get_group(&mut tx, "tenant"), Err(Error::NotFound));
    assert_eq!(
        ids(&claim_batch(&mut tx, "w", 10, 10).unwrap()),
        ["g3", "g4"]
    );
    assert!(matches!(
        set_group_limit(&mut tx, "tenant", Some(0)),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        set_group_limit(&mut tx, "tenant", Some(100_001)),
        Err(Error::InvalidInput(_))
    ));
    assert_indexes_exact(&tx);
}

#[test]
fn complete_batch_answers_each_item_as_complete_would() {
    let mut tx = MemTxn::default();
    seed(
        &mut tx,
        &[
            TaskSeed::new("a"),
            TaskSeed::new("b"),
            TaskSeed::new("c"),
            TaskSeed::new("d").deps(&["a"]),
        ],
    )
    .unwrap();
    let batch = claim_batch(&mut tx, "w", 10, 3).unwrap();
    let items = [
        Completion::new("b", token(&batch[1])),
        Completion::new("zz", token(&batch[0])),
        Completion::new("c", token(&batch[0])),
        Completion::new("a", token(&batch[0])),
    ];
    let answers = complete_batch(&mut tx, &items).unwrap();
    let got: Vec<(&str, CompletionAnswer)> =
        answers.iter().map(|a| (a.id.as_str(), a.answer)).collect();
    assert_eq!(
        got,
        [
            ("b", CompletionAnswer::Completed),
            ("zz", CompletionAnswer::NotFound),
            ("c", CompletionAnswer::LeaseLost),
            ("a", CompletionAnswer::Completed),
        ]
    );
    assert_eq!(get(&mut tx, "c").unwrap().state, TaskState::Claimed);
    // idempotent for the token that completed it; d became ready
    let again = complete_batch(&mut tx, &[Completion::new("a", token(&batch[0]))]).unwrap();
    assert_eq!(again[0].answer, CompletionAnswer::Completed);
    assert_eq!(claim_next(&mut tx, "w", 10).unwrap().unwrap().id, "d");
    let before = tx.data.clone();
    for bad in [
        vec![],
        vec![Completion::new("a", "t"), Completion::new("a", "u")],
        vec![Completion::new("", "t")],
        vec![Completion::new("a", "")],
    ] {
        assert!(matches!(
            complete_batch(&mut tx, &bad),
            Err(Error::InvalidInput(_))
        ));
    }
    let many: Vec<Completion> = (0..1001)
        .map(|i| Completion::new(&format!("t{i}"), "x"))
        .collect();
    assert!(matches!(
        complete_batch(&mut tx, &many),
        Err(Error::InvalidInput(_))
    ));
    assert_eq!(tx.data, before);
    assert_indexes_exact(&tx);
}

#[test]
fn seeds_out_of_range_are_invalid_input() {
    let mut tx = MemTxn::default();
    for bad in [
        TaskSeed::new("a").max_attempts(0),
        TaskSeed::new("a").max_attempts(1001),
        TaskSeed::new("a").group(""),
        TaskSeed::new("a").group(&"g".repeat(257)),
        TaskSeed::new("a").group("a\0b"),
        TaskSeed::new("a").not_before(1 << 53),
    ] {
        assert!(matches!(seed(&mut tx, &[bad]), Err(Error::InvalidInput(_))));
    }
    assert!(tx.data.is_empty());
}

#[test]
fn dead_tasks_are_pruned_unless_an_active_task_needs_them() {
    let mut tx = MemTxn::default();
    seed(
        &mut tx,
        &[
            TaskSeed::new("x").max_attempts(1),
            TaskSeed::new("y").max_attempts(1),
            TaskSeed::new("needs-y").deps(&["y"]),
        ],
    )
    .unwrap();
    for id in ["x", "y"] {
        let t = claim(&mut tx, id, "w", 10).unwrap();
        fail(&mut tx, id, token(&t), "r", None).unwrap();
    }
    tx.clock = 100;
    let pruned = crate::retention::prune(&mut tx, 50, 10).unwrap();
    assert_eq!(pruned.removed_tasks, 1);
    assert_eq!(get(&mut tx, "x"), Err(Error::NotFound));
    assert_eq!(get(&mut tx, "y").unwrap().state, TaskState::Dead);
    // once nothing active needs it, it goes
    let mut gone = TaskSeed::new("needs-y");
    gone.state = Some(TaskState::Done);
    seed(&mut tx, &[gone]).unwrap();
    let pruned = crate::retention::prune(&mut tx, 50, 10).unwrap();
    assert_eq!(pruned.removed_tasks, 1);
    assert_eq!(get(&mut tx, "y"), Err(Error::NotFound));
}

/// Counts the rows a call reads over a [`MemTxn`].
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

fn seeded(tx: &mut MemTxn, seeds: Vec<TaskSeed>) {
    for chunk in seeds.chunks(10_000) {
        seed(tx, chunk).unwrap();
    }
}

/// SPEC 10's read bounds, on boards built to defeat them.
#[test]
fn claims_read_a_bounded_number_of_rows_on_hostile_boards() {
    // 100,000 delayed tasks not yet due, then one ready task.
    let mut tx = MemTxn::default();
    let mut seeds: Vec<TaskSeed> = (0..100_000)
        .map(|i| TaskSeed::new(&format!("d{i:06}")).not_before(1_000))
        .collect();
    seeds.push(TaskSeed::new("ready"));
    seeded(&mut tx, seeds);
    let mut rows = Rows(&mut tx, 0);
    assert_eq!(claim_next(&mut rows, "w", 10).unwrap().unwrap().id, "ready");
    assert!(
        rows.1 <= 40,
        "read {} rows past 100,000 delayed tasks",
        rows.1
    );
    // When they come due, each is read once, by the call that meets them.
    tx.clock = 1_000;
    let mut rows = Rows(&mut tx, 0);
    assert_eq!(
        claim_next(&mut rows, "w", 10).unwrap().unwrap().id,
        "d000000"
    );
    let first = rows.1;
    assert!(first >= 200_000, "the due tasks were moved ({first} rows)");
    let mut rows = Rows(&mut tx, 0);
    assert_eq!(
        claim_next(&mut rows, "w", 10).unwrap().unwrap().id,
        "d000001"
    );
    assert!(
        rows.1 <= 40,
        "read {} rows after the due tasks moved",
        rows.1
    );

    // 5,000 live claims, then one ready task.
    let mut tx = MemTxn::default();
    seeded(
        &mut tx,
        (0..5_001)
            .map(|i| TaskSeed::new(&format!("c{i:05}")))
            .collect(),
    );
    for _ in 0..5 {
        claim_batch(&mut tx, "w", 1_000_000, 1000).unwrap();
    }
    let mut rows = Rows(&mut tx, 0);
    assert_eq!(
        claim_next(&mut rows, "w", 10).unwrap().unwrap().id,
        "c05000"
    );
    assert!(rows.1 <= 40, "read {} rows past 5,000 live claims", rows.1);

    // A full group with 10,000 ready tasks ahead of one free task.
    let mut tx = MemTxn::default();
    set_group_limit(&mut tx, "full", Some(1)).unwrap();
    let mut seeds: Vec<TaskSeed> = (0..10_001)
        .map(|i| TaskSeed::new(&format!("f{i:05}")).group("full"))
        .collect();
    seeds.push(TaskSeed::new("other"));
    seeded(&mut tx, seeds);
    assert_eq!(
        claim_next(&mut tx, "w", 1_000_000).unwrap().unwrap().id,
        "f00000"
    );
    let mut rows = Rows(&mut tx, 0);
    assert_eq!(claim_next(&mut rows, "w", 10).unwrap().unwrap().id, "other");
    assert!(
        rows.1 <= 40,
        "read {} rows past a full group's 10,000 tasks",
        rows.1
    );
    assert_indexes_exact(&tx);
}

/// Found by the model (tests/src/model): a group's next task keeps its
/// place in the same call, and a task leaving its group keeps its place.
#[test]
fn groups_never_cost_a_task_its_place_in_the_claim_order() {
    // The head turns dead: the group's next task is the next candidate.
    let mut tx = MemTxn::default();
    seed(
        &mut tx,
        &[
            TaskSeed::new("t0").max_attempts(1).group("g0"),
            TaskSeed::new("t1").group("g0"),
            TaskSeed::new("t2"),
        ],
    )
    .unwrap();
    assert_eq!(ids(&claim_batch(&mut tx, "w", 50, 1).unwrap()), ["t0"]);
    tx.clock = 50;
    assert_eq!(claim_next(&mut tx, "w", 50).unwrap().unwrap().id, "t1");
    assert_eq!(get(&mut tx, "t0").unwrap().state, TaskState::Dead);
    assert_indexes_exact(&tx);

    // A granted head of a higher priority: the group's next task, of a
    // lower one, stands in a later queue and is still taken in order.
    let mut tx = MemTxn::default();
    seed(
        &mut tx,
        &[
            TaskSeed::new("t0").group("g1"),
            TaskSeed::new("t1"),
            TaskSeed::new("t2"),
            TaskSeed::new("t4").group("g1").priority(1),
        ],
    )
    .unwrap();
    assert_eq!(
        ids(&claim_batch(&mut tx, "w", 50, 3).unwrap()),
        ["t4", "t0", "t1"]
    );
    assert_indexes_exact(&tx);

    // Re-seeded out of its group: the same place.
    for (first, again, want) in [
        (
            vec![
                TaskSeed::new("t0").group("g1"),
                TaskSeed::new("t1"),
                TaskSeed::new("t2"),
            ],
            vec![TaskSeed::new("t0"), TaskSeed::new("t1")],
            vec!["t0", "t1"],
        ),
        (
            vec![
                TaskSeed::new("t0"),
                TaskSeed::new("t1").group("g0"),
                TaskSeed::new("t2"),
            ],
            vec![TaskSeed::new("t1"), TaskSeed::new("t2")],
            vec!["t0", "t1"],
        ),
        (
            vec![TaskSeed::new("t0").group("a"), TaskSeed::new("t1")],
            vec![TaskSeed::new("t0").group("b")],
            vec!["t0", "t1"],
        ),
    ] {
        let mut tx = MemTxn::default();
        seed(&mut tx, &first).unwrap();
        seed(&mut tx, &again).unwrap();
        assert_indexes_exact(&tx);
        assert_eq!(ids(&claim_batch(&mut tx, "w", 50, 2).unwrap()), want);
        assert_indexes_exact(&tx);
    }
}

/// The point-read keys and range prefixes of one crossing.
type Crossing = (Vec<(Table, String)>, Vec<String>);

/// A [`MemTxn`] that records every read and, just before the claim walk
/// reads the first claim queue again (after its first crossing), lets
/// `meanwhile` act on the board as a call committing while the walk goes
/// on would (what PostgreSQL's READ COMMITTED range reads show a walk).
struct Interleaved<'a, F: FnMut(&mut MemTxn)> {
    tx: &'a mut MemTxn,
    meanwhile: Option<F>,
    first_queue_reads: u32,
    /// Each crossing's point-read keys and range prefixes.
    reads: Vec<Crossing>,
}

impl<F: FnMut(&mut MemTxn)> Txn for Interleaved<'_, F> {
    fn get(&mut self, t: Table, k: &str) -> Result<Option<String>, crate::StoreFault> {
        self.reads.push((vec![(t, k.to_owned())], Vec::new()));
        self.tx.get(t, k)
    }
    fn put(&mut self, t: Table, k: &str, v: &str) -> Result<(), crate::StoreFault> {
        self.tx.put(t, k, v)
    }
    fn delete(&mut self, t: Table, k: &str) -> Result<(), crate::StoreFault> {
        self.tx.delete(t, k)
    }
    fn scan(
        &mut self,
        t: Table,
        p: &str,
        a: Option<&str>,
        l: u32,
    ) -> Result<Vec<(String, String)>, crate::StoreFault> {
        if p == keys::HIGHER {
            self.first_queue_reads += 1;
            if self.first_queue_reads == 1
                && let Some(mut f) = self.meanwhile.take()
            {
                f(self.tx);
            }
        }
        self.reads.push((Vec::new(), vec![p.to_owned()]));
        self.tx.scan(t, p, a, l)
    }
    fn read(
        &mut self,
        keys: &[(Table, &str)],
        ranges: &[crate::txn::Scan<'_>],
    ) -> Result<crate::txn::Pages, crate::StoreFault> {
        let values = keys
            .iter()
            .map(|(t, k)| self.tx.get(*t, k))
            .collect::<Result<_, _>>()?;
        let pages = ranges
            .iter()
            .map(|r| self.tx.scan(r.table, r.prefix, r.after, r.limit))
            .collect::<Result<_, _>>()?;
        self.reads.push((
            keys.iter().map(|(t, k)| (*t, (*k).to_owned())).collect(),
            ranges.iter().map(|r| r.prefix.to_owned()).collect(),
        ));
        Ok((values, pages))
    }
    fn now(&mut self) -> Result<u64, crate::StoreFault> {
        self.tx.now()
    }
    fn random128(&mut self) -> Result<u128, crate::StoreFault> {
        self.tx.random128()
    }
}

/// A claim walk waits for no other walk: its first crossing reads no key
/// (only the expired claims, the due delays and the queues' heads), and it
/// reads its candidates with probes that pass over held tasks.
#[test]
fn a_claim_walk_reads_no_key_with_its_first_pages() {
    let mut tx = MemTxn::default();
    seed(&mut tx, &[TaskSeed::new("a")]).unwrap();
    let mut walk = Interleaved {
        tx: &mut tx,
        meanwhile: None::<fn(&mut MemTxn)>,
        first_queue_reads: 0,
        reads: Vec::new(),
    };
    assert_eq!(ids(&claim_batch(&mut walk, "w", 10, 5).unwrap()), ["a"]);
    let (keys, ranges) = &walk.reads[0];
    assert!(keys.is_empty(), "{keys:?}");
    assert_eq!(
        ranges,
        &[
            keys::CLAIMED,
            keys::DELAYED,
            keys::HIGHER,
            keys::QUEUE,
            keys::LOWER
        ]
    );
}

/// A store that answers some tasks held by an overlapping call.
struct Holding<'a> {
    tx: &'a mut MemTxn,
    held: Vec<&'static str>,
    probed: Vec<String>,
}

impl Txn for Holding<'_> {
    fn get(&mut self, t: Table, k: &str) -> Result<Option<String>, crate::StoreFault> {
        assert!(
            t != Table::Tasks || !self.held.contains(&k),
            "waited for held task {k}"
        );
        self.tx.get(t, k)
    }
    fn try_get_many(
        &mut self,
        keys: &[(Table, &str)],
    ) -> Result<Vec<Option<Option<String>>>, crate::StoreFault> {
        keys.iter()
            .map(|(t, k)| {
                self.probed.push((*k).to_owned());
                if *t == Table::Tasks && self.held.contains(k) {
                    Ok(None)
                } else {
                    self.tx.get(*t, k).map(Some)
                }
            })
            .collect()
    }
    fn put(&mut self, t: Table, k: &str, v: &str) -> Result<(), crate::StoreFault> {
        self.tx.put(t, k, v)
    }
    fn delete(&mut self, t: Table, k: &str) -> Result<(), crate::StoreFault> {
        self.tx.delete(t, k)
    }
    fn scan(
        &mut self,
        t: Table,
        p: &str,
        a: Option<&str>,
        l: u32,
    ) -> Result<Vec<(String, String)>, crate::StoreFault> {
        self.tx.scan(t, p, a, l)
    }
    fn now(&mut self) -> Result<u64, crate::StoreFault> {
        self.tx.now()
    }
    fn random128(&mut self) -> Result<u128, crate::StoreFault> {
        self.tx.random128()
    }
}

/// SPEC 10's skip-locked claiming: a task an overlapping call holds is
/// passed over, never waited for, and keeps its place; the walk takes the
/// free tasks after it in claim order, as many as asked.
#[test]
fn a_walk_passes_over_held_tasks_and_keeps_their_places() {
    let mut tx = MemTxn::default();
    let seeds: Vec<TaskSeed> = ["a", "b", "c", "d"].map(TaskSeed::new).to_vec();
    seed(&mut tx, &seeds).unwrap();
    let mut walk = Holding {
        tx: &mut tx,
        held: vec!["a", "c"],
        probed: Vec::new(),
    };
    assert_eq!(
        ids(&claim_batch(&mut walk, "w", 10, 2).unwrap()),
        ["b", "d"]
    );
    assert_eq!(walk.probed, ["a", "b", "c", "d"]);
    let mut walk = Holding {
        tx: &mut tx,
        held: vec!["a", "c"],
        probed: Vec::new(),
    };
    // Every ready task held: none, though `a` and `c` stand ready.
    assert_eq!(claim_next(&mut walk, "w", 10).unwrap(), None);
    walk.held = vec![];
    // Free again: taken in claim order, the held ones first.
    assert_eq!(
        ids(&claim_batch(&mut walk, "w", 10, 5).unwrap()),
        ["a", "c"]
    );
    assert_indexes_exact(&tx);
}

/// A walk never holds a task it will not take: a grouped candidate is
/// probed alone (its grant walks again from the first queue), so the
/// candidates after it are not locked and left untaken — an overlapping
/// walk would have to pass over them.
#[test]
fn a_walk_probes_no_candidate_past_a_grouped_one() {
    let mut tx = MemTxn::default();
    let mut a = TaskSeed::new("a");
    a.group = Some("g".into());
    let mut b = TaskSeed::new("b");
    b.group = Some("g".into());
    seed(&mut tx, &[a, b, TaskSeed::new("c")]).unwrap();
    let mut walk = Holding {
        tx: &mut tx,
        held: vec![],
        probed: Vec::new(),
    };
    assert_eq!(
        ids(&claim_batch(&mut walk, "w", 10, 2).unwrap()),
        ["a", "b"]
    );
    assert_eq!(walk.probed, ["a", "b"]);
}

/// A task a walk meets late (a group's slot freed by a completion that
/// committed while the walk went on) is answered in its claim-order place,
/// before the tasks granted earlier: the batch is serialized after that
/// completion, where the late task comes first.
#[test]
fn a_batch_answers_a_task_it_met_late_in_claim_order() {
    let mut tx = MemTxn::default();
    seed(
        &mut tx,
        &[
            TaskSeed::new("busy").group("g0"),
            TaskSeed::new("late").group("g0"),
            TaskSeed::new("early").group("g1"),
        ],
    )
    .unwrap();
    set_group_limit(&mut tx, "g0", Some(1)).unwrap();
    let busy = claim(&mut tx, "busy", "other", 100).unwrap();
    let mut walk = Interleaved {
        tx: &mut tx,
        meanwhile: Some(|board: &mut MemTxn| {
            complete(board, "busy", token(&busy)).unwrap();
        }),
        first_queue_reads: 0,
        reads: Vec::new(),
    };
    let batch = claim_batch(&mut walk, "w", 10, 2).unwrap();
    assert!(walk.meanwhile.is_none(), "the completion ran mid-walk");
    assert_eq!(ids(&batch), ["late", "early"]);
    assert_indexes_exact(&tx);
}

#[test]
fn list_groups_pages_every_group_with_a_record() {
    let mut tx = MemTxn::default();
    set_group_limit(&mut tx, "b-limited", Some(2)).unwrap();
    seed(
        &mut tx,
        &[
            TaskSeed::new("a1").group("a-claimed"),
            TaskSeed::new("b1").group("b-limited"),
            TaskSeed::new("b2").group("b-limited"),
            TaskSeed::new("c1").group("c-ready"),
            TaskSeed::new("d1").group("d-delayed").not_before(100),
        ],
    )
    .unwrap();
    claim(&mut tx, "a1", "w", 10).unwrap();
    claim(&mut tx, "b1", "w", 50).unwrap();
    claim(&mut tx, "b2", "w", 10).unwrap();
    let all = list_groups(&mut tx, None, 1000).unwrap();
    let shown: Vec<(&str, Option<u32>, u32)> = all
        .items
        .iter()
        .map(|g| (g.name.as_str(), g.limit, g.live))
        .collect();
    // A group whose only task waits for its not-before is shown too.
    assert_eq!(
        shown,
        [
            ("a-claimed", None, 1),
            ("b-limited", Some(2), 2),
            ("c-ready", None, 0),
            ("d-delayed", None, 0)
        ]
    );
    assert_eq!(all.next, None);
    // Live counts are exact: an expired claim never counts.
    tx.clock = 10;
    let first = list_groups(&mut tx, None, 2).unwrap();
    let live: Vec<u32> = first.items.iter().map(|g| g.live).collect();
    assert_eq!(live, [0, 1]);
    assert_eq!(first.next.as_deref(), Some("b-limited"));
    let rest = list_groups(&mut tx, first.next.as_deref(), 2).unwrap();
    let names: Vec<&str> = rest.items.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["c-ready", "d-delayed"]);
    assert_eq!(rest.next, None);
    // Each group's tasks by state; a group whose tasks are all pruned, with
    // no limit, drops out.
    let figures = |tx: &mut MemTxn| -> Vec<(String, [u64; 5])> {
        let page = list_groups(tx, None, 1000).unwrap();
        page.items
            .into_iter()
            .map(|g| (g.name, [g.open, g.claimed, g.done, g.failed, g.dead]))
            .collect()
    };
    assert_eq!(figures(&mut tx)[1], ("b-limited".into(), [0, 2, 0, 0, 0]));
    let a1 = claim(&mut tx, "a1", "w", 10).unwrap();
    complete(&mut tx, "a1", token(&a1)).unwrap();
    assert_eq!(figures(&mut tx)[0], ("a-claimed".into(), [0, 0, 1, 0, 0]));
    crate::retention::prune(&mut tx, 11, 10).unwrap();
    assert_eq!(figures(&mut tx)[0].0, "b-limited");
    assert!(matches!(
        list_groups(&mut tx, None, 0),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        list_groups(&mut tx, Some(""), 10),
        Err(Error::InvalidInput(_))
    ));
}

#[test]
fn list_delayed_pages_by_due_time_and_reads_only_its_page() {
    let mut tx = MemTxn::default();
    let mut seeds: Vec<TaskSeed> = (0..10_000)
        .map(|i| TaskSeed::new(&format!("d{i:05}")).not_before(1_000 + (i % 7) * 100))
        .collect();
    seeds.push(TaskSeed::new("ready"));
    seeded(&mut tx, seeds);
    let t = claim(&mut tx, "ready", "w", 10).unwrap();
    fail(&mut tx, "ready", token(&t), "boom", Some(50)).unwrap();

    let mut rows = Rows(&mut tx, 0);
    let first = list_delayed(&mut rows, None, 3).unwrap();
    assert!(rows.1 <= 7, "a page of 3 read {} rows", rows.1);
    let order: Vec<(&str, Option<u64>)> = first
        .items
        .iter()
        .map(|t| (t.id.as_str(), t.not_before))
        .collect();
    // The failed task backs off until 50: due first. Then due time, then
    // seed order among tasks due at the same instant.
    assert_eq!(
        order,
        [
            ("ready", Some(50)),
            ("d00000", Some(1_000)),
            ("d00007", Some(1_000))
        ]
    );
    assert!(first.items.iter().all(|t| t.token.is_none()));
    let next = list_delayed(&mut tx, first.next.as_deref(), 2).unwrap();
    assert_eq!(ids(&next.items), ["d00014", "d00021"]);

    // Every delayed task, each once, by following the cursor.
    let mut seen = 0;
    let mut after: Option<String> = None;
    let mut last = 0;
    loop {
        let page = list_delayed(&mut tx, after.as_deref(), 1000).unwrap();
        for t in &page.items {
            let due = t.not_before.unwrap();
            assert!(due >= last, "out of due order");
            last = due;
        }
        seen += page.items.len();
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(seen, 10_001);

    // Due but not yet moved back: still shown; once a claimer moved it, gone.
    tx.clock = 60;
    assert_eq!(list_delayed(&mut tx, None, 1).unwrap().items[0].id, "ready");
    assert_eq!(claim_next(&mut tx, "w", 10).unwrap().unwrap().id, "ready");
    assert_eq!(
        list_delayed(&mut tx, None, 1).unwrap().items[0].id,
        "d00000"
    );

    for bad in ["", "x", "00/00", "0000000000000000/000000000000000G"] {
        assert!(
            matches!(
                list_delayed(&mut tx, Some(bad), 10),
                Err(Error::InvalidInput(_))
            ),
            "{bad:?}"
        );
    }
    assert!(matches!(
        list_delayed(&mut tx, None, 1001),
        Err(Error::InvalidInput(_))
    ));
}

#[test]
fn list_group_pages_a_groups_tasks_by_id_and_follows_reseeds() {
    let mut tx = MemTxn::default();
    let mut seeds: Vec<TaskSeed> = (0..5)
        .map(|i| {
            let mut s = TaskSeed::new(&format!("m{i}"));
            s.group = Some("mail".into());
            s
        })
        .collect();
    let mut other = TaskSeed::new("s0");
    other.group = Some("sms".into());
    seeds.push(other);
    seeds.push(TaskSeed::new("plain"));
    // A group whose name is a prefix of another's never shows its tasks.
    let mut longer = TaskSeed::new("x");
    longer.group = Some("mail2".into());
    seeds.push(longer);
    seed(&mut tx, &seeds).unwrap();
    let ids = |p: &TaskPage| p.items.iter().map(|t| t.id.clone()).collect::<Vec<_>>();
    let first = list_group(&mut tx, "mail", None, 2).unwrap();
    assert_eq!(ids(&first), ["m0", "m1"]);
    assert_eq!(first.next.as_deref(), Some("m1"));
    let rest = list_group(&mut tx, "mail", first.next.as_deref(), 10).unwrap();
    assert_eq!(ids(&rest), ["m2", "m3", "m4"]);
    assert_eq!(rest.next, None);
    assert!(rest.items.iter().all(|t| t.token.is_none()));
    // Claims, completions and a re-seed into another group.
    let t = claim(&mut tx, "m2", "w", 100).unwrap();
    complete(&mut tx, "m2", token(&t)).unwrap();
    let mut moved = TaskSeed::new("m3");
    moved.group = Some("sms".into());
    seed(&mut tx, &[moved, TaskSeed::new("m4")]).unwrap();
    assert_eq!(
        ids(&list_group(&mut tx, "mail", None, 10).unwrap()),
        ["m0", "m1", "m2"]
    );
    assert_eq!(
        ids(&list_group(&mut tx, "sms", None, 10).unwrap()),
        ["m3", "s0"]
    );
    assert_eq!(list_group(&mut tx, "none", None, 10).unwrap().items, []);
    // Pruned tasks leave their group's listing.
    crate::retention::prune(&mut tx, u64::MAX >> 11, 100).unwrap();
    assert_eq!(
        ids(&list_group(&mut tx, "mail", None, 10).unwrap()),
        ["m0", "m1"]
    );
    for (group, after, limit) in [
        ("", None, 10),
        ("mail", Some(""), 10),
        ("mail", None, 0),
        ("mail", None, 1001),
    ] {
        assert!(matches!(
            list_group(&mut tx, group, after, limit),
            Err(Error::InvalidInput(_))
        ));
    }
}
