//! Lifting, written out per type: Python that reads a value of a WIT type
//! out of wasmtime's C API values (`vals.rs`) with a few `struct` calls —
//! a record's fields with ONE unpack, a list of records in one loop with
//! every element read inline, an enum's case by two bytes when its names
//! differ in length or first letter — and builds the API's value: the
//! dataclasses of `gak.types` (through `gak._new`) for the types an export
//! answers, tuples and strings for the others (the `error` variant, the
//! store import's batches).
//!
//! `_lift.py` holds every export's answer (`LIFT`); `store_abi.rs` uses the
//! same code for the store import's arguments.
use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::vals::{
    Body, Defs, PAYLOAD, Shape, VAL, elements, is_api, key_expr, payload, shape, short_keys,
    ty_ident, upper,
};
use super::wire::ident_of;
use super::{Api, class_name, fn_name, head, ident, lit, section};
use crate::model::{Named, Ty};
use crate::names::screaming;

/// The definitions a generated module's lifts need.
pub(super) struct Lifter<'a, 'b> {
    pub api: &'b Api<'a>,
    pub defs: Defs,
    /// The `gak._new` constructors used.
    pub news: BTreeSet<String>,
    /// The `gak.types` classes used (enum members).
    pub classes: BTreeSet<String>,
}

impl<'a, 'b> Lifter<'a, 'b> {
    pub fn new(api: &'b Api<'a>) -> Self {
        Lifter {
            api,
            defs: Defs::default(),
            news: BTreeSet::new(),
            classes: BTreeSet::new(),
        }
    }

    /// A function lifting the `Val` at `at` of type `ty`, defined once;
    /// its name.
    pub fn val_fn(&mut self, ty: &Ty) -> Result<String, String> {
        let name = format!("_{}_val", ty_ident(self.api.c, ty));
        if self.defs.has(&name) {
            return Ok(name);
        }
        self.defs.reserve(&name);
        let mut b = Body::new(&["at"]);
        let e = self.val(&mut b, 0, ty, "at", "value")?;
        b.line(0, format!("return {e}"));
        let doc = format!(
            "def {name}(at: int) -> Any:\n    \"\"\"The ``{}`` of the ``Val`` at ``at``.\"\"\"\n",
            super::signatures::wit(self.api.c.resolve(ty))
        );
        self.defs.add(&name, b.function(&doc));
        Ok(name)
    }

    /// Statements into `b` lifting the `Val` at `at` (a name); the value's
    /// expression.
    pub fn val(
        &mut self,
        b: &mut Body,
        ind: usize,
        ty: &Ty,
        at: &str,
        hint: &str,
    ) -> Result<String, String> {
        let c = self.api.c;
        Ok(match shape(c, ty) {
            Shape::String => {
                format!("TX[MEMQ[({at} >> 3) + 1]](MEM, MEMQ[({at} >> 3) + 2])[0].decode()")
            }
            Shape::U64 => format!("MEMQ[({at} >> 3) + 1]"),
            Shape::U8 => format!("MEM[{at} + {PAYLOAD}]"),
            Shape::Bool => format!("MEM[{at} + {PAYLOAD}] != 0"),
            Shape::Record(_) | Shape::Tuple(_) => {
                self.block(b, ind, ty, &format!("MEMQ[({at} >> 3) + 2]"), hint)?
            }
            Shape::Option(_) => {
                let q = b.fresh(&format!("{hint}_box"));
                b.line(ind, format!("{q} = MEMQ[({at} >> 3) + 1]"));
                self.payload(b, ind, ty, &[q], hint, false)?
            }
            _ => {
                let (fmt, count) = payload(c, ty);
                let vars = self.vars(b, ty, hint, count);
                let unpack = self.defs.packer(
                    &payload_name(fmt),
                    &format!("<{fmt}"),
                    "unpack_from",
                    &format!("A ``Val``'s payload: {}.", payload_doc(fmt)),
                );
                b.unpack(ind, &vars, &format!("{unpack}(MEM, {at} + {PAYLOAD})"));
                self.payload(b, ind, ty, &vars, hint, false)?
            }
        })
    }

