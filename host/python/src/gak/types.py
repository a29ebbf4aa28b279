"""The contract's records as dataclasses and its enums as ``str`` enums.

Field names are the WIT names in snake_case (``run-id`` → ``run_id``). Bytes
payloads (results) are ``bytes``; times are integer milliseconds since the
Unix epoch; every integer stays below 2**53 (the kernel refuses larger ones
with ``invalid-input``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, Callable, Optional, Union


class Status(str, Enum):
    """A committed outcome's status."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"


class RetrySafety(str, Enum):
    """Whether running an effect twice is harmless."""

    SAFE = "safe"
    UNSAFE = "unsafe"


class TaskState(str, Enum):
    """Where a task stands on the board."""

    OPEN = "open"
    CLAIMED = "claimed"
    DONE = "done"
    FAILED = "failed"


class KeyState(str, Enum):
    """Where a side-effect key stands (an expired intent is ``UNCERTAIN``)."""

    CLEARED = "cleared"
    IN_FLIGHT = "in-flight"
    UNCERTAIN = "uncertain"
    COMPLETED = "completed"


# --- checkpoint -----------------------------------------------------------


@dataclass(frozen=True)
class StepDef:
    """A step of a run and the steps it depends on."""

    id: str
    depends_on: tuple[str, ...] = ()


@dataclass
class Snapshot:
    """A run's progress. ``fields`` is a map (sent as key-sorted pairs)."""

    run_id: str
    seq: int
    status: str = "running"
    done: list[str] = field(default_factory=list)
    fields: dict[str, str] = field(default_factory=dict)
    fence: Optional[int] = None


@dataclass(frozen=True)
class Plan:
    """What to do on resume: ``skip`` the trusted steps, ``run`` the rest in
    order; ``untrusted`` lists done records that could not be trusted."""

    skip: list[str]
    run: list[str]
    untrusted: list[str]


# --- commitgate -----------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """A terminal outcome of a run or a step."""

    status: Status
    result: bytes = b""


# --- sideeffect -----------------------------------------------------------


@dataclass(frozen=True)
class Action:
    """One logical side effect: ``key`` is its idempotency key."""

    key: str
    resource: str
    retry_safety: RetrySafety = RetrySafety.SAFE
    fingerprint: Optional[str] = None


@dataclass(frozen=True)
class Lease:
    """The right to apply an action once. Pass ``key`` to the remote system as
    its idempotency key and ``fence`` to any store that can compare it."""

    key: str
    resource: str
    fence: int
    holder: str
    until: int


@dataclass(frozen=True)
class Granted:
    """``acquire``: a fresh lease; run the body."""

    lease: Lease


@dataclass(frozen=True)
class Replayed:
    """The key completed before: its first recorded result. Do not run the body."""

    result: bytes


@dataclass(frozen=True)
class Uncertain:
    """The key may or may not have been applied: reconcile first."""

    reason: str


@dataclass(frozen=True)
class InFlight:
    """Another attempt of this key is live."""


@dataclass(frozen=True)
class Contended:
    """Another key holds the resource until ``until``."""

    until: int


#: The single atomic decision of ``acquire``.
Acquired = Union[Granted, Replayed, Uncertain, InFlight, Contended]


@dataclass(frozen=True)
class Cleared:
    """``resolve_uncertain``: the key is cleared and may be granted again."""


#: A reconciler's verdict, as recorded.
Resolved = Union[Replayed, Cleared]


@dataclass(frozen=True)
class Resolution:
    """A reconciler's verdict from downstream facts."""

    applied: bool
    result: Optional[bytes] = None
    force_retryable: bool = False
    claim: Optional[str] = None


@dataclass(frozen=True)
class ReconcileClaim:
    """The right to reconcile one uncertain key until ``until``."""

    claim: str
    until: int


@dataclass(frozen=True)
class KeyInfo:
    """A key as an operator sees it (never a holder or a claim)."""

    key: str
    state: KeyState
    retry_safety: RetrySafety
    fingerprint: Optional[str]
    resource: str
    until: Optional[int]
    reason: Optional[str]
    completed_at: Optional[int]
    reconciling_until: Optional[int]


@dataclass(frozen=True)
class KeyPage:
    """One page of keys; ``next`` is the cursor of the following page."""

    items: list[KeyInfo]
    next: Optional[str]


# --- taskboard ------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """A task as the board shows it; ``token`` only from claim / renew."""

    id: str
    title: str
    deps: list[str]
    state: TaskState
    owner: Optional[str]
    token: Optional[str]
    until: Optional[int]
    fence: int


@dataclass(frozen=True)
class TaskSeed:
    """A task to load (``state`` defaults to open)."""

    id: str
    title: Optional[str] = None
    deps: tuple[str, ...] = ()
    state: Optional[TaskState] = None


@dataclass(frozen=True)
class TaskPage:
    """One page of the board; ``next`` is the cursor of the following page."""

    items: list[Task]
    next: Optional[str]


# --- retention ------------------------------------------------------------


@dataclass(frozen=True)
class Pruned:
    """What one ``prune`` call removed; ``more`` says call again."""

    removed_keys: int
    removed_tasks: int
    removed_runs: int
    more: bool


# --- building results fast ------------------------------------------------


def maker(cls: type) -> Callable[..., Any]:
    """A constructor of the frozen dataclass ``cls`` taking every field
    positionally, in declaration order, for the API's results (one per
    call): it fills the instance's ``__dict__`` directly, where the
    generated ``__init__`` sets each field through ``object.__setattr__``
    (frozen), about three times the cost. The instance is the same: same
    type, fields, equality, hash and repr. Only for classes without
    ``__post_init__``, defaults that compute, or slots."""
    names = [f.name for f in fields(cls)]
    if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__"):
        raise TypeError(f"{cls.__name__}: build it with its own __init__")
    params = ", ".join(names)
    body = "".join(f"    d[{n!r}] = {n}\n" for n in names)
    src = f"def make({params}):\n    o = new(cls)\n    d = o.__dict__\n{body}    return o\n"
    scope: dict[str, Any] = {"new": object.__new__, "cls": cls}
    exec(src, scope)  # noqa: S102 - source built above from the field names only
    make: Callable[..., Any] = scope["make"]
    make.__qualname__ = make.__name__ = f"make_{cls.__name__}"
    return make
