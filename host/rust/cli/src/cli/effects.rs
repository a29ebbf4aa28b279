//! `gak effects …`: side-effect keys, through the component's sideeffect
//! calls. The action a reconcile or verdict names is rebuilt from the key's
//! own record (`sideeffect.get`), so an operator types only the key.
use serde_json::json;

use gak::blocking::Kernel;
use gak::{Action, KeyInfo, KeyState, Resolution, Resolved};

use super::args::{Effects, KeyStateArg, ResolveArgs};
use super::failure::{Failure, Outcome};
use super::output::{self, Cell, Style};
use super::store::{self, Create};
use super::time;

/// Run one `effects` command.
pub fn run(command: Effects) -> Outcome {
    match command {
        Effects::List {
            target,
            state,
            limit,
            after,
        } => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            let page = kernel
                .sideeffect()
                .list(state.map(key_state), after.as_deref(), limit)
                .map_err(Failure::on(&kernel, "the listing"))?;
            style.print_page(
                || output::key_page_json(&page),
                || output::key_rows(&style, &page.items, time::now_ms()),
                page.next.as_deref(),
            );
            Ok(())
        }
        Effects::Count { target } => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            let counts = kernel
                .sideeffect()
                .count()
                .map_err(Failure::on(&kernel, "the counts"))?;
            let now = time::now_ms();
            if style.json {
                style.print_json(&output::key_counts_json(&counts, now));
            } else {
                print!("{}", output::key_counts_rows(&style, &counts, now));
            }
            Ok(())
        }
        Effects::Recount { target, page } => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            let mut calls = 0u64;
            // One transaction per page: the keys stay open to workers.
            while !kernel
                .sideeffect()
                .recount(page)
                .map_err(Failure::on(&kernel, "the recount"))?
            {
                calls += 1;
            }
            let counts = kernel
                .sideeffect()
                .count()
                .map_err(Failure::on(&kernel, "the counts"))?;
            let now = time::now_ms();
            if style.json {
                let mut out = output::key_counts_json(&counts, now);
                out["pages"] = json!(calls + 1);
                style.print_json(&out);
            } else {
                println!("every key is counted ({} pages)", calls + 1);
                print!("{}", output::key_counts_rows(&style, &counts, now));
            }
            Ok(())
        }
        Effects::Show { target, key } => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            let info = key_info(&kernel, &key)?;
            if style.json {
                style.print_json(&output::key_json(&info));
            } else {
                print!("{}", output::key_fields(&style, &info, time::now_ms()));
            }
            Ok(())
        }
        Effects::Reconcile { target, key, ttl } => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            let action = action_of(&key_info(&kernel, &key)?);
            let claim = kernel
                .sideeffect()
                .begin_reconcile(&action, ttl)
                .map_err(Failure::on(&kernel, format!("key {key}")))?;
            if style.json {
                style.print_json(&json!({
                    "key": key,
                    "resource": action.resource,
                    "claim": claim.claim,
                    "until": claim.until,
                }));
            } else {
                let now = time::now_ms();
                print!(
                    "{}",
                    output::fields(&[
                        ("key", Cell::new(&key)),
                        ("resource", Cell::new(&action.resource)),
                        ("claim", Cell::new(&claim.claim)),
                        ("until", Cell::new(time::when(claim.until, now))),
                    ])
                );
                println!(
                    "check the downstream system, then: gak effects resolve {} --claim CLAIM (--applied --result TEXT | --not-applied)",
                    output::printable(&key)
                );
            }
            Ok(())
        }
        Effects::Resolve(args) => resolve(args),
    }
}

fn resolve(args: ResolveArgs) -> Outcome {
    let style = Style::detect(args.target.json);
    let kernel = store::open(&args.target.store, Create::Refused)?;
    let key = &args.key;
    let action = action_of(&key_info(&kernel, key)?);
    let resolution = Resolution {
        applied: args.applied,
        result: args.result.map(String::into_bytes),
        force_retryable: args.force,
        claim: args.claim,
    };
    let resolved = kernel
        .sideeffect()
        .resolve_uncertain(&action, &resolution)
        .map_err(Failure::on(&kernel, format!("key {key}")))?;
    match (&resolved, style.json) {
        (Resolved::Replayed(result), true) => {
            let mut v = json!({ "key": key, "resolved": "completed" });
            output::bytes_json(&mut v, "result", result);
            style.print_json(&v);
        }
        (Resolved::Cleared, true) => {
            style.print_json(&json!({ "key": key, "resolved": "cleared" }));
        }
        (Resolved::Replayed(result), false) => println!(
            "key {} is completed; retries replay its result: {}",
            output::printable(key),
            output::bytes_text(result)
        ),
        (Resolved::Cleared, false) => println!(
            "key {} is cleared: the next attempt runs the effect",
            output::printable(key)
        ),
    }
    Ok(())
}

fn key_info(kernel: &Kernel, key: &str) -> Result<KeyInfo, Failure> {
    kernel
        .sideeffect()
        .get(key)
        .map_err(Failure::on(kernel, format!("key {key}")))
}

/// The action as the key recorded it. The kernel decides on the key alone
/// (and the recorded retry safety), so the operator need not retype it.
pub(super) fn action_of(info: &KeyInfo) -> Action {
    Action {
        key: info.key.clone(),
        resource: info.resource.clone(),
        retry_safety: info.retry_safety,
        fingerprint: info.fingerprint.clone(),
    }
}

fn key_state(s: KeyStateArg) -> KeyState {
    match s {
        KeyStateArg::Cleared => KeyState::Cleared,
        KeyStateArg::InFlight => KeyState::InFlight,
        KeyStateArg::Uncertain => KeyState::Uncertain,
        KeyStateArg::Completed => KeyState::Completed,
    }
}
