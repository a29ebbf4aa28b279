//! The fenced sink (`write-fenced`) and the body's access to the call's
//! transaction: the `downstream` table, and the binding's own SQL.
use std::ffi::c_void;

use gak_host::blocking::Downstream;
use gak_host::rusqlite;
use gak_host::tokio_postgres::types::ToSql;
use gak_host::{Error, SinkError};

use crate::abi::{Out, gak_str, guard, items, owned_list, take_list};
use crate::error::gak_error;
use crate::kernel::{gak_kernel, kernel};
use crate::limits::Scale;

/// A body's view of the call's open transaction. Valid only inside the
/// body it was passed to, on the thread that called it: everything written
/// through it commits or rolls back with the call.
#[allow(non_camel_case_types)]
pub struct gak_downstream {
    /// The `Downstream` of the running body (lifetimes erased: it never
    /// outlives the body's frame).
    down: *mut c_void,
}

/// A body run inside a call's transaction: return 0 for success, anything
/// else for failure (the whole transaction then rolls back). It may run
/// more than once when the store reports a conflict, so it must be
/// re-runnable; the call answers what its last run returned. It must not
/// call into the same kernel (refused with `invalid-input` on its own
/// thread; a thread it starts and waits for waits for the body's locks —
/// each attempt at most the kernel's connection wait on memory and
/// PostgreSQL, SQLite's busy timeout on SQLite, as many attempts as the
/// retry policy allows — then fails with `storage`), nor keep `down` after
/// returning.
#[allow(non_camel_case_types)]
pub type gak_sink_body =
    Option<unsafe extern "C" fn(user: *mut c_void, down: *mut gak_downstream) -> i32>;

/// Rows a query returned: `rows * columns` cells, row after row. A cell's
/// `ptr` is NULL for SQL NULL; every other value is text (numbers as their
/// decimal form).
#[repr(C)]
#[derive(Debug)]
#[allow(non_camel_case_types)]
pub struct gak_rows {
    /// How many rows.
    pub rows: usize,
    /// Cells per row (0 when there are no rows).
    pub columns: usize,
    /// The cells, row-major.
    pub cells: *mut gak_str,
}

/// Run the C body on `down`.
///
/// # Safety
/// `body` is callable with `user` on this thread, per the header.
unsafe fn call_body(
    body: unsafe extern "C" fn(*mut c_void, *mut gak_downstream) -> i32,
    user: *mut c_void,
    down: &mut Downstream<'_, '_>,
) -> i32 {
    let mut handle = gak_downstream {
        down: (down as *mut Downstream<'_, '_>).cast(),
    };
    // SAFETY: forwarded to the caller's promise; `handle` lives for the call.
    unsafe { body(user, &mut handle) }
}

/// A fenced downstream write: compare `presented` with the highest fence
/// the sink `resource` has seen (`fence-stale` below it, nothing written),
/// then run `body(user, down)` in the same transaction and record
/// `presented`. A body that returns non-zero is `write-failed` and nothing
/// it wrote stays. A store failure the body met ends the call with
/// `storage` even if the body returned 0.
///
/// # Safety
/// `k` is a live kernel; `resource` valid for reading; `body` a function
/// that may be called with `user` on the calling thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_sideeffect_write_fenced(
    k: *const gak_kernel,
    resource: gak_str,
    presented: u64,
    body: gak_sink_body,
    user: *mut c_void,
) -> *mut gak_error {
    let mut failed = 0;
    let error = guard(|| {
        Scale::call().str(resource, "resource")?;
        // SAFETY: the caller's promises, per the header.
        let (k, resource) = unsafe { (kernel(k)?, resource.text("resource")?) };
        let body = body.ok_or_else(|| Error::InvalidInput("the body is NULL".into()))?;
        let written = k.sideeffect().write_fenced(resource, presented, |down| {
            // SAFETY: the caller promised `body` callable with `user`.
            match unsafe { call_body(body, user, down) } {
                0 => Ok(()),
                rc => Err(rc),
            }
        });
        match written {
            Ok(()) => Ok(()),
            Err(SinkError::Body(rc)) => {
                failed = rc;
                Err(Error::WriteFailed)
            }
            Err(SinkError::Kernel(e)) => Err(e),
        }
    });
    if failed != 0 {
        gak_error_free_quiet(error);
        return gak_error::with(
            "write-failed",
            &format!(
                "write-failed: the sink body failed (it returned {failed}); nothing it wrote stays"
            ),
        );
    }
    error
}

