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
from .types import Action, Contended, Granted, InFlight, Lease, Replayed, Snapshot, Uncertain

if TYPE_CHECKING:
    from .kernel import Kernel


class NotApplied(Exception):
    """Raise from a :class:`Runner` body when the effect definitely did not
    happen (refused before sending): the key is abandoned and may be granted
    again. Any other exception from the body means "may have happened": the
    key becomes uncertain."""


@dataclass(frozen=True)
class Applied:
    """The body ran now and its result was recorded."""

    result: bytes


#: What :meth:`Runner.run` returns when nothing failed.
Ran = Union[Applied, Replayed, Uncertain, InFlight, Contended]


class Runner:
    """Runs effect bodies through the side-effect gate:
    acquire → (replayed | uncertain | in-flight | contended: return without
    calling the body) | granted → body → complete."""

    def __init__(self, kernel: "Kernel", ttl: int) -> None:
        """``ttl``: lease length in ms, longer than the body can take."""
        self._kernel = kernel
        self._ttl = ttl

    def run(self, action: Action, body: Callable[[Lease], bytes]) -> Ran:
        """Run ``body`` at most once per ``action.key``.

        A body exception other than :class:`NotApplied` marks the key
        uncertain, releases the resource and is re-raised. :class:`NotApplied`
        abandons the attempt and is re-raised. Kernel refusals raise
        :class:`~gak.Refused` / :class:`~gak.StorageError`; if recording the
        result fails after the body ran, the intent stays and the key turns
        uncertain on expiry — never a second grant.
        """
        gate = self._kernel.sideeffect
        decision = gate.acquire(action, self._ttl)
        if not isinstance(decision, Granted):
            return decision
        lease = decision.lease
        try:
            result = body(lease)
        except NotApplied:
            try:
                gate.abandon(action, lease, "body reported not applied")
            except GakError:
                pass  # the intent stays: the key turns uncertain on expiry
            raise
        except BaseException:
            # Best effort: if either call fails, the intent is still there
            # and the key turns uncertain when it expires.
            for verdict in (lambda: gate.mark_uncertain(action, lease, "body failed"), lambda: gate.release(action, lease)):
                try:
                    verdict()
                except GakError:
                    pass
            raise
        return Applied(gate.complete(action, lease, result))


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
