//! The primitives of the vectors' JSON shape (`host/gen/README.md`) as the
//! Rust runner's generated call table spells them: what an absent value
//! reads as, which wrong value is a malformed vector and which the call's
//! `invalid-input`. `calls.rs` writes the ones its readers and writers use.

/// What every call table holds: the two ways args can be wrong, and how a
/// field is found (`null` is absent).
pub(super) const PREAMBLE: &str = "/// A problem with the args themselves.
pub(super) enum Arg {
    /// A value no caller should send (an enum name the contract does not
    /// have, a number outside the type's range): the call's answer is
    /// `invalid-input`.
    Invalid(String),
    /// The vector is malformed (a value of the wrong JSON type, a missing
    /// record): the scenario fails.
    Malformed(String),
}

pub(super) type A<T> = Result<T, Arg>;

/// The value under `key` of an object; `null` is absent.
pub(super) fn field<'a>(obj: &'a Value, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

fn malformed(at: &str, expected: &str, got: &Value) -> Arg {
    Arg::Malformed(format!(\"{at}: expected {expected}, got {got}\"))
}

";

/// The helpers the generated code may call, in the order they are written.
pub(super) const HELPERS: &[(&str, &str)] = &[
    (
        "read_string",
        "/// A string; absent is empty (the component then judges it).
pub(super) fn read_string(v: Option<&Value>, at: &str) -> A<String> {
    match v {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(malformed(at, \"a string\", other)),
    }
}",
    ),
    (
        "read_u64",
        "/// A number; absent is 0. One that is not a `u64` (negative, fractional,
/// too large) is `invalid-input`.
pub(super) fn read_u64(v: Option<&Value>, at: &str) -> A<u64> {
    match v {
        None => Ok(0),
        Some(Value::Number(n)) => n
            .as_u64()
            .ok_or_else(|| Arg::Invalid(format!(\"{at}: {n} is not a u64\"))),
        Some(other) => Err(malformed(at, \"a number\", other)),
    }
}",
    ),
    (
        "read_u32",
        "/// A number no `u32` takes is `invalid-input`.
pub(super) fn read_u32(v: Option<&Value>, at: &str) -> A<u32> {
    let n = read_u64(v, at)?;
    u32::try_from(n).map_err(|_| Arg::Invalid(format!(\"{at}: {n} is out of range\")))
}",
    ),
    (
        "read_s32",
        "/// A number; absent is 0. One no `s32` takes (fractional, below -2^31,
/// 2^31 or above) is `invalid-input`.
pub(super) fn read_s32(v: Option<&Value>, at: &str) -> A<i32> {
    match v {
        None => Ok(0),
        Some(Value::Number(n)) => n
            .as_i64()
            .and_then(|i| i32::try_from(i).ok())
            .ok_or_else(|| Arg::Invalid(format!(\"{at}: {n} is not an s32\"))),
        Some(other) => Err(malformed(at, \"a number\", other)),
    }
}",
    ),
    (
        "read_u8",
        "/// A number no `u8` takes is `invalid-input`.
pub(super) fn read_u8(v: Option<&Value>, at: &str) -> A<u8> {
    let n = read_u64(v, at)?;
    u8::try_from(n).map_err(|_| Arg::Invalid(format!(\"{at}: {n} is out of range\")))
}",
    ),
    (
        "read_bool",
        "/// A boolean; absent is false.
pub(super) fn read_bool(v: Option<&Value>, at: &str) -> A<bool> {
    match v {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(malformed(at, \"a bool\", other)),
    }
}",
    ),
    (
        "read_bytes",
        "/// Bytes, given as a UTF-8 string; absent is empty.
pub(super) fn read_bytes(v: Option<&Value>, at: &str) -> A<Vec<u8>> {
    Ok(read_string(v, at)?.into_bytes())
}",
    ),
    (
        "read_pairs",
        "/// Pairs sorted by key, given as an object (serde_json's map is
/// ordered by key); absent is empty.
pub(super) fn read_pairs(v: Option<&Value>, at: &str) -> A<Vec<(String, String)>> {
    match v {
        None => Ok(Vec::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, x)| match x {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(malformed(&format!(\"{at}.{k}\"), \"a string\", other)),
            })
            .collect(),
        Some(other) => Err(malformed(at, \"an object\", other)),
    }
}",
    ),
    (
        "read_list",
        "/// An array, each item read by `item`; absent is empty.
pub(super) fn read_list<T>(
    v: Option<&Value>,
    at: &str,
    item: impl Fn(Option<&Value>, &str) -> A<T>,
) -> A<Vec<T>> {
    match v {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, x)| item(Some(x).filter(|x| !x.is_null()), &format!(\"{at}[{i}]\")))
            .collect(),
        Some(other) => Err(malformed(at, \"an array\", other)),
    }
}",
    ),
    (
        "read_option",
        "/// Absent (or null) is none.
pub(super) fn read_option<T>(
    v: Option<&Value>,
    at: &str,
    item: impl Fn(Option<&Value>, &str) -> A<T>,
) -> A<Option<T>> {
    v.map(|v| item(Some(v), at)).transpose()
}",
    ),
    (
        "read_record",
        "/// A record's object; a missing record is a malformed vector.
pub(super) fn read_record<'a>(v: Option<&'a Value>, at: &str) -> A<&'a Value> {
    match v {
        None => Err(Arg::Malformed(format!(\"missing {at}\"))),
        Some(v @ Value::Object(_)) => Ok(v),
        Some(other) => Err(malformed(at, \"an object\", other)),
    }
}",
    ),
    (
        "read_case",
        "/// An enum's case name, none when absent.
pub(super) fn read_case<'a>(v: Option<&'a Value>, at: &str) -> A<Option<&'a str>> {
    match v {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(malformed(at, \"a case name\", other)),
    }
}",
    ),
    (
        "text",
        "/// Bytes as the vectors show them: UTF-8, lossy.
pub(super) fn text(bytes: &[u8]) -> Value {
    String::from_utf8_lossy(bytes).into_owned().into()
}",
    ),
    (
        "pairs",
        "/// Pairs as an object.
pub(super) fn pairs(pairs: Vec<(String, String)>) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k, Value::from(v))).collect())
}",
    ),
    (
        "case",
        "/// A variant's case: `{\"case\": payload}`.
pub(super) fn case(name: &str, payload: Value) -> Value {
    Value::Object(Map::from_iter([(name.to_owned(), payload)]))
}",
    ),
];
