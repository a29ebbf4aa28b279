//! The five contracts as typed async Rust calls, one accessor per WIT
//! interface: `kernel.checkpoint()`, `.commitgate()`, `.sideeffect()`,
//! `.taskboard()`, `.retention()`. Each call is one transaction; the WIT
//! files (`wit/*.wit`) hold the normative text each method summarises.
use gak_rules::{
    Acquired, Action, Completion, CompletionResult, Error, GroupInfo, GroupPage, KeyCounts,
    KeyInfo, KeyPage, KeyState, Lease, Outcome, Plan, Pruned, ReconcileClaim, Resolution, Resolved,
    Snapshot, StepDef, Task, TaskCounts, TaskPage, TaskSeed, TaskState,
};

use std::sync::{Arc, Mutex};

use crate::convert as c;
use crate::downstream::Downstream;
use crate::engine::Instance;
use crate::kernel::{CallInfo, Kernel};
use crate::protocol::Ending;

/// Run one export inside a transaction and map its refusal. The listed
/// borrowed arguments are copied first: the call may run on another thread
/// (SQLite from async code) and may be re-run on a store conflict.
macro_rules! export {
    ($kernel:expr, $info:expr, [$($owned:ident),*], |$k:ident, $s:ident| $call:expr, $out:expr) => {{
        $(let $owned = $owned.to_owned();)*
        $kernel
            .transact($info, Ending::Commit, async move |inst: &mut Instance| {
                let ($k, $s) = (&inst.kernel, &mut inst.store);
                Ok($call.await?.map($out).map_err(c::error_out))
            })
            .await
    }};
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
/// Taskboard: claims by token (SPEC 6, 9).
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

impl Checkpoint<'_> {
    /// Write `snap` only if it is newer: the run is not terminal, its fence
    /// is not below the persisted one, and its seq is strictly above.
    ///
    /// # Errors
    /// `invalid-input`, `terminal`, `fence-stale`, `stale-seq` (checked in
    /// that order; nothing written), or `storage`.
    pub async fn save_if_newer(&self, snap: &Snapshot) -> Result<(), Error> {
        crate::limits::fits(&[snap])?;
        let snap_in = c::snapshot_in(snap);
        let info = CallInfo::new("checkpoint.save-if-newer", Some(&snap.run_id));
        export!(
            self.0,
            info,
            [],
            |k, s| k.gak_kernel_checkpoint().call_save_if_newer(s, &snap_in),
            |()| ()
        )
    }

    /// The persisted snapshot of `run_id`.
    ///
    /// # Errors
    /// `not-found` when the run never saved one (never an empty snapshot),
    /// `invalid-input`, or `storage`.
    pub async fn load(&self, run_id: &str) -> Result<Snapshot, Error> {
        crate::limits::fits(&[&run_id])?;
        let info = CallInfo::new("checkpoint.load", Some(run_id));
        export!(
            self.0,
            info,
            [run_id],
            |k, s| k.gak_kernel_checkpoint().call_load(s, &run_id),
            c::snapshot_out
        )
    }

    /// Validate the step DAG and plan a resume from `snap`: only the trusted
    /// completion set is skipped. Pure: no store transaction.
    ///
    /// # Errors
    /// `invalid-plan` naming the first culprit (duplicate id, unknown
    /// dependency, cycle), `invalid-input`, or `storage`.
    pub async fn build_plan(
        &self,
        steps: &[StepDef],
        snap: Option<&Snapshot>,
    ) -> Result<Plan, Error> {
        crate::limits::plan_fits(steps, snap)?;
        let steps: Vec<_> = steps.iter().map(c::step_def_in).collect();
        let snap = snap.map(c::snapshot_in);
        self.0
            .pure(async |inst: &mut Instance| {
                let plan = inst
                    .kernel
                    .gak_kernel_checkpoint()
                    .call_build_plan(&mut inst.store, &steps, snap.as_ref())
                    .await?;
                Ok(plan.map(c::plan_out).map_err(c::error_out))
            })
            .await
    }
}

