//! `contract.d.ts`: the contract's types as the API takes and answers them,
//! and the exported interfaces' methods, with the WIT's docs.
use std::fmt::Write as _;

use super::{
    Api, HOST_MEMBERS, OPTIONS, cases_const, class_name, default, ident, jsdoc, lit, payload_field,
    section,
};
use crate::banner;
use crate::model::{Field, Function, Kind, Named, Ty};
use crate::names::{lower_camel, type_name};

pub(super) fn emit(api: &Api) -> Result<String, String> {
    let c = api.c;
    let mut o = format!("// {}\n", banner(c));
    o.push_str(
        "// The contract's types (wit/) as the JavaScript API takes and answers them:\n\
         // every u64 is a `bigint`, a u32 a `number`, bytes a `Uint8Array` (an argument\n\
         // may give a UTF-8 string), an absent option `undefined`; a variant is\n\
         // `{ tag, ...payload }` with its payload under a name. A record an argument may\n\
         // give with fields left out (lists, bools, options) is `<Name>Input` where the\n\
         // API also answers it. And the exported interfaces' methods (`kernel.taskboard`).\n",
    );
    let hosts: Vec<String> = c
        .exports()
        .filter(|i| HOST_MEMBERS.contains(&i.name.as_str()))
        .map(|i| format!("{}Host", class_name(&i.name)))
        .collect();
    if !hosts.is_empty() {
        let _ = writeln!(
            o,
            "import type {{ {} }} from './index.js';",
            hosts.join(", ")
        );
    }
    let _ = write!(
        o,
        "\n/** The version of the contract this host implements (the WIT package's). */\n\
         export declare const CONTRACT_VERSION: {};\n\
         /** The WIT package this host implements: a component of another version is refused. */\n\
         export declare const CONTRACT: {};\n\n",
        lit(&c.version),
        lit(&format!("{}@{}", c.package, c.version))
    );
    let error = c.named("error");
    o.push_str(&jsdoc(
        &format!(
            "Every case of WIT `types.error`: the `code` of a `GakError`.\n\n{}",
            error.docs
        ),
        "",
    ));
    o.push_str("export type ErrorCode =\n");
    let codes = c.error_codes();
    for (i, e) in codes.iter().enumerate() {
        o.push_str(&jsdoc(&e.docs, "  "));
        let end = if i + 1 == codes.len() { ";" } else { "" };
        let _ = writeln!(o, "  | {}{end}", lit(&e.name));
    }
    o.push_str(
        "\n/** Every case of WIT `types.error`, in declaration order. */\n\
         export declare const ERROR_CODES: readonly ErrorCode[];\n\n\
         /** Bytes as an argument: a `Uint8Array`, or a string taken as UTF-8. */\n\
         export type Bytes = Uint8Array | string;\n",
    );
    for (interface, types) in api.by_interface() {
        let exported = c.exports().find(|i| i.name == interface);
        if types.is_empty() && exported.is_none() {
            continue;
        }
        let _ = write!(o, "\n{}", section(interface));
        for t in types {
            o.push('\n');
            o.push_str(&named(api, t)?);
        }
        if let Some(i) = exported {
            o.push('\n');
            o.push_str(&self::interface(api, &i.name, &i.docs, &i.functions)?);
        }
    }
    Ok(o)
}

