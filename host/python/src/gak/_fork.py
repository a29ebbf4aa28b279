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

_get_ident = threading.get_ident

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
    waits until no other thread is inside one (new calls wait meanwhile).

    Entering and leaving take no lock (they run twice per call): each
    thread writes only its own entry of :attr:`_inside` (one dict item
    operation, atomic), and checks the fork flag *after* its entry is
    visible, while :meth:`close` raises the flag *before* it looks at the
    entries. So either the fork sees the entry (and waits for the call) or
    the entering thread sees the flag (and backs out to wait under the
    lock); neither can miss the other."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._inside: dict[int, int] = {}
        self._forking = False

    def enter(self) -> int:
        """Count this thread in; returns its ident, for :meth:`exit`."""
        me = _get_ident()
        inside = self._inside
        n = inside.get(me, 0)
        inside[me] = n + 1
        # A thread already inside (a fork from inside a body) goes on.
        if self._forking and not n:
            self._wait_for_fork(me)
        return me

    def _wait_for_fork(self, me: int) -> None:
        with self._cond:
            while self._forking:
                # Back out (the fork may be waiting for this entry), wait,
                # then enter again under the lock, where no fork can begin.
                self._inside.pop(me, None)
                self._cond.notify_all()
                self._cond.wait()
            self._inside[me] = self._inside.get(me, 0) + 1

    def exit(self, me: int = 0) -> None:
        """Count this thread out (``me``: what :meth:`enter` returned)."""
        me = me or _get_ident()
        inside = self._inside
        n = inside[me] - 1
        if n:
            inside[me] = n
        else:
            del inside[me]
        if self._forking:
            with self._cond:
                self._cond.notify_all()

    def close(self, timeout: float) -> bool:
        """Stop new calls and wait until only the calling thread is inside
        one; False when ``timeout`` passed first."""
        me = _get_ident()
        deadline = time.monotonic() + timeout
        with self._cond:
            self._forking = True
            # tuple(): a snapshot taken in one step, while other threads
            # add and remove their own entries without the lock.
            while any(t != me for t in tuple(self._inside)):
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
        me = _get_ident()
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
