//! taskboard: a board of tasks with dependencies, claimed by token.
use crate::abi::{Out, gak_str, guard, items};
use crate::error::gak_error;
use crate::kernel::{gak_kernel, kernel};
use crate::limits::Scale;
use crate::records::{gak_task, gak_task_page, gak_task_seed, gak_task_state, task_state};

/// Load `tasks[0..len]` onto the board (idempotent; re-seeding a task
/// overwrites its content and clears its lease, keeping its fence).
///
/// # Safety
/// `k` is a live kernel; `tasks` valid for `len` items (NULL when 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_taskboard_seed(
    k: *const gak_kernel,
    tasks: *const gak_task_seed,
    len: usize,
) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller's promises, per the header.
        let (k, seeds) = unsafe {
            Scale::call().task_seeds(tasks, len, "tasks")?;
            let seeds = items(tasks, len, "tasks")?
                .iter()
                .map(|t| t.read())
                .collect::<Result<Vec<_>, _>>()?;
            (kernel(k)?, seeds)
        };
        k.taskboard().seed(&seeds)
    })
}

/// One page of the board into `*out` (clear it with `gak_task_page_clear`):
/// tasks of `state` (`GAK_TASK_ANY`: all) after the id `after` (NULL
/// `ptr`: from the start), at most `limit` (1–1000). Never a token.
///
/// # Safety
/// `k` is a live kernel; `after` valid for reading; `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_taskboard_list(
    k: *const gak_kernel,
    state: gak_task_state,
    after: gak_str,
    limit: u32,
    out: *mut gak_task_page,
) -> *mut gak_error {
    guard(|| {
        Scale::call().str(after, "after")?;
        // SAFETY: the caller's promises, per the header.
        let (k, after, out) =
            unsafe { (kernel(k)?, after.opt_text("after")?, Out::new(out, "list")?) };
        let state = task_state(state, "state")?;
        out.put(k.taskboard().list(state, after, limit)?.into());
        Ok(())
    })
}

/// The task `id` (without its token) into `*out`, or `not-found`.
///
/// # Safety
/// `k` is a live kernel; `id` valid for reading; `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_taskboard_get(
    k: *const gak_kernel,
    id: gak_str,
    out: *mut gak_task,
) -> *mut gak_error {
    guard(|| {
        Scale::call().str(id, "id")?;
        // SAFETY: the caller's promises, per the header.
        let (k, id, out) = unsafe { (kernel(k)?, id.text("id")?, Out::new(out, "get")?) };
        out.put(k.taskboard().get(id)?.into());
        Ok(())
    })
}

/// Claim `id` for `agent` for `ttl` ms; the claimed task, with its token,
/// into `*out` (clear it with `gak_task_clear`). Refused `not-found`,
/// `terminal`, `deps-pending`, `taken`, in that order.
///
/// # Safety
/// `k` is a live kernel; the strings valid for reading; `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_taskboard_claim(
    k: *const gak_kernel,
    id: gak_str,
    agent: gak_str,
    ttl: u64,
    out: *mut gak_task,
) -> *mut gak_error {
    guard(|| {
        Scale::call().str(id, "id")?.str(agent, "agent")?;
        // SAFETY: the caller's promises, per the header.
        let (k, id, agent, out) = unsafe {
            (
                kernel(k)?,
                id.text("id")?,
                agent.text("agent")?,
                Out::new(out, "claim")?,
            )
        };
        out.put(k.taskboard().claim(id, agent, ttl)?.into());
        Ok(())
    })
}

/// Claim the first-seeded ready task for `agent`: `*found` says whether
/// one was; if so it is in `*out`, with its token (clear it with
/// `gak_task_clear`); if not, `*out` is untouched.
///
/// # Safety
/// `k` is a live kernel; `agent` valid for reading; `out` and `found` for
/// writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_taskboard_claim_next(
    k: *const gak_kernel,
    agent: gak_str,
    ttl: u64,
    out: *mut gak_task,
    found: *mut bool,
) -> *mut gak_error {
    guard(|| {
        Scale::call().str(agent, "agent")?;
        // SAFETY: the caller's promises, per the header.
        let (k, agent, out, found) = unsafe {
            (
                kernel(k)?,
                agent.text("agent")?,
                Out::new(out, "claim_next")?,
                Out::new(found, "claim_next found")?,
            )
        };
        match k.taskboard().claim_next(agent, ttl)? {
            Some(task) => {
                out.put(task.into());
                found.put(true);
            }
            None => found.put(false),
        }
        Ok(())
    })
}

/// Return a claimed task to open; only its current token may
/// (`lease-lost` otherwise).
///
/// # Safety
/// `k` is a live kernel; the strings valid for reading.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_taskboard_release(
    k: *const gak_kernel,
    id: gak_str,
    token: gak_str,
) -> *mut gak_error {
    guard(|| {
        Scale::call().str(id, "id")?.str(token, "token")?;
        // SAFETY: the caller's promises, per the header.
        let (k, id, token) = unsafe { (kernel(k)?, id.text("id")?, token.text("token")?) };
        k.taskboard().release(id, token)
    })
}

/// Mark a claimed task done; only its current token may (`lease-lost`
/// otherwise); again with the token that completed it is idempotent.
///
/// # Safety
/// `k` is a live kernel; the strings valid for reading.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_taskboard_complete(
    k: *const gak_kernel,
    id: gak_str,
    token: gak_str,
) -> *mut gak_error {
    guard(|| {
        Scale::call().str(id, "id")?.str(token, "token")?;
        // SAFETY: the caller's promises, per the header.
        let (k, id, token) = unsafe { (kernel(k)?, id.text("id")?, token.text("token")?) };
        k.taskboard().complete(id, token)
    })
}

/// Extend a live claim to now + `ttl` (`lease-lost` when the token is not
/// current or the claim expired); the task into `*out`.
///
/// # Safety
/// `k` is a live kernel; the strings valid for reading; `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_taskboard_renew(
    k: *const gak_kernel,
    id: gak_str,
    token: gak_str,
    ttl: u64,
    out: *mut gak_task,
) -> *mut gak_error {
    guard(|| {
        Scale::call().str(id, "id")?.str(token, "token")?;
        // SAFETY: the caller's promises, per the header.
        let (k, id, token, out) = unsafe {
            (
                kernel(k)?,
                id.text("id")?,
                token.text("token")?,
                Out::new(out, "renew")?,
            )
        };
        out.put(k.taskboard().renew(id, token, ttl)?.into());
        Ok(())
    })
}
