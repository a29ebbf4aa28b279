//! Parsing, substitution, matching and binding for vector scenarios.
use std::collections::HashMap;

use serde_json::{Map, Value};

use super::calls;
use gak::clock::ManualClock;

/// One scenario of a vector file.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Its `scenario` name.
    pub name: Option<String>,
    /// Its raw steps.
    pub steps: Vec<Value>,
}

const RESERVED: [&str; 3] = ["any", "none", "hex128"];

/// Parse a file holding one scenario object or an array of them.
pub fn parse_file(text: &str) -> Result<Vec<Scenario>, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    let items = match value {
        Value::Array(items) => items,
        obj @ Value::Object(_) => vec![obj],
        _ => return Err("$: expected a scenario object or an array of them".into()),
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let Value::Object(mut obj) = item else {
                return Err(format!("$[{i}]: expected a scenario object"));
            };
            let name = match obj.remove("scenario") {
                Some(Value::String(s)) => Some(s),
                None => None,
                Some(_) => return Err(format!("$[{i}].scenario: expected a string")),
            };
            let Some(Value::Array(steps)) = obj.remove("steps") else {
                return Err(format!("$[{i}].steps: expected an array"));
            };
            Ok(Scenario { name, steps })
        })
        .collect()
}

/// Run one scenario on a fresh store (`kernel`, driven by `clock` at 0);
/// `Err` says which step failed and why.
pub(super) async fn run_scenario(
    kernel: &gak::Kernel,
    clock: &ManualClock,
    scenario: &Scenario,
    file: &str,
    index: usize,
) -> Result<(), String> {
    let mut binds: HashMap<String, Value> = HashMap::new();
    for (i, step) in scenario.steps.iter().enumerate() {
        let at = |why: String| format!("step {i} ({file}: $[{index}].steps[{i}]): {why}");
        let Value::Object(step) = step else {
            return Err(at("expected an object".into()));
        };
        run_step(kernel, Some(clock), step, &mut binds)
            .await
            .map_err(at)?;
    }
    Ok(())
}

/// Run one `clock` / `advance` / `call` step. Without a manual clock (a
/// host-protocol case on the system clock) clock steps are malformed.
pub(crate) async fn run_step(
    kernel: &gak::Kernel,
    clock: Option<&ManualClock>,
    step: &Map<String, Value>,
    binds: &mut HashMap<String, Value>,
) -> Result<(), String> {
    let kinds: Vec<&str> = ["clock", "advance", "call"]
        .into_iter()
        .filter(|k| step.contains_key(*k))
        .collect();
    if kinds.len() != 1 {
        return Err("needs exactly one of clock / advance / call".into());
    }
    let manual = || clock.ok_or_else(|| "this case runs on the system clock".to_string());
    match kinds[0] {
        "clock" => {
            let to = step["clock"].as_u64().ok_or("clock: expected ms")?;
            manual()?.set(to).map_err(|e| e.to_string())
        }
        "advance" => {
            let by = step["advance"].as_u64().ok_or("advance: expected ms")?;
            manual()?.advance(by);
            Ok(())
        }
        _ => call_step(kernel, step, binds).await,
    }
}

async fn call_step(
    kernel: &gak::Kernel,
    step: &Map<String, Value>,
    binds: &mut HashMap<String, Value>,
) -> Result<(), String> {
    let name = step["call"]
        .as_str()
        .ok_or_else(|| "call: expected a name".to_string())?;
    let args = substitute(step.get("args").unwrap_or(&Value::Null), binds)?;
    let expected_ok = step.get("ok");
    let expected_err = step.get("err");
    if expected_ok.is_some() == expected_err.is_some() {
        return Err(format!("{name}: needs exactly one of ok / err"));
    }
    if let Some(e) = expected_err {
        let e = e.as_str().ok_or("err: expected a variant name")?;
        if !gak_rules::Error::NAMES.contains(&e) {
            return Err(format!("{name}: unknown error variant {e:?}"));
        }
    }
    let mut extra = calls::Extra::default();
    let actual = calls::dispatch(kernel, name, &args, &mut extra).await?;
    if let Some(want) = step.get("inner") {
        let got = extra.inner.as_deref().unwrap_or("<no inner call>");
        if want.as_str() != Some(got) {
            return Err(format!(
                "{name}: expected the inner call to answer {want}, got {got}"
            ));
        }
    }
    match (expected_ok, expected_err, &actual) {
        (Some(want), _, Ok(got)) => {
            if !matches(want, Some(got), binds)? {
                return Err(format!("{name}: expected ok {want}, got ok {got}"));
            }
        }
        (Some(want), _, Err(e)) => {
            return Err(format!("{name}: expected ok {want}, got err {}", e.name()));
        }
        (_, Some(want), Ok(got)) => {
            return Err(format!("{name}: expected err {want}, got ok {got}"));
        }
        (_, Some(want), Err(e)) => {
            if want.as_str() != Some(e.name()) {
                return Err(format!("{name}: expected err {want}, got err {e}"));
            }
        }
        (None, None, _) => unreachable!("checked above"),
    }
    if let (Some(bind), Ok(got)) = (step.get("bind"), &actual) {
        let Value::Object(bind) = bind else {
            return Err("bind: expected an object".into());
        };
        for (as_name, path) in bind {
            if RESERVED.contains(&as_name.as_str()) {
                return Err(format!("bind: {as_name:?} is reserved"));
            }
            let path = path.as_str().ok_or("bind: paths are strings")?;
            let value = lookup(got, path).ok_or_else(|| format!("bind: no {path:?} in {got}"))?;
            binds.insert(as_name.clone(), value.clone());
        }
    }
    Ok(())
}

