//! `gak runs …`: a run's snapshot, terminal outcome and resume plan, through
//! the component's checkpoint and commitgate calls.
use std::collections::BTreeSet;

use serde_json::{Value, json};

use gak::blocking::Kernel;
use gak::{Error, Outcome as RunOutcome, Plan, Snapshot, StepDef};

use super::args::Runs;
use super::failure::{Failure, Outcome};
use super::output::{self, Cell, Style};
use super::store::{self, Create};
use super::tasks::read_input;

/// Run one `runs` command.
pub fn run(command: Runs) -> Outcome {
    match command {
        Runs::Show { target, run } => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            let snapshot = found(&kernel, kernel.checkpoint().load(&run), &run)?;
            let outcome = found(&kernel, kernel.commitgate().read(&run, None), &run)?;
            if snapshot.is_none() && outcome.is_none() {
                return Err(Failure::on(&kernel, format!("run {run}"))(Error::NotFound));
            }
            if style.json {
                style.print_json(&json!({
                    "run-id": run,
                    "snapshot": snapshot.as_ref().map_or(Value::Null, output::snapshot_json),
                    "outcome": outcome.as_ref().map_or(Value::Null, output::outcome_json),
                }));
            } else {
                print!(
                    "{}",
                    show_text(&style, &run, snapshot.as_ref(), outcome.as_ref())
                );
            }
            Ok(())
        }
        Runs::Plan { target, run, steps } => {
            let style = Style::detect(target.json);
            let steps = read_steps(&steps)?;
            let kernel = store::open(&target.store, Create::Refused)?;
            plan(&style, &kernel, &run, &steps)
        }
    }
}

/// `not-found` as "absent"; any other error stops the command.
fn found<T>(kernel: &Kernel, r: Result<T, Error>, run: &str) -> Result<Option<T>, Failure> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(Error::NotFound) => Ok(None),
        Err(e) => Err(Failure::on(kernel, format!("run {run}"))(e)),
    }
}

fn show_text(
    style: &Style,
    run: &str,
    snapshot: Option<&Snapshot>,
    outcome: Option<&RunOutcome>,
) -> String {
    let mut pairs = vec![("run", Cell::new(run))];
    match snapshot {
        Some(s) => {
            pairs.push(("seq", Cell::new(s.seq.to_string())));
            pairs.push((
                "fence",
                Cell::new(s.fence.map_or("-".into(), |f| f.to_string())),
            ));
            pairs.push(("status", Cell::new(&s.status)));
            pairs.push(("done", Cell::new(s.done.join(", "))));
            for (k, v) in &s.fields {
                pairs.push(("field", Cell::new(format!("{k} = {v}"))));
            }
        }
        None => pairs.push(("snapshot", Cell::new("none saved"))),
    }
    match outcome {
        Some(o) => {
            pairs.push(("outcome", style.state(o.status.name())));
            pairs.push(("result", Cell::new(output::bytes_text(&o.result))));
        }
        None => pairs.push(("outcome", Cell::new("none: the run is not finished"))),
    }
    output::fields(&pairs)
}

fn plan(style: &Style, kernel: &Kernel, run: &str, steps: &[StepDef]) -> Outcome {
    // A run with no snapshot is refused rather than planned as "nothing
    // done": a typo in the run id must not look like a fresh start.
    let snapshot = kernel
        .checkpoint()
        .load(run)
        .map_err(Failure::on(kernel, format!("run {run}")))?;
    let plan = kernel
        .checkpoint()
        .build_plan(steps, Some(&snapshot))
        .map_err(Failure::on(kernel, format!("run {run}")))?;
    let untrusted = explain_untrusted(&plan, steps);
    if style.json {
        let untrusted: Vec<Value> = untrusted
            .iter()
            .map(|(step, why)| json!({ "step": step, "why": why }))
            .collect();
        style.print_json(&json!({
            "run-id": run,
            "seq": snapshot.seq,
            "skip": plan.skip,
            "run": plan.run,
            "untrusted": untrusted,
        }));
        return Ok(());
    }
    let mut pairs = vec![
        ("run", Cell::new(run)),
        ("seq", Cell::new(snapshot.seq.to_string())),
        ("skip", Cell::new(list(&plan.skip))),
        ("run next", Cell::new(list(&plan.run))),
    ];
    for (step, why) in &untrusted {
        pairs.push(("untrusted", Cell::new(format!("{step}: {why}"))));
    }
    if untrusted.is_empty() {
        pairs.push(("untrusted", Cell::new("none")));
    }
    print!("{}", output::fields(&pairs));
    Ok(())
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

/// Why each untrusted done record is not trusted. The component decided
/// which records are untrusted; this only names, for each, the step file's
/// facts behind it: an id the step file does not declare, or dependencies
/// that are not in the trusted (skipped) set.
pub(super) fn explain_untrusted(plan: &Plan, steps: &[StepDef]) -> Vec<(String, String)> {
    let trusted: BTreeSet<&str> = plan.skip.iter().map(String::as_str).collect();
    plan.untrusted
        .iter()
        .map(|id| {
            let why = match steps.iter().find(|s| &s.id == id) {
                None => "not a step of this plan (unknown id)".to_owned(),
                Some(step) => {
                    let missing: Vec<&str> = step
                        .depends_on
                        .iter()
                        .map(String::as_str)
                        .filter(|d| !trusted.contains(d))
                        .collect();
                    format!(
                        "recorded done, but depends on {} which {} not trusted done",
                        missing.join(", "),
                        if missing.len() == 1 { "is" } else { "are" }
                    )
                }
            };
            (id.clone(), why)
        })
        .collect()
}

fn read_steps(file: &std::path::Path) -> Result<Vec<StepDef>, Failure> {
    let (name, text) = read_input(file)?;
    parse_steps(&name, &text)
}

/// A step list: a JSON array of `{id, depends-on?}` in declaration order.
pub(super) fn parse_steps(name: &str, text: &str) -> Result<Vec<StepDef>, Failure> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "kebab-case")]
    struct Entry {
        id: String,
        #[serde(default)]
        depends_on: Vec<String>,
    }
    let entries: Vec<Entry> = serde_json::from_str(text).map_err(|e| {
        Failure::Usage(format!(
            "{name} is not a JSON array of {{id, depends-on?}}: {e}"
        ))
    })?;
    Ok(entries
        .into_iter()
        .map(|e| StepDef {
            id: e.id,
            depends_on: e.depends_on,
        })
        .collect())
}
