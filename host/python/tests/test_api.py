"""The typed API on every binding: answers, refusals and "refusals change nothing"."""

from __future__ import annotations

import pytest

from gak import (
    Action,
    Applied,
    BodyFailed,
    Cleared,
    Committer,
    Contended,
    Granted,
    InFlight,
    Kernel,
    KeyState,
    ManualClock,
    NotApplied,
    Outcome,
    Refused,
    Replayed,
    Resolution,
    RetrySafety,
    Runner,
    Snapshot,
    Status,
    StepDef,
    TaskSeed,
    TaskState,
    Uncertain,
)


def test_claim_release_and_lease_lost(kernel: Kernel) -> None:
    board = kernel.taskboard
    board.seed([TaskSeed("a", title="A"), TaskSeed("b", deps=("a",))])
    t = board.claim("a", "w1", 100)
    assert (t.state, t.owner, t.fence, t.until) == (TaskState.CLAIMED, "w1", 1, 1_100)
    assert t.token is not None and len(t.token) == 32
    with pytest.raises(Refused) as e:
        board.claim("a", "w2", 100)
    assert e.value.code == "taken"
    with pytest.raises(Refused) as e:
        board.claim("b", "w2", 100)
    assert e.value.code == "deps-pending"
    with pytest.raises(Refused) as e:
        board.release("a", "0" * 32)
    assert e.value.code == "lease-lost"
    assert board.get("a").token is None  # tokens are capabilities: never listed
    board.complete("a", t.token)
    assert board.get("a").state == TaskState.DONE
    assert board.claim("b", "w2", 100).fence == 1


def test_expired_claim_is_taken_over(kernel: Kernel, clock: ManualClock) -> None:
    kernel.taskboard.seed([TaskSeed("a")])
    first = kernel.taskboard.claim("a", "w1", 100)
    clock.advance(100)  # expired from now >= until
    second = kernel.taskboard.claim("a", "w2", 100)
    assert second.fence == first.fence + 1
    with pytest.raises(Refused) as e:
        kernel.taskboard.release("a", first.token or "")
    assert e.value.code == "lease-lost"


def test_bad_input_is_refused_and_writes_nothing(kernel: Kernel) -> None:
    kernel.taskboard.seed([TaskSeed("a")])
    before = kernel.taskboard.list(limit=10)
    for ttl in (-1, 0, 1 << 64, (1 << 53) + 1):
        with pytest.raises(Refused) as e:
            kernel.taskboard.claim("a", "w", ttl)
        assert e.value.code == "invalid-input"
    with pytest.raises(Refused) as e:
        kernel.taskboard.claim("a\ud800", "w", 10)  # a lone surrogate is not text
    assert e.value.code == "invalid-input"
    with pytest.raises(Refused) as e:
        kernel.taskboard.seed([TaskSeed("x"), TaskSeed("x")])
    assert e.value.code == "invalid-input"
    with pytest.raises(Refused) as e:
        kernel.taskboard.list(state="nope")
    assert e.value.code == "invalid-input"
    with pytest.raises(TypeError):
        kernel.taskboard.claim("a", "w", True)  # type: ignore[arg-type]
    assert kernel.taskboard.list(limit=10) == before


def test_keys_are_data_not_sql(kernel: Kernel) -> None:
    evil = "x'); DROP TABLE gak_tasks; --\"\\"
    kernel.taskboard.seed([TaskSeed(evil, title=evil)])
    assert kernel.taskboard.get(evil).title == evil
    assert [t.id for t in kernel.taskboard.list(limit=10).items] == [evil]


def test_list_pages_in_byte_order(kernel: Kernel) -> None:
    ids = ["b", "a", "é", "z", "\U0001f600", "aa"]
    kernel.taskboard.seed([TaskSeed(i) for i in ids])
    got, after = [], None
    while True:
        page = kernel.taskboard.list(after=after, limit=2)
        got += [t.id for t in page.items]
        if page.next is None:
            break
        after = page.next
    assert got == sorted(ids, key=lambda s: s.encode("utf-8"))


def test_claim_next_takes_the_first_seeded_ready_task(kernel: Kernel) -> None:
    kernel.taskboard.seed([TaskSeed("late", deps=("first",)), TaskSeed("first"), TaskSeed("other")])
    assert kernel.taskboard.claim_next("w", 100).id == "first"  # type: ignore[union-attr]
    assert kernel.taskboard.claim_next("w", 100).id == "other"  # type: ignore[union-attr]
    assert kernel.taskboard.claim_next("w", 100) is None


def test_sideeffect_decisions(kernel: Kernel, clock: ManualClock) -> None:
    gate = kernel.sideeffect
    a = Action("k1", "r1", fingerprint="f1")
    g = gate.acquire(a, 100)
    assert isinstance(g, Granted) and g.lease.fence == 1
    assert isinstance(gate.acquire(a, 100), InFlight)
    assert isinstance(gate.acquire(Action("k2", "r1"), 100), Contended)
    with pytest.raises(Refused) as e:
        gate.acquire(Action("k1", "r1", fingerprint="other"), 100)
    assert e.value.code == "key-reused"
    assert gate.complete(a, g.lease, b"\x00\xffok") == b"\x00\xffok"
    assert gate.acquire(a, 100) == Replayed(b"\x00\xffok")
    assert gate.get("k1").state == KeyState.COMPLETED
    # an expired intent is uncertain, never re-granted
    b = Action("k3", "r3", RetrySafety.UNSAFE)
    gb = gate.acquire(b, 100)
    assert isinstance(gb, Granted)
    clock.advance(100)
    assert gate.acquire(b, 100) == Uncertain("intent-expired")
    with pytest.raises(Refused) as e:
        gate.resolve_uncertain(b, Resolution(applied=False))
    assert e.value.code == "unsafe-not-retryable"
    claim = gate.begin_reconcile(b, 100)
    assert gate.resolve_uncertain(b, Resolution(False, force_retryable=True, claim=claim.claim)) == Cleared()
    assert isinstance(gate.acquire(b, 100), Granted)


