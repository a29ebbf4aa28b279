//! Capabilities are not stored in the clear (FORMAT.md: task tokens,
//! side-effect holders and reconcile claims only as SHA-256 digests).
//!
//! A run on every binding mints tokens (claims, claim-next), holders
//! (grants) and reconcile claims and leaves most of them live; then every
//! table the binding has is read raw — for SQLite and PostgreSQL from the
//! database's own catalogue, not from the kernel's list of tables — and no
//! capability may appear in any key or value, as hex (either case) or as
//! base64 of its bytes or of its hex.
use std::sync::Arc;

use gak::blocking::Kernel;
use gak::{Acquired, Action, ManualClock, TaskSeed};
use gak_tests::pg;
use gak_tests::suite::{POSTGRES, Suite};

const T0: u64 = 1_700_000_000_000;
const TTL: u64 = 60_000;

/// Mint capabilities of every kind; returns them (most still live).
fn mint(kernel: &Kernel, clock: &ManualClock) -> Vec<String> {
    let mut caps = Vec::new();
    let tb = kernel.taskboard();
    tb.seed(&[
        TaskSeed::new("held"),
        TaskSeed::new("done"),
        TaskSeed::new("next"),
        TaskSeed::new("renewed"),
    ])
    .unwrap();
    let held = tb.claim("held", "w1", TTL).unwrap();
    caps.extend(held.token);
    let done = tb.claim("done", "w1", TTL).unwrap();
    let done_token = done.token.unwrap();
    tb.complete("done", &done_token).unwrap();
    caps.push(done_token);
    let renewed = tb.claim("renewed", "w2", TTL).unwrap();
    caps.extend(
        tb.renew("renewed", renewed.token.as_deref().unwrap(), TTL)
            .unwrap()
            .token,
    );
    caps.extend(renewed.token);
    let next = tb.claim_next("w3", TTL).unwrap().expect("a ready task");
    caps.extend(next.token);
    // The queue (0.4): tokens of a batch (one seed, a PRF), one completed
    // in a batch, one failed (its failed-by digest stays), one dead, and
    // a grouped claim (the group record keeps claims by task id only).
    tb.set_group_limit("g", Some(5)).unwrap();
    tb.seed(&[
        TaskSeed::new("b1"),
        TaskSeed::new("b2").max_attempts(1),
        TaskSeed::new("b3"),
        TaskSeed::new("b4").group("g"),
    ])
    .unwrap();
    let batch = tb.claim_batch("w4", TTL, 4).unwrap();
    assert_eq!(batch.len(), 4, "{batch:?}");
    let token = |id: &str| {
        batch
            .iter()
            .find(|t| t.id == id)
            .and_then(|t| t.token.clone())
            .unwrap()
    };
    tb.complete_batch(&[gak::Completion::new("b1", &token("b1"))])
        .unwrap();
    tb.fail("b2", &token("b2"), "gone", None).unwrap();
    tb.fail("b3", &token("b3"), "again", Some(TTL)).unwrap();
    caps.extend(batch.into_iter().filter_map(|t| t.token));

    let se = kernel.sideeffect();
    let grant = |key: &str, resource: &str| match se.acquire(&Action::new(key, resource), TTL) {
        Ok(Acquired::Granted(lease)) => lease,
        other => panic!("{key}: {other:?}"),
    };
    // In flight.
    caps.push(grant("in-flight", "r1").holder);
    // Completed.
    let completed = grant("completed", "r2");
    se.complete(&Action::new("completed", "r2"), &completed, b"ok")
        .unwrap();
    caps.push(completed.holder);
    // Uncertain under a live reconcile claim (and its hold still held).
    let marked = Action::new("uncertain", "r3");
    let lease = grant("uncertain", "r3");
    se.mark_uncertain(&marked, &lease, "timeout").unwrap();
    caps.push(lease.holder);
    caps.push(se.begin_reconcile(&marked, TTL).unwrap().claim);
    // An expired intent, and a reconcile claim taken over after expiry.
    let expired = Action::new("expired", "r4");
    caps.push(grant("expired", "r4").holder);
    clock.advance(TTL);
    caps.push(se.begin_reconcile(&expired, 10).unwrap().claim);
    clock.advance(10);
    caps.push(se.begin_reconcile(&expired, TTL).unwrap().claim);
    assert!(caps.len() >= 16, "{caps:?}");
    for c in &caps {
        assert_eq!(c.len(), 32, "a capability is 128 bits of hex: {c}");
    }
    caps
}

fn base64(bytes: &[u8], alphabet: &[u8; 64], pad: bool) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(alphabet[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
        if pad {
            for _ in chunk.len()..3 {
                out.push('=');
            }
        }
    }
    out
}

/// Every way a capability could sit in a table in the clear.
fn encodings(cap: &str) -> Vec<String> {
    const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let raw: Vec<u8> = (0..cap.len() / 2)
        .map(|i| u8::from_str_radix(&cap[2 * i..2 * i + 2], 16).expect("hex"))
        .collect();
    let mut all = vec![cap.to_lowercase(), cap.to_uppercase()];
    for bytes in [raw.as_slice(), cap.as_bytes()] {
        for alphabet in [STD, URL] {
            // Without padding, a prefix also catches the padded form.
            all.push(base64(bytes, alphabet, false));
        }
    }
    all
}

