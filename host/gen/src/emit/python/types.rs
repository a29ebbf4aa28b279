//! `gak/types.py`: the exported interfaces' records as dataclasses (fields
//! in the WIT's order), enums as `str` enums, variants as unions of one
//! dataclass per case.
use std::fmt::Write as _;

use super::{
    Api, DEFAULTS, KEYWORD_ONLY, MUTABLE, REQUIRED, annotation, attr_docs, class_name, docstring,
    head, ident, is_pairs, lit, section,
};
use crate::model::{Field, Kind, Named, Ty};
use crate::names::screaming;

pub(super) fn emit(api: &Api) -> Result<String, String> {
    let mut body = String::new();
    let mut uses_field = false;
    let mut interface = "";
    for t in &api.types {
        if t.interface != interface {
            interface = &t.interface;
            let _ = write!(body, "\n\n{}", section(interface));
        }
        body.push_str("\n\n");
        match &t.kind {
            Kind::Enum(cases) => {
                let _ = writeln!(body, "class {}(str, Enum):", class_name(t));
                body.push_str(&docstring(&t.docs, &fallback(t, "enum"), "    "));
                body.push('\n');
                for case in cases {
                    body.push_str(&attr_docs(&case.docs, "    "));
                    let _ = writeln!(body, "    {} = {}", screaming(&case.name), lit(&case.name));
                }
            }
            Kind::Record(fields) => body.push_str(&record(api, t, fields, &mut uses_field)?),
            Kind::Variant(cases) => {
                let mut members = Vec::new();
                for case in cases {
                    let class = api.case(case);
                    members.push(class.class.clone());
                    if class.variant != t.name {
                        continue; // defined with the variant that has it first
                    }
                    let _ = writeln!(body, "@dataclass(frozen=True)\nclass {}:", class.class);
                    let fallback = format!("Case ``{}`` of ``{}``.", case.name, t.name);
                    body.push_str(&docstring(&case.docs, &fallback, "    "));
                    if let (Some(f), Some(ty)) = (&class.field, &case.ty) {
                        let _ = writeln!(body, "\n    {f}: {}", annotation(api, ty)?);
                    }
                    body.push_str("\n\n");
                }
                if t.docs.is_empty() {
                    let _ = writeln!(body, "#: {}", fallback(t, "variant"));
                } else {
                    body.push_str(&attr_docs(&t.docs, ""));
                }
                let _ = writeln!(body, "{} = Union[{}]", class_name(t), members.join(", "));
            }
            Kind::Alias(_) => {}
        }
    }
    let mut o = head(
        api.c,
        "The contract's records as dataclasses, its enums as ``str`` enums and its\n\
         variants as unions of one dataclass per case (from ``wit/``: the exported\n\
         interfaces' types, in the WIT's order).\n\
         \n\
         Field names are the WIT names in snake_case (``run-id`` → ``run_id``), in the\n\
         WIT's order. Bytes payloads (results) are ``bytes``; times are integer\n\
         milliseconds since the Unix epoch; every integer stays below 2**53 (the\n\
         kernel refuses larger ones with ``invalid-input``).\n",
    );
    let _ = write!(
        o,
        "\nfrom dataclasses import dataclass{}\nfrom enum import Enum\nfrom typing import Optional, Union\n",
        if uses_field { ", field" } else { "" }
    );
    o.push_str(&body);
    Ok(o)
}

fn fallback(t: &Named, what: &str) -> String {
    format!("The WIT {what} ``{}.{}``.", t.interface, t.name)
}

