"""The store facts every binding shares (``host/sql/store.json``, generated
into ``gak.stores._facts`` by gak-gen) answer the shared cases of
``tests/store-facts/cases.json``, as the Rust and JavaScript hosts do."""

from __future__ import annotations

import json
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
