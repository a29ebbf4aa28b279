//! libgak's C ABI as the contract gives it: which records, enums and
//! variants cross it, their C names, how each WIT field is laid out in a C
//! struct, the enums' numbers, and a fingerprint of the whole layout.
//!
//! Two emitters read it — `emit::c` (libgak's structs and conversions,
//! `host/c/src/records.rs`) and `emit::go` (the Go package's conversions
//! to and from those structs) — so a field the WIT adds lands the same way
//! on both sides of the ABI.
//!
//! The rules, and their exceptions (the tables below):
//! - a record is `gak_<name>`, its fields in the WIT's order: `string` is a
//!   `gak_str`, `list<u8>` a `gak_bytes` (NULL `ptr`: none, for an
//!   option), a number or bool itself (an option: `has_<field>` before it),
//!   an enum its number, a list a pointer and a count (`<field>_len`), a
//!   record embedded;
//! - an enum is a `uint32_t` type; **0 is none** (absent, or "any" in a
//!   list's filter; in a required field, the default [`DEFAULTS`] gives or
//!   `invalid-input`), its cases count from 1 in the WIT's order;
//! - a variant is a struct: `kind` (numbered as an enum) and one field per
//!   payload;
//! - `list<tuple<string, string>>` is a list of [`PAIR`].
use std::collections::BTreeSet;

use crate::Contract;
use crate::model::{Case, Kind, Named, Ty};
use crate::names::{host_kebab, screaming, snake};

/// Enum (and variant kind) constant prefixes other than the type's name:
/// `GAK_TASK_OPEN`, `GAK_KEY_IN_FLIGHT`, `GAK_RETRY_SAFE`.
pub const PREFIXES: &[(&str, &str)] = &[
    ("state", "TASK"),
    ("key-state", "KEY"),
    ("retry-safety", "RETRY"),
];

/// The name of 0 where it reads "any" (what a list filters by) rather
/// than "none": `GAK_TASK_ANY`.
pub const ZEROS: &[(&str, &str)] = &[("state", "ANY"), ("key-state", "ANY")];

/// What 0 means in a required enum field, as (record, field, case): the
/// case a caller who says nothing gets. A required enum at 0 elsewhere is
/// `invalid-input`.
pub const DEFAULTS: &[(&str, &str, &str)] = &[("action", "retry-safety", "safe")];

/// The field holding a variant case's payload where the payload is not a
/// record (a record payload is named after its type: `lease`), by case —
/// the names the Python host gives them too.
pub const PAYLOADS: &[(&str, &str)] = &[
    ("replayed", "result"),
    ("uncertain", "reason"),
    ("contended", "until"),
];

/// The count of a list field where it is not `<field>_len`: a page counts
/// its `items` in `len`.
pub const LENGTHS: &[(&str, &str)] = &[("items", "len")];

/// The struct of one pair of a `list<tuple<string, string>>` (a snapshot's
/// fields): (struct, first field, second field).
pub const PAIR: (&str, &str, &str) = ("gak_field", "key", "value");

/// How a WIT value is laid out in a C struct.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A `gak_str`; NULL `ptr` is none when optional.
    Str { optional: bool },
    /// A `gak_bytes`; NULL `ptr` is none when optional.
    Bytes { optional: bool },
    /// A number or bool (`Ty::U64` …); optional: a `has_` flag before it.
    Scalar { ty: Ty, optional: bool },
    /// An enum's number; 0 is none.
    Enum { name: String, optional: bool },
    /// A list of `gak_str`.
    Strings,
    /// A list of [`PAIR`].
    Pairs,
    /// A list of records.
    Records(String),
    /// A record, embedded.
    Record(String),
}

impl Shape {
    /// Is this a list (a pointer and a count)?
    pub fn is_list(&self) -> bool {
        matches!(self, Shape::Strings | Shape::Pairs | Shape::Records(_))
    }
}

/// One WIT field (or variant payload) as C fields.
#[derive(Clone, Debug)]
pub struct CField {
    /// The WIT name (`run-id`; a payload's field name).
    pub wit: String,
    /// The C name (`run_id`).
    pub name: String,
    pub shape: Shape,
    /// The count of a list.
    pub len: Option<String>,
    /// The flag of an optional number.
    pub has: Option<String>,
    pub docs: String,
}

/// A variant's payload field and the cases that fill it.
#[derive(Clone, Debug)]
pub struct Payload {
    pub field: CField,
    pub cases: Vec<String>,
}

/// The contract as libgak's C ABI carries it.
pub struct Abi<'a> {
    pub c: &'a Contract,
    /// Records, enums and variants crossing the ABI, in declaration order.
    pub types: Vec<&'a Named>,
    /// Named types the exported functions' parameters reach.
    pub inputs: BTreeSet<String>,
    /// Named types their answers reach.
    pub outputs: BTreeSet<String>,
}

