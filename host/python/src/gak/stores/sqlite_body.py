"""The connection a fenced sink's body gets on SQLite (``down.raw``).

Not the ``sqlite3.Connection`` itself but a wrapper over it (HOSTS.md rule
12), for two reasons:

- **The kernel's transaction stays the kernel's.** While the body runs an
  authorizer denies transaction statements (SQLite answers "not
  authorized"), and the wrapper has no ``commit`` / ``rollback`` / ``with``
  of its own: ``with conn:`` on the real connection COMMITs the kernel's
  transaction halfway through the call, and the kernel's own ``COMMIT``
  then fails — while the fence and the body's writes are already durable.
- **Every statement error is seen.** A failed statement leaves a SQLite
  transaction usable, but a PostgreSQL one aborted; so that a body behaves
  alike on both, an error a statement met in the database ends the call
  with ``storage`` even when the body catches it (write "insert if absent"
  as ``INSERT … ON CONFLICT DO NOTHING``). The authorizer's refusal is not
  such an error: it changes nothing, and the body sees it.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional, TypeVar

if TYPE_CHECKING:
    from .sqlite import SqliteSession

T = TypeVar("T")

_REFUSED = "{} refused: a body runs inside the kernel's transaction and must not end it"


class LentConnection:
    """``down.raw`` on SQLite: ``execute`` / ``executemany`` / ``cursor``
    over the kernel's open transaction. Usable only while the body that got
    it runs. Parameters only: never splice data into SQL."""

    def __init__(self, session: "SqliteSession", conn: sqlite3.Connection, lease: int) -> None:
        self._session = session
        self._conn = conn
        self._lease = lease

    def _run(self, f: Callable[[], T]) -> T:
        if self._lease != self._session._lease:
            raise sqlite3.ProgrammingError("this connection belonged to a body that has returned")
        try:
            return f()
        except sqlite3.Error as e:
            self._session._body_failed(e)
            raise

    def execute(self, sql: str, parameters: Any = ()) -> "LentCursor":
        cur = self._conn.cursor()
        self._run(lambda: cur.execute(sql, parameters))
        return LentCursor(self, cur)

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any]) -> "LentCursor":
        cur = self._conn.cursor()
        self._run(lambda: cur.executemany(sql, seq_of_parameters))
        return LentCursor(self, cur)

    def cursor(self) -> "LentCursor":
        return LentCursor(self, self._conn.cursor())

    def commit(self) -> None:
        raise sqlite3.OperationalError(_REFUSED.format("commit()"))

    def rollback(self) -> None:
        raise sqlite3.OperationalError(_REFUSED.format("rollback()"))

    def __enter__(self) -> "LentConnection":
        raise sqlite3.OperationalError(_REFUSED.format("`with conn:` (it commits)"))

    def __exit__(self, *exc: object) -> None:  # pragma: no cover - __enter__ refuses
        pass


class LentCursor:
    """A cursor of :class:`LentConnection`; no ``connection`` attribute."""

    def __init__(self, lent: LentConnection, cursor: sqlite3.Cursor) -> None:
        self._lent = lent
        self._cursor = cursor

    def execute(self, sql: str, parameters: Any = ()) -> "LentCursor":
        self._lent._run(lambda: self._cursor.execute(sql, parameters))
        return self

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any]) -> "LentCursor":
        self._lent._run(lambda: self._cursor.executemany(sql, seq_of_parameters))
        return self

    def fetchone(self) -> Any:
        return self._lent._run(self._cursor.fetchone)

    def fetchmany(self, size: Optional[int] = None) -> list[Any]:
        n = self._cursor.arraysize if size is None else size
        return self._lent._run(lambda: self._cursor.fetchmany(n))

    def fetchall(self) -> list[Any]:
        return self._lent._run(self._cursor.fetchall)

    def __iter__(self) -> Iterator[Any]:
        while True:
            row = self.fetchone()
            if row is None:
                return
            yield row

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> Optional[int]:
        return self._cursor.lastrowid

    @property
    def description(self) -> Any:
        return self._cursor.description

    def close(self) -> None:
        self._cursor.close()


def is_refusal(e: sqlite3.Error) -> bool:
    """The authorizer's answer to transaction control, not a database error."""
    return getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_AUTH
