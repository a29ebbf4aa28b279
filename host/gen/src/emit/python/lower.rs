//! Lowering, written out per type: Python that writes a value of a WIT
//! type as wasmtime's C API values (`vals.rs`) into an arena — a record's
//! entries (names and values) with ONE `struct` pack, a text handed over in
//! place when CPython holds it as compact ASCII. What the lowering does not
//! take exactly (a value of another Python type, an integer out of range,
//! text that is not Unicode, a text longer than `MAX_VALUE`) makes it
//! answer `None`, and the caller lowers with the codecs of `gak._abi`,
//! which raise the error.
//!
//! `_lower.py` holds every export's arguments (`LOWER`); `store_abi.rs`
//! uses the same code for the store import's answers.
use std::fmt::Write as _;

use super::vals::{
    Body, COMPACT_ASCII, Defs, STR_DATA, STR_STATE, Shape, VAL, elements, kind, shape, ty_ident,
    upper, val_packer,
};
use super::{Api, head, ident, lit, section};
use crate::model::{Function, Ty};

/// The definitions a generated module's lowerings need, and what the
/// lowering being written takes.
pub(super) struct Lowerer<'a, 'b> {
    pub api: &'b Api<'a>,
    pub defs: Defs,
    /// Texts longer than `MAX_VALUE` are declined (an export's arguments).
    pub bound: bool,
    /// How many texts the lowering being written takes.
    pub texts: usize,
    /// Whether it takes a list or bytes (sizes it does not bound).
    pub lists: bool,
}

impl<'a, 'b> Lowerer<'a, 'b> {
    pub fn new(api: &'b Api<'a>, bound: bool) -> Self {
        Lowerer {
            api,
            defs: Defs::default(),
            bound,
            texts: 0,
            lists: false,
        }
    }

