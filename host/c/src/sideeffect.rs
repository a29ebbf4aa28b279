//! sideeffect: the idempotency gate, its verdicts and reconciliation.
//! (The fenced sink is in `sink.rs`.)
use crate::abi::{Out, gak_bytes, gak_str, guard};
use crate::error::gak_error;
use crate::kernel::{gak_kernel, kernel};
use crate::limits::Scale;
use crate::records::{
    gak_acquired, gak_action, gak_key_counts, gak_key_info, gak_key_page, gak_key_state, gak_lease,
    gak_reconcile_claim, gak_resolution, gak_resolved, key_state,
};

/// The single atomic decision for `action` with a lease of `ttl` ms, into
/// `*out` (clear it with `gak_acquired_clear`): granted, replayed,
/// uncertain, in flight or contended (see `gak_acquired_kind`); refused
/// `key-reused` when the key was first used with another fingerprint.
///
/// # Safety
/// `k` is a live kernel; `action`'s strings valid for reading; `out` for
/// writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_sideeffect_acquire(
    k: *const gak_kernel,
    action: gak_action,
    ttl: u64,
    out: *mut gak_acquired,
) -> *mut gak_error {
    guard(|| {
        Scale::call().action(&action)?;
        // SAFETY: the caller's promises, per the header.
        let (k, action, out) = unsafe { (kernel(k)?, action.read()?, Out::new(out, "acquire")?) };
        out.put(gak_acquired::from_rust(
            k.sideeffect().acquire(&action, ttl)?,
        )?);
        Ok(())
    })
}

/// Record the key completed with `result`; the first recorded result into
/// `*out` (clear it with `gak_bytes_clear`). Refused by the triple check
/// (`resource-mismatch`, `fence-stale`, `not-holder`).
///
/// # Safety
/// `k` is a live kernel; the records and `result` valid for reading; `out`
/// for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_sideeffect_complete(
    k: *const gak_kernel,
    action: gak_action,
    lease: gak_lease,
    result: gak_bytes,
    out: *mut gak_bytes,
) -> *mut gak_error {
    guard(|| {
        Scale::call()
            .action(&action)?
            .lease(&lease)?
            .bytes(result, "result")?;
        // SAFETY: the caller's promises, per the header.
        let (k, action, lease, result, out) = unsafe {
            (
                kernel(k)?,
                action.read()?,
                lease.read()?,
                result.slice("result")?,
                Out::new(out, "complete")?,
            )
        };
        out.put(gak_bytes::owned(
            k.sideeffect().complete(&action, &lease, result)?,
        ));
        Ok(())
    })
}

/// Release the resource hold; the key's intent stays (an effect that
/// applied but was not recorded can never run twice).
///
/// # Safety
/// `k` is a live kernel; the records valid for reading.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_sideeffect_release(
    k: *const gak_kernel,
    action: gak_action,
    lease: gak_lease,
) -> *mut gak_error {
    guard(|| {
        Scale::call().action(&action)?.lease(&lease)?;
        // SAFETY: the caller's promises, per the header.
        let (k, action, lease) = unsafe { (kernel(k)?, action.read()?, lease.read()?) };
        k.sideeffect().release(&action, &lease)
    })
}

/// The attempt definitely did not apply: withdraw the intent and release
/// the hold; the key may be granted again.
///
/// # Safety
/// `k` is a live kernel; the records and `reason` valid for reading.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_sideeffect_abandon(
    k: *const gak_kernel,
    action: gak_action,
    lease: gak_lease,
    reason: gak_str,
) -> *mut gak_error {
    guard(|| {
        Scale::call()
            .action(&action)?
            .lease(&lease)?
            .str(reason, "reason")?;
        // SAFETY: the caller's promises, per the header.
        let (k, action, lease, reason) = unsafe {
            (
                kernel(k)?,
                action.read()?,
                lease.read()?,
                reason.text("reason")?,
            )
        };
        k.sideeffect().abandon(&action, &lease, reason)
    })
}

/// A qualification check, then hold and intent until now + `ttl`; the
/// renewed lease into `*out` (clear it with `gak_lease_clear`). Refused
/// `lease-expired`, `fence-stale`, `not-holder`, `resource-mismatch`.
///
/// # Safety
/// `k` is a live kernel; the records valid for reading; `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_sideeffect_renew(
    k: *const gak_kernel,
    action: gak_action,
    lease: gak_lease,
    ttl: u64,
    out: *mut gak_lease,
) -> *mut gak_error {
    guard(|| {
        Scale::call().action(&action)?.lease(&lease)?;
        // SAFETY: the caller's promises, per the header.
        let (k, action, lease, out) = unsafe {
            (
                kernel(k)?,
                action.read()?,
                lease.read()?,
                Out::new(out, "renew")?,
            )
        };
        out.put(k.sideeffect().renew(&action, &lease, ttl)?.into());
        Ok(())
    })
}

/// Mark the key uncertain with `reason` (the hold stays: release it).
///
/// # Safety
/// `k` is a live kernel; the records and `reason` valid for reading.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_sideeffect_mark_uncertain(
    k: *const gak_kernel,
    action: gak_action,
    lease: gak_lease,
    reason: gak_str,
) -> *mut gak_error {
    guard(|| {
        Scale::call()
            .action(&action)?
            .lease(&lease)?
            .str(reason, "reason")?;
        // SAFETY: the caller's promises, per the header.
        let (k, action, lease, reason) = unsafe {
            (
                kernel(k)?,
                action.read()?,
                lease.read()?,
                reason.text("reason")?,
            )
        };
        k.sideeffect().mark_uncertain(&action, &lease, reason)
    })
}

