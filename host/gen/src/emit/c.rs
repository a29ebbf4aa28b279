//! libgak (`host/c/src/records.rs`): the contract's records, enums and
//! variants as the C structs and numbers of `gak.h` (laid out by
//! `emit::cabi`), and everything libgak does with them by rule — reading an
//! argument into the Rust host's type (`read`), making an answer of one
//! (`From`), weighing an argument from its lengths (HOSTS.md rule 16), and
//! freeing what libgak put into an answer (`free`, the exported `_clear`
//! functions). cbindgen writes `gak.h` from the crate, this file included.
use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::cabi::{Abi, CField, PAIR, Shape};
use super::rust::{ident, non_exhaustive, type_name};
use crate::banner;
use crate::model::{Kind, Named};
use crate::names::{camel, snake};

/// libgak's generated files.
pub fn emit(c: &crate::Contract, root: &std::path::Path) -> Result<Vec<crate::Output>, String> {
    let abi = Abi::new(c)?;
    Ok(vec![crate::Output {
        path: "host/c/src/records.rs".into(),
        text: super::rustfmt(root, &records(&abi)?)?,
    }])
}

/// The Rust source of `host/c/src/records.rs` (before rustfmt).
pub fn records(abi: &Abi) -> Result<String, String> {
    let mut g = Gen {
        abi,
        uses: BTreeSet::new(),
        rust: BTreeSet::new(),
    };
    let mut body = String::new();
    let mut clears = String::new();
    for t in &abi.types {
        match &t.kind {
            Kind::Enum(_) => body.push_str(&g.enumeration(t)),
            Kind::Record(_) => {
                body.push_str(&g.record(t)?);
                clears.push_str(&g.clear(t));
            }
            Kind::Variant(_) => {
                body.push_str(&g.variant(t)?);
                clears.push_str(&g.clear(t));
            }
            Kind::Alias(_) => {}
        }
    }
    let mut o = format!("// {}\n", banner(abi.c));
    o.push_str(
        "//! The contract's records as libgak's C structs, its enums as numbers
//! (0 is none; cases from 1 in the WIT's order), its variants as a `kind`
//! and the payloads' fields; how libgak reads an argument (`read`), makes
//! an answer (`From`), weighs an argument from its lengths before reading
//! it (`Scale`, HOSTS.md rule 16) and frees what it put into an answer
//! (`free`, the `_clear` functions). Generated from the WIT by gak-gen
//! (`host/gen/src/emit/c.rs`, laid out by `emit/cabi.rs`).
//!
//! A record is an argument (borrowed: libgak reads it during the call and
//! keeps nothing) or an answer (libgak fills the caller's struct; the
//! strings, bytes and lists in it are libgak's until the caller passes the
//! struct to its `_clear` function, which frees them and zeroes the struct,
//! so clearing twice is harmless). Never clear a record you built yourself.
#![allow(non_camel_case_types)]\n\n",
    );
    g.rust.insert("Error".to_owned());
    let _ = writeln!(
        o,
        "use gak_host::{{{}}};\n",
        g.rust.iter().cloned().collect::<Vec<_>>().join(", ")
    );
    let abi_uses: Vec<&str> = g.uses.iter().copied().filter(|u| *u != "Scale").collect();
    if !abi_uses.is_empty() {
        let _ = writeln!(o, "use crate::abi::{{{}}};", abi_uses.join(", "));
    }
    if g.uses.contains("Scale") {
        o.push_str("use crate::limits::Scale;\n");
    }
    let _ = write!(
        o,
        "\n/// A fingerprint of every struct and number below (libgak's layout):
/// it changes whenever a record, a field or an enum's numbering does.
/// `gak_abi_layout()` answers the linked library's; a program compiled
/// against another header must not call it.
pub const GAK_ABI_LAYOUT: u32 = 0x{:08x};\n",
        abi.layout()
    );
    if abi.types.iter().any(|t| {
        t.fields()
            .iter()
            .any(|f| abi.shape(&f.ty).is_ok_and(|s| s == Shape::Pairs))
    }) {
        let (name, k, v) = PAIR;
        let _ = write!(
            o,
            "\n/// One pair of a list of pairs (a snapshot's `fields`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct {name} {{
/// The key (pairs are sorted by key, keys unique).
pub {k}: gak_str,
/// The value.
pub {v}: gak_str,
}}\n"
        );
    }
    o.push_str(&body);
    o.push_str("\n// --- clearing ------------------------------------------------------------\n");
    o.push_str(&clears);
    Ok(o)
}

