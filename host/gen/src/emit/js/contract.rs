//! `contract.js`: the contract's version, error codes and enum cases.
use std::fmt::Write as _;

use super::{Api, cases_const, jsdoc, lit};
use crate::banner;
use crate::model::Kind;

pub(super) fn js(api: &Api) -> String {
    let c = api.c;
    let mut o = format!("// {}\n", banner(c));
    o.push_str(
        "// The contract's names, from wit/: the version this host implements, the\n\
         // error codes, and every enum's cases (their TypeScript types are in\n\
         // contract.d.ts).\n\n",
    );
    let _ = writeln!(
        o,
        "/** The version of the contract this host implements (the WIT package's). */\n\
         export const CONTRACT_VERSION = {};",
        lit(&c.version)
    );
    let _ = writeln!(
        o,
        "/** The WIT package this host implements: a component of another version is refused. */\n\
         export const CONTRACT = `{}@${{CONTRACT_VERSION}}`;\n",
        c.package
    );
    let error = c.named("error");
    o.push_str(&jsdoc(
        &format!(
            "Every case of WIT `types.error`, in declaration order: the `code` of a\n\
             `GakError`.\n\n{}",
            error.docs
        ),
        "",
    ));
    o.push_str("export const ERROR_CODES = Object.freeze([\n");
    for e in c.error_codes() {
        o.push_str(&super::super::comment(&e.docs, "  ", "// "));
        let _ = writeln!(o, "  {},", lit(&e.name));
    }
    o.push_str("]);\n");
    for t in &api.types {
        if let Kind::Enum(cases) = &t.kind {
            let names: Vec<String> = cases.iter().map(|k| lit(&k.name)).collect();
            let _ = write!(
                o,
                "\n{}export const {} = Object.freeze([{}]);\n",
                jsdoc(
                    &format!(
                        "The cases of `{}.{}`, in declaration order.",
                        t.interface, t.name
                    ),
                    ""
                ),
                cases_const(t),
                names.join(", ")
            );
        }
    }
    o
}
