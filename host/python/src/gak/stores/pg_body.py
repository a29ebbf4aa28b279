"""The cursor a fenced sink's body gets on PostgreSQL (``down.raw``).

The body runs inside the kernel's transaction, so two things it could do
through a plain cursor would break the call (HOSTS.md rule 12):

- **End the transaction** (``COMMIT``, ``ROLLBACK``, …): the fence and half
  the body's writes would be durable before the kernel decided anything.
  Three defences, each enough for what the others miss:

  1. every text is lexed as the server lexes it (:mod:`.pg_lex`) and
     refused before anything is sent when a statement of it begins, ends or
     splits a transaction, or when it holds more than one statement;
  2. every statement goes out on the extended protocol (psycopg's pipeline
     mode: a query without parameters would otherwise go out on the simple
     protocol, which runs every statement of the string), where the server
     itself refuses a text of several statements;
  3. each statement is followed, in the same round trip, by
     ``txid_current()``, compared with the kernel's transaction's (read
     before the body's first statement): a statement that ended the
     transaction, in a spelling the lexer missed, shows as another
     transaction, and the session then sends nothing more — neither the
     kernel's deferred writes nor its ``COMMIT`` — and the call ends with
     ``storage``.

- **Fail a statement and carry on** (the "insert if absent" pattern): the
  server aborts the transaction and answers the kernel's ``COMMIT`` with
  ``ROLLBACK``, not an error. A statement that failed in the database is
  remembered and ends the call with ``storage`` (a serialization failure or
  deadlock: the whole call re-runs), however the body handled it. A
  refusal before anything reached the server (the guard, a value psycopg
  cannot send) changes nothing and does not end the call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator, Optional

import psycopg
from psycopg import sql

from .pg_lex import refusal

if TYPE_CHECKING:
    from .postgres import PostgresSession


class TransactionControlRefused(psycopg.ProgrammingError):
    """A body tried to begin, end or split the kernel's transaction, to send
    more than one statement in one call, or to run a ``COPY`` through the
    connection (``FROM STDIN`` / ``TO STDOUT``); nothing was sent."""


class BodyCursor:
    """A psycopg cursor over the kernel's open transaction, for one body.

    ``execute`` / ``executemany`` / ``fetchone`` / ``fetchmany`` /
    ``fetchall`` / iteration / ``rowcount`` / ``description`` /
    ``statusmessage`` behave as psycopg's, with one statement per call. Not
    offered: ``connection`` (its ``commit()`` would end the transaction) and
    ``copy``. Usable only while the body that got it runs."""

    def __init__(self, session: "PostgresSession", cursor: psycopg.Cursor[Any], lease: int) -> None:
        self._session = session
        self._cursor = cursor
        self._lease = lease

    def _guard(self, query: Any) -> None:
        if self._lease != self._session._lease:
            raise psycopg.ProgrammingError("this cursor belonged to a body that has returned")
        if isinstance(query, str):
            text = query
        elif isinstance(query, bytes):
            text = query.decode("utf-8", "replace")
        elif isinstance(query, sql.Composable):
            text = query.as_string(self._cursor)
        else:
            raise psycopg.ProgrammingError(f"cannot check a query of type {type(query).__name__}")
        if "\0" in text:
            # libpq sends a query as a C string: it would be cut there.
            raise psycopg.ProgrammingError("a query holding a NUL character cannot be sent")
        why = refusal(text)
        if why is not None:
            raise TransactionControlRefused(why)

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> "BodyCursor":
        self._guard(query)
        self._session._run_lent(lambda: self._cursor.execute(query, params, **kwargs))
        return self

    def executemany(self, query: Any, params_seq: Iterable[Any], **kwargs: Any) -> None:
        self._guard(query)
        self._session._run_lent(lambda: self._cursor.executemany(query, params_seq, **kwargs))

    def fetchone(self) -> Any:
        return self._cursor.fetchone()

    def fetchmany(self, size: int = 0) -> list[Any]:
        return self._cursor.fetchmany(size)

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cursor)

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def description(self) -> Any:
        return self._cursor.description

    @property
    def statusmessage(self) -> Optional[str]:
        return self._cursor.statusmessage

    def close(self) -> None:
        self._cursor.close()

    def __enter__(self) -> "BodyCursor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
