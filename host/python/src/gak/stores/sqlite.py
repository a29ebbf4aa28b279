"""The SQLite binding: the embedded default, byte-compatible with the Rust host's.

A file database in WAL mode. Each transaction is ``BEGIN IMMEDIATE``: it takes
the write lock up front, so two transactions — in threads or in separate
processes, in any host language — never interleave their read-decide-write.
(A deferred ``BEGIN`` would let two claimers both read "open" and then race to
upgrade; one would fail late with SQLITE_BUSY mid-decision.)

Tables are ``gak_<name>(key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)
WITHOUT ROWID`` holding JSON, exactly as ``host/rust/src/store/sqlite/``
creates them, so a Rust and a Python host can share one file.

A fenced sink's body gets a guarded wrapper of the connection (``down.raw``,
:mod:`.sqlite_body`, HOSTS.md rule 12).

After ``fork()`` the child closes every connection it inherited (SQLite keeps
one lock table per process and file; a child that inherits "a connection of
this process holds the write lock" can never write) and opens its own.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
import weakref
from typing import Any, Optional, Sequence

from .._fork import GATE, QUIET
from ..errors import OpenError
from ._facts import SQLITE_BUSY_TIMEOUT_MS, SQLITE_JOURNAL_MODE, SQLITE_SCHEMA
from .base import TABLES, Answers, Change, Helpers, Key, Range, StoreConflict, StoreFailure, checked_table, prefix_end
from .sqlite_body import LentConnection, is_refusal

#: How long one ``BEGIN IMMEDIATE`` waits for another writer (seconds) before
#: the binding reports a conflict (the kernel then retries with backoff).
BUSY_TIMEOUT = SQLITE_BUSY_TIMEOUT_MS / 1000

_BUSY = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}


def _fault(e: sqlite3.Error) -> Exception:
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None and (code & 0xFF) in _BUSY:
        return StoreConflict(str(e))
    return StoreFailure(f"{type(e).__name__}: {e}")


def _busy(e: sqlite3.Error) -> bool:
    code = getattr(e, "sqlite_errorcode", 0) or 0
    return (code & 0xFF) in _BUSY


def _with_busy_retry(f: Any) -> Any:
    """Run ``f`` (``BEGIN IMMEDIATE``), polling while the database is busy.

    The connections run with SQLite's busy timeout at 0 and poll here instead,
    every 0.05-2 ms with jitter, for up to ``BUSY_TIMEOUT``: SQLite's own busy
    handler sleeps 1, 2, 5 … 100 ms between tries, so a writer that commits
    and begins again in a tight loop keeps the lock for as long as it likes
    while the others sleep (measured: one process ran 300 claims while five
    waited). Polling makes handing over the lock between transactions
    likely. Still busy after ``BUSY_TIMEOUT``: a conflict, and the kernel
    re-runs the whole call with backoff.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT
    pause = 0.00005
    while True:
        try:
            return f()
        except sqlite3.OperationalError as e:
            if not _busy(e) or time.monotonic() >= deadline:
                raise
            time.sleep(pause * (0.5 + random.random()))
            pause = min(pause * 1.5, 0.002)


class SqliteBackend:
    """A SQLite database file (``sqlite:PATH[?synchronous=full|normal]``)."""

    def __init__(self, spec: str) -> None:
        path, _, query = spec.partition("?")
        self.synchronous = "FULL"
        for pair in filter(None, query.split("&")):
            if pair == "synchronous=full":
                self.synchronous = "FULL"
            elif pair == "synchronous=normal":
                self.synchronous = "NORMAL"
            else:
                raise OpenError(f"unknown sqlite option {pair!r}")
        if not path:
            raise OpenError("empty sqlite path")
        self.path = path
        parent = os.path.dirname(path)
        GATE.enter()  # a fork waits for this connection to close
        try:
            if parent:
                os.makedirs(parent, exist_ok=True)
            conn = self._connect()
            try:
                _with_busy_retry(lambda: conn.executescript(f"BEGIN IMMEDIATE;{SQLITE_SCHEMA}COMMIT;"))
            finally:
                conn.close()
        except (OSError, sqlite3.Error) as e:
            raise OpenError(f"cannot open sqlite:{path}: {e}") from e
        finally:
            GATE.exit()

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: the module issues no BEGIN/COMMIT of its own;
        # every transaction is the kernel's explicit BEGIN IMMEDIATE.
        # timeout=0: busy answers come back at once and are polled by
        # _with_busy_retry (BEGIN IMMEDIATE takes the write lock up front, so
        # no later statement of the transaction waits for another writer).
        conn = sqlite3.connect(
            self.path, timeout=0, isolation_level=None, check_same_thread=False, cached_statements=64
        )
        _with_busy_retry(lambda: conn.execute(f"PRAGMA journal_mode={SQLITE_JOURNAL_MODE}"))
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        return conn

    def session(self) -> "SqliteSession":
        try:
            return SqliteSession(self._connect())
        except sqlite3.Error as e:
            raise _fault(e) from e

    def describe(self) -> str:
        return f"sqlite:{self.path}"

    def close(self) -> None:
        pass


_GET = {t: f"SELECT value FROM gak_{t} WHERE key = ?" for t in TABLES}
_PUT = {
    t: f"INSERT INTO gak_{t} (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"
    for t in TABLES
}
_DELETE = {t: f"DELETE FROM gak_{t} WHERE key = ?" for t in TABLES}
#: Range reads by (table, strict, bounded above): a range on the primary key
#: (BINARY collation: byte order), so the B-tree serves it: O(limit) rows,
#: never a table scan.
_RANGE = {
    (t, strict, bounded): f"SELECT key, value FROM gak_{t} WHERE key {'>' if strict else '>='} ?"
    f"{' AND key < ?' if bounded else ''} ORDER BY key LIMIT ?"
    for t in TABLES
    for strict in (False, True)
    for bounded in (False, True)
}


