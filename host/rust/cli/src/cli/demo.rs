//! `gak demo`: the reference-runtime story on a store (a scratch SQLite
//! file by default), judged by what it observed.
use std::sync::Arc;

use crate::demo::DemoReport;
use gak::blocking::Kernel;
use gak::clock::{Clock, ManualClock, SystemClock};
use gak::store;

use super::args::DemoArgs;
use super::failure::{Failure, Outcome};

/// Run `gak demo`.
pub fn demo(args: DemoArgs) -> Outcome {
    let url = args.store;
    if url.contains("clock=db") || url.contains("clock=database") {
        return Err(Failure::Usage(
            "the demo lets a dead worker's lease expire by moving its own clock; run it without clock=db".into(),
        ));
    }
    // The demo moves time by hand (to let a dead worker's lease expire
    // without waiting), starting from the wall clock.
    let clock = Arc::new(ManualClock::at(SystemClock::default().now()));
    let backend = gak::blocking::run_future(store::open(&url))?;
    println!("gak demo on {}", backend.describe());
    let kernel = Kernel::with_backend(backend, clock.clone())?;
    let report = crate::demo::run(&kernel, clock, &mut std::io::stdout())
        .map_err(Failure::on(&kernel, "the demo"))?;
    match broken_promise(&report) {
        None => Ok(()),
        Some(why) => Err(Failure::Failed(format!(
            "the demo observed a broken promise: {why}"
        ))),
    }
}

/// What the demo saw that the kernel promises never happens, if anything.
fn broken_promise(report: &DemoReport) -> Option<String> {
    let replayed: Vec<String> = report
        .body_calls
        .iter()
        .filter(|(step, n)| step.as_str() != "refund" && **n != 1)
        .map(|(step, n)| format!("{step} ran {n} times"))
        .collect();
    if !replayed.is_empty() {
        return Some(format!(
            "an effect body ran again ({})",
            replayed.join(", ")
        ));
    }
    if report.race_winners != 1 {
        return Some(format!(
            "{} of {} racing claimers won one task",
            report.race_winners, report.race_claimers
        ));
    }
    if !report.retry_refused {
        return Some("a retry after a failed body was not refused as uncertain".into());
    }
    if !report.replayed_after_resolve {
        return Some("a resolved key did not replay its result".into());
    }
    None
}
