//! Driving a future to completion on the calling thread: what the blocking
//! API, `Builder::open_blocking` and the native call loop stand on. The
//! lowest floor of the crate: it knows nothing of kernels or stores.
//!
//! On Linux the calling thread also waits for its own sockets: a stream
//! that would block names its descriptor here ([`watch`]) and the
//! thread sleeps in `poll(2)` on those descriptors and on an `eventfd` that
//! wakers write, so an answer from the server wakes the thread that waits
//! for it directly, instead of waking the runtime's reactor thread, which
//! then wakes the caller (a switch on each side per round trip). Timers
//! and everything else registered with the runtime still wake the caller
//! through its waker. Elsewhere the thread parks and the runtime's reactor
//! watches every socket.
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, OnceLock};
use std::task::Waker;

use tokio::runtime::Runtime;

/// The process's runtime for blocking kernels: it runs the timers of
/// retries and pool waits, and its reactor watches the sockets the callers
/// do not watch themselves.
fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("gak-io")
            .enable_all()
            .build()
            .expect("cannot start the gak-io runtime thread")
    })
}

/// Drive `fut` to completion on this thread, sleeping between polls. The
/// runtime is entered so the future may use its timers and spawn
/// connection tasks. Unlike `block_on` of tokio or futures this may nest
/// (a fenced sink's synchronous body makes store calls while the outer call
/// is being driven): each level has its own waker and its own descriptors,
/// and a wake of an outer level during an inner one is kept for it.
pub(crate) fn run<F: Future>(fut: F) -> F::Output {
    let _runtime = runtime().enter();
    imp::run(pin!(fut))
}

/// Whether this thread is inside [`run`] and waits for its own sockets:
/// a stream made now may leave its readiness to [`watch`].
pub(crate) fn on_caller_thread() -> bool {
    imp::on_caller_thread()
}

/// What a caller-driven stream waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ready {
    Read,
    Write,
}

/// A descriptor a caller-driven stream owns, shared with the waits on it
/// (so it stays open, and its number is not reused, while one is pending).
#[cfg(target_os = "linux")]
pub(crate) type Descriptor = Arc<dyn std::os::fd::AsFd + Send + Sync>;

/// Wake `waker` when `fd` is ready for `ready`: the innermost [`run`] on
/// this thread adds it to what it sleeps on. False outside a `run`, where
/// nobody would watch it: the caller must wait some other way.
#[cfg(target_os = "linux")]
pub(crate) fn watch(fd: &Descriptor, ready: Ready, waker: &Waker) -> bool {
    imp::watch(fd, ready, waker)
}

