//! The side-effect Runner: the body of an effect runs at most once per
//! idempotency key, whatever crashes in between.
//!
//! Exactly-once at a remote system needs the remote to deduplicate too: pass
//! `lease.key` (the idempotency key) to the remote API — e.g. as an
//! `Idempotency-Key` header — and `lease.fence` to any store that can
//! compare it. That wiring is the embedder's; the kernel guarantees the
//! local half: it never *starts* the body twice for one key.
use gak_rules::{Acquired, Action, Error, Lease};

use crate::Kernel;

/// Why a body did not finish.
#[derive(Debug)]
pub enum BodyError<E> {
    /// It failed in a way that may or may not have applied the effect
    /// (timeout, connection reset after sending). The key becomes
    /// `uncertain` and must be reconciled.
    Failed(E),
    /// It definitely did not apply the effect (refused before sending). The
    /// key is abandoned and may be granted again.
    NotApplied(E),
}

/// What a run ended with, when nothing failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ran {
    /// The body ran now and its result was recorded.
    Applied(Vec<u8>),
    /// The key completed before: the first result; the body was not called.
    Replayed(Vec<u8>),
    /// The key may have been applied: reconcile before anything else.
    Uncertain(String),
    /// Another attempt of the key is live.
    InFlight,
    /// Another key holds the resource until this time.
    Contended(u64),
}

/// Why a run failed.
#[derive(Debug)]
pub enum RunError<E> {
    /// The kernel refused or the store failed. If this happened after the
    /// body ran (recording the result failed), the intent stays and the key
    /// surfaces as uncertain once it expires: never as a second grant.
    Kernel(Error),
    /// The body failed; the key is now uncertain (or, if even marking it
    /// failed, its intent stays and it turns uncertain on expiry).
    Uncertain(E),
    /// The body reported it did not apply; the key was abandoned.
    NotApplied(E),
}

/// Runs effect bodies through the side-effect gate.
#[derive(Debug, Clone)]
pub struct Runner {
    kernel: Kernel,
    ttl: u64,
}

impl Runner {
    /// A runner granting leases of `ttl` ms: longer than the body can take.
    pub fn new(kernel: &Kernel, ttl: u64) -> Self {
        Runner {
            kernel: kernel.clone(),
            ttl,
        }
    }

    /// acquire → (replayed | uncertain | in-flight | contended: return
    /// without calling `body`) | granted → body → complete.
    pub fn run<E>(
        &self,
        action: &Action,
        body: impl FnOnce(&Lease) -> Result<Vec<u8>, BodyError<E>>,
    ) -> Result<Ran, RunError<E>> {
        let gate = self.kernel.sideeffect();
        let lease = match gate.acquire(action, self.ttl).map_err(RunError::Kernel)? {
            Acquired::Granted(lease) => lease,
            Acquired::Replayed(result) => return Ok(Ran::Replayed(result)),
            Acquired::Uncertain(reason) => return Ok(Ran::Uncertain(reason)),
            Acquired::InFlight => return Ok(Ran::InFlight),
            Acquired::Contended(until) => return Ok(Ran::Contended(until)),
        };
        match body(&lease) {
            Ok(result) => gate
                .complete(action, &lease, &result)
                .map(Ran::Applied)
                .map_err(RunError::Kernel),
            Err(BodyError::Failed(e)) => {
                // Best effort: if either call fails, the intent is still
                // there and the key turns uncertain when it expires.
                let _ = gate.mark_uncertain(action, &lease, "body failed");
                let _ = gate.release(action, &lease);
                Err(RunError::Uncertain(e))
            }
            Err(BodyError::NotApplied(e)) => {
                let _ = gate.abandon(action, &lease, "body reported not applied");
                Err(RunError::NotApplied(e))
            }
        }
    }
}
