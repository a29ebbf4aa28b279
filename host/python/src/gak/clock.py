"""The clock that judges expiry, injectable (like wasmtime's ``HostWallClock``)."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Milliseconds since the Unix epoch. Implementations MUST NOT move backwards."""

    def now(self) -> int:
        """The current time in ms."""


class SystemClock:
    """The system's wall clock, made monotonic: a step back of the system
    clock is held at the last value rather than reviving expired leases."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def now(self) -> int:
        wall = time.time_ns() // 1_000_000
        # acquire/release, not `with` (read once per call: half the cost).
        lock = self._lock
        lock.acquire()
        try:
            if wall > self._last:
                self._last = wall
            return self._last
        finally:
            lock.release()


class ManualClock:
    """A clock that moves only when told to: for tests and vectors."""

    def __init__(self, now: int = 0) -> None:
        self._now = now
        self._lock = threading.Lock()

    def now(self) -> int:
        return self._now

    def set(self, to: int) -> None:
        """Set the time; refuses (``ValueError``) to go backwards."""
        with self._lock:
            if to < self._now:
                raise ValueError(f"clock cannot move back from {self._now} to {to}")
            self._now = to

    def advance(self, ms: int) -> None:
        """Move forward by ``ms``."""
        if ms < 0:
            raise ValueError("a clock only moves forward")
        with self._lock:
            self._now += ms