    /// Statements into `b` that check `var` and write what its `Val`
    /// points to; the `struct` format (32 bytes) and the values of the
    /// `Val` itself, for the caller's pack.
    pub fn val(
        &mut self,
        b: &mut Body,
        ind: usize,
        ty: &Ty,
        var: &str,
        hint: &str,
    ) -> Result<(String, Vec<String>), String> {
        let c = self.api.c;
        Ok(match shape(c, ty) {
            Shape::String => {
                let (n, p) = self.text(b, ind, var, hint);
                ("B7xQQ8x".into(), vec![kind("STRING").to_string(), n, p])
            }
            Shape::Bool => {
                b.line(ind, format!("if {var} is not True and {var} is not False:"));
                b.line(ind + 1, "return None");
                ("B7x?23x".into(), vec![kind("BOOL").to_string(), var.into()])
            }
            Shape::U8 | Shape::U32 | Shape::S32 | Shape::U64 => {
                let (low, high, k, fmt) = match shape(c, ty) {
                    Shape::U8 => (0, 1i128 << 8, "U8", "B7xB23x"),
                    Shape::U32 => (0, 1i128 << 32, "U32", "B7xI20x"),
                    Shape::S32 => (-(1i128 << 31), 1i128 << 31, "S32", "B7xi20x"),
                    _ => (0, 1i128 << 64, "U64", "B7xQ16x"),
                };
                b.line(
                    ind,
                    format!("if type({var}) is not int or not {low} <= {var} < {high}:"),
                );
                b.line(ind + 1, "return None");
                (fmt.into(), vec![kind(k).to_string(), var.into()])
            }
            Shape::Enum(t) => {
                let table = format!("_{}_NAMES", upper(&t.name));
                if !self.defs.has(&table) {
                    let cases: Vec<String> = t.cases().iter().map(|k| lit(&k.name)).collect();
                    self.defs.add(
                        &table,
                        format!(
                            "#: ``{}``'s case names as values point to them (length, address), in\n\
                             #: memory that lives as long as the process.\n\
                             {table} = constants(({}{}))\n",
                            t.name,
                            cases.join(", "),
                            if cases.len() == 1 { "," } else { "" }
                        ),
                    );
                }
                let name = b.fresh(&format!("{hint}_name"));
                b.line(
                    ind,
                    format!("{name} = {table}.get({var}) if type({var}) is str else None"),
                );
                b.line(ind, format!("if {name} is None:"));
                b.line(ind + 1, "return None");
                (
                    "B7xQQ8x".into(),
                    vec![
                        kind("ENUM").to_string(),
                        format!("{name}[0]"),
                        format!("{name}[1]"),
                    ],
                )
            }
            Shape::Option(inner) => {
                let q = b.fresh(&format!("{hint}_box"));
                b.line(ind, format!("if {var} is None:"));
                b.line(ind + 1, format!("{q} = 0"));
                b.line(ind, "else:");
                let (fmt, vals) = self.val(b, ind + 1, inner, var, hint)?;
                alloc(b, ind + 1, &q, VAL);
                let pack = val_packer(&mut self.defs, &fmt);
                b.line(ind + 1, format!("{pack}(MEM, {q}, {})", vals.join(", ")));
                ("B7xQ16x".into(), vec![kind("OPTION").to_string(), q])
            }
            Shape::Record(_) | Shape::Tuple(_) => {
                let super::vals::Elements { items: elems, slot } =
                    elements(c, ty).expect("a record or a tuple");
                let record = matches!(shape(c, ty), Shape::Record(_));
                let k = elems.len();
                b.line(
                    ind,
                    format!("if type({var}) is not tuple or len({var}) != {k}:"),
                );
                b.line(ind + 1, "return None");
                let locals: Vec<String> = elems.iter().map(|(n, _)| b.fresh(&ident(n))).collect();
                if k > 0 {
                    b.unpack(ind, &locals, var);
                }
                let mut fmt = String::from("<");
                let mut vals = Vec::new();
                for ((name, t), local) in elems.iter().zip(&locals) {
                    if record {
                        let (n, p) = self.field_name(name);
                        fmt.push_str("QQ");
                        vals.push(n);
                        vals.push(p);
                    }
                    let (f, v) = self.val(b, ind, t, local, local)?;
                    fmt.push_str(&f);
                    vals.extend(v);
                }
                let e = b.fresh(&format!(
                    "{hint}_{}",
                    if record { "entries" } else { "vals" }
                ));
                if k == 0 {
                    b.line(ind, format!("{e} = 0"));
                } else {
                    alloc(b, ind, &e, slot * k);
                    let what = if record { "ENTRIES" } else { "VALS" };
                    let pack = self.defs.packer(
                        &format!("_PUT_{}_{what}", upper(&ty_ident(c, ty))),
                        &fmt,
                        "pack_into",
                        &format!(
                            "{} ``{}``'s {}.",
                            super::article(&super::signatures::wit(ty)),
                            super::signatures::wit(ty),
                            if record {
                                "entries: each field's name and value"
                            } else {
                                "values"
                            }
                        ),
                    );
                    push_pack(b, ind, &pack, &e, &vals);
                }
                let k_kind = if record { "RECORD" } else { "TUPLE" };
                (
                    "B7xQQ8x".into(),
                    vec![kind(k_kind).to_string(), k.to_string(), e],
                )
            }
            Shape::Bytes => {
                self.lists = true;
                b.line(ind, format!("if type({var}) is not bytes:"));
                b.line(ind + 1, "return None");
                let n = b.fresh(&format!("{hint}_n"));
                let a = b.fresh(&format!("{hint}_at"));
                b.line(ind, format!("{n} = len({var})"));
                if self.bound {
                    b.line(ind, format!("if {n} > MAX_VALUE:"));
                    b.line(ind + 1, "return None");
                }
                b.line(ind, format!("if {n}:"));
                b.line(ind + 1, format!("{a} = arena.alloc({VAL} * {n})"));
                b.line(
                    ind + 1,
                    format!(
                        "MEM[{a} : {a} + {VAL} * {n} : {VAL}] = b\"\\x{:02x}\" * {n}",
                        kind("U8")
                    ),
                );
                b.line(
                    ind + 1,
                    format!("MEM[{a} + 8 : {a} + {VAL} * {n} : {VAL}] = {var}"),
                );
                b.line(ind, "else:");
                b.line(ind + 1, format!("{a} = 0"));
                ("B7xQQ8x".into(), vec![kind("LIST").to_string(), n, a])
            }
            Shape::List(e) => {
                self.lists = true;
                b.line(
                    ind,
                    format!("if type({var}) is not list and type({var}) is not tuple:"),
                );
                b.line(ind + 1, "return None");
                let n = b.fresh(&format!("{hint}_n"));
                let a = b.fresh(&format!("{hint}_at"));
                let item = b.fresh(&super::lift::singular(hint));
                let at = b.fresh(&format!("{item}_slot"));
                b.line(ind, format!("{n} = len({var})"));
                b.line(ind, format!("if {n}:"));
                b.line(ind + 1, format!("{a} = {at} = arena.alloc({VAL} * {n})"));
                b.line(ind + 1, format!("for {item} in {var}:"));
                let (fmt, vals) = self.val(b, ind + 2, e, &item, &item)?;
                let pack = val_packer(&mut self.defs, &fmt);
                b.line(ind + 2, format!("{pack}(MEM, {at}, {})", vals.join(", ")));
                b.line(ind + 2, format!("{at} += {VAL}"));
                b.line(ind, "else:");
                b.line(ind + 1, format!("{a} = 0"));
                ("B7xQQ8x".into(), vec![kind("LIST").to_string(), n, a])
            }
            Shape::Result(..) | Shape::Variant(_) => {
                return Err(format!(
                    "{}: lowering a result or a variant is not written yet (host/gen/src/emit/python/lower.rs)",
                    super::signatures::wit(ty)
                ));
            }
        })
    }

