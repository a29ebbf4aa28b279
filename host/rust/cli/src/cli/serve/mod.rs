//! `gak serve`: the operator console in a browser. It parses, calls the
//! kernel component, and renders — as the CLI's commands do, it never
//! decides: every read is one of the contract's bounded reads (a page of
//! at most `limit` entries), every action one exported call.
//!
//! Safe by default: loopback unless told otherwise, and a bearer token
//! required off loopback; every action a POST whose form carries the CSRF
//! token of the browser's `gak_csrf` cookie (`SameSite=Strict`,
//! `HttpOnly`); a request body of at most [`BODY_LIMIT`]; no capability
//! (task token, lease holder, reconcile claim) and no store password is
//! ever rendered — the contract's reads do not return them, and the one
//! action that needs a reconcile claim takes and uses it in one request.
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Form, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use gak::{
    Error, Kernel, KeyCounts, KeyInfo, KeyState, Resolution, Resolved, TaskCounts, TaskPage,
    TaskState,
};

use super::args::ServeArgs;
use super::effects::action_of;
use super::failure::{Failure, Outcome};
use super::output;
use super::runs::{explain_untrusted, parse_steps};
use super::time;

mod html;

use html::{csrf_field, esc, page, seg};

/// The largest request body accepted (forms are small; a larger one is
/// refused with 413 before it is read).
const BODY_LIMIT: usize = 64 * 1024;

/// Rows per page unless `limit` says otherwise (the contract's bound: 1–1000).
const PAGE: u32 = 100;

/// Run `gak serve` until SIGINT or SIGTERM.
pub fn run(args: ServeArgs) -> Outcome {
    let token = match (&args.token, &args.token_file) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(file)) => Some(
            std::fs::read_to_string(file)
                .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", file.display())))?
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned(),
        ),
        (None, None) => None,
    };
    if token.as_ref().is_some_and(|t| t.len() < 16) {
        return Err(Failure::Usage(
            "the token must be at least 16 characters".into(),
        ));
    }
    let addr: SocketAddr = args
        .listen
        .parse()
        .map_err(|e| Failure::Usage(format!("--listen {:?}: {e}", args.listen)))?;
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(Failure::Usage(format!(
            "refusing to listen on {addr}, which is not a loopback address, without --token or --token-file: anyone who can reach it could revive tasks and resolve keys"
        )));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Failed(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(serve(args.store, addr, token))
}

async fn serve(store: String, addr: SocketAddr, token: Option<String>) -> Outcome {
    let kernel = Kernel::open(&store)
        .await
        .map_err(|e| Failure::Storage(format!("cannot open the store: {e}")))?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Failure::Failed(format!("cannot listen on {addr}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Failure::Failed(format!("cannot read the bound address: {e}")))?;
    // The first line names the address (port 0 picks one): tests and
    // scripts read it.
    println!(
        "gak serve: listening on http://{bound}/ ({})",
        kernel.backend().describe()
    );
    let app = router(Arc::new(App {
        kernel,
        token,
        calls: Mutex::new(HashMap::new()),
        claims: Mutex::new(HashMap::new()),
        started: Instant::now(),
    }));
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown())
        .await
        .map_err(|e| Failure::Failed(format!("the server failed: {e}")))
}

async fn shutdown() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// What every handler shares.
struct App {
    kernel: Kernel,
    token: Option<String>,
    /// Kernel calls by (operation, outcome).
    calls: Mutex<HashMap<CallKind, Timings>>,
    /// The reconcile claims this console took (key to claim and deadline):
    /// capabilities, kept in memory for the resolution and never rendered,
    /// logged or sent.
    claims: Mutex<HashMap<String, (String, u64)>>,
    started: Instant,
}

type Shared = Arc<App>;

/// A kernel call's operation and outcome (`ok` or the contract's code).
type CallKind = (&'static str, &'static str);

/// The upper bounds (seconds) of the call-latency histogram's buckets.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// How many calls of one kind took how long: a Prometheus histogram.
#[derive(Default)]
struct Timings {
    count: u64,
    seconds: f64,
    /// Calls at or under each of [`BUCKETS`] (not cumulative here).
    within: [u64; BUCKETS.len()],
}

impl Timings {
    fn record(&mut self, seconds: f64) {
        self.count += 1;
        self.seconds += seconds;
        if let Some(i) = BUCKETS.iter().position(|b| seconds <= *b) {
            self.within[i] += 1;
        }
    }
}

/// Reconcile claims a console keeps at most (the expired ones go first).
const CLAIMS_KEPT: usize = 10_000;

impl App {
    /// The live reconcile claim this console holds on `key`, if any.
    fn claim_on(&self, key: &str, now: u64) -> Option<(String, u64)> {
        let claims = self.claims.lock().unwrap_or_else(PoisonError::into_inner);
        claims.get(key).filter(|(_, until)| now < *until).cloned()
    }

    /// Keep the claim taken on `key` (or forget it: `None`).
    fn keep_claim(&self, key: &str, claim: Option<(String, u64)>, now: u64) {
        let mut claims = self.claims.lock().unwrap_or_else(PoisonError::into_inner);
        claims.retain(|_, (_, until)| now < *until);
        match claim {
            Some(c) if claims.len() < CLAIMS_KEPT || claims.contains_key(key) => {
                claims.insert(key.to_owned(), c);
            }
            Some(_) => {}
            None => {
                claims.remove(key);
            }
        }
    }

    /// Time a kernel call and count it by operation and outcome.
    async fn call<T>(
        &self,
        op: &'static str,
        fut: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        let at = Instant::now();
        let r = fut.await;
        let outcome = match &r {
            Ok(_) => "ok",
            Err(e) => e.name(),
        };
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        calls
            .entry((op, outcome))
            .or_default()
            .record(at.elapsed().as_secs_f64());
        r
    }
}

fn router(app: Shared) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to("/tasks") }))
        .route("/gak.css", get(css))
        .route("/login", get(login_page).post(login))
        .route("/tasks", get(tasks))
        .route("/tasks/recount", post(recount))
        .route("/tasks/{id}", get(task))
        .route("/tasks/{id}/revive", post(revive))
        .route("/groups", get(groups))
        .route("/groups/limit", post(group_limit))
        .route("/keys", get(keys))
        .route("/keys/recount", post(keys_recount))
        .route("/keys/{key}", get(key))
        .route("/keys/{key}/resolve", post(resolve))
        .route("/keys/{key}/reconcile", post(reconcile))
        .route("/runs", get(runs))
        .route("/retention", get(retention))
        .route("/retention/prune", post(prune))
        .route("/metrics", get(metrics))
        .route("/api/tasks", get(api_tasks))
        .route("/api/tasks/{id}", get(api_task))
        .route("/api/counts", get(api_counts))
        .route("/api/key-counts", get(api_key_counts))
        .route("/api/groups", get(api_groups))
        .route("/api/groups/{name}", get(api_group))
        .route("/api/keys", get(api_keys))
        .route("/api/keys/{key}", get(api_key))
        .fallback(|| async { refused_page(StatusCode::NOT_FOUND, "not-found", "no such page") })
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(app)
}

// ---------------------------------------------------------------------------
// The guard: authentication, the CSRF cookie, headers.

