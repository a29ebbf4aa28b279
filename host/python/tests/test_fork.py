"""HOSTS.md rule 7 across fork(): children of one parent never share a token
(issue 17 item 1), a zombie's late ``complete`` is refused, and a child
forked while another thread is inside a SQLite call can write (item 7).

Every child ends with ``os._exit`` (never pytest's machinery) and reports
through a pipe; the parent bounds every wait.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import select
import signal
import threading
import time
from pathlib import Path
from typing import Callable, Optional

import pytest

from gak import Kernel, ManualClock, Refused, TaskSeed, _abi
from gak.stores.memory import MemoryBackend

#: The kernel a fork-mode pool's children inherit (set by the test).
_INHERITED: Optional[Kernel] = None


def _claim_in_child(i: int) -> str:
    assert _INHERITED is not None
    return _INHERITED.taskboard.claim(f"t{i}", f"w{os.getpid()}", 60_000).token or ""


def test_fork_pool_children_mint_distinct_tokens(tmp_path: Path) -> None:
    # The reproduction: a fork-mode Pool(4), 8 claims on a shared
    # SQLite file, after the parent made a call: 4 distinct tokens, not 8.
    global _INHERITED
    kernel = Kernel.open(f"sqlite:{tmp_path / 'pool.db'}", clock=ManualClock(1_000))
    kernel.taskboard.seed([TaskSeed(f"t{i}") for i in range(16)])
    kernel.taskboard.claim("t15", "parent", 60_000)  # the parent has drawn random bytes
    _INHERITED = kernel
    try:
        with multiprocessing.get_context("fork").Pool(4) as pool:
            tokens = pool.map(_claim_in_child, range(12), chunksize=1)
    finally:
        _INHERITED = None
    assert all(len(t) == 32 for t in tokens)
    assert len(set(tokens)) == 12, tokens


def _in_child(body: Callable[[], str]) -> tuple[int, int]:
    """Fork; the child runs ``body`` (bounded by an alarm) and writes its
    answer to a pipe. The parent gets (pid, read end)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            signal.alarm(30)
            os.write(w, body().encode())
            code = 0
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            os.write(w, f"ERROR {type(e).__name__}: {e}".encode())
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def _answer(pid: int, r: int, timeout: float = 40.0) -> str:
    ready, _, _ = select.select([r], [], [], timeout)
    data = os.read(r, 4096).decode() if ready else "TIMEOUT"
    os.close(r)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.01)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return data


def test_forked_children_of_one_parent_mint_distinct_tokens() -> None:
    kernel = Kernel(MemoryBackend(), clock=ManualClock(1_000))
    kernel.taskboard.seed([TaskSeed("x")])
    kernel.taskboard.get("x")  # the parent has a worker (and an instance) now
    children = [_in_child(lambda: kernel.taskboard.claim("x", "child", 60_000).token or "") for _ in range(4)]
    tokens = [_answer(pid, r) for pid, r in children]
    mine = kernel.taskboard.claim("x", "parent", 60_000).token
    assert all(len(t) == 32 for t in tokens), tokens
    assert len(set(tokens + [mine])) == 5, tokens


def test_forked_children_draw_their_own_entropy_in_the_read() -> None:
    # gak:kernel@0.3.0 mints a token from the entropy its one `store.read`
    # hands over: each child's claim draws fresh bytes from os.urandom in
    # that read, none of them the parent's or a sibling's.
    kernel = Kernel(MemoryBackend(), clock=ManualClock(1_000))
    kernel.taskboard.seed([TaskSeed("x"), TaskSeed("warm")])
    kernel.taskboard.claim("warm", "parent", 60_000)  # the parent has drawn entropy and has an instance

    def child() -> str:
        drawn: list[bytes] = []
        real = os.urandom

        def urandom(n: int) -> bytes:
            b = real(n)
            drawn.append(b)
            return b

        os.urandom = urandom  # this child's only
        with _abi.counting() as crossings:
            token = kernel.taskboard.claim("x", "child", 60_000).token
        return json.dumps({"token": token, "drawn": [b.hex() for b in drawn], "crossings": dict(crossings)})

    answers = [json.loads(_answer(pid, r)) for pid, r in [_in_child(child) for _ in range(4)]]
    assert all(a["crossings"].get("store#read") == 1 and a["crossings"].get("store#write") == 1 for a in answers)
    assert all(len(a["token"]) == 32 and a["drawn"] for a in answers), answers
    drawn = [d for a in answers for d in a["drawn"]]
    assert len(set(drawn)) == len(drawn), drawn
    assert len({a["token"] for a in answers}) == 4


