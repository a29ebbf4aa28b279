//! `gak/_store_abi.py`: the store import's batches across the boundary. A
//! call crosses into the host once or twice (`store.read`, `store.write`),
//! so these values are most of what the host lifts and lowers per call:
//!
//! - each import function's one argument is lifted by the code of
//!   `lift.rs` (`LIFT_ARGS`): lists of records in one loop, a table's name
//!   by two bytes;
//! - a function answering `result<R, E>` with a record `R` (`store.read`'s
//!   `answers`) has its usual `ok` written into a block of the arena laid
//!   out once, with ONE `struct` pack (`block.rs`; `LOWER_RESULTS`); any
//!   other `ok` is lowered by the code of `lower.rs`, an `err` by the codecs.
use std::fmt::Write as _;

use super::block::{Slot, block_fn, layout};
use super::lift::Lifter;
use super::lower::{Lowerer, alloc};
use super::vals::{Body, Shape, VAL, kind, shape};
use super::{Api, head, ident, lit, section};
use crate::model::{Function, Named, Ty};

/// The lowering of `f`'s answer (`result<record, E>`): its name and the
/// definitions, with the block's size and preparation when it has one.
struct Answer {
    name: String,
    text: String,
    block: Option<(String, String)>,
    imports: Vec<&'static str>,
}

fn answer(l: &mut Lowerer, f: &Function, record: &Named) -> Result<Answer, String> {
    let prefix = crate::names::snake(&f.name);
    let fields = record.fields();
    let locals: Vec<String> = fields.iter().map(|f| ident(&f.name)).collect();
    let mut text = String::new();
    // The general lowering of `ok`, into the result's Val at `at`.
    let general = format!("_{prefix}_ok");
    {
        let mut b = Body::new(&["ok", "arena", "at"]);
        let rty = Ty::Named(record.name.clone());
        let (fmt, vals) = l.val(&mut b, 0, &rty, "ok", "ok")?;
        let q = b.fresh("record_at");
        alloc(&mut b, 0, &q, VAL);
        let pack = super::vals::val_packer(&mut l.defs, &fmt);
        b.line(0, format!("{pack}(MEM, {q}, {})", vals.join(", ")));
        let ok = l.defs.packer(
            "_PUT_OK_VAL",
            "<B7x?7xQ8x",
            "pack_into",
            "An ``ok`` result's ``Val``.",
        );
        b.line(0, format!("{ok}(MEM, at, {}, True, {q})", kind("RESULT")));
        b.line(0, "return True");
        let _ = write!(
            text,
            "\n\ndef {general}(ok: Any, arena: Arena, at: int) -> Optional[bool]:\n\
             \x20   \"\"\"``{}``'s ``ok`` into the result ``Val`` at ``at`` (``None``: a value\n\
             \x20   not of the types taken here).\"\"\"\n{}",
            f.call_name(),
            b.lines.iter().map(|l| format!("{l}\n")).collect::<String>()
        );
    }
    let lay = layout(l.api, record);
    let name = format!("_{prefix}_result");
    let mut block = None;
    let mut imports = Vec::new();
    let mut conditions = Vec::new();
    let mut blocks = String::new();
    if let Some(lay) = &lay {
        let most = lay.slots.iter().find_map(|s| match s {
            Slot::Items { k, .. } => Some(*k),
            _ => None,
        });
        let counts: Vec<usize> = match most {
            Some(k) => (0..=k).collect(),
            None => vec![0],
        };
        for count in &counts {
            let _ = write!(text, "\n\n{}", block_fn(l, record, lay, &prefix, *count)?);
        }
        let writers: Vec<String> = counts
            .iter()
            .map(|n| format!("_{prefix}_block_{n}"))
            .collect();
        let _ = write!(
            blocks,
            "\n\n#: The block writers by how many items the answer has.\n_{}_BLOCKS = ({}{})\n",
            prefix.to_uppercase(),
            writers.join(", "),
            if writers.len() == 1 { "," } else { "" }
        );
        for ((f, local), slot) in fields.iter().zip(&locals).zip(&lay.slots) {
            match slot {
                Slot::Empty => conditions.push(format!("not {local}")),
                Slot::Items { k, .. } => conditions.push(format!("len({local}) <= {k}")),
                Slot::Bytes(_, bound) => conditions.push(format!(
                    "type({local}) is bytes and len({local}) <= {bound}"
                )),
                _ => {}
            }
            let _ = f;
        }
        let size = match lay.bytes {
            Some((at, bound, import)) => {
                imports.push(import);
                format!("{at} + {VAL} * {bound}")
            }
            None => lay.packed.to_string(),
        };
        let mut prepare = String::from(
            "def prepare_block(at: int) -> None:\n\
             \x20   \"\"\"Write, once, what every block at ``at`` keeps: the kinds of its bytes'\n\
             \x20   ``Val``s.\"\"\"\n",
        );
        match lay.bytes {
            Some((at, bound, _)) => {
                let _ = writeln!(
                    prepare,
                    "    MEM[at + {at} : at + {at} + {VAL} * {bound} : {VAL}] = b\"\\x{:02x}\" * {bound}",
                    kind("U8")
                );
            }
            None => prepare.push_str("    return\n"),
        }
        block = Some((size, prepare));
    }
    let items = lay.as_ref().and_then(|lay| {
        fields.iter().zip(&lay.slots).find_map(|(f, s)| match s {
            Slot::Items { .. } => Some(ident(&f.name)),
            _ => None,
        })
    });
    text.push_str(&blocks);
    let _ = write!(
        text,
        "\n\ndef {name}(value: Any, arena: Arena) -> Any:\n\
         \x20   \"\"\"``{}``'s answer (``{}``) into ``arena``:\n\
         \x20   the ctypes address of its ``Val``. The usual ``ok`` is written into the\n\
         \x20   arena's block with ONE pack, any other by the general lowering; ``None``\n\
         \x20   for an ``err`` or a value not taken here (the codecs lower it).\"\"\"\n\
         \x20   if not value[0]:\n\
         \x20       return None\n\
         \x20   ok = value[1]\n",
        f.call_name(),
        super::signatures::wit(f.result.as_ref().expect("a result"))
    );
    if lay.is_some() {
        let k = fields.len();
        let _ = write!(
            text,
            "    if type(ok) is tuple and len(ok) == {k}:\n\
             \x20       {}{} = ok\n\
             \x20       if {}:\n\
             \x20           if _{}_BLOCKS[{}](arena.block, {}, arena):\n\
             \x20               return arena.c_block\n",
            locals.join(", "),
            if k == 1 { "," } else { "" },
            if conditions.is_empty() {
                "True".into()
            } else {
                conditions.join(" and ")
            },
            prefix.to_uppercase(),
            items.map_or("0".into(), |i| format!("len({i})")),
            locals.join(", ")
        );
    }
    let _ = write!(
        text,
        "    if {general}(ok, arena, arena.slots):\n\
         \x20       return arena.c_out\n\
         \x20   return None\n"
    );
    Ok(Answer {
        name,
        text,
        block,
        imports,
    })
}