def _deny_transaction_control(action: int, *_: Any) -> int:
    # BEGIN / COMMIT / ROLLBACK / END are SQLITE_TRANSACTION; SAVEPOINT and
    # RELEASE (and ROLLBACK TO) are SQLITE_SAVEPOINT.
    if action == sqlite3.SQLITE_TRANSACTION or action == sqlite3.SQLITE_SAVEPOINT:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


#: Every session of the process, so a forked child can close what it inherited.
_SESSIONS: "weakref.WeakSet[SqliteSession]" = weakref.WeakSet()


def _close_inherited() -> None:
    # In a forked child, before anything else runs. The fork waited for
    # every other thread's kernel call to end (gak._fork.GATE), so no thread
    # was inside SQLite; closing the copies releases the process-wide lock
    # table they share with any connection the child opens next. (A
    # transaction still open — a fork from inside a body — is rolled back in
    # the child's copy only; the parent's connection is untouched.) If the
    # wait timed out, a session with an open transaction may have been
    # mid-statement, its mutex held: closing it would hang the child.
    quiet = QUIET[0]
    for session in list(_SESSIONS):
        if quiet or not session._open:
            session._abandon()


os.register_at_fork(after_in_child=_close_inherited)


class SqliteSession(Helpers):
    """One connection; one ``BEGIN IMMEDIATE`` transaction at a time."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._open = False
        #: Which body holds the lent connection (0: none); bumped per body,
        #: so a handle a body kept refuses to run later.
        self._lease = 0
        self._leases = 0
        #: The first database error a body's statement met.
        self._body_fault: Optional[Exception] = None
        _SESSIONS.add(self)

    def _abandon(self) -> None:
        self._open = False
        try:
            self._conn.close()
        except sqlite3.Error:
            pass

    def _in_tx(self) -> sqlite3.Connection:
        if not self._open:
            raise StoreFailure("no open transaction")
        return self._conn

    def begin(self) -> None:
        if self._open:
            raise StoreFailure("transaction already open")
        try:
            _with_busy_retry(lambda: self._conn.execute("BEGIN IMMEDIATE"))
        except sqlite3.Error as e:
            raise _fault(e) from e
        self._open = True

    def read(self, keys: Sequence[Key], ranges: Sequence[Range], clock: bool = False) -> Answers:
        conn = self._in_tx()
        # Every statement is one of the connection's cached ones (the
        # sqlite3 module keeps them by text); BEGIN IMMEDIATE already holds
        # the write lock, so no read waits for another writer.
        try:
            values: list[Optional[str]] = []
            for t, k in keys:
                row = conn.execute(_GET[checked_table(t)], (k,)).fetchone()
                values.append(None if row is None else row[0])
            pages: list[list[tuple[str, str]]] = []
            for t, prefix, after, limit in ranges:
                strict = after is not None and after >= prefix
                lower = after if strict else prefix
                end = prefix_end(prefix)
                sql = _RANGE[(checked_table(t), strict, end is not None)]
                params = (lower, end, limit) if end is not None else (lower, limit)
                pages.append(conn.execute(sql, params).fetchall())
        except sqlite3.Error as e:
            raise _fault(e) from e
        return values, pages, None

    def write(self, changes: Sequence[Change]) -> None:
        conn = self._in_tx()
        try:
            for t, k, v in changes:
                if v is None:
                    conn.execute(_DELETE[checked_table(t)], (k,))
                else:
                    conn.execute(_PUT[checked_table(t)], (k, v))
        except sqlite3.Error as e:
            raise _fault(e) from e

    def commit(self) -> None:
        conn = self._in_tx()
        try:
            _with_busy_retry(lambda: conn.execute("COMMIT"))
        except sqlite3.Error as e:
            # COMMIT refused (busy): the transaction is still open and was not
            # applied; roll it back so the kernel can re-run the call.
            self.rollback()
            raise _fault(e) from e
        finally:
            self._open = False

    def rollback(self) -> None:
        if self._open:
            self._open = False
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.Error:
                # The connection is unusable; SQLite rolls back on close, and
                # the next BEGIN on it will fail loudly.
                pass

    def close(self) -> None:
        self.rollback()
        self._conn.close()

    def lend(self) -> None:
        # Setting an authorizer expires the prepared statements: the cached
        # ones are prepared again (and authorized) on their next use.
        self._conn.set_authorizer(_deny_transaction_control)
        self._leases += 1
        self._lease = self._leases
        self._body_fault = None

    def reclaim(self) -> Optional[Exception]:
        self._lease = 0
        fault, self._body_fault = self._body_fault, None
        try:
            self._conn.set_authorizer(None)
            still_open = self._conn.in_transaction
        except sqlite3.Error as e:
            return StoreFailure(f"taking the connection back from the body: {e}")
        if fault is not None:
            return fault
        if not still_open:
            # SQLite itself ends a transaction on some errors (disk full, I/O).
            return StoreFailure("the transaction ended while the body ran; nothing it did is committed")
        return None

    def _body_failed(self, e: sqlite3.Error) -> None:
        # Database errors only: the authorizer's refusal changes nothing, and
        # misuse (a wrong parameter count) never reached the database.
        if is_refusal(e) or getattr(e, "sqlite_errorcode", None) is None:
            return
        if self._body_fault is None:
            self._body_fault = _fault(e)

    @property
    def raw(self) -> Any:
        """The body's guarded connection (:class:`LentConnection`), while a body runs."""
        if not (self._open and self._lease):
            return None
        return LentConnection(self, self._conn, self._lease)
