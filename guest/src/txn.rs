use serde::{Serialize, de::DeserializeOwned};

use crate::{Error, StoreFault, Table};

impl std::fmt::Display for StoreFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreFault::Conflict(m) => write!(f, "store conflict: {m}"),
            StoreFault::Failure(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for StoreFault {}

impl From<StoreFault> for Error {
    fn from(fault: StoreFault) -> Self {
        let storage = crate::StorageError::new(fault.to_string());
        Error::Storage(match fault {
            StoreFault::Conflict(_) => storage.conflict().caused_by(fault),
            StoreFault::Failure(_) => storage.caused_by(fault),
        })
    }
}

/// One open transaction, plus the clock and randomness of the call.
///
/// Whoever implements it promises what WIT `store` promises: reads see the
/// transaction's own writes, nothing is visible to others before commit, and
/// concurrent transactions touching the same keys are serialized. Every
/// operation in this crate makes all its reads before its first write and
/// writes nothing when it refuses.
pub trait Txn {
    /// The value under `key`, if any.
    fn get(&mut self, table: Table, key: &str) -> Result<Option<String>, StoreFault>;
    /// Several reads at once, answered in order.
    fn get_many(&mut self, keys: &[(Table, &str)]) -> Result<Vec<Option<String>>, StoreFault> {
        keys.iter().map(|(t, k)| self.get(*t, k)).collect()
    }
    /// Insert or overwrite.
    fn put(&mut self, table: Table, key: &str, value: &str) -> Result<(), StoreFault>;
    /// Remove if present.
    fn delete(&mut self, table: Table, key: &str) -> Result<(), StoreFault>;
    /// At most `limit` entries whose key starts with `prefix` and sorts
    /// strictly after `after`, in key byte order: a bounded range read,
    /// served from an index. A snapshot read: decisions re-read with `get`.
    fn scan(
        &mut self,
        table: Table,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreFault>;
    /// Several range reads at once (one crossing where the store batches
    /// them), answered in order; each as [`Txn::scan`].
    fn scan_many(&mut self, ranges: &[Scan<'_>]) -> Result<Vec<Vec<(String, String)>>, StoreFault> {
        ranges
            .iter()
            .map(|r| self.scan(r.table, r.prefix, r.after, r.limit))
            .collect()
    }
    /// Point reads and range reads in one crossing: the point reads are
    /// served first (their locks held), then the ranges, so the pages hold
    /// every change committed before those locks were granted.
    fn read(&mut self, keys: &[(Table, &str)], ranges: &[Scan<'_>]) -> Result<Pages, StoreFault> {
        let values = read_many(self, keys)?;
        Ok((values, self.scan_many(ranges)?))
    }
    /// Point reads that pass over keys an overlapping transaction holds at
    /// this moment (SPEC 10's skip-locked claiming): `None` for such a key
    /// (not read, not locked), else its value, read and locked as
    /// [`Txn::get_many`] does. A store whose transactions exclude each
    /// other never holds one (the default).
    fn try_get_many(
        &mut self,
        keys: &[(Table, &str)],
    ) -> Result<Vec<Option<Option<String>>>, StoreFault> {
        Ok(read_many(self, keys)?.into_iter().map(Some).collect())
    }
    /// The count record this call was given to add its task changes to
    /// (read with its first crossing), if any; else the counts go to the
    /// record of the first changed task's place in the seed order.
    fn count_shard(&self) -> Option<u64> {
        None
    }
    /// Milliseconds since the Unix epoch, judged by the store side's clock:
    /// one instant per call, read after the call's first reads.
    fn now(&mut self) -> Result<u64, StoreFault>;
    /// 128 bits from a CSPRNG, drawn for this call.
    fn random128(&mut self) -> Result<u128, StoreFault>;
    /// A 256-bit seed from the CSPRNG, drawn for this call: what a call that
    /// mints many capabilities derives them from (SPEC 10).
    fn seed256(&mut self) -> Result<[u8; 32], StoreFault> {
        let mut seed = [0u8; 32];
        seed[..16].copy_from_slice(&self.random128()?.to_le_bytes());
        seed[16..].copy_from_slice(&self.random128()?.to_le_bytes());
        Ok(seed)
    }
}

/// What [`Txn::read`] answers: a value per key, then a page per range.
pub type Pages = (Vec<Option<String>>, Vec<Vec<(String, String)>>);

/// One range read of [`Txn::scan_many`].
#[derive(Clone, Copy, Debug)]
pub struct Scan<'a> {
    /// The table.
    pub table: Table,
    /// Keys starting with this.
    pub prefix: &'a str,
    /// Keys strictly after this.
    pub after: Option<&'a str>,
    /// At most this many entries.
    pub limit: u32,
}

/// Several reads at once; none at all (no store call) for an empty list —
/// a task without dependencies costs nothing to check.
pub(crate) fn read_many<T: Txn + ?Sized>(
    tx: &mut T,
    keys: &[(Table, &str)],
) -> Result<Vec<Option<String>>, StoreFault> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    tx.get_many(keys)
}

/// Read and decode one record.
pub(crate) fn load<T: DeserializeOwned>(
    tx: &mut impl Txn,
    table: Table,
    key: &str,
) -> Result<Option<T>, Error> {
    tx.get(table, key)?.map(|v| decode(table, &v)).transpose()
}

pub(crate) fn decode<T: DeserializeOwned>(table: Table, value: &str) -> Result<T, Error> {
    serde_json::from_str(value).map_err(|e| {
        let why = e.to_string();
        if why.contains("missing field `v`") {
            Error::storage(format!(
                "a record in {} has no format version: it was written by gak 0.1, a pre-release format this kernel does not read",
                table.name()
            ))
        } else {
            Error::storage(format!("corrupt record in {}: {why}", table.name()))
        }
    })
}

/// Encode and write one record.
pub(crate) fn store<T: Serialize>(
    tx: &mut impl Txn,
    table: Table,
    key: &str,
    value: &T,
) -> Result<(), Error> {
    let json = serde_json::to_string(value)
        .map_err(|e| Error::storage(format!("cannot encode record: {e}")))?;
    Ok(tx.put(table, key, &json)?)
}

/// A fresh 128-bit capability as 32 lowercase hex digits, and the digest
/// that is all the store keeps of it.
pub(crate) fn mint(tx: &mut impl Txn) -> Result<(String, String), StoreFault> {
    let bytes = tx.random128()?.to_be_bytes();
    Ok((
        crate::format::hex128(u128::from_be_bytes(bytes)),
        crate::format::digest_bytes(&bytes),
    ))
}

/// Capabilities derived from one 256-bit seed (SPEC 10: a call that mints
/// many): the `n`-th is the first 128 bits of SHA-256 over a domain label,
/// the seed and `n`, a PRF under a fresh seed per call.
pub(crate) struct Minter {
    seed: [u8; 32],
    next: u64,
}

impl Minter {
    pub(crate) fn new(tx: &mut impl Txn) -> Result<Self, StoreFault> {
        Ok(Minter {
            seed: tx.seed256()?,
            next: 0,
        })
    }

    /// The next capability and its stored digest.
    pub(crate) fn mint(&mut self) -> (String, String) {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        hasher.update(b"gak token v1\0");
        hasher.update(self.seed);
        hasher.update(self.next.to_be_bytes());
        self.next += 1;
        let out = hasher.finalize();
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&out[..16]);
        (
            crate::format::hex128(u128::from_be_bytes(bytes)),
            crate::format::digest_bytes(&bytes),
        )
    }
}

/// Every entry under `prefix` after `after`, read in bounded pages. For
/// sets whose size the caller's own data bounds (a task's dependents, a
/// run's outcomes), never for a whole table.
pub(crate) fn scan_all(
    tx: &mut impl Txn,
    table: Table,
    prefix: &str,
) -> Result<Vec<(String, String)>, Error> {
    const PAGE: u32 = 256;
    let mut all: Vec<(String, String)> = Vec::new();
    loop {
        let after = all.last().map(|(k, _)| k.clone());
        let page = tx.scan(table, prefix, after.as_deref(), PAGE)?;
        let full = page.len() == PAGE as usize;
        all.extend(page);
        if !full {
            return Ok(all);
        }
    }
}

/// Write an index entry that carries no data: `{"v":2}` under `key`.
pub(crate) fn mark(tx: &mut impl Txn, key: &str) -> Result<(), Error> {
    #[derive(Serialize)]
    struct Marker {
        v: crate::format::V,
    }
    store(
        tx,
        Table::Indexes,
        key,
        &Marker {
            v: crate::format::V,
        },
    )
}