fn lookup<'t>(table: &[(&str, &'t str)], key: &str) -> Option<&'t str> {
    table.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

impl<'a> Abi<'a> {
    pub fn new(c: &'a Contract) -> Result<Abi<'a>, String> {
        let (inputs, outputs) = c.exported_reach();
        let types: Vec<&Named> = c
            .types
            .iter()
            .filter(|t| inputs.contains(&t.name) || outputs.contains(&t.name))
            .filter(|t| !matches!(t.kind, Kind::Alias(_)))
            .collect();
        for (table, what) in [(PREFIXES, "PREFIXES"), (ZEROS, "ZEROS")] {
            for (name, _) in table {
                if !types.iter().any(|t| t.name == *name) {
                    return Err(format!("cabi::{what} names {name}, which crosses no call"));
                }
            }
        }
        let abi = Abi {
            c,
            types,
            inputs,
            outputs,
        };
        // Every shape is known, every name unique.
        let mut constants = BTreeSet::new();
        for t in &abi.types {
            match &t.kind {
                Kind::Record(_) => {
                    abi.fields(t)?;
                }
                Kind::Variant(_) => {
                    abi.payloads(t)?;
                }
                _ => {}
            }
            for name in abi.numbered(t).into_iter().map(|(n, _, _)| n) {
                if !constants.insert(name.clone()) {
                    return Err(format!("two enums number a case {name}"));
                }
            }
        }
        for (record, field, case) in DEFAULTS {
            let t = abi.c.named(record);
            let f = t
                .fields()
                .iter()
                .find(|f| f.name == *field)
                .ok_or_else(|| format!("cabi::DEFAULTS: {record} has no field {field}"))?;
            let Ty::Named(e) = abi.c.resolve(&f.ty) else {
                return Err(format!("cabi::DEFAULTS: {record}.{field} is not an enum"));
            };
            if !abi.c.named(e).cases().iter().any(|c| c.name == *case) {
                return Err(format!("cabi::DEFAULTS: {e} has no case {case}"));
            }
        }
        Ok(abi)
    }

    pub fn is_input(&self, name: &str) -> bool {
        self.inputs.contains(name)
    }

    pub fn is_output(&self, name: &str) -> bool {
        self.outputs.contains(name)
    }

    /// `gak_task`, `gak_task_state`, `gak_acquired`.
    pub fn c_name(wit: &str) -> String {
        format!("gak_{}", snake(host_kebab(wit)))
    }

    /// A variant's kind type: `gak_acquired_kind`.
    pub fn kind_name(variant: &str) -> String {
        format!("{}_kind", Self::c_name(variant))
    }

    /// The C type of an enum, or of a variant's kind.
    pub fn number_type(t: &Named) -> String {
        match t.kind {
            Kind::Variant(_) => Self::kind_name(&t.name),
            _ => Self::c_name(&t.name),
        }
    }

    fn prefix(wit: &str) -> String {
        lookup(PREFIXES, wit).map_or_else(|| screaming(wit), str::to_owned)
    }

    /// `GAK_TASK_OPEN`.
    pub fn constant(wit: &str, case: &str) -> String {
        format!("GAK_{}_{}", Self::prefix(wit), screaming(case))
    }

    /// The constant for 0: `GAK_TASK_ANY`, `GAK_STATUS_NONE`.
    pub fn zero(wit: &str) -> String {
        format!(
            "GAK_{}_{}",
            Self::prefix(wit),
            lookup(ZEROS, wit).unwrap_or("NONE")
        )
    }

    /// The numbers of an enum or a variant's kind: (constant, number, case).
    pub fn numbered<'t>(&self, t: &'t Named) -> Vec<(String, u32, Option<&'t Case>)> {
        let mut out = vec![(Self::zero(&t.name), 0, None)];
        for (i, case) in t.cases().iter().enumerate() {
            out.push((
                Self::constant(&t.name, &case.name),
                u32::try_from(i + 1).expect("few cases"),
                Some(case),
            ));
        }
        out
    }

