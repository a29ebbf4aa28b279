//! A worker for the CLI tests: acquires one side-effect key and then either
//! blocks until it is killed (a worker dying mid-effect) or reports what the
//! kernel answered (the next attempt after an operator's verdict).
//!
//! usage: `gak-effect-worker STORE_URL (hold|probe) KEY RESOURCE TTL_MS [unsafe]`
//!
//! - `hold`: acquire; on a grant print `GRANTED fence=N holder=H`, then block
//!   reading stdin: the test SIGKILLs the process, so the intent expires with
//!   no verdict and the key turns `uncertain`.
//! - `probe`: acquire and print `REPLAYED TEXT`, `UNCERTAIN REASON`,
//!   `IN-FLIGHT`, `CONTENDED UNTIL` or `GRANTED …` (a grant is abandoned at
//!   once: a probe applies nothing).
use std::io::Read;

use anyhow::{Context, Result, bail};
use gak::blocking::Kernel;
use gak::{Acquired, Action};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (url, mode, key, resource, ttl, unsafe_) = match args.as_slice() {
        [u, m, k, r, t] => (u, m, k, r, t, false),
        [u, m, k, r, t, s] if s == "unsafe" => (u, m, k, r, t, true),
        _ => bail!("usage: gak-effect-worker STORE_URL (hold|probe) KEY RESOURCE TTL_MS [unsafe]"),
    };
    let ttl: u64 = ttl.parse().context("TTL_MS is a number of milliseconds")?;
    let mut action = Action::new(key, resource);
    if unsafe_ {
        action = action.unsafe_to_retry();
    }
    let kernel = Kernel::open(url)?;
    let acquired = kernel.sideeffect().acquire(&action, ttl)?;
    match (mode.as_str(), acquired) {
        ("hold", Acquired::Granted(lease)) => {
            println!("GRANTED fence={} holder={}", lease.fence, lease.holder);
            // Applying the effect "takes forever": the test kills us here.
            let mut sink = Vec::new();
            std::io::stdin().read_to_end(&mut sink)?;
            bail!("stdin closed before the test killed the worker");
        }
        ("hold", other) => bail!("wanted a grant to hold, got {other:?}"),
        ("probe", Acquired::Granted(lease)) => {
            kernel.sideeffect().abandon(&action, &lease, "probe only")?;
            println!("GRANTED fence={}", lease.fence);
        }
        ("probe", Acquired::Replayed(result)) => {
            println!("REPLAYED {}", String::from_utf8_lossy(&result));
        }
        ("probe", Acquired::Uncertain(reason)) => println!("UNCERTAIN {reason}"),
        ("probe", Acquired::InFlight) => println!("IN-FLIGHT"),
        ("probe", Acquired::Contended(until)) => println!("CONTENDED {until}"),
        (other, _) => bail!("unknown mode {other:?} (hold or probe)"),
    }
    Ok(())
}
