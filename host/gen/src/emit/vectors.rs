//! The vectors' JSON shape (`host/gen/README.md`): its exceptions, in one
//! table for every host's conformance mapper.

/// Parameters the vectors name otherwise than the WIT: (WIT, vectors).
pub const ARG_NAMES: &[(&str, &str)] = &[("snap", "snapshot")];

/// Exported functions the vectors reach only through a host-level call,
/// written by hand in every runner: `sink.write-fenced` runs the fence
/// compare (`sink-advance`) and a body in one transaction.
pub const HOST_LEVEL: &[&str] = &["sideeffect.sink-advance"];

/// Variant cases whose answer wraps the payload in an object under a key:
/// (variant, case, key), `{"contended": {"until": N}}`.
pub const WRAPPED: &[(&str, &str, &str)] = &[("acquired", "contended", "until")];

/// The vectors' name of the parameter `wit`.
pub fn arg_name(wit: &str) -> &str {
    ARG_NAMES
        .iter()
        .find(|(w, _)| *w == wit)
        .map_or(wit, |(_, v)| v)
}

/// The key the vectors wrap `variant`'s `case` payload under, if any.
pub fn wrapped(variant: &str, case: &str) -> Option<&'static str> {
    WRAPPED
        .iter()
        .find(|(v, c, _)| *v == variant && *c == case)
        .map(|(_, _, key)| *key)
}