/// The browser's CSRF token (from its cookie, or minted for this response).
#[derive(Clone)]
struct Csrf(String);

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// Equal, in time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn fresh_token() -> String {
    let mut bytes = [0u8; 24];
    // The OS's CSPRNG; a console that cannot read it does not run.
    let read = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
    if read.is_err() {
        // Never a guessable token: the time and address mix is a last
        // resort that keeps the process from answering with a fixed one.
        let seed = format!("{:?}{:p}", Instant::now(), &bytes);
        for (i, b) in seed.bytes().enumerate() {
            bytes[i % 24] ^= b;
        }
    }
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

async fn guard(State(app): State<Shared>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    if let Some(token) = &app.token
        && path != "/login"
        && path != "/gak.css"
    {
        let headers = req.headers();
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let cookie = cookie(headers, "gak_auth");
        let ok = bearer.is_some_and(|b| same(b, token)) || cookie.is_some_and(|c| same(c, token));
        if !ok {
            let mut r = refused_page(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "this console needs its token: an Authorization: Bearer header, or sign in at /login",
            );
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return secured(r);
        }
    }
    let existing = cookie(req.headers(), "gak_csrf")
        .filter(|c| c.len() == 48 && c.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_owned);
    let minted = existing.is_none();
    let csrf = existing.unwrap_or_else(fresh_token);
    if req.method() == Method::POST && path != "/login" {
        // A cross-site request is refused whatever it carries (browsers
        // send Sec-Fetch-Site); the form's token is checked by the handler.
        let site = req
            .headers()
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok());
        if site.is_some_and(|s| s != "same-origin" && s != "none") || minted {
            return secured(refused_page(
                StatusCode::FORBIDDEN,
                "csrf",
                "this action did not come from the console's own page (missing or cross-site CSRF token): nothing was changed",
            ));
        }
    }
    req.extensions_mut().insert(Csrf(csrf.clone()));
    let mut response = next.run(req).await;
    if minted
        && let Ok(v) = HeaderValue::from_str(&format!(
            "gak_csrf={csrf}; Path=/; HttpOnly; SameSite=Strict"
        ))
    {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    secured(response)
}

/// Headers every answer carries: no script, no framing, no sniffing, no
/// referrer, no caching of pages that show the store.
fn secured(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// The form's CSRF token must be the cookie's: a page of another site can
/// neither read the cookie nor the console's pages that carry it.
fn check_csrf(csrf: &Csrf, form: &HashMap<String, String>) -> Result<(), Response> {
    match form.get("csrf") {
        Some(given) if same(given, &csrf.0) => Ok(()),
        _ => Err(refused_page(
            StatusCode::FORBIDDEN,
            "csrf",
            "this action did not come from the console's own page (missing or wrong CSRF token): nothing was changed",
        )),
    }
}

// ---------------------------------------------------------------------------
// Answers.

fn html_response(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

fn json_response(status: StatusCode, v: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        format!("{v}\n"),
    )
        .into_response()
}

fn refused_page(status: StatusCode, code: &str, message: &str) -> Response {
    html_response(
        status,
        page(
            "Refused",
            &format!(
                "<div class=\"refused\"><b>{}</b>: {}</div>",
                esc(code),
                esc(message)
            ),
        ),
    )
}

/// The HTTP status of a contract error: absent 404, a caller's mistake
/// 400, the store 503, every other refusal (the state forbids it) 409.
fn status_of(e: &Error) -> StatusCode {
    match e {
        Error::NotFound => StatusCode::NOT_FOUND,
        Error::InvalidInput(_) => StatusCode::BAD_REQUEST,
        Error::Storage(_) => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::CONFLICT,
    }
}

fn message_of(e: &Error) -> String {
    match e {
        Error::Storage(_) => "the store failed; nothing was changed by this request".into(),
        other => other.to_string(),
    }
}

fn refused(e: &Error) -> Response {
    refused_page(status_of(e), e.name(), &message_of(e))
}

fn api_refused(e: &Error) -> Response {
    json_response(
        status_of(e),
        &json!({ "error": { "code": e.name(), "message": message_of(e) } }),
    )
}

fn bad_request(message: &str) -> Response {
    refused_page(StatusCode::BAD_REQUEST, "invalid-input", message)
}

async fn css() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        html::CSS,
    )
        .into_response()
}

// ---------------------------------------------------------------------------
// Sign-in (only when a token is set).

async fn login_page() -> Response {
    html_response(
        StatusCode::OK,
        page(
            "Sign in",
            "<form method=\"post\" action=\"/login\"><label>Token <input type=\"password\" name=\"token\" autocomplete=\"off\"></label> <button>Sign in</button></form>",
        ),
    )
}

async fn login(State(app): State<Shared>, Form(form): Form<HashMap<String, String>>) -> Response {
    let Some(token) = &app.token else {
        return Redirect::to("/tasks").into_response();
    };
    match form.get("token") {
        Some(given) if same(given, token) => {
            let mut r = Redirect::to("/tasks").into_response();
            if let Ok(v) = HeaderValue::from_str(&format!(
                "gak_auth={token}; Path=/; HttpOnly; SameSite=Strict"
            )) {
                r.headers_mut().append(header::SET_COOKIE, v);
            }
            r
        }
        _ => refused_page(StatusCode::UNAUTHORIZED, "unauthorized", "wrong token"),
    }
}

// ---------------------------------------------------------------------------
// Query parameters shared by the lists.

fn param<'a>(q: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    q.get(name).map(String::as_str).filter(|v| !v.is_empty())
}

/// A request's query or form fields.
type Params = HashMap<String, String>;

/// A list's state filter (by `parse`) and page size, or why not.
fn list_args<S>(
    q: &Params,
    parse: fn(&Params) -> Result<Option<S>, String>,
) -> Result<(Option<S>, u32), String> {
    Ok((parse(q)?, page_size(q)?))
}

/// A list's page size (`limit`, [`PAGE`] when absent), or why not.
fn page_size(q: &Params) -> Result<u32, String> {
    match param(q, "limit") {
        None => Ok(PAGE),
        Some(text) => text
            .parse()
            .map_err(|_| "limit must be a whole number from 1 to 1000".to_owned()),
    }
}

const TASK_STATES: [TaskState; 5] = [
    TaskState::Open,
    TaskState::Claimed,
    TaskState::Done,
    TaskState::Failed,
    TaskState::Dead,
];

const KEY_STATES: [KeyState; 4] = [
    KeyState::InFlight,
    KeyState::Uncertain,
    KeyState::Cleared,
    KeyState::Completed,
];

fn task_state(q: &HashMap<String, String>) -> Result<Option<TaskState>, String> {
    match param(q, "state") {
        None => Ok(None),
        Some(s) => TASK_STATES
            .into_iter()
            .find(|t| t.name() == s)
            .map(Some)
            .ok_or_else(|| format!("unknown state {s:?} (open, claimed, done, failed or dead)")),
    }
}

fn key_state(q: &HashMap<String, String>) -> Result<Option<KeyState>, String> {
    match param(q, "state") {
        None => Ok(None),
        Some(s) => KEY_STATES
            .into_iter()
            .find(|t| t.name() == s)
            .map(Some)
            .ok_or_else(|| {
                format!("unknown state {s:?} (in-flight, uncertain, cleared or completed)")
            }),
    }
}

