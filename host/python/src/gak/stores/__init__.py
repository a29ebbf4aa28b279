"""Store bindings: memory, SQLite (stdlib ``sqlite3``) and PostgreSQL (psycopg 3)."""

from __future__ import annotations

from typing import Any

from ..errors import OpenError
from ._facts import SQLITE_SCHEME, USAGE, store_kind
from .base import TABLES, Backend, Session, StoreConflict, StoreFailure
from .memory import MemoryBackend
from .sqlite import SqliteBackend
from .urls import scrub, shown


def open_store(url: str) -> Any:
    """A backend from a store URL: ``memory:``; ``sqlite:PATH`` (or a bare path
    ending in ``.db`` / ``.sqlite``); ``postgres://user@host:port/db?schema=NAME``.

    Every failure is an :class:`OpenError` whose message never holds the
    URL's password (HOSTS.md rule 14)."""
    try:
        return _open(url)
    except OpenError as e:
        raise OpenError(scrub(str(e), url)) from None
    except (StoreConflict, StoreFailure) as e:
        raise OpenError(f"cannot open {shown(url)}: {scrub(str(e), url)}") from None


def _open(url: str) -> Any:
    kind = store_kind(url)
    if kind == "postgres":
        from .postgres import PostgresBackend  # psycopg is only needed here

        return PostgresBackend(url)
    if kind == "memory":
        return MemoryBackend()
    if kind == "sqlite":
        return SqliteBackend(url[len(SQLITE_SCHEME) :] if url.startswith(SQLITE_SCHEME) else url)
    raise OpenError(f"unknown store {shown(url)!r} (expected {USAGE})")


__all__ = [
    "TABLES",
    "Backend",
    "MemoryBackend",
    "OpenError",
    "Session",
    "SqliteBackend",
    "StoreConflict",
    "StoreFailure",
    "open_store",
]
