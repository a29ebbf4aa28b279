"""``Kernel``: the typed Python API over the component.

Every call checks out a worker (a component instance with its own store
session), runs the export inside ONE store transaction, commits when it
returns ``ok`` and rolls back when it returns ``err`` — the calling
convention of ``wit/world.wit``. Workers are pooled: one per concurrent
caller, not per call, at most ``max_connections`` of them.
"""

from __future__ import annotations

import os
import random
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, TypeVar, Union

from . import _abi, _engine
from ._fork import FORKS, GATE
from ._pool import CONNECTION_WAIT, MAX_CONNECTIONS, WorkerPool
from .clock import Clock, SystemClock
from .component import find_component
from .errors import Refused, StorageError
from .limits import oversized
from .stores import open_store
from .stores._facts import RETRY_ATTEMPTS, RETRY_BASE_MS, RETRY_MAX_MS
from .stores.base import StoreConflict, StoreFailure

T = TypeVar("T")

#: How many times one call is run before store conflicts give up with
#: ``storage`` (HOSTS.md rule 3). Each re-run is a fresh decision (the
#: component is deterministic given its reads), never a partial one. The
#: retry policy's numbers are the protocol's (``host/sql/store.json``).
MAX_ATTEMPTS = RETRY_ATTEMPTS


def backoff_delay(attempt: int) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based): half the
    exponential step (``RETRY_BASE_MS`` doubling, at most ``RETRY_MAX_MS``)
    plus up to the other half at random, as every host pauses."""
    step = min(RETRY_BASE_MS * (1 << min(max(attempt - 1, 0), 16)), RETRY_MAX_MS)
    return (step / 2 + random.random() * step / 2) / 1000


def _backoff(attempt: int) -> None:
    time.sleep(backoff_delay(attempt))


def refusal(err: Any) -> Exception:
    """The exception for a WIT ``error`` value ``(case, payload)``."""
    code, detail = err
    if code == "storage":
        return StorageError(detail or "")
    return Refused(code, detail or "")


class _Bodies(threading.local):
    """The backends whose bodies (fenced sinks, ``with_downstream``) this
    thread is running, innermost last."""

    def __init__(self) -> None:
        self.stack: list[Any] = []


_BODIES = _Bodies()

#: How many bodies run in the process now (any thread, any kernel), so a
#: call need not look at its thread's stack when none does. Changed under
#: _RUNNING_LOCK; read without it: a thread's own body is counted before
#: the body runs, so a call from inside it always sees a nonzero count.
_RUNNING = [0]
_RUNNING_LOCK = threading.Lock()


def _record(worker: _engine.Worker, fault: BaseException) -> None:
    """Remember a store error met inside the call's transaction: it ends the
    call (HOSTS.md rule 12) even if whoever met it carried on."""
    if isinstance(fault, StoreConflict):
        worker.conflict = True
    elif worker.failure is None:
        worker.failure = str(fault) or type(fault).__name__


def _text(value: Any, what: str) -> None:
    """Refuse, before any store sees it, a downstream key or value that not
    every store can hold (HOSTS.md rule 9): memory and SQLite would store a
    NUL character that PostgreSQL refuses only at ``COMMIT`` (the writes
    are deferred), ending the call there with ``storage``; a lone surrogate
    cannot be encoded at all. Alike on every store: a typed error, nothing
    written, the call not ended."""
    if not isinstance(value, str):
        raise Refused("invalid-input", f"a downstream {what} must be text, not {type(value).__name__}")
    if "\0" in value:
        raise Refused("invalid-input", f"a downstream {what} holding a NUL character (PostgreSQL cannot store it)")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise Refused("invalid-input", f"a downstream {what} that is not Unicode text (a lone surrogate)") from None


class Downstream:
    """The open transaction of a fenced sink's body (or of
    :meth:`Kernel.with_downstream`): everything written through it commits or
    rolls back together with the sink's fence compare.

    A store error met here ends the call with ``storage`` (a conflict:
    the whole call re-runs) even when the body catches it: the transaction
    it happened in is not one to commit."""

    def __init__(self, worker: _engine.Worker) -> None:
        self._worker = worker

    def _run(self, op: Callable[[Any], T]) -> T:
        try:
            return op(self._worker.session)
        except StoreConflict as e:
            # The whole call (fence compare and body) is re-run.
            _record(self._worker, e)
            raise StorageError(f"conflict: {e}") from e
        except StoreFailure as e:
            _record(self._worker, e)
            raise StorageError(str(e)) from e

    def get(self, key: str) -> Optional[str]:
        """Read a key of the binding's ``downstream`` table."""
        _text(key, "key")
        return self._run(lambda s: s.get("downstream", key))

    def put(self, key: str, value: str) -> None:
        """Write a key of the binding's ``downstream`` table. A key or value
        no store can hold raises ``Refused("invalid-input")``: nothing is
        written and the call goes on."""
        _text(key, "key")
        _text(value, "value")
        self._run(lambda s: s.put("downstream", key, value))

    @property
    def raw(self) -> Any:
        """The driver handle inside the same transaction, for the body's own
        tables: the ``sqlite3.Connection`` (SQLite; transaction statements
        are denied while the body runs), a cursor over the transaction
        (PostgreSQL: ``execute`` / ``executemany`` / ``fetch*``; transaction
        control is refused, and a statement that fails ends the call with
        ``storage``), ``None`` (memory). Parameters only: never splice data
        into SQL."""
        return self._worker.session.raw


