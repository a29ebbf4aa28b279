//! The contract as the generators see it: `wit/` parsed by `wit-parser`
//! and flattened into named types and functions, in declaration order,
//! with every alias a `use` made resolved to the type it names.
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use wit_parser::{Resolve, Type, TypeDefKind, TypeOwner, WorldItem, WorldKey};

/// A value type, with every anonymous type spelled out and every named one
/// by its WIT name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ty {
    Bool,
    U8,
    U32,
    S32,
    U64,
    String,
    List(Box<Ty>),
    Option(Box<Ty>),
    Tuple(Vec<Ty>),
    Result(Option<Box<Ty>>, Option<Box<Ty>>),
    /// A named type (record, enum, variant or alias), by WIT name.
    Named(String),
}

/// A record field, a function parameter.
#[derive(Clone, Debug)]
pub struct Field {
    pub name: String,
    pub ty: Ty,
    pub docs: String,
}

/// An enum case (no payload) or a variant case (an optional payload).
#[derive(Clone, Debug)]
pub struct Case {
    pub name: String,
    pub ty: Option<Ty>,
    pub docs: String,
}

#[derive(Clone, Debug)]
pub enum Kind {
    Record(Vec<Field>),
    Enum(Vec<Case>),
    Variant(Vec<Case>),
    /// `type millis = u64`.
    Alias(Ty),
}

/// A named type of the contract.
#[derive(Clone, Debug)]
pub struct Named {
    pub name: String,
    /// The interface that defines it.
    pub interface: String,
    pub docs: String,
    pub kind: Kind,
}

impl Named {
    pub fn fields(&self) -> &[Field] {
        match &self.kind {
            Kind::Record(fields) => fields,
            _ => &[],
        }
    }

    pub fn cases(&self) -> &[Case] {
        match &self.kind {
            Kind::Enum(cases) | Kind::Variant(cases) => cases,
            _ => &[],
        }
    }
}

/// An exported or imported function.
#[derive(Clone, Debug)]
pub struct Function {
    pub interface: String,
    pub name: String,
    pub docs: String,
    pub params: Vec<Field>,
    pub result: Option<Ty>,
}

impl Function {
    /// The vectors' name of the call: `taskboard.claim`.
    pub fn call_name(&self) -> String {
        format!("{}.{}", self.interface, self.name)
    }

    /// The `ok` type of a `result<T, error>` answer (None: `result<_, error>`).
    pub fn ok(&self) -> Option<&Ty> {
        match &self.result {
            Some(Ty::Result(ok, _)) => ok.as_deref(),
            other => other.as_ref(),
        }
    }
}

/// An interface of the world.
#[derive(Clone, Debug)]
pub struct Interface {
    pub name: String,
    pub docs: String,
    /// Exported by the component (else imported).
    pub export: bool,
    pub functions: Vec<Function>,
}

/// The whole contract.
#[derive(Clone, Debug)]
pub struct Contract {
    /// `gak:kernel`.
    pub package: String,
    /// `0.3.0`.
    pub version: String,
    /// The interfaces in the world's order (imports, then exports), plus
    /// `types`, which only defines types.
    pub interfaces: Vec<Interface>,
    /// Every named type, in declaration order (a type's parts come first).
    pub types: Vec<Named>,
}

