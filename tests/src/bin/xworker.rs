//! `gak-xworker`: the Rust side of the cross-language worker protocol (v1,
//! `host/HOSTS.md`). Three phases against a shared store — claims, effects,
//! a fenced ledger — one JSON object per line on stdout; any unexpected
//! error exits non-zero with the error on stderr. A load generator: the
//! audit is in `gak_tests::xlang`.
use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use gak::blocking::Kernel;
use gak::{Acquired, Action, Error, SinkError, StorageError};
use serde_json::{Value, json};

const LEASE: u64 = 60_000;
const MAX_TRIES: usize = 2000;

struct Args {
    store: String,
    worker: String,
    index: u64,
    tasks: u64,
    rounds: u64,
    keys: u64,
    sink_rounds: u64,
    /// `--barrier DIR` and `--parties N`: start together (see `barrier`).
    barrier: Option<(String, u64)>,
    /// `--hold-ms H`: each effect takes this long between its fenced write
    /// and `complete`, as a real one does (the key is in flight meanwhile).
    hold_ms: u64,
}

fn parse() -> Result<Args> {
    let mut it = std::env::args().skip(1);
    let (mut store, mut worker, mut barrier) = (None, None, None);
    let mut nums = [None; 7];
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        let slot = match flag.as_str() {
            "--store" => {
                store = Some(value);
                continue;
            }
            "--worker" => {
                worker = Some(value);
                continue;
            }
            "--barrier" => {
                barrier = Some(value);
                continue;
            }
            "--parties" => 5,
            "--index" => 0,
            "--tasks" => 1,
            "--rounds" => 2,
            "--keys" => 3,
            "--sink-rounds" => 4,
            "--hold-ms" => 6,
            other => bail!("unknown argument {other}"),
        };
        nums[slot] = Some(
            value
                .parse::<u64>()
                .with_context(|| format!("{flag} {value}"))?,
        );
    }
    let n = |i: usize, name: &str| nums[i].with_context(|| format!("--{name} is required"));
    Ok(Args {
        store: store.context("--store is required")?,
        worker: worker.context("--worker is required")?,
        index: n(0, "index")?,
        tasks: n(1, "tasks")?,
        rounds: n(2, "rounds")?,
        keys: n(3, "keys")?,
        sink_rounds: n(4, "sink-rounds")?,
        hold_ms: nums[6].unwrap_or(0),
        barrier: match (barrier, nums[5]) {
            (Some(dir), Some(parties)) => Some((dir, parties)),
            (None, None) => None,
            _ => bail!("--barrier and --parties go together"),
        },
    })
}

struct Out<'a> {
    worker: &'a str,
    stdout: std::io::StdoutLock<'static>,
}

impl Out<'_> {
    fn emit(&mut self, event: &str, fields: Value) -> Result<()> {
        let t = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as u64;
        let mut line = json!({ "t": t, "worker": self.worker, "lang": "rust", "event": event });
        if let (Some(line), Value::Object(extra)) = (line.as_object_mut(), fields) {
            line.extend(extra);
        }
        writeln!(self.stdout, "{line}")?;
        self.stdout.flush()?;
        Ok(())
    }
}

fn claims(kernel: &Kernel, a: &Args, out: &mut Out<'_>) -> Result<()> {
    let board = kernel.taskboard();
    for r in 0..a.rounds {
        let task = format!("t{}", r % a.tasks);
        match board.claim(&task, &a.worker, LEASE) {
            Ok(t) => {
                out.emit("win", json!({ "task": task, "fence": t.fence }))?;
                board.release(&task, t.token.as_deref().unwrap_or_default())?;
            }
            Err(Error::Taken) => out.emit("taken", json!({ "task": task }))?,
            Err(e) => bail!("claim {task}: {e}"),
        }
    }
    Ok(())
}

