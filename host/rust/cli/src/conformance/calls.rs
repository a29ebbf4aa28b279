//! Vector calls → typed kernel calls, and results → the vectors' JSON.
use serde_json::{Map, Value, json};

use gak::{
    Acquired, Action, Error, Kernel, KeyInfo, KeyState, Lease, Outcome, Resolution, Resolved,
    RetrySafety, Snapshot, Status, StepDef, Task, TaskSeed, TaskState,
};

/// A problem with the args themselves.
enum Arg {
    /// A value no caller should send (unknown enum string, number out of
    /// range): the call's answer is `invalid-input`.
    Invalid(String),
    /// The vector is malformed (missing field, wrong JSON type).
    Malformed(String),
}

type A<T> = Result<T, Arg>;

fn field<'a>(obj: &'a Value, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

fn string(obj: &Value, key: &str) -> A<String> {
    match field(obj, key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(Arg::Malformed(format!(
            "{key}: expected a string, got {other}"
        ))),
        None => Err(Arg::Malformed(format!("missing {key}"))),
    }
}

/// Lenient string: absent is empty (the kernel then judges it).
fn string_or_empty(obj: &Value, key: &str) -> A<String> {
    if field(obj, key).is_none() {
        return Ok(String::new());
    }
    string(obj, key)
}

fn opt_string(obj: &Value, key: &str) -> A<Option<String>> {
    field(obj, key).map(|_| string(obj, key)).transpose()
}

fn number(obj: &Value, key: &str) -> A<u64> {
    match field(obj, key) {
        Some(Value::Number(n)) => n
            .as_u64()
            .ok_or_else(|| Arg::Invalid(format!("{key}: {n} is not a u64"))),
        Some(other) => Err(Arg::Malformed(format!(
            "{key}: expected a number, got {other}"
        ))),
        None => Err(Arg::Malformed(format!("missing {key}"))),
    }
}

fn opt_number(obj: &Value, key: &str) -> A<Option<u64>> {
    field(obj, key).map(|_| number(obj, key)).transpose()
}

fn boolean(obj: &Value, key: &str) -> A<bool> {
    match field(obj, key) {
        Some(Value::Bool(b)) => Ok(*b),
        None => Ok(false),
        Some(other) => Err(Arg::Malformed(format!(
            "{key}: expected a bool, got {other}"
        ))),
    }
}

fn strings(obj: &Value, key: &str) -> A<Vec<String>> {
    match field(obj, key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| Arg::Malformed(format!("{key}: expected strings")))
            })
            .collect(),
        Some(other) => Err(Arg::Malformed(format!(
            "{key}: expected an array, got {other}"
        ))),
    }
}

fn bytes(obj: &Value, key: &str) -> A<Vec<u8>> {
    Ok(string_or_empty(obj, key)?.into_bytes())
}

fn object<'a>(obj: &'a Value, key: &str) -> A<&'a Value> {
    match field(obj, key) {
        Some(v @ Value::Object(_)) => Ok(v),
        Some(other) => Err(Arg::Malformed(format!(
            "{key}: expected an object, got {other}"
        ))),
        None => Err(Arg::Malformed(format!("missing {key}"))),
    }
}

fn snapshot(v: &Value) -> A<Snapshot> {
    let fields = match field(v, "fields") {
        None => Vec::new(),
        // serde_json's map is ordered by key: the WIT's sorted pairs.
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, x)| match x {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(Arg::Malformed(format!(
                    "fields.{k}: expected a string, got {other}"
                ))),
            })
            .collect::<A<_>>()?,
        Some(other) => Err(Arg::Malformed(format!(
            "fields: expected an object, got {other}"
        )))?,
    };
    Ok(Snapshot {
        run_id: string_or_empty(v, "run-id")?,
        seq: opt_number(v, "seq")?.unwrap_or(0),
        fence: opt_number(v, "fence")?,
        status: string_or_empty(v, "status")?,
        done: strings(v, "done")?,
        fields,
    })
}

fn snapshot_json(s: Snapshot) -> Value {
    let fields: Map<String, Value> = s.fields.into_iter().map(|(k, v)| (k, v.into())).collect();
    let mut out = json!({
        "run-id": s.run_id, "seq": s.seq, "status": s.status, "done": s.done, "fields": fields,
    });
    if let Some(f) = s.fence {
        out["fence"] = f.into();
    }
    out
}

