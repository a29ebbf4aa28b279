"""The side-effect runner's contract (HOSTS.md, "The side-effect runner")
beyond the shared cases in runner.json: renewals while the body runs, what
the heartbeat tells the body, how failures are reported; and the retry
loop's back-off (rule 3)."""

from __future__ import annotations

import time

import pytest

from gak import (
    Action,
    Applied,
    BodyFailed,
    Granted,
    Heartbeat,
    Kernel,
    KeyState,
    ManualClock,
    NotApplied,
    Refused,
    Runner,
    SystemClock,
    Uncertain,
)
from gak.conformance.scripted import ScriptedBackend
from gak.kernel import MAX_ATTEMPTS, backoff_delay
from gak.stores.memory import MemoryBackend


def test_a_failing_body_is_body_failed_with_its_error_as_cause() -> None:
    k = Kernel(MemoryBackend(), clock=ManualClock(1_000))
    a = Action("pay", "bank")

    def fails(lease: object) -> bytes:
        raise TimeoutError("no answer")

    with pytest.raises(BodyFailed) as e:
        Runner(k, 30_000).run(a, fails)
    assert isinstance(e.value.__cause__, TimeoutError) and e.value.error is e.value.__cause__
    assert e.value.code == "body-failed" and e.value.action == a
    info = k.sideeffect.get("pay")
    assert (info.state, info.reason) == (KeyState.UNCERTAIN, "body failed")
    assert isinstance(k.sideeffect.acquire(Action("other", "bank"), 100), Granted)  # resource released


def test_an_interrupt_in_the_body_is_not_wrapped() -> None:
    k = Kernel(MemoryBackend(), clock=ManualClock(1_000))

    def interrupted(lease: object) -> bytes:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Runner(k, 30_000).run(Action("k", "r"), interrupted)
    assert k.sideeffect.get("k").state == KeyState.UNCERTAIN  # may have happened: still recorded


def test_not_applied_is_re_raised_and_the_key_may_run_again() -> None:
    k = Kernel(MemoryBackend(), clock=ManualClock(1_000))
    r = Runner(k, 30_000)

    def refused(lease: object) -> bytes:
        raise NotApplied("rejected before sending")

    with pytest.raises(NotApplied):
        r.run(Action("k", "r"), refused)
    assert r.run(Action("k", "r"), lambda lease: b"ok") == Applied(b"ok")


def test_a_body_longer_than_its_ttl_stays_in_flight_and_completes() -> None:
    # Without renewals the intent expires while the body runs: the key turns
    # uncertain under a running body and its complete is refused.
    k = Kernel(MemoryBackend(), clock=SystemClock())
    a = Action("slow", "r")
    seen = []

    def slow(lease: object) -> bytes:
        time.sleep(0.5)  # the scenario itself: longer than the 150 ms ttl
        seen.append(k.sideeffect.get("slow").state)
        return b"done"

    assert Runner(k, 150).run(a, slow) == Applied(b"done")
    assert seen == [KeyState.IN_FLIGHT]
    assert k.sideeffect.get("slow").state == KeyState.COMPLETED


def test_the_heartbeat_follows_the_renewals_and_the_runner_completes_with_the_last_lease() -> None:
    k = Kernel(MemoryBackend(), clock=SystemClock())
    leases = []

    def body(lease: object, hb: Heartbeat) -> bytes:
        leases.append(hb.lease)
        while hb.renewals < 2 and hb.lost is None:
            assert hb.wait_changed(10)
        hb.check()
        leases.append(hb.lease)
        return b"ok"

    assert Runner(k, 300).run_with_heartbeat(Action("k", "r"), body) == Applied(b"ok")
    first, last = leases
    assert last.until > first.until and (last.fence, last.holder) == (first.fence, first.holder)


def test_a_lost_lease_is_reported_at_once_and_check_raises() -> None:
    k = Kernel(MemoryBackend(), clock=SystemClock())
    a = Action("k", "r")
    caught = []

    def body(lease: object, hb: Heartbeat) -> bytes:
        k.sideeffect.mark_uncertain(a, hb.lease, "taken from under me")
        while hb.lost is None:
            assert hb.wait_changed(10)
        assert not hb.wait_changed(0.01)  # lost and seen: nothing changes any more
        try:
            hb.check()
        except Refused as e:
            caught.append(e.code)
            raise
        return b"never"

    with pytest.raises(BodyFailed):
        Runner(k, 300).run_with_heartbeat(a, body)
    assert caught == ["lease-lost"]


def test_a_renewal_that_fails_with_storage_is_retried() -> None:
    store = ScriptedBackend()
    k = Kernel(store, clock=SystemClock())
    renewals = []

    def body(lease: object, hb: Heartbeat) -> bytes:
        # The next transaction (the first renewal) fails; the second renewal,
        # a tick later and still inside the ttl, succeeds.
        store.script.arm([{"on": "begin", "answer": "failure"}])
        while hb.renewals < 1 and hb.lost is None:
            assert hb.wait_changed(10)
        renewals.append((store.script.begin, hb.lost))
        return b"ok"

    assert Runner(k, 900).run_with_heartbeat(Action("k", "r"), body) == Applied(b"ok")
    assert renewals == [(2, None)]  # one failed begin, then the renewal


def test_wait_changed_times_out_when_nothing_changes() -> None:
    k = Kernel(MemoryBackend(), clock=ManualClock(1_000))
    waited = []
    Runner(k, 60_000).run_with_heartbeat(Action("k", "r"), lambda lease, hb: waited.append(hb.wait_changed(0.01)) or b"")
    assert waited == [False]


def test_the_runner_returns_non_granted_answers_without_calling_the_body() -> None:
    k = Kernel(MemoryBackend(), clock=ManualClock(1_000))
    r = Runner(k, 100)
    calls = []

    def body(lease: object) -> bytes:
        calls.append(lease)
        raise RuntimeError("boom")

    with pytest.raises(BodyFailed):
        r.run(Action("k", "r"), body)
    assert r.run(Action("k", "r"), body) == Uncertain("body failed")
    assert len(calls) == 1


def test_backoff_is_exponential_with_jitter_from_1ms_to_half_a_second() -> None:
    # The step doubles from 1 ms and stops at 500 ms; a pause is half the
    # step plus up to the other half, as in every host (HOSTS.md rule 3).
    assert MAX_ATTEMPTS == 10
    for attempt in range(1, 40):
        step = min(1 << (attempt - 1), 500)
        for _ in range(50):
            d = backoff_delay(attempt) * 1000
            assert step / 2 <= d <= step
    assert 0.0005 <= backoff_delay(1) <= 0.001 and backoff_delay(30) <= 0.5