fn tabs(base: &str, names: &[&str], on: Option<&str>) -> String {
    let mut out = String::from("<nav class=\"tabs\">");
    let all = on.is_none();
    let _ = write!(
        out,
        "<a href=\"{base}\"{}>all</a>",
        if all { " class=\"on\"" } else { "" }
    );
    for n in names {
        let _ = write!(
            out,
            "<a href=\"{base}{}\"{}>{n}</a>",
            html::query(&[("state", n)]),
            if on == Some(*n) { " class=\"on\"" } else { "" }
        );
    }
    out.push_str("</nav>\n");
    out
}

fn next_link(base: &str, state: Option<&str>, next: Option<&str>, limit: u32) -> String {
    next_link_in(base, &[("state", state)], next, limit)
}

/// [`next_link`] keeping the listing's filters (`name=value`, when set).
fn next_link_in(
    base: &str,
    filters: &[(&str, Option<&str>)],
    next: Option<&str>,
    limit: u32,
) -> String {
    let Some(next) = next else {
        return "<p>End of the list.</p>\n".into();
    };
    let mut pairs = vec![("after", next)];
    for (name, value) in filters {
        if let Some(v) = value {
            pairs.push((name, v));
        }
    }
    let limit = limit.to_string();
    if limit != PAGE.to_string() {
        pairs.push(("limit", &limit));
    }
    format!(
        "<p><a href=\"{base}{}\">Next page →</a></p>\n",
        html::query(&pairs)
    )
}

// ---------------------------------------------------------------------------
// The board.

/// The board's tab of delayed tasks (not a state: tasks of any state
/// waiting for their `not-before`, by due time).
const DELAYED: &str = "delayed";

/// A board listing: a state's page by id, the delayed tasks by due time,
/// or a group's tasks by id.
enum Board {
    State(Option<TaskState>),
    Delayed,
    Group(String),
}

fn board_args(q: &Params) -> Result<(Board, u32), String> {
    if let Some(group) = param(q, "group") {
        if param(q, "state").is_some() {
            return Err("filter by state or by group, not both".into());
        }
        return Ok((Board::Group(group.to_owned()), page_size(q)?));
    }
    if param(q, "state") == Some(DELAYED) {
        return Ok((Board::Delayed, page_size(q)?));
    }
    let (state, limit) = list_args(q, task_state)?;
    Ok((Board::State(state), limit))
}

/// One page of the board as `board_args` chose it.
async fn board_page(
    app: &App,
    board: &Board,
    after: Option<&str>,
    limit: u32,
) -> Result<TaskPage, Error> {
    match board {
        Board::State(state) => {
            app.call(
                "taskboard.list",
                app.kernel.taskboard().list(*state, after, limit),
            )
            .await
        }
        Board::Delayed => {
            app.call(
                "taskboard.list-delayed",
                app.kernel.taskboard().list_delayed(after, limit),
            )
            .await
        }
        Board::Group(group) => {
            app.call(
                "taskboard.list-group",
                app.kernel.taskboard().list_group(group, after, limit),
            )
            .await
        }
    }
}

async fn tasks(
    State(app): State<Shared>,
    axum::Extension(csrf): axum::Extension<Csrf>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let (board, limit) = match board_args(&q) {
        Ok(args) => args,
        Err(m) => return bad_request(&m),
    };
    let counts = match app
        .call("taskboard.count", app.kernel.taskboard().count())
        .await
    {
        Ok(c) => c,
        Err(e) => return refused(&e),
    };
    let after = param(&q, "after");
    let page_ = match board_page(&app, &board, after, limit).await {
        Ok(p) => p,
        Err(e) => return refused(&e),
    };
    let state = match &board {
        Board::State(state) => state.map(TaskState::name),
        Board::Delayed => Some(DELAYED),
        Board::Group(_) => None,
    };
    let group = match &board {
        Board::Group(g) => Some(g.as_str()),
        _ => None,
    };
    let now = time::now_ms();
    let mut names: Vec<&str> = TASK_STATES.iter().map(|s| s.name()).collect();
    names.push(DELAYED);
    let mut body = String::new();
    if param(&q, "done") == Some("recounted") {
        body.push_str("<div class=\"ok\">Every task is counted.</div>\n");
    }
    body.push_str(&counts_strip(&counts, &csrf));
    body.push_str(&tabs("/tasks", &names, state));
    let _ = writeln!(
        body,
        "<form method=\"get\" action=\"/tasks\"><label>Group <input name=\"group\" value=\"{}\"></label> <button>Show its tasks</button></form>",
        esc(group.unwrap_or_default())
    );
    if let Some(g) = group {
        let _ = writeln!(
            body,
            "<p>Every task of group <a href=\"/groups{}\">{}</a>, whatever its state, by id.</p>",
            html::query(&[("name", g)]),
            esc(g)
        );
    }
    if matches!(board, Board::Delayed) {
        body.push_str("<p>Tasks waiting for their due time (seeded with a delay, or backing off after a failure), soonest first. A task whose time has come stays here until a claimer next moves it back into the claim order.</p>\n");
    }
    body.push_str(
        "<table><thead><tr><th>id</th><th>state</th><th>title</th><th>fence</th><th>tries</th><th>priority</th><th>due</th><th>group</th><th>owner</th><th>until</th><th>last error</th></tr></thead><tbody>\n",
    );
    for t in &page_.items {
        let tries = match t.max_attempts {
            Some(max) => format!("{}/{max}", t.attempts),
            None => t.attempts.to_string(),
        };
        let _ = writeln!(
            body,
            "<tr><td><a href=\"/tasks/{}\">{}</a></td><td class=\"state-{s}\">{s}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"err\">{}</td></tr>",
            seg(&t.id),
            esc(&t.id),
            esc(&t.title),
            t.fence,
            tries,
            t.priority,
            t.not_before
                .map(|at| time::when(at, now))
                .unwrap_or_default(),
            t.group
                .as_deref()
                .map(|g| format!(
                    "<a href=\"/groups{}\">{}</a>",
                    html::query(&[("name", g)]),
                    esc(g)
                ))
                .unwrap_or_default(),
            esc(t.owner.as_deref().unwrap_or_default()),
            t.until.map(|at| time::when(at, now)).unwrap_or_default(),
            esc(t.last_error.as_deref().unwrap_or_default()),
            s = t.state.name(),
        );
    }
    body.push_str("</tbody></table>\n");
    body.push_str(&next_link_in(
        "/tasks",
        &[("state", state), ("group", group)],
        page_.next.as_deref(),
        limit,
    ));
    html_response(StatusCode::OK, page("Board", &body))
}

/// The board's counts by state above its tabs; on a board a format-1
/// kernel wrote that is not fully counted yet, what that means and the
/// action that counts the rest.
fn counts_strip(c: &TaskCounts, csrf: &Csrf) -> String {
    let mut out = String::from("<p class=\"counts\">");
    for (state, n) in output::counts_by_state(c) {
        let _ = write!(
            out,
            "<a href=\"/tasks?state={state}\" class=\"state-{state}\">{state} <b>{n}</b></a> "
        );
    }
    let total: u64 = output::counts_by_state(c).iter().map(|(_, n)| n).sum();
    let _ = writeln!(out, "<span>total <b>{total}</b></span></p>");
    if !c.exact {
        out.push_str(&recount_note("task", "board", "/tasks/recount", csrf));
    }
    out
}

