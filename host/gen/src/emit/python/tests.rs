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
/// the dataclass, its constructor, its lowering and lifting (their layouts
/// computed anew), the type the host checks a component against, its JSON.
#[test]
fn a_field_the_wit_adds_or_moves_regenerates_every_use() {
    let mut c = contract();
    fields(&mut c, "task-seed").insert(
        1,
        Field {
            name: "urgency".into(),
            ty: Ty::Option(Box::new(Ty::U32)),
            docs: "How soon.".into(),
        },
    );
    let task = fields(&mut c, "task");
    let at = task.iter().position(|f| f.name == "fence").expect("fence");
    let fence = task.remove(at);
    task.insert(0, fence);
    let out = emit(&c, Path::new(".")).expect("emits");
    let types = file(&out, "gak/types.py");
    assert!(types.contains(
        "    id: str\n    #: How soon.\n    urgency: Optional[int] = None\n    title: Optional[str] = None\n"
    ));
    assert!(types.contains("class Task:"));
    let wire = file(&out, "gak/_wire.py");
    assert!(
        wire.contains("return (v.id, v.urgency, v.title, list(v.deps), opt_enum_name(v.state), ")
    );
    let new = file(&out, "gak/_new.py");
    assert!(
        new.contains("def new_task(fence: Any, id: Any, title: Any, deps: Any, "),
        "{new}"
    );
    let lift = file(&out, "gak/_lift.py");
    // fence (a u64) is now the first entry's payload, then id's (len, address).
    assert!(lift.contains("_TASK_FIELDS = struct.Struct(\"<24xQ16x24xQQ8x24xQQ8x"));
    assert!(lift.contains("ok = new_task(\n            fence,\n            TX[id_n](MEM, id_at)"));
    let lower = file(&out, "gak/_lower.py");
    assert!(lower.contains("id_, urgency, title, deps, state, "));
    assert!(lower.contains("_FIELD_URGENCY_N, _FIELD_URGENCY_AT = constant(\"urgency\")"));
    let signatures = file(&out, "gak/_signatures.py");
    assert!(signatures.contains("record {id: string, urgency: option<u32>, "));
    let calls = file(&out, "conformance/_calls.py");
    assert!(calls.contains("urgency=opt(u32, o.get(\"urgency\"), at + \".urgency\"),"));
    assert!(calls.contains(
        "    out: dict[str, Any] = {\n        \"fence\": v.fence,\n        \"id\": v.id,\n"
    ));
}

/// The store import's fast paths are the WIT's too: their offsets are the
/// ones the hand-written host used (`"<24xQQ32xQQ32x?47xB"` for `reads`, an
/// answer block of result, record, entries, four values, the clock, then
/// the entropy at 544), and a field the WIT adds to `change` moves them.
#[test]
fn the_store_imports_layouts_are_computed_from_the_wit() {
    let c = contract();
    let out = emit(&c, Path::new(".")).expect("emits");
    let store = file(&out, "gak/_store_abi.py");
    // 24xQQ | 8x+24x = 32x | QQ | 32x | ? | 23x+24x = 47x | B
    assert!(store.contains("_READS_FIELDS = struct.Struct(\"<24xQQ8x24xQQ8x24x?23x24xB23x\")"));
    assert!(store.contains("_CHANGE_FIELDS = struct.Struct(\"<24xQQ8x24xQQ8x24xQ16x\")"));
    assert!(store.contains("        value0_box = b + 384\n"));
    assert!(store.contains("        now_box = b + 512\n"));
    assert!(store.contains("BLOCK_SIZE = 544 + 32 * MAX_ENTROPY\n"));
    assert!(
        store.contains(
            "    \"store#read\": _reads_val,\n    \"store#try-read\": _list_tuple_table_string_val,\n    \"store#write\": _list_change_val,\n"
        )
    );

    let mut c = contract();
    fields(&mut c, "change").push(Field {
        name: "ttl".into(),
        ty: Ty::Option(Box::new(Ty::U64)),
        docs: String::new(),
    });
    let store = file(
        &emit(&c, Path::new(".")).expect("emits"),
        "gak/_store_abi.py",
    );
    assert!(store.contains("_CHANGE_FIELDS = struct.Struct(\"<24xQQ8x24xQQ8x24xQ16x24xQ16x\")"));
    assert!(store.contains("(MEMQ[(ttl_box >> 3) + 1] if ttl_box else None)"));
}

/// A type the generated Python cannot lower yet fails when the generator
/// runs, naming it, never when the package is imported.
#[test]
fn what_the_generator_cannot_write_fails_when_it_runs() {
    let mut c = contract();
    let claim = c
        .interfaces
        .iter_mut()
        .flat_map(|i| i.functions.iter_mut())
        .find(|f| f.name == "claim")
        .expect("taskboard.claim");
    claim.params.push(crate::model::Field {
        name: "why".into(),
        ty: Ty::Named("error".into()),
        docs: String::new(),
    });
    let err = emit(&c, Path::new(".")).expect_err("a variant argument");
    assert!(err.contains("error"), "{err}");
}

/// Nothing generated runs code generation of its own.
#[test]
fn generated_python_runs_no_exec() {
    let out = emit(&contract(), Path::new(".")).expect("emits");
    for o in &out {
        for word in ["exec(", "eval(", "compile("] {
            assert!(
                !o.text.contains(word),
                "{} contains {word}",
                o.path.display()
            );
        }
    }
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
    assert_eq!(rst("`a` and `b`"), "``a`` and ``b``");
}

/// An `s32` is lowered and lifted signed (`i`, not `I`), range-checked over
/// -2^31..2^31-1, a `Val` of kind S32, and read from JSON by `s32`.
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
    let out = emit(&c, Path::new(".")).expect("emits");
    let layout = file(&out, "gak/_layout.py");
    assert!(layout.contains("\nS32 = 5\n"));
    let types = file(&out, "gak/types.py");
    assert!(types.contains("    urgency: int\n"));
    assert!(types.contains("    urgency: Optional[int] = None\n"));
    let lower = file(&out, "gak/_lower.py");
    assert!(lower.contains("_PUT_S32_VAL = struct.Struct(\"<B7xi20x\").pack_into"));
    assert!(
        lower.contains("if type(urgency) is not int or not -2147483648 <= urgency < 2147483648:")
    );
    assert!(lower.contains("_PUT_S32_VAL(MEM, urgency_box, 5, urgency)"));
    let lift = file(&out, "gak/_lift.py");
    // task: id's entry (len, address), then urgency's (a signed word).
    assert!(lift.contains("_TASK_FIELDS = struct.Struct(\"<24xQQ8x24xi20x"));
    let signatures = file(&out, "gak/_signatures.py");
    assert!(signatures.contains("urgency: option<s32>"));
    assert!(signatures.contains("urgency: s32"));
    let calls = file(&out, "conformance/_calls.py");
    assert!(calls.contains("urgency=opt(s32, o.get(\"urgency\"), at + \".urgency\"),"));
    assert!(calls.contains(", s32, "));
}
