//! A worker process for the multi-process tests: claims hot tasks and runs
//! side effects on a shared store, printing one line per win and per body
//! execution for the parent to audit.
//!
//! usage: gak-hammer STORE_URL WORKER ROUNDS KEYS
use anyhow::{Context, Result, bail};
use gak::{Action, BodyError, Error, Kernel, Ran, RunError, Runner};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, worker, rounds, keys] = args.as_slice() else {
        bail!("usage: gak-hammer STORE_URL WORKER ROUNDS KEYS");
    };
    let rounds: usize = rounds.parse().context("ROUNDS")?;
    let keys: usize = keys.parse().context("KEYS")?;
    let kernel = Kernel::open(url)?;
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

    let runner = Runner::new(&kernel, 60_000);
    for n in 0..keys {
        let action = Action::new(&format!("k{n}"), &format!("res{}", n % 3));
        let mut spins = 0u32;
        loop {
            let ran = runner.run(&action, |lease| {
                println!("BODY k{n} {worker} {}", lease.fence);
                Ok::<_, BodyError<Error>>(worker.as_bytes().to_vec())
            });
            match ran {
                Ok(Ran::Applied(_) | Ran::Replayed(_)) => break,
                Ok(Ran::InFlight | Ran::Contended(_)) if spins < 1_000_000 => {
                    spins += 1;
                    std::thread::yield_now();
                }
                Ok(other) => bail!("k{n}: {other:?}"),
                Err(RunError::Kernel(e)) => bail!("k{n}: {e}"),
                Err(RunError::Uncertain(e) | RunError::NotApplied(e)) => bail!("k{n}: {e}"),
            }
        }
    }
    Ok(())
}
