//! The generator's promise for Rust, on an edited copy of the contract:
//! what the WIT adds reaches the rules' types, both sides' conversions, the
//! conformance call table and libgak's codes, with nothing written by hand.
use std::path::{Path, PathBuf};

use super::emit;
use crate::model::{Case, Field, Kind, Ty};
use crate::{Contract, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn contract() -> Contract {
    Contract::load(&root().join("wit")).expect("wit/ parses")
}

fn kind<'a>(c: &'a mut Contract, name: &str) -> &'a mut Kind {
    &mut c
        .types
        .iter_mut()
        .find(|t| t.name == name)
        .expect("a type of the contract")
        .kind
}

fn fields<'a>(c: &'a mut Contract, record: &str) -> &'a mut Vec<Field> {
    match kind(c, record) {
        Kind::Record(f) => f,
        _ => panic!("{record} is not a record"),
    }
}

fn cases<'a>(c: &'a mut Contract, name: &str) -> &'a mut Vec<Case> {
    match kind(c, name) {
        Kind::Enum(cases) | Kind::Variant(cases) => cases,
        _ => panic!("{name} has no cases"),
    }
}

fn file(outputs: &[Output], path: &str) -> String {
    outputs
        .iter()
        .find(|o| o.path == Path::new(path))
        .unwrap_or_else(|| panic!("{path} is generated"))
        .text
        .clone()
}

fn has(text: &str, expected: &str) {
    assert!(
        text.contains(expected),
        "missing:\n{expected}\n--- in ---\n{text}"
    );
}

const CONTRACT: &str = "guest/src/contract.rs";
const GUEST: &str = "guest/component/src/convert.rs";
const HOST: &str = "host/rust/src/convert.rs";
const CALLS: &str = "host/rust/cli/src/conformance/exports.rs";
const CODES: &str = "host/c/src/codes.rs";

/// The promise: a record field the WIT adds is the whole change.
#[test]
fn a_field_the_wit_adds_reaches_every_use() {
    let mut c = contract();
    fields(&mut c, "task-seed").insert(
        1,
        Field {
            name: "priority".into(),
            ty: Ty::Option(Box::new(Ty::U32)),
            docs: "How soon.".into(),
        },
    );
    fields(&mut c, "task").insert(
        2,
        Field {
            name: "claimed-at".into(),
            ty: Ty::Named("millis".into()),
            docs: String::new(),
        },
    );
    let out = emit(&c, &root()).expect("emits");
    let types = file(&out, CONTRACT);
    has(
        &types,
        "        pub id: String,\n        /// How soon.\n        \
         #[serde(default, skip_serializing_if = \"Option::is_none\")]\n        \
         pub priority: Option<u32>,\n",
    );
    has(
        &types,
        "        /// WIT `task.claimed-at`.\n        pub claimed_at: u64,\n",
    );
    // The redacting `Debug` shows the new field.
    has(&types, ".field(\"claimed_at\", &self.claimed_at)");
    let guest = file(&out, GUEST);
    has(&guest, "        id: x.id,\n        priority: x.priority,\n");
    has(&guest, "        claimed_at: x.claimed_at,\n");
    let host = file(&out, HOST);
    has(
        &host,
        "        id: x.id.clone(),\n        priority: x.priority,\n",
    );
    has(&host, "        claimed_at: x.claimed_at,\n");
    let calls = file(&out, CALLS);
    has(
        &calls,
        "priority: read_option(field(v, \"priority\"), &format!(\"{at}.priority\"), read_u32)?,",
    );
    has(
        &calls,
        "    o.insert(\"claimed-at\".into(), Value::from(x.claimed_at));\n",
    );
}

