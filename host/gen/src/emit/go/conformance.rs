//! `internal/conformance/exports_gen.go`: the vectors' JSON
//! (`host/gen/README.md`) to the Go API's values and back, per WIT type,
//! and one vector call per exported function on the Go API (`exports`),
//! with the vectors' exceptions of `emit::vectors` (shared with the other
//! hosts) and the Go API's of `emit::go`. The host-level calls stay by hand
//! in `calls.go`, the JSON primitives in `values.go`.
use std::fmt::Write as _;

use super::{Api, CELL, exported, head, unexported};
use crate::emit::cabi::Shape;
use crate::emit::vectors::{HOST_LEVEL, arg_name, wrapped};
use crate::model::{Field, Function, Kind, Named, Ty};

/// Names the generated calls use themselves: no parameter may take one.
const TAKEN: &[&str] = &[
    "ctx",
    "k",
    "a",
    "r",
    "ok",
    "err",
    "v",
    "x",
    "o",
    "break",
    "case",
    "chan",
    "const",
    "continue",
    "default",
    "defer",
    "else",
    "fallthrough",
    "for",
    "func",
    "go",
    "goto",
    "if",
    "import",
    "interface",
    "map",
    "package",
    "range",
    "return",
    "select",
    "struct",
    "switch",
    "type",
    "var",
    "len",
    "cap",
    "new",
    "make",
    "copy",
    "append",
];

pub(super) fn emit(api: &Api) -> Result<String, String> {
    for host_level in HOST_LEVEL {
        if !api
            .c
            .exported_functions()
            .any(|f| f.call_name() == *host_level)
        {
            return Err(format!(
                "HOST_LEVEL names {host_level}, which the WIT does not export"
            ));
        }
    }
    let mut body = String::new();
    for t in &api.abi.types {
        if api.abi.is_input(&t.name) {
            match &t.kind {
                Kind::Record(fields) => body.push_str(&reader(api, t, fields)?),
                Kind::Enum(_) => body.push_str(&enum_reader(api, t)),
                _ => {}
            }
        }
        if api.abi.is_output(&t.name) {
            match &t.kind {
                Kind::Record(fields) => body.push_str(&writer(api, t, fields)?),
                Kind::Variant(_) => body.push_str(&variant_writer(api, t)?),
                _ => {}
            }
        }
    }
    let mut table = String::new();
    for f in api.c.exported_functions() {
        if HOST_LEVEL.contains(&f.call_name().as_str()) {
            continue;
        }
        body.push_str(&call(api, f)?);
        let _ = writeln!(table, "\t{:?}:{CELL}{},", f.call_name(), call_fn(f));
    }
    let mut o = head(api.c);
    let _ = write!(
        o,
        "\npackage conformance\n\n\
         // The vectors' JSON (host/gen/README.md) to the Go API's values and back,\n\
         // per WIT type: readX(v, at) reads a JSON value (nil when absent; at is\n\
         // its path) as an argument, writeX(x) writes an answer. exports maps a\n\
         // step's call and args onto the Go API, and its answer onto the vectors'\n\
         // JSON, as every host's runner does. The host-level calls (sink.write-fenced,\n\
         // sink.read, taskboard.list without limit), which reach {}, are calls.go's.\n\n\
         import (\n\t\"context\"\n\n\tgak \"github.com/gak-kernel/gak/host/go\"\n)\n\n\
         // exports is every exported function as a vector call, but those reached\n\
         // only through a host-level call: (answer, refusal, malformed or invalid\n\
         // args).\n\
         var exports = map[string]func(context.Context, *gak.Kernel, any) (any, error, error){{\n{table}}}\n",
        HOST_LEVEL.join(", ")
    );
    o.push_str(&body);
    Ok(o)
}

fn call_fn(f: &Function) -> String {
    unexported(&format!("{}-{}", f.interface, f.name))
}