struct Gen<'a> {
    abi: &'a Abi<'a>,
    /// Names used from `crate::abi` (and `Scale`).
    uses: BTreeSet<&'static str>,
    /// Names used from `gak_host`.
    rust: BTreeSet<String>,
}

/// `///` lines for `docs`, `fallback` when there are none, then `notes`.
fn doc(docs: &str, fallback: &str, notes: &[String]) -> String {
    let mut text = if docs.is_empty() {
        fallback.to_owned()
    } else {
        docs.to_owned()
    };
    for n in notes {
        text.push('\n');
        text.push_str(n);
    }
    super::comment(&text, "", "/// ")
}

impl Gen<'_> {
    fn rust_type(&mut self, wit: &str) -> String {
        let name = type_name(wit);
        self.rust.insert(name.clone());
        name
    }

    fn enumeration(&mut self, t: &Named) -> String {
        let abi = self.abi;
        let ty = Abi::number_type(t);
        let zero = Abi::zero(&t.name);
        let mut o = String::new();
        o.push('\n');
        o.push_str(&doc(
            &t.docs,
            &format!("WIT `{}.{}`.", t.interface, t.name),
            &[format!(
                "Numbered `{}` from 1, in the WIT's order; 0 (`{zero}`) is none{}.",
                Abi::constant(&t.name, "*"),
                if zero.ends_with("_ANY") {
                    ", which a list's filter reads as any"
                } else {
                    ""
                }
            )],
        ));
        let _ = writeln!(o, "pub type {ty} = u32;");
        for (name, n, case) in abi.numbered(t) {
            let docs = match case {
                None if name.ends_with("_ANY") => {
                    "None: any, where a list filters by it; absent elsewhere.".to_owned()
                }
                None => "None: absent.".to_owned(),
                Some(c) if c.docs.is_empty() => format!("`{}`.", c.name),
                Some(c) => c.docs.clone(),
            };
            o.push_str(&doc(&docs, "", &[]));
            let _ = writeln!(o, "pub const {name}: {ty} = {n};");
        }
        let rust = self.rust_type(&t.name);
        let f = snake(crate::names::host_kebab(&t.name));
        if abi.is_input(&t.name) {
            let _ = writeln!(
                o,
                "\n/// The {0} numbered `n`; `{zero}` is none. An unknown number is\n\
                 /// `invalid-input` naming `what`.\n\
                 pub(crate) fn {f}(n: {ty}, what: &str) -> Result<Option<{rust}>, Error> {{\n\
                 Ok(Some(match n {{\n{zero} => return Ok(None),",
                t.name
            );
            for c in t.cases() {
                let _ = writeln!(
                    o,
                    "{} => {rust}::{},",
                    Abi::constant(&t.name, &c.name),
                    camel(&c.name)
                );
            }
            let _ = writeln!(
                o,
                "other => return Err(Error::InvalidInput(format!(\"{{what}}: unknown {} {{other}}\"))),\n}}))\n}}",
                t.name
            );
        }
        if abi.is_output(&t.name) {
            let _ = writeln!(
                o,
                "\n/// The number of a {}.\npub(crate) fn {f}_number(x: {rust}) -> {ty} {{\nmatch x {{",
                t.name
            );
            for c in t.cases() {
                let _ = writeln!(
                    o,
                    "{rust}::{} => {},",
                    camel(&c.name),
                    Abi::constant(&t.name, &c.name)
                );
            }
            o.push_str("}\n}\n");
        }
        o
    }

    /// The notes a field's docs get by rule.
    fn notes(&self, owner: &str, f: &CField) -> Vec<String> {
        let mut notes = Vec::new();
        if super::rust::CAPABILITIES.contains(&(owner, f.wit.as_str())) {
            notes.push(
                "A capability: whoever reads it can act as its owner; never log it.".to_owned(),
            );
        }
        match &f.shape {
            Shape::Str { optional: true } | Shape::Bytes { optional: true } => {
                notes.push("NULL `ptr`: none.".to_owned());
            }
            Shape::Enum { name, optional } => {
                let t = self.abi.c.named(name);
                let all = Abi::constant(&t.name, "*");
                if *optional {
                    notes.push(format!("`{all}`; 0 (`{}`): none.", Abi::zero(&t.name)));
                } else if let Some(case) = Abi::default(owner, &f.wit) {
                    notes.push(format!(
                        "`{all}`; 0 (`{}`): `{}`.",
                        Abi::zero(&t.name),
                        Abi::constant(&t.name, case)
                    ));
                } else if self.abi.is_input(owner) {
                    notes.push(format!(
                        "`{all}` (0, `{}`, is `invalid-input` in an argument).",
                        Abi::zero(&t.name)
                    ));
                } else {
                    notes.push(format!("`{all}`."));
                }
            }
            Shape::Scalar { optional: true, .. } => {
                notes.push(format!("Set when `{}`.", f.has.as_deref().unwrap_or("")));
            }
            _ => {}
        }
        notes
    }

    /// The struct fields of one WIT field.
    fn declare(&self, owner: &str, f: &CField, o: &mut String) {
        let decls = self.abi_decls(owner, f);
        let fallback = format!("WIT `{owner}.{}`.", f.wit);
        for (name, ty) in decls {
            if Some(&name) == f.has.as_ref() {
                let _ = writeln!(o, "/// Whether `{}` is set.\npub {name}: {ty},", f.name);
            } else if Some(&name) == f.len.as_ref() {
                let _ = writeln!(o, "/// How many `{}`.\npub {name}: {ty},", f.name);
            } else {
                o.push_str(&doc(&f.docs, &fallback, &self.notes(owner, f)));
                let _ = writeln!(o, "pub {name}: {ty},");
            }
        }
    }

    fn abi_decls(&self, owner: &str, f: &CField) -> Vec<(String, String)> {
        // The record's own layout, filtered to this field's declarations.
        let t = self.abi.c.named(owner);
        let all = self.abi.layout_of(t);
        let mine: Vec<&str> = [f.has.as_deref(), Some(f.name.as_str()), f.len.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        all.into_iter()
            .filter(|(n, _)| mine.contains(&n.as_str()))
            .collect()
    }

    /// The zero value of a field's declarations, as `name: value` lines.
    fn zero(&mut self, owner: &str, f: &CField) -> String {
        let mut o = String::new();
        for (name, ty) in self.abi_decls(owner, f) {
            let v = if ty == "gak_str" {
                self.uses.insert("gak_str");
                "gak_str::NONE".to_owned()
            } else if ty == "gak_bytes" {
                self.uses.insert("gak_bytes");
                "gak_bytes::NONE".to_owned()
            } else if ty.starts_with("*const") {
                "std::ptr::null()".to_owned()
            } else if ty.starts_with("*mut") {
                "std::ptr::null_mut()".to_owned()
            } else if ty == "bool" {
                "false".to_owned()
            } else if ty.starts_with("gak_") && matches!(f.shape, Shape::Record(_)) {
                format!("{ty}::NONE")
            } else {
                "0".to_owned()
            };
            let _ = writeln!(o, "{name}: {v},");
        }
        o
    }

    fn record(&mut self, t: &Named) -> Result<String, String> {
        let abi = self.abi;
        let c = Abi::c_name(&t.name);
        let fields = abi.fields(t)?;
        let input = abi.is_input(&t.name);
        let output = abi.is_output(&t.name);
        let mut o = String::new();
        let _ = writeln!(
            o,
            "\n// --- {} ({}) {}\n",
            t.name,
            t.interface,
            "-".repeat(60usize.saturating_sub(t.name.len() + t.interface.len()))
        );
        let role = match (input, output) {
            (true, false) => {
                "An argument: borrowed for the call (libgak keeps none of its pointers).".to_owned()
            }
            (false, true) if !abi.owns(t) => {
                "An answer of plain values: nothing to clear.".to_owned()
            }
            (false, true) => format!("An answer: clear what libgak put into it with `{c}_clear`."),
            _ => format!(
                "Borrowed as an argument; as an answer, clear what libgak put into it with `{c}_clear`."
            ),
        };
        o.push_str(&doc(
            &t.docs,
            &format!("WIT `{}.{}`.", t.interface, t.name),
            &[String::new(), role],
        ));
        let copy = if !abi.owns(t) || !output {
            "Clone, Copy, "
        } else {
            ""
        };
        let _ = writeln!(o, "#[repr(C)]\n#[derive({copy}Debug)]\npub struct {c} {{");
        for f in &fields {
            self.declare(&t.name, f, &mut o);
        }
        o.push_str("}\n");
        let rust = self.rust_type(&t.name);
        let mut imp = String::new();
        if output && (abi.owns(t) || abi.embedded(&t.name)) {
            let _ = write!(
                imp,
                "/// The zero record: nothing set, nothing owned.\npub(crate) const NONE: {c} = {c} {{\n"
            );
            for f in &fields {
                let z = self.zero(&t.name, f);
                imp.push_str(&z);
            }
            imp.push_str("};\n");
        }
        if input {
            imp.push_str(&self.read(t, &rust, &fields)?);
        }
        if output && abi.owns(t) {
            imp.push_str(&self.free(&fields));
        }
        if !imp.is_empty() {
            let _ = write!(o, "\nimpl {c} {{\n{imp}}}\n");
        }
        if output {
            o.push_str(&self.from(&c, &rust, &fields)?);
        }
        if input {
            o.push_str(&self.weigh(t, &c, &fields));
        }
        Ok(o)
    }

    fn read(&mut self, t: &Named, rust: &str, fields: &[CField]) -> Result<String, String> {
        let mut unsafe_needed = false;
        let mut lines = String::new();
        for f in fields {
            let what = format!("{:?}", format!("{}.{}", snake(&t.name), f.name));
            let x = format!("self.{}", f.name);
            let v = match &f.shape {
                Shape::Str { optional: false } => {
                    unsafe_needed = true;
                    format!("{x}.text({what})?.to_owned()")
                }
                Shape::Str { optional: true } => {
                    unsafe_needed = true;
                    format!("{x}.opt_text({what})?.map(str::to_owned)")
                }
                Shape::Bytes { optional: false } => {
                    unsafe_needed = true;
                    format!("{x}.slice({what})?.to_vec()")
                }
                Shape::Bytes { optional: true } => {
                    unsafe_needed = true;
                    format!("{x}.opt_slice({what})?.map(<[u8]>::to_vec)")
                }
                Shape::Scalar {
                    optional: false, ..
                } => x,
                Shape::Scalar { optional: true, .. } => {
                    format!("self.{}.then_some({x})", f.has.as_deref().unwrap_or(""))
                }
                Shape::Enum { name, optional } => {
                    let e = self.abi.c.named(name);
                    let func = snake(crate::names::host_kebab(name));
                    let erust = self.rust_type(name);
                    let read = format!("{func}({x}, {what})?");
                    if *optional {
                        read
                    } else if let Some(case) = Abi::default(&t.name, &f.wit) {
                        format!("{read}.unwrap_or({erust}::{})", camel(case))
                    } else {
                        let why = format!(
                            "{}.{}: none ({})",
                            snake(&t.name),
                            f.name,
                            Abi::zero(&e.name)
                        );
                        format!("{read}.ok_or_else(|| Error::InvalidInput({why:?}.into()))?")
                    }
                }
                Shape::Strings => {
                    unsafe_needed = true;
                    self.uses.insert("strings");
                    format!(
                        "strings({x}, self.{}, {what})?",
                        f.len.as_deref().unwrap_or("")
                    )
                }
                Shape::Pairs => {
                    unsafe_needed = true;
                    self.uses.insert("items");
                    let (_, k, v) = PAIR;
                    format!(
                        "items({x}, self.{len}, {what})?.iter().map(|p| Ok((p.{k}.text({what})?.to_owned(), p.{v}.text({what})?.to_owned()))).collect::<Result<Vec<_>, Error>>()?",
                        len = f.len.as_deref().unwrap_or("")
                    )
                }
                Shape::Records(_) => {
                    unsafe_needed = true;
                    self.uses.insert("items");
                    format!(
                        "items({x}, self.{}, {what})?.iter().map(|r| r.read()).collect::<Result<Vec<_>, Error>>()?",
                        f.len.as_deref().unwrap_or("")
                    )
                }
                Shape::Record(_) => {
                    unsafe_needed = true;
                    format!("{x}.read()?")
                }
            };
            let _ = writeln!(lines, "{}: {v},", ident(&f.wit)?);
        }
        let build = format!("Ok({rust} {{\n{lines}}})");
        let body = if unsafe_needed {
            format!("// SAFETY: forwarded to the caller's promise.\nunsafe {{\n{build}\n}}")
        } else {
            build
        };
        Ok(format!(
            "\n/// The argument as the Rust host's value; what is not valid\n\
             /// (text that is not UTF-8, a NULL pointer with a length, an unknown\n\
             /// number) is `invalid-input`.\n\
             ///\n/// # Safety\n/// Every pointer is valid for reading as the header describes.\n\
             pub(crate) unsafe fn read(&self) -> Result<{rust}, Error> {{\n{body}\n}}\n"
        ))
    }

    /// `free`: free what libgak put into the struct, then zero it.
    fn free(&mut self, fields: &[CField]) -> String {
        let mut frees = String::new();
        for f in fields {
            let x = format!("self.{}", f.name);
            match &f.shape {
                Shape::Str { .. } | Shape::Bytes { .. } | Shape::Record(_) => {
                    let _ = writeln!(frees, "{x}.free();");
                }
                Shape::Strings => {
                    self.uses.insert("free_strings");
                    let _ = writeln!(
                        frees,
                        "free_strings({x}, self.{});",
                        f.len.as_deref().unwrap_or("")
                    );
                }
                Shape::Pairs => {
                    self.uses.insert("take_list");
                    let (_, k, v) = PAIR;
                    let _ = writeln!(
                        frees,
                        "for mut p in take_list({x}, self.{}) {{\np.{k}.free();\np.{v}.free();\n}}",
                        f.len.as_deref().unwrap_or("")
                    );
                }
                Shape::Records(_) => {
                    self.uses.insert("take_list");
                    let _ = writeln!(
                        frees,
                        "for mut item in take_list({x}, self.{}) {{\nitem.free();\n}}",
                        f.len.as_deref().unwrap_or("")
                    );
                }
                Shape::Scalar { .. } | Shape::Enum { .. } => {}
            }
        }
        format!(
            "\n/// Free what libgak put into it, and zero it.\n///\n/// # Safety\n\
             /// Filled by libgak, not freed since.\n\
             pub(crate) unsafe fn free(&mut self) {{\n\
             // SAFETY: forwarded to the caller's promise: libgak made every pointer.\n\
             unsafe {{\n{frees}}}\n*self = Self::NONE;\n}}\n"
        )
    }

    /// How `x` (a Rust value of the field's shape) becomes the field's C
    /// value(s): statements to run first, and (C field, value) pairs.
    fn make(&mut self, f: &CField, x: &str) -> (String, Vec<(String, String)>) {
        let name = f.name.clone();
        let one = |v: String| (String::new(), vec![(name.clone(), v)]);
        match &f.shape {
            Shape::Str { optional } => {
                self.uses.insert("gak_str");
                one(if *optional {
                    format!("gak_str::owned_opt({x})")
                } else {
                    format!("gak_str::owned({x})")
                })
            }
            Shape::Bytes { optional } => {
                self.uses.insert("gak_bytes");
                one(if *optional {
                    format!("gak_bytes::owned_opt({x})")
                } else {
                    format!("gak_bytes::owned({x})")
                })
            }
            Shape::Scalar {
                optional: false, ..
            } => one(x.to_owned()),
            Shape::Scalar { optional: true, .. } => (
                String::new(),
                vec![
                    (f.has.clone().unwrap_or_default(), format!("{x}.is_some()")),
                    (name.clone(), format!("{x}.unwrap_or_default()")),
                ],
            ),
            Shape::Enum { name: e, optional } => {
                let func = format!("{}_number", snake(crate::names::host_kebab(e)));
                one(if *optional {
                    format!("{x}.map_or(0, {func})")
                } else {
                    format!("{func}({x})")
                })
            }
            Shape::Strings | Shape::Pairs | Shape::Records(_) => {
                let len = f.len.clone().unwrap_or_default();
                let list = match &f.shape {
                    Shape::Strings => {
                        self.uses.insert("owned_strings");
                        format!("owned_strings({x})")
                    }
                    Shape::Pairs => {
                        self.uses.insert("owned_list");
                        self.uses.insert("gak_str");
                        let (p, k, v) = PAIR;
                        format!(
                            "owned_list({x}.into_iter().map(|(k, v)| {p} {{ {k}: gak_str::owned(k), {v}: gak_str::owned(v) }}).collect())"
                        )
                    }
                    Shape::Records(r) => {
                        self.uses.insert("owned_list");
                        format!(
                            "owned_list({x}.into_iter().map({}::from).collect())",
                            Abi::c_name(r)
                        )
                    }
                    _ => unreachable!(),
                };
                (
                    format!("let ({name}, {len}) = {list};\n"),
                    vec![(name.clone(), name.clone()), (len.clone(), len)],
                )
            }
            Shape::Record(r) => one(format!("{}::from({x})", Abi::c_name(r))),
        }
    }

    fn from(&mut self, c: &str, rust: &str, fields: &[CField]) -> Result<String, String> {
        let mut lets = String::new();
        let mut lines = String::new();
        for f in fields {
            let (l, v) = self.make(f, &format!("x.{}", ident(&f.wit)?));
            lets.push_str(&l);
            for (field, value) in v {
                if field == value {
                    let _ = writeln!(lines, "{field},");
                } else {
                    let _ = writeln!(lines, "{field}: {value},");
                }
            }
        }
        Ok(format!(
            "\nimpl From<{rust}> for {c} {{\nfn from(x: {rust}) -> Self {{\n{lets}{c} {{\n{lines}}}\n}}\n}}\n"
        ))
    }

    fn weigh(&mut self, t: &Named, c: &str, fields: &[CField]) -> String {
        self.uses.insert("Scale");
        let lists = self.abi.has_lists(t);
        let mut plain = String::new();
        let mut listed = String::new();
        for f in fields {
            let what = format!("{:?}", format!("{}.{}", snake(&t.name), f.name));
            let x = format!("x.{}", f.name);
            let len = f.len.as_deref().unwrap_or("");
            match &f.shape {
                Shape::Str { .. } => {
                    let _ = writeln!(plain, "self.str({x}, {what})?;");
                }
                Shape::Bytes { .. } => {
                    let _ = writeln!(plain, "self.bytes({x}, {what})?;");
                }
                Shape::Strings => {
                    let _ = writeln!(listed, "self.strs({x}, x.{len}, {what})?;");
                }
                Shape::Pairs => {
                    let (_, k, v) = PAIR;
                    let _ = writeln!(
                        listed,
                        "self.list({x}, x.{len}, {what}, |s, p| {{\ns.value(p.{k}.len, {what})?;\ns.value(p.{v}.len, {what})\n}})?;"
                    );
                }
                Shape::Records(r) => {
                    let _ = writeln!(listed, "self.{}({x}, x.{len}, {what})?;", plural(r));
                }
                Shape::Record(r) => {
                    let line = format!("self.{}(&{x})?;\n", snake(r));
                    if self.abi.has_lists(self.abi.c.named(r)) {
                        listed.push_str(&line);
                    } else {
                        plain.push_str(&line);
                    }
                }
                Shape::Scalar { .. } | Shape::Enum { .. } => {}
            }
        }
        let f = snake(&t.name);
        let mut o = String::from("\nimpl Scale {\n");
        if lists {
            let _ = write!(
                o,
                "/// Weigh the {0} argument from its lengths alone (HOSTS.md rule 16).\n///\n\
                 /// # Safety\n/// Its lists are valid for their lengths, per the header.\n\
                 pub(crate) unsafe fn {f}(&mut self, x: &{c}) -> Result<&mut Scale, Error> {{\n{plain}\
                 // SAFETY: forwarded to the caller's promise.\nunsafe {{\n{listed}}}\nOk(self)\n}}\n",
                t.name
            );
        } else {
            let _ = write!(
                o,
                "/// Weigh the {0} argument from its lengths alone (HOSTS.md rule 16).\n\
                 pub(crate) fn {f}(&mut self, x: &{c}) -> Result<&mut Scale, Error> {{\n{plain}Ok(self)\n}}\n",
                t.name
            );
        }
        if self.abi.listed(&t.name) {
            let each = format!("s.{f}(x)?;");
            let _ = write!(
                o,
                "\n/// Weigh a list of {0} arguments: its count, then each item.\n///\n\
                 /// # Safety\n/// `ptr` is NULL or valid for `len` items, each as the header describes.\n\
                 pub(crate) unsafe fn {p}(&mut self, ptr: *const {c}, len: usize, what: &str) -> Result<&mut Scale, Error> {{\n\
                 // SAFETY: forwarded to the caller's promise.\n\
                 unsafe {{\nself.list(ptr, len, what, |s, x| {{\n{each}\nOk(())\n}})\n}}\n}}\n",
                t.name,
                p = plural(&t.name)
            );
        }
        o.push_str("}\n");
        o
    }

    fn variant(&mut self, t: &Named) -> Result<String, String> {
        let abi = self.abi;
        let c = Abi::c_name(&t.name);
        let kind = Abi::kind_name(&t.name);
        let payloads = abi.payloads(t)?;
        let mut o = format!(
            "\n// --- {} ({}) {}\n\n",
            t.name,
            t.interface,
            "-".repeat(60usize.saturating_sub(t.name.len() + t.interface.len()))
        );
        o.push_str(&doc(
            "",
            &format!(
                "What `{}` says (`{}`), by `kind`.",
                t.name,
                Abi::constant(&t.name, "*")
            ),
            &[format!(
                "0 (`{}`) is none (a cleared answer).",
                Abi::zero(&t.name)
            )],
        ));
        let _ = writeln!(o, "pub type {kind} = u32;");
        for (name, n, case) in abi.numbered(t) {
            let docs = match case {
                None => "None: a cleared (or never filled) answer.".to_owned(),
                Some(c) if c.docs.is_empty() => format!("`{}`.", c.name),
                Some(c) => c.docs.clone(),
            };
            o.push_str(&doc(&docs, "", &[]));
            let _ = writeln!(o, "pub const {name}: {kind} = {n};");
        }
        o.push('\n');
        o.push_str(&doc(
            &t.docs,
            &format!("WIT `{}.{}`.", t.interface, t.name),
            &[format!(
                "`kind` says which fields are set. An answer: clear what libgak put into it with `{c}_clear`."
            )],
        ));
        let _ = writeln!(
            o,
            "#[repr(C)]\n#[derive(Debug)]\npub struct {c} {{\n/// `{}`.\npub kind: {kind},",
            Abi::constant(&t.name, "*")
        );
        for p in &payloads {
            let cases = p
                .cases
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", ");
            let mut f = p.field.clone();
            f.docs = format!(
                "{cases}: the payload (set when `kind` is {}).",
                p.cases
                    .iter()
                    .map(|c| format!("`{}`", Abi::constant(&t.name, c)))
                    .collect::<Vec<_>>()
                    .join(" or ")
            );
            for (name, ty) in self.variant_decls(t, &f) {
                o.push_str(&doc(&f.docs, "", &self.notes(&t.name, &f)));
                let _ = writeln!(o, "pub {name}: {ty},");
            }
        }
        o.push_str("}\n");
        let rust = self.rust_type(&t.name);
        let mut none = format!("kind: {},\n", Abi::zero(&t.name));
        for p in &payloads {
            none.push_str(&self.zero(&t.name, &p.field));
        }
        let mut imp = format!(
            "/// The zero answer: no kind, nothing owned.\npub(crate) const NONE: {c} = {c} {{\n{none}}};\n"
        );
        if abi.owns(t) {
            let fields: Vec<CField> = payloads.iter().map(|p| p.field.clone()).collect();
            imp.push_str(&self.free(&fields));
        }
        let _ = write!(o, "\nimpl {c} {{\n{imp}");
        let mut arms = String::new();
        for case in t.cases() {
            let k = Abi::constant(&t.name, &case.name);
            let rc = camel(&case.name);
            match abi.payload_name(case) {
                None => {
                    let _ = writeln!(arms, "{rust}::{rc} => out.kind = {k},");
                }
                Some(name) => {
                    let p = payloads
                        .iter()
                        .find(|p| p.field.wit == name)
                        .expect("a payload per named case");
                    let (lets, values) = self.make(&p.field, "p");
                    let mut sets = String::new();
                    for (field, value) in values {
                        let _ = writeln!(sets, "out.{field} = {value};");
                    }
                    let _ = writeln!(
                        arms,
                        "{rust}::{rc}(p) => {{\n{lets}out.kind = {k};\n{sets}}}"
                    );
                }
            }
        }
        if non_exhaustive(&t.name).is_some() {
            let _ = write!(
                o,
                "\n/// The answer as C; one this libgak does not know is a `storage`\n\
                 /// error (never let a caller act on it).\n\
                 pub(crate) fn from_rust(x: {rust}) -> Result<{c}, Error> {{\n\
                 let mut out = {c}::NONE;\nmatch x {{\n{arms}\
                 other => {{\nreturn Err(Error::storage(format!(\"libgak does not know the {} {{other:?}}\")));\n}}\n}}\nOk(out)\n}}\n}}\n",
                t.name
            );
        } else {
            let _ = write!(
                o,
                "}}\n\nimpl From<{rust}> for {c} {{\nfn from(x: {rust}) -> Self {{\n\
                 let mut out = {c}::NONE;\nmatch x {{\n{arms}}}\nout\n}}\n}}\n"
            );
        }
        Ok(o)
    }

    fn variant_decls(&self, t: &Named, f: &CField) -> Vec<(String, String)> {
        let mine: Vec<&str> = [f.has.as_deref(), Some(f.name.as_str()), f.len.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        self.abi
            .layout_of(t)
            .into_iter()
            .filter(|(n, _)| mine.contains(&n.as_str()))
            .collect()
    }

    /// The exported `_clear` function of an answer that owns memory.
    fn clear(&mut self, t: &Named) -> String {
        if !self.abi.is_output(&t.name) || !self.abi.owns(t) {
            return String::new();
        }
        self.uses.insert("clearing");
        let c = Abi::c_name(&t.name);
        let what = t.name.replace('-', " ");
        format!(
            "\n/// Free what libgak put into the {what} `x`, and zero it (NULL, or a\n\
             /// struct cleared before, is harmless).\n///\n/// # Safety\n\
             /// `x` is NULL or a `{c}` libgak filled and nobody cleared since.\n\
             #[unsafe(no_mangle)]\npub unsafe extern \"C\" fn {c}_clear(x: *mut {c}) {{\n\
             // SAFETY: made by libgak, per the caller's promise.\n\
             clearing(x, |x| unsafe {{ x.free() }});\n}}\n"
        )
    }
}

