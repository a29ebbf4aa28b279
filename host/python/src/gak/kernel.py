"""``Kernel``: the typed Python API over the component.

Every call checks out a worker (a component instance with its own store
session), runs the export inside ONE store transaction, commits when it
returns ``ok`` and rolls back when it returns ``err`` — the calling
convention of ``wit/world.wit``. Workers are pooled: one per concurrent
caller, not per call.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar, Union

from . import _abi, _engine
from .clock import Clock, SystemClock
from .component import find_component
from .errors import Refused, StorageError
from .stores import open_store
from .stores.base import StoreConflict, StoreFailure

T = TypeVar("T")

#: How many times one call is run before store conflicts give up with
#: ``storage``. Each re-run is a fresh decision (the component is
#: deterministic given its reads), never a partial one.
MAX_ATTEMPTS = 10


def _backoff(attempt: int) -> None:
    """Exponential backoff with jitter, 1 ms to ~0.5 s."""
    base = 1 << min(attempt, 9)
    time.sleep((base / 2 + random.random() * base / 2) / 1000)


def refusal(err: Any) -> Exception:
    """The exception for a WIT ``error`` value ``(case, payload)``."""
    code, detail = err
    if code == "storage":
        return StorageError(detail or "")
    return Refused(code, detail or "")


class Downstream:
    """The open transaction of a fenced sink's body (or of
    :meth:`Kernel.with_downstream`): everything written through it commits or
    rolls back together with the sink's fence compare."""

    def __init__(self, worker: _engine.Worker) -> None:
        self._worker = worker

    def _run(self, op: Callable[[Any], T]) -> T:
        try:
            return op(self._worker.session)
        except StoreConflict as e:
            # The whole call (fence compare and body) is re-run.
            self._worker.conflict = True
            raise StorageError(f"conflict: {e}") from e
        except StoreFailure as e:
            self._worker.failure = str(e)
            raise StorageError(str(e)) from e

    def get(self, key: str) -> Optional[str]:
        """Read a key of the binding's ``downstream`` table."""
        return self._run(lambda s: s.get("downstream", key))

    def put(self, key: str, value: str) -> None:
        """Write a key of the binding's ``downstream`` table."""
        self._run(lambda s: s.put("downstream", key, value))

    @property
    def raw(self) -> Any:
        """The driver handle inside the same transaction, for the body's own
        tables: the ``sqlite3.Connection`` (SQLite), a psycopg cursor
        (PostgreSQL), ``None`` (memory). Parameters only: never splice data
        into SQL."""
        return self._worker.session.raw


