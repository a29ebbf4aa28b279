//! One on-disk format (`FORMAT.md`): every value the kernel stores, in every
//! table and state the golden generator reaches and in every state of the
//! job queue (`golden::write_queue`: priorities, a delay, a failed task
//! backing off, a dead task, a full group and one with a free slot), is a
//! JSON object that opens with `"v": 2` (stored format 2, gak:kernel
//! 0.4.0), names its fields in kebab-case, and carries bytes as base64 text
//! (a JSON array of numbers would triple a result's size). The golden test
//! pins that format 1 is still read; this one fails when a new field or
//! record slips in with another style or another version.
use std::sync::Arc;

use gak::blocking::Kernel;
use gak::{ManualClock, Outcome, Status};
use gak_tests::golden;
use serde_json::Value;

/// Every row of every table, as (table, key, value).
fn dump(kernel: &Kernel) -> Vec<(String, String, String)> {
    gak::blocking::run_future(kernel.backend().dump()).expect("dump")
}

fn kebab(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Maps whose keys are the caller's data, not field names: a snapshot's
/// `fields`, and a group record's `claims` (task id to claim deadline).
const DATA_MAPS: [&str; 2] = ["fields", "claims"];

/// Field names and byte encodings under `value`; [`DATA_MAPS`] are the
/// caller's own maps (keys and values as the caller gave them), and must
/// be maps.
fn walk(path: &str, value: &Value, problems: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (name, inner) in map {
                if !kebab(name) {
                    problems.push(format!("{path}: field `{name}` is not kebab-case"));
                }
                match (DATA_MAPS.contains(&name.as_str()), inner) {
                    (true, Value::Object(_)) => {}
                    (true, _) => {
                        problems.push(format!("{path}.{name}: not a map"));
                    }
                    (false, _) => walk(&format!("{path}.{name}"), inner, problems),
                }
            }
        }
        Value::Array(items) => {
            if items.len() > 1 && items.iter().all(Value::is_number) {
                problems.push(format!("{path}: bytes stored as an array of numbers"));
            }
            for (i, inner) in items.iter().enumerate() {
                walk(&format!("{path}[{i}]"), inner, problems);
            }
        }
        _ => {}
    }
}

/// Every problem with the stored rows (table, key, value), or none. The
/// `downstream` table is sink bodies' own text, not the kernel's format.
fn check(rows: &[(String, String, String)]) -> Vec<String> {
    let mut problems = Vec::new();
    for (table, key, text) in rows.iter().filter(|(t, _, _)| t != "downstream") {
        let at = format!("{table}/{key}");
        let value: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                problems.push(format!("{at}: not JSON ({e})"));
                continue;
            }
        };
        if !value.is_object() {
            problems.push(format!("{at}: not a JSON object"));
        }
        // The memory and SQLite bindings keep the text as written, so the
        // version must be the first field (FORMAT.md).
        if !text.trim_start().starts_with(r#"{"v":2"#) {
            problems.push(format!("{at}: does not open with \"v\": 2"));
        }
        walk(&at, &value, &mut problems);
    }
    problems
}

fn kernel(url: &str) -> (Kernel, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::at(golden::T0));
    let backend = gak::blocking::run_future(gak::store::open(url)).expect("open");
    (
        Kernel::with_backend(backend, clock.clone()).expect("kernel"),
        clock,
    )
}

fn every_value_is_format_2(url: &str) {
    let (kernel, _clock) = kernel(url);
    golden::write(&kernel);
    golden::write_queue(&kernel);
    let rows = dump(&kernel);
    golden::coverage(&rows, golden::FORMAT).expect("the generator reaches every table and state");
    golden::queue_coverage(&rows).expect("the generator reaches every state of the queue");
    let problems = check(&rows);
    assert!(problems.is_empty(), "{url}:\n{}", problems.join("\n"));
    // A claim's deadline is the value under its task id: the id is data.
    let group = rows
        .iter()
        .find(|(t, k, _)| t == "meta" && k == "group/grp-roomy")
        .map(|(_, _, v)| serde_json::from_str::<Value>(v).unwrap())
        .expect("the roomy group's record");
    assert!(group["claims"]["Job_7"].is_u64(), "{group}");
}

#[test]
fn every_stored_value_is_format_2_on_memory() {
    every_value_is_format_2("memory:");
}

#[test]
fn every_stored_value_is_format_2_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    every_value_is_format_2(&format!("sqlite:{}", dir.path().join("f.db").display()));
}

/// A 1 MiB result costs about 4/3 MiB on disk (base64), not ~3.5 MiB (an
/// array of decimal numbers with commas).
#[test]
fn a_large_result_is_stored_as_base64() {
    let (kernel, _clock) = kernel("memory:");
    let result: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
    let outcome = Outcome {
        status: Status::Succeeded,
        result: result.clone(),
    };
    kernel
        .commitgate()
        .commit("run", None, 1, &outcome)
        .expect("commit");
    let rows = dump(&kernel);
    let (_, _, text) = rows
        .iter()
        .find(|(table, _, _)| table == "outcomes")
        .expect("the outcome row");
    assert!(
        text.len() < result.len() * 4 / 3 + 1024,
        "a 1 MiB result took {} bytes",
        text.len()
    );
    // The same commit again answers with the stored outcome, decoded.
    let stored = kernel
        .commitgate()
        .commit("run", None, 1, &outcome)
        .expect("read back");
    assert_eq!(stored.result, result);
}

/// The check above has teeth: it rejects each style it forbids.
#[test]
fn the_check_rejects_other_styles() {
    let row = |value: &str| vec![("actions".to_owned(), "k".to_owned(), value.to_owned())];
    for bad in [
        r#"{"v":2,"retry_safety":"safe"}"#,
        r#"{"v":2,"result":[104,105]}"#,
        r#"{"v":2,"reconcile":{"claimSha256":"x"}}"#,
        r#"{"retry-safety":"safe","v":2}"#,
        // format 1 is read, never written; nor is a version from the future
        r#"{"v":1,"key":"k"}"#,
        r#"{"v":3,"key":"k"}"#,
        r#"["v",2]"#,
        // the queue's fields, in other styles
        r#"{"v":2,"id":"t","not_before":5}"#,
        r#"{"v":2,"id":"t","lastError":"x"}"#,
        r#"{"v":2,"id":"t","Max-Attempts":3}"#,
        // a data map's keys are free, but it is a map
        r#"{"v":2,"claims":[1,2]}"#,
        r#"{"v":2,"fields":"x"}"#,
    ] {
        assert!(!check(&row(bad)).is_empty(), "{bad} passed");
    }
    for good in [
        r#"{"v":2,"done":["a","b"],"fields":{"my_field":[1,2]}}"#,
        r#"{"v":2,"limit":2,"claims":{"Job_7":1700000000000},"head":"q/0000000000000001"}"#,
    ] {
        assert!(check(&row(good)).is_empty(), "{good} refused");
    }
}
