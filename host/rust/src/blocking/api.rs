//! The five contracts as blocking calls: each is the async call of the
//! same name (see [`crate::Kernel`]'s accessors for the contract of each),
//! driven to completion on the calling thread.
use std::sync::{Arc, Mutex};

use gak_rules::{
    Acquired, Action, Completion, CompletionResult, Error, GroupInfo, GroupPage, KeyCounts,
    KeyInfo, KeyPage, KeyState, Lease, Outcome, Plan, Pruned, ReconcileClaim, Resolution, Resolved,
    Snapshot, StepDef, Task, TaskCounts, TaskPage, TaskSeed, TaskState,
};

use super::run;
use crate::SinkError;
use crate::api::{fenced_call, sink_outcome};
use crate::kernel::{CallInfo, Kernel};
use crate::protocol::Ending;

/// Checkpoint: snapshots and resume plans (SPEC 3).
#[derive(Debug)]
pub struct Checkpoint<'k>(pub(super) &'k Kernel);
/// Commitgate: terminal outcomes (SPEC 4).
#[derive(Debug)]
pub struct Commitgate<'k>(pub(super) &'k Kernel);
/// Side effects: the idempotency gate and fenced sinks (SPEC 5).
#[derive(Debug)]
pub struct Sideeffect<'k>(pub(super) &'k Kernel);
/// Taskboard: claims by token (SPEC 6, 9).
#[derive(Debug)]
pub struct Taskboard<'k>(pub(super) &'k Kernel);
/// Retention: bounded pruning of finished records (SPEC 9).
#[derive(Debug)]
pub struct Retention<'k>(pub(super) &'k Kernel);

