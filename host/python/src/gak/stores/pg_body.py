"""The cursor a fenced sink's body gets on PostgreSQL (``down.raw``).

The body runs inside the kernel's transaction, so two things it could do
through a plain cursor would break the call (HOSTS.md rule 12):

- **End the transaction** (``COMMIT``, ``ROLLBACK``, …): the fence and half
  the body's writes would be durable before the kernel decided anything.
  Every statement's leading keyword is checked before it is sent — every
  statement of a multi-statement string too (psycopg sends a string without
  parameters with the simple protocol, which runs them all).
- **Fail a statement and carry on** (the "insert if absent" pattern): the
  server aborts the transaction and answers the kernel's ``COMMIT`` with
  ``ROLLBACK``, not an error. A failed statement is remembered and ends the
  call with ``storage`` (a serialization failure or deadlock: the whole call
  re-runs), however the body handled it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator, Optional

import psycopg
from psycopg import sql

if TYPE_CHECKING:
    from .postgres import PostgresSession

#: Statements that begin, end or split a transaction. ``PREPARE`` only
#: counts when followed by ``TRANSACTION`` (a prepared statement is fine).
TRANSACTION_CONTROL = frozenset(
    {"BEGIN", "START", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "END", "ABORT"}
)


class TransactionControlRefused(psycopg.ProgrammingError):
    """A body tried to begin, end or split the kernel's transaction."""


def _skip_quoted(text: str, i: int, quote: str, backslash: bool) -> int:
    """The index after the literal that starts at ``text[i] == quote``."""
    n = len(text)
    i += 1
    while i < n:
        c = text[i]
        if backslash and c == "\\":
            i += 2
            continue
        if c == quote:
            if i + 1 < n and text[i + 1] == quote:  # doubled: an escaped quote
                i += 2
                continue
            return i + 1
        i += 1
    return n


def _skip_block_comment(text: str, i: int) -> int:
    depth, n = 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            depth += 1
            i += 2
        elif text.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return n


def _dollar_tag(text: str, i: int) -> Optional[str]:
    """The ``$tag$`` opening a dollar-quoted string at ``i``, if one does."""
    j = i + 1
    n = len(text)
    if j < n and text[j].isdigit():
        return None  # $1: a parameter
    while j < n and (text[j].isalnum() or text[j] == "_"):
        j += 1
    if j < n and text[j] == "$":
        return text[i : j + 1]
    return None


def leading_words(text: str) -> list[tuple[str, str]]:
    """The first two words (upper case; ``""`` when absent) of every
    statement in ``text``, skipping whitespace, comments and literals."""
    out: list[tuple[str, str]] = []
    words: list[str] = []
    first_token = True  # nothing but words seen yet in this statement
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            i = _skip_block_comment(text, i)
        elif c == ";":
            if words:
                out.append((words[0], words[1] if len(words) > 1 else ""))
            words, first_token = [], True
            i += 1
        elif c == "'" or c == '"':
            i = _skip_quoted(text, i, c, backslash=False)
            first_token = False
        elif c == "$" and (tag := _dollar_tag(text, i)) is not None:
            end = text.find(tag, i + len(tag))
            i = n if end < 0 else end + len(tag)
            first_token = False
        elif c.isalpha() or c == "_":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] in "_$"):
                j += 1
            word = text[i:j]
            if word in ("E", "e") and j < n and text[j] == "'":
                i = _skip_quoted(text, j, "'", backslash=True)
                first_token = False
                continue
            if first_token and len(words) < 2:
                words.append(word.upper())
            i = j
        else:
            first_token = False
            i += 1
    if words:
        out.append((words[0], words[1] if len(words) > 1 else ""))
    return out


def refused_keyword(text: str) -> Optional[str]:
    """The transaction-control statement in ``text``, if it holds one."""
    for first, second in leading_words(text):
        if first in TRANSACTION_CONTROL:
            return first
        if first == "PREPARE" and second == "TRANSACTION":
            return "PREPARE TRANSACTION"
    return None


class BodyCursor:
    """A psycopg cursor over the kernel's open transaction, for one body.

    ``execute`` / ``executemany`` / ``fetchone`` / ``fetchmany`` /
    ``fetchall`` / iteration / ``rowcount`` / ``description`` /
    ``statusmessage`` behave as psycopg's. Not offered: ``connection`` (its
    ``commit()`` would end the transaction) and ``copy``. Usable only while
    the body that got it runs."""

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
        keyword = refused_keyword(text)
        if keyword is not None:
            raise TransactionControlRefused(
                f"{keyword} refused: a body runs inside the kernel's transaction and must not end it"
            )

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> "BodyCursor":
        self._guard(query)
        try:
            # BEGIN and the deferred writes go first: the statement runs in
            # the kernel's transaction and sees its writes.
            self._session._flush()
            self._cursor.execute(query, params, **kwargs)
        except psycopg.Error as e:
            self._session._body_failed(e)
            raise
        self._session._body_check()
        return self

    def executemany(self, query: Any, params_seq: Iterable[Any], **kwargs: Any) -> None:
        self._guard(query)
        try:
            self._session._flush()
            self._cursor.executemany(query, params_seq, **kwargs)
        except psycopg.Error as e:
            self._session._body_failed(e)
            raise
        self._session._body_check()

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
