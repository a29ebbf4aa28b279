//! A worker process for the multi-process tests: claims hot tasks and runs
//! side effects on a shared store, printing one line per win and per body
//! execution for the parent to audit.
//!
//! usage: `gak-hammer STORE_URL WORKER ROUNDS KEYS [LEDGER_SCHEMA]`
//!
//! With LEDGER_SCHEMA (PostgreSQL), each effect body also inserts a row into
//! `LEDGER_SCHEMA.effects` through a fenced write, and a last phase has every
//! worker write `LEDGER_SCHEMA.ledger` through one fenced sink with its own
//! fences.
//!
//! With `GAK_HAMMER_QUEUE` set, the worker runs one phase instead: it
//! drains the board with `claim-next`, completing each task it gets, and
//! prints one line per task handed out (ROUNDS and KEYS are ignored).
//!
//! Every line ends with the wall-clock time in nanoseconds, so the parent can
//! prove the processes overlapped. With `GAK_HAMMER_START=DIR:N` a worker
//! opens its kernel, says it is ready in DIR, and starts each phase only
//! once N workers are ready for it (bounded polling): process start-up
//! (seconds in a debug build) would otherwise serialize the run.
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
    // Warm up: the first call instantiates the component.
    kernel.taskboard().list(None, None, 1)?;
    if let Some(mode) = std::env::var_os("GAK_HAMMER_QUEUE") {
        together("queue", worker)?;
        if mode == "worker" {
            return worker_loop(&kernel, worker);
        }
        return queue(&kernel, worker);
    }
    together("claims", worker)?;
    forced_taken(&kernel, worker)?;
    claims(&kernel, worker, rounds)?;
    together("effects", worker)?;
    forced_in_flight(&kernel, worker, ledger)?;
    effects(&kernel, worker, keys, ledger)?;
    if let Some(schema) = ledger {
        together("sink", worker)?;
        sink_writes(&kernel, worker, rounds, schema)?;
    }
    Ok(())
}

/// The work a real worker does between its store calls: the task itself,
/// the effect's remote call. Not synchronisation (nothing waits for
/// anything): without it, one process holding SQLite's write lock runs its
/// whole phase before the other processes' busy handlers wake up, and a
/// "multi-process" run is serial.
fn work() {
    std::thread::sleep(Duration::from_millis(1));
}

/// The worker's number (`w3` → 3).
fn index(worker: &str) -> u64 {
    worker
        .trim_start_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .unwrap_or(0)
}