/// `_store_abi.py`.
pub(super) fn emit(api: &Api) -> Result<String, String> {
    let c = api.c;
    let mut lifts = Lifter::new(api);
    let mut lowers = Lowerer::new(api, false);
    let mut lift_table = String::new();
    let mut lower_table = String::new();
    let mut answers = String::new();
    let mut block: Option<(String, String)> = None;
    let mut imports: Vec<&str> = Vec::new();
    for i in c.interfaces.iter().filter(|i| !i.export) {
        for f in &i.functions {
            let key = lit(&format!("{}#{}", f.interface, f.name));
            if let [p] = f.params.as_slice() {
                let _ = writeln!(lift_table, "    {key}: {},", lifts.val_fn(&p.ty)?);
            }
            let Some(Ty::Result(Some(ok), _)) = &f.result else {
                continue;
            };
            let Shape::Record(record) = shape(c, ok) else {
                continue;
            };
            let a = answer(&mut lowers, f, record)?;
            let _ = writeln!(lower_table, "    {key}: {},", a.name);
            answers.push_str(&a.text);
            imports.extend(a.imports);
            if let Some(b) = a.block {
                if block.is_some() {
                    return Err(format!(
                        "{}: a second import answering a record in a block; the arena has one \
                         (host/gen/src/emit/python/store_abi.rs)",
                        f.call_name()
                    ));
                }
                block = Some(b);
            }
        }
    }
    let mut o = head(
        c,
        "The store import's batches across the boundary (from ``wit/``): what a\n\
         host function receives, lifted (:data:`LIFT_ARGS`: lists of records in one\n\
         loop, a table's name by two bytes), and what it answers, lowered\n\
         (:data:`LOWER_RESULTS`): ``store.read``'s usual answer with ONE pack into\n\
         a block of the arena laid out once (:data:`BLOCK_SIZE`, written by\n\
         :func:`prepare_block` when the arena is made), any other ``ok`` by the\n\
         general lowering, an ``err`` by the codecs. The offsets are the WIT's types\n\
         laid out as :mod:`gak._layout` says; kinds are written as numbers (12 is a\n\
         string).\n",
    );
    o.push_str("\nimport struct\nfrom typing import Any, Callable, Optional\n\n");
    o.push_str(
        "from ._mem import MEM, MEMQ, TX, ZERO_COPY, Arena, constant, constants, encoded, words\n",
    );
    imports.sort();
    imports.dedup();
    for i in imports {
        o.push_str(i);
        o.push('\n');
    }
    let _ = write!(o, "\n\n{}", section("arguments"));
    for d in &lifts.defs.text {
        o.push_str("\n\n");
        o.push_str(d);
    }
    let _ = write!(o, "\n\n{}", section("answers"));
    for d in &lowers.defs.text {
        o.push_str("\n\n");
        o.push_str(d);
    }
    o.push_str(&answers);
    let (size, prepare) = block.unwrap_or_else(|| {
        (
            "0".into(),
            "def prepare_block(at: int) -> None:\n    \"\"\"No answer has a block.\"\"\"\n".into(),
        )
    });
    let _ = write!(
        o,
        "\n\n#: The bytes of an arena's block (see :func:`prepare_block`).\nBLOCK_SIZE = {size}\n\n\n{prepare}"
    );
    let _ = write!(
        o,
        "\n\n#: The lift of each import function's one argument (``interface#function``).\n\
         LIFT_ARGS: dict[str, Callable[[int], Any]] = {{\n{lift_table}}}\n\
         \n#: The lowering of each import function's answer that has one.\n\
         LOWER_RESULTS: dict[str, Callable[[Any, Arena], Any]] = {{\n{lower_table}}}\n"
    );
    if !lifts.news.is_empty() || !lifts.classes.is_empty() {
        return Err("the store import's types are no API types".into());
    }
    Ok(super::lift::tidy(o))
}