    /// Local names for a payload's values.
    fn vars(&self, b: &mut Body, ty: &Ty, hint: &str, count: usize) -> Vec<String> {
        let suffixes: &[&str] = match (shape(self.api.c, ty), count) {
            (Shape::Option(_), _) => &["_box"],
            (_, 1) => &[""],
            (Shape::Result(..), _) => &["_ok", "_at"],
            (Shape::Variant(_), _) => &["_n", "_name", "_at"],
            _ => &["_n", "_at"],
        };
        suffixes
            .iter()
            .map(|s| b.fresh(&format!("{hint}{s}")))
            .collect()
    }

    /// Statements into `b` lifting the value whose payload unpacked to
    /// `vars`; its expression. `api_fields`: the value is a field of an
    /// API dataclass (a map's pairs are then a `dict`).
    fn payload(
        &mut self,
        b: &mut Body,
        ind: usize,
        ty: &Ty,
        vars: &[String],
        hint: &str,
        api_fields: bool,
    ) -> Result<String, String> {
        let c = self.api.c;
        Ok(match shape(c, ty) {
            Shape::Bool | Shape::U8 | Shape::U32 | Shape::S32 | Shape::U64 => vars[0].clone(),
            Shape::String => format!("TX[{}](MEM, {})[0].decode()", vars[0], vars[1]),
            Shape::Bytes => {
                let (n, p) = (&vars[0], &vars[1]);
                format!(
                    "(MEM[{p} + {PAYLOAD} : {p} + {PAYLOAD} + {VAL} * {n} : {VAL}].tobytes() if {n} else b\"\")"
                )
            }
            Shape::Enum(t) => {
                let (table, short) = self.enum_table(t);
                format!("{table}[{}]", key_expr(short, &vars[0], &vars[1]))
            }
            Shape::Option(inner) => {
                let q = &vars[0];
                let saved = std::mem::take(&mut b.lines);
                let e = self.val(b, ind + 1, inner, q, hint)?;
                let inner_lines = std::mem::replace(&mut b.lines, saved);
                if inner_lines.is_empty() {
                    format!("({e} if {q} else None)")
                } else {
                    let x = b.fresh(hint);
                    b.line(ind, format!("if {q}:"));
                    b.lines.extend(inner_lines);
                    b.line(ind + 1, format!("{x} = {e}"));
                    b.line(ind, "else:");
                    b.line(ind + 1, format!("{x} = None"));
                    x
                }
            }
            Shape::Result(ok, err) => {
                let (o, p) = (&vars[0], &vars[1]);
                let mut side = |me: &mut Self,
                                t: Option<&Ty>,
                                h: &str|
                 -> Result<(String, Vec<String>), String> {
                    let saved = std::mem::take(&mut b.lines);
                    let e = match t {
                        Some(t) => me.val(b, ind + 1, t, p, h)?,
                        None => "None".into(),
                    };
                    Ok((e, std::mem::replace(&mut b.lines, saved)))
                };
                let (ok_e, ok_lines) = side(self, ok, "ok")?;
                let (err_e, err_lines) = side(self, err, "err")?;
                if ok_lines.is_empty() && err_lines.is_empty() {
                    format!("((True, {ok_e}) if {o} else (False, {err_e}))")
                } else {
                    let x = b.fresh(hint);
                    b.line(ind, format!("if {o}:"));
                    b.lines.extend(ok_lines);
                    b.line(ind + 1, format!("{x} = (True, {ok_e})"));
                    b.line(ind, "else:");
                    b.lines.extend(err_lines);
                    b.line(ind + 1, format!("{x} = (False, {err_e})"));
                    x
                }
            }
            Shape::Record(_) | Shape::Tuple(_) => self.block(b, ind, ty, &vars[1], hint)?,
            Shape::List(e) => {
                let (n, p) = (&vars[0], &vars[1]);
                let pairs = super::is_pairs(c.resolve(ty));
                if pairs && api_fields {
                    let f = self.val_fn(e)?;
                    format!(
                        "(dict(map({f}, range({p}, {p} + {VAL} * {n}, {VAL}))) if {n} else {{}})"
                    )
                } else if elements(c, e).is_some() {
                    self.list_loop(b, ind, e, n, p, hint)?
                } else {
                    let f = self.val_fn(e)?;
                    format!("(list(map({f}, range({p}, {p} + {VAL} * {n}, {VAL}))) if {n} else [])")
                }
            }
            Shape::Variant(t) => {
                let f = self.variant_fn(t)?;
                format!("{f}({}, {}, {})", vars[0], vars[1], vars[2])
            }
        })
    }

