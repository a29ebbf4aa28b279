//! The side-effect Runner: the body of an effect runs at most once per
//! idempotency key, whatever crashes in between.
//!
//! Exactly-once at a remote system needs the remote to deduplicate too: pass
//! `lease.key` (the idempotency key) to the remote API — e.g. as an
//! `Idempotency-Key` header — and `lease.fence` to any store that can
//! compare it. That wiring is the embedder's; the kernel guarantees the
//! local half: it never *starts* the body twice for one key.
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use gak_rules::{Acquired, Action, Error, Lease};

use crate::Kernel;

/// Why a body did not finish.
#[derive(Debug)]
pub enum BodyError<E> {
    /// It failed in a way that may or may not have applied the effect
    /// (timeout, connection reset after sending). The key becomes
    /// `uncertain` and must be reconciled.
    Failed(E),
    /// It definitely did not apply the effect (refused before sending). The
    /// key is abandoned and may be granted again.
    NotApplied(E),
}

/// Any error is a failure that may have applied the effect: the safe
/// default, so `?` in a body never lets a maybe-applied effect run again.
impl<E> From<E> for BodyError<E> {
    fn from(e: E) -> Self {
        BodyError::Failed(e)
    }
}

/// What a run ended with, when nothing failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ran {
    /// The body ran now and its result was recorded.
    Applied(Vec<u8>),
    /// The key completed before: the first result; the body was not called.
    Replayed(Vec<u8>),
    /// The key may have been applied: reconcile before anything else.
    Uncertain(String),
    /// Another attempt of the key is live.
    InFlight,
    /// Another key holds the resource until this time.
    Contended(u64),
}

/// Why a run failed.
#[derive(Debug)]
pub enum RunError<E> {
    /// The kernel refused or the store failed. If this happened after the
    /// body ran (recording the result failed), the intent stays and the key
    /// surfaces as uncertain once it expires: never as a second grant.
    Kernel(Error),
    /// The body failed; the key is now uncertain (or, if even marking it
    /// failed, its intent stays and it turns uncertain on expiry).
    Uncertain(E),
    /// The body reported it did not apply; the key was abandoned.
    NotApplied(E),
}

impl<E: std::fmt::Display> std::fmt::Display for RunError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Kernel(e) => write!(f, "the kernel refused the run: {e}"),
            RunError::Uncertain(e) => {
                write!(f, "the effect body failed and the key is uncertain: {e}")
            }
            RunError::NotApplied(e) => {
                write!(f, "the effect body did not apply and was abandoned: {e}")
            }
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for RunError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Kernel(e) => Some(e),
            RunError::Uncertain(e) | RunError::NotApplied(e) => Some(e),
        }
    }
}

impl<E: std::fmt::Display> std::fmt::Display for BodyError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Failed(e) => write!(f, "failed (may have applied): {e}"),
            BodyError::NotApplied(e) => write!(f, "did not apply: {e}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for BodyError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BodyError::Failed(e) | BodyError::NotApplied(e) => Some(e),
        }
    }
}

/// The body's view of its lease while the runner keeps it alive: the
/// current lease, how many renewals succeeded, and — as soon as a renewal
/// is refused — that the lease is lost, so a long body can stop early
/// instead of finishing work whose result will be refused.
#[derive(Debug)]
pub struct Heartbeat {
    state: Mutex<Beat>,
    changed_sync: Condvar,
    changed: tokio::sync::Notify,
}

#[derive(Debug)]
struct Beat {
    lease: Lease,
    renewals: u64,
    lost: Option<Error>,
}

impl Heartbeat {
    pub(crate) fn new(lease: Lease) -> Self {
        Heartbeat {
            state: Mutex::new(Beat {
                lease,
                renewals: 0,
                lost: None,
            }),
            changed_sync: Condvar::new(),
            changed: tokio::sync::Notify::new(),
        }
    }

    fn beat(&self) -> MutexGuard<'_, Beat> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The lease as last renewed.
    pub fn lease(&self) -> Lease {
        self.beat().lease.clone()
    }

