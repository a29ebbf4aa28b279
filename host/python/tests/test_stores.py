"""Store bindings: byte order, prefix scans, own writes, rollback; and the
PostgreSQL advisory-lock names shared with the Rust host."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gak.stores.base import prefix_end

from conftest import pg_dsn, pg_with

KEYS = ["a", "a/b", "a/c", "ab", "b", "é", "\uffff", "\U0001f600", "a\U0001f600"]


def test_scan_is_byte_order_with_prefix_and_cursor(backend: Any) -> None:
    s = backend.session()
    try:
        _scan(s)
    finally:
        s.close()


def _scan(s: Any) -> None:
    s.begin()
    for k in KEYS:
        s.put("indexes", k, f'{{"k":"{k}"}}')
    s.commit()
    s.begin()
    by_bytes = sorted(KEYS, key=lambda k: k.encode("utf-8"))
    assert [k for k, _ in s.scan("indexes", "", None, 100)] == by_bytes
    assert [k for k, _ in s.scan("indexes", "a", None, 100)] == [k for k in by_bytes if k.startswith("a")]
    assert [k for k, _ in s.scan("indexes", "a", "a/b", 2)] == ["a/c", "ab"]
    s.put("indexes", "a/bb", "{}")  # own writes are visible to scans and gets
    s.delete("indexes", "a/c")
    assert [k for k, _ in s.scan("indexes", "a/", None, 10)] == ["a/b", "a/bb"]
    assert s.get("indexes", "a/c") is None
    s.rollback()
    s.begin()
    assert [k for k, _ in s.scan("indexes", "a/", None, 10)] == ["a/b", "a/c"]
    got = s.get_many([("indexes", "b"), ("tasks", "b")])
    assert got[1] is None and json.loads(got[0]) == {"k": "b"}  # equivalent JSON (jsonb re-spaces it)
    s.rollback()


def test_prefix_end() -> None:
    assert prefix_end("") is None
    assert prefix_end("ts/open/") == "ts/open0"
    assert prefix_end("a\U0010ffff") == "b"
    assert prefix_end("\ud7ff") == "\ue000"
    assert prefix_end("\U0010ffff") is None


def test_postgres_locks_the_rust_hosts_lock_ids(pg_backend: Any) -> None:
    s = pg_backend.session()
    try:
        s.begin()
        s.get("tasks", "t1")
        held, expected = _held(pg_backend)
    finally:
        s.close()
    assert (expected & 0xFFFFFFFFFFFFFFFF) in [h & 0xFFFFFFFFFFFFFFFF for (h,) in held]


def _held(pg_backend: Any) -> Any:
    import psycopg

    name = f"{pg_backend.schema}/tasks/t1"
    with psycopg.connect(pg_dsn(), autocommit=True) as other:
        (expected,) = other.execute("SELECT hashtextextended(%s, 0)", (name,)).fetchone()  # type: ignore[misc]
        held = other.execute(
            "SELECT (classid::int8 << 32) | objid::int8 FROM pg_locks WHERE locktype = 'advisory' AND granted"
        ).fetchall()
    return held, expected


def test_postgres_clock_db_judges_by_the_server(pg_backend: Any) -> None:
    import time

    from gak import Kernel, ManualClock, TaskSeed
    from gak.stores.postgres import PostgresBackend

    backend = PostgresBackend(pg_with(schema=pg_backend.schema, clock="db"))
    k = Kernel(backend, clock=ManualClock(0))  # ignored: the server's clock counts
    k.taskboard.seed([TaskSeed("a")])
    until = k.taskboard.claim("a", "w", 60_000).until or 0
    assert abs(until - 60_000 - time.time() * 1000) < 60_000
    k.close()


def test_memory_sorted_keys_across_chunks() -> None:
    import random

    from gak.stores.memory import _SortedKeys

    keys = _SortedKeys()
    live: set[str] = set()
    rng = random.Random(7)
    for _ in range(20_000):
        k = f"k{rng.randrange(5000):05d}"
        if k in live and rng.random() < 0.4:
            keys.remove(k)
            live.discard(k)
        elif k not in live:
            keys.add(k)
            live.add(k)
    ordered = sorted(live)
    assert list(keys.from_("", False)) == ordered
    assert list(keys.from_("k02500", True)) == [k for k in ordered if k > "k02500"]
    assert list(keys.from_("k02500", False)) == [k for k in ordered if k >= "k02500"]
    assert all(len(c) <= 1024 for c in keys.chunks) and len(keys.chunks) > 2


def test_a_read_and_a_write_set_on_every_binding(backend: Any) -> None:
    s = backend.session()
    try:
        s.begin()
        s.write([("tasks", "a", '{"n":1}'), ("tasks", "b", '{"n":2}'), ("indexes", "q/1", "{}"), ("indexes", "q/2", "{}")])
        s.commit()
        s.begin()
        # The transaction's own write set is seen by its point and range reads.
        s.write([("tasks", "a", None), ("tasks", "c", '{"n":3}'), ("indexes", "q/1", None), ("indexes", "q/0", "{}")])
        values, pages, now = s.read(
            [("tasks", "a"), ("tasks", "b"), ("tasks", "c"), ("meta", "none")],
            [("indexes", "q/", None, 10), ("tasks", "", "a", 1), ("indexes", "q/", "q/0", 1)],
        )
        assert values[0] is None and json.loads(values[1]) == {"n": 2} and json.loads(values[2]) == {"n": 3}
        assert values[3] is None and now is None
        assert [[k for k, _ in page] for page in pages] == [["q/0", "q/2"], ["b"], ["q/2"]]
        assert s.read([], []) == ([], [], None)
        s.rollback()
        s.begin()
        assert s.get_many([("tasks", "a"), ("tasks", "c")])[1] is None  # rolled back: none of it
        assert json.loads(s.get("tasks", "a") or "") == {"n": 1}
        s.rollback()
    finally:
        s.close()



def _bulk_value(table: str, key: str, n: int) -> str:
    return f"{table}:{key}:{n}" if table == "downstream" else json.dumps({"v": f"{table}:{key}:{n}"})


def test_many_keys_read_and_write_alike_on_every_binding(backend: Any) -> None:
    """Point reads and write sets of many keys (PostgreSQL: from
    POSTGRES_MANY_KEYS_FROM, `gak_read_many_v1` / `gak_write_many_v1`) answer
    and apply what the same keys one at a time do: inserts, overwrites,
    deletes (of absent keys too), across tables, a key asked twice, and the
    transaction's own write set."""
    from gak.stores._facts import POSTGRES_MANY_KEYS_FROM

    held: dict[tuple[str, str], str] = {}

    def apply(s: Any, changes: list[tuple[str, str, str | None]]) -> None:
        assert len(changes) >= POSTGRES_MANY_KEYS_FROM
        s.write(changes)
        for t, k, v in changes:
            if v is None:
                held.pop((t, k), None)
            else:
                held[(t, k)] = v

    asked = [("meta", "n07"), ("tasks", "k00"), ("tasks", "k07"), ("indexes", "k03"), ("downstream", "k09"),
             ("downstream", "k08"), ("tasks", "gone"), ("indexes", "k09"), ("meta", "k00"), ("snapshots", "k00"),
             ("tasks", "k07"), ("meta", "n00"), ("indexes", "k00"), ("tasks", "k04"), ("tasks", "k05"),
             ("meta", "n09"), ("downstream", "k00"), ("outcomes", "x")]
    assert len(asked) >= POSTGRES_MANY_KEYS_FROM

    def check(s: Any) -> None:
        def norm(t: str, v: str | None) -> Any:
            return v if v is None or t == "downstream" else json.loads(v)

        together = s.get_many(asked)
        assert [norm(t, v) for (t, _), v in zip(asked, together)] == [norm(t, held.get((t, k))) for t, k in asked]
        for key, value in zip(asked, together):
            assert s.get_many([key]) == [value], key

    s = backend.session()
    try:
        s.begin()
        apply(s, [(t, f"k{i:02}", _bulk_value(t, f"k{i:02}", 0)) for t in ("tasks", "indexes", "meta", "downstream") for i in range(10)])
        s.commit()
        second: list[tuple[str, str, str | None]] = []
        for i in range(5):
            second += [("tasks", f"k{i:02}", None), ("indexes", f"k{i:02}", _bulk_value("indexes", f"k{i:02}", 1))]
        second += [("meta", f"n{i:02}", _bulk_value("meta", f"n{i:02}", 1)) for i in range(10)]
        second += [("downstream", "k09", None), ("tasks", "gone", None)]
        s.begin()
        apply(s, second)
        s.commit()
        s.begin()
        check(s)
        own: list[tuple[str, str, str | None]] = []
        for i in range(5, 10):
            own += [("tasks", f"k{i:02}", None), ("meta", f"n{i:02}", _bulk_value("meta", f"n{i:02}", 2)),
                    ("downstream", f"k{i:02}", _bulk_value("downstream", f"k{i:02}", 2)),
                    ("snapshots", f"k{i - 5:02}", _bulk_value("snapshots", f"k{i - 5:02}", 2))]
        apply(s, own)
        check(s)
        s.rollback()
    finally:
        s.close()


