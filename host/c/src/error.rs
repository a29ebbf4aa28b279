//! `gak_error`: what a call that did not succeed returns.
use std::ffi::{CStr, CString, c_char};

use gak_host::Error;

use crate::codes::CODES;

/// Why a call did not succeed: the contract's kebab-case code
/// (`taken`, `fence-stale`, …, `invalid-input`, `storage`) and a message.
/// Every function that can fail returns one (NULL on success); it is the
/// caller's, to free with `gak_error_free`.
#[allow(non_camel_case_types)]
pub struct gak_error {
    code: &'static CStr,
    message: CString,
}

impl gak_error {
    /// `code` with `message`, boxed for the caller.
    pub(crate) fn with(code: &str, message: &str) -> *mut gak_error {
        let code = CODES
            .iter()
            .copied()
            .find(|c| c.to_bytes() == code.as_bytes())
            .unwrap_or(c"storage");
        // A message never holds a NUL of its own: the C string would end there.
        let message = CString::new(message.replace('\0', "\u{fffd}"))
            .unwrap_or_else(|_| CString::from(c"(unprintable message)"));
        Box::into_raw(Box::new(gak_error { code, message }))
    }

    /// The contract's error, boxed for the caller.
    pub(crate) fn boxed(e: &Error) -> *mut gak_error {
        gak_error::with(e.name(), &e.to_string())
    }
}

/// The error's code: one of the contract's kebab-case codes. Valid until
/// the error is freed; NULL for a NULL error.
///
/// # Safety
/// `error` is NULL or an error libgak returned and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_error_code(error: *const gak_error) -> *const c_char {
    // SAFETY: the caller passes NULL or a live error.
    match unsafe { error.as_ref() } {
        Some(e) => e.code.as_ptr(),
        None => std::ptr::null(),
    }
}

/// The error's message (UTF-8, NUL-terminated; never a password). Valid
/// until the error is freed; NULL for a NULL error.
///
/// # Safety
/// `error` is NULL or an error libgak returned and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_error_message(error: *const gak_error) -> *const c_char {
    // SAFETY: the caller passes NULL or a live error.
    match unsafe { error.as_ref() } {
        Some(e) => e.message.as_ptr(),
        None => std::ptr::null(),
    }
}

/// Free an error (NULL is ignored).
///
/// # Safety
/// `error` is NULL or an error libgak returned, freed only once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_error_free(error: *mut gak_error) {
    if !error.is_null() {
        // SAFETY: `gak_error::with` leaked this box; the caller frees it once.
        drop(unsafe { Box::from_raw(error) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_contract_code_is_known() {
        assert_eq!(CODES.len(), Error::NAMES.len());
        for (c, name) in CODES.iter().zip(Error::NAMES) {
            assert_eq!(c.to_bytes(), name.as_bytes());
        }
    }
}
