//! Rust: the contract's types for the rules (`guest/src/contract.rs`), the
//! conversions between them and each side's WIT bindings (the component's
//! `guest/component/src/convert.rs`, the host's `host/rust/src/convert.rs`),
//! the conformance runner's call table (`host/rust/cli/src/conformance/
//! exports.rs`) and libgak's error codes as C strings (`host/c/src/codes.rs`).
//!
//! Where Rust departs from what the WIT says by rule, the exception is one
//! of the tables below.
use std::fmt::Write as _;
use std::path::Path;

use super::rustfmt;
use crate::model::{Kind, Named, Ty};
use crate::names::{self, snake};
use crate::{Contract, Output, banner};

mod calls;
mod convert;
mod json;
#[cfg(test)]
mod tests;
mod types;

pub fn emit(c: &Contract, root: &Path) -> Result<Vec<Output>, String> {
    let files = [
        ("guest/src/contract.rs", types::contract(c)?),
        ("guest/component/src/convert.rs", convert::guest(c)?),
        ("host/rust/src/convert.rs", convert::host(c)?),
        (
            "host/rust/cli/src/conformance/exports.rs",
            calls::exports(c)?,
        ),
        ("host/c/src/codes.rs", codes(c)),
    ];
    files
        .into_iter()
        .map(|(path, text)| {
            Ok(Output {
                path: path.into(),
                text: rustfmt(root, &text)?,
            })
        })
        .collect()
}

/// Rust types whose name is not the one every host gives the WIT type: the
/// store's `store-error` is what the rules call a `StoreFault` (the
/// contract's `error` has a `storage` case; a fault is what the store
/// reports on the way to it).
const TYPE_NAMES: &[(&str, &str)] = &[("store-error", "StoreFault")];

/// Fields that hold a capability (whoever reads one can act as its owner):
/// the type's `Debug`, which is what ends up in logs, shows only that one
/// is present.
pub(crate) const CAPABILITIES: &[(&str, &str)] = &[
    ("lease", "holder"),
    ("reconcile-claim", "claim"),
    ("task", "token"),
];

/// Types that are `#[non_exhaustive]` in Rust (a later contract may add
/// cases), with what their docs say about it.
const NON_EXHAUSTIVE: &[(&str, &str)] = &[
    ("error", ""),
    (
        "acquired",
        "New outcomes may be added in later versions: match with a wildcard arm\n\
         that treats an unknown outcome as \"do not run the body\".",
    ),
];

/// A variant case whose payload is a richer Rust type than the WIT's.
struct Payload {
    variant: &'static str,
    case: &'static str,
    /// The rules' type, from the rules crate's root.
    rust: &'static str,
    /// The WIT payload from a rules payload `{x}` (owned or borrowed).
    to_wit: &'static str,
    /// The rules payload from an owned WIT payload `{x}`; `{rules}` is the
    /// path of the rules crate.
    from_wit: &'static str,
}

/// The rules' `storage` error carries a `StorageError` (message, whether a
/// conflict persisted, the cause); the WIT carries its message.
const PAYLOADS: &[Payload] = &[Payload {
    variant: "error",
    case: "storage",
    rust: "StorageError",
    to_wit: "{x}.message().to_owned()",
    from_wit: "{rules}::StorageError::new({x})",
}];

fn payload(variant: &str, case: &str) -> Option<&'static Payload> {
    PAYLOADS
        .iter()
        .find(|p| p.variant == variant && p.case == case)
}

/// The Rust name of the contract type `wit`.
pub(crate) fn type_name(wit: &str) -> String {
    TYPE_NAMES
        .iter()
        .find(|(w, _)| *w == wit)
        .map_or_else(|| names::type_name(wit), |(_, rust)| (*rust).to_owned())
}

pub(crate) fn non_exhaustive(wit: &str) -> Option<&'static str> {
    NON_EXHAUSTIVE
        .iter()
        .find(|(w, _)| *w == wit)
        .map(|(_, docs)| *docs)
}

/// A field, case or parameter name as a Rust identifier.
pub(crate) fn ident(kebab: &str) -> Result<String, String> {
    const KEYWORDS: &[&str] = &[
        "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum",
        "extern", "false", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod",
        "move", "mut", "pub", "ref", "return", "self", "static", "struct", "super", "trait",
        "true", "type", "unsafe", "use", "where", "while",
    ];
    let s = snake(kebab);
    if KEYWORDS.contains(&s.as_str()) {
        return Err(format!(
            "`{kebab}` is a Rust keyword: the Rust generator has no spelling for it yet"
        ));
    }
    Ok(s)
}

/// Does `ty` hold a named record, enum or variant (which every side spells
/// as a type of its own, so a value needs converting)?
fn has_named(c: &Contract, ty: &Ty) -> bool {
    match c.resolve(ty) {
        Ty::Named(_) => true,
        Ty::List(t) | Ty::Option(t) => has_named(c, t),
        Ty::Tuple(ts) => ts.iter().any(|t| has_named(c, t)),
        Ty::Result(ok, err) => [ok, err].into_iter().flatten().any(|t| has_named(c, t)),
        _ => false,
    }
}

/// Is a value of `ty` `Copy` in Rust?
fn is_copy(c: &Contract, ty: &Ty) -> bool {
    match c.resolve(ty) {
        Ty::Bool | Ty::U8 | Ty::U32 | Ty::S32 | Ty::U64 => true,
        Ty::Option(t) => is_copy(c, t),
        Ty::Tuple(ts) => ts.iter().all(|t| is_copy(c, t)),
        Ty::Named(n) => is_copy_type(c, c.named(n)),
        _ => false,
    }
}

fn is_copy_type(c: &Contract, t: &Named) -> bool {
    match &t.kind {
        Kind::Enum(_) => true,
        Kind::Record(fields) => fields.iter().all(|f| is_copy(c, &f.ty)),
        _ => false,
    }
}

/// The `///` lines for `docs`, or for `fallback` when the WIT has none.
fn doc(docs: &str, fallback: &str) -> String {
    super::comment(if docs.is_empty() { fallback } else { docs }, "", "/// ")
}

/// libgak's codes: `gak_error_code` answers a `&'static CStr`.
fn codes(c: &Contract) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "// {}", banner(c));
    o.push_str("//! The contract's error codes (WIT `types.error`) as C strings, in the\n");
    o.push_str("//! WIT's order (`Error::NAMES`): what `gak_error_code` answers.\n");
    o.push_str("use std::ffi::CStr;\n\n");
    let codes = c.error_codes();
    let _ = writeln!(
        o,
        "/// Every code of the contract.\npub(crate) const CODES: [&CStr; {}] = [",
        codes.len()
    );
    for e in &codes {
        let _ = writeln!(o, "    c{:?},", e.name);
    }
    o.push_str("];\n");
    o
}
