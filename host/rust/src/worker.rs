//! The queue worker (`host/HOSTS.md`, "The queue worker"): what queue users
//! call. It claims a batch, runs each task's handler with its claim renewed
//! while it runs, completes the successes in one `complete-batch`, fails the
//! errors with exponential back-off and jitter, and stops gracefully: no new
//! claim, the handlers it has not started released (their attempt given
//! back), the running ones finished and reported.
//!
//! ```
//! use gak::{Kernel, TaskSeed, Worker};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let kernel = Kernel::open("memory:").await?;
//! kernel.taskboard().seed(&[TaskSeed::new("send-invoice")]).await?;
//! let worked = Worker::new(&kernel, "worker-1")
//!     .run_until_idle(async |task| {
//!         println!("sending {}", task.id);
//!         Ok::<(), std::io::Error>(())
//!     })
//!     .await?;
//! assert_eq!(worked.completed, 1);
//! # Ok(()) }
//! ```
use std::fmt::Display;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::future::{self, Either};
use futures_util::{FutureExt, StreamExt, stream};

use crate::{Completion, CompletionAnswer, Error, Kernel, Task};

/// The longest delay `fail` takes: one year, in ms.
const MAX_DELAY: u64 = 365 * 24 * 60 * 60 * 1000;

/// The longest `last-error` the contract stores, in bytes.
pub const MAX_REASON: usize = 4096;

/// What a worker did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Worked {
    /// Tasks granted to it.
    pub claimed: u64,
    /// Handlers that succeeded and whose completion the kernel accepted.
    pub completed: u64,
    /// Handlers that failed and whose `fail` the kernel accepted (the task
    /// is due again after its back-off, or dead).
    pub failed: u64,
    /// Claims given back unstarted at a stop.
    pub released: u64,
    /// Results the kernel refused: the claim was lost (taken over after it
    /// expired, or re-seeded) while the handler ran.
    pub lost: u64,
}

/// Exponential back-off with jitter for failed handlers: the `n`-th failed
/// attempt is due again after `min(max, base * 2^(n-1)) * (1 - jitter * u)`
/// ms, `u` uniform in [0, 1): jitter only shortens, the cap holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    /// The first retry's delay, in ms.
    pub base: u64,
    /// The longest delay, in ms.
    pub max: u64,
    /// The share (0 to 1) by which a delay may be shortened at random, so
    /// tasks that failed together do not come back together.
    pub jitter: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: 1_000,
            max: 3_600_000,
            jitter: 0.2,
        }
    }
}

impl Backoff {
    /// The delay after the task's `attempts`-th attempt failed, with `u` in
    /// [0, 1).
    pub fn delay(&self, attempts: u32, u: f64) -> u64 {
        let doublings = attempts.saturating_sub(1).min(63);
        let full = self
            .base
            .saturating_mul(1u64.checked_shl(doublings).unwrap_or(u64::MAX))
            .min(self.max)
            .min(MAX_DELAY);
        let jitter = self.jitter.clamp(0.0, 1.0) * u.clamp(0.0, 1.0);
        // A float product is below `full` when jitter > 0; never above.
        ((full as f64) * (1.0 - jitter)).floor().min(full as f64) as u64
    }
}

/// Stops a worker: no new claim; handlers not started are released; the
/// running ones finish and are reported. Cheap to clone; any thread.
#[derive(Clone, Debug, Default)]
pub struct Stop(Arc<StopState>);

#[derive(Debug, Default)]
struct StopState {
    stopped: AtomicBool,
    notify: tokio::sync::Notify,
}

impl Stop {
    /// Ask the worker to stop.
    pub fn stop(&self) {
        self.0.stopped.store(true, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }

    /// Was it asked to stop?
    pub fn is_stopped(&self) -> bool {
        self.0.stopped.load(Ordering::SeqCst)
    }

    async fn wait(&self, idle: Duration) {
        let notified = self.0.notify.notified();
        if self.is_stopped() {
            return;
        }
        let _ = tokio::time::timeout(idle, notified).await;
    }
}

/// A queue worker over one kernel (see the module docs).
#[derive(Clone, Debug)]
pub struct Worker {
    kernel: Kernel,
    agent: String,
    batch: u32,
    ttl: u64,
    concurrency: usize,
    idle: Duration,
    backoff: Backoff,
    stop: Stop,
}

/// How one handler ended.
enum Ran {
    Ok(Task),
    Failed(Task, String),
    Unstarted(Task),
}

impl Worker {
    /// A worker claiming as `agent`: batches of 10, a 30 s ttl renewed every
    /// 10 s while a handler runs, every handler of a batch at once, 1 s
    /// between polls of an empty board, [`Backoff::default`].
    pub fn new(kernel: &Kernel, agent: &str) -> Self {
        Worker {
            kernel: kernel.clone(),
            agent: agent.to_owned(),
            batch: 10,
            ttl: 30_000,
            concurrency: 10,
            idle: Duration::from_secs(1),
            backoff: Backoff::default(),
            stop: Stop::default(),
        }
    }

