//! Sizes checked before anything is read (HOSTS.md rule 16), from the
//! lengths the caller passed alone.
//!
//! The Rust host refuses a call whose string or bytes argument is longer
//! than 1 MiB, whose list holds more than 10,000 items, or whose strings
//! and bytes total more than 64 MiB — but it sees the call's arguments only
//! once libgak has made Rust values of them, by reading (UTF-8 checks) and
//! copying the caller's memory. A 1 GiB result was copied (3.4 s, 1.1 GB
//! resident) before it was refused; a seed list of a million items, 289 MB.
//! So every entry point weighs its arguments here first: a string's or a
//! byte list's `len`, a list's item count, and the headers of the items of
//! a list that passed its count — never a byte of text — and refuses with
//! `invalid-input` before the first byte is read.
//!
//! Only the contract's values are weighed (what is lowered into the
//! component); store URLs, the downstream table's keys and values, SQL
//! text and parameters, and a body's error message are not, as in the Rust
//! host. The bounds are every host's (`host/sql/store.json`, generated into
//! the Rust host's store facts); `tests/boundary.c` checks that a value at
//! the bound still reaches the component. How each record is weighed is
//! generated with the records (`records.rs`: `Scale::action`,
//! `Scale::snapshot`, `Scale::step_defs`, …).
use gak_host::Error;
use gak_host::store::facts::{MAX_CALL_BYTES, MAX_LIST_ITEMS, MAX_VALUE_BYTES};

use crate::abi::{gak_bytes, gak_str};

/// The longest string or bytes value the contract takes (1 MiB).
const MAX_VALUE: usize = MAX_VALUE_BYTES;
/// The most items a list argument may hold (10,000).
const MAX_ITEMS: usize = MAX_LIST_ITEMS;
/// The most bytes of strings and bytes one call may carry in all (64 MiB).
const MAX_CALL: usize = MAX_CALL_BYTES;

/// A call's arguments weighed so far.
pub(crate) struct Scale {
    total: usize,
    /// `checkpoint.build-plan`: only the total is the host's to bound
    /// (SPEC 8 makes every step-id problem the component's `invalid-plan`).
    total_only: bool,
}

fn refuse(what: &str, why: String) -> Error {
    Error::InvalidInput(format!("{what}: {why}"))
}

impl Scale {
    /// The scale of an ordinary call.
    pub(crate) fn call() -> Scale {
        Scale {
            total: 0,
            total_only: false,
        }
    }

    /// The scale of `checkpoint.build-plan`: the total only.
    pub(crate) fn plan() -> Scale {
        Scale {
            total: 0,
            total_only: true,
        }
    }

    /// A string's or bytes' length.
    pub(crate) fn value(&mut self, len: usize, what: &str) -> Result<(), Error> {
        if !self.total_only && len > MAX_VALUE {
            return Err(refuse(
                what,
                format!(
                    "a value of {len} bytes is longer than the largest the contract accepts (1 MiB)"
                ),
            ));
        }
        self.total = self.total.saturating_add(len);
        if self.total > MAX_CALL {
            return Err(refuse(
                what,
                "the call's arguments are larger than 64 MiB in all".into(),
            ));
        }
        Ok(())
    }

    /// A string argument (absent or present).
    pub(crate) fn str(&mut self, s: gak_str, what: &str) -> Result<&mut Scale, Error> {
        self.value(s.len, what)?;
        Ok(self)
    }

    /// A bytes argument (absent or present).
    pub(crate) fn bytes(&mut self, b: gak_bytes, what: &str) -> Result<&mut Scale, Error> {
        self.value(b.len, what)?;
        Ok(self)
    }

    /// A list argument: its count first, then each item by `each`, which
    /// reads the item's header (valid: the count passed) and no more.
    ///
    /// # Safety
    /// `ptr` is NULL or valid for reads of `len` items, per the header.
    pub(crate) unsafe fn list<T>(
        &mut self,
        ptr: *const T,
        len: usize,
        what: &str,
        mut each: impl FnMut(&mut Scale, &T) -> Result<(), Error>,
    ) -> Result<&mut Scale, Error> {
        if !self.total_only && len > MAX_ITEMS {
            return Err(refuse(
                what,
                format!("a list of {len} items is longer than the contract accepts (10,000)"),
            ));
        }
        // SAFETY: forwarded to the caller's promise.
        for item in unsafe { crate::abi::items(ptr, len, what)? } {
            each(self, item)?;
        }
        Ok(self)
    }

    /// A list of strings.
    ///
    /// # Safety
    /// As [`Scale::list`].
    pub(crate) unsafe fn strs(
        &mut self,
        ptr: *const gak_str,
        len: usize,
        what: &str,
    ) -> Result<&mut Scale, Error> {
        // SAFETY: forwarded to the caller's promise.
        unsafe { self.list(ptr, len, what, |s, item| s.value(item.len, what)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(len: usize) -> gak_str {
        // Never read: only lengths are weighed.
        gak_str {
            ptr: std::ptr::NonNull::<std::ffi::c_char>::dangling().as_ptr(),
            len,
        }
    }

    #[test]
    fn values_lists_and_totals_are_bounded_by_length_alone() {
        assert!(Scale::call().str(text(MAX_VALUE), "id").is_ok());
        let e = Scale::call().str(text(MAX_VALUE + 1), "id").err().unwrap();
        assert!(
            matches!(e, Error::InvalidInput(ref m) if m.starts_with("id: a value of 1048577 bytes"))
        );
        let mut scale = Scale::call();
        for _ in 0..64 {
            scale.str(text(MAX_VALUE), "part").unwrap();
        }
        assert!(scale.str(text(1), "last").is_err());
        // A list over its count is refused before an item is read (the
        // pointer is dangling: reading an item would be undefined).
        let dangling = std::ptr::NonNull::<gak_str>::dangling().as_ptr();
        let mut scale = Scale::call();
        // SAFETY: refused on its count alone, nothing is read.
        let e = unsafe { scale.strs(dangling, MAX_ITEMS + 1, "done") };
        assert!(e.is_err());
        // build-plan bounds the total only.
        assert!(Scale::plan().str(text(MAX_VALUE * 2), "step id").is_ok());
        assert!(Scale::plan().str(text(MAX_CALL + 1), "step id").is_err());
        assert!(Scale::plan().str(text(usize::MAX), "step id").is_err());
    }
}