def test_postgres_many_keys_go_out_as_the_many_functions(pg_backend: Any) -> None:
    """With the per-key statements broken, a read and a write set of
    POSTGRES_MANY_KEYS_FROM keys still work (they use the `_many`
    functions); one key fewer does not."""
    from gak.stores._facts import POSTGRES_MANY_KEYS_FROM

    n = POSTGRES_MANY_KEYS_FROM
    s = pg_backend.session()
    try:
        s.begin()
        s._read_sql = s._write_sql = "SELECT gak_no_such_function(%s, %s, %s)"
        s.write([("tasks", f"m{i:02}", json.dumps({"i": i})) for i in range(n)])
        values = s.get_many([("tasks", f"m{i:02}") for i in range(n)])
        assert [json.loads(v)["i"] for v in values] == list(range(n))
        with pytest.raises(Exception, match="gak_no_such_function"):
            s.get_many([("tasks", f"m{i:02}") for i in range(n - 1)])
        s.rollback()
    finally:
        s.close()


# --- PostgreSQL: two round trips a call, from the shared file --------------------


def _wire(kernel: Any, call: Any) -> tuple[int, int]:
    """(statements, round trips) the kernel's one connection sent while
    ``call`` ran, counted from libpq's own trace of the protocol messages
    (an Execute or a simple Query is a statement; every ReadyForQuery the
    server sends ends a round trip)."""
    from psycopg import pq

    worker = kernel._pool.checkout()
    session = worker.session
    kernel._pool.checkin(worker)
    session.begin()  # connected
    session.rollback()
    import tempfile

    with tempfile.TemporaryFile("w+") as trace:
        pgconn = session._conn.pgconn
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            call()
        finally:
            pgconn.untrace()
        trace.seek(0)
        lines = [line.split("\t") for line in trace.read().splitlines()]
    sent = sum(1 for f in lines if len(f) > 2 and f[0] == "F" and f[2] in ("Execute", "Query"))
    trips = sum(1 for f in lines if len(f) > 2 and f[0] == "B" and f[2] == "ReadyForQuery")
    return sent, trips