fn text(bytes: &[u8]) -> Value {
    String::from_utf8_lossy(bytes).into_owned().into()
}

fn status(v: &Value) -> A<Status> {
    match string(v, "status")?.as_str() {
        "succeeded" => Ok(Status::Succeeded),
        "failed" => Ok(Status::Failed),
        other => Err(Arg::Invalid(format!("unknown status {other:?}"))),
    }
}

fn outcome_json(o: Outcome) -> Value {
    let status = match o.status {
        Status::Succeeded => "succeeded",
        Status::Failed => "failed",
    };
    json!({ "status": status, "result": text(&o.result) })
}

fn action(v: &Value) -> A<Action> {
    let a = object(v, "action")?;
    let retry_safety = match opt_string(a, "retry-safety")?.as_deref() {
        None | Some("safe") => RetrySafety::Safe,
        Some("unsafe") => RetrySafety::Unsafe,
        Some(other) => return Err(Arg::Invalid(format!("unknown retry-safety {other:?}"))),
    };
    Ok(Action {
        key: string_or_empty(a, "key")?,
        resource: string_or_empty(a, "resource")?,
        retry_safety,
        fingerprint: opt_string(a, "fingerprint")?,
    })
}

fn lease(v: &Value) -> A<Lease> {
    let l = object(v, "lease")?;
    Ok(Lease {
        key: string_or_empty(l, "key")?,
        resource: string_or_empty(l, "resource")?,
        fence: opt_number(l, "fence")?.unwrap_or(0),
        holder: string_or_empty(l, "holder")?,
        until: opt_number(l, "until")?.unwrap_or(0),
    })
}

fn lease_json(l: Lease) -> Value {
    json!({ "key": l.key, "resource": l.resource, "fence": l.fence, "holder": l.holder, "until": l.until })
}

fn state(v: &Value) -> A<Option<TaskState>> {
    Ok(match opt_string(v, "state")?.as_deref() {
        None => None,
        Some("open") => Some(TaskState::Open),
        Some("claimed") => Some(TaskState::Claimed),
        Some("done") => Some(TaskState::Done),
        Some("failed") => Some(TaskState::Failed),
        Some(other) => return Err(Arg::Invalid(format!("unknown state {other:?}"))),
    })
}

fn task_json(t: Task) -> Value {
    let mut out = json!({
        "id": t.id, "title": t.title, "deps": t.deps, "state": t.state.name(), "fence": t.fence,
    });
    if let Some(o) = t.owner {
        out["owner"] = o.into();
    }
    if let Some(tok) = t.token {
        out["token"] = tok.into();
    }
    if let Some(u) = t.until {
        out["until"] = u.into();
    }
    out
}

/// A page size: a number; one no host integer type takes is `invalid-input`.
fn limit(v: &Value) -> A<u32> {
    let n = number(v, "limit")?;
    u32::try_from(n).map_err(|_| Arg::Invalid(format!("limit: {n} is out of range")))
}

fn page_json(items: Vec<Value>, next: Option<String>) -> Value {
    let mut out = json!({ "items": items });
    if let Some(next) = next {
        out["next"] = next.into();
    }
    out
}

fn key_state(v: &Value) -> A<Option<KeyState>> {
    Ok(match opt_string(v, "state")?.as_deref() {
        None => None,
        Some("cleared") => Some(KeyState::Cleared),
        Some("in-flight") => Some(KeyState::InFlight),
        Some("uncertain") => Some(KeyState::Uncertain),
        Some("completed") => Some(KeyState::Completed),
        Some(other) => return Err(Arg::Invalid(format!("unknown key state {other:?}"))),
    })
}

fn key_info_json(i: KeyInfo) -> Value {
    let safety = match i.retry_safety {
        RetrySafety::Safe => "safe",
        RetrySafety::Unsafe => "unsafe",
    };
    let mut out = json!({
        "key": i.key, "state": i.state.name(), "retry-safety": safety, "resource": i.resource,
    });
    let optional = [
        ("until", i.until),
        ("completed-at", i.completed_at),
        ("reconciling-until", i.reconciling_until),
    ];
    for (name, value) in optional {
        if let Some(value) = value {
            out[name] = value.into();
        }
    }
    if let Some(f) = i.fingerprint {
        out["fingerprint"] = f.into();
    }
    if let Some(r) = i.reason {
        out["reason"] = r.into();
    }
    out
}

