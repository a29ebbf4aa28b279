//! The ABI's building blocks: strings and bytes across the boundary, the
//! owned lists libgak hands out, and [`guard`], through which every
//! exported function runs so that no panic ever unwinds into C.
use std::ffi::c_char;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::{self, NonNull};

use gak_host::Error;

use crate::error::gak_error;

/// A string: `len` bytes of UTF-8 at `ptr` (no NUL needed; a NUL byte is
/// data).
///
/// As an argument it is borrowed for the duration of the call: `ptr` may be
/// NULL when `len` is 0, and for an optional argument a NULL `ptr` means
/// "none" (an empty but present string needs a non-NULL `ptr`). Text that
/// is not UTF-8 is refused with `invalid-input`.
///
/// In a record libgak filled it is owned by that record and freed by the
/// record's `_clear` function: `ptr` is NULL when the value is absent, and
/// otherwise the `len` bytes are followed by a NUL, so `ptr` is also a C
/// string.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct gak_str {
    /// The first byte, or NULL.
    pub ptr: *const c_char,
    /// How many bytes.
    pub len: usize,
}

/// Bytes (results, payloads): `len` bytes at `ptr`. Borrowed as an
/// argument, owned by the record libgak filled otherwise, exactly as
/// [`gak_str`] (a result libgak returns is followed by a NUL too, and its
/// `ptr` is NULL only when absent).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct gak_bytes {
    /// The first byte, or NULL.
    pub ptr: *const u8,
    /// How many bytes.
    pub len: usize,
}

impl gak_str {
    /// The absent string.
    pub(crate) const NONE: gak_str = gak_str {
        ptr: ptr::null(),
        len: 0,
    };

    /// Borrow an argument as text; `what` names it in the refusal.
    ///
    /// # Safety
    /// `ptr` is NULL or valid for reads of `len` bytes for `'a`.
    pub(crate) unsafe fn text<'a>(self, what: &str) -> Result<&'a str, Error> {
        // SAFETY: forwarded to the caller's promise.
        let bytes = unsafe { borrow(self.ptr.cast::<u8>(), self.len, what)? };
        std::str::from_utf8(bytes)
            .map_err(|e| Error::InvalidInput(format!("{what} is not UTF-8 text: {e}")))
    }

    /// Borrow an optional argument: NULL `ptr` is none.
    ///
    /// # Safety
    /// As [`gak_str::text`].
    pub(crate) unsafe fn opt_text<'a>(self, what: &str) -> Result<Option<&'a str>, Error> {
        if self.ptr.is_null() {
            return Ok(None);
        }
        // SAFETY: forwarded to the caller's promise.
        unsafe { self.text(what) }.map(Some)
    }

    /// An owned copy of `text`, NUL-terminated.
    pub(crate) fn owned(text: impl Into<Vec<u8>>) -> gak_str {
        let (ptr, len) = owned_bytes(text.into());
        gak_str {
            ptr: ptr.cast::<c_char>(),
            len,
        }
    }

    /// An owned copy, or the absent string.
    pub(crate) fn owned_opt(text: Option<String>) -> gak_str {
        text.map_or(gak_str::NONE, gak_str::owned)
    }

    /// Free an owned string and mark it absent.
    ///
    /// # Safety
    /// `self` is absent or was made by [`gak_str::owned`] and not freed.
    pub(crate) unsafe fn free(&mut self) {
        // SAFETY: forwarded to the caller's promise.
        unsafe { free_bytes(self.ptr.cast::<u8>().cast_mut(), self.len) };
        *self = gak_str::NONE;
    }
}

impl gak_bytes {
    /// The absent bytes.
    pub(crate) const NONE: gak_bytes = gak_bytes {
        ptr: ptr::null(),
        len: 0,
    };

    /// Borrow an argument.
    ///
    /// # Safety
    /// `ptr` is NULL or valid for reads of `len` bytes for `'a`.
    pub(crate) unsafe fn slice<'a>(self, what: &str) -> Result<&'a [u8], Error> {
        // SAFETY: forwarded to the caller's promise.
        unsafe { borrow(self.ptr, self.len, what) }
    }

    /// Borrow an optional argument: NULL `ptr` is none.
    ///
    /// # Safety
    /// As [`gak_bytes::slice`].
    pub(crate) unsafe fn opt_slice<'a>(self, what: &str) -> Result<Option<&'a [u8]>, Error> {
        if self.ptr.is_null() {
            return Ok(None);
        }
        // SAFETY: forwarded to the caller's promise.
        unsafe { self.slice(what) }.map(Some)
    }

