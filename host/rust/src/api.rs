//! The four contracts as typed Rust calls, one accessor per WIT interface:
//! `kernel.checkpoint()`, `.commitgate()`, `.sideeffect()`, `.taskboard()`.
use gak_rules::{
    Acquired, Action, Error, KeyInfo, KeyPage, KeyState, Lease, Outcome, Plan, Pruned,
    ReconcileClaim, Resolution, Resolved, Snapshot, StepDef, Task, TaskPage, TaskSeed, TaskState,
};

use crate::convert as c;
use crate::engine::retention::Pruned as WitPruned;
use crate::kernel::{Downstream, Ending, Kernel, refusal};

fn pruned_out(p: WitPruned) -> Pruned {
    Pruned {
        removed_keys: p.removed_keys,
        removed_tasks: p.removed_tasks,
        removed_runs: p.removed_runs,
        more: p.more,
    }
}

/// Run one export inside a transaction and map its refusal.
macro_rules! export {
    ($kernel:expr, |$k:ident, $s:ident| $call:expr, $out:expr) => {
        $kernel.transact(|inst| {
            let ($k, $s) = (&inst.kernel, &mut inst.store);
            Ok($call?.map($out).map_err(refusal))
        })
    };
}

/// Checkpoint: snapshots and resume plans (SPEC 3).
#[derive(Debug)]
pub struct Checkpoint<'k>(&'k Kernel);
/// Commitgate: terminal outcomes (SPEC 4).
#[derive(Debug)]
pub struct Commitgate<'k>(&'k Kernel);
/// Side effects: the idempotency gate and fenced sinks (SPEC 5).
#[derive(Debug)]
pub struct Sideeffect<'k>(&'k Kernel);
/// Taskboard: claims by token (SPEC 6).
#[derive(Debug)]
pub struct Taskboard<'k>(&'k Kernel);
/// Retention: bounded pruning of finished records (SPEC 9).
#[derive(Debug)]
pub struct Retention<'k>(&'k Kernel);

impl Kernel {
    /// Checkpoint calls.
    pub fn checkpoint(&self) -> Checkpoint<'_> {
        Checkpoint(self)
    }
    /// Commitgate calls.
    pub fn commitgate(&self) -> Commitgate<'_> {
        Commitgate(self)
    }
    /// Side-effect calls.
    pub fn sideeffect(&self) -> Sideeffect<'_> {
        Sideeffect(self)
    }
    /// Taskboard calls.
    pub fn taskboard(&self) -> Taskboard<'_> {
        Taskboard(self)
    }
    /// Retention calls.
    pub fn retention(&self) -> Retention<'_> {
        Retention(self)
    }
}

impl Retention<'_> {
    /// What [`Retention::prune`] would remove now, without removing it: the
    /// same call in a transaction that is rolled back.
    pub fn prune_dry_run(&self, before: u64, limit: u32) -> Result<Pruned, Error> {
        self.0.transact_as(Ending::RollBack, |inst| {
            let (k, s) = (&inst.kernel, &mut inst.store);
            Ok(k.gak_kernel_retention()
                .call_prune(s, before, limit)?
                .map(pruned_out)
                .map_err(refusal))
        })
    }

    /// Remove at most `limit` (1-1000) records finished before `before`,
    /// oldest first: completed keys, done tasks no not-done task needs, runs
    /// with a terminal outcome. A retry of a pruned key runs its body again;
    /// a pruned run id starts over. See WIT `retention.prune`.
    pub fn prune(&self, before: u64, limit: u32) -> Result<Pruned, Error> {
        export!(
            self.0,
            |k, s| k.gak_kernel_retention().call_prune(s, before, limit),
            pruned_out
        )
    }
}

impl Checkpoint<'_> {
    /// Write `snap` only if it is newer (see WIT `checkpoint.save-if-newer`).
    pub fn save_if_newer(&self, snap: &Snapshot) -> Result<(), Error> {
        let snap = c::snapshot_in(snap);
        export!(
            self.0,
            |k, s| k.gak_kernel_checkpoint().call_save_if_newer(s, &snap),
            |()| ()
        )
    }

    /// The persisted snapshot, or `not-found`.
    pub fn load(&self, run_id: &str) -> Result<Snapshot, Error> {
        export!(
            self.0,
            |k, s| k.gak_kernel_checkpoint().call_load(s, run_id),
            c::snapshot_out
        )
    }

    /// Validate the DAG and plan a resume. Pure: no store transaction.
    pub fn build_plan(&self, steps: &[StepDef], snap: Option<&Snapshot>) -> Result<Plan, Error> {
        let steps: Vec<_> = steps.iter().map(c::step_in).collect();
        let snap = snap.map(c::snapshot_in);
        self.0.pure(|inst| {
            let plan = inst.kernel.gak_kernel_checkpoint().call_build_plan(
                &mut inst.store,
                &steps,
                snap.as_ref(),
            )?;
            Ok(plan.map(c::plan_out).map_err(refusal))
        })
    }
}

