//! `gak conformance`: replay vector files (`VECTORS.md`). Its lines and
//! its closing `N passed, M failed` are a public interface: every host's
//! runner prints the same.
use crate::conformance::{self, Report, UrlTarget};

use super::args::ConformanceArgs;
use super::failure::{Failure, Outcome};
use super::progress;

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
