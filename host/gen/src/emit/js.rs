//! JavaScript (`host/js/src`): what the package derives from the WIT.
//!
//! - `contract.js`: the contract's version, error codes and enum cases;
//! - `contract.d.ts`: the records, enums and variants as the API takes and
//!   answers them, and the exported interfaces' methods (their docs are the
//!   WIT's);
//! - `checks.js`: the check every record argument passes before it is
//!   lowered (`values.js` says why), and the variants' answers with their
//!   payloads named;
//! - `interfaces.js`: one class per exported interface, one method per
//!   function: check the arguments, run the export in one transaction;
//! - `conformance/exports.js`: the vectors' JSON to and from those values,
//!   and one vector call per exported function (`CALLS`);
//! - `test/types/component.ts`: `contract.d.ts` checked by `tsc` against
//!   the types jco makes from the component itself.
//!
//! Where the JavaScript API departs from what the WIT says, the departure
//! is one of the tables below; `kernel.js` subclasses the generated
//! interfaces for the calls the API adds (`writeFenced`, `pruneDryRun`).
use std::collections::BTreeSet;
use std::path::Path;

use crate::model::{Field, Function, Kind, Named, Ty};
use crate::names::{camel, lower_camel, type_name};
use crate::{Contract, Output};

mod checks;
mod conformance;
mod contract;
mod dts;
mod interfaces;
mod typecheck;

/// Input fields a caller may leave out that are not lists, bools or
/// options (those may always be left out), with the value they then take,
/// as JavaScript.
const DEFAULTS: &[(&str, &str, &str)] = &[("action", "retry-safety", "'safe'")];

/// Input fields the TypeScript type requires although an argument may
/// leave them out at run time: an absent `applied` would read as "not
/// applied", which clears the key for another attempt.
const REQUIRED: &[(&str, &str)] = &[("resolution", "applied")];

/// The field holding a variant case's payload, where the payload is not a
/// record (a record payload is named after its type: `granted` → `lease`).
const PAYLOADS: &[(&str, &str)] = &[
    ("replayed", "result"),
    ("uncertain", "reason"),
    ("contended", "until"),
];

/// Functions the API takes one options object for, holding the parameters
/// by name (`list({ state, after, limit })`): most of their parameters are
/// optional.
const OPTIONS: &[&str] = &["sideeffect.list", "taskboard.list"];

/// Pure functions (`emit::PURE`).
use crate::emit::PURE;

/// Exported functions the API reaches only through a call of its own,
/// written by hand: `sink-advance` is the fence compare of `writeFenced`
/// (the vectors' `sink.write-fenced`; `emit::vectors`).
use crate::emit::vectors::HOST_LEVEL;

/// Interfaces whose API class adds hand-written members (`kernel.js`),
/// declared in `index.d.ts` as `<Interface>Host`.
const HOST_MEMBERS: &[&str] = &["sideeffect", "retention"];

pub fn emit(c: &Contract, _root: &Path) -> Result<Vec<Output>, String> {
    let api = Api::new(c)?;
    let dir = "host/js/src";
    Ok(vec![
        Output {
            path: format!("{dir}/contract.js").into(),
            text: contract::js(&api),
        },
        Output {
            path: format!("{dir}/contract.d.ts").into(),
            text: dts::emit(&api)?,
        },
        Output {
            path: format!("{dir}/checks.js").into(),
            text: checks::emit(&api)?,
        },
        Output {
            path: format!("{dir}/interfaces.js").into(),
            text: interfaces::emit(&api)?,
        },
        Output {
            path: format!("{dir}/conformance/exports.js").into(),
            text: conformance::emit(&api)?,
        },
        Output {
            path: "host/js/test/types/component.ts".into(),
            text: typecheck::emit(&api)?,
        },
    ])
}

/// The contract as the exported interfaces use it from JavaScript.
struct Api<'a> {
    c: &'a Contract,
    /// The named types (no aliases, not `error`) the exported functions
    /// reach, in declaration order.
    types: Vec<&'a Named>,
    /// The named types reachable from the exports' parameters.
    inputs: BTreeSet<String>,
    /// The named types reachable from the exports' answers (`ok` types).
    outputs: BTreeSet<String>,
}

