//! A read's range reads, many at once, answer exactly what each would
//! alone, on every Rust binding: the PostgreSQL binding sends the ranges of
//! one table as one statement (a LATERAL join over their bounds) when a
//! read carries several, as `complete-batch` does (two per item). Checked
//! against a byte-ordered map of what was written, committed and not yet
//! committed, with strict and inclusive lower bounds, empty prefixes
//! (no upper bound), limits and mixed tables.
//!
//! The same holds for point reads and write sets of many keys: from 16 keys
//! the PostgreSQL binding sends them as `gak_read_many_v1` and
//! `gak_write_many_v1` (one statement per table over the arrays) instead of
//! one statement per key; they must answer and apply exactly what the
//! per-key functions do.
use std::collections::BTreeMap;

use gak::blocking::run_future as run;
use gak::store::{Backend, Span, Write};
use gak_tests::suite::{POSTGRES, Suite};

/// Keys written to `indexes` and `tasks` (the committed ones, then the
/// ones the reading transaction writes itself). Values are written in the
/// form PostgreSQL's jsonb answers, so every binding answers the same text.
const COMMITTED: &[&str] = &[
    "a/",
    "a/1",
    "a/2",
    "a/3",
    "a/30",
    "a0",
    "b/1",
    "b/2",
    "d/3:abc/x",
    "d/3:abc/y",
    "d/3:abd/z",
    "h/1",
    "q/0001",
    "q/0002",
    "qc/1",
    "\u{e000}k",
    "z",
];
const OWN: &[&str] = &["a/25", "b/0", "q/0003", "\u{d7ff}"];

/// What a range read must answer, from `map`.
fn expected(map: &BTreeMap<(String, String), String>, span: &Span<'_>) -> Vec<(String, String)> {
    map.iter()
        .filter(|((t, k), _)| {
            t == span.table
                && k.starts_with(span.prefix)
                && span.after.is_none_or(|a| k.as_str() > a)
        })
        .take(span.limit as usize)
        .map(|((_, k), v)| (k.clone(), v.clone()))
        .collect()
}

type Entries = BTreeMap<(String, String), String>;

/// Entries for `keys` in both tables, recorded in `map` too.
fn entries(keys: &[&str], map: &mut Entries) -> Vec<(&'static str, String, String)> {
    let mut ws = Vec::new();
    for table in ["indexes", "tasks"] {
        for k in keys {
            let value = format!("{{\"v\": \"{table}:{k}\"}}");
            map.insert((table.to_owned(), (*k).to_owned()), value.clone());
            ws.push((table, (*k).to_owned(), value));
        }
    }
    ws
}

