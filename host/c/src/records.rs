//! The contract's records as C structs, their enums as numbers, and the
//! `_clear` functions that free what libgak put into a record.
//!
//! A record is an argument (borrowed: libgak reads it during the call and
//! keeps nothing) or an answer (libgak fills the caller's struct; the
//! strings, bytes and lists in it are libgak's until the caller passes the
//! struct to its `_clear` function, which frees them and zeroes the struct,
//! so clearing twice is harmless). Never clear a record you built yourself.
#![allow(non_camel_case_types)]

use gak_host::{
    Acquired, Action, Error, KeyInfo, KeyPage, KeyState, Lease, Outcome, Plan, Pruned,
    ReconcileClaim, Resolution, Resolved, RetrySafety, Snapshot, Status, StepDef, Task, TaskPage,
    TaskSeed, TaskState,
};

use crate::abi::{
    free_strings, gak_bytes, gak_str, items, owned_list, owned_strings, strings, take_list,
};

/// A task's state (`GAK_TASK_*`); 0 means "none" where a state is optional.
pub type gak_task_state = u32;
/// No state: "any" in a list, "open" in a seed.
pub const GAK_TASK_ANY: gak_task_state = 0;
/// Open: claimable once its dependencies are done.
pub const GAK_TASK_OPEN: gak_task_state = 1;
/// Claimed under a live or expired lease.
pub const GAK_TASK_CLAIMED: gak_task_state = 2;
/// Done (terminal).
pub const GAK_TASK_DONE: gak_task_state = 3;
/// Failed: claimable again.
pub const GAK_TASK_FAILED: gak_task_state = 4;

/// A side-effect key's state (`GAK_KEY_*`); 0 means "any" in a list.
pub type gak_key_state = u32;
/// Any state (lists only).
pub const GAK_KEY_ANY: gak_key_state = 0;
/// No attempt holds the key; it may be granted.
pub const GAK_KEY_CLEARED: gak_key_state = 1;
/// An attempt is in flight.
pub const GAK_KEY_IN_FLIGHT: gak_key_state = 2;
/// Nobody knows whether the effect happened: reconcile it.
pub const GAK_KEY_UNCERTAIN: gak_key_state = 3;
/// Completed: acquiring it replays the first result.
pub const GAK_KEY_COMPLETED: gak_key_state = 4;

/// Whether an effect may run again after "not applied" (`GAK_RETRY_*`).
pub type gak_retry_safety = u32;
/// Safe to retry (the default).
pub const GAK_RETRY_SAFE: gak_retry_safety = 0;
/// Unsafe: a "not applied" verdict needs `force_retryable`.
pub const GAK_RETRY_UNSAFE: gak_retry_safety = 1;

/// A terminal outcome's status (`GAK_STATUS_*`).
pub type gak_status = u32;
/// Succeeded.
pub const GAK_STATUS_SUCCEEDED: gak_status = 1;
/// Failed.
pub const GAK_STATUS_FAILED: gak_status = 2;

/// What `acquire` decided (`GAK_ACQUIRED_*`).
pub type gak_acquired_kind = u32;
/// Granted: run the effect under `lease`.
pub const GAK_ACQUIRED_GRANTED: gak_acquired_kind = 1;
/// Completed before: `result` is the first result; do not run it.
pub const GAK_ACQUIRED_REPLAYED: gak_acquired_kind = 2;
/// Uncertain (`reason`): reconcile before anything else.
pub const GAK_ACQUIRED_UNCERTAIN: gak_acquired_kind = 3;
/// Another attempt of the key is live.
pub const GAK_ACQUIRED_IN_FLIGHT: gak_acquired_kind = 4;
/// Another key holds the resource `until`.
pub const GAK_ACQUIRED_CONTENDED: gak_acquired_kind = 5;

/// What a verdict resolved to (`GAK_RESOLVED_*`).
pub type gak_resolved_kind = u32;
/// Completed: `result` is the recorded result.
pub const GAK_RESOLVED_REPLAYED: gak_resolved_kind = 1;
/// Cleared: the key may be granted again.
pub const GAK_RESOLVED_CLEARED: gak_resolved_kind = 2;

