//! The `native` baseline: the rules of `gak-rules` compiled into the host,
//! over the same binding's [`Session`] the component would use, with the
//! kernel's call loop. The only thing missing is the WebAssembly boundary,
//! so `kernel / native` is the boundary's tax.
//!
//! Everything the component gets from the host it gets here the same way:
//! store calls go to the session (one `get_many` per `get_many`), the clock
//! is read once per call (the database's when the binding judges expiry by
//! it), and tokens come from the OS CSPRNG (the component's `wasi:random`).
use std::sync::Arc;

use gak_rules::{Error, StorageError, StoreFault, Table, Txn};

use crate::blocking::run;
use crate::builder::Retry;
use crate::clock::Clock;
use crate::store::Session;

/// One worker's native caller: its own session, as a kernel instance has.
pub struct Caller {
    session: Box<dyn Session>,
    clock: Arc<dyn Clock>,
    retry: Retry,
}

impl Caller {
    /// A caller over `session`, judging expiry by `clock` (unless the
    /// binding has its own clock), re-running conflicts as `retry` says.
    pub fn new(session: Box<dyn Session>, clock: Arc<dyn Clock>, retry: Retry) -> Caller {
        Caller {
            session,
            clock,
            retry,
        }
    }

    /// Run `rule` in one session transaction: commit on `Ok`, roll back on a
    /// refusal, re-run the whole call on a store conflict — the kernel's
    /// loop (`Kernel::attempts`), minus the component.
    ///
    /// # Errors
    /// The rule's refusal, or `storage`.
    pub fn call<T>(
        &mut self,
        mut rule: impl FnMut(&mut NativeTxn<'_>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let may_retry = attempt < self.retry.attempts;
            match run(self.session.begin()) {
                Ok(()) => {}
                Err(StoreFault::Conflict(_)) if may_retry => {
                    std::thread::sleep(self.retry.delay(attempt));
                    continue;
                }
                Err(fault) => return Err(fault.into()),
            }
            let mut tx = NativeTxn {
                session: &mut *self.session,
                clock: &*self.clock,
                now: None,
                conflict: false,
                failure: None,
            };
            let out = rule(&mut tx);
            let (conflict, failure) = (tx.conflict, tx.failure.take());
            match out {
                _ if conflict && may_retry => {
                    run(self.session.rollback());
                    std::thread::sleep(self.retry.delay(attempt));
                }
                _ if failure.is_some() || conflict => {
                    run(self.session.rollback());
                    let error = match failure {
                        Some(why) => StorageError::new(why),
                        None => StorageError::new(format!(
                            "store conflicts persisted through {attempt} attempts"
                        ))
                        .conflict(),
                    };
                    return Err(Error::Storage(error));
                }
                Ok(value) => match run(self.session.commit()) {
                    Ok(()) => return Ok(value),
                    Err(StoreFault::Conflict(_)) if may_retry => {
                        std::thread::sleep(self.retry.delay(attempt));
                    }
                    Err(fault) => return Err(fault.into()),
                },
                Err(refusal) => {
                    run(self.session.rollback());
                    return Err(refusal);
                }
            }
        }
    }
}

/// The open transaction of one native call, as the rules see it.
pub struct NativeTxn<'a> {
    session: &'a mut dyn Session,
    clock: &'a dyn Clock,
    /// The call's one instant, read at first use.
    now: Option<u64>,
    /// A conflict passed through: the call is re-run.
    conflict: bool,
    /// A failure the rules cannot see (the database clock): the call fails.
    failure: Option<String>,
}

impl NativeTxn<'_> {
    fn track<T>(&mut self, r: Result<T, StoreFault>) -> Result<T, StoreFault> {
        if let Err(StoreFault::Conflict(_)) = &r {
            self.conflict = true;
        }
        r
    }
}

impl Txn for NativeTxn<'_> {
    fn get(&mut self, table: Table, key: &str) -> Result<Option<String>, StoreFault> {
        let r = run(self.session.get_many(&[(table.name(), key)]));
        self.track(r).map(|mut found| found.pop().flatten())
    }

    fn get_many(&mut self, keys: &[(Table, &str)]) -> Result<Vec<Option<String>>, StoreFault> {
        let keys: Vec<(&'static str, &str)> = keys.iter().map(|(t, k)| (t.name(), *k)).collect();
        let r = run(self.session.get_many(&keys));
        self.track(r)
    }

    fn put(&mut self, table: Table, key: &str, value: &str) -> Result<(), StoreFault> {
        let r = run(self.session.put(table.name(), key, value));
        self.track(r)
    }

    fn delete(&mut self, table: Table, key: &str) -> Result<(), StoreFault> {
        let r = run(self.session.delete(table.name(), key));
        self.track(r)
    }

    fn scan(
        &mut self,
        table: Table,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreFault> {
        let r = run(self.session.scan(table.name(), prefix, after, limit));
        self.track(r)
    }

    fn now(&mut self) -> u64 {
        if let Some(now) = self.now {
            return now;
        }
        let read = self.session.now().map(run);
        let now =
            crate::clock::call_instant(read, self.clock, &mut self.conflict, &mut self.failure);
        self.now = Some(now);
        now
    }

    fn random128(&mut self) -> u128 {
        random128()
    }
}

/// 128 bits from the OS CSPRNG.
pub fn random128() -> u128 {
    let mut bytes = [0u8; 16];
    // Without a CSPRNG no token can be minted safely: a host defect.
    getrandom::fill(&mut bytes).expect("the OS CSPRNG is available");
    u128::from_le_bytes(bytes)
}
