//! `gak/interfaces.py`: the exported interfaces as the kernel's API, one
//! class per interface (`kernel.taskboard`), one method per function (its
//! docs the WIT's): lower the dataclasses with `gak._wire`, run the export
//! in one transaction (`Kernel._call`; a pure one without, `Kernel._pure`)
//! and return what the lift built. `gak._host_level` subclasses them where
//! the API adds calls of its own (`write_fenced`, `prune_dry_run`).
use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::lift::import_list;
use super::{Api, HOST_LEVEL, annotation, class_name, docstring, fn_name, head, ident, lit};
use crate::emit::PURE;
use crate::model::{Function, Kind, Ty};
use crate::names::{camel, snake};

/// Parameters whose default is not `None` (an option's), as Python:
/// (function, parameter, default).
const PARAM_DEFAULTS: &[(&str, &str, &str)] = &[
    ("sideeffect.list", "limit", "100"),
    ("taskboard.list", "limit", "100"),
];

/// Names a method uses itself: no parameter may take one.
const TAKEN: &[&str] = &["self", "answer"];

struct Uses {
    wire: BTreeSet<String>,
    types: BTreeSet<String>,
    typing: BTreeSet<&'static str>,
}

pub(super) fn emit(api: &Api) -> Result<String, String> {
    let mut uses = Uses {
        wire: BTreeSet::new(),
        types: BTreeSet::new(),
        typing: BTreeSet::new(),
    };
    let mut body = String::new();
    for i in api.c.exports() {
        let class = camel(&i.name);
        let _ = write!(body, "\n\nclass {class}(_Interface):\n");
        body.push_str(&docstring(
            &i.docs,
            &format!("The WIT interface ``{}``.", i.name),
            "    ",
        ));
        body.push_str("\n    __slots__ = ()\n");
        for f in i
            .functions
            .iter()
            .filter(|f| !HOST_LEVEL.contains(&f.call_name().as_str()))
        {
            body.push('\n');
            body.push_str(&method(api, f, &mut uses)?);
        }
    }
    let mut o = head(
        api.c,
        "The exported interfaces of ``wit/`` as the kernel's API (``kernel.taskboard``\n\
         …): one class per interface, one method per function, its docs the WIT's.\n\
         \n\
         Each method lowers its dataclasses with :mod:`gak._wire`, runs one export\n\
         in one transaction (``Kernel._call``; a pure one without, ``Kernel._pure``)\n\
         and returns the answer :mod:`gak._lift` built. Nothing here decides\n\
         anything: every rule is the component's. :mod:`gak._host_level` subclasses\n\
         them where the API adds calls of its own.\n",
    );
    // isort's order: constants, then classes.
    let mut typing = vec!["TYPE_CHECKING"];
    typing.extend(uses.typing.iter().copied());
    let _ = writeln!(o, "\nfrom typing import {}\n", typing.join(", "));
    if !uses.wire.is_empty() {
        o.push_str(&import_list("._wire", &uses.wire));
    }
    o.push_str(&import_list(".types", &uses.types));
    o.push_str(
        "\nif TYPE_CHECKING:\n    from .kernel import Kernel\n\n\n\
         class _Interface:\n    __slots__ = (\"_kernel\",)\n\n\
         \x20   def __init__(self, kernel: \"Kernel\") -> None:\n        self._kernel = kernel\n",
    );
    o.push_str(&body);
    let classes: Vec<String> = api.c.exports().map(|i| lit(&camel(&i.name))).collect();
    let _ = write!(o, "\n\n__all__ = [{}]\n", classes.join(", "));
    Ok(super::lift::tidy(o))
}

/// A parameter's annotation: enums also by name, lists as any sequence.
fn param_annotation(api: &Api, ty: &Ty, uses: &mut Uses) -> Result<String, String> {
    Ok(match api.resolve(ty) {
        Ty::Option(e) => {
            uses.typing.insert("Optional");
            format!("Optional[{}]", param_annotation(api, e, uses)?)
        }
        Ty::List(e) if **e != Ty::U8 && !super::is_pairs(api.resolve(ty)) => {
            uses.typing.insert("Sequence");
            format!("Sequence[{}]", param_annotation(api, e, uses)?)
        }
        Ty::Named(n) if matches!(api.c.named(n).kind, Kind::Enum(_)) => {
            uses.typing.insert("Union");
            let class = class_name(api.c.named(n));
            uses.types.insert(class.clone());
            format!("Union[{class}, str]")
        }
        other => answer_annotation(api, other, uses)?,
    })
}

/// An answer's annotation, noting the names it uses.
fn answer_annotation(api: &Api, ty: &Ty, uses: &mut Uses) -> Result<String, String> {
    let text = annotation(api, ty)?;
    if text.contains("Optional[") {
        uses.typing.insert("Optional");
    }
    named_in(api, ty, uses);
    Ok(text)
}