    /// The constants of a record field's name (length, address), defined once.
    pub fn field_name(&mut self, field: &str) -> (String, String) {
        let base = format!("_FIELD_{}", upper(field));
        let (n, p) = (format!("{base}_N"), format!("{base}_AT"));
        if !self.defs.has(&base) {
            self.defs
                .add(&base, format!("{n}, {p} = constant({})\n", lit(field)));
        }
        (n, p)
    }

    /// Statements putting the UTF-8 of `var` (a `str`: anything else is
    /// declined) in two locals, its length and address: its own buffer
    /// when CPython holds it as compact ASCII, else an encoded copy the
    /// arena keeps. The locals' names.
    pub fn text(&mut self, b: &mut Body, ind: usize, var: &str, hint: &str) -> (String, String) {
        let n = b.fresh(&format!("{hint}_n"));
        let p = b.fresh(&format!("{hint}_data"));
        let o = b.fresh(&format!("{hint}_obj"));
        b.line(ind, format!("if type({var}) is not str:"));
        b.line(ind + 1, "return None");
        b.line(ind, format!("{o} = id({var})"));
        b.line(
            ind,
            format!("if ZERO_COPY and MEM[{o} + {STR_STATE}] & 0x{COMPACT_ASCII:X} == 0x{COMPACT_ASCII:X}:"),
        );
        b.line(ind + 1, format!("{n} = len({var})"));
        b.line(ind + 1, format!("{p} = {o} + {STR_DATA}"));
        b.line(ind, "else:");
        b.line(ind + 1, format!("{o} = encoded({var})"));
        b.line(ind + 1, format!("if {o} is None:"));
        b.line(ind + 2, "return None");
        b.line(ind + 1, format!("{n} = len({o})"));
        b.line(ind + 1, format!("{p} = arena.hold({o})"));
        if self.bound {
            b.line(ind, format!("if {n} > MAX_VALUE:"));
            b.line(ind + 1, "return None");
        }
        self.texts += 1;
        (n, p)
    }
}

/// `name = ` the address of `size` bytes of the arena, inline while its
/// chunk has room.
pub(super) fn alloc(b: &mut Body, ind: usize, name: &str, size: usize) {
    let size = (size + 7) & !7;
    b.line(ind, format!("{name} = arena.pos"));
    b.line(ind, format!("if {name} + {size} > arena.end:"));
    b.line(ind + 1, format!("{name} = arena.alloc({size})"));
    b.line(ind, "else:");
    b.line(ind + 1, format!("arena.pos = {name} + {size}"));
}