    /// An owned copy, NUL-terminated.
    pub(crate) fn owned(bytes: Vec<u8>) -> gak_bytes {
        let (ptr, len) = owned_bytes(bytes);
        gak_bytes {
            ptr: ptr.cast_const(),
            len,
        }
    }

    /// An owned copy, or the absent bytes.
    #[allow(dead_code)] // for an optional `list<u8>` in an answer
    pub(crate) fn owned_opt(bytes: Option<Vec<u8>>) -> gak_bytes {
        bytes.map_or(gak_bytes::NONE, gak_bytes::owned)
    }

    /// Free owned bytes and mark them absent.
    ///
    /// # Safety
    /// `self` is absent or was made by [`gak_bytes::owned`] and not freed.
    pub(crate) unsafe fn free(&mut self) {
        // SAFETY: forwarded to the caller's promise.
        unsafe { free_bytes(self.ptr.cast_mut(), self.len) };
        *self = gak_bytes::NONE;
    }
}

/// # Safety
/// `ptr` is NULL or valid for reads of `len` bytes for `'a`.
unsafe fn borrow<'a>(ptr: *const u8, len: usize, what: &str) -> Result<&'a [u8], Error> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Error::InvalidInput(format!(
            "{what}: NULL pointer with length {len}"
        )));
    }
    if len > isize::MAX as usize {
        return Err(Error::InvalidInput(format!("{what}: length {len}")));
    }
    // SAFETY: non-NULL, at most isize::MAX bytes, valid per the caller.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// `bytes` and a NUL after them, leaked; (pointer, length without the NUL).
fn owned_bytes(mut bytes: Vec<u8>) -> (*mut u8, usize) {
    let len = bytes.len();
    bytes.push(0);
    let boxed = bytes.into_boxed_slice();
    (Box::into_raw(boxed).cast::<u8>(), len)
}

/// # Safety
/// `ptr` is NULL or came from [`owned_bytes`] with this `len`, not freed.
unsafe fn free_bytes(ptr: *mut u8, len: usize) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: `owned_bytes` leaked a boxed slice of `len + 1` bytes here.
    drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(ptr, len + 1)) });
}

/// A list libgak hands out: (NULL, 0) when empty.
pub(crate) fn owned_list<T>(items: Vec<T>) -> (*mut T, usize) {
    if items.is_empty() {
        return (ptr::null_mut(), 0);
    }
    let len = items.len();
    (Box::into_raw(items.into_boxed_slice()).cast::<T>(), len)
}

/// Take back a list made by [`owned_list`] (to free its items, then it).
///
/// # Safety
/// `ptr` is NULL or came from [`owned_list`] with this `len`, not freed.
pub(crate) unsafe fn take_list<T>(ptr: *mut T, len: usize) -> Vec<T> {
    if ptr.is_null() {
        return Vec::new();
    }
    // SAFETY: `owned_list` leaked a boxed slice of `len` items here.
    unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(ptr, len)) }.into_vec()
}

/// Owned strings as a list.
pub(crate) fn owned_strings(items: Vec<String>) -> (*mut gak_str, usize) {
    owned_list(items.into_iter().map(gak_str::owned).collect())
}

/// Free a list made by [`owned_strings`].
///
/// # Safety
/// As [`take_list`].
pub(crate) unsafe fn free_strings(ptr: *mut gak_str, len: usize) {
    // SAFETY: forwarded to the caller's promise.
    for mut s in unsafe { take_list(ptr, len) } {
        // SAFETY: every item was made by `gak_str::owned`.
        unsafe { s.free() };
    }
}

/// Borrow a list argument (`ptr` may be NULL when `len` is 0).
///
/// # Safety
/// `ptr` is NULL or valid for reads of `len` items for `'a`.
pub(crate) unsafe fn items<'a, T>(ptr: *const T, len: usize, what: &str) -> Result<&'a [T], Error> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Error::InvalidInput(format!(
            "{what}: NULL pointer with {len} items"
        )));
    }
    // SAFETY: non-NULL and valid for `len` items per the caller.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Borrowed text arguments as owned strings.
///
/// # Safety
/// As [`items`], and every string as [`gak_str::text`].
pub(crate) unsafe fn strings(
    ptr: *const gak_str,
    len: usize,
    what: &str,
) -> Result<Vec<String>, Error> {
    // SAFETY: forwarded to the caller's promise.
    let list = unsafe { items(ptr, len, what)? };
    list.iter()
        // SAFETY: forwarded to the caller's promise.
        .map(|s| unsafe { s.text(what) }.map(str::to_owned))
        .collect()
}

