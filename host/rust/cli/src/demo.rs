//! `gak demo`: the reference-runtime story, end to end through the
//! component, one numbered line per event.
//!
//! A run of three steps is started, dies after two, and resumes on another
//! worker: the plan skips the finished steps and every effect body's call
//! counter proves nothing was replayed. Then a claim race and an uncertain
//! effect being reconciled.
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Barrier, Mutex};

use gak::blocking::{Committer, Kernel, Runner};
use gak::{
    Acquired, Action, BodyError, Clock, Error, ManualClock, Outcome, Ran, Resolution, RunError,
    Status, StepDef, TaskSeed,
};

/// What the demo observed, for tests to check.
#[derive(Debug, Default)]
pub struct DemoReport {
    /// How many times each effect body was called.
    pub body_calls: BTreeMap<String, u32>,
    /// Steps the resume plan skipped.
    pub skipped: Vec<String>,
    /// Steps the resume plan ran.
    pub resumed: Vec<String>,
    /// Winners of the claim race.
    pub race_winners: usize,
    /// Claimers in the race.
    pub race_claimers: usize,
    /// Did the retry after a failed body see `uncertain` without calling it?
    pub retry_refused: bool,
    /// Did the key replay its resolved result afterwards?
    pub replayed_after_resolve: bool,
}

const LEASE: u64 = 30_000;

struct Demo<'a> {
    kernel: Kernel,
    clock: Arc<ManualClock>,
    out: &'a mut dyn Write,
    line: u32,
    report: DemoReport,
    run_id: String,
}

fn storage(e: std::io::Error) -> Error {
    Error::storage(format!("cannot write demo output: {e}"))
}

