//! The shapes of `gak/_wire.py`: how `gak._abi` lifts an answer straight
//! into the API's dataclasses (`Make` for a record, its fields named as in
//! the WIT so the lift matches them by name; `Cases` for a variant;
//! `EnumAs` for an enum), and `SHAPES`, every export's answer.
use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::wire::{ident_of, post_expr};
use super::{Api, article, call, class_name, constant, fn_name, is_pairs, lit, section};
use crate::model::{Kind, Named, Ty};

pub(super) fn emit(api: &Api) -> Result<String, String> {
    let mut body = format!("\n\n{}", section("shapes"));
    let mut done = BTreeSet::new();
    for t in &api.types {
        if api.outputs.contains(&t.name) {
            shape(api, t, &mut done, &mut body)?;
        }
    }
    body.push_str(
        "\n\n#: What each export's answer is lifted into (``interface#function``: the\n\
         #: shape of its ``ok`` payload, see :meth:`gak._abi.FuncCodec.shaped`); the\n\
         #: exports not here answer plain values.\nSHAPES: dict[str, Any] = {\n",
    );
    for f in api.c.exported_functions() {
        if let Some(s) = f.ok().and_then(|ok| shape_expr(api, ok)) {
            let _ = writeln!(
                body,
                "    {}: Ok({s}),",
                lit(&format!("{}#{}", f.interface, f.name))
            );
        }
    }
    body.push_str("}\n");
    Ok(body)
}

/// The shape of a value of `ty`, if its lift builds API types.
fn shape_expr(api: &Api, ty: &Ty) -> Option<String> {
    match api.resolve(ty) {
        t if is_pairs(t) => None,
        Ty::List(e) | Ty::Option(e) => shape_expr(api, e),
        Ty::Named(n) => {
            let named = api.c.named(n);
            Some(match &named.kind {
                Kind::Enum(_) => format!("EnumAs({})", class_name(named)),
                _ => format!("{}_SHAPE", constant(named)),
            })
        }
        _ => None,
    }
}

/// Define `t`'s shape after the shapes it uses.
fn shape(api: &Api, t: &Named, done: &mut BTreeSet<String>, o: &mut String) -> Result<(), String> {
    if matches!(t.kind, Kind::Enum(_) | Kind::Alias(_)) || !done.insert(t.name.clone()) {
        return Ok(());
    }
    let parts: Vec<&Ty> = match &t.kind {
        Kind::Record(fields) => fields.iter().map(|f| &f.ty).collect(),
        Kind::Variant(cases) => cases.iter().filter_map(|c| c.ty.as_ref()).collect(),
        _ => Vec::new(),
    };
    for ty in parts {
        let mut inner = ty;
        while let Ty::List(e) | Ty::Option(e) = api.resolve(inner) {
            inner = e;
        }
        if let Some(n) = api.named(inner) {
            shape(api, n, done, o)?;
        }
    }
    let class = class_name(t);
    let f = fn_name(t);
    match &t.kind {
        Kind::Record(fields) => {
            let make = if fields.iter().any(|x| post_expr(api, &x.ty, "x") != "x") {
                format!("_make_{f}")
            } else {
                format!("_new_{f}")
            };
            let shapes: Vec<String> = fields
                .iter()
                .map(|x| shape_expr(api, &x.ty).unwrap_or_else(|| "None".into()))
                .collect();
            let shapes = if shapes.iter().all(|s| s == "None") {
                "[]".to_owned()
            } else {
                format!("[{}]", shapes.join(", "))
            };
            let names: Vec<String> = fields.iter().map(|x| lit(&x.name)).collect();
            let names = if names.len() == 1 {
                format!("({},)", names[0])
            } else {
                format!("({})", names.join(", "))
            };
            let _ = write!(
                o,
                "\n#: How :mod:`gak._abi` lifts {} ``{}`` straight into a\n#: :class:`~gak.types.{class}` (its fields matched by name).\n",
                article(&t.name).to_lowercase(),
                t.name
            );
            o.push_str(&call(
                "",
                &format!("{}_SHAPE = ", constant(t)),
                "Make",
                &[make, shapes, names],
                "",
            ));
        }
        Kind::Variant(cases) => {
            let _ = write!(
                o,
                "\n#: How :mod:`gak._abi` lifts {} ``{}`` straight into its case's\n#: dataclass.\n{}_SHAPE = Cases(\n    {{\n",
                article(&t.name).to_lowercase(),
                t.name,
                constant(t)
            );
            for case in cases {
                let k = api.case(case);
                let payload = case
                    .ty
                    .as_ref()
                    .and_then(|ty| shape_expr(api, ty))
                    .unwrap_or_else(|| "None".into());
                let _ = writeln!(
                    o,
                    "        {}: (_new_{}, {payload}),",
                    lit(&case.name),
                    ident_of(&k.class)
                );
            }
            o.push_str("    }\n)\n");
        }
        _ => {}
    }
    Ok(())
}
