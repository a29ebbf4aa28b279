//! A worker process for the multi-process tests: claims hot tasks and runs
//! side effects on a shared store, printing one line per win and per body
//! execution for the parent to audit.
//!
//! usage: gak-hammer STORE_URL WORKER ROUNDS KEYS [LEDGER_SCHEMA]
//!
//! With LEDGER_SCHEMA (PostgreSQL), each effect body also inserts a row into
//! `LEDGER_SCHEMA.effects` through a fenced write, and a last phase has every
//! worker write `LEDGER_SCHEMA.ledger` through one fenced sink with its own
//! fences.
use anyhow::{Context, Result, bail};
use gak::blocking::{Kernel, Runner};
use gak::{Action, BodyError, Error, Ran, RunError, SinkError};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (url, worker, rounds, keys, ledger) = match args.as_slice() {
        [u, w, r, k] => (u, w, r, k, None),
        [u, w, r, k, l] => (u, w, r, k, Some(l.as_str())),
        _ => bail!("usage: gak-hammer STORE_URL WORKER ROUNDS KEYS [LEDGER_SCHEMA]"),
    };
    let rounds: usize = rounds.parse().context("ROUNDS")?;
    let keys: usize = keys.parse().context("KEYS")?;
    let kernel = Kernel::open(url)?;
    claims(&kernel, worker, rounds)?;
    effects(&kernel, worker, keys, ledger)?;
    if let Some(schema) = ledger {
        sink_writes(&kernel, worker, rounds, schema)?;
    }
    Ok(())
}

/// Claim hot tasks, release each win: every claim epoch is one fence.
fn claims(kernel: &Kernel, worker: &str, rounds: usize) -> Result<()> {
    let board = kernel.taskboard();
    for r in 0..rounds {
        let task = format!("t{}", r % 4);
        match board.claim(&task, worker, 60_000) {
            Ok(t) => {
                println!("WIN {task} {}", t.fence);
                board.release(&task, t.token.as_deref().unwrap_or_default())?;
            }
            Err(Error::Taken) => {}
            Err(e) => bail!("claim {task}: {e}"),
        }
    }
    Ok(())
}

/// Run every key through the Runner until it is applied somewhere.
fn effects(kernel: &Kernel, worker: &str, keys: usize, ledger: Option<&str>) -> Result<()> {
    let runner = Runner::new(kernel, 60_000);
    for n in 0..keys {
        let key = format!("k{n}");
        let action = Action::new(&key, &format!("res{}", n % 3));
        let mut spins = 0u32;
        loop {
            let ran = runner.run(&action, |lease| {
                println!("BODY {key} {worker} {}", lease.fence);
                if let Some(schema) = ledger {
                    let sql = format!(
                        "INSERT INTO \"{schema}\".effects (key, worker, fence) VALUES ($1, $2, $3)"
                    );
                    let fence = lease.fence as i64;
                    kernel
                        .sideeffect()
                        .write_fenced(&format!("effect-{key}"), lease.fence, |down| {
                            down.postgres_execute(&sql, &[&key, &worker, &fence])
                                .unwrap_or_else(|| Err(Error::storage("not postgres")))
                                .map(drop)
                        })
                        .map_err(|e| BodyError::Failed(e.contract_error()))?;
                }
                Ok::<_, BodyError<Error>>(worker.as_bytes().to_vec())
            });
            match ran {
                Ok(Ran::Applied(_) | Ran::Replayed(_)) => break,
                Ok(Ran::InFlight | Ran::Contended(_)) if spins < 1_000_000 => {
                    spins += 1;
                    std::thread::yield_now();
                }
                Ok(other) => bail!("{key}: {other:?}"),
                Err(RunError::Kernel(e)) => bail!("{key}: {e}"),
                Err(RunError::Uncertain(e) | RunError::NotApplied(e)) => bail!("{key}: {e}"),
            }
        }
    }
    Ok(())
}

/// Writers with interleaved fences through one sink: stale ones must be
/// refused before their body runs.
fn sink_writes(kernel: &Kernel, worker: &str, rounds: usize, schema: &str) -> Result<()> {
    let index: u64 = worker
        .trim_start_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .unwrap_or(0);
    let sql = format!("INSERT INTO \"{schema}\".ledger (fence, worker) VALUES ($1, $2)");
    for i in 0..rounds as u64 {
        let fence = 1 + i * 8 + index;
        let written = kernel.sideeffect().write_fenced("ledger", fence, |down| {
            down.postgres_execute(&sql, &[&(fence as i64), &worker])
                .unwrap_or_else(|| Err(Error::storage("not postgres")))
                .map(drop)
        });
        match written {
            Ok(()) => println!("SINK {fence}"),
            Err(SinkError::Kernel(Error::FenceStale)) => println!("STALE {fence}"),
            Err(e) => bail!("sink write {fence}: {e:?}"),
        }
    }
    Ok(())
}
