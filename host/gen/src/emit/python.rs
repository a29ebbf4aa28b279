//! Python (`host/python/src/gak`): what the package derives from the WIT.
//!
//! - `_contract.py`: the package name, version and error codes;
//! - `types.py`: the records of the exported interfaces as dataclasses, the
//!   enums as `str` enums, the variants as unions of one dataclass per case;
//! - `_new.py`: a constructor of each dataclass an answer is built as;
//! - `_wire.py`: the tuple a dataclass argument is sent as, by field name;
//! - `interfaces.py`: one class per exported interface, one method per
//!   function (`interfaces.rs`);
//! - `_lower.py`, `_lift.py`, `_store_abi.py`: every export's arguments
//!   lowered and answer lifted, and the store import's batches, as straight
//!   Python over wasmtime's C API values, their offsets computed from the
//!   WIT's types (`vals.rs`, whose layout `_layout.py` states);
//!   `_signatures.py`: the types they were written for, which the host
//!   checks a component against when it opens it;
//! - `conformance/_calls.py`: the vectors' JSON to and from those types,
//!   and one vector call per exported function.
//!
//! Nothing of this is generated at run time: the package runs no `exec`.
//!
//! What Python's API adds to the WIT (defaults, which records a caller may
//! edit, keyword-only fields) is in the tables below: the one place a
//! maintainer edits when the WIT gains a field a caller should not have to
//! pass. A field added to the WIT with no entry here gets its type's zero
//! as default when the fields before it have defaults.
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use crate::model::{Case, Kind, Named, Ty};
use crate::names::{camel, snake, type_name};
use crate::{Contract, Output, banner};

mod block;
mod calls;
mod interfaces;
mod lift;
mod lower;
mod new;
mod signatures;
mod store_abi;
mod types;
mod vals;
mod wire;

/// Records a caller edits between calls (`Committer` replaces a snapshot's
/// fields); every other dataclass is frozen.
const MUTABLE: &[&str] = &["snapshot"];

/// Input records by how many of their leading fields a caller must pass;
/// the others have defaults (their type's zero unless [`DEFAULTS`] says).
/// A record not listed has no defaults.
const REQUIRED: &[(&str, usize)] = &[
    ("step-def", 1),
    ("snapshot", 2),
    ("outcome", 1),
    ("action", 2),
    ("resolution", 1),
    ("task-seed", 1),
];

/// Defaults other than the type's zero, as Python expressions.
const DEFAULTS: &[(&str, &str, &str)] = &[("snapshot", "status", "\"running\"")];

/// Fields callers pass by keyword only: added to the WIT before fields that
/// callers of 0.1 already passed by position (`Snapshot(run_id, seq,
/// status, ...)`).
const KEYWORD_ONLY: &[(&str, &str)] = &[("snapshot", "fence")];

/// The field holding a variant case's payload, where the payload is not a
/// record (a record payload is named after its type: `Granted.lease`).
const PAYLOADS: &[(&str, &str)] = &[
    ("replayed", "result"),
    ("uncertain", "reason"),
    ("contended", "until"),
];

/// The vectors' exceptions, shared by every host (`emit::vectors`).
use crate::emit::vectors::HOST_LEVEL;

pub fn emit(c: &Contract, _root: &Path) -> Result<Vec<Output>, String> {
    let api = Api::new(c)?;
    let dir = "host/python/src/gak";
    let file = |name: &str, text: String| Output {
        path: format!("{dir}/{name}").into(),
        text,
    };
    Ok(vec![
        file("_contract.py", contract(c)),
        file("types.py", types::emit(&api)?),
        file("_new.py", new::emit(&api)?),
        file("_wire.py", wire::emit(&api)?),
        file("interfaces.py", interfaces::emit(&api)?),
        file("_layout.py", vals::layout(c)),
        file("_lower.py", lower::emit(&api)?),
        file("_lift.py", lift::emit(&api)?),
        file("_store_abi.py", store_abi::emit(&api)?),
        file("_signatures.py", signatures::emit(&api)),
        file("conformance/_calls.py", calls::emit(&api)?),
    ])
}

/// The contract as the exported interfaces use it from Python.
struct Api<'a> {
    c: &'a Contract,
    /// The named types (no aliases, not `error`) the exported functions
    /// reach, interface by interface, in declaration order.
    types: Vec<&'a Named>,
    /// The named types reachable from the exports' parameters.
    inputs: BTreeSet<String>,
    /// The named types reachable from the exports' answers (`ok` types).
    outputs: BTreeSet<String>,
    /// The variants' case classes, each once (a case shared by two
    /// variants with the same payload is one class: `Replayed`).
    cases: Vec<CaseClass<'a>>,
}