pub(crate) fn task_state(n: gak_task_state, what: &str) -> Result<Option<TaskState>, Error> {
    Ok(Some(match n {
        GAK_TASK_ANY => return Ok(None),
        GAK_TASK_OPEN => TaskState::Open,
        GAK_TASK_CLAIMED => TaskState::Claimed,
        GAK_TASK_DONE => TaskState::Done,
        GAK_TASK_FAILED => TaskState::Failed,
        other => {
            return Err(Error::InvalidInput(format!(
                "{what}: unknown task state {other}"
            )));
        }
    }))
}

fn task_state_number(s: TaskState) -> gak_task_state {
    match s {
        TaskState::Open => GAK_TASK_OPEN,
        TaskState::Claimed => GAK_TASK_CLAIMED,
        TaskState::Done => GAK_TASK_DONE,
        TaskState::Failed => GAK_TASK_FAILED,
    }
}

pub(crate) fn key_state(n: gak_key_state) -> Result<Option<KeyState>, Error> {
    Ok(Some(match n {
        GAK_KEY_ANY => return Ok(None),
        GAK_KEY_CLEARED => KeyState::Cleared,
        GAK_KEY_IN_FLIGHT => KeyState::InFlight,
        GAK_KEY_UNCERTAIN => KeyState::Uncertain,
        GAK_KEY_COMPLETED => KeyState::Completed,
        other => return Err(Error::InvalidInput(format!("unknown key state {other}"))),
    }))
}

fn key_state_number(s: KeyState) -> gak_key_state {
    match s {
        KeyState::Cleared => GAK_KEY_CLEARED,
        KeyState::InFlight => GAK_KEY_IN_FLIGHT,
        KeyState::Uncertain => GAK_KEY_UNCERTAIN,
        KeyState::Completed => GAK_KEY_COMPLETED,
    }
}

fn retry_safety(n: gak_retry_safety) -> Result<RetrySafety, Error> {
    match n {
        GAK_RETRY_SAFE => Ok(RetrySafety::Safe),
        GAK_RETRY_UNSAFE => Ok(RetrySafety::Unsafe),
        other => Err(Error::InvalidInput(format!("unknown retry-safety {other}"))),
    }
}

fn retry_safety_number(s: RetrySafety) -> gak_retry_safety {
    match s {
        RetrySafety::Safe => GAK_RETRY_SAFE,
        RetrySafety::Unsafe => GAK_RETRY_UNSAFE,
    }
}

fn status(n: gak_status) -> Result<Status, Error> {
    match n {
        GAK_STATUS_SUCCEEDED => Ok(Status::Succeeded),
        GAK_STATUS_FAILED => Ok(Status::Failed),
        other => Err(Error::InvalidInput(format!("unknown status {other}"))),
    }
}

fn status_number(s: Status) -> gak_status {
    match s {
        Status::Succeeded => GAK_STATUS_SUCCEEDED,
        Status::Failed => GAK_STATUS_FAILED,
    }
}

/// `present` and `value` of an optional number.
fn opt_number(n: Option<u64>) -> (bool, u64) {
    (n.is_some(), n.unwrap_or(0))
}

// --- checkpoint ------------------------------------------------------------

/// One `fields` entry of a snapshot.
#[repr(C)]
#[derive(Debug)]
pub struct gak_field {
    /// The key (fields are sorted by key, keys unique).
    pub key: gak_str,
    /// The value.
    pub value: gak_str,
}

/// A run's progress snapshot.
#[repr(C)]
#[derive(Debug)]
pub struct gak_snapshot {
    /// The run.
    pub run_id: gak_str,
    /// Sequence number: a save lands only above the stored one.
    pub seq: u64,
    /// Whether `fence` is set (the writer's takeover generation).
    pub has_fence: bool,
    /// The owner fence, when `has_fence`.
    pub fence: u64,
    /// Free-form status (non-empty).
    pub status: gak_str,
    /// Finished steps.
    pub done: *mut gak_str,
    /// How many `done`.
    pub done_len: usize,
    /// Fields, sorted by key.
    pub fields: *mut gak_field,
    /// How many `fields`.
    pub fields_len: usize,
}

