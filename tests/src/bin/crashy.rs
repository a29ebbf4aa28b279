//! A worker process for the SIGKILL test (`tests/tests/sigkill.rs`): runs the
//! three-step workflow `s1 -> s2 -> s3` of one run, each step applying one
//! counted side effect, and can stop dead at a chosen point so the test can
//! kill it there with a real SIGKILL.
//!
//! usage: `gak-crashy STORE_URL RUN_ID EFFECTS_FILE STEPS_LOG [POINT:STEP]`
//!
//! - `EFFECTS_FILE` is the downstream system's truth: applying the effect of
//!   step `s` appends one line `RUN_ID/s` (append, write, fsync).
//! - `STEPS_LOG` gets `start S`, `uncertain KEY REASON`,
//!   `reconciled KEY applied=BOOL` and `done S` lines for the test to audit.
//! - `POINT:STEP` pauses at `POINT` of step `STEP`: the worker prints
//!   `PAUSED POINT STEP` and blocks reading stdin until it is killed. Points:
//!   - `before-effect`: inside the Runner's body (the key is granted), before
//!     the effect is applied;
//!   - `after-effect`: inside the body after the effect is durable, before
//!     the Runner records it (`complete`);
//!   - `after-complete`: after the Runner reported the key completed
//!     (`Applied` or `Replayed`), before the step's outcome and snapshot;
//!   - `mid-transaction`: inside the body of a fenced write (the step's
//!     progress marker), i.e. with the store transaction open.
//!
//! On success it prints `FINISHED`. A worker whose claim expired under it (a
//! store call slower than the claim's ttl: `renew` says `lease-lost`) stops
//! the run, prints `RECLAIMED ...` and claims again, as a fresh owner would.
use std::fs::OpenOptions;
use std::io::{BufRead, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use gak::blocking::{Committer, Kernel, Runner};
use gak::{Action, BodyError, Error, Outcome, Ran, Resolution, Status, StepDef};

/// The task claim's ttl: a dead worker's claim is taken over after this.
const CLAIM_TTL: u64 = 300;
/// The side-effect lease's ttl: a dead worker's intent turns uncertain after this.
const LEASE_TTL: u64 = 300;
/// How often to retry a claim or a key another (dead) worker still holds.
const POLL: Duration = Duration::from_millis(20);
/// Give up rather than hang the test.
const DEADLINE: Duration = Duration::from_secs(30);
/// How often a worker that lost its claim to a slow call claims again (a
/// loaded machine can make several calls in a row slower than the ttl).
const MAX_RECLAIMS: usize = 20;

const POINTS: [&str; 4] = [
    "before-effect",
    "after-effect",
    "after-complete",
    "mid-transaction",
];

struct Worker {
    kernel: Kernel,
    run: String,
    effects: String,
    steps_log: String,
    pause: Option<(String, String)>,
    token: String,
    fence: u64,
    started: Instant,
    claimed: Instant,
    claim: ClaimStats,
}

/// How a claim went, for the diagnosis of a lost claim.
#[derive(Debug, Clone, Copy)]
struct ClaimStats {
    /// How long the `claim` call took.
    took_ms: u128,
    /// The lease's time left by the kernel's clock when the call returned.
    left_ms: i128,
}

struct Claimed {
    task: gak::Task,
    stats: ClaimStats,
}

impl Claimed {
    fn new(kernel: &Kernel, task: gak::Task, asked: Instant) -> Self {
        let took_ms = asked.elapsed().as_millis();
        let now = kernel.clock().now();
        let left_ms = i128::from(task.until.unwrap_or(0)) - i128::from(now);
        Claimed {
            task,
            stats: ClaimStats { took_ms, left_ms },
        }
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (url, run, effects, steps_log, pause) = match args.as_slice() {
        [u, r, e, s] => (u, r, e, s, None),
        [u, r, e, s, p] => (u, r, e, s, Some(p)),
        _ => bail!("usage: gak-crashy STORE_URL RUN_ID EFFECTS_FILE STEPS_LOG [POINT:STEP]"),
    };
    let pause = match pause {
        None => None,
        Some(p) => {
            let (point, step) = p.split_once(':').context("PAUSE_AT is POINT:STEP")?;
            ensure!(POINTS.contains(&point), "unknown pause point {point:?}");
            Some((point.to_owned(), step.to_owned()))
        }
    };
    let kernel = Kernel::open(url)?;
    let started = Instant::now();
    let agent = format!("crashy-{}", std::process::id());

    let mut reclaims = 0;
    loop {
        // Wait out a dead worker's claim: its lease has to expire first.
        let task = loop {
            let asked = Instant::now();
            match kernel.taskboard().claim(run, &agent, CLAIM_TTL) {
                Ok(task) => break Claimed::new(&kernel, task, asked),
                Err(Error::Taken) if started.elapsed() < DEADLINE => std::thread::sleep(POLL),
                Err(e) => bail!("claim {run}: {e}"),
            }
        };
        let worker = Worker {
            token: task
                .task
                .token
                .clone()
                .context("a claim carries its token")?,
            fence: task.task.fence,
            kernel: kernel.clone(),
            run: run.clone(),
            effects: effects.clone(),
            steps_log: steps_log.clone(),
            pause: pause.clone(),
            started,
            claim: task.stats,
            claimed: Instant::now(),
        };
        match worker.run_workflow() {
            Ok(()) => break,
            // The claim expired under us (a store call slower than its ttl):
            // stop, as any worker that lost its claim must, and claim again.
            Err(e) if e.is::<LostClaim>() && reclaims < MAX_RECLAIMS => {
                reclaims += 1;
                println!("RECLAIMED {e:#}");
            }
            Err(e) => return Err(e),
        }
    }
    println!("FINISHED");
    Ok(())
}

/// `renew` said `lease-lost`: this worker no longer owns the run.
#[derive(Debug)]
struct LostClaim {
    fence: u64,
    after_ms: u128,
    claim: ClaimStats,
}

impl std::fmt::Display for LostClaim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "lost the claim of fence {} {} ms after taking it (the claim call took {} ms \
             and returned with {} ms left)",
            self.fence, self.after_ms, self.claim.took_ms, self.claim.left_ms
        )
    }
}

