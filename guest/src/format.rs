//! The stored format, version 2: what every record in every table looks
//! like on disk (`FORMAT.md` at the repository root documents each table).
//!
//! - Every value is a JSON object whose first field is `"v": 2` (format 2,
//!   from gak:kernel 0.4.0, adds the job queue's task fields and index
//!   entries; format 1, written by 0.2.0 and 0.3.x, is read as well: its
//!   tasks read with the new fields at their defaults). A value without
//!   `v`, or with a version this kernel does not know, is refused as
//!   `storage` (never misread): data outlives code, and a silent misreading
//!   of an old record is how a finished effect would run twice. A kernel
//!   that reads only format 1 refuses format 2 the same way, so an old
//!   worker can never claim a delayed task early or step over a group's
//!   limit.
//! - Field names are kebab-case, like the WIT records.
//! - Bytes (results) are standard base64 with padding, not arrays of numbers.
//! - Capabilities (task tokens, holders, reconcile claims) are stored only
//!   as the SHA-256 of their 16 random bytes, in lowercase hex: whoever can
//!   read the tables (an operator's `psql`, a backup, a replica) still
//!   cannot act as a holder.
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use sha2::{Digest, Sha256};

/// The format version this kernel writes.
pub const FORMAT: u32 = 2;

/// The oldest format version this kernel reads (and continues the work in).
pub const OLDEST: u32 = 1;

/// The `v` field of every record: serializes as [`FORMAT`], and refuses to
/// deserialize a version outside [`OLDEST`]..=[`FORMAT`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct V;

impl Serialize for V {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(FORMAT)
    }
}

impl<'de> Deserialize<'de> for V {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<V, D::Error> {
        let v = u64::deserialize(d)?;
        if (u64::from(OLDEST)..=u64::from(FORMAT)).contains(&v) {
            Ok(V)
        } else {
            Err(de::Error::custom(format_args!(
                "stored format {v}; this kernel reads formats {OLDEST} to {FORMAT}"
            )))
        }
    }
}

/// SHA-256 of a capability, as stored. A presented string that is not 32
/// lowercase hex digits gets a digest no minted capability can have.
pub fn digest(capability: &str) -> String {
    let mut hasher = Sha256::new();
    match parse_hex128(capability) {
        Some(bytes) => hasher.update(bytes),
        // Domain-separated from every 16-byte input: never equal to a
        // minted capability's digest.
        None => {
            hasher.update(b"not-a-capability:");
            hasher.update(capability.as_bytes());
        }
    }
    hex(&hasher.finalize())
}

/// A minted capability: 32 lowercase hex digits.
pub fn hex128(value: u128) -> String {
    format!("{value:032x}")
}

fn parse_hex128(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    u128::from_str_radix(s, 16).ok().map(u128::to_be_bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Serde adapter: `Vec<u8>` as standard base64 with padding.
pub mod base64 {
    use super::*;
    use ::base64::Engine as _;
    use ::base64::engine::general_purpose::STANDARD;

    /// Serialize bytes as base64.
    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    /// Deserialize base64 into bytes.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        struct B64;
        impl Visitor<'_> for B64 {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a base64 string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<u8>, E> {
                STANDARD.decode(v).map_err(E::custom)
            }
        }
        d.deserialize_str(B64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_is_of_the_random_bytes_and_never_matches_junk() {
        let token = hex128(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
        assert_eq!(digest(&token), digest(&token));
        assert_eq!(digest(&token).len(), 64);
        assert_ne!(digest(&token), digest(&token.to_uppercase()));
        assert_ne!(digest(""), digest(&hex128(0)));
        // the digest of the bytes, not of the text
        assert_eq!(
            digest(&hex128(1)),
            hex(&Sha256::digest(1u128.to_be_bytes()))
        );
    }

    #[test]
    fn other_formats_are_refused() {
        assert!(serde_json::from_str::<V>("1").is_ok());
        assert!(serde_json::from_str::<V>("2").is_ok());
        assert_eq!(serde_json::to_string(&V).unwrap(), "2");
        let err = serde_json::from_str::<V>("3").unwrap_err().to_string();
        assert!(err.contains("stored format 3"), "{err}");
        assert!(serde_json::from_str::<V>("0").is_err());
    }
}