    /// Renewals that succeeded so far.
    pub fn renewals(&self) -> u64 {
        self.beat().renewals
    }

    /// `Err(lease-lost)` once a renewal was refused (the resource changed
    /// hands, the attempt is over, or the hold expired): stop and return.
    ///
    /// # Errors
    /// [`Error::LeaseLost`] once the lease is lost.
    pub fn check(&self) -> Result<(), Error> {
        match self.beat().lost {
            Some(_) => Err(Error::LeaseLost),
            None => Ok(()),
        }
    }

    /// The refusal that lost the lease, if it is lost.
    pub fn refusal(&self) -> Option<Error> {
        self.beat().lost.clone()
    }

    /// Wait for the next renewal or the loss of the lease.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Block until the next renewal or the loss of the lease, at most
    /// `timeout`; false on timeout.
    pub fn wait_changed(&self, timeout: Duration) -> bool {
        let state = self.beat();
        let (renewals, lost) = (state.renewals, state.lost.is_some());
        let (_state, waited) = self
            .changed_sync
            .wait_timeout_while(state, timeout, |b| {
                b.renewals == renewals && b.lost.is_some() == lost
            })
            .unwrap_or_else(|p| p.into_inner());
        !waited.timed_out()
    }

    pub(crate) fn renewed(&self, lease: Lease) {
        let mut state = self.beat();
        state.lease = lease;
        state.renewals += 1;
        drop(state);
        self.notify();
    }

    pub(crate) fn lose(&self, refusal: Error) {
        self.beat().lost = Some(refusal);
        self.notify();
    }

    fn notify(&self) {
        self.changed_sync.notify_all();
        self.changed.notify_waiters();
    }
}

/// Runs effect bodies through the side-effect gate.
#[derive(Debug, Clone)]
pub struct Runner {
    kernel: Kernel,
    ttl: u64,
    every: Option<Duration>,
}

/// The heartbeat interval for a lease of `ttl` ms: a third of it, so two
/// renewals can fail transiently before the lease lapses.
pub(crate) fn default_interval(ttl: u64) -> Duration {
    Duration::from_millis((ttl / 3).max(1))
}

/// What `acquire` decided, for the runner.
pub(crate) enum Start {
    Run(Lease),
    Done(Ran),
    Failed(Error),
}

pub(crate) fn start(acquired: Acquired) -> Start {
    match acquired {
        Acquired::Granted(lease) => Start::Run(lease),
        Acquired::Replayed(result) => Start::Done(Ran::Replayed(result)),
        Acquired::Uncertain(reason) => Start::Done(Ran::Uncertain(reason)),
        Acquired::InFlight => Start::Done(Ran::InFlight),
        Acquired::Contended(until) => Start::Done(Ran::Contended(until)),
        // An outcome this host does not know: never run the body on it.
        other => Start::Failed(Error::storage(format!(
            "acquire answered {other:?}, which this host does not know"
        ))),
    }
}

/// Is this renewal refusal the end of the lease (rather than a transient
/// store failure worth another try)?
pub(crate) fn lost(e: &Error) -> bool {
    !e.is_retryable()
}

impl Runner {
    /// A runner granting leases of `ttl` ms, renewed every `ttl / 3` while
    /// the body runs.
    pub fn new(kernel: &Kernel, ttl: u64) -> Self {
        Runner {
            kernel: kernel.clone(),
            ttl,
            every: Some(default_interval(ttl)),
        }
    }

    /// Renew the hold every `every` while the body runs (`None`: never;
    /// then the ttl must cover the whole body).
    pub fn heartbeat(mut self, every: Option<Duration>) -> Self {
        self.every = every;
        self
    }

