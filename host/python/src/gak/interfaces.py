"""The five WIT interfaces as Python classes (``kernel.checkpoint`` …), with
snake_case methods mirroring the Rust host's ``api.rs``.

Each method maps dataclasses to the wire form of :mod:`gak._abi` (tuples in
WIT declaration order), runs one export in one transaction, and maps the
answer back. Nothing here decides anything: every rule is the component's.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Union

from ._abi import Cases, EnumAs, Make, Ok
from .errors import Refused, StorageError
from .types import (
    Acquired,
    Action,
    Cleared,
    Contended,
    Granted,
    InFlight,
    KeyInfo,
    KeyPage,
    KeyState,
    Lease,
    Outcome,
    Plan,
    Pruned,
    ReconcileClaim,
    Replayed,
    Resolution,
    Resolved,
    RetrySafety,
    Snapshot,
    Status,
    StepDef,
    Task,
    TaskPage,
    TaskSeed,
    TaskState,
    Uncertain,
    maker,
)

if TYPE_CHECKING:
    from .kernel import Downstream, Kernel


def _enum(v: Any) -> Any:
    return v.value if isinstance(v, Enum) else v


def _opt_enum(v: Any) -> Any:
    return None if v is None else _enum(v)


# --- wire conversions (field order = WIT declaration order) ----------------


def _snapshot_in(s: Snapshot) -> tuple[Any, ...]:
    fields = sorted(s.fields.items()) if isinstance(s.fields, dict) else list(s.fields)
    return (s.run_id, s.seq, s.fence, s.status, list(s.done), fields)


def _snapshot_out(w: tuple[Any, ...]) -> Snapshot:
    run_id, seq, fence, status, done, fields = w
    return Snapshot(run_id=run_id, seq=seq, fence=fence, status=status, done=done, fields=dict(fields))


def _action_in(a: Action) -> tuple[Any, ...]:
    return (a.key, a.resource, _enum(a.retry_safety), a.fingerprint)


def _lease_in(l: Lease) -> tuple[Any, ...]:
    return (l.key, l.resource, l.fence, l.holder, l.until)


# The results every call returns, built without their dataclasses'
# __init__ (see types.maker), and the enums by value without the Enum
# call's lookup machinery (an unknown value still raises ValueError).
_new_lease = maker(Lease)
_new_task = maker(Task)
_new_granted = maker(Granted)
_new_replayed = maker(Replayed)
_TASK_STATES: dict[str, TaskState] = {s.value: s for s in TaskState}

_TASK = Make(_new_task, [None, None, None, EnumAs(TaskState)])

#: Results the component's answers are lifted straight into (the lift
#: builds these dataclasses from the Vals; see gak._abi.Make): what
#: Kernel._call returns for these exports, where others return tuples.
SHAPES: dict[str, Any] = {
    "taskboard#claim": Ok(_TASK),
    "taskboard#get": Ok(_TASK),
    "taskboard#renew": Ok(_TASK),
    "taskboard#claim-next": Ok(_TASK),
    "sideeffect#acquire": Ok(
        Cases(
            {
                "granted": (_new_granted, Make(_new_lease)),
                "replayed": (_new_replayed, None),
                "uncertain": (maker(Uncertain), None),
                "in-flight": (maker(InFlight), None),
                "contended": (maker(Contended), None),
            }
        )
    ),
}


def _lease_out(w: tuple[Any, ...]) -> Lease:
    return _new_lease(*w)  # type: ignore[no-any-return]


def _acquired_out(w: tuple[str, Any]) -> Acquired:
    case, payload = w
    if case == "granted":
        return _new_granted(_new_lease(*payload))  # type: ignore[no-any-return]
    if case == "replayed":
        return _new_replayed(payload)  # type: ignore[no-any-return]
    if case == "uncertain":
        return Uncertain(payload)
    if case == "in-flight":
        return InFlight()
    if case == "contended":
        return Contended(payload)
    raise StorageError(f"the component answered acquire with an unknown case {case!r}")


def _task_out(w: tuple[Any, ...]) -> Task:
    id, title, deps, state, owner, token, until, fence = w
    return _new_task(id, title, deps, _TASK_STATES.get(state) or TaskState(state), owner, token, until, fence)  # type: ignore[no-any-return]


def _key_info_out(w: tuple[Any, ...]) -> KeyInfo:
    key, state, safety, fingerprint, resource, until, reason, completed_at, reconciling = w
    return KeyInfo(
        key, KeyState(state), RetrySafety(safety), fingerprint, resource, until, reason, completed_at, reconciling
    )


def _outcome_out(w: tuple[Any, ...]) -> Outcome:
    return Outcome(Status(w[0]), w[1])


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
        self._kernel._call("checkpoint#save-if-newer", _snapshot_in(snap))

    def load(self, run_id: str) -> Snapshot:
        """The persisted snapshot, or ``not-found``."""
        return _snapshot_out(self._kernel._call("checkpoint#load", run_id))

    def build_plan(self, steps: Sequence[StepDef], snap: Optional[Snapshot] = None) -> Plan:
        """Validate the DAG and plan a resume. Pure: no store transaction."""
        wire = [(s.id, list(s.depends_on)) for s in steps]
        skip, run, untrusted = self._kernel._pure(
            "checkpoint#build-plan", wire, None if snap is None else _snapshot_in(snap)
        )
        return Plan(skip, run, untrusted)


class Commitgate(_Interface):
    """A run's or step's terminal outcome, once, by its current owner (SPEC 4)."""

    __slots__ = ()

    def commit(self, run_id: str, step: Optional[str], fence: int, outcome: Outcome) -> Outcome:
        """Commit the terminal outcome of ``(run_id, step)`` (``None`` = the
        run); returns the outcome as recorded."""
        w = self._kernel._call("commitgate#commit", run_id, step, fence, (_enum(outcome.status), outcome.result))
        return _outcome_out(w)

    def read(self, run_id: str, step: Optional[str] = None) -> Outcome:
        """The recorded outcome, or ``not-found``."""
        return _outcome_out(self._kernel._call("commitgate#read", run_id, step))


class Sideeffect(_Interface):
    """The idempotency-key gate, fencing, reconciliation and fenced sinks (SPEC 5)."""

    __slots__ = ()

    def acquire(self, action: Action, ttl: int) -> Acquired:
        """The single atomic decision for ``action``."""
        acquired: Acquired = self._kernel._call("sideeffect#acquire", _action_in(action), ttl)  # built by SHAPES
        return acquired

    def complete(self, action: Action, lease: Lease, result: bytes) -> bytes:
        """Record the key completed; returns the first recorded result."""
        out: bytes = self._kernel._call("sideeffect#complete", _action_in(action), _lease_in(lease), result)
        return out

    def release(self, action: Action, lease: Lease) -> None:
        """Release the resource hold; the key's intent stays."""
        self._kernel._call("sideeffect#release", _action_in(action), _lease_in(lease))

    def abandon(self, action: Action, lease: Lease, reason: str) -> None:
        """The attempt definitely did not apply: the key may be granted again."""
        self._kernel._call("sideeffect#abandon", _action_in(action), _lease_in(lease), reason)

    def renew(self, action: Action, lease: Lease, ttl: int) -> Lease:
        """Qualification check and extension of hold and intent."""
        return _lease_out(self._kernel._call("sideeffect#renew", _action_in(action), _lease_in(lease), ttl))

    def mark_uncertain(self, action: Action, lease: Lease, reason: str) -> None:
        """Mark the key uncertain (the hold stays: call ``release``)."""
        self._kernel._call("sideeffect#mark-uncertain", _action_in(action), _lease_in(lease), reason)

    def begin_reconcile(self, action: Action, ttl: int) -> ReconcileClaim:
        """Claim the right to reconcile an uncertain key."""
        claim, until = self._kernel._call("sideeffect#begin-reconcile", _action_in(action), ttl)
        return ReconcileClaim(claim, until)

    def resolve_uncertain(self, action: Action, resolution: Resolution) -> Resolved:
        """Record a reconciler's verdict (first verdict wins)."""
        r = resolution
        case, payload = self._kernel._call(
            "sideeffect#resolve-uncertain", _action_in(action), (r.applied, r.result, r.force_retryable, r.claim)
        )
        return Replayed(payload) if case == "replayed" else Cleared()

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
        items, nxt = self._kernel._call("sideeffect#list", _opt_enum(state), after, limit)
        return KeyPage([_key_info_out(i) for i in items], nxt)

    def get(self, key: str) -> KeyInfo:
        """The key as ``list`` shows it, or ``not-found``."""
        return _key_info_out(self._kernel._call("sideeffect#get", key))


