//! `gak tasks …`: the board, through the component's taskboard calls.
use std::io::Read;
use std::path::Path;

use serde::Deserialize;
use serde_json::json;

use gak::blocking::Kernel;
use gak::{Task, TaskSeed, TaskState};

use super::args::{TaskStateArg, Tasks};
use super::failure::{Failure, Outcome};
use super::output::{self, Style};
use super::store::{self, Create};
use super::time;

/// Run one `tasks` command.
pub fn run(command: Tasks) -> Outcome {
    match command {
        Tasks::List {
            target,
            state,
            group,
            limit,
            after,
        } => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            let board = kernel.taskboard();
            let page = match &group {
                Some(group) => board.list_group(group, after.as_deref(), limit),
                None => board.list(state.map(task_state), after.as_deref(), limit),
            }
            .map_err(Failure::on(&kernel, "the listing"))?;
            style.print_page(
                || output::task_page_json(&page),
                || output::task_rows(&style, &page.items, time::now_ms()),
                page.next.as_deref(),
            );
            Ok(())
        }
        Tasks::Delayed {
            target,
            limit,
            after,
        } => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            let page = kernel
                .taskboard()
                .list_delayed(after.as_deref(), limit)
                .map_err(Failure::on(&kernel, "the delayed tasks"))?;
            style.print_page(
                || output::task_page_json(&page),
                || output::task_rows(&style, &page.items, time::now_ms()),
                page.next.as_deref(),
            );
            Ok(())
        }
        Tasks::Count { target } => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            let counts = kernel
                .taskboard()
                .count()
                .map_err(Failure::on(&kernel, "the counts"))?;
            if style.json {
                style.print_json(&output::task_counts_json(&counts));
            } else {
                print!("{}", output::task_counts_rows(&style, &counts));
            }
            Ok(())
        }
        Tasks::Recount { target, page } => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            let mut calls = 0u64;
            // Each call is one transaction over one page, so the board stays
            // open to workers while a big one is counted.
            while !kernel
                .taskboard()
                .recount(page)
                .map_err(Failure::on(&kernel, "the recount"))?
            {
                calls += 1;
            }
            let counts = kernel
                .taskboard()
                .count()
                .map_err(Failure::on(&kernel, "the counts"))?;
            if style.json {
                let mut out = output::task_counts_json(&counts);
                out["pages"] = json!(calls + 1);
                style.print_json(&out);
            } else {
                println!("every task is counted ({} pages)", calls + 1);
                print!("{}", output::task_counts_rows(&style, &counts));
            }
            Ok(())
        }
        Tasks::Show { target, id } => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            let task = kernel
                .taskboard()
                .get(&id)
                .map_err(Failure::on(&kernel, format!("task {id}")))?;
            show(&style, &task, false);
            Ok(())
        }
        Tasks::Seed { target, file } => {
            let style = Style::detect(target.json);
            let seeds = read_seeds(&file)?;
            let kernel = store::open(&target.store, Create::Allowed)?;
            kernel
                .taskboard()
                .seed(&seeds)
                .map_err(Failure::on(&kernel, "the seed"))?;
            if style.json {
                style.print_json(&json!({ "seeded": seeds.len() }));
            } else {
                println!("seeded {} tasks", seeds.len());
            }
            Ok(())
        }
        Tasks::Claim { target, id, lease } => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            let task = kernel
                .taskboard()
                .claim(&id, &lease.agent, lease.ttl)
                .map_err(Failure::on(&kernel, format!("task {id}")))?;
            show(&style, &task, true);
            Ok(())
        }
        Tasks::ClaimNext { target, lease } => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            let task = kernel
                .taskboard()
                .claim_next(&lease.agent, lease.ttl)
                .map_err(Failure::on(&kernel, "the board"))?;
            match task {
                Some(task) => show(&style, &task, true),
                None if style.json => style.print_json(&serde_json::Value::Null),
                None => println!("no task is ready"),
            }
            Ok(())
        }
        Tasks::Release { target, id, token } => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            kernel
                .taskboard()
                .release(&id, &token.token)
                .map_err(Failure::on(&kernel, format!("task {id}")))?;
            done(&style, &kernel, &id, "released")
        }
        Tasks::Complete { target, id, token } => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            kernel
                .taskboard()
                .complete(&id, &token.token)
                .map_err(Failure::on(&kernel, format!("task {id}")))?;
            done(&style, &kernel, &id, "completed")
        }
        Tasks::Renew {
            target,
            id,
            token,
            ttl,
        } => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            let task = kernel
                .taskboard()
                .renew(&id, &token.token, ttl)
                .map_err(Failure::on(&kernel, format!("task {id}")))?;
            // The caller already holds the token: renew never prints it.
            show(&style, &task, false);
            Ok(())
        }
        Tasks::Revive { target, id } => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            // One atomic call: only a dead task comes back, so a revive can
            // never clear a live claim.
            let task = kernel
                .taskboard()
                .revive(&id)
                .map_err(Failure::on(&kernel, format!("task {id}")))?;
            show(&style, &task, false);
            Ok(())
        }
    }
}

