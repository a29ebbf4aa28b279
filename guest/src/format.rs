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
        Version::deserialize(d).map(|_| V)
    }
}

/// The `v` field of a record whose version matters once read (a task:
/// only tasks a format-2 kernel wrote are in the board's counts). Reads
/// like [`V`], keeps the version it read, and serializes as [`FORMAT`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version(pub u32);

impl Version {
    /// The version this kernel writes.
    pub const CURRENT: Version = Version(FORMAT);
}

impl Default for Version {
    fn default() -> Self {
        Version::CURRENT
    }
}

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(FORMAT)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Version, D::Error> {
        let v = u64::deserialize(d)?;
        if (u64::from(OLDEST)..=u64::from(FORMAT)).contains(&v) {
            Ok(Version(v as u32))
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
    match parse_hex128(capability) {
        Some(bytes) => digest_bytes(&bytes),
        // Domain-separated from every 16-byte input: never equal to a
        // minted capability's digest.
        None => {
            let mut hasher = Sha256::new();
            hasher.update(b"not-a-capability:");
            hasher.update(capability.as_bytes());
            hex(&hasher.finalize())
        }
    }
}

/// The stored digest of a capability's 16 random bytes (what [`digest`]
/// answers for their hex form).
pub fn digest_bytes(bytes: &[u8; 16]) -> String {
    hex(&Sha256::digest(bytes))
}

/// A minted capability: 32 lowercase hex digits.
pub fn hex128(value: u128) -> String {
    hex(&value.to_be_bytes())
}

fn parse_hex128(s: &str) -> Option<[u8; 16]> {
    let s = s.as_bytes();
    if s.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (byte, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
        *byte = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(out)
}

/// The value of one lowercase hex digit (uppercase is not a capability).
fn nibble(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        _ => None,
    }
}

/// Lowercase hex, two digits a byte, in one allocation (digests and tokens
/// are made on every claim and checked on every completion: `format!` per
/// byte was a sixth of a batch drain's time).
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
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
    fn capabilities_are_lowercase_hex_of_their_bytes() {
        for v in [
            0,
            1,
            0xa5,
            u128::MAX,
            0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
        ] {
            let token = hex128(v);
            assert_eq!(token, format!("{v:032x}"));
            assert_eq!(parse_hex128(&token), Some(v.to_be_bytes()));
            assert_eq!(digest(&token), digest_bytes(&v.to_be_bytes()));
        }
        let good = hex128(0xabc);
        for i in 0..32 {
            for junk in [b'g', b'A', b'F', b' ', b'/', b':'] {
                let mut bad = good.clone().into_bytes();
                bad[i] = junk;
                let bad = String::from_utf8(bad).unwrap();
                assert_eq!(parse_hex128(&bad), None, "{bad}");
            }
        }
        assert_eq!(parse_hex128(&good[1..]), None);
        assert_eq!(parse_hex128(&format!("{good}0")), None);
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
