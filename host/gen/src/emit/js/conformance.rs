//! `conformance/exports.js`: the vectors' JSON (`host/gen/README.md`) to
//! the API's values and back, per WIT type, and one vector call per
//! exported function (`CALLS`), on the kernel's API. The host-level calls
//! stay by hand in `conformance/calls.js`.
use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::{
    Api, HOST_LEVEL, OPTIONS, cases_const, ident, is_pairs, jsdoc, key, lit, payload_field, section,
};
use crate::banner;
use crate::model::{Field, Function, Kind, Named, Ty};
use crate::names::{lower_camel, type_name};

/// Names the generated calls use themselves: no parameter may take one.
const TAKEN: &[&str] = &["k", "a", "r", "json"];

pub(super) fn emit(api: &Api) -> Result<String, String> {
    let mut w = Writer {
        api,
        cases: BTreeSet::new(),
    };
    let mut body = String::new();
    for (interface, types) in api.by_interface() {
        let mut parts = Vec::new();
        for t in types {
            if api.inputs.contains(&t.name) {
                match &t.kind {
                    Kind::Record(fields) => parts.push(w.record_reader(t, fields)?),
                    Kind::Enum(_) => parts.push(w.enum_reader(t)),
                    _ => {}
                }
            }
            if api.outputs.contains(&t.name) {
                match &t.kind {
                    Kind::Record(fields) => parts.push(w.record_writer(t, fields)?),
                    Kind::Variant(_) => parts.push(w.variant_writer(t)?),
                    _ => {}
                }
            }
        }
        if !parts.is_empty() {
            let _ = write!(body, "\n{}\n{}", section(interface), parts.join("\n"));
        }
    }
    let _ = write!(
        body,
        "\n{}\n{}export const CALLS = {{\n",
        section("calls"),
        jsdoc(
            &format!(
                "Every exported function as a vector call (`interface.function`), but those\n\
                 reached only through a host-level call ({}):\n\
                 `(kernel, args) => answer`, the answer as the vectors' JSON (`null` for none).",
                HOST_LEVEL
                    .iter()
                    .map(|h| format!("`{h}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            ""
        )
    );
    let mut first = true;
    for f in api.c.exported_functions() {
        if HOST_LEVEL.contains(&f.call_name().as_str()) {
            continue;
        }
        if !first {
            body.push('\n');
        }
        first = false;
        body.push_str(&w.call(f)?);
    }
    body.push_str("};\n");

    let mut o = format!("// {}\n", banner(api.c));
    o.push_str(
        "// The vectors' JSON (host/gen/README.md) to the API's values and back, per\n\
         // WIT type: `readX(v, at)` reads a JSON value (`undefined` when absent; `at`\n\
         // is its path) as an argument, `writeX(x)` writes an answer. CALLS maps a\n\
         // step's `call` and `args` onto the kernel's API, and its answer onto the\n\
         // vectors' JSON, as every host's runner does. The host-level calls\n\
         // (`sink.write-fenced`, `sink.read`, `taskboard.list` without `limit`) are\n\
         // calls.js's.\n",
    );
    if !w.cases.is_empty() {
        let _ = writeln!(
            o,
            "import {{ {} }} from '../contract.js';",
            w.cases.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    o.push_str("import * as json from './values.js';\n");
    o.push_str(&body);
    Ok(o)
}

struct Writer<'a> {
    api: &'a Api<'a>,
    /// The enum case lists used (imported from `contract.js`).
    cases: BTreeSet<String>,
}

/// `readStepDef`, `writeStepDef`.
fn reader(t: &Named) -> String {
    format!("read{}", type_name(&t.name))
}

fn writer(t: &Named) -> String {
    format!("write{}", type_name(&t.name))
}

/// A template literal's body for a path under `at` (a variable).
fn path(at: &str, key: &str) -> String {
    format!("`${{{at}}}.{key}`")
}

impl Writer<'_> {
    fn cases_of(&mut self, t: &Named) -> String {
        let name = cases_const(t);
        self.cases.insert(name.clone());
        name
    }

    /// Reading JSON value `v` (an expression) at `at` (one too) as `ty`.
    fn read(&mut self, ty: &Ty, v: &str, at: &str, depth: usize) -> Result<String, String> {
        let api = self.api;
        Ok(match api.resolve(ty) {
            Ty::String => format!("json.string({v}, {at})"),
            Ty::U64 => format!("json.u64({v}, {at})"),
            Ty::U32 => format!("json.u32({v}, {at})"),
            Ty::S32 => format!("json.s32({v}, {at})"),
            Ty::Bool => format!("json.bool({v}, {at})"),
            Ty::List(e) if **e == Ty::U8 => format!("json.bytes({v}, {at})"),
            t if is_pairs(t) => format!("json.pairs({v}, {at})"),
            Ty::List(e) => format!("json.list({v}, {at}, {})", self.item(e, depth)?),
            Ty::Option(e) => format!("json.option({v}, {at}, {})", self.item(e, depth)?),
            Ty::Named(n) => {
                let t = api.c.named(n);
                match &t.kind {
                    Kind::Enum(_) | Kind::Record(_) => format!("{}({v}, {at})", reader(t)),
                    _ => return Err(format!("{n}: a variant as an argument is not supported")),
                }
            }
            other => return Err(format!("{other:?} as an argument is not supported")),
        })
    }

    /// The reader of a list's or an option's item: `(v, at) => …`.
    fn item(&mut self, ty: &Ty, depth: usize) -> Result<String, String> {
        let api = self.api;
        Ok(match api.resolve(ty) {
            Ty::String => "json.string".into(),
            Ty::U64 => "json.u64".into(),
            Ty::U32 => "json.u32".into(),
            Ty::S32 => "json.s32".into(),
            Ty::Bool => "json.bool".into(),
            Ty::List(e) if **e == Ty::U8 => "json.bytes".into(),
            Ty::Named(n) if matches!(api.c.named(n).kind, Kind::Record(_) | Kind::Enum(_)) => {
                reader(api.c.named(n))
            }
            _ => {
                let (y, p) = (format!("y{depth}"), format!("p{depth}"));
                format!("({y}, {p}) => {}", self.read(ty, &y, &p, depth + 1)?)
            }
        })
    }

    fn enum_reader(&mut self, t: &Named) -> String {
        format!(
            "{}export function {}(v, at) {{\n  return json.enumCase(v, at, {});\n}}\n",
            jsdoc(
                &format!(
                    "`{}` from the vectors' JSON: a case name (absent: the first case).",
                    t.name
                ),
                ""
            ),
            reader(t),
            self.cases_of(t)
        )
    }

    fn record_reader(&mut self, t: &Named, fields: &[Field]) -> Result<String, String> {
        let mut o = jsdoc(
            &format!(
                "`{}` from the vectors' JSON: an object with kebab-case fields.",
                t.name
            ),
            "",
        );
        let _ = writeln!(
            o,
            "export function {}(v, at) {{\n  const o = json.record(v, at);\n  return {{",
            reader(t)
        );
        for f in fields {
            let value = format!("json.field(o, {})", lit(&f.name));
            let read = self.read(&f.ty, &value, &path("at", &f.name), 0)?;
            let _ = writeln!(o, "    {}: {read},", ident(&f.name)?);
        }
        o.push_str("  };\n}\n");
        Ok(o)
    }

    /// Writing `x` (an expression, a value of `ty` as the API answers it)
    /// as JSON.
    fn write(&mut self, ty: &Ty, x: &str, depth: usize) -> Result<String, String> {
        let api = self.api;
        Ok(match api.resolve(ty) {
            Ty::Bool | Ty::U8 | Ty::U32 | Ty::S32 | Ty::String => x.to_owned(),
            Ty::U64 => format!("json.num({x})"),
            Ty::List(e) if **e == Ty::U8 => format!("json.text({x})"),
            t if is_pairs(t) => format!("Object.fromEntries({x})"),
            Ty::List(e) => {
                let y = format!("y{depth}");
                let inner = self.write(e, &y, depth + 1)?;
                if inner == y {
                    x.to_owned()
                } else if let Some(f) = inner
                    .strip_suffix(&format!("({y})"))
                    .filter(|f| f.starts_with("write"))
                {
                    format!("{x}.map({f})")
                } else {
                    format!("{x}.map(({y}) => {inner})")
                }
            }
            Ty::Option(e) => format!("{x} === undefined ? null : {}", self.write(e, x, depth)?),
            Ty::Named(n) => {
                let t = api.c.named(n);
                match &t.kind {
                    Kind::Enum(_) => x.to_owned(),
                    _ => format!("{}({x})", writer(t)),
                }
            }
            other => return Err(format!("{other:?} in an answer is not supported")),
        })
    }

    fn record_writer(&mut self, t: &Named, fields: &[Field]) -> Result<String, String> {
        let mut o = jsdoc(
            &format!(
                "`{}` answers as the vectors' JSON (absent options left out).",
                t.name
            ),
            "",
        );
        let _ = writeln!(o, "export function {}(x) {{", writer(t));
        let optional = |f: &Field| matches!(self.api.resolve(&f.ty), Ty::Option(_));
        let lead = fields.iter().take_while(|f| !optional(f)).count();
        let mut entries = Vec::new();
        for f in &fields[..lead] {
            let value = self.write(&f.ty, &format!("x.{}", ident(&f.name)?), 0)?;
            entries.push(format!("{}: {value}", key(&f.name)));
        }
        if lead == fields.len() {
            let _ = writeln!(
                o,
                "  return {{\n    {},\n  }};\n}}",
                entries.join(",\n    ")
            );
            return Ok(o);
        }
        let _ = writeln!(o, "  const o = {{\n    {},\n  }};", entries.join(",\n    "));
        for f in &fields[lead..] {
            let x = format!("x.{}", ident(&f.name)?);
            let target = if key(&f.name) == f.name {
                format!("o.{}", f.name)
            } else {
                format!("o[{}]", lit(&f.name))
            };
            match self.api.resolve(&f.ty) {
                Ty::Option(e) => {
                    let value = self.write(e, &x, 0)?;
                    let _ = writeln!(o, "  if ({x} !== undefined) {target} = {value};");
                }
                _ => {
                    let value = self.write(&f.ty, &x, 0)?;
                    let _ = writeln!(o, "  {target} = {value};");
                }
            }
        }
        o.push_str("  return o;\n}\n");
        Ok(o)
    }

    fn variant_writer(&mut self, t: &Named) -> Result<String, String> {
        let mut o = jsdoc(
            &format!(
                "`{}` answers as the vectors' JSON: `{{\"case\": payload}}`, `{{\"case\": {{}}}}`\n\
                 without one.",
                t.name
            ),
            "",
        );
        let _ = writeln!(
            o,
            "export function {}(x) {{\n  switch (x.tag) {{",
            writer(t)
        );
        for k in t.cases() {
            let value = match &k.ty {
                Some(ty) => {
                    let field = payload_field(self.api, &k.name, ty)?;
                    let value = self.write(ty, &format!("x.{field}"), 0)?;
                    match crate::emit::vectors::wrapped(&t.name, &k.name) {
                        Some(under) => format!("{{ {}: {value} }}", key(under)),
                        None => value,
                    }
                }
                None => "{}".into(),
            };
            let _ = writeln!(
                o,
                "    case {}:\n      return {{ {}: {value} }};",
                lit(&k.name),
                key(&k.name)
            );
        }
        let _ = writeln!(
            o,
            "    default:\n      throw new Error(`{}: no case ${{JSON.stringify(x.tag)}} in the contract`);\n  }}\n}}",
            t.name
        );
        Ok(o)
    }

    /// One entry of `CALLS`.
    fn call(&mut self, f: &Function) -> Result<String, String> {
        let name = f.call_name();
        let mut o = format!("  {}(k, a) {{\n", lit(&name));
        let mut args = Vec::new();
        for p in &f.params {
            let id = ident(&p.name)?;
            if TAKEN.contains(&id.as_str()) {
                return Err(format!(
                    "{name}: parameter `{}` is a name the generated JavaScript uses",
                    p.name
                ));
            }
            let arg = crate::emit::vectors::arg_name(&p.name);
            let read = self.read(&p.ty, &format!("json.field(a, {})", lit(arg)), &lit(arg), 0)?;
            let _ = writeln!(o, "    const {id} = {read};");
            args.push(id);
        }
        let args = if OPTIONS.contains(&name.as_str()) {
            format!("{{ {} }}", args.join(", "))
        } else {
            args.join(", ")
        };
        let call = format!(
            "k.{}.{}({args})",
            lower_camel(&f.interface),
            lower_camel(&f.name)
        );
        match f.ok() {
            None => {
                let _ = writeln!(o, "    {call};\n    return null;");
            }
            Some(ty) => match self.api.resolve(ty) {
                Ty::Option(e) => {
                    let value = self.write(e, "r", 0)?;
                    let _ = writeln!(
                        o,
                        "    const r = {call};\n    return r === undefined ? null : {value};"
                    );
                }
                _ => {
                    let _ = writeln!(o, "    return {};", self.write(ty, &call, 0)?);
                }
            },
        }
        o.push_str("  },\n");
        Ok(o)
    }
}
