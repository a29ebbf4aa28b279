//! Negative controls: bindings that each break one promise of the store
//! contract. The conformance suite must fail every one of them; if it
//! passes one, the suite has lost its teeth.
use std::any::Any;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Barrier, Mutex};

use gak::store::memory::MemoryBackend;
use gak::store::{Backend, Read, Session, Span, StoreFuture, Write, ready};

/// How a wrapped memory binding misbehaves.
#[derive(Clone, Copy, Debug)]
pub enum Defect {
    /// Commits every write of a transaction except the last one.
    DropLastWrite,
    /// Commits the sink's fence advance on its own, apart from the body's
    /// writes, so a failed body leaves the advanced fence behind.
    SplitSink,
    /// Stores every capability digest (task token, side-effect holder,
    /// reconcile claim) as the digest of the all-zero capability: a kernel
    /// that does not check tokens and holders, seen from the store. The
    /// all-zero token — what the vectors' forged leases and wrong tokens
    /// use — is then accepted, and every genuine one refused.
    ZeroDigests,
}

/// SHA-256 of the 16 zero bytes of the capability `000…0` (32 hex digits),
/// as the stored format writes digests (`FORMAT.md`).
const ZERO_DIGEST: &str = "374708fff7719dd5979ec875d56cd2286f6d3cf7ec317a3b25632aab28ec37bb";

/// `value` with every `…-sha256` field replaced by [`ZERO_DIGEST`].
fn zero_digests(value: &str) -> String {
    fn walk(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    if k.ends_with("-sha256") && v.is_string() {
                        *v = ZERO_DIGEST.into();
                    } else {
                        walk(v);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    match serde_json::from_str::<serde_json::Value>(value) {
        Ok(mut json) => {
            walk(&mut json);
            json.to_string()
        }
        Err(_) => value.to_owned(),
    }
}

/// A memory binding with one defect.
pub struct Defective {
    inner: MemoryBackend,
    defect: Defect,
}

impl Defective {
    /// Wrap a fresh memory store.
    pub fn backend(defect: Defect) -> Arc<dyn Backend> {
        Arc::new(Defective {
            inner: MemoryBackend::default(),
            defect,
        })
    }
}

impl Backend for Defective {
    fn session(&self) -> StoreFuture<'_, Box<dyn Session>> {
        Box::pin(async move {
            let session: Box<dyn Session> = Box::new(DefectiveSession {
                inner: self.inner.session().await?,
                defect: self.defect,
                last: None,
                sink_writes: Vec::new(),
            });
            Ok(session)
        })
    }
    fn describe(&self) -> String {
        format!("memory with {:?}", self.defect)
    }
}

type Held = (&'static str, String, String);

struct DefectiveSession {
    inner: Box<dyn Session>,
    defect: Defect,
    last: Option<Held>,
    sink_writes: Vec<Held>,
}

impl Session for DefectiveSession {
    fn begin(&mut self) -> StoreFuture<'_, ()> {
        self.last = None;
        self.sink_writes.clear();
        self.inner.begin()
    }
    fn get_many<'a>(
        &'a mut self,
        keys: &'a [(&'static str, &'a str)],
    ) -> StoreFuture<'a, Vec<Option<String>>> {
        self.inner.get_many(keys)
    }
    fn write<'a>(&'a mut self, writes: &'a [Write<'a>]) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            for w in writes {
                let Some(value) = w.value else {
                    self.inner.delete(w.table, w.key).await?;
                    continue;
                };
                match self.defect {
                    // The last entry of the transaction's writes is held
                    // back and never written.
                    Defect::DropLastWrite => {
                        if let Some((t, k, v)) = self.last.take() {
                            self.inner.put(t, &k, &v).await?;
                        }
                        self.last = Some((w.table, w.key.to_owned(), value.to_owned()));
                    }
                    Defect::ZeroDigests => {
                        self.inner.put(w.table, w.key, &zero_digests(value)).await?;
                    }
                    Defect::SplitSink => {
                        if w.table == "sinks" {
                            self.sink_writes
                                .push((w.table, w.key.to_owned(), value.to_owned()));
                        }
                        self.inner.put(w.table, w.key, value).await?;
                    }
                }
            }
            Ok(())
        })
    }
    fn scan<'a>(
        &'a mut self,
        table: &'static str,
        prefix: &'a str,
        after: Option<&'a str>,
        limit: u32,
    ) -> StoreFuture<'a, Vec<(String, String)>> {
        self.inner.scan(table, prefix, after, limit)
    }
    fn commit(&mut self) -> StoreFuture<'_, ()> {
        self.last = None;
        self.inner.commit()
    }
    fn rollback(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            self.inner.rollback().await;
            let split: Vec<Held> = std::mem::take(&mut self.sink_writes);
            if !split.is_empty() && self.inner.begin().await.is_ok() {
                for (t, k, v) in split {
                    let _ = self.inner.put(t, &k, &v).await;
                }
                let _ = self.inner.commit().await;
            }
        })
    }
    fn as_any(&mut self) -> &mut dyn Any {
        self
    }
}

/// A binding without transactions: every write lands at once, nothing is
/// isolated, nothing rolls back — "read, decide, write" as three steps.
///
/// Once armed with N, each transaction waits at its first write until N
/// transactions have read: the worst interleaving, made deterministic.
pub struct NoIsolation {
    data: Arc<Mutex<BTreeMap<(&'static str, String), String>>>,
    rendezvous: Arc<Mutex<Option<Arc<Barrier>>>>,
}

/// Arms a [`NoIsolation`] store's rendezvous.
pub struct Rendezvous(Arc<Mutex<Option<Arc<Barrier>>>>);

impl Rendezvous {
    /// From now on, `n` transactions meet before any of them writes.
    pub fn arm(&self, n: usize) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(Barrier::new(n)));
    }
}

