//! taskboard: a board of tasks with dependencies, claimed by token.
use crate::abi::{Out, clearing, gak_str, guard, items, owned_list, take_list};
use crate::error::gak_error;
use crate::kernel::{gak_kernel, kernel};
use crate::limits::Scale;
use crate::records::{
    gak_completion, gak_completion_result, gak_group_info, gak_group_page, gak_task,
    gak_task_counts, gak_task_page, gak_task_seed, gak_task_state, task_state,
};

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

/// The tasks `gak_taskboard_claim_batch` granted, in claim order, each with
/// its token: libgak's until `gak_task_list_clear`.
#[repr(C)]
#[derive(Debug)]
#[allow(non_camel_case_types)]
pub struct gak_task_list {
    /// The first task (NULL when `len` is 0).
    pub items: *mut gak_task,
    /// How many tasks.
    pub len: usize,
}

/// The answers of `gak_taskboard_complete_batch`, one per item in the order
/// given: libgak's until `gak_completion_result_list_clear`.
#[repr(C)]
#[derive(Debug)]
#[allow(non_camel_case_types)]
pub struct gak_completion_result_list {
    /// The first answer (NULL when `len` is 0).
    pub items: *mut gak_completion_result,
    /// How many answers.
    pub len: usize,
}

/// Claim up to `limit` (1-1000) ready tasks for `agent` for `ttl` ms, in
/// claim order (priority, then seed order; a full group's tasks are
/// skipped), into `*out` (clear it with `gak_task_list_clear`), each with
/// its token; none ready is an empty list (`len` 0, `items` NULL).
///
/// # Safety
/// `k` is a live kernel; `agent` valid for reading; `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_taskboard_claim_batch(
    k: *const gak_kernel,
    agent: gak_str,
    ttl: u64,
    limit: u32,
    out: *mut gak_task_list,
) -> *mut gak_error {
    guard(|| {
        Scale::call().str(agent, "agent")?;
        // SAFETY: the caller's promises, per the header.
        let (k, agent, out) = unsafe {
            (
                kernel(k)?,
                agent.text("agent")?,
                Out::new(out, "claim_batch")?,
            )
        };
        let tasks = k.taskboard().claim_batch(agent, ttl, limit)?;
        let (items, len) = owned_list(tasks.into_iter().map(gak_task::from).collect());
        out.put(gak_task_list { items, len });
        Ok(())
    })
}

/// Complete `items[0..len]` (1-1000 distinct ids) in one transaction; each
/// item's answer, in order, into `*out` (clear it with
/// `gak_completion_result_list_clear`): `completed`, or `not-found` /
/// `lease-lost` as `gak_taskboard_complete` would have refused it alone.
/// A malformed call is refused whole (`invalid-input`; nothing written).
///
/// # Safety
/// `k` is a live kernel; `items` valid for `len` items (NULL when 0);
/// `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_taskboard_complete_batch(
    k: *const gak_kernel,
    items: *const gak_completion,
    len: usize,
    out: *mut gak_completion_result_list,
) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller's promises, per the header.
        let (k, completions, out) = unsafe {
            Scale::call().completions(items, len, "items")?;
            let completions = self::items(items, len, "items")?
                .iter()
                .map(|c| c.read())
                .collect::<Result<Vec<_>, _>>()?;
            (kernel(k)?, completions, Out::new(out, "complete_batch")?)
        };
        let answers = k.taskboard().complete_batch(&completions)?;
        let (items, len) = owned_list(
            answers
                .into_iter()
                .map(gak_completion_result::from)
                .collect(),
        );
        out.put(gak_completion_result_list { items, len });
        Ok(())
    })
}

