"""The five WIT interfaces as Python classes (``kernel.checkpoint`` …), with
snake_case methods mirroring the Rust host's ``api.rs``.

Each method lowers its dataclasses to the wire form with the functions
:mod:`gak._wire` generates from the WIT (by field name), runs one export in
one transaction, and returns the answer :mod:`gak._lift` built. Nothing here decides anything: every rule is the
component's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Union

from ._wire import (
    lower_action,
    lower_lease,
    lower_outcome,
    lower_resolution,
    lower_snapshot,
    lower_step_def_list,
    lower_task_seed_list,
    opt_enum_name,
)
from .errors import Refused
from .types import (
    Acquired,
    Action,
    KeyInfo,
    KeyPage,
    KeyState,
    Lease,
    Outcome,
    Plan,
    Pruned,
    ReconcileClaim,
    Resolution,
    Resolved,
    Snapshot,
    StepDef,
    Task,
    TaskPage,
    TaskSeed,
    TaskState,
)

if TYPE_CHECKING:
    from .kernel import Downstream, Kernel


class _Interface:
    __slots__ = ("_kernel",)

    def __init__(self, kernel: "Kernel") -> None:
        self._kernel = kernel


class Checkpoint(_Interface):
    """Monotonic progress snapshots and the resume plan (SPEC 3)."""

    __slots__ = ()

    def save_if_newer(self, snap: Snapshot) -> None:
        """Write ``snap`` only if newer: refusals ``invalid-input``,
        ``terminal``, ``fence-stale``, ``stale-seq`` (checked in that order)."""
        self._kernel._call("checkpoint#save-if-newer", lower_snapshot(snap))

    def load(self, run_id: str) -> Snapshot:
        """The persisted snapshot, or ``not-found``."""
        snap: Snapshot = self._kernel._call("checkpoint#load", run_id)
        return snap

    def build_plan(self, steps: Sequence[StepDef], snap: Optional[Snapshot] = None) -> Plan:
        """Validate the DAG and plan a resume. Pure: no store transaction."""
        plan: Plan = self._kernel._pure(
            "checkpoint#build-plan", lower_step_def_list(steps), None if snap is None else lower_snapshot(snap)
        )
        return plan


class Commitgate(_Interface):
    """A run's or step's terminal outcome, once, by its current owner (SPEC 4)."""

    __slots__ = ()

    def commit(self, run_id: str, step: Optional[str], fence: int, outcome: Outcome) -> Outcome:
        """Commit the terminal outcome of ``(run_id, step)`` (``None`` = the
        run); returns the outcome as recorded."""
        recorded: Outcome = self._kernel._call("commitgate#commit", run_id, step, fence, lower_outcome(outcome))
        return recorded

    def read(self, run_id: str, step: Optional[str] = None) -> Outcome:
        """The recorded outcome, or ``not-found``."""
        recorded: Outcome = self._kernel._call("commitgate#read", run_id, step)
        return recorded


class Sideeffect(_Interface):
    """The idempotency-key gate, fencing, reconciliation and fenced sinks (SPEC 5)."""

    __slots__ = ()

    def acquire(self, action: Action, ttl: int) -> Acquired:
        """The single atomic decision for ``action``."""
        acquired: Acquired = self._kernel._call("sideeffect#acquire", lower_action(action), ttl)
        return acquired

    def complete(self, action: Action, lease: Lease, result: bytes) -> bytes:
        """Record the key completed; returns the first recorded result."""
        out: bytes = self._kernel._call("sideeffect#complete", lower_action(action), lower_lease(lease), result)
        return out

    def release(self, action: Action, lease: Lease) -> None:
        """Release the resource hold; the key's intent stays."""
        self._kernel._call("sideeffect#release", lower_action(action), lower_lease(lease))

    def abandon(self, action: Action, lease: Lease, reason: str) -> None:
        """The attempt definitely did not apply: the key may be granted again."""
        self._kernel._call("sideeffect#abandon", lower_action(action), lower_lease(lease), reason)

    def renew(self, action: Action, lease: Lease, ttl: int) -> Lease:
        """Qualification check and extension of hold and intent."""
        renewed: Lease = self._kernel._call("sideeffect#renew", lower_action(action), lower_lease(lease), ttl)
        return renewed

    def mark_uncertain(self, action: Action, lease: Lease, reason: str) -> None:
        """Mark the key uncertain (the hold stays: call ``release``)."""
        self._kernel._call("sideeffect#mark-uncertain", lower_action(action), lower_lease(lease), reason)

    def begin_reconcile(self, action: Action, ttl: int) -> ReconcileClaim:
        """Claim the right to reconcile an uncertain key."""
        claim: ReconcileClaim = self._kernel._call("sideeffect#begin-reconcile", lower_action(action), ttl)
        return claim

    def resolve_uncertain(self, action: Action, resolution: Resolution) -> Resolved:
        """Record a reconciler's verdict (first verdict wins)."""
        resolved: Resolved = self._kernel._call(
            "sideeffect#resolve-uncertain", lower_action(action), lower_resolution(resolution)
        )
        return resolved

    def write_fenced(self, resource: str, presented: int, body: Callable[["Downstream"], None]) -> None:
        """A fenced downstream write: ``body`` runs in the same transaction as
        the fence compare. ``presented`` below the highest fence the sink has
        seen is ``fence-stale`` and ``body`` does not run. A body that raises
        rolls everything back (seen fence included) and surfaces as
        ``Refused("write-failed")`` whose ``__cause__`` is the body's
        exception. ``body`` may run more than once if the store reports a
        conflict; only the last run's writes can commit.

        A store error the body meets (through ``down`` or ``down.raw``) ends
        the call with :class:`~gak.StorageError` even if the body caught it,
        and the body cannot end the transaction (HOSTS.md rule 12); nor may
        it call this kernel (``invalid-input``, rule 13)."""
        kernel = self._kernel
        kernel._admit((resource, presented))
        failure: list[BaseException] = []

        def run(worker: Any) -> Any:
            failure.clear()
            ok, err = worker.call("sideeffect#sink-advance", resource, presented)
            if not ok:
                return (False, err)
            try:
                kernel._run_body(worker, body)
            except Exception as e:  # noqa: BLE001 - reported as write-failed
                failure.append(e)
                return (False, ("write-failed", None))
            return (True, None)

        try:
            kernel._transact(run)
        except Refused as e:
            if e.code == "write-failed" and failure:
                raise Refused("write-failed", str(failure[0])) from failure[0]
            raise

    def sink_seen(self, resource: str) -> int:
        """The highest fence the sink has seen (0 when never written)."""
        seen: int = self._kernel._call("sideeffect#sink-seen", resource)
        return seen

    def list(self, state: Optional[Union[KeyState, str]] = None, after: Optional[str] = None, limit: int = 100) -> KeyPage:
        """One page of keys ordered by key (byte order), optionally of one
        state, strictly after ``after``, at most ``limit`` (1-1000)."""
        page: KeyPage = self._kernel._call("sideeffect#list", opt_enum_name(state), after, limit)
        return page

    def get(self, key: str) -> KeyInfo:
        """The key as ``list`` shows it, or ``not-found``."""
        info: KeyInfo = self._kernel._call("sideeffect#get", key)
        return info


