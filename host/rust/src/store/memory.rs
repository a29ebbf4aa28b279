//! The in-memory binding: one map, one writer at a time.
//!
//! A transaction takes the store-wide lock at `begin` and keeps its writes in
//! an overlay until `commit`, so it is serializable and all-or-nothing.
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use gak_rules::StoreFault;

use super::{Backend, Session};

type Key = (&'static str, String);

#[derive(Default)]
struct Shared {
    data: Mutex<BTreeMap<Key, String>>,
    busy: Mutex<bool>,
    free: Condvar,
}

/// An in-memory store shared by every session made from it.
#[derive(Clone, Default)]
pub struct MemoryBackend {
    shared: Arc<Shared>,
}

impl MemoryBackend {
    /// Every entry, for tests that compare store states.
    pub fn dump(&self) -> BTreeMap<(String, String), String> {
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
    fn session(&self) -> Result<Box<dyn Session>, StoreFault> {
        Ok(Box::new(MemorySession {
            shared: self.shared.clone(),
            overlay: None,
        }))
    }
    fn describe(&self) -> String {
        "memory".into()
    }
}

struct MemorySession {
    shared: Arc<Shared>,
    /// Some while a transaction is open: its pending writes (None = delete).
    overlay: Option<BTreeMap<Key, Option<String>>>,
}

impl MemorySession {
    fn overlay(&mut self) -> Result<&mut BTreeMap<Key, Option<String>>, StoreFault> {
        self.overlay
            .as_mut()
            .ok_or_else(|| StoreFault::Failure("no open transaction".into()))
    }

    fn end(&mut self) {
        if self.overlay.take().is_some() {
            *lock(&self.shared.busy) = false;
            self.shared.free.notify_one();
        }
    }
}

impl Session for MemorySession {
    fn begin(&mut self) -> Result<(), StoreFault> {
        if self.overlay.is_some() {
            return Err(StoreFault::Failure("transaction already open".into()));
        }
        let mut busy = lock(&self.shared.busy);
        while *busy {
            busy = self
                .shared
                .free
                .wait(busy)
                .unwrap_or_else(|p| p.into_inner());
        }
        *busy = true;
        self.overlay = Some(BTreeMap::new());
        Ok(())
    }

    fn get(&mut self, table: &'static str, key: &str) -> Result<Option<String>, StoreFault> {
        let k = (table, key.to_owned());
        if let Some(pending) = self.overlay()?.get(&k) {
            return Ok(pending.clone());
        }
        Ok(lock(&self.shared.data).get(&k).cloned())
    }

    fn put(&mut self, table: &'static str, key: &str, value: &str) -> Result<(), StoreFault> {
        self.overlay()?
            .insert((table, key.to_owned()), Some(value.to_owned()));
        Ok(())
    }

    fn delete(&mut self, table: &'static str, key: &str) -> Result<(), StoreFault> {
        self.overlay()?.insert((table, key.to_owned()), None);
        Ok(())
    }

    fn scan(
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

    fn commit(&mut self) -> Result<(), StoreFault> {
        let overlay = self.overlay()?.clone();
        {
            let mut data = lock(&self.shared.data);
            for (k, v) in overlay {
                match v {
                    Some(v) => data.insert(k, v),
                    None => data.remove(&k),
                };
            }
        }
        self.end();
        Ok(())
    }

    fn rollback(&mut self) {
        self.end();
    }
}

impl Drop for MemorySession {
    fn drop(&mut self) {
        self.end();
    }
}
