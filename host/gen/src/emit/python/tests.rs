//! The generator's promise for Python, on an edited copy of the contract.
use super::*;
use crate::model::Field;

fn contract() -> Contract {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    Contract::load(&root.join("wit")).expect("wit/ parses")
}

fn fields<'a>(c: &'a mut Contract, record: &str) -> &'a mut Vec<Field> {
    let t = c
        .types
        .iter_mut()
        .find(|t| t.name == record)
        .expect("record");
    match &mut t.kind {
        Kind::Record(f) => f,
        _ => panic!("{record} is not a record"),
    }
}

fn file(outputs: &[Output], tail: &str) -> String {
    let o = outputs
        .iter()
        .find(|o| o.path.ends_with(tail))
        .expect("generated");
    o.text.clone()
}

/// The promise: a field the WIT adds, or moves, is the whole
/// change. Every use of the record is regenerated in the WIT's order:
/// the dataclass, its lowering, its lifting and shape, its JSON.
#[test]
fn a_field_the_wit_adds_or_moves_regenerates_every_use() {
    let mut c = contract();
    fields(&mut c, "task-seed").insert(
        1,
        Field {
            name: "priority".into(),
            ty: Ty::Option(Box::new(Ty::U32)),
            docs: "How soon.".into(),
        },
    );
    let task = fields(&mut c, "task");
    let fence = task.pop().expect("fence is last");
    task.insert(0, fence);
    let out = emit(&c, Path::new(".")).expect("emits");
    let types = file(&out, "gak/types.py");
    assert!(types.contains(
        "    id: str\n    #: How soon.\n    priority: Optional[int] = None\n    title: Optional[str] = None\n"
    ));
    assert!(types.contains("class Task:"));
    let wire = file(&out, "gak/_wire.py");
    assert!(
        wire.contains("return (v.id, v.priority, v.title, list(v.deps), opt_enum_name(v.state))")
    );
    assert!(wire.contains("    fence, id, title, deps, state, owner, token, until = w\n"));
    assert!(wire.contains(
        "(\"fence\", \"id\", \"title\", \"deps\", \"state\", \"owner\", \"token\", \"until\")"
    ));
    let calls = file(&out, "conformance/_calls.py");
    assert!(calls.contains("priority=opt(u32, o.get(\"priority\"), at + \".priority\"),"));
    assert!(calls.contains(
        "    out: dict[str, Any] = {\n        \"fence\": v.fence,\n        \"id\": v.id,\n"
    ));
}

/// An error code the WIT adds is a refusal code of the package.
#[test]
fn an_error_code_the_wit_adds_is_a_code() {
    let mut c = contract();
    let error = c
        .types
        .iter_mut()
        .find(|t| t.name == "error")
        .expect("error");
    if let Kind::Variant(cases) = &mut error.kind {
        cases.push(Case {
            name: "over-quota".into(),
            ty: None,
            docs: "Too many.".into(),
        });
    }
    let out = emit(&c, Path::new(".")).expect("emits");
    assert!(
        file(&out, "gak/_contract.py").contains("        # Too many.\n        \"over-quota\",\n")
    );
}

#[test]
fn python_names() {
    assert_eq!(ident("from"), "from_");
    assert_eq!(ident("run-id"), "run_id");
    assert_eq!(local("list"), "list_");
    assert_eq!(local("e0"), "e0_");
    assert_eq!(local("each"), "each");
    assert_eq!(rst("`a` and `b`"), "``a`` and ``b``");
}
