//! The side-effect runner for C (`host/HOSTS.md`, "The side-effect
//! runner"): acquire → body (its hold renewed every ttl / 3 from a thread
//! of libgak's) → complete, with the body's failures turned into
//! `uncertain` or `abandon`. It is the Rust host's `blocking::Runner`.
use std::ffi::c_void;
use std::time::Duration;

use gak_host::blocking::Runner;
use gak_host::{BodyError, Error, Heartbeat, Lease, Ran, RunError};

use crate::abi::{Out, gak_bytes, gak_str, guard};
use crate::error::gak_error;
use crate::kernel::{gak_kernel, kernel};
use crate::limits::Scale;
use crate::records::{gak_action, gak_lease};

/// What an effect body returns: `GAK_BODY_OK`, `GAK_BODY_FAILED` (it may
/// have applied: the key turns uncertain) or `GAK_BODY_NOT_APPLIED` (it
/// surely did not: the attempt is abandoned). Any other number counts as
/// `GAK_BODY_FAILED`.
#[allow(non_camel_case_types)]
pub type gak_body_status = i32;
/// The effect happened; its result is what `gak_effect_set_result` set.
pub const GAK_BODY_OK: gak_body_status = 0;
/// The effect may or may not have happened.
pub const GAK_BODY_FAILED: gak_body_status = 1;
/// The effect surely did not happen.
pub const GAK_BODY_NOT_APPLIED: gak_body_status = 2;

/// How a run ended (`GAK_RAN_*`).
#[allow(non_camel_case_types)]
pub type gak_ran_kind = u32;
/// The body ran now; `result` was recorded.
pub const GAK_RAN_APPLIED: gak_ran_kind = 1;
/// The key completed before: `result` is the first result; no body call.
pub const GAK_RAN_REPLAYED: gak_ran_kind = 2;
/// The key is uncertain (`reason`): reconcile it; no body call.
pub const GAK_RAN_UNCERTAIN: gak_ran_kind = 3;
/// Another attempt is live; no body call.
pub const GAK_RAN_IN_FLIGHT: gak_ran_kind = 4;
/// Another key holds the resource `until`; no body call.
pub const GAK_RAN_CONTENDED: gak_ran_kind = 5;
/// The body failed (`reason`: its message): the key was marked uncertain
/// and the resource released.
pub const GAK_RAN_BODY_FAILED: gak_ran_kind = 6;
/// The body reported not applied (`reason`): the attempt was abandoned.
pub const GAK_RAN_NOT_APPLIED: gak_ran_kind = 7;

/// How a run ended; clear it with `gak_ran_clear`.
#[repr(C)]
#[derive(Debug)]
#[allow(non_camel_case_types)]
pub struct gak_ran {
    /// `GAK_RAN_*`.
    pub kind: gak_ran_kind,
    /// Applied / replayed: the recorded result.
    pub result: gak_bytes,
    /// Uncertain: the kernel's reason; body failed / not applied: the
    /// body's message (`gak_effect_set_error`), if any.
    pub reason: gak_str,
    /// Contended: until when.
    pub until: u64,
}

/// The running body's lease and heartbeat. Valid only inside the body it
/// was passed to (any thread may read it while the body runs).
#[allow(non_camel_case_types)]
pub struct gak_effect {
    heartbeat: *const Heartbeat,
    result: Vec<u8>,
    error: Option<String>,
}

/// An effect body: `effect` gives its lease and heartbeat, takes its
/// result; the return value is a `gak_body_status`.
#[allow(non_camel_case_types)]
pub type gak_effect_body =
    Option<unsafe extern "C" fn(user: *mut c_void, effect: *mut gak_effect) -> gak_body_status>;

/// # Safety
/// `effect` is NULL or the running body's handle.
unsafe fn effect<'a>(effect: *const gak_effect) -> Result<(&'a gak_effect, &'a Heartbeat), Error> {
    // SAFETY: the caller passes the live handle, whose heartbeat outlives
    // the body.
    let e = unsafe { effect.as_ref() }
        .ok_or_else(|| Error::InvalidInput("the effect is NULL".into()))?;
    // SAFETY: as above.
    Ok((e, unsafe { &*e.heartbeat }))
}

