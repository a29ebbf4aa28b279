//! How results are shown: aligned tables for people (colour only on a
//! terminal), JSON for scripts. Capabilities (tokens, claims) are printed only
//! by the commands that minted them; everything else never sees them.
use std::io::IsTerminal;

use serde_json::{Value, json};

use gak::{
    GroupEntry, GroupPage, KeyCounts, KeyInfo, KeyPage, Outcome, Snapshot, Task, TaskCounts,
    TaskPage,
};

use super::time;

/// How to print: JSON or tables, with or without colour.
#[derive(Clone, Copy, Debug)]
pub struct Style {
    /// JSON documents instead of tables.
    pub json: bool,
    /// ANSI colour in tables.
    pub colour: bool,
}

impl Style {
    /// JSON when asked; colour only when stdout is a terminal and the user
    /// did not opt out (`NO_COLOR`, `TERM=dumb`).
    pub fn detect(json: bool) -> Style {
        let opted_out = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
            || std::env::var("TERM").is_ok_and(|t| t == "dumb");
        Style {
            json,
            colour: !json && !opted_out && std::io::stdout().is_terminal(),
        }
    }

    /// Print a JSON document (pretty, one per command) to stdout.
    pub fn print_json(&self, value: &Value) {
        println!(
            "{}",
            serde_json::to_string_pretty(value).expect("a JSON value always serializes")
        );
    }

    /// One page of a listing: its JSON document, or its rows and, when
    /// there is more, the `--after` that reads the next page.
    pub fn print_page(
        &self,
        json: impl FnOnce() -> Value,
        rows: impl FnOnce() -> String,
        next: Option<&str>,
    ) {
        if self.json {
            self.print_json(&json());
            return;
        }
        print!("{}", rows());
        if let Some(next) = next {
            println!("(more: --after {})", printable(next));
        }
    }

    /// A state name, coloured by what it asks of an operator.
    pub fn state(&self, name: &str) -> Cell {
        let code = match name {
            "uncertain" | "failed" | "dead" => "31", // red: needs a person
            "in-flight" | "claimed" => "33",         // yellow: someone is on it
            "completed" | "done" => "32",            // green: finished
            _ => "",
        };
        Cell::new(name).colour(if self.colour { code } else { "" })
    }
}

/// One table cell: text, and an ANSI colour applied after padding.
#[derive(Clone, Debug)]
pub struct Cell {
    text: String,
    colour: &'static str,
}

impl Cell {
    /// A plain cell; control characters are escaped so a value read from
    /// the store can never drive the operator's terminal.
    pub fn new(text: impl AsRef<str>) -> Cell {
        Cell {
            text: printable(text.as_ref()),
            colour: "",
        }
    }

    fn colour(mut self, code: &'static str) -> Cell {
        self.colour = code;
        self
    }

