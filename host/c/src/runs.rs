//! checkpoint, commitgate and retention: a run's snapshots and resume plan,
//! its terminal outcomes, and bounded pruning of finished records.
use crate::abi::{Out, gak_str, guard, items};
use crate::error::gak_error;
use crate::kernel::{gak_kernel, kernel};
use crate::limits::Scale;
use crate::records::{gak_outcome, gak_plan, gak_pruned, gak_snapshot, gak_step_def};

/// Save `snapshot` only if it is newer: refused `invalid-input`,
/// `terminal` (the run committed its outcome), `fence-stale` (a newer
/// owner saved), `stale-seq` (not above the stored seq), in that order.
///
/// # Safety
/// `k` is a live kernel; `snapshot` points to a snapshot whose pointers are
/// valid for reading (borrowed for the call).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_checkpoint_save_if_newer(
    k: *const gak_kernel,
    snapshot: *const gak_snapshot,
) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller's promises, per the header.
        let (k, snap) = unsafe {
            let snap = snapshot
                .as_ref()
                .ok_or_else(|| gak_host::Error::InvalidInput("the snapshot is NULL".into()))?;
            Scale::call().snapshot(snap)?;
            (kernel(k)?, snap.read()?)
        };
        k.checkpoint().save_if_newer(&snap)
    })
}

/// The persisted snapshot of `run_id` into `*out` (clear it with
/// `gak_snapshot_clear`), or `not-found`.
///
/// # Safety
/// `k` is a live kernel; `run_id` is valid for reading; `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_checkpoint_load(
    k: *const gak_kernel,
    run_id: gak_str,
    out: *mut gak_snapshot,
) -> *mut gak_error {
    guard(|| {
        Scale::call().str(run_id, "run_id")?;
        // SAFETY: the caller's promises, per the header.
        let (k, run_id, out) =
            unsafe { (kernel(k)?, run_id.text("run_id")?, Out::new(out, "load")?) };
        out.put(k.checkpoint().load(run_id)?.into());
        Ok(())
    })
}

/// Validate the DAG `steps[0..steps_len]` and plan a resume from
/// `snapshot` (NULL: nothing done yet) into `*out` (clear it with
/// `gak_plan_clear`): only the trusted completion set is skipped. A pure
/// call: it touches no store. Refused `invalid-plan` naming the culprit.
///
/// # Safety
/// `k` is a live kernel; `steps` valid for `steps_len` items (NULL when 0);
/// `snapshot` NULL or valid; `out` valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_checkpoint_build_plan(
    k: *const gak_kernel,
    steps: *const gak_step_def,
    steps_len: usize,
    snapshot: *const gak_snapshot,
    out: *mut gak_plan,
) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller's promises, per the header.
        let (k, steps, snap, out) = unsafe {
            let mut scale = Scale::plan();
            scale.step_defs(steps, steps_len, "steps")?;
            if let Some(snap) = snapshot.as_ref() {
                scale.snapshot(snap)?;
            }
            let steps = items(steps, steps_len, "steps")?
                .iter()
                .map(|s| s.read())
                .collect::<Result<Vec<_>, _>>()?;
            let snap = snapshot.as_ref().map(|s| s.read()).transpose()?;
            (kernel(k)?, steps, snap, Out::new(out, "build_plan")?)
        };
        out.put(k.checkpoint().build_plan(&steps, snap.as_ref())?.into());
        Ok(())
    })
}

/// Commit the terminal outcome of `run_id` (or of its `step`; NULL `ptr`:
/// the run itself) by the owner holding `fence`; the first accepted
/// outcome wins and is written to `*out` (clear it with
/// `gak_outcome_clear`). Refused `fence-stale`, `already-committed`,
/// `terminal`.
///
/// # Safety
/// `k` is a live kernel; the strings and `outcome.result` are valid for
/// reading; `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_commitgate_commit(
    k: *const gak_kernel,
    run_id: gak_str,
    step: gak_str,
    fence: u64,
    outcome: gak_outcome,
    out: *mut gak_outcome,
) -> *mut gak_error {
    guard(|| {
        Scale::call()
            .str(run_id, "run_id")?
            .str(step, "step")?
            .outcome(&outcome)?;
        // SAFETY: the caller's promises, per the header.
        let (k, run_id, step, outcome, out) = unsafe {
            (
                kernel(k)?,
                run_id.text("run_id")?,
                step.opt_text("step")?,
                outcome.read()?,
                Out::new(out, "commit")?,
            )
        };
        out.put(k.commitgate().commit(run_id, step, fence, &outcome)?.into());
        Ok(())
    })
}

/// The recorded outcome of `run_id` (or its `step`) into `*out`, or
/// `not-found`.
///
/// # Safety
/// As `gak_commitgate_commit`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_commitgate_read(
    k: *const gak_kernel,
    run_id: gak_str,
    step: gak_str,
    out: *mut gak_outcome,
) -> *mut gak_error {
    guard(|| {
        Scale::call().str(run_id, "run_id")?.str(step, "step")?;
        // SAFETY: the caller's promises, per the header.
        let (k, run_id, step, out) = unsafe {
            (
                kernel(k)?,
                run_id.text("run_id")?,
                step.opt_text("step")?,
                Out::new(out, "read")?,
            )
        };
        out.put(k.commitgate().read(run_id, step)?.into());
        Ok(())
    })
}

/// Remove at most `limit` (1–1000) records finished before `before` (ms),
/// oldest first, into `*out`. Pruned keys run again as new; fences never
/// go backwards.
///
/// # Safety
/// `k` is a live kernel; `out` valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_retention_prune(
    k: *const gak_kernel,
    before: u64,
    limit: u32,
    out: *mut gak_pruned,
) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller's promises, per the header.
        let (k, out) = unsafe { (kernel(k)?, Out::new(out, "prune")?) };
        out.put(k.retention().prune(before, limit)?.into());
        Ok(())
    })
}

/// What `gak_retention_prune` would remove now, removing nothing.
///
/// # Safety
/// As `gak_retention_prune`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_retention_prune_dry_run(
    k: *const gak_kernel,
    before: u64,
    limit: u32,
    out: *mut gak_pruned,
) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller's promises, per the header.
        let (k, out) = unsafe { (kernel(k)?, Out::new(out, "prune_dry_run")?) };
        out.put(k.retention().prune_dry_run(before, limit)?.into());
        Ok(())
    })
}
