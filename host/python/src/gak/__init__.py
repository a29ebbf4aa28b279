"""gak: a crash-safe coordination kernel, embedded from Python.

Every judgement lives in one WebAssembly component (``gak.wasm``, contract
``gak:kernel@0.4.0``); this package binds its import (a transactional store,
with the clock and fresh randomness) to memory, SQLite or PostgreSQL and
exposes its five interfaces::

    from gak import Kernel, TaskSeed

    kernel = Kernel.open("sqlite:gak.db")        # or "memory:", "postgres://…?schema=…"
    kernel.taskboard.seed([TaskSeed("onboard-user-42")])
    task = kernel.taskboard.claim("onboard-user-42", "worker-1", 30_000)

or as a job queue, with :class:`Worker` claiming batches, renewing the
claims while handlers run and retrying failures with back-off::

    Worker(kernel, "worker-1").run(lambda task: send_invoice(task.id))

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
    Completion,
    CompletionAnswer,
    CompletionResult,
    Contended,
    Granted,
    GroupInfo,
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
from .worker import Backoff, Worked, Worker

__version__ = "0.4.0"

__all__ = [
    "CODES",
    "Acquired",
    "Action",
    "Applied",
    "Backoff",
    "BodyFailed",
    "Cleared",
    "Clock",
    "Committer",
    "Completion",
    "CompletionAnswer",
    "CompletionResult",
    "Contended",
    "Downstream",
    "GakError",
    "Granted",
    "GroupInfo",
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
    "Worked",
    "Worker",
    "find_component",
]
