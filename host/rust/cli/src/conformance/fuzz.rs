//! The host-protocol fuzzers' cases (`tests/host-protocol/fuzz/`, README
//! there), replayed through the Rust host — and so through libgak and Go,
//! which run this host's code: SQL texts through a sink body's lent
//! handle, passwords through every entry point that takes a store URL,
//! and retry sequences whose answer must be the last attempt's.
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::protocol::{Cleanup, Store, open_scripted, open_store};
use gak::clock::{Clock, ManualClock};
use gak::{Error, Kernel, SinkError};

/// What a host must do with a SQL text (the file's labels).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// The one-statement call raises to the body.
    Refuse,
    /// It runs and the call commits.
    Run,
    /// Only all-or-nothing.
    Any,
}

/// One generated SQL text.
#[derive(Clone, Debug)]
pub struct SqlCase {
    /// The text.
    pub sql: String,
    /// On PostgreSQL.
    pub postgres: Expect,
    /// On SQLite.
    pub sqlite: Expect,
    /// The statement that would end the transaction if the text ran raw.
    pub ends: Option<String>,
}

/// One generated password and its markers.
#[derive(Clone, Debug)]
pub struct PasswordCase {
    /// As written into the URL.
    pub password: String,
    /// Runs of letters and digits no message may hold.
    pub markers: Vec<String>,
}

/// How a body ends one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyEnd {
    /// Success.
    Ok,
    /// Its ordinary failure.
    Fail,
    /// A panic (Go); Rust treats it as `fail`.
    Panic,
}

/// One attempt of a retry sequence.
#[derive(Clone, Copy, Debug)]
pub struct Attempt {
    /// The body meets a conflict.
    pub conflict: bool,
    /// How it ends.
    pub body: BodyEnd,
}

/// One generated retry sequence.
#[derive(Clone, Debug)]
pub struct RetryCase {
    /// Every attempt, in order.
    pub attempts: Vec<Attempt>,
    /// `ok`, `write-failed`, `panic` or `storage`.
    pub answer: String,
}

fn cases(json: &str) -> Result<(Value, Vec<Value>), String> {
    let v: Value = serde_json::from_str(json).map_err(|e| format!("invalid JSON: {e}"))?;
    let cases = v["cases"]
        .as_array()
        .ok_or("expected {\"cases\": [...]}")?
        .clone();
    Ok((v, cases))
}

fn text(v: &Value, field: &str, i: usize) -> Result<String, String> {
    v[field]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("case {i}: {field} is not a string"))
}

fn expect(v: &Value, field: &str, i: usize) -> Result<Expect, String> {
    match text(v, field, i)?.as_str() {
        "refuse" => Ok(Expect::Refuse),
        "run" => Ok(Expect::Run),
        "any" => Ok(Expect::Any),
        other => Err(format!("case {i}: {field} {other:?}")),
    }
}

/// Parse `sql.json`.
pub fn parse_sql(json: &str) -> Result<Vec<SqlCase>, String> {
    let (_, cases) = cases(json)?;
    cases
        .iter()
        .enumerate()
        .map(|(i, c)| {
            Ok(SqlCase {
                sql: text(c, "sql", i)?,
                postgres: expect(c, "postgres", i)?,
                sqlite: expect(c, "sqlite", i)?,
                ends: c["ends"].as_str().map(str::to_owned),
            })
        })
        .collect()
}

/// Parse `passwords.json`: the URL templates and the passwords.
pub fn parse_passwords(json: &str) -> Result<(Vec<String>, Vec<PasswordCase>), String> {
    let (v, cases) = cases(json)?;
    let templates = v["templates"]
        .as_array()
        .ok_or("expected templates")?
        .iter()
        .map(|t| {
            t.as_str()
                .map(str::to_owned)
                .ok_or("a template is not a string")
        })
        .collect::<Result<Vec<_>, _>>()?;
    let cases = cases
        .iter()
        .enumerate()
        .map(|(i, c)| {
            Ok(PasswordCase {
                password: text(c, "password", i)?,
                markers: c["markers"]
                    .as_array()
                    .ok_or_else(|| format!("case {i}: markers"))?
                    .iter()
                    .filter_map(|m| m.as_str().map(str::to_owned))
                    .collect(),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok((templates, cases))
}

/// Parse `retries.json`.
pub fn parse_retries(json: &str) -> Result<Vec<RetryCase>, String> {
    let (_, cases) = cases(json)?;
    cases
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let attempts = c["attempts"]
                .as_array()
                .ok_or_else(|| format!("case {i}: attempts"))?
                .iter()
                .map(|a| {
                    Ok(Attempt {
                        conflict: a["conflict"].as_bool().ok_or("conflict")?,
                        body: match a["body"].as_str() {
                            Some("ok") => BodyEnd::Ok,
                            Some("fail") => BodyEnd::Fail,
                            Some("panic") => BodyEnd::Panic,
                            _ => return Err(format!("case {i}: body")),
                        },
                    })
                })
                .collect::<Result<Vec<_>, String>>()?;
            Ok(RetryCase {
                attempts,
                answer: text(c, "answer", i)?,
            })
        })
        .collect()
}

/// A tokio runtime for one replay.
fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("no runtime: {e}"))
}

