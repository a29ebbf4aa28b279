//! The conversions between the rules' types (`gak-rules`) and the types a
//! side's WIT bindings generate, field by field and case by case: the
//! component's (`wit-bindgen`) and the host's (`wasmtime::component::
//! bindgen!`). `X_in` converts what enters the component, `X_out` what
//! leaves it; a side gets exactly the conversions its calls need, so none
//! is dead code.
//!
//! On the host, what enters the component is borrowed from the caller (the
//! typed API takes references); everything else moves.
use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::{ident, is_copy, non_exhaustive, payload, type_name};
use crate::model::{Kind, Named, Ty};
use crate::names::{camel, snake};
use crate::{Contract, banner};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Dir {
    /// Into the component: an export's parameters, an import's answers.
    In,
    /// Out of the component: an export's answers, an import's parameters.
    Out,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Guest,
    Host,
}

pub fn guest(c: &Contract) -> Result<String, String> {
    let mut roots = Vec::new();
    for i in &c.interfaces {
        for f in &i.functions {
            let (params, answer) = if i.export {
                (Dir::In, Dir::Out)
            } else {
                (Dir::Out, Dir::In)
            };
            roots.extend(f.params.iter().map(|p| (p.ty.clone(), params)));
            roots.extend(f.result.iter().map(|r| (r.clone(), answer)));
        }
    }
    let head = "//! Field-by-field conversions between the component's WIT bindings and\n\
                //! the rules' types: `X_in` for what enters the component (an export's\n\
                //! parameters, the store's answers), `X_out` for what leaves it.\n";
    Gen {
        c,
        side: Side::Guest,
    }
    .file(head, &roots)
}

pub fn host(c: &Contract) -> Result<String, String> {
    let mut roots = Vec::new();
    for f in c.exported_functions() {
        roots.extend(f.params.iter().map(|p| (p.ty.clone(), Dir::In)));
        roots.extend(f.result.iter().map(|r| (r.clone(), Dir::Out)));
    }
    // The store import's tables name the binding's tables; its other
    // records are read straight into the binding's calls (engine.rs).
    roots.push((Ty::Named("table".into()), Dir::Out));
    let head = "//! Field-by-field conversions between the rules' types (`gak_rules`) and\n\
                //! the host's WIT bindings: `X_in` for what enters the component (an\n\
                //! export's parameters, borrowed from the caller), `X_out` for what\n\
                //! leaves it.\n";
    Gen {
        c,
        side: Side::Host,
    }
    .file(head, &roots)
}

struct Gen<'a> {
    c: &'a Contract,
    side: Side,
}

