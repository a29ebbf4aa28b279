"""The calling convention: conflicts re-run the whole call, failures roll
back, a trap costs one instance (never the process), randomness is fresh
after fork."""

from __future__ import annotations

import os
from typing import Any, Optional

import pytest

from gak import Action, Granted, Kernel, ManualClock, StorageError, TaskSeed
from gak.stores.base import StoreConflict, StoreFailure
from gak.stores.memory import MemoryBackend, MemorySession


class Faulty(MemoryBackend):
    """A memory store whose sessions misbehave on demand."""

    def __init__(self) -> None:
        super().__init__()
        self.conflicts = 0  # raise StoreConflict on the next N puts
        self.fail_puts = False
        self.garbage = False  # `get` answers a non-string: a host-side defect
        self.begins = 0

    def session(self) -> MemorySession:
        backend = self

        class S(MemorySession):
            def begin(self) -> None:
                backend.begins += 1
                super().begin()

            def put(self, table: str, key: str, value: str) -> None:
                if backend.conflicts:
                    backend.conflicts -= 1
                    raise StoreConflict("injected conflict")
                if backend.fail_puts:
                    raise StoreFailure("injected failure")
                super().put(table, key, value)

            def get(self, table: str, key: str) -> Optional[str]:
                if backend.garbage:
                    return 42  # type: ignore[return-value]
                return super().get(table, key)

        return S(self)


def test_conflict_reruns_the_whole_call() -> None:
    store = Faulty()
    k = Kernel(store, clock=ManualClock(0))
    k.taskboard.seed([TaskSeed("a")])
    store.conflicts, store.begins = 2, 0
    t = k.taskboard.claim("a", "w", 100)
    assert store.begins == 3  # two rolled-back attempts, then the decision
    assert t.fence == 1  # the re-runs were fresh decisions, not partial ones


def test_persistent_conflicts_give_up_with_storage() -> None:
    store = Faulty()
    k = Kernel(store, clock=ManualClock(0))
    store.conflicts = 10**6
    with pytest.raises(StorageError):
        k.taskboard.seed([TaskSeed("a")])
    store.conflicts = 0
    assert k.taskboard.list(limit=10).items == []


def test_failure_rolls_back_and_is_storage() -> None:
    store = Faulty()
    k = Kernel(store, clock=ManualClock(0))
    store.fail_puts = True
    with pytest.raises(StorageError):
        k.taskboard.seed([TaskSeed("a"), TaskSeed("b")])
    store.fail_puts = False
    assert store.dump() == {}


def test_a_trap_costs_one_instance_not_the_kernel() -> None:
    store = Faulty()
    k = Kernel(store, clock=ManualClock(0))
    k.taskboard.seed([TaskSeed("a")])
    store.garbage = True
    with pytest.raises(StorageError, match="trapped"):
        k.taskboard.claim("a", "w", 100)
    store.garbage = False
    assert k.taskboard.claim("a", "w", 100).fence == 1  # a fresh instance, nothing written before


class BrokenClock:
    def __init__(self, value: Any) -> None:
        self.value = value

    def now(self) -> Any:
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


@pytest.mark.parametrize("reading", [1 << 53, -5, 1.5, RuntimeError("no time")])
def test_a_broken_clock_fails_the_call(reading: Any) -> None:
    k = Kernel(MemoryBackend(), clock=BrokenClock(reading))  # type: ignore[arg-type]
    with pytest.raises(StorageError):
        k.sideeffect.acquire(Action("k", "r"), 100)


def test_holders_differ_after_fork() -> None:
    # wasi:random is a CSPRNG seeded per instance; a forked child that reused
    # the parent's instance would mint the parent's next token.
    k = Kernel(MemoryBackend(), clock=ManualClock(0))
    k.sideeffect.acquire(Action("warm", "up"), 100)  # the parent has a worker now
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            g = k.sideeffect.acquire(Action("k", "r"), 100)
            os.write(w, g.lease.holder.encode() if isinstance(g, Granted) else b"?")
        finally:
            os._exit(0)
    os.close(w)
    child = os.read(r, 64).decode()
    os.waitpid(pid, 0)
    g = k.sideeffect.acquire(Action("k", "r"), 100)
    assert isinstance(g, Granted)
    assert len(child) == 32 and child != g.lease.holder
