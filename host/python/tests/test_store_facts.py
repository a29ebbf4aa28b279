"""The store facts every binding shares (``host/sql/store.json``, generated
into ``gak.stores._facts`` by gak-gen) answer the shared cases of
``tests/store-facts/cases.json``, as the Rust and JavaScript hosts do."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gak.stores import _facts

CASES: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[3] / "tests" / "store-facts" / "cases.json").read_text(encoding="utf-8")
)


@pytest.mark.parametrize("prefix,end", CASES["prefix-end"])
def test_prefix_end(prefix: str, end: str | None) -> None:
    assert _facts.prefix_end(prefix) == end


@pytest.mark.parametrize("url,kind", CASES["store-kind"])
def test_store_kind(url: str, kind: str | None) -> None:
    assert _facts.store_kind(url) == kind


@pytest.mark.parametrize("name,valid", CASES["valid-schema"])
def test_valid_schema(name: str, valid: bool) -> None:
    assert _facts.valid_schema(name) is valid


def test_the_sqlite_schema_creates_every_table() -> None:
    for t in _facts.TABLES:
        assert f"CREATE TABLE IF NOT EXISTS {_facts.SQLITE_TABLE_PREFIX}{t} (" in _facts.SQLITE_SCHEMA
    assert _facts.SQLITE_SCHEMA.count("CREATE TABLE") == len(_facts.TABLES)


@pytest.mark.parametrize("url,want", CASES["postgres-url"], ids=[u for u, _ in CASES["postgres-url"]])
def test_postgres_url(url: str, want: dict[str, Any]) -> None:
    from gak.errors import OpenError
    from gak.stores import open_store, pg_url
    from gak.stores.urls import userinfo_span

    if "error" not in want:
        parts = pg_url.parse(url)
        got = {
            "user": parts.user,
            "password": parts.password,
            "hosts": [[h, p] for h, p in parts.hosts],
            "dbname": parts.dbname,
            "params": parts.params,
        }
        assert got == want
        return
    span = userinfo_span(url)
    info = url[span[0] : span[1]] if span else ""
    for open_ in (pg_url.parse, open_store):
        with pytest.raises(OpenError) as e:
            open_(url)
        message = str(e.value)
        assert want["error"] in message, message
        # The user information, as a word: not even a one-letter user shows.
        assert not info or not re.search(rf"(?<![\w$]){re.escape(info)}(?![\w$])", message), message


def _protocol_numbers_in_use() -> dict[str, int]:
    """The defaults this host actually runs with (its pool, retry loop,
    size checks and entropy bound), each read where it is used."""
    import inspect

    from gak import _engine, kernel, limits

    wait = inspect.signature(kernel.Kernel.open).parameters["connection_wait"].default
    pool = inspect.signature(kernel.Kernel.open).parameters["max_connections"].default
    # The pause after the first and after a late attempt, at their largest.
    first = max(kernel.backoff_delay(1) for _ in range(200))
    late = max(kernel.backoff_delay(30) for _ in range(200))
    return {
        "connection-wait-ms": round(wait * 1000),
        "max-connections": pool,
        "retry-attempts": kernel.MAX_ATTEMPTS,
        "retry-base-ms": 1 if 0.0005 <= first <= 0.001 else round(first * 1000),
        "retry-max-ms": 500 if 0.25 <= late <= 0.5 else round(late * 1000),
        "max-value-bytes": limits.MAX_VALUE,
        "max-list-items": limits.MAX_ITEMS,
        "max-call-bytes": limits.MAX_TOTAL,
        "max-entropy": _engine.MAX_ENTROPY,
    }


@pytest.mark.parametrize("name,value", CASES["protocol"])
def test_the_protocol_numbers_are_the_ones_the_host_uses(name: str, value: int) -> None:
    used = _protocol_numbers_in_use()
    assert name in used, f"no such protocol number: {name}"
    assert used[name] == value, name