fn record(api: &Api, t: &Named, fields: &[Field], uses_field: &mut bool) -> Result<String, String> {
    let mutable = MUTABLE.contains(&t.name.as_str());
    let mut o = String::new();
    let _ = writeln!(
        o,
        "@dataclass{}\nclass {}:",
        if mutable { "" } else { "(frozen=True)" },
        class_name(t)
    );
    o.push_str(&docstring(&t.docs, &fallback(t, "record"), "    "));
    o.push('\n');
    let required = REQUIRED
        .iter()
        .find(|(r, _)| *r == t.name)
        .map_or(fields.len(), |(_, n)| *n);
    for (i, f) in fields.iter().enumerate() {
        o.push_str(&attr_docs(&f.docs, "    "));
        let keyword = KEYWORD_ONLY.contains(&(t.name.as_str(), f.name.as_str()));
        if i < required && !keyword {
            let _ = writeln!(o, "    {}: {}", ident(&f.name), annotation(api, &f.ty)?);
            continue;
        }
        let (ty, default) = default(api, t, f, mutable)?;
        let value = match (default, keyword) {
            (Default::Value(v), false) => v,
            (Default::Value(v), true) => {
                *uses_field = true;
                format!("field(default={v}, kw_only=True)")
            }
            (Default::Factory(f), kw) => {
                *uses_field = true;
                let kw = if kw { ", kw_only=True" } else { "" };
                format!("field(default_factory={f}{kw})")
            }
        };
        let _ = writeln!(o, "    {}: {ty} = {value}", ident(&f.name));
    }
    Ok(o)
}

enum Default {
    Value(String),
    Factory(&'static str),
}

/// Whether field `i` of record `t` is a `tuple` in the API (a defaulted
/// list of a frozen record), so the conformance converters build one.
pub(super) fn tuple_field(api: &Api, t: &Named, i: usize, f: &Field) -> bool {
    let mutable = MUTABLE.contains(&t.name.as_str());
    let required = REQUIRED
        .iter()
        .find(|(r, _)| *r == t.name)
        .map_or(usize::MAX, |(_, n)| *n);
    let keyword = KEYWORD_ONLY.contains(&(t.name.as_str(), f.name.as_str()));
    let listed = DEFAULTS
        .iter()
        .any(|(r, n, _)| *r == t.name && *n == f.name);
    let list =
        matches!(api.resolve(&f.ty), Ty::List(e) if **e != Ty::U8) && !is_pairs(api.resolve(&f.ty));
    (i >= required || keyword) && !listed && !mutable && list
}

/// A defaulted field's annotation and default: [`DEFAULTS`], else the zero
/// of its type. A list in a frozen record is a tuple there (`()`).
fn default(api: &Api, t: &Named, f: &Field, mutable: bool) -> Result<(String, Default), String> {
    let ty = api.resolve(&f.ty);
    let mut annotated = annotation(api, &f.ty)?;
    if let Some((_, _, v)) = DEFAULTS
        .iter()
        .find(|(r, n, _)| *r == t.name && *n == f.name)
    {
        return Ok((annotated, Default::Value((*v).to_owned())));
    }
    let zero = match ty {
        Ty::Option(_) => Default::Value("None".into()),
        Ty::Bool => Default::Value("False".into()),
        Ty::U8 | Ty::U32 | Ty::S32 | Ty::U64 => Default::Value("0".into()),
        Ty::String => Default::Value("\"\"".into()),
        Ty::List(e) if **e == Ty::U8 => Default::Value("b\"\"".into()),
        t if is_pairs(t) => Default::Factory("dict"),
        Ty::List(_) if mutable => Default::Factory("list"),
        Ty::List(e) => {
            annotated = format!("tuple[{}, ...]", annotation(api, e)?);
            Default::Value("()".into())
        }
        Ty::Named(n) => match &api.c.named(n).kind {
            Kind::Enum(cases) => Default::Value(format!(
                "{}.{}",
                class_name(api.c.named(n)),
                screaming(&cases[0].name)
            )),
            _ => {
                return Err(format!(
                    "{}.{}: a {n} has no default; list the field among the required \
                     (python.rs REQUIRED) or give it one (DEFAULTS)",
                    t.name, f.name
                ));
            }
        },
        other => return Err(format!("{}.{}: no default for {other:?}", t.name, f.name)),
    };
    Ok((annotated, zero))
}