class Kernel:
    """A handle to the kernel over one store. Share it between threads.

    ``max_connections`` bounds the workers (component instance plus store
    connection) this kernel keeps; a call that finds all of them busy waits
    up to ``connection_wait`` seconds, then raises :class:`StorageError`.
    A kernel dropped without :meth:`close` closes its idle connections when
    it is collected."""

    def __init__(
        self,
        backend: Any,
        *,
        clock: Optional[Clock] = None,
        component: Union[str, os.PathLike[str], None] = None,
        max_connections: int = MAX_CONNECTIONS,
        connection_wait: float = CONNECTION_WAIT,
    ) -> None:
        self._compiled = _engine.compiled(find_component(component))
        #: Each export's codec by name, for lowering before a worker is
        #: checked out.
        self._codecs: dict[str, _abi.FuncCodec] = {}
        self.backend = backend
        self.clock: Clock = clock if clock is not None else SystemClock()
        compiled, clock_ = self._compiled, self.clock

        def make() -> _engine.Worker:
            try:
                session = backend.session()
            except (StoreConflict, StoreFailure) as e:
                raise StorageError(str(e)) from e
            try:
                return _engine.Worker(compiled, session, clock_)
            except BaseException:
                session.close()
                raise

        # `make` and the pool hold no reference to this kernel, so dropping
        # the kernel lets the finalizer close what the pool holds.
        self._pool: WorkerPool[_engine.Worker] = WorkerPool(make, max_connections, connection_wait)
        self._finalizer = weakref.finalize(self, self._pool.close)

    @classmethod
    def open(
        cls,
        url: str,
        *,
        clock: Optional[Clock] = None,
        component: Union[str, os.PathLike[str], None] = None,
        max_connections: int = MAX_CONNECTIONS,
        connection_wait: float = CONNECTION_WAIT,
    ) -> "Kernel":
        """A kernel on a store URL: ``memory:``, ``sqlite:PATH``,
        ``postgres://user@host:port/db?schema=NAME``. ``clock`` defaults to
        the system clock; ``component`` to the lookup of :mod:`gak.component`."""
        return cls(
            open_store(url),
            clock=clock,
            component=component,
            max_connections=max_connections,
            connection_wait=connection_wait,
        )

    @property
    def component_path(self) -> Path:
        """The component file this kernel runs."""
        return self._compiled.path

    @property
    def max_connections(self) -> int:
        """The most workers (instance plus connection) this kernel keeps."""
        return self._pool.max_connections

    def close(self) -> None:
        """Close every idle worker's connection."""
        self._pool.close()

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
        """Claims by token (SPEC 6, 9) and the job queue's calls (SPEC 10);
        :class:`gak.Worker` runs handlers over it."""
        return Taskboard(self)

    @property
    def retention(self) -> "Retention":
        """Bounded pruning of finished records (SPEC 9)."""
        return Retention(self)

    # --- workers and transactions --------------------------------------

    def _admit(self, args: Sequence[Any] = (), *, each: bool = True) -> None:
        """Refuse, before a worker is checked out, a call this host cannot
        make: one from inside a body of this kernel's store (HOSTS.md rule
        13: it would need a second transaction while the body's holds the
        locks — a deadlock, or a hang on the memory store's lock) and one
        whose arguments are too large to lower (rule 16)."""
        if _RUNNING[0]:
            self._refuse_from_own_body()
        if args:
            why = oversized(args, each)
            if why is not None:
                raise Refused("invalid-input", why)

    def _refuse_from_own_body(self) -> None:
        backend = self.backend
        if any(b is backend for b in _BODIES.stack):
            raise Refused("invalid-input", "a call from inside a body into the same kernel (it would wait for itself)")

    def _run_body(self, worker: _engine.Worker, body: Callable[[Downstream], T]) -> T:
        """Run caller code inside the call's open transaction: the session
        lends its driver handle (guarded: no transaction control) and takes
        it back; a store error met meanwhile ends the call."""
        session = worker.session
        stack = _BODIES.stack
        session.lend()
        stack.append(self.backend)
        with _RUNNING_LOCK:
            _RUNNING[0] += 1
        try:
            return body(Downstream(worker))
        finally:
            with _RUNNING_LOCK:
                _RUNNING[0] -= 1
            stack.pop()
            fault = session.reclaim()
            if fault is not None:
                _record(worker, fault)

    def _transact(self, call: Callable[[_engine.Worker], Any], *, commit: bool = True) -> Any:
        """Run ``call`` (export calls on a worker, returning the WIT result
        ``(ok, payload)``) inside one store transaction, re-running it on
        conflicts. ``call`` MUST be re-runnable: each attempt starts in a
        fresh transaction after the previous one was rolled back.
        ``commit=False`` ends a successful call with a rollback (a dry run)."""
        self._admit()
        return self._checked_out(call, commit, "", ())

    def _checked_out(self, call: Optional[Callable[[_engine.Worker], Any]], commit: bool, name: str, args: Any) -> Any:
        """:meth:`_attempts` on a worker checked out for it, inside the fork
        gate. The call was admitted already."""
        GATE.enter()
        try:
            worker = self._pool.checkout()
            try:
                return self._attempts(worker, call, commit, name, args)
            finally:
                # _return, inline (it runs on every call).
                if worker.trapped:
                    self._pool.discard(worker)
                else:
                    self._pool.checkin(worker)
        finally:
            GATE.exit()

    def _return(self, worker: _engine.Worker) -> None:
        # A trap leaves the instance unusable (HOSTS.md rule 6): a fresh one
        # is made for a later call.
        if worker.trapped:
            self._pool.discard(worker)
        else:
            self._pool.checkin(worker)

    def _attempts(
        self,
        worker: _engine.Worker,
        call: Optional[Callable[[_engine.Worker], Any]],
        commit: bool,
        name: str = "",
        args: Any = (),
        lowered: Optional[_abi.Arena] = None,
        codec: Optional[_abi.FuncCodec] = None,
        stamp: int = 0,
    ) -> Any:
        """The attempts of one call: ``call(worker)``, or (``call`` None) the
        export ``name`` with ``args`` — what most calls are, without a
        closure made for each — lowered already into ``lowered`` if given
        (every attempt sends the same Vals: wasmtime only reads them)."""
        session = worker.session
        attempt = 0
        while True:
            attempt += 1
            retry = attempt < MAX_ATTEMPTS
            worker.conflict = False
            worker.failure = None
            try:
                session.begin()
            except StoreConflict as e:
                # Nothing began: no rollback follows (HOSTS.md rule 3).
                if retry:
                    _backoff(attempt)
                    continue
                raise StorageError(f"store conflicts persisted: {e}") from e
            except StoreFailure as e:
                raise StorageError(str(e)) from e
            try:
                if lowered is not None:
                    if lowered.stamp != stamp:
                        # Another call lowered into this thread's arena
                        # since: lower again (the same checks pass).
                        lowered = _abi.lower_ahead(codec, args)  # type: ignore[arg-type]
                        stamp = lowered.stamp if lowered is not None else 0
                if lowered is not None:
                    ok, value = worker.call_lowered(name, lowered, codec)  # type: ignore[arg-type]
                elif call is None:
                    ok, value = worker.call_with(name, args, codec)
                else:
                    ok, value = call(worker)
            except _abi.Trap as e:
                session.rollback()
                worker.trapped = True
                raise StorageError(f"component trapped: {e}") from e
            except _abi.ArgError as e:
                session.rollback()
                raise Refused("invalid-input", str(e)) from None
            except BaseException:
                if worker.generation != FORKS[0]:
                    raise  # a child forked inside this call: the parent's transaction
                session.rollback()
                if worker.conflict and retry:
                    _backoff(attempt)
                    continue
                raise
            if worker.generation != FORKS[0]:
                # A body forked and this is the child: the transaction, its
                # connection and its locks are the parent's to end.
                raise StorageError("the process forked inside a call; the child does not end the parent's transaction")
            if worker.conflict or worker.failure is not None:
                session.rollback()
                if worker.conflict and retry:
                    # Whatever the component answered after a conflict is
                    # discarded: roll back and decide afresh.
                    _backoff(attempt)
                    continue
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
                # May have reached the database (an ambiguous commit): never
                # re-run; the contract's rules decide what later calls see.
                raise StorageError(f"commit failed: {e}") from e
            return value

    def _call(self, name: str, *args: Any) -> Any:
        """Call export ``name`` in a transaction: what most API calls are
        (:meth:`_admit` and :meth:`_checked_out`, inline).

        The arguments are lowered here, before a worker is checked out or a
        transaction opens, when the export's generated lowering takes them
        and bounds every size (HOSTS.md rule 16: then they are within the
        limits); else they are checked by :func:`gak.limits.oversized` and
        lowered in the call, as :meth:`_admit` does."""
        if _RUNNING[0]:
            self._refuse_from_own_body()
        codec = self._codecs.get(name) or self._codec(name)
        lowered = _abi.lower_ahead(codec, args)
        stamp = 0
        if lowered is not None:
            stamp = lowered.stamp
        else:
            why = oversized(args)
            if why is not None:
                raise Refused("invalid-input", why)
        me = GATE.enter()
        try:
            pool = self._pool
            worker = pool.checkout()
            try:
                return self._attempts(worker, None, True, name, args, lowered, codec, stamp)
            finally:
                if worker.trapped:
                    pool.discard(worker)
                else:
                    pool.checkin(worker)
        finally:
            GATE.exit(me)

    def _codec(self, name: str) -> _abi.FuncCodec:
        codec = self._codecs[name] = self._compiled.export(name)[1]
        return codec

    def _pure(self, name: str, *args: Any) -> Any:
        """Call an export that MUST NOT touch the store, without a transaction
        (should it touch the store anyway, the binding refuses: ``storage``).
        Only the total size is bounded here: the one pure export,
        ``build-plan``, judges each step id itself (``invalid-plan``)."""
        self._admit(args, each=False)
        GATE.enter()
        try:
            worker = self._pool.checkout()
            try:
                ok, value = worker.call(name, *args)
            except _abi.Trap as e:
                worker.trapped = True
                raise StorageError(f"component trapped: {e}") from e
            except _abi.ArgError as e:
                raise Refused("invalid-input", str(e)) from None
            finally:
                self._return(worker)
        finally:
            GATE.exit()
        if not ok:
            raise refusal(value)
        return value

    def with_downstream(self, body: Callable[[Downstream], T]) -> T:
        """Run ``body`` in a transaction of its own on the binding's
        ``downstream`` table (for reading or seeding a sink's data). The
        body must not call this kernel (``invalid-input``)."""
        box: list[Any] = []

        def run(worker: _engine.Worker) -> Any:
            box[:] = [self._run_body(worker, body)]
            return (True, None)

        self._transact(run)
        return box[0]  # type: ignore[no-any-return]


from ._host_level import Retention, Sideeffect  # noqa: E402
from .interfaces import Checkpoint, Commitgate, Taskboard  # noqa: E402
