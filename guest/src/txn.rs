use serde::{Serialize, de::DeserializeOwned};

use crate::Error;

/// The fixed set of tables (WIT `store.table`). Data can never name another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    /// Checkpoint snapshots by run-id.
    Snapshots,
    /// Commitgate outcomes by run-id and step.
    Outcomes,
    /// Side-effect keys.
    Actions,
    /// Side-effect resources.
    Resources,
    /// Fenced sinks' seen fences.
    Sinks,
    /// Taskboard tasks.
    Tasks,
}

impl Table {
    /// All tables, in a fixed order.
    pub const ALL: [Table; 6] = [
        Table::Snapshots,
        Table::Outcomes,
        Table::Actions,
        Table::Resources,
        Table::Sinks,
        Table::Tasks,
    ];

    /// A stable lowercase name (used for SQL table names by the host).
    pub fn name(self) -> &'static str {
        match self {
            Table::Snapshots => "snapshots",
            Table::Outcomes => "outcomes",
            Table::Actions => "actions",
            Table::Resources => "resources",
            Table::Sinks => "sinks",
            Table::Tasks => "tasks",
        }
    }
}

/// A store failure, as reported by the binding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreFault {
    /// Busy / serialization conflict: the host re-runs the whole call.
    Conflict(String),
    /// Anything else.
    Failure(String),
}

impl From<StoreFault> for Error {
    fn from(fault: StoreFault) -> Self {
        match fault {
            StoreFault::Conflict(m) => Error::Storage(format!("conflict: {m}")),
            StoreFault::Failure(m) => Error::Storage(m),
        }
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
    /// All entries ordered by key.
    fn scan(&mut self, table: Table) -> Result<Vec<(String, String)>, StoreFault>;
    /// Milliseconds since the Unix epoch, judged by the store side's clock.
    fn now(&mut self) -> u64;
    /// 128 bits from a CSPRNG.
    fn random128(&mut self) -> u128;
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
    serde_json::from_str(value)
        .map_err(|e| Error::Storage(format!("corrupt record in {}: {e}", table.name())))
}

/// Encode and write one record.
pub(crate) fn store<T: Serialize>(
    tx: &mut impl Txn,
    table: Table,
    key: &str,
    value: &T,
) -> Result<(), Error> {
    let json = serde_json::to_string(value)
        .map_err(|e| Error::Storage(format!("cannot encode record: {e}")))?;
    Ok(tx.put(table, key, &json)?)
}

/// A fresh 128-bit token as 32 lowercase hex digits.
pub(crate) fn mint(tx: &mut impl Txn) -> String {
    format!("{:032x}", tx.random128())
}
