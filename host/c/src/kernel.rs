//! Opening and closing a kernel, its options, the injectable clock.
use std::ffi::c_char;
use std::sync::Arc;
use std::time::Duration;

use gak_host::blocking::Kernel;
use gak_host::{Error, ManualClock, OpenError, Retry};

use crate::abi::{Out, gak_bytes, gak_str, guard, guard_value};
use crate::error::gak_error;

/// A kernel over one store. Share one handle between threads: every call
/// may run concurrently with any other (each takes a connection from the
/// kernel's pool). Free it with `gak_kernel_free` once no call is running.
#[allow(non_camel_case_types)]
pub struct gak_kernel {
    pub(crate) kernel: Kernel,
}

/// A clock that moves only when told to (for tests and conformance):
/// judge expiry by it with `gak_options.clock`. Thread-safe; a kernel keeps
/// its own reference, so the handle may be freed while kernels use it.
#[allow(non_camel_case_types)]
pub struct gak_clock {
    clock: Arc<ManualClock>,
}

/// Every setting of a kernel beyond its store; zero means "the default"
/// for each number. Passed by value: libgak keeps none of its pointers.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct gak_options {
    /// The store URL (as `gak_kernel_open`).
    pub store: gak_str,
    /// The clock judging expiry; NULL: the system clock.
    pub clock: *const gak_clock,
    /// Connections (each with its component instance) at most; 0: 16.
    pub max_connections: u32,
    /// How long a call waits at most, ms, for a free connection (then it
    /// fails with `storage`) and, on memory and PostgreSQL, each attempt
    /// for a lock another call's transaction holds (then the attempt is a
    /// conflict and runs again, up to `retry_attempts`; SQLite waits out
    /// its busy timeout, 5 s, instead); 0: 5 000.
    pub connection_wait_ms: u64,
    /// PostgreSQL: fail any statement running longer, ms; 0: no limit.
    pub statement_timeout_ms: u64,
    /// Runs of a call in all on store conflicts; 0: 10.
    pub retry_attempts: u32,
    /// The first pause between runs, ms; 0: 1.
    pub retry_base_ms: u64,
    /// The longest pause, ms; 0: 500.
    pub retry_max_ms: u64,
}

/// A kernel handle checked for NULL.
///
/// # Safety
/// `k` is NULL or a live kernel from `gak_kernel_open`.
pub(crate) unsafe fn kernel<'a>(k: *const gak_kernel) -> Result<&'a Kernel, Error> {
    // SAFETY: forwarded to the caller's promise.
    unsafe { k.as_ref() }
        .map(|k| &k.kernel)
        .ok_or_else(|| Error::InvalidInput("the kernel is NULL".into()))
}

/// Why `open` failed, as the contract's codes: a URL or option the caller
/// got wrong is `invalid-input`; a store or component that cannot be used
/// is `storage`.
fn open_error(e: OpenError) -> Error {
    match e {
        OpenError::UnknownStore(_) | OpenError::BadOption(_) => Error::InvalidInput(e.to_string()),
        other => Error::storage(other.to_string()),
    }
}

fn open(options: &gak_options) -> Result<Kernel, Error> {
    // SAFETY: the caller of `gak_kernel_open_with` passes a valid store string.
    let url = unsafe { options.store.text("store")? };
    let mut builder = gak_host::Kernel::builder().store(url);
    // SAFETY: NULL or a live clock, per the header.
    if let Some(clock) = unsafe { options.clock.as_ref() } {
        builder = builder.clock(clock.clock.clone());
    }
    if options.max_connections > 0 {
        builder = builder.max_connections(options.max_connections as usize);
    }
    if options.connection_wait_ms > 0 {
        builder = builder.connection_wait(Duration::from_millis(options.connection_wait_ms));
    }
    if options.statement_timeout_ms > 0 {
        builder = builder.statement_timeout(Duration::from_millis(options.statement_timeout_ms));
    }
    let default = Retry::default();
    let ms = |n: u64, d: Duration| if n > 0 { Duration::from_millis(n) } else { d };
    builder = builder.retry(Retry {
        attempts: if options.retry_attempts > 0 {
            options.retry_attempts
        } else {
            default.attempts
        },
        base: ms(options.retry_base_ms, default.base),
        max: ms(options.retry_max_ms, default.max),
    });
    builder.open_blocking().map_err(open_error)
}