impl Contract {
    /// Parse `wit_dir` (one package, world `kernel`).
    pub fn load(wit_dir: &Path) -> Result<Contract, String> {
        let mut resolve = Resolve::default();
        let (package, _) = resolve
            .push_dir(wit_dir)
            .map_err(|e| format!("{}: {e:#}", wit_dir.display()))?;
        let world = resolve
            .select_world(&[package], Some("kernel"))
            .map_err(|e| format!("world kernel: {e:#}"))?;
        let pkg = &resolve.packages[package];
        let version = pkg
            .name
            .version
            .as_ref()
            .map(ToString::to_string)
            .ok_or("the package has no version")?;
        let mut contract = Contract {
            package: format!("{}:{}", pkg.name.namespace, pkg.name.name),
            version,
            interfaces: Vec::new(),
            types: Vec::new(),
        };
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        // Types in the arena's (topological) order, skipping the aliases a
        // `use` creates and anonymous types.
        for (_, def) in resolve.types.iter() {
            let (Some(name), TypeOwner::Interface(owner)) = (&def.name, def.owner) else {
                continue;
            };
            let interface = resolve.interfaces[owner]
                .name
                .clone()
                .ok_or("an unnamed interface defines a type")?;
            let kind = match &def.kind {
                TypeDefKind::Type(Type::Id(id)) if resolve.types[*id].name.is_some() => {
                    continue; // `use types.{error}`
                }
                TypeDefKind::Type(t) => Kind::Alias(ty(&resolve, t)?),
                TypeDefKind::Record(r) => Kind::Record(
                    r.fields
                        .iter()
                        .map(|f| {
                            Ok(Field {
                                name: f.name.clone(),
                                ty: ty(&resolve, &f.ty)?,
                                docs: docs(&f.docs),
                            })
                        })
                        .collect::<Result<_, String>>()?,
                ),
                TypeDefKind::Enum(e) => Kind::Enum(
                    e.cases
                        .iter()
                        .map(|c| Case {
                            name: c.name.clone(),
                            ty: None,
                            docs: docs(&c.docs),
                        })
                        .collect(),
                ),
                TypeDefKind::Variant(v) => Kind::Variant(
                    v.cases
                        .iter()
                        .map(|c| {
                            Ok(Case {
                                name: c.name.clone(),
                                ty: c.ty.as_ref().map(|t| ty(&resolve, t)).transpose()?,
                                docs: docs(&c.docs),
                            })
                        })
                        .collect::<Result<_, String>>()?,
                ),
                other => return Err(format!("type {name}: {other:?} is not supported")),
            };
            if let Some(first) = seen.insert(name.clone(), interface.clone()) {
                return Err(format!(
                    "type {name} is defined in {first} and {interface}: names must be unique"
                ));
            }
            contract.types.push(Named {
                name: name.clone(),
                interface,
                docs: docs(&def.docs),
                kind,
            });
        }
        let world = &resolve.worlds[world];
        let items = world
            .imports
            .iter()
            .map(|i| (false, i))
            .chain(world.exports.iter().map(|e| (true, e)));
        let mut listed = Vec::new();
        for (export, (key, item)) in items {
            let (WorldKey::Interface(id), WorldItem::Interface { .. }) = (key, item) else {
                continue;
            };
            listed.push(*id);
            contract.interfaces.push(interface(&resolve, *id, export)?);
        }
        // Interfaces that only define types (`types`).
        for (id, i) in resolve.interfaces.iter() {
            if i.package == Some(package) && !listed.contains(&id) && i.functions.is_empty() {
                contract.interfaces.push(interface(&resolve, id, false)?);
            }
        }
        Ok(contract)
    }

    /// The named type `name`.
    pub fn named(&self, name: &str) -> &Named {
        self.types
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no type {name} in the contract"))
    }

    /// The exported interfaces, in the world's order.
    pub fn exports(&self) -> impl Iterator<Item = &Interface> {
        self.interfaces.iter().filter(|i| i.export)
    }

    /// Every exported function, interface by interface.
    pub fn exported_functions(&self) -> impl Iterator<Item = &Function> {
        self.exports().flat_map(|i| i.functions.iter())
    }

    /// The cases of the contract's `error` variant.
    pub fn error_codes(&self) -> Vec<&Case> {
        self.named("error").cases().iter().collect()
    }

    /// The store's table names.
    pub fn tables(&self) -> Vec<&str> {
        self.named("table")
            .cases()
            .iter()
            .map(|c| c.name.as_str())
            .collect()
    }

    /// Add to `into` the named types `ty` reaches: itself, its fields,
    /// payloads, elements and what its aliases name.
    pub fn reach(&self, ty: &Ty, into: &mut BTreeSet<String>) {
        match ty {
            Ty::List(t) | Ty::Option(t) => self.reach(t, into),
            Ty::Tuple(ts) => ts.iter().for_each(|t| self.reach(t, into)),
            Ty::Result(ok, err) => [ok, err]
                .into_iter()
                .flatten()
                .for_each(|t| self.reach(t, into)),
            Ty::Named(n) => {
                if !into.insert(n.clone()) {
                    return;
                }
                match &self.named(n).kind {
                    Kind::Record(fields) => fields.iter().for_each(|f| self.reach(&f.ty, into)),
                    Kind::Variant(cases) => cases
                        .iter()
                        .filter_map(|k| k.ty.as_ref())
                        .for_each(|t| self.reach(t, into)),
                    Kind::Alias(t) => self.reach(t, into),
                    Kind::Enum(_) => {}
                }
            }
            _ => {}
        }
    }

