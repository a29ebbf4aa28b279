//! Data survives upgrades: golden databases written by stored format 1.
//!
//! [`write()`] puts a store in every state format 1 can hold (open, claimed,
//! done and failed tasks; cleared, in-flight, expired, uncertain and
//! completed keys; a live reconcile claim; resources, a sink and its
//! downstream write; snapshots, step and run outcomes; every index kind; the
//! board's meta record). `gak-golden` (`src/bin/golden.rs`) runs it once and
//! checks the result in under `tests/golden/`; `tests/tests/golden.rs` opens
//! a copy with the current kernel and [`replay`]s a fixed scenario on it.
//! A change that cannot read format 1 fails there.
use std::collections::BTreeSet;

use gak::blocking::Kernel;
use gak::{
    Acquired, Action, Error, Lease, ManualClock, Outcome, Pruned, Resolution, Resolved, Snapshot,
    Status, StepDef, TaskSeed, TaskState,
};
use serde_json::{Value, json};

/// The generator's clock: every time stored in the golden databases is
/// relative to it.
pub const T0: u64 = 1_700_000_000_000;
const MINUTE: u64 = 60_000;
/// When the replay runs: an hour after the golden data was written.
pub const REPLAY_AT: u64 = T0 + 60 * MINUTE;
const DAY: u64 = 24 * 60 * MINUTE;

/// The capabilities the generator was handed (the store keeps only their
/// digests): a replay presents them, as a worker that survived the upgrade
/// would.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// The token of task `c`'s live claim.
    pub claim_token: String,
    /// The token that completed task `g`.
    pub done_token: String,
    /// The lease of key `k-inflight` (live).
    pub lease: Lease,
    /// The live reconcile claim on key `k-uncertain`.
    pub reconcile_claim: String,
}

impl Capabilities {
    /// As JSON, for `tests/golden/capabilities.json`.
    pub fn to_json(&self) -> Value {
        json!({
            "claim-token": self.claim_token,
            "done-token": self.done_token,
            "lease": {
                "key": self.lease.key,
                "resource": self.lease.resource,
                "fence": self.lease.fence,
                "holder": self.lease.holder,
                "until": self.lease.until,
            },
            "reconcile-claim": self.reconcile_claim,
        })
    }

    /// From [`Capabilities::to_json`]'s output.
    pub fn from_json(v: &Value) -> Capabilities {
        let s = |v: &Value| v.as_str().expect("a string").to_owned();
        let l = &v["lease"];
        Capabilities {
            claim_token: s(&v["claim-token"]),
            done_token: s(&v["done-token"]),
            lease: Lease {
                key: s(&l["key"]),
                resource: s(&l["resource"]),
                fence: l["fence"].as_u64().expect("fence"),
                holder: s(&l["holder"]),
                until: l["until"].as_u64().expect("until"),
            },
            reconcile_claim: s(&v["reconcile-claim"]),
        }
    }
}

fn uncertain_action() -> Action {
    Action::new("k-uncertain", "r-e")
        .unsafe_to_retry()
        .with_fingerprint("fp-1")
}

fn snap(run: &str, seq: u64, fence: u64, done: &[&str]) -> Snapshot {
    Snapshot {
        run_id: run.into(),
        seq,
        fence: Some(fence),
        status: "running".into(),
        done: done.iter().map(|d| (*d).to_owned()).collect(),
        fields: vec![("attempt".into(), "1".into())],
    }
}

fn succeeded(result: &[u8]) -> Outcome {
    Outcome {
        status: Status::Succeeded,
        result: result.to_vec(),
    }
}

fn grant(kernel: &Kernel, action: &Action, ttl: u64) -> Lease {
    match kernel.sideeffect().acquire(action, ttl) {
        Ok(Acquired::Granted(lease)) => lease,
        other => panic!("{}: {other:?}", action.key),
    }
}