impl Commitgate<'_> {
    /// Commit the terminal outcome of `(run_id, step)`; `None` is the run.
    pub fn commit(
        &self,
        run_id: &str,
        step: Option<&str>,
        fence: u64,
        outcome: &Outcome,
    ) -> Result<Outcome, Error> {
        let outcome = c::outcome_in(outcome);
        export!(
            self.0,
            |k, s| k
                .gak_kernel_commitgate()
                .call_commit(s, run_id, step, fence, &outcome),
            c::outcome_out
        )
    }

    /// The recorded outcome, or `not-found`.
    pub fn read(&self, run_id: &str, step: Option<&str>) -> Result<Outcome, Error> {
        export!(
            self.0,
            |k, s| k.gak_kernel_commitgate().call_read(s, run_id, step),
            c::outcome_out
        )
    }
}

impl Sideeffect<'_> {
    /// The single atomic decision for `action`.
    pub fn acquire(&self, action: &Action, ttl: u64) -> Result<Acquired, Error> {
        let a = c::action_in(action);
        export!(
            self.0,
            |k, s| k.gak_kernel_sideeffect().call_acquire(s, &a, ttl),
            c::acquired_out
        )
    }

    /// Record the key completed; returns the first recorded result.
    pub fn complete(
        &self,
        action: &Action,
        lease: &Lease,
        result: &[u8],
    ) -> Result<Vec<u8>, Error> {
        let (a, l) = (c::action_in(action), c::lease_in(lease));
        export!(
            self.0,
            |k, s| k.gak_kernel_sideeffect().call_complete(s, &a, &l, result),
            |r| r
        )
    }

    /// Release the resource hold; the key's intent stays.
    pub fn release(&self, action: &Action, lease: &Lease) -> Result<(), Error> {
        let (a, l) = (c::action_in(action), c::lease_in(lease));
        export!(
            self.0,
            |k, s| k.gak_kernel_sideeffect().call_release(s, &a, &l),
            |()| ()
        )
    }

    /// The attempt definitely did not apply.
    pub fn abandon(&self, action: &Action, lease: &Lease, reason: &str) -> Result<(), Error> {
        let (a, l) = (c::action_in(action), c::lease_in(lease));
        export!(
            self.0,
            |k, s| k.gak_kernel_sideeffect().call_abandon(s, &a, &l, reason),
            |()| ()
        )
    }

    /// Qualification check and extension.
    pub fn renew(&self, action: &Action, lease: &Lease, ttl: u64) -> Result<Lease, Error> {
        let (a, l) = (c::action_in(action), c::lease_in(lease));
        export!(
            self.0,
            |k, s| k.gak_kernel_sideeffect().call_renew(s, &a, &l, ttl),
            c::lease_out
        )
    }

    /// Mark the key uncertain (the hold stays: call `release`).
    pub fn mark_uncertain(
        &self,
        action: &Action,
        lease: &Lease,
        reason: &str,
    ) -> Result<(), Error> {
        let (a, l) = (c::action_in(action), c::lease_in(lease));
        export!(
            self.0,
            |k, s| k
                .gak_kernel_sideeffect()
                .call_mark_uncertain(s, &a, &l, reason),
            |()| ()
        )
    }

    /// Claim the right to reconcile an uncertain key.
    pub fn begin_reconcile(&self, action: &Action, ttl: u64) -> Result<ReconcileClaim, Error> {
        let a = c::action_in(action);
        export!(
            self.0,
            |k, s| k.gak_kernel_sideeffect().call_begin_reconcile(s, &a, ttl),
            |x| {
                ReconcileClaim {
                    claim: x.claim,
                    until: x.until,
                }
            }
        )
    }

    /// Record a reconciler's verdict.
    pub fn resolve_uncertain(
        &self,
        action: &Action,
        resolution: &Resolution,
    ) -> Result<Resolved, Error> {
        let (a, r) = (c::action_in(action), c::resolution_in(resolution));
        export!(
            self.0,
            |k, s| k.gak_kernel_sideeffect().call_resolve_uncertain(s, &a, &r),
            c::resolved_out
        )
    }

    /// A fenced downstream write: `body` runs in the same transaction as the
    /// fence compare. `presented` below the highest fence the sink has seen
    /// is `fence-stale` and `body` does not run; a failing body rolls
    /// everything back (seen fence included) and its error comes back as
    /// [`SinkError::Body`]. `body` may run more than once if the store
    /// reports a conflict; only the last run's writes can commit.
    pub fn write_fenced<E>(
        &self,
        resource: &str,
        presented: u64,
        mut body: impl FnMut(&mut Downstream<'_>) -> Result<(), E>,
    ) -> Result<(), SinkError<E>> {
        let mut failure = None;
        let result = self.0.transact(|inst| {
            failure = None;
            let compare = inst.kernel.gak_kernel_sideeffect().call_sink_advance(
                &mut inst.store,
                resource,
                presented,
            )?;
            if let Err(e) = compare {
                return Ok(Err(refusal(e)));
            }
            match Downstream::run(inst.store.data_mut(), &mut body) {
                Ok(()) => Ok(Ok(())),
                Err(e) => {
                    failure = Some(e);
                    Ok(Err(Error::WriteFailed))
                }
            }
        });
        match (result, failure) {
            (Err(Error::WriteFailed), Some(e)) => Err(SinkError::Body(e)),
            (r, _) => r.map_err(SinkError::Kernel),
        }
    }

    /// The highest fence the sink has seen (0 when never written).
    pub fn sink_seen(&self, resource: &str) -> Result<u64, Error> {
        export!(
            self.0,
            |k, s| k.gak_kernel_sideeffect().call_sink_seen(s, resource),
            |x| x
        )
    }

    /// One page of keys ordered by key, optionally of one state (an expired
    /// intent lists as `uncertain`), after the cursor `after`, at most
    /// `limit` (1-1000). Never a holder or reconcile claim.
    pub fn list(
        &self,
        state: Option<KeyState>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<KeyPage, Error> {
        let state = state.map(c::key_state_in);
        export!(
            self.0,
            |k, s| k.gak_kernel_sideeffect().call_list(s, state, after, limit),
            c::key_page_out
        )
    }

    /// The key as `list` shows it, or `not-found`.
    pub fn get(&self, key: &str) -> Result<KeyInfo, Error> {
        export!(
            self.0,
            |k, s| k.gak_kernel_sideeffect().call_get(s, key),
            c::key_info_out
        )
    }
}

/// Why a fenced write did not land.
#[derive(Debug)]
pub enum SinkError<E> {
    /// The kernel refused (`fence-stale`, `invalid-input`, `storage`).
    Kernel(Error),
    /// The body failed (`write-failed`): nothing was written.
    Body(E),
}

impl<E> SinkError<E> {
    /// The contract's variant: `write-failed` for a body failure.
    pub fn contract_error(&self) -> Error {
        match self {
            SinkError::Kernel(e) => e.clone(),
            SinkError::Body(_) => Error::WriteFailed,
        }
    }
}

impl Taskboard<'_> {
    /// Load topology.
    pub fn seed(&self, tasks: &[TaskSeed]) -> Result<(), Error> {
        let tasks: Vec<_> = tasks.iter().map(c::seed_in).collect();
        export!(
            self.0,
            |k, s| k.gak_kernel_taskboard().call_seed(s, &tasks),
            |()| ()
        )
    }

    /// One page of the board ordered by id, optionally of one state, after
    /// the cursor `after`, at most `limit` (1-1000), without tokens.
    pub fn list(
        &self,
        state: Option<TaskState>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<TaskPage, Error> {
        let state = state.map(c::state_in);
        export!(
            self.0,
            |k, s| k.gak_kernel_taskboard().call_list(s, state, after, limit),
            c::task_page_out
        )
    }

    /// The task without its token, or `not-found`.
    pub fn get(&self, id: &str) -> Result<Task, Error> {
        export!(
            self.0,
            |k, s| k.gak_kernel_taskboard().call_get(s, id),
            c::task_out
        )
    }

    /// Claim the first-seeded ready task for `agent`; none when no task is
    /// ready. Same effects and answer as `claim` on that task.
    pub fn claim_next(&self, agent: &str, ttl: u64) -> Result<Option<Task>, Error> {
        export!(
            self.0,
            |k, s| k.gak_kernel_taskboard().call_claim_next(s, agent, ttl),
            |t| t.map(c::task_out)
        )
    }

    /// Claim a task; the returned task carries the token.
    pub fn claim(&self, id: &str, agent: &str, ttl: u64) -> Result<Task, Error> {
        export!(
            self.0,
            |k, s| k.gak_kernel_taskboard().call_claim(s, id, agent, ttl),
            c::task_out
        )
    }

    /// Return a claimed task to open.
    pub fn release(&self, id: &str, token: &str) -> Result<(), Error> {
        export!(
            self.0,
            |k, s| k.gak_kernel_taskboard().call_release(s, id, token),
            |()| ()
        )
    }

    /// Mark a claimed task done.
    pub fn complete(&self, id: &str, token: &str) -> Result<(), Error> {
        export!(
            self.0,
            |k, s| k.gak_kernel_taskboard().call_complete(s, id, token),
            |()| ()
        )
    }

    /// Extend a live claim.
    pub fn renew(&self, id: &str, token: &str, ttl: u64) -> Result<Task, Error> {
        export!(
            self.0,
            |k, s| k.gak_kernel_taskboard().call_renew(s, id, token, ttl),
            c::task_out
        )
    }
}