impl std::error::Error for LostClaim {}

impl Worker {
    fn run_workflow(&self) -> Result<()> {
        let kernel = &self.kernel;
        let mut committer = Committer::resume(kernel, &self.run, Some(self.fence))?;
        let steps = [
            StepDef::new("s1", &[]),
            StepDef::new("s2", &["s1"]),
            StepDef::new("s3", &["s2"]),
        ];
        let plan = kernel
            .checkpoint()
            .build_plan(&steps, Some(committer.snapshot()))?;
        ensure!(
            plan.untrusted.is_empty(),
            "untrusted done records: {:?}",
            plan.untrusted
        );
        let runner = Runner::new(kernel, LEASE_TTL);
        for step in &plan.run {
            self.keep_claim()?;
            self.log(&format!("start {step}"))?;
            let key = format!("{}/{step}", self.run);
            let action = Action::new(&key, &format!("{}/effects", self.run));
            let result = self.effect(&runner, &action, step)?;
            self.pause_at("after-complete", step);

            // A progress marker written through a fenced sink: its body runs
            // inside the store transaction.
            kernel
                .sideeffect()
                .write_fenced(&format!("{}/progress", self.run), self.fence, |down| {
                    down.put(&key, "recorded")?;
                    self.pause_at("mid-transaction", step);
                    Ok::<_, Error>(())
                })
                .map_err(|e| anyhow!("progress marker for {key}: {}", e.contract_error()))?;

            let outcome = Outcome {
                status: Status::Succeeded,
                result,
            };
            kernel
                .commitgate()
                .commit(&self.run, Some(step), self.fence, &outcome)
                .with_context(|| format!("commit step {step}"))?;
            committer
                .step_done(step)
                .with_context(|| format!("snapshot after {step}"))?;
            self.log(&format!("done {step}"))?;
        }
        self.keep_claim()?;
        let outcome = Outcome {
            status: Status::Succeeded,
            result: b"finished".to_vec(),
        };
        kernel
            .commitgate()
            .commit(&self.run, None, self.fence, &outcome)
            .context("commit the run")?;
        kernel
            .taskboard()
            .complete(&self.run, &self.token)
            .context("complete the task")?;
        Ok(())
    }