impl<'a> Api<'a> {
    fn new(c: &'a Contract) -> Result<Api<'a>, String> {
        let (inputs, outputs) = c.exported_reach();
        let types: Vec<&Named> = c
            .types
            .iter()
            .filter(|t| inputs.contains(&t.name) || outputs.contains(&t.name))
            .filter(|t| !matches!(t.kind, Kind::Alias(_)) && t.name != "error")
            .collect();
        for t in &types {
            if matches!(t.kind, Kind::Variant(_)) && inputs.contains(&t.name) {
                return Err(format!(
                    "variant {} as an argument: the JavaScript generator has no spelling for it yet",
                    t.name
                ));
            }
            for case in t.cases() {
                ident(&case.name)?;
            }
            for f in t.fields() {
                ident(&f.name)?;
            }
        }
        for f in c.exported_functions() {
            for p in &f.params {
                ident(&p.name)?;
            }
        }
        Ok(Api {
            c,
            types,
            inputs,
            outputs,
        })
    }

    /// `ty` with aliases replaced by what they name.
    fn resolve<'t>(&'t self, ty: &'t Ty) -> &'t Ty {
        self.c.resolve(ty)
    }

    /// The named type `ty` is (after aliases), if any.
    fn named(&self, ty: &Ty) -> Option<&'a Named> {
        match self.resolve(ty) {
            Ty::Named(n) => Some(self.c.named(n)),
            _ => None,
        }
    }

    /// The exported interfaces, each with the types it defines that the
    /// API uses (`types`' first, where the shared ones live).
    fn by_interface(&self) -> Vec<(&'a str, Vec<&'a Named>)> {
        let shared = self.c.interfaces.iter().filter(|i| !i.export);
        shared
            .chain(self.c.exports())
            .map(|i| {
                let types = self
                    .types
                    .iter()
                    .copied()
                    .filter(|t| t.interface == i.name)
                    .collect();
                (i.name.as_str(), types)
            })
            .collect()
    }

    /// The exported functions the API has a method for, interface by
    /// interface.
    fn functions(&self) -> impl Iterator<Item = &'a Function> {
        self.c
            .exported_functions()
            .filter(|f| !HOST_LEVEL.contains(&f.call_name().as_str()))
    }

    /// The TypeScript type of a value of `ty` the API answers.
    fn ts_out(&self, ty: &Ty) -> Result<String, String> {
        Ok(match self.resolve(ty) {
            Ty::Bool => "boolean".into(),
            Ty::U8 | Ty::U32 | Ty::S32 => "number".into(),
            Ty::U64 => "bigint".into(),
            Ty::String => "string".into(),
            Ty::List(e) if **e == Ty::U8 => "Uint8Array".into(),
            Ty::List(e) => array(&self.ts_out(e)?),
            Ty::Option(e) => format!("{} | undefined", self.ts_out(e)?),
            Ty::Tuple(ts) => tuple(ts.iter().map(|t| self.ts_out(t)))?,
            Ty::Named(n) => type_name(n),
            Ty::Result(..) => return Err("a nested result is not supported".into()),
        })
    }

    /// The TypeScript type of an argument of `ty`.
    fn ts_in(&self, ty: &Ty) -> Result<String, String> {
        Ok(match self.resolve(ty) {
            Ty::List(e) if **e == Ty::U8 => "Bytes".into(),
            t if is_pairs(t) => "Array<[string, string]> | Record<string, string>".into(),
            Ty::List(e) => array(&self.ts_in(e)?),
            Ty::Option(e) => format!("{} | undefined", self.ts_in(e)?),
            Ty::Tuple(ts) => tuple(ts.iter().map(|t| self.ts_in(t)))?,
            Ty::Named(n) => match &self.c.named(n).kind {
                Kind::Record(_) => self.input_name(self.c.named(n)),
                _ => type_name(n),
            },
            other => self.ts_out(other)?,
        })
    }

    /// The TypeScript name of record `t` as an argument: `<Name>Input`
    /// where the API also answers it and an argument may differ from the
    /// answer (a field left out, bytes given as a string).
    fn input_name(&self, t: &Named) -> String {
        if self.outputs.contains(&t.name) && self.input_differs(t) {
            format!("{}Input", type_name(&t.name))
        } else {
            type_name(&t.name)
        }
    }

    fn input_differs(&self, t: &Named) -> bool {
        t.fields().iter().any(|f| {
            let optional_in = self.optional_input(t, f);
            let optional_out = matches!(self.resolve(&f.ty), Ty::Option(_));
            optional_in != optional_out || self.ts_in(&f.ty).ok() != self.ts_out(&f.ty).ok()
        })
    }

    /// May an argument leave field `f` of record `t` out (in its
    /// TypeScript type)?
    fn optional_input(&self, t: &Named, f: &Field) -> bool {
        let required = REQUIRED.iter().any(|(r, n)| *r == t.name && *n == f.name);
        !required
            && (default(t, f).is_some()
                || matches!(self.resolve(&f.ty), Ty::Option(_) | Ty::List(_) | Ty::Bool))
    }

    /// Does an answer of `ty` hold a variant (which the API reshapes)?
    fn reshaped(&self, ty: &Ty) -> bool {
        match self.resolve(ty) {
            Ty::List(t) | Ty::Option(t) => self.reshaped(t),
            Ty::Tuple(ts) => ts.iter().any(|t| self.reshaped(t)),
            Ty::Named(n) => {
                let t = self.c.named(n);
                match &t.kind {
                    Kind::Variant(_) => true,
                    Kind::Record(fields) => fields.iter().any(|f| self.reshaped(&f.ty)),
                    _ => false,
                }
            }
            _ => false,
        }
    }
}