class Taskboard(_Interface):
    """A board of tasks with dependencies and claims by token (SPEC 6, 9)."""

    __slots__ = ()

    def seed(self, tasks: Sequence[TaskSeed]) -> None:
        """Load topology (re-seeding an id overwrites it and clears its lease)."""
        wire = [(t.id, t.title, list(t.deps), _opt_enum(t.state)) for t in tasks]
        self._kernel._call("taskboard#seed", wire)

    def list(self, state: Optional[Union[TaskState, str]] = None, after: Optional[str] = None, limit: int = 100) -> TaskPage:
        """One page of the board ordered by id, without tokens."""
        items, nxt = self._kernel._call("taskboard#list", _opt_enum(state), after, limit)
        return TaskPage([_task_out(t) for t in items], nxt)

    # get, claim, claim_next, renew: the Task is built by SHAPES.

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
        return Pruned(*self._kernel._call("retention#prune", before, limit))

    def prune_dry_run(self, before: int, limit: int) -> Pruned:
        """What :meth:`prune` would remove now, without removing it."""
        self._kernel._admit((before, limit))
        return Pruned(*self._kernel._transact(lambda w: w.call("retention#prune", before, limit), commit=False))


__all__ = ["Checkpoint", "Commitgate", "Refused", "Retention", "Sideeffect", "Taskboard"]