/// Open a kernel on a store URL with the system clock and default settings:
/// `memory:`, `sqlite:PATH[?synchronous=normal]`,
/// `postgres://USER[:PASSWORD]@HOST:PORT/DB[?schema=NAME&clock=db&sslmode=…]`
/// — the Rust host's grammar. On success `*out` is the caller's, to free
/// with `gak_kernel_free`. Errors: `invalid-input` (unknown URL, bad
/// option), `storage` (the store or the component cannot be used); no
/// message shows a password.
///
/// # Safety
/// `url` is valid for reading; `out` is valid for writing one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_kernel_open(
    url: gak_str,
    out: *mut *mut gak_kernel,
) -> *mut gak_error {
    let options = gak_options {
        store: url,
        clock: std::ptr::null(),
        max_connections: 0,
        connection_wait_ms: 0,
        statement_timeout_ms: 0,
        retry_attempts: 0,
        retry_base_ms: 0,
        retry_max_ms: 0,
    };
    // SAFETY: forwarded to the caller's promise.
    unsafe { gak_kernel_open_with(options, out) }
}

/// Open a kernel with settings (see `gak_options`); as `gak_kernel_open`.
///
/// # Safety
/// `options.store` is valid for reading, `options.clock` is NULL or a live
/// clock; `out` is valid for writing one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_kernel_open_with(
    options: gak_options,
    out: *mut *mut gak_kernel,
) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller promises `out` valid for writes.
        let out = unsafe { Out::new(out, "gak_kernel_open")? };
        let kernel = open(&options)?;
        out.put(Box::into_raw(Box::new(gak_kernel { kernel })));
        Ok(())
    })
}

/// Close a kernel (NULL is ignored): its idle connections are closed. No
/// call on it may be running or start afterwards.
///
/// # Safety
/// `kernel` is NULL or a kernel from `gak_kernel_open`, freed once, with no
/// call on it running.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_kernel_free(kernel: *mut gak_kernel) {
    if kernel.is_null() {
        return;
    }
    guard_value((), || {
        // SAFETY: `gak_kernel_open_with` leaked this box; freed once.
        drop(unsafe { Box::from_raw(kernel) });
    });
}

/// A manual clock at `now` ms. The caller frees it with `gak_clock_free`.
#[unsafe(no_mangle)]
pub extern "C" fn gak_clock_manual(now: u64) -> *mut gak_clock {
    Box::into_raw(Box::new(gak_clock {
        clock: Arc::new(ManualClock::at(now)),
    }))
}

/// The clock's time, ms (0 for NULL).
///
/// # Safety
/// `clock` is NULL or a live clock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_clock_now(clock: *const gak_clock) -> u64 {
    use gak_host::Clock;
    // SAFETY: the caller passes NULL or a live clock.
    unsafe { clock.as_ref() }.map_or(0, |c| c.clock.now())
}

/// Set the clock to `to` ms; moving it backwards is refused
/// (`invalid-input`) and changes nothing.
///
/// # Safety
/// `clock` is NULL or a live clock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_clock_set(clock: *const gak_clock, to: u64) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller passes NULL or a live clock.
        let clock = unsafe { clock.as_ref() }
            .ok_or_else(|| Error::InvalidInput("the clock is NULL".into()))?;
        clock
            .clock
            .set(to)
            .map_err(|e| Error::InvalidInput(e.to_string()))
    })
}

