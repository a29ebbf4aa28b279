//! The block a host function's usual answer is written into with ONE
//! `struct` pack (`store.read`'s `answers`), laid out from the record's
//! fields: the result's `Val`, the record's, its entries, then a region per
//! field that needs one, in field order — an option's boxed `Val`; room for
//! the items of one list of (optional) strings, as many as [`BLOCK_ITEMS`]
//! says, with one writer per count; last, the `Val`s of one `list<u8>`
//! bounded as [`BLOCK_BYTES`] says, their kinds written once. Any other list
//! takes the block only when empty; a field of any other type leaves the
//! answer without a block.
use super::lower::{Lowerer, push_pack};
use super::vals::{Body, ENTRY, Shape, VAL, kind, shape};
use super::{Api, ident};
use crate::model::{Named, Ty};

/// Lists of (optional) strings a block holds items of in place, and how
/// many: a read's values (a claim reads one key, an acquire two).
pub(super) const BLOCK_ITEMS: &[(&str, &str, usize)] = &[("answers", "values", 4)];

/// `list<u8>` fields a block holds in place, and their bound (a Python
/// expression and where it comes from): a read's entropy.
pub(super) const BLOCK_BYTES: &[(&str, &str, &str, &str)] = &[(
    "answers",
    "entropy",
    "MAX_ENTROPY",
    "from .stores._facts import MAX_ENTROPY",
)];

/// Where a field of a block's record sits.
pub(super) enum Slot<'t> {
    /// In its entry (a number, a bool, a string, an enum).
    Inline,
    /// An option: its boxed `Val` at this offset.
    One(usize, &'t Ty),
    /// Up to `k` items of a list of strings: the options' `Val`s (if
    /// optional) and the strings' at these offsets.
    Items {
        opts: Option<usize>,
        strs: usize,
        k: usize,
    },
    /// A list the block takes only when empty.
    Empty,
    /// A `list<u8>`'s `Val`s at this offset, at most `bound` of them.
    Bytes(usize, &'static str),
}

/// A block's layout: each field's slot, where the packed part ends (the
/// bytes' region follows it) and the bytes' import, if any.
pub(super) struct Layout<'t> {
    pub slots: Vec<Slot<'t>>,
    pub packed: usize,
    pub bytes: Option<(usize, &'static str, &'static str)>,
}

pub(super) fn layout<'t>(api: &'t Api, record: &'t Named) -> Option<Layout<'t>> {
    let c = api.c;
    let fields = record.fields();
    let mut pos = 2 * VAL + ENTRY * fields.len();
    let mut slots = Vec::new();
    let mut items_taken = false;
    let mut bytes = None;
    for f in fields {
        let slot = match shape(c, &f.ty) {
            Shape::Bool
            | Shape::U8
            | Shape::U32
            | Shape::S32
            | Shape::U64
            | Shape::String
            | Shape::Enum(_) => Slot::Inline,
            Shape::Option(inner) => match shape(c, inner) {
                Shape::Bool | Shape::U8 | Shape::U32 | Shape::S32 | Shape::U64 | Shape::String => {
                    pos += VAL;
                    Slot::One(pos - VAL, inner)
                }
                _ => return None,
            },
            Shape::List(e) => {
                let listed = BLOCK_ITEMS
                    .iter()
                    .find(|(r, n, _)| *r == record.name && *n == f.name);
                let optional = match shape(c, e) {
                    Shape::String => Some(false),
                    Shape::Option(i) if matches!(shape(c, i), Shape::String) => Some(true),
                    _ => None,
                };
                match (listed, optional) {
                    (Some((_, _, k)), Some(optional)) if !items_taken => {
                        items_taken = true;
                        let opts = optional.then_some(pos);
                        if optional {
                            pos += VAL * k;
                        }
                        let strs = pos;
                        pos += VAL * k;
                        Slot::Items { opts, strs, k: *k }
                    }
                    _ => Slot::Empty,
                }
            }
            Shape::Bytes => {
                let listed = BLOCK_BYTES
                    .iter()
                    .find(|(r, n, _, _)| *r == record.name && *n == f.name);
                match listed {
                    Some((_, _, bound, import)) if bytes.is_none() => {
                        bytes = Some((0, *bound, *import));
                        Slot::Bytes(0, bound)
                    }
                    _ => Slot::Empty,
                }
            }
            _ => return None,
        };
        slots.push(slot);
    }
    // The bytes' region comes last: the pack writes every byte up to it.
    if let Some((_, bound, import)) = bytes {
        bytes = Some((pos, bound, import));
        for s in &mut slots {
            if let Slot::Bytes(at, _) = s {
                *at = pos;
            }
        }
    }
    Some(Layout {
        slots,
        packed: pos,
        bytes,
    })
}

