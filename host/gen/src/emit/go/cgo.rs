//! `abi_gen.go`: every type of the contract to and from libgak's C struct
//! (laid out by `emit::cabi`), the enums' numbers, and the weighing of the
//! arguments the package copies into C memory (HOSTS.md rule 16).
//!
//! - `goX(c *C.gak_x) X` copies an answer into Go values (a variant's:
//!   `(X, error)`, an unknown kind being a `*StorageError`);
//! - `cX(x X) (C.gak_x, error)` borrows an argument without lists for one
//!   call (its strings point at the Go strings' bytes: passed by value);
//! - `(a *arena) x(x *X) (*C.gak_x, error)` copies one with lists into C
//!   memory (`a.xs(list)` a list of them), after `(s *scale) x(x)` weighed
//!   it from its lengths;
//! - `xNumber` / `xName`: an enum's name to its number and back (`""` is 0,
//!   none).
use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::{Api, exported, head, unexported};
use crate::emit::cabi::{Abi, CField, Shape};
use crate::model::{Kind, Named, Ty};
use crate::names::host_kebab;

pub(super) fn emit(api: &Api) -> Result<String, String> {
    let mut g = Gen {
        api,
        imports: BTreeSet::new(),
    };
    let mut body = String::new();
    for t in &api.abi.types {
        match &t.kind {
            Kind::Enum(_) => body.push_str(&g.enumeration(t)),
            Kind::Record(_) => body.push_str(&g.record(t)?),
            Kind::Variant(_) => body.push_str(&g.variant(t)?),
            Kind::Alias(_) => {}
        }
    }
    let mut o = head(api.c);
    o.push_str(
        "\n// The contract's types to and from libgak's C structs (gak.h), the enums'\n\
         // numbers, and the weighing of what this package copies into C memory.\n\
         // The primitives (str, goStr, the arena, scale) are cgo.go's and weigh.go's.\n\n\
         package gak\n\n/*\n#include \"gak.h\"\n*/\nimport \"C\"\n",
    );
    if !g.imports.is_empty() {
        o.push_str("\nimport (\n");
        for i in &g.imports {
            let _ = writeln!(o, "\t{i:?}");
        }
        o.push_str(")\n");
    }
    o.push_str(&body);
    Ok(o)
}

struct Gen<'a> {
    api: &'a Api<'a>,
    imports: BTreeSet<&'static str>,
}

/// `taskState` (the stem of `taskStateNumber`, `taskStateName`).
fn stem(wit: &str) -> String {
    unexported(host_kebab(wit))
}

/// `C.gak_task`.
fn ctype(wit: &str) -> String {
    format!("C.{}", Abi::c_name(wit))
}

fn cscalar(ty: &Ty) -> &'static str {
    match ty {
        Ty::Bool => "C.bool",
        Ty::U8 => "C.uint8_t",
        Ty::U32 => "C.uint32_t",
        Ty::S32 => "C.int32_t",
        _ => "C.uint64_t",
    }
}

fn goscalar(ty: &Ty) -> &'static str {
    match ty {
        Ty::Bool => "bool",
        Ty::U8 => "uint8",
        Ty::U32 => "uint32",
        Ty::S32 => "int32",
        _ => "uint64",
    }
}