    /// A required enum field's default case (what 0 means), if any.
    pub fn default(record: &str, field: &str) -> Option<&'static str> {
        DEFAULTS
            .iter()
            .find(|(r, f, _)| *r == record && *f == field)
            .map(|(_, _, case)| *case)
    }

    /// Is `record` an argument only (its lists are `const`)?
    pub fn input_only(&self, record: &str) -> bool {
        self.is_input(record) && !self.is_output(record)
    }

    /// How a value of `ty` is laid out.
    pub fn shape(&self, ty: &Ty) -> Result<Shape, String> {
        let c = self.c;
        Ok(match c.resolve(ty) {
            Ty::String => Shape::Str { optional: false },
            t @ (Ty::Bool | Ty::U8 | Ty::U32 | Ty::S32 | Ty::U64) => Shape::Scalar {
                ty: t.clone(),
                optional: false,
            },
            Ty::List(e) if *c.resolve(e) == Ty::U8 => Shape::Bytes { optional: false },
            Ty::List(e) if *c.resolve(e) == Ty::String => Shape::Strings,
            Ty::List(e) if is_pairs(c, e) => Shape::Pairs,
            Ty::List(e) => match c.resolve(e) {
                Ty::Named(n) if matches!(c.named(n).kind, Kind::Record(_)) => {
                    Shape::Records(n.clone())
                }
                other => return Err(format!("a list of {other:?} has no C shape yet")),
            },
            Ty::Option(e) => match self.shape(e)? {
                Shape::Str { .. } => Shape::Str { optional: true },
                Shape::Bytes { .. } => Shape::Bytes { optional: true },
                Shape::Scalar { ty, .. } => Shape::Scalar { ty, optional: true },
                Shape::Enum { name, .. } => Shape::Enum {
                    name,
                    optional: true,
                },
                other => return Err(format!("an option of {other:?} has no C shape yet")),
            },
            Ty::Named(n) => match &c.named(n).kind {
                Kind::Enum(_) => Shape::Enum {
                    name: n.clone(),
                    optional: false,
                },
                Kind::Record(_) => Shape::Record(n.clone()),
                _ => return Err(format!("{n} has no C shape as a field yet")),
            },
            other => return Err(format!("{other:?} has no C shape yet")),
        })
    }

    fn cfield(&self, wit: &str, ty: &Ty, docs: &str) -> Result<CField, String> {
        let shape = self.shape(ty)?;
        let name = snake(wit);
        let len = shape
            .is_list()
            .then(|| lookup(LENGTHS, wit).map_or_else(|| format!("{name}_len"), str::to_owned));
        let has =
            matches!(shape, Shape::Scalar { optional: true, .. }).then(|| format!("has_{name}"));
        Ok(CField {
            wit: wit.to_owned(),
            name,
            shape,
            len,
            has,
            docs: docs.to_owned(),
        })
    }

    /// A record's fields.
    pub fn fields(&self, t: &Named) -> Result<Vec<CField>, String> {
        t.fields()
            .iter()
            .map(|f| {
                self.cfield(&f.name, &f.ty, &f.docs)
                    .map_err(|e| format!("{}.{}: {e}", t.name, f.name))
            })
            .collect()
    }

    /// The field of a variant case's payload: a record's is named after the
    /// record, the others by [`PAYLOADS`].
    pub fn payload_name(&self, case: &Case) -> Option<String> {
        let ty = case.ty.as_ref()?;
        Some(match self.c.resolve(ty) {
            Ty::Named(n) if matches!(self.c.named(n).kind, Kind::Record(_)) => n.clone(),
            _ => lookup(PAYLOADS, &case.name)
                .unwrap_or(case.name.as_str())
                .to_owned(),
        })
    }

    /// A variant's payload fields (one per distinct name, in case order).
    pub fn payloads(&self, t: &Named) -> Result<Vec<Payload>, String> {
        let mut out: Vec<Payload> = Vec::new();
        for case in t.cases() {
            let (Some(name), Some(ty)) = (self.payload_name(case), &case.ty) else {
                continue;
            };
            let field = self
                .cfield(&name, ty, "")
                .map_err(|e| format!("{}.{}: {e}", t.name, case.name))?;
            if let Some(p) = out.iter_mut().find(|p| p.field.wit == name) {
                if p.field.shape != field.shape {
                    return Err(format!(
                        "{}: two payloads named {name} of different types",
                        t.name
                    ));
                }
                p.cases.push(case.name.clone());
            } else {
                out.push(Payload {
                    field,
                    cases: vec![case.name.clone()],
                });
            }
        }
        Ok(out)
    }

    /// Is the record an item of a list an argument holds (a parameter's, or
    /// an argument record's field)?
    pub fn listed(&self, record: &str) -> bool {
        let c = self.c;
        let params = c
            .exported_functions()
            .flat_map(|f| f.params.iter().map(|p| &p.ty));
        let fields = self
            .types
            .iter()
            .filter(|t| self.is_input(&t.name))
            .flat_map(|t| t.fields().iter().map(|f| &f.ty));
        params.chain(fields).any(|ty| match c.resolve(ty) {
            Ty::List(e) => matches!(c.resolve(e), Ty::Named(n) if n == record),
            _ => false,
        })
    }

    /// Is the record embedded in another struct (a field, a payload)?
    pub fn embedded(&self, record: &str) -> bool {
        self.types.iter().any(|t| {
            let fields = match &t.kind {
                Kind::Record(_) => self.fields(t).unwrap_or_default(),
                Kind::Variant(_) => self
                    .payloads(t)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|p| p.field)
                    .collect(),
                _ => Vec::new(),
            };
            fields
                .iter()
                .any(|f| matches!(&f.shape, Shape::Record(r) if r == record))
        })
    }

    /// Does a value of the record reach a list (an argument of it is read
    /// through pointers beyond its own struct)?
    pub fn has_lists(&self, t: &Named) -> bool {
        self.fields(t)
            .unwrap_or_default()
            .iter()
            .any(|f| match &f.shape {
                Shape::Record(r) => self.has_lists(self.c.named(r)),
                s => s.is_list(),
            })
    }

    /// Does the record or variant own memory when libgak fills it?
    pub fn owns(&self, t: &Named) -> bool {
        let fields = match &t.kind {
            Kind::Record(_) => self.fields(t).unwrap_or_default(),
            Kind::Variant(_) => self
                .payloads(t)
                .unwrap_or_default()
                .into_iter()
                .map(|p| p.field)
                .collect(),
            _ => return false,
        };
        fields.iter().any(|f| match &f.shape {
            Shape::Record(r) => self.owns(self.c.named(r)),
            Shape::Scalar { .. } | Shape::Enum { .. } => false,
            _ => true,
        })
    }

    /// The C struct of a record or variant as declarations, in order:
    /// (name, C type).
    pub fn layout_of(&self, t: &Named) -> Vec<(String, String)> {
        let fields = match &t.kind {
            Kind::Record(_) => self.fields(t).unwrap_or_default(),
            Kind::Variant(_) => {
                let mut kind = vec![("kind".to_owned(), Self::kind_name(&t.name))];
                for p in self.payloads(t).unwrap_or_default() {
                    kind.extend(self.decls(&t.name, &p.field));
                }
                return kind;
            }
            _ => return Vec::new(),
        };
        fields.iter().flat_map(|f| self.decls(&t.name, f)).collect()
    }

    fn decls(&self, owner: &str, f: &CField) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(has) = &f.has {
            out.push((has.clone(), "bool".to_owned()));
        }
        let pointer = if self.input_only(owner) {
            "const"
        } else {
            "mut"
        };
        let ty = match &f.shape {
            Shape::Str { .. } => "gak_str".to_owned(),
            Shape::Bytes { .. } => "gak_bytes".to_owned(),
            Shape::Scalar { ty, .. } => scalar(ty).to_owned(),
            Shape::Enum { name, .. } => Self::c_name(name),
            Shape::Strings => format!("*{pointer} gak_str"),
            Shape::Pairs => format!("*{pointer} {}", PAIR.0),
            Shape::Records(r) => format!("*{pointer} {}", Self::c_name(r)),
            Shape::Record(r) => Self::c_name(r),
        };
        out.push((f.name.clone(), ty));
        if let Some(len) = &f.len {
            out.push((len.clone(), "usize".to_owned()));
        }
        out
    }

    /// A fingerprint of every struct and number this ABI declares: it
    /// changes whenever a record gains, loses, renames, retypes or moves a
    /// field, or an enum a case (FNV-1a over a canonical description, 31
    /// bits so that every C compiler reads the constant as an `int`).
    pub fn layout(&self) -> u32 {
        let mut text = format!("{}={},{}\n", PAIR.0, PAIR.1, PAIR.2);
        for t in &self.types {
            match &t.kind {
                Kind::Enum(_) | Kind::Variant(_) => {
                    for (name, n, _) in self.numbered(t) {
                        text.push_str(&format!("{name}={n}\n"));
                    }
                }
                _ => {}
            }
            let decls = self.layout_of(t);
            if !decls.is_empty() {
                text.push_str(&format!("struct {}{{", Self::c_name(&t.name)));
                for (name, ty) in decls {
                    text.push_str(&format!("{ty} {name};"));
                }
                text.push_str("}\n");
            }
        }
        let mut hash: u32 = 0x811c_9dc5;
        for b in text.bytes() {
            hash ^= u32::from(b);
            hash = hash.wrapping_mul(0x0100_0193);
        }
        hash & 0x7fff_ffff
    }
}

/// A number's or bool's Rust (and C ABI) type.
pub fn scalar(ty: &Ty) -> &'static str {
    match ty {
        Ty::Bool => "bool",
        Ty::U8 => "u8",
        Ty::U32 => "u32",
        Ty::S32 => "i32",
        _ => "u64",
    }
}

/// `list<tuple<string, string>>`'s element.
pub fn is_pairs(c: &Contract, ty: &Ty) -> bool {
    match c.resolve(ty) {
        Ty::Tuple(ts) => ts.len() == 2 && ts.iter().all(|t| *c.resolve(t) == Ty::String),
        _ => false,
    }
}
