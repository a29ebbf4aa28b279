//! How a WIT value sits in the memory the Python host reads and writes:
//! wasmtime's C API component values (`wasmtime_component_val_t`, from
//! wasmtime 50's `crates/c-api/include/wasmtime/component/val.h`), which
//! wasmtime-py hands over and takes back. The component's own linear
//! memory (the canonical ABI) never reaches Python: wasmtime lifts it into
//! a tree of these values before a host function sees it, and lowers such
//! a tree into it for an export call.
//!
//! Every value is a 32-byte `Val` (a kind byte, then a 24-byte payload at
//! offset 8); a record's payload is (count, entries), each entry a name
//! (length, address) and a `Val` (48 bytes); a list's and a tuple's are
//! (count, address of consecutive `Val`s); an option's is the address of
//! its boxed `Val` (0: none); a result's is (is-ok, address of the boxed
//! payload); a variant's is (name length, name address, address of the
//! boxed payload); an enum's is its case's name (length, address). The
//! generated modules' offsets and `struct` formats are computed from the
//! WIT's types over this layout; `_layout.py` states it, and `gak._mem`
//! checks it against wasmtime-py's ctypes structs and constants at import.
//!
//! Also here: the offsets of CPython's compact strings and bytes, which the
//! lowering reads to hand a text over in place (`gak._mem` checks them on
//! strings made at run time and copies every text when they do not hold).
use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::Api;
use crate::Contract;
use crate::model::{Kind, Named, Ty};

/// Bytes of a `Val`.
pub(super) const VAL: usize = 32;
/// Where a `Val`'s payload starts.
pub(super) const PAYLOAD: usize = 8;
/// Bytes of a record entry: the field's name (length, address), then its `Val`.
pub(super) const ENTRY: usize = 48;
/// Where an entry's `Val` starts.
pub(super) const ENTRY_VAL: usize = 16;

/// The kinds of `Val` the contract's types use (`WASMTIME_COMPONENT_*`).
pub(super) const KINDS: &[(&str, u8)] = &[
    ("BOOL", 0),
    ("U8", 2),
    ("S32", 5),
    ("U32", 6),
    ("U64", 8),
    ("STRING", 12),
    ("LIST", 13),
    ("RECORD", 14),
    ("TUPLE", 15),
    ("VARIANT", 16),
    ("ENUM", 17),
    ("OPTION", 18),
    ("RESULT", 19),
];

/// The kind byte of `name`.
pub(super) fn kind(name: &str) -> u8 {
    KINDS
        .iter()
        .find(|(k, _)| *k == name)
        .map(|(_, v)| *v)
        .expect("a kind of the table")
}

/// CPython 3.11–3.13 (64-bit, default build): `PyASCIIObject.state`'s
/// offset, its compact and ASCII bits, where a compact ASCII `str`'s
/// characters start and where a `bytes`' data starts.
pub(super) const STR_STATE: usize = 32;
pub(super) const COMPACT_ASCII: u8 = 0x60;
pub(super) const STR_DATA: usize = 48;
pub(super) const BYTES_DATA: usize = 32;

/// `_layout.py`.
pub(super) fn layout(c: &Contract) -> String {
    let mut o = super::head(
        c,
        "The memory layout the generated modules (``_lift``, ``_lower``,\n\
         ``_store_abi``) are written against: wasmtime's C API component values\n\
         (``wasmtime_component_val_t``, wasmtime 50's ``val.h``) and CPython's\n\
         compact strings. Their offsets and ``struct`` formats are computed from the\n\
         WIT's types over it (``host/gen/src/emit/python/vals.rs``); :mod:`gak._mem`\n\
         checks it against wasmtime-py's ctypes structs at import.\n",
    );
    let _ = write!(
        o,
        "\n#: Bytes of a ``Val``; where its payload starts.\nVAL = {VAL}\nPAYLOAD = {PAYLOAD}\n\
         #: Bytes of a record entry (the field's name, then its ``Val``); where its\n\
         #: ``Val`` starts.\nENTRY = {ENTRY}\nENTRY_VAL = {ENTRY_VAL}\n\n\
         #: The kinds of ``Val`` the contract uses (``WASMTIME_COMPONENT_*``).\n"
    );
    for (name, value) in KINDS {
        let _ = writeln!(o, "{name} = {value}");
    }
    let _ = write!(
        o,
        "\n#: CPython 3.11-3.13: ``PyASCIIObject.state``'s offset and its compact and\n\
         #: ASCII bits; where a compact ASCII ``str``'s characters and a ``bytes``'\n\
         #: data start (from the object's address).\n\
         STR_STATE = {STR_STATE}\nCOMPACT_ASCII = 0x{COMPACT_ASCII:X}\nSTR_DATA = {STR_DATA}\n\
         BYTES_DATA = {BYTES_DATA}\n"
    );
    o
}

