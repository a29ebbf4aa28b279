use super::*;
use crate::testing::MemTxn;
use crate::{Acquired, Action, TaskSeed, sideeffect, taskboard};

/// A store that counts its crossings and records what it was asked.
#[derive(Default)]
struct Counting {
    inner: MemTxn,
    reads: Vec<Reads>,
    writes: Vec<Vec<Change>>,
}

impl Store for Counting {
    fn read(&mut self, reads: Reads) -> Result<Answers, StoreFault> {
        self.reads.push(reads.clone());
        crate::buffer::Store::read(&mut self.inner, reads)
    }
    fn write(&mut self, changes: Vec<Change>) -> Result<(), StoreFault> {
        self.writes.push(changes.clone());
        self.inner.write(changes)
    }
}

impl Counting {
    fn crossings(&self) -> usize {
        self.reads.len() + self.writes.len()
    }
    fn put(&mut self, key: &str, value: &str) {
        Txn::put(&mut self.inner, Table::Indexes, key, value).unwrap();
    }
}

#[test]
fn reads_see_the_calls_own_writes_without_crossing() {
    let mut store = Counting::default();
    store.put("k", "committed");
    let mut tx = Buffered::new(&mut store);
    assert_eq!(
        tx.get(Table::Indexes, "k").unwrap().as_deref(),
        Some("committed")
    );
    tx.put(Table::Indexes, "k", "mine").unwrap();
    tx.put(Table::Indexes, "new", "n").unwrap();
    tx.delete(Table::Indexes, "gone").unwrap();
    let got = tx
        .get_many(&[
            (Table::Indexes, "k"),
            (Table::Indexes, "new"),
            (Table::Indexes, "gone"),
        ])
        .unwrap();
    assert_eq!(got, vec![Some("mine".into()), Some("n".into()), None]);
    assert_eq!(tx.crossings(), 1, "only the first read crossed");
    assert_eq!(
        tx.finish(false).unwrap(),
        1,
        "a refusal hands over no write set"
    );
    assert!(store.writes.is_empty());
    assert_eq!(
        store.inner.get(Table::Indexes, "k").unwrap().as_deref(),
        Some("committed")
    );
}

#[test]
fn a_get_many_asks_only_for_the_keys_it_has_not_written() {
    let mut store = Counting::default();
    store.put("b", "B");
    let mut tx = Buffered::new(&mut store);
    tx.put(Table::Indexes, "a", "mine").unwrap();
    let got = tx
        .get_many(&[
            (Table::Indexes, "a"),
            (Table::Indexes, "b"),
            (Table::Indexes, "c"),
        ])
        .unwrap();
    assert_eq!(got, vec![Some("mine".into()), Some("B".into()), None]);
    drop(tx);
    assert_eq!(
        store.reads[0].keys,
        vec![
            (Table::Indexes, "b".to_owned()),
            (Table::Indexes, "c".to_owned())
        ]
    );
}

#[test]
fn a_range_read_merges_pending_writes_and_still_fills_its_page() {
    let mut store = Counting::default();
    for k in ["p/a", "p/b", "p/c", "p/d", "q/x"] {
        store.put(k, k);
    }
    let mut tx = Buffered::new(&mut store);
    tx.delete(Table::Indexes, "p/a").unwrap();
    tx.delete(Table::Indexes, "p/b").unwrap();
    tx.put(Table::Indexes, "p/bb", "mine").unwrap();
    tx.put(Table::Indexes, "q/y", "other prefix").unwrap();
    let page = tx.scan(Table::Indexes, "p/", None, 2).unwrap();
    assert_eq!(
        page,
        vec![("p/bb".into(), "mine".into()), ("p/c".into(), "p/c".into())]
    );
    let after = tx.scan(Table::Indexes, "p/", Some("p/bb"), 10).unwrap();
    assert_eq!(
        after,
        vec![("p/c".into(), "p/c".into()), ("p/d".into(), "p/d".into())]
    );
    drop(tx);
    // Two deletes inside the range: the committed read asked for two more.
    assert_eq!(store.reads[0].ranges[0].limit, 4);
    assert_eq!(
        store.reads[1].ranges[0].limit, 10,
        "no pending delete after p/bb"
    );
}

