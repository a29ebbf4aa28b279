"""A kernel's workers (an instance plus a store connection each), bounded.

HOSTS.md rule 15: at most ``max_connections`` workers exist per kernel; a
caller beyond that waits up to ``connection_wait`` and then gets
``storage`` — an unbounded pool turns a burst of threads into a burst of
database connections (PostgreSQL refuses the 101st). The pool holds no
reference to its kernel, so a kernel dropped without ``close()`` can be
collected and its finalizer closes what is idle here.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Generic, Protocol, TypeVar

from ._fork import FORKS
from .stores._facts import CONNECTION_WAIT_MS
from .stores._facts import MAX_CONNECTIONS as _MAX_CONNECTIONS
from .errors import StorageError

#: Workers per kernel unless told otherwise, and how long a caller waits
#: for one when all are busy (seconds): the protocol's numbers
#: (``host/sql/store.json``), the same in every host.
MAX_CONNECTIONS = _MAX_CONNECTIONS
CONNECTION_WAIT = CONNECTION_WAIT_MS / 1000


class _Worker(Protocol):
    generation: int

    def close(self) -> None: ...


W = TypeVar("W", bound=_Worker)


class WorkerPool(Generic[W]):
    """Idle workers for reuse, and a count of every live one."""

    def __init__(self, make: Callable[[], W], max_connections: int, connection_wait: float) -> None:
        if type(max_connections) is not int or max_connections < 1:
            raise ValueError(f"max_connections must be a positive int, not {max_connections!r}")
        if not connection_wait >= 0:
            raise ValueError(f"connection_wait must be >= 0 seconds, not {connection_wait!r}")
        self._make = make
        self.max_connections = max_connections
        self.connection_wait = float(connection_wait)
        # Checkout and checkin hold the bare lock (a Condition's own
        # `with` and `notify` are Python code: twice the cost per call);
        # the condition, on the same lock, is waited on and notified only
        # when a caller is waiting.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._waiting = 0
        self._idle: list[W] = []
        self._live = 0
        self._generation = FORKS[0]

    def _forked(self) -> None:
        # In a forked child: the parent's workers share its connections and
        # its instances; forget them without closing (closing a psycopg
        # connection here would end the parent's session on the server).
        if self._generation != FORKS[0]:
            self._generation = FORKS[0]
            self._idle = []
            self._live = 0

    def checkout(self) -> W:
        """An idle worker, a new one while fewer than ``max_connections``
        live, else the next one returned within ``connection_wait``."""
        # acquire/release, not `with`: a `with` on a lock costs twice as
        # much (its __enter__/__exit__ are looked up and called).
        lock = self._lock
        lock.acquire()
        try:
            if self._generation == FORKS[0] and self._idle:
                return self._idle.pop()
        finally:
            lock.release()
        return self._checkout_slow()

    def _checkout_slow(self) -> W:
        deadline = None
        with self._cond:
            while True:
                self._forked()
                if self._idle:
                    return self._idle.pop()
                if self._live < self.max_connections:
                    self._live += 1
                    break
                if deadline is None:
                    deadline = time.monotonic() + self.connection_wait
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StorageError(
                        f"no connection free within {self.connection_wait:g} s "
                        f"(max_connections={self.max_connections})"
                    )
                self._waiting += 1
                try:
                    self._cond.wait(left)
                finally:
                    self._waiting -= 1
        try:
            return self._make()
        except BaseException:
            self._release_slot(FORKS[0])
            raise

    def checkin(self, worker: W) -> None:
        """Return a worker after a call."""
        lock = self._lock
        lock.acquire()
        try:
            if worker.generation != FORKS[0] or worker.generation != self._generation:
                return  # made before a fork: never reused, never counted here
            self._idle.append(worker)
            if self._waiting:
                self._cond.notify()
        finally:
            lock.release()

    def discard(self, worker: W) -> None:
        """Close a worker that must not be reused (its instance trapped)."""
        if worker.generation == FORKS[0]:
            worker.close()
        self._release_slot(worker.generation)

    def _release_slot(self, generation: int) -> None:
        with self._cond:
            if generation == self._generation == FORKS[0]:
                self._live -= 1
                self._cond.notify()

    def close(self) -> None:
        """Close every idle worker (busy ones are closed when the next
        ``close`` finds them idle, or when the pool is collected)."""
        with self._cond:
            self._forked()
            idle, self._idle = self._idle, []
            self._live -= len(idle)
            self._cond.notify_all()
        for w in idle:
            w.close()
