"""The queue worker (``host/HOSTS.md``, "The queue worker"): what queue users
call. It claims a batch, runs each task's handler with its claim renewed
while it runs, completes the successes in one ``complete-batch``, fails the
errors with exponential back-off and jitter, and stops gracefully: no new
claim, the handlers it has not started released (their attempt given back),
the running ones finished and reported::

    from gak import Kernel, TaskSeed, Worker

    kernel = Kernel.open("memory:")
    kernel.taskboard.seed([TaskSeed("send-invoice")])
    worked = Worker(kernel, "worker-1").run_until_idle(lambda task: print("sending", task.id))
    assert worked.completed == 1

A handler is a plain callable taking the :class:`~gak.Task` (its token
inside); returning is success, raising is failure (``str(exception)`` is
recorded as the task's ``last-error``). Handlers run on a pool of
``concurrency`` threads, started in the batch's order (claim order:
priority, then seed order).
"""

from __future__ import annotations

import heapq
import logging
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

from .errors import Refused, StorageError
from .types import Completion, CompletionAnswer, Task

if TYPE_CHECKING:
    from .kernel import Kernel

__all__ = ["MAX_REASON", "Backoff", "Worked", "Worker", "reason"]

_log = logging.getLogger("gak.worker")

#: The longest delay ``fail`` takes: one year, in ms.
MAX_DELAY = 365 * 24 * 60 * 60 * 1000

#: The longest ``last-error`` the contract stores, in UTF-8 bytes.
MAX_REASON = 4096

#: What ``fail`` and ``release`` answer when another worker holds the task
#: (or it is gone): the result is lost, never retried.
_LOST = ("lease-lost", "not-found")


@dataclass(frozen=True)
class Worked:
    """What a worker did."""

    #: Tasks granted to it.
    claimed: int = 0
    #: Handlers that succeeded and whose completion the kernel accepted.
    completed: int = 0
    #: Handlers that failed and whose ``fail`` the kernel accepted (the task
    #: is due again after its back-off, or dead).
    failed: int = 0
    #: Claims given back unstarted at a stop.
    released: int = 0
    #: Results the kernel refused: the claim was lost (taken over after it
    #: expired, or re-seeded) while the handler ran.
    lost: int = 0


@dataclass(frozen=True)
class Backoff:
    """Exponential back-off with jitter for failed handlers: the ``n``-th
    failed attempt is due again after ``min(max, base * 2**(n-1)) * (1 -
    jitter * u)`` ms, ``u`` uniform in [0, 1): jitter only shortens, the cap
    holds."""

    #: The first retry's delay, in ms.
    base: int = 1_000
    #: The longest delay, in ms.
    max: int = 3_600_000
    #: The share (0 to 1) by which a delay may be shortened at random, so
    #: tasks that failed together do not come back together.
    jitter: float = 0.2

    def delay(self, attempts: int, u: float) -> int:
        """The delay in ms after the task's ``attempts``-th attempt failed,
        with ``u`` in [0, 1)."""
        doublings = min(max(attempts - 1, 0), 63)
        full = min(self.base * (1 << doublings), self.max, MAX_DELAY)
        full = max(full, 0)
        jitter = min(max(float(self.jitter), 0.0), 1.0) * min(max(float(u), 0.0), 1.0)
        return min(math.floor(full * (1.0 - jitter)), full)


def unit() -> float:
    """A uniform draw in [0, 1) from the operating system's CSPRNG
    (``os.urandom``: no generator state a ``fork()`` copies, so workers
    forked together do not back off together)."""
    return (int.from_bytes(os.urandom(8), "little") >> 11) / (1 << 53)


def reason(message: str) -> str:
    """A handler's error as ``last-error``: U+0000 (which no store keeps) and
    lone surrogates (which are not text) as U+FFFD, cut to at most
    :data:`MAX_REASON` UTF-8 bytes at a character boundary."""
    clean = message.replace("\0", "\ufffd")
    try:
        data = clean.encode("utf-8")
    except UnicodeEncodeError:
        clean = "".join("\ufffd" if 0xD800 <= ord(c) < 0xE000 else c for c in clean)
        data = clean.encode("utf-8")
    if len(data) <= MAX_REASON:
        return clean
    # The text was valid UTF-8: only the sequence the cut split is dropped.
    return data[:MAX_REASON].decode("utf-8", "ignore")


