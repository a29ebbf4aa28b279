//! A store binding that counts the rows each kernel call reads, to show that
//! no call reads a whole table (SPEC 9). It wraps any binding and counts the
//! entries the component gets back from `get`, `get_many` and `scan`.
use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use gak::store::{Backend, Session, StoreFuture, Write};

/// Rows read through every session of one [`Counting`] backend.
#[derive(Clone, Default)]
pub struct Reads(Arc<AtomicU64>);

impl Reads {
    /// Rows read so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    /// The rows `f` reads (the kernel call it makes, start to end).
    pub fn during<T>(&self, f: impl FnOnce() -> T) -> (T, u64) {
        let before = self.get();
        let out = f();
        (out, self.get() - before)
    }

    fn add(&self, n: usize) {
        self.0.fetch_add(n as u64, Ordering::SeqCst);
    }
}

/// A binding that counts the rows read through it.
pub struct Counting {
    inner: Arc<dyn Backend>,
    reads: Reads,
}

impl Counting {
    /// Wrap `inner`; the counter is shared by every session.
    pub fn wrap(inner: Arc<dyn Backend>) -> (Arc<Counting>, Reads) {
        let reads = Reads::default();
        let backend = Arc::new(Counting {
            inner,
            reads: reads.clone(),
        });
        (backend, reads)
    }
}

impl Backend for Counting {
    fn session(&self) -> StoreFuture<'_, Box<dyn Session>> {
        Box::pin(async move {
            let session: Box<dyn Session> = Box::new(CountingSession {
                inner: self.inner.session().await?,
                reads: self.reads.clone(),
            });
            Ok(session)
        })
    }

    fn describe(&self) -> String {
        format!("counting({})", self.inner.describe())
    }

    fn blocks_thread(&self) -> bool {
        self.inner.blocks_thread()
    }
}

struct CountingSession {
    inner: Box<dyn Session>,
    reads: Reads,
}

impl Session for CountingSession {
    fn begin(&mut self) -> StoreFuture<'_, ()> {
        self.inner.begin()
    }

    fn get_many<'a>(
        &'a mut self,
        keys: &'a [(&'static str, &'a str)],
    ) -> StoreFuture<'a, Vec<Option<String>>> {
        Box::pin(async move {
            let values = self.inner.get_many(keys).await?;
            self.reads.add(values.iter().flatten().count());
            Ok(values)
        })
    }

    fn write<'a>(&'a mut self, writes: &'a [Write<'a>]) -> StoreFuture<'a, ()> {
        self.inner.write(writes)
    }

    fn scan<'a>(
        &'a mut self,
        table: &'static str,
        prefix: &'a str,
        after: Option<&'a str>,
        limit: u32,
    ) -> StoreFuture<'a, Vec<(String, String)>> {
        Box::pin(async move {
            let rows = self.inner.scan(table, prefix, after, limit).await?;
            self.reads.add(rows.len());
            Ok(rows)
        })
    }

    fn commit(&mut self) -> StoreFuture<'_, ()> {
        self.inner.commit()
    }

    fn rollback(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        self.inner.rollback()
    }

    fn now(&mut self) -> Option<StoreFuture<'_, u64>> {
        self.inner.now()
    }

    fn as_any(&mut self) -> &mut dyn Any {
        self
    }
}