    /// Claim up to `n` (1-1000) tasks at a time; also the concurrency.
    pub fn batch(mut self, n: u32) -> Self {
        self.batch = n;
        self.concurrency = n.max(1) as usize;
        self
    }

    /// Run at most `n` handlers at once (default: the batch).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// The claims' ttl in ms (renewed every third of it while a handler runs).
    pub fn ttl(mut self, ms: u64) -> Self {
        self.ttl = ms;
        self
    }

    /// How long to wait before polling an empty board again.
    pub fn idle(mut self, wait: Duration) -> Self {
        self.idle = wait;
        self
    }

    /// The back-off of failed handlers.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// A handle that stops this worker (and its clones).
    pub fn stopper(&self) -> Stop {
        self.stop.clone()
    }

    /// Work until stopped. Store failures are logged and the loop goes on
    /// after the idle wait (claims it could not report expire and are
    /// taken over).
    ///
    /// # Errors
    /// `invalid-input` (a bad option): the loop cannot go on.
    pub async fn run<F, Fut, E>(&self, handler: F) -> Result<Worked, Error>
    where
        F: Fn(Task) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Display,
    {
        self.work(&handler, false).await
    }

    /// Work until a claim finds no free task (or a stop).
    ///
    /// # Errors
    /// The first error of a call (`invalid-input`, `storage`).
    pub async fn run_until_idle<F, Fut, E>(&self, handler: F) -> Result<Worked, Error>
    where
        F: Fn(Task) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Display,
    {
        self.work(&handler, true).await
    }