/// Note the classes an annotation of `ty` names (not their fields' types).
fn named_in(api: &Api, ty: &Ty, uses: &mut Uses) {
    match api.resolve(ty) {
        Ty::List(e) | Ty::Option(e) => named_in(api, e, uses),
        Ty::Tuple(ts) => ts.iter().for_each(|t| named_in(api, t, uses)),
        Ty::Named(n) => {
            uses.types.insert(class_name(api.c.named(n)));
        }
        _ => {}
    }
}

/// What the call sends for a parameter (`gak._wire`'s lowering).
fn arg_expr(api: &Api, ty: &Ty, var: &str, uses: &mut Uses) -> Result<String, String> {
    Ok(match api.resolve(ty) {
        Ty::Named(n) => {
            let t = api.c.named(n);
            match &t.kind {
                Kind::Enum(_) => {
                    uses.wire.insert("enum_name".into());
                    format!("enum_name({var})")
                }
                Kind::Record(_) => {
                    let f = format!("lower_{}", fn_name(t));
                    uses.wire.insert(f.clone());
                    format!("{f}({var})")
                }
                _ => return Err(format!("{n}: a variant as an argument is not supported")),
            }
        }
        Ty::Option(e) => match api.named(e).map(|t| &t.kind) {
            Some(Kind::Enum(_)) => {
                uses.wire.insert("opt_enum_name".into());
                format!("opt_enum_name({var})")
            }
            _ => {
                let inner = arg_expr(api, e, var, uses)?;
                if inner == var {
                    inner
                } else {
                    format!("None if {var} is None else {inner}")
                }
            }
        },
        Ty::List(e) => match api.named(e) {
            Some(t) if matches!(t.kind, Kind::Record(_)) => {
                let f = format!("lower_{}_list", fn_name(t));
                uses.wire.insert(f.clone());
                format!("{f}({var})")
            }
            Some(t) if !matches!(t.kind, Kind::Alias(_)) => {
                return Err(format!(
                    "a list of {} as an argument is not supported",
                    t.name
                ));
            }
            _ => var.to_owned(),
        },
        _ => var.to_owned(),
    })
}

fn method(api: &Api, f: &Function, uses: &mut Uses) -> Result<String, String> {
    let name = f.call_name();
    let params: Vec<String> = f.params.iter().map(|p| ident(&p.name)).collect();
    for p in &params {
        if TAKEN.contains(&p.as_str()) {
            return Err(format!(
                "{name}: parameter `{p}` is a name the generated Python uses"
            ));
        }
    }
    // A default for each trailing option or listed parameter.
    let mut defaults = vec![None; f.params.len()];
    for (i, p) in f.params.iter().enumerate().rev() {
        let listed = PARAM_DEFAULTS
            .iter()
            .find(|(c, n, _)| *c == name && *n == p.name)
            .map(|(_, _, d)| (*d).to_owned());
        let d =
            listed.or_else(|| matches!(api.resolve(&p.ty), Ty::Option(_)).then(|| "None".into()));
        match d {
            Some(d) => defaults[i] = Some(d),
            None => break,
        }
    }
    let mut sig = vec!["self".to_owned()];
    let mut args = vec![lit(&format!("{}#{}", f.interface, f.name))];
    for ((p, id), d) in f.params.iter().zip(&params).zip(&defaults) {
        let ann = param_annotation(api, &p.ty, uses)?;
        sig.push(match d {
            Some(d) => format!("{id}: {ann} = {d}"),
            None => format!("{id}: {ann}"),
        });
        args.push(arg_expr(api, &p.ty, id, uses)?);
    }
    let ret = match f.ok() {
        Some(ty) => answer_annotation(api, ty, uses)?,
        None => "None".into(),
    };
    let method = snake(&f.name);
    let one = format!("    def {method}({}) -> {ret}:", sig.join(", "));
    let mut o = if one.len() <= 100 {
        one + "\n"
    } else {
        let mut o = format!("    def {method}(\n");
        for s in &sig {
            let _ = writeln!(o, "        {s},");
        }
        let _ = writeln!(o, "    ) -> {ret}:");
        o
    };
    o.push_str(&docstring(
        &f.docs,
        &format!("The WIT function ``{name}``."),
        "        ",
    ));
    let run = if PURE.contains(&name.as_str()) {
        "_pure"
    } else {
        "_call"
    };
    let prefix = if f.ok().is_some() {
        format!("answer: {ret} = ")
    } else {
        String::new()
    };
    o.push_str(&super::call(
        "        ",
        &prefix,
        &format!("self._kernel.{run}"),
        &args,
        "",
    ));
    if f.ok().is_some() {
        o.push_str("        return answer\n");
    }
    Ok(o)
}