/// Tasks a console recount visits per transaction.
const RECOUNT_PAGE: u32 = 500;

/// What a console recount counts.
#[derive(Clone, Copy)]
enum Recount {
    Tasks,
    Keys,
}

/// Count what a format-1 kernel left, a transaction per page (the store
/// stays open to workers), until every one is counted; then back to the
/// page, which says so.
async fn recount_all(app: &App, csrf: &Csrf, form: &Params, what: Recount) -> Response {
    if let Err(r) = check_csrf(csrf, form) {
        return r;
    }
    loop {
        let page = match what {
            Recount::Tasks => {
                app.call(
                    "taskboard.recount",
                    app.kernel.taskboard().recount(RECOUNT_PAGE),
                )
                .await
            }
            Recount::Keys => {
                app.call(
                    "sideeffect.recount",
                    app.kernel.sideeffect().recount(RECOUNT_PAGE),
                )
                .await
            }
        };
        match page {
            Ok(true) => {
                let done = match what {
                    Recount::Tasks => "/tasks?done=recounted",
                    Recount::Keys => "/keys?done=recounted",
                };
                return Redirect::to(done).into_response();
            }
            Ok(false) => {}
            Err(e) => return refused(&e),
        }
    }
}

/// The board's tasks a format-1 kernel left, counted.
async fn recount(
    State(app): State<Shared>,
    axum::Extension(csrf): axum::Extension<Csrf>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    recount_all(&app, &csrf, &form, Recount::Tasks).await
}

/// Where the counts are not exact: why, and the action that counts the
/// rest (`what`: tasks or keys; `store`: what a format-1 kernel wrote).
fn recount_note(what: &str, store: &str, action: &str, csrf: &Csrf) -> String {
    format!(
        "<fieldset><legend>Not every {what} is counted</legend><p>This {store} was written by a format-1 kernel (0.2 or 0.3): its {what}s are counted once a call changes them. Recount visits the others, {RECOUNT_PAGE} per transaction, and rewrites each in the current format; workers go on meanwhile.</p><form method=\"post\" action=\"{action}\">{}<button>Recount</button></form></fieldset>\n",
        csrf_field(&csrf.0)
    )
}

async fn task(
    State(app): State<Shared>,
    axum::Extension(csrf): axum::Extension<Csrf>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let t = match app
        .call("taskboard.get", app.kernel.taskboard().get(&id))
        .await
    {
        Ok(t) => t,
        Err(e) => return refused(&e),
    };
    let mut body = String::new();
    if param(&q, "done") == Some("revived") {
        body.push_str(
            "<div class=\"ok\">Revived: the task is open again, its attempts at 0.</div>\n",
        );
    }
    body.push_str(&html::fields(
        &output::task_json(&t, false),
        &["until", "not-before"],
        time::now_ms(),
    ));
    if t.state == TaskState::Dead {
        let _ = write!(
            body,
            "<fieldset><legend>Revive</legend><p>Revive makes this dead task open again: attempts back to 0, its last error and delay cleared, everything else kept. It is one atomic call: it can never clear a live claim.</p><form method=\"post\" action=\"/tasks/{}/revive\">{}<button>Revive {}</button></form></fieldset>",
            seg(&t.id),
            csrf_field(&csrf.0),
            esc(&t.id)
        );
    }
    html_response(StatusCode::OK, page(&format!("Task {}", t.id), &body))
}

async fn revive(
    State(app): State<Shared>,
    axum::Extension(csrf): axum::Extension<Csrf>,
    Path(id): Path<String>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if let Err(r) = check_csrf(&csrf, &form) {
        return r;
    }
    match app
        .call("taskboard.revive", app.kernel.taskboard().revive(&id))
        .await
    {
        Ok(_) => Redirect::to(&format!("/tasks/{}?done=revived", seg(&id))).into_response(),
        Err(e) => refused(&e),
    }
}

// ---------------------------------------------------------------------------
// Groups.

async fn groups(
    State(app): State<Shared>,
    axum::Extension(csrf): axum::Extension<Csrf>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let mut body = String::from(
        "<form method=\"get\" action=\"/groups\"><label>Group <input name=\"name\"></label> <button>Show</button></form>\n",
    );
    let Some(name) = param(&q, "name") else {
        let limit = match page_size(&q) {
            Ok(limit) => limit,
            Err(m) => return bad_request(&m),
        };
        let groups = match app
            .call(
                "taskboard.list-groups",
                app.kernel
                    .taskboard()
                    .list_groups(param(&q, "after"), limit),
            )
            .await
        {
            Ok(p) => p,
            Err(e) => return refused(&e),
        };
        body.push_str("<p>Every group with a limit or a task, by name, with its tasks by state.</p>\n<table><thead><tr><th>group</th><th>limit</th><th>live claims</th><th></th><th>open</th><th>claimed</th><th>done</th><th>failed</th><th>dead</th></tr></thead><tbody>\n");
        for g in &groups.items {
            let full = g.limit.is_some_and(|l| g.live >= l);
            let mut figures = String::new();
            for (state, n) in output::group_tasks_by_state(g) {
                let _ = write!(figures, "<td class=\"state-{state}\">{n}</td>");
            }
            let _ = writeln!(
                body,
                "<tr><td><a href=\"/groups{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td>{figures}</tr>",
                html::query(&[("name", &g.name)]),
                esc(&g.name),
                g.limit.map_or("none".into(), |l| l.to_string()),
                g.live,
                if full {
                    "<span class=\"state-dead\">full</span>"
                } else {
                    ""
                },
            );
        }
        body.push_str("</tbody></table>\n");
        body.push_str(&next_link("/groups", None, groups.next.as_deref(), limit));
        return html_response(StatusCode::OK, page("Groups", &body));
    };
    {
        match param(&q, "done") {
            Some("set") => body.push_str("<div class=\"ok\">The limit is set.</div>\n"),
            Some("removed") => body.push_str("<div class=\"ok\">The limit is removed.</div>\n"),
            _ => {}
        }
        let info = app
            .call(
                "taskboard.get-group",
                app.kernel.taskboard().get_group(name),
            )
            .await;
        match info {
            Ok(info) => body.push_str(&html::fields(
                &json!({ "group": name, "limit": info.limit, "live claims": info.live }),
                &[],
                0,
            )),
            Err(Error::NotFound) => {
                let _ = writeln!(
                    body,
                    "<p>Group <b>{}</b> has no limit (its claims are not counted).</p>",
                    esc(name)
                );
            }
            Err(e) => return refused(&e),
        }
        let _ = writeln!(
            body,
            "<p><a href=\"/tasks{}\">The group's tasks →</a></p>",
            html::query(&[("group", name)])
        );
        let _ = write!(
            body,
            "<fieldset><legend>Limit</legend><p>At most this many live claims of the group at once (1–100,000). Lowering a limit revokes no claim.</p><form method=\"post\" action=\"/groups/limit\">{}<input type=\"hidden\" name=\"name\" value=\"{}\"><label>Limit <input name=\"limit\" inputmode=\"numeric\"></label> <button>Set</button> <button name=\"remove\" value=\"1\">Remove the limit</button></form></fieldset>",
            csrf_field(&csrf.0),
            esc(name)
        );
    }
    html_response(StatusCode::OK, page("Groups", &body))
}