/// Err names each capability found in `rows` (table, key, value).
fn find_capabilities(rows: &[(String, String, String)], caps: &[String]) -> Result<(), String> {
    let mut found = Vec::new();
    for cap in caps {
        for form in encodings(cap) {
            for (table, key, value) in rows {
                if key.contains(&form) || value.contains(&form) {
                    found.push(format!("{cap} as {form:?} in {table} / {key}: {value}"));
                }
            }
        }
    }
    if found.is_empty() {
        Ok(())
    } else {
        Err(found.join("\n"))
    }
}

fn check(rows: &[(String, String, String)], caps: &[String], binding: &str) {
    assert!(rows.len() > 20, "{binding}: read only {} rows", rows.len());
    for table in ["tasks", "actions", "resources"] {
        assert!(
            rows.iter().any(|(t, _, _)| t.ends_with(table)),
            "{binding}: no row of {table} was read"
        );
    }
    find_capabilities(rows, caps)
        .unwrap_or_else(|why| panic!("{binding}: a capability is stored in the clear:\n{why}"));
}

fn memory() {
    let clock = Arc::new(ManualClock::at(T0));
    let backend = Arc::new(gak::store::memory::MemoryBackend::default());
    let kernel = Kernel::with_backend(backend.clone(), clock.clone()).unwrap();
    let caps = mint(&kernel, &clock);
    let rows: Vec<(String, String, String)> = backend
        .entries()
        .into_iter()
        .map(|((t, k), v)| (t, k, v))
        .collect();
    check(&rows, &caps, "memory");
}

fn sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("caps.db");
    let clock = Arc::new(ManualClock::at(T0));
    let backend =
        gak::blocking::run_future(gak::store::open(&format!("sqlite:{}", path.display()))).unwrap();
    let kernel = Kernel::with_backend(backend, clock.clone()).unwrap();
    let caps = mint(&kernel, &clock);
    drop(kernel);
    // Every table in the file, whatever the kernel calls its tables.
    let conn = gak::rusqlite::Connection::open(&path).unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut rows = Vec::new();
    for table in &tables {
        let mut stmt = conn.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
        let columns = stmt.column_count();
        let mut query = stmt.query([]).unwrap();
        while let Some(row) = query.next().unwrap() {
            let cells: Vec<String> = (0..columns)
                .map(|i| match row.get_ref(i).unwrap() {
                    gak::rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into(),
                    gak::rusqlite::types::ValueRef::Blob(b) => String::from_utf8_lossy(b).into(),
                    other => format!("{other:?}"),
                })
                .collect();
            rows.push((table.clone(), cells[0].clone(), cells[1..].join(" ")));
        }
    }
    check(&rows, &caps, "sqlite");
}

fn postgres(dsn: &str) {
    let schema = pg::Schema::new(dsn, "caps");
    let clock = Arc::new(ManualClock::at(T0));
    let kernel = schema.kernel_with(clock.clone());
    let caps = mint(&kernel, &clock);
    // Every table in the schema, from the catalogue, each row as text.
    let name = schema.name.clone();
    let rows = kernel
        .with_downstream(move |d| {
            let tables = d
                .postgres_query(
                    "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1",
                    &[&name],
                )
                .expect("postgres")?;
            let mut rows = Vec::new();
            for t in tables {
                let table = t[0].clone().unwrap_or_default();
                let all = d
                    .postgres_query(
                        &format!("SELECT r::text FROM \"{name}\".\"{table}\" r"),
                        &[],
                    )
                    .expect("postgres")?;
                for r in all {
                    rows.push((table.clone(), String::new(), r[0].clone().unwrap_or_default()));
                }
            }
            Ok(rows)
        })
        .unwrap();
    check(&rows, &caps, "postgres");
}

/// The check itself finds a capability in any of its forms.
fn the_check_finds_capabilities_in_the_clear() {
    let cap = "0123456789abcdef00ff00ff00ff00ff".to_owned();
    let caps = [cap.clone()];
    let row = |v: &str| vec![("tasks".to_owned(), "t".to_owned(), v.to_owned())];
    assert!(find_capabilities(&row(r#"{"v":1,"token-sha256":"9f86d0"}"#), &caps).is_ok());
    for leak in encodings(&cap) {
        assert!(
            find_capabilities(&row(&format!(r#"{{"token":"{leak}=="}}"#)), &caps).is_err(),
            "{leak}"
        );
    }
    assert_eq!(encodings(&cap)[2], "ASNFZ4mrze8A/wD/AP8A/w");
    let key = vec![("indexes".to_owned(), format!("x/{cap}"), "{}".to_owned())];
    assert!(find_capabilities(&key, &caps).is_err());
}

fn main() {
    let mut suite = Suite::new();
    suite.test("no_capability_in_the_clear_on_memory", memory);
    suite.test("no_capability_in_the_clear_on_sqlite", sqlite);
    suite.needs(
        &POSTGRES,
        "no_capability_in_the_clear_on_postgres",
        postgres,
    );
    suite.test(
        "the_check_finds_capabilities_in_the_clear",
        the_check_finds_capabilities_in_the_clear,
    );
    suite.run();
}
