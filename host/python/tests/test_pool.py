"""HOSTS.md rule 15: at most ``max_connections`` workers per kernel, a bounded
wait beyond them, and nothing kept alive by a kernel nobody holds (issue 17
item 4: 30 dropped kernels held 31 PostgreSQL connections)."""

from __future__ import annotations

import gc
import threading
import uuid
import weakref
from typing import Any

import pytest

from gak import Kernel, ManualClock, StorageError, TaskSeed
from gak.stores.memory import MemoryBackend, MemorySession

from conftest import pg_dsn, pg_with


class Counting(MemoryBackend):
    """Counts sessions made and closed; ``hold`` keeps callers inside
    ``begin`` (one signal each on ``entered``) until it is set."""

    def __init__(self) -> None:
        super().__init__()
        self.made = 0
        self.closed = 0
        self.hold: threading.Event | None = None
        self.entered = threading.Semaphore(0)
        self._count = threading.Lock()

    def session(self) -> MemorySession:
        backend = self
        with self._count:
            self.made += 1

        class S(MemorySession):
            def begin(self) -> None:
                if backend.hold is not None:
                    backend.entered.release()
                    backend.hold.wait(30)
                super().begin()

            def close(self) -> None:
                with backend._count:
                    backend.closed += 1
                super().close()

        return S(self)


def test_a_caller_beyond_max_connections_waits_then_gets_storage() -> None:
    store = Counting()
    k = Kernel(store, clock=ManualClock(0), max_connections=2, connection_wait=0.05)
    assert k.max_connections == 2
    store.hold = threading.Event()
    busy = [threading.Thread(target=k.taskboard.list) for _ in range(2)]
    for t in busy:
        t.start()
    for _ in busy:  # both workers are checked out, their callers inside begin
        assert store.entered.acquire(timeout=30)
    with pytest.raises(StorageError, match="max_connections=2"):
        k.taskboard.list()
    assert store.made == 2
    store.hold.set()
    for t in busy:
        t.join(30)
    store.hold = None
    k.taskboard.seed([TaskSeed("a")])  # a returned worker serves the next call
    assert store.made == 2


def test_a_waiting_caller_gets_the_next_returned_worker() -> None:
    store = Counting()
    k = Kernel(store, clock=ManualClock(0), max_connections=1, connection_wait=30)
    store.hold = threading.Event()
    first = threading.Thread(target=k.taskboard.list)
    first.start()
    assert store.entered.acquire(timeout=30)
    answers: list[Any] = []
    waiting = threading.Thread(target=lambda: answers.append(k.taskboard.list()))
    waiting.start()  # finds the only worker busy and waits for it
    store.hold.set()
    first.join(30)
    waiting.join(30)
    assert len(answers) == 1 and store.made == 1


def test_many_threads_share_at_most_max_connections_workers() -> None:
    store = Counting()
    k = Kernel(store, clock=ManualClock(0), max_connections=3)
    k.taskboard.seed([TaskSeed(f"t{i}") for i in range(40)])
    start = threading.Barrier(24)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            start.wait(30)
            for j in range(5):
                k.taskboard.get(f"t{(i + j) % 40}")
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert 1 <= store.made <= 3


def test_the_default_bound_is_16() -> None:
    assert Kernel(MemoryBackend()).max_connections == 16
    with pytest.raises(ValueError):
        Kernel(MemoryBackend(), max_connections=0)


def test_a_dropped_kernel_keeps_no_worker_alive() -> None:
    # The host functions find workers through a process-wide map: it must
    # not be what keeps a dropped kernel's instances and connections alive.
    k = Kernel(MemoryBackend(), clock=ManualClock(0))
    k.taskboard.seed([TaskSeed("a")])
    worker = k._pool.checkout()
    k._pool.checkin(worker)
    alive = weakref.ref(worker)
    del worker, k
    gc.collect()
    assert alive() is None


def test_a_dropped_kernel_closes_its_connections() -> None:
    store = Counting()
    k = Kernel(store, clock=ManualClock(0))
    k.taskboard.seed([TaskSeed("a")])
    del k
    gc.collect()
    assert store.made == 1 and store.closed == 1


def test_dropped_postgres_kernels_leave_no_connections(pg_backend: Any) -> None:
    import psycopg

    app = f"gak_leak_{uuid.uuid4().hex[:8]}"
    url = pg_with(schema=pg_backend.schema, application_name=app)

    def connections() -> int:
        with psycopg.connect(pg_dsn(), autocommit=True) as admin:
            row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app,)).fetchone()
            return int(row[0]) if row else -1

    for i in range(30):
        k = Kernel.open(url, clock=ManualClock(0))
        k.taskboard.seed([TaskSeed(f"t{i}")])
        del k
    gc.collect()
    assert connections() == 0  # was 30: every dropped kernel kept its connection
    kept = Kernel.open(url, clock=ManualClock(0))
    kept.taskboard.get("t0")
    assert connections() == 1  # the count sees a live kernel's connection
    kept.close()
