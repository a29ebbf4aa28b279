//! The clock that judges expiry, injectable like wasmtime's `HostWallClock`.
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use gak_rules::StoreFault;

/// Milliseconds since the Unix epoch. Implementations MUST NOT move backwards.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> u64;
}

/// The system's wall clock, made monotonic (a step back of the system clock
/// is held at the last value rather than reviving expired leases).
#[derive(Debug, Default)]
pub struct SystemClock {
    last: AtomicU64,
}

impl Clock for SystemClock {
    fn now(&self) -> u64 {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let prev = self.last.fetch_max(wall, Ordering::AcqRel);
        prev.max(wall)
    }
}

/// A clock that moves only when told to: for tests and vectors.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
}

/// A manual clock was asked to move backwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backwards {
    /// The current time.
    pub now: u64,
    /// The requested one.
    pub requested: u64,
}

impl std::fmt::Display for Backwards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "clock cannot move back from {} to {}",
            self.now, self.requested
        )
    }
}

impl std::error::Error for Backwards {}

impl ManualClock {
    /// A clock at `now`.
    pub fn at(now: u64) -> Self {
        ManualClock {
            now: AtomicU64::new(now),
        }
    }

    /// Set the time; refuses to go backwards.
    pub fn set(&self, to: u64) -> Result<(), Backwards> {
        let prev = self.now.fetch_max(to, Ordering::AcqRel);
        if to < prev {
            return Err(Backwards {
                now: prev,
                requested: to,
            });
        }
        Ok(())
    }

    /// Move forward by `ms` (saturating: never wraps back).
    pub fn advance(&self, ms: u64) {
        let _ = self
            .now
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_add(ms))
            });
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.now.load(Ordering::Acquire)
    }
}

/// The instant one call decides by: `read`, the binding's own clock (the
/// database's) when it has one, else `clock`. A failed database read fails
/// the call (a conflict re-runs it). Every number stays below 2^53: a
/// reading past it is a broken clock, and deadlines computed from it would
/// be meaningless, so it fails the call too.
pub(crate) fn call_instant(
    read: Option<Result<u64, StoreFault>>,
    clock: &dyn Clock,
) -> Result<u64, StoreFault> {
    let now = match read {
        None => clock.now(),
        Some(Ok(now)) => now,
        Some(Err(StoreFault::Conflict(why))) => {
            return Err(StoreFault::Conflict(format!(
                "reading the database clock: {why}"
            )));
        }
        Some(Err(StoreFault::Failure(why))) => {
            return Err(StoreFault::Failure(format!(
                "reading the database clock: {why}"
            )));
        }
    };
    if now > gak_rules::input::MAX_NUMBER {
        return Err(StoreFault::Failure(format!(
            "the clock reads {now}, beyond 2^53 ms"
        )));
    }
    Ok(now)
}