impl gak_snapshot {
    /// # Safety
    /// Every pointer is valid for reading as the header describes.
    pub(crate) unsafe fn read(&self) -> Result<Snapshot, Error> {
        // SAFETY: forwarded to the caller's promise.
        unsafe {
            let fields = items(self.fields, self.fields_len, "snapshot.fields")?
                .iter()
                .map(|f| {
                    Ok((
                        f.key.text("field key")?.to_owned(),
                        f.value.text("field value")?.to_owned(),
                    ))
                })
                .collect::<Result<Vec<_>, Error>>()?;
            Ok(Snapshot {
                run_id: self.run_id.text("snapshot.run_id")?.to_owned(),
                seq: self.seq,
                fence: self.has_fence.then_some(self.fence),
                status: self.status.text("snapshot.status")?.to_owned(),
                done: strings(self.done, self.done_len, "snapshot.done")?,
                fields,
            })
        }
    }
}

impl From<Snapshot> for gak_snapshot {
    fn from(s: Snapshot) -> Self {
        let (has_fence, fence) = opt_number(s.fence);
        let (done, done_len) = owned_strings(s.done);
        let (fields, fields_len) = owned_list(
            s.fields
                .into_iter()
                .map(|(k, v)| gak_field {
                    key: gak_str::owned(k),
                    value: gak_str::owned(v),
                })
                .collect(),
        );
        gak_snapshot {
            run_id: gak_str::owned(s.run_id),
            seq: s.seq,
            has_fence,
            fence,
            status: gak_str::owned(s.status),
            done,
            done_len,
            fields,
            fields_len,
        }
    }
}

/// A step of a plan's DAG.
#[repr(C)]
#[derive(Debug)]
pub struct gak_step_def {
    /// The step.
    pub id: gak_str,
    /// The steps it depends on.
    pub depends_on: *const gak_str,
    /// How many `depends_on`.
    pub depends_on_len: usize,
}

impl gak_step_def {
    /// # Safety
    /// Every pointer is valid for reading as the header describes.
    pub(crate) unsafe fn read(&self) -> Result<StepDef, Error> {
        // SAFETY: forwarded to the caller's promise.
        unsafe {
            Ok(StepDef {
                id: self.id.text("step id")?.to_owned(),
                depends_on: strings(self.depends_on, self.depends_on_len, "depends_on")?,
            })
        }
    }
}

/// A resume plan: steps to skip (the trusted completion set), to run (in
/// order), and done records that are not trusted.
#[repr(C)]
#[derive(Debug)]
pub struct gak_plan {
    /// Skipped steps, in declaration order.
    pub skip: *mut gak_str,
    /// How many `skip`.
    pub skip_len: usize,
    /// Steps to run, in topological order.
    pub run: *mut gak_str,
    /// How many `run`.
    pub run_len: usize,
    /// Done records that are not trusted.
    pub untrusted: *mut gak_str,
    /// How many `untrusted`.
    pub untrusted_len: usize,
}

impl From<Plan> for gak_plan {
    fn from(p: Plan) -> Self {
        let (skip, skip_len) = owned_strings(p.skip);
        let (run, run_len) = owned_strings(p.run);
        let (untrusted, untrusted_len) = owned_strings(p.untrusted);
        gak_plan {
            skip,
            skip_len,
            run,
            run_len,
            untrusted,
            untrusted_len,
        }
    }
}

// --- commitgate ------------------------------------------------------------

/// A terminal outcome.
#[repr(C)]
#[derive(Debug)]
pub struct gak_outcome {
    /// `GAK_STATUS_SUCCEEDED` or `GAK_STATUS_FAILED`.
    pub status: gak_status,
    /// The opaque result.
    pub result: gak_bytes,
}