/// The reader of one value of `ty` (a Go function value `func(any,
/// string) (T, error)`), for a field of `owner` named `field` (an
/// argument: `owner` empty).
fn read_fn(api: &Api, ty: &Ty, owner: &str, field: &str) -> Result<String, String> {
    let shape = api.abi.shape(ty)?;
    Ok(match shape {
        Shape::Str { optional: false } => "readString".into(),
        Shape::Str { optional: true } if api.empty_is_none(owner, field) => "readString".into(),
        Shape::Str { optional: true } => "readOptID".into(),
        Shape::Bytes { optional: false } => "readBytes".into(),
        Shape::Bytes { optional: true } => "readOptBytes".into(),
        Shape::Scalar { ty, optional } => {
            let base = match ty {
                Ty::Bool => "Bool",
                Ty::U8 => "U8",
                Ty::U32 => "U32",
                Ty::S32 => "S32",
                _ => "U64",
            };
            if optional {
                if !["U64", "U32", "S32"].contains(&base) {
                    return Err(format!("an optional {base} has no reader yet"));
                }
                format!("readOpt{base}")
            } else {
                format!("read{base}")
            }
        }
        Shape::Enum { name, optional } => {
            let f = format!("read{}", api.type_name(&name));
            if optional {
                format!("optional({f})")
            } else {
                f
            }
        }
        Shape::Strings => "readStrings".into(),
        Shape::Pairs => "readPairs".into(),
        Shape::Records(r) => format!("list(read{})", api.type_name(&r)),
        Shape::Record(r) => format!("read{}", api.type_name(&r)),
    })
}

/// `readX(fn)(v, at)` or `readX(v, at)`: the call of a reader.
fn read_call(f: &str, v: &str, at: &str) -> String {
    format!("{f}({v}, {at})")
}

fn enum_reader(api: &Api, t: &Named) -> String {
    let go = api.type_name(&t.name);
    let cases = t
        .cases()
        .iter()
        .map(|c| format!("{:?}", c.name))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "\n// read{go} reads the vectors' {wit}: its case name (absent: the first); one the contract\n\
         // does not have is invalid-input.\n\
         func read{go}(v any, at string) (gak.{go}, error) {{\n\
         \ts, err := readCase(v, at, {wit:?}, {cases})\n\treturn gak.{go}(s), err\n}}\n",
        wit = t.name
    )
}

fn reader(api: &Api, t: &Named, fields: &[Field]) -> Result<String, String> {
    let go = api.type_name(&t.name);
    let mut body = String::new();
    for f in fields {
        let r = read_fn(api, &f.ty, &t.name, &f.name)
            .map_err(|e| format!("{}.{}: {e}", t.name, f.name))?;
        let _ = write!(
            body,
            "\tif x.{}, err = {}; err != nil {{\n\t\treturn x, err\n\t}}\n",
            exported(&f.name),
            read_call(
                &r,
                &format!("o[{:?}]", f.name),
                &format!("at+{:?}", format!(".{}", f.name))
            )
        );
    }
    Ok(format!(
        "\n// read{go} reads the vectors' {wit}: an object with kebab-case fields.\n\
         func read{go}(v any, at string) (gak.{go}, error) {{\n\tvar x gak.{go}\n\
         \to, err := readObject(v, at)\n\tif err != nil {{\n\t\treturn x, err\n\t}}\n{body}\treturn x, nil\n}}\n",
        wit = t.name
    ))
}

/// The expression writing `x` (a Go value of `ty`) as JSON.
fn write_expr(api: &Api, ty: &Ty, x: &str) -> Result<String, String> {
    Ok(match api.abi.shape(ty)? {
        Shape::Str { .. } => x.to_owned(),
        Shape::Bytes { .. } => format!("text({x})"),
        Shape::Scalar { ty: Ty::Bool, .. } => x.to_owned(),
        Shape::Scalar { ty: Ty::U64, .. } => format!("num({x})"),
        Shape::Scalar { ty: Ty::S32, .. } => format!("snum(int64({x}))"),
        Shape::Scalar { .. } => format!("num(uint64({x}))"),
        Shape::Enum { .. } => format!("string({x})"),
        Shape::Strings => format!("strs({x})"),
        Shape::Pairs => format!("pairs({x})"),
        Shape::Records(r) => format!("writeList({x}, write{})", api.type_name(&r)),
        Shape::Record(r) => format!("write{}({x})", api.type_name(&r)),
    })
}

