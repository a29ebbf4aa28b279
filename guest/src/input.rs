//! Input limits (SPEC 8 "Inputs"): checked before anything else; a violation
//! is `invalid-input` and nothing is written.
use crate::Error;

/// Longest id, in bytes.
pub const MAX_ID: usize = 256;
/// Longest status, in bytes.
pub const MAX_STATUS: usize = 256;
/// Longest reason or title, in bytes.
pub const MAX_REASON: usize = 4096;
/// Largest result / payload / snapshot fields, in bytes.
pub const MAX_PAYLOAD: usize = 1 << 20;
/// Longest ttl: one year in ms.
pub const MAX_TTL: u64 = 365 * 24 * 60 * 60 * 1000;
/// Every number stays below 2^53 so every host language holds it exactly.
pub const MAX_NUMBER: u64 = (1 << 53) - 1;
/// Most tasks in one seed, or steps in one plan (more is `invalid-input`).
pub const MAX_ITEMS: usize = 10_000;

fn bad(what: &str, why: &str) -> Error {
    Error::InvalidInput(format!("{what} {why}"))
}

/// An id: 1-256 bytes of UTF-8 without U+0000.
pub fn id(what: &str, value: &str) -> Result<(), Error> {
    if value.is_empty() {
        return Err(bad(what, "is empty"));
    }
    if value.len() > MAX_ID {
        return Err(bad(what, "is longer than 256 bytes"));
    }
    no_nul(what, value)
}

/// No string may contain U+0000: PostgreSQL's `text` and `jsonb` cannot
/// store it, and every binding must answer alike, so all refuse it.
pub fn no_nul(what: &str, value: &str) -> Result<(), Error> {
    if value.contains('\0') {
        return Err(bad(what, "contains U+0000"));
    }
    Ok(())
}

/// Every id of a list.
pub fn ids(what: &str, values: &[String]) -> Result<(), Error> {
    if values.len() > MAX_ITEMS {
        return Err(bad(what, "has more than 10000 entries"));
    }
    values.iter().try_for_each(|v| id(what, v))
}

/// A ttl: 1 ms to 1 year.
pub fn ttl(value: u64) -> Result<(), Error> {
    if value == 0 || value > MAX_TTL {
        return Err(bad("ttl", "must be 1 ms to 1 year"));
    }
    Ok(())
}

/// A number below 2^53.
pub fn number(what: &str, value: u64) -> Result<(), Error> {
    if value > MAX_NUMBER {
        return Err(bad(what, "must be below 2^53"));
    }
    Ok(())
}

/// A reason: at most 4 KiB.
pub fn reason(value: &str) -> Result<(), Error> {
    text("reason", value, MAX_REASON)
}

/// Free text with a size limit, without U+0000.
pub fn text(what: &str, value: &str, max: usize) -> Result<(), Error> {
    if value.len() > max {
        return Err(bad(what, &format!("is longer than {max} bytes")));
    }
    no_nul(what, value)
}

/// A payload: at most 1 MiB.
pub fn payload(what: &str, value: &[u8]) -> Result<(), Error> {
    if value.len() > MAX_PAYLOAD {
        return Err(bad(what, "is larger than 1 MiB"));
    }
    Ok(())
}

/// Most items in one page (lists) or one batch (`prune`).
pub const MAX_PAGE: u32 = 1000;

/// A page or batch size: 1 to 1000.
pub fn limit(value: u32) -> Result<(), Error> {
    if value == 0 || value > MAX_PAGE {
        return Err(bad("limit", "must be 1 to 1000"));
    }
    Ok(())
}
