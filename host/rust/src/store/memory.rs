//! The in-memory binding: one map, one writer at a time.
//!
//! A transaction takes the map's lock at `begin` — one async lock
//! acquisition per call, held until `commit` or `rollback` — and keeps its
//! writes in an overlay until `commit`, so it is serializable and
//! all-or-nothing. The lock is async: a transaction whose sink body awaits
//! (holding the lock) never blocks the thread other callers need to make
//! progress.
use std::any::Any;
use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Bound;
use std::pin::Pin;
use std::sync::Arc;

use gak_rules::StoreFault;
use gak_rules::buffer::Overlay;
use tokio::sync::{Mutex, OwnedMutexGuard};

use super::{Backend, Session, StoreFuture, Write, ready};

type Key = (&'static str, String);
type Map = BTreeMap<Key, String>;

/// An in-memory store shared by every session made from it.
#[derive(Clone, Default)]
pub struct MemoryBackend {
    data: Arc<Mutex<Map>>,
}

impl MemoryBackend {
    /// Every entry, for tests that compare store states.
    ///
    /// # Panics
    /// While a transaction is open (the map is locked).
    pub fn entries(&self) -> BTreeMap<(String, String), String> {
        self.data
            .try_lock()
            .expect("MemoryBackend::entries while a transaction is open")
            .iter()
            .map(|((t, k), v)| (((*t).to_owned(), k.clone()), v.clone()))
            .collect()
    }
}

impl Backend for MemoryBackend {
    fn session(&self) -> StoreFuture<'_, Box<dyn Session>> {
        let session: Box<dyn Session> = Box::new(MemorySession {
            data: self.data.clone(),
            tx: None,
        });
        ready(Ok(session))
    }
    fn describe(&self) -> String {
        "memory".into()
    }
}

/// An open transaction: the map, locked, and the pending writes.
struct Tx {
    data: OwnedMutexGuard<Map>,
    overlay: Overlay<&'static str>,
}

struct MemorySession {
    data: Arc<Mutex<Map>>,
    tx: Option<Tx>,
}

impl MemorySession {
    fn tx(&mut self) -> Result<&mut Tx, StoreFault> {
        self.tx
            .as_mut()
            .ok_or_else(|| StoreFault::Failure("no open transaction".into()))
    }

    fn get(&mut self, table: &'static str, key: &str) -> Result<Option<String>, StoreFault> {
        let tx = self.tx()?;
        if let Some(pending) = tx.overlay.get(table, key) {
            return Ok(pending.map(str::to_owned));
        }
        Ok(tx.data.get(&(table, key.to_owned())).cloned())
    }

    fn range(
        &mut self,
        table: &'static str,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreFault> {
        // The committed range, merged with this transaction's pending
        // writes (which win). Reads O(limit + pending).
        let tx = self.tx()?;
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded((table, a.to_owned())),
            _ => Bound::Included((table, prefix.to_owned())),
        };
        let deleted = tx.overlay.deletes_in(table, prefix, after);
        let committed: Vec<(String, String)> = tx
            .data
            .range((start, Bound::Unbounded))
            .take_while(|((t, k), _)| *t == table && k.starts_with(prefix))
            .take(limit as usize + deleted)
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect();
        Ok(tx.overlay.merge(table, prefix, after, committed, limit))
    }
}

impl Session for MemorySession {
    fn begin(&mut self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            if self.tx.is_some() {
                return Err(StoreFault::Failure("transaction already open".into()));
            }
            let data = self.data.clone().lock_owned().await;
            self.tx = Some(Tx {
                data,
                overlay: Overlay::default(),
            });
            Ok(())
        })
    }

    fn get_many<'a>(
        &'a mut self,
        keys: &'a [(&'static str, &'a str)],
    ) -> StoreFuture<'a, Vec<Option<String>>> {
        ready(keys.iter().map(|(t, k)| self.get(t, k)).collect())
    }

    fn write<'a>(&'a mut self, writes: &'a [Write<'a>]) -> StoreFuture<'a, ()> {
        let r = self.tx().map(|tx| {
            for w in writes {
                tx.overlay.set(w.table, w.key, w.value);
            }
        });
        ready(r)
    }

    fn scan<'a>(
        &'a mut self,
        table: &'static str,
        prefix: &'a str,
        after: Option<&'a str>,
        limit: u32,
    ) -> StoreFuture<'a, Vec<(String, String)>> {
        ready(self.range(table, prefix, after, limit))
    }

    fn commit(&mut self) -> StoreFuture<'_, ()> {
        let Some(mut tx) = self.tx.take() else {
            return ready(Err(StoreFault::Failure("no open transaction".into())));
        };
        for (table, key, value) in tx.overlay.drain() {
            match value {
                Some(v) => tx.data.insert((table, key), v),
                None => tx.data.remove(&(table, key)),
            };
        }
        // The lock is released here, after the data is in place.
        ready(Ok(()))
    }

    fn rollback(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        self.tx = None;
        Box::pin(std::future::ready(()))
    }

    fn as_any(&mut self) -> &mut dyn Any {
        self
    }
}
