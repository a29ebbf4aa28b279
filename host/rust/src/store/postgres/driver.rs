//! A session's connection, driven by whoever awaits its client.
//!
//! tokio-postgres splits a connection into a `Client` (which queues
//! requests on a channel) and a `Connection` future (which moves them to
//! the socket and the answers back). Spawned as a task, the connection
//! runs on the runtime's worker — for the blocking API, the one `gak-io`
//! thread every session of the process shares — so every round trip hops
//! there and back: the caller wakes `gak-io` to send, `gak-io` parses the
//! answer and wakes the caller. Here the connection is polled by the
//! future that waits for its answer, on the caller's thread: the request
//! leaves as soon as it is queued, the answer is parsed where it is used,
//! and (on Linux, for the blocking API) the caller waits for the socket's
//! readiness itself (`socket.rs`). Eight workers no longer share one
//! thread for all their parsing.
//!
//! Between calls nobody polls the connection: what the server sends then
//! waits in the socket until the next call. A request that must leave
//! without being waited for (the unwaited end of a read-only transaction,
//! which releases its locks) is pushed out with [`Driver::push`].
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

/// A connection future with its error dropped: its end shows to the client
/// (a closed channel), which reports it.
pub(crate) type Connection = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The connection of one session; clones share it.
#[derive(Clone, Default)]
pub(crate) struct Driver(Arc<Mutex<Option<Connection>>>);

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Driver")
    }
}

impl Driver {
    pub(crate) fn new(connection: Connection) -> Self {
        Driver(Arc::new(Mutex::new(Some(connection))))
    }

    /// A new connection in place of the old one (after a reconnect).
    pub(crate) fn replace(&self, connection: Connection) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(connection);
    }

    /// Poll the connection once: it sends what the client queued and hands
    /// over what has arrived. A connection that ended is dropped (its
    /// client's requests then fail as closed).
    fn poll(&self, cx: &mut Context<'_>) {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(connection) = slot.as_mut()
            && connection.as_mut().poll(cx).is_ready()
        {
            *slot = None;
        }
    }

    /// Send what the client has queued now, without waiting for any answer
    /// (the answer is read, and dropped, by the next call's polls).
    pub(crate) fn push(&self) {
        self.poll(&mut Context::from_waker(Waker::noop()));
    }

    /// `fut`, with this connection driven while it waits.
    pub(crate) async fn drive<F: Future>(&self, fut: F) -> F::Output {
        let mut fut = pin!(fut);
        poll_fn(|cx| {
            if let Poll::Ready(out) = fut.as_mut().poll(cx) {
                return Poll::Ready(out);
            }
            // Send what `fut` queued, take in what arrived; an answer that
            // arrived makes `fut` ready now, without a wake-up round.
            self.poll(cx);
            fut.as_mut().poll(cx)
        })
        .await
    }

    /// [`Self::drive`], owning the driver (for a future that outlives the
    /// borrow it was made under).
    pub(crate) async fn drive_owned<F: Future>(self, fut: F) -> F::Output {
        self.drive(fut).await
    }

    /// Drop the connection after its client: a last poll sends the
    /// `Terminate` the closed channel asks for, so the server sees a clean
    /// goodbye rather than a dropped socket.
    pub(crate) fn close(&self) {
        self.push();
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A connection that counts its polls and ends after `n`.
    fn counting(n: usize, polls: Arc<AtomicUsize>) -> Connection {
        Box::pin(poll_fn(move |_| {
            if polls.fetch_add(1, Ordering::SeqCst) + 1 >= n {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        }))
    }

    #[test]
    fn a_waiting_future_polls_the_connection_and_an_ended_one_is_dropped() {
        let polls = Arc::new(AtomicUsize::new(0));
        let driver = Driver::new(counting(2, polls.clone()));
        // A future that needs two rounds: the connection is polled between.
        let mut round = 0;
        let out = crate::drive::run(driver.drive(poll_fn(|cx| {
            round += 1;
            if round >= 3 {
                Poll::Ready(round)
            } else {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        })));
        assert_eq!(out, 3);
        assert_eq!(polls.load(Ordering::SeqCst), 1);
        driver.push();
        assert_eq!(polls.load(Ordering::SeqCst), 2, "push polls once");
        driver.push();
        assert_eq!(
            polls.load(Ordering::SeqCst),
            2,
            "an ended connection is gone"
        );
    }
}
