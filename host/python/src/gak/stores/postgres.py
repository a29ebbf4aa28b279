"""The PostgreSQL binding (psycopg 3): the same tables, keys and advisory-lock
protocol as the Rust host's ``host/rust/src/store/postgres.rs``, so hosts in
both languages can share one schema.

Isolation: every key a transaction reads or writes is first locked with
``pg_advisory_xact_lock(hashtextextended('<schema>/<table>/<key>', 0))``
(hashed by the server, so every language locks the same ids), then read in a
*separate* statement under READ COMMITTED, whose snapshot is therefore taken
after the lock is held and sees the previous holder's commit. An advisory
lock also covers a key whose row does not exist yet, so two claimers of a
fresh key serialize. Deadlocks (40P01) and serialization failures (40001) are
conflicts: the kernel re-runs the whole call. Range reads (``scan``) use
``COLLATE "C"`` byte order and take no locks (the component re-reads with
``get`` every key it decides on).
"""

from __future__ import annotations

import re
import threading
from typing import Any, Optional, Sequence
from urllib.parse import parse_qsl, urlencode

import psycopg
from psycopg import errors as pgerr
from psycopg.pq import TransactionStatus

from ..errors import OpenError
from .base import TABLES, StoreConflict, StoreFailure, checked_table, prefix_end
from .pg_body import BodyCursor
from .urls import scrub, shown

#: How long connecting may take before the binding gives up (seconds).
CONNECT_TIMEOUT = 5

_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}\Z")
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
_LOCK_MANY = (
    "SELECT pg_advisory_xact_lock(h) FROM (SELECT DISTINCT hashtextextended(x, 0) AS h "
    "FROM unnest(%s::text[]) AS x) AS l ORDER BY h"
)
_DB_NOW = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::int8"


def valid_schema(name: str) -> bool:
    """A plain lowercase identifier, so it can be quoted safely and can never
    name another schema through punctuation (same rule as the Rust host)."""
    return bool(_SCHEMA.match(name)) and not name.startswith("pg_")


def column_type(table: str) -> str:
    """Kernel tables hold the component's JSON; ``downstream`` plain text."""
    return "text" if table == "downstream" else "jsonb"


def _fault(e: Exception) -> Exception:
    if isinstance(e, (pgerr.SerializationFailure, pgerr.DeadlockDetected)):
        return StoreConflict(str(e))
    diag = getattr(e, "diag", None)
    code = getattr(e, "sqlstate", None)
    if diag is not None and code:
        return StoreFailure(f"{diag.severity or 'ERROR'}: {diag.message_primary} ({code})")
    return StoreFailure(f"{type(e).__name__}: {e}")


