"""The job queue's calls (gak:kernel@0.4.0, SPEC 10) through the typed API,
on every binding: typed answers, the new refusals, and the task's new
fields. The rules themselves are the component's (and the vectors'
``taskboard-jobs.json``); this checks what the Python API makes of them."""

from __future__ import annotations

import pytest

from gak import (
    CODES,
    Completion,
    CompletionAnswer,
    CompletionResult,
    GroupInfo,
    Kernel,
    ManualClock,
    Refused,
    Task,
    TaskSeed,
    TaskState,
)


def _code(f: object) -> str:
    with pytest.raises(Refused) as e:
        f()  # type: ignore[operator]
    return e.value.code


def test_the_new_refusals_are_codes() -> None:
    assert {"not-due", "group-full", "not-dead"} <= CODES
    assert TaskState("dead") is TaskState.DEAD


def test_seed_takes_the_new_fields_and_tasks_show_them(kernel: Kernel) -> None:
    board = kernel.taskboard
    board.seed(
        [
            TaskSeed("a"),
            TaskSeed("b", title="B", priority=-7, not_before=5_000, max_attempts=3, group="g"),
        ]
    )
    a, b = board.get("a"), board.get("b")
    assert (a.priority, a.not_before, a.max_attempts, a.group, a.attempts, a.last_error) == (
        0,
        None,
        None,
        None,
        0,
        None,
    )
    assert (b.priority, b.not_before, b.max_attempts, b.group, b.attempts) == (-7, 5_000, 3, "g", 0)
    assert _code(lambda: board.claim("b", "w", 100)) == "not-due"
    for bad in (TaskSeed("x", priority=1 << 31), TaskSeed("x", priority=-(1 << 31) - 1), TaskSeed("x", max_attempts=0)):
        assert _code(lambda: board.seed([bad])) == "invalid-input"
    assert _code(lambda: board.get("x")) == "not-found"  # nothing written


def test_claim_batch_answers_tasks_in_claim_order(kernel: Kernel) -> None:
    board = kernel.taskboard
    board.seed([TaskSeed("low", priority=-1), TaskSeed("a"), TaskSeed("top", priority=9), TaskSeed("b")])
    got = board.claim_batch("w", 1_000, 3)
    assert isinstance(got, list) and all(isinstance(t, Task) for t in got)
    assert [t.id for t in got] == ["top", "a", "b"]
    assert all(t.state is TaskState.CLAIMED and t.owner == "w" and t.attempts == 1 for t in got)
    assert len({t.token for t in got}) == 3
    assert [t.id for t in board.claim_batch("w", 1_000, 10)] == ["low"]
    assert board.claim_batch("w", 1_000, 10) == []
    assert board.claim_next("w", 1_000) is None
    assert _code(lambda: board.claim_batch("w", 1_000, 0)) == "invalid-input"


def test_complete_batch_answers_each_item(kernel: Kernel) -> None:
    board = kernel.taskboard
    board.seed([TaskSeed("a"), TaskSeed("b")])
    a, b = board.claim_batch("w", 1_000, 2)
    out = board.complete_batch([Completion("a", a.token or ""), Completion("b", "0" * 32), Completion("zz", "0" * 32)])
    assert out == [
        CompletionResult("a", CompletionAnswer.COMPLETED),
        CompletionResult("b", CompletionAnswer.LEASE_LOST),
        CompletionResult("zz", CompletionAnswer.NOT_FOUND),
    ]
    assert isinstance(out[0].answer, CompletionAnswer)
    assert board.get("a").state is TaskState.DONE and board.get("b").state is TaskState.CLAIMED
    # Idempotent for the token that completed it; duplicates refuse the call.
    assert board.complete_batch([Completion("a", a.token or "")])[0].answer is CompletionAnswer.COMPLETED
    assert _code(lambda: board.complete_batch([Completion("b", b.token or "")] * 2)) == "invalid-input"
    assert _code(lambda: board.complete_batch([])) == "invalid-input"
    assert board.get("b").state is TaskState.CLAIMED


def test_fail_backs_off_then_dies_and_revive_brings_it_back(kernel: Kernel, clock: ManualClock) -> None:
    board = kernel.taskboard
    board.seed([TaskSeed("x", max_attempts=2)])
    t = board.claim("x", "w", 1_000)
    failed = board.fail("x", t.token or "", "boom", 500)
    assert (failed.state, failed.last_error, failed.not_before, failed.owner, failed.token) == (
        TaskState.FAILED,
        "boom",
        clock.now() + 500,
        None,
        None,
    )
    assert _code(lambda: board.claim("x", "w", 1_000)) == "not-due"
    # Failing again with the token that failed it answers the task as it is.
    assert board.fail("x", t.token or "", "again", 9) == failed
    clock.advance(500)
    t2 = board.claim_next("w", 1_000)
    assert t2 is not None and t2.attempts == 2
    dead = board.fail("x", t2.token or "", "boom again")
    assert dead.state is TaskState.DEAD and dead.attempts == 2
    assert _code(lambda: board.claim("x", "w", 1_000)) == "terminal"
    assert _code(lambda: board.revive("nope")) == "not-found"
    back = board.revive("x")
    assert (back.state, back.attempts, back.last_error, back.not_before) == (TaskState.OPEN, 0, None, None)
    assert back.fence == dead.fence
    assert _code(lambda: board.revive("x")) == "not-dead"
    assert _code(lambda: board.fail("x", "0" * 32, "late")) == "lease-lost"


def test_groups_limit_live_claims(kernel: Kernel, clock: ManualClock) -> None:
    board = kernel.taskboard
    assert _code(lambda: board.get_group("g")) == "not-found"
    board.set_group_limit("g", 1)
    assert board.get_group("g") == GroupInfo(limit=1, live=0)
    board.seed([TaskSeed("a", group="g"), TaskSeed("b", group="g"), TaskSeed("c")])
    got = board.claim_batch("w", 1_000, 10)
    assert [t.id for t in got] == ["a", "c"]
    assert board.get_group("g") == GroupInfo(1, 1)
    assert _code(lambda: board.claim("b", "w", 1_000)) == "group-full"
    board.set_group_limit("g", 2)
    assert board.claim("b", "w", 1_000).group == "g"
    assert board.get_group("g").live == 2
    board.set_group_limit("g", None)
    assert _code(lambda: board.get_group("g")) == "not-found"
    assert _code(lambda: board.set_group_limit("g", 0)) == "invalid-input"
