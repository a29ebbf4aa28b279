//! `guest/src/contract.rs`: every record, enum and variant of the WIT as
//! the rules' Rust types, one module per interface.
//!
//! What each type derives follows from its WIT type:
//! - every type: `Clone`, `Debug` (a record with a capability field gets a
//!   `Debug` that redacts it, see `CAPABILITIES`), `PartialEq`, `Eq`;
//! - enums: also `Copy`, `Hash`, `PartialOrd`, `Ord` (declaration order), a
//!   `name()` answering the WIT name, and serde as the WIT names;
//! - records: `Copy` when every field is, `Default` when every field has an
//!   empty value that is not an identity (lists, options, numbers, bools:
//!   a string is an id or a text, an enum has no neutral case), and serde
//!   with the WIT's field names, an absent list read as empty and an absent
//!   option as none, a none option left out;
//! - variants: no serde (what a variant looks like in JSON is the
//!   conformance vectors' business, `{"case": payload}`); the contract's
//!   `error` also gets `name()`, `NAMES` and a `Display` of `name: payload`.
use std::fmt::Write as _;

use super::{CAPABILITIES, doc, ident, is_copy_type, non_exhaustive, payload, type_name};
use crate::model::{Case, Field, Interface, Kind, Named, Ty};
use crate::names::{camel, snake};
use crate::{Contract, banner};

pub fn contract(c: &Contract) -> Result<String, String> {
    let mut o = String::new();
    let _ = writeln!(o, "// {}", banner(c));
    o.push_str(
        "//! The contract's types: every record, enum and variant of `wit/`, one\n\
         //! module per interface, with what follows from the WIT alone (derives,\n\
         //! serde names, `name()` of enums and of the error). The types of the\n\
         //! exported interfaces (and of `types`) are re-exported from the crate's\n\
         //! root; those of the imported `store` where the rules use them (`Table`,\n\
         //! `StoreFault` from the root, the rest from `buffer`). Hand-written\n\
         //! `impl`s live beside their users (`model.rs`, `error.rs`, `txn.rs`).\n\n",
    );
    for i in &c.interfaces {
        let types: Vec<&Named> = c
            .types
            .iter()
            .filter(|t| t.interface == i.name && !matches!(t.kind, Kind::Alias(_)))
            .collect();
        if types.is_empty() {
            continue;
        }
        if imported(i) {
            let _ = writeln!(
                o,
                "/// WIT interface `{}` (imported).\npub(crate) mod {} {{",
                i.name,
                snake(&i.name)
            );
        } else {
            let _ = writeln!(
                o,
                "pub use self::{0}::*;\n\n/// WIT interface `{1}`.\nmod {0} {{",
                snake(&i.name),
                i.name
            );
        }
        o.push_str(&module(c, &types)?);
        o.push_str("}\n\n");
    }
    Ok(o)
}

fn imported(i: &Interface) -> bool {
    !i.export && !i.functions.is_empty()
}

fn module(c: &Contract, types: &[&Named]) -> Result<String, String> {
    let mut body = String::new();
    for t in types {
        body.push_str(&match &t.kind {
            Kind::Record(fields) => record(c, t, fields)?,
            Kind::Enum(cases) => enumeration(t, cases),
            Kind::Variant(cases) => variant(c, t, cases)?,
            Kind::Alias(_) => String::new(),
        });
        body.push('\n');
    }
    let mut uses = Vec::new();
    if body.contains("fmt::") {
        uses.push("use std::fmt;\n");
    }
    if body.contains("Serialize") {
        uses.push("use serde::{Deserialize, Serialize};\n");
    }
    Ok(format!("{}\n{body}", uses.concat()))
}

/// `ty` spelled in the module of interface `here`.
fn rust_ty(c: &Contract, ty: &Ty, here: &str) -> Result<String, String> {
    Ok(match c.resolve(ty) {
        Ty::Bool => "bool".into(),
        Ty::U8 => "u8".into(),
        Ty::U32 => "u32".into(),
        Ty::S32 => "i32".into(),
        Ty::U64 => "u64".into(),
        Ty::String => "String".into(),
        Ty::List(t) => format!("Vec<{}>", rust_ty(c, t, here)?),
        Ty::Option(t) => format!("Option<{}>", rust_ty(c, t, here)?),
        Ty::Tuple(ts) => format!(
            "({})",
            ts.iter()
                .map(|t| rust_ty(c, t, here))
                .collect::<Result<Vec<_>, _>>()?
                .join(", ")
        ),
        Ty::Named(n) => {
            let t = c.named(n);
            if t.interface == here {
                type_name(n)
            } else {
                format!("super::{}::{}", snake(&t.interface), type_name(n))
            }
        }
        Ty::Result(..) => return Err("a `result` outside a function's answer".into()),
    })
}

