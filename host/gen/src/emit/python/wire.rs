//! `gak/_wire.py`: how the API's dataclasses cross the component boundary,
//! by field name. `gak._abi` lowers a record from a tuple of its fields in
//! the WIT's order and lifts one into such a tuple, or straight into a
//! dataclass where a shape says how; the code that builds and reads those
//! tuples is written out here from the WIT's field order, so a field the
//! WIT adds or moves regenerates it.
use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::{
    Api, article, call, class_name, constant, fn_name, head, ident, is_pairs, lit, local, section,
};
use crate::model::{Field, Kind, Named, Ty};

pub(super) fn emit(api: &Api) -> Result<String, String> {
    let mut body = String::new();
    let mut interface = "";
    let mut uses_sequence = false;
    for t in &api.types {
        let mut part = String::new();
        let input = api.inputs.contains(&t.name);
        let output = api.outputs.contains(&t.name);
        match &t.kind {
            Kind::Enum(_) if output => {
                let class = class_name(t);
                let _ = writeln!(
                    part,
                    "#: :class:`~gak.types.{class}` members by WIT name.\n\
                     _{}: dict[str, {class}] = {{m.value: m for m in {class}}}",
                    constant(t)
                );
            }
            Kind::Record(fields) => {
                if input {
                    part.push_str(&lower_record(api, t, fields)?);
                    if list_param(api, t) {
                        uses_sequence = true;
                        part.push_str("\n\n");
                        part.push_str(&lower_list(api, t, fields)?);
                    }
                }
                if output {
                    if !part.is_empty() {
                        part.push_str("\n\n");
                    }
                    part.push_str(&lift_record(api, t, fields)?);
                }
            }
            Kind::Variant(cases) if output => {
                for case in cases {
                    let k = api.case(case);
                    if k.variant == t.name {
                        let _ = writeln!(part, "_new_{} = maker({})", ident_of(&k.class), k.class);
                    }
                }
                part.push_str("\n\n");
                part.push_str(&lift_variant(api, t)?);
            }
            Kind::Variant(_) if input => {
                return Err(format!(
                    "{}: variants as arguments are not supported",
                    t.name
                ));
            }
            _ => {}
        }
        if part.is_empty() {
            continue;
        }
        if t.interface != interface {
            interface = &t.interface;
            let _ = write!(body, "\n\n{}", section(interface));
        }
        body.push_str("\n\n");
        body.push_str(&part);
    }

    let mut o = head(
        api.c,
        "How the exported interfaces' records, variants and enums cross the\n\
         component boundary, by field name (from ``wit/``).\n\
         \n\
         :mod:`gak._abi` lowers a record from a tuple of its fields in the WIT's\n\
         order and lifts one into such a tuple, or straight into a dataclass where a\n\
         shape says how. For each type this module holds ``lower_*`` (the tuple a\n\
         dataclass lowers to), ``lift_*`` (the dataclass a lifted tuple becomes) and\n\
         ``*_SHAPE`` (how the lift builds the dataclass itself); :data:`SHAPES` says\n\
         what every export's answer is lifted into. Answers are built with\n\
         :func:`gak._maker.maker` (their fields set directly, not through\n\
         ``__init__``).\n",
    );
    let classes: BTreeSet<String> = api
        .types
        .iter()
        .map(|t| class_name(t))
        .chain(api.cases.iter().map(|k| k.class.clone()))
        .collect();
    let _ = write!(
        o,
        "\nfrom enum import Enum\nfrom typing import Any{}\n\n\
         from ._abi import Cases, EnumAs, Make, Ok\nfrom ._maker import maker\n\
         from .errors import StorageError\nfrom .types import (\n{})\n",
        if uses_sequence { ", Sequence" } else { "" },
        classes
            .iter()
            .map(|c| format!("    {c},\n"))
            .collect::<String>()
    );
    o.push_str(
        "\n\ndef enum_name(v: Any) -> Any:\n\
         \x20   \"\"\"An enum member's WIT name (a string passes as it is: the component\n\
         \x20   judges it).\"\"\"\n\
         \x20   return v.value if isinstance(v, Enum) else v\n\n\n\
         def opt_enum_name(v: Any) -> Any:\n\
         \x20   \"\"\"An optional enum member's WIT name.\"\"\"\n\
         \x20   return None if v is None else (v.value if isinstance(v, Enum) else v)\n\n\n\
         def _pairs(v: Any) -> list[tuple[str, str]]:\n\
         \x20   \"\"\"A map as the WIT's key-sorted pairs (pairs pass as they are).\"\"\"\n\
         \x20   return sorted(v.items()) if isinstance(v, dict) else list(v)\n",
    );
    o.push_str(&body);
    Ok(o)
}

