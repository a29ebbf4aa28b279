//! `gak demo` and `gak conformance`, behaving as before the operator
//! commands: their output lines and the closing `N passed, M failed` are a
//! public interface (other hosts' runners print the same).
use std::sync::Arc;

use crate::conformance::{self, Report, UrlTarget};
use crate::demo::DemoReport;
use gak::blocking::Kernel;
use gak::clock::{Clock, ManualClock, SystemClock};
use gak::store;

use super::args::{ConformanceArgs, DemoArgs};
use super::failure::{Failure, Outcome};
use super::progress;

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

/// Run `gak conformance`.
pub fn conformance(args: ConformanceArgs) -> Outcome {
    let mut target = UrlTarget::new(&args.store)?;
    let files = if args.paths.is_empty() {
        conformance::builtin()
    } else {
        conformance::load_paths(&args.paths)
    };
    // File by file, so the bar can move; the verdicts are the same as one
    // run over every file (each scenario gets a fresh store either way).
    let bar = progress::bar(args.progress, Some(files.len() as u64));
    let mut report = Report::default();
    for file in &files {
        bar.set_message(file.0.clone());
        let part = conformance::run(&mut target, std::slice::from_ref(file));
        report.verdicts.extend(part.verdicts);
        bar.inc(1);
    }
    bar.finish_and_clear();
    print!("{}", report.render());
    if report.failed() == 0 && !report.verdicts.is_empty() {
        Ok(())
    } else {
        Err(Failure::Quiet(1))
    }
}