fn null<T>(r: Result<T, Error>) -> Result<Value, Error> {
    r.map(|_| Value::Null)
}

/// What a call reported besides its answer: the answer of a `reenter`
/// body's inner call (host-protocol cases, `tests/host-protocol`).
#[derive(Debug, Default)]
pub(super) struct Extra {
    pub inner: Option<String>,
}

/// Run one vector call. `Err` is a malformed step (it fails the scenario);
/// `Ok(Err(e))` is the kernel's refusal.
pub(super) async fn dispatch(
    k: &Kernel,
    name: &str,
    args: &Value,
    extra: &mut Extra,
) -> Result<Result<Value, Error>, String> {
    // Boxed: the calls nest deep futures (a sink body inside the call), and
    // every caller of the runner would inherit their layout.
    match Box::pin(call(k, name, args, extra)).await {
        Ok(result) => Ok(result),
        Err(Arg::Invalid(why)) => Ok(Err(Error::InvalidInput(why))),
        Err(Arg::Malformed(why)) => Err(format!("{name}: bad args: {why}")),
    }
}

/// The sink bodies of the vectors (`append`) and of the host-protocol cases
/// (`tests/host-protocol/README.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Body {
    Append,
    Swallow,
    Reenter,
    RawCommit,
    RawRollback,
    RawError,
}

fn body_kind(a: &Value) -> A<Body> {
    Ok(match opt_string(a, "body")?.as_deref() {
        None | Some("append") => Body::Append,
        Some("swallow") => Body::Swallow,
        Some("reenter") => Body::Reenter,
        Some("raw-commit") => Body::RawCommit,
        Some("raw-rollback") => Body::RawRollback,
        Some("raw-error") => Body::RawError,
        Some(other) => return Err(Arg::Malformed(format!("body: unknown kind {other:?}"))),
    })
}

/// Run `sql` on the binding's own driver handle inside the body's
/// transaction: the SQLite connection or the PostgreSQL client.
async fn raw(down: &mut gak::Downstream<'_>, sql: &str) -> Result<(), String> {
    #[cfg(feature = "sqlite")]
    if let Some(mut conn) = down.sqlite() {
        return conn.execute_batch(sql).map_err(|e| e.to_string());
    }
    #[cfg(feature = "postgres")]
    if let Some(done) = down.postgres_execute(sql, &[]).await {
        return done.map(drop).map_err(|e| e.to_string());
    }
    let _ = (down, sql);
    Err("this binding lends bodies no driver handle".into())
}

/// The reference body, and the ways a body may misbehave.
async fn sink_body(
    down: &mut gak::Downstream<'_>,
    kind: Body,
    key: &str,
    fail: bool,
    kernel: &Kernel,
    inner: &std::sync::Mutex<Option<String>>,
) -> Result<(), ()> {
    if kind == Body::Reenter {
        let answer = match kernel.sideeffect().sink_seen(key).await {
            Ok(_) => "ok".to_owned(),
            Err(e) => e.name().to_owned(),
        };
        *inner.lock().unwrap_or_else(|p| p.into_inner()) = Some(answer);
    }
    let appended = async {
        let marker = down.get(key).await?.unwrap_or_default();
        down.put(key, &format!("{marker}m")).await
    }
    .await;
    match kind {
        Body::Swallow => {}
        _ => appended.map_err(drop)?,
    }
    match kind {
        Body::RawCommit => raw(down, "COMMIT").await.map_err(drop)?,
        Body::RawRollback => raw(down, "ROLLBACK").await.map_err(drop)?,
        Body::RawError => {
            let _ = raw(down, "SELECT * FROM gak_no_such_table").await;
        }
        _ => {}
    }
    if fail { Err(()) } else { Ok(()) }
}