impl Gen<'_> {
    fn enumeration(&mut self, t: &Named) -> String {
        let api = self.api;
        let go = api.type_name(&t.name);
        let c = ctype(&t.name);
        let s = stem(&t.name);
        let mut o = String::new();
        if api.abi.is_input(&t.name) {
            let _ = write!(
                o,
                "\n// {s}Number is x's number in libgak (\"\" is {zero}); an unknown\n\
                 // {wit} is refused with CodeInvalidInput before anything is sent.\n\
                 func {s}Number(x {go}) ({c}, error) {{\n\tswitch x {{\n\tcase \"\":\n\t\treturn C.{zero}, nil\n",
                zero = Abi::zero(&t.name),
                wit = t.name
            );
            for case in t.cases() {
                let _ = write!(
                    o,
                    "\tcase {}:\n\t\treturn C.{}, nil\n",
                    api.case_const(&t.name, &case.name),
                    Abi::constant(&t.name, &case.name)
                );
            }
            let _ = write!(
                o,
                "\t}}\n\treturn 0, refused(CodeInvalidInput, \"unknown {} \"+quote(string(x)))\n}}\n",
                t.name
            );
        }
        if api.abi.is_output(&t.name) {
            let _ = write!(
                o,
                "\n// {s}Name is the {wit} libgak numbered n (\"\" for none, \"unknown\" for a\n\
                 // number this package does not know).\n\
                 func {s}Name(n {c}) {go} {{\n\tswitch n {{\n\tcase C.{zero}:\n\t\treturn \"\"\n",
                zero = Abi::zero(&t.name),
                wit = t.name
            );
            for case in t.cases() {
                let _ = write!(
                    o,
                    "\tcase C.{}:\n\t\treturn {}\n",
                    Abi::constant(&t.name, &case.name),
                    api.case_const(&t.name, &case.name)
                );
            }
            let _ = write!(o, "\t}}\n\treturn {go}(\"unknown\")\n}}\n");
        }
        o
    }

    fn record(&mut self, t: &Named) -> Result<String, String> {
        let api = self.api;
        let abi = api.abi;
        let fields = abi.fields(t)?;
        let mut o = String::new();
        if abi.is_output(&t.name) {
            o.push_str(&self.answer(t, &fields)?);
        }
        if abi.is_input(&t.name) {
            if abi.has_lists(t) || abi.listed(&t.name) {
                o.push_str(&self.fill(t, &fields)?);
                o.push_str(&self.weigh(t, &fields));
            } else {
                o.push_str(&self.borrow(t, &fields)?);
            }
        }
        Ok(o)
    }

    /// `goX(c *C.gak_x) X`.
    fn answer(&mut self, t: &Named, fields: &[CField]) -> Result<String, String> {
        let api = self.api;
        let go = api.type_name(&t.name);
        let mut body = String::new();
        for f in fields {
            let name = exported(&f.wit);
            body.push_str(&self.go_value(f, &format!("x.{name}"), "c")?);
        }
        Ok(format!(
            "\n// go{go} copies the {wit} libgak filled into Go values.\n\
             func go{go}(c *{ct}) {go} {{\n\tvar x {go}\n{body}\treturn x\n}}\n",
            wit = t.name,
            ct = ctype(&t.name)
        ))
    }

    /// Statements setting `dst` from the C field(s) of `f` in `*c` (`c` a
    /// pointer to the struct).
    fn go_value(&mut self, f: &CField, dst: &str, c: &str) -> Result<String, String> {
        let src = format!("{c}.{}", f.name);
        let len = f.len.as_deref().unwrap_or("");
        Ok(match &f.shape {
            Shape::Str { .. } => format!("\t{dst} = goStr({src})\n"),
            Shape::Bytes { optional: false } => format!("\t{dst} = nonNil(goBytes({src}))\n"),
            Shape::Bytes { optional: true } => format!("\t{dst} = goBytes({src})\n"),
            Shape::Scalar {
                ty,
                optional: false,
            } => {
                format!("\t{dst} = {}({src})\n", goscalar(ty))
            }
            Shape::Scalar { ty, optional: true } => format!(
                "\tif {c}.{has} {{\n\t\tv := {t}({src})\n\t\t{dst} = &v\n\t}}\n",
                has = f.has.as_deref().unwrap_or(""),
                t = goscalar(ty)
            ),
            Shape::Enum { name, .. } => format!("\t{dst} = {}Name({src})\n", stem(name)),
            Shape::Strings => format!("\t{dst} = goStrs({src}, {c}.{len})\n"),
            Shape::Pairs => format!("\t{dst} = goPairs({src}, {c}.{len})\n"),
            Shape::Records(r) => {
                self.imports.insert("unsafe");
                let go = self.api.type_name(r);
                format!(
                    "\t{dst} = make([]{go}, int({c}.{len}))\n\
                     \tif {c}.{len} > 0 {{\n\t\titems := unsafe.Slice({src}, int({c}.{len}))\n\
                     \t\tfor i := range items {{\n\t\t\t{dst}[i] = go{go}(&items[i])\n\t\t}}\n\t}}\n"
                )
            }
            Shape::Record(r) => format!("\t{dst} = go{}(&{src})\n", self.api.type_name(r)),
        })
    }

    /// `cX(x X) (C.gak_x, error)`: borrowed for one call, by value.
    fn borrow(&mut self, t: &Named, fields: &[CField]) -> Result<String, String> {
        let api = self.api;
        let go = api.type_name(&t.name);
        let ct = ctype(&t.name);
        let mut body = String::new();
        for f in fields {
            let x = format!("x.{}", exported(&f.wit));
            let dst = format!("c.{}", f.name);
            match &f.shape {
                Shape::Str { .. } => {
                    let _ = writeln!(body, "\t{dst} = str({x})");
                }
                Shape::Bytes { optional: false } => {
                    let _ = writeln!(body, "\t{dst} = bytes({x})");
                }
                Shape::Bytes { optional: true } => {
                    let _ = writeln!(body, "\t{dst} = optBytes({x})");
                }
                Shape::Scalar {
                    ty,
                    optional: false,
                } => {
                    let _ = writeln!(body, "\t{dst} = {}({x})", cscalar(ty));
                }
                Shape::Scalar { ty, optional: true } => {
                    let _ = write!(
                        body,
                        "\tif {x} != nil {{\n\t\tc.{} = true\n\t\t{dst} = {}(*{x})\n\t}}\n",
                        f.has.as_deref().unwrap_or(""),
                        cscalar(ty)
                    );
                }
                Shape::Enum { name, .. } => {
                    let _ = write!(
                        body,
                        "\tif {dst}, err = {}Number({x}); err != nil {{\n\t\treturn c, err\n\t}}\n",
                        stem(name)
                    );
                }
                Shape::Record(r) => {
                    let _ = write!(
                        body,
                        "\tif {dst}, err = c{}({x}); err != nil {{\n\t\treturn c, err\n\t}}\n",
                        api.type_name(r)
                    );
                }
                other => return Err(format!("{}: {other:?} cannot be borrowed", t.name)),
            }
        }
        let err = if body.contains("err =") {
            "\tvar err error\n"
        } else {
            ""
        };
        Ok(format!(
            "\n// c{go} borrows the {wit} x for one call: passed by value, its strings point\n\
             // at x's own bytes, which libgak reads only during the call.\n\
             func c{go}(x {go}) ({ct}, error) {{\n\tvar c {ct}\n{err}{body}\treturn c, nil\n}}\n",
            wit = t.name
        ))
    }

    /// `(a *arena) fillX(c *C.gak_x, x *X) error`, `(a *arena) x(x *X)`, and
    /// the list form where a list of them is an argument.
    fn fill(&mut self, t: &Named, fields: &[CField]) -> Result<String, String> {
        let api = self.api;
        self.imports.insert("unsafe");
        let go = api.type_name(&t.name);
        let ct = ctype(&t.name);
        let mut body = String::new();
        for f in fields {
            let x = format!("x.{}", exported(&f.wit));
            let dst = format!("c.{}", f.name);
            let len = f.len.as_deref().unwrap_or("");
            match &f.shape {
                Shape::Str { .. } => {
                    let _ = writeln!(body, "\t{dst} = a.str({x})");
                }
                Shape::Bytes { optional: false } => {
                    let _ = writeln!(body, "\t{dst} = a.bytes({x})");
                }
                Shape::Bytes { optional: true } => {
                    let _ = writeln!(body, "\t{dst} = a.optBytes({x})");
                }
                Shape::Scalar {
                    ty,
                    optional: false,
                } => {
                    let _ = writeln!(body, "\t{dst} = {}({x})", cscalar(ty));
                }
                Shape::Scalar { ty, optional: true } => {
                    let _ = write!(
                        body,
                        "\tif {x} != nil {{\n\t\tc.{} = true\n\t\t{dst} = {}(*{x})\n\t}}\n",
                        f.has.as_deref().unwrap_or(""),
                        cscalar(ty)
                    );
                }
                Shape::Enum { name, .. } => {
                    let _ = write!(
                        body,
                        "\tif {dst}, err = {}Number({x}); err != nil {{\n\t\treturn err\n\t}}\n",
                        stem(name)
                    );
                }
                Shape::Strings => {
                    let _ = writeln!(body, "\t{dst}, c.{len} = a.strs({x})");
                }
                Shape::Pairs => {
                    let _ = writeln!(body, "\t{dst}, c.{len} = a.pairs({x})");
                }
                Shape::Records(r) => {
                    let _ = write!(
                        body,
                        "\tif {dst}, c.{len}, err = a.{}({x}); err != nil {{\n\t\treturn err\n\t}}\n",
                        plural(api, r)
                    );
                }
                Shape::Record(r) => {
                    let _ = write!(
                        body,
                        "\tif err = a.fill{}(&{dst}, &{x}); err != nil {{\n\t\treturn err\n\t}}\n",
                        api.type_name(r)
                    );
                }
            }
        }
        let err = if body.contains("err =") {
            "\tvar err error\n"
        } else {
            ""
        };
        let single = unexported(host_kebab(&t.name));
        let mut o = format!(
            "\n// fill{go} copies x into c, in the arena's C memory.\n\
             func (a *arena) fill{go}(c *{ct}, x *{go}) error {{\n{err}{body}\treturn nil\n}}\n\n\
             // {single} copies x into the arena's C memory.\n\
             func (a *arena) {single}(x *{go}) (*{ct}, error) {{\n\
             \tc := (*{ct})(a.alloc(int(unsafe.Sizeof({ct}{{}}))))\n\
             \treturn c, a.fill{go}(c, x)\n}}\n"
        );
        let p = plural(api, &t.name);
        if !api.abi.listed(&t.name) {
            return Ok(o);
        }
        let _ = write!(
            o,
            "\n// {p} copies a list of {wit} into the arena's C memory.\n\
             func (a *arena) {p}(list []{go}) (*{ct}, C.size_t, error) {{\n\
             \tif len(list) == 0 {{\n\t\treturn nil, 0, nil\n\t}}\n\
             \tp := (*{ct})(a.alloc(len(list) * int(unsafe.Sizeof({ct}{{}}))))\n\
             \titems := unsafe.Slice(p, len(list))\n\
             \tfor i := range list {{\n\t\tif err := a.fill{go}(&items[i], &list[i]); err != nil {{\n\t\t\treturn nil, 0, err\n\t\t}}\n\t}}\n\
             \treturn p, C.size_t(len(list)), nil\n}}\n",
            wit = t.name
        );
        Ok(o)
    }

    /// `(s *scale) x(x *X) error` and `(s *scale) xs(list []X, what)`.
    fn weigh(&mut self, t: &Named, fields: &[CField]) -> String {
        let api = self.api;
        let go = api.type_name(&t.name);
        let mut body = String::new();
        let mut check = |call: String| {
            let _ = write!(
                body,
                "\tif err := {call}; err != nil {{\n\t\treturn err\n\t}}\n"
            );
        };
        for f in fields {
            let x = format!("x.{}", exported(&f.wit));
            let what = format!(
                "{:?}",
                format!("{}.{}", crate::names::snake(&t.name), f.name)
            );
            match &f.shape {
                Shape::Str { .. } | Shape::Bytes { .. } => {
                    check(format!("s.value(len({x}), {what})"))
                }
                Shape::Strings => check(format!("s.strs({x}, {what})")),
                Shape::Pairs => check(format!("s.pairs({x}, {what})")),
                Shape::Records(r) => check(format!("s.{}({x}, {what})", plural(api, r))),
                Shape::Record(r) if api.abi.has_lists(api.c.named(r)) => {
                    check(format!("s.{}(&{x})", unexported(host_kebab(r))));
                }
                _ => {}
            }
        }
        let single = unexported(host_kebab(&t.name));
        let p = plural(api, &t.name);
        let one = format!(
            "\n// {single} weighs the {wit} x from its lengths, before it is copied.\n\
             func (s *scale) {single}(x *{go}) error {{\n{body}\treturn nil\n}}\n",
            wit = t.name
        );
        if !api.abi.listed(&t.name) {
            return one;
        }
        one + &format!(
            "\n// {p} weighs a list of {wit}: its count, then each item.\n\
             func (s *scale) {p}(list []{go}, what string) error {{\n\
             \tif err := s.count(len(list), what); err != nil {{\n\t\treturn err\n\t}}\n\
             \tfor i := range list {{\n\t\tif err := s.{single}(&list[i]); err != nil {{\n\t\t\treturn err\n\t\t}}\n\t}}\n\
             \treturn nil\n}}\n",
            wit = t.name
        )
    }

    /// `goX(c *C.gak_x) (X, error)` of a variant.
    fn variant(&mut self, t: &Named) -> Result<String, String> {
        let api = self.api;
        let abi = api.abi;
        let go = api.type_name(&t.name);
        let ct = ctype(&t.name);
        let payloads = abi.payloads(t)?;
        let mut arms = String::new();
        for case in t.cases() {
            let _ = writeln!(arms, "\tcase C.{}:", Abi::constant(&t.name, &case.name));
            let mut set = String::new();
            match api.flag(&t.name) {
                Some(f) if f == case.name => {
                    let _ = writeln!(set, "\t\tx.{} = true", exported(f));
                }
                Some(_) => {}
                None => {
                    let _ = writeln!(set, "\t\tx.Kind = {}", api.case_const(&t.name, &case.name));
                }
            }
            if let Some(name) = abi.payload_name(case) {
                let p = payloads
                    .iter()
                    .find(|p| p.field.wit == name)
                    .expect("a payload per named case");
                let value = self.go_value(&p.field, &format!("x.{}", exported(&name)), "c")?;
                for line in value.lines() {
                    let _ = writeln!(set, "\t{line}");
                }
            }
            arms.push_str(&set);
            arms.push_str("\t\treturn x, nil\n");
        }
        self.imports.insert("strconv");
        Ok(format!(
            "\n// go{go} copies the {wit} libgak filled into Go values; a kind this\n\
             // package does not know is a *StorageError (never act on it).\n\
             func go{go}(c *{ct}) ({go}, error) {{\n\tvar x {go}\n\tswitch c.kind {{\n{arms}\t}}\n\
             \treturn {go}{{}}, &StorageError{{Message: \"libgak's {wit} answer is of kind \" + strconv.FormatUint(uint64(c.kind), 10) + \", which this package does not know\"}}\n}}\n",
            wit = t.name
        ))
    }
}

/// `stepDefs`, `taskSeeds`.
fn plural(_api: &Api, wit: &str) -> String {
    format!("{}s", unexported(host_kebab(wit)))
}
