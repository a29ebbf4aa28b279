//! The vectors' JSON call shape (`{"id", "agent", "ttl"}` in, the vectors'
//! task object out) for one call, `taskboard.claim`: built only with the
//! `json-call-probe` feature, to measure what a JSON ABI would cost against
//! the typed one (README "Typed structs or JSON").
use gak_host::Error;
use serde_json::{Value, json};

use crate::abi::{Out, gak_str, guard};
use crate::error::gak_error;
use crate::kernel::{gak_kernel, kernel};

/// `taskboard.claim` with the vectors' JSON args, its answer as the
/// vectors' JSON into `*out` (clear it with `gak_str_clear`).
///
/// # Safety
/// `k` is a live kernel; `args` valid for reading; `out` for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gak_probe_claim_json(
    k: *const gak_kernel,
    args: gak_str,
    out: *mut gak_str,
) -> *mut gak_error {
    guard(|| {
        // SAFETY: the caller's promises, per the header.
        let (k, args, out) = unsafe { (kernel(k)?, args.text("args")?, Out::new(out, "claim")?) };
        let args: Value =
            serde_json::from_str(args).map_err(|e| Error::InvalidInput(e.to_string()))?;
        let text = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or_default();
        let ttl = args.get("ttl").and_then(Value::as_u64).unwrap_or(0);
        let t = k.taskboard().claim(text("id"), text("agent"), ttl)?;
        let mut answer = json!({
            "id": t.id, "title": t.title, "deps": t.deps, "state": t.state.name(), "fence": t.fence,
        });
        if let Some(o) = t.owner {
            answer["owner"] = o.into();
        }
        if let Some(tok) = t.token {
            answer["token"] = tok.into();
        }
        if let Some(u) = t.until {
            answer["until"] = u.into();
        }
        out.put(gak_str::owned(answer.to_string()));
        Ok(())
    })
}