/// Run `action` through the side-effect gate with leases of `ttl` ms
/// (renewed every ttl / 3 while the body runs), into `*out`. The body is
/// called at most once, on this thread, and never for a key that
/// completed, is uncertain, in flight or contended. An error is returned
/// only when the kernel refused or failed (then, if the body already ran,
/// the key turns uncertain when its intent expires: never a second run).
///
/// # Safety
/// `k` is a live kernel; `action` valid for reading; `body` callable with
/// `user` on this thread; `out` valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_run_effect(
    k: *const gak_kernel,
    action: gak_action,
    ttl: u64,
    body: gak_effect_body,
    user: *mut c_void,
    out: *mut gak_ran,
) -> *mut gak_error {
    guard(|| {
        Scale::call().action(&action)?;
        // SAFETY: the caller's promises, per the header.
        let (k, action, out) =
            unsafe { (kernel(k)?, action.read()?, Out::new(out, "run_effect")?) };
        let body = body.ok_or_else(|| Error::InvalidInput("the body is NULL".into()))?;
        let runner = Runner::new(k, ttl);
        let ran = runner.run_with_heartbeat(&action, |_lease: &Lease, heartbeat: &Heartbeat| {
            let mut handle = gak_effect {
                heartbeat,
                result: Vec::new(),
                error: None,
            };
            // SAFETY: the caller promised `body` callable with `user`.
            let status = unsafe { body(user, &mut handle) };
            let message = handle.error.take().unwrap_or_default();
            match status {
                GAK_BODY_OK => Ok(std::mem::take(&mut handle.result)),
                GAK_BODY_NOT_APPLIED => Err(BodyError::NotApplied(message)),
                _ => Err(BodyError::Failed(message)),
            }
        });
        let mut answer = gak_ran {
            kind: 0,
            result: gak_bytes::NONE,
            reason: gak_str::NONE,
            until: 0,
        };
        match ran {
            Ok(Ran::Applied(r)) => {
                (answer.kind, answer.result) = (GAK_RAN_APPLIED, gak_bytes::owned(r))
            }
            Ok(Ran::Replayed(r)) => {
                (answer.kind, answer.result) = (GAK_RAN_REPLAYED, gak_bytes::owned(r))
            }
            Ok(Ran::Uncertain(why)) => {
                (answer.kind, answer.reason) = (GAK_RAN_UNCERTAIN, gak_str::owned(why))
            }
            Ok(Ran::InFlight) => answer.kind = GAK_RAN_IN_FLIGHT,
            Ok(Ran::Contended(until)) => (answer.kind, answer.until) = (GAK_RAN_CONTENDED, until),
            Ok(other) => {
                return Err(Error::storage(format!(
                    "the runner answered {other:?}, unknown to this libgak"
                )));
            }
            Err(RunError::Uncertain(m)) => {
                (answer.kind, answer.reason) = (GAK_RAN_BODY_FAILED, gak_str::owned(m))
            }
            Err(RunError::NotApplied(m)) => {
                (answer.kind, answer.reason) = (GAK_RAN_NOT_APPLIED, gak_str::owned(m))
            }
            Err(RunError::Kernel(e)) => return Err(e),
        }
        out.put(answer);
        Ok(())
    })
}

/// The body's current lease (as last renewed) into `*out` (clear it with
/// `gak_lease_clear`).
///
/// # Safety
/// `effect` is the running body's handle; `out` valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_effect_lease(
    effect: *const gak_effect,
    out: *mut gak_lease,
) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller's promises, per the header.
        let ((_, heartbeat), out) = unsafe { (self::effect(effect)?, Out::new(out, "lease")?) };
        out.put(heartbeat.lease().into());
        Ok(())
    })
}

/// `lease-lost` once a renewal was refused (the body should stop and
/// return), NULL while the lease holds.
///
/// # Safety
/// `effect` is the running body's handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_effect_check(effect: *const gak_effect) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller's promise, per the header.
        let (_, heartbeat) = unsafe { self::effect(effect)? };
        heartbeat.check()
    })
}

/// Renewals that succeeded so far (0 for NULL).
///
/// # Safety
/// `effect` is NULL or the running body's handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_effect_renewals(effect: *const gak_effect) -> u64 {
    crate::abi::guard_value(0, || {
        // SAFETY: the caller's promise, per the header.
        unsafe { self::effect(effect) }.map_or(0, |(_, h)| h.renewals())
    })
}

/// Block until the next renewal or the loss of the lease, at most
/// `timeout_ms`; false on timeout.
///
/// # Safety
/// `effect` is NULL or the running body's handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_effect_wait(effect: *const gak_effect, timeout_ms: u64) -> bool {
    crate::abi::guard_value(false, || {
        // SAFETY: the caller's promise, per the header.
        unsafe { self::effect(effect) }
            .is_ok_and(|(_, h)| h.wait_changed(Duration::from_millis(timeout_ms)))
    })
}

/// Set the result `complete` records when the body returns `GAK_BODY_OK`
/// (copied; default empty).
///
/// # Safety
/// `effect` is the running body's handle; `result` valid for reading.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_effect_set_result(
    effect: *mut gak_effect,
    result: gak_bytes,
) -> *mut gak_error {
    guard(|| {
        // The result goes to `complete`: refused here, before it is copied.
        Scale::call().bytes(result, "result")?;
        // SAFETY: the caller's promises, per the header.
        let (e, result) = unsafe {
            (
                effect
                    .as_mut()
                    .ok_or_else(|| Error::InvalidInput("the effect is NULL".into()))?,
                result.slice("result")?,
            )
        };
        e.result = result.to_vec();
        Ok(())
    })
}

/// Say why the body failed (copied): `gak_ran.reason` reports it.
///
/// # Safety
/// `effect` is the running body's handle; `message` valid for reading.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_effect_set_error(
    effect: *mut gak_effect,
    message: gak_str,
) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller's promises, per the header.
        let (e, message) = unsafe {
            (
                effect
                    .as_mut()
                    .ok_or_else(|| Error::InvalidInput("the effect is NULL".into()))?,
                message.text("message")?,
            )
        };
        e.error = Some(message.to_owned());
        Ok(())
    })
}

/// Free what a run's answer holds (NULL ok).
///
/// # Safety
/// `ran` is NULL or filled by libgak and not cleared since.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_ran_clear(ran: *mut gak_ran) {
    // SAFETY: NULL or filled by libgak, per the header.
    if let Some(r) = unsafe { ran.as_mut() } {
        crate::abi::guard_value((), || {
            // SAFETY: made by libgak.
            unsafe {
                r.result.free();
                r.reason.free();
            }
            r.kind = 0;
            r.until = 0;
        });
    }
}