/// Whether `x` (a Go value of the option `ty`) is present, and the value
/// itself (dereferenced).
fn present(api: &Api, ty: &Ty, x: &str) -> Result<(String, String), String> {
    Ok(match api.abi.shape(ty)? {
        Shape::Str { optional: true } | Shape::Enum { optional: true, .. } => {
            (format!("{x} != \"\""), x.to_owned())
        }
        Shape::Bytes { optional: true } => (format!("{x} != nil"), x.to_owned()),
        Shape::Scalar { optional: true, .. } => (format!("{x} != nil"), format!("*{x}")),
        other => return Err(format!("{other:?} is not optional")),
    })
}

fn inner(ty: &Ty, api: &Api) -> Ty {
    match api.c.resolve(ty) {
        Ty::Option(t) => (**t).clone(),
        other => other.clone(),
    }
}

fn writer(api: &Api, t: &Named, fields: &[Field]) -> Result<String, String> {
    let go = api.type_name(&t.name);
    let mut body = String::new();
    for f in fields {
        let x = format!("x.{}", exported(&f.name));
        if matches!(api.c.resolve(&f.ty), Ty::Option(_)) {
            let (cond, value) = present(api, &f.ty, &x)?;
            let _ = write!(
                body,
                "\tif {cond} {{\n\t\to[{:?}] = {}\n\t}}\n",
                f.name,
                write_expr(api, &inner(&f.ty, api), &value)?
            );
        } else {
            let _ = writeln!(body, "\to[{:?}] = {}", f.name, write_expr(api, &f.ty, &x)?);
        }
    }
    Ok(format!(
        "\n// write{go} writes the {wit} x as the vectors' JSON (absent options omitted).\n\
         func write{go}(x gak.{go}) obj {{\n\to := obj{{}}\n{body}\treturn o\n}}\n",
        wit = t.name
    ))
}

fn variant_writer(api: &Api, t: &Named) -> Result<String, String> {
    let go = api.type_name(&t.name);
    let mut body = String::new();
    let flag = api.flag(&t.name);
    if flag.is_none() {
        body.push_str("\tswitch x.Kind {\n");
    }
    let mut rest = String::new();
    for c in t.cases() {
        let mut payload = match api.payload(c) {
            Some((field, ty)) => write_expr(api, &ty, &format!("x.{field}"))?,
            None => "obj{}".to_owned(),
        };
        if let Some(key) = wrapped(&t.name, &c.name) {
            payload = format!("obj{{{key:?}: {payload}}}");
        }
        let answer = format!("obj{{{:?}: {payload}}}", c.name);
        match flag {
            None => {
                let _ = write!(
                    body,
                    "\tcase gak.{}:\n\t\treturn {answer}\n",
                    api.case_const(&t.name, &c.name)
                );
            }
            Some(f) if f == c.name => {
                let _ = write!(
                    body,
                    "\tif x.{} {{\n\t\treturn {answer}\n\t}}\n",
                    exported(f)
                );
            }
            Some(_) => {
                let _ = writeln!(rest, "\treturn {answer}");
            }
        }
    }
    if flag.is_none() {
        body.push_str("\t}\n\treturn obj{\"unknown\": string(x.Kind)}\n");
    } else {
        body.push_str(&rest);
    }
    Ok(format!(
        "\n// write{go} writes the {wit} x as the vectors' JSON: {{case: payload}}, {{case: {{}}}}\n\
         // without one.\n\
         func write{go}(x gak.{go}) obj {{\n{body}}}\n",
        wit = t.name
    ))
}

/// The reader of an argument (the Go API's parameter types).
fn param_read(api: &Api, f: &Function, p: &Field) -> Result<String, String> {
    if api.duration(&p.name) {
        return Ok("readTTL".into());
    }
    Ok(match api.c.resolve(&p.ty) {
        Ty::U32 => "readCount".into(),
        Ty::Option(inner) if matches!(api.c.resolve(inner), Ty::Named(n) if matches!(api.c.named(n).kind, Kind::Record(_))) =>
        {
            let Ty::Named(n) = api.c.resolve(inner) else {
                unreachable!()
            };
            format!("pointer(read{})", api.type_name(n))
        }
        _ => read_fn(api, &p.ty, "", &p.name)
            .map_err(|e| format!("{}({}): {e}", f.call_name(), p.name))?,
    })
}

