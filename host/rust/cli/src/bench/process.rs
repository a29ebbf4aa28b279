//! `--processes N`: N separate OS processes on one database. The parent
//! re-runs its own binary once per process with a hidden flag; each child
//! sets its figure up, says `ready`, and waits on stdin until the parent has
//! heard from all, so the measured samples overlap. Each child prints its
//! figures as one JSON line; the parent adds the rates up sample by sample
//! and pools the latencies.
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};

use super::measure::Figure;
use super::{Impl, Op, Options};

/// The hidden flag that makes `gak bench` a child.
pub const CHILD_FLAG: &str = "--internal-child";
/// The environment variable carrying the figure's shared tag (the hot set
/// every process fights over).
pub const TAG_ENV: &str = "GAK_BENCH_TAG";
/// What a child prints once set up.
pub const READY: &str = "ready";

/// Run one figure in `options.processes` children of this binary.
///
/// # Errors
/// A sentence: a child could not start, failed, or printed no figures.
pub fn run_figure(
    url: &str,
    op: Op,
    workers: usize,
    impls: &[Impl],
    options: &Options,
) -> Result<Vec<Figure>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this binary: {e}"))?;
    let tag = super::measure::tag();
    let mut children: Vec<Child> = Vec::new();
    for _ in 0..options.processes {
        let mut cmd = Command::new(&exe);
        cmd.args(["bench", CHILD_FLAG, "--store", url, "--op", op.name()])
            .args(["--workers", &workers.to_string()])
            .args(["--seconds", &options.seconds.to_string()])
            .args(["--samples", &options.samples.to_string()])
            .args(["--processes", &options.processes.to_string()]);
        for i in impls {
            cmd.args(["--impl", i.name()]);
        }
        let child = cmd
            .env(TAG_ENV, &tag)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting a bench process: {e}"))?;
        children.push(child);
    }
    let result = drive(&mut children, impls);
    for child in &mut children {
        if result.is_err() {
            let _ = child.kill();
        }
        let _ = child.wait();
    }
    result
}

fn drive(children: &mut [Child], impls: &[Impl]) -> Result<Vec<Figure>, String> {
    let mut readers = Vec::new();
    for child in children.iter_mut() {
        let stdout = child.stdout.take().ok_or("a child without stdout")?;
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        reader
            .read_line(&mut line)
            .map_err(|e| format!("reading a bench process: {e}"))?;
        if line.trim() != READY {
            return Err("a bench process failed while setting up (see above)".into());
        }
        readers.push(reader);
    }
    // Everyone is set up: start together.
    for child in children.iter_mut() {
        let stdin = child.stdin.as_mut().ok_or("a child without stdin")?;
        stdin
            .write_all(b"go\n")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("starting a bench process: {e}"))?;
    }
    let mut merged: Vec<Figure> = Vec::new();
    for reader in readers {
        let mut line = String::new();
        let mut reader = reader;
        reader
            .read_line(&mut line)
            .map_err(|e| format!("reading a bench process: {e}"))?;
        let figures: Vec<Figure> = serde_json::from_str(&line)
            .map_err(|_| "a bench process failed while measuring (see above)".to_owned())?;
        for f in figures {
            match merged.iter_mut().find(|m| m.imp == f.imp) {
                Some(m) => m.merge(f),
                None => merged.push(f),
            }
        }
    }
    merged.sort_by_key(|f| impls.iter().position(|i| i.name() == f.imp));
    Ok(merged)
}

/// The child's side: say `ready` once set up, then wait for the go.
///
/// # Errors
/// When the parent went away.
pub fn wait_for_go() -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{READY}")
        .and_then(|()| out.flush())
        .map_err(|e| format!("telling the parent: {e}"))?;
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| format!("waiting for the parent: {e}"))?;
    if line.trim() == "go" {
        Ok(())
    } else {
        Err("the parent went away".into())
    }
}