impl Demo<'_> {
    fn say(&mut self, text: &str) -> Result<(), Error> {
        self.line += 1;
        writeln!(self.out, "{}. {text}", self.line).map_err(storage)
    }

    fn steps() -> Vec<StepDef> {
        vec![
            StepDef::new("reserve-stock", &[]),
            StepDef::new("charge-card", &["reserve-stock"]),
            StepDef::new("ship-parcel", &["charge-card"]),
        ]
    }

    /// Run `step` as a worker holding the run's claim with `fence`: effect
    /// through the Runner, step outcome through the gate, snapshot.
    fn run_step(&mut self, committer: &mut Committer, fence: u64, step: &str) -> Result<(), Error> {
        let runner = Runner::new(&self.kernel, LEASE);
        let action = Action::new(&format!("{}/{step}", self.run_id), step)
            .with_fingerprint(&format!("{step}:v1"));
        let calls = self.report.body_calls.entry(step.to_owned()).or_default();
        let ran = runner.run(&action, |_lease| {
            *calls += 1;
            Ok::<_, BodyError<Error>>(format!("{step} ok").into_bytes())
        });
        let result = match ran {
            Ok(Ran::Applied(r) | Ran::Replayed(r)) => r,
            Ok(other) => return Err(Error::storage(format!("{step}: unexpected {other:?}"))),
            Err(RunError::Kernel(e)) => return Err(e),
            Err(RunError::Uncertain(e) | RunError::NotApplied(e)) => return Err(e),
        };
        let outcome = Outcome {
            status: Status::Succeeded,
            result,
        };
        self.kernel
            .commitgate()
            .commit(&self.run_id, Some(step), fence, &outcome)?;
        committer.step_done(step)
    }

    fn story(&mut self) -> Result<(), Error> {
        let kernel = self.kernel.clone();
        let board = kernel.taskboard();
        let steps = Self::steps();
        board.seed(&[TaskSeed::new(&self.run_id).title("order #7")])?;
        self.say(&format!(
            "run {} created: reserve-stock -> charge-card -> ship-parcel (each depends on the one before)",
            self.run_id
        ))?;

        // Worker A claims the run and gets through two steps.
        let claim_a = board.claim(&self.run_id, "worker-a", LEASE)?;
        let mut committer_a = Committer::resume(&self.kernel, &self.run_id, Some(claim_a.fence))?;
        let plan = self.kernel.checkpoint().build_plan(&steps, None)?;
        for step in plan.run.iter().take(2) {
            self.run_step(&mut committer_a, claim_a.fence, step)?;
        }
        self.say(&format!(
            "worker-a (fence {}) ran reserve-stock and charge-card: 2 snapshots saved (seq {}), 2 step outcomes committed",
            claim_a.fence,
            committer_a.snapshot().seq
        ))?;

        // Worker A dies: no release, no further snapshot.
        drop(committer_a);
        self.say("worker-a died before ship-parcel started (its claim is never released)")?;

        // Worker B takes the run over once A's claim expires, and resumes.
        match board.claim(&self.run_id, "worker-b", LEASE) {
            Err(Error::Taken) => {}
            other => return Err(Error::storage(format!("expected taken, got {other:?}"))),
        }
        self.clock.advance(LEASE);
        let claim_b = board.claim(&self.run_id, "worker-b", LEASE)?;
        let mut committer_b = Committer::resume(&self.kernel, &self.run_id, Some(claim_b.fence))?;
        let plan = self
            .kernel
            .checkpoint()
            .build_plan(&steps, Some(committer_b.snapshot()))?;
        for step in &plan.run {
            self.run_step(&mut committer_b, claim_b.fence, step)?;
        }
        // The zombie: A wakes up and tries to write the run again.
        let mut zombie = committer_b.snapshot().clone();
        zombie.fence = Some(claim_a.fence);
        zombie.seq += 1;
        let zombie_refused = self.kernel.checkpoint().save_if_newer(&zombie).err();
        self.kernel.commitgate().commit(
            &self.run_id,
            None,
            claim_b.fence,
            &Outcome {
                status: Status::Succeeded,
                result: b"shipped".to_vec(),
            },
        )?;
        board.complete(&self.run_id, claim_b.token.as_deref().unwrap_or_default())?;
        let calls: Vec<String> = self
            .report
            .body_calls
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        self.report.skipped = plan.skip.clone();
        self.report.resumed = plan.run.clone();
        self.say(&format!(
            "worker-b took over (fence {}): plan skipped [{}], ran only [{}]; body calls {} — nothing replayed; zombie worker-a's save refused: {}",
            claim_b.fence,
            plan.skip.join(", "),
            plan.run.join(", "),
            calls.join(" "),
            zombie_refused.map_or("no (BUG)".into(), |e| e.name().to_owned())
        ))?;

        self.race()?;
        self.reconcile()
    }

    fn race(&mut self) -> Result<(), Error> {
        let task = format!("{}-race", self.run_id);
        self.kernel.taskboard().seed(&[TaskSeed::new(&task)])?;
        let claimers = 8;
        let gate = Arc::new(Barrier::new(claimers));
        let results = Arc::new(Mutex::new(Vec::new()));
        std::thread::scope(|s| {
            for i in 0..claimers {
                let (kernel, gate, results, task) = (
                    self.kernel.clone(),
                    gate.clone(),
                    results.clone(),
                    task.clone(),
                );
                s.spawn(move || {
                    gate.wait();
                    let r = kernel
                        .taskboard()
                        .claim(&task, &format!("racer-{i}"), LEASE);
                    results.lock().unwrap_or_else(|p| p.into_inner()).push(r);
                });
            }
        });
        let results = results.lock().unwrap_or_else(|p| p.into_inner());
        let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        let taken = results
            .iter()
            .filter(|r| matches!(r, Err(Error::Taken)))
            .count();
        self.report.race_winners = winners.len();
        self.report.race_claimers = claimers;
        let winner = winners
            .first()
            .and_then(|t| t.owner.clone())
            .unwrap_or_else(|| "nobody".into());
        self.say(&format!(
            "{claimers} workers raced to claim one open task: {} winner ({winner}), {taken} refused as taken",
            winners.len()
        ))
    }

    fn reconcile(&mut self) -> Result<(), Error> {
        let runner = Runner::new(&self.kernel, LEASE);
        let action = Action::new(&format!("{}/refund", self.run_id), "payments").unsafe_to_retry();
        let mut calls = 0;
        let first = runner.run(&action, |_| {
            calls += 1;
            Err(BodyError::Failed("connection reset after sending"))
        });
        let second = runner.run(&action, |_| {
            calls += 1;
            Ok::<_, BodyError<&str>>(b"refund twice".to_vec())
        });
        self.report.retry_refused =
            matches!(first, Err(RunError::Uncertain(_))) && matches!(second, Ok(Ran::Uncertain(_)));
        let gate = self.kernel.sideeffect();
        let claim = gate.begin_reconcile(&action, LEASE)?;
        // The reconciler asks the payment provider by idempotency key: it did happen.
        let verdict = Resolution {
            applied: true,
            result: Some(b"refund r-81 settled".to_vec()),
            force_retryable: false,
            claim: Some(claim.claim.clone()),
        };
        gate.resolve_uncertain(&action, &verdict)?;
        let third = runner.run(&action, |_| {
            calls += 1;
            Ok::<_, BodyError<&str>>(b"refund again".to_vec())
        });
        self.report.replayed_after_resolve =
            matches!(&third, Ok(Ran::Replayed(r)) if r == b"refund r-81 settled");
        self.report.body_calls.insert("refund".into(), calls);
        let after = gate.acquire(&action, LEASE)?;
        self.say(&format!(
            "refund body failed -> uncertain; retry refused without calling the body ({}); a reconciler claimed it (until +{} ms) and resolved it applied; the key now only replays ({}); refund body calls = {calls}",
            if self.report.retry_refused { "yes" } else { "NO" },
            claim.until - self.clock.now(),
            match after {
                Acquired::Replayed(r) => String::from_utf8_lossy(&r).into_owned(),
                other => format!("{other:?}"),
            }
        ))
    }
}

/// Run the demo on `kernel` (whose clock must be `clock`), printing to `out`.
pub fn run(
    kernel: &Kernel,
    clock: Arc<ManualClock>,
    out: &mut dyn Write,
) -> Result<DemoReport, Error> {
    let run_id = format!("order-7-{:x}", clock.now());
    let mut demo = Demo {
        kernel: kernel.clone(),
        clock,
        out,
        line: 0,
        report: DemoReport::default(),
        run_id,
    };
    demo.story()?;
    Ok(demo.report)
}
