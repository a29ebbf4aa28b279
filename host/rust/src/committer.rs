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

impl Committer {
    /// Resume `run_id` from its persisted snapshot, or start it at seq 0.
    /// `fence` is the caller's takeover generation (its task claim's fence).
    pub fn resume(kernel: &Kernel, run_id: &str, fence: Option<u64>) -> Result<Self, Error> {
        let snapshot = match kernel.checkpoint().load(run_id) {
            Ok(mut snap) => {
                snap.fence = fence.or(snap.fence);
                snap
            }
            Err(Error::NotFound) => Snapshot {
                run_id: run_id.to_owned(),
                seq: 0,
                fence,
                status: "running".into(),
                done: Vec::new(),
                fields: Vec::new(),
            },
            Err(e) => return Err(e),
        };
        Ok(Committer {
            kernel: kernel.clone(),
            snapshot,
        })
    }

    /// The last snapshot this committer saved or loaded.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Record `step` finished.
    pub fn step_done(&mut self, step: &str) -> Result<(), Error> {
        let mut next = self.snapshot.clone();
        next.seq += 1;
        if !next.done.iter().any(|d| d == step) {
            next.done.push(step.to_owned());
        }
        self.kernel.checkpoint().save_if_newer(&next)?;
        self.snapshot = next;
        Ok(())
    }
}