/// Claim the right to reconcile an uncertain key for `ttl` ms, into
/// `*out` (clear it with `gak_reconcile_claim_clear`). Refused
/// `not-uncertain`, `reconcile-taken`.
///
/// # Safety
/// `k` is a live kernel; `action` valid for reading; `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_sideeffect_begin_reconcile(
    k: *const gak_kernel,
    action: gak_action,
    ttl: u64,
    out: *mut gak_reconcile_claim,
) -> *mut gak_error {
    guard(|| {
        Scale::call().action(&action)?;
        // SAFETY: the caller's promises, per the header.
        let (k, action, out) = unsafe {
            (
                kernel(k)?,
                action.read()?,
                Out::new(out, "begin_reconcile")?,
            )
        };
        out.put(k.sideeffect().begin_reconcile(&action, ttl)?.into());
        Ok(())
    })
}

/// Record a reconciler's verdict (the first verdict wins), into `*out`
/// (clear it with `gak_resolved_clear`). Refused `not-uncertain`,
/// `unsafe-not-retryable`, `reconcile-taken`.
///
/// # Safety
/// `k` is a live kernel; the records valid for reading; `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_sideeffect_resolve_uncertain(
    k: *const gak_kernel,
    action: gak_action,
    resolution: gak_resolution,
    out: *mut gak_resolved,
) -> *mut gak_error {
    guard(|| {
        Scale::call().action(&action)?.resolution(&resolution)?;
        // SAFETY: the caller's promises, per the header.
        let (k, action, resolution, out) = unsafe {
            (
                kernel(k)?,
                action.read()?,
                resolution.read()?,
                Out::new(out, "resolve_uncertain")?,
            )
        };
        out.put(
            k.sideeffect()
                .resolve_uncertain(&action, &resolution)?
                .into(),
        );
        Ok(())
    })
}

/// The highest fence the sink `resource` has seen (0 when never written).
///
/// # Safety
/// `k` is a live kernel; `resource` valid for reading; `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_sideeffect_sink_seen(
    k: *const gak_kernel,
    resource: gak_str,
    out: *mut u64,
) -> *mut gak_error {
    guard(|| {
        Scale::call().str(resource, "resource")?;
        // SAFETY: the caller's promises, per the header.
        let (k, resource, out) = unsafe {
            (
                kernel(k)?,
                resource.text("resource")?,
                Out::new(out, "sink_seen")?,
            )
        };
        out.put(k.sideeffect().sink_seen(resource)?);
        Ok(())
    })
}

/// One page of side-effect keys into `*out` (clear it with
/// `gak_key_page_clear`): keys of `state` (`GAK_KEY_ANY`: all) after the
/// key `after` (NULL `ptr`: from the start), at most `limit` (1–1000).
///
/// # Safety
/// `k` is a live kernel; `after` valid for reading; `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_sideeffect_list(
    k: *const gak_kernel,
    state: gak_key_state,
    after: gak_str,
    limit: u32,
    out: *mut gak_key_page,
) -> *mut gak_error {
    guard(|| {
        Scale::call().str(after, "after")?;
        // SAFETY: the caller's promises, per the header.
        let (k, after, out) =
            unsafe { (kernel(k)?, after.opt_text("after")?, Out::new(out, "list")?) };
        out.put(
            k.sideeffect()
                .list(key_state(state, "state")?, after, limit)?
                .into(),
        );
        Ok(())
    })
}

/// The key as `list` shows it into `*out` (clear it with
/// `gak_key_info_clear`), or `not-found`.
///
/// # Safety
/// `k` is a live kernel; `key` valid for reading; `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_sideeffect_get(
    k: *const gak_kernel,
    key: gak_str,
    out: *mut gak_key_info,
) -> *mut gak_error {
    guard(|| {
        Scale::call().str(key, "key")?;
        // SAFETY: the caller's promises, per the header.
        let (k, key, out) = unsafe { (kernel(k)?, key.text("key")?, Out::new(out, "get")?) };
        out.put(k.sideeffect().get(key)?.into());
        Ok(())
    })
}

/// How many keys are in each state as `list` shows them (an expired intent
/// is uncertain), and since when the oldest uncertain key is, into `*out`
/// (plain values: nothing to clear). `exact` is false on a store a format-1
/// kernel wrote until `gak_sideeffect_recount` has visited its keys.
///
/// # Safety
/// `k` is a live kernel; `out` valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_sideeffect_count(
    k: *const gak_kernel,
    out: *mut gak_key_counts,
) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller's promises, per the header.
        let (k, out) = unsafe { (kernel(k)?, Out::new(out, "count")?) };
        out.put(k.sideeffect().count()?.into());
        Ok(())
    })
}

/// Count up to `limit` (1–1000) of the keys a format-1 kernel wrote that
/// `gak_sideeffect_count` does not cover yet; `*done` says whether every
/// key is counted now.
///
/// # Safety
/// `k` is a live kernel; `done` valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_sideeffect_recount(
    k: *const gak_kernel,
    limit: u32,
    done: *mut bool,
) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller's promises, per the header.
        let (k, done) = unsafe { (kernel(k)?, Out::new(done, "recount")?) };
        done.put(k.sideeffect().recount(limit)?);
        Ok(())
    })
}