    /// The named types the exported functions' parameters reach, and those
    /// their answers' `ok` types reach (the error is not an answer's).
    pub fn exported_reach(&self) -> (BTreeSet<String>, BTreeSet<String>) {
        let (mut inputs, mut outputs) = (BTreeSet::new(), BTreeSet::new());
        for f in self.exported_functions() {
            for p in &f.params {
                self.reach(&p.ty, &mut inputs);
            }
            if let Some(ok) = f.ok() {
                self.reach(ok, &mut outputs);
            }
        }
        (inputs, outputs)
    }

    /// `ty` with aliases replaced by what they name.
    pub fn resolve<'a>(&'a self, ty: &'a Ty) -> &'a Ty {
        match ty {
            Ty::Named(name) => match &self.named(name).kind {
                Kind::Alias(inner) => self.resolve(inner),
                _ => ty,
            },
            _ => ty,
        }
    }
}

fn interface(
    resolve: &Resolve,
    id: wit_parser::InterfaceId,
    export: bool,
) -> Result<Interface, String> {
    let i = &resolve.interfaces[id];
    let name = i.name.clone().ok_or("an unnamed interface")?;
    let functions = i
        .functions
        .values()
        .map(|f| {
            Ok(Function {
                interface: name.clone(),
                name: f.name.clone(),
                docs: docs(&f.docs),
                params: f
                    .params
                    .iter()
                    .map(|p| {
                        Ok(Field {
                            name: p.name.clone(),
                            ty: ty(resolve, &p.ty)?,
                            docs: String::new(),
                        })
                    })
                    .collect::<Result<_, String>>()?,
                result: f.result.as_ref().map(|t| ty(resolve, t)).transpose()?,
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(Interface {
        name,
        docs: docs(&i.docs),
        export,
        functions,
    })
}

fn docs(d: &wit_parser::Docs) -> String {
    d.contents.clone().unwrap_or_default().trim_end().to_owned()
}

fn ty(resolve: &Resolve, t: &Type) -> Result<Ty, String> {
    Ok(match t {
        Type::Bool => Ty::Bool,
        Type::U8 => Ty::U8,
        Type::U32 => Ty::U32,
        Type::S32 => Ty::S32,
        Type::U64 => Ty::U64,
        Type::String => Ty::String,
        Type::Id(id) => {
            let def = &resolve.types[*id];
            if let Some(name) = &def.name {
                // A `use` alias names the type it brings in.
                let mut target = *id;
                while let TypeDefKind::Type(Type::Id(next)) = &resolve.types[target].kind {
                    if resolve.types[*next].name.is_none() {
                        break;
                    }
                    target = *next;
                }
                let _ = name;
                return Ok(Ty::Named(
                    resolve.types[target].name.clone().expect("named"),
                ));
            }
            match &def.kind {
                TypeDefKind::List(inner) => Ty::List(Box::new(ty(resolve, inner)?)),
                TypeDefKind::Option(inner) => Ty::Option(Box::new(ty(resolve, inner)?)),
                TypeDefKind::Tuple(t) => Ty::Tuple(
                    t.types
                        .iter()
                        .map(|x| ty(resolve, x))
                        .collect::<Result<_, _>>()?,
                ),
                TypeDefKind::Result(r) => Ty::Result(
                    r.ok.as_ref()
                        .map(|x| ty(resolve, x))
                        .transpose()?
                        .map(Box::new),
                    r.err
                        .as_ref()
                        .map(|x| ty(resolve, x))
                        .transpose()?
                        .map(Box::new),
                ),
                TypeDefKind::Type(inner) => ty(resolve, inner)?,
                other => return Err(format!("anonymous {other:?} is not supported")),
            }
        }
        other => return Err(format!("{other:?} is not used by the contract")),
    })
}