    /// A list of records or tuples, each read inline: one element without
    /// a loop (a read of one key, a page of one), else the elements'
    /// addresses with one unpack and a loop.
    fn list_loop(
        &mut self,
        b: &mut Body,
        ind: usize,
        e: &Ty,
        n: &str,
        p: &str,
        hint: &str,
    ) -> Result<String, String> {
        let x = b.fresh(hint);
        let elem = singular(hint);
        b.line(ind, format!("{x} = []"));
        b.line(ind, format!("if {n} == 1:"));
        let one = self.block(b, ind + 1, e, &format!("MEMQ[({p} >> 3) + 2]"), &elem)?;
        b.line(ind + 1, format!("{x}.append({one})"));
        b.line(ind, format!("elif {n}:"));
        let at = b.fresh(&format!("{elem}_at"));
        b.line(ind + 1, format!("for {at} in words({n})(MEM, {p}):"));
        let each = self.block(b, ind + 2, e, &at, &elem)?;
        b.line(ind + 2, format!("{x}.append({each})"));
        Ok(x)
    }

    /// Statements into `b` lifting a record's entries (or a tuple's
    /// `Val`s) at `addr`: every field's payload with one unpack; the
    /// dataclass or tuple's expression.
    fn block(
        &mut self,
        b: &mut Body,
        ind: usize,
        ty: &Ty,
        addr: &str,
        hint: &str,
    ) -> Result<String, String> {
        let c = self.api.c;
        let super::vals::Elements { items: elems, slot } =
            elements(c, ty).expect("a record or a tuple");
        let skip = if slot == VAL { "8x" } else { "24x" }; // a Val's kind; an entry's name and kind
        let mut fmt = String::from("<");
        let mut all = Vec::new();
        let mut per = Vec::new();
        for (name, t) in &elems {
            let (pay, count) = payload(c, t);
            fmt.push_str(skip);
            fmt.push_str(pay);
            let v = self.vars(b, t, &ident(name), count);
            all.extend(v.clone());
            per.push(v);
        }
        let record = match shape(c, ty) {
            Shape::Record(t) => Some(t),
            _ => None,
        };
        let what = match record {
            Some(t) => format!(
                "{} ``{}`` record's entries",
                super::article(&t.name),
                t.name
            ),
            None => format!(
                "{} ``{}``'s values",
                super::article(&super::signatures::wit(ty)),
                super::signatures::wit(ty)
            ),
        };
        let unpack = self.defs.packer(
            &format!(
                "_{}_{}",
                upper(&ty_ident(c, ty)),
                if record.is_some() { "FIELDS" } else { "VALS" }
            ),
            &fmt,
            "unpack_from",
            &format!("{what}: each one's payload."),
        );
        if !all.is_empty() {
            b.unpack(ind, &all, &format!("{unpack}(MEM, {addr})"));
        }
        let api_fields = record.is_some_and(|t| is_api(self.api, t));
        let mut exprs = Vec::new();
        for ((name, t), v) in elems.iter().zip(&per) {
            exprs.push(self.payload(b, ind, t, v, &ident(name), api_fields)?);
        }
        Ok(match record {
            Some(t) if api_fields => {
                let f = format!("new_{}", fn_name(t));
                self.news.insert(f.clone());
                let x = b.fresh(hint);
                push_call(b, ind, &format!("{x} = "), &f, &exprs);
                x
            }
            _ => {
                let one = format!(
                    "({}{})",
                    exprs.join(", "),
                    if exprs.len() == 1 { "," } else { "" }
                );
                if one.len() + 4 * (ind + 1) <= 80 {
                    one
                } else {
                    let x = b.fresh(hint);
                    b.line(ind, format!("{x} = ("));
                    for e in &exprs {
                        b.line(ind + 1, format!("{e},"));
                    }
                    b.line(ind, ")");
                    x
                }
            }
        })
    }