/// An error code the WIT adds is a code of every Rust list: the rules'
/// variant, its name and `NAMES`, both conversions, libgak's C strings.
#[test]
fn an_error_code_the_wit_adds_is_listed_everywhere() {
    let mut c = contract();
    let storage = cases(&mut c, "error")
        .iter()
        .position(|c| c.name == "storage")
        .expect("storage");
    cases(&mut c, "error").insert(
        storage,
        Case {
            name: "over-quota".into(),
            ty: Some(Ty::String),
            docs: "The caller used up its quota.".into(),
        },
    );
    let out = emit(&c, &root()).expect("emits");
    let types = file(&out, CONTRACT);
    has(
        &types,
        "        /// The caller used up its quota.\n        OverQuota(String),\n        ",
    );
    has(&types, "Error::OverQuota(_) => \"over-quota\",");
    let names = cases(&mut c, "error").len();
    has(
        &types,
        &format!("pub const NAMES: [&'static str; {names}] = ["),
    );
    has(
        &types,
        "\"invalid-input\",\n            \"over-quota\",\n            \"storage\",",
    );
    has(
        &types,
        "Error::OverQuota(m) => write!(f, \"over-quota: {m}\"),",
    );
    has(
        &file(&out, GUEST),
        "rules::Error::OverQuota(p) => types::Error::OverQuota(p),",
    );
    has(
        &file(&out, HOST),
        "types::Error::OverQuota(p) => rules::Error::OverQuota(p),",
    );
    let codes = file(&out, CODES);
    has(&codes, &format!("[&CStr; {names}]"));
    has(&codes, "    c\"over-quota\",\n    c\"storage\",\n");
}

/// A table the WIT adds is a table of the rules and of both conversions.
#[test]
fn a_table_the_wit_adds_is_a_table_everywhere() {
    let mut c = contract();
    cases(&mut c, "table").push(Case {
        name: "job-logs".into(),
        ty: None,
        docs: "what jobs printed".into(),
    });
    let out = emit(&c, &root()).expect("emits");
    let types = file(&out, CONTRACT);
    has(&types, "        /// what jobs printed\n        JobLogs,\n");
    has(&types, "Table::JobLogs => \"job-logs\",");
    has(
        &file(&out, GUEST),
        "rules::Table::JobLogs => store::Table::JobLogs,",
    );
    has(
        &file(&out, HOST),
        "store::Table::JobLogs => rules::Table::JobLogs,",
    );
}

/// The exception tables name the WIT: one that no longer matches is an
/// error, never a capability silently shown in logs.
#[test]
fn a_capability_field_the_wit_renames_stops_the_generator() {
    let mut c = contract();
    for f in fields(&mut c, "task") {
        if f.name == "token" {
            f.name = "claim-token".into();
        }
    }
    let why = emit(&c, &root()).expect_err("refuses");
    assert!(
        why.contains("capability task.token: no such field"),
        "{why}"
    );
}

/// An `s32` is an `i32` in the rules' types, and the
/// conformance call table reads it with its own range (negative numbers
/// included, 2^31 refused).
#[test]
fn an_s32_field_is_signed_everywhere() {
    let mut c = contract();
    fields(&mut c, "task-seed").insert(
        1,
        Field {
            name: "urgency".into(),
            ty: Ty::Option(Box::new(Ty::S32)),
            docs: String::new(),
        },
    );
    fields(&mut c, "task").insert(
        1,
        Field {
            name: "urgency".into(),
            ty: Ty::S32,
            docs: String::new(),
        },
    );
    let out = emit(&c, &root()).expect("emits");
    let types = file(&out, CONTRACT);
    has(&types, "        pub urgency: i32,\n");
    has(&types, "        pub urgency: Option<i32>,\n");
    let calls = file(&out, CALLS);
    has(
        &calls,
        "urgency: read_option(field(v, \"urgency\"), &format!(\"{at}.urgency\"), read_s32)?,",
    );
    has(
        &calls,
        "pub(super) fn read_s32(v: Option<&Value>, at: &str) -> A<i32> {",
    );
    has(&calls, ".and_then(|i| i32::try_from(i).ok())");
    has(
        &calls,
        "    o.insert(\"urgency\".into(), Value::from(x.urgency));\n",
    );
}