    async fn work<F, Fut, E>(&self, handler: &F, until_idle: bool) -> Result<Worked, Error>
    where
        F: Fn(Task) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Display,
    {
        let mut worked = Worked::default();
        while !self.stop.is_stopped() {
            match self.round(handler, &mut worked).await {
                Ok(true) => {}
                Ok(false) if until_idle => break,
                Ok(false) => self.stop.wait(self.idle).await,
                Err(e @ Error::Storage(_)) if !until_idle => {
                    tracing::warn!(agent = %self.agent, error = %e, "worker call failed; going on");
                    self.stop.wait(self.idle).await;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(worked)
    }

    /// One batch: claim, run, report. Answers whether it claimed anything.
    async fn round<F, Fut, E>(&self, handler: &F, worked: &mut Worked) -> Result<bool, Error>
    where
        F: Fn(Task) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Display,
    {
        let board = self.kernel.taskboard();
        let tasks = board.claim_batch(&self.agent, self.ttl, self.batch).await?;
        if tasks.is_empty() {
            return Ok(false);
        }
        worked.claimed += tasks.len() as u64;
        let ran: Vec<Ran> = stream::iter(tasks)
            .map(|task| self.one(handler, task))
            .buffered(self.concurrency)
            .collect()
            .await;
        let mut done = Vec::new();
        let mut failed = Vec::new();
        let mut unstarted = Vec::new();
        for r in ran {
            match r {
                Ran::Ok(t) => done.push(t),
                Ran::Failed(t, why) => failed.push((t, why)),
                Ran::Unstarted(t) => unstarted.push(t),
            }
        }
        if !done.is_empty() {
            let items: Vec<Completion> = done
                .iter()
                .map(|t| Completion::new(&t.id, token(t)))
                .collect();
            for answer in board.complete_batch(&items).await? {
                match answer.answer {
                    CompletionAnswer::Completed => worked.completed += 1,
                    CompletionAnswer::NotFound | CompletionAnswer::LeaseLost => worked.lost += 1,
                }
            }
        }
        for (t, why) in failed {
            let u = unit();
            let after = self.backoff.delay(t.attempts, u);
            match board.fail(&t.id, token(&t), &why, Some(after)).await {
                Ok(_) => worked.failed += 1,
                Err(Error::LeaseLost | Error::NotFound) => worked.lost += 1,
                Err(e) => return Err(e),
            }
        }
        for t in unstarted {
            match board.release(&t.id, token(&t)).await {
                Ok(()) => worked.released += 1,
                Err(Error::LeaseLost | Error::NotFound) => worked.lost += 1,
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Run one handler (unless the worker was stopped before it started),
    /// renewing its claim while it runs.
    async fn one<F, Fut, E>(&self, handler: &F, task: Task) -> Ran
    where
        F: Fn(Task) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Display,
    {
        if self.stop.is_stopped() {
            return Ran::Unstarted(task);
        }
        let call = AssertUnwindSafe(async { handler(task.clone()).await }).catch_unwind();
        let keep = self.keep_alive(&task);
        let ended = match future::select(Box::pin(call), Box::pin(keep)).await {
            Either::Left((ended, _)) => ended,
            Either::Right((never, _)) => match never {},
        };
        match ended {
            Ok(Ok(())) => Ran::Ok(task),
            Ok(Err(e)) => Ran::Failed(task, reason(&e.to_string())),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".to_owned());
                Ran::Failed(task, reason(&format!("panicked: {message}")))
            }
        }
    }

    /// Renew the claim every third of the ttl until a renewal is refused,
    /// then wait for ever (the handler decides when it ends; its result is
    /// refused as lost).
    async fn keep_alive(&self, task: &Task) -> std::convert::Infallible {
        let every = crate::runner::default_interval(self.ttl);
        loop {
            tokio::time::sleep(every).await;
            match self
                .kernel
                .taskboard()
                .renew(&task.id, token(task), self.ttl)
                .await
            {
                Ok(_) => {}
                Err(Error::LeaseLost | Error::NotFound) => {
                    return std::future::pending().await;
                }
                Err(e) => tracing::warn!(task = %task.id, error = %e, "renewal failed; retrying"),
            }
        }
    }
}

fn token(task: &Task) -> &str {
    task.token.as_deref().unwrap_or_default()
}

/// A uniform draw in [0, 1) from the OS's CSPRNG (no generator state to share
/// across a fork, so workers forked together do not back off together).
fn unit() -> f64 {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        return 0.0;
    }
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

/// A handler's error as `last-error`: U+0000 (which no store keeps) as
/// U+FFFD, cut to at most 4096 bytes at a character boundary.
pub fn reason(message: &str) -> String {
    let clean = message.replace('\0', "\u{FFFD}");
    if clean.len() <= MAX_REASON {
        return clean;
    }
    let mut end = MAX_REASON;
    while !clean.is_char_boundary(end) {
        end -= 1;
    }
    clean[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_is_capped_and_jitter_only_shortens() {
        let b = Backoff {
            base: 1_000,
            max: 5_000,
            jitter: 0.0,
        };
        let delays: Vec<u64> = (1..=5).map(|n| b.delay(n, 0.7)).collect();
        assert_eq!(delays, [1_000, 2_000, 4_000, 5_000, 5_000]);
        assert_eq!(b.delay(0, 0.0), 1_000);
        assert_eq!(b.delay(u32::MAX, 0.0), 5_000);
        let j = Backoff { jitter: 0.5, ..b };
        assert_eq!(j.delay(1, 0.0), 1_000);
        assert_eq!(j.delay(1, 0.5), 750);
        assert!(j.delay(3, 0.999_999) >= 2_000 && j.delay(3, 0.999_999) <= 4_000);
        let huge = Backoff {
            base: u64::MAX,
            max: u64::MAX,
            jitter: 0.0,
        };
        assert_eq!(huge.delay(60, 0.0), MAX_DELAY);
    }

    #[test]
    fn reasons_are_cut_at_a_character_boundary_without_nul() {
        assert_eq!(reason("a\0b"), "a\u{FFFD}b");
        let long = "é".repeat(3_000);
        let cut = reason(&long);
        assert_eq!(cut, "é".repeat(2_048));
        assert_eq!(reason(&"x".repeat(5_000)).len(), MAX_REASON);
        assert_eq!(reason(&"\0".repeat(2_000)).len(), 4_095);
    }

    #[test]
    fn unit_draws_stay_in_range() {
        for _ in 0..1000 {
            let u = unit();
            assert!((0.0..1.0).contains(&u));
        }
    }
}
