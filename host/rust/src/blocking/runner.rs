//! The Runner and the Committer for blocking code.
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use gak_rules::{Action, Error, Lease, Snapshot};

use super::Kernel;
use crate::committer::{next, starting_point};
use crate::runner::{BodyError, Heartbeat, Ran, RunError, Start, default_interval, lost, start};

/// Runs effect bodies through the side-effect gate: see [`crate::Runner`].
/// While the body runs, a heartbeat thread renews the hold.
#[derive(Debug, Clone)]
pub struct Runner {
    kernel: Kernel,
    ttl: u64,
    every: Option<Duration>,
}

impl Runner {
    /// A runner granting leases of `ttl` ms, renewed every `ttl / 3` while
    /// the body runs.
    pub fn new(kernel: &Kernel, ttl: u64) -> Self {
        Runner {
            kernel: kernel.clone(),
            ttl,
            every: Some(default_interval(ttl)),
        }
    }

    /// Renew the hold every `every` while the body runs (`None`: never).
    pub fn heartbeat(mut self, every: Option<Duration>) -> Self {
        self.every = every;
        self
    }

    /// acquire → (replayed | uncertain | in-flight | contended: return
    /// without calling `body`) | granted → body → complete; see
    /// [`crate::Runner::run`].
    ///
    /// # Errors
    /// As [`crate::Runner::run`].
    pub fn run<E>(
        &self,
        action: &Action,
        body: impl FnOnce(&Lease) -> Result<Vec<u8>, BodyError<E>>,
    ) -> Result<Ran, RunError<E>> {
        self.run_with_heartbeat(action, |lease, _| body(lease))
    }

    /// [`Runner::run`] with the body watching its [`Heartbeat`].
    ///
    /// # Errors
    /// As [`crate::Runner::run`].
    pub fn run_with_heartbeat<E>(
        &self,
        action: &Action,
        body: impl FnOnce(&Lease, &Heartbeat) -> Result<Vec<u8>, BodyError<E>>,
    ) -> Result<Ran, RunError<E>> {
        let gate = self.kernel.sideeffect();
        let acquired = gate.acquire(action, self.ttl).map_err(RunError::Kernel)?;
        let lease = match start(acquired) {
            Start::Run(lease) => lease,
            Start::Done(ran) => return Ok(ran),
            Start::Failed(e) => return Err(RunError::Kernel(e)),
        };
        let heartbeat = Heartbeat::new(lease.clone());
        let stop = (Mutex::new(false), Condvar::new());
        let outcome = std::thread::scope(|scope| {
            if let Some(every) = self.every {
                let (heartbeat, stop) = (&heartbeat, &stop);
                scope.spawn(move || self.keep_alive(action, heartbeat, every, stop));
            }
            let outcome = body(&lease, &heartbeat);
            *stop.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
            stop.1.notify_all();
            outcome
        });
        let lease = heartbeat.lease();
        match outcome {
            Ok(result) => gate
                .complete(action, &lease, &result)
                .map(Ran::Applied)
                .map_err(RunError::Kernel),
            Err(BodyError::Failed(e)) => {
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

    /// Renew every `every` until the body finishes or a renewal is refused.
    fn keep_alive(
        &self,
        action: &Action,
        heartbeat: &Heartbeat,
        every: Duration,
        stop: &(Mutex<bool>, Condvar),
    ) {
        let mut stopped = stop.0.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let (guard, _) = stop
                .1
                .wait_timeout_while(stopped, every, |s| !*s)
                .unwrap_or_else(|p| p.into_inner());
            stopped = guard;
            if *stopped {
                return;
            }
            match self
                .kernel
                .sideeffect()
                .renew(action, &heartbeat.lease(), self.ttl)
            {
                Ok(lease) => heartbeat.renewed(lease),
                Err(e) if lost(&e) => return heartbeat.lose(e),
                Err(e) => tracing::warn!(key = %action.key, error = %e, "renewal failed; retrying"),
            }
        }
    }
}

/// Records a run's progress, one snapshot per finished step: see
/// [`crate::Committer`].
#[derive(Debug)]
pub struct Committer {
    kernel: Kernel,
    snapshot: Snapshot,
}

impl Committer {
    /// Resume `run_id` from its persisted snapshot, or start it at seq 0.
    ///
    /// # Errors
    /// `invalid-input` or `storage` from loading the snapshot.
    pub fn resume(kernel: &Kernel, run_id: &str, fence: Option<u64>) -> Result<Self, Error> {
        let loaded = kernel.checkpoint().load(run_id);
        Ok(Committer {
            kernel: kernel.clone(),
            snapshot: starting_point(loaded, run_id, fence)?,
        })
    }

    /// The last snapshot this committer saved or loaded.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Record `step` finished.
    ///
    /// # Errors
    /// `stale-seq` / `fence-stale` (another process owns the run: stop),
    /// `terminal`, or `storage`.
    pub fn step_done(&mut self, step: &str) -> Result<(), Error> {
        let next = next(&self.snapshot, step);
        self.kernel.checkpoint().save_if_newer(&next)?;
        self.snapshot = next;
        Ok(())
    }
}