async fn kernel_on(store: &Store) -> Result<(Kernel, Cleanup), String> {
    let (backend, cleanup) = open_store(store).await?;
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::at(0));
    let kernel = Kernel::with_backend(backend, clock).map_err(|e| e.to_string())?;
    Ok((kernel, cleanup))
}

/// Read downstream `keys` in a transaction of their own.
async fn downstream(kernel: &Kernel, keys: &[String]) -> Result<Vec<Option<String>>, String> {
    let keys = keys.to_vec();
    kernel
        .with_downstream(async move |down| {
            let mut out = Vec::new();
            for k in &keys {
                out.push(down.get(k).await?);
            }
            Ok(out)
        })
        .await
        .map_err(|e| format!("reading downstream: {e}"))
}

/// Run `sql` through the body's one-statement call on the store's driver
/// handle; whether it raised.
async fn run_text(down: &mut gak::Downstream<'_>, sql: &str) -> bool {
    #[cfg(feature = "sqlite")]
    if let Some(mut conn) = down.sqlite() {
        return conn.execute(sql, []).is_err();
    }
    #[cfg(feature = "postgres")]
    if let Some(r) = down.postgres_execute(sql, &[]).await {
        return r.is_err();
    }
    panic!("this store lends bodies no SQL handle")
}

/// Replay every SQL text on `store` (SQLite or PostgreSQL), case `i` on
/// resource `fz-i`. `Err` lists every case that broke a rule.
pub fn run_sql(cases: &[SqlCase], store: &Store) -> Result<usize, String> {
    runtime()?.block_on(async {
        let (kernel, _cleanup) = kernel_on(store).await?;
        let postgres = !matches!(store, Store::Sqlite(_) | Store::Scripted);
        let mut broken = Vec::new();
        for (i, case) in cases.iter().enumerate() {
            let want = if postgres { case.postgres } else { case.sqlite };
            if let Err(why) = sql_case(&kernel, i, &case.sql, want).await {
                broken.push(format!("case {i} {:?} ({want:?}): {why}", case.sql));
            }
        }
        if broken.is_empty() {
            Ok(cases.len())
        } else {
            Err(broken.join("\n"))
        }
    })
}

async fn sql_case(kernel: &Kernel, i: usize, sql: &str, want: Expect) -> Result<(), String> {
    let resource = format!("fz-{i}");
    let keys = [
        format!("fz/{i}/before"),
        format!("fz/{i}/after"),
        format!("fz/{i}/zombie"),
    ];
    let raised = Arc::new(Mutex::new(None));
    let (sql_owned, seen) = (sql.to_owned(), raised.clone());
    let (before, after) = (keys[0].clone(), keys[1].clone());
    let first = kernel
        .sideeffect()
        .write_fenced(&resource, 5, async move |down| {
            let _ = down.put(&before, "1").await;
            let r = run_text(down, &sql_owned).await;
            *seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
            let _ = down.put(&after, "1").await;
            Ok::<(), ()>(())
        })
        .await;
    let raised = raised.lock().unwrap_or_else(|p| p.into_inner()).take();
    let committed = first.is_ok();
    let fence = kernel
        .sideeffect()
        .sink_seen(&resource)
        .await
        .map_err(|e| format!("sink_seen: {e}"))?;
    let values = downstream(kernel, &keys[..2]).await?;
    let written = values.iter().all(Option::is_some);
    let nothing = values.iter().all(Option::is_none);
    match (committed, fence, written, nothing) {
        (true, 5, true, _) | (false, 0, _, true) => {}
        _ => {
            return Err(format!(
                "not all or nothing: the call answered {first:?}, the fence is {fence}, downstream {values:?}"
            ));
        }
    }
    match want {
        Expect::Refuse if raised != Some(true) => {
            return Err(format!(
                "the text was not refused (raised {raised:?}; call {first:?})"
            ));
        }
        Expect::Run if raised != Some(false) || !committed => {
            return Err(format!(
                "the text did not run (raised {raised:?}; call {first:?})"
            ));
        }
        _ => {}
    }
    // A zombie with an older fence.
    let zombie = keys[2].clone();
    let late = kernel
        .sideeffect()
        .write_fenced(&resource, 2, async move |down| {
            down.put(&zombie, "1").await.map_err(|_| ())
        })
        .await;
    let landed = downstream(kernel, &keys[2..]).await?[0].is_some();
    match (committed, &late, landed) {
        (true, Err(SinkError::Kernel(Error::FenceStale)), false) => Ok(()),
        (false, Ok(()), true) => Ok(()),
        _ => Err(format!(
            "the zombie's write (fence 2) after a first call that answered {first:?}: {late:?}, landed {landed}"
        )),
    }
}