/// Run `body(user, down)` in a transaction of its own, without the
/// component: to read (or seed) a sink's downstream data. Non-zero from the
/// body rolls back and is `write-failed`.
///
/// # Safety
/// As `gak_sideeffect_write_fenced`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_kernel_with_downstream(
    k: *const gak_kernel,
    body: gak_sink_body,
    user: *mut c_void,
) -> *mut gak_error {
    let mut failed = 0;
    let error = guard(|| {
        // SAFETY: the caller's promises, per the header.
        let k = unsafe { kernel(k)? };
        let body = body.ok_or_else(|| Error::InvalidInput("the body is NULL".into()))?;
        // The call answers what its last attempt did: an attempt that met a
        // conflict runs again, and its body's code is forgotten with it.
        let mut last = 0;
        let done = k.with_downstream(|down| {
            // SAFETY: the caller promised `body` callable with `user`.
            last = unsafe { call_body(body, user, down) };
            match last {
                0 => Ok(()),
                _ => Err(Error::WriteFailed),
            }
        });
        if matches!(done, Err(Error::WriteFailed)) {
            failed = last;
        }
        done
    });
    if failed != 0 {
        gak_error_free_quiet(error);
        return gak_error::with(
            "write-failed",
            &format!(
                "write-failed: the downstream body failed (it returned {failed}); nothing it wrote stays"
            ),
        );
    }
    error
}

fn gak_error_free_quiet(error: *mut gak_error) {
    // SAFETY: `error` is NULL or came from `guard` just now, freed once.
    unsafe { crate::error::gak_error_free(error) };
}

/// The body's transaction behind a handle.
///
/// # Safety
/// `down` is NULL or the handle passed to the running body.
unsafe fn downstream<'a>(
    down: *mut gak_downstream,
) -> Result<&'a mut Downstream<'static, 'static>, Error> {
    // SAFETY: the caller passes the live handle; its `down` points to the
    // body's `Downstream`, alive while the body runs.
    unsafe { down.as_ref() }
        .map(|d| unsafe { &mut *d.down.cast::<Downstream<'static, 'static>>() })
        .ok_or_else(|| Error::InvalidInput("the downstream handle is NULL".into()))
}

/// Read `key` of the binding's `downstream` table into `*value` (clear it
/// with `gak_str_clear`; `ptr` NULL when absent).
///
/// # Safety
/// `down` is the running body's handle; `key` valid for reading; `value`
/// for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_downstream_get(
    down: *mut gak_downstream,
    key: gak_str,
    value: *mut gak_str,
) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller's promises, per the header.
        let (down, key, out) =
            unsafe { (downstream(down)?, key.text("key")?, Out::new(value, "get")?) };
        out.put(gak_str::owned_opt(down.get(key)?));
        Ok(())
    })
}

/// Write `key` = `value` in the binding's `downstream` table.
///
/// # Safety
/// `down` is the running body's handle; the strings valid for reading.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_downstream_put(
    down: *mut gak_downstream,
    key: gak_str,
    value: gak_str,
) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller's promises, per the header.
        let (down, key, value) =
            unsafe { (downstream(down)?, key.text("key")?, value.text("value")?) };
        down.put(key, value)
    })
}

/// SQL parameters: text, or NULL.
///
/// # Safety
/// As [`items`], and every non-NULL string as [`gak_str::text`].
unsafe fn params<'a>(ptr: *const gak_str, len: usize) -> Result<Vec<Option<&'a str>>, Error> {
    // SAFETY: forwarded to the caller's promise.
    let list = unsafe { items(ptr, len, "params")? };
    // SAFETY: forwarded to the caller's promise.
    list.iter()
        .map(|p| unsafe { p.opt_text("param") })
        .collect()
}

fn sqlite_error(e: rusqlite::Error) -> Error {
    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::AuthorizationForStatementDenied) {
        return Error::InvalidInput(format!(
            "a sink body cannot end the kernel's transaction: {e}"
        ));
    }
    Error::storage(format!("SQLite: {e}"))
}

fn no_sql() -> Error {
    Error::InvalidInput("this store lends bodies no SQL handle (the memory binding): use gak_downstream_get / gak_downstream_put".into())
}

