//! `gak/_signatures.py`: the WIT type of every function the generated
//! lifts and lowerings read or write (the exports and the store import),
//! spelled structurally — records with their fields, enums and variants
//! with their cases, aliases resolved — as `gak._engine` spells the types
//! a component declares, so opening a component built from another WIT
//! than this package was generated from fails then, naming the function,
//! instead of a lift reading the wrong fields.
use std::fmt::Write as _;

use super::{Api, head, lit};
use crate::Contract;
use crate::model::{Function, Kind, Ty};

/// `ty` as the WIT spells it, named types by name (for docs).
pub(super) fn wit(ty: &Ty) -> String {
    match ty {
        Ty::Bool => "bool".into(),
        Ty::U8 => "u8".into(),
        Ty::U32 => "u32".into(),
        Ty::S32 => "s32".into(),
        Ty::U64 => "u64".into(),
        Ty::String => "string".into(),
        Ty::List(e) => format!("list<{}>", wit(e)),
        Ty::Option(e) => format!("option<{}>", wit(e)),
        Ty::Tuple(ts) => format!(
            "tuple<{}>",
            ts.iter().map(wit).collect::<Vec<_>>().join(", ")
        ),
        Ty::Result(ok, err) => match (ok, err) {
            (Some(o), Some(e)) => format!("result<{}, {}>", wit(o), wit(e)),
            (None, Some(e)) => format!("result<_, {}>", wit(e)),
            (Some(o), None) => format!("result<{}>", wit(o)),
            (None, None) => "result".into(),
        },
        Ty::Named(n) => n.clone(),
    }
}

/// `ty` spelled out: what `gak._engine.describe` makes of the type a
/// component declares.
pub(super) fn structural(c: &Contract, ty: &Ty) -> String {
    match c.resolve(ty) {
        Ty::Bool => "bool".into(),
        Ty::U8 => "u8".into(),
        Ty::U32 => "u32".into(),
        Ty::S32 => "s32".into(),
        Ty::U64 => "u64".into(),
        Ty::String => "string".into(),
        Ty::List(e) => format!("list<{}>", structural(c, e)),
        Ty::Option(e) => format!("option<{}>", structural(c, e)),
        Ty::Tuple(ts) => format!(
            "tuple<{}>",
            ts.iter()
                .map(|t| structural(c, t))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Ty::Result(ok, err) => format!(
            "result<{}, {}>",
            ok.as_deref().map_or("_".into(), |t| structural(c, t)),
            err.as_deref().map_or("_".into(), |t| structural(c, t))
        ),
        Ty::Named(n) => {
            let t = c.named(n);
            match &t.kind {
                Kind::Record(fields) => format!(
                    "record {{{}}}",
                    fields
                        .iter()
                        .map(|f| format!("{}: {}", f.name, structural(c, &f.ty)))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Kind::Enum(cases) => format!(
                    "enum {{{}}}",
                    cases
                        .iter()
                        .map(|k| k.name.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Kind::Variant(cases) => format!(
                    "variant {{{}}}",
                    cases
                        .iter()
                        .map(|k| match &k.ty {
                            Some(t) => format!("{}({})", k.name, structural(c, t)),
                            None => k.name.clone(),
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Kind::Alias(_) => unreachable!("resolved"),
            }
        }
    }
}

/// A function's type spelled out.
pub(super) fn function(c: &Contract, f: &Function) -> String {
    let params = f
        .params
        .iter()
        .map(|p| format!("{}: {}", p.name, structural(c, &p.ty)))
        .collect::<Vec<_>>()
        .join(", ");
    match &f.result {
        Some(r) => format!("func({params}) -> {}", structural(c, r)),
        None => format!("func({params})"),
    }
}

/// The functions the generated modules serve: the imported ones (the
/// store), then the exported ones, as `interface#function`.
pub(super) fn functions(c: &Contract) -> Vec<(String, &Function)> {
    c.interfaces
        .iter()
        .filter(|i| !i.export)
        .chain(c.exports())
        .flat_map(|i| i.functions.iter())
        .map(|f| (format!("{}#{}", f.interface, f.name), f))
        .collect()
}

/// `text` as adjacent string literals of at most ~80 characters, split
/// after `, `, at `indent`.
fn literal_lines(text: &str, indent: &str) -> String {
    let mut parts = Vec::new();
    let mut rest = text;
    while rest.len() > 80 {
        let cut = rest[..80].rfind(", ").map_or(80, |i| i + 2);
        parts.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    parts.push(rest);
    parts
        .iter()
        .map(|p| format!("{indent}{}\n", lit(p)))
        .collect()
}

/// `_signatures.py`.
pub(super) fn emit(api: &Api) -> String {
    let c = api.c;
    let mut o = head(
        c,
        "The type of every function the generated lifts and lowerings serve (from\n\
         ``wit/``), spelled out: records with their fields, enums and variants with\n\
         their cases, aliases resolved. :mod:`gak._engine` spells the types a\n\
         component declares the same way and refuses, when it opens one, a\n\
         component whose functions differ: it was built from another WIT than\n\
         this package was generated from.\n",
    );
    o.push_str("\n#: ``interface#function`` → its type.\nSIGNATURES: dict[str, str] = {\n");
    for (name, f) in functions(c) {
        let _ = write!(
            o,
            "    {}: (\n{}    ),\n",
            lit(&name),
            literal_lines(&function(c, f), "        ")
        );
    }
    o.push_str("}\n");
    o
}