impl Commitgate<'_> {
    /// Commit the terminal outcome of `(run_id, step)`; `None` is the whole
    /// run. The first accepted outcome wins and is returned again for an
    /// identical re-commit.
    ///
    /// # Errors
    /// `fence-stale` (a zombie owner), `terminal` (a step after the run's
    /// commit), `already-committed` (a different outcome), `invalid-input`,
    /// or `storage`.
    pub async fn commit(
        &self,
        run_id: &str,
        step: Option<&str>,
        fence: u64,
        outcome: &Outcome,
    ) -> Result<Outcome, Error> {
        crate::limits::fits(&[&run_id, &step, outcome])?;
        let outcome = c::outcome_in(outcome);
        let step = step.map(str::to_owned);
        let info = CallInfo::new("commitgate.commit", Some(run_id)).fence(fence);
        export!(
            self.0,
            info,
            [run_id],
            |k, s| k.gak_kernel_commitgate().call_commit(
                s,
                &run_id,
                step.as_deref(),
                fence,
                &outcome
            ),
            c::outcome_out
        )
    }

    /// The recorded outcome of `(run_id, step)`.
    ///
    /// # Errors
    /// `not-found`, `invalid-input`, or `storage`.
    pub async fn read(&self, run_id: &str, step: Option<&str>) -> Result<Outcome, Error> {
        crate::limits::fits(&[&run_id, &step])?;
        let step = step.map(str::to_owned);
        let info = CallInfo::new("commitgate.read", Some(run_id));
        export!(
            self.0,
            info,
            [run_id],
            |k, s| k
                .gak_kernel_commitgate()
                .call_read(s, &run_id, step.as_deref()),
            c::outcome_out
        )
    }
}

