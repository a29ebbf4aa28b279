//! `checks.js`: the check every record argument passes before it is
//! lowered, and the variants' answers with their payloads named. The
//! expressions are shared with `interfaces.js`.
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::{Api, cases_const, default, ident, jsdoc, lit, payload_field, section};
use crate::banner;
use crate::model::{Field, Kind, Named, Ty};
use crate::names::lower_camel;

pub(super) fn emit(api: &Api) -> Result<String, String> {
    let x = Exprs::new(api, "");
    let mut body = String::new();
    for (interface, types) in api.by_interface() {
        let mut parts = Vec::new();
        for t in types {
            if api.inputs.contains(&t.name)
                && let Kind::Record(fields) = &t.kind
            {
                parts.push(record_check(&x, t, fields)?);
            }
            if api.outputs.contains(&t.name) && api.reshaped(&Ty::Named(t.name.clone())) {
                parts.push(match &t.kind {
                    Kind::Variant(_) => variant_answer(&x, t)?,
                    _ => record_answer(&x, t)?,
                });
            }
        }
        if !parts.is_empty() {
            let _ = write!(body, "\n{}\n{}", section(interface), parts.join("\n"));
        }
    }
    let mut o = format!("// {}\n", banner(api.c));
    o.push_str(
        "// The check every record argument of the contract passes before it is\n\
         // lowered (values.js says why: jco's glue converts silently where it\n\
         // should refuse), and the variants' answers with their payloads named.\n\
         // `at` names the argument in an `invalid-input` message.\n",
    );
    o.push_str(&x.imports());
    o.push_str("import * as v from './values.js';\n");
    o.push_str(&body);
    Ok(o)
}

fn record_check(x: &Exprs, t: &Named, fields: &[Field]) -> Result<String, String> {
    let mut o = jsdoc(
        &format!(
            "Checks `{}` arguments: answers the value to lower, or throws `invalid-input`.",
            t.name
        ),
        "",
    );
    let _ = writeln!(
        o,
        "export function {}(at, x) {{\n  v.object(at, x);\n  return {{",
        lower_camel(&t.name)
    );
    let at = At::var("at");
    for f in fields {
        let name = ident(&f.name)?;
        let value = format!("x.{name}");
        let check = x.field(t, f, &value, &at.key(&name))?;
        o.push_str(&entry(&name, &check));
    }
    o.push_str("  };\n}\n");
    Ok(o)
}

/// `    name: value,` in an object literal, a long `a ? b : c` broken as
/// Prettier breaks it.
fn entry(name: &str, value: &str) -> String {
    let one = format!("    {name}: {value},\n");
    if one.len() <= 111 {
        return one;
    }
    match value
        .split_once(" ? ")
        .and_then(|(c, rest)| Some((c, rest.split_once(" : ")?)))
    {
        Some((cond, (then, other))) => {
            format!("    {name}: {cond}\n      ? {then}\n      : {other},\n")
        }
        None => one,
    }
}

fn variant_answer(x: &Exprs, t: &Named) -> Result<String, String> {
    let example = t
        .cases()
        .iter()
        .find_map(|k| {
            let ty = k.ty.as_ref()?;
            let field = payload_field(x.api, &k.name, ty).ok()?;
            Some(format!(": `{{ tag: {}, {field} }}`", lit(&k.name)))
        })
        .unwrap_or_default();
    let mut o = jsdoc(
        &format!("`{}` answers with their payload named{example}.", t.name),
        "",
    );
    let _ = writeln!(
        o,
        "export function {}(x) {{\n  switch (x.tag) {{",
        lower_camel(&t.name)
    );
    for k in t.cases() {
        let _ = writeln!(o, "    case {}:", lit(&k.name));
        match &k.ty {
            Some(ty) => {
                let value = match x.answer_fn(ty)? {
                    Some(f) => format!("{f}(x.val)"),
                    None => "x.val".into(),
                };
                let _ = writeln!(
                    o,
                    "      return {{ tag: {}, {}: {value} }};",
                    lit(&k.name),
                    payload_field(x.api, &k.name, ty)?
                );
            }
            None => {
                let _ = writeln!(o, "      return {{ tag: {} }};", lit(&k.name));
            }
        }
    }
    let _ = writeln!(
        o,
        "    default:\n      // A case this host does not know: refused, never guessed at.\n      \
         throw v.unknownCase({}, x);\n  }}\n}}",
        lit(&t.name)
    );
    Ok(o)
}

