//! `gak/conformance/_calls.py`: the vectors' JSON (`host/gen/README.md`)
//! to the API's types and back, and one vector call per exported function
//! (`CALLS`), mapping a step's `call` + `args` onto the kernel's API as
//! every host's runner maps them. The host-level calls stay by hand in
//! `gak/conformance/calls.py`.
use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::types::tuple_field;
use super::{
    Api, HOST_LEVEL, article, call, class_name, fn_name, head, ident, is_pairs, lit, section,
};
use crate::model::{Field, Function, Kind, Named, Ty};

pub(super) fn emit(api: &Api) -> Result<String, String> {
    let mut body = String::new();
    let mut interface = "";
    for t in &api.types {
        let mut part = String::new();
        if api.inputs.contains(&t.name) {
            match &t.kind {
                Kind::Record(fields) => part.push_str(&record_arg(api, t, fields)?),
                Kind::Enum(_) => part.push_str(&enum_arg(t)),
                _ => {}
            }
        }
        if api.outputs.contains(&t.name) {
            let json = match &t.kind {
                Kind::Record(fields) => Some(record_json(api, t, fields)?),
                Kind::Variant(_) => Some(variant_json(api, t)?),
                _ => None,
            };
            if let Some(json) = json {
                if !part.is_empty() {
                    part.push_str("\n\n");
                }
                part.push_str(&json);
            }
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
    let _ = write!(body, "\n\n{}", section("calls"));
    let mut table = String::new();
    for f in api.c.exported_functions() {
        let name = f.call_name();
        if HOST_LEVEL.contains(&name.as_str()) {
            continue;
        }
        body.push_str("\n\n");
        body.push_str(&function(api, f)?);
        let _ = writeln!(table, "    {}: {},", lit(&name), call_fn(f));
    }
    let _ = write!(
        body,
        "\n\n#: Every exported function as a vector call (``interface.function``), but\n\
         #: those reached only through a host-level call ({}).\n\
         CALLS: dict[str, Callable[[Kernel, Any], Any]] = {{\n{table}}}\n",
        HOST_LEVEL
            .iter()
            .map(|h| format!("``{h}``"))
            .collect::<Vec<_>>()
            .join(", ")
    );

    let mut o = head(
        api.c,
        "The vectors' JSON (``host/gen/README.md``) to and from the API's types, and\n\
         one vector call per exported function (from ``wit/``): :data:`CALLS` maps a\n\
         step's ``call`` and ``args`` onto the kernel's API and its answer onto the\n\
         vectors' JSON, as every host's runner maps them.\n\
         \n\
         ``*_arg(v, at)`` reads a JSON value (``None`` when absent) whose path is\n\
         ``at``; ``*_json(v)`` writes one. The host-level calls (``sink.write-fenced``,\n\
         ``sink.read``, ``taskboard.list`` without ``limit``) are\n\
         :mod:`gak.conformance.calls`'s.\n",
    );
    let classes: BTreeSet<String> = api
        .types
        .iter()
        .filter(|t| match &t.kind {
            Kind::Record(_) => api.inputs.contains(&t.name) || api.outputs.contains(&t.name),
            Kind::Enum(_) => api.inputs.contains(&t.name),
            Kind::Variant(_) => api.outputs.contains(&t.name),
            Kind::Alias(_) => false,
        })
        .map(|t| class_name(t))
        .chain(api.cases.iter().map(|k| k.class.clone()))
        .collect();
    let _ = write!(
        o,
        "\nfrom typing import Any, Callable\n\n\
         from ..kernel import Kernel\nfrom ..types import (\n{})\n\
         from .values import {}\n",
        classes
            .iter()
            .map(|c| format!("    {c},\n"))
            .collect::<String>(),
        VALUES
            .iter()
            .filter(|v| uses(&body, v))
            .copied()
            .collect::<Vec<_>>()
            .join(", ")
    );
    o.push_str(&body);
    Ok(o)
}

/// What `gak/conformance/values.py` offers (the JSON shape of the WIT's
/// primitive types, and the helpers the converters compose).
const VALUES: &[&str] = &[
    "boolean", "data", "each", "enum", "field", "name", "obj", "opt", "pairs", "s32", "string",
    "text", "u8", "u32", "u64",
];

/// Whether generated `code` calls or passes `word`.
fn uses(code: &str, word: &str) -> bool {
    code.match_indices(word).any(|(i, _)| {
        let before = code[..i].chars().next_back();
        let after = code[i + word.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
            && matches!(after, Some('(' | ','))
    })
}

/// A JSON path in generated code: a literal, or an expression.
#[derive(Clone)]
enum Path {
    Lit(String),
    Expr(String),
}

impl Path {
    fn code(&self) -> String {
        match self {
            Path::Lit(s) => lit(s),
            Path::Expr(e) => e.clone(),
        }
    }

    fn key(&self, key: &str) -> Path {
        match self {
            Path::Lit(s) => Path::Lit(format!("{s}.{key}")),
            Path::Expr(e) => Path::Expr(format!("{e} + {}", lit(&format!(".{key}")))),
        }
    }
}

/// The converter (a callable `(v, at)`) reading a JSON value as `ty`.
fn converter(api: &Api, ty: &Ty) -> Result<String, String> {
    Ok(match api.resolve(ty) {
        Ty::String => "string".into(),
        Ty::U8 => "u8".into(),
        Ty::U32 => "u32".into(),
        Ty::S32 => "s32".into(),
        Ty::U64 => "u64".into(),
        Ty::Bool => "boolean".into(),
        Ty::List(e) if **e == Ty::U8 => "data".into(),
        t if is_pairs(t) => "pairs".into(),
        Ty::List(e) => format!("lambda v, at: each({}, v, at)", converter(api, e)?),
        Ty::Option(e) => format!("lambda v, at: opt({}, v, at)", converter(api, e)?),
        Ty::Named(n) => {
            let named = api.c.named(n);
            match &named.kind {
                Kind::Enum(_) | Kind::Record(_) => format!("{}_arg", fn_name(named)),
                _ => return Err(format!("{n}: variants as arguments are not supported")),
            }
        }
        other => return Err(format!("{other:?} as an argument is not supported")),
    })
}

/// The expression reading JSON value `v` (an expression; `None` when
/// absent) at `at` as a value of `ty`.
fn arg_expr(api: &Api, ty: &Ty, v: &str, at: &Path) -> Result<String, String> {
    let a = at.code();
    Ok(match api.resolve(ty) {
        Ty::List(e) if **e != Ty::U8 && !is_pairs(api.resolve(ty)) => {
            format!("each({}, {v}, {a})", converter(api, e)?)
        }
        Ty::Option(e) => format!("opt({}, {v}, {a})", converter(api, e)?),
        _ => format!("{}({v}, {a})", converter(api, ty)?),
    })
}

/// `enum_arg(v, at)` of an enum the exports take.
fn enum_arg(t: &Named) -> String {
    format!(
        "def {}_arg(v: Any, at: str) -> {}:\n\
         \x20   \"\"\"{} ``{}`` from the vectors' JSON: its case name (absent: the first).\"\"\"\n\
         \x20   return enum(v, at, {})\n",
        fn_name(t),
        class_name(t),
        article(&t.name),
        t.name,
        class_name(t)
    )
}

fn record_arg(api: &Api, t: &Named, fields: &[Field]) -> Result<String, String> {
    let class = class_name(t);
    let mut o = format!(
        "def {}_arg(v: Any, at: str) -> {class}:\n\
         \x20   \"\"\"{} ``{}`` from the vectors' JSON: an object with kebab-case fields.\"\"\"\n\
         \x20   o = obj(v, at)\n",
        fn_name(t),
        article(&t.name),
        t.name
    );
    let args = fields
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let e = arg_expr(
                api,
                &f.ty,
                &format!("o.get({})", lit(&f.name)),
                &Path::Expr("at".into()).key(&f.name),
            )?;
            let e = if tuple_field(api, t, i, f) {
                format!("tuple({e})")
            } else {
                e
            };
            Ok(format!("{}={e}", ident(&f.name)))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut one = format!("    return {class}(\n");
    for a in &args {
        let _ = writeln!(one, "        {a},");
    }
    one.push_str("    )\n");
    o.push_str(&one);
    Ok(o)
}

/// The expression writing `var` (a value of `ty` in the API) as JSON.
fn json_expr(api: &Api, ty: &Ty, var: &str, depth: usize) -> Result<String, String> {
    Ok(match api.resolve(ty) {
        Ty::Bool | Ty::U8 | Ty::U32 | Ty::S32 | Ty::U64 | Ty::String => var.to_owned(),
        Ty::List(e) if **e == Ty::U8 => format!("text({var})"),
        t if is_pairs(t) => format!("dict(sorted({var}.items()))"),
        Ty::List(e) => {
            let x = format!("x{depth}");
            let inner = json_expr(api, e, &x, depth + 1)?;
            if inner == x {
                format!("list({var})")
            } else {
                format!("[{inner} for {x} in {var}]")
            }
        }
        Ty::Option(e) => format!(
            "(None if {var} is None else {})",
            json_expr(api, e, var, depth)?
        ),
        Ty::Named(n) => {
            let named = api.c.named(n);
            match &named.kind {
                Kind::Enum(_) => format!("name({var})"),
                _ => format!("{}_json({var})", fn_name(named)),
            }
        }
        other => return Err(format!("{other:?} in an answer is not supported")),
    })
}

fn record_json(api: &Api, t: &Named, fields: &[Field]) -> Result<String, String> {
    let mut o = format!(
        "def {}_json(v: {}) -> dict[str, Any]:\n\
         \x20   \"\"\"{} ``{}`` as the vectors' JSON (absent options omitted).\"\"\"\n",
        fn_name(t),
        class_name(t),
        article(&t.name),
        t.name
    );
    let optional = |f: &Field| matches!(api.resolve(&f.ty), Ty::Option(_));
    let lead = fields.iter().take_while(|f| !optional(f)).count();
    let mut entries = Vec::new();
    for f in &fields[..lead] {
        let e = json_expr(api, &f.ty, &format!("v.{}", ident(&f.name)), 0)?;
        entries.push(format!("{}: {e}", lit(&f.name)));
    }
    if lead == fields.len() {
        o.push_str(&dict_lit("return ", &entries));
        return Ok(o);
    }
    o.push_str(&dict_lit("out: dict[str, Any] = ", &entries));
    for f in &fields[lead..] {
        let var = format!("v.{}", ident(&f.name));
        match api.resolve(&f.ty) {
            Ty::Option(inner) => {
                let e = json_expr(api, inner, &var, 0)?;
                let _ = write!(
                    o,
                    "    if {var} is not None:\n        out[{}] = {e}\n",
                    lit(&f.name)
                );
            }
            _ => {
                let e = json_expr(api, &f.ty, &var, 0)?;
                let _ = writeln!(o, "    out[{}] = {e}", lit(&f.name));
            }
        }
    }
    o.push_str("    return out\n");
    Ok(o)
}

/// `prefix{entries}` in a function body, one entry a line past 100 columns.
fn dict_lit(prefix: &str, entries: &[String]) -> String {
    let one = format!("    {prefix}{{{}}}", entries.join(", "));
    if one.len() <= 100 {
        return one + "\n";
    }
    let mut o = format!("    {prefix}{{\n");
    for e in entries {
        let _ = writeln!(o, "        {e},");
    }
    o + "    }\n"
}

fn variant_json(api: &Api, t: &Named) -> Result<String, String> {
    let mut o = format!(
        "def {}_json(v: {}) -> dict[str, Any]:\n\
         \x20   \"\"\"{} ``{}`` as the vectors' JSON: ``{{case: payload}}``, ``{{case: {{}}}}``\n\
         \x20   without one.\"\"\"\n",
        fn_name(t),
        class_name(t),
        article(&t.name),
        t.name
    );
    for case in t.cases() {
        let k = api.case(case);
        let payload = match (&case.ty, &k.field) {
            (Some(ty), Some(f)) => {
                let e = json_expr(api, ty, &format!("v.{f}"), 0)?;
                match crate::emit::vectors::wrapped(&t.name, &case.name) {
                    Some(key) => format!("{{{}: {e}}}", lit(key)),
                    None => e,
                }
            }
            _ => "{}".to_owned(),
        };
        let _ = write!(
            o,
            "    if isinstance(v, {}):\n        return {{{}: {payload}}}\n",
            k.class,
            lit(&case.name)
        );
    }
    let _ = writeln!(
        o,
        "    raise TypeError(f\"not {} {}: {{v!r}}\")",
        article(&t.name).to_lowercase(),
        t.name
    );
    Ok(o)
}

fn call_fn(f: &Function) -> String {
    format!("{}_{}", ident(&f.interface), ident(&f.name))
}

fn function(api: &Api, f: &Function) -> Result<String, String> {
    let mut o = format!(
        "def {}(k: Kernel, a: Any) -> Any:\n    \"\"\"``{}``.\"\"\"\n",
        call_fn(f),
        f.call_name()
    );
    let args = f
        .params
        .iter()
        .map(|p| {
            let name = crate::emit::vectors::arg_name(&p.name);
            arg_expr(
                api,
                &p.ty,
                &format!("field(a, {})", lit(name)),
                &Path::Lit(name.to_owned()),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let method = format!("k.{}.{}", ident(&f.interface), ident(&f.name));
    match f.ok() {
        None => {
            o.push_str(&call("    ", "", &method, &args, ""));
            o.push_str("    return None\n");
        }
        Some(ok) => {
            let e = json_expr(api, ok, "r", 0)?;
            if e == "r" {
                o.push_str(&call("    ", "return ", &method, &args, ""));
            } else {
                o.push_str(&call("    ", "r = ", &method, &args, ""));
                let e = match e.strip_prefix("(None if ") {
                    Some(rest) => format!("None if {}", &rest[..rest.len() - 1]),
                    None => e,
                };
                let _ = writeln!(o, "    return {e}");
            }
        }
    }
    Ok(o)
}