#[cfg(target_os = "linux")]
mod imp {
    use super::{Descriptor, Ready};
    use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd, poll};
    use rustix::fd::{AsFd, OwnedFd};
    use rustix::io::Errno;
    use std::cell::{Cell, RefCell};
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::{Arc, OnceLock};
    use std::task::{Context, Poll, Wake, Waker};

    /// The thread's doorbell: an `eventfd` that wakers write while the
    /// thread sleeps. Shared with the wakers, so it outlives the thread
    /// for as long as a waker does.
    struct Bell {
        fd: OwnedFd,
        /// The process that made it: a child of `fork()` inherits the
        /// thread's bell, the same `eventfd` as its parent's, and must not
        /// drain a ring meant for the parent (which would then sleep
        /// through it); it makes its own.
        pid: u32,
    }

    impl Bell {
        fn ring(&self) {
            // A full counter (never, at one per wake) still wakes the poll.
            let _ = rustix::io::write(&self.fd, &1u64.to_ne_bytes());
        }
        fn quiet(&self) {
            let mut buf = [0u8; 8];
            let _ = rustix::io::read(&self.fd, &mut buf);
        }
    }

    /// The waker of one level of `run`.
    ///
    /// The level takes the thread's bell the first time it is about to
    /// sleep, not when it starts: a call whose future is ready at once
    /// (the memory store's, every time) never looks for it, and looking
    /// costs a `getpid(2)` (the fork check). Only a sleeping level is rung:
    /// an outer level woken while an inner one sleeps finds `woken` set
    /// when the inner one returns, and polls again before it sleeps.
    struct Level {
        woken: AtomicBool,
        /// This level is in (or about to enter) `poll(2)`: a wake must ring.
        sleeping: AtomicBool,
        /// Set before `sleeping` is first set, so a waker that sees
        /// `sleeping` sees the bell.
        bell: OnceLock<Arc<Bell>>,
    }

    impl Wake for Level {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            // Either the sleeper sees `woken` before it sleeps, or this
            // sees `sleeping` and rings (both orders are sequentially
            // consistent); a ring nobody needed costs one spurious turn.
            self.woken.store(true, SeqCst);
            if self.sleeping.load(SeqCst)
                && let Some(bell) = self.bell.get()
            {
                bell.ring();
            }
        }
    }

    /// A pending wait of a stream: its descriptor, what for, and whom to wake.
    struct Watch {
        fd: Descriptor,
        flags: PollFlags,
        waker: Waker,
    }

    #[derive(Default)]
    struct Thread {
        bell: Option<Arc<Bell>>,
        /// One list of watches per level of `run`, the innermost last.
        levels: Vec<Vec<Watch>>,
    }

    thread_local! {
        static THREAD: RefCell<Thread> = RefCell::default();
        /// Waits of this thread's sockets that woke it.
        static WOKEN_BY_SOCKETS: Cell<u64> = const { Cell::new(0) };
    }

    pub(super) fn socket_wakes() -> u64 {
        WOKEN_BY_SOCKETS.with(Cell::get)
    }

    fn flags(ready: Ready) -> PollFlags {
        match ready {
            Ready::Read => PollFlags::IN,
            Ready::Write => PollFlags::OUT,
        }
    }

    pub(super) fn on_caller_thread() -> bool {
        THREAD.with(|t| !t.borrow().levels.is_empty())
    }

    pub(super) fn watch(fd: &Descriptor, ready: Ready, waker: &Waker) -> bool {
        THREAD.with(|t| {
            let mut t = t.borrow_mut();
            let Some(level) = t.levels.last_mut() else {
                return false;
            };
            let flags = flags(ready);
            let same =
                |w: &Watch| Arc::ptr_eq(&w.fd, fd) && w.flags == flags && w.waker.will_wake(waker);
            if !level.iter().any(same) {
                level.push(Watch {
                    fd: fd.clone(),
                    flags,
                    waker: waker.clone(),
                });
            }
            true
        })
    }

    /// Leaves a level of `run` on every way out, a panic included.
    struct Leave;

    impl Drop for Leave {
        fn drop(&mut self) {
            THREAD.with(|t| t.borrow_mut().levels.pop());
        }
    }

    fn bell() -> Arc<Bell> {
        bell_of(std::process::id())
    }

    /// The thread's bell for process `pid`: a new one when the thread's
    /// was made by another process (the parent, before a `fork()`).
    fn bell_of(pid: u32) -> Arc<Bell> {
        THREAD.with(|t| {
            let mut t = t.borrow_mut();
            if let Some(bell) = &t.bell
                && bell.pid == pid
            {
                return bell.clone();
            }
            let fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
                .expect("cannot make an eventfd for a calling thread");
            let bell = Arc::new(Bell { fd, pid });
            t.bell = Some(bell.clone());
            bell
        })
    }

    pub(super) fn run<F: Future>(mut fut: Pin<&mut F>) -> F::Output {
        let level = Arc::new(Level {
            woken: AtomicBool::new(false),
            sleeping: AtomicBool::new(false),
            bell: OnceLock::new(),
        });
        let waker = Waker::from(level.clone());
        let mut cx = Context::from_waker(&waker);
        THREAD.with(|t| t.borrow_mut().levels.push(Vec::new()));
        let _leave = Leave;
        loop {
            level.woken.store(false, SeqCst);
            if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
                return out;
            }
            let bell = level.bell.get_or_init(bell);
            level.sleeping.store(true, SeqCst);
            if level.woken.load(SeqCst) {
                level.sleeping.store(false, SeqCst);
                continue;
            }
            let watches = THREAD
                .with(|t| std::mem::take(t.borrow_mut().levels.last_mut().expect("this level")));
            let mut fds = Vec::with_capacity(watches.len() + 1);
            fds.push(PollFd::new(&bell.fd, PollFlags::IN));
            fds.extend(
                watches
                    .iter()
                    .map(|w| PollFd::from_borrowed_fd(w.fd.as_fd(), w.flags)),
            );
            loop {
                match poll(&mut fds, None) {
                    Err(Errno::INTR) => continue,
                    Err(e) => panic!("poll(2) of a calling thread failed: {e}"),
                    Ok(_) => break,
                }
            }
            level.sleeping.store(false, SeqCst);
            if !fds[0].revents().is_empty() {
                bell.quiet();
            }
            let fired: Vec<bool> = fds[1..].iter().map(|f| !f.revents().is_empty()).collect();
            drop(fds);
            if fired.contains(&true) {
                WOKEN_BY_SOCKETS.with(|n| n.set(n.get() + 1));
            }
            let mut kept = Vec::new();
            for (watch, fired) in watches.into_iter().zip(fired) {
                if !fired {
                    kept.push(watch);
                } else if !watch.waker.will_wake(&waker) {
                    // A combinator's own waker: it re-polls only what woke.
                    watch.waker.wake();
                }
            }
            THREAD.with(|t| {
                let mut t = t.borrow_mut();
                let level = t.levels.last_mut().expect("this level");
                // Keep what did not fire, before what the next poll adds.
                kept.append(level);
                *level = kept;
            });
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// A thread keeps its bell within one process and gets a new one
        /// in another (a child of `fork()` sees its parent's bell with the
        /// parent's pid).
        #[test]
        fn a_forked_child_rings_a_bell_of_its_own() {
            let me = std::process::id();
            let first = bell_of(me);
            assert!(Arc::ptr_eq(&first, &bell_of(me)), "kept in one process");
            let child = bell_of(me.wrapping_add(1));
            assert!(!Arc::ptr_eq(&first, &child), "a new bell in another");
            assert_eq!(child.pid, me.wrapping_add(1));
        }

        /// A call whose future is ready at once never looks for the
        /// thread's bell (no fork check, no eventfd); one that sleeps does.
        #[test]
        fn only_a_level_that_sleeps_takes_the_bell() {
            std::thread::spawn(|| {
                let has_bell = || THREAD.with(|t| t.borrow().bell.is_some());
                assert_eq!(run(std::pin::pin!(async { 7 })), 7);
                assert!(!has_bell(), "a ready call took the bell");
                let mut first = true;
                let slept = run(std::pin::pin!(std::future::poll_fn(|cx| {
                    if std::mem::take(&mut first) {
                        let waker = cx.waker().clone();
                        std::thread::spawn(move || waker.wake());
                        Poll::Pending
                    } else {
                        Poll::Ready(8)
                    }
                })));
                assert_eq!(slept, 8);
                assert!(has_bell(), "a sleeping call rings the thread's bell");
            })
            .join()
            .unwrap();
        }
    }
}