impl gak_outcome {
    /// # Safety
    /// `result` is valid for reading.
    pub(crate) unsafe fn read(&self) -> Result<Outcome, Error> {
        Ok(Outcome {
            status: status(self.status)?,
            // SAFETY: forwarded to the caller's promise.
            result: unsafe { self.result.slice("outcome.result")? }.to_vec(),
        })
    }
}

impl From<Outcome> for gak_outcome {
    fn from(o: Outcome) -> Self {
        gak_outcome {
            status: status_number(o.status),
            result: gak_bytes::owned(o.result),
        }
    }
}

// --- sideeffect ------------------------------------------------------------

/// An effect, named by its idempotency key.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct gak_action {
    /// The idempotency key: one key, one logical action.
    pub key: gak_str,
    /// The resource whose fence orders the attempts.
    pub resource: gak_str,
    /// `GAK_RETRY_SAFE` (0) or `GAK_RETRY_UNSAFE`.
    pub retry_safety: gak_retry_safety,
    /// A digest of the action's parameters; NULL `ptr`: none.
    pub fingerprint: gak_str,
}

impl gak_action {
    /// # Safety
    /// The strings are valid for reading.
    pub(crate) unsafe fn read(&self) -> Result<Action, Error> {
        // SAFETY: forwarded to the caller's promise.
        unsafe {
            Ok(Action {
                key: self.key.text("action.key")?.to_owned(),
                resource: self.resource.text("action.resource")?.to_owned(),
                retry_safety: retry_safety(self.retry_safety)?,
                fingerprint: self
                    .fingerprint
                    .opt_text("action.fingerprint")?
                    .map(str::to_owned),
            })
        }
    }
}

/// The right to run one attempt of an effect.
#[repr(C)]
#[derive(Debug)]
pub struct gak_lease {
    /// The key.
    pub key: gak_str,
    /// The resource.
    pub resource: gak_str,
    /// The resource's fence for this attempt.
    pub fence: u64,
    /// The holder minted at grant (a capability: never log it).
    pub holder: gak_str,
    /// The deadline, ms since the epoch.
    pub until: u64,
}

impl gak_lease {
    /// # Safety
    /// The strings are valid for reading.
    pub(crate) unsafe fn read(&self) -> Result<Lease, Error> {
        // SAFETY: forwarded to the caller's promise.
        unsafe {
            Ok(Lease {
                key: self.key.text("lease.key")?.to_owned(),
                resource: self.resource.text("lease.resource")?.to_owned(),
                fence: self.fence,
                holder: self.holder.text("lease.holder")?.to_owned(),
                until: self.until,
            })
        }
    }

    /// Free what the lease holds.
    ///
    /// # Safety
    /// Filled by libgak, not cleared since.
    pub(crate) unsafe fn free(&mut self) {
        // SAFETY: forwarded to the caller's promise.
        unsafe {
            self.key.free();
            self.resource.free();
            self.holder.free();
        }
        self.fence = 0;
        self.until = 0;
    }

    pub(crate) const NONE: gak_lease = gak_lease {
        key: gak_str::NONE,
        resource: gak_str::NONE,
        fence: 0,
        holder: gak_str::NONE,
        until: 0,
    };
}

impl From<Lease> for gak_lease {
    fn from(l: Lease) -> Self {
        gak_lease {
            key: gak_str::owned(l.key),
            resource: gak_str::owned(l.resource),
            fence: l.fence,
            holder: gak_str::owned(l.holder),
            until: l.until,
        }
    }
}

/// What `acquire` decided; `kind` says which fields are set.
#[repr(C)]
#[derive(Debug)]
pub struct gak_acquired {
    /// `GAK_ACQUIRED_*`.
    pub kind: gak_acquired_kind,
    /// Granted: the lease.
    pub lease: gak_lease,
    /// Replayed: the first result.
    pub result: gak_bytes,
    /// Uncertain: why.
    pub reason: gak_str,
    /// Contended: until when the resource is held.
    pub until: u64,
}

