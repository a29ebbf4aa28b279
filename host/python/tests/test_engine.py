"""The calling convention: conflicts re-run the whole call, failures roll
back, a trap costs one instance (never the process), randomness is fresh
after fork."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import pytest

from gak import Action, Granted, Kernel, ManualClock, OpenError, StorageError, TaskSeed, _abi, _engine
from gak.conformance.scripted import ScriptedBackend
from gak.stores.base import Answers, Change, Key, Range, StoreConflict, StoreFailure
from gak.stores.memory import MemoryBackend, MemorySession

GOLDEN_0_2 = Path(__file__).resolve().parents[3] / "tests" / "golden" / "gak-0.2.0.wasm"


class Faulty(MemoryBackend):
    """A memory store whose sessions misbehave on demand."""

    def __init__(self) -> None:
        super().__init__()
        self.conflicts = 0  # raise StoreConflict on the next N write sets
        self.fail_writes = False
        self.garbage = False  # `read` answers a non-string: a host-side defect
        self.begins = 0

    def session(self) -> MemorySession:
        backend = self

        class S(MemorySession):
            def begin(self) -> None:
                backend.begins += 1
                super().begin()

            def write(self, changes: Sequence[Change]) -> None:
                if backend.conflicts:
                    backend.conflicts -= 1
                    raise StoreConflict("injected conflict")
                if backend.fail_writes:
                    raise StoreFailure("injected failure")
                super().write(changes)

            def read(self, keys: Sequence[Key], ranges: Sequence[Range], clock: bool = False) -> Answers:
                if backend.garbage:
                    return [42] * len(keys), [[]] * len(ranges), None  # type: ignore[list-item]
                return super().read(keys, ranges, clock)

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
    store.fail_writes = True
    with pytest.raises(StorageError):
        k.taskboard.seed([TaskSeed("a"), TaskSeed("b")])
    store.fail_writes = False
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
    """Reads ``value`` (an exception: raises it)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def now(self) -> Any:
        if isinstance(self.value, BaseException):
            raise self.value
        return self.value


BROKEN = [1 << 53, -5, 1.5, "1000", None, RuntimeError("no time"), StoreFailure("no time")]


@pytest.mark.parametrize("reading", BROKEN)
def test_a_broken_clock_fails_the_call_and_writes_nothing(reading: Any) -> None:
    # The clock is read in `store.read`, after the reads: its failure fails
    # that read, the component ends the call with storage, nothing is written.
    clock = BrokenClock(1_000)
    store = MemoryBackend()
    k = Kernel(store, clock=clock)  # type: ignore[arg-type]
    k.taskboard.seed([TaskSeed("a")])
    before = store.dump()
    clock.value = reading
    with pytest.raises(StorageError):
        k.taskboard.claim("a", "w", 100)
    with pytest.raises(StorageError):
        k.sideeffect.acquire(Action("k", "r"), 100)
    assert store.dump() == before
    clock.value = 2_000
    assert k.taskboard.claim("a", "w", 100).fence == 1  # the kernel (and its instance) carry on


class DatabaseClock(ScriptedBackend):
    """A binding with a database clock (as PostgreSQL's ``clock=db``):
    ``reading`` is what its reads answer when the clock is asked for (an
    exception: raised by that read)."""

    def __init__(self) -> None:
        super().__init__()
        self.reading: Any = 5_000
        self.conflicts = 0  # raise StoreConflict from the next N clock reads

    def session(self) -> Any:
        backend = self
        base = super().session()

        class S(type(base)):  # type: ignore[misc]
            def read(self, keys: Sequence[Key], ranges: Sequence[Range], clock: bool = False) -> Answers:
                values, pages, _ = super().read(keys, ranges, clock)
                if not clock:
                    return values, pages, None
                if backend.conflicts:
                    backend.conflicts -= 1
                    raise StoreConflict("the database clock: serialization failure")
                if isinstance(backend.reading, BaseException):
                    raise backend.reading
                return values, pages, backend.reading

        return S(self)


def test_the_database_clock_counts_over_the_kernels() -> None:
    store = DatabaseClock()
    k = Kernel(store, clock=ManualClock(0))
    k.taskboard.seed([TaskSeed("a")])
    assert k.taskboard.claim("a", "w", 100).until == 5_100


@pytest.mark.parametrize("reading", [1 << 53, -1, 2.5, StoreFailure("the server's clock is gone")])
def test_a_broken_database_clock_fails_the_call_and_writes_nothing(reading: Any) -> None:
    store = DatabaseClock()
    k = Kernel(store, clock=ManualClock(0))
    k.taskboard.seed([TaskSeed("a")])
    before = store.dump()
    store.reading = reading
    store.script.arm([])
    with pytest.raises(StorageError):
        k.taskboard.claim("a", "w", 100)
    assert store.dump() == before
    assert store.script.counts() == {"begin": 1, "commit": 0, "rollback": 1}


