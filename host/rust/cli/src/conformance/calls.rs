//! The vectors' calls: the exported functions through the generated table
//! (`exports.rs`), and the host-level calls every runner writes by hand —
//! `sink.write-fenced` (a body in the call's transaction, and the ways a
//! body may misbehave), `sink.read`, and the 0.1 form of `taskboard.list`.
use serde_json::{Value, json};

use gak::{Error, Kernel};

use super::exports::{
    self, A, Arg, field, read_bool, read_option, read_state, read_string, read_u64, write_task,
};

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
    Ok(
        match read_option(field(a, "body"), "body", read_string)?.as_deref() {
            None | Some("append") => Body::Append,
            Some("swallow") => Body::Swallow,
            Some("reenter") => Body::Reenter,
            Some("raw-commit") => Body::RawCommit,
            Some("raw-rollback") => Body::RawRollback,
            Some("raw-error") => Body::RawError,
            Some(other) => return Err(Arg::Malformed(format!("body: unknown kind {other:?}"))),
        },
    )
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
    let se = k.sideeffect();
    Ok(match name {
        "sink.write-fenced" => {
            let resource = read_string(field(a, "resource"), "resource")?;
            let fail = read_bool(field(a, "fail"), "fail")?;
            // The reference body: append "m" to the resource's marker, then
            // fail if asked to — the append must then vanish with the rest.
            let fence = read_u64(field(a, "fence"), "fence")?;
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
            let resource = read_string(field(a, "resource"), "resource")?;
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
        // Without `limit`: the whole board as an array (the 0.1 form of the
        // call, which vector files may still use), read page by page.
        "taskboard.list" if field(a, "limit").is_none() => {
            let state = read_option(field(a, "state"), "state", read_state)?;
            let tb = k.taskboard();
            let mut all = Vec::new();
            let mut after: Option<String> = None;
            loop {
                match tb.list(state, after.as_deref(), 1000).await {
                    Ok(page) => {
                        all.extend(page.items.into_iter().map(write_task));
                        after = page.next;
                        if after.is_none() {
                            break Ok(Value::Array(all));
                        }
                    }
                    Err(e) => break Err(e),
                }
            }
        }
        _ => exports::call(k, name, a)
            .await?
            .ok_or_else(|| Arg::Malformed(format!("unknown call {name:?}")))?,
    })
}
