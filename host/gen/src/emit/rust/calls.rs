//! `host/rust/cli/src/conformance/exports.rs`: the vectors' calls of every
//! exported function, mapped onto the typed API of crate `gak`
//! (`kernel.taskboard().claim(&id, &agent, ttl)`), with a reader per WIT
//! type from the vectors' JSON and a writer per WIT type into it, by the
//! rules of `host/gen/README.md`. The host-level calls (`sink.*`, the 0.1
//! form of `taskboard.list`) are written by hand in `calls.rs`.
use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::json::{HELPERS, PREAMBLE};
use super::{ident, is_copy, non_exhaustive, type_name};
use crate::model::{Function, Kind, Named, Ty};
use crate::names::{camel, snake};
use crate::{Contract, banner};

use crate::emit::vectors::{HOST_LEVEL, arg_name, wrapped};

pub fn exports(c: &Contract) -> Result<String, String> {
    let mut g = Gen {
        c,
        helpers: BTreeSet::new(),
        reads: BTreeSet::new(),
        writes: BTreeSet::new(),
    };
    let functions: Vec<&Function> = c
        .exported_functions()
        .filter(|f| !HOST_LEVEL.contains(&f.call_name().as_str()))
        .collect();
    for host_level in HOST_LEVEL {
        if !c.exported_functions().any(|f| f.call_name() == *host_level) {
            return Err(format!(
                "HOST_LEVEL names {host_level}, which the WIT does not export"
            ));
        }
    }
    let mut dispatch = String::new();
    for f in &functions {
        dispatch.push_str(&g.arm(f)?);
    }
    // Readers and writers, in the WIT's order; each may need more helpers.
    let mut codecs = String::new();
    for t in &c.types {
        if g.reads.contains(&t.name) {
            codecs.push_str(&g.reader(t)?);
            codecs.push('\n');
        }
    }
    for t in &c.types {
        if g.writes.contains(&t.name) {
            codecs.push_str(&g.writer(t)?);
            codecs.push('\n');
        }
    }
    let mut types: Vec<String> = g
        .reads
        .iter()
        .chain(&g.writes)
        .map(|n| type_name(n))
        .collect();
    types.extend(["Error".to_owned(), "Kernel".to_owned()]);
    types.sort();
    types.dedup();

    let mut o = String::new();
    let _ = writeln!(o, "// {}", banner(c));
    o.push_str(
        "//! The vectors' calls of every exported function of the contract, on\n\
         //! the typed API, and the readers and writers of the vectors' JSON per\n\
         //! WIT type (`host/gen/README.md`). The host-level calls are in `calls.rs`.\n",
    );
    let map = if codecs.contains("Map::") || g.helpers.contains("case") {
        "Map, "
    } else {
        ""
    };
    let _ = writeln!(o, "use serde_json::{{{map}Value}};\n");
    let _ = writeln!(o, "use gak::{{{}}};\n", types.join(", "));
    o.push_str(PREAMBLE);
    for (name, text) in HELPERS {
        if g.helpers.contains(name) {
            o.push_str(text);
            o.push_str("\n\n");
        }
    }
    o.push_str(&codecs);
    o.push_str(
        "/// Run the exported function `name` with the vector's `args`; `None`
/// when the contract exports no such function.
pub(super) async fn call(
    kernel: &Kernel,
    name: &str,
    args: &Value,
) -> A<Option<Result<Value, Error>>> {
    Ok(Some(match name {
",
    );
    o.push_str(&dispatch);
    o.push_str("_ => return Ok(None),\n}))\n}\n");
    Ok(o)
}

struct Gen<'a> {
    c: &'a Contract,
    helpers: BTreeSet<&'static str>,
    /// Named types read from JSON / written into it.
    reads: BTreeSet<String>,
    writes: BTreeSet<String>,
}

impl Gen<'_> {
    fn helper(&mut self, name: &'static str) -> &'static str {
        debug_assert!(HELPERS.iter().any(|(h, _)| *h == name), "{name}");
        self.helpers.insert(name);
        name
    }

    fn arm(&mut self, f: &Function) -> Result<String, String> {
        let mut o = format!("{:?} => {{\n", f.call_name());
        let mut pass = Vec::new();
        for p in &f.params {
            let id = ident(&p.name)?;
            if ["kernel", "name", "args"].contains(&id.as_str()) {
                return Err(format!(
                    "{}: a parameter named {id} shadows the dispatcher's",
                    f.call_name()
                ));
            }
            let key = arg_name(&p.name);
            let read = self.read(&p.ty, &format!("field(args, {key:?})"), &format!("{key:?}"))?;
            let _ = writeln!(o, "let {id} = {read}?;");
            pass.push(self.pass(&p.ty, &id));
        }
        let answer = match f.ok() {
            None => "|()| Value::Null".to_owned(),
            Some(ty) => match self.c.resolve(ty) {
                Ty::Option(inner) => {
                    format!("|x| x.map_or(Value::Null, {})", self.write_fn(inner)?)
                }
                _ => self.write_fn(ty)?,
            },
        };
        let _ = writeln!(
            o,
            "kernel.{}().{}({}).await.map({answer})\n}}",
            snake(&f.interface),
            snake(&f.name),
            pass.join(", ")
        );
        Ok(o)
    }

    /// How the typed API takes a value of `ty` held in `var`.
    fn pass(&self, ty: &Ty, var: &str) -> String {
        match self.c.resolve(ty) {
            Ty::Option(inner) => match self.c.resolve(inner) {
                Ty::String | Ty::List(_) => format!("{var}.as_deref()"),
                t if is_copy(self.c, t) => var.to_owned(),
                _ => format!("{var}.as_ref()"),
            },
            t if is_copy(self.c, t) => var.to_owned(),
            _ => format!("&{var}"),
        }
    }

    /// The expression reading a `ty` from `v` (an `Option<&Value>`) at
    /// path `at` (a `&str`).
    fn read(&mut self, ty: &Ty, v: &str, at: &str) -> Result<String, String> {
        Ok(match self.c.resolve(ty) {
            Ty::List(inner) | Ty::Option(inner) => {
                let helper = match self.c.resolve(ty) {
                    Ty::List(_) if *self.c.resolve(inner) == Ty::U8 || self.is_pairs(inner) => {
                        return Ok(format!("{}({v}, {at})", self.read_fn(ty)?));
                    }
                    Ty::List(_) => self.helper("read_list"),
                    _ => self.helper("read_option"),
                };
                format!("{helper}({v}, {at}, {})", self.read_fn(inner)?)
            }
            _ => format!("{}({v}, {at})", self.read_fn(ty)?),
        })
    }

    /// A function reading one `ty`.
    fn read_fn(&mut self, ty: &Ty) -> Result<String, String> {
        Ok(match self.c.resolve(ty) {
            Ty::String => self.helper("read_string").to_owned(),
            Ty::U64 => self.helper("read_u64").to_owned(),
            Ty::U32 => {
                self.helper("read_u64");
                self.helper("read_u32").to_owned()
            }
            Ty::S32 => self.helper("read_s32").to_owned(),
            Ty::U8 => {
                self.helper("read_u64");
                self.helper("read_u8").to_owned()
            }
            Ty::Bool => self.helper("read_bool").to_owned(),
            Ty::List(inner) if *self.c.resolve(inner) == Ty::U8 => {
                self.helper("read_string");
                self.helper("read_bytes").to_owned()
            }
            Ty::List(inner) if self.is_pairs(inner) => self.helper("read_pairs").to_owned(),
            Ty::Named(n) => {
                let t = self.c.named(n);
                if let Kind::Variant(_) = t.kind {
                    return Err(format!(
                        "{n}: reading a variant from JSON is not supported yet"
                    ));
                }
                self.reads.insert(n.clone());
                for f in t.fields() {
                    self.walk_reads(&f.ty);
                }
                format!("read_{}", snake(n))
            }
            other @ (Ty::List(_) | Ty::Option(_)) => {
                let other = other.clone();
                format!(
                    "|v: Option<&Value>, at: &str| {}",
                    self.read(&other, "v", "at")?
                )
            }
            other => return Err(format!("no JSON reader for {other:?} yet")),
        })
    }

    /// Note the named types (and helpers) a record's field needs.
    fn walk_reads(&mut self, ty: &Ty) {
        // Called for their side effects; errors surface when the field is
        // generated.
        let _ = self.read(ty, "v", "at");
    }

    fn is_pairs(&self, ty: &Ty) -> bool {
        match self.c.resolve(ty) {
            Ty::Tuple(ts) => ts.len() == 2 && ts.iter().all(|t| *self.c.resolve(t) == Ty::String),
            _ => false,
        }
    }

    fn reader(&mut self, t: &Named) -> Result<String, String> {
        let rust = type_name(&t.name);
        let f = format!("read_{}", snake(&t.name));
        let mut o = String::new();
        match &t.kind {
            Kind::Record(fields) => {
                let _ = writeln!(
                    o,
                    "pub(super) fn {f}(v: Option<&Value>, at: &str) -> A<{rust}> {{\n\
                     let v = {}(v, at)?;\nOk({rust} {{",
                    self.helper("read_record")
                );
                for field in fields {
                    let id = ident(&field.name)?;
                    let read = self.read(
                        &field.ty,
                        &format!("field(v, {:?})", field.name),
                        &format!("&format!(\"{{at}}.{}\")", field.name),
                    )?;
                    let _ = writeln!(o, "{id}: {read}?,");
                }
                o.push_str("})\n}\n");
            }
            Kind::Enum(cases) => {
                let _ = writeln!(
                    o,
                    "/// Absent is the first case.\n\
                     pub(super) fn {f}(v: Option<&Value>, at: &str) -> A<{rust}> {{\n\
                     Ok(match {}(v, at)? {{",
                    self.helper("read_case")
                );
                for (i, case) in cases.iter().enumerate() {
                    let absent = if i == 0 { "None | " } else { "" };
                    let _ = writeln!(
                        o,
                        "{absent}Some({:?}) => {rust}::{},",
                        case.name,
                        camel(&case.name)
                    );
                }
                let _ = writeln!(
                    o,
                    "Some(other) => {{\nreturn Err(Arg::Invalid(format!(\"{{at}}: unknown {} {{other:?}}\")));\n}}\n}})\n}}",
                    t.name
                );
            }
            _ => return Err(format!("{}: no JSON reader for it yet", t.name)),
        }
        Ok(o)
    }

    /// A function writing one `ty` into JSON.
    fn write_fn(&mut self, ty: &Ty) -> Result<String, String> {
        Ok(match self.c.resolve(ty) {
            Ty::String | Ty::U8 | Ty::U32 | Ty::S32 | Ty::U64 | Ty::Bool => {
                "Value::from".to_owned()
            }
            Ty::Named(n) => {
                let n = n.clone();
                if self.writes.insert(n.clone()) {
                    let t = self.c.named(&n);
                    for f in t.fields() {
                        self.write_fn(&f.ty)?;
                    }
                    for case in t.cases() {
                        if let Some(ty) = &case.ty {
                            self.write_fn(ty)?;
                        }
                    }
                }
                format!("write_{}", snake(&n))
            }
            other => {
                let other = other.clone();
                format!("|x| {}", self.write(&other, "x")?)
            }
        })
    }

    /// The expression writing `e` of type `ty` (an option: none is null).
    fn write(&mut self, ty: &Ty, e: &str) -> Result<String, String> {
        Ok(match self.c.resolve(ty) {
            Ty::List(inner) if *self.c.resolve(inner) == Ty::U8 => {
                format!("{}(&{e})", self.helper("text"))
            }
            Ty::List(inner) if self.is_pairs(inner) => format!("{}({e})", self.helper("pairs")),
            Ty::List(inner) if !super::has_named(self.c, inner) => {
                if matches!(
                    self.c.resolve(inner),
                    Ty::List(_) | Ty::Option(_) | Ty::Tuple(_)
                ) {
                    return Err(format!("no JSON writer for a list of {inner:?} yet"));
                }
                format!("Value::from({e})")
            }
            Ty::List(inner) => {
                let inner = inner.clone();
                format!(
                    "Value::Array({e}.into_iter().map({}).collect())",
                    self.write_fn(&inner)?
                )
            }
            Ty::Option(inner) => {
                let inner = inner.clone();
                format!("{e}.map_or(Value::Null, {})", self.write_fn(&inner)?)
            }
            other => {
                let other = other.clone();
                format!("{}({e})", self.write_fn(&other)?)
            }
        })
    }

    fn writer(&mut self, t: &Named) -> Result<String, String> {
        let rust = type_name(&t.name);
        let f = format!("write_{}", snake(&t.name));
        let mut o = format!("pub(super) fn {f}(x: {rust}) -> Value {{\n");
        match &t.kind {
            Kind::Record(fields) => {
                o.push_str("let mut o = Map::new();\n");
                for field in fields {
                    let id = ident(&field.name)?;
                    match self.c.resolve(&field.ty) {
                        // A none option is left out.
                        Ty::Option(inner) => {
                            let inner = inner.clone();
                            let value = self.write(&inner, "v")?;
                            let _ = writeln!(
                                o,
                                "if let Some(v) = x.{id} {{\no.insert({:?}.into(), {value});\n}}",
                                field.name
                            );
                        }
                        _ => {
                            let value = self.write(&field.ty, &format!("x.{id}"))?;
                            let _ = writeln!(o, "o.insert({:?}.into(), {value});", field.name);
                        }
                    }
                }
                o.push_str("Value::Object(o)\n");
            }
            Kind::Enum(_) => o.push_str("Value::from(x.name())\n"),
            Kind::Variant(cases) => {
                let case = self.helper("case");
                o.push_str("match x {\n");
                for c in cases {
                    let rust_case = camel(&c.name);
                    match &c.ty {
                        None => {
                            let _ = writeln!(
                                o,
                                "{rust}::{rust_case} => {case}({:?}, Value::Object(Map::new())),",
                                c.name
                            );
                        }
                        Some(ty) => {
                            let mut value = self.write(ty, "p")?;
                            if let Some(key) = wrapped(&t.name, &c.name) {
                                value = format!(
                                    "Value::Object(Map::from_iter([({key:?}.to_owned(), {value})]))"
                                );
                            }
                            let _ = writeln!(
                                o,
                                "{rust}::{rust_case}(p) => {case}({:?}, {value}),",
                                c.name
                            );
                        }
                    }
                }
                if non_exhaustive(&t.name).is_some() {
                    let _ = writeln!(
                        o,
                        "other => {case}(\"unknown\", Value::from(format!(\"{{other:?}}\"))),"
                    );
                }
                o.push_str("}\n");
            }
            Kind::Alias(_) => return Err(format!("alias {} has no writer", t.name)),
        }
        o.push_str("}\n");
        Ok(o)
    }
}
