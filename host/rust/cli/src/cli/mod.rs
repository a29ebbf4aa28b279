//! The `gak` command line. Every change it makes goes through the kernel
//! component's exported calls, so the operator path obeys the same rules as
//! code: the CLI parses, calls, and prints; it never decides.
use std::process::ExitCode;

use clap::Parser;

mod args;
mod bench;
mod component;
mod conformance;
mod demo;
mod drain;
mod effects;
mod failure;
mod groups;
mod output;
mod progress;
mod prune;
mod runs;
mod serve;
mod store;
mod tasks;
mod time;

use args::{Cli, Command};
use failure::Failure;

/// Parse the command line, run the command, and map its failure to the
/// documented exit code.
pub fn main() -> ExitCode {
    init_logging();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() && std::env::args().any(|a| a == "--json") => {
            // A script asked for JSON: its usage error is JSON too.
            let text = e.to_string();
            let first = text.lines().next().unwrap_or_default();
            let message = first.strip_prefix("error: ").unwrap_or(first);
            return Failure::Usage(message.to_owned()).report(true);
        }
        // clap prints usage errors to stderr with exit code 2, and help or
        // the version to stdout with 0.
        Err(e) => e.exit(),
    };
    let json = wants_json(&cli.command);
    tracing::debug!(command = command_name(&cli.command), "running");
    let outcome = match cli.command {
        Command::Tasks(c) => tasks::run(c),
        Command::Groups(c) => groups::run(c),
        Command::Effects(c) => effects::run(c),
        Command::Runs(c) => runs::run(c),
        Command::Prune(a) => prune::run(a),
        Command::Demo(a) => demo::demo(a),
        Command::Conformance(a) => conformance::conformance(a),
        Command::Component(a) => component::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Drain(a) => drain::run_drain(a),
        Command::Serve(a) => serve::run(a),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(json),
    }
}

/// Logs to stderr from `GAK_LOG` (or `RUST_LOG`), e.g. `GAK_LOG=debug`;
/// off when neither is set, so scripts reading stderr see only errors.
fn init_logging() {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;

    let spec = std::env::var("GAK_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_default();
    if spec.trim().is_empty() {
        return;
    }
    let filter = EnvFilter::try_new(&spec).unwrap_or_else(|e| {
        eprintln!("gak: ignoring GAK_LOG={spec}: {e}");
        EnvFilter::new("off")
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

fn wants_json(command: &Command) -> bool {
    use args::{Effects, Groups, Runs, Tasks};
    match command {
        Command::Tasks(
            Tasks::List { target, .. }
            | Tasks::Delayed { target, .. }
            | Tasks::Count { target, .. }
            | Tasks::Recount { target, .. }
            | Tasks::Show { target, .. }
            | Tasks::Seed { target, .. }
            | Tasks::Claim { target, .. }
            | Tasks::ClaimNext { target, .. }
            | Tasks::Release { target, .. }
            | Tasks::Complete { target, .. }
            | Tasks::Renew { target, .. }
            | Tasks::Revive { target, .. },
        )
        | Command::Groups(Groups::Show { target, .. } | Groups::List { target, .. })
        | Command::Effects(
            Effects::List { target, .. }
            | Effects::Count { target, .. }
            | Effects::Recount { target, .. }
            | Effects::Show { target, .. }
            | Effects::Reconcile { target, .. },
        )
        | Command::Runs(Runs::Show { target, .. } | Runs::Plan { target, .. }) => target.json,
        Command::Effects(Effects::Resolve(a)) => a.target.json,
        Command::Groups(Groups::Limit(a)) => a.target.json,
        Command::Prune(a) => a.target.json,
        Command::Drain(a) => a.json,
        Command::Serve(_) => false,
        Command::Demo(_) | Command::Conformance(_) | Command::Component(_) | Command::Bench(_) => {
            false
        }
    }
}

fn command_name(command: &Command) -> &'static str {
    match command {
        Command::Tasks(_) => "tasks",
        Command::Groups(_) => "groups",
        Command::Effects(_) => "effects",
        Command::Runs(_) => "runs",
        Command::Prune(_) => "prune",
        Command::Demo(_) => "demo",
        Command::Conformance(_) => "conformance",
        Command::Component(_) => "component",
        Command::Bench(_) => "bench",
        Command::Drain(_) => "drain",
        Command::Serve(_) => "serve",
    }
}