    /// The table of an enum's cases by name (its members for the API's
    /// enums, else their names), defined once; its name, and whether it
    /// is keyed by [`short_keys`].
    fn enum_table(&mut self, t: &Named) -> (String, bool) {
        let name = format!("_{}", upper(&t.name));
        let cases: Vec<&str> = t.cases().iter().map(|k| k.name.as_str()).collect();
        let keys = short_keys(&cases);
        let short = keys.is_some();
        if self.defs.has(&name) {
            return (name, short);
        }
        let api = is_api(self.api, t);
        let class = class_name(t);
        if api {
            self.classes.insert(class.clone());
        }
        let mut o = super::vals::doc_comment(&format!(
            "``{}``'s cases{}, {}.",
            t.name,
            if api { " as members" } else { " by name" },
            if short {
                "by their names' length and first byte (which tell them apart)"
            } else {
                "by their names' UTF-8"
            },
        ));
        let _ = writeln!(
            o,
            "{name}: dict[{}, {}] = {{",
            if short { "int" } else { "bytes" },
            if api { class.as_str() } else { "str" },
        );
        for (i, case) in cases.iter().enumerate() {
            let key = match &keys {
                Some(k) => k[i].clone(),
                None => format!("b{}", lit(case)),
            };
            let value = if api {
                format!("{class}.{}", screaming(case))
            } else {
                lit(case)
            };
            let comment = if short && api {
                format!("  # {case}")
            } else {
                String::new()
            };
            let _ = writeln!(o, "    {key}: {value},{comment}");
        }
        o.push_str("}\n");
        self.defs.add(&name, o);
        (name, short)
    }

    /// A function lifting a variant from its payload (the case's name,
    /// the address of the case's payload), defined once; its name.
    fn variant_fn(&mut self, t: &Named) -> Result<String, String> {
        let name = format!("_{}", crate::names::snake(&t.name));
        if self.defs.has(&name) {
            return Ok(name);
        }
        self.defs.reserve(&name);
        let api = is_api(self.api, t);
        let names: Vec<&str> = t.cases().iter().map(|k| k.name.as_str()).collect();
        let keys = short_keys(&names);
        let mut rows = Vec::new();
        for (i, case) in t.cases().iter().enumerate() {
            let lift = match &case.ty {
                Some(ty) => self.val_fn(ty)?,
                None => "None".into(),
            };
            let first = if api {
                let f = format!("new_{}", ident_of(&self.api.case(case).class));
                self.news.insert(f.clone());
                f
            } else {
                lit(&case.name)
            };
            let key = match &keys {
                Some(k) => k[i].clone(),
                None => format!("b{}", lit(&case.name)),
            };
            let comment = if keys.is_some() && api {
                format!("  # {}", case.name)
            } else {
                String::new()
            };
            rows.push(format!("    {key}: ({first}, {lift}),{comment}\n"));
        }
        let table = format!("_{}_CASES", upper(&t.name));
        let mut o = super::vals::doc_comment(&format!(
            "``{}``'s cases {}: {} and the lift of its payload.",
            t.name,
            if keys.is_some() {
                "by their names' length and first byte (which tell them apart)"
            } else {
                "by their names' UTF-8"
            },
            if api {
                "each one's class"
            } else {
                "each one's name"
            },
        ));
        let _ = write!(
            o,
            "{table}: dict[{}, tuple[Any, Any]] = {{\n{}}}\n\n\n",
            if keys.is_some() { "int" } else { "bytes" },
            rows.concat()
        );
        let key = key_expr(keys.is_some(), "n", "name");
        let _ = write!(
            o,
            "def {name}(n: int, name: int, at: int) -> Any:\n\
             \x20   \"\"\"{} ``{}`` from its payload: its case's name (length, address) and\n\
             \x20   the address of the case's payload.\"\"\"\n",
            super::article(&t.name),
            t.name
        );
        if api {
            let _ = write!(
                o,
                "    make, lift = {table}[{key}]\n    return make() if lift is None else make(lift(at))\n"
            );
        } else {
            let _ = write!(
                o,
                "    case, lift = {table}[{key}]\n    return (case, None if lift is None else lift(at))\n"
            );
        }
        self.defs.add(&name, o);
        Ok(name)
    }

    /// The imports of a module using these lifts.
    pub fn imports(&self) -> String {
        let mut o = String::new();
        if !self.news.is_empty() {
            o.push_str(&import_list("._new", &self.news));
        }
        if !self.classes.is_empty() {
            o.push_str(&import_list(".types", &self.classes));
        }
        o
    }
}

/// `from MODULE import (...)`, one name a line when they do not fit.
pub(super) fn import_list(module: &str, names: &BTreeSet<String>) -> String {
    let one = format!(
        "from {module} import {}\n",
        names.iter().cloned().collect::<Vec<_>>().join(", ")
    );
    if one.len() <= 101 {
        return one;
    }
    let mut o = format!("from {module} import (\n");
    for n in names {
        let _ = writeln!(o, "    {n},");
    }
    o.push_str(")\n");
    o
}