/// Run one SQL statement on the binding's own connection, inside the
/// call's transaction (SQLite or PostgreSQL; `invalid-input` on memory),
/// with `params[0..len]` bound in order (`?1` / `$1` …; every parameter is
/// text, or NULL for a NULL `ptr` — cast in SQL, e.g. `$1::text::int`).
/// `*changed` (if not NULL) gets the rows it changed. Transaction control
/// (`COMMIT`, `ROLLBACK`, `SAVEPOINT`, …) is refused with `invalid-input`;
/// any statement error also ends the call with `storage`, even if the body
/// returns 0 (write "insert if absent" as `ON CONFLICT DO NOTHING`).
///
/// # Safety
/// `down` is the running body's handle; `sql` and `params` valid for
/// reading; `changed` NULL or valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_downstream_execute(
    down: *mut gak_downstream,
    sql: gak_str,
    params: *const gak_str,
    len: usize,
    changed: *mut u64,
) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller's promises, per the header.
        let (down, sql, params) = unsafe {
            (
                downstream(down)?,
                sql.text("sql")?,
                self::params(params, len)?,
            )
        };
        let n = if let Some(mut conn) = down.sqlite() {
            conn.execute(sql, rusqlite::params_from_iter(params.iter()))
                .map(|n| n as u64)
                .map_err(sqlite_error)?
        } else {
            let refs: Vec<&(dyn ToSql + Sync)> =
                params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
            down.postgres_execute(sql, &refs).ok_or_else(no_sql)??
        };
        // SAFETY: NULL or valid for writing, per the header.
        if let Some(changed) = unsafe { changed.as_mut() } {
            *changed = n;
        }
        Ok(())
    })
}

fn sqlite_text(v: rusqlite::types::Value) -> Option<String> {
    use rusqlite::types::Value;
    match v {
        Value::Null => None,
        Value::Integer(i) => Some(i.to_string()),
        Value::Real(r) => Some(r.to_string()),
        Value::Text(t) => Some(t),
        Value::Blob(b) => Some(String::from_utf8_lossy(&b).into_owned()),
    }
}

/// Run one SQL query as `gak_downstream_execute` does, its rows into
/// `*out` (clear it with `gak_rows_clear`). On PostgreSQL every column
/// must be text (cast in SQL: `SELECT n::text …`).
///
/// # Safety
/// As `gak_downstream_execute`; `out` valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_downstream_query(
    down: *mut gak_downstream,
    sql: gak_str,
    params: *const gak_str,
    len: usize,
    out: *mut gak_rows,
) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller's promises, per the header.
        let (down, sql, params, out) = unsafe {
            (
                downstream(down)?,
                sql.text("sql")?,
                self::params(params, len)?,
                Out::new(out, "query")?,
            )
        };
        let rows: Vec<Vec<Option<String>>> = if let Some(mut conn) = down.sqlite() {
            conn.query(sql, rusqlite::params_from_iter(params.iter()), |row| {
                let columns = row.as_ref().column_count();
                (0..columns)
                    .map(|i| row.get::<_, rusqlite::types::Value>(i).map(sqlite_text))
                    .collect()
            })
            .map_err(sqlite_error)?
        } else {
            let refs: Vec<&(dyn ToSql + Sync)> =
                params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
            down.postgres_query(sql, &refs).ok_or_else(no_sql)??
        };
        let columns = rows.first().map_or(0, Vec::len);
        let count = rows.len();
        let cells: Vec<gak_str> = rows.into_iter().flatten().map(gak_str::owned_opt).collect();
        let (cells, _) = owned_list(cells);
        out.put(gak_rows {
            rows: count,
            columns,
            cells,
        });
        Ok(())
    })
}

/// Free what `gak_downstream_query` put into `*rows` (NULL ok).
///
/// # Safety
/// `rows` is NULL or filled by libgak and not cleared since.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_rows_clear(rows: *mut gak_rows) {
    // SAFETY: NULL or filled by libgak, per the header.
    if let Some(r) = unsafe { rows.as_mut() } {
        crate::abi::guard_value((), || {
            // SAFETY: the cells were made by `owned_list` of `rows * columns` owned strings.
            for mut cell in unsafe { take_list(r.cells, r.rows * r.columns) } {
                // SAFETY: made by `gak_str::owned_opt`.
                unsafe { cell.free() };
            }
            *r = gak_rows {
                rows: 0,
                columns: 0,
                cells: std::ptr::null_mut(),
            };
        });
    }
}