/// The dataclass of a variant case.
struct CaseClass<'a> {
    /// The variant that first has it.
    variant: &'a str,
    case: &'a Case,
    /// `Granted`.
    class: String,
    /// The payload's field (`lease`), if the case has a payload.
    field: Option<String>,
}

impl<'a> Api<'a> {
    fn new(c: &'a Contract) -> Result<Api<'a>, String> {
        let (inputs, outputs) = c.exported_reach();
        let mut types = Vec::new();
        for i in &c.interfaces {
            for t in &c.types {
                let used = inputs.contains(&t.name) || outputs.contains(&t.name);
                if t.interface == i.name && used && !matches!(t.kind, Kind::Alias(_)) {
                    types.push(t);
                }
            }
        }
        let mut cases: Vec<CaseClass<'a>> = Vec::new();
        let mut classes: BTreeSet<String> = types.iter().map(|t| class_name(t)).collect();
        for t in &types {
            let Kind::Variant(vc) = &t.kind else { continue };
            for case in vc {
                let class = camel(&case.name);
                if let Some(seen) = cases.iter().find(|k| k.class == class) {
                    if seen.case.ty != case.ty {
                        return Err(format!(
                            "variant cases {}.{} and {}.{} make one Python class {class} \
                             but carry different payloads",
                            seen.variant, case.name, t.name, case.name
                        ));
                    }
                    continue;
                }
                if !classes.insert(class.clone()) {
                    return Err(format!(
                        "case {}.{}: its class {class} is also a type's name",
                        t.name, case.name
                    ));
                }
                let field = case.ty.as_ref().map(|ty| payload_field(&case.name, ty));
                cases.push(CaseClass {
                    variant: &t.name,
                    case,
                    class,
                    field,
                });
            }
        }
        Ok(Api {
            c,
            types,
            inputs,
            outputs,
            cases,
        })
    }

    /// The case class of `case` (found in [`Api::cases`]).
    fn case(&self, case: &Case) -> &CaseClass<'a> {
        self.cases
            .iter()
            .find(|k| k.class == camel(&case.name))
            .expect("every case has a class")
    }

    /// `ty` without aliases.
    fn resolve<'b>(&'b self, ty: &'b Ty) -> &'b Ty {
        self.c.resolve(ty)
    }

    /// The named type `ty` is, if it is one (after aliases).
    fn named(&self, ty: &Ty) -> Option<&'a Named> {
        match self.resolve(ty) {
            Ty::Named(n) => Some(self.c.named(n)),
            _ => None,
        }
    }
}

/// The field a case's payload is held in.
fn payload_field(case: &str, ty: &Ty) -> String {
    if let Some((_, f)) = PAYLOADS.iter().find(|(k, _)| *k == case) {
        return (*f).to_owned();
    }
    match ty {
        Ty::Named(n) => ident(n),
        _ => "value".to_owned(),
    }
}

/// The Python class of a named type (`TaskState`, `StepDef`); a variant's
/// is the name of its union.
fn class_name(t: &Named) -> String {
    type_name(&t.name)
}

/// Python's spelling of a WIT name: snake_case, with `_` after a keyword.
fn ident(kebab: &str) -> String {
    const KEYWORDS: &[&str] = &[
        "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
        "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global",
        "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return",
        "try", "while", "with", "yield",
    ];
    let s = snake(kebab);
    if KEYWORDS.contains(&s.as_str()) {
        s + "_"
    } else {
        s
    }
}

/// The snake_case of a type's class (`TaskState` → `task_state`), for the
/// functions that convert it.
fn fn_name(t: &Named) -> String {
    let mut o = String::new();
    for (i, ch) in class_name(t).chars().enumerate() {
        if ch.is_ascii_uppercase() {
            if i > 0 {
                o.push('_');
            }
            o.push(ch.to_ascii_lowercase());
        } else {
            o.push(ch);
        }
    }
    o
}

/// `func(args)` at `indent`, one argument a line when it would pass 100
/// columns (as `black` breaks it).
fn call(indent: &str, prefix: &str, func: &str, args: &[String], suffix: &str) -> String {
    let one = format!("{indent}{prefix}{func}({}){suffix}", args.join(", "));
    if one.len() <= 100 || args.is_empty() {
        return one + "\n";
    }
    let mut o = format!("{indent}{prefix}{func}(\n");
    for a in args {
        let _ = writeln!(o, "{indent}    {a},");
    }
    let _ = writeln!(o, "{indent})");
    o
}