/// Replay every retry sequence on `store` (scripted or PostgreSQL), case
/// `i` on resource `rt-i`.
pub fn run_retries(cases: &[RetryCase], store: &Store) -> Result<usize, String> {
    runtime()?.block_on(async {
        let mut broken = Vec::new();
        for (i, case) in cases.iter().enumerate() {
            if let Err(why) = retry_case(store, i, case).await {
                broken.push(format!("case {i} {case:?}: {why}"));
            }
        }
        if broken.is_empty() {
            Ok(cases.len())
        } else {
            Err(broken.join("\n"))
        }
    })
}

/// What one attempt of the body does, by the store: meet a conflict.
async fn conflict(down: &mut gak::Downstream<'_>, key: &str, k: usize, scripted: bool) {
    // On the scripted store the put itself answers `conflict`.
    let _ = down.put(key, &k.to_string()).await;
    #[cfg(feature = "postgres")]
    if !scripted {
        let _ = down
            .postgres_execute(
                "DO $$BEGIN RAISE EXCEPTION USING ERRCODE = '40001'; END$$",
                &[],
            )
            .await;
    }
    #[cfg(not(feature = "postgres"))]
    let _ = scripted;
}

async fn retry_case(store: &Store, i: usize, case: &RetryCase) -> Result<(), String> {
    let conflicts = case.attempts.iter().filter(|a| a.conflict).count();
    let scripted = matches!(store, Store::Scripted);
    let (kernel, _cleanup) = if scripted {
        let faults = serde_json::json!([
            {"on": "write", "table": "downstream", "answer": "conflict", "times": conflicts}
        ]);
        open_scripted(&faults).await?
    } else {
        kernel_on(store).await?
    };
    let resource = format!("rt-{i}");
    let key = format!("rt/{i}");
    let runs = Arc::new(Mutex::new(0usize));
    let (attempts, counted, body_key) = (case.attempts.clone(), runs.clone(), key.clone());
    let answer = kernel
        .sideeffect()
        .write_fenced(&resource, 1, async move |down| {
            let k = {
                let mut n = counted.lock().unwrap_or_else(|p| p.into_inner());
                *n += 1;
                *n - 1
            };
            let Some(attempt) = attempts.get(k).copied() else {
                return Err(format!("attempt {k} was not in the sequence"));
            };
            if attempt.conflict {
                conflict(down, &body_key, k, scripted).await;
            } else {
                down.put(&body_key, &k.to_string())
                    .await
                    .map_err(|e| e.to_string())?;
            }
            match attempt.body {
                BodyEnd::Ok => Ok(()),
                BodyEnd::Fail | BodyEnd::Panic => Err(format!("attempt {k} failed")),
            }
        })
        .await;
    let runs = *runs.lock().unwrap_or_else(|p| p.into_inner());
    if runs != case.attempts.len() {
        return Err(format!(
            "the body ran {runs} times, for {} attempts (answer {answer:?})",
            case.attempts.len()
        ));
    }
    let last = case.attempts.len() - 1;
    let got = match &answer {
        Ok(()) => "ok",
        Err(SinkError::Body(why)) if *why == format!("attempt {last} failed") => "write-failed",
        Err(SinkError::Body(why)) => {
            return Err(format!("a body failure from another attempt: {why}"));
        }
        Err(SinkError::Kernel(Error::Storage(_))) => "storage",
        Err(SinkError::Kernel(e)) => return Err(format!("answered {e:?}")),
    };
    let want = if case.answer == "panic" {
        "write-failed"
    } else {
        case.answer.as_str()
    };
    if got != want {
        return Err(format!("answered {got} ({answer:?}), expected {want}"));
    }
    let fence = kernel
        .sideeffect()
        .sink_seen(&resource)
        .await
        .map_err(|e| e.to_string())?;
    let value = downstream(&kernel, std::slice::from_ref(&key))
        .await?
        .remove(0);
    let expected = (want == "ok").then(|| last.to_string());
    if fence != u64::from(want == "ok") || value != expected {
        return Err(format!(
            "after {got}: fence {fence}, {key} = {value:?} (expected {expected:?})"
        ));
    }
    Ok(())
}