def _token(task: Task) -> str:
    return task.token or ""


class _Keeper:
    """Renews the claims of the running handlers every ``ttl / 3`` from one
    thread (the handlers are never blocked). A renewal refused (the claim
    was lost) stops that task's renewals; one that fails with ``storage`` is
    retried at the next tick."""

    def __init__(self, kernel: "Kernel", ttl: int, agent: str) -> None:
        self._kernel = kernel
        self._ttl = ttl
        self._period = max(ttl // 3, 1) / 1000
        self._cond = threading.Condition(threading.Lock())
        #: (due, seq) of each running task, earliest first; stale entries
        #: (a task removed or rescheduled) are skipped.
        self._heap: list[tuple[float, int]] = []
        self._running: dict[int, tuple[Task, float]] = {}
        self._seq = 0
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name=f"gak-worker-renew {agent}", daemon=True)
        self._thread.start()

    def add(self, task: Task) -> int:
        with self._cond:
            self._seq += 1
            seq = self._seq
            due = time.monotonic() + self._period
            self._running[seq] = (task, due)
            heapq.heappush(self._heap, (due, seq))
            self._cond.notify()
            return seq

    def remove(self, seq: int) -> None:
        with self._cond:
            self._running.pop(seq, None)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join()

    def _loop(self) -> None:
        board = self._kernel.taskboard
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    while self._heap and self._running.get(self._heap[0][1], (None, None))[1] != self._heap[0][0]:
                        heapq.heappop(self._heap)  # removed, or rescheduled since
                    now = time.monotonic()
                    if self._heap and self._heap[0][0] <= now:
                        _, seq = heapq.heappop(self._heap)
                        task = self._running[seq][0]
                        break
                    self._cond.wait(None if not self._heap else self._heap[0][0] - now)
            lost = False
            try:
                board.renew(task.id, _token(task), self._ttl)
            except Refused as e:
                lost = True
                _log.info("worker: the claim of %r was lost (%s); renewals stop", task.id, e.code)
            except StorageError as e:
                _log.warning("worker: renewing %r failed; retrying at the next tick: %s", task.id, e)
            except Exception:  # noqa: BLE001 - the keeper must outlive any surprise
                _log.exception("worker: renewing %r failed; retrying at the next tick", task.id)
            with self._cond:
                if seq in self._running:
                    if lost:
                        del self._running[seq]
                    else:
                        due = time.monotonic() + self._period
                        self._running[seq] = (task, due)
                        heapq.heappush(self._heap, (due, seq))


#: How one handler ended: ("ok" | "failed" | "unstarted", task, exception).
_Ran = tuple[str, Task, Optional[BaseException]]


