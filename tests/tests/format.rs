//! One on-disk format (`FORMAT.md`): every value the kernel stores, in every
//! table and state the golden generator reaches, is a JSON object that opens
//! with `"v": 1`, names its fields in kebab-case, and carries bytes as base64
//! text (a JSON array of numbers would triple a result's size). The golden
//! test pins what format 1 *is*; this one fails when a new field or record
//! slips in with another style.
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

/// Field names and byte encodings under `value`; `fields` of a snapshot
/// are the caller's own map and keep the caller's names.
fn walk(path: &str, value: &Value, problems: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (name, inner) in map {
                if !kebab(name) {
                    problems.push(format!("{path}: field `{name}` is not kebab-case"));
                }
                if name != "fields" {
                    walk(&format!("{path}.{name}"), inner, problems);
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
        if !text.trim_start().starts_with(r#"{"v":1"#) {
            problems.push(format!("{at}: does not open with \"v\": 1"));
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

fn every_value_is_format_1(url: &str) {
    let (kernel, _clock) = kernel(url);
    golden::write(&kernel);
    let rows = dump(&kernel);
    golden::coverage(&rows).expect("the generator reaches every table and state");
    let problems = check(&rows);
    assert!(problems.is_empty(), "{url}:\n{}", problems.join("\n"));
}

#[test]
fn every_stored_value_is_format_1_on_memory() {
    every_value_is_format_1("memory:");
}

#[test]
fn every_stored_value_is_format_1_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    every_value_is_format_1(&format!("sqlite:{}", dir.path().join("f.db").display()));
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
        r#"{"v":1,"retry_safety":"safe"}"#,
        r#"{"v":1,"result":[104,105]}"#,
        r#"{"v":1,"reconcile":{"claimSha256":"x"}}"#,
        r#"{"retry-safety":"safe","v":1}"#,
        r#"{"v":2,"key":"k"}"#,
        r#"["v",1]"#,
    ] {
        assert!(!check(&row(bad)).is_empty(), "{bad} passed");
    }
    assert!(
        check(&row(
            r#"{"v":1,"done":["a","b"],"fields":{"my_field":[1,2]}}"#
        ))
        .is_empty()
    );
}