impl gak_acquired {
    pub(crate) fn from_rust(a: Acquired) -> Result<Self, Error> {
        let mut out = gak_acquired {
            kind: 0,
            lease: gak_lease::NONE,
            result: gak_bytes::NONE,
            reason: gak_str::NONE,
            until: 0,
        };
        match a {
            Acquired::Granted(lease) => {
                out.kind = GAK_ACQUIRED_GRANTED;
                out.lease = lease.into();
            }
            Acquired::Replayed(result) => {
                out.kind = GAK_ACQUIRED_REPLAYED;
                out.result = gak_bytes::owned(result);
            }
            Acquired::Uncertain(reason) => {
                out.kind = GAK_ACQUIRED_UNCERTAIN;
                out.reason = gak_str::owned(reason);
            }
            Acquired::InFlight => out.kind = GAK_ACQUIRED_IN_FLIGHT,
            Acquired::Contended(until) => {
                out.kind = GAK_ACQUIRED_CONTENDED;
                out.until = until;
            }
            // An answer this library does not know: never let a caller run
            // an effect on it.
            other => {
                return Err(Error::storage(format!(
                    "acquire answered {other:?}, which this libgak does not know"
                )));
            }
        }
        Ok(out)
    }
}

/// The right to reconcile an uncertain key.
#[repr(C)]
#[derive(Debug)]
pub struct gak_reconcile_claim {
    /// The claim (a capability: pass it to `resolve_uncertain`).
    pub claim: gak_str,
    /// Until when it is held.
    pub until: u64,
}

impl From<ReconcileClaim> for gak_reconcile_claim {
    fn from(c: ReconcileClaim) -> Self {
        gak_reconcile_claim {
            claim: gak_str::owned(c.claim),
            until: c.until,
        }
    }
}

/// A reconciler's verdict on an uncertain key.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct gak_resolution {
    /// Did the effect happen?
    pub applied: bool,
    /// The result to record when applied; NULL `ptr`: none (empty).
    pub result: gak_bytes,
    /// Clear an unsafe key anyway.
    pub force_retryable: bool,
    /// The reconcile claim, if one was taken; NULL `ptr`: none.
    pub claim: gak_str,
}

impl gak_resolution {
    /// # Safety
    /// The pointers are valid for reading.
    pub(crate) unsafe fn read(&self) -> Result<Resolution, Error> {
        // SAFETY: forwarded to the caller's promise.
        unsafe {
            Ok(Resolution {
                applied: self.applied,
                result: self
                    .result
                    .opt_slice("resolution.result")?
                    .map(<[u8]>::to_vec),
                force_retryable: self.force_retryable,
                claim: self.claim.opt_text("resolution.claim")?.map(str::to_owned),
            })
        }
    }
}

/// What a verdict resolved the key to.
#[repr(C)]
#[derive(Debug)]
pub struct gak_resolved {
    /// `GAK_RESOLVED_*`.
    pub kind: gak_resolved_kind,
    /// Replayed: the recorded result.
    pub result: gak_bytes,
}

impl From<Resolved> for gak_resolved {
    fn from(r: Resolved) -> Self {
        match r {
            Resolved::Replayed(result) => gak_resolved {
                kind: GAK_RESOLVED_REPLAYED,
                result: gak_bytes::owned(result),
            },
            Resolved::Cleared => gak_resolved {
                kind: GAK_RESOLVED_CLEARED,
                result: gak_bytes::NONE,
            },
        }
    }
}

/// A side-effect key as `list` and `get` show it (never a holder or claim).
#[repr(C)]
#[derive(Debug)]
pub struct gak_key_info {
    /// The key.
    pub key: gak_str,
    /// `GAK_KEY_*`.
    pub state: gak_key_state,
    /// `GAK_RETRY_*`, as recorded at first grant.
    pub retry_safety: gak_retry_safety,
    /// As recorded at first grant; NULL `ptr`: none.
    pub fingerprint: gak_str,
    /// The resource.
    pub resource: gak_str,
    /// Whether `until` is set.
    pub has_until: bool,
    /// The intent's deadline (in flight; uncertain by expiry).
    pub until: u64,
    /// Why uncertain; NULL `ptr`: none.
    pub reason: gak_str,
    /// Whether `completed_at` is set.
    pub has_completed_at: bool,
    /// When the first result was recorded.
    pub completed_at: u64,
    /// Whether `reconciling_until` is set.
    pub has_reconciling_until: bool,
    /// Until when a reconciler holds its claim.
    pub reconciling_until: u64,
}

