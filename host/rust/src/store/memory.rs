//! The in-memory binding: one map, one writer at a time.
//!
//! A transaction takes the store-wide lock at `begin` and keeps its writes in
//! an overlay until `commit`, so it is serializable and all-or-nothing. The
//! lock is an async semaphore: a transaction whose sink body awaits (holding
//! the lock) never blocks the thread other callers need to make progress.
use std::any::Any;
use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Bound;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};

use gak_rules::StoreFault;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{Backend, Session, StoreFuture, ready};

type Key = (&'static str, String);

struct Shared {
    data: Mutex<BTreeMap<Key, String>>,
    writer: Arc<Semaphore>,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            data: Mutex::default(),
            writer: Arc::new(Semaphore::new(1)),
        }
    }
}

/// An in-memory store shared by every session made from it.
#[derive(Clone, Default)]
pub struct MemoryBackend {
    shared: Arc<Shared>,
}

impl MemoryBackend {
    /// Every entry, for tests that compare store states.
    pub fn entries(&self) -> BTreeMap<(String, String), String> {
        lock(&self.shared.data)
            .iter()
            .map(|((t, k), v)| (((*t).to_owned(), k.clone()), v.clone()))
            .collect()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere cannot leave the map half-written: writes are applied
    // from a complete overlay. So a poisoned lock is still consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Backend for MemoryBackend {
    fn session(&self) -> StoreFuture<'_, Box<dyn Session>> {
        let session: Box<dyn Session> = Box::new(MemorySession {
            shared: self.shared.clone(),
            tx: None,
        });
        ready(Ok(session))
    }
    fn describe(&self) -> String {
        "memory".into()
    }
}

/// An open transaction: the writer permit and the pending writes
/// (`None` = delete).
struct Tx {
    _writer: OwnedSemaphorePermit,
    overlay: BTreeMap<Key, Option<String>>,
}

struct MemorySession {
    shared: Arc<Shared>,
    tx: Option<Tx>,
}

impl MemorySession {
    fn overlay(&mut self) -> Result<&mut BTreeMap<Key, Option<String>>, StoreFault> {
        self.tx
            .as_mut()
            .map(|tx| &mut tx.overlay)
            .ok_or_else(|| StoreFault::Failure("no open transaction".into()))
    }

    fn get(&mut self, table: &'static str, key: &str) -> Result<Option<String>, StoreFault> {
        let k = (table, key.to_owned());
        if let Some(pending) = self.overlay()?.get(&k) {
            return Ok(pending.clone());
        }
        Ok(lock(&self.shared.data).get(&k).cloned())
    }

    fn range(
        &mut self,
        table: &'static str,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreFault> {
        // The range of both maps, merged: the committed data and this
        // transaction's pending writes (which win). Reads O(limit + pending).
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded((table, a.to_owned())),
            _ => Bound::Included((table, prefix.to_owned())),
        };
        let range = (start, Bound::Unbounded);
        let in_range = |(t, k): &Key| *t == table && k.starts_with(prefix);
        let overlay: Vec<(String, Option<String>)> = self
            .overlay()?
            .range(range.clone())
            .take_while(|(k, _)| in_range(k))
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect();
        let deleted = overlay.iter().filter(|(_, v)| v.is_none()).count();
        let mut merged: BTreeMap<String, Option<String>> = lock(&self.shared.data)
            .range(range)
            .take_while(|(k, _)| in_range(k))
            .take(limit as usize + deleted)
            .map(|((_, k), v)| (k.clone(), Some(v.clone())))
            .collect();
        merged.extend(overlay);
        Ok(merged
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .take(limit as usize)
            .collect())
    }
}

impl Session for MemorySession {
    fn begin(&mut self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            if self.tx.is_some() {
                return Err(StoreFault::Failure("transaction already open".into()));
            }
            let writer = self
                .shared
                .writer
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| StoreFault::Failure("the memory store was closed".into()))?;
            self.tx = Some(Tx {
                _writer: writer,
                overlay: BTreeMap::new(),
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

    fn put<'a>(
        &'a mut self,
        table: &'static str,
        key: &'a str,
        value: &'a str,
    ) -> StoreFuture<'a, ()> {
        let r = self
            .overlay()
            .map(|o| drop(o.insert((table, key.to_owned()), Some(value.to_owned()))));
        ready(r)
    }

    fn delete<'a>(&'a mut self, table: &'static str, key: &'a str) -> StoreFuture<'a, ()> {
        let r = self
            .overlay()
            .map(|o| drop(o.insert((table, key.to_owned()), None)));
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
        let Some(tx) = self.tx.take() else {
            return ready(Err(StoreFault::Failure("no open transaction".into())));
        };
        let mut data = lock(&self.shared.data);
        for (k, v) in tx.overlay {
            match v {
                Some(v) => data.insert(k, v),
                None => data.remove(&k),
            };
        }
        // The writer permit is released here, after the data is in place.
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