async fn group_limit(
    State(app): State<Shared>,
    axum::Extension(csrf): axum::Extension<Csrf>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if let Err(r) = check_csrf(&csrf, &form) {
        return r;
    }
    let Some(name) = param(&form, "name") else {
        return bad_request("name a group");
    };
    let limit = if param(&form, "remove").is_some() {
        None
    } else {
        match param(&form, "limit").map(str::parse::<u32>) {
            Some(Ok(l)) => Some(l),
            _ => return bad_request("the limit must be a whole number from 1 to 100,000"),
        }
    };
    match app
        .call(
            "taskboard.set-group-limit",
            app.kernel.taskboard().set_group_limit(name, limit),
        )
        .await
    {
        Ok(()) => Redirect::to(&format!(
            "/groups{}",
            html::query(&[
                ("name", name),
                ("done", if limit.is_some() { "set" } else { "removed" })
            ])
        ))
        .into_response(),
        Err(e) => refused(&e),
    }
}

// ---------------------------------------------------------------------------
// Side-effect keys.

async fn keys(
    State(app): State<Shared>,
    axum::Extension(csrf): axum::Extension<Csrf>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let (state, limit) = match list_args(&q, key_state) {
        Ok(args) => args,
        Err(m) => return bad_request(&m),
    };
    let counts = match app
        .call("sideeffect.count", app.kernel.sideeffect().count())
        .await
    {
        Ok(c) => c,
        Err(e) => return refused(&e),
    };
    let page_ = match app
        .call(
            "sideeffect.list",
            app.kernel
                .sideeffect()
                .list(state, param(&q, "after"), limit),
        )
        .await
    {
        Ok(p) => p,
        Err(e) => return refused(&e),
    };
    let now = time::now_ms();
    let names: Vec<&str> = KEY_STATES.iter().map(|s| s.name()).collect();
    let mut body = String::new();
    if param(&q, "done") == Some("recounted") {
        body.push_str("<div class=\"ok\">Every key is counted.</div>\n");
    }
    body.push_str(&key_counts_strip(&counts, &csrf, now));
    body.push_str(&tabs("/keys", &names, state.map(KeyState::name)));
    body.push_str("<table><thead><tr><th>key</th><th>state</th><th>resource</th><th>retry safety</th><th>reason</th><th>until</th><th>reconciling until</th></tr></thead><tbody>\n");
    for k in &page_.items {
        let _ = writeln!(
            body,
            "<tr><td><a href=\"/keys/{}\">{}</a></td><td class=\"state-{s}\">{s}</td><td>{}</td><td>{}</td><td class=\"err\">{}</td><td>{}</td><td>{}</td></tr>",
            seg(&k.key),
            esc(&k.key),
            esc(&k.resource),
            k.retry_safety.name(),
            esc(k.reason.as_deref().unwrap_or_default()),
            k.until.map(|at| time::when(at, now)).unwrap_or_default(),
            k.reconciling_until
                .map(|at| time::when(at, now))
                .unwrap_or_default(),
            s = k.state.name(),
        );
    }
    body.push_str("</tbody></table>\n");
    body.push_str(&next_link(
        "/keys",
        state.map(KeyState::name),
        page_.next.as_deref(),
        limit,
    ));
    html_response(StatusCode::OK, page("Side-effect keys", &body))
}

/// The keys' counts by state above their tabs, since when the oldest
/// uncertain key is, and notes (with the recount action) when the counts
/// are capped or not exact.
fn key_counts_strip(c: &KeyCounts, csrf: &Csrf, now: u64) -> String {
    let mut out = String::from("<p class=\"counts\">");
    for (state, n) in output::key_counts_by_state(c) {
        let _ = write!(
            out,
            "<a href=\"/keys?state={state}\" class=\"state-{state}\">{state} <b>{n}</b></a> "
        );
    }
    let total: u64 = output::key_counts_by_state(c).iter().map(|(_, n)| n).sum();
    let _ = write!(out, "<span>total <b>{total}</b></span>");
    if let Some(at) = c.oldest_uncertain {
        let _ = write!(
            out,
            " <span class=\"state-uncertain\">oldest uncertain since <b>{}</b></span>",
            time::when(at, now)
        );
    }
    out.push_str("</p>\n");
    if c.capped {
        out.push_str("<p>1,000 or more keys are uncertain: the counts read the first 1,000 by the time they turned uncertain, so intents that expired after those still count as in-flight.</p>\n");
    }
    if !c.exact {
        out.push_str(&recount_note("key", "store", "/keys/recount", csrf));
    }
    out
}

/// The keys a format-1 kernel left, counted.
async fn keys_recount(
    State(app): State<Shared>,
    axum::Extension(csrf): axum::Extension<Csrf>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    recount_all(&app, &csrf, &form, Recount::Keys).await
}

async fn key(
    State(app): State<Shared>,
    axum::Extension(csrf): axum::Extension<Csrf>,
    Path(key): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let info = match app
        .call("sideeffect.get", app.kernel.sideeffect().get(&key))
        .await
    {
        Ok(k) => k,
        Err(e) => return refused(&e),
    };
    let mut body = String::new();
    match param(&q, "done") {
        Some("completed") => body.push_str(
            "<div class=\"ok\">Resolved as applied: retries replay the recorded result.</div>\n",
        ),
        Some("cleared") => body.push_str(
            "<div class=\"ok\">Resolved as not applied: the next attempt runs the effect.</div>\n",
        ),
        Some("reconciling") => body.push_str(
            "<div class=\"ok\">You hold the reconcile claim: other reconcilers are refused until you resolve the key or the claim expires.</div>\n",
        ),
        _ => {}
    }
    let now = time::now_ms();
    body.push_str(&html::fields(
        &output::key_json(&info),
        &["until", "completed-at", "reconciling-until"],
        now,
    ));
    if info.state == KeyState::Uncertain {
        match (app.claim_on(&info.key, now), info.reconciling_until) {
            (Some((_, until)), _) => {
                let _ = writeln!(
                    body,
                    "<p class=\"state-uncertain\">This console holds the key's reconcile claim until {}: the resolution below uses it.</p>",
                    time::when(until, now)
                );
            }
            (None, Some(until)) => {
                let _ = writeln!(
                    body,
                    "<p class=\"state-uncertain\">Another reconciler holds the key's claim until {}: a resolution from here is refused (reconcile-taken) until then.</p>",
                    time::when(until, now)
                );
            }
            (None, None) => body.push_str(&reconcile_form(&csrf, &info)),
        }
        body.push_str(&resolve_form(&csrf, &info));
    }
    html_response(StatusCode::OK, page(&format!("Key {}", info.key), &body))
}

/// Reconcile claims from the console last this long by default; at most a
/// day.
const RECONCILE_MINUTES: u64 = 15;

