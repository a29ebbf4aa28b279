//! `gak/_new.py`: a constructor of every dataclass the lifts build (the
//! records the exports answer, the variants' case classes), taking every
//! field positionally in the WIT's order and filling the instance's
//! `__dict__` directly: a frozen dataclass's generated `__init__` sets each
//! field through `object.__setattr__`, about three times the cost, on
//! every answer. The instance is the same (type, fields, equality, hash,
//! repr); `types.py` gives these classes no `__post_init__` and no slots.
use std::fmt::Write as _;

use super::lift::import_list;
use super::wire::ident_of;
use super::{Api, class_name, fn_name, head, ident, section};
use crate::model::Kind;

/// Names the constructors use themselves: a field taking one gets `_`.
const TAKEN: &[&str] = &["o", "d", "new"];

pub(super) fn emit(api: &Api) -> Result<String, String> {
    let mut body = String::new();
    let mut classes = std::collections::BTreeSet::new();
    let mut interface = "";
    for t in &api.types {
        if !api.outputs.contains(&t.name) {
            continue;
        }
        let mut made: Vec<(String, String, Vec<String>)> = Vec::new();
        match &t.kind {
            Kind::Record(fields) => made.push((
                class_name(t),
                fn_name(t),
                fields.iter().map(|f| f.name.clone()).collect(),
            )),
            Kind::Variant(cases) => {
                for case in cases {
                    let k = api.case(case);
                    if k.variant != t.name {
                        continue; // made with the variant that has it first
                    }
                    made.push((
                        k.class.clone(),
                        ident_of(&k.class),
                        k.field.iter().map(|f| f.replace('_', "-")).collect(),
                    ));
                }
            }
            _ => continue,
        }
        if t.interface != interface {
            interface = &t.interface;
            let _ = write!(body, "\n\n{}", section(interface));
        }
        for (class, f, fields) in made {
            classes.insert(class.clone());
            let params: Vec<String> = fields
                .iter()
                .map(|n| {
                    let id = ident(n);
                    if TAKEN.contains(&id.as_str()) {
                        id + "_"
                    } else {
                        id
                    }
                })
                .collect();
            let _ = write!(
                body,
                "\n\ndef new_{f}({}) -> {class}:\n\
                 \x20   \"\"\"A :class:`~gak.types.{class}` from its fields in the WIT's order.\"\"\"\n\
                 \x20   o = new({class})\n",
                params
                    .iter()
                    .map(|p| format!("{p}: Any"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if !fields.is_empty() {
                body.push_str("    d = o.__dict__\n");
            }
            for (n, p) in fields.iter().zip(&params) {
                let _ = writeln!(body, "    d[{}] = {p}", super::lit(&ident(n)));
            }
            body.push_str("    return o\n");
        }
    }
    let mut o = head(
        api.c,
        "Constructors of the dataclasses the lifts build (from ``wit/``): each takes\n\
         every field positionally, in the WIT's order, and fills the instance's\n\
         ``__dict__`` directly, where a frozen dataclass's ``__init__`` sets each field\n\
         through ``object.__setattr__``, about three times the cost, on every answer.\n\
         The instance is the same: same type, fields, equality, hash and repr.\n",
    );
    o.push_str("\nfrom typing import Any\n\n");
    o.push_str(&import_list(".types", &classes));
    o.push_str("\n#: Makes an instance without calling its ``__init__``.\nnew = object.__new__\n");
    o.push_str(&body);
    Ok(super::lift::tidy(o))
}