#[test]
fn the_first_read_carries_the_clock_and_the_announced_entropy() {
    let mut store = Counting::default();
    store.inner.clock = 77;
    let mut tx = Buffered::new(&mut store).minting(1);
    tx.get(Table::Tasks, "t").unwrap();
    assert_eq!(tx.now().unwrap(), 77);
    let a = tx.random128().unwrap();
    tx.get(Table::Tasks, "u").unwrap();
    assert_eq!(tx.crossings(), 2);
    let b = tx.random128().unwrap();
    assert_ne!(a, b);
    assert_eq!(
        tx.crossings(),
        3,
        "entropy beyond what was announced costs a read"
    );
    drop(tx);
    assert!(store.reads[0].clock && store.reads[0].entropy == 16);
    assert!(!store.reads[1].clock && store.reads[1].entropy == 0);
    assert!(store.reads[2].keys.is_empty() && store.reads[2].entropy == 16);
}

#[test]
fn the_clock_before_any_read_costs_one_crossing() {
    let mut store = Counting::default();
    store.inner.clock = 5;
    let mut tx = Buffered::new(&mut store);
    assert_eq!(tx.now().unwrap(), 5);
    assert_eq!(tx.now().unwrap(), 5);
    assert_eq!(tx.crossings(), 1);
}

#[test]
fn the_write_set_goes_once_each_key_once_in_table_and_key_order() {
    let mut store = Counting::default();
    let mut tx = Buffered::new(&mut store);
    tx.put(Table::Tasks, "b", "1").unwrap();
    tx.put(Table::Indexes, "z", "1").unwrap();
    tx.put(Table::Tasks, "a", "1").unwrap();
    tx.put(Table::Tasks, "b", "2").unwrap();
    tx.delete(Table::Tasks, "a").unwrap();
    assert_eq!(tx.finish(true).unwrap(), 1);
    assert_eq!(store.writes.len(), 1);
    let order: Vec<(Table, &str, Option<&str>)> = store.writes[0]
        .iter()
        .map(|c| (c.table, c.key.as_str(), c.value.as_deref()))
        .collect();
    assert_eq!(
        order,
        vec![
            (Table::Tasks, "a", None),
            (Table::Tasks, "b", Some("2")),
            (Table::Indexes, "z", Some("1")),
        ]
    );
}

#[test]
fn a_call_that_only_reads_hands_over_nothing() {
    let mut store = Counting::default();
    let mut tx = Buffered::new(&mut store);
    tx.get(Table::Tasks, "t").unwrap();
    assert_eq!(tx.finish(true).unwrap(), 1);
    assert!(store.writes.is_empty());
}

#[test]
fn a_store_that_answers_the_wrong_shape_fails_the_read() {
    struct Short;
    impl Store for Short {
        fn read(&mut self, _: Reads) -> Result<Answers, StoreFault> {
            Ok(Answers {
                now: Some(1),
                ..Answers::default()
            })
        }
        fn write(&mut self, _: Vec<Change>) -> Result<(), StoreFault> {
            Ok(())
        }
    }
    let mut tx = Buffered::new(Short);
    assert!(matches!(
        tx.get(Table::Tasks, "t"),
        Err(StoreFault::Failure(_))
    ));
    let mut tx = Buffered::new(Short).minting(1);
    assert!(
        matches!(tx.now(), Err(StoreFault::Failure(_))),
        "no entropy answered"
    );
}