/// The weighing of a list of `record`s: `step_defs`.
pub fn plural(record: &str) -> String {
    format!("{}s", snake(record))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::records;
    use crate::Contract;
    use crate::emit::cabi::Abi;
    use crate::model::{Field, Kind, Ty};

    fn contract() -> Contract {
        Contract::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit")).expect("wit/")
    }

    /// A field the WIT adds to an answer reaches libgak's struct, its
    /// conversion, its `free` and the layout fingerprint.
    #[test]
    fn a_field_the_wit_adds_reaches_the_struct_and_the_layout() {
        let before = Abi::new(&contract()).expect("abi").layout();
        let mut c = contract();
        let task = c.types.iter_mut().find(|t| t.name == "task").expect("task");
        let Kind::Record(fields) = &mut task.kind else {
            panic!("task is a record")
        };
        fields.push(Field {
            name: "note".into(),
            ty: Ty::Option(Box::new(Ty::String)),
            docs: String::new(),
        });
        let abi = Abi::new(&c).expect("abi");
        let text = records(&abi).expect("records");
        for want in [
            "pub note: gak_str,",
            "note: gak_str::owned_opt(x.note),",
            "self.note.free();",
            "note: gak_str::NONE,",
        ] {
            assert!(text.contains(want), "no {want:?}");
        }
        assert_ne!(abi.layout(), before, "the layout fingerprint did not move");
    }

    /// Every enum and kind numbers 0 as none and its cases from 1.
    #[test]
    fn one_numbering_for_every_enum() {
        let c = contract();
        let abi = Abi::new(&c).expect("abi");
        let text = records(&abi).expect("records");
        for (name, n) in [
            ("GAK_RETRY_NONE: gak_retry_safety", 0),
            ("GAK_RETRY_SAFE: gak_retry_safety", 1),
            ("GAK_TASK_ANY: gak_task_state", 0),
            ("GAK_TASK_OPEN: gak_task_state", 1),
            ("GAK_ACQUIRED_GRANTED: gak_acquired_kind", 1),
        ] {
            assert!(text.contains(&format!("pub const {name} = {n};")), "{name}");
        }
    }
}