fn show(style: &Style, task: &Task, minted: bool) {
    if style.json {
        style.print_json(&output::task_json(task, minted));
    } else {
        print!(
            "{}",
            output::task_fields(style, task, time::now_ms(), minted)
        );
    }
}

/// Confirm a release or completion with the task as it now stands.
fn done(style: &Style, kernel: &Kernel, id: &str, what: &str) -> Outcome {
    // Best effort: the change is committed; a failed read only loses detail.
    let state = kernel.taskboard().get(id).ok().map(|t| t.state.name());
    if style.json {
        style.print_json(&json!({ "id": id, what: true, "state": state }));
    } else {
        println!("{what} task {}", output::printable(id));
    }
    Ok(())
}

pub(super) fn task_state(s: TaskStateArg) -> TaskState {
    match s {
        TaskStateArg::Open => TaskState::Open,
        TaskStateArg::Claimed => TaskState::Claimed,
        TaskStateArg::Done => TaskState::Done,
        TaskStateArg::Failed => TaskState::Failed,
        TaskStateArg::Dead => TaskState::Dead,
    }
}

/// One entry of a seed file. Unknown fields are refused so a typo such as
/// `"dependencies"` cannot silently seed a task without its dependencies.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct SeedEntry {
    id: String,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    deps: Vec<String>,
    #[serde(default)]
    state: Option<TaskState>,
    #[serde(default)]
    priority: Option<i32>,
    #[serde(default)]
    not_before: Option<u64>,
    #[serde(default)]
    max_attempts: Option<u32>,
    #[serde(default)]
    group: Option<String>,
}

fn read_seeds(file: &Path) -> Result<Vec<TaskSeed>, Failure> {
    let (name, text) = read_input(file)?;
    let entries: Vec<SeedEntry> = serde_json::from_str(&text).map_err(|e| {
        Failure::Usage(format!(
            "{name} is not a JSON array of {{id, title?, deps?, state?, priority?, not-before?, max-attempts?, group?}}: {e}"
        ))
    })?;
    Ok(entries
        .into_iter()
        .map(|e| TaskSeed {
            id: e.id,
            title: e.title,
            deps: e.deps,
            state: e.state,
            priority: e.priority,
            not_before: e.not_before,
            max_attempts: e.max_attempts,
            group: e.group,
        })
        .collect())
}

/// The text of FILE, or of stdin for `-`, with a name for messages.
pub(super) fn read_input(file: &Path) -> Result<(String, String), Failure> {
    if file == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Failure::Usage(format!("cannot read stdin: {e}")))?;
        return Ok(("stdin".into(), text));
    }
    let name = file.display().to_string();
    let text = std::fs::read_to_string(file)
        .map_err(|e| Failure::Usage(format!("cannot read {name}: {e}")))?;
    Ok((name, text))
}