fn reconcile_form(csrf: &Csrf, info: &KeyInfo) -> String {
    format!(
        "<fieldset><legend>Begin reconcile</legend>\
<p>Takes the key's reconcile claim while you check the downstream system ({res}): other reconcilers (<code>gak effects reconcile</code>, other consoles) are refused with reconcile-taken until you resolve the key here or the claim expires. Nothing about the effect changes. The claim stays in this console's memory and is never shown.</p>\
<form method=\"post\" action=\"/keys/{k}/reconcile\">{c}\
<p><label>Minutes <input name=\"minutes\" inputmode=\"numeric\" value=\"{RECONCILE_MINUTES}\"></label> \
<label><input type=\"checkbox\" name=\"confirm\" value=\"yes\"> Hold off other reconcilers for that long</label></p>\
<button>Begin reconcile of {kt}</button></form></fieldset>\n",
        res = esc(&info.resource),
        k = seg(&info.key),
        kt = esc(&info.key),
        c = csrf_field(&csrf.0),
    )
}

/// Take the key's reconcile claim and keep it for the resolution.
async fn reconcile(
    State(app): State<Shared>,
    axum::Extension(csrf): axum::Extension<Csrf>,
    Path(key): Path<String>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if let Err(r) = check_csrf(&csrf, &form) {
        return r;
    }
    if param(&form, "confirm") != Some("yes") {
        return bad_request(
            "confirm that other reconcilers are to be held off: nothing was changed",
        );
    }
    let minutes = match param(&form, "minutes").map(str::parse::<u64>) {
        None => RECONCILE_MINUTES,
        Some(Ok(m)) if (1..=1440).contains(&m) => m,
        Some(_) => {
            return bad_request(
                "minutes must be a whole number from 1 to 1440: nothing was changed",
            );
        }
    };
    let info = match app
        .call("sideeffect.get", app.kernel.sideeffect().get(&key))
        .await
    {
        Ok(k) => k,
        Err(e) => return refused(&e),
    };
    match app
        .call(
            "sideeffect.begin-reconcile",
            app.kernel
                .sideeffect()
                .begin_reconcile(&action_of(&info), minutes * 60_000),
        )
        .await
    {
        Ok(claim) => {
            app.keep_claim(&key, Some((claim.claim, claim.until)), time::now_ms());
            Redirect::to(&format!("/keys/{}?done=reconciling", seg(&key))).into_response()
        }
        Err(e) => refused(&e),
    }
}

fn resolve_form(csrf: &Csrf, info: &KeyInfo) -> String {
    format!(
        "<fieldset><legend>Resolve</legend>\
<p>Check the downstream system ({res}) first: did the effect happen?</p>\
<form method=\"post\" action=\"/keys/{k}/resolve\">{c}\
<p><label><input type=\"radio\" name=\"verdict\" value=\"applied\"> It was applied: record this result, and every retry replays it instead of running the effect</label><br>\
<textarea name=\"result\" rows=\"3\" placeholder=\"the effect's result\"></textarea></p>\
<p><label><input type=\"radio\" name=\"verdict\" value=\"not-applied\"> It was not applied: clear the key, and the next attempt runs the effect</label><br>\
<label><input type=\"checkbox\" name=\"force\" value=\"1\"> force it though the key is not retry-safe ({safety}): the effect may run twice</label></p>\
<p><label><input type=\"checkbox\" name=\"confirm\" value=\"yes\"> I checked the downstream system</label></p>\
<button>Resolve {kt}</button></form></fieldset>\n",
        res = esc(&info.resource),
        k = seg(&info.key),
        kt = esc(&info.key),
        c = csrf_field(&csrf.0),
        safety = info.retry_safety.name(),
    )
}

async fn resolve(
    State(app): State<Shared>,
    axum::Extension(csrf): axum::Extension<Csrf>,
    Path(key): Path<String>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if let Err(r) = check_csrf(&csrf, &form) {
        return r;
    }
    if param(&form, "confirm") != Some("yes") {
        return bad_request("confirm that you checked the downstream system: nothing was changed");
    }
    let applied = match param(&form, "verdict") {
        Some("applied") => true,
        Some("not-applied") => false,
        _ => return bad_request("choose applied or not applied: nothing was changed"),
    };
    let info = match app
        .call("sideeffect.get", app.kernel.sideeffect().get(&key))
        .await
    {
        Ok(k) => k,
        Err(e) => return refused(&e),
    };
    let action = action_of(&info);
    // The claim this console took with "Begin reconcile", or one taken and
    // used here, in this request: a capability, it never leaves the server.
    let claim = match app.claim_on(&key, time::now_ms()) {
        Some((claim, _)) => claim,
        None => match app
            .call(
                "sideeffect.begin-reconcile",
                app.kernel.sideeffect().begin_reconcile(&action, 60_000),
            )
            .await
        {
            Ok(c) => c.claim,
            Err(e) => return refused(&e),
        },
    };
    let resolution = Resolution {
        applied,
        result: applied.then(|| form.get("result").cloned().unwrap_or_default().into_bytes()),
        force_retryable: param(&form, "force").is_some(),
        claim: Some(claim),
    };
    match app
        .call(
            "sideeffect.resolve-uncertain",
            app.kernel
                .sideeffect()
                .resolve_uncertain(&action, &resolution),
        )
        .await
    {
        Ok(resolved) => {
            app.keep_claim(&key, None, time::now_ms());
            let done = match resolved {
                Resolved::Replayed(_) => "completed",
                Resolved::Cleared => "cleared",
            };
            Redirect::to(&format!("/keys/{}?done={done}", seg(&key))).into_response()
        }
        Err(e) => refused(&e),
    }
}

// ---------------------------------------------------------------------------
// Runs.

async fn runs(State(app): State<Shared>, Query(q): Query<HashMap<String, String>>) -> Response {
    let id = param(&q, "id").unwrap_or_default();
    let steps = param(&q, "steps").unwrap_or_default();
    let mut body = format!(
        "<form method=\"get\" action=\"/runs\"><p><label>Run id <input name=\"id\" value=\"{}\"></label></p>\
<p><label>Steps, for a resume plan (a JSON array of {{\"id\", \"depends-on\"}} in declaration order; optional)<br>\
<textarea name=\"steps\" rows=\"4\">{}</textarea></label></p><button>Show</button></form>\n",
        esc(id),
        esc(steps)
    );
    if id.is_empty() {
        return html_response(StatusCode::OK, page("Runs", &body));
    }
    let snapshot = app
        .call("checkpoint.load", app.kernel.checkpoint().load(id))
        .await;
    let outcome = app
        .call("commitgate.read", app.kernel.commitgate().read(id, None))
        .await;
    let snapshot = match snapshot {
        Ok(s) => Some(s),
        Err(Error::NotFound) => None,
        Err(e) => return refused(&e),
    };
    let outcome = match outcome {
        Ok(o) => Some(o),
        Err(Error::NotFound) => None,
        Err(e) => return refused(&e),
    };
    if snapshot.is_none() && outcome.is_none() {
        return refused_page(
            StatusCode::NOT_FOUND,
            "not-found",
            "no snapshot and no outcome for this run",
        );
    }
    body.push_str("<h2>Snapshot</h2>\n");
    match &snapshot {
        Some(s) => body.push_str(&html::fields(&output::snapshot_json(s), &[], 0)),
        None => body.push_str("<p>None saved.</p>\n"),
    }
    body.push_str("<h2>Terminal outcome</h2>\n");
    match &outcome {
        Some(o) => body.push_str(&html::fields(&output::outcome_json(o), &[], 0)),
        None => body.push_str("<p>None yet.</p>\n"),
    }
    if !steps.is_empty() {
        let defs = match parse_steps("the steps", steps) {
            Ok(d) => d,
            Err(f) => return bad_request(&f.message()),
        };
        let plan = match app
            .call(
                "checkpoint.build-plan",
                app.kernel.checkpoint().build_plan(&defs, snapshot.as_ref()),
            )
            .await
        {
            Ok(p) => p,
            Err(e) => return refused(&e),
        };
        let untrusted: Vec<String> = explain_untrusted(&plan, &defs)
            .into_iter()
            .map(|(step, why)| format!("{step}: {why}"))
            .collect();
        body.push_str("<h2>Resume plan</h2>\n");
        body.push_str(&html::fields(
            &json!({
                "skipped (trusted done)": plan.skip,
                "run next, in order": plan.run,
                "untrusted": untrusted,
            }),
            &[],
            0,
        ));
    }
    html_response(StatusCode::OK, page(&format!("Run {id}"), &body))
}