def test_large_results_round_trip(kernel: Kernel) -> None:
    a = Action("big", "rb")
    g = kernel.sideeffect.acquire(a, 1000)
    assert isinstance(g, Granted)
    with pytest.raises(Refused) as e:
        kernel.sideeffect.complete(a, g.lease, b"x" * (1 << 20) + b"y")
    assert e.value.code == "invalid-input"
    payload = bytes(range(256)) * 4096  # exactly 1 MiB
    assert kernel.sideeffect.complete(a, g.lease, payload) == payload
    assert kernel.sideeffect.acquire(a, 10) == Replayed(payload)


def test_runner(kernel: Kernel) -> None:
    runner = Runner(kernel, 1000)
    calls: list[str] = []

    def body(lease: object) -> bytes:
        calls.append("x")
        return b"sent"

    a = Action("mail", "smtp")
    assert runner.run(a, body) == Applied(b"sent")
    assert runner.run(a, body) == Replayed(b"sent")
    assert calls == ["x"]

    def fails(lease: object) -> bytes:
        raise TimeoutError("no answer")

    f = Action("pay", "bank")
    with pytest.raises(BodyFailed) as failed:
        runner.run(f, fails)
    assert isinstance(failed.value.__cause__, TimeoutError)
    assert runner.run(f, body) == Uncertain("body failed")

    def refused(lease: object) -> bytes:
        raise NotApplied("rejected before sending")

    n = Action("sms", "gw")
    with pytest.raises(NotApplied):
        runner.run(n, refused)
    assert runner.run(n, body) == Applied(b"sent")


def test_committer_and_gate(kernel: Kernel) -> None:
    kernel.taskboard.seed([TaskSeed("run-1")])
    claim = kernel.taskboard.claim("run-1", "a", 100)
    c = Committer.resume(kernel, "run-1", claim.fence)
    c.step_done("s1")
    c.step_done("s2")
    snap = kernel.checkpoint.load("run-1")
    assert (snap.seq, snap.done, snap.fence) == (2, ["s1", "s2"], claim.fence)
    plan = kernel.checkpoint.build_plan([StepDef("s1"), StepDef("s2", ("s1",)), StepDef("s3", ("s2",))], snap)
    assert (plan.skip, plan.run) == (["s1", "s2"], ["s3"])
    zombie = Snapshot("run-1", 9, done=["s1"], fence=claim.fence - 1)
    with pytest.raises(Refused) as e:
        kernel.checkpoint.save_if_newer(zombie)
    assert e.value.code == "fence-stale"
    out = kernel.commitgate.commit("run-1", None, claim.fence, Outcome(Status.SUCCEEDED, b"ok"))
    assert out == Outcome(Status.SUCCEEDED, b"ok")
    with pytest.raises(Refused) as e:
        c.step_done("s3")
    assert e.value.code == "terminal"
    with pytest.raises(Refused) as e:
        kernel.checkpoint.load("never")
    assert e.value.code == "not-found"


def test_write_fenced(kernel: Kernel) -> None:
    gate = kernel.sideeffect

    def put(value: str):  # type: ignore[no-untyped-def]
        return lambda down: down.put("acct", value)

    gate.write_fenced("ledger", 3, put("three"))
    gate.write_fenced("ledger", 3, put("three again"))  # equal is allowed
    with pytest.raises(Refused) as e:
        gate.write_fenced("ledger", 2, put("stale"))
    assert e.value.code == "fence-stale"

    def boom(down):  # type: ignore[no-untyped-def]
        down.put("acct", "half")
        raise ValueError("downstream said no")

    with pytest.raises(Refused) as e:
        gate.write_fenced("ledger", 9, boom)
    assert e.value.code == "write-failed"
    assert isinstance(e.value.__cause__, ValueError)
    assert gate.sink_seen("ledger") == 3  # the failed body's fence rolled back
    assert kernel.with_downstream(lambda d: d.get("acct")) == "three again"


def test_prune_and_dry_run(kernel: Kernel, clock: ManualClock) -> None:
    a = Action("k", "r")
    g = kernel.sideeffect.acquire(a, 100)
    assert isinstance(g, Granted)
    kernel.sideeffect.complete(a, g.lease, b"r")
    clock.advance(10)
    dry = kernel.retention.prune_dry_run(clock.now(), 10)
    assert dry.removed_keys == 1
    assert kernel.sideeffect.get("k").state == KeyState.COMPLETED  # dry run kept it
    assert kernel.retention.prune(clock.now(), 10).removed_keys == 1
    with pytest.raises(Refused) as e:
        kernel.sideeffect.get("k")
    assert e.value.code == "not-found"