def test_a_database_clock_conflict_reruns_the_call() -> None:
    store = DatabaseClock()
    k = Kernel(store, clock=ManualClock(0))
    k.taskboard.seed([TaskSeed("a")])
    store.conflicts = 2
    store.script.arm([])
    assert k.taskboard.claim("a", "w", 100).fence == 1
    assert store.script.counts() == {"begin": 3, "commit": 1, "rollback": 2}


class _Worker:
    """What `store.read` needs of a worker: a session, a clock, flags."""

    def __init__(self, clock: Any = None) -> None:
        self.session = MemoryBackend().session()
        self.clock = clock or ManualClock(7)
        self.conflict = False
        self.failure: Any = None


def _read(worker: _Worker, reads: Any) -> Any:
    ctx = 1 << 62  # no store context lives there
    _engine._register(ctx, worker)  # type: ignore[arg-type]
    try:
        worker.session.begin()
        try:
            return _engine._read(ctx, reads)
        finally:
            worker.session.rollback()
    finally:
        _engine._unregister(ctx)


def test_read_hands_over_fresh_entropy_of_the_size_asked() -> None:
    w = _Worker()
    drawn = [_read(w, ([], [], False, 16)) for _ in range(3)]
    assert all(ok and len(a[3]) == 16 for ok, a in drawn)
    assert len({a[3] for _, a in drawn}) == 3  # fresh for every call
    assert _read(w, ([], [], False, 64))[1][3] != bytes(64)
    assert _read(w, ([], [], True, 0)) == (True, ([], [], 7, b""))
    ok, err = _read(w, ([("tasks", "t")], [], False, 65))
    assert not ok and err[0] == "failure" and "65" in err[1]


def test_read_answers_keys_ranges_and_the_clock_in_order() -> None:
    w = _Worker()
    w.session.begin()
    w.session.write([("tasks", "a", "1"), ("tasks", "b", "2"), ("indexes", "x/1", "3")])
    w.session.commit()
    ok, (values, pages, now, entropy) = _read(
        w, ([("tasks", "b"), ("tasks", "zz"), ("tasks", "a")], [("indexes", "x/", None, 5), ("tasks", "", "a", 1)], True, 0)
    )
    assert ok and values == ["2", None, "1"] and now == 7 and entropy == b""
    assert pages == [[("x/1", "3")], [("b", "2")]]


def test_a_claim_or_an_acquire_is_one_read_and_one_write() -> None:
    k = Kernel(MemoryBackend(), clock=ManualClock(0))
    k.taskboard.seed([TaskSeed("a")])
    k.sideeffect.acquire(Action("warm", "up"), 100)  # instance made, hash seeds drawn
    with _abi.counting() as crossings:
        k.taskboard.claim("a", "w", 100)
    assert dict(crossings) == {"store#read": 1, "store#write": 1}
    with _abi.counting() as crossings:
        g = k.sideeffect.acquire(Action("k", "r"), 100)
    assert isinstance(g, Granted)
    assert dict(crossings) == {"store#read": 1, "store#write": 1}
    with _abi.counting() as crossings:
        k.sideeffect.acquire(Action("k", "r"), 100)  # in flight: answered from one read, nothing written
    assert dict(crossings) == {"store#read": 1}


def test_a_component_of_another_contract_version_is_refused() -> None:
    if not GOLDEN_0_2.is_file():
        pytest.skip(f"{GOLDEN_0_2} is not here (outside the repository)")
    with pytest.raises(OpenError) as e:
        Kernel(MemoryBackend(), component=GOLDEN_0_2)
    message = str(e.value)
    assert "is gak:kernel@0.2.0" in message and "this host implements gak:kernel@0.4.0" in message


def test_the_contract_is_the_wit_packages_version() -> None:
    world = Path(__file__).resolve().parents[3] / "wit" / "world.wit"
    if not world.is_file():
        pytest.skip(f"{world} is not here (outside the repository)")
    assert f"package {_engine.CONTRACT};" in world.read_text(encoding="utf-8")


def test_a_file_that_is_no_gak_component_is_refused(tmp_path: Path) -> None:
    # A component of the right shape but no gak:kernel interface: the
    # smallest component there is.
    empty = tmp_path / "empty.wasm"
    empty.write_bytes(b"\x00asm\x0d\x00\x01\x00")
    with pytest.raises(OpenError, match="not a gak:kernel component; this host implements gak:kernel@0.4.0"):
        Kernel(MemoryBackend(), component=empty)


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