/// Whether `v` is a local's name (not a literal or an expression).
fn is_local(v: &str) -> bool {
    v.chars()
        .next()
        .is_some_and(|ch| ch.is_ascii_alphabetic() || ch == '_')
        && v.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

/// The block writer of an answer holding `count` items: everything but
/// the bytes with one pack.
pub(super) fn block_fn(
    l: &mut Lowerer,
    record: &Named,
    lay: &Layout,
    prefix: &str,
    count: usize,
) -> Result<String, String> {
    let fields = record.fields();
    let locals: Vec<String> = fields.iter().map(|f| ident(&f.name)).collect();
    let mut params = vec!["b".to_owned()];
    params.extend(locals.iter().cloned());
    params.push("arena".into());
    let mut b = Body::new(&params.iter().map(String::as_str).collect::<Vec<_>>());
    let (mut efmt, mut evals) = (String::new(), Vec::<String>::new());
    let (mut rfmt, mut rvals) = (String::new(), Vec::<String>::new());
    for ((f, local), slot) in fields.iter().zip(&locals).zip(&lay.slots) {
        let (n, p) = l.field_name(&f.name);
        efmt.push_str("QQ");
        evals.push(n);
        evals.push(p);
        match slot {
            Slot::Inline => {
                let (fmt, vals) = l.val(&mut b, 0, &f.ty, local, local)?;
                efmt.push_str(&fmt);
                evals.extend(vals);
            }
            Slot::One(at, inner) => {
                let q = b.fresh(&format!("{local}_box"));
                let saved = std::mem::take(&mut b.lines);
                let (fmt, vals) = l.val(&mut b, 1, inner, local, local)?;
                let inner_lines = std::mem::replace(&mut b.lines, saved);
                let zeros: Vec<&String> = vals.iter().filter(|v| is_local(v)).collect();
                b.line(0, format!("if {local} is None:"));
                let mut none = vec![q.clone()];
                none.extend(zeros.iter().map(|z| (*z).clone()));
                none.dedup();
                b.line(1, format!("{} = 0", none.join(" = ")));
                b.line(0, "else:");
                b.lines.extend(inner_lines);
                b.line(1, format!("{q} = b + {at}"));
                efmt.push_str("B7xQ16x");
                evals.push(kind("OPTION").to_string());
                evals.push(q);
                rfmt.push_str(&fmt);
                rvals.extend(vals);
            }
            Slot::Items { opts, strs, k } => {
                let one = super::lift::singular(local);
                let items: Vec<String> =
                    (0..count).map(|i| b.fresh(&format!("{one}{i}"))).collect();
                if count > 0 {
                    b.unpack(0, &items, local);
                }
                let (mut ofmt, mut ovals) = (String::new(), Vec::new());
                let (mut sfmt, mut svals) = (String::new(), Vec::new());
                for (i, v) in items.iter().enumerate() {
                    match opts {
                        Some(_) => {
                            let o = b.fresh(&format!("{v}_box"));
                            let saved = std::mem::take(&mut b.lines);
                            let (n, p) = l.text(&mut b, 1, v, v);
                            let inner_lines = std::mem::replace(&mut b.lines, saved);
                            b.line(0, format!("if {v} is None:"));
                            b.line(1, format!("{o} = {n} = {p} = 0"));
                            b.line(0, "else:");
                            b.lines.extend(inner_lines);
                            // The option's payload: the address of its string's Val.
                            b.line(1, format!("{o} = b + {}", strs + VAL * i));
                            ofmt.push_str("B7xQ16x");
                            ovals.extend([kind("OPTION").to_string(), o]);
                            sfmt.push_str("B7xQQ8x");
                            svals.extend([kind("STRING").to_string(), n, p]);
                        }
                        None => {
                            let (n, p) = l.text(&mut b, 0, v, v);
                            sfmt.push_str("B7xQQ8x");
                            svals.extend([kind("STRING").to_string(), n, p]);
                        }
                    }
                }
                let pad = "32x".repeat(k - count);
                if opts.is_some() {
                    rfmt.push_str(&ofmt);
                    rfmt.push_str(&pad);
                }
                rfmt.push_str(&sfmt);
                rfmt.push_str(&pad);
                rvals.extend(ovals);
                rvals.extend(svals);
                let first = opts.unwrap_or(*strs);
                efmt.push_str("B7xQQ8x");
                evals.extend([
                    kind("LIST").to_string(),
                    count.to_string(),
                    if count > 0 {
                        format!("b + {first}")
                    } else {
                        "0".into()
                    },
                ]);
            }
            Slot::Empty => {
                efmt.push_str("B7xQQ8x");
                evals.extend([kind("LIST").to_string(), "0".into(), "0".into()]);
            }
            Slot::Bytes(at, _) => {
                let n = b.fresh(&format!("{local}_n"));
                let a = b.fresh(&format!("{local}_at"));
                b.line(0, format!("{n} = len({local})"));
                b.line(0, format!("{a} = b + {at}"));
                b.line(0, format!("if {n}:"));
                b.line(
                    1,
                    format!("MEM[{a} + 8 : {a} + 8 + {VAL} * {n} : {VAL}] = {local}"),
                );
                efmt.push_str("B7xQQ8x");
                evals.extend([
                    kind("LIST").to_string(),
                    n.clone(),
                    format!("{a} if {n} else 0"),
                ]);
            }
        }
    }
    let fmt = format!("<B7x?7xQ8xB7xQQ8x{efmt}{rfmt}");
    let mut vals = vec![
        kind("RESULT").to_string(),
        "True".into(),
        format!("b + {VAL}"),
        kind("RECORD").to_string(),
        fields.len().to_string(),
        format!("b + {}", 2 * VAL),
    ];
    vals.extend(evals);
    vals.extend(rvals);
    let name = format!("_{prefix}_block_{count}");
    let pack = l.defs.packer(
        &format!("_PUT{}", name.to_uppercase()),
        &fmt,
        "pack_into",
        &format!(
            "The block of an answer of {count} item(s): the result's ``Val``, the record's, its entries and the regions, up to the bytes'."
        ),
    );
    push_pack(&mut b, 0, &pack, "b", &vals);
    b.line(0, "return True");
    let head = format!(
        "def {name}({}) -> Optional[bool]:\n\
         \x20   \"\"\"An ``ok`` ``{}`` of {count} item(s) into the block at ``b`` (``None``:\n\
         \x20   a value the block does not take).\"\"\"\n",
        params
            .iter()
            .map(|p| match p.as_str() {
                "b" => "b: int".to_owned(),
                "arena" => "arena: Arena".to_owned(),
                other => format!("{other}: Any"),
            })
            .collect::<Vec<_>>()
            .join(", "),
        record.name
    );
    Ok(b.function(&head))
}