impl Sideeffect<'_> {
    /// The single atomic decision for `action`: `key-reused`, then replayed,
    /// uncertain, in-flight, contended, granted (a lease valid for `ttl` ms).
    ///
    /// # Errors
    /// `key-reused`, `invalid-input`, or `storage`.
    pub async fn acquire(&self, action: &Action, ttl: u64) -> Result<Acquired, Error> {
        crate::limits::fits(&[action])?;
        let a = c::action_in(action);
        let info = CallInfo::new("sideeffect.acquire", Some(&action.key));
        export!(
            self.0,
            info,
            [],
            |k, s| k.gak_kernel_sideeffect().call_acquire(s, &a, ttl),
            c::acquired_out
        )
    }

    /// Record the key completed with `result`; returns the first recorded
    /// result (completing a completed key is not an error).
    ///
    /// # Errors
    /// The triple check (`resource-mismatch`, `fence-stale`, `not-holder`),
    /// `invalid-input`, or `storage`.
    pub async fn complete(
        &self,
        action: &Action,
        lease: &Lease,
        result: &[u8],
    ) -> Result<Vec<u8>, Error> {
        crate::limits::fits(&[action, lease, &result])?;
        let (a, l) = (c::action_in(action), c::lease_in(lease));
        let info = CallInfo::new("sideeffect.complete", Some(&action.key)).fence(lease.fence);
        export!(
            self.0,
            info,
            [result],
            |k, s| k.gak_kernel_sideeffect().call_complete(s, &a, &l, &result),
            |r| r
        )
    }

    /// Release the resource hold only; the key's intent stays, so an effect
    /// applied by a holder that then died can never be granted again.
    ///
    /// # Errors
    /// The triple check, `invalid-input`, or `storage`.
    pub async fn release(&self, action: &Action, lease: &Lease) -> Result<(), Error> {
        crate::limits::fits(&[action, lease])?;
        let (a, l) = (c::action_in(action), c::lease_in(lease));
        let info = CallInfo::new("sideeffect.release", Some(&action.key)).fence(lease.fence);
        export!(
            self.0,
            info,
            [],
            |k, s| k.gak_kernel_sideeffect().call_release(s, &a, &l),
            |()| ()
        )
    }

    /// The attempt definitely did not apply: withdraw the intent and the
    /// hold; the key may be granted again.
    ///
    /// # Errors
    /// The triple check, `not-holder` for an attempt that is over,
    /// `invalid-input`, or `storage`.
    pub async fn abandon(&self, action: &Action, lease: &Lease, reason: &str) -> Result<(), Error> {
        crate::limits::fits(&[action, lease, &reason])?;
        let (a, l) = (c::action_in(action), c::lease_in(lease));
        let info = CallInfo::new("sideeffect.abandon", Some(&action.key)).fence(lease.fence);
        export!(
            self.0,
            info,
            [reason],
            |k, s| k.gak_kernel_sideeffect().call_abandon(s, &a, &l, &reason),
            |()| ()
        )
    }

    /// A qualification check, not a heartbeat: extend hold and intent to
    /// `now + ttl` only if the lease is still the live holder's.
    ///
    /// # Errors
    /// The triple check, `not-holder` (attempt over), `lease-expired`,
    /// `invalid-input`, or `storage`.
    pub async fn renew(&self, action: &Action, lease: &Lease, ttl: u64) -> Result<Lease, Error> {
        crate::limits::fits(&[action, lease])?;
        let (a, l) = (c::action_in(action), c::lease_in(lease));
        let info = CallInfo::new("sideeffect.renew", Some(&action.key)).fence(lease.fence);
        export!(
            self.0,
            info,
            [],
            |k, s| k.gak_kernel_sideeffect().call_renew(s, &a, &l, ttl),
            c::lease_out
        )
    }

    /// Mark the key uncertain, withdrawing the intent; the hold stays (call
    /// [`Sideeffect::release`]).
    ///
    /// # Errors
    /// The triple check, `not-holder` (attempt over), `invalid-input`, or
    /// `storage`.
    pub async fn mark_uncertain(
        &self,
        action: &Action,
        lease: &Lease,
        reason: &str,
    ) -> Result<(), Error> {
        crate::limits::fits(&[action, lease, &reason])?;
        let (a, l) = (c::action_in(action), c::lease_in(lease));
        let info = CallInfo::new("sideeffect.mark-uncertain", Some(&action.key)).fence(lease.fence);
        export!(
            self.0,
            info,
            [reason],
            |k, s| k
                .gak_kernel_sideeffect()
                .call_mark_uncertain(s, &a, &l, &reason),
            |()| ()
        )
    }

    /// Claim the right to reconcile an uncertain key for `ttl` ms.
    ///
    /// # Errors
    /// `not-uncertain`, `reconcile-taken` (a live claim exists),
    /// `invalid-input`, or `storage`.
    pub async fn begin_reconcile(
        &self,
        action: &Action,
        ttl: u64,
    ) -> Result<ReconcileClaim, Error> {
        crate::limits::fits(&[action])?;
        let a = c::action_in(action);
        let info = CallInfo::new("sideeffect.begin-reconcile", Some(&action.key));
        export!(
            self.0,
            info,
            [],
            |k, s| k.gak_kernel_sideeffect().call_begin_reconcile(s, &a, ttl),
            c::reconcile_claim_out
        )
    }

    /// Record a reconciler's verdict from downstream facts; the first
    /// verdict wins.
    ///
    /// # Errors
    /// `not-uncertain`, `reconcile-taken` (a claim that is not the key's),
    /// `unsafe-not-retryable`, `invalid-input`, or `storage`.
    pub async fn resolve_uncertain(
        &self,
        action: &Action,
        resolution: &Resolution,
    ) -> Result<Resolved, Error> {
        crate::limits::fits(&[action, resolution])?;
        let (a, r) = (c::action_in(action), c::resolution_in(resolution));
        let info = CallInfo::new("sideeffect.resolve-uncertain", Some(&action.key));
        export!(
            self.0,
            info,
            [],
            |k, s| k.gak_kernel_sideeffect().call_resolve_uncertain(s, &a, &r),
            c::resolved_out
        )
    }

    /// A fenced downstream write: `body` runs in the same transaction as
    /// the fence compare. `presented` below the highest fence the sink has
    /// seen is `fence-stale` and `body` does not run; a failing body rolls
    /// everything back (seen fence included) and its error comes back as
    /// [`SinkError::Body`]. `body` may run more than once if the store
    /// reports a conflict; only the last run's writes can commit.
    ///
    /// # Errors
    /// [`SinkError::Kernel`] (`fence-stale`, `invalid-input`, `storage`) or
    /// [`SinkError::Body`].
    pub async fn write_fenced<E, B>(
        &self,
        resource: &str,
        presented: u64,
        body: B,
    ) -> Result<(), SinkError<E>>
    where
        E: Send + 'static,
        B: AsyncFnMut(&mut Downstream<'_>) -> Result<(), E> + Send + 'static,
    {
        crate::limits::fits(&[&resource]).map_err(SinkError::Kernel)?;
        let failure = Arc::new(Mutex::new(None));
        let call = fenced_call!(resource.to_owned(), presented, body, failure.clone());
        let info = CallInfo::new("sideeffect.write-fenced", Some(resource)).fence(presented);
        let result = self.0.transact(info, Ending::Commit, call).await;
        sink_outcome(result, &failure)
    }

    /// The highest fence the sink has seen (0 when never written).
    ///
    /// # Errors
    /// `invalid-input` or `storage`.
    pub async fn sink_seen(&self, resource: &str) -> Result<u64, Error> {
        crate::limits::fits(&[&resource])?;
        let info = CallInfo::new("sideeffect.sink-seen", Some(resource));
        export!(
            self.0,
            info,
            [resource],
            |k, s| k.gak_kernel_sideeffect().call_sink_seen(s, &resource),
            |x| x
        )
    }

    /// One page of keys ordered by key, optionally of one state (an expired
    /// intent lists as `uncertain`), after the cursor `after`, at most
    /// `limit` (1-1000). Never a holder or reconcile claim.
    ///
    /// # Errors
    /// `invalid-input` (limit, cursor) or `storage`.
    pub async fn list(
        &self,
        state: Option<KeyState>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<KeyPage, Error> {
        crate::limits::fits(&[&after])?;
        let state = state.map(c::key_state_in);
        let after = after.map(str::to_owned);
        let info = CallInfo::new("sideeffect.list", None);
        export!(
            self.0,
            info,
            [],
            |k, s| k
                .gak_kernel_sideeffect()
                .call_list(s, state, after.as_deref(), limit),
            c::key_page_out
        )
    }

    /// The key as [`Sideeffect::list`] shows it.
    ///
    /// # Errors
    /// `not-found`, `invalid-input`, or `storage`.
    pub async fn get(&self, key: &str) -> Result<KeyInfo, Error> {
        crate::limits::fits(&[&key])?;
        let info = CallInfo::new("sideeffect.get", Some(key));
        export!(
            self.0,
            info,
            [key],
            |k, s| k.gak_kernel_sideeffect().call_get(s, &key),
            c::key_info_out
        )
    }

    /// How many keys are in each state as [`Sideeffect::list`] shows them
    /// (an expired intent is `uncertain`), and since when the oldest
    /// uncertain key is, from 256 count records and an index of keys by the
    /// time they turn uncertain, never the keys; `exact` is false on a
    /// store a format-1 kernel wrote until [`Sideeffect::recount`] has
    /// visited its keys.
    ///
    /// # Errors
    /// `storage`.
    pub async fn count(&self) -> Result<KeyCounts, Error> {
        let info = CallInfo::new("sideeffect.count", None);
        export!(
            self.0,
            info,
            [],
            |k, s| k.gak_kernel_sideeffect().call_count(s),
            c::key_counts_out
        )
    }

    /// Count up to `limit` (1-1000) of the keys a format-1 kernel wrote
    /// that [`Sideeffect::count`] does not cover yet; answers whether every
    /// key is counted now.
    ///
    /// # Errors
    /// `invalid-input` (a bad limit) or `storage`.
    pub async fn recount(&self, limit: u32) -> Result<bool, Error> {
        let info = CallInfo::new("sideeffect.recount", None);
        export!(
            self.0,
            info,
            [],
            |k, s| k.gak_kernel_sideeffect().call_recount(s, limit),
            |done| done
        )
    }
}

/// The call of a fenced write: the component's fence compare, then `body`
/// in the same transaction; a body error is kept in `failure` and fails the
/// call with `write-failed` (rolling everything back). A macro, not a
/// function returning `impl AsyncFnMut`: an opaque closure would hide
/// whether its future is `Send`, and async callers spawn these calls.
macro_rules! fenced_call {
    ($resource:expr, $presented:expr, $body:expr, $failure:expr) => {{
        let (resource, presented, mut body, failure) = ($resource, $presented, $body, $failure);
        async move |inst: &mut crate::engine::Instance| {
            let compare = inst
                .kernel
                .gak_kernel_sideeffect()
                .call_sink_advance(&mut inst.store, &resource, presented)
                .await?;
            if let Err(e) = compare {
                return Ok(Err(crate::convert::error_out(e)));
            }
            let outcome = crate::Downstream::run(inst.store.data_mut(), &mut body).await;
            let mut slot = failure.lock().unwrap_or_else(|p| p.into_inner());
            *slot = None;
            Ok(match outcome {
                Ok(()) => Ok(()),
                Err(e) => {
                    *slot = Some(e);
                    Err(gak_rules::Error::WriteFailed)
                }
            })
        }
    }};
}
pub(crate) use fenced_call;

/// A fenced write's answer: the body's own error when it failed.
pub(crate) fn sink_outcome<E>(
    result: Result<(), Error>,
    failure: &Mutex<Option<E>>,
) -> Result<(), SinkError<E>> {
    let body_error = failure.lock().unwrap_or_else(|p| p.into_inner()).take();
    match (result, body_error) {
        (Err(Error::WriteFailed), Some(e)) => Err(SinkError::Body(e)),
        (r, _) => r.map_err(SinkError::Kernel),
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

impl<E: std::fmt::Display> std::fmt::Display for SinkError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SinkError::Kernel(e) => write!(f, "the fenced write was refused: {e}"),
            SinkError::Body(e) => write!(f, "write-failed: the sink body failed: {e}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for SinkError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SinkError::Kernel(e) => Some(e),
            SinkError::Body(e) => Some(e),
        }
    }
}

impl Taskboard<'_> {
    /// Load topology. Re-seeding an id overwrites its content and clears its
    /// lease but keeps its fence and its place in the claim order.
    ///
    /// # Errors
    /// `invalid-input` (nothing written: duplicate ids, `claimed` state,
    /// bad ids), or `storage`.
    pub async fn seed(&self, tasks: &[TaskSeed]) -> Result<(), Error> {
        crate::limits::fits(&[&tasks])?;
        let tasks: Vec<_> = tasks.iter().map(c::task_seed_in).collect();
        let info = CallInfo::new("taskboard.seed", None);
        export!(
            self.0,
            info,
            [],
            |k, s| k.gak_kernel_taskboard().call_seed(s, &tasks),
            |()| ()
        )
    }

    /// One page of the board ordered by id, optionally of one state, after
    /// the cursor `after`, at most `limit` (1-1000), without tokens.
    ///
    /// # Errors
    /// `invalid-input` (limit, cursor) or `storage`.
    pub async fn list(
        &self,
        state: Option<TaskState>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<TaskPage, Error> {
        crate::limits::fits(&[&after])?;
        let state = state.map(c::state_in);
        let after = after.map(str::to_owned);
        let info = CallInfo::new("taskboard.list", None);
        export!(
            self.0,
            info,
            [],
            |k, s| k
                .gak_kernel_taskboard()
                .call_list(s, state, after.as_deref(), limit),
            c::task_page_out
        )
    }

    /// The task without its token.
    ///
    /// # Errors
    /// `not-found`, `invalid-input`, or `storage`.
    pub async fn get(&self, id: &str) -> Result<Task, Error> {
        crate::limits::fits(&[&id])?;
        let info = CallInfo::new("taskboard.get", Some(id));
        export!(
            self.0,
            info,
            [id],
            |k, s| k.gak_kernel_taskboard().call_get(s, &id),
            c::task_out
        )
    }

    /// Claim `id` for `agent` for `ttl` ms; the returned task carries the
    /// token (only the caller ever sees it). Of N concurrent claimers
    /// exactly one wins; an expired claim is taken over with a higher fence.
    ///
    /// # Errors
    /// `not-found`, `terminal`, `deps-pending`, `taken` (in that order),
    /// `invalid-input`, or `storage`.
    pub async fn claim(&self, id: &str, agent: &str, ttl: u64) -> Result<Task, Error> {
        crate::limits::fits(&[&id, &agent])?;
        let info = CallInfo::new("taskboard.claim", Some(id));
        export!(
            self.0,
            info,
            [id, agent],
            |k, s| k.gak_kernel_taskboard().call_claim(s, &id, &agent, ttl),
            c::task_out
        )
    }

    /// Claim the first ready task in claim order (priority, then seed
    /// order) for `agent`; `None` when no task is free. Same effects and
    /// answer as [`Taskboard::claim`] on it: [`Taskboard::claim_batch`] with
    /// limit 1.
    ///
    /// # Errors
    /// `invalid-input` or `storage`.
    pub async fn claim_next(&self, agent: &str, ttl: u64) -> Result<Option<Task>, Error> {
        crate::limits::fits(&[&agent])?;
        let info = CallInfo::new("taskboard.claim-next", None);
        export!(
            self.0,
            info,
            [agent],
            |k, s| k.gak_kernel_taskboard().call_claim_next(s, &agent, ttl),
            |t| t.map(c::task_out)
        )
    }

    /// Claim up to `limit` (1-1000) ready tasks in one transaction, in
    /// claim order, each with its own token; empty when none is free (SPEC
    /// 10). Tasks met with their attempts used up turn dead on the way.
    ///
    /// # Errors
    /// `invalid-input` or `storage`.
    pub async fn claim_batch(&self, agent: &str, ttl: u64, limit: u32) -> Result<Vec<Task>, Error> {
        crate::limits::fits(&[&agent])?;
        let info = CallInfo::new("taskboard.claim-batch", None);
        export!(
            self.0,
            info,
            [agent],
            |k, s| k
                .gak_kernel_taskboard()
                .call_claim_batch(s, &agent, ttl, limit),
            |ts: Vec<_>| ts.into_iter().map(c::task_out).collect()
        )
    }

    /// Complete many claims in one transaction; each item answers, in order,
    /// what [`Taskboard::complete`] would have answered for it alone.
    ///
    /// # Errors
    /// `invalid-input` (1-1000 items with distinct ids; nothing written), or
    /// `storage`.
    pub async fn complete_batch(
        &self,
        items: &[Completion],
    ) -> Result<Vec<CompletionResult>, Error> {
        crate::limits::fits(&[&items])?;
        let wire: Vec<_> = items.iter().map(c::completion_in).collect();
        let info = CallInfo::new("taskboard.complete-batch", None);
        export!(
            self.0,
            info,
            [],
            |k, s| k.gak_kernel_taskboard().call_complete_batch(s, &wire),
            |rs: Vec<_>| rs.into_iter().map(c::completion_result_out).collect()
        )
    }

    /// The handler failed: record `reason`, clear the lease; the task is
    /// due again `retry_after` ms from now (none: at once), or turns dead
    /// when its attempts are used up. Idempotent for the token that failed it.
    ///
    /// # Errors
    /// `lease-lost`, `not-found`, `invalid-input`, or `storage`.
    pub async fn fail(
        &self,
        id: &str,
        token: &str,
        reason: &str,
        retry_after: Option<u64>,
    ) -> Result<Task, Error> {
        crate::limits::fits(&[&id, &token, &reason])?;
        let info = CallInfo::new("taskboard.fail", Some(id));
        export!(
            self.0,
            info,
            [id, token, reason],
            |k, s| k
                .gak_kernel_taskboard()
                .call_fail(s, &id, &token, &reason, retry_after),
            c::task_out
        )
    }

    /// Bring a dead task back (open, attempts 0, last error and delay
    /// cleared, fence kept).
    ///
    /// # Errors
    /// `not-found`, `not-dead`, `invalid-input`, or `storage`.
    pub async fn revive(&self, id: &str) -> Result<Task, Error> {
        crate::limits::fits(&[&id])?;
        let info = CallInfo::new("taskboard.revive", Some(id));
        export!(
            self.0,
            info,
            [id],
            |k, s| k.gak_kernel_taskboard().call_revive(s, &id),
            c::task_out
        )
    }

    /// At most `limit` (1-100,000) live claims for `group`; `None` removes
    /// the limit. Lowering it revokes no claim.
    ///
    /// # Errors
    /// `invalid-input` or `storage`.
    pub async fn set_group_limit(&self, group: &str, limit: Option<u32>) -> Result<(), Error> {
        crate::limits::fits(&[&group])?;
        let info = CallInfo::new("taskboard.set-group-limit", None);
        export!(
            self.0,
            info,
            [group],
            |k, s| k
                .gak_kernel_taskboard()
                .call_set_group_limit(s, &group, limit),
            |()| ()
        )
    }

    /// A group's limit and exact live claims.
    ///
    /// # Errors
    /// `not-found` (no limit), `invalid-input`, or `storage`.
    pub async fn get_group(&self, group: &str) -> Result<GroupInfo, Error> {
        crate::limits::fits(&[&group])?;
        let info = CallInfo::new("taskboard.get-group", None);
        export!(
            self.0,
            info,
            [group],
            |k, s| k.gak_kernel_taskboard().call_get_group(s, &group),
            c::group_info_out
        )
    }

    /// One page of the groups the board knows (a limit, a claim or a ready
    /// task), by name, after `after`, at most `limit` (1-1000), each with
    /// its limit and exact live claims.
    ///
    /// # Errors
    /// `invalid-input` or `storage`.
    pub async fn list_groups(&self, after: Option<&str>, limit: u32) -> Result<GroupPage, Error> {
        crate::limits::fits(&[&after])?;
        let after = after.map(str::to_owned);
        let info = CallInfo::new("taskboard.list-groups", None);
        export!(
            self.0,
            info,
            [],
            |k, s| k
                .gak_kernel_taskboard()
                .call_list_groups(s, after.as_deref(), limit),
            c::group_page_out
        )
    }

    /// One page of the tasks waiting for their `not-before`, by due time
    /// then seed order, after the cursor `after` (a previous page's
    /// `next`), at most `limit` (1-1000), without tokens.
    ///
    /// # Errors
    /// `invalid-input` (a malformed cursor, a bad limit) or `storage`.
    pub async fn list_delayed(&self, after: Option<&str>, limit: u32) -> Result<TaskPage, Error> {
        crate::limits::fits(&[&after])?;
        let after = after.map(str::to_owned);
        let info = CallInfo::new("taskboard.list-delayed", None);
        export!(
            self.0,
            info,
            [],
            |k, s| k
                .gak_kernel_taskboard()
                .call_list_delayed(s, after.as_deref(), limit),
            c::task_page_out
        )
    }

    /// One page of the tasks of `group` (any state), by id, after `after`,
    /// at most `limit` (1-1000), without tokens.
    ///
    /// # Errors
    /// `invalid-input` (an empty group or cursor, a bad limit) or `storage`.
    pub async fn list_group(
        &self,
        group: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<TaskPage, Error> {
        crate::limits::fits(&[&group, &after])?;
        let after = after.map(str::to_owned);
        let info = CallInfo::new("taskboard.list-group", None);
        export!(
            self.0,
            info,
            [group],
            |k, s| k
                .gak_kernel_taskboard()
                .call_list_group(s, &group, after.as_deref(), limit),
            c::task_page_out
        )
    }

    /// How many tasks the board holds in each stored state (an expired
    /// claim counts as `claimed`), from 256 count records, never the board;
    /// `exact` is false on a board a format-1 kernel wrote until
    /// [`Taskboard::recount`] has visited its tasks.
    ///
    /// # Errors
    /// `storage`.
    pub async fn count(&self) -> Result<TaskCounts, Error> {
        let info = CallInfo::new("taskboard.count", None);
        export!(
            self.0,
            info,
            [],
            |k, s| k.gak_kernel_taskboard().call_count(s),
            c::task_counts_out
        )
    }

    /// Count up to `limit` (1-1000) of the tasks a format-1 kernel wrote
    /// that [`Taskboard::count`] does not cover yet; answers whether every
    /// task is counted now.
    ///
    /// # Errors
    /// `invalid-input` (a bad limit) or `storage`.
    pub async fn recount(&self, limit: u32) -> Result<bool, Error> {
        let info = CallInfo::new("taskboard.recount", None);
        export!(
            self.0,
            info,
            [],
            |k, s| k.gak_kernel_taskboard().call_recount(s, limit),
            |done| done
        )
    }

    /// Return a claimed task to open (fence kept) and give its attempt back.
    ///
    /// # Errors
    /// `lease-lost` (not the current token), `not-found`, `invalid-input`,
    /// or `storage`.
    pub async fn release(&self, id: &str, token: &str) -> Result<(), Error> {
        crate::limits::fits(&[&id, &token])?;
        let info = CallInfo::new("taskboard.release", Some(id));
        export!(
            self.0,
            info,
            [id, token],
            |k, s| k.gak_kernel_taskboard().call_release(s, &id, &token),
            |()| ()
        )
    }

    /// Mark a claimed task done; idempotent for the token that completed it.
    /// Tasks waiting on it become claimable.
    ///
    /// # Errors
    /// `lease-lost`, `not-found`, `invalid-input`, or `storage`.
    pub async fn complete(&self, id: &str, token: &str) -> Result<(), Error> {
        crate::limits::fits(&[&id, &token])?;
        let info = CallInfo::new("taskboard.complete", Some(id));
        export!(
            self.0,
            info,
            [id, token],
            |k, s| k.gak_kernel_taskboard().call_complete(s, &id, &token),
            |()| ()
        )
    }

    /// Extend a live claim to `now + ttl` (token and fence kept).
    ///
    /// # Errors
    /// `lease-lost` (not current, or expired), `not-found`,
    /// `invalid-input`, or `storage`.
    pub async fn renew(&self, id: &str, token: &str, ttl: u64) -> Result<Task, Error> {
        crate::limits::fits(&[&id, &token])?;
        let info = CallInfo::new("taskboard.renew", Some(id));
        export!(
            self.0,
            info,
            [id, token],
            |k, s| k.gak_kernel_taskboard().call_renew(s, &id, &token, ttl),
            c::task_out
        )
    }
}

impl Retention<'_> {
    /// Remove at most `limit` (1-1000) records finished before `before`,
    /// oldest first: completed keys, done tasks no not-done task needs, runs
    /// with a terminal outcome. A retry of a pruned key runs its body again;
    /// a pruned run id starts over.
    ///
    /// # Errors
    /// `invalid-input` or `storage`.
    pub async fn prune(&self, before: u64, limit: u32) -> Result<Pruned, Error> {
        let info = CallInfo::new("retention.prune", None);
        export!(
            self.0,
            info,
            [],
            |k, s| k.gak_kernel_retention().call_prune(s, before, limit),
            c::pruned_out
        )
    }

    /// What [`Retention::prune`] would remove now, without removing it: the
    /// same call in a transaction that is rolled back.
    ///
    /// # Errors
    /// As [`Retention::prune`].
    pub async fn prune_dry_run(&self, before: u64, limit: u32) -> Result<Pruned, Error> {
        let info = CallInfo::new("retention.prune-dry-run", None);
        self.0
            .transact(info, Ending::RollBack, async move |inst: &mut Instance| {
                Ok(inst
                    .kernel
                    .gak_kernel_retention()
                    .call_prune(&mut inst.store, before, limit)
                    .await?
                    .map(c::pruned_out)
                    .map_err(c::error_out))
            })
            .await
    }
}