impl Gen<'_> {
    fn file(&self, head: &str, roots: &[(Ty, Dir)]) -> Result<String, String> {
        let mut needed = BTreeSet::new();
        for (ty, dir) in roots {
            self.walk(ty, *dir, &mut needed);
        }
        let mut body = String::new();
        let mut used = BTreeSet::new();
        for t in &self.c.types {
            for dir in [Dir::In, Dir::Out] {
                if needed.contains(&(t.name.clone(), dir)) {
                    used.insert(t.interface.clone());
                    body.push_str(&self.function(t, dir)?);
                    body.push('\n');
                }
            }
        }
        let mut o = String::new();
        let _ = writeln!(o, "// {}", banner(self.c));
        o.push_str(head);
        let (exports, others): (Vec<_>, Vec<_>) = self
            .c
            .interfaces
            .iter()
            .filter(|i| used.contains(&i.name))
            .partition(|i| i.export);
        let list = |is: &[&crate::model::Interface]| {
            is.iter()
                .map(|i| snake(&i.name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let package = self
            .c
            .package
            .split(':')
            .map(snake)
            .collect::<Vec<_>>()
            .join("::");
        // Where the side's bindgen put the bindings.
        let bindings = match self.side {
            Side::Guest => "crate",
            Side::Host => "crate::bindings",
        };
        if !exports.is_empty() {
            let _ = writeln!(
                o,
                "use {bindings}::exports::{package}::{{{}}};",
                list(&exports)
            );
        }
        if !others.is_empty() {
            let _ = writeln!(o, "use {bindings}::{package}::{{{}}};", list(&others));
        }
        o.push_str("use gak_rules as rules;\n\n");
        o.push_str(&body);
        Ok(o)
    }

    fn walk(&self, ty: &Ty, dir: Dir, needed: &mut BTreeSet<(String, Dir)>) {
        match self.c.resolve(ty) {
            Ty::Named(n) if needed.insert((n.clone(), dir)) => {
                let t = self.c.named(n);
                for f in t.fields() {
                    self.walk(&f.ty, dir, needed);
                }
                for case in t.cases() {
                    if let Some(ty) = &case.ty {
                        self.walk(ty, dir, needed);
                    }
                }
            }
            Ty::List(t) | Ty::Option(t) => self.walk(t, dir, needed),
            Ty::Tuple(ts) => ts.iter().for_each(|t| self.walk(t, dir, needed)),
            Ty::Result(ok, err) => [ok, err]
                .into_iter()
                .flatten()
                .for_each(|t| self.walk(t, dir, needed)),
            _ => {}
        }
    }

    /// Does `dir` convert a rules value into a WIT one?
    fn to_wit(&self, dir: Dir) -> bool {
        matches!(
            (self.side, dir),
            (Side::Guest, Dir::Out) | (Side::Host, Dir::In)
        )
    }

    /// Is the source borrowed (the host's parameters)?
    fn borrowed(&self, dir: Dir) -> bool {
        self.side == Side::Host && dir == Dir::In
    }

    /// The rules' spelling of `t`. The imported interface's records are the
    /// store crossing's, which the rules keep in `buffer`; every other type
    /// is at the crate's root.
    fn rules_ty(&self, t: &Named) -> String {
        let imported = self
            .c
            .interfaces
            .iter()
            .any(|i| i.name == t.interface && !i.export && !i.functions.is_empty());
        if imported && matches!(t.kind, Kind::Record(_)) {
            format!("rules::buffer::{}", type_name(&t.name))
        } else {
            format!("rules::{}", type_name(&t.name))
        }
    }

    fn wit_ty(t: &Named) -> String {
        format!("{}::{}", snake(&t.interface), camel(&t.name))
    }

    fn fn_name(wit: &str, dir: Dir) -> String {
        match dir {
            Dir::In => format!("{}_in", snake(wit)),
            Dir::Out => format!("{}_out", snake(wit)),
        }
    }

    fn function(&self, t: &Named, dir: Dir) -> Result<String, String> {
        let (src, dst) = if self.to_wit(dir) {
            (self.rules_ty(t), Self::wit_ty(t))
        } else {
            (Self::wit_ty(t), self.rules_ty(t))
        };
        let copy = is_copy(self.c, &Ty::Named(t.name.clone()));
        let by_ref = if self.borrowed(dir) && !copy { "&" } else { "" };
        let mut o = String::new();
        let _ = writeln!(
            o,
            "/// WIT `{}.{}`, {} the component.",
            t.interface,
            t.name,
            if dir == Dir::In { "into" } else { "out of" }
        );
        let _ = writeln!(
            o,
            "pub fn {}(x: {by_ref}{src}) -> {dst} {{",
            Self::fn_name(&t.name, dir)
        );
        match &t.kind {
            Kind::Record(fields) => {
                let _ = writeln!(o, "{dst} {{");
                for f in fields {
                    let id = ident(&f.name)?;
                    let _ = writeln!(o, "{id}: {},", self.conv(&f.ty, &format!("x.{id}"), dir)?);
                }
                o.push_str("}\n");
            }
            Kind::Enum(cases) | Kind::Variant(cases) => {
                if self.borrowed(dir) && !copy {
                    return Err(format!(
                        "{}: converting a borrowed variant is not supported yet",
                        t.name
                    ));
                }
                o.push_str("match x {\n");
                for case in cases {
                    let rust = camel(&case.name);
                    let (pattern, value) = match (&case.ty, payload(&t.name, &case.name)) {
                        (None, _) => (String::new(), String::new()),
                        (Some(_), Some(p)) => {
                            let e = if self.to_wit(dir) {
                                p.to_wit.replace("{x}", "p")
                            } else {
                                p.from_wit.replace("{rules}", "rules").replace("{x}", "p")
                            };
                            ("(p)".to_owned(), format!("({e})"))
                        }
                        (Some(ty), None) => {
                            ("(p)".to_owned(), format!("({})", self.conv(ty, "p", dir)?))
                        }
                    };
                    let _ = writeln!(o, "{src}::{rust}{pattern} => {dst}::{rust}{value},");
                }
                if self.to_wit(dir) && non_exhaustive(&t.name).is_some() {
                    // Another crate must match a non_exhaustive enum with a
                    // wildcard; both sides come from the same WIT.
                    o.push_str(
                        "_ => unreachable!(\"a case the WIT does not have: the rules' types and the bindings come from the same WIT\"),\n",
                    );
                }
                o.push_str("}\n");
            }
            Kind::Alias(_) => return Err(format!("alias {} has no conversion", t.name)),
        }
        o.push_str("}\n");
        Ok(o)
    }

    /// The expression converting `e` (a place of type `ty`).
    fn conv(&self, ty: &Ty, e: &str, dir: Dir) -> Result<String, String> {
        let c = self.c;
        let borrowed = self.borrowed(dir);
        if !super::has_named(c, ty) {
            return Ok(if borrowed && !is_copy(c, ty) {
                format!("{e}.clone()")
            } else {
                e.to_owned()
            });
        }
        Ok(match c.resolve(ty) {
            Ty::Named(n) => {
                let by_ref = if borrowed && !is_copy(c, ty) { "&" } else { "" };
                format!("{}({by_ref}{e})", Self::fn_name(n, dir))
            }
            Ty::Option(t) if borrowed && !is_copy(c, t) => {
                format!("{e}.as_ref().map({})", self.func(t, dir)?)
            }
            Ty::Option(t) => format!("{e}.map({})", self.func(t, dir)?),
            Ty::List(t) if borrowed && is_copy(c, t) => {
                format!("{e}.iter().copied().map({}).collect()", self.func(t, dir)?)
            }
            Ty::List(t) if borrowed => format!("{e}.iter().map({}).collect()", self.func(t, dir)?),
            Ty::List(t) => format!("{e}.into_iter().map({}).collect()", self.func(t, dir)?),
            Ty::Tuple(ts) if !borrowed => {
                let (names, parts) = self.tuple(ts, dir)?;
                format!("{{ let ({names}) = {e}; ({parts}) }}")
            }
            other => return Err(format!("no conversion for {other:?} yet")),
        })
    }

    /// A function converting one value of `ty` (an item of a list, the
    /// content of an option).
    fn func(&self, ty: &Ty, dir: Dir) -> Result<String, String> {
        let borrowed = self.borrowed(dir);
        Ok(match self.c.resolve(ty) {
            Ty::Named(n) => Self::fn_name(n, dir),
            Ty::Tuple(ts) if !borrowed => {
                let (names, parts) = self.tuple(ts, dir)?;
                format!("|({names})| ({parts})")
            }
            Ty::List(_) | Ty::Option(_) if !borrowed => {
                let inner = self.conv(ty, "v", dir)?;
                match self.c.resolve(ty) {
                    Ty::List(_) => format!("|v| -> Vec<_> {{ {inner} }}"),
                    _ => format!("|v| {inner}"),
                }
            }
            other => return Err(format!("no conversion for {other:?} yet")),
        })
    }

    /// The names binding a tuple's parts, and their conversions.
    fn tuple(&self, ts: &[Ty], dir: Dir) -> Result<(String, String), String> {
        let names: Vec<String> = (0..ts.len()).map(|i| format!("t{i}")).collect();
        let parts = ts
            .iter()
            .zip(&names)
            .map(|(t, n)| self.conv(t, n, dir))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((names.join(", "), parts.join(", ")))
    }
}