/// `pack(MEM, at, values...)`, broken over lines when long.
pub(super) fn push_pack(b: &mut Body, ind: usize, pack: &str, at: &str, vals: &[String]) {
    let one = format!("{pack}(MEM, {at}, {})", vals.join(", "));
    if one.len() + 4 * (ind + 1) <= 100 {
        b.line(ind, one);
        return;
    }
    b.line(ind, format!("{pack}("));
    b.line(ind + 1, "MEM,");
    b.line(ind + 1, format!("{at},"));
    let mut line = String::new();
    for v in vals {
        let item = format!("{v},");
        if !line.is_empty() && line.len() + 1 + item.len() + 4 * (ind + 2) > 100 {
            b.line(ind + 1, std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&item);
    }
    if !line.is_empty() {
        b.line(ind + 1, line);
    }
    b.line(ind, ")");
}

/// One export's lowering: its name, how many texts it takes (`None`: it
/// takes lists or bytes too) and its definition.
fn function(l: &mut Lowerer, f: &Function) -> Result<(String, Option<usize>, String), String> {
    l.texts = 0;
    l.lists = false;
    let name = format!(
        "_{}_{}",
        crate::names::snake(&f.interface),
        crate::names::snake(&f.name)
    );
    let mut b = Body::new(&["args"]);
    let n = f.params.len();
    b.line(0, format!("if len(args) != {n}:"));
    b.line(1, "return None");
    let locals: Vec<String> = f.params.iter().map(|p| b.fresh(&ident(&p.name))).collect();
    if n > 0 {
        b.unpack(0, &locals, "args");
    }
    let mut fmt = String::from("<");
    let mut vals = Vec::new();
    for (p, local) in f.params.iter().zip(&locals) {
        let (pf, pv) = l.val(&mut b, 0, &p.ty, local, local)?;
        fmt.push_str(&pf);
        vals.extend(pv);
    }
    if !vals.is_empty() {
        let pack = l.defs.packer(
            &format!("_PUT{}_ARGS", name.to_uppercase()),
            &fmt,
            "pack_into",
            &format!("``{}``'s argument ``Val``s.", f.call_name()),
        );
        push_pack(&mut b, 0, &pack, &format!("arena.slots + {VAL}"), &vals);
    }
    b.line(0, "return True");
    let params: Vec<&str> = f.params.iter().map(|p| p.name.as_str()).collect();
    let head = format!(
        "def {name}(args: Sequence[Any], arena: Arena) -> Optional[bool]:\n\
         \x20   \"\"\"``{}``'s arguments ({}) into ``arena``'s parameter slots.\"\"\"\n",
        f.call_name(),
        params
            .iter()
            .map(|p| format!("``{p}``"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let texts = if l.lists { None } else { Some(l.texts) };
    Ok((name, texts, b.function(&head)))
}

/// `_lower.py`.
pub(super) fn emit(api: &Api) -> Result<String, String> {
    let mut l = Lowerer::new(api, true);
    let mut funcs = Vec::new();
    let mut table = String::new();
    for f in api.c.exported_functions() {
        let (name, texts, text) = function(&mut l, f)?;
        funcs.push(text);
        let texts = texts.map_or("None".into(), |t| t.to_string());
        let _ = writeln!(
            table,
            "    {}: ({name}, {texts}),",
            lit(&format!("{}#{}", f.interface, f.name))
        );
    }
    let mut o = head(
        api.c,
        "Every export's arguments, lowered into an arena as wasmtime's C API values\n\
         (from ``wit/``): each parameter's ``Val`` and each record's entries written\n\
         with ONE ``struct`` pack, a text handed over in place when CPython holds it\n\
         as compact ASCII (:data:`gak._mem.ZERO_COPY`). The result slot before the\n\
         parameters is left alone: it holds the last result, which wasmtime drops\n\
         when it assigns the next.\n\
         \n\
         A lowering answers ``None`` for arguments it does not take exactly (another\n\
         Python type, an integer out of range, text that is not Unicode, a text\n\
         longer than :data:`gak.limits.MAX_VALUE`): the codecs of :mod:`gak._abi`\n\
         then lower them, and raise the error. :data:`LOWER` maps\n\
         ``interface#function`` to its lowering and how many texts it takes\n\
         (``None``: lists or bytes too, whose sizes :func:`gak.limits.oversized`\n\
         checks). Kinds are written as numbers (:mod:`gak._layout`: 12 is a string).\n",
    );
    o.push_str("\nimport struct\nfrom typing import Any, Callable, Optional, Sequence\n\n");
    o.push_str("from ._mem import MEM, ZERO_COPY, Arena, constant, constants, encoded\n");
    o.push_str("from .limits import MAX_VALUE\n");
    let _ = write!(o, "\n\n{}", section("constants"));
    for d in &l.defs.text {
        o.push_str("\n\n");
        o.push_str(d);
    }
    let _ = write!(o, "\n\n{}", section("lowerings"));
    for f in &funcs {
        o.push_str("\n\n");
        o.push_str(f);
    }
    let _ = write!(
        o,
        "\n\n#: Each export's lowering (``interface#function``) and how many texts it\n\
         #: takes (``None``: it takes lists or bytes too).\n\
         LOWER: dict[str, tuple[Callable[[Sequence[Any], Arena], Optional[bool]], Optional[int]]] = {{\n{table}}}\n"
    );
    Ok(super::lift::tidy(o))
}