fn type_docs(t: &Named, extra: &[String]) -> String {
    let mut docs = doc(&t.docs, &format!("WIT `{}.{}`.", t.interface, t.name));
    for e in extra.iter().filter(|e| !e.is_empty()) {
        docs.push_str("///\n");
        docs.push_str(&doc(e, ""));
    }
    docs
}

/// Does every field have an empty value that is not an identity?
fn has_default(c: &Contract, ty: &Ty) -> bool {
    match c.resolve(ty) {
        Ty::List(_) | Ty::Option(_) | Ty::Bool | Ty::U8 | Ty::U32 | Ty::S32 | Ty::U64 => true,
        Ty::Tuple(ts) => ts.iter().all(|t| has_default(c, t)),
        Ty::Named(n) => match &c.named(n).kind {
            Kind::Record(fields) => fields.iter().all(|f| has_default(c, &f.ty)),
            _ => false,
        },
        Ty::String | Ty::Result(..) => false,
    }
}

/// What serde's `rename_all = "kebab-case"` makes of a Rust field name.
fn serde_field(rust: &str) -> String {
    rust.replace('_', "-")
}

/// What serde's `rename_all = "kebab-case"` makes of a Rust variant name.
fn serde_case(rust: &str) -> String {
    let mut out = String::new();
    for (i, ch) in rust.chars().enumerate() {
        if ch.is_uppercase() && i > 0 {
            out.push('-');
        }
        out.extend(ch.to_lowercase());
    }
    out
}

fn record(c: &Contract, t: &Named, fields: &[Field]) -> Result<String, String> {
    let name = type_name(&t.name);
    let secrets: Vec<&str> = CAPABILITIES
        .iter()
        .filter(|(ty, _)| *ty == t.name)
        .map(|(_, f)| *f)
        .collect();
    for s in &secrets {
        if !fields.iter().any(|f| f.name == *s) {
            return Err(format!("capability {}.{s}: no such field", t.name));
        }
    }
    let mut derives = vec!["Clone"];
    if is_copy_type(c, t) {
        derives.push("Copy");
    }
    if secrets.is_empty() {
        derives.push("Debug");
    }
    if fields.iter().all(|f| has_default(c, &f.ty)) {
        derives.push("Default");
    }
    derives.extend(["PartialEq", "Eq", "Serialize", "Deserialize"]);
    let redaction = match secrets.as_slice() {
        [] => String::new(),
        some => format!(
            "`Debug` redacts {}: whoever reads one can act as its owner.",
            some.iter()
                .map(|s| format!("`{}`", snake(s)))
                .collect::<Vec<_>>()
                .join(" and ")
        ),
    };
    let mut o = type_docs(t, &[redaction]);
    let _ = writeln!(
        o,
        "#[derive({})]\n#[serde(rename_all = \"kebab-case\")]\npub struct {name} {{",
        derives.join(", ")
    );
    for f in fields {
        let id = ident(&f.name)?;
        o.push_str(&doc(&f.docs, &format!("WIT `{}.{}`.", t.name, f.name)));
        let mut serde = Vec::new();
        match c.resolve(&f.ty) {
            Ty::Option(_) => {
                serde.push("default, skip_serializing_if = \"Option::is_none\"".into())
            }
            Ty::List(_) => serde.push("default".into()),
            _ => {}
        }
        if serde_field(&id) != f.name {
            serde.push(format!("rename = {:?}", f.name));
        }
        if !serde.is_empty() {
            let _ = writeln!(o, "#[serde({})]", serde.join(", "));
        }
        let _ = writeln!(o, "pub {id}: {},", rust_ty(c, &f.ty, &t.interface)?);
    }
    o.push_str("}\n");
    if !secrets.is_empty() {
        o.push_str(&redacted_debug(c, &name, fields, &secrets)?);
    }
    Ok(o)
}

/// A `Debug` that shows only whether a capability is there.
fn redacted_debug(
    c: &Contract,
    name: &str,
    fields: &[Field],
    secrets: &[&str],
) -> Result<String, String> {
    let mut o = format!(
        "\nimpl fmt::Debug for {name} {{\n\
         fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {{\n\
         f.debug_struct({name:?})\n"
    );
    for field in fields {
        let id = ident(&field.name)?;
        let shown = if !secrets.contains(&field.name.as_str()) {
            format!("&self.{id}")
        } else {
            match c.resolve(&field.ty) {
                Ty::String => "&\"<redacted>\"".to_owned(),
                Ty::Option(inner) if **inner == Ty::String => format!(
                    "&format_args!(\"{{}}\", self.{id}.as_ref().map_or(\"None\", |_| \"Some(<redacted>)\"))"
                ),
                other => {
                    return Err(format!(
                        "capability {name}.{id}: a {other:?} cannot be redacted yet"
                    ));
                }
            }
        };
        let _ = writeln!(o, ".field({id:?}, {shown})");
    }
    o.push_str(".finish()\n}\n}\n");
    Ok(o)
}