fn lookup<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    if path.is_empty() {
        return Some(value);
    }
    path.split('.').try_fold(value, |v, part| match v {
        Value::Array(items) => part.parse::<usize>().ok().and_then(|i| items.get(i)),
        Value::Object(obj) => obj.get(part),
        _ => None,
    })
}

fn bound<'a>(binds: &'a HashMap<String, Value>, name: &str) -> Result<&'a Value, String> {
    binds
        .get(name)
        .ok_or_else(|| format!("${name} is not bound"))
}

/// Replace `$name`, `$$literal` and `{"$merge": name, ...}` in call args.
pub(crate) fn substitute(v: &Value, binds: &HashMap<String, Value>) -> Result<Value, String> {
    Ok(match v {
        Value::String(s) if s.starts_with("$$") => Value::String(s[1..].to_owned()),
        Value::String(s) if s.starts_with('$') => bound(binds, &s[1..])?.clone(),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| substitute(i, binds))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(obj) if obj.contains_key("$repeat") => {
            let unit = obj["$repeat"]
                .as_str()
                .ok_or("$repeat: expected a string")?;
            let times = obj
                .get("times")
                .and_then(Value::as_u64)
                .ok_or("$repeat: expected times")?;
            Value::String(unit.repeat(times as usize))
        }
        Value::Object(obj) if obj.contains_key("$merge") => {
            let name = obj["$merge"].as_str().ok_or("$merge: expected a name")?;
            let Value::Object(mut base) = bound(binds, name)?.clone() else {
                return Err(format!("$merge: ${name} is not an object"));
            };
            for (k, x) in obj.iter().filter(|(k, _)| *k != "$merge") {
                base.insert(k.clone(), substitute(x, binds)?);
            }
            Value::Object(base)
        }
        Value::Object(obj) => Value::Object(
            obj.iter()
                .map(|(k, x)| Ok((k.clone(), substitute(x, binds)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

fn is_hex128(v: &Value) -> bool {
    v.as_str().is_some_and(|s| {
        s.len() == 32
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Does the actual value match the expected pattern?
pub(crate) fn matches(
    want: &Value,
    got: Option<&Value>,
    binds: &HashMap<String, Value>,
) -> Result<bool, String> {
    let present = got.is_some_and(|g| !g.is_null());
    Ok(match want {
        Value::String(s) if s == "$any" => present,
        Value::String(s) if s == "$none" => !present,
        Value::String(s) if s == "$hex128" => got.is_some_and(is_hex128),
        Value::String(s) if s.starts_with("$$") => got == Some(&Value::String(s[1..].to_owned())),
        Value::String(s) if s.starts_with('$') => got == Some(bound(binds, &s[1..])?),
        Value::Object(obj) if obj.len() == 1 && obj.contains_key("$ne") => {
            let name = obj["$ne"].as_str().ok_or("$ne: expected a name")?;
            present && got != Some(bound(binds, name)?)
        }
        Value::Object(obj) => match got {
            Some(Value::Object(actual)) => {
                for (k, w) in obj {
                    if !matches(w, actual.get(k), binds)? {
                        return Ok(false);
                    }
                }
                true
            }
            _ => false,
        },
        Value::Array(items) => match got {
            Some(Value::Array(actual)) if actual.len() == items.len() => {
                for (w, g) in items.iter().zip(actual) {
                    if !matches(w, Some(g), binds)? {
                        return Ok(false);
                    }
                }
                true
            }
            _ => false,
        },
        Value::Null => !present,
        scalar => got == Some(scalar),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patterns() {
        let mut binds = HashMap::new();
        binds.insert("t".to_string(), json!("abc"));
        let m = |w: Value, g: Value| matches(&w, Some(&g), &binds).unwrap();
        assert!(m(json!({"a": 1}), json!({"a": 1, "b": 2})));
        assert!(!m(json!({"a": 1, "c": "$any"}), json!({"a": 1})));
        assert!(m(json!({"c": "$none"}), json!({"a": 1})));
        assert!(m(json!("$t"), json!("abc")));
        assert!(m(json!({"$ne": "t"}), json!("abd")));
        assert!(!m(json!({"x": {"$ne": "t"}}), json!({})));
        assert!(m(json!("$$5"), json!("$5")));
        assert!(m(
            json!("$hex128"),
            json!("0123456789abcdef0123456789abcdef")
        ));
        assert!(!m(
            json!("$hex128"),
            json!("0123456789ABCDEF0123456789abcdef")
        ));
        assert!(!m(json!([1, 2]), json!([1, 2, 3])));
        assert!(matches(&json!("$nope"), Some(&json!(1)), &binds).is_err());
    }

    #[test]
    fn merge_and_paths() {
        let mut binds = HashMap::new();
        binds.insert("l".to_string(), json!({"fence": 1, "holder": "h"}));
        let merged = substitute(&json!({"$merge": "l", "fence": 2}), &binds).unwrap();
        assert_eq!(merged, json!({"fence": 2, "holder": "h"}));
        assert_eq!(
            lookup(&json!([{"token": "x"}]), "0.token"),
            Some(&json!("x"))
        );
    }
}