/// `list<tuple<string, string>>`: a map given as sorted pairs, an object
/// in the vectors (and accepted as one by the API).
fn is_pairs(ty: &Ty) -> bool {
    matches!(ty, Ty::List(e) if matches!(&**e, Ty::Tuple(ts) if ts == &[Ty::String, Ty::String]))
}

fn array(item: &str) -> String {
    if item.chars().all(|c| c.is_ascii_alphanumeric()) {
        format!("{item}[]")
    } else {
        format!("Array<{item}>")
    }
}

fn tuple(items: impl Iterator<Item = Result<String, String>>) -> Result<String, String> {
    Ok(format!(
        "[{}]",
        items.collect::<Result<Vec<_>, _>>()?.join(", ")
    ))
}

/// The default of field `f` of `t` (JavaScript), if the table has one.
fn default(t: &Named, f: &Field) -> Option<&'static str> {
    DEFAULTS
        .iter()
        .find(|(r, n, _)| *r == t.name && *n == f.name)
        .map(|(_, _, d)| *d)
}

/// The payload field of variant case `case` (of payload type `ty`).
fn payload_field(api: &Api, case: &str, ty: &Ty) -> Result<String, String> {
    if let Some((_, field)) = PAYLOADS.iter().find(|(c, _)| *c == case) {
        return Ok((*field).to_owned());
    }
    match api.named(ty) {
        Some(t) if matches!(t.kind, Kind::Record(_)) => Ok(lower_camel(&t.name)),
        _ => Err(format!(
            "variant case {case}: name its payload's field in PAYLOADS (host/gen/src/emit/js.rs)"
        )),
    }
}

/// A WIT name as a JavaScript identifier (camelCase), refused where it is
/// a reserved word.
fn ident(kebab: &str) -> Result<String, String> {
    const RESERVED: &[&str] = &[
        "arguments",
        "await",
        "break",
        "case",
        "catch",
        "class",
        "const",
        "continue",
        "debugger",
        "default",
        "delete",
        "do",
        "else",
        "enum",
        "eval",
        "export",
        "extends",
        "false",
        "finally",
        "for",
        "function",
        "if",
        "implements",
        "import",
        "in",
        "instanceof",
        "interface",
        "let",
        "new",
        "null",
        "package",
        "private",
        "protected",
        "public",
        "return",
        "static",
        "super",
        "switch",
        "this",
        "throw",
        "true",
        "try",
        "typeof",
        "var",
        "void",
        "while",
        "with",
        "yield",
    ];
    let s = lower_camel(kebab);
    if RESERVED.contains(&s.as_str()) {
        return Err(format!(
            "`{kebab}` is a JavaScript reserved word: the JavaScript generator has no spelling for it yet"
        ));
    }
    Ok(s)
}

/// The name of the frozen array of an enum's cases: `TASK_STATE_CASES`.
fn cases_const(t: &Named) -> String {
    let mut out = String::new();
    for (i, ch) in type_name(&t.name).chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_uppercase());
    }
    out.push_str("_CASES");
    out
}

/// A JavaScript string literal (single quotes, as the hand-written code).
fn lit(s: &str) -> String {
    let mut out = String::from("'");
    for ch in s.chars() {
        match ch {
            '\'' | '\\' => {
                out.push('\\');
                out.push(ch);
            }
            _ => out.push(ch),
        }
    }
    out.push('\'');
    out
}

/// An object key: bare where it is an identifier, else quoted.
fn key(name: &str) -> String {
    if !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
    {
        name.to_owned()
    } else {
        lit(name)
    }
}

/// A JSDoc block for `docs` at `indent`; `/** one line */` when it fits.
fn jsdoc(docs: &str, indent: &str) -> String {
    let docs = docs.replace("*/", "*\\/");
    if docs.trim().is_empty() {
        return String::new();
    }
    let one = format!("{indent}/** {} */", docs.trim());
    if !docs.contains('\n') && one.len() <= 110 {
        return format!("{one}\n");
    }
    format!(
        "{indent}/**\n{}{indent} */\n",
        super::comment(&docs, indent, " * ")
    )
}

/// `// name` heading of a part of a generated file.
fn section(name: &str) -> String {
    format!("// {name}\n")
}

/// The interface's class name: `Sideeffect`.
fn class_name(interface: &str) -> String {
    camel(interface)
}

#[cfg(test)]
mod tests;
