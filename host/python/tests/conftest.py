"""Fixtures: kernels on every binding with a manual clock.

PostgreSQL comes from ``GAK_PG_DSN`` (else the local server); when it is
unreachable the PostgreSQL cases are skipped, except under ``CI=true``,
where they fail.
"""

from __future__ import annotations

import os
import uuid
from typing import Iterator

import pytest

from gak import Kernel, ManualClock
from gak.stores.memory import MemoryBackend
from gak.stores.sqlite import SqliteBackend

LOCAL = "postgres://postgres@127.0.0.1:5432/test"


def pg_dsn() -> str:
    """A reachable DSN, or skip (fail under CI=true)."""
    dsn = os.environ.get("GAK_PG_DSN", LOCAL) or LOCAL
    try:
        import psycopg

        psycopg.connect(dsn, connect_timeout=3).close()
    except Exception as e:  # noqa: BLE001
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and PostgreSQL is unreachable at {dsn}: {e}")
        pytest.skip(f"PostgreSQL unreachable at {dsn}: {e}")
    return dsn


def pg_with(**params: str) -> str:
    """The test server's URL (:func:`pg_dsn`) with ``params`` appended."""
    dsn = pg_dsn()
    sep = "&" if "?" in dsn else "?"
    return dsn + sep + "&".join(f"{k}={v}" for k, v in params.items())


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000)


@pytest.fixture
def pg_backend() -> Iterator[object]:
    from gak.stores.postgres import PostgresBackend

    dsn = pg_dsn()
    schema = f"t_py_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in dsn else "?"
    backend = PostgresBackend(f"{dsn}{sep}schema={schema}")
    try:
        yield backend
    finally:
        backend.drop_schema()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[object]:
    if request.param == "memory":
        yield MemoryBackend()
    elif request.param == "sqlite":
        yield SqliteBackend(str(tmp_path / "k.db"))  # type: ignore[operator]
    else:
        yield request.getfixturevalue("pg_backend")


@pytest.fixture
def kernel(backend: object, clock: ManualClock) -> Iterator[Kernel]:
    with Kernel(backend, clock=clock) as k:
        yield k


@pytest.fixture
def mem(clock: ManualClock) -> Iterator[Kernel]:
    with Kernel(MemoryBackend(), clock=clock) as k:
        yield k