/// Write the golden state on a fresh store whose clock reads [`T0`].
pub fn write(kernel: &Kernel) -> Capabilities {
    let tb = kernel.taskboard();
    tb.seed(&[
        TaskSeed::new("a").title("Open"),
        TaskSeed::new("b").title("Waits for a").deps(&["a"]),
        TaskSeed::new("c").title("Claimed"),
        TaskSeed {
            state: Some(TaskState::Failed),
            ..TaskSeed::new("d").title("Failed")
        },
        TaskSeed {
            state: Some(TaskState::Done),
            ..TaskSeed::new("e").title("Seeded done")
        },
        TaskSeed::new("f").title("Claim expires"),
        TaskSeed::new("g").title("Done by a worker"),
    ])
    .unwrap();
    let claim_token = tb.claim("c", "w-c", DAY).unwrap().token.unwrap();
    tb.claim("f", "w-f", 10 * MINUTE).unwrap();
    let done_token = tb.claim("g", "w-g", DAY).unwrap().token.unwrap();
    tb.complete("g", &done_token).unwrap();

    let se = kernel.sideeffect();
    let cleared = Action::new("k-cleared", "r-a");
    let lease = grant(kernel, &cleared, DAY);
    se.abandon(&cleared, &lease, "refused by the remote")
        .unwrap();
    let completed = Action::new("k-completed", "r-b");
    let lease = grant(kernel, &completed, DAY);
    se.complete(&completed, &lease, b"receipt-1").unwrap();
    let in_flight = grant(kernel, &Action::new("k-inflight", "r-c"), DAY);
    grant(kernel, &Action::new("k-expired", "r-d"), 10 * MINUTE);
    let uncertain = uncertain_action();
    let lease = grant(kernel, &uncertain, DAY);
    se.mark_uncertain(&uncertain, &lease, "smtp timeout")
        .unwrap();
    se.release(&uncertain, &lease).unwrap();
    let reconcile_claim = se.begin_reconcile(&uncertain, DAY).unwrap().claim;
    se.write_fenced("ledger", 3, |d| d.put("ledger", "entry-3"))
        .unwrap();

    let ck = kernel.checkpoint();
    let gate = kernel.commitgate();
    ck.save_if_newer(&snap("run-live", 1, 1, &[])).unwrap();
    ck.save_if_newer(&snap("run-live", 2, 1, &["s1"])).unwrap();
    gate.commit("run-live", Some("s1"), 1, &succeeded(b"s1-out"))
        .unwrap();
    ck.save_if_newer(&snap("run-done", 1, 2, &["s1"])).unwrap();
    gate.commit("run-done", Some("s1"), 2, &succeeded(b"s1-out"))
        .unwrap();
    gate.commit("run-done", None, 2, &succeeded(b"final"))
        .unwrap();
    Capabilities {
        claim_token,
        done_token,
        lease: in_flight,
        reconcile_claim,
    }
}

/// Err names what the golden rows (table, key, value) do not cover.
pub fn coverage(rows: &[(String, String, String)]) -> Result<(), String> {
    let mut missing = Vec::new();
    for table in gak::store::TABLES {
        if !rows.iter().any(|(t, _, _)| t == table) {
            missing.push(format!("table {table}"));
        }
    }
    for prefix in ["q/", "ts/", "td/", "ks/", "rt/"] {
        if !rows
            .iter()
            .any(|(t, k, _)| t == "indexes" && k.starts_with(prefix))
        {
            missing.push(format!("index {prefix}"));
        }
    }
    let values: Vec<(String, Value)> = rows
        .iter()
        .filter(|(t, _, _)| t != "downstream")
        .map(|(t, _, v)| (t.clone(), serde_json::from_str(v).expect("a JSON value")))
        .collect();
    for (table, v) in &values {
        if v["v"] != 1 {
            missing.push(format!("a {table} value without v: 1: {v}"));
        }
    }
    let states = |table: &str| -> BTreeSet<String> {
        values
            .iter()
            .filter(|(t, _)| t == table)
            .filter_map(|(_, v)| v["state"].as_str().map(str::to_owned))
            .collect()
    };
    for state in ["open", "claimed", "done", "failed"] {
        if !states("tasks").contains(state) {
            missing.push(format!("a {state} task"));
        }
    }
    for state in ["cleared", "in-flight", "uncertain", "completed"] {
        if !states("actions").contains(state) {
            missing.push(format!("a {state} key"));
        }
    }
    let has = |table: &str, field: &str| {
        values
            .iter()
            .any(|(t, v)| t == table && v.get(field).is_some_and(|f| !f.is_null()))
    };
    for (table, field) in [
        ("actions", "reconcile"),
        ("tasks", "token-sha256"),
        ("tasks", "completed-by-sha256"),
        ("resources", "hold-until"),
        ("outcomes", "step"),
        ("meta", "next-seq"),
    ] {
        if !has(table, field) {
            missing.push(format!("{table} with {field}"));
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("the golden data lacks: {}", missing.join(", ")))
    }
}