/// Every URL of `templates` × `cases`: each entry point of the Rust host
/// that takes a store URL must fail, and no message may hold a marker.
/// `extra` is called with each URL for entry points the caller adds (the
/// CLI): it answers the text it saw (`Err` if the URL opened).
pub fn check_passwords(
    templates: &[String],
    cases: &[PasswordCase],
    mut extra: impl FnMut(usize, &str) -> Option<Result<String, String>>,
) -> Result<usize, String> {
    let rt = runtime()?;
    let mut broken = Vec::new();
    let mut checked = 0;
    for (i, case) in cases.iter().enumerate() {
        for template in templates {
            let url = template.replace("{password}", &case.password);
            let mut seen: Vec<(&str, Result<String, String>)> = vec![
                ("Kernel::open", rt.block_on(opened(Kernel::open(&url)))),
                (
                    "blocking::Kernel::open",
                    shown(gak::blocking::Kernel::open(&url).map(drop)),
                ),
                (
                    "Kernel::builder().store()",
                    rt.block_on(opened(
                        Kernel::builder()
                            .store(&url)
                            .statement_timeout(std::time::Duration::from_secs(1))
                            .open(),
                    )),
                ),
                ("store::open", rt.block_on(opened(gak::store::open(&url)))),
            ];
            #[cfg(feature = "postgres")]
            if gak::store::facts::store_kind(&url) == Some(gak::store::facts::StoreKind::Postgres) {
                use gak::store::postgres::PostgresBackend;
                // Parsing may succeed (the server is what is missing): then
                // the backend's own descriptions are what must hide it.
                match PostgresBackend::parse(&url) {
                    Ok(b) => {
                        use gak::store::Backend as _;
                        seen.push((
                            "PostgresBackend (Debug, describe)",
                            Ok(format!("{b:?} {}", b.describe())),
                        ));
                        seen.push(("drop_schema", shown(rt.block_on(b.drop_schema()))));
                    }
                    Err(e) => seen.push(("PostgresBackend::parse", shown(Err::<(), _>(e)))),
                }
            }
            if let Some(r) = extra(i, &url) {
                seen.push(("cli", r));
            }
            for (entry, r) in seen {
                checked += 1;
                let text = match r {
                    Ok(text) => text,
                    Err(why) => {
                        broken.push(format!("case {i} {url:?} {entry}: {why}"));
                        continue;
                    }
                };
                if let Some(m) = case.markers.iter().find(|m| text.contains(m.as_str())) {
                    broken.push(format!("case {i} {entry}: the message shows {m:?}: {text}"));
                }
            }
        }
    }
    if broken.is_empty() {
        Ok(checked)
    } else {
        Err(broken.join("\n"))
    }
}

/// The text of a failure, its sources and its `Debug` form; `Err` if the
/// call succeeded.
fn shown<T, E: std::error::Error + std::fmt::Debug>(r: Result<T, E>) -> Result<String, String> {
    match r {
        Ok(_) => Err("it opened".into()),
        Err(e) => {
            let mut text = format!("{e} / {e:?}");
            let mut source = e.source();
            while let Some(s) = source {
                text.push_str(&format!(" / {s} / {s:?}"));
                source = s.source();
            }
            Ok(text)
        }
    }
}

async fn opened<T, E: std::error::Error + std::fmt::Debug>(
    f: impl std::future::Future<Output = Result<T, E>>,
) -> Result<String, String> {
    shown(f.await)
}