    /// acquire → (replayed | uncertain | in-flight | contended: return
    /// without calling `body`) | granted → body (kept alive by renewals) →
    /// complete. A body error marks the key uncertain and releases the hold
    /// ([`BodyError::Failed`], the default for `?`) or abandons the attempt
    /// ([`BodyError::NotApplied`]).
    ///
    /// ```
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use gak::{Action, BodyError, Kernel, Ran, Runner};
    /// let kernel = Kernel::open("memory:").await?;
    /// let runner = Runner::new(&kernel, 30_000);
    /// let mail = Action::new("welcome-mail/user-42", "smtp");
    /// let ran = runner
    ///     .run(&mail, async |lease| {
    ///         // send, passing lease.key as the provider's idempotency key
    ///         Ok::<_, BodyError<std::io::Error>>(b"message-id".to_vec())
    ///     })
    ///     .await?;
    /// assert_eq!(ran, Ran::Applied(b"message-id".to_vec()));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`RunError::Kernel`] when a kernel call is refused or fails,
    /// [`RunError::Uncertain`] / [`RunError::NotApplied`] for body errors.
    pub async fn run<E, B>(&self, action: &Action, body: B) -> Result<Ran, RunError<E>>
    where
        B: AsyncFnOnce(&Lease) -> Result<Vec<u8>, BodyError<E>>,
    {
        self.run_with_heartbeat(action, async |lease, _| body(lease).await)
            .await
    }

    /// [`Runner::run`] with the body watching its [`Heartbeat`]: a long
    /// body checks `heartbeat.check()` (or awaits `heartbeat.changed()`)
    /// and stops as soon as a renewal is refused.
    ///
    /// # Errors
    /// As [`Runner::run`].
    pub async fn run_with_heartbeat<E, B>(
        &self,
        action: &Action,
        body: B,
    ) -> Result<Ran, RunError<E>>
    where
        B: AsyncFnOnce(&Lease, &Heartbeat) -> Result<Vec<u8>, BodyError<E>>,
    {
        let gate = self.kernel.sideeffect();
        let acquired = gate
            .acquire(action, self.ttl)
            .await
            .map_err(RunError::Kernel)?;
        let lease = match start(acquired) {
            Start::Run(lease) => lease,
            Start::Done(ran) => return Ok(ran),
            Start::Failed(e) => return Err(RunError::Kernel(e)),
        };
        let heartbeat = Heartbeat::new(lease.clone());
        let outcome = {
            let work = body(&lease, &heartbeat);
            match self.every {
                None => work.await,
                Some(every) => {
                    let renewing = self.keep_alive(action, &heartbeat, every);
                    tokio::pin!(work, renewing);
                    tokio::select! {
                        biased;
                        out = &mut work => out,
                        never = &mut renewing => match never {},
                    }
                }
            }
        };
        let lease = heartbeat.lease();
        match outcome {
            Ok(result) => gate
                .complete(action, &lease, &result)
                .await
                .map(Ran::Applied)
                .map_err(RunError::Kernel),
            Err(BodyError::Failed(e)) => {
                // Best effort: if either call fails, the intent is still
                // there and the key turns uncertain when it expires.
                let _ = gate.mark_uncertain(action, &lease, "body failed").await;
                let _ = gate.release(action, &lease).await;
                Err(RunError::Uncertain(e))
            }
            Err(BodyError::NotApplied(e)) => {
                let _ = gate
                    .abandon(action, &lease, "body reported not applied")
                    .await;
                Err(RunError::NotApplied(e))
            }
        }
    }

    /// Renew every `every` until a renewal is refused, then wait forever
    /// (the body decides when to stop).
    async fn keep_alive(
        &self,
        action: &Action,
        heartbeat: &Heartbeat,
        every: Duration,
    ) -> std::convert::Infallible {
        loop {
            tokio::time::sleep(every).await;
            match self
                .kernel
                .sideeffect()
                .renew(action, &heartbeat.lease(), self.ttl)
                .await
            {
                Ok(lease) => heartbeat.renewed(lease),
                Err(e) if lost(&e) => {
                    heartbeat.lose(e);
                    return std::future::pending().await;
                }
                Err(e) => tracing::warn!(key = %action.key, error = %e, "renewal failed; retrying"),
            }
        }
    }
}
