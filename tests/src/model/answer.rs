//! Answers of operations, and how the kernel's are compared with the
//! model's.
//!
//! An answer ([`Out`]) is generic in how tokens are represented: [`H`] (the
//! model's numbered handle) for the model, `String` for the kernel. Random
//! tokens are compared structurally: the first real token seen for a handle
//! is bound to it ([`Binder`]), and from then on the binding must hold both
//! ways (a fresh handle must get a token never seen before, 128-bit
//! lowercase hex). Everything else is compared field by field, errors by
//! name.
use std::collections::HashMap;

use gak::{KeyInfo, Outcome, Resolved, Snapshot, TaskState};

use super::H;

/// An answer of one operation, generic in how tokens are represented: `H`
/// for the model, `String` for the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Out<T> {
    Unit,
    Task(TaskV<T>),
    Tasks(Vec<TaskV<T>>),
    Acq(AcqV<T>),
    Lease(LeaseV<T>),
    Bytes(Vec<u8>),
    Claim {
        claim: T,
        until: u64,
    },
    Resolved(Resolved),
    Snap(Snapshot),
    Outcome(Outcome),
    /// A sink's seen fence.
    Seen(u64),
    /// The downstream value a sink's body wrote.
    Marker(Option<String>),
    /// A side-effect key as an operator sees it (never a holder or claim).
    Key(KeyInfo),
    /// `complete-batch`: each item's id and answer (`Unit` for completed,
    /// an error otherwise), in the order given.
    Items(Vec<(String, Out<T>)>),
    /// `get-group`: the limit and the live claims.
    Group {
        limit: u32,
        live: u32,
    },
    /// The error's kebab-case name (`storage: why` for storage failures,
    /// which the model never expects).
    Err(String),
    /// Model only: SPEC leaves the choice between these refusals open.
    ErrOneOf(Vec<&'static str>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskV<T> {
    pub id: String,
    pub title: String,
    pub deps: Vec<String>,
    pub state: TaskState,
    pub owner: Option<String>,
    pub token: Option<T>,
    pub until: Option<u64>,
    pub fence: u64,
    /// SPEC 10's fields.
    pub priority: i32,
    pub not_before: Option<u64>,
    pub max_attempts: Option<u32>,
    pub group: Option<String>,
    pub attempts: u32,
    pub last_error: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseV<T> {
    pub key: String,
    pub resource: String,
    pub fence: u64,
    pub holder: T,
    pub until: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AcqV<T> {
    Granted(LeaseV<T>),
    Replayed(Vec<u8>),
    Uncertain(String),
    InFlight,
    Contended(u64),
}

impl<T> TaskV<T> {
    fn map<U>(self, f: &mut impl FnMut(T) -> U) -> TaskV<U> {
        TaskV {
            id: self.id,
            title: self.title,
            deps: self.deps,
            state: self.state,
            owner: self.owner,
            token: self.token.map(f),
            until: self.until,
            fence: self.fence,
            priority: self.priority,
            not_before: self.not_before,
            max_attempts: self.max_attempts,
            group: self.group,
            attempts: self.attempts,
            last_error: self.last_error,
        }
    }
}

impl<T> LeaseV<T> {
    fn map<U>(self, f: &mut impl FnMut(T) -> U) -> LeaseV<U> {
        LeaseV {
            key: self.key,
            resource: self.resource,
            fence: self.fence,
            holder: f(self.holder),
            until: self.until,
        }
    }
}

impl<T> Out<T> {
    fn map<U>(self, f: &mut impl FnMut(T) -> U) -> Out<U> {
        match self {
            Out::Unit => Out::Unit,
            Out::Task(t) => Out::Task(t.map(f)),
            Out::Tasks(ts) => Out::Tasks(ts.into_iter().map(|t| t.map(f)).collect()),
            Out::Acq(a) => Out::Acq(match a {
                AcqV::Granted(l) => AcqV::Granted(l.map(f)),
                AcqV::Replayed(r) => AcqV::Replayed(r),
                AcqV::Uncertain(r) => AcqV::Uncertain(r),
                AcqV::InFlight => AcqV::InFlight,
                AcqV::Contended(u) => AcqV::Contended(u),
            }),
            Out::Lease(l) => Out::Lease(l.map(f)),
            Out::Bytes(b) => Out::Bytes(b),
            Out::Claim { claim, until } => Out::Claim {
                claim: f(claim),
                until,
            },
            Out::Resolved(r) => Out::Resolved(r),
            Out::Snap(s) => Out::Snap(s),
            Out::Outcome(o) => Out::Outcome(o),
            Out::Seen(seen) => Out::Seen(seen),
            Out::Marker(m) => Out::Marker(m),
            Out::Key(k) => Out::Key(k),
            Out::Items(items) => Out::Items(
                items
                    .into_iter()
                    .map(|(id, out)| (id, out.map(&mut *f)))
                    .collect(),
            ),
            Out::Group { limit, live } => Out::Group { limit, live },
            Out::Err(e) => Out::Err(e),
            Out::ErrOneOf(e) => Out::ErrOneOf(e),
        }
    }

    /// The answer with its tokens taken out (in a fixed order).
    fn split(self) -> (Out<()>, Vec<T>) {
        let mut tokens = Vec::new();
        let shape = self.map(&mut |t| tokens.push(t));
        (shape, tokens)
    }
}

/// The bijection between model handles and the kernel's random tokens.
#[derive(Clone, Debug, Default)]
pub struct Binder {
    real: HashMap<H, String>,
    handle: HashMap<String, H>,
}

impl Binder {
    /// Has no token been bound yet?
    pub fn is_empty(&self) -> bool {
        self.real.is_empty()
    }

    fn bind(&mut self, h: H, s: &str) -> Result<(), String> {
        if let Some(known) = self.real.get(&h) {
            return if known == s {
                Ok(())
            } else {
                Err(format!("token #{h} was {known}, now {s}"))
            };
        }
        if let Some(other) = self.handle.get(s) {
            return Err(format!(
                "a freshly minted token (#{h}) repeats token #{other} ({s})"
            ));
        }
        if s.len() != 32 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(format!("token {s:?} is not 128 bits of lowercase hex"));
        }
        self.real.insert(h, s.to_owned());
        self.handle.insert(s.to_owned(), h);
        Ok(())
    }
}

/// Does the kernel's answer match the model's? Binds fresh tokens on success
/// (and only then).
pub fn compare(model: &Out<H>, real: &Out<String>, binder: &mut Binder) -> Result<(), String> {
    let mismatch = || format!("\n    model:  {model:?}\n    kernel: {real:?}");
    if let Out::ErrOneOf(names) = model {
        return match real {
            Out::Err(n) if names.contains(&n.as_str()) => Ok(()),
            _ => Err(mismatch()),
        };
    }
    let (mshape, mtokens) = settle_one_of(model, real).split();
    let (rshape, rtokens) = real.clone().split();
    if mshape != rshape {
        return Err(mismatch());
    }
    let mut next = binder.clone();
    for (h, s) in mtokens.into_iter().zip(rtokens) {
        next.bind(h, &s).map_err(|e| format!("{e}{}", mismatch()))?;
    }
    *binder = next;
    Ok(())
}

/// The model's answer with each item's open choice (`ErrOneOf`, inside
/// `complete-batch` answers) settled by the kernel's answer when that is
/// one of the choices.
fn settle_one_of(model: &Out<H>, real: &Out<String>) -> Out<H> {
    match (model, real) {
        (Out::Items(m), Out::Items(r)) if m.len() == r.len() => Out::Items(
            m.iter()
                .zip(r)
                .map(|((id, mo), (_, ro))| {
                    let settled = match (mo, ro) {
                        (Out::ErrOneOf(names), Out::Err(n)) if names.contains(&n.as_str()) => {
                            Out::Err(n.clone())
                        }
                        _ => mo.clone(),
                    };
                    (id.clone(), settled)
                })
                .collect(),
        ),
        _ => model.clone(),
    }
}