class Worker:
    """A queue worker over one kernel (``host/HOSTS.md``, "The queue worker").

    ``agent`` names the claims. Options: ``batch`` (tasks claimed at a
    time, 1-1000, default 10); ``ttl`` (the claims' ttl in ms, default
    30 000, renewed every third of it while a handler runs); ``concurrency``
    (handlers at once, default the batch); ``idle`` (seconds to wait before
    polling an empty board again, default 1); ``backoff`` (of failed
    handlers, default :class:`Backoff` ``()``: 1 s doubling to 1 h, jitter
    0.2). Options the kernel refuses (a batch of 0, a ttl of 0) end the loop
    with ``Refused("invalid-input")``.

    :meth:`stop` may be called from any thread, a signal handler or a
    handler. One worker runs one loop at a time; a stopped worker stays
    stopped."""

    def __init__(
        self,
        kernel: "Kernel",
        agent: str,
        *,
        batch: int = 10,
        ttl: int = 30_000,
        concurrency: Optional[int] = None,
        idle: float = 1.0,
        backoff: Optional[Backoff] = None,
    ) -> None:
        self.kernel = kernel
        self.agent = agent
        self.batch = batch
        self.ttl = ttl
        self.concurrency = max(1, batch if concurrency is None else concurrency)
        self.idle = idle
        self.backoff = backoff if backoff is not None else Backoff()
        self._stop = threading.Event()

    def stop(self) -> None:
        """Ask the worker to stop: no new claim; the batch's handlers not yet
        started are not called and their claims are released; the running
        ones finish and are reported; then the loop returns."""
        self._stop.set()

    @property
    def stopped(self) -> bool:
        """Was it asked to stop?"""
        return self._stop.is_set()

    def run(self, handler: Callable[[Task], Any]) -> Worked:
        """Work until stopped. Store failures (``StorageError``) are logged
        and the loop goes on after the idle wait (claims it could not report
        expire and are taken over); a refusal (``invalid-input``: a bad
        option) ends it, raised."""
        return self._work(handler, until_idle=False)

    def run_until_idle(self, handler: Callable[[Task], Any]) -> Worked:
        """Work until a claim finds no free task (or a stop). The first
        error of a call (``Refused``, ``StorageError``) is raised."""
        return self._work(handler, until_idle=True)

    def _work(self, handler: Callable[[Task], Any], until_idle: bool) -> Worked:
        counts = {"claimed": 0, "completed": 0, "failed": 0, "released": 0, "lost": 0}
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix=f"gak-worker {self.agent}")
        keeper = _Keeper(self.kernel, self.ttl, self.agent)
        try:
            while not self._stop.is_set():
                try:
                    claimed = self._round(handler, counts, pool, keeper)
                except StorageError as e:
                    if until_idle:
                        raise
                    _log.warning("worker %s: a call failed; going on: %s", self.agent, e)
                    self._stop.wait(self.idle)
                    continue
                if not claimed:
                    if until_idle:
                        break
                    self._stop.wait(self.idle)
        finally:
            pool.shutdown(wait=True)
            keeper.close()
        return Worked(**counts)

    def _one(self, handler: Callable[[Task], Any], task: Task, keeper: _Keeper) -> _Ran:
        """Run one handler (unless the worker was stopped before it started),
        its claim renewed while it runs."""
        if self._stop.is_set():
            return ("unstarted", task, None)
        seq = keeper.add(task)
        try:
            handler(task)
        except BaseException as e:  # noqa: BLE001 - reported as the task's failure
            return ("failed", task, e)
        finally:
            keeper.remove(seq)
        return ("ok", task, None)

    def _round(
        self, handler: Callable[[Task], Any], counts: dict[str, int], pool: ThreadPoolExecutor, keeper: _Keeper
    ) -> bool:
        """One batch: claim, run, report. Answers whether it claimed anything."""
        board = self.kernel.taskboard
        tasks = board.claim_batch(self.agent, self.ttl, self.batch)
        if not tasks:
            return False
        counts["claimed"] += len(tasks)
        futures = [pool.submit(self._one, handler, t, keeper) for t in tasks]
        ran: list[_Ran] = []
        interrupted: Optional[BaseException] = None
        for f in futures:
            while True:
                try:
                    ran.append(f.result())
                    break
                except BaseException as e:  # noqa: BLE001 - a KeyboardInterrupt while waiting
                    # Stop: what has not started is released, what runs
                    # finishes and is reported; then it is raised.
                    self.stop()
                    interrupted = interrupted or e
        done = [t for kind, t, _ in ran if kind == "ok"]
        failed = [(t, e) for kind, t, e in ran if kind == "failed"]
        unstarted = [t for kind, t, _ in ran if kind == "unstarted"]
        # A handler that raised SystemExit or KeyboardInterrupt fails its
        # task like any error; the worker then stops and raises it.
        escaped = next((e for _, e in failed if not isinstance(e, Exception)), None)
        if escaped is not None:
            self.stop()
        if done:
            answers = board.complete_batch([Completion(t.id, _token(t)) for t in done])
            for answer in answers:
                if answer.answer == CompletionAnswer.COMPLETED:
                    counts["completed"] += 1
                else:
                    counts["lost"] += 1
        for t, e in failed:
            after = self.backoff.delay(t.attempts, unit())
            try:
                board.fail(t.id, _token(t), reason(str(e)), after)
                counts["failed"] += 1
            except Refused as r:
                if r.code not in _LOST:
                    raise
                counts["lost"] += 1
        for t in unstarted:
            try:
                board.release(t.id, _token(t))
                counts["released"] += 1
            except Refused as r:
                if r.code not in _LOST:
                    raise
                counts["lost"] += 1
        if interrupted is not None:
            raise interrupted
        if escaped is not None:
            raise escaped
        return True
