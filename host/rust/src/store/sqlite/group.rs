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
//!
//! The last call lingers a little before it commits when the previous batch
//! had more calls than this one so far: their callers, woken by that
//! batch's commit, are on their way back, and one fsync for all of them
//! beats one each. The wait is bounded by a fraction of what a commit
//! costs (measured), and a lone caller (previous batch of one) never waits.
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use gak_rules::StoreFault;
use rusqlite::Connection;
use rusqlite::hooks::{AuthAction, Authorization};

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
    /// A call arrived to wait for the connection.
    arrived: Condvar,
    /// A sink body is running on the connection: its authorizer denies
    /// transaction control, so a body can never commit, roll back or
    /// release what the kernel opened (HOSTS.md rule 12).
    body: Arc<AtomicBool>,
    /// Tests only: the next call's `SAVEPOINT` fails.
    #[cfg(test)]
    fail_savepoint: AtomicBool,
    /// How long a call waits for the connection before it reports a
    /// conflict (the kernel then re-runs it with back-off): a bound, so a
    /// call made while another holds the connection never waits forever.
    wait: Duration,
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
    /// Calls in the last batch that ended.
    last_batch: usize,
    /// How long commits take (a moving average, µs).
    commit_us: f64,
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
    pub fn new(conn: Connection, wait: Duration) -> Self {
        let body = Arc::new(AtomicBool::new(false));
        let in_body = body.clone();
        conn.authorizer(Some(move |ctx: rusqlite::hooks::AuthContext<'_>| {
            let control = matches!(
                ctx.action,
                AuthAction::Transaction { .. } | AuthAction::Savepoint { .. }
            );
            if control && in_body.load(Ordering::Acquire) {
                Authorization::Deny
            } else {
                Authorization::Allow
            }
        }));
        GroupWriter {
            slot: Mutex::new(Slot {
                conn: Some(conn),
                waiting: 0,
                open: false,
                batch: 0,
                calls: 0,
                last_batch: 0,
                commit_us: 0.0,
                ended: 0,
                failures: VecDeque::new(),
                calls_ended: 0,
                commits: 0,
            }),
            free: Condvar::new(),
            ended: Condvar::new(),
            arrived: Condvar::new(),
            body,
            wait,
            #[cfg(test)]
            fail_savepoint: AtomicBool::new(false),
        }
    }

    /// Deny (`true`) or allow transaction control on the connection.
    pub fn guard_body(&self, running: bool) {
        self.body.store(running, Ordering::Release);
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
            self.arrived.notify_one();
            let deadline = Instant::now() + self.wait;
            while slot.conn.is_none() {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    slot.waiting -= 1;
                    return Err(StoreFault::Conflict(format!(
                        "this process's SQLite connection stayed busy for {} ms",
                        self.wait.as_millis()
                    )));
                }
                slot = self
                    .free
                    .wait_timeout(slot, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
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
            conn.execute_batch(self.savepoint())
        })();
        match opened {
            Ok(()) => Ok(Call { conn, batch }),
            Err(e) => {
                // Nothing of this call happened. If it started the batch,
                // `BEGIN` may have succeeded before `SAVEPOINT` failed: end
                // that empty transaction, or every later `BEGIN` fails and
                // the write lock stays held. If it joined a batch, earlier
                // calls wait for that batch's commit: with no one else
                // arriving, this call must commit it for them.
                self.slot().calls -= 1;
                let ending = if starts {
                    if !conn.is_autocommit() {
                        let _ = conn.execute_batch("ROLLBACK");
                    }
                    Ok(())
                } else {
                    Self::commit(&conn)
                };
                self.finish(conn, batch, &ending);
                Err(fault(e))
            }
        }
    }

    /// The statement that opens a call's savepoint.
    fn savepoint(&self) -> &'static str {
        #[cfg(test)]
        if self.fail_savepoint.swap(false, Ordering::AcqRel) {
            return "SAVEPOINT gak_call broken";
        }
        "SAVEPOINT gak_call"
    }

    /// Commit the shared transaction (rolling it back if that fails).
    fn commit(conn: &Connection) -> Result<(), StoreFault> {
        let committed = conn.execute_batch("COMMIT").map_err(fault);
        if committed.is_err() && !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        committed
    }

    /// The batch ended as `ending` says: record it, hand the connection
    /// back and wake everyone waiting for it or for the batch.
    fn finish(&self, conn: Connection, batch: u64, ending: &Result<(), StoreFault>) {
        let mut slot = self.slot();
        slot.open = false;
        slot.last_batch = slot.calls;
        match ending {
            Ok(()) => slot.commits += 1,
            Err(e) => {
                slot.failures.push_back((batch, e.to_string()));
                if slot.failures.len() > REMEMBERED_FAILURES {
                    slot.failures.pop_front();
                }
            }
        }
        slot.ended = slot.ended.max(batch);
        slot.conn = Some(conn);
        drop(slot);
        self.free.notify_one();
        self.ended.notify_all();
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
        if closed.is_ok() && slot.waiting == 0 && slot.calls < slot.last_batch.min(MAX_BATCH) {
            // The previous batch's callers may be on their way: wait for
            // one, at most half a commit.
            let linger = Duration::from_micros((slot.commit_us / 2.0).min(2_000.0) as u64);
            let deadline = Instant::now() + linger;
            while slot.waiting == 0 {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                slot = self
                    .arrived
                    .wait_timeout(slot, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        if closed.is_err() || slot.waiting == 0 || slot.calls >= MAX_BATCH {
            // The last call of the batch (or one that cannot leave the
            // transaction clean) commits for everyone.
            slot.open = false;
            drop(slot);
            let committed = match closed {
                Ok(()) => {
                    let started = Instant::now();
                    let committed = Self::commit(&conn);
                    let took = started.elapsed().as_secs_f64() * 1e6;
                    let mut slot = self.slot();
                    slot.commit_us = if slot.commit_us == 0.0 {
                        took
                    } else {
                        slot.commit_us * 0.9 + took * 0.1
                    };
                    drop(slot);
                    committed
                }
                Err(e) => {
                    if !conn.is_autocommit() {
                        let _ = conn.execute_batch("ROLLBACK");
                    }
                    Err(fault(e))
                }
            };
            self.finish(conn, batch, &committed);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn writer(dir: &std::path::Path) -> Arc<GroupWriter> {
        let conn = Connection::open(dir.join("g.db")).unwrap();
        conn.execute_batch("CREATE TABLE t (k TEXT PRIMARY KEY)")
            .unwrap();
        Arc::new(GroupWriter::new(conn, Duration::from_secs(5)))
    }

    /// A call that starts a batch and whose SAVEPOINT fails leaves no
    /// transaction open: the next call begins normally.
    #[test]
    fn a_failed_savepoint_after_begin_leaves_no_transaction_open() {
        let dir = tempfile_dir();
        let w = writer(&dir);
        w.fail_savepoint.store(true, Ordering::Release);
        assert!(w.begin().is_err());
        let call = w.begin().expect("the next call begins");
        call.conn.execute("INSERT INTO t VALUES ('a')", []).unwrap();
        w.end(call, true).expect("and commits");
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A call that joins a batch and whose SAVEPOINT fails commits the batch
    /// for the calls already in it, which would otherwise wait forever.
    #[test]
    fn a_joiner_whose_savepoint_fails_commits_for_the_batch() {
        let dir = tempfile_dir();
        let w = writer(&dir);
        let first = w.begin().unwrap();
        first
            .conn
            .execute("INSERT INTO t VALUES ('first')", [])
            .unwrap();
        let (joined, joiner) = mpsc::channel();
        let w2 = w.clone();
        std::thread::spawn(move || {
            let _ = joined.send(w2.begin().map(|c| w2.end(c, true)));
        });
        // The joiner is waiting for the connection (a condition, polled).
        for _ in 0..5_000 {
            if w.stats().waiting == 1 {
                break;
            }
            std::thread::yield_now();
        }
        assert_eq!(w.stats().waiting, 1, "the second call never waited");
        w.fail_savepoint.store(true, Ordering::Release);
        let (ended, first_done) = mpsc::channel();
        let w3 = w.clone();
        std::thread::spawn(move || {
            let _ = ended.send(w3.end(first, true));
        });
        let first_result = first_done
            .recv_timeout(Duration::from_secs(10))
            .expect("the first call was left waiting for a commit nobody makes");
        assert!(first_result.is_ok(), "{first_result:?}");
        assert!(
            joiner
                .recv_timeout(Duration::from_secs(10))
                .unwrap()
                .is_err()
        );
        let call = w.begin().unwrap();
        let n: i64 = call
            .conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1, "the first call's write committed");
        w.end(call, true).unwrap();
        let _ = std::fs::remove_dir_all(dir);
    }

    fn tempfile_dir() -> std::path::PathBuf {
        use std::sync::atomic::AtomicUsize;
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "gak-group-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
