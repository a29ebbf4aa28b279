//! The `native` baseline of `gak bench`: the rules of `gak-rules` compiled into the host,
//! over the same binding's [`Session`] the component would use, with the
//! kernel's call loop. The only thing missing is the WebAssembly boundary,
//! so `kernel / native` is the boundary's tax.
//!
//! Everything the component gets from the host it gets here the same way:
//! the rules run through the same [`Buffered`] transaction, so a call makes
//! the same batched reads (the clock and the entropy with the first) and
//! hands over one write set; the session serves them as the engine's
//! imports do.
use std::sync::Arc;

use gak_rules::buffer::{Answers, Buffered, Change, Probe, Reads, Store};
use gak_rules::{Error, StoreFault, Table};

use crate::clock::Clock;
use crate::drive::run;
use crate::protocol::Ending;
use crate::protocol::Retry;
use crate::store::{Session, Span, Write};

/// One worker's native caller: its own session, as a kernel instance has.
pub struct Caller {
    session: Box<dyn Session>,
    clock: Arc<dyn Clock>,
    retry: Retry,
    /// A store call of the current attempt reported a conflict.
    conflict: bool,
}

impl Caller {
    /// A caller over `session`, judging expiry by `clock` (unless the
    /// binding has its own clock), re-running conflicts as `retry` says.
    pub fn new(session: Box<dyn Session>, clock: Arc<dyn Clock>, retry: Retry) -> Caller {
        Caller {
            session,
            clock,
            retry,
            conflict: false,
        }
    }

    /// Run `rule` (which mints `tokens` capabilities, and changes tasks when
    /// `counting`: its count record comes with the first read) as the kernel
    /// runs an export: the same loop (`crate::protocol`), the rules over the
    /// same [`Buffered`] transaction, minus the component.
    ///
    /// # Errors
    /// The rule's refusal, or `storage`.
    pub fn call<T>(
        &mut self,
        tokens: u8,
        counting: bool,
        mut rule: impl FnMut(&mut Buffered<NativeStore<'_>>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let retry = self.retry;
        let call = async |me: &mut Caller| {
            let store = NativeStore {
                session: &mut *me.session,
                clock: &*me.clock,
                conflict: &mut me.conflict,
            };
            let tx = Buffered::new(store).minting(tokens);
            let tx = if counting { tx.counting() } else { tx };
            Ok::<_, std::convert::Infallible>(tx.decide(&mut rule))
        };
        run(crate::protocol::attempts(
            self,
            &retry,
            crate::DEFAULT_CONNECTION_WAIT,
            Ending::Commit,
            call,
        ))
        .0
    }
}

impl crate::protocol::Attempter for Caller {
    fn session(&mut self) -> &mut dyn Session {
        &mut *self.session
    }
    fn clear_marks(&mut self) {
        self.conflict = false;
    }
    fn conflicted(&self) -> bool {
        self.conflict
    }
    fn take_failure(&mut self) -> Option<String> {
        None
    }
}

/// The session of one native call, as the engine's `store` import serves
/// it to the component.
pub struct NativeStore<'a> {
    session: &'a mut dyn Session,
    clock: &'a dyn Clock,
    /// A conflict passed through: the call is re-run.
    conflict: &'a mut bool,
}

impl NativeStore<'_> {
    fn track<T>(&mut self, r: Result<T, StoreFault>) -> Result<T, StoreFault> {
        if let Err(StoreFault::Conflict(_)) = &r {
            *self.conflict = true;
        }
        r
    }
}

impl Store for NativeStore<'_> {
    fn read(&mut self, reads: Reads) -> Result<Answers, StoreFault> {
        let keys: Vec<(&'static str, &str)> = reads
            .keys
            .iter()
            .map(|(t, k)| (t.name(), k.as_str()))
            .collect();
        let spans: Vec<Span<'_>> = reads
            .ranges
            .iter()
            .map(|r| Span {
                table: r.table.name(),
                prefix: &r.prefix,
                after: r.after.as_deref(),
                limit: r.limit,
            })
            .collect();
        let rows = if keys.is_empty() && spans.is_empty() {
            Ok((Vec::new(), Vec::new()))
        } else {
            run(self.session.read(&keys, &spans))
        };
        let (values, pages) = self.track(rows)?;
        let now = if reads.clock {
            let read = self.session.now().map(run);
            let now = crate::clock::call_instant(read, self.clock);
            Some(self.track(now)?)
        } else {
            None
        };
        let mut entropy = vec![0u8; usize::from(reads.entropy)];
        getrandom::fill(&mut entropy)
            .map_err(|e| StoreFault::Failure(format!("the OS CSPRNG: {e}")))?;
        Ok(Answers {
            values,
            pages,
            now,
            entropy,
        })
    }

    fn try_read(&mut self, keys: Vec<(Table, String)>) -> Result<Vec<Probe>, StoreFault> {
        let keys: Vec<(&'static str, &str)> =
            keys.iter().map(|(t, k)| (t.name(), k.as_str())).collect();
        let rows = run(self.session.try_get_many(&keys));
        Ok(self
            .track(rows)?
            .into_iter()
            .map(|row| row.map_or(Probe::Held, Probe::Found))
            .collect())
    }

    fn write(&mut self, changes: Vec<Change>) -> Result<(), StoreFault> {
        let writes: Vec<Write<'_>> = changes
            .iter()
            .map(|c| Write {
                table: c.table.name(),
                key: &c.key,
                value: c.value.as_deref(),
            })
            .collect();
        let r = run(self.session.write(&writes));
        self.track(r)
    }
}

/// 128 bits from the OS CSPRNG.
pub fn random128() -> u128 {
    let mut bytes = [0u8; 16];
    // Without a CSPRNG no token can be minted safely: a host defect.
    getrandom::fill(&mut bytes).expect("the OS CSPRNG is available");
    u128::from_le_bytes(bytes)
}