class PostgresBackend:
    """A schema in a PostgreSQL database:
    ``postgres://user@host:port/db?schema=NAME[&clock=db]``."""

    def __init__(self, url: str, *, create: bool = True) -> None:
        try:
            self._parse(url)
            if create:
                self.ensure_schema()
        except OpenError as e:
            # Messages name the server, never the password (HOSTS.md rule 14).
            raise OpenError(scrub(str(e), url)) from None

    def _parse(self, url: str) -> None:
        self._url = url
        base, _, query = url.partition("?")
        self.schema = "gak"
        self.database_clock = False
        passthrough: list[tuple[str, str]] = []
        for k, v in parse_qsl(query, keep_blank_values=True):
            if k == "schema":
                self.schema = v
            elif k == "clock":
                if v in ("db", "database"):
                    self.database_clock = True
                elif v != "host":
                    raise OpenError(f"clock={v} (expected db or host)")
            else:
                passthrough.append((k, v))
        if not valid_schema(self.schema):
            raise OpenError(
                f"schema {self.schema!r}: expected a lowercase identifier "
                "([a-z_][a-z0-9_]*, at most 63 bytes, not pg_*)"
            )
        if not any(k == "connect_timeout" for k, _ in passthrough):
            passthrough.append(("connect_timeout", str(CONNECT_TIMEOUT)))
        self.dsn = f"{base}?{urlencode(passthrough)}"
        self._base = base
        self._last_now = 0
        self._now_lock = threading.Lock()

    def with_schema(self, schema: str) -> "PostgresBackend":
        """The same database, another schema (not created)."""
        other = PostgresBackend.__new__(PostgresBackend)
        other.__dict__.update(self.__dict__)
        if not valid_schema(schema):
            raise OpenError(f"schema {schema!r}")
        other.schema = schema
        other._last_now = 0
        other._now_lock = threading.Lock()
        return other

    def connect(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self.dsn, autocommit=True)
        except psycopg.Error as e:
            host = self._base.split("@")[-1]
            raise StoreFailure(f"cannot connect to PostgreSQL at {host}: {scrub(str(e), self._url)}") from None

    def _admin(self, sql: str) -> None:
        conn = self.connect()
        try:
            with conn.transaction():
                conn.execute(sql)
        except psycopg.Error as e:
            raise _fault(e) from e
        finally:
            conn.close()

    def ensure_schema(self) -> None:
        """Create the schema and its tables if missing (idempotent, safe to
        race: the same DDL and lock id as the Rust host)."""
        s = self.schema
        stmts = [f'SELECT pg_advisory_xact_lock(7135862); CREATE SCHEMA IF NOT EXISTS "{s}";']
        for t in TABLES:
            stmts.append(
                f'CREATE TABLE IF NOT EXISTS "{s}"."{t}" (key text COLLATE "C" PRIMARY KEY, '
                f"value {column_type(t)} NOT NULL);"
            )
        try:
            self._admin("".join(stmts))
        except StoreFailure as e:
            raise OpenError(str(e)) from e

    def drop_schema(self) -> None:
        """Drop the schema and everything in it."""
        self._admin(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')

    def session(self) -> "PostgresSession":
        return PostgresSession(self)

    def describe(self) -> str:
        # The password goes first (it may hold '?' or '@'), then the query.
        scheme, _, rest = shown(self._url).partition("?")[0].partition("://")
        return f"{scheme}://{rest.rpartition('@')[2]} (schema {self.schema})"

    def close(self) -> None:
        pass

    def _monotonic(self, db_ms: int) -> int:
        with self._now_lock:
            self._last_now = max(self._last_now, db_ms)
            return self._last_now


class PostgresSession:
    """One connection; one READ COMMITTED transaction at a time."""

    def __init__(self, backend: PostgresBackend) -> None:
        self._backend = backend
        self._conn: Optional[psycopg.Connection[Any]] = None
        self._open = False
        #: Which body holds the lent cursor (0: none); bumped when it returns,
        #: so a cursor a body kept refuses to run later.
        self._lease = 0
        self._leases = 0
        #: The first store error a body met through its cursor.
        self._body_fault: Optional[Exception] = None
        s = backend.schema
        self._get = {t: f'SELECT value::text FROM "{s}"."{t}" WHERE key = %s' for t in TABLES}
        self._put = {
            t: f'INSERT INTO "{s}"."{t}" (key, value) VALUES (%s, %s::text::{column_type(t)}) '
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
            for t in TABLES
        }
        self._delete = {t: f'DELETE FROM "{s}"."{t}" WHERE key = %s' for t in TABLES}
        upper = {True: 'AND key COLLATE "C" < %s', False: ""}
        self._scan = {
            (t, strict, bounded): f'SELECT key, value::text FROM "{s}"."{t}" WHERE key COLLATE "C" '
            f"{'>' if strict else '>='} %s {upper[bounded]} ORDER BY key COLLATE \"C\" LIMIT %s"
            for t in TABLES
            for strict in (False, True)
            for bounded in (False, True)
        }

    def _lock_name(self, table: str, key: str) -> str:
        return f"{self._backend.schema}/{table}/{key}"

    def _cursor(self) -> psycopg.Connection[Any]:
        if not self._open or self._conn is None:
            raise StoreFailure("no open transaction")
        return self._conn

    def _check(self, e: Exception) -> Exception:
        # A connection that failed mid-transaction is dropped: the server
        # rolls the transaction back when it goes; the next begin reconnects.
        if self._conn is not None and (self._conn.closed or self._conn.broken):
            self._conn = None
            self._open = False
        return _fault(e)

    def begin(self) -> None:
        if self._open:
            raise StoreFailure("transaction already open")
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = self._backend.connect()
        try:
            self._conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
        except psycopg.Error as e:
            raise self._check(e) from e
        self._open = True

    def get(self, table: str, key: str) -> Optional[str]:
        return self.get_many([(table, key)])[0]

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[Optional[str]]:
        conn = self._cursor()
        names = [self._lock_name(checked_table(t), k) for t, k in keys]
        try:
            # The locks first (one order for every transaction: by lock id),
            # then each read as its own statement, so its snapshot starts
            # after every lock is held.
            if len(names) == 1:
                conn.execute(_LOCK, (names[0],))
            else:
                conn.execute(_LOCK_MANY, (names,))
            out: list[Optional[str]] = []
            for t, k in keys:
                row = conn.execute(self._get[t], (k,)).fetchone()
                out.append(None if row is None else row[0])
            return out
        except psycopg.Error as e:
            raise self._check(e) from e

    def _locked_write(self, table: str, key: str, sql: str, params: tuple[Any, ...]) -> None:
        conn = self._cursor()
        try:
            # Already held if the key was read first (the component always
            # reads first); re-taking it is free.
            conn.execute(_LOCK, (self._lock_name(table, key),))
            conn.execute(sql, params)
        except psycopg.Error as e:
            raise self._check(e) from e

    def put(self, table: str, key: str, value: str) -> None:
        t = checked_table(table)
        self._locked_write(t, key, self._put[t], (key, value))

    def delete(self, table: str, key: str) -> None:
        t = checked_table(table)
        self._locked_write(t, key, self._delete[t], (key,))

    def scan(self, table: str, prefix: str, after: Optional[str], limit: int) -> list[tuple[str, str]]:
        conn = self._cursor()
        t = checked_table(table)
        strict = after is not None and after >= prefix
        lower = after if strict else prefix
        end = prefix_end(prefix)
        params: tuple[Any, ...] = (lower, end, limit) if end is not None else (lower, limit)
        try:
            rows = conn.execute(self._scan[(t, strict, end is not None)], params).fetchall()
        except psycopg.Error as e:
            raise self._check(e) from e
        return [(k, v) for k, v in rows]

    def commit(self) -> None:
        conn = self._cursor()
        status = conn.info.transaction_status
        if status == TransactionStatus.INERROR:
            # A statement failed: PostgreSQL would answer COMMIT with
            # ROLLBACK, not an error. Nothing is committed; say so.
            self.rollback()
            raise StoreFailure("a statement of the transaction failed; it was rolled back, nothing committed")
        if status != TransactionStatus.INTRANS:
            self._open = False
            raise StoreFailure(f"no transaction to commit (connection {status.name}): it was ended inside the call")
        try:
            done = conn.execute("COMMIT").statusmessage
        except psycopg.Error as e:
            raise self._check(e) from e
        finally:
            self._open = False
        if done != "COMMIT":
            raise StoreFailure(f"COMMIT answered {done!r}: nothing was committed")

    def rollback(self) -> None:
        if self._open:
            self._open = False
            if self._conn is not None:
                try:
                    self._conn.execute("ROLLBACK")
                except psycopg.Error:
                    self._conn = None

    def now(self) -> Optional[int]:
        if not self._backend.database_clock:
            return None
        conn = self._cursor()
        try:
            row = conn.execute(_DB_NOW).fetchone()
        except psycopg.Error as e:
            raise self._check(e) from e
        return self._backend._monotonic(max(int(row[0]), 0) if row else 0)

    def close(self) -> None:
        self.rollback()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def lend(self) -> None:
        self._leases += 1
        self._lease = self._leases
        self._body_fault = None

    def reclaim(self) -> Optional[Exception]:
        self._lease = 0
        fault, self._body_fault = self._body_fault, None
        if fault is not None:
            return fault
        if not self._open or self._conn is None:
            return StoreFailure("the connection was lost while the body ran")
        status = self._conn.info.transaction_status
        if status == TransactionStatus.INERROR:
            return StoreFailure("a statement failed while the body ran; the transaction is aborted")
        if status != TransactionStatus.INTRANS:
            return StoreFailure(f"the transaction ended while the body ran (connection {status.name})")
        return None

    def _body_failed(self, e: psycopg.Error) -> None:
        fault = self._check(e)
        if self._body_fault is None:
            self._body_fault = fault

    def _body_check(self) -> None:
        # Belt and braces behind the keyword check: a statement that left
        # the transaction (a procedure, a function) is a failure as well.
        conn = self._conn
        status = conn.info.transaction_status if conn is not None else None
        if status != TransactionStatus.INTRANS and self._body_fault is None:
            self._body_fault = StoreFailure(f"a body's statement left the transaction ({status})")

    @property
    def raw(self) -> Any:
        """A guarded cursor over the open transaction (:class:`BodyCursor`;
        parameters only: never splice data into SQL)."""
        if not self._open or self._conn is None or not self._lease:
            return None
        return BodyCursor(self, self._conn.cursor(), self._lease)