/// WIT target (issue 18): a claim and an acquire cross the store boundary
/// twice (one read, one write; the export is the third crossing), on a
/// board of any size.
#[test]
fn a_claim_and_an_acquire_cross_twice_on_any_board() {
    for board in [1usize, 100, 5_000] {
        let mut store = Counting::default();
        let seeds: Vec<TaskSeed> = (0..board)
            .map(|i| TaskSeed::new(&format!("t{i}")))
            .collect();
        taskboard::seed(&mut store.inner, &seeds).unwrap();
        let before = store.crossings();
        // As the component runs a claim: its count record comes along.
        let mut tx = Buffered::new(&mut store).minting(1).counting();
        let task = taskboard::claim(&mut tx, &format!("t{}", board / 2), "w", 1000).unwrap();
        assert_eq!(tx.finish(true).unwrap(), 2, "claim on a board of {board}");
        assert_eq!(task.fence, 1);
        assert_eq!(store.crossings() - before, 2);

        let mut tx = Buffered::new(&mut store).minting(1).counting();
        let got = sideeffect::acquire(&mut tx, &Action::new(&format!("k{board}"), "r"), 1000);
        assert!(matches!(got, Ok(Acquired::Granted(_))));
        assert_eq!(
            tx.finish(true).unwrap(),
            2,
            "acquire with {board} tasks stored"
        );
    }
}

/// The same rules give the same answers and leave the same data through
/// the buffer as directly over the map.
#[test]
fn buffered_and_direct_runs_store_the_same_data() {
    let mut direct = MemTxn::default();
    let mut store = Counting::default();
    let seeds = [
        TaskSeed::new("a"),
        TaskSeed::new("b").deps(&["a"]),
        TaskSeed::new("c").deps(&["a", "b"]),
    ];
    taskboard::seed(&mut direct, &seeds).unwrap();
    let mut tx = Buffered::new(&mut store);
    taskboard::seed(&mut tx, &seeds).unwrap();
    tx.finish(true).unwrap();
    for id in ["a", "b", "c"] {
        let d = taskboard::claim_next(&mut direct, "w", 1000)
            .unwrap()
            .unwrap();
        let mut tx = Buffered::new(&mut store).minting(1);
        let b = taskboard::claim_next(&mut tx, "w", 1000).unwrap().unwrap();
        tx.finish(true).unwrap();
        assert_eq!((d.id.as_str(), d.fence), (id, b.fence));
        assert_eq!(b.id, id);
        taskboard::complete(&mut direct, id, d.token.as_deref().unwrap()).unwrap();
        let mut tx = Buffered::new(&mut store);
        taskboard::complete(&mut tx, id, b.token.as_deref().unwrap()).unwrap();
        tx.finish(true).unwrap();
    }
    let strip = |m: &MemTxn| -> Vec<(Table, String)> { m.data.keys().cloned().collect() };
    assert_eq!(strip(&direct), strip(&store.inner));
}

/// The overlay's key order is the bytes' order, for keys that differ
/// anywhere: inside the first word, past it, in a tail shorter than a
/// word, by length alone, and in bytes above 0x7f.
#[test]
fn keys_sort_as_their_bytes() {
    let mut keys: Vec<String> = vec![String::new()];
    for stem in [
        "",
        "a",
        "ts/claimed/job-000000",
        "ts/claimed/job-0000001",
        "q/é",
        "q/\u{ff}",
    ] {
        for tail in [
            "",
            "0",
            "1",
            "01234567",
            "012345670",
            "01234568",
            "\u{80}",
            "z",
        ] {
            keys.push(format!("{stem}{tail}"));
            keys.push(format!("{tail}{stem}"));
        }
    }
    for a in &keys {
        for b in &keys {
            assert_eq!(
                super::bytewise(a.as_bytes(), b.as_bytes()),
                a.as_bytes().cmp(b.as_bytes()),
                "{a:?} vs {b:?}"
            );
        }
    }
    let mut overlay: Overlay<u8> = Overlay::default();
    for k in &keys {
        overlay.set(0, k, Some(k));
    }
    let mut sorted = keys.clone();
    sorted.sort();
    sorted.dedup();
    let drained: Vec<String> = overlay.drain().map(|(_, k, _)| k).collect();
    assert_eq!(drained, sorted);
}
