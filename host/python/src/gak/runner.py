"""Host-side helpers: the side-effect :class:`Runner` and the checkpoint
:class:`Committer`.

Exactly-once at a remote system needs the remote to deduplicate too: pass
``lease.key`` (the idempotency key) to the remote API — e.g. as an
``Idempotency-Key`` header — and ``lease.fence`` to any store that can compare
it. That wiring is the embedder's; the kernel guarantees the local half: it
never *starts* the body twice for one key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional, Union

from .errors import GakError, Refused
from .heartbeat import Heartbeat, Renewer
from .types import Action, Contended, Granted, InFlight, Lease, Replayed, Snapshot, Uncertain

if TYPE_CHECKING:
    from .kernel import Kernel


class NotApplied(Exception):
    """Raise from a :class:`Runner` body when the effect definitely did not
    happen (refused before sending): the key is abandoned and may be granted
    again. Any other exception from the body means "may have happened": the
    key becomes uncertain."""


class BodyFailed(GakError):
    """A :class:`Runner` body raised: the effect may or may not have happened.

    The runner marked the key ``uncertain`` (reason ``"body failed"``) and
    released the resource, best effort; the body's exception is
    ``__cause__`` (and :attr:`error`). A later ``run`` of the key answers
    :class:`~gak.Uncertain` until a reconciler resolves it."""

    code = "body-failed"

    def __init__(self, action: Action, lease: Lease, error: BaseException) -> None:
        self.action = action
        self.lease = lease
        self.error = error
        super().__init__(f"body failed, key {action.key!r} uncertain: {type(error).__name__}: {error}")


@dataclass(frozen=True)
class Applied:
    """The body ran now and its result was recorded."""

    result: bytes


#: What :meth:`Runner.run` returns when nothing failed.
Ran = Union[Applied, Replayed, Uncertain, InFlight, Contended]

_NOT_RUN = (Replayed, Uncertain, InFlight, Contended)


class Runner:
    """Runs effect bodies through the side-effect gate (HOSTS.md, "The
    side-effect runner"): acquire → (replayed | uncertain | in-flight |
    contended: returned, the body is not called) | granted → body, its hold
    renewed every ``ttl / 3`` while it runs → complete."""

    def __init__(self, kernel: "Kernel", ttl: int) -> None:
        """``ttl``: lease length in ms. Renewals keep a longer body's key
        in flight; a body that must stop when its lease is lost should use
        :meth:`run_with_heartbeat` and check the heartbeat."""
        self._kernel = kernel
        self._ttl = ttl

    def run(self, action: Action, body: Callable[[Lease], bytes]) -> Ran:
        """Run ``body(lease)`` at most once per ``action.key``.

        - ``body`` returns → its result is recorded (``complete``) and
          returned as :class:`Applied`; if recording fails (the error is
          raised) the intent stays and the key turns uncertain on expiry —
          never a second grant.
        - ``body`` raises :class:`NotApplied` → the attempt is abandoned
          (the key may be granted again) and the exception re-raised.
        - ``body`` raises anything else → the key is marked uncertain, the
          resource released, and :class:`BodyFailed` raised from the body's
          exception.

        Kernel refusals raise :class:`~gak.Refused` /
        :class:`~gak.StorageError`."""
        return self._run(action, lambda lease, _hb: body(lease))

    def run_with_heartbeat(self, action: Action, body: Callable[[Lease, Heartbeat], bytes]) -> Ran:
        """:meth:`run`, with the body called as ``body(lease, heartbeat)``:
        ``heartbeat.check()`` raises ``Refused("lease-lost")`` once a
        renewal was refused; ``heartbeat.lease`` / ``renewals`` /
        ``wait_changed(timeout)`` follow the renewals."""
        return self._run(action, body)

    def _run(self, action: Action, body: Callable[[Lease, Heartbeat], bytes]) -> Ran:
        gate = self._kernel.sideeffect
        decision = gate.acquire(action, self._ttl)
        if isinstance(decision, _NOT_RUN):
            return decision
        if not isinstance(decision, Granted):
            raise TypeError(f"acquire answered {decision!r}, which this runner does not know")
        heartbeat = Heartbeat(decision.lease)
        renewer = Renewer(self._kernel, action, self._ttl, heartbeat)
        renewer.start()
        try:
            result = body(decision.lease, heartbeat)
        except NotApplied:
            renewer.stop()
            try:
                gate.abandon(action, heartbeat.lease, "body reported not applied")
            except GakError:
                pass  # the intent stays: the key turns uncertain on expiry
            raise
        except BaseException as e:
            renewer.stop()
            lease = heartbeat.lease
            # Best effort: if either call fails, the intent is still there
            # and the key turns uncertain when it expires.
            for verdict in (
                lambda: gate.mark_uncertain(action, lease, "body failed"),
                lambda: gate.release(action, lease),
            ):
                try:
                    verdict()
                except GakError:
                    pass
            if not isinstance(e, Exception):
                raise  # KeyboardInterrupt, SystemExit: not the body's verdict
            raise BodyFailed(action, lease, e) from e
        renewer.stop()
        return Applied(gate.complete(action, heartbeat.lease, result))


class Committer:
    """Records a run's progress, one snapshot per finished step.

    ``stale-seq`` or ``fence-stale`` from :meth:`step_done` means another
    process owns the run now: the caller MUST stop running it.
    """

    def __init__(self, kernel: "Kernel", snapshot: Snapshot) -> None:
        self._kernel = kernel
        self._snapshot = snapshot

    @classmethod
    def resume(cls, kernel: "Kernel", run_id: str, fence: Optional[int] = None) -> "Committer":
        """Resume ``run_id`` from its persisted snapshot, or start it at seq 0.
        ``fence`` is the caller's takeover generation (its task claim's fence)."""
        try:
            snap = kernel.checkpoint.load(run_id)
            snap = dataclasses.replace(snap, fence=fence if fence is not None else snap.fence)
        except Refused as e:
            if e.code != "not-found":
                raise
            snap = Snapshot(run_id=run_id, seq=0, fence=fence, status="running")
        return cls(kernel, snap)

    @property
    def snapshot(self) -> Snapshot:
        """The last snapshot this committer saved or loaded."""
        return self._snapshot

    def step_done(self, step: str) -> None:
        """Record ``step`` finished (``done ∪ {step}``, ``seq + 1``)."""
        s = self._snapshot
        done = s.done if step in s.done else [*s.done, step]
        nxt = dataclasses.replace(s, seq=s.seq + 1, done=list(done), fields=dict(s.fields))
        self._kernel.checkpoint.save_if_newer(nxt)
        self._snapshot = nxt