/// A record answer holding variants: a copy with them reshaped.
fn record_answer(x: &Exprs, t: &Named) -> Result<String, String> {
    let mut o = jsdoc(
        &format!("`{}` answers with their variants reshaped.", t.name),
        "",
    );
    let _ = writeln!(
        o,
        "export function {}Answer(x) {{\n  return {{\n    ...x,",
        lower_camel(&t.name)
    );
    for f in t.fields() {
        if let Some(func) = x.answer_fn(&f.ty)? {
            let name = ident(&f.name)?;
            let _ = writeln!(o, "    {name}: {func}(x.{name}),");
        }
    }
    o.push_str("  };\n}\n");
    Ok(o)
}

/// Where a value is, for messages: the body of a template literal.
#[derive(Clone)]
pub(super) struct At(String);

impl At {
    /// A name known when the code is generated: `ttl`.
    pub(super) fn name(name: &str) -> At {
        At(name.replace('`', "\\`").replace("${", "\\${"))
    }

    /// The path a variable holds.
    pub(super) fn var(var: &str) -> At {
        At(format!("${{{var}}}"))
    }

    pub(super) fn key(&self, key: &str) -> At {
        At(format!("{}.{key}", self.0))
    }

    /// As JavaScript: a string literal, or a template literal.
    pub(super) fn code(&self) -> String {
        if self.0.contains("${") {
            format!("`{}`", self.0)
        } else {
            lit(&self.0)
        }
    }
}

/// The expressions checking arguments and shaping answers, and the enum
/// case lists they use (imported from `contract.js`).
pub(super) struct Exprs<'a> {
    pub(super) api: &'a Api<'a>,
    /// How generated functions of `checks.js` are named from where the
    /// code runs: `` (in `checks.js`) or `checks.`.
    prefix: &'static str,
    cases: RefCell<BTreeSet<String>>,
}