impl NoIsolation {
    /// A fresh store and the handle that arms its rendezvous.
    pub fn backend() -> (Arc<dyn Backend>, Rendezvous) {
        let rendezvous = Arc::new(Mutex::new(None));
        let backend = Arc::new(NoIsolation {
            data: Arc::default(),
            rendezvous: rendezvous.clone(),
        });
        (backend, Rendezvous(rendezvous))
    }
}

impl Backend for NoIsolation {
    fn session(&self) -> StoreFuture<'_, Box<dyn Session>> {
        let session: Box<dyn Session> = Box::new(NoIsolationSession {
            data: self.data.clone(),
            rendezvous: self.rendezvous.clone(),
            wrote: false,
        });
        ready(Ok(session))
    }
    fn describe(&self) -> String {
        "memory without isolation".into()
    }
}

struct NoIsolationSession {
    data: Arc<Mutex<BTreeMap<(&'static str, String), String>>>,
    rendezvous: Arc<Mutex<Option<Arc<Barrier>>>>,
    wrote: bool,
}

impl NoIsolationSession {
    fn map(&self) -> std::sync::MutexGuard<'_, BTreeMap<(&'static str, String), String>> {
        self.data.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl NoIsolationSession {
    fn land(&mut self, table: &'static str, key: &str, value: Option<&str>) {
        if !self.wrote {
            self.wrote = true;
            let meet = self
                .rendezvous
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            if let Some(meet) = meet {
                meet.wait();
            }
        }
        match value {
            Some(v) => self.map().insert((table, key.to_owned()), v.to_owned()),
            None => self.map().remove(&(table, key.to_owned())),
        };
    }
}

impl Session for NoIsolationSession {
    fn begin(&mut self) -> StoreFuture<'_, ()> {
        self.wrote = false;
        ready(Ok(()))
    }
    fn get_many<'a>(
        &'a mut self,
        keys: &'a [(&'static str, &'a str)],
    ) -> StoreFuture<'a, Vec<Option<String>>> {
        let map = self.map();
        let found = keys
            .iter()
            .map(|(t, k)| map.get(&(*t, (*k).to_owned())).cloned())
            .collect();
        ready(Ok(found))
    }
    fn write<'a>(&'a mut self, writes: &'a [Write<'a>]) -> StoreFuture<'a, ()> {
        for w in writes {
            self.land(w.table, w.key, w.value);
        }
        ready(Ok(()))
    }
    fn scan<'a>(
        &'a mut self,
        table: &'static str,
        prefix: &'a str,
        after: Option<&'a str>,
        limit: u32,
    ) -> StoreFuture<'a, Vec<(String, String)>> {
        let found = self
            .map()
            .iter()
            .filter(|((t, k), _)| {
                *t == table && k.starts_with(prefix) && after.is_none_or(|a| k.as_str() > a)
            })
            .take(limit as usize)
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect();
        ready(Ok(found))
    }
    fn commit(&mut self) -> StoreFuture<'_, ()> {
        ready(Ok(()))
    }
    fn rollback(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(std::future::ready(()))
    }
    fn as_any(&mut self) -> &mut dyn Any {
        self
    }
}

/// A binding that forgets its database clock: it forwards everything to the
/// wrapped binding except [`Session::now`], so the kernel judges expiry by
/// the host's clock even where the wrapped binding was told `clock=db`.
pub struct IgnoresDatabaseClock(pub Arc<dyn Backend>);

impl Backend for IgnoresDatabaseClock {
    fn session(&self) -> StoreFuture<'_, Box<dyn Session>> {
        Box::pin(async move {
            let session: Box<dyn Session> = Box::new(NoClockSession(self.0.session().await?));
            Ok(session)
        })
    }
    fn describe(&self) -> String {
        format!("{} ignoring its database clock", self.0.describe())
    }
}

struct NoClockSession(Box<dyn Session>);

impl Session for NoClockSession {
    fn begin(&mut self) -> StoreFuture<'_, ()> {
        self.0.begin()
    }
    fn get_many<'a>(
        &'a mut self,
        keys: &'a [(&'static str, &'a str)],
    ) -> StoreFuture<'a, Vec<Option<String>>> {
        self.0.get_many(keys)
    }
    fn write<'a>(&'a mut self, writes: &'a [Write<'a>]) -> StoreFuture<'a, ()> {
        self.0.write(writes)
    }
    fn read<'a>(
        &'a mut self,
        keys: &'a [(&'static str, &'a str)],
        spans: &'a [Span<'a>],
    ) -> StoreFuture<'a, Read> {
        self.0.read(keys, spans)
    }
    fn scan<'a>(
        &'a mut self,
        table: &'static str,
        prefix: &'a str,
        after: Option<&'a str>,
        limit: u32,
    ) -> StoreFuture<'a, Vec<(String, String)>> {
        self.0.scan(table, prefix, after, limit)
    }
    fn commit(&mut self) -> StoreFuture<'_, ()> {
        self.0.commit()
    }
    fn rollback(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        self.0.rollback()
    }
    fn as_any(&mut self) -> &mut dyn Any {
        self
    }
}