def test_a_zombie_childs_late_complete_is_refused(tmp_path: Path) -> None:
    # Child A claims X for 200 ms and stalls; child B takes X over after the
    # expiry; A's late complete must be refused (lease-lost), X stays B's.
    # With a copied random state A and B minted the same token and A's
    # complete was accepted.
    kernel = Kernel.open(f"sqlite:{tmp_path / 'zombie.db'}", clock=ManualClock(1_000))
    kernel.taskboard.seed([TaskSeed("X")])
    kernel.taskboard.get("X")  # the parent has an instance before it forks
    token_r, token_w = os.pipe()
    go_r, go_w = os.pipe()

    def zombie() -> str:
        token = kernel.taskboard.claim("X", "A", 200).token or ""
        os.write(token_w, token.encode())
        select.select([go_r], [], [], 30)  # stalled until B has taken over
        try:
            kernel.taskboard.complete("X", token)
        except Refused as e:
            return f"refused {e.code}"
        return "accepted"

    def successor() -> str:
        clock = kernel.clock
        assert isinstance(clock, ManualClock)
        clock.set(1_300)  # A's 200 ms are over (this child's copy of the clock)
        return kernel.taskboard.claim("X", "B", 60_000).token or ""

    a = _in_child(zombie)
    ready, _, _ = select.select([token_r], [], [], 30)
    assert ready, "child A never claimed"
    a_token = os.read(token_r, 64).decode()
    b_token = _answer(*_in_child(successor))
    os.write(go_w, b"go")
    verdict = _answer(*a)
    for fd in (token_r, token_w, go_r, go_w):
        os.close(fd)
    assert len(a_token) == 32 and len(b_token) == 32, (a_token, b_token)
    assert a_token != b_token
    assert verdict == "refused lease-lost"
    task = kernel.taskboard.get("X")
    assert (task.state.value, task.owner, task.fence) == ("claimed", "B", 2)


def test_a_fork_while_a_thread_is_inside_sqlite_leaves_the_child_able_to_write(tmp_path: Path) -> None:
    kernel = Kernel.open(f"sqlite:{tmp_path / 'busy.db'}?synchronous=normal", clock=ManualClock(1_000))
    kernel.taskboard.seed([TaskSeed("hammered")] + [TaskSeed(f"child{i}") for i in range(5)])
    stop = threading.Event()
    running = threading.Event()
    failures: list[BaseException] = []

    def hammer() -> None:
        # Write transactions back to back: at almost any instant this thread
        # holds SQLite's write lock (or is inside a call).
        try:
            while not stop.is_set():
                t = kernel.taskboard.claim("hammered", "h", 60_000)
                kernel.taskboard.release("hammered", t.token or "")
                running.set()
        except BaseException as e:  # noqa: BLE001
            failures.append(e)
            running.set()

    thread = threading.Thread(target=hammer, daemon=True)
    thread.start()
    assert running.wait(30)
    try:
        for i in range(5):
            # The child opens its own connection; with the parent's lock
            # state inherited it would wait "database is locked" forever.
            pid, r = _in_child(lambda: kernel.taskboard.claim(f"child{i}", f"c{i}", 60_000).owner or "")
            assert _answer(pid, r) == f"c{i}"
    finally:
        stop.set()
        thread.join(30)
    assert not failures, failures
    assert {kernel.taskboard.get(f"child{i}").owner for i in range(5)} == {f"c{i}" for i in range(5)}


def test_the_fork_gate_waits_for_calls_in_other_threads_only() -> None:
    from gak._fork import CallGate

    gate = CallGate()
    gate.enter()  # this thread is inside a call (a fork from inside a body)
    assert gate.close(0.01)
    gate.open()
    inside = threading.Event()
    leave = threading.Event()

    def other() -> None:
        gate.enter()
        inside.set()
        leave.wait(30)
        gate.exit()

    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(30)
    assert not gate.close(0.01)  # another thread is inside: the fork would wait
    gate.open()
    leave.set()
    t.join(30)
    assert gate.close(0.01)
    gate.open()
    gate.exit()


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_fork_from_inside_a_body_never_ends_the_parents_transaction(tmp_path: Path, store: str) -> None:
    url = "memory:" if store == "memory" else f"sqlite:{tmp_path / 'inside.db'}"
    kernel = Kernel.open(url, clock=ManualClock(1_000))
    answers: list[str] = []

    def body(down: object) -> None:
        down.put("k", "v")  # type: ignore[attr-defined]
        pid = os.fork()
        if pid == 0:
            return  # the child returns into the kernel's call...
        answers.append(str(pid))

    try:
        kernel.sideeffect.write_fenced("r", 1, body)
    except BaseException as e:  # noqa: BLE001 - only in the child
        if not answers:  # the child: its call must refuse to commit
            os._exit(0 if "forked inside a call" in str(e) else 3)
        raise
    if not answers:
        os._exit(4)  # the child's call reported success: wrong
    _, status = os.waitpid(int(answers[0]), 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert kernel.sideeffect.sink_seen("r") == 1  # the parent committed once
    assert kernel.with_downstream(lambda d: d.get("k")) == "v"
