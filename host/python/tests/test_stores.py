"""Store bindings: byte order, prefix scans, own writes, rollback; and the
PostgreSQL advisory-lock names shared with the Rust host."""

from __future__ import annotations

import json
from typing import Any

from gak.stores.base import prefix_end

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
    with psycopg.connect(pg_backend.dsn, autocommit=True) as other:
        (expected,) = other.execute("SELECT hashtextextended(%s, 0)", (name,)).fetchone()  # type: ignore[misc]
        held = other.execute(
            "SELECT (classid::int8 << 32) | objid::int8 FROM pg_locks WHERE locktype = 'advisory' AND granted"
        ).fetchall()
    return held, expected


def test_postgres_clock_db_judges_by_the_server(pg_backend: Any) -> None:
    import time

    from gak import Kernel, ManualClock, TaskSeed
    from gak.stores.postgres import PostgresBackend

    backend = PostgresBackend(pg_backend.dsn.replace("?", f"?schema={pg_backend.schema}&clock=db&", 1))
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
