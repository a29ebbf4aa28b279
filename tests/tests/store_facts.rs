//! The store facts every binding shares (`host/sql/store.json`, generated
//! into each host by gak-gen) answer the shared cases of
//! `tests/store-facts/cases.json` in the Rust host; the Python and
//! JavaScript suites replay the same file.
use gak::store::facts;
use serde_json::Value;

fn cases(kind: &str) -> Vec<(Value, Value)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/store-facts/cases.json");
    let all: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("the cases"))
        .expect("the cases are JSON");
    let list = all[kind].as_array().expect("a list of cases");
    assert!(!list.is_empty(), "no {kind} cases");
    list.iter().map(|c| (c[0].clone(), c[1].clone())).collect()
}

#[test]
fn prefix_end_answers_the_shared_cases() {
    for (prefix, end) in cases("prefix-end") {
        let prefix = prefix.as_str().expect("a prefix");
        assert_eq!(
            facts::prefix_end(prefix).as_deref(),
            end.as_str(),
            "prefix_end({prefix:?})"
        );
    }
}

#[test]
fn store_kind_answers_the_shared_cases() {
    for (url, kind) in cases("store-kind") {
        let url = url.as_str().expect("a URL");
        let found = facts::store_kind(url).map(|k| match k {
            facts::StoreKind::Memory => "memory",
            facts::StoreKind::Sqlite => "sqlite",
            facts::StoreKind::Postgres => "postgres",
        });
        assert_eq!(found, kind.as_str(), "store_kind({url:?})");
    }
}

#[test]
fn valid_schema_answers_the_shared_cases() {
    for (name, valid) in cases("valid-schema") {
        let name = name.as_str().expect("a name");
        assert_eq!(
            facts::valid_schema(name),
            valid.as_bool().expect("a bool"),
            "valid_schema({name:?})"
        );
    }
}

/// Every table the binding creates is one the facts list, and the
/// SQLite schema creates exactly those.
#[test]
fn the_sqlite_schema_creates_every_table() {
    for t in facts::TABLES {
        assert!(
            facts::SQLITE_SCHEMA.contains(&format!(
                "CREATE TABLE IF NOT EXISTS {}{t} (",
                facts::SQLITE_TABLE_PREFIX
            )),
            "{t} is missing from the SQLite schema"
        );
    }
    assert_eq!(
        facts::SQLITE_SCHEMA.matches("CREATE TABLE").count(),
        facts::TABLES.len()
    );
}

#[test]
fn postgres_urls_split_as_the_shared_cases_say() {
    use gak::store::url::parse_postgres;
    for (url, want) in cases("postgres-url") {
        let url = url.as_str().expect("a URL");
        match (
            parse_postgres(url),
            want.get("error").and_then(Value::as_str),
        ) {
            (Ok(parts), None) => {
                let got = serde_json::json!({
                    "user": parts.user,
                    "password": parts.password,
                    "hosts": parts.hosts,
                    "dbname": parts.dbname,
                    "params": parts
                        .params
                        .iter()
                        .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                        .collect::<serde_json::Map<_, _>>(),
                });
                assert_eq!(got, want, "{url:?}");
            }
            (Err(e), Some(word)) => {
                let text = e.to_string();
                assert!(
                    text.contains(word),
                    "{url:?}: {text:?} does not say {word:?}"
                );
                let userinfo = url.split_once("://").map(|(_, r)| r).unwrap_or_default();
                if let Some((info, _)) = userinfo.rsplit_once('@') {
                    // (A one-letter user is in every sentence.)
                    assert!(
                        info.len() < 3 || !text.contains(info),
                        "{url:?}: {text:?} shows the user information"
                    );
                }
            }
            (got, _) => panic!("{url:?}: {got:?}, expected {want}"),
        }
    }
}

#[test]
fn the_protocol_numbers_are_the_ones_the_host_uses() {
    let retry = gak::Retry::default();
    for (name, want) in cases("protocol") {
        let want = want.as_u64().expect("a number");
        let used = match name.as_str().expect("a name") {
            "connection-wait-ms" => gak::DEFAULT_CONNECTION_WAIT.as_millis() as u64,
            "max-connections" => gak::DEFAULT_MAX_CONNECTIONS as u64,
            "retry-attempts" => u64::from(retry.attempts),
            "retry-base-ms" => retry.base.as_millis() as u64,
            "retry-max-ms" => retry.max.as_millis() as u64,
            // The host's checks before lowering use these, and
            // host/rust/src/limits.rs asserts at compile time that the
            // rules' own bounds equal them.
            "max-value-bytes" => facts::MAX_VALUE_BYTES as u64,
            "max-list-items" => facts::MAX_LIST_ITEMS as u64,
            "max-call-bytes" => facts::MAX_CALL_BYTES as u64,
            "max-entropy" => u64::from(facts::MAX_ENTROPY),
            other => panic!("no such protocol number: {other}"),
        };
        assert_eq!(used, want, "{name}");
    }
}