@pytest.mark.parametrize("clock", ["host", "db"])
def test_postgres_a_claim_is_four_statements_in_two_round_trips(pg_backend: Any, clock: str) -> None:
    from gak import Action, Kernel, ManualClock, Refused, TaskSeed
    from gak.stores.postgres import PostgresBackend

    backend = PostgresBackend(pg_with(schema=pg_backend.schema, clock=clock))
    k = Kernel(backend, clock=ManualClock(1_000), max_connections=1)
    try:
        k.taskboard.seed([TaskSeed(f"t{i}") for i in range(12)])
        for i in range(6):  # past psycopg's prepare threshold: what a busy worker sends
            k.taskboard.claim(f"t{i}", "w", 60_000)
            k.sideeffect.acquire(Action(f"k{i}", f"r{i}"), 60_000)
        # BEGIN + gak_read_v1, then gak_write_v1 + COMMIT.
        assert _wire(k, lambda: k.taskboard.claim("t9", "w", 60_000)) == (4, 2)
        assert _wire(k, lambda: k.sideeffect.acquire(Action("k9", "r9"), 60_000)) == (4, 2)
        # A call that only reads: BEGIN + gak_read_v1, then COMMIT.
        assert _wire(k, lambda: k.taskboard.get("t9")) == (3, 2)

        def taken() -> None:
            with pytest.raises(Refused):
                k.taskboard.claim("t9", "other", 60_000)

        assert _wire(k, taken) == (3, 2)  # a refusal: BEGIN + gak_read_v1, then ROLLBACK
    finally:
        k.close()


