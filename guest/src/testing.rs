//! An in-memory [`Txn`] for unit tests and examples: no isolation, no
//! rollback, a settable clock and a deterministic token source. Behind the
//! `testing` feature: no production build can mint counter tokens.
use std::collections::BTreeMap;

use crate::{StoreFault, Table, Txn};

/// A map, a clock and a counter standing in for a store.
#[derive(Debug, Default)]
pub struct MemTxn {
    /// The data.
    pub data: BTreeMap<(Table, String), String>,
    /// What `now` returns.
    pub clock: u64,
    /// Source of "random" tokens.
    pub counter: u128,
}

impl Txn for MemTxn {
    fn get(&mut self, table: Table, key: &str) -> Result<Option<String>, StoreFault> {
        Ok(self.data.get(&(table, key.to_owned())).cloned())
    }
    fn put(&mut self, table: Table, key: &str, value: &str) -> Result<(), StoreFault> {
        self.data.insert((table, key.to_owned()), value.to_owned());
        Ok(())
    }
    fn delete(&mut self, table: Table, key: &str) -> Result<(), StoreFault> {
        self.data.remove(&(table, key.to_owned()));
        Ok(())
    }
    fn scan(
        &mut self,
        table: Table,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreFault> {
        use std::ops::Bound;
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded((table, a.to_owned())),
            _ => Bound::Included((table, prefix.to_owned())),
        };
        Ok(self
            .data
            .range((start, Bound::Unbounded))
            .take_while(|((t, k), _)| *t == table && k.starts_with(prefix))
            .take(limit as usize)
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect())
    }
    fn now(&mut self) -> u64 {
        self.clock
    }
    fn random128(&mut self) -> u128 {
        self.counter += 1;
        // spread the bits so tokens look like tokens
        self.counter
            .wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)
    }
}