/// The handler of a claimed task failed: record `reason` as its
/// `last_error`, clear its lease; it is due again `retry_after` ms from
/// now (`has_retry_after` false: at once), or turns dead when its attempts
/// are used up. Only its current token may (`lease-lost` otherwise); again
/// with the token that failed it is idempotent. The task into `*out`
/// (clear it with `gak_task_clear`).
///
/// # Safety
/// `k` is a live kernel; the strings valid for reading; `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_taskboard_fail(
    k: *const gak_kernel,
    id: gak_str,
    token: gak_str,
    reason: gak_str,
    has_retry_after: bool,
    retry_after: u64,
    out: *mut gak_task,
) -> *mut gak_error {
    guard(|| {
        Scale::call()
            .str(id, "id")?
            .str(token, "token")?
            .str(reason, "reason")?;
        // SAFETY: the caller's promises, per the header.
        let (k, id, token, reason, out) = unsafe {
            (
                kernel(k)?,
                id.text("id")?,
                token.text("token")?,
                reason.text("reason")?,
                Out::new(out, "fail")?,
            )
        };
        let retry_after = has_retry_after.then_some(retry_after);
        out.put(k.taskboard().fail(id, token, reason, retry_after)?.into());
        Ok(())
    })
}

/// Bring a dead task back to open with its attempts reset (`not-dead`
/// when it is not dead); the task into `*out` (clear it with
/// `gak_task_clear`).
///
/// # Safety
/// `k` is a live kernel; `id` valid for reading; `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_taskboard_revive(
    k: *const gak_kernel,
    id: gak_str,
    out: *mut gak_task,
) -> *mut gak_error {
    guard(|| {
        Scale::call().str(id, "id")?;
        // SAFETY: the caller's promises, per the header.
        let (k, id, out) = unsafe { (kernel(k)?, id.text("id")?, Out::new(out, "revive")?) };
        out.put(k.taskboard().revive(id)?.into());
        Ok(())
    })
}

/// At most `limit` (1-100,000) live claims for `group` at once
/// (`has_limit` false removes the limit).
///
/// # Safety
/// `k` is a live kernel; `group` valid for reading.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_taskboard_set_group_limit(
    k: *const gak_kernel,
    group: gak_str,
    has_limit: bool,
    limit: u32,
) -> *mut gak_error {
    guard(|| {
        Scale::call().str(group, "group")?;
        // SAFETY: the caller's promises, per the header.
        let (k, group) = unsafe { (kernel(k)?, group.text("group")?) };
        k.taskboard()
            .set_group_limit(group, has_limit.then_some(limit))
    })
}

/// `group`'s limit and its live claims, counted exactly, into `*out` (a
/// plain struct: nothing to clear); `not-found` when the group has no
/// limit.
///
/// # Safety
/// `k` is a live kernel; `group` valid for reading; `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_taskboard_get_group(
    k: *const gak_kernel,
    group: gak_str,
    out: *mut gak_group_info,
) -> *mut gak_error {
    guard(|| {
        Scale::call().str(group, "group")?;
        // SAFETY: the caller's promises, per the header.
        let (k, group, out) = unsafe {
            (
                kernel(k)?,
                group.text("group")?,
                Out::new(out, "get_group")?,
            )
        };
        out.put(k.taskboard().get_group(group)?.into());
        Ok(())
    })
}

/// One page of the tasks of `group` (any state) into `*out` (clear it with
/// `gak_task_page_clear`): by id, after the id `after` (NULL `ptr`: from
/// the start), at most `limit` (1–1000), never a token.
///
/// # Safety
/// `k` is a live kernel; `group` and `after` valid for reading; `out` for
/// writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_taskboard_list_group(
    k: *const gak_kernel,
    group: gak_str,
    after: gak_str,
    limit: u32,
    out: *mut gak_task_page,
) -> *mut gak_error {
    guard(|| {
        Scale::call().str(group, "group")?.str(after, "after")?;
        // SAFETY: the caller's promises, per the header.
        let (k, group, after, out) = unsafe {
            (
                kernel(k)?,
                group.text("group")?,
                after.opt_text("after")?,
                Out::new(out, "list_group")?,
            )
        };
        out.put(k.taskboard().list_group(group, after, limit)?.into());
        Ok(())
    })
}

