//! An in-memory [`Txn`] for unit tests and examples: no isolation, no
//! rollback, a settable clock and a deterministic token source. Behind the
//! `testing` feature: no production build can mint counter tokens.
//!
//! It is a [`Store`] too, so the rules can run through [`crate::buffer::Buffered`]
//! as the component runs them.
use std::collections::BTreeMap;

use crate::buffer::{Answers, Change, Reads, Store};
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
    fn now(&mut self) -> Result<u64, StoreFault> {
        Ok(self.clock)
    }
    fn random128(&mut self) -> Result<u128, StoreFault> {
        self.counter += 1;
        // spread the bits so tokens look like tokens
        Ok(self
            .counter
            .wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
    }
}

impl Store for MemTxn {
    fn read(&mut self, reads: Reads) -> Result<Answers, StoreFault> {
        let values = reads
            .keys
            .iter()
            .map(|(t, k)| Txn::get(self, *t, k))
            .collect::<Result<_, _>>()?;
        let pages = reads
            .ranges
            .iter()
            .map(|r| Txn::scan(self, r.table, &r.prefix, r.after.as_deref(), r.limit))
            .collect::<Result<_, _>>()?;
        let mut entropy = Vec::with_capacity(usize::from(reads.entropy) + 15);
        while entropy.len() < usize::from(reads.entropy) {
            entropy.extend_from_slice(&Txn::random128(self)?.to_le_bytes());
        }
        entropy.truncate(usize::from(reads.entropy));
        Ok(Answers {
            values,
            pages,
            now: reads.clock.then_some(self.clock),
            entropy,
        })
    }
    fn write(&mut self, changes: Vec<Change>) -> Result<(), StoreFault> {
        for c in changes {
            match c.value {
                Some(v) => Txn::put(self, c.table, &c.key, &v)?,
                None => Txn::delete(self, c.table, &c.key)?,
            }
        }
        Ok(())
    }
}
