//! `gak/_wire.py`: the API's dataclasses as the arguments an export takes,
//! by field name: a record as the tuple of its fields in the WIT's order
//! (what `gak._lower` and the codecs lower, and `gak.limits` measures), an
//! enum member as its name, a map as its key-sorted pairs. Written out from
//! the WIT's field order, so a field the WIT adds or moves regenerates it.
//! (Answers need no such step: `gak._lift` builds the dataclasses itself.)
use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::{Api, article, class_name, fn_name, head, ident, is_pairs, section};
use crate::model::{Field, Kind, Named, Ty};

pub(super) fn emit(api: &Api) -> Result<String, String> {
    let mut body = String::new();
    let mut interface = "";
    let mut uses_sequence = false;
    for t in &api.types {
        let mut part = String::new();
        let input = api.inputs.contains(&t.name);
        if let Kind::Record(fields) = &t.kind {
            if input {
                part.push_str(&lower_record(api, t, fields)?);
                if list_param(api, t) {
                    uses_sequence = true;
                    part.push_str("\n\n");
                    part.push_str(&lower_list(api, t, fields)?);
                }
            }
        } else if input && matches!(t.kind, Kind::Variant(_)) {
            return Err(format!(
                "{}: variants as arguments are not supported",
                t.name
            ));
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
        "The API's dataclasses as the arguments an export takes, by field name (from\n\
         ``wit/``): ``lower_*`` makes the tuple of a record's fields in the WIT's\n\
         order, which :mod:`gak._lower` (or the codecs of :mod:`gak._abi`) lowers and\n\
         :mod:`gak.limits` measures; an enum member is sent as its name, a map as its\n\
         key-sorted pairs. Answers need no such step: :mod:`gak._lift` builds the\n\
         dataclasses itself.\n",
    );
    // Only the classes the lowerings annotate.
    let classes: BTreeSet<String> = api
        .types
        .iter()
        .filter(|t| api.inputs.contains(&t.name) && matches!(t.kind, Kind::Record(_)))
        .map(|t| class_name(t))
        .collect();
    let _ = write!(
        o,
        "\nfrom enum import Enum\nfrom typing import Any{}\n\n\
         from .types import (\n{})\n",
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
        Ty::Bool | Ty::U8 | Ty::U32 | Ty::S32 | Ty::U64 | Ty::String => var.to_owned(),
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
