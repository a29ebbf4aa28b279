"""gak.Worker beyond the shared cases (tests/host-protocol/workers.json,
replayed by test_host_protocol.py): back-off and reasons as the Rust
worker computes them, concurrency, renewals, stops from outside and from
a SystemExit, and the storage-error policy of ``run``."""

from __future__ import annotations

import threading
import time

import pytest

from gak import Backoff, Kernel, ManualClock, StorageError, TaskSeed, TaskState, Worked, Worker
from gak.conformance.scripted import ScriptedBackend
from gak.worker import MAX_REASON, reason, unit


def test_backoff_doubles_is_capped_and_jitter_only_shortens() -> None:
    b = Backoff(base=1_000, max=5_000, jitter=0.0)
    assert [b.delay(n, 0.7) for n in range(1, 6)] == [1_000, 2_000, 4_000, 5_000, 5_000]
    assert b.delay(0, 0.0) == 1_000
    assert b.delay(2**32 - 1, 0.0) == 5_000
    j = Backoff(base=1_000, max=5_000, jitter=0.5)
    assert j.delay(1, 0.0) == 1_000
    assert j.delay(1, 0.5) == 750
    assert 2_000 <= j.delay(3, 0.999_999) <= 4_000
    huge = Backoff(base=2**64 - 1, max=2**64 - 1, jitter=0.0)
    assert huge.delay(60, 0.0) == 365 * 24 * 60 * 60 * 1000  # fail's one-year bound
    assert Backoff() == Backoff(1_000, 3_600_000, 0.2)


def test_reasons_are_cut_at_a_character_boundary_without_nul() -> None:
    assert reason("a\0b") == "a\ufffdb"
    assert reason("é" * 3_000) == "é" * 2_048
    assert len(reason("x" * 5_000).encode()) == MAX_REASON
    assert len(reason("\0" * 2_000).encode()) == 4_095
    assert reason("lone \ud800 surrogate") == "lone \ufffd surrogate"
    assert reason("\U0001f600" * 1_025) == "\U0001f600" * 1_024
    assert reason("") == ""


def test_unit_draws_stay_in_range() -> None:
    draws = [unit() for _ in range(1_000)]
    assert all(0.0 <= u < 1.0 for u in draws)
    assert len(set(draws)) > 990


def test_defaults_follow_the_contract(mem: Kernel) -> None:
    w = Worker(mem, "w")
    assert (w.batch, w.ttl, w.concurrency, w.idle, w.backoff) == (10, 30_000, 10, 1.0, Backoff())
    assert Worker(mem, "w", batch=4).concurrency == 4
    assert Worker(mem, "w", batch=4, concurrency=2).concurrency == 2


def test_at_most_concurrency_handlers_run_at_once_started_in_batch_order(mem: Kernel) -> None:
    mem.taskboard.seed([TaskSeed(f"t{i}") for i in range(6)])
    lock = threading.Lock()
    running, most, started = [0], [0], []

    def handler(task: object) -> None:
        with lock:
            started.append(task.id)  # type: ignore[attr-defined]
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1

    worked = Worker(mem, "w", batch=6, concurrency=2).run_until_idle(handler)
    assert worked == Worked(claimed=6, completed=6)
    assert most[0] == 2
    assert started[:2] in (["t0", "t1"], ["t1", "t0"]) and sorted(started) == [f"t{i}" for i in range(6)]


def test_a_running_handlers_claim_is_renewed(mem: Kernel, clock: ManualClock) -> None:
    mem.taskboard.seed([TaskSeed("slow")])
    seen: list[int] = []

    def handler(task: object) -> None:
        # The manual clock stands still: each renewal (every 30 ms of real
        # time) sets until = now + ttl again; move the clock between them.
        for _ in range(3):
            clock.advance(50)
            deadline = time.monotonic() + 5
            while mem.taskboard.get("slow").until != clock.now() + 90 and time.monotonic() < deadline:
                time.sleep(0.005)
            seen.append(mem.taskboard.get("slow").until or 0)

    worked = Worker(mem, "w", ttl=90).run_until_idle(handler)
    assert worked == Worked(claimed=1, completed=1)
    assert seen == [1_000 + 50 * n + 90 for n in (1, 2, 3)]


def test_a_stop_from_another_thread_ends_run(mem: Kernel) -> None:
    mem.taskboard.seed([TaskSeed("a"), TaskSeed("b")])
    w = Worker(mem, "w", idle=30.0)  # the stop cuts the idle wait short
    out: list[Worked] = []
    t = threading.Thread(target=lambda: out.append(w.run(lambda task: None)))
    t.start()
    deadline = time.monotonic() + 10
    while mem.taskboard.get("b").state is not TaskState.DONE and time.monotonic() < deadline:
        time.sleep(0.01)
    w.stop()
    t.join(10)
    assert not t.is_alive() and w.stopped
    assert out == [Worked(claimed=2, completed=2)]
    assert w.run(lambda task: None) == Worked()  # a stopped worker stays stopped


def test_a_system_exit_fails_its_task_stops_the_worker_and_is_raised(mem: Kernel) -> None:
    mem.taskboard.seed([TaskSeed("a"), TaskSeed("b"), TaskSeed("c")])

    def handler(task: object) -> None:
        if task.id == "a":  # type: ignore[attr-defined]
            raise SystemExit("leaving")

    w = Worker(mem, "w", concurrency=1, backoff=Backoff(1_000, 1_000, 0.0))
    with pytest.raises(SystemExit):
        w.run_until_idle(handler)
    assert w.stopped
    a = mem.taskboard.get("a")
    assert (a.state, a.last_error, a.not_before) == (TaskState.FAILED, "leaving", 2_000)
    assert {mem.taskboard.get(i).state for i in "bc"} <= {TaskState.DONE, TaskState.OPEN}


def test_a_failure_whose_claim_was_lost_is_counted_lost(mem: Kernel, clock: ManualClock) -> None:
    mem.taskboard.seed([TaskSeed("a")])

    def handler(task: object) -> None:
        clock.advance(1_000)
        mem.taskboard.claim("a", "thief", 1_000)
        raise RuntimeError("too late")

    assert Worker(mem, "w", ttl=1_000).run_until_idle(handler) == Worked(claimed=1, lost=1)
    assert mem.taskboard.get("a").owner == "thief"


def test_run_goes_on_after_a_storage_error_and_run_until_idle_raises_it() -> None:
    backend = ScriptedBackend()
    with Kernel(backend, clock=ManualClock(1_000)) as kernel:
        kernel.taskboard.seed([TaskSeed("a")])
        backend.script.arm([{"on": "begin", "answer": "failure"}])  # the next claim-batch fails
        with pytest.raises(StorageError):
            Worker(kernel, "w").run_until_idle(lambda task: None)
        backend.script.arm([{"on": "begin", "answer": "failure"}])
        w = Worker(kernel, "w", idle=0.01)
        worked = w.run(lambda task: w.stop())
        assert worked == Worked(claimed=1, completed=1)


def test_a_bad_option_ends_the_loop(mem: Kernel) -> None:
    from gak import Refused

    mem.taskboard.seed([TaskSeed("a")])
    for bad in (Worker(mem, "w", batch=0), Worker(mem, "w", ttl=0), Worker(mem, "w", batch=1_001)):
        with pytest.raises(Refused) as e:
            bad.run(lambda task: None)
        assert e.value.code == "invalid-input"