/// `prefix + func(args)` at `ind`, one argument a line when too long.
pub(super) fn push_call(b: &mut Body, ind: usize, prefix: &str, func: &str, args: &[String]) {
    let one = format!("{prefix}{func}({})", args.join(", "));
    if one.len() + 4 * (ind + 1) <= 100 {
        b.line(ind, one);
        return;
    }
    b.line(ind, format!("{prefix}{func}("));
    for a in args {
        b.line(ind + 1, format!("{a},"));
    }
    b.line(ind, ")");
}

/// An element's name from a list's (`items` → `item`).
pub(super) fn singular(hint: &str) -> String {
    match hint.strip_suffix('s') {
        Some(s) if !s.is_empty() && !hint.ends_with("ss") => s.to_owned(),
        _ => format!("{hint}_item"),
    }
}

/// The name of the unpacker of a payload format.
fn payload_name(fmt: &str) -> String {
    match fmt {
        "?23x" => "_BOOL_PAYLOAD",
        "B23x" => "_U8_PAYLOAD",
        "I20x" => "_U32_PAYLOAD",
        "i20x" => "_S32_PAYLOAD",
        "Q16x" => "_WORD_PAYLOAD",
        "?7xQ8x" => "_RESULT_PAYLOAD",
        "QQQ" => "_VARIANT_PAYLOAD",
        _ => "_PAIR_PAYLOAD",
    }
    .into()
}

fn payload_doc(fmt: &str) -> &'static str {
    match fmt {
        "?23x" => "a bool",
        "B23x" => "a u8",
        "I20x" => "a u32",
        "i20x" => "an s32",
        "Q16x" => "a u64, or an option's address",
        "?7xQ8x" => "a result's (is-ok, address)",
        "QQQ" => "a variant's case name (length, address) and payload address",
        _ => "(length or count, address)",
    }
}

/// `_lift.py`.
pub(super) fn emit(api: &Api) -> Result<String, String> {
    let mut l = Lifter::new(api);
    let mut table = String::new();
    for f in api.c.exported_functions() {
        let Some(result) = &f.result else { continue };
        let lift = l.val_fn(result)?;
        let _ = writeln!(
            table,
            "    {}: {lift},",
            lit(&format!("{}#{}", f.interface, f.name))
        );
    }
    let mut o = head(
        api.c,
        "Every export's answer, lifted out of wasmtime's C API values into the API's\n\
         types (from ``wit/``): the records as the dataclasses of :mod:`gak.types`\n\
         (built by :mod:`gak._new`), the enums as their members, the variants as\n\
         their cases' classes; the ``error`` variant as ``(case, payload)`` and a\n\
         ``result`` as ``(is_ok, payload)``.\n\
         \n\
         Each record's fields are read with ONE ``struct`` unpack and a list of\n\
         records in one loop; the offsets are the WIT's types laid out as\n\
         :mod:`gak._layout` says. :data:`LIFT` maps ``interface#function`` to the\n\
         lift of its result's ``Val``; :mod:`gak._engine` checks, when it opens a\n\
         component, that its functions have the types these were generated from\n\
         (:mod:`gak._signatures`).\n",
    );
    o.push_str("\nimport struct\nfrom typing import Any, Callable\n\n");
    o.push_str("from ._mem import MEM, MEMQ, TX, words\n");
    o.push_str(&l.imports());
    let _ = write!(o, "\n\n{}", section("lifts"));
    for d in &l.defs.text {
        o.push_str("\n\n");
        o.push_str(d);
    }
    let _ = write!(
        o,
        "\n\n#: The lift of each export's result (``interface#function``).\n\
         LIFT: dict[str, Callable[[int], Any]] = {{\n{table}}}\n"
    );
    Ok(tidy(o))
}

/// Two blank lines between top-level definitions and none doubled: the
/// definitions are joined without knowing what precedes them.
pub(super) fn tidy(text: String) -> String {
    let mut out = String::new();
    let mut blank = 0;
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.is_empty() {
            blank += 1;
            continue;
        }
        // Comments and constants directly above a definition stay with it.
        let top = !line.starts_with(' ') && !line.starts_with(')') && !line.starts_with('}');
        let keep = if i == 0 || !top {
            blank.min(1)
        } else {
            blank.min(2)
        };
        for _ in 0..keep {
            out.push('\n');
        }
        blank = 0;
        out.push_str(line);
        out.push('\n');
    }
    out
}