class Kernel:
    """A handle to the kernel over one store. Share it between threads."""

    def __init__(
        self,
        backend: Any,
        *,
        clock: Optional[Clock] = None,
        component: Union[str, os.PathLike[str], None] = None,
    ) -> None:
        self._compiled = _engine.compiled(find_component(component))
        self.backend = backend
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._idle: list[_engine.Worker] = []
        self._lock = threading.Lock()
        self._pid = _engine.FORKS[0]

    @classmethod
    def open(
        cls,
        url: str,
        *,
        clock: Optional[Clock] = None,
        component: Union[str, os.PathLike[str], None] = None,
    ) -> "Kernel":
        """A kernel on a store URL: ``memory:``, ``sqlite:PATH``,
        ``postgres://user@host:port/db?schema=NAME``. ``clock`` defaults to
        the system clock; ``component`` to the lookup of :mod:`gak.component`."""
        return cls(open_store(url), clock=clock, component=component)

    @property
    def component_path(self) -> Path:
        """The component file this kernel runs."""
        return self._compiled.path

    def close(self) -> None:
        """Close every idle worker's connection."""
        with self._lock:
            idle, self._idle = self._idle, []
        for w in idle:
            w.close()

    def __enter__(self) -> "Kernel":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Kernel({self.backend.describe()})"

    # --- the five interfaces -------------------------------------------

    @property
    def checkpoint(self) -> "Checkpoint":
        """Snapshots and resume plans (SPEC 3)."""
        return Checkpoint(self)

    @property
    def commitgate(self) -> "Commitgate":
        """Terminal outcomes (SPEC 4)."""
        return Commitgate(self)

    @property
    def sideeffect(self) -> "Sideeffect":
        """The idempotency gate and fenced sinks (SPEC 5)."""
        return Sideeffect(self)

    @property
    def taskboard(self) -> "Taskboard":
        """Claims by token (SPEC 6, 9)."""
        return Taskboard(self)

    @property
    def retention(self) -> "Retention":
        """Bounded pruning of finished records (SPEC 9)."""
        return Retention(self)

    # --- workers and transactions --------------------------------------

    def _checkout(self) -> _engine.Worker:
        with self._lock:
            if self._pid != _engine.FORKS[0]:
                # After fork: the parent's workers share its connections and
                # its WASI random state; never use them here.
                self._idle = []
                self._pid = _engine.FORKS[0]
            if self._idle:
                return self._idle.pop()
        try:
            session = self.backend.session()
        except (StoreConflict, StoreFailure) as e:
            raise StorageError(str(e)) from e
        return _engine.Worker(self._compiled, session, self.clock)

    def _checkin(self, worker: _engine.Worker) -> None:
        if worker.pid == _engine.FORKS[0]:
            with self._lock:
                self._idle.append(worker)

    def _transact(self, call: Callable[[_engine.Worker], Any], *, commit: bool = True) -> Any:
        """Run ``call`` (export calls on a worker, returning the WIT result
        ``(ok, payload)``) inside one store transaction, re-running it on
        conflicts. ``call`` MUST be re-runnable: each attempt starts in a
        fresh transaction after the previous one was rolled back.
        ``commit=False`` ends a successful call with a rollback (a dry run)."""
        worker = self._checkout()
        session = worker.session
        attempt = 0
        try:
            while True:
                attempt += 1
                retry = attempt < MAX_ATTEMPTS
                worker.conflict = False
                worker.failure = None
                try:
                    session.begin()
                except StoreConflict as e:
                    if retry:
                        _backoff(attempt)
                        continue
                    raise StorageError(f"store conflicts persisted: {e}") from e
                except StoreFailure as e:
                    raise StorageError(str(e)) from e
                try:
                    ok, value = call(worker)
                except _abi.Trap as e:
                    session.rollback()
                    worker.close()
                    worker = None  # type: ignore[assignment]
                    raise StorageError(f"component trapped: {e}") from e
                except _abi.ArgError as e:
                    session.rollback()
                    raise Refused("invalid-input", str(e)) from None
                except BaseException:
                    session.rollback()
                    if worker.conflict and retry:
                        _backoff(attempt)
                        continue
                    raise
                if worker.conflict and retry:
                    session.rollback()
                    _backoff(attempt)
                    continue
                if worker.failure is not None or worker.conflict:
                    session.rollback()
                    raise StorageError(worker.failure or "store conflicts persisted")
                if not ok:
                    session.rollback()
                    raise refusal(value)
                if not commit:
                    session.rollback()
                    return value
                try:
                    session.commit()
                except StoreConflict:
                    # Refused at commit: not applied, so re-running is safe.
                    if retry:
                        _backoff(attempt)
                        continue
                    raise StorageError("store conflicts persisted") from None
                except StoreFailure as e:
                    # May have reached the database (an ambiguous commit):
                    # never re-run; the contract's rules decide what later
                    # calls see.
                    raise StorageError(f"commit failed: {e}") from e
                return value
        finally:
            if worker is not None:
                self._checkin(worker)

    def _call(self, name: str, *args: Any) -> Any:
        return self._transact(lambda w: w.call(name, *args))

    def _pure(self, name: str, *args: Any) -> Any:
        """Call an export that MUST NOT touch the store, without a transaction
        (should it touch the store anyway, the binding refuses: ``storage``)."""
        worker = self._checkout()
        try:
            ok, value = worker.call(name, *args)
        except _abi.Trap as e:
            worker.close()
            raise StorageError(f"component trapped: {e}") from e
        except _abi.ArgError as e:
            self._checkin(worker)
            raise Refused("invalid-input", str(e)) from None
        self._checkin(worker)
        if not ok:
            raise refusal(value)
        return value

    def with_downstream(self, body: Callable[[Downstream], T]) -> T:
        """Run ``body`` in a transaction of its own on the binding's
        ``downstream`` table (for reading or seeding a sink's data)."""
        box: list[Any] = []

        def run(worker: _engine.Worker) -> Any:
            box[:] = [body(Downstream(worker))]
            return (True, None)

        self._transact(run)
        return box[0]  # type: ignore[no-any-return]


from .interfaces import Checkpoint, Commitgate, Retention, Sideeffect, Taskboard  # noqa: E402
