//! The generator's promise for JavaScript, on an edited copy of the
//! contract.
use super::*;
use crate::model::{Case, Interface};

fn contract() -> Contract {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    Contract::load(&root.join("wit")).expect("wit/ parses")
}

fn named<'a>(c: &'a mut Contract, name: &str) -> &'a mut Kind {
    &mut c
        .types
        .iter_mut()
        .find(|t| t.name == name)
        .expect("a type of the contract")
        .kind
}

fn fields<'a>(c: &'a mut Contract, record: &str) -> &'a mut Vec<Field> {
    match named(c, record) {
        Kind::Record(f) => f,
        _ => panic!("{record} is not a record"),
    }
}

fn interface<'a>(c: &'a mut Contract, name: &str) -> &'a mut Interface {
    c.interfaces
        .iter_mut()
        .find(|i| i.name == name)
        .expect("an interface")
}

fn file(outputs: &[Output], tail: &str) -> String {
    outputs
        .iter()
        .find(|o| o.path.ends_with(tail))
        .expect("generated")
        .text
        .clone()
}

/// The promise: a field the WIT adds is the whole change. Its
/// TypeScript type (in and out), its check before lowering, its JSON both
/// ways and its type check against the component follow, in the WIT's
/// order.
#[test]
fn a_field_the_wit_adds_regenerates_every_use() {
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
    let out = emit(&c, Path::new(".")).expect("emits");
    let dts = file(&out, "src/contract.d.ts");
    assert!(
        dts.contains(
            "  id: string;\n  /** How soon. */\n  priority?: number;\n  title?: string;\n"
        )
    );
    assert!(dts.contains("  title: string;\n  claimedAt: bigint;\n  deps: string[];\n"));
    let checks = file(&out, "src/checks.js");
    assert!(checks.contains(
        "    id: v.str(`${at}.id`, x.id),\n    priority: v.absent(x.priority) ? undefined : v.u32(`${at}.priority`, x.priority),\n"
    ));
    let calls = file(&out, "conformance/exports.js");
    assert!(calls.contains(
        "    priority: json.option(json.field(o, 'priority'), `${at}.priority`, json.u32),\n"
    ));
    assert!(calls.contains("    title: x.title,\n    'claimed-at': json.num(x.claimedAt),\n"));
}

/// An error code, or an enum case, the WIT adds is a code (a case) of the
/// package: its list, its TypeScript union.
#[test]
fn an_error_code_or_a_case_the_wit_adds_is_listed() {
    let mut c = contract();
    let case = |name: &str| Case {
        name: name.into(),
        ty: None,
        docs: "Added.".into(),
    };
    if let Kind::Variant(cases) = named(&mut c, "error") {
        cases.insert(3, case("over-quota"));
    }
    if let Kind::Enum(cases) = named(&mut c, "key-state") {
        cases.push(case("parked"));
    }
    let out = emit(&c, Path::new(".")).expect("emits");
    let js = file(&out, "src/contract.js");
    assert!(js.contains("  'terminal',\n  // Added.\n  'over-quota',\n  // The step DAG"));
    assert!(js.contains(
        "export const KEY_STATE_CASES = Object.freeze(['cleared', 'in-flight', 'uncertain', 'completed', 'parked']);"
    ));
    let dts = file(&out, "src/contract.d.ts");
    assert!(dts.contains("  | 'terminal'\n  /** Added. */\n  | 'over-quota'\n"));
    assert!(dts.contains(
        "export type KeyState = 'cleared' | 'in-flight' | 'uncertain' | 'completed' | 'parked';"
    ));
}

/// A function the WIT adds is a method of its interface, a vector call,
/// and checked against the component's types.
#[test]
fn a_function_the_wit_adds_is_a_method_and_a_call() {
    let mut c = contract();
    interface(&mut c, "taskboard").functions.push(Function {
        interface: "taskboard".into(),
        name: "count-ready".into(),
        docs: "How many tasks are ready.".into(),
        params: vec![Field {
            name: "state".into(),
            ty: Ty::Option(Box::new(Ty::Named("state".into()))),
            docs: String::new(),
        }],
        result: Some(Ty::Result(
            Some(Box::new(Ty::U64)),
            Some(Box::new(Ty::Named("error".into()))),
        )),
    });
    let out = emit(&c, Path::new(".")).expect("emits");
    let methods = file(&out, "src/interfaces.js");
    assert!(methods.contains(
        "  /** How many tasks are ready. */\n  countReady(state) {\n    \
         const a = [v.absent(state) ? undefined : v.oneOf('state', state, TASK_STATE_CASES)];\n    \
         return this.kernel._call(a, (x) => x.taskboard.countReady(...a));\n  }\n"
    ));
    let dts = file(&out, "src/contract.d.ts");
    assert!(dts.contains("  countReady(state?: TaskState): bigint;\n"));
    let calls = file(&out, "conformance/exports.js");
    assert!(calls.contains(
        "  'taskboard.count-ready'(k, a) {\n    \
         const state = json.option(json.field(a, 'state'), 'state', readTaskState);\n    \
         return json.num(k.taskboard.countReady(state));\n  },\n"
    ));
    let typecheck = file(&out, "types/component.ts");
    assert!(typecheck.contains("export type TaskboardCountReadyAnswers = Assert<"));
}

/// A name JavaScript reserves is refused, not generated into a syntax
/// error.
#[test]
fn a_reserved_word_is_refused() {
    let mut c = contract();
    fields(&mut c, "task").push(Field {
        name: "default".into(),
        ty: Ty::Bool,
        docs: String::new(),
    });
    let e = emit(&c, Path::new(".")).expect_err("refused");
    assert!(e.contains("`default` is a JavaScript reserved word"), "{e}");
}

/// An `s32` is a `number`, checked by `v.s32` and read by `json.s32`.
#[test]
fn an_s32_field_is_a_checked_number() {
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
    let out = emit(&c, Path::new(".")).expect("emits");
    let dts = file(&out, "src/contract.d.ts");
    assert!(dts.contains("  urgency?: number;\n"));
    assert!(dts.contains("  urgency: number;\n"));
    let checks = file(&out, "src/checks.js");
    assert!(checks.contains(
        "    urgency: v.absent(x.urgency) ? undefined : v.s32(`${at}.urgency`, x.urgency),\n"
    ));
    let calls = file(&out, "conformance/exports.js");
    assert!(calls.contains(
        "    urgency: json.option(json.field(o, 'urgency'), `${at}.urgency`, json.s32),\n"
    ));
    assert!(calls.contains("urgency: x.urgency,") || calls.contains("o.urgency = x.urgency;"));
}