fn enumeration(t: &Named, cases: &[Case]) -> String {
    let name = type_name(&t.name);
    let mut o = type_docs(t, &[non_exhaustive(&t.name).unwrap_or_default().to_owned()]);
    o.push_str(
        "#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]\n\
         #[serde(rename_all = \"kebab-case\")]\n",
    );
    if non_exhaustive(&t.name).is_some() {
        o.push_str("#[non_exhaustive]\n");
    }
    let _ = writeln!(o, "pub enum {name} {{");
    for case in cases {
        o.push_str(&doc(
            &case.docs,
            &format!("WIT `{}.{}`.", t.name, case.name),
        ));
        if serde_case(&camel(&case.name)) != case.name {
            let _ = writeln!(o, "#[serde(rename = {:?})]", case.name);
        }
        let _ = writeln!(o, "{},", camel(&case.name));
    }
    o.push_str("}\n\n");
    let _ = writeln!(
        o,
        "impl {name} {{\n/// The case's name in the contract (kebab-case, as in the WIT).\n\
         pub fn name(self) -> &'static str {{\nmatch self {{"
    );
    for case in cases {
        let _ = writeln!(o, "{name}::{} => {:?},", camel(&case.name), case.name);
    }
    o.push_str("}\n}\n}\n");
    o
}

fn variant(c: &Contract, t: &Named, cases: &[Case]) -> Result<String, String> {
    let name = type_name(&t.name);
    let mut o = type_docs(t, &[non_exhaustive(&t.name).unwrap_or_default().to_owned()]);
    o.push_str("#[derive(Clone, Debug, PartialEq, Eq)]\n");
    if non_exhaustive(&t.name).is_some() {
        o.push_str("#[non_exhaustive]\n");
    }
    let _ = writeln!(o, "pub enum {name} {{");
    for case in cases {
        o.push_str(&doc(
            &case.docs,
            &format!("WIT `{}.{}`.", t.name, case.name),
        ));
        let payload = match (&case.ty, payload(&t.name, &case.name)) {
            (_, Some(p)) => format!("(crate::{})", p.rust),
            (Some(ty), None) => format!("({})", rust_ty(c, ty, &t.interface)?),
            (None, None) => String::new(),
        };
        let _ = writeln!(o, "{}{payload},", camel(&case.name));
    }
    o.push_str("}\n");
    // The contract's error (`Contract::error_codes`).
    if t.name == "error" {
        o.push_str(&error_names(&name, cases));
    }
    Ok(o)
}

/// The contract's error: its codes, and how it reads.
fn error_names(name: &str, cases: &[Case]) -> String {
    let arm = |case: &Case| {
        let rust = camel(&case.name);
        match case.ty {
            Some(_) => format!("{name}::{rust}(_)"),
            None => format!("{name}::{rust}"),
        }
    };
    let mut o = format!(
        "\nimpl {name} {{\n/// The case's name in the contract (kebab-case, as in the WIT): the\n\
         /// code every host reports.\npub fn name(&self) -> &'static str {{\nmatch self {{\n"
    );
    for case in cases {
        let _ = writeln!(o, "{} => {:?},", arm(case), case.name);
    }
    let _ = writeln!(
        o,
        "}}\n}}\n\n/// Every case's name, in the WIT's order.\npub const NAMES: [&'static str; {}] = [",
        cases.len()
    );
    for case in cases {
        let _ = writeln!(o, "{:?},", case.name);
    }
    o.push_str("];\n}\n\n");
    let _ = writeln!(
        o,
        "/// The code, then what the payload says: `invalid-input: ttl is 0`.\n\
         impl fmt::Display for {name} {{\n\
         fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {{\nmatch self {{"
    );
    for case in cases.iter().filter(|c| c.ty.is_some()) {
        let _ = writeln!(
            o,
            "{name}::{}(m) => write!(f, \"{}: {{m}}\"),",
            camel(&case.name),
            case.name
        );
    }
    o.push_str("_ => f.write_str(self.name()),\n}\n}\n}\n");
    o
}