/// "A" or "An", as English writes it before `name`.
fn article(name: &str) -> &'static str {
    if name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "An"
    } else {
        "A"
    }
}

/// A string literal.
fn lit(s: &str) -> String {
    format!("{s:?}")
}

/// `list<tuple<string, string>>`: a map given as key-sorted pairs, a
/// `dict` in the API (`snapshot.fields`).
fn is_pairs(ty: &Ty) -> bool {
    matches!(ty, Ty::List(t) if **t == Ty::Tuple(vec![Ty::String, Ty::String]))
}

/// The annotation of a value of `ty` in the API.
fn annotation(api: &Api, ty: &Ty) -> Result<String, String> {
    Ok(match api.resolve(ty) {
        Ty::Bool => "bool".into(),
        Ty::U8 | Ty::U32 | Ty::S32 | Ty::U64 => "int".into(),
        Ty::String => "str".into(),
        Ty::List(t) if **t == Ty::U8 => "bytes".into(),
        t if is_pairs(t) => "dict[str, str]".into(),
        Ty::List(t) => format!("list[{}]", annotation(api, t)?),
        Ty::Option(t) => format!("Optional[{}]", annotation(api, t)?),
        Ty::Tuple(ts) => format!(
            "tuple[{}]",
            ts.iter()
                .map(|t| annotation(api, t))
                .collect::<Result<Vec<_>, _>>()?
                .join(", ")
        ),
        Ty::Named(n) => class_name(api.c.named(n)),
        Ty::Result(..) => return Err("a result inside a value is not supported".into()),
    })
}

/// WIT docs as reStructuredText: `code` is ``code``.
fn rst(docs: &str) -> String {
    docs.replace('\\', "\\\\").replace('`', "``")
}

/// A docstring at `indent` (the fallback when the WIT has no docs).
fn docstring(docs: &str, fallback: &str, indent: &str) -> String {
    let text = if docs.trim().is_empty() {
        fallback.to_owned()
    } else {
        rst(docs)
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut o = String::new();
    for (i, line) in lines.iter().enumerate() {
        let open = if i == 0 { "\"\"\"" } else { "" };
        let close = if i + 1 == lines.len() { "\"\"\"" } else { "" };
        if line.is_empty() && i > 0 {
            o.push('\n');
        } else {
            let _ = writeln!(o, "{indent}{open}{line}{close}");
        }
    }
    o
}

/// `#:` doc comments at `indent` (Sphinx's attribute docs).
fn attr_docs(docs: &str, indent: &str) -> String {
    super::comment(&rst(docs), indent, "#: ")
}

/// The first line of every generated Python file.
fn head(c: &Contract, docstring: &str) -> String {
    format!(
        "# {}\n\"\"\"{docstring}\"\"\"\n\nfrom __future__ import annotations\n",
        banner(c)
    )
}

/// `# --- name ---` to column 76, as the hand-written modules mark sections.
fn section(name: &str) -> String {
    let mut s = format!("# --- {name} ");
    while s.len() < 76 {
        s.push('-');
    }
    s + "\n"
}

/// `_contract.py`.
fn contract(c: &Contract) -> String {
    let mut o = head(
        c,
        "The contract this package implements: its WIT package, its version and\n\
         its error codes (WIT ``types.error``).",
    );
    let _ = write!(
        o,
        "\n#: The WIT package.\nPACKAGE = {}\n\
         #: The contract version this host implements; a component of another one\n\
         #: is refused when it is opened (wit/world.wit, \"Compatibility\").\n\
         VERSION = {}\n\n\
         #: Every refusal code of the contract (WIT ``types.error``), except ``storage``,\n\
         #: which is raised as :class:`~gak.StorageError`.\n\
         CODES: frozenset[str] = frozenset(\n    {{\n",
        lit(&c.package),
        lit(&c.version)
    );
    for e in c.error_codes() {
        if e.name == "storage" {
            continue;
        }
        o.push_str(&super::comment(&rst(&e.docs), "        ", "# "));
        let _ = writeln!(o, "        {},", lit(&e.name));
    }
    o.push_str("    }\n)\n");
    o
}

#[cfg(test)]
mod tests;
