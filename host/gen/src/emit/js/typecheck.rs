//! `test/types/component.ts`: the contract's types in `contract.d.ts`
//! checked, by `tsc`, against the `.d.ts` jco makes from the component the
//! host loads (mapped as `jco/*` by `test/types.test.mjs`): what the API
//! takes must hold what the component takes, what it answers must be what
//! the component answers (as the API reshapes variants), and each
//! interface must have a method for every function the component exports.
use std::fmt::Write as _;

use super::{Api, HOST_LEVEL, HOST_MEMBERS, OPTIONS, class_name, ident, lit, payload_field};
use crate::banner;
use crate::model::{Function, Kind, Named, Ty};
use crate::names::{camel, lower_camel, type_name};

pub(super) fn emit(api: &Api) -> Result<String, String> {
    let c = api.c;
    let mut o = format!("// {}\n", banner(c));
    o.push_str(
        "// Compiled (not run) by test/types.test.mjs, against the .d.ts jco made\n\
         // from the component this host loads (`jco/*`: its interfaces, mapped by\n\
         // the test's tsconfig): the API takes what the component takes, answers\n\
         // what it answers (variants with their payload named), and has a method\n\
         // for every function it exports.\n",
    );
    o.push_str("import type * as api from '../../src/index.js';\n");
    let mut modules = vec!["types".to_owned()];
    modules.extend(c.exports().map(|i| i.name.clone()));
    for m in &modules {
        let _ = writeln!(
            o,
            "import type * as {} from 'jco/{}-{}.js';",
            module(m),
            c.package.replace(':', "-"),
            m
        );
    }
    o.push_str(
        "\n/** A and B are the same type. */\n\
         type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;\n\
         /** Every value of B is a value of A: the API takes what the component takes. */\n\
         type Accepts<A, B> = [B] extends [A] ? true : false;\n\
         type Assert<T extends true> = T;\n\n",
    );
    check(
        &mut o,
        "ErrorCode",
        &format!("Same<api.ErrorCode, {}.Error['tag']>", module("types")),
    );
    for (interface, types) in api.by_interface() {
        let exported = c.exports().find(|i| i.name == interface);
        if types.is_empty() && exported.is_none() {
            continue;
        }
        let _ = writeln!(o, "\n// {interface}\n");
        for t in types {
            o.push_str(&named(api, t)?);
        }
        if let Some(i) = exported {
            let m = module(&i.name);
            let class = class_name(&i.name);
            let host_level: Vec<String> = i
                .functions
                .iter()
                .filter(|f| HOST_LEVEL.contains(&f.call_name().as_str()))
                .map(|f| lit(&lower_camel(&f.name)))
                .collect();
            let ours = if HOST_MEMBERS.contains(&i.name.as_str()) {
                format!("Exclude<keyof api.{class}, keyof api.{class}Host>")
            } else {
                format!("keyof api.{class}")
            };
            let theirs = if host_level.is_empty() {
                format!("keyof typeof {m}")
            } else {
                format!("Exclude<keyof typeof {m}, {}>", host_level.join(" | "))
            };
            check(
                &mut o,
                &format!("{class}Methods"),
                &format!("Same<{ours}, {theirs}>"),
            );
            for f in api.functions().filter(|f| f.interface == i.name) {
                o.push_str(&function(api, f)?);
            }
        }
    }
    Ok(o)
}

/// The name a jco interface module is imported as.
fn module(interface: &str) -> String {
    format!("{}Wit", lower_camel(interface))
}

fn named(api: &Api, t: &Named) -> Result<String, String> {
    let ours = format!("api.{}", type_name(&t.name));
    let theirs = format!("{}.{}", module(&t.interface), camel(&t.name));
    let name = type_name(&t.name);
    let mut o = String::new();
    match &t.kind {
        Kind::Enum(_) => check(&mut o, &name, &format!("Same<{ours}, {theirs}>")),
        Kind::Record(_) => {
            if api.outputs.contains(&t.name) && !api.reshaped(&Ty::Named(t.name.clone())) {
                check(&mut o, &name, &format!("Same<{ours}, {theirs}>"));
            }
            if api.inputs.contains(&t.name) {
                let input = api.input_name(t);
                check(
                    &mut o,
                    &format!("{input}Takes"),
                    &format!("Accepts<api.{input}, {theirs}>"),
                );
            }
        }
        Kind::Variant(cases) => {
            check(
                &mut o,
                &format!("{name}Tags"),
                &format!("Same<{ours}['tag'], {theirs}['tag']>"),
            );
            for k in cases {
                let Some(ty) = &k.ty else { continue };
                let field = payload_field(api, &k.name, ty)?;
                let case = lit(&k.name);
                check(
                    &mut o,
                    &format!("{name}{}", camel(&k.name)),
                    &format!(
                        "Same<Extract<{ours}, {{ tag: {case} }}>[{}], Extract<{theirs}, {{ tag: {case} }}>['val']>",
                        lit(&field)
                    ),
                );
            }
        }
        Kind::Alias(_) => {}
    }
    Ok(o)
}

fn function(api: &Api, f: &Function) -> Result<String, String> {
    let class = class_name(&f.interface);
    let method = lower_camel(&f.name);
    let ours = format!("api.{class}[{}]", lit(&method));
    let theirs = format!("typeof {}.{method}", module(&f.interface));
    let name = format!("{class}{}", camel(&f.name));
    let mut o = String::new();
    if OPTIONS.contains(&f.call_name().as_str()) {
        let fields = f
            .params
            .iter()
            .enumerate()
            .map(|(i, p)| Ok(format!("{}: Parameters<{theirs}>[{i}]", ident(&p.name)?)))
            .collect::<Result<Vec<_>, String>>()?;
        check(
            &mut o,
            &format!("{name}Takes"),
            &format!(
                "Accepts<Parameters<{ours}>[0], {{ {} }}>",
                fields.join("; ")
            ),
        );
    } else {
        check(
            &mut o,
            &format!("{name}Takes"),
            &format!("Accepts<Parameters<{ours}>, Parameters<{theirs}>>"),
        );
    }
    match f.ok().map(|ty| (ty, api.named(ty))) {
        Some((ty, Some(t))) if api.reshaped(ty) && matches!(t.kind, Kind::Variant(_)) => {
            // The variant's cases are checked with its type.
            check(
                &mut o,
                &format!("{name}Answers"),
                &format!(
                    "Same<[ReturnType<{ours}>, ReturnType<{theirs}>], [api.{}, {}.{}]>",
                    type_name(&t.name),
                    module(&t.interface),
                    camel(&t.name)
                ),
            );
        }
        Some((ty, _)) if api.reshaped(ty) => {
            return Err(format!(
                "{}: an answer holding a variant deeper down has no type check yet",
                f.call_name()
            ));
        }
        _ => check(
            &mut o,
            &format!("{name}Answers"),
            &format!("Same<ReturnType<{ours}>, ReturnType<{theirs}>>"),
        ),
    }
    Ok(o)
}

/// `export type NAME = Assert<CHECK>;`, broken over lines when long.
fn check(o: &mut String, name: &str, check: &str) {
    let one = format!("export type {name} = Assert<{check}>;\n");
    if one.len() <= 111 {
        o.push_str(&one);
    } else {
        let _ = writeln!(o, "export type {name} = Assert<\n  {check}\n>;");
    }
}
