//! The checkpoint Committer: after each finished step, save a snapshot with
//! `done ∪ {step}` and `seq + 1`.
use gak_rules::{Error, Snapshot};

use crate::Kernel;

/// Records a run's progress, one snapshot per finished step.
///
/// `stale-seq` or `fence-stale` from [`Committer::step_done`] means another
/// process owns the run now: the caller MUST stop running it.
#[derive(Debug)]
pub struct Committer {
    kernel: Kernel,
    snapshot: Snapshot,
}

/// The snapshot to continue from: the persisted one under the caller's
/// fence, or a fresh one at seq 0.
pub(crate) fn starting_point(
    loaded: Result<Snapshot, Error>,
    run_id: &str,
    fence: Option<u64>,
) -> Result<Snapshot, Error> {
    match loaded {
        Ok(mut snap) => {
            snap.fence = fence.or(snap.fence);
            Ok(snap)
        }
        Err(Error::NotFound) => Ok(Snapshot {
            run_id: run_id.to_owned(),
            seq: 0,
            fence,
            status: "running".into(),
            done: Vec::new(),
            fields: Vec::new(),
        }),
        Err(e) => Err(e),
    }
}

/// The snapshot after `step`.
pub(crate) fn next(snapshot: &Snapshot, step: &str) -> Snapshot {
    let mut next = snapshot.clone();
    next.seq += 1;
    if !next.done.iter().any(|d| d == step) {
        next.done.push(step.to_owned());
    }
    next
}

impl Committer {
    /// Resume `run_id` from its persisted snapshot, or start it at seq 0.
    /// `fence` is the caller's takeover generation (its task claim's fence).
    ///
    /// # Errors
    /// `invalid-input` or `storage` from loading the snapshot.
    pub async fn resume(kernel: &Kernel, run_id: &str, fence: Option<u64>) -> Result<Self, Error> {
        let loaded = kernel.checkpoint().load(run_id).await;
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
    pub async fn step_done(&mut self, step: &str) -> Result<(), Error> {
        let next = next(&self.snapshot, step);
        self.kernel.checkpoint().save_if_newer(&next).await?;
        self.snapshot = next;
        Ok(())
    }
}