class Taskboard(_Interface):
    """A board of tasks with dependencies and claims by token (SPEC 6, 9)."""

    __slots__ = ()

    def seed(self, tasks: Sequence[TaskSeed]) -> None:
        """Load topology (re-seeding an id overwrites it and clears its lease)."""
        self._kernel._call("taskboard#seed", lower_task_seed_list(tasks))

    def list(self, state: Optional[Union[TaskState, str]] = None, after: Optional[str] = None, limit: int = 100) -> TaskPage:
        """One page of the board ordered by id, without tokens."""
        page: TaskPage = self._kernel._call("taskboard#list", opt_enum_name(state), after, limit)
        return page

    def get(self, id: str) -> Task:
        """The task without its token, or ``not-found``."""
        task: Task = self._kernel._call("taskboard#get", id)
        return task

    def claim(self, id: str, agent: str, ttl: int) -> Task:
        """Claim a task; the returned task carries the token."""
        task: Task = self._kernel._call("taskboard#claim", id, agent, ttl)
        return task

    def claim_next(self, agent: str, ttl: int) -> Optional[Task]:
        """Claim the first-seeded ready task; ``None`` when none is ready."""
        task: Optional[Task] = self._kernel._call("taskboard#claim-next", agent, ttl)
        return task

    def release(self, id: str, token: str) -> None:
        """Return a claimed task to open (only its current token)."""
        self._kernel._call("taskboard#release", id, token)

    def complete(self, id: str, token: str) -> None:
        """Mark a claimed task done (idempotent for the completing token)."""
        self._kernel._call("taskboard#complete", id, token)

    def renew(self, id: str, token: str, ttl: int) -> Task:
        """Extend a live claim (qualification check, not a heartbeat)."""
        task: Task = self._kernel._call("taskboard#renew", id, token, ttl)
        return task


class Retention(_Interface):
    """Bounded removal of finished records (SPEC 9). A retry of a pruned key
    runs its body again; a pruned run id starts over."""

    __slots__ = ()

    def prune(self, before: int, limit: int) -> Pruned:
        """Remove at most ``limit`` (1-1000) records finished before ``before``."""
        pruned: Pruned = self._kernel._call("retention#prune", before, limit)
        return pruned

    def prune_dry_run(self, before: int, limit: int) -> Pruned:
        """What :meth:`prune` would remove now, without removing it."""
        self._kernel._admit((before, limit))
        pruned: Pruned = self._kernel._transact(lambda w: w.call("retention#prune", before, limit), commit=False)
        return pruned


__all__ = ["Checkpoint", "Commitgate", "Refused", "Retention", "Sideeffect", "Taskboard"]