fn as_writes<'a>(entries: &'a [(&'static str, String, String)]) -> Vec<Write<'a>> {
    entries
        .iter()
        .map(|(table, key, value)| Write {
            table,
            key,
            value: Some(value),
        })
        .collect()
}

fn ranges_answer_as_alone(backend: &dyn Backend) {
    let mut map = Entries::new();
    let first = entries(COMMITTED, &mut map);
    let own = entries(OWN, &mut map);
    run(async {
        let mut session = backend.session().await.expect("session");
        session.begin().await.expect("begin");
        session.write(&as_writes(&first)).await.expect("write");
        session.commit().await.expect("commit");

        session.begin().await.expect("begin");
        session.write(&as_writes(&own)).await.expect("own writes");
        let spans = [
            Span {
                table: "indexes",
                prefix: "a/",
                after: None,
                limit: 100,
            },
            Span {
                table: "indexes",
                prefix: "a/",
                after: Some("a/2"),
                limit: 100,
            },
            Span {
                table: "indexes",
                prefix: "a/",
                after: Some("a/"),
                limit: 2,
            },
            Span {
                table: "indexes",
                prefix: "a/",
                after: Some("0"),
                limit: 100,
            },
            Span {
                table: "indexes",
                prefix: "d/3:abc/",
                after: None,
                limit: 100,
            },
            Span {
                table: "indexes",
                prefix: "d/3:abe/",
                after: None,
                limit: 100,
            },
            Span {
                table: "indexes",
                prefix: "",
                after: None,
                limit: 5,
            },
            Span {
                table: "indexes",
                prefix: "",
                after: Some("q/0002"),
                limit: 100,
            },
            Span {
                table: "tasks",
                prefix: "b/",
                after: None,
                limit: 100,
            },
            Span {
                table: "indexes",
                prefix: "b/",
                after: Some("b/0"),
                limit: 1,
            },
            Span {
                table: "tasks",
                prefix: "",
                after: Some("z"),
                limit: 100,
            },
            Span {
                table: "indexes",
                prefix: "q",
                after: None,
                limit: 1000,
            },
            Span {
                table: "indexes",
                prefix: "\u{d7ff}",
                after: None,
                limit: 10,
            },
        ];
        // Enough ranges of one table that the PostgreSQL binding joins them
        // into one statement (it does from 16).
        let extra: Vec<String> = ('a'..='z').map(|c| format!("d/3:ab{c}/")).collect();
        let spans: Vec<Span<'_>> = spans
            .into_iter()
            .chain(extra.iter().map(|prefix| Span {
                table: "indexes",
                prefix,
                after: None,
                limit: 3,
            }))
            .collect();
        let (_, together) = session.read(&[], &spans).await.expect("read together");
        assert_eq!(together.len(), spans.len());
        for (span, page) in spans.iter().zip(&together) {
            assert_eq!(page, &expected(&map, span), "{span:?} read with the others");
            let (_, alone) = session
                .read(&[], std::slice::from_ref(span))
                .await
                .expect("read alone");
            assert_eq!(alone, vec![page.clone()], "{span:?} alone");
        }
        // With point reads in the same read, and the same table twice over.
        let keys = [("indexes", "a/1"), ("tasks", "nope")];
        let (values, pages) = session
            .read(&keys, &spans[..3])
            .await
            .expect("points and ranges");
        assert_eq!(
            values[0].as_deref(),
            Some(map[&("indexes".into(), "a/1".into())].as_str())
        );
        assert_eq!(values[1], None);
        assert_eq!(pages, together[..3].to_vec());
        session.rollback().await;
    });
}

/// The value `key` of `table` holds in generation `n` (downstream holds
/// text; the kernel's tables jsonb, in the form PostgreSQL answers).
fn value(table: &str, key: &str, n: u32) -> String {
    if table == "downstream" {
        format!("{table}:{key}:{n}")
    } else {
        format!("{{\"v\": \"{table}:{key}:{n}\"}}")
    }
}

/// Apply `changes` (none deletes) to `map` and as one write set.
async fn apply(
    session: &mut Box<dyn gak::store::Session>,
    map: &mut Entries,
    changes: &[(&'static str, String, Option<String>)],
) {
    let writes: Vec<Write<'_>> = changes
        .iter()
        .map(|(table, key, value)| Write {
            table,
            key,
            value: value.as_deref(),
        })
        .collect();
    session.write(&writes).await.expect("write set");
    for (table, key, value) in changes {
        match value {
            Some(v) => map.insert(((*table).to_owned(), key.clone()), v.clone()),
            None => map.remove(&((*table).to_owned(), key.clone())),
        };
    }
}

/// `keys` read together answer what `map` holds, in order, and each read
/// alone answers the same.
async fn check_points(
    session: &mut Box<dyn gak::store::Session>,
    map: &Entries,
    keys: &[(&'static str, String)],
    what: &str,
) {
    let asked: Vec<(&'static str, &str)> = keys.iter().map(|(t, k)| (*t, k.as_str())).collect();
    let expected: Vec<Option<String>> = keys
        .iter()
        .map(|(t, k)| map.get(&((*t).to_owned(), k.clone())).cloned())
        .collect();
    let (together, _) = session.read(&asked, &[]).await.expect("read together");
    assert_eq!(together, expected, "{what}: read together");
    for (i, key) in asked.iter().enumerate() {
        let (alone, _) = session
            .read(std::slice::from_ref(key), &[])
            .await
            .expect("read alone");
        assert_eq!(alone, vec![together[i].clone()], "{what}: {key:?} alone");
    }
}

/// Point reads of many keys (some absent, some deleted, one twice) answer
/// in order what each key holds, read together and read alone, after write
/// sets of many keys that insert, overwrite and delete across tables.
fn points_and_writes_in_bulk(backend: &dyn Backend) {
    const TABLES: [&str; 4] = ["tasks", "indexes", "meta", "downstream"];
    let mut map = Entries::new();
    run(async {
        let mut session = backend.session().await.expect("session");
        session.begin().await.expect("begin");
        let first: Vec<(&'static str, String, Option<String>)> = TABLES
            .iter()
            .flat_map(|t| {
                (0..10).map(move |i| {
                    (
                        *t,
                        format!("k{i:02}"),
                        Some(value(t, &format!("k{i:02}"), 0)),
                    )
                })
            })
            .collect();
        apply(&mut session, &mut map, &first).await;
        session.commit().await.expect("commit");

        // Deletes, overwrites, inserts and the delete of an absent key.
        let mut second: Vec<(&'static str, String, Option<String>)> = Vec::new();
        for i in 0..5 {
            second.push(("tasks", format!("k{i:02}"), None));
            second.push((
                "indexes",
                format!("k{i:02}"),
                Some(value("indexes", &format!("k{i:02}"), 1)),
            ));
        }
        for i in 0..10 {
            second.push((
                "meta",
                format!("n{i:02}"),
                Some(value("meta", &format!("n{i:02}"), 1)),
            ));
        }
        second.push(("downstream", "k09".to_owned(), None));
        second.push(("tasks", "gone".to_owned(), None));
        assert!(second.len() >= 16);
        session.begin().await.expect("begin");
        apply(&mut session, &mut map, &second).await;
        session.commit().await.expect("commit");

        let keys: Vec<(&'static str, String)> = [
            ("meta", "n07"),
            ("tasks", "k00"),
            ("tasks", "k07"),
            ("indexes", "k03"),
            ("downstream", "k09"),
            ("downstream", "k08"),
            ("tasks", "gone"),
            ("indexes", "k09"),
            ("meta", "k00"),
            ("snapshots", "k00"),
            ("tasks", "k07"),
            ("meta", "n00"),
            ("indexes", "k00"),
            ("tasks", "k04"),
            ("tasks", "k05"),
            ("meta", "n09"),
            ("downstream", "k00"),
            ("outcomes", "x"),
        ]
        .iter()
        .map(|(t, k)| (*t, (*k).to_owned()))
        .collect();
        session.begin().await.expect("begin");
        check_points(&mut session, &map, &keys, "committed").await;
        // The transaction's own write set of many keys, seen by its next read.
        let mut own: Vec<(&'static str, String, Option<String>)> = Vec::new();
        for i in 5..10 {
            own.push(("tasks", format!("k{i:02}"), None));
            own.push((
                "meta",
                format!("n{i:02}"),
                Some(value("meta", &format!("n{i:02}"), 2)),
            ));
            own.push((
                "downstream",
                format!("k{i:02}"),
                Some(value("downstream", &format!("k{i:02}"), 2)),
            ));
            own.push((
                "snapshots",
                format!("k{:02}", i - 5),
                Some(value("snapshots", &format!("k{:02}", i - 5), 2)),
            ));
        }
        assert!(own.len() >= 16);
        apply(&mut session, &mut map, &own).await;
        check_points(&mut session, &map, &keys, "own writes").await;
        session.rollback().await;
    });
}

fn main() {
    let mut suite = Suite::new();
    suite.test("ranges_answer_as_alone_memory", || {
        let backend = gak::store::memory::MemoryBackend::default();
        ranges_answer_as_alone(&backend);
    });
    suite.test("ranges_answer_as_alone_sqlite", || {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite:{}", dir.path().join("r.db").display());
        let backend = run(gak::store::open(&url)).expect("sqlite");
        ranges_answer_as_alone(&*backend);
    });
    suite.needs(&POSTGRES, "ranges_answer_as_alone_postgres", |dsn: &str| {
        let schema = gak_tests::pg::Schema::new(dsn, "ranges");
        let backend = gak::store::postgres::PostgresBackend::parse(&schema.url).expect("url");
        ranges_answer_as_alone(&backend);
    });
    suite.test("points_and_writes_in_bulk_memory", || {
        points_and_writes_in_bulk(&gak::store::memory::MemoryBackend::default());
    });
    suite.test("points_and_writes_in_bulk_sqlite", || {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite:{}", dir.path().join("p.db").display());
        let backend = run(gak::store::open(&url)).expect("sqlite");
        points_and_writes_in_bulk(&*backend);
    });
    suite.needs(
        &POSTGRES,
        "points_and_writes_in_bulk_postgres",
        |dsn: &str| {
            let schema = gak_tests::pg::Schema::new(dsn, "bulk");
            let backend = gak::store::postgres::PostgresBackend::parse(&schema.url).expect("url");
            points_and_writes_in_bulk(&backend);
        },
    );
    suite.run();
}