/// Continue the golden store with the current kernel, whose clock reads
/// [`REPLAY_AT`]: resume a run, replay a key, take over a claim, resolve an
/// `uncertain`, claim-next, prune, and present the capabilities handed out
/// before the upgrade.
pub fn replay(kernel: &Kernel, clock: &ManualClock, caps: &Capabilities) {
    assert_eq!(gak::Clock::now(clock), REPLAY_AT);
    let (ck, gate, se, tb) = (
        kernel.checkpoint(),
        kernel.commitgate(),
        kernel.sideeffect(),
        kernel.taskboard(),
    );

    // Resume a run: the trusted steps are skipped, the owner fence holds.
    let live = ck.load("run-live").unwrap();
    assert_eq!(live, snap("run-live", 2, 1, &["s1"]));
    let steps = [
        StepDef::new("s1", &[]),
        StepDef::new("s2", &["s1"]),
        StepDef::new("s3", &["s2"]),
    ];
    let plan = ck.build_plan(&steps, Some(&live)).unwrap();
    assert_eq!(
        (plan.skip, plan.run),
        (
            vec!["s1".to_owned()],
            vec!["s2".to_owned(), "s3".to_owned()]
        )
    );
    let next = snap("run-live", 3, 1, &["s1", "s2"]);
    ck.save_if_newer(&next).unwrap();
    assert_eq!(ck.save_if_newer(&next), Err(Error::StaleSeq));
    assert_eq!(
        ck.save_if_newer(&snap("run-live", 4, 0, &[])),
        Err(Error::FenceStale)
    );
    assert_eq!(gate.read("run-live", Some("s1")), Ok(succeeded(b"s1-out")));
    // A finished run stays finished.
    assert_eq!(
        ck.save_if_newer(&snap("run-done", 5, 2, &[])),
        Err(Error::Terminal)
    );
    assert_eq!(gate.read("run-done", None), Ok(succeeded(b"final")));
    let failed = Outcome {
        status: Status::Failed,
        result: vec![],
    };
    assert_eq!(
        gate.commit("run-done", None, 2, &failed),
        Err(Error::AlreadyCommitted)
    );

    // Replay a key; an expired intent is uncertain; a cleared key is
    // granted again above the resource's old fence.
    let completed = Action::new("k-completed", "r-b");
    assert_eq!(
        se.acquire(&completed, DAY),
        Ok(Acquired::Replayed(b"receipt-1".to_vec()))
    );
    assert_eq!(
        se.acquire(&Action::new("k-expired", "r-d"), DAY),
        Ok(Acquired::Uncertain("intent-expired".into()))
    );
    assert_eq!(
        grant(kernel, &Action::new("k-cleared", "r-a"), DAY).fence,
        2
    );
    // The live lease from before the upgrade still holds, and its holder
    // records the verdict.
    let in_flight = Action::new("k-inflight", "r-c");
    assert_eq!(se.acquire(&in_flight, DAY), Ok(Acquired::InFlight));
    assert_eq!(
        se.complete(&in_flight, &caps.lease, b"late"),
        Ok(b"late".to_vec())
    );
    assert_eq!(
        se.acquire(&in_flight, DAY),
        Ok(Acquired::Replayed(b"late".to_vec()))
    );

    // Resolve an uncertain key under the reconcile claim from before.
    let uncertain = uncertain_action();
    assert_eq!(
        se.acquire(&uncertain, DAY),
        Ok(Acquired::Uncertain("smtp timeout".into()))
    );
    assert_eq!(
        se.begin_reconcile(&uncertain, DAY).map(drop),
        Err(Error::ReconcileTaken)
    );
    let key = se.get("k-uncertain").unwrap();
    assert_eq!(key.fingerprint.as_deref(), Some("fp-1"));
    assert_eq!(key.reconciling_until, Some(T0 + DAY));
    let verdict = Resolution {
        applied: true,
        result: Some(b"sent".to_vec()),
        force_retryable: false,
        claim: Some(caps.reconcile_claim.clone()),
    };
    assert_eq!(
        se.resolve_uncertain(&uncertain, &verdict),
        Ok(Resolved::Replayed(b"sent".to_vec()))
    );
    assert_eq!(
        se.acquire(&uncertain, DAY),
        Ok(Acquired::Replayed(b"sent".to_vec()))
    );

    // The fenced sink kept its fence and its downstream write.
    assert_eq!(se.sink_seen("ledger"), Ok(3));
    let stale = se.write_fenced("ledger", 2, |d| d.put("ledger", "stale"));
    assert!(
        matches!(stale, Err(gak::SinkError::Kernel(Error::FenceStale))),
        "{stale:?}"
    );
    assert_eq!(
        kernel.with_downstream(|d| d.get("ledger")),
        Ok(Some("entry-3".into()))
    );

    // Tasks: the live claim holds and its token still works; the expired
    // one is taken over; the completing token re-completes.
    assert_eq!(tb.claim("c", "w2", DAY).map(drop), Err(Error::Taken));
    let renewed = tb.renew("c", &caps.claim_token, DAY).unwrap();
    assert_eq!((renewed.fence, renewed.until), (1, Some(REPLAY_AT + DAY)));
    tb.release("c", &caps.claim_token).unwrap();
    let taken_over = tb.claim("f", "w2", DAY).unwrap();
    assert_eq!(
        (taken_over.owner.as_deref(), taken_over.fence),
        (Some("w2"), 2)
    );
    tb.complete("g", &caps.done_token).unwrap();
    assert_eq!(tb.claim("b", "w2", DAY).map(drop), Err(Error::DepsPending));
    assert_eq!(tb.claim("e", "w2", DAY).map(drop), Err(Error::Terminal));
    // claim-next: the first-seeded ready task.
    let next = tb.claim_next("w3", DAY).unwrap().expect("a ready task");
    assert_eq!((next.id.as_str(), next.fence), ("a", 1));
    let next = tb.claim_next("w3", DAY).unwrap().expect("a ready task");
    assert_eq!(next.id, "c");

    // Prune what finished before the upgrade: the completed key, the two
    // done tasks nobody waits for, the finished run.
    let pruned = kernel.retention().prune(T0 + 1, 100).unwrap();
    assert_eq!(
        pruned,
        Pruned {
            removed_keys: 1,
            removed_tasks: 2,
            removed_runs: 1,
            more: false,
        }
    );
    assert_eq!(gate.read("run-done", None), Err(Error::NotFound));
    assert_eq!(tb.get("g").map(drop), Err(Error::NotFound));
    // A pruned key runs as new, above its resource's fence.
    assert_eq!(grant(kernel, &completed, DAY).fence, 2);
    assert_eq!(
        crate::board(kernel)
            .unwrap()
            .iter()
            .map(|t| t.id.as_str())
            .collect::<Vec<_>>(),
        ["a", "b", "c", "d", "f"]
    );
}