    /// Run the step's effect through the Runner until the key is completed,
    /// reconciling it from downstream facts when it is uncertain.
    fn effect(&self, runner: &Runner, action: &Action, step: &str) -> Result<Vec<u8>> {
        let applied_result = format!("applied {}", action.key).into_bytes();
        loop {
            ensure!(
                self.started.elapsed() < DEADLINE,
                "{}: gave up waiting",
                action.key
            );
            let ran = runner.run(action, |lease| {
                self.pause_at("before-effect", step);
                apply(&self.effects, &lease.key).map_err(BodyError::Failed)?;
                self.pause_at("after-effect", step);
                Ok::<_, BodyError<anyhow::Error>>(applied_result.clone())
            });
            match ran {
                Ok(Ran::Applied(r) | Ran::Replayed(r)) => return Ok(r),
                Ok(Ran::Uncertain(reason)) => {
                    self.log(&format!("uncertain {} {reason}", action.key))?;
                    self.reconcile(action, &applied_result)?;
                }
                // A dead worker's intent or hold is still live: wait it out.
                Ok(Ran::InFlight | Ran::Contended(_)) => {
                    self.keep_claim()?;
                    std::thread::sleep(POLL);
                }
                Ok(other) => bail!("{}: unknown outcome {other:?}", action.key),
                Err(e) => bail!("{}: {e:?}", action.key),
            }
        }
    }

    /// Decide an uncertain key from the downstream truth: the effects file.
    fn reconcile(&self, action: &Action, applied_result: &[u8]) -> Result<()> {
        let gate = self.kernel.sideeffect();
        match gate.begin_reconcile(action, LEASE_TTL) {
            Ok(_) => {}
            // Resolved meanwhile: the next run of the key tells.
            Err(Error::NotUncertain) => return Ok(()),
            Err(Error::ReconcileTaken) => {
                std::thread::sleep(POLL);
                return Ok(());
            }
            Err(e) => bail!("begin_reconcile {}: {e}", action.key),
        }
        let applied = effect_lines(&self.effects)?.contains(&action.key);
        let resolution = Resolution {
            applied,
            result: applied.then(|| applied_result.to_vec()),
            force_retryable: false,
            claim: None,
        };
        gate.resolve_uncertain(action, &resolution)
            .with_context(|| format!("resolve_uncertain {}", action.key))?;
        self.log(&format!("reconciled {} applied={applied}", action.key))
    }

    /// Extend the task claim; losing it means this worker must stop.
    fn keep_claim(&self) -> Result<()> {
        match self
            .kernel
            .taskboard()
            .renew(&self.run, &self.token, CLAIM_TTL)
        {
            Ok(_) => Ok(()),
            Err(Error::LeaseLost) => Err(LostClaim {
                fence: self.fence,
                after_ms: self.claimed.elapsed().as_millis(),
                claim: self.claim,
            }
            .into()),
            Err(e) => Err(e).with_context(|| format!("renew the claim on {}", self.run)),
        }
    }

    /// Stop dead here if asked to: announce it and block until killed.
    fn pause_at(&self, point: &str, step: &str) {
        let Some((p, s)) = &self.pause else { return };
        if p != point || s != step {
            return;
        }
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "PAUSED {point} {step}");
        let _ = out.flush();
        drop(out);
        // The parent keeps stdin open and kills us; end of input means the
        // parent is gone, so do not linger as an orphan.
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        eprintln!("gak-crashy: paused at {point} {step} but was not killed");
        std::process::exit(3);
    }

    fn log(&self, line: &str) -> Result<()> {
        append(Path::new(&self.steps_log), line, false)
    }
}

/// Apply the effect: one durable line in the downstream file.
fn apply(effects: &str, key: &str) -> Result<()> {
    append(Path::new(effects), key, true)
}

fn append(path: &Path, line: &str, sync: bool) -> Result<()> {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("open {}", path.display()))?;
    file.write_all(format!("{line}\n").as_bytes())?;
    if sync {
        file.sync_all()?;
    }
    Ok(())
}

fn effect_lines(effects: &str) -> Result<Vec<String>> {
    match std::fs::read_to_string(effects) {
        Ok(text) => Ok(text.lines().map(str::to_owned).collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("read {effects}")),
    }
}
