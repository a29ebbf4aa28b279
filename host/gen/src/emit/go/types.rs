//! `types_gen.go` (the contract's types in Go) and `format_gen.go` (how
//! fmt prints those that hold a capability).
use std::fmt::Write as _;

use super::{Api, CELL, comment, exported, head, unexported};
use crate::model::{Kind, Named, Ty};

/// The docs of a Go type: its name and WIT name, the WIT's docs, notes.
fn type_doc(go: &str, t: &Named, notes: &[String]) -> String {
    let mut text = format!(
        "{go} is the contract's {} ({}.{}).",
        t.name, t.interface, t.name
    );
    if !t.docs.is_empty() {
        text.push_str("\n\n");
        text.push_str(&t.docs);
    }
    if !notes.is_empty() {
        text.push_str("\n\n");
        text.push_str(&notes.join(" "));
    }
    comment(&text, "")
}

pub(super) fn emit(api: &Api) -> Result<String, String> {
    let mut o = head(api.c);
    o.push_str(
        "\n// The contract's records, enums and variants (wit/), as the Go API spells\n\
         // them: hand-written additions are in types.go.\n\npackage gak\n",
    );
    for t in &api.abi.types {
        o.push('\n');
        match &t.kind {
            Kind::Enum(cases) => {
                let go = api.type_name(&t.name);
                let zero = if crate::emit::cabi::ZEROS.iter().any(|(n, _)| *n == t.name) {
                    "\"\" is none: any, in a list's filter."
                } else {
                    "\"\" is none."
                };
                o.push_str(&type_doc(&go, t, &[zero.to_owned()]));
                let _ = writeln!(o, "type {go} string\n");
                let _ = writeln!(o, "// The cases of {go}, in the WIT's order.\nconst (");
                for c in cases {
                    o.push_str(&comment(&c.docs, "\t"));
                    let _ = writeln!(
                        o,
                        "\t{}{CELL}{go}{CELL}= {:?}",
                        api.case_const(&t.name, &c.name),
                        c.name
                    );
                }
                o.push_str(")\n");
            }
            Kind::Record(fields) => {
                let go = api.type_name(&t.name);
                let notes: Vec<String> = api.note(&t.name).map(str::to_owned).into_iter().collect();
                o.push_str(&type_doc(&go, t, &notes));
                let _ = writeln!(o, "type {go} struct {{");
                for f in fields {
                    let mut docs = f.docs.clone();
                    for n in api.field_notes(&t.name, &f.name, &f.ty) {
                        if !docs.is_empty() {
                            docs.push(' ');
                        }
                        docs.push_str(&n);
                    }
                    o.push_str(&comment(&docs, "\t"));
                    let _ = writeln!(
                        o,
                        "\t{}{CELL}{}",
                        exported(&f.name),
                        api.go_type(&f.ty, "")
                            .map_err(|e| format!("{}.{}: {e}", t.name, f.name))?
                    );
                }
                o.push_str("}\n");
            }
            Kind::Variant(cases) => o.push_str(&variant(api, t, cases)?),
            Kind::Alias(_) => {}
        }
    }
    Ok(o)
}

fn variant(api: &Api, t: &Named, cases: &[crate::model::Case]) -> Result<String, String> {
    let go = api.type_name(&t.name);
    let mut o = String::new();
    let flag = api.flag(&t.name);
    if flag.is_none() {
        let kind = api.kind_type(&t.name);
        let _ = write!(
            o,
            "{}type {kind} string\n\n// The cases of {go}, in the WIT's order.\nconst (\n",
            comment(
                &format!(
                    "{kind} says which case of {go} (WIT {}.{}) an answer is.",
                    t.interface, t.name
                ),
                ""
            )
        );
        for c in cases {
            o.push_str(&comment(&c.docs, "\t"));
            let _ = writeln!(
                o,
                "\t{}{CELL}{kind}{CELL}= {:?}",
                api.case_const(&t.name, &c.name),
                c.name
            );
        }
        o.push_str(")\n\n");
    }
    let note = match flag {
        Some(f) => format!(
            "{} says which case it is; the other case sets the payload.",
            exported(f)
        ),
        None => "Kind says which case it is, and which payload field is set.".to_owned(),
    };
    o.push_str(&type_doc(&go, t, &[note]));
    let _ = writeln!(o, "type {go} struct {{");
    match flag {
        Some(f) => {
            let _ = writeln!(o, "\t{}{CELL}bool", exported(f));
        }
        None => {
            let _ = writeln!(o, "\tKind{CELL}{}", api.kind_type(&t.name));
        }
    }
    let mut seen = Vec::new();
    for c in cases {
        let Some((field, ty)) = api.payload(c) else {
            continue;
        };
        if seen.contains(&field) {
            continue;
        }
        seen.push(field.clone());
        let which: Vec<String> = cases
            .iter()
            .filter(|k| api.payload(k).is_some_and(|(f, _)| f == field))
            .map(|k| exported(&k.name))
            .collect();
        let _ = writeln!(
            o,
            "\t{field}{CELL}{}{CELL}// {}",
            api.go_type(&ty, "")?,
            which.join(", ")
        );
    }
    o.push_str("}\n");
    Ok(o)
}