/// Nanoseconds since the epoch: one clock for every process on the machine.
fn now() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The barrier before `phase` with `GAK_HAMMER_START=DIR:N` (none
/// without it): each phase starts in every worker once all N are ready for
/// it, so no worker runs a whole phase alone while another is still busy
/// with the previous one (bounded polling).
fn together(phase: &str, worker: &str) -> Result<()> {
    let Ok(spec) = std::env::var("GAK_HAMMER_START") else {
        return Ok(());
    };
    let (dir, n) = spec.rsplit_once(':').context("GAK_HAMMER_START=DIR:N")?;
    let n: usize = n.parse().context("GAK_HAMMER_START=DIR:N")?;
    let dir = std::path::Path::new(dir);
    std::fs::write(dir.join(format!("{phase}-{worker}")), b"")?;
    let prefix = format!("{phase}-");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let ready = std::fs::read_dir(dir)?
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            })
            .count();
        if ready >= n {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("only {ready} of {n} workers became ready for {phase} within 120 s");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Started together (`GAK_HAMMER_START`), the workers meet at least once
/// however the machine schedules them: worker 0 holds `t0` while every
/// other worker tries it, and each must be refused `taken`. (Hoping for a
/// race is not enough: with another build on the cores, a whole phase once
/// ran in one process before the next woke up.)
fn forced_taken(kernel: &Kernel, worker: &str) -> Result<()> {
    if std::env::var_os("GAK_HAMMER_START").is_none() {
        return Ok(());
    }
    let board = kernel.taskboard();
    let first = index(worker) == 0;
    let held = if first {
        let t = board.claim("t0", worker, 60_000)?;
        println!("WIN t0 {} {}", t.fence, now());
        Some(t.token.unwrap_or_default())
    } else {
        None
    };
    together("claims-held", worker)?;
    if !first {
        match board.claim("t0", worker, 60_000) {
            Err(Error::Taken) => println!("TAKEN t0 {}", now()),
            other => bail!("t0, while worker 0 held it: {other:?}"),
        }
    }
    together("claims-tried", worker)?;
    if let Some(token) = held {
        board.release("t0", &token)?;
    }
    Ok(())
}

/// As [`forced_taken`], for effects: worker 0's body for `k0` waits while
/// every other worker tries `k0`, and each must find it in flight.
fn forced_in_flight(kernel: &Kernel, worker: &str, ledger: Option<&str>) -> Result<()> {
    if std::env::var_os("GAK_HAMMER_START").is_none() {
        return Ok(());
    }
    let runner = Runner::new(kernel, 60_000);
    let action = Action::new("k0", "res0");
    if index(worker) == 0 {
        let ran = runner.run(&action, |lease| {
            let result = body(kernel, "k0", worker, lease.fence, ledger);
            together("effects-held", worker)
                .map_err(|e| BodyError::Failed(Error::storage(e.to_string())))?;
            together("effects-tried", worker)
                .map_err(|e| BodyError::Failed(Error::storage(e.to_string())))?;
            result
        });
        match ran {
            Ok(Ran::Applied(_)) => Ok(()),
            other => bail!("k0, held by worker 0: {other:?}"),
        }
    } else {
        together("effects-held", worker)?;
        match runner.run(&action, |_| Ok::<_, BodyError<Error>>(Vec::new())) {
            Ok(Ran::InFlight) => println!("INFLIGHT k0 {}", now()),
            other => bail!("k0, while worker 0's body ran: {other:?}"),
        }
        together("effects-tried", worker)
    }
}

/// An effect's body: say so, work, and (PostgreSQL) write its downstream
/// row through a fenced write.
fn body(
    kernel: &Kernel,
    key: &str,
    worker: &str,
    fence: u64,
    ledger: Option<&str>,
) -> Result<Vec<u8>, BodyError<Error>> {
    println!("BODY {key} {worker} {fence} {}", now());
    work();
    if let Some(schema) = ledger {
        let sql =
            format!("INSERT INTO \"{schema}\".effects (key, worker, fence) VALUES ($1, $2, $3)");
        let signed = fence as i64;
        kernel
            .sideeffect()
            .write_fenced(&format!("effect-{key}"), fence, |down| {
                down.postgres_execute(&sql, &[&key, &worker, &signed])
                    .unwrap_or_else(|| Err(Error::storage("not postgres")))
                    .map(drop)
            })
            .map_err(|e| BodyError::Failed(e.contract_error()))?;
    }
    Ok(worker.as_bytes().to_vec())
}

/// Claim hot tasks, release each win: every claim epoch is one fence.
///
/// A win is held until the worker's next win or its next refusal, so live
/// claims are on the board between transactions: whenever another process
/// gets the store (SQLite hands its lock over unfairly, in bursts), it meets
/// them. A refused worker gives back what it holds: were it to keep it, four
/// workers each holding one of the four tasks would be refused for ever,
/// and how many epochs a run had would depend on how soon the processes
/// met (a run on a fast machine once had 34 of 200 rounds).
fn claims(kernel: &Kernel, worker: &str, rounds: usize) -> Result<()> {
    let board = kernel.taskboard();
    let mut held: Option<(String, String)> = None;
    for r in 0..rounds {
        if r == rounds / 2 {
            // Halfway, every worker waits for the others: even if each ran
            // its first half alone, the wins of the second half come after
            // every worker's first ones, so the winners interleave in time.
            together("claims-half", worker)?;
        }
        let task = format!("t{}", r % 4);
        if held.as_ref().is_some_and(|(t, _)| *t == task) {
            continue;
        }
        match board.claim(&task, worker, 60_000) {
            Ok(t) => {
                println!("WIN {task} {} {}", t.fence, now());
                if let Some((old, token)) = held.take() {
                    board.release(&old, &token)?;
                }
                held = Some((task, t.token.unwrap_or_default()));
                work();
            }
            Err(Error::Taken) => {
                println!("TAKEN {task} {}", now());
                if let Some((old, token)) = held.take() {
                    board.release(&old, &token)?;
                }
            }
            Err(e) => bail!("claim {task}: {e}"),
        }
    }
    if let Some((task, token)) = held {
        board.release(&task, &token)?;
    }
    Ok(())
}

/// Drain the queue with `claim-next`: every task it hands out is this
/// worker's alone (the audit checks no task is handed out twice), and
/// completing one can make its dependents ready for anyone.
fn queue(kernel: &Kernel, worker: &str) -> Result<()> {
    let board = kernel.taskboard();
    while let Some(task) = board.claim_next(worker, 60_000)? {
        println!("NEXT {} {} {}", task.id, task.fence, now());
        work();
        board.complete(&task.id, task.token.as_deref().unwrap_or_default())?;
    }
    Ok(())
}

/// Drain the queue with the queue worker (batches of 4, handlers on 4
/// threads): one `NEXT` line when a handler starts and one `DONE` line when
/// it ends, so the parent can count the claims of a group that ran at once.
fn worker_loop(kernel: &Kernel, worker: &str) -> Result<()> {
    let worked = gak::blocking::Worker::new(kernel, worker)
        .batch(4)
        .ttl(60_000)
        .run_until_idle(|task| {
            println!("NEXT {} {} {}", task.id, task.fence, now());
            work();
            work();
            println!("DONE {} {} {}", task.id, task.fence, now());
            Ok::<(), String>(())
        })?;
    if worked.completed != worked.claimed {
        bail!("{worker}: {worked:?}");
    }
    Ok(())
}

/// Run every key through the Runner until it is applied somewhere. Each
/// worker starts at its own place in the key list and wraps around, so
/// several processes apply keys and meet each other's in-flight ones.
fn effects(kernel: &Kernel, worker: &str, keys: usize, ledger: Option<&str>) -> Result<()> {
    let runner = Runner::new(kernel, 60_000);
    let offset = index(worker) as usize * 7;
    for n in (0..keys).map(|i| (i + offset) % keys) {
        let key = format!("k{n}");
        let action = Action::new(&key, &format!("res{}", n % 3));
        let mut spins = 0u32;
        loop {
            let ran = runner.run(&action, |lease| {
                body(kernel, &key, worker, lease.fence, ledger)
            });
            match ran {
                Ok(Ran::Applied(_) | Ran::Replayed(_)) => break,
                Ok(refused @ (Ran::InFlight | Ran::Contended(_))) if spins < 100_000 => {
                    if spins == 0 {
                        let what = match refused {
                            Ran::InFlight => "INFLIGHT",
                            _ => "CONTENDED",
                        };
                        println!("{what} {key} {}", now());
                    }
                    spins += 1;
                    // Try again after a moment, as a real worker would.
                    work();
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
    let index = index(worker);
    let sql = format!("INSERT INTO \"{schema}\".ledger (fence, worker) VALUES ($1, $2)");
    for i in 0..rounds as u64 {
        let fence = 1 + i * 8 + index;
        let written = kernel.sideeffect().write_fenced("ledger", fence, |down| {
            down.postgres_execute(&sql, &[&(fence as i64), &worker])
                .unwrap_or_else(|| Err(Error::storage("not postgres")))
                .map(drop)
        });
        match written {
            Ok(()) => println!("SINK {fence} {}", now()),
            Err(SinkError::Kernel(Error::FenceStale)) => println!("STALE {fence} {}", now()),
            Err(e) => bail!("sink write {fence}: {e:?}"),
        }
    }
    Ok(())
}
