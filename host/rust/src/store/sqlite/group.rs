//! Group commit: the calls of one process share the writing connection and,
//! when they arrive together, one transaction and one `COMMIT` (one fsync
//! under `synchronous=FULL`).
//!
//! A call takes the connection (waiting for it if another call has it),
//! opens the shared transaction if none is open (`BEGIN IMMEDIATE`, which
//! also excludes other processes), and runs inside its own savepoint. When
//! it ends — released on success, rolled back to its savepoint on refusal —
//! it hands the connection to the next waiting call; the last call of a
//! batch (no one waiting, or the batch full) commits for everyone. Every
//! call, refusals included, answers only once its batch is durable: its
//! reads may have seen earlier calls' writes in the batch, and an answer
//! must never rest on data that could still vanish.
//!
//! A batch that fails to commit fails every call in it with `storage`
//! (nothing of it landed). A refusal in such a batch was decided on data
//! that vanished; it still changed nothing, so retrying it is safe.
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

use gak_rules::StoreFault;
use rusqlite::Connection;

use super::{fault, with_busy_retry};

/// The most calls one batch takes before it commits even if more wait: a
/// bound on how long the first call of a batch waits for its answer.
const MAX_BATCH: usize = 64;
/// Failed batches remembered for their late waiters.
const REMEMBERED_FAILURES: usize = 16;

/// The writing connection of one SQLite backend and its batches.
pub(super) struct GroupWriter {
    slot: Mutex<Slot>,
    /// The connection was handed back.
    free: Condvar,
    /// A batch ended.
    ended: Condvar,
}

struct Slot {
    /// The connection; `None` while a call has it.
    conn: Option<Connection>,
    /// Calls waiting for the connection.
    waiting: usize,
    /// Whether the shared transaction is open, and its batch number.
    open: bool,
    batch: u64,
    /// Calls in the open batch so far.
    calls: usize,
    /// The highest batch that ended (committed or failed).
    ended: u64,
    /// Recently failed batches and why.
    failures: VecDeque<(u64, String)>,
    /// Calls ended and batches committed so far.
    calls_ended: u64,
    commits: u64,
}

/// How many calls shared how many commits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Calls that ended (committed or rolled back to their savepoint).
    pub calls: u64,
    /// Shared transactions committed.
    pub commits: u64,
    /// Calls waiting for the connection right now.
    pub waiting: usize,
}

/// A call's hold on the connection, inside its savepoint.
pub(super) struct Call {
    pub conn: Connection,
    batch: u64,
}

impl GroupWriter {
    pub fn new(conn: Connection) -> Self {
        GroupWriter {
            slot: Mutex::new(Slot {
                conn: Some(conn),
                waiting: 0,
                open: false,
                batch: 0,
                calls: 0,
                ended: 0,
                failures: VecDeque::new(),
                calls_ended: 0,
                commits: 0,
            }),
            free: Condvar::new(),
            ended: Condvar::new(),
        }
    }

    fn slot(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Calls, commits and waiters so far.
    pub fn stats(&self) -> GroupStats {
        let slot = self.slot();
        GroupStats {
            calls: slot.calls_ended,
            commits: slot.commits,
            waiting: slot.waiting,
        }
    }

    /// Take the connection for one call and open its savepoint (and the
    /// shared transaction, if this call starts a batch).
    pub fn begin(&self) -> Result<Call, StoreFault> {
        let (conn, starts, batch) = {
            let mut slot = self.slot();
            slot.waiting += 1;
            while slot.conn.is_none() {
                slot = self.free.wait(slot).unwrap_or_else(|p| p.into_inner());
            }
            slot.waiting -= 1;
            let conn = slot.conn.take().expect("checked above");
            let starts = !slot.open;
            if starts {
                slot.open = true;
                slot.batch += 1;
                slot.calls = 0;
            }
            slot.calls += 1;
            (conn, starts, slot.batch)
        };
        let opened = (|| {
            if starts {
                with_busy_retry(|| conn.execute_batch("BEGIN IMMEDIATE"))?;
            }
            conn.execute_batch("SAVEPOINT gak_call")
        })();
        match opened {
            Ok(()) => Ok(Call { conn, batch }),
            Err(e) => {
                // Nothing of this call happened; a batch this call started
                // never opened.
                let mut slot = self.slot();
                slot.calls -= 1;
                if starts {
                    slot.open = false;
                    slot.ended = slot.ended.max(batch);
                }
                slot.conn = Some(conn);
                drop(slot);
                self.free.notify_one();
                self.ended.notify_all();
                Err(fault(e))
            }
        }
    }

    /// End a call: keep its writes (`keep`) or undo them, then answer once
    /// its batch is durable.
    pub fn end(&self, call: Call, keep: bool) -> Result<(), StoreFault> {
        let Call { conn, batch } = call;
        let closed = if keep {
            conn.execute_batch("RELEASE gak_call")
        } else {
            conn.execute_batch("ROLLBACK TO gak_call; RELEASE gak_call")
        };
        let mut slot = self.slot();
        slot.calls_ended += 1;
        if closed.is_err() || slot.waiting == 0 || slot.calls >= MAX_BATCH {
            // The last call of the batch (or one that cannot leave the
            // transaction clean) commits for everyone.
            slot.open = false;
            drop(slot);
            let committed = match closed {
                Ok(()) => conn.execute_batch("COMMIT").map_err(fault),
                Err(e) => Err(fault(e)),
            };
            if committed.is_err() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            let mut slot = self.slot();
            if committed.is_ok() {
                slot.commits += 1;
            }
            if let Err(e) = &committed {
                slot.failures.push_back((batch, e.to_string()));
                if slot.failures.len() > REMEMBERED_FAILURES {
                    slot.failures.pop_front();
                }
            }
            slot.ended = slot.ended.max(batch);
            slot.conn = Some(conn);
            drop(slot);
            self.free.notify_one();
            self.ended.notify_all();
            return committed;
        }
        // Others are waiting to join the batch: hand them the connection
        // and wait for the call that commits it.
        slot.conn = Some(conn);
        self.free.notify_one();
        while slot.ended < batch {
            slot = self.ended.wait(slot).unwrap_or_else(|p| p.into_inner());
        }
        match slot.failures.iter().find(|(b, _)| *b == batch) {
            Some((_, why)) => Err(StoreFault::Failure(format!(
                "the shared commit of this call's batch failed: {why}"
            ))),
            None => Ok(()),
        }
    }
}
