"""Keeping a granted hold alive while a runner's body runs (HOSTS.md, "The
side-effect runner", 5).

Without renewals a body that outlives its ttl turns its key ``uncertain``
while it is still running, and a reconciler may act on an effect that is
still happening. The :class:`Renewer` renews the hold every ``ttl / 3`` from
its own thread (the body is never blocked); the :class:`Heartbeat` is what
the body sees of it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Optional

from .errors import Refused, StorageError
from .types import Action, Lease

if TYPE_CHECKING:
    from .kernel import Kernel


class Heartbeat:
    """The state of a running body's hold, for the body to check.

    ``lease`` is the latest lease (each renewal replaces it); ``renewals``
    counts the renewals that succeeded; :meth:`check` raises
    ``Refused("lease-lost")`` once a renewal was refused — another verdict
    or a takeover: the body should stop, its effect may not be applied."""

    def __init__(self, lease: Lease) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._lease = lease
        self._renewals = 0
        self._lost: Optional[Refused] = None
        self._changes = 0
        self._seen = 0

    @property
    def lease(self) -> Lease:
        """The lease the runner will complete with."""
        with self._cond:
            return self._lease

    @property
    def renewals(self) -> int:
        """How many renewals succeeded so far."""
        with self._cond:
            return self._renewals

    @property
    def lost(self) -> Optional[Refused]:
        """The refusal of the renewal that found the lease lost, else ``None``."""
        with self._cond:
            return self._lost

    def check(self) -> None:
        """Raise ``Refused("lease-lost")`` if a renewal was refused."""
        lost = self.lost
        if lost is not None:
            raise Refused("lease-lost", f"a renewal was refused ({lost.code})")

    def wait_changed(self, timeout: Optional[float] = None) -> bool:
        """Wait for a change — a renewal, or the loss of the lease — the
        body has not seen yet: one that happened since the last call that
        returned ``True`` returns at once, so none is missed between two
        checks. ``False`` if ``timeout`` seconds passed first (after the
        loss nothing changes any more)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._changes != self._seen, timeout):
                return False
            self._seen = self._changes
            return True

    def _renewed(self, lease: Lease) -> None:
        with self._cond:
            self._lease = lease
            self._renewals += 1
            self._changes += 1
            self._cond.notify_all()

    def _lose(self, refusal: Refused) -> None:
        with self._cond:
            self._lost = refusal
            self._changes += 1
            self._cond.notify_all()


class Renewer:
    """Renews ``heartbeat.lease`` every ``ttl / 3`` ms until stopped or lost.

    A renewal the kernel refuses stops the renewals and marks the heartbeat
    lost; one that fails with ``storage`` is retried at the next tick."""

    def __init__(self, kernel: "Kernel", action: Action, ttl: int, heartbeat: Heartbeat) -> None:
        self._kernel = kernel
        self._action = action
        self._ttl = ttl
        self._period = max(ttl / 3, 1) / 1000
        self._heartbeat = heartbeat
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"gak-renew {action.key}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing; returns after any renewal in progress has ended,
        so the heartbeat's lease is final."""
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        gate = self._kernel.sideeffect
        hb = self._heartbeat
        while not self._stop.wait(self._period):
            try:
                lease = gate.renew(self._action, hb.lease, self._ttl)
            except Refused as e:
                hb._lose(e)
                return
            except StorageError:
                continue  # the store failed, not the lease: try at the next tick
            hb._renewed(lease)
