//! Driving a future to completion on the calling thread: what the blocking
//! API, `Builder::open_blocking` and the native call loop stand on. The
//! lowest floor of the crate: it knows nothing of kernels or stores.
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use tokio::runtime::Runtime;

/// The process's runtime for blocking kernels: its reactor watches the
/// PostgreSQL connections' sockets (the calls drive the connections
/// themselves, on their own threads) and it runs the timers of retries and
/// pool waits.
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

/// Drive `fut` to completion on this thread, parking between polls. The
/// runtime is entered so the future may use its timers and spawn
/// connection tasks. Unlike `block_on` of tokio or futures this may nest
/// (a fenced sink's synchronous body makes store calls while the outer call
/// is being driven): every inner future depends only on the runtime's own
/// thread, never on the outer one.
pub(crate) fn run<F: Future>(fut: F) -> F::Output {
    let _runtime = runtime().enter();
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        thread::park();
    }
}