    fn width(&self) -> usize {
        self.text.chars().count()
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Cell {
        Cell::new(s)
    }
}

impl From<&str> for Cell {
    fn from(s: &str) -> Cell {
        Cell::new(s)
    }
}

/// Escape control characters (ESC, CR, …) for a terminal.
pub fn printable(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    text.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// Rows under a header, columns padded to their widest cell.
pub fn table(header: &[&str], rows: &[Vec<Cell>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.width());
        }
    }
    let mut out = String::new();
    let header: Vec<Cell> = header.iter().map(|h| Cell::new(*h)).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            let last = i + 1 == row.len();
            let pad = if last {
                0
            } else {
                widths[i] - cell.width() + 2
            };
            if cell.colour.is_empty() {
                line.push_str(&cell.text);
            } else {
                line.push_str(&format!("\x1b[{}m{}\x1b[0m", cell.colour, cell.text));
            }
            line.push_str(&" ".repeat(pad));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `field  value` lines for one record.
pub fn fields(pairs: &[(&str, Cell)]) -> String {
    let rows: Vec<Vec<Cell>> = pairs
        .iter()
        .map(|(k, v)| vec![Cell::new(*k), v.clone()])
        .collect();
    let text = table(&["", ""], &rows);
    // Drop the empty header line.
    text.split_once('\n')
        .map_or(text.clone(), |(_, rest)| rest.to_owned())
}

fn opt(v: Option<u64>) -> Value {
    v.map_or(Value::Null, Value::from)
}

/// A task as JSON. `token` is included only when the command minted it.
pub fn task_json(task: &Task, minted: bool) -> Value {
    let mut v = json!({
        "id": task.id,
        "title": task.title,
        "deps": task.deps,
        "state": task.state.name(),
        "owner": task.owner,
        "until": opt(task.until),
        "fence": task.fence,
        "priority": task.priority,
        "not-before": opt(task.not_before),
        "max-attempts": task.max_attempts,
        "group": task.group,
        "attempts": task.attempts,
        "last-error": task.last_error,
    });
    if minted {
        v["token"] = json!(task.token);
    }
    v
}

/// A page of tasks as JSON: `{items, next}`.
pub fn task_page_json(page: &TaskPage) -> Value {
    let items: Vec<Value> = page.items.iter().map(|t| task_json(t, false)).collect();
    json!({ "items": items, "next": page.next })
}

/// A table shows at most this many characters of a last error (`tasks
/// show` and `--json` print it whole).
const ERROR_WIDTH: usize = 40;

/// A page of tasks as a table: TRIES always (`attempts/max-attempts` when
/// bounded); PRI, DUE, GROUP and LAST-ERROR only when some row has one.
pub fn task_rows(style: &Style, tasks: &[Task], now: u64) -> String {
    let pri = tasks.iter().any(|t| t.priority != 0);
    let due = tasks.iter().any(|t| t.not_before.is_some());
    let group = tasks.iter().any(|t| t.group.is_some());
    let error = tasks.iter().any(|t| t.last_error.is_some());
    let at = |v: Option<u64>| Cell::new(v.map_or("-".into(), |u| time::when(u, now)));
    let mut header = vec!["ID", "STATE"];
    if pri {
        header.push("PRI");
    }
    header.extend(["OWNER", "FENCE", "TRIES", "UNTIL"]);
    if due {
        header.push("DUE");
    }
    if group {
        header.push("GROUP");
    }
    header.extend(["DEPS", "TITLE"]);
    if error {
        header.push("LAST-ERROR");
    }
    let rows: Vec<Vec<Cell>> = tasks
        .iter()
        .map(|t| {
            let mut row = vec![Cell::new(&t.id), style.state(t.state.name())];
            if pri {
                row.push(Cell::new(t.priority.to_string()));
            }
            row.extend([
                Cell::new(t.owner.as_deref().unwrap_or("-")),
                Cell::new(t.fence.to_string()),
                Cell::new(tries(t)),
                at(t.until),
            ]);
            if due {
                row.push(at(t.not_before));
            }
            if group {
                row.push(Cell::new(t.group.as_deref().unwrap_or("-")));
            }
            row.extend([
                Cell::new(if t.deps.is_empty() {
                    "-".into()
                } else {
                    t.deps.join(",")
                }),
                Cell::new(&t.title),
            ]);
            if error {
                row.push(Cell::new(
                    t.last_error
                        .as_deref()
                        .map_or("-".into(), |e| clip(e, ERROR_WIDTH)),
                ));
            }
            row
        })
        .collect();
    table(&header, &rows)
}

/// Grants so far, out of `max-attempts` when bounded: `2` or `2/3`.
fn tries(t: &Task) -> String {
    match t.max_attempts {
        Some(max) => format!("{}/{max}", t.attempts),
        None => t.attempts.to_string(),
    }
}

/// At most `width` characters of `text`, `…` marking a cut.
fn clip(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(width - 1).collect();
    cut.push('…');
    cut
}

/// One task as `field value` lines; the token only when minted. Attempts
/// always; priority, not-before, group, max-attempts and last-error when
/// set (priority when not 0).
pub fn task_fields(style: &Style, task: &Task, now: u64, minted: bool) -> String {
    let mut pairs = vec![
        ("id", Cell::new(&task.id)),
        ("title", Cell::new(&task.title)),
        ("state", style.state(task.state.name())),
        ("owner", Cell::new(task.owner.as_deref().unwrap_or("-"))),
        ("fence", Cell::new(task.fence.to_string())),
        (
            "until",
            Cell::new(task.until.map_or("-".into(), |u| time::when(u, now))),
        ),
        (
            "deps",
            Cell::new(if task.deps.is_empty() {
                "-".into()
            } else {
                task.deps.join(", ")
            }),
        ),
    ];
    if task.priority != 0 {
        pairs.push(("priority", Cell::new(task.priority.to_string())));
    }
    if let Some(at) = task.not_before {
        pairs.push(("not-before", Cell::new(time::when(at, now))));
    }
    if let Some(group) = &task.group {
        pairs.push(("group", Cell::new(group)));
    }
    pairs.push(("attempts", Cell::new(task.attempts.to_string())));
    if let Some(max) = task.max_attempts {
        pairs.push(("max-attempts", Cell::new(max.to_string())));
    }
    if let Some(error) = &task.last_error {
        pairs.push(("last-error", Cell::new(error)));
    }
    if minted && let Some(token) = &task.token {
        pairs.push(("token", Cell::new(token)));
    }
    fields(&pairs)
}

/// A group as JSON: `{group, limit, live}`; `limit` is `null` once removed,
/// `live` when it is not known.
pub fn group_json(group: &str, limit: Option<u32>, live: Option<u32>) -> Value {
    json!({ "group": group, "limit": limit, "live": live })
}

/// A group as `field value` lines.
pub fn group_fields(group: &str, limit: Option<u32>, live: Option<u32>) -> String {
    let num = |v: Option<u32>| Cell::new(v.map_or("-".into(), |n| n.to_string()));
    fields(&[
        ("group", Cell::new(group)),
        ("limit", num(limit)),
        ("live", num(live)),
    ])
}

/// A page of groups as JSON: `{items: [{group, limit, live, tasks: {open,
/// claimed, done, failed, dead}}], next}`, each item in `group_json`'s
/// shape with its tasks by state.
pub fn group_page_json(page: &GroupPage) -> Value {
    let items: Vec<Value> = page
        .items
        .iter()
        .map(|g| {
            let mut item = group_json(&g.name, g.limit, Some(g.live));
            let tasks: serde_json::Map<String, Value> = group_tasks_by_state(g)
                .into_iter()
                .map(|(state, n)| (state.to_owned(), json!(n)))
                .collect();
            item["tasks"] = Value::Object(tasks);
            item
        })
        .collect();
    json!({ "items": items, "next": page.next })
}

/// A group's tasks, state by state, in the contract's order.
pub fn group_tasks_by_state(g: &GroupEntry) -> [(&'static str, u64); 5] {
    [
        ("open", g.open),
        ("claimed", g.claimed),
        ("done", g.done),
        ("failed", g.failed),
        ("dead", g.dead),
    ]
}

/// A page of groups as a table: GROUP, LIMIT (`-`: none), LIVE, and the
/// group's tasks by state.
pub fn group_rows(groups: &[GroupEntry]) -> String {
    let rows: Vec<Vec<Cell>> = groups
        .iter()
        .map(|g| {
            let mut row = vec![
                Cell::new(&g.name),
                Cell::new(g.limit.map_or("-".into(), |n| n.to_string())),
                Cell::new(g.live.to_string()),
            ];
            row.extend(
                group_tasks_by_state(g)
                    .into_iter()
                    .map(|(_, n)| Cell::new(n.to_string())),
            );
            row
        })
        .collect();
    table(
        &[
            "GROUP", "LIMIT", "LIVE", "OPEN", "CLAIMED", "DONE", "FAILED", "DEAD",
        ],
        &rows,
    )
}

/// The board's counts as JSON: `{open, claimed, done, failed, dead, total,
/// exact}`.
pub fn task_counts_json(c: &TaskCounts) -> Value {
    json!({
        "open": c.open,
        "claimed": c.claimed,
        "done": c.done,
        "failed": c.failed,
        "dead": c.dead,
        "total": counts_by_state(c).iter().map(|(_, n)| n).sum::<u64>(),
        "exact": c.exact,
    })
}

/// The board's counts, state by state, in the contract's order.
pub fn counts_by_state(c: &TaskCounts) -> [(&'static str, u64); 5] {
    [
        ("open", c.open),
        ("claimed", c.claimed),
        ("done", c.done),
        ("failed", c.failed),
        ("dead", c.dead),
    ]
}

/// The board's counts as a table, a state a row, and a note when a board
/// a format-1 kernel wrote is not fully counted.
pub fn task_counts_rows(style: &Style, c: &TaskCounts) -> String {
    let rows: Vec<Vec<Cell>> = counts_by_state(c)
        .into_iter()
        .map(|(state, n)| vec![style.state(state), Cell::new(n.to_string())])
        .collect();
    let mut out = table(&["STATE", "TASKS"], &rows);
    if !c.exact {
        out.push_str(
            "not exact: tasks a format-1 kernel wrote are counted once a call changes them; `gak tasks recount` counts the rest\n",
        );
    }
    out
}

/// The keys' counts as JSON: `{cleared, in-flight, uncertain, completed,
/// total, oldest-uncertain, oldest-uncertain-age-ms, capped, exact}` (the
/// age at `now`; both null when no key is uncertain).
pub fn key_counts_json(c: &KeyCounts, now: u64) -> Value {
    json!({
        "cleared": c.cleared,
        "in-flight": c.in_flight,
        "uncertain": c.uncertain,
        "completed": c.completed,
        "total": key_counts_by_state(c).iter().map(|(_, n)| n).sum::<u64>(),
        "oldest-uncertain": opt(c.oldest_uncertain),
        "oldest-uncertain-age-ms": opt(c.oldest_uncertain.map(|at| now.saturating_sub(at))),
        "capped": c.capped,
        "exact": c.exact,
    })
}

/// The keys' counts, state by state, in the contract's order.
pub fn key_counts_by_state(c: &KeyCounts) -> [(&'static str, u64); 4] {
    [
        ("cleared", c.cleared),
        ("in-flight", c.in_flight),
        ("uncertain", c.uncertain),
        ("completed", c.completed),
    ]
}

/// The keys' counts as a table, the oldest uncertain key's age, and notes
/// when the counts are capped or not exact.
pub fn key_counts_rows(style: &Style, c: &KeyCounts, now: u64) -> String {
    let rows: Vec<Vec<Cell>> = key_counts_by_state(c)
        .into_iter()
        .map(|(state, n)| vec![style.state(state), Cell::new(n.to_string())])
        .collect();
    let mut out = table(&["STATE", "KEYS"], &rows);
    if let Some(at) = c.oldest_uncertain {
        out.push_str(&format!("oldest uncertain since {}\n", time::when(at, now)));
    }
    if c.capped {
        out.push_str(
            "capped: 1000 or more keys are uncertain; intents that expired after the first 1000 still count as in-flight\n",
        );
    }
    if !c.exact {
        out.push_str(
            "not exact: keys a format-1 kernel wrote are counted once a call changes them; `gak effects recount` counts the rest\n",
        );
    }
    out
}

/// A key as JSON (key-info never carries a holder or claim).
pub fn key_json(k: &KeyInfo) -> Value {
    json!({
        "key": k.key,
        "state": k.state.name(),
        "retry-safety": k.retry_safety.name(),
        "fingerprint": k.fingerprint,
        "resource": k.resource,
        "until": opt(k.until),
        "reason": k.reason,
        "completed-at": opt(k.completed_at),
        "reconciling-until": opt(k.reconciling_until),
    })
}

/// A page of keys as JSON: `{items, next}`.
pub fn key_page_json(page: &KeyPage) -> Value {
    let items: Vec<Value> = page.items.iter().map(key_json).collect();
    json!({ "items": items, "next": page.next })
}

/// A page of keys as a table.
pub fn key_rows(style: &Style, keys: &[KeyInfo], now: u64) -> String {
    let rows: Vec<Vec<Cell>> = keys
        .iter()
        .map(|k| {
            let since = match (k.until, k.completed_at) {
                (Some(u), _) => time::when(u, now),
                (None, Some(c)) => time::when(c, now),
                _ => "-".into(),
            };
            vec![
                Cell::new(&k.key),
                style.state(k.state.name()),
                Cell::new(&k.resource),
                Cell::new(k.retry_safety.name()),
                Cell::new(since),
                Cell::new(k.reason.as_deref().unwrap_or("-")),
            ]
        })
        .collect();
    table(
        &["KEY", "STATE", "RESOURCE", "RETRY", "UNTIL/AT", "REASON"],
        &rows,
    )
}

/// One key as `field value` lines.
pub fn key_fields(style: &Style, k: &KeyInfo, now: u64) -> String {
    let at = |v: Option<u64>| Cell::new(v.map_or("-".into(), |t| time::when(t, now)));
    fields(&[
        ("key", Cell::new(&k.key)),
        ("state", style.state(k.state.name())),
        ("resource", Cell::new(&k.resource)),
        ("retry-safety", Cell::new(k.retry_safety.name())),
        (
            "fingerprint",
            Cell::new(k.fingerprint.as_deref().unwrap_or("-")),
        ),
        ("until", at(k.until)),
        ("reason", Cell::new(k.reason.as_deref().unwrap_or("-"))),
        ("completed-at", at(k.completed_at)),
        ("reconciling-until", at(k.reconciling_until)),
    ])
}

/// Bytes as JSON: `{"result": text}` when UTF-8, else `{"result-base64": …}`.
pub fn bytes_json(target: &mut Value, name: &str, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(text) => target[name] = json!(text),
        Err(_) => {
            #[derive(serde::Serialize)]
            struct B64<'a>(#[serde(with = "gak_rules::format::base64")] &'a [u8]);
            target[format!("{name}-base64")] =
                serde_json::to_value(B64(bytes)).expect("base64 always serializes");
        }
    }
}

/// Bytes for a table: the text when UTF-8, else its size.
pub fn bytes_text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => printable(text),
        Err(_) => format!("<{} bytes, not UTF-8; see --json>", bytes.len()),
    }
}

/// A snapshot as JSON.
pub fn snapshot_json(s: &Snapshot) -> Value {
    let fields: serde_json::Map<String, Value> = s
        .fields
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    json!({
        "run-id": s.run_id,
        "seq": s.seq,
        "fence": opt(s.fence),
        "status": s.status,
        "done": s.done,
        "fields": fields,
    })
}

/// A terminal outcome as JSON.
pub fn outcome_json(o: &Outcome) -> Value {
    let mut v = json!({ "status": o.status.name() });
    bytes_json(&mut v, "result", &o.result);
    v
}