impl From<KeyInfo> for gak_key_info {
    fn from(i: KeyInfo) -> Self {
        let (has_until, until) = opt_number(i.until);
        let (has_completed_at, completed_at) = opt_number(i.completed_at);
        let (has_reconciling_until, reconciling_until) = opt_number(i.reconciling_until);
        gak_key_info {
            key: gak_str::owned(i.key),
            state: key_state_number(i.state),
            retry_safety: retry_safety_number(i.retry_safety),
            fingerprint: gak_str::owned_opt(i.fingerprint),
            resource: gak_str::owned(i.resource),
            has_until,
            until,
            reason: gak_str::owned_opt(i.reason),
            has_completed_at,
            completed_at,
            has_reconciling_until,
            reconciling_until,
        }
    }
}

/// One page of side-effect keys.
#[repr(C)]
#[derive(Debug)]
pub struct gak_key_page {
    /// The keys, in byte order.
    pub items: *mut gak_key_info,
    /// How many `items`.
    pub len: usize,
    /// The cursor for the next page (`after`); NULL `ptr` on the last page.
    pub next: gak_str,
}

impl From<KeyPage> for gak_key_page {
    fn from(p: KeyPage) -> Self {
        let (items, len) = owned_list(p.items.into_iter().map(gak_key_info::from).collect());
        gak_key_page {
            items,
            len,
            next: gak_str::owned_opt(p.next),
        }
    }
}

// --- taskboard -------------------------------------------------------------

/// A task to load onto the board.
#[repr(C)]
#[derive(Debug)]
pub struct gak_task_seed {
    /// The task.
    pub id: gak_str,
    /// Its title; NULL `ptr`: none (empty).
    pub title: gak_str,
    /// The tasks it depends on.
    pub deps: *const gak_str,
    /// How many `deps`.
    pub deps_len: usize,
    /// `GAK_TASK_OPEN`, `_FAILED` or `_DONE`; 0: open.
    pub state: gak_task_state,
}

impl gak_task_seed {
    /// # Safety
    /// Every pointer is valid for reading as the header describes.
    pub(crate) unsafe fn read(&self) -> Result<TaskSeed, Error> {
        // SAFETY: forwarded to the caller's promise.
        unsafe {
            Ok(TaskSeed {
                id: self.id.text("task id")?.to_owned(),
                title: self.title.opt_text("title")?.map(str::to_owned),
                deps: strings(self.deps, self.deps_len, "deps")?,
                state: task_state(self.state, "seed state")?,
            })
        }
    }
}

/// A task on the board.
#[repr(C)]
#[derive(Debug)]
pub struct gak_task {
    /// The task.
    pub id: gak_str,
    /// Its title.
    pub title: gak_str,
    /// The tasks it depends on.
    pub deps: *mut gak_str,
    /// How many `deps`.
    pub deps_len: usize,
    /// `GAK_TASK_*`.
    pub state: gak_task_state,
    /// The claimer (claimed, done); NULL `ptr`: none.
    pub owner: gak_str,
    /// The claim's token: only from `claim`, `claim_next` and `renew` (a
    /// capability: never log it); NULL `ptr`: none.
    pub token: gak_str,
    /// Whether `until` is set.
    pub has_until: bool,
    /// The claim's deadline.
    pub until: u64,
    /// The takeover generation: strictly increasing per task.
    pub fence: u64,
}