/// How many times this thread, inside [`run`], was woken by one of its own
/// sockets (not by another thread): what shows a blocking kernel's round
/// trips never hop through the runtime's thread. Zero off Linux.
pub(crate) fn socket_wakes() -> u64 {
    imp::socket_wakes()
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    use std::thread::{self, Thread};

    /// Wakes a parked thread.
    struct Unpark(Thread);

    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }

    pub(super) fn on_caller_thread() -> bool {
        false
    }

    pub(super) fn socket_wakes() -> u64 {
        0
    }

    pub(super) fn run<F: Future>(mut fut: Pin<&mut F>) -> F::Output {
        let waker = Waker::from(Arc::new(Unpark(thread::current())));
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
                return out;
            }
            thread::park();
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::future::poll_fn;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::task::Poll;
    use std::time::Duration;

    /// A future that reads one byte from `stream`, waiting through `watch`.
    async fn read_byte(stream: Arc<UnixStream>) -> u8 {
        let fd: Descriptor = stream.clone();
        poll_fn(|cx| {
            let mut byte = [0u8];
            match (&*stream).read(&mut byte) {
                Ok(1) => Poll::Ready(byte[0]),
                Ok(_) => panic!("closed"),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    assert!(watch(&fd, Ready::Read, cx.waker()), "inside run");
                    Poll::Pending
                }
                Err(e) => panic!("{e}"),
            }
        })
        .await
    }

    fn pair() -> (Arc<UnixStream>, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        (Arc::new(a), b)
    }

    /// The peer writes only once the read waits (its thread starts from
    /// the wait), and what wakes the caller is its socket, not a waker.
    #[test]
    fn a_caller_wakes_for_its_own_socket() {
        let (a, b) = pair();
        let fd: Descriptor = a.clone();
        let mut peer = Some(b);
        let mut writer = None;
        assert!(!on_caller_thread());
        let before = socket_wakes();
        let byte = run(poll_fn(|cx| {
            assert!(on_caller_thread());
            let mut byte = [0u8];
            match (&*a).read(&mut byte) {
                Ok(1) => return Poll::Ready(byte[0]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                other => panic!("{other:?}"),
            }
            assert!(watch(&fd, Ready::Read, cx.waker()));
            if let Some(mut b) = peer.take() {
                writer = Some(std::thread::spawn(move || b.write_all(&[7]).unwrap()));
            }
            Poll::Pending
        }));
        assert_eq!(byte, 7);
        assert_eq!(socket_wakes(), before + 1, "woken by the socket, once");
        writer.unwrap().join().unwrap();
    }

    /// Two waits under one combinator with wakers of its own: when one
    /// socket is ready the other's wait is kept, not lost (the second byte
    /// is written only after the first was read).
    #[test]
    fn a_combinator_s_waits_are_all_kept() {
        let (a, mut a_peer) = pair();
        let (b, mut b_peer) = pair();
        let (first_read, wait_first) = std::sync::mpsc::channel::<()>();
        let writer = std::thread::spawn(move || {
            b_peer.write_all(&[2]).unwrap();
            wait_first.recv().unwrap();
            a_peer.write_all(&[1]).unwrap();
        });
        let both = run(async {
            let mut set = futures_util::stream::FuturesUnordered::new();
            set.push(read_byte(a));
            set.push(read_byte(b));
            let first = futures_util::StreamExt::next(&mut set).await.unwrap();
            first_read.send(()).unwrap();
            let second = futures_util::StreamExt::next(&mut set).await.unwrap();
            vec![first, second]
        });
        assert_eq!(both, vec![2, 1]);
        writer.join().unwrap();
    }

    /// A timer of the runtime (another thread) wakes a caller that sleeps
    /// in `poll(2)` on nothing but its bell.
    #[test]
    fn a_timer_rings_the_bell() {
        let started = std::time::Instant::now();
        run(async { tokio::time::sleep(Duration::from_millis(30)).await });
        assert!(started.elapsed() >= Duration::from_millis(30));
    }

    /// An outer level woken while an inner `run` sleeps is polled again
    /// when the inner one returns: the wake is not consumed by the inner
    /// level.
    #[test]
    fn a_wake_of_an_outer_level_survives_an_inner_run() {
        let (a, a_peer) = pair();
        let mut a_peer = Some(a_peer);
        let mut stage = 0;
        let out = run(poll_fn(|cx| {
            stage += 1;
            match stage {
                1 => {
                    // Woken from another thread while the inner run waits.
                    let waker = cx.waker().clone();
                    let mut a_peer = a_peer.take().unwrap();
                    std::thread::spawn(move || {
                        waker.wake();
                        a_peer.write_all(&[9]).unwrap();
                    });
                    let inner = run(read_byte(a.clone()));
                    assert_eq!(inner, 9);
                    Poll::Pending
                }
                _ => Poll::Ready(stage),
            }
        }));
        assert_eq!(out, 2);
    }

    /// Outside `run` nobody watches the socket, and says so.
    #[test]
    fn outside_a_run_nothing_is_watched() {
        let (a, _b) = pair();
        let fd: Descriptor = a;
        assert!(!watch(&fd, Ready::Read, Waker::noop()));
        assert!(run(async {
            std::future::poll_fn(|cx| Poll::Ready(watch(&fd, Ready::Read, cx.waker()))).await
        }));
    }
}
