"""gak: a crash-safe coordination kernel, embedded from Python.

Every judgement lives in one WebAssembly component (``gak.wasm``, contract
``gak:kernel@0.3.0``); this package binds its import (a transactional store,
with the clock and fresh randomness) to memory, SQLite or PostgreSQL and
exposes its five interfaces::

    from gak import Kernel, TaskSeed

    kernel = Kernel.open("sqlite:gak.db")        # or "memory:", "postgres://…?schema=…"
    kernel.taskboard.seed([TaskSeed("onboard-user-42")])
    task = kernel.taskboard.claim("onboard-user-42", "worker-1", 30_000)

Refusals raise :class:`Refused` (``.code`` is the contract's kebab-case
variant, e.g. ``"lease-lost"``); store failures raise :class:`StorageError`.
"""

from .clock import Clock, ManualClock, SystemClock
from .component import find_component
from .errors import CODES, GakError, OpenError, Refused, StorageError
from .kernel import Downstream, Kernel
from .heartbeat import Heartbeat
from .runner import Applied, BodyFailed, Committer, NotApplied, Ran, Runner
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
)

__version__ = "0.3.0"

__all__ = [
    "CODES",
    "Acquired",
    "Action",
    "Applied",
    "BodyFailed",
    "Cleared",
    "Clock",
    "Committer",
    "Contended",
    "Downstream",
    "GakError",
    "Granted",
    "Heartbeat",
    "InFlight",
    "Kernel",
    "KeyInfo",
    "KeyPage",
    "KeyState",
    "Lease",
    "ManualClock",
    "NotApplied",
    "OpenError",
    "Outcome",
    "Plan",
    "Pruned",
    "Ran",
    "ReconcileClaim",
    "Refused",
    "Replayed",
    "Resolution",
    "Resolved",
    "RetrySafety",
    "Runner",
    "Snapshot",
    "Status",
    "StepDef",
    "StorageError",
    "SystemClock",
    "Task",
    "TaskPage",
    "TaskSeed",
    "TaskState",
    "Uncertain",
    "find_component",
]
