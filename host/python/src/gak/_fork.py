"""What a ``fork()`` must not copy (HOSTS.md rule 7).

A forked child is a copy of its parent frozen at one instant. Three things
in that copy would break it:

- **Workers and connections** of the parent (its component instances, its
  SQLite and PostgreSQL connections): a child that used them would share
  the parent's sockets and transactions. Pools compare the generation
  :data:`FORKS` (bumped in every child) and make fresh workers.
- **State another thread held at the instant of the fork**: a lock of the
  memory store, SQLite's in-process lock table (a child that inherits "this
  process holds the write lock" can never write: ``database is locked`` on
  every call), wasmtime's internal locks. The :data:`GATE` makes ``fork()``
  wait (bounded) until no other thread is inside a kernel call, so the
  child starts from a quiet instant.
- **Random state**: served from ``os.urandom`` by ``gak._engine``, never
  from a generator in the process.
"""

from __future__ import annotations

import os
import threading
import time

#: The process generation: bumped in a forked child, so pools can tell the
#: parent's workers (its connections, its random state) without a syscall.
FORKS = [0]

#: How long ``fork()`` waits for other threads' kernel calls to end (seconds).
#: A call is short, but a fenced sink's body is caller code; after this the
#: fork proceeds anyway (the child then refuses to touch what it inherited
#: mid-call, and SQLite connections it inherited are closed in it).
FORK_WAIT = 5.0


class CallGate:
    """Counts kernel calls in progress per thread; ``fork()`` closes it and
    waits until no other thread is inside one (new calls wait meanwhile)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._inside: dict[int, int] = {}
        self._forking = False

    def enter(self) -> None:
        me = threading.get_ident()
        with self._cond:
            while self._forking and me not in self._inside:
                self._cond.wait()
            self._inside[me] = self._inside.get(me, 0) + 1

    def exit(self) -> None:
        me = threading.get_ident()
        with self._cond:
            n = self._inside[me] - 1
            if n:
                self._inside[me] = n
            else:
                del self._inside[me]
            if self._forking:
                self._cond.notify_all()

    def close(self, timeout: float) -> bool:
        """Stop new calls and wait until only the calling thread is inside
        one; False when ``timeout`` passed first."""
        me = threading.get_ident()
        deadline = time.monotonic() + timeout
        with self._cond:
            self._forking = True
            while any(t != me for t in self._inside):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def open(self) -> None:
        with self._cond:
            self._forking = False
            self._cond.notify_all()

    def reset_in_child(self) -> None:
        # Only the forking thread exists in the child; its own calls (a fork
        # from inside a body) stay counted so their exits balance.
        me = threading.get_ident()
        self._cond = threading.Condition(threading.Lock())
        self._inside = {me: self._inside[me]} if me in self._inside else {}
        self._forking = False


#: Every kernel call of the process passes through it.
GATE = CallGate()

#: Whether the last fork found no other thread inside a kernel call (in a
#: child: whether its parent did). When it did not, a connection another
#: thread was using may be mid-statement, its driver's mutex held: the
#: child must leave it alone.
QUIET = [True]


def _before() -> None:
    QUIET[0] = GATE.close(FORK_WAIT)


def _after_in_parent() -> None:
    GATE.open()


def _after_in_child() -> None:
    FORKS[0] += 1
    GATE.reset_in_child()


os.register_at_fork(before=_before, after_in_parent=_after_in_parent, after_in_child=_after_in_child)