/// `Granted` → `granted`, `InFlight` → `in_flight`.
pub(super) fn ident_of(class: &str) -> String {
    let mut o = String::new();
    for (i, ch) in class.chars().enumerate() {
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

/// Whether an export takes a `list<t>`.
fn list_param(api: &Api, t: &Named) -> bool {
    api.c.exported_functions().any(|f| {
        f.params
            .iter()
            .any(|p| matches!(api.resolve(&p.ty), Ty::List(e) if api.named(e).is_some_and(|n| n.name == t.name)))
    })
}

/// The expression lowering `var` (a value of `ty` in the API) to what
/// `gak._abi` lowers.
fn lower_expr(api: &Api, ty: &Ty, var: &str, depth: usize) -> Result<String, String> {
    let ty = api.resolve(ty);
    Ok(match ty {
        Ty::Bool | Ty::U8 | Ty::U32 | Ty::U64 | Ty::String => var.to_owned(),
        Ty::List(e) if **e == Ty::U8 => var.to_owned(),
        t if is_pairs(t) => format!("_pairs({var})"),
        Ty::List(e) => {
            let x = format!("e{depth}");
            let inner = match api.named(e) {
                Some(n) if matches!(n.kind, Kind::Record(_)) => {
                    record_tuple(api, n.fields(), &x, depth + 1)?
                }
                _ => lower_expr(api, e, &x, depth + 1)?,
            };
            if inner == x {
                format!("list({var})")
            } else {
                format!("[{inner} for {x} in {var}]")
            }
        }
        Ty::Option(inner) => {
            if matches!(api.named(inner).map(|n| &n.kind), Some(Kind::Enum(_))) {
                return Ok(format!("opt_enum_name({var})"));
            }
            let e = lower_expr(api, inner, var, depth)?;
            if e == var {
                e
            } else {
                format!("(None if {var} is None else {e})")
            }
        }
        Ty::Named(n) => {
            let named = api.c.named(n);
            match &named.kind {
                Kind::Enum(_) => format!("enum_name({var})"),
                Kind::Record(_) => format!("lower_{}({var})", fn_name(named)),
                _ => return Err(format!("{n}: variants as arguments are not supported")),
            }
        }
        other => return Err(format!("{other:?} as an argument is not supported")),
    })
}

/// A record's tuple, its fields read from `var`.
fn record_tuple(api: &Api, fields: &[Field], var: &str, depth: usize) -> Result<String, String> {
    let parts = fields
        .iter()
        .map(|f| lower_expr(api, &f.ty, &format!("{var}.{}", ident(&f.name)), depth))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(if parts.len() == 1 {
        format!("({},)", parts[0])
    } else {
        format!("({})", parts.join(", "))
    })
}

fn lower_record(api: &Api, t: &Named, fields: &[Field]) -> Result<String, String> {
    let class = class_name(t);
    let mut o = format!(
        "def lower_{}(v: {class}) -> tuple[Any, ...]:\n\
         \x20   \"\"\"{} ``{}`` as :mod:`gak._abi` lowers it: its fields in the WIT's order.\"\"\"\n",
        fn_name(t),
        article(&t.name),
        t.name
    );
    let _ = writeln!(o, "    return {}", record_tuple(api, fields, "v", 0)?);
    Ok(o)
}

fn lower_list(api: &Api, t: &Named, fields: &[Field]) -> Result<String, String> {
    let class = class_name(t);
    let mut o = format!(
        "def lower_{}_list(v: Sequence[{class}]) -> list[tuple[Any, ...]]:\n\
         \x20   \"\"\"A ``list<{}>`` as :mod:`gak._abi` lowers it.\"\"\"\n",
        fn_name(t),
        t.name
    );
    let _ = writeln!(
        o,
        "    return [{} for e in v]",
        record_tuple(api, fields, "e", 1)?
    );
    Ok(o)
}

/// The expression lifting `var` (what `gak._abi` lifts for `ty`) into the
/// API's value.
fn lift_expr(api: &Api, ty: &Ty, var: &str, depth: usize) -> Result<String, String> {
    let ty = api.resolve(ty);
    Ok(match ty {
        Ty::Bool | Ty::U8 | Ty::U32 | Ty::U64 | Ty::String => var.to_owned(),
        Ty::List(e) if **e == Ty::U8 => var.to_owned(),
        t if is_pairs(t) => format!("dict({var})"),
        Ty::List(e) => {
            let x = format!("e{depth}");
            let inner = lift_expr(api, e, &x, depth + 1)?;
            if inner == x {
                var.to_owned()
            } else {
                format!("[{inner} for {x} in {var}]")
            }
        }
        Ty::Option(inner) => {
            let e = lift_expr(api, inner, var, depth)?;
            if e == var {
                e
            } else {
                format!("(None if {var} is None else {e})")
            }
        }
        Ty::Named(n) => {
            let named = api.c.named(n);
            match &named.kind {
                Kind::Enum(_) => format!(
                    "(_{}.get({var}) or {}({var}))",
                    constant(named),
                    class_name(named)
                ),
                _ => format!("lift_{}({var})", fn_name(named)),
            }
        }
        other => return Err(format!("{other:?} in an answer is not supported")),
    })
}

/// What the shaped lift leaves for the dataclass's maker to convert (the
/// `dict` of a map's pairs); `var` when nothing.
pub(super) fn post_expr(api: &Api, ty: &Ty, var: &str) -> String {
    match api.resolve(ty) {
        t if is_pairs(t) => format!("dict({var})"),
        Ty::Option(inner) => {
            let e = post_expr(api, inner, var);
            if e == var {
                e
            } else {
                format!("(None if {var} is None else {e})")
            }
        }
        _ => var.to_owned(),
    }
}

fn lift_record(api: &Api, t: &Named, fields: &[Field]) -> Result<String, String> {
    let class = class_name(t);
    let f = fn_name(t);
    let mut o = format!("_new_{f} = maker({class})\n\n\n");
    let names: Vec<String> = fields.iter().map(|x| local(&x.name)).collect();
    let _ = writeln!(
        o,
        "def lift_{f}(w: tuple[Any, ...]) -> {class}:\n\
         \x20   \"\"\"{} ``{}`` from the tuple :mod:`gak._abi` lifts (its fields in the\n\
         \x20   WIT's order).\"\"\"",
        article(&t.name),
        t.name
    );
    let _ = writeln!(
        o,
        "    {}{} = w",
        names.join(", "),
        if names.len() == 1 { "," } else { "" }
    );
    let args = fields
        .iter()
        .zip(&names)
        .map(|(x, n)| lift_expr(api, &x.ty, n, 0))
        .collect::<Result<Vec<_>, _>>()?;
    o.push_str(&call("    ", "return ", &format!("_new_{f}"), &args, ""));
    let posts: Vec<String> = fields
        .iter()
        .zip(&names)
        .map(|(x, n)| post_expr(api, &x.ty, n))
        .collect();
    if posts.iter().zip(&names).any(|(p, n)| p != n) {
        let _ = write!(
            o,
            "\n\ndef _make_{f}({}) -> {class}:\n\
             \x20   \"\"\"A :class:`~gak.types.{class}` from the fields the shaped lift builds.\"\"\"\n",
            names
                .iter()
                .map(|n| format!("{n}: Any"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        o.push_str(&call("    ", "return ", &format!("_new_{f}"), &posts, ""));
    }
    Ok(o)
}

fn lift_variant(api: &Api, t: &Named) -> Result<String, String> {
    let class = class_name(t);
    let mut o = format!(
        "def lift_{}(w: tuple[str, Any]) -> {class}:\n\
         \x20   \"\"\"{} ``{}`` from the ``(case, payload)`` :mod:`gak._abi` lifts.\"\"\"\n\
         \x20   case, payload = w\n",
        fn_name(t),
        article(&t.name),
        t.name
    );
    for case in t.cases() {
        let k = api.case(case);
        let made = match &case.ty {
            None => String::new(),
            Some(ty) => {
                if post_expr(api, ty, "payload") != "payload" {
                    return Err(format!(
                        "{}.{}: this payload is not supported",
                        t.name, case.name
                    ));
                }
                lift_expr(api, ty, "payload", 0)?
            }
        };
        let _ = write!(
            o,
            "    if case == {}:\n        return _new_{}({made})\n",
            lit(&case.name),
            ident_of(&k.class)
        );
    }
    let _ = writeln!(
        o,
        "    raise StorageError(f\"the component answered an unknown case of {}: {{case!r}}\")",
        t.name
    );
    Ok(o)
}