def test_postgres_reads_and_bodies_see_the_deferred_write_set(pg_backend: Any) -> None:
    s = pg_backend.session()
    try:
        s.begin()
        s.put("downstream", "k", "v1")  # deferred: nothing sent yet
        assert s.round_trips == 0
        assert s.get("downstream", "k") == "v1"  # sent in front of the read
        s.put("downstream", "k", "v2")
        s.lend()
        row = s.raw.execute(f'SELECT value FROM "{pg_backend.schema}".downstream WHERE key = %s', ("k",)).fetchone()
        assert row == ("v2",)  # sent in front of the body's own statement
        assert s.reclaim() is None
        s.put("downstream", "k", "v3")
        s.commit()  # the last write of the key wins
        s.begin()
        assert s.get("downstream", "k") == "v3"
        s.rollback()
    finally:
        s.close()


def test_postgres_a_write_set_refused_at_commit_commits_nothing(pg_backend: Any) -> None:
    from psycopg.pq import TransactionStatus

    from gak.stores.base import StoreFailure

    s = pg_backend.session()
    try:
        s.begin()
        assert s.get("tasks", "a") is None
        s.write([("tasks", "a", "{}"), ("tasks", "b", "not json")])  # the server refuses the cast
        with pytest.raises(StoreFailure, match="22P02"):
            s.commit()
        assert s._conn.info.transaction_status == TransactionStatus.IDLE  # no transaction left open
        s.begin()
        assert s.get_many([("tasks", "a"), ("tasks", "b")]) == [None, None]
        s.commit()
    finally:
        s.close()


def test_postgres_a_commit_whose_connection_is_lost_is_storage_and_not_rerun(pg_backend: Any) -> None:
    # The COMMIT may have reached the server (HOSTS.md rule 4): storage, and
    # the call is not run again — the body ran exactly once.
    import psycopg

    from gak import Kernel, ManualClock, StorageError

    k = Kernel(pg_backend, clock=ManualClock(1_000))
    ran: list[int] = []

    def body(down: Any) -> None:
        (pid,) = down.raw.execute("SELECT pg_backend_pid()").fetchone()
        ran.append(pid)
        down.put("k", "v")
        with psycopg.connect(pg_dsn(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    try:
        with pytest.raises(StorageError, match="commit failed"):
            k.with_downstream(body)
        assert len(ran) == 1
        assert k.with_downstream(lambda d: d.get("k")) is None  # a new connection; nothing landed
    finally:
        k.close()


def test_postgres_url_options_with_spaces_reach_the_server(pg_backend: Any) -> None:
    # libpq decodes %20 as a space but never "+": the binding must pass
    # `options=-c name=value` on as it was given.
    from gak.stores.postgres import PostgresBackend

    url = pg_with(schema=pg_backend.schema, options="-c%20statement_timeout%3D4321")
    conn = PostgresBackend(url, create=False).connect()
    try:
        assert conn.execute("SHOW statement_timeout").fetchone() == ("4321ms",)
    finally:
        conn.close()


def test_postgres_a_failed_pipeline_leaves_no_phantom_prepared_statement(pg_backend: Any) -> None:
    # psycopg prepares a statement on its sixth run. When an earlier
    # statement of the same pipeline fails, the server skips the PREPARE,
    # yet psycopg counts it as prepared: the next transaction's EXECUTE
    # failed with "prepared statement does not exist" (storage instead of a
    # re-run). The rollback after a failed pipeline makes both forget.
    from gak.stores.base import StoreFailure

    s = pg_backend.session()
    try:
        for _ in range(5):  # the read statement's first five runs: not prepared yet
            s.begin()
            s.read([("tasks", "t")], [])
            s.rollback()
        s.begin()
        s.write([("tasks", "t", "not json")])  # deferred: it fails in front of the read
        with pytest.raises(StoreFailure, match="json"):
            s.read([("tasks", "t")], [])  # the sixth run, prepared behind the failure
        s.rollback()
        s.begin()
        assert s.read([("tasks", "t")], []) == ([None], [], None)
        s.rollback()
    finally:
        s.close()