/// `format_gen.go`: `String`, `GoString` and `Format` of the types that
/// hold a secret (format.go has the helpers: `redacted`, `goSyntax`,
/// `hide`, `optNumber`).
pub(super) fn format(api: &Api) -> Result<String, String> {
    let mut o = head(api.c);
    o.push_str(
        "\n// How fmt prints the contract's types that hold a capability: under every\n\
         // verb (%v %+v %#v %s %q %x …) without it. Helpers: format.go.\n\n\
         package gak\n\nimport \"fmt\"\n",
    );
    for t in &api.abi.types {
        if !api.has_secret(t) {
            continue;
        }
        let go = api.type_name(&t.name);
        let plain = format!("{}Plain", unexported(crate::names::host_kebab(&t.name)));
        let mut hides = String::new();
        let string = match &t.kind {
            Kind::Record(fields) => {
                let mut verbs = Vec::new();
                let mut args = Vec::new();
                for f in fields {
                    let name = exported(&f.name);
                    let (verb, arg) = verb(api, &t.name, &f.name, &f.ty, &format!("x.{name}"));
                    verbs.push(format!("{name}:{verb}"));
                    args.push(arg);
                    hides.push_str(&hide(api, &t.name, &f.name, &f.ty, &format!("x.{name}")));
                }
                format!(
                    "\treturn fmt.Sprintf({:?}, {})\n",
                    format!("{go}{{{}}}", verbs.join(" ")),
                    args.join(", ")
                )
            }
            Kind::Variant(cases) => {
                let flag = api.flag(&t.name);
                let mut s = String::new();
                if flag.is_none() {
                    s.push_str("\tswitch x.Kind {\n");
                }
                let mut seen = Vec::new();
                for c in cases {
                    let Some((field, ty)) = api.payload(c) else {
                        continue;
                    };
                    let (verb, arg) = verb(api, &t.name, "", &ty, &format!("x.{field}"));
                    if !seen.contains(&field) {
                        hides.push_str(&hide(api, &t.name, "", &ty, &format!("x.{field}")));
                        seen.push(field.clone());
                    }
                    match flag {
                        None => {
                            let _ = writeln!(
                                s,
                                "\tcase {}:\n\t\treturn fmt.Sprintf({:?}, x.Kind, {arg})",
                                api.case_const(&t.name, &c.name),
                                format!("{go}{{Kind:%s {field}:{verb}}}")
                            );
                        }
                        Some(f) => {
                            let _ = writeln!(
                                s,
                                "\tif !x.{} {{\n\t\treturn fmt.Sprintf({:?}, {arg})\n\t}}",
                                exported(f),
                                format!("{go}{{{field}:{verb}}}")
                            );
                        }
                    }
                }
                match flag {
                    None => {
                        let _ = write!(
                            s,
                            "\t}}\n\treturn fmt.Sprintf({:?}, x.Kind)\n",
                            format!("{go}{{Kind:%s}}")
                        );
                    }
                    Some(f) => {
                        let _ = writeln!(s, "\treturn \"{go}{{{}:true}}\"", exported(f));
                    }
                }
                s
            }
            _ => continue,
        };
        let _ = write!(
            o,
            "\ntype {plain} {go}\n\n\
             // String shows the {wit} without its capability.\n\
             func (x {go}) String() string {{\n{string}}}\n\n\
             // GoString is the {wit} in Go syntax, without its capability.\n\
             func (x {go}) GoString() string {{\n{hides}\treturn goSyntax({plain}(x), {plain:?}, {go:?})\n}}\n\n\
             // Format prints the {wit} without its capability, whatever the verb.\n\
             func (x {go}) Format(f fmt.State, verb rune) {{ redacted(f, verb, x.String(), x.GoString()) }}\n",
            wit = t.name.replace('-', " ")
        );
    }
    Ok(o)
}

/// The verb and argument that print `x` (a field `field` of `owner`).
fn verb(api: &Api, owner: &str, field: &str, ty: &Ty, x: &str) -> (String, String) {
    if api.secret(owner, field) {
        return ("%s".into(), format!("hide({x})"));
    }
    match api.abi.shape(ty) {
        Ok(crate::emit::cabi::Shape::Scalar { optional: true, .. }) => {
            ("%s".into(), format!("optNumber({x})"))
        }
        Ok(crate::emit::cabi::Shape::Scalar { ty: Ty::Bool, .. }) => ("%t".into(), x.to_owned()),
        Ok(crate::emit::cabi::Shape::Scalar { .. }) => ("%d".into(), x.to_owned()),
        Ok(crate::emit::cabi::Shape::Enum { .. } | crate::emit::cabi::Shape::Record(_)) => {
            ("%s".into(), x.to_owned())
        }
        Ok(crate::emit::cabi::Shape::Records(_) | crate::emit::cabi::Shape::Pairs) => {
            ("%v".into(), x.to_owned())
        }
        _ => ("%q".into(), x.to_owned()),
    }
}

/// The statements hiding `x`'s secrets in a copy.
fn hide(api: &Api, owner: &str, field: &str, ty: &Ty, x: &str) -> String {
    if api.secret(owner, field) {
        return format!("\t{x} = hide({x})\n");
    }
    match api.c.resolve(ty) {
        Ty::Named(n) => {
            let t = api.c.named(n);
            if !api.has_secret(t) {
                return String::new();
            }
            t.fields()
                .iter()
                .map(|f| {
                    hide(
                        api,
                        n,
                        &f.name,
                        &f.ty,
                        &format!("{x}.{}", exported(&f.name)),
                    )
                })
                .collect()
        }
        _ => String::new(),
    }
}