// ---------------------------------------------------------------------------
// Retention.

fn retention_form(csrf: &Csrf, older: &str) -> String {
    format!(
        "<p>Removes records that finished more than the given time ago: completed side-effect keys, done and dead tasks no unfinished task needs, runs with a terminal outcome. <b>What pruning gives up</b>: a retry of a pruned key runs its effect again, and a pruned run id starts over. Fences are never removed.</p>\
<form method=\"post\" action=\"/retention/prune\">{}<label>Older than <input name=\"older-than\" value=\"{}\"></label> (500ms, 30s, 15m, 12h, 7d) \
<button name=\"mode\" value=\"dry-run\">Dry run</button> <button name=\"mode\" value=\"prune\">Prune one batch</button></form>\n",
        csrf_field(&csrf.0),
        esc(older)
    )
}

async fn retention(axum::Extension(csrf): axum::Extension<Csrf>) -> Response {
    html_response(
        StatusCode::OK,
        page("Retention", &retention_form(&csrf, "30d")),
    )
}

async fn prune(
    State(app): State<Shared>,
    axum::Extension(csrf): axum::Extension<Csrf>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if let Err(r) = check_csrf(&csrf, &form) {
        return r;
    }
    let older = param(&form, "older-than").unwrap_or("30d");
    let older_ms = match time::parse_duration(older) {
        Ok(ms) => ms,
        Err(m) => return bad_request(&m),
    };
    let before = time::now_ms().saturating_sub(older_ms);
    let dry = match param(&form, "mode") {
        Some("dry-run") => true,
        Some("prune") => false,
        _ => return bad_request("choose a dry run or a prune: nothing was changed"),
    };
    let retention = app.kernel.retention();
    let r = if dry {
        app.call(
            "retention.prune-dry-run",
            retention.prune_dry_run(before, PAGE),
        )
        .await
    } else {
        app.call("retention.prune", retention.prune(before, PAGE))
            .await
    };
    let p = match r {
        Ok(p) => p,
        Err(e) => return refused(&e),
    };
    let verb = if dry { "Would remove" } else { "Removed" };
    let body = format!(
        "<div class=\"ok\">{verb} {} keys, {} tasks and {} runs (a batch of at most {PAGE} of each){}</div>\n{}",
        p.removed_keys,
        p.removed_tasks,
        p.removed_runs,
        if p.more { "; more remain" } else { "" },
        retention_form(&csrf, older)
    );
    html_response(StatusCode::OK, page("Retention", &body))
}

// ---------------------------------------------------------------------------
// Metrics.

/// At most this many groups are listed on `/metrics` (pages of 1,000):
/// past it, `gak_groups_truncated` says so.
const METRICS_GROUPS: usize = 10_000;

/// The page `/metrics` lists groups by: the contract's largest.
const METRICS_PAGE: u32 = 1000;