async fn call(k: &Kernel, name: &str, a: &Value, extra: &mut Extra) -> A<Result<Value, Error>> {
    let cp = k.checkpoint();
    let cg = k.commitgate();
    let se = k.sideeffect();
    let tb = k.taskboard();
    Ok(match name {
        "checkpoint.save-if-newer" => {
            null(cp.save_if_newer(&snapshot(object(a, "snapshot")?)?).await)
        }
        "checkpoint.load" => cp
            .load(&string_or_empty(a, "run-id")?)
            .await
            .map(snapshot_json),
        "checkpoint.build-plan" => {
            let steps = match field(a, "steps") {
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|s| {
                        Ok(StepDef {
                            id: string_or_empty(s, "id")?,
                            depends_on: strings(s, "depends-on")?,
                        })
                    })
                    .collect::<A<Vec<_>>>()?,
                None => Vec::new(),
                Some(other) => return Err(Arg::Malformed(format!("steps: got {other}"))),
            };
            let snap = field(a, "snapshot").map(snapshot).transpose()?;
            cp.build_plan(&steps, snap.as_ref())
                .await
                .map(|p| json!({ "skip": p.skip, "run": p.run, "untrusted": p.untrusted }))
        }
        "commitgate.commit" => {
            let o = object(a, "outcome")?;
            let outcome = Outcome {
                status: status(o)?,
                result: bytes(o, "result")?,
            };
            let step = opt_string(a, "step")?;
            cg.commit(
                &string_or_empty(a, "run-id")?,
                step.as_deref(),
                opt_number(a, "fence")?.unwrap_or(0),
                &outcome,
            )
            .await
            .map(outcome_json)
        }
        "commitgate.read" => {
            let step = opt_string(a, "step")?;
            cg.read(&string_or_empty(a, "run-id")?, step.as_deref())
                .await
                .map(outcome_json)
        }
        "sideeffect.acquire" => se
            .acquire(&action(a)?, number(a, "ttl")?)
            .await
            .map(|x| match x {
                Acquired::Granted(l) => json!({ "granted": lease_json(l) }),
                Acquired::Replayed(r) => json!({ "replayed": text(&r) }),
                Acquired::Uncertain(why) => json!({ "uncertain": why }),
                Acquired::InFlight => json!({ "in-flight": {} }),
                Acquired::Contended(until) => json!({ "contended": { "until": until } }),
                other => json!({ "unknown": format!("{other:?}") }),
            }),
        "sideeffect.complete" => se
            .complete(&action(a)?, &lease(a)?, &bytes(a, "result")?)
            .await
            .map(|r| text(&r)),
        "sideeffect.release" => null(se.release(&action(a)?, &lease(a)?).await),
        "sideeffect.abandon" => null(
            se.abandon(&action(a)?, &lease(a)?, &string_or_empty(a, "reason")?)
                .await,
        ),
        "sideeffect.renew" => se
            .renew(&action(a)?, &lease(a)?, number(a, "ttl")?)
            .await
            .map(lease_json),
        "sideeffect.mark-uncertain" => null(
            se.mark_uncertain(&action(a)?, &lease(a)?, &string_or_empty(a, "reason")?)
                .await,
        ),
        "sideeffect.begin-reconcile" => se
            .begin_reconcile(&action(a)?, number(a, "ttl")?)
            .await
            .map(|c| json!({ "claim": c.claim, "until": c.until })),
        "sideeffect.resolve-uncertain" => {
            let r = object(a, "resolution")?;
            let resolution = Resolution {
                applied: boolean(r, "applied")?,
                result: field(r, "result").map(|_| bytes(r, "result")).transpose()?,
                force_retryable: boolean(r, "force-retryable")?,
                claim: opt_string(r, "claim")?,
            };
            se.resolve_uncertain(&action(a)?, &resolution)
                .await
                .map(|x| match x {
                    Resolved::Replayed(r) => json!({ "replayed": text(&r) }),
                    Resolved::Cleared => json!({ "cleared": {} }),
                })
        }
        "sink.write-fenced" => {
            let resource = string_or_empty(a, "resource")?;
            let fail = boolean(a, "fail")?;
            // The reference body: append "m" to the resource's marker, then
            // fail if asked to — the append must then vanish with the rest.
            let fence = number(a, "fence")?;
            let kind = body_kind(a)?;
            let inner = std::sync::Arc::new(std::sync::Mutex::new(None));
            let (key, kernel, seen) = (resource.clone(), k.clone(), inner.clone());
            let body = async move |down: &mut gak::Downstream<'_>| {
                sink_body(down, kind, &key, fail, &kernel, &seen).await
            };
            let answer = se
                .write_fenced(&resource, fence, body)
                .await
                .map(|()| Value::Null)
                .map_err(|e| e.contract_error());
            extra.inner = inner.lock().unwrap_or_else(|p| p.into_inner()).take();
            answer
        }
        "sink.read" => {
            let resource = string_or_empty(a, "resource")?;
            match se.sink_seen(&resource).await {
                Ok(seen) => {
                    let key = resource.clone();
                    let marker = k
                        .with_downstream(async move |down: &mut gak::Downstream<'_>| {
                            down.get(&key).await
                        })
                        .await;
                    marker.map(|m| json!({ "seen-fence": seen, "marker": m.unwrap_or_default() }))
                }
                Err(e) => Err(e),
            }
        }
        "taskboard.seed" => {
            let tasks = match field(a, "tasks") {
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|t| {
                        Ok(TaskSeed {
                            id: string_or_empty(t, "id")?,
                            title: opt_string(t, "title")?,
                            deps: strings(t, "deps")?,
                            state: state(t)?,
                        })
                    })
                    .collect::<A<Vec<_>>>()?,
                None => Vec::new(),
                Some(other) => return Err(Arg::Malformed(format!("tasks: got {other}"))),
            };
            null(tb.seed(&tasks).await)
        }
        // Without `limit`: the whole board as an array (the 0.1 form of the
        // call, which vector files may still use), read page by page.
        "taskboard.list" if field(a, "limit").is_none() => {
            let state = state(a)?;
            let mut all = Vec::new();
            let mut after: Option<String> = None;
            loop {
                match tb.list(state, after.as_deref(), 1000).await {
                    Ok(page) => {
                        all.extend(page.items.into_iter().map(task_json));
                        after = page.next;
                        if after.is_none() {
                            break Ok(Value::Array(all));
                        }
                    }
                    Err(e) => break Err(e),
                }
            }
        }
        "taskboard.list" => {
            let after = opt_string(a, "after")?;
            tb.list(state(a)?, after.as_deref(), limit(a)?)
                .await
                .map(|p| page_json(p.items.into_iter().map(task_json).collect(), p.next))
        }
        "taskboard.get" => tb.get(&string_or_empty(a, "id")?).await.map(task_json),
        "taskboard.claim-next" => tb
            .claim_next(&string_or_empty(a, "agent")?, number(a, "ttl")?)
            .await
            .map(|t| t.map_or(Value::Null, task_json)),
        "sideeffect.list" => {
            let after = opt_string(a, "after")?;
            se.list(key_state(a)?, after.as_deref(), limit(a)?)
                .await
                .map(|p| page_json(p.items.into_iter().map(key_info_json).collect(), p.next))
        }
        "sideeffect.get" => se.get(&string_or_empty(a, "key")?).await.map(key_info_json),
        "retention.prune" => k
            .retention()
            .prune(number(a, "before")?, limit(a)?)
            .await
            .map(|p| {
                json!({
                    "removed-keys": p.removed_keys, "removed-tasks": p.removed_tasks,
                    "removed-runs": p.removed_runs, "more": p.more,
                })
            }),
        "taskboard.claim" => tb
            .claim(
                &string_or_empty(a, "id")?,
                &string_or_empty(a, "agent")?,
                number(a, "ttl")?,
            )
            .await
            .map(task_json),
        "taskboard.release" => null(
            tb.release(&string_or_empty(a, "id")?, &string_or_empty(a, "token")?)
                .await,
        ),
        "taskboard.complete" => null(
            tb.complete(&string_or_empty(a, "id")?, &string_or_empty(a, "token")?)
                .await,
        ),
        "taskboard.renew" => tb
            .renew(
                &string_or_empty(a, "id")?,
                &string_or_empty(a, "token")?,
                number(a, "ttl")?,
            )
            .await
            .map(task_json),
        other => return Err(Arg::Malformed(format!("unknown call {other:?}"))),
    })
}
