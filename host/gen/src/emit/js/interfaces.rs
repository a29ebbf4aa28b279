//! `interfaces.js`: one class per exported interface (`kernel.taskboard`),
//! one method per function: check the arguments, run the export in one
//! transaction.
use std::fmt::Write as _;

use super::checks::{At, Exprs};
use super::{Api, OPTIONS, PURE, class_name, ident, jsdoc};
use crate::banner;
use crate::model::Function;
use crate::names::lower_camel;

/// Names the generated methods use themselves: no parameter may take one.
const TAKEN: &[&str] = &["a", "x", "o", "v", "checks"];

pub(super) fn emit(api: &Api) -> Result<String, String> {
    let x = Exprs::new(api, "checks.");
    let mut body = String::new();
    for i in api.c.exports() {
        let class = class_name(&i.name);
        let _ = write!(
            body,
            "\n{}export class {class} {{\n  constructor(kernel) {{\n    this.kernel = kernel;\n  }}\n",
            jsdoc(&i.docs, "")
        );
        for f in api.functions().filter(|f| f.interface == i.name) {
            body.push('\n');
            body.push_str(&method(&x, f)?);
        }
        body.push_str("}\n");
    }
    let mut o = format!("// {}\n", banner(api.c));
    o.push_str(
        "// The exported interfaces of wit/ as the kernel's API, camelCase: one class\n\
         // per interface (`kernel.taskboard`), one method per function, which checks\n\
         // its arguments (refused with `invalid-input` before anything is lowered:\n\
         // values.js) and runs the export in one transaction (`Kernel._call`).\n\
         // kernel.js subclasses them where the API adds calls of its own.\n",
    );
    o.push_str("import * as checks from './checks.js';\n");
    o.push_str(&x.imports());
    o.push_str("import * as v from './values.js';\n");
    o.push_str(&body);
    Ok(o)
}

fn method(x: &Exprs, f: &Function) -> Result<String, String> {
    let name = f.call_name();
    let mut params = Vec::new();
    let mut checks = Vec::new();
    let options = OPTIONS.contains(&name.as_str());
    for p in &f.params {
        let id = ident(&p.name)?;
        if TAKEN.contains(&id.as_str()) {
            return Err(format!(
                "{name}: parameter `{}` is a name the generated JavaScript uses",
                p.name
            ));
        }
        let (value, at) = if options {
            (format!("o.{id}"), At::name(&format!("options.{id}")))
        } else {
            params.push(id.clone());
            (id.clone(), At::name(&id))
        };
        checks.push(x.check(&p.ty, &value, &at, 0)?);
    }
    let mut o = jsdoc(&f.docs, "  ");
    if options {
        params.push("options".into());
    }
    let _ = writeln!(o, "  {}({}) {{", lower_camel(&f.name), params.join(", "));
    if options {
        o.push_str("    const o = v.options('options', options);\n");
    }
    let one = format!("    const a = [{}];", checks.join(", "));
    if one.len() <= 110 {
        o.push_str(&one);
        o.push('\n');
    } else {
        o.push_str("    const a = [\n");
        for c in &checks {
            let _ = writeln!(o, "      {c},");
        }
        o.push_str("    ];\n");
    }
    let run = if PURE.contains(&name.as_str()) {
        "_pure"
    } else {
        "_call"
    };
    let call = format!(
        "this.kernel.{run}(a, (x) => x.{}.{}(...a))",
        lower_camel(&f.interface),
        lower_camel(&f.name)
    );
    match f.ok() {
        None => {
            let _ = writeln!(o, "    {call};");
        }
        Some(ty) => {
            let _ = writeln!(o, "    return {};", x.answer(ty, &call)?);
        }
    }
    o.push_str("  }\n");
    Ok(o)
}