impl From<Task> for gak_task {
    fn from(t: Task) -> Self {
        let (deps, deps_len) = owned_strings(t.deps);
        let (has_until, until) = opt_number(t.until);
        gak_task {
            id: gak_str::owned(t.id),
            title: gak_str::owned(t.title),
            deps,
            deps_len,
            state: task_state_number(t.state),
            owner: gak_str::owned_opt(t.owner),
            token: gak_str::owned_opt(t.token),
            has_until,
            until,
            fence: t.fence,
        }
    }
}

impl gak_task {
    /// # Safety
    /// Filled by libgak, not cleared since.
    unsafe fn free(&mut self) {
        // SAFETY: forwarded to the caller's promise.
        unsafe {
            self.id.free();
            self.title.free();
            free_strings(self.deps, self.deps_len);
            self.owner.free();
            self.token.free();
        }
        self.deps = std::ptr::null_mut();
        self.deps_len = 0;
        self.state = 0;
        self.has_until = false;
        self.until = 0;
        self.fence = 0;
    }
}

/// One page of the board.
#[repr(C)]
#[derive(Debug)]
pub struct gak_task_page {
    /// The tasks, in id order (never a token).
    pub items: *mut gak_task,
    /// How many `items`.
    pub len: usize,
    /// The cursor for the next page (`after`); NULL `ptr` on the last page.
    pub next: gak_str,
}

impl From<TaskPage> for gak_task_page {
    fn from(p: TaskPage) -> Self {
        let (items, len) = owned_list(p.items.into_iter().map(gak_task::from).collect());
        gak_task_page {
            items,
            len,
            next: gak_str::owned_opt(p.next),
        }
    }
}

// --- retention -------------------------------------------------------------

/// What one `prune` removed.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct gak_pruned {
    /// Completed side-effect keys.
    pub removed_keys: u32,
    /// Done tasks.
    pub removed_tasks: u32,
    /// Finished runs (snapshot and outcomes).
    pub removed_runs: u32,
    /// Removable records older than `before` remain.
    pub more: bool,
}

impl From<Pruned> for gak_pruned {
    fn from(p: Pruned) -> Self {
        gak_pruned {
            removed_keys: p.removed_keys,
            removed_tasks: p.removed_tasks,
            removed_runs: p.removed_runs,
            more: p.more,
        }
    }
}

// --- clearing --------------------------------------------------------------

/// Run `f` on the record behind `ptr`, if any, catching panics.
fn clearing<T>(ptr: *mut T, f: impl FnOnce(&mut T)) {
    // SAFETY: the caller of each `_clear` passes NULL or a record libgak
    // filled; `as_mut` handles NULL.
    if let Some(record) = unsafe { ptr.as_mut() } {
        crate::abi::guard_value((), || f(record));
    }
}

/// Free a string libgak filled in (e.g. by `gak_downstream_get`); NULL ok.
///
/// # Safety
/// `s` is NULL or a string libgak filled and nobody freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_str_clear(s: *mut gak_str) {
    // SAFETY: forwarded to the caller's promise.
    clearing(s, |s| unsafe { s.free() });
}

/// Free bytes libgak filled in (e.g. by `gak_sideeffect_complete`).
///
/// # Safety
/// `b` is NULL or bytes libgak filled and nobody freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_bytes_clear(b: *mut gak_bytes) {
    // SAFETY: forwarded to the caller's promise.
    clearing(b, |b| unsafe { b.free() });
}

/// Free what a snapshot libgak filled (by `gak_checkpoint_load`) holds.
///
/// # Safety
/// `s` is NULL or a snapshot libgak filled and nobody cleared.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_snapshot_clear(s: *mut gak_snapshot) {
    clearing(s, |s| {
        // SAFETY: every pointer in it was made by libgak.
        unsafe {
            s.run_id.free();
            s.status.free();
            free_strings(s.done, s.done_len);
            for mut f in take_list(s.fields, s.fields_len) {
                f.key.free();
                f.value.free();
            }
        }
        s.done = std::ptr::null_mut();
        s.done_len = 0;
        s.fields = std::ptr::null_mut();
        s.fields_len = 0;
        s.seq = 0;
        s.has_fence = false;
        s.fence = 0;
    });
}

