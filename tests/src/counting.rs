//! A store binding that counts the rows each kernel call reads, to show that
//! no call reads a whole table (SPEC 9). It wraps any binding and counts the
//! entries the component gets back from `get`, `get_many` and `scan`.
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use gak::store::{Backend, Session, StoreFault};

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
    fn session(&self) -> Result<Box<dyn Session>, StoreFault> {
        Ok(Box::new(CountingSession {
            inner: self.inner.session()?,
            reads: self.reads.clone(),
        }))
    }

    fn describe(&self) -> String {
        format!("counting({})", self.inner.describe())
    }
}

struct CountingSession {
    inner: Box<dyn Session>,
    reads: Reads,
}

impl Session for CountingSession {
    fn begin(&mut self) -> Result<(), StoreFault> {
        self.inner.begin()
    }

    fn get(&mut self, table: &'static str, key: &str) -> Result<Option<String>, StoreFault> {
        let value = self.inner.get(table, key)?;
        self.reads.add(usize::from(value.is_some()));
        Ok(value)
    }

    fn get_many(
        &mut self,
        keys: &[(&'static str, &str)],
    ) -> Result<Vec<Option<String>>, StoreFault> {
        let values = self.inner.get_many(keys)?;
        self.reads
            .add(values.iter().filter(|v| v.is_some()).count());
        Ok(values)
    }

    fn put(&mut self, table: &'static str, key: &str, value: &str) -> Result<(), StoreFault> {
        self.inner.put(table, key, value)
    }

    fn delete(&mut self, table: &'static str, key: &str) -> Result<(), StoreFault> {
        self.inner.delete(table, key)
    }

    fn scan(
        &mut self,
        table: &'static str,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreFault> {
        let rows = self.inner.scan(table, prefix, after, limit)?;
        self.reads.add(rows.len());
        Ok(rows)
    }

    fn commit(&mut self) -> Result<(), StoreFault> {
        self.inner.commit()
    }

    fn rollback(&mut self) {
        self.inner.rollback();
    }

    fn now(&mut self) -> Option<Result<u64, StoreFault>> {
        self.inner.now()
    }
}