/// How many tasks the board holds in each stored state into `*out` (plain
/// values: nothing to clear). `exact` is false on a board a format-1 kernel
/// wrote until `gak_taskboard_recount` has visited its tasks.
///
/// # Safety
/// `k` is a live kernel; `out` valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_taskboard_count(
    k: *const gak_kernel,
    out: *mut gak_task_counts,
) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller's promises, per the header.
        let (k, out) = unsafe { (kernel(k)?, Out::new(out, "count")?) };
        out.put(k.taskboard().count()?.into());
        Ok(())
    })
}

/// Count up to `limit` (1–1000) of the tasks a format-1 kernel wrote that
/// `gak_taskboard_count` does not cover yet; `*done` says whether every
/// task is counted now.
///
/// # Safety
/// `k` is a live kernel; `done` valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_taskboard_recount(
    k: *const gak_kernel,
    limit: u32,
    done: *mut bool,
) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller's promises, per the header.
        let (k, done) = unsafe { (kernel(k)?, Out::new(done, "recount")?) };
        done.put(k.taskboard().recount(limit)?);
        Ok(())
    })
}

/// One page of the groups the board knows (a limit, a claim or a ready
/// task) into `*out` (clear it with `gak_group_page_clear`): by name, after
/// the name `after` (NULL `ptr`: from the start), at most `limit` (1–1000),
/// each with its limit (`has_limit`) and exact live claims.
///
/// # Safety
/// `k` is a live kernel; `after` valid for reading; `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_taskboard_list_groups(
    k: *const gak_kernel,
    after: gak_str,
    limit: u32,
    out: *mut gak_group_page,
) -> *mut gak_error {
    guard(|| {
        Scale::call().str(after, "after")?;
        // SAFETY: the caller's promises, per the header.
        let (k, after, out) = unsafe {
            (
                kernel(k)?,
                after.opt_text("after")?,
                Out::new(out, "list_groups")?,
            )
        };
        out.put(k.taskboard().list_groups(after, limit)?.into());
        Ok(())
    })
}

/// One page of the tasks waiting for their `not-before` into `*out` (clear
/// it with `gak_task_page_clear`): by due time then seed order, after the
/// cursor `after` (a previous page's `next`; NULL `ptr`: from the start), at
/// most `limit` (1–1000). Never a token.
///
/// # Safety
/// `k` is a live kernel; `after` valid for reading; `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_taskboard_list_delayed(
    k: *const gak_kernel,
    after: gak_str,
    limit: u32,
    out: *mut gak_task_page,
) -> *mut gak_error {
    guard(|| {
        Scale::call().str(after, "after")?;
        // SAFETY: the caller's promises, per the header.
        let (k, after, out) = unsafe {
            (
                kernel(k)?,
                after.opt_text("after")?,
                Out::new(out, "list_delayed")?,
            )
        };
        out.put(k.taskboard().list_delayed(after, limit)?.into());
        Ok(())
    })
}

/// Free what libgak put into the task list `x` (every task, then the
/// list), and zero it (NULL, or a list cleared before, is harmless).
///
/// # Safety
/// `x` is NULL or a `gak_task_list` libgak filled and nobody cleared since.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_task_list_clear(x: *mut gak_task_list) {
    clearing(x, |x| {
        // SAFETY: libgak made the list by `owned_list` and every task in it.
        for mut task in unsafe { take_list(x.items, x.len) } {
            // SAFETY: as above.
            unsafe { task.free() };
        }
        x.items = std::ptr::null_mut();
        x.len = 0;
    });
}

/// Free what libgak put into the answer list `x` (every answer, then the
/// list), and zero it (NULL, or a list cleared before, is harmless).
///
/// # Safety
/// `x` is NULL or a `gak_completion_result_list` libgak filled and nobody
/// cleared since.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_completion_result_list_clear(x: *mut gak_completion_result_list) {
    clearing(x, |x| {
        // SAFETY: libgak made the list by `owned_list` and every answer in it.
        for mut answer in unsafe { take_list(x.items, x.len) } {
            // SAFETY: as above.
            unsafe { answer.free() };
        }
        x.items = std::ptr::null_mut();
        x.len = 0;
    });
}