/// Move the clock forward by `ms` (saturating).
///
/// # Safety
/// `clock` is NULL or a live clock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_clock_advance(clock: *const gak_clock, ms: u64) {
    // SAFETY: the caller passes NULL or a live clock.
    if let Some(c) = unsafe { clock.as_ref() } {
        c.clock.advance(ms);
    }
}

/// Free a clock handle (NULL is ignored); kernels using it keep it.
///
/// # Safety
/// `clock` is NULL or a clock from `gak_clock_manual`, freed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_clock_free(clock: *mut gak_clock) {
    if !clock.is_null() {
        // SAFETY: `gak_clock_manual` leaked this box; freed once.
        drop(unsafe { Box::from_raw(clock) });
    }
}

/// Drop the schema a `postgres://…?schema=NAME` URL names, with everything
/// in it (for test harnesses that make a schema per case). `invalid-input`
/// for a URL that is not PostgreSQL's.
///
/// # Safety
/// `url` is valid for reading.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_postgres_drop_schema(url: gak_str) -> *mut gak_error {
    guard(|| {
        // SAFETY: forwarded to the caller's promise.
        let url = unsafe { url.text("url")? };
        if gak_host::store::facts::store_kind(url)
            != Some(gak_host::store::facts::StoreKind::Postgres)
        {
            return Err(Error::InvalidInput("not a postgres:// URL".into()));
        }
        let backend = gak_host::store::postgres::PostgresBackend::parse(url).map_err(open_error)?;
        gak_host::blocking::run_future(backend.drop_schema()).map_err(Error::from)
    })
}

/// The version of libgak's C ABI this header declares. It changes (by hand,
/// here) whenever a program compiled against one `gak.h` cannot call a
/// libgak built from another: a function's signature, a struct's layout, an
/// enum's numbering. `GAK_ABI_LAYOUT` (generated with the structs) changes
/// by itself with any struct or number. A program compares both with the
/// linked library's (`gak_abi_version`, `gak_abi_layout`) before its first
/// call; the Go package does when it loads.
///
/// 1: the first versioned ABI (every enum numbered from 1, 0 is none).
/// 2: gak:kernel 0.4.0, the job queue: `gak_task` and `gak_task_seed` grew
/// fields, the error codes `not-due`, `group-full` and `not-dead` were
/// appended, and the calls `gak_taskboard_claim_batch`, `_complete_batch`,
/// `_fail`, `_revive`, `_set_group_limit` and `_get_group` were added;
/// later `_list_groups`, `_list_delayed`, `_list_group`, `_count`,
/// `_recount`, `gak_sideeffect_count` and `gak_sideeffect_recount` (added
/// calls and structs: a program built against the earlier header still
/// links and runs), and `gak_group_entry` grew the group's tasks by state
/// before 0.4.0 was released (`GAK_ABI_LAYOUT` tells the two apart).
pub const GAK_ABI_VERSION: u32 = 2;

/// The linked libgak's ABI version: `GAK_ABI_VERSION` of the header it was
/// built with.
#[unsafe(no_mangle)]
pub extern "C" fn gak_abi_version() -> u32 {
    GAK_ABI_VERSION
}

/// The linked libgak's layout fingerprint: `GAK_ABI_LAYOUT` of the header
/// it was built with.
#[unsafe(no_mangle)]
pub extern "C" fn gak_abi_layout() -> u32 {
    crate::records::GAK_ABI_LAYOUT
}

/// libgak's version (`0.4.0`): static, never freed.
#[unsafe(no_mangle)]
pub extern "C" fn gak_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The component every kernel runs (embedded at build time): static bytes,
/// never freed — for hosts that check a `--component FILE` is this one.
///
/// # Safety
/// `out` is valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_component(out: *mut gak_bytes) {
    // SAFETY: the caller promises `out` valid for writes; NULL is skipped.
    if let Some(out) = unsafe { out.as_mut() } {
        *out = gak_bytes {
            ptr: gak_host::COMPONENT_WASM.as_ptr(),
            len: gak_host::COMPONENT_WASM.len(),
        };
    }
}
