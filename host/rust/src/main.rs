//! The `gak` binary: `gak demo`, `gak conformance`.
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use gak::blocking::Kernel;
use gak::clock::{Clock, ManualClock, SystemClock};
use gak::conformance::{self, UrlTarget};
use gak::store;

const USAGE: &str = "\
gak — a crash-safe coordination kernel

usage:
  gak demo [--store URL]                         the reference-runtime story, step by step
  gak conformance [--store URL] [FILE_OR_DIR...] replay vector files (default: the built-in suite)

store URLs: memory:   sqlite:PATH[?synchronous=normal]
  demo default: sqlite:gak-demo.db      conformance default: memory:";

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gak: {e:#}");
            ExitCode::from(2)
        }
    }
}

struct Args {
    store: Option<String>,
    paths: Vec<PathBuf>,
}

fn parse(rest: &[String]) -> Result<Args> {
    let mut args = Args {
        store: None,
        paths: Vec::new(),
    };
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--store" => args.store = Some(it.next().context("--store needs a URL")?.clone()),
            s if s.starts_with("--store=") => args.store = Some(s["--store=".len()..].to_owned()),
            s if s.starts_with('-') => bail!("unknown option {s}\n\n{USAGE}"),
            path => args.paths.push(PathBuf::from(path)),
        }
    }
    Ok(args)
}

fn run(argv: Vec<String>) -> Result<ExitCode> {
    let Some((command, rest)) = argv.split_first() else {
        println!("{USAGE}");
        return Ok(ExitCode::from(2));
    };
    match command.as_str() {
        "demo" => demo(parse(rest)?),
        "conformance" => conformance(parse(rest)?),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        other => bail!("unknown command {other:?}\n\n{USAGE}"),
    }
}

fn demo(args: Args) -> Result<ExitCode> {
    if !args.paths.is_empty() {
        bail!("demo takes no paths");
    }
    let url = args.store.unwrap_or_else(|| "sqlite:gak-demo.db".into());
    if url.contains("clock=db") || url.contains("clock=database") {
        bail!(
            "the demo lets a dead worker's lease expire by moving its own clock; run it without clock=db"
        );
    }
    // The demo moves time by hand (to let a dead worker's lease expire
    // without waiting), starting from the wall clock.
    let clock = Arc::new(ManualClock::at(SystemClock::default().now()));
    let backend =
        gak::blocking::run_future(store::open(&url)).with_context(|| format!("opening {url}"))?;
    println!("gak demo on {}", backend.describe());
    let kernel = Kernel::with_backend(backend, clock.clone())?;
    let report = gak::demo::run(&kernel, clock, &mut std::io::stdout())?;
    let replayed = report
        .body_calls
        .iter()
        .filter(|(step, n)| step.as_str() != "refund" && **n != 1)
        .count();
    if replayed > 0
        || report.race_winners != 1
        || !report.retry_refused
        || !report.replayed_after_resolve
    {
        bail!("the demo observed a broken promise: {report:?}");
    }
    Ok(ExitCode::SUCCESS)
}

fn conformance(args: Args) -> Result<ExitCode> {
    let url = args.store.unwrap_or_else(|| "memory:".into());
    let mut target = UrlTarget::new(&url)?;
    let files = if args.paths.is_empty() {
        conformance::builtin()
    } else {
        conformance::load_paths(&args.paths)
    };
    let report = conformance::run(&mut target, &files);
    print!("{}", report.render());
    Ok(if report.failed() == 0 && !report.verdicts.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