fn effects(kernel: &Kernel, a: &Args, out: &mut Out<'_>) -> Result<()> {
    let gate = kernel.sideeffect();
    for i in 0..a.keys {
        let key = format!("key-{i}");
        let action = Action::new(&key, &format!("res-{i}"));
        let mut done = false;
        for attempt in 0..MAX_TRIES {
            match gate.acquire(&action, LEASE)? {
                Acquired::Granted(lease) => {
                    gate.write_fenced(&action.resource, lease.fence, |down| {
                        down.put(&format!("effect/{key}"), &a.worker)
                    })
                    .map_err(|e| anyhow::anyhow!("sink for {key}: {:?}", e.contract_error()))?;
                    out.emit("body", json!({ "key": key, "fence": lease.fence }))?;
                    std::thread::sleep(Duration::from_millis(a.hold_ms));
                    gate.complete(&action, &lease, a.worker.as_bytes())?;
                    done = true;
                }
                Acquired::Replayed(_) => {
                    out.emit("replayed", json!({ "key": key }))?;
                    done = true;
                }
                busy @ (Acquired::InFlight | Acquired::Contended(_)) => {
                    let event = match busy {
                        Acquired::InFlight => "in-flight",
                        _ => "contended",
                    };
                    out.emit(event, json!({ "key": key }))?;
                    std::thread::sleep(Duration::from_millis(1 + (attempt as u64 % 5)));
                }
                Acquired::Uncertain(why) => bail!("{key}: uncertain ({why})"),
                other => bail!("{key}: unexpected {other:?}"),
            }
            if done {
                break;
            }
        }
        if !done {
            bail!("{key}: still busy after {MAX_TRIES} tries");
        }
    }
    Ok(())
}

fn sink(kernel: &Kernel, a: &Args, out: &mut Out<'_>) -> Result<()> {
    let gate = kernel.sideeffect();
    for s in 0..a.sink_rounds {
        let fence = s * 16 + a.index + 1;
        let written = gate.write_fenced("ledger", fence, |down| {
            let count: u64 = down
                .get("ledger/count")?
                .map_or(Ok(0), |c| c.parse())
                .map_err(|e| Error::Storage(StorageError::new("ledger/count").caused_by(e)))?;
            down.put("ledger/count", &(count + 1).to_string())?;
            let row = json!({ "worker": a.worker, "fence": fence }).to_string();
            down.put(&format!("ledger/{:08}", count + 1), &row)
        });
        match written {
            Ok(()) => out.emit("sink-ok", json!({ "fence": fence }))?,
            Err(SinkError::Kernel(Error::FenceStale)) => {
                out.emit("sink-stale", json!({ "fence": fence }))?
            }
            Err(e) => bail!("ledger write {fence}: {e:?}"),
        }
    }
    Ok(())
}

/// The protocol's phase lines: say "at `phase`" with a file `PHASE-N` in
/// the barrier folder, then wait until every party has. Workers in
/// different languages (and builds) run at very different speeds; without
/// this, a fast worker could finish a phase before a slow one begins it.
fn barrier(dir: &str, phase: &str, index: u64, parties: u64) -> Result<()> {
    let dir = std::path::Path::new(dir);
    std::fs::write(dir.join(format!("{phase}-{index}")), b"")?;
    let prefix = format!("{phase}-");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let ready = std::fs::read_dir(dir)?
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .count() as u64;
        if ready >= parties {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            bail!("barrier {phase}: {ready} of {parties} parties there after 120 s");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn main() -> Result<()> {
    let a = parse()?;
    let kernel = Kernel::open(&a.store).with_context(|| format!("opening {}", a.store))?;
    let line = |phase: &str| match &a.barrier {
        Some((dir, parties)) => barrier(dir, phase, a.index, *parties),
        None => Ok(()),
    };
    kernel.taskboard().get("t0")?; // compiled and instantiated
    line("ready")?;
    let mut out = Out {
        worker: &a.worker,
        stdout: std::io::stdout().lock(),
    };
    claims(&kernel, &a, &mut out)?;
    line("effects")?;
    effects(&kernel, &a, &mut out)?;
    line("sink")?;
    sink(&kernel, &a, &mut out)
}