/// Where a call writes its answer: checked before the call runs, so a
/// NULL out pointer never lets a call take effect and then lose its answer.
pub(crate) struct Out<T>(NonNull<T>);

impl<T> Out<T> {
    /// # Safety
    /// `ptr` is NULL or valid for writes of one `T` for the whole call.
    pub(crate) unsafe fn new(ptr: *mut T, what: &str) -> Result<Out<T>, Error> {
        NonNull::new(ptr)
            .map(Out)
            .ok_or_else(|| Error::InvalidInput(format!("{what}: the out pointer is NULL")))
    }

    /// Write the answer (what was there before is not read or dropped: it
    /// may be uninitialized C memory).
    pub(crate) fn put(self, value: T) {
        // SAFETY: `Out::new`'s caller promised the pointer valid for writes.
        unsafe { self.0.as_ptr().write(value) }
    }
}

/// Run `f` on the record behind `ptr`, if any, catching panics (what every
/// `_clear` function does).
pub(crate) fn clearing<T>(ptr: *mut T, f: impl FnOnce(&mut T)) {
    // SAFETY: the caller of each `_clear` passes NULL or a record libgak
    // filled; `as_mut` handles NULL.
    if let Some(record) = unsafe { ptr.as_mut() } {
        guard_value((), || f(record));
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

/// Run one exported call: its error (or `NULL`), and a panic turned into a
/// `storage` error instead of unwinding into the caller's frames.
pub(crate) fn guard(call: impl FnOnce() -> Result<(), Error>) -> *mut gak_error {
    match catch_unwind(AssertUnwindSafe(call)) {
        Ok(Ok(())) => ptr::null_mut(),
        Ok(Err(e)) => gak_error::boxed(&e),
        Err(panic) => gak_error::boxed(&Error::storage(format!(
            "libgak panicked: {}",
            panic_message(&*panic)
        ))),
    }
}

/// [`guard`] for calls whose answer is a plain value: `fallback` on a panic.
pub(crate) fn guard_value<T>(fallback: T, call: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(call)).unwrap_or(fallback)
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{gak_error_code, gak_error_free, gak_error_message};
    use std::ffi::CStr;

    fn described(e: *mut gak_error) -> (String, String) {
        assert!(!e.is_null());
        // SAFETY: `e` came from `guard` and is freed once, below.
        unsafe {
            let code = CStr::from_ptr(gak_error_code(e))
                .to_string_lossy()
                .into_owned();
            let message = CStr::from_ptr(gak_error_message(e))
                .to_string_lossy()
                .into_owned();
            gak_error_free(e);
            (code, message)
        }
    }

    #[test]
    fn a_panic_becomes_a_storage_error() {
        let (code, message) = described(guard(|| panic!("boom {}", 42)));
        assert_eq!(code, "storage");
        assert!(message.contains("libgak panicked: boom 42"), "{message}");
    }

    #[test]
    fn refusals_keep_their_code() {
        let (code, message) = described(guard(|| Err(Error::InvalidInput("bad id".into()))));
        assert_eq!(
            (code.as_str(), message.as_str()),
            ("invalid-input", "invalid-input: bad id")
        );
        assert!(guard(|| Ok(())).is_null());
    }

    #[test]
    fn text_arguments_are_checked() {
        let bad = [0xffu8, b'a'];
        let s = gak_str {
            ptr: bad.as_ptr().cast(),
            len: 2,
        };
        // SAFETY: `bad` outlives the borrow.
        let e = unsafe { s.text("id") }.unwrap_err();
        assert_eq!(e.name(), "invalid-input");
        let null = gak_str {
            ptr: ptr::null(),
            len: 3,
        };
        // SAFETY: NULL is refused before any read.
        assert!(unsafe { null.text("id") }.is_err());
        // SAFETY: NULL with length 0 is the empty string.
        assert_eq!(unsafe { gak_str::NONE.text("id") }.unwrap(), "");
        // SAFETY: as above.
        assert_eq!(unsafe { gak_str::NONE.opt_text("id") }.unwrap(), None);
    }

    #[test]
    fn owned_strings_are_nul_terminated_and_freed() {
        let mut s = gak_str::owned("abc");
        // SAFETY: `owned` wrote 4 bytes.
        assert_eq!(unsafe { CStr::from_ptr(s.ptr) }.to_bytes(), b"abc");
        // SAFETY: made by `owned`, freed once; a second free sees NULL.
        unsafe {
            s.free();
            s.free();
        }
        assert!(s.ptr.is_null());
        let (ptr, len) = owned_strings(vec![]);
        assert!(ptr.is_null() && len == 0);
    }
}