fn call(api: &Api, f: &Function) -> Result<String, String> {
    let mut o = format!(
        "\n// {} is {}.\nfunc {}(ctx context.Context, k *gak.Kernel, a any) (any, error, error) {{\n",
        call_fn(f),
        f.call_name(),
        call_fn(f)
    );
    let split = api.split(f);
    let mut args = Vec::new();
    let mut split_var = None;
    for p in &f.params {
        let var = unexported(&p.name);
        if TAKEN.contains(&var.as_str()) {
            return Err(format!(
                "{}: a parameter named {var} shadows the generated call's",
                f.call_name()
            ));
        }
        let key = arg_name(&p.name);
        if split.is_some_and(|(s, _, _)| s == p.name) {
            let _ = write!(
                o,
                "\t{var}, {var}Given, err := readOptString(arg(a, {key:?}), {key:?})\n\
                 \tif err != nil {{\n\t\treturn nil, nil, err\n\t}}\n"
            );
            split_var = Some(var);
            continue;
        }
        let r = param_read(api, f, p)?;
        let _ = write!(
            o,
            "\t{var}, err := {}\n\tif err != nil {{\n\t\treturn nil, nil, err\n\t}}\n",
            read_call(&r, &format!("arg(a, {key:?})"), &format!("{key:?}"))
        );
        args.push(var);
    }
    if f.params.is_empty() {
        o.push_str("\tvar err error\n");
    }
    let iface = format!("k.{}()", exported(&f.interface));
    let pass = |extra: Option<&str>| -> String {
        let mut all = vec!["ctx".to_owned()];
        for p in &f.params {
            let var = unexported(&p.name);
            if Some(var.as_str()) == split_var.as_deref() {
                if let Some(e) = extra {
                    all.push(e.to_owned());
                }
            } else {
                all.push(var);
            }
        }
        all.join(", ")
    };
    let method = exported(&f.name);
    let ok = f.ok().map(|t| api.c.resolve(t).clone());
    let invoke = |lhs: &str| -> String {
        match (&split, &split_var) {
            (Some((_, with, without)), Some(var)) => format!(
                "\tif {var}Given {{\n\t\t{lhs} = {iface}.{with}({})\n\t}} else {{\n\t\t{lhs} = {iface}.{without}({})\n\t}}\n",
                pass(Some(var)),
                pass(None)
            ),
            _ => format!("\t{lhs} = {iface}.{method}({})\n", pass(None)),
        }
    };
    match ok {
        None => {
            o.push_str(&invoke("err"));
            o.push_str("\treturn nil, err, nil\n");
        }
        Some(Ty::Option(inner)) => {
            let Ty::Named(n) = api.c.resolve(&inner) else {
                return Err(format!(
                    "{}: an optional answer of {inner:?}",
                    f.call_name()
                ));
            };
            let _ = write!(o, "\tvar r gak.{}\n\tvar ok bool\n", api.type_name(n));
            o.push_str(&invoke("r, ok, err"));
            let _ = write!(
                o,
                "\tif err != nil {{\n\t\treturn nil, err, nil\n\t}}\n\tif !ok {{\n\t\treturn nil, nil, nil\n\t}}\n\
                 \treturn {}, nil, nil\n",
                write_expr(api, &inner, "r")?
            );
        }
        Some(ty) => {
            let go = match api.abi.shape(&ty) {
                Ok(_) => api.go_type(&ty, "gak.")?,
                Err(_) => match &ty {
                    Ty::Named(n) => format!("gak.{}", api.type_name(n)),
                    other => return Err(format!("{}: an answer of {other:?}", f.call_name())),
                },
            };
            let _ = writeln!(o, "\tvar r {go}");
            o.push_str(&invoke("r, err"));
            let value = match &ty {
                Ty::Named(n) if matches!(api.c.named(n).kind, Kind::Variant(_)) => {
                    format!("write{}(r)", api.type_name(n))
                }
                _ => write_expr(api, &ty, "r")?,
            };
            let _ = write!(
                o,
                "\tif err != nil {{\n\t\treturn nil, err, nil\n\t}}\n\treturn {value}, nil, nil\n"
            );
        }
    }
    o.push_str("}\n");
    Ok(o)
}
