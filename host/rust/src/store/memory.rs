//! The in-memory binding: one map, one writer at a time.
//!
//! A transaction takes the map's lock at `begin` — one async lock
//! acquisition per call, held until `commit` or `rollback` — so it is
//! serializable; it writes into the map at once and keeps what each write
//! replaced, which `rollback` (or a transaction dropped unfinished) puts
//! back, so it is all-or-nothing. Writing in place, not into an overlay
//! merged at commit, halves what a write costs and leaves reads one map
//! lookup. The lock is async: a transaction whose sink body awaits
//! (holding the lock) never blocks the thread other callers need to make
//! progress. And it is not fair: a caller that ends one transaction and
//! begins the next takes the lock again at once, if it is free, instead
//! of handing it to a waiter and sleeping until its turn comes round
//! (measured, a fair lock's hand-offs cost 2 workers draining one at a
//! time four fifths of one worker's rate, in futex wake-ups).
use std::any::Any;
use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Bound;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use gak_rules::StoreFault;
use tokio::sync::Notify;

use super::{Backend, Session, StoreFuture, Write, ready};

/// Table → key → value: a map per table, so a lookup borrows its key.
type Map = BTreeMap<&'static str, BTreeMap<String, String>>;

/// An in-memory store shared by every session made from it.
#[derive(Clone, Default)]
pub struct MemoryBackend {
    shared: Arc<Shared>,
}

/// The map and the lock a transaction holds from `begin` to its end. The
/// map's own mutex is only ever taken by the gate's holder (uncontended):
/// it is what lets safe code reach the map from the holder's session.
#[derive(Default)]
struct Shared {
    held: AtomicBool,
    free: Notify,
    map: Mutex<Map>,
}

impl Shared {
    /// Wait for the gate and take it.
    async fn enter(self: &Arc<Self>) -> Gate {
        loop {
            if !self.held.swap(true, Ordering::Acquire) {
                return Gate(self.clone());
            }
            let notified = self.free.notified();
            tokio::pin!(notified);
            // Registered before looking again: a release in between
            // either leaves the gate free here or wakes this waiter.
            notified.as_mut().enable();
            if !self.held.swap(true, Ordering::Acquire) {
                return Gate(self.clone());
            }
            notified.await;
        }
    }

    fn map(&self) -> MutexGuard<'_, Map> {
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The held gate: released, and one waiter woken, when dropped.
struct Gate(Arc<Shared>);

impl Drop for Gate {
    fn drop(&mut self) {
        self.0.held.store(false, Ordering::Release);
        self.0.free.notify_one();
    }
}

impl MemoryBackend {
    /// Every entry, for tests that compare store states.
    ///
    /// # Panics
    /// While a transaction is open (the map is locked).
    pub fn entries(&self) -> BTreeMap<(String, String), String> {
        assert!(
            !self.shared.held.load(Ordering::Acquire),
            "MemoryBackend::entries while a transaction is open"
        );
        self.shared
            .map()
            .iter()
            .flat_map(|(t, keys)| {
                keys.iter()
                    .map(|(k, v)| (((*t).to_owned(), k.clone()), v.clone()))
            })
            .collect()
    }
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

/// An open transaction: the gate, held, and what its writes replaced
/// (`None`: the key had no value), in the order they were made.
struct Tx {
    gate: Gate,
    undo: Vec<(&'static str, String, Option<String>)>,
}

impl Tx {
    fn map(&self) -> MutexGuard<'_, Map> {
        self.gate.0.map()
    }

    fn write(&mut self, table: &'static str, key: &str, value: Option<&str>) {
        let replaced = {
            let mut map = self.map();
            let keys = map.entry(table).or_default();
            match value {
                Some(v) => keys.insert(key.to_owned(), v.to_owned()),
                None => keys.remove(key),
            }
        };
        self.undo.push((table, key.to_owned(), replaced));
    }
}

impl Drop for Tx {
    /// Not committed: every write undone, newest first, before the gate
    /// is released (the fields drop after this).
    fn drop(&mut self) {
        let mut map = self.gate.0.map();
        for (table, key, replaced) in self.undo.drain(..).rev() {
            let keys = map.entry(table).or_default();
            match replaced {
                Some(v) => keys.insert(key, v),
                None => keys.remove(&key),
            };
        }
    }
}

struct MemorySession {
    shared: Arc<Shared>,
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
        Ok(tx.map().get(table).and_then(|keys| keys.get(key)).cloned())
    }