// ------------------------------------------------------------------ files

/// The golden files' folder.
pub fn dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("golden")
}

/// Make a SQLite file self-contained (its WAL checkpointed into it, journal
/// mode back to DELETE) so it can be copied and checked in alone.
pub fn seal_sqlite(path: &std::path::Path) {
    let conn = gak::rusqlite::Connection::open(path).expect("open the golden file");
    conn.pragma_update(None, "wal_checkpoint", "TRUNCATE")
        .expect("checkpoint");
    conn.pragma_update(None, "journal_mode", "DELETE")
        .expect("journal mode");
    conn.execute_batch("VACUUM").expect("vacuum");
}

/// The placeholder for the schema's name in the PostgreSQL dump.
pub const SCHEMA: &str = "{{schema}}";

fn sql_text(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A restore script of `schema` (which `kernel` uses): each table as the
/// catalogue describes it (`DROP TABLE IF EXISTS` + `CREATE TABLE`), then its
/// rows as `INSERT`s, one statement per line, the schema's name replaced by
/// [`SCHEMA`].
pub fn dump_postgres(kernel: &Kernel, schema: &str) -> String {
    let schema = schema.to_owned();
    kernel
        .with_downstream(move |d| {
            let mut out = String::from(
                "-- gak stored format 1: a PostgreSQL schema written by tests/src/bin/golden.rs\n",
            );
            let mut q = |sql: &str, params: &[&(dyn gak::tokio_postgres::types::ToSql + Sync)]| {
                d.postgres_query(sql, params).expect("postgres")
            };
            let tables = q(
                "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name",
                &[&schema],
            )?;
            for t in tables {
                let table = t[0].clone().expect("a name");
                let columns = q(
                    "SELECT column_name::text, data_type::text, coalesce(collation_name::text, ''), is_nullable::text \
                     FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position",
                    &[&schema, &table],
                )?;
                let key = q(
                    "SELECT k.column_name::text FROM information_schema.table_constraints c \
                     JOIN information_schema.key_column_usage k USING (constraint_schema, constraint_name) \
                     WHERE c.table_schema = $1 AND c.table_name = $2 AND c.constraint_type = 'PRIMARY KEY' ORDER BY k.ordinal_position",
                    &[&schema, &table],
                )?;
                let mut defs: Vec<String> = columns
                    .iter()
                    .map(|c| {
                        let get = |i: usize| c[i].clone().unwrap_or_default();
                        let mut def = format!("\"{}\" {}", get(0), get(1));
                        if !get(2).is_empty() {
                            def.push_str(&format!(" COLLATE \"{}\"", get(2)));
                        }
                        if get(3) == "NO" {
                            def.push_str(" NOT NULL");
                        }
                        def
                    })
                    .collect();
                let key: Vec<String> = key
                    .iter()
                    .map(|k| format!("\"{}\"", k[0].clone().unwrap_or_default()))
                    .collect();
                if !key.is_empty() {
                    defs.push(format!("PRIMARY KEY ({})", key.join(", ")));
                }
                let name = format!("\"{SCHEMA}\".\"{table}\"");
                out.push_str(&format!("DROP TABLE IF EXISTS {name}\n"));
                out.push_str(&format!("CREATE TABLE {name} ({})\n", defs.join(", ")));
                let names: Vec<String> = columns
                    .iter()
                    .map(|c| format!("\"{}\"", c[0].clone().unwrap_or_default()))
                    .collect();
                let select: Vec<String> = names.iter().map(|n| format!("{n}::text")).collect();
                let rows = q(
                    &format!(
                        "SELECT {} FROM \"{schema}\".\"{table}\" ORDER BY 1",
                        select.join(", ")
                    ),
                    &[],
                )?;
                for row in rows {
                    let values: Vec<String> = row
                        .iter()
                        .map(|v| v.as_deref().map_or("NULL".to_owned(), sql_text))
                        .collect();
                    out.push_str(&format!(
                        "INSERT INTO {name} ({}) VALUES ({})\n",
                        names.join(", "),
                        values.join(", ")
                    ));
                }
            }
            Ok(out)
        })
        .expect("dump the schema")
}

/// Run a [`dump_postgres`] script into `schema` (which `kernel` uses), in
/// one transaction. Open a new kernel on the schema afterwards: the tables
/// were replaced under this one's connections.
pub fn restore_postgres(kernel: &Kernel, schema: &str, script: &str) {
    let statements: Vec<String> = script
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("--"))
        .map(|l| l.replace(SCHEMA, schema))
        .collect();
    assert!(
        statements.len() > 20,
        "a short dump: {} statements",
        statements.len()
    );
    kernel
        .with_downstream(move |d| {
            for s in &statements {
                d.postgres_execute(s, &[]).expect("postgres")?;
            }
            Ok(())
        })
        .expect("restore the golden schema");
}