/// A type as the layout sees it: aliases resolved, named types looked up.
pub(super) enum Shape<'a> {
    Bool,
    U8,
    U32,
    S32,
    U64,
    String,
    Bytes,
    List(&'a Ty),
    Option(&'a Ty),
    Tuple(&'a [Ty]),
    Result(Option<&'a Ty>, Option<&'a Ty>),
    Record(&'a Named),
    Enum(&'a Named),
    Variant(&'a Named),
}

pub(super) fn shape<'a>(c: &'a Contract, ty: &'a Ty) -> Shape<'a> {
    match c.resolve(ty) {
        Ty::Bool => Shape::Bool,
        Ty::U8 => Shape::U8,
        Ty::U32 => Shape::U32,
        Ty::S32 => Shape::S32,
        Ty::U64 => Shape::U64,
        Ty::String => Shape::String,
        Ty::List(e) if **e == Ty::U8 => Shape::Bytes,
        Ty::List(e) => Shape::List(e),
        Ty::Option(e) => Shape::Option(e),
        Ty::Tuple(ts) => Shape::Tuple(ts),
        Ty::Result(ok, err) => Shape::Result(ok.as_deref(), err.as_deref()),
        Ty::Named(n) => {
            let t = c.named(n);
            match &t.kind {
                Kind::Record(_) => Shape::Record(t),
                Kind::Enum(_) => Shape::Enum(t),
                Kind::Variant(_) => Shape::Variant(t),
                Kind::Alias(_) => unreachable!("resolved"),
            }
        }
    }
}

/// A `Val`'s payload as a `struct` format (24 bytes) and how many values
/// it unpacks to.
pub(super) fn payload(c: &Contract, ty: &Ty) -> (&'static str, usize) {
    match shape(c, ty) {
        Shape::Bool => ("?23x", 1),
        Shape::U8 => ("B23x", 1),
        Shape::U32 => ("I20x", 1),
        Shape::S32 => ("i20x", 1),
        Shape::U64 | Shape::Option(_) => ("Q16x", 1),
        Shape::Result(..) => ("?7xQ8x", 2),
        Shape::Variant(_) => ("QQQ", 3),
        // (length or count, address)
        Shape::String
        | Shape::Bytes
        | Shape::List(_)
        | Shape::Enum(_)
        | Shape::Record(_)
        | Shape::Tuple(_) => ("QQ8x", 2),
    }
}

/// The elements of a record (its fields) or a tuple, and the size of each
/// one's slot (an entry: the name, then the `Val` at [`ENTRY_VAL`]; a `Val`).
pub(super) struct Elements<'a> {
    pub items: Vec<(String, &'a Ty)>,
    pub slot: usize,
}

pub(super) fn elements<'a>(c: &'a Contract, ty: &'a Ty) -> Option<Elements<'a>> {
    match shape(c, ty) {
        Shape::Record(t) => Some(Elements {
            items: t.fields().iter().map(|f| (f.name.clone(), &f.ty)).collect(),
            slot: ENTRY,
        }),
        Shape::Tuple(ts) => Some(Elements {
            items: ts
                .iter()
                .enumerate()
                .map(|(i, t)| (format!("e{i}"), t))
                .collect(),
            slot: VAL,
        }),
        _ => None,
    }
}

/// A name for a type in generated identifiers: `task`, `list_string`,
/// `result_task_error`, `bytes`.
pub(super) fn ty_ident(c: &Contract, ty: &Ty) -> String {
    match c.resolve(ty) {
        Ty::Bool => "bool".into(),
        Ty::U8 => "u8".into(),
        Ty::U32 => "u32".into(),
        Ty::S32 => "s32".into(),
        Ty::U64 => "u64".into(),
        Ty::String => "string".into(),
        Ty::List(e) if **e == Ty::U8 => "bytes".into(),
        Ty::List(e) => format!("list_{}", ty_ident(c, e)),
        Ty::Option(e) => format!("option_{}", ty_ident(c, e)),
        Ty::Tuple(ts) => format!(
            "tuple_{}",
            ts.iter()
                .map(|t| ty_ident(c, t))
                .collect::<Vec<_>>()
                .join("_")
        ),
        Ty::Result(ok, err) => format!(
            "result_{}_{}",
            ok.as_deref().map_or("none".into(), |t| ty_ident(c, t)),
            err.as_deref().map_or("none".into(), |t| ty_ident(c, t))
        ),
        Ty::Named(n) => crate::names::snake(n),
    }
}

/// The lines of a generated function's body, with fresh local names.
pub(super) struct Body {
    pub lines: Vec<String>,
    taken: BTreeMap<String, usize>,
}

impl Body {
    /// A body whose function takes `params` (names no local may reuse).
    pub fn new(params: &[&str]) -> Body {
        let mut taken = BTreeMap::new();
        for p in params {
            taken.insert((*p).to_owned(), 1);
        }
        Body {
            lines: Vec::new(),
            taken,
        }
    }

    /// A local name from `hint` that no other local or module name has.
    pub fn fresh(&mut self, hint: &str) -> String {
        let hint = hint.replace("__", "_");
        let hint = hint.as_str();
        let base = if RESERVED.contains(&hint) || hint.is_empty() {
            format!("{hint}_")
        } else {
            hint.to_owned()
        };
        let n = self.taken.entry(base.clone()).or_insert(0);
        *n += 1;
        if *n == 1 { base } else { format!("{base}{n}") }
    }

    /// One line at `indent` (four spaces a level, the function's own first).
    pub fn line(&mut self, indent: usize, text: impl AsRef<str>) {
        self.lines
            .push(format!("{}{}", "    ".repeat(indent + 1), text.as_ref()));
    }

    /// `names = rhs`, the names in parentheses over lines when long (a
    /// single name keeps its trailing comma: an unpack of one).
    pub fn unpack(&mut self, indent: usize, names: &[String], rhs: &str) {
        let lhs = if names.len() == 1 {
            format!("{},", names[0])
        } else {
            names.join(", ")
        };
        let one = format!("{lhs} = {rhs}");
        if one.len() + 4 * (indent + 1) <= 100 {
            self.line(indent, one);
            return;
        }
        self.line(indent, "(");
        let mut line = String::new();
        for n in names {
            let item = format!("{n},");
            if !line.is_empty() && line.len() + 1 + item.len() + 4 * (indent + 2) > 100 {
                self.line(indent + 1, std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(&item);
        }
        self.line(indent + 1, line);
        self.line(indent, format!(") = {rhs}"));
    }

    /// `head` (`def f(at: int) -> Any:` and its docstring) and the body.
    pub fn function(&self, head: &str) -> String {
        let mut o = String::from(head);
        for l in &self.lines {
            o.push_str(l);
            o.push('\n');
        }
        o
    }
}

/// Names a generated function's locals must not take: Python's keywords
/// and builtins the generated code calls, and the module names it reads.
const RESERVED: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield", "dict", "id", "len", "list", "map", "range", "type", "str", "int", "bytes",
    "tuple", "MEM", "MEMQ", "TX", "arena", "at", "args", "make", "lift", "b",
];

/// Module-level definitions of a generated module, each once, in the
/// order they were first asked for (a definition's parts come first).
#[derive(Default)]
pub(super) struct Defs {
    pub text: Vec<String>,
    made: BTreeMap<String, String>,
}

impl Defs {
    /// Whether `name` is defined (or being defined).
    pub fn has(&self, name: &str) -> bool {
        self.made.contains_key(name)
    }

    /// Reserve `name` before its definition is written (its parts are
    /// defined meanwhile; a recursive type would find it reserved).
    pub fn reserve(&mut self, name: &str) {
        self.made.insert(name.to_owned(), String::new());
    }

    /// Define `name` with `text` (a statement or a function).
    pub fn add(&mut self, name: &str, text: String) {
        self.made.insert(name.to_owned(), text.clone());
        self.text.push(text);
    }

    /// `NAME = struct.Struct(FMT).<method>`, once per name; the same name
    /// asked for with another format is a generator bug.
    pub fn packer(&mut self, name: &str, fmt: &str, method: &str, doc: &str) -> String {
        let doc = if doc.contains('\n') {
            format!("#: {doc}\n")
        } else {
            doc_comment(doc)
        };
        let text = format!(
            "{doc}{name} = struct.Struct({}).{method}\n",
            super::lit(fmt)
        );
        match self.made.get(name) {
            Some(prior) => assert_eq!(prior, &text, "{name} defined twice"),
            None => self.add(name, text),
        }
        name.to_owned()
    }
}

/// `text` as `#:` comment lines of at most 79 characters.
pub(super) fn doc_comment(text: &str) -> String {
    let mut out = String::new();
    let mut line = String::from("#:");
    for word in text.split(' ') {
        if line.len() + 1 + word.len() > 79 && line.len() > 2 {
            out.push_str(&line);
            out.push('\n');
            line = String::from("#:");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// The `pack_into` of one `Val` whose payload is `fmt` (24 bytes after
/// the kind), named by the payload's shape.
pub(super) fn val_packer(defs: &mut Defs, fmt: &str) -> String {
    let (name, doc) = match fmt {
        "B7x?23x" => ("_PUT_BOOL_VAL", "A ``Val`` of a bool."),
        "B7xB23x" => ("_PUT_U8_VAL", "A ``Val`` of a u8."),
        "B7xI20x" => ("_PUT_U32_VAL", "A ``Val`` of a u32."),
        "B7xi20x" => ("_PUT_S32_VAL", "A ``Val`` of an s32."),
        "B7xQ16x" => (
            "_PUT_WORD_VAL",
            "A ``Val`` of one word: a u64, or an option's address.",
        ),
        "B7xQQ8x" => (
            "_PUT_PAIR_VAL",
            "A ``Val`` of two words: a string's, an enum's or a list's (length,\n#: address), a record's or a tuple's (count, address).",
        ),
        other => panic!("no Val packer for {other}"),
    };
    defs.packer(name, &format!("<{fmt}"), "pack_into", doc)
}

/// `(length << 8) | first byte` of each name, if that tells them apart
/// (lifting an enum or a variant's case then reads two bytes instead of
/// decoding its name).
pub(super) fn short_keys(names: &[&str]) -> Option<Vec<String>> {
    let mut seen = std::collections::BTreeSet::new();
    let mut keys = Vec::new();
    for n in names {
        let first = *n.as_bytes().first()?;
        if !seen.insert((n.len(), first)) {
            return None;
        }
        keys.push(format!("({} << 8) | 0x{first:02X}", n.len()));
    }
    Some(keys)
}

/// The expression of a name's key in a table [`short_keys`] made (`n`, `p`:
/// the name's length and address), else of the name's bytes.
pub(super) fn key_expr(short: bool, n: &str, p: &str) -> String {
    if short {
        format!("({n} << 8) | MEM[{p}]")
    } else {
        format!("TX[{n}](MEM, {p})[0]")
    }
}

/// A constant's name for a type or field (`TASK_STATE`).
pub(super) fn upper(kebab: &str) -> String {
    crate::names::screaming(kebab)
}

/// The API's class of an output type, if it has one.
pub(super) fn is_api(api: &Api, t: &Named) -> bool {
    api.outputs.contains(&t.name)
}