async fn metrics(State(app): State<Shared>) -> Response {
    let mut out = String::new();
    // The board, from the contract's bounded reads: every group's limit and
    // live claims (page by page), and the next delayed task's due time.
    let mut groups = Vec::new();
    let mut after: Option<String> = None;
    let mut truncated = false;
    loop {
        let page = match app
            .call(
                "taskboard.list-groups",
                app.kernel
                    .taskboard()
                    .list_groups(after.as_deref(), METRICS_PAGE),
            )
            .await
        {
            Ok(p) => p,
            Err(e) => return api_refused(&e),
        };
        groups.extend(page.items);
        match page.next {
            Some(next) if groups.len() < METRICS_GROUPS => after = Some(next),
            Some(_) => {
                truncated = true;
                break;
            }
            None => break,
        }
    }
    let next_due = match app
        .call(
            "taskboard.list-delayed",
            app.kernel.taskboard().list_delayed(None, 1),
        )
        .await
    {
        Ok(p) => p.items.first().and_then(|t| t.not_before),
        Err(e) => return api_refused(&e),
    };
    let counts = match app
        .call("taskboard.count", app.kernel.taskboard().count())
        .await
    {
        Ok(c) => c,
        Err(e) => return api_refused(&e),
    };
    let key_counts = match app
        .call("sideeffect.count", app.kernel.sideeffect().count())
        .await
    {
        Ok(c) => c,
        Err(e) => return api_refused(&e),
    };
    out.push_str("# HELP gak_keys Side-effect keys by state as the listing shows them (an expired intent is uncertain).\n# TYPE gak_keys gauge\n");
    for (state, n) in output::key_counts_by_state(&key_counts) {
        let _ = writeln!(out, "gak_keys{{state=\"{state}\"}} {n}");
    }
    let _ = writeln!(
        out,
        "# HELP gak_keys_counted 1 when gak_keys covers every key; 0 on a store a format-1 kernel wrote until `gak effects recount`.\n# TYPE gak_keys_counted gauge\ngak_keys_counted {}\n# HELP gak_keys_capped 1 when 1,000 or more keys are uncertain: intents that expired after the first 1,000 still count as in-flight.\n# TYPE gak_keys_capped gauge\ngak_keys_capped {}",
        u8::from(key_counts.exact),
        u8::from(key_counts.capped)
    );
    if let Some(at) = key_counts.oldest_uncertain {
        let _ = writeln!(
            out,
            "# HELP gak_keys_oldest_uncertain_since_seconds When the longest-uncertain key turned uncertain (Unix seconds); absent when no key is uncertain.\n# TYPE gak_keys_oldest_uncertain_since_seconds gauge\ngak_keys_oldest_uncertain_since_seconds {}\n# HELP gak_keys_oldest_uncertain_age_seconds How long the longest-uncertain key has been uncertain; absent when no key is.\n# TYPE gak_keys_oldest_uncertain_age_seconds gauge\ngak_keys_oldest_uncertain_age_seconds {}",
            at as f64 / 1000.0,
            time::now_ms().saturating_sub(at) as f64 / 1000.0
        );
    }
    out.push_str("# HELP gak_tasks Tasks on the board by stored state (an expired claim counts as claimed until taken over).\n# TYPE gak_tasks gauge\n");
    for (state, n) in output::counts_by_state(&counts) {
        let _ = writeln!(out, "gak_tasks{{state=\"{state}\"}} {n}");
    }
    let _ = writeln!(
        out,
        "# HELP gak_tasks_counted 1 when gak_tasks covers every task; 0 on a board a format-1 kernel wrote until `gak tasks recount`.\n# TYPE gak_tasks_counted gauge\ngak_tasks_counted {}",
        u8::from(counts.exact)
    );
    out.push_str("# HELP gak_group_live_claims Live claims of a group (claimed, until not passed), exact.\n# TYPE gak_group_live_claims gauge\n");
    for g in &groups {
        let _ = writeln!(
            out,
            "gak_group_live_claims{{group=\"{}\"}} {}",
            label(&g.name),
            g.live
        );
    }
    out.push_str(
        "# HELP gak_group_tasks A group's tasks by stored state.\n# TYPE gak_group_tasks gauge\n",
    );
    for g in &groups {
        for (state, n) in output::group_tasks_by_state(g) {
            let _ = writeln!(
                out,
                "gak_group_tasks{{group=\"{}\",state=\"{state}\"}} {n}",
                label(&g.name)
            );
        }
    }
    out.push_str("# HELP gak_group_limit A group's limit on live claims (groups without one are not listed).\n# TYPE gak_group_limit gauge\n");
    for g in &groups {
        if let Some(limit) = g.limit {
            let _ = writeln!(
                out,
                "gak_group_limit{{group=\"{}\"}} {limit}",
                label(&g.name)
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP gak_groups_truncated 1 when more groups exist than /metrics lists ({METRICS_GROUPS}).\n# TYPE gak_groups_truncated gauge\ngak_groups_truncated {}",
        u8::from(truncated)
    );
    if let Some(at) = next_due {
        let _ = writeln!(
            out,
            "# HELP gak_delayed_next_due_seconds When the soonest delayed task comes due (Unix seconds); absent when none waits.\n# TYPE gak_delayed_next_due_seconds gauge\ngak_delayed_next_due_seconds {}",
            at as f64 / 1000.0
        );
    }

    // The console's own kernel calls.
    let calls: Vec<(CallKind, u64, f64, Vec<u64>)> = {
        let calls = app.calls.lock().unwrap_or_else(PoisonError::into_inner);
        let mut v: Vec<_> = calls
            .iter()
            .map(|(k, t)| (*k, t.count, t.seconds, t.within.to_vec()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    out.push_str("# HELP gak_console_calls_total Kernel calls the console made, by operation and outcome.\n# TYPE gak_console_calls_total counter\n");
    for ((op, outcome), n, _, _) in &calls {
        let _ = writeln!(
            out,
            "gak_console_calls_total{{operation=\"{op}\",outcome=\"{outcome}\"}} {n}"
        );
    }
    out.push_str("# HELP gak_console_call_duration_seconds How long those calls took.\n# TYPE gak_console_call_duration_seconds histogram\n");
    for ((op, outcome), n, seconds, within) in &calls {
        let mut cumulative = 0;
        for (bound, k) in BUCKETS.iter().zip(within) {
            cumulative += k;
            let _ = writeln!(
                out,
                "gak_console_call_duration_seconds_bucket{{operation=\"{op}\",outcome=\"{outcome}\",le=\"{bound}\"}} {cumulative}"
            );
        }
        let _ = writeln!(
            out,
            "gak_console_call_duration_seconds_bucket{{operation=\"{op}\",outcome=\"{outcome}\",le=\"+Inf\"}} {n}\ngak_console_call_duration_seconds_sum{{operation=\"{op}\",outcome=\"{outcome}\"}} {seconds}\ngak_console_call_duration_seconds_count{{operation=\"{op}\",outcome=\"{outcome}\"}} {n}"
        );
    }
    let _ = writeln!(
        out,
        "# HELP gak_console_uptime_seconds Seconds since the console started.\n# TYPE gak_console_uptime_seconds gauge\ngak_console_uptime_seconds {}",
        app.started.elapsed().as_secs_f64()
    );
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response()
}

/// A Prometheus label value: backslash, quote and newline escaped (the
/// text format's rule); a group name is attacker-controlled text.
fn label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

// ---------------------------------------------------------------------------
// The API: the CLI's --json shapes.

async fn api_counts(State(app): State<Shared>) -> Response {
    match app
        .call("taskboard.count", app.kernel.taskboard().count())
        .await
    {
        Ok(c) => json_response(StatusCode::OK, &output::task_counts_json(&c)),
        Err(e) => api_refused(&e),
    }
}

async fn api_key_counts(State(app): State<Shared>) -> Response {
    match app
        .call("sideeffect.count", app.kernel.sideeffect().count())
        .await
    {
        Ok(c) => json_response(StatusCode::OK, &output::key_counts_json(&c, time::now_ms())),
        Err(e) => api_refused(&e),
    }
}

async fn api_tasks(
    State(app): State<Shared>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let (board, limit) = match board_args(&q) {
        Ok(args) => args,
        Err(m) => return api_refused(&Error::InvalidInput(m)),
    };
    match board_page(&app, &board, param(&q, "after"), limit).await {
        Ok(p) => json_response(StatusCode::OK, &output::task_page_json(&p)),
        Err(e) => api_refused(&e),
    }
}

async fn api_task(State(app): State<Shared>, Path(id): Path<String>) -> Response {
    match app
        .call("taskboard.get", app.kernel.taskboard().get(&id))
        .await
    {
        Ok(t) => json_response(StatusCode::OK, &output::task_json(&t, false)),
        Err(e) => api_refused(&e),
    }
}

async fn api_groups(
    State(app): State<Shared>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let limit = match page_size(&q) {
        Ok(limit) => limit,
        Err(m) => return api_refused(&Error::InvalidInput(m)),
    };
    match app
        .call(
            "taskboard.list-groups",
            app.kernel
                .taskboard()
                .list_groups(param(&q, "after"), limit),
        )
        .await
    {
        Ok(p) => json_response(StatusCode::OK, &output::group_page_json(&p)),
        Err(e) => api_refused(&e),
    }
}

async fn api_group(State(app): State<Shared>, Path(name): Path<String>) -> Response {
    match app
        .call(
            "taskboard.get-group",
            app.kernel.taskboard().get_group(&name),
        )
        .await
    {
        Ok(i) => json_response(
            StatusCode::OK,
            &output::group_json(&name, Some(i.limit), Some(i.live)),
        ),
        Err(e) => api_refused(&e),
    }
}

async fn api_keys(State(app): State<Shared>, Query(q): Query<HashMap<String, String>>) -> Response {
    let (state, limit) = match list_args(&q, key_state) {
        Ok(args) => args,
        Err(m) => return api_refused(&Error::InvalidInput(m)),
    };
    match app
        .call(
            "sideeffect.list",
            app.kernel
                .sideeffect()
                .list(state, param(&q, "after"), limit),
        )
        .await
    {
        Ok(p) => json_response(StatusCode::OK, &output::key_page_json(&p)),
        Err(e) => api_refused(&e),
    }
}

async fn api_key(State(app): State<Shared>, Path(key): Path<String>) -> Response {
    match app
        .call("sideeffect.get", app.kernel.sideeffect().get(&key))
        .await
    {
        Ok(k) => json_response(StatusCode::OK, &output::key_json(&k)),
        Err(e) => api_refused(&e),
    }
}