/// The declarations of named type `t`.
fn named(api: &Api, t: &Named) -> Result<String, String> {
    let name = type_name(&t.name);
    let docs = if t.docs.is_empty() {
        format!("WIT `{}.{}`.", t.interface, t.name)
    } else {
        t.docs.clone()
    };
    let mut o = String::new();
    match &t.kind {
        Kind::Enum(cases) => {
            o.push_str(&jsdoc(&docs, ""));
            let names: Vec<String> = cases.iter().map(|k| lit(&k.name)).collect();
            let _ = writeln!(o, "export type {name} = {};", names.join(" | "));
            let _ = writeln!(
                o,
                "/** The cases of `{name}`, in declaration order. */\n\
                 export declare const {}: readonly {name}[];",
                cases_const(t)
            );
        }
        Kind::Record(fields) => {
            if api.outputs.contains(&t.name) {
                o.push_str(&jsdoc(&docs, ""));
                let _ = writeln!(o, "export interface {name} {{");
                for f in fields {
                    o.push_str(&jsdoc(&f.docs, "  "));
                    let (ty, optional) = match api.resolve(&f.ty) {
                        Ty::Option(inner) => (api.ts_out(inner)?, true),
                        _ => (api.ts_out(&f.ty)?, false),
                    };
                    let _ = writeln!(
                        o,
                        "  {}{}: {ty};",
                        ident(&f.name)?,
                        if optional { "?" } else { "" }
                    );
                }
                o.push_str("}\n");
            }
            if api.inputs.contains(&t.name) {
                let input = api.input_name(t);
                if input != name || !api.outputs.contains(&t.name) {
                    if !o.is_empty() {
                        o.push('\n');
                    }
                    let docs = if input == name {
                        docs.clone()
                    } else {
                        format!(
                            "`{name}` as an argument: fields that are lists, bools or options may\n\
                             be left out."
                        )
                    };
                    o.push_str(&jsdoc(&docs, ""));
                    let _ = writeln!(o, "export interface {input} {{");
                    for f in fields {
                        o.push_str(&input_field(api, t, f)?);
                    }
                    o.push_str("}\n");
                }
            }
        }
        Kind::Variant(cases) => {
            o.push_str(&jsdoc(&docs, ""));
            let _ = writeln!(o, "export type {name} =");
            for (i, k) in cases.iter().enumerate() {
                o.push_str(&jsdoc(&k.docs, "  "));
                let payload = match &k.ty {
                    Some(ty) => format!(
                        "; {}: {}",
                        payload_field(api, &k.name, ty)?,
                        api.ts_out(ty)?
                    ),
                    None => String::new(),
                };
                let end = if i + 1 == cases.len() { ";" } else { "" };
                let _ = writeln!(o, "  | {{ tag: {}{payload} }}{end}", lit(&k.name));
            }
        }
        Kind::Alias(_) => {}
    }
    Ok(o)
}

/// A field of record `t` as an argument gives it.
fn input_field(api: &Api, t: &Named, f: &Field) -> Result<String, String> {
    let mut docs = f.docs.clone();
    if let Some(d) = default(t, f) {
        if !docs.is_empty() {
            docs.push(' ');
        }
        let _ = write!(docs, "Default {d}.");
    }
    let ty = match api.resolve(&f.ty) {
        Ty::Option(inner) => api.ts_in(inner)?,
        _ => api.ts_in(&f.ty)?,
    };
    let optional = if api.optional_input(t, f) { "?" } else { "" };
    Ok(format!(
        "{}  {}{optional}: {ty};\n",
        jsdoc(&docs, "  "),
        ident(&f.name)?
    ))
}

/// An exported interface's methods.
fn interface(api: &Api, name: &str, docs: &str, functions: &[Function]) -> Result<String, String> {
    let class = class_name(name);
    let mut o = jsdoc(docs, "");
    let extends = if HOST_MEMBERS.contains(&name) {
        format!(" extends {class}Host")
    } else {
        String::new()
    };
    let _ = writeln!(o, "export interface {class}{extends} {{");
    let mut first = true;
    for f in functions {
        if super::HOST_LEVEL.contains(&f.call_name().as_str()) {
            continue;
        }
        if !first {
            o.push('\n');
        }
        first = false;
        o.push_str(&jsdoc(&f.docs, "  "));
        let _ = writeln!(
            o,
            "  {}({}): {};",
            lower_camel(&f.name),
            params(api, f)?,
            answer(api, f)?
        );
    }
    o.push_str("}\n");
    Ok(o)
}

/// A method's parameters.
fn params(api: &Api, f: &Function) -> Result<String, String> {
    let optional = |p: &Field| matches!(api.resolve(&p.ty), Ty::Option(_));
    if OPTIONS.contains(&f.call_name().as_str()) {
        let fields = f
            .params
            .iter()
            .map(|p| {
                let (ty, opt) = match api.resolve(&p.ty) {
                    Ty::Option(inner) => (api.ts_in(inner)?, "?"),
                    _ => (api.ts_in(&p.ty)?, ""),
                };
                Ok(format!("{}{opt}: {ty}", ident(&p.name)?))
            })
            .collect::<Result<Vec<_>, String>>()?;
        return Ok(format!("options: {{ {} }}", fields.join("; ")));
    }
    f.params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let trailing = f.params[i..].iter().all(optional);
            Ok(match api.resolve(&p.ty) {
                Ty::Option(inner) if trailing => {
                    format!("{}?: {}", ident(&p.name)?, api.ts_in(inner)?)
                }
                _ => format!("{}: {}", ident(&p.name)?, api.ts_in(&p.ty)?),
            })
        })
        .collect::<Result<Vec<_>, String>>()
        .map(|ps| ps.join(", "))
}

/// A method's answer.
fn answer(api: &Api, f: &Function) -> Result<String, String> {
    match f.ok() {
        None => Ok("void".into()),
        Some(ty) => api.ts_out(ty),
    }
}
