//! `gak prune`: bounded batches of `retention.prune` until nothing older
//! than the cut-off is left.
use serde_json::json;

use gak::Pruned;

use super::args::PruneArgs;
use super::failure::{Failure, Outcome};
use super::output::Style;
use super::progress;
use super::store::{self, Create};
use super::time;

/// Run `gak prune`.
pub fn run(args: PruneArgs) -> Outcome {
    let style = Style::detect(args.target.json);
    let kernel = store::open(&args.target.store, Create::Refused)?;
    let before = time::now_ms().saturating_sub(args.older_than);
    let retention = kernel.retention();
    if args.dry_run {
        let p = retention
            .prune_dry_run(before, args.limit)
            .map_err(Failure::on(&kernel, "the prune"))?;
        report(&style, before, 1, &p, true);
        return Ok(());
    }
    let bar = progress::bar(args.progress, None);
    let mut total = Pruned::default();
    let mut batches = 0u64;
    loop {
        let p = retention
            .prune(before, args.limit)
            .map_err(Failure::on(&kernel, "the prune"))?;
        batches += 1;
        total.removed_keys += p.removed_keys;
        total.removed_tasks += p.removed_tasks;
        total.removed_runs += p.removed_runs;
        total.more = p.more;
        bar.set_message(format!(
            "{} keys, {} tasks, {} runs removed in {batches} batches",
            total.removed_keys, total.removed_tasks, total.removed_runs
        ));
        bar.tick();
        if !p.more {
            break;
        }
        // `more` with nothing removed would loop forever: stop and say so.
        if p.removed_keys + p.removed_tasks + p.removed_runs == 0 {
            bar.finish_and_clear();
            return Err(Failure::Failed(
                "prune reported more records but removed none in a batch; stopping".into(),
            ));
        }
    }
    bar.finish_and_clear();
    report(&style, before, batches, &total, false);
    Ok(())
}

fn report(style: &Style, before: u64, batches: u64, p: &Pruned, dry_run: bool) {
    if style.json {
        style.print_json(&json!({
            "dry-run": dry_run,
            "before": before,
            "batches": batches,
            "removed-keys": p.removed_keys,
            "removed-tasks": p.removed_tasks,
            "removed-runs": p.removed_runs,
            "more": p.more,
        }));
        return;
    }
    let verb = if dry_run {
        "would remove (first batch, rolled back)"
    } else {
        "removed"
    };
    println!(
        "{verb}: {} completed keys, {} done tasks, {} finished runs that finished before {}",
        p.removed_keys,
        p.removed_tasks,
        p.removed_runs,
        time::utc(before)
    );
    if dry_run && p.more {
        println!("more records remain beyond this batch");
    }
}