impl<'a> Exprs<'a> {
    pub(super) fn new(api: &'a Api<'a>, prefix: &'static str) -> Exprs<'a> {
        Exprs {
            api,
            prefix,
            cases: RefCell::new(BTreeSet::new()),
        }
    }

    /// `import { …_CASES } from './contract.js';`, if any was used.
    pub(super) fn imports(&self) -> String {
        let cases = self.cases.borrow();
        if cases.is_empty() {
            return String::new();
        }
        format!(
            "import {{ {} }} from './contract.js';\n",
            cases.iter().cloned().collect::<Vec<_>>().join(", ")
        )
    }

    fn cases_of(&self, t: &Named) -> String {
        let name = cases_const(t);
        self.cases.borrow_mut().insert(name.clone());
        name
    }

    /// The check of argument `value` (a JavaScript expression, evaluated
    /// more than once) of type `ty` at `at`: what to lower, or a throw.
    pub(super) fn check(
        &self,
        ty: &Ty,
        value: &str,
        at: &At,
        depth: usize,
    ) -> Result<String, String> {
        let api = self.api;
        let a = at.code();
        Ok(match api.resolve(ty) {
            Ty::String => format!("v.str({a}, {value})"),
            Ty::U64 => format!("v.u64({a}, {value})"),
            Ty::U32 => format!("v.u32({a}, {value})"),
            Ty::S32 => format!("v.s32({a}, {value})"),
            Ty::Bool => format!("v.bool({a}, {value})"),
            Ty::List(e) if **e == Ty::U8 => format!("v.bytes({a}, {value})"),
            t if super::is_pairs(t) => format!("v.pairs({a}, {value})"),
            Ty::List(e) => format!("v.list({a}, {value}, {})", self.item(e, depth)?),
            Ty::Option(e) => match api.resolve(e) {
                Ty::String => format!("v.optStr({a}, {value})"),
                Ty::U64 => format!("v.optU64({a}, {value})"),
                _ => format!(
                    "v.absent({value}) ? undefined : {}",
                    self.check(e, value, at, depth)?
                ),
            },
            Ty::Named(n) => {
                let t = api.c.named(n);
                match &t.kind {
                    Kind::Enum(_) => format!("v.oneOf({a}, {value}, {})", self.cases_of(t)),
                    Kind::Record(_) => format!("{}{}({a}, {value})", self.prefix, lower_camel(n)),
                    _ => return Err(format!("{n}: a variant as an argument is not supported")),
                }
            }
            other => return Err(format!("{other:?} as an argument is not supported")),
        })
    }

    /// The check of a list's items, as a function `(at, x) => …`.
    fn item(&self, ty: &Ty, depth: usize) -> Result<String, String> {
        let api = self.api;
        Ok(match api.resolve(ty) {
            Ty::String => "v.str".into(),
            Ty::Named(n) if matches!(api.c.named(n).kind, Kind::Record(_)) => {
                format!("{}{}", self.prefix, lower_camel(n))
            }
            _ => {
                let (p, y) = (format!("p{depth}"), format!("y{depth}"));
                format!(
                    "({p}, {y}) => {}",
                    self.check(ty, &y, &At::var(&p), depth + 1)?
                )
            }
        })
    }

    /// The check of field `f` of record `t` given as `value`: a field an
    /// argument may leave out takes its default (a list empty).
    pub(super) fn field(
        &self,
        t: &Named,
        f: &Field,
        value: &str,
        at: &At,
    ) -> Result<String, String> {
        let check = self.check(&f.ty, value, at, 0)?;
        let absent = match (default(t, f), self.api.resolve(&f.ty)) {
            (Some(d), _) => d.to_owned(),
            (None, Ty::List(e)) if **e == Ty::U8 => "new Uint8Array()".into(),
            (None, Ty::List(_)) => "[]".into(),
            _ => return Ok(check),
        };
        Ok(format!("v.absent({value}) ? {absent} : {check}"))
    }

    /// The function reshaping an answer of `ty` (its variants `{ tag,
    /// name }`), if it holds a variant.
    pub(super) fn answer_fn(&self, ty: &Ty) -> Result<Option<String>, String> {
        let api = self.api;
        if !api.reshaped(ty) {
            return Ok(None);
        }
        Ok(Some(match api.resolve(ty) {
            Ty::Named(n) => match &api.c.named(n).kind {
                Kind::Variant(_) => format!("{}{}", self.prefix, lower_camel(n)),
                _ => format!("{}{}Answer", self.prefix, lower_camel(n)),
            },
            Ty::Option(e) => {
                let f = self.answer_fn(e)?.expect("reshaped");
                format!("(y) => v.maybe(y, {f})")
            }
            Ty::List(e) => {
                let f = self.answer_fn(e)?.expect("reshaped");
                format!("(ys) => ys.map((y) => {f}(y))")
            }
            other => return Err(format!("a variant inside {other:?} is not supported")),
        }))
    }

    /// Answer `call` (an expression) of type `ty` as the API answers it.
    pub(super) fn answer(&self, ty: &Ty, call: &str) -> Result<String, String> {
        let api = self.api;
        if let Ty::Option(e) = api.resolve(ty) {
            // The glue's none may be `null`; the API's is `undefined`.
            return Ok(match self.answer_fn(e)? {
                Some(f) => format!("v.maybe({call}, {f})"),
                None => format!("{call} ?? undefined"),
            });
        }
        Ok(match self.answer_fn(ty)? {
            Some(f) => format!("{f}({call})"),
            None => call.to_owned(),
        })
    }
}