/// Free what a plan holds.
///
/// # Safety
/// `p` is NULL or a plan libgak filled and nobody cleared.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_plan_clear(p: *mut gak_plan) {
    clearing(p, |p| {
        // SAFETY: every list in it was made by libgak.
        unsafe {
            free_strings(p.skip, p.skip_len);
            free_strings(p.run, p.run_len);
            free_strings(p.untrusted, p.untrusted_len);
        }
        *p = gak_plan::from(Plan::default());
    });
}

/// Free what an outcome libgak filled holds.
///
/// # Safety
/// `o` is NULL or an outcome libgak filled and nobody cleared.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_outcome_clear(o: *mut gak_outcome) {
    clearing(o, |o| {
        // SAFETY: made by libgak.
        unsafe { o.result.free() };
        o.status = 0;
    });
}

/// Free what a lease libgak filled holds.
///
/// # Safety
/// `l` is NULL or a lease libgak filled and nobody cleared.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_lease_clear(l: *mut gak_lease) {
    // SAFETY: made by libgak.
    clearing(l, |l| unsafe { l.free() });
}

/// Free what an `acquire` answer holds.
///
/// # Safety
/// `a` is NULL or an answer libgak filled and nobody cleared.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_acquired_clear(a: *mut gak_acquired) {
    clearing(a, |a| {
        // SAFETY: made by libgak.
        unsafe {
            a.lease.free();
            a.result.free();
            a.reason.free();
        }
        a.kind = 0;
        a.until = 0;
    });
}

/// Free what a reconcile claim holds.
///
/// # Safety
/// `c` is NULL or a claim libgak filled and nobody cleared.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_reconcile_claim_clear(c: *mut gak_reconcile_claim) {
    clearing(c, |c| {
        // SAFETY: made by libgak.
        unsafe { c.claim.free() };
        c.until = 0;
    });
}

/// Free what a resolution's answer holds.
///
/// # Safety
/// `r` is NULL or an answer libgak filled and nobody cleared.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_resolved_clear(r: *mut gak_resolved) {
    clearing(r, |r| {
        // SAFETY: made by libgak.
        unsafe { r.result.free() };
        r.kind = 0;
    });
}

/// # Safety
/// Filled by libgak, not cleared since.
unsafe fn free_key_info(i: &mut gak_key_info) {
    // SAFETY: forwarded to the caller's promise.
    unsafe {
        i.key.free();
        i.fingerprint.free();
        i.resource.free();
        i.reason.free();
    }
    i.state = 0;
}

/// Free what a key's description holds.
///
/// # Safety
/// `i` is NULL or a record libgak filled and nobody cleared.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_key_info_clear(i: *mut gak_key_info) {
    // SAFETY: made by libgak.
    clearing(i, |i| unsafe { free_key_info(i) });
}

/// Free what a page of keys holds (every item too).
///
/// # Safety
/// `p` is NULL or a page libgak filled and nobody cleared.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_key_page_clear(p: *mut gak_key_page) {
    clearing(p, |p| {
        // SAFETY: made by libgak.
        unsafe {
            for mut item in take_list(p.items, p.len) {
                free_key_info(&mut item);
            }
            p.next.free();
        }
        p.items = std::ptr::null_mut();
        p.len = 0;
    });
}

/// Free what a task libgak filled holds.
///
/// # Safety
/// `t` is NULL or a task libgak filled and nobody cleared.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_task_clear(t: *mut gak_task) {
    // SAFETY: made by libgak.
    clearing(t, |t| unsafe { t.free() });
}

/// Free what a page of the board holds (every task too).
///
/// # Safety
/// `p` is NULL or a page libgak filled and nobody cleared.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_task_page_clear(p: *mut gak_task_page) {
    clearing(p, |p| {
        // SAFETY: made by libgak.
        unsafe {
            for mut task in take_list(p.items, p.len) {
                task.free();
            }
            p.next.free();
        }
        p.items = std::ptr::null_mut();
        p.len = 0;
    });
}