/// Mirror async methods as blocking ones with the same signature.
macro_rules! mirror {
    ($iface:ident, $accessor:ident { $( $(#[$doc:meta])* fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $out:ty; )* }) => {
        impl $iface<'_> {
            $(
                $(#[$doc])*
                ///
                /// # Errors
                /// As the async call of the same name.
                pub fn $name(&self $(, $arg: $ty)*) -> Result<$out, Error> {
                    run(self.0.$accessor().$name($($arg),*))
                }
            )*
        }
    };
}

mirror!(Checkpoint, checkpoint {
    /// Write `snap` only if it is newer (checks: `invalid-input`, `terminal`, `fence-stale`, `stale-seq`).
    fn save_if_newer(&self, snap: &Snapshot) -> ();
    /// The persisted snapshot, or `not-found`.
    fn load(&self, run_id: &str) -> Snapshot;
    /// Validate the DAG and plan a resume: only the trusted completion set is skipped.
    fn build_plan(&self, steps: &[StepDef], snap: Option<&Snapshot>) -> Plan;
});

mirror!(Commitgate, commitgate {
    /// Commit the terminal outcome of `(run_id, step)`; the first accepted outcome wins.
    fn commit(&self, run_id: &str, step: Option<&str>, fence: u64, outcome: &Outcome) -> Outcome;
    /// The recorded outcome, or `not-found`.
    fn read(&self, run_id: &str, step: Option<&str>) -> Outcome;
});

mirror!(Sideeffect, sideeffect {
    /// The single atomic decision for `action`.
    fn acquire(&self, action: &Action, ttl: u64) -> Acquired;
    /// Record the key completed; returns the first recorded result.
    fn complete(&self, action: &Action, lease: &Lease, result: &[u8]) -> Vec<u8>;
    /// Release the resource hold; the key's intent stays.
    fn release(&self, action: &Action, lease: &Lease) -> ();
    /// The attempt definitely did not apply.
    fn abandon(&self, action: &Action, lease: &Lease, reason: &str) -> ();
    /// A qualification check, then `until = now + ttl`.
    fn renew(&self, action: &Action, lease: &Lease, ttl: u64) -> Lease;
    /// Mark the key uncertain (the hold stays: call `release`).
    fn mark_uncertain(&self, action: &Action, lease: &Lease, reason: &str) -> ();
    /// Claim the right to reconcile an uncertain key.
    fn begin_reconcile(&self, action: &Action, ttl: u64) -> ReconcileClaim;
    /// Record a reconciler's verdict; the first verdict wins.
    fn resolve_uncertain(&self, action: &Action, resolution: &Resolution) -> Resolved;
    /// The highest fence the sink has seen (0 when never written).
    fn sink_seen(&self, resource: &str) -> u64;
    /// One page of keys, optionally of one state; never a holder or claim.
    fn list(&self, state: Option<KeyState>, after: Option<&str>, limit: u32) -> KeyPage;
    /// The key as `list` shows it, or `not-found`.
    fn get(&self, key: &str) -> KeyInfo;
    /// The keys by state, and since when the oldest uncertain one is.
    fn count(&self) -> KeyCounts;
    /// Count up to `limit` keys a format-1 kernel wrote; all counted now?
    fn recount(&self, limit: u32) -> bool;
});

mirror!(Taskboard, taskboard {
    /// Load topology.
    fn seed(&self, tasks: &[TaskSeed]) -> ();
    /// One page of the board, optionally of one state, without tokens.
    fn list(&self, state: Option<TaskState>, after: Option<&str>, limit: u32) -> TaskPage;
    /// The task without its token, or `not-found`.
    fn get(&self, id: &str) -> Task;
    /// Claim a task; the returned task carries the token.
    fn claim(&self, id: &str, agent: &str, ttl: u64) -> Task;
    /// Claim the first ready task in claim order; `None` when none is free.
    fn claim_next(&self, agent: &str, ttl: u64) -> Option<Task>;
    /// Claim up to `limit` ready tasks in claim order, in one transaction.
    fn claim_batch(&self, agent: &str, ttl: u64, limit: u32) -> Vec<Task>;
    /// Complete many claims in one transaction; an answer per item, in order.
    fn complete_batch(&self, items: &[Completion]) -> Vec<CompletionResult>;
    /// The handler failed: due again after `retry_after`, or dead.
    fn fail(&self, id: &str, token: &str, reason: &str, retry_after: Option<u64>) -> Task;
    /// Bring a dead task back.
    fn revive(&self, id: &str) -> Task;
    /// At most `limit` live claims for `group` (`None`: no limit).
    fn set_group_limit(&self, group: &str, limit: Option<u32>) -> ();
    /// A group's limit and exact live claims.
    fn get_group(&self, group: &str) -> GroupInfo;
    /// One page of the groups the board knows, by name.
    fn list_groups(&self, after: Option<&str>, limit: u32) -> GroupPage;
    /// One page of the delayed tasks, by due time.
    fn list_delayed(&self, after: Option<&str>, limit: u32) -> TaskPage;
    /// One page of a group's tasks, by id.
    fn list_group(&self, group: &str, after: Option<&str>, limit: u32) -> TaskPage;
    /// The board's tasks by state.
    fn count(&self) -> TaskCounts;
    /// Count up to `limit` tasks a format-1 kernel wrote; all counted now?
    fn recount(&self, limit: u32) -> bool;
    /// Return a claimed task to open.
    fn release(&self, id: &str, token: &str) -> ();
    /// Mark a claimed task done.
    fn complete(&self, id: &str, token: &str) -> ();
    /// Extend a live claim.
    fn renew(&self, id: &str, token: &str, ttl: u64) -> Task;
});

mirror!(Retention, retention {
    /// Remove at most `limit` records finished before `before`, oldest first.
    fn prune(&self, before: u64, limit: u32) -> Pruned;
    /// What `prune` would remove now, without removing it.
    fn prune_dry_run(&self, before: u64, limit: u32) -> Pruned;
});

impl Sideeffect<'_> {
    /// A fenced downstream write: `body` runs in the same transaction as the
    /// fence compare; see [`crate::Sideeffect::write_fenced`]. `body` may
    /// run more than once if the store reports a conflict.
    ///
    /// # Errors
    /// [`SinkError::Kernel`] (`fence-stale`, `invalid-input`, `storage`) or
    /// [`SinkError::Body`].
    pub fn write_fenced<E>(
        &self,
        resource: &str,
        presented: u64,
        mut body: impl FnMut(&mut Downstream<'_, '_>) -> Result<(), E>,
    ) -> Result<(), SinkError<E>> {
        let failure = Arc::new(Mutex::new(None));
        let call = fenced_call!(
            resource.to_owned(),
            presented,
            async |down: &mut crate::Downstream<'_>| body(&mut Downstream(down)),
            failure.clone()
        );
        let info = CallInfo::new("sideeffect.write-fenced", Some(resource)).fence(presented);
        let result = run(self.0.transact_local(info, Ending::Commit, call));
        sink_outcome(result, &failure)
    }
}

/// A fenced sink body's access to its transaction, blocking: see
/// [`crate::Downstream`].
pub struct Downstream<'a, 'b>(pub(super) &'a mut crate::Downstream<'b>);

impl<'b> Downstream<'_, 'b> {
    /// Read a key of the binding's `downstream` table.
    ///
    /// # Errors
    /// `storage` (a conflict re-runs the whole call).
    pub fn get(&mut self, key: &str) -> Result<Option<String>, Error> {
        run(self.0.get(key))
    }

    /// Write a key of the binding's `downstream` table.
    ///
    /// # Errors
    /// `storage` (a conflict re-runs the whole call).
    pub fn put(&mut self, key: &str, value: &str) -> Result<(), Error> {
        run(self.0.put(key, value))
    }

    /// The async view of the same transaction (what each binding's
    /// accessor is defined on).
    pub fn as_async(&mut self) -> &mut crate::Downstream<'b> {
        self.0
    }
}

#[cfg(feature = "sqlite")]
impl Downstream<'_, '_> {
    /// The SQLite connection inside the same transaction, when the binding
    /// is SQLite (`None` otherwise).
    pub fn sqlite(&mut self) -> Option<crate::store::sqlite::LentSqlite<'_>> {
        self.as_async().sqlite()
    }
}
#[cfg(feature = "postgres")]
impl Downstream<'_, '_> {
    /// Run a statement inside the same transaction, when the binding is
    /// PostgreSQL (`None` otherwise); parameters only.
    pub fn postgres_execute(
        &mut self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Option<Result<u64, gak_rules::Error>> {
        crate::drive::run(self.as_async().postgres_execute(sql, params))
    }

    /// Run a query inside the same transaction, when the binding is
    /// PostgreSQL; every column must be `text` (cast in SQL).
    pub fn postgres_query(
        &mut self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Option<Result<Vec<Vec<Option<String>>>, gak_rules::Error>> {
        crate::drive::run(self.as_async().postgres_query(sql, params))
    }
}