    fn range(
        &mut self,
        table: &'static str,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreFault> {
        // The map holds this transaction's writes already. Reads O(limit).
        let tx = self.tx()?;
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded(a),
            _ => Bound::Included(prefix),
        };
        Ok(tx
            .map()
            .get(table)
            .into_iter()
            .flat_map(|keys| keys.range::<str, _>((start, Bound::Unbounded)))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit as usize)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
}

impl Session for MemorySession {
    fn begin(&mut self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            if self.tx.is_some() {
                return Err(StoreFault::Failure("transaction already open".into()));
            }
            let gate = self.shared.enter().await;
            self.tx = Some(Tx {
                gate,
                undo: Vec::new(),
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
                tx.write(w.table, w.key, w.value);
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
        // Kept: nothing to undo. The gate is released when `tx` drops.
        tx.undo.clear();
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

#[cfg(test)]
mod tests {
    use super::*;
    use futures_executor::block_on;

    fn put(s: &mut dyn Session, key: &str, value: Option<&str>) {
        let w = [Write {
            table: "tasks",
            key,
            value,
        }];
        block_on(s.write(&w)).expect("write");
    }

    fn get(s: &mut dyn Session, key: &str) -> Option<String> {
        block_on(s.get_many(&[("tasks", key)]))
            .expect("get")
            .remove(0)
    }

    /// Writes land in the map at once (the transaction reads them, in
    /// point and range reads); rollback, or a transaction dropped
    /// unfinished, puts back exactly what was there, a key written twice
    /// included; commit keeps them.
    #[test]
    fn writes_in_place_are_undone_unless_committed() {
        let backend = MemoryBackend::default();
        let mut s = block_on(backend.session()).expect("session");
        block_on(s.begin()).expect("begin");
        put(&mut *s, "a", Some("1"));
        put(&mut *s, "b", Some("2"));
        block_on(s.commit()).expect("commit");
        let before = backend.entries();

        block_on(s.begin()).expect("begin");
        put(&mut *s, "a", Some("x"));
        put(&mut *s, "a", Some("y"));
        put(&mut *s, "b", None);
        put(&mut *s, "c", Some("3"));
        put(&mut *s, "c", None);
        put(&mut *s, "d", Some("4"));
        assert_eq!(get(&mut *s, "a").as_deref(), Some("y"));
        assert_eq!(get(&mut *s, "b"), None);
        assert_eq!(get(&mut *s, "c"), None);
        let page = block_on(s.scan("tasks", "", None, 10)).expect("scan");
        assert_eq!(
            page,
            [("a".into(), "y".into()), ("d".into(), "4".into())],
            "a range read sees the transaction's writes"
        );
        block_on(s.rollback());
        assert_eq!(backend.entries(), before, "rollback restores the map");

        block_on(s.begin()).expect("begin");
        put(&mut *s, "a", None);
        put(&mut *s, "e", Some("5"));
        drop(s);
        assert_eq!(
            backend.entries(),
            before,
            "a dropped transaction restores it"
        );

        let mut s = block_on(backend.session()).expect("session");
        block_on(s.begin()).expect("begin");
        put(&mut *s, "a", None);
        put(&mut *s, "e", Some("5"));
        block_on(s.commit()).expect("commit");
        let after: Vec<_> = backend.entries().into_iter().collect();
        assert_eq!(
            after,
            [
                (("tasks".into(), "b".into()), "2".into()),
                (("tasks".into(), "e".into()), "5".into())
            ]
        );
    }

    /// One transaction at a time: a second `begin` waits while the first
    /// is open and goes on once it ends, also when a third caller that was
    /// waiting gave up (its wake-up is not lost).
    #[test]
    fn a_begin_waits_for_the_open_transaction() {
        use std::task::{Context, Poll, Waker};
        let backend = MemoryBackend::default();
        let mut a = block_on(backend.session()).expect("a");
        let mut b = block_on(backend.session()).expect("b");
        let mut c = block_on(backend.session()).expect("c");
        let mut cx = Context::from_waker(Waker::noop());
        block_on(a.begin()).expect("a begins");
        put(&mut *a, "k", Some("a"));
        {
            let mut c_begin = c.begin();
            assert!(c_begin.as_mut().poll(&mut cx).is_pending(), "c waits");
        }
        let mut b_begin = b.begin();
        assert!(b_begin.as_mut().poll(&mut cx).is_pending(), "b waits");
        block_on(a.commit()).expect("a commits");
        assert!(
            matches!(b_begin.as_mut().poll(&mut cx), Poll::Ready(Ok(()))),
            "b goes on once a ended"
        );
        drop(b_begin);
        assert_eq!(get(&mut *b, "k").as_deref(), Some("a"));
        let mut a_again = a.begin();
        assert!(a_again.as_mut().poll(&mut cx).is_pending(), "a waits for b");
        drop(a_again);
        block_on(b.rollback());
        block_on(c.begin()).expect("c begins once nobody holds the store");
        block_on(c.rollback());
    }
}
