//! The host protocol around one call, written once for this crate: the
//! kernel's calls through the component and `gak bench`'s native path run
//! the same loop (`host/HOSTS.md` rules 1-5; the shared cases in
//! `tests/host-protocol/` pin it in every host).
//!
//! - One transaction per attempt: `begin`, the call, then `commit` on `ok`
//!   (or `rollback` for a dry run) and `rollback` on a refusal.
//! - A conflict anywhere (at `begin`, in a store call — even one the call
//!   swallowed — or at `commit`) re-runs the whole call in a fresh
//!   transaction, after a jittered, bounded back-off, at most
//!   `retry.attempts` times; then `storage`.
//! - A `commit` that fails any other way may have landed: `storage`, and the
//!   call is never re-run (the contract's rules decide what later calls see).
//! - A failure the call could not see (a sink body's statement) ends it with
//!   `storage` whatever it answered.
use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use gak_rules::{Error, StorageError, StoreFault};

use crate::store::Session;

/// How a call's transaction ends when the call succeeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Commit: the normal case.
    Commit,
    /// Roll back: a dry run.
    RollBack,
}

/// How a call is re-run when the store reports a conflict (busy database,
/// serialization failure, deadlock): at most `attempts` runs in all, pausing
/// between them for an exponentially growing, jittered time from `base` up
/// to `max`. Each re-run is a fresh decision, never a partial one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// Runs in all, at least 1.
    pub attempts: u32,
    /// The first pause.
    pub base: Duration,
    /// The longest pause.
    pub max: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        use crate::store::facts::{RETRY_ATTEMPTS, RETRY_BASE_MS, RETRY_MAX_MS};
        Retry {
            attempts: RETRY_ATTEMPTS,
            base: Duration::from_millis(RETRY_BASE_MS),
            max: Duration::from_millis(RETRY_MAX_MS),
        }
    }
}

impl Retry {
    /// The pause after the `attempt`-th run: half the exponential step plus
    /// up to half again at random, so racing callers spread out.
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        let step = self
            .base
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
            .min(self.max);
        let jitter = RandomState::new().hash_one((attempt, std::thread::current().id()));
        let half = step / 2;
        let extra = half.as_nanos() as u64;
        half + Duration::from_nanos(if extra == 0 { 0 } else { jitter % extra })
    }

    pub(crate) async fn pause(&self, attempt: u32) {
        tokio::time::sleep(self.delay(attempt)).await;
    }
}

/// Whoever makes the attempts: a session, and what its store calls marked
/// during the current attempt.
pub(crate) trait Attempter {
    /// The session the transaction lives on.
    fn session(&mut self) -> &mut dyn Session;
    /// Forget the marks of the previous attempt.
    fn clear_marks(&mut self);
    /// A store call of this attempt reported a conflict.
    fn conflicted(&self) -> bool;
    /// A store call of this attempt failed where the call could not see it.
    fn take_failure(&mut self) -> Option<String>;
}

/// Run `call` in one transaction per attempt until it may stand. Returns the
/// answer and whether the attempter may be used again (`false` after a
/// trap: an instance in an unknown state).
///
/// `call` MUST be re-runnable: each attempt starts from a rolled-back store.
/// It answers `Err(trap)` when the component trapped.
///
/// Beginning a transaction waits at most `lock_wait` (the kernel's
/// connection wait): a binding whose `begin` waits for another transaction
/// (the memory binding's lock) then answers a conflict — busy — and the
/// call re-runs up to the retry bound, then ends with `storage`, instead of
/// waiting for ever, as it would for a sink body that waits for a call of
/// its own on the same kernel, made from another thread.
pub(crate) async fn attempts<A, T, C, Trap>(
    who: &mut A,
    retry: &Retry,
    lock_wait: Duration,
    ending: Ending,
    mut call: C,
) -> (Result<T, Error>, bool)
where
    A: Attempter + ?Sized,
    C: AsyncFnMut(&mut A) -> Result<Result<T, Error>, Trap>,
    Trap: std::fmt::Display,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        tracing::Span::current().record("attempts", attempt);
        let may_retry = attempt < retry.attempts;
        who.clear_marks();
        let begun = tokio::time::timeout(lock_wait, who.session().begin())
            .await
            .unwrap_or_else(|_| {
                // Busy, as a lock timeout is: re-run, bounded.
                Err(StoreFault::Conflict(format!(
                    "no transaction could begin within {} ms: another transaction of this store held it (a sink body waiting for a call of its own on the same kernel?)",
                    lock_wait.as_millis()
                )))
            });
        match begun {
            Ok(()) => {}
            Err(StoreFault::Conflict(why)) if may_retry => {
                tracing::warn!(attempt, %why, "store busy at begin; re-running the call");
                retry.pause(attempt).await;
                continue;
            }
            // A failed BEGIN opened nothing: no rollback.
            Err(fault) => return (Err(fault.into()), true),
        }
        let out = call(who).await;
        let conflicted = who.conflicted();
        let failure = who.take_failure();
        match out {
            Err(trap) => {
                who.session().rollback().await;
                return (
                    Err(Error::storage(format!("component trapped: {trap:#}"))),
                    false,
                );
            }
            // Whatever the call answered after a conflict is discarded.
            Ok(_) if conflicted && may_retry => {
                who.session().rollback().await;
                tracing::warn!(attempt, "store conflict; re-running the call");
                retry.pause(attempt).await;
            }
            Ok(_) if failure.is_some() || conflicted => {
                who.session().rollback().await;
                let error = match failure {
                    Some(why) => StorageError::new(why),
                    None => StorageError::new(format!(
                        "store conflicts persisted through {attempt} attempts"
                    ))
                    .conflict(),
                };
                return (Err(Error::Storage(error)), true);
            }
            Ok(Ok(value)) if ending == Ending::RollBack => {
                who.session().rollback().await;
                return (Ok(value), true);
            }
            Ok(Ok(value)) => match who.session().commit().await {
                Ok(()) => return (Ok(value), true),
                // A conflict at COMMIT means it did not commit (SQLite
                // busy, PostgreSQL serialization failure): safe to re-run.
                Err(StoreFault::Conflict(why)) if may_retry => {
                    tracing::warn!(attempt, %why, "store conflict at commit; re-running the call");
                    retry.pause(attempt).await;
                }
                // Anything else may have committed: never re-run as if it
                // had not.
                Err(fault) => return (Err(fault.into()), true),
            },
            Ok(Err(refusal)) => {
                who.session().rollback().await;
                return (Err(refusal), true);
            }
        }
    }
}
