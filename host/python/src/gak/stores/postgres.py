"""The PostgreSQL binding (psycopg 3): the same tables, keys and advisory-lock
protocol as the Rust host's ``host/rust/src/store/postgres``, so hosts in
both languages can share one schema. The schema and its two functions come
from the shared file ``host/sql/postgres.sql`` (shipped in this package as
``postgres.sql``), run every time a schema is opened.

Isolation: every key a transaction reads or writes is first locked with
``pg_advisory_xact_lock(hashtextextended('<schema>/<table>/<key>', 0))``
(hashed by the server, so every language locks the same ids), then read in a
*separate* statement under READ COMMITTED, whose snapshot is therefore taken
after the lock is held and sees the previous holder's commit; the server
function ``gak_read_v1`` does both for a whole batch of keys in one
statement. An advisory lock also covers a key whose row does not exist yet,
so two claimers of a fresh key serialize. Deadlocks (40P01) and
serialization failures (40001) are conflicts: the kernel re-runs the whole
call. Range reads use ``COLLATE "C"`` byte order and take no locks (the
component re-reads by key every entry it decides on).

A call costs two round trips, pipelined (psycopg's pipeline mode):

- ``BEGIN`` is not sent on its own: it goes out with the transaction's
  first read.
- The write set is deferred and coalesced (the last write of a key wins):
  it goes out as one ``gak_write_v1`` statement in front of the next read
  (so reads see the transaction's own writes), in front of a body's own
  statement, or together with ``COMMIT``.

A claim is four statements: ``BEGIN`` + ``gak_read_v1`` (one round trip),
``gak_write_v1`` + ``COMMIT`` (the second).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import psycopg
from psycopg import errors as pgerr
from psycopg import pq
from psycopg.pq import TransactionStatus

from ..errors import OpenError
from ._facts import POSTGRES_DEFAULT_SCHEMA, POSTGRES_MANY_KEYS_FROM, POSTGRES_SETUP_LOCK, valid_schema
from .base import TABLES, Answers, Change, Helpers, Key, Range, StoreConflict, StoreFailure, checked_table, prefix_end
from . import pg_url
from .pg_body import BodyCursor
from .urls import scrub

#: How long connecting may take before the binding gives up (seconds).
CONNECT_TIMEOUT = 5

#: The shared DDL and server functions (a copy of ``host/sql/postgres.sql``;
#: ``tests/test_wheel.py`` checks they are the same bytes).
SQL_FILE = Path(__file__).with_name("postgres.sql")
#: Serializes concurrent set-ups of any schema, in every host.
_SETUP_LOCK = f"SELECT pg_advisory_xact_lock({POSTGRES_SETUP_LOCK});"
_BEGIN = "BEGIN ISOLATION LEVEL READ COMMITTED"
#: The transaction's id; assigns one if the transaction has none yet.
_XID = "SELECT txid_current()"


def setup_sql(schema: str) -> str:
    """The shared file with ``@schema@`` replaced by ``schema`` (validated
    first: a plain identifier, never data)."""
    if not valid_schema(schema):
        raise OpenError(f"schema {schema!r}")
    try:
        text = SQL_FILE.read_text(encoding="utf-8")
    except OSError as e:
        raise OpenError(f"cannot read {SQL_FILE}: {e}") from e
    return text.replace("@schema@", schema)


def column_type(table: str) -> str:
    """Kernel tables hold the component's JSON; ``downstream`` plain text."""
    return "text" if table == "downstream" else "jsonb"


def _one(cursor: psycopg.Cursor[Any]) -> Any:
    """The single value a one-row, one-column statement answered."""
    row = cursor.fetchone()
    if row is None:
        raise psycopg.InterfaceError("expected one row, got none")
    return row[0]


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
        parts = pg_url.parse(url)
        self.schema = POSTGRES_DEFAULT_SCHEMA
        self.database_clock = False
        passthrough: dict[str, str] = {}
        for k, v in parts.params.items():
            if k == "schema":
                self.schema = v
            elif k == "clock":
                if v in ("db", "database"):
                    self.database_clock = True
                elif v != "host":
                    raise OpenError(f"clock={v} (expected db or host)")
            else:
                passthrough[k] = v
        if not valid_schema(self.schema):
            raise OpenError(
                f"schema {self.schema!r}: expected a lowercase identifier "
                "([a-z_][a-z0-9_]*, at most 63 bytes, not pg_*)"
            )
        passthrough.setdefault("connect_timeout", str(CONNECT_TIMEOUT))
        # Keywords, never the URL: libpq must not parse the user
        # information again (its URL grammar cuts a password at '@' or '?').
        self._conninfo = parts.conninfo(passthrough)
        #: Where the URL points (hosts and database), for messages.
        self.target = parts.target()
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
            return psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as e:
            raise StoreFailure(f"cannot connect to PostgreSQL at {self.target}: {scrub(str(e), self._url)}") from None

    def _admin(self, sql: str) -> None:
        conn = self.connect()
        try:
            with conn.transaction():
                conn.execute(sql)
        except psycopg.Error as e:
            fault = _fault(e)
            fault.args = (scrub(str(fault), self._url),)
            raise fault from None
        finally:
            conn.close()

    def ensure_schema(self) -> None:
        """Create the schema, its tables and its functions if missing
        (idempotent, safe to race: the shared file, run after the same lock
        id as every host takes)."""
        try:
            self._admin(_SETUP_LOCK + setup_sql(self.schema))
        except StoreFailure as e:
            raise OpenError(str(e)) from e

    def drop_schema(self) -> None:
        """Drop the schema and everything in it."""
        self._admin(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')

    def session(self) -> "PostgresSession":
        return PostgresSession(self)

    def describe(self) -> str:
        return f"postgres://{self.target} (schema {self.schema})"

    def close(self) -> None:
        pass

    def _monotonic(self, db_ms: int) -> int:
        with self._now_lock:
            self._last_now = max(self._last_now, db_ms)
            return self._last_now


class PostgresSession(Helpers):
    """One connection; one READ COMMITTED transaction at a time, pipelined
    (see the module docs)."""

    def __init__(self, backend: PostgresBackend) -> None:
        self._backend = backend
        self._conn: Optional[psycopg.Connection[Any]] = None
        self._open = False
        #: ``BEGIN`` is still to be sent, with the first statement.
        self._begin_pending = False
        #: The write set not sent yet, by (table, key): the last write wins.
        self._deferred: dict[tuple[str, str], Optional[str]] = {}
        #: Which body holds the lent cursor (0: none); bumped when it returns,
        #: so a cursor a body kept refuses to run later.
        self._lease = 0
        self._leases = 0
        #: The first store error a body met through its cursor.
        self._body_fault: Optional[Exception] = None
        #: A body ran statements of its own in this transaction.
        self._lent = False
        #: The transaction's id (``txid_current()``), read with a body's
        #: first statement; every later statement of a body must leave it so.
        self._xid: Optional[int] = None
        #: Why the connection no longer runs the kernel's transaction (a
        #: body's statement ended it): nothing of the kernel's is sent then.
        self._foreign: Optional[str] = None
        #: A pipeline failed: psycopg's prepared statements may not be the
        #: server's; the rollback makes both forget them.
        self._forget_prepared = False
        #: What this session sent, for tests and tools: statements
        #: (``BEGIN`` and ``COMMIT`` included) and round trips.
        self.statements = 0
        self.round_trips = 0
        s = backend.schema
        self._read_sql = f'SELECT "{s}".gak_read_v1(%s::text[], %s::text[], %s)'
        self._try_read_sql = f'SELECT held, vals FROM "{s}".gak_try_read_v1(%s::text[], %s::text[])'
        self._write_sql = f'SELECT "{s}".gak_write_v1(%s::text[], %s::text[], %s::text[])'
        # From POSTGRES_MANY_KEYS_FROM keys (a batch's): one statement per
        # table instead of one per key, the same locks and answers.
        self._read_many_sql = f'SELECT "{s}".gak_read_many_v1(%s::text[], %s::text[], %s)'
        self._write_many_sql = f'SELECT "{s}".gak_write_many_v1(%s::text[], %s::text[], %s::text[])'
        upper = {True: 'AND key COLLATE "C" < %s', False: ""}
        self._range = {
            (t, strict, bounded): f'SELECT key, value::text FROM "{s}"."{t}" WHERE key COLLATE "C" '
            f"{'>' if strict else '>='} %s {upper[bounded]} ORDER BY key COLLATE \"C\" LIMIT %s"
            for t in TABLES
            for strict in (False, True)
            for bounded in (False, True)
        }

    def _connection(self) -> psycopg.Connection[Any]:
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

    def _pending(self) -> list[tuple[str, Any]]:
        """``BEGIN`` (if still to be sent) and the deferred write set, as
        statements to send first; from here on they count as sent, whatever
        the batch answers (a batch failing inside the server leaves a
        transaction open there that `rollback` must end)."""
        batch: list[tuple[str, Any]] = []
        if self._begin_pending:
            batch.append((_BEGIN, None))
        if self._deferred:
            tables, keys, values = [], [], []
            for (t, k), v in self._deferred.items():
                tables.append(t)
                keys.append(k)
                values.append(v)
            self._deferred = {}
            many = len(keys) >= POSTGRES_MANY_KEYS_FROM
            batch.append((self._write_many_sql if many else self._write_sql, (tables, keys, values)))
        self._begin_pending = False
        return batch

    def _send(self, statements: list[tuple[str, Any]]) -> list[psycopg.Cursor[Any]]:
        """Send ``BEGIN`` (if still pending), the deferred write set and
        ``statements`` in one round trip; their cursors, in order. Raises
        psycopg's error (the first statement that failed)."""
        conn = self._connection()
        if self._foreign is not None:
            # Whatever runs on this connection now is not the kernel's
            # transaction: none of the kernel's writes may land in it.
            raise StoreFailure(f"{self._foreign}; nothing more is sent")
        batch = self._pending()
        batch.extend(statements)
        self.statements += len(batch)
        self.round_trips += 1
        if len(batch) == 1:
            sql, params = batch[0]
            return [conn.execute(sql, params)]
        # Pipeline mode: every statement goes on the wire before any answer
        # is awaited; leaving the block sends one Sync and reads the answers.
        try:
            with conn.pipeline():
                cursors = [conn.execute(sql, params) for sql, params in batch]
        except psycopg.Error:
            self._forget_prepared = True
            raise
        return cursors[len(batch) - len(statements) :]

    def _run_lent(self, run: Callable[[], object]) -> None:
        """Run a body's statement (``run`` executes it on the body's cursor)
        in the kernel's transaction, in one round trip: after what is pending
        (so it sees the transaction's writes), on the extended protocol
        (pipeline mode: one statement per call, whatever the text holds),
        followed by ``txid_current()``, which must still name the
        transaction the kernel began (read with the body's first statement:
        the xid is assigned then, and a sink's call writes anyway)."""
        conn = self._connection()
        if self._foreign is not None:
            raise psycopg.OperationalError(f"{self._foreign}; nothing more is sent")
        batch = self._pending()
        first = self._xid is None
        self.statements += len(batch) + first + 2
        self.round_trips += 1
        before: Optional[psycopg.Cursor[Any]] = None
        try:
            with conn.pipeline():
                for sql, params in batch:
                    conn.execute(sql, params)
                if first:
                    before = conn.execute(_XID)
                run()
                after = conn.execute(_XID)
        except psycopg.Error as e:
            self._forget_prepared = True
            self._body_failed(e)
            raise
        try:
            if before is not None:
                self._xid = _one(before)
            now = _one(after)
        except psycopg.Error:
            now = None  # no answer: not known to be the kernel's transaction
        if now is None or now != self._xid:
            self._foreign = "a body's statement ended the kernel's transaction (another transaction runs now)"
            if self._body_fault is None:
                self._body_fault = StoreFailure(self._foreign)
            raise psycopg.OperationalError(self._foreign)
        self._body_check()

    def begin(self) -> None:
        if self._open:
            raise StoreFailure("transaction already open")
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = self._backend.connect()
        self._open = True
        self._begin_pending = True
        self._deferred = {}
        self._lent = False
        self._xid = None
        self._foreign = None

    def read(self, keys: Sequence[Key], ranges: Sequence[Range], clock: bool = False) -> Answers:
        self._connection()
        db_clock = clock and self._backend.database_clock
        statements: list[tuple[str, Any]] = []
        point = bool(keys) or db_clock
        if point:
            # First: the point reads take their locks (and the database
            # clock is read after them), then the range reads run, each
            # with a snapshot taken after the locks were granted (HOSTS.md).
            tables = [checked_table(t) for t, _ in keys]
            sql = self._read_many_sql if len(keys) >= POSTGRES_MANY_KEYS_FROM else self._read_sql
            statements.append((sql, (tables, [k for _, k in keys], db_clock)))
        for t, prefix, after, limit in ranges:
            strict = after is not None and after >= prefix
            lower = after if strict else prefix
            end = prefix_end(prefix)
            params = (lower, end, limit) if end is not None else (lower, limit)
            statements.append((self._range[(checked_table(t), strict, end is not None)], params))
        if not statements:
            return [], [], None
        try:
            cursors = self._send(statements)
            answer = cursors[0].fetchone() if point else None
            pages: list[list[tuple[str, str]]] = [c.fetchall() for c in cursors[int(point) :]]
        except psycopg.Error as e:
            raise self._check(e) from e
        values: list[Optional[str]] = []
        now: Optional[int] = None
        if answer is not None:
            found = list(answer[0] or [])
            if db_clock:
                now = self._backend._monotonic(max(int(found.pop()), 0))
            values = found
        if len(values) != len(keys):
            raise StoreFailure(f"gak_read_v1 answered {len(values)} values for {len(keys)} keys")
        return values, pages, now

    def try_read(self, keys: Sequence[Key]) -> list[tuple[bool, Optional[str]]]:
        self._connection()
        if not keys:
            return []
        tables = [checked_table(t) for t, _ in keys]
        try:
            cursors = self._send([(self._try_read_sql, (tables, [k for _, k in keys]))])
            answer = cursors[0].fetchone()
        except psycopg.Error as e:
            raise self._check(e) from e
        held = list(answer[0] or []) if answer is not None else []
        vals = list(answer[1] or []) if answer is not None else []
        if len(held) != len(keys) or len(vals) != len(keys):
            raise StoreFailure(f"gak_try_read_v1 answered {len(vals)} values for {len(keys)} keys")
        return [(bool(h), None if h else v) for h, v in zip(held, vals)]

    def write(self, changes: Sequence[Change]) -> None:
        self._connection()
        deferred = self._deferred
        for t, k, v in changes:
            deferred[(checked_table(t), k)] = v

    def commit(self) -> None:
        conn = self._connection()
        if self._foreign is not None:
            # Never report committed what is not the kernel's transaction.
            self.rollback()
            raise StoreFailure(f"{self._foreign}; the kernel committed nothing")
        if self._begin_pending and not self._deferred:
            # Nothing was ever sent: there is no transaction to end.
            self._end()
            return
        if not self._begin_pending:
            status = conn.info.transaction_status
            if status == TransactionStatus.INERROR:
                # A statement failed: PostgreSQL would answer COMMIT with
                # ROLLBACK, not an error. Nothing is committed; say so.
                self.rollback()
                raise StoreFailure("a statement of the transaction failed; it was rolled back, nothing committed")
            if status != TransactionStatus.INTRANS:
                self._end()
                raise StoreFailure(
                    f"no transaction to commit (connection {status.name}): it was ended inside the call"
                )
        try:
            (done,) = self._send([("COMMIT", None)])
            answer = done.statusmessage
        except psycopg.Error as e:
            # An error answered for the write set or the COMMIT: nothing
            # committed (a deadlock is a conflict, safe to re-run). A lost
            # connection: ambiguous, a failure (never re-run).
            fault = self._check(e)
            self._abort()
            raise fault from e
        self._end()
        if answer != "COMMIT":
            raise StoreFailure(f"COMMIT answered {answer!r}: nothing was committed")

    def _end(self) -> None:
        self._open = False
        self._begin_pending = False
        self._deferred = {}

    def _abort(self) -> None:
        """End whatever the server still holds open after a failed batch; a
        connection that cannot say so is dropped."""
        self._end()
        self._send_rollback()

    def _send_rollback(self) -> None:
        conn = self._conn
        if conn is None:
            return
        if self._lent or self._forget_prepared:
            # A body ran statements of its own on the connection (one may
            # have named an object the rollback takes away), or a pipeline
            # failed (psycopg counts a statement it was preparing after the
            # failure as prepared; the server skipped it): psycopg's own
            # rollback forgets every prepared statement, on both sides.
            # (`execute("ROLLBACK")` does so only the first time.) Outside
            # a transaction it forgets nothing: the connection goes.
            self._forget_prepared = False
            try:
                if conn.info.transaction_status == TransactionStatus.IDLE:
                    self._drop()
                else:
                    conn.rollback()
            except psycopg.Error:
                self._drop()
            return
        # The kernel's own statements only: straight to libpq, so psycopg
        # keeps its prepared statements (on a ROLLBACK it sends DEALLOCATE
        # ALL, one more round trip, and prepares everything again).
        try:
            result = conn.pgconn.exec_(b"ROLLBACK")
        except psycopg.Error:
            self._drop()
            return
        if result.status != pq.ExecStatus.COMMAND_OK:
            self._drop()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass

    def rollback(self) -> None:
        if self._open:
            sent = not self._begin_pending
            self._end()
            if sent:
                self._send_rollback()

    def close(self) -> None:
        self.rollback()
        self._drop()

    def lend(self) -> None:
        self._lent = True
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
        if self._foreign is not None:
            return StoreFailure(self._foreign)
        if self._begin_pending:
            return None  # nothing was sent: nothing the body did reached the server
        status = self._conn.info.transaction_status
        if status == TransactionStatus.INERROR:
            return StoreFailure("a statement failed while the body ran; the transaction is aborted")
        if status != TransactionStatus.INTRANS:
            return StoreFailure(f"the transaction ended while the body ran (connection {status.name})")
        return None

    def _body_failed(self, e: psycopg.Error) -> None:
        """A body's statement raised. What the database (or a lost
        connection) answered ends the call; what psycopg refused on this
        side before anything was sent (a value it cannot adapt) changes
        nothing and does not (HOSTS.md rule 12: alike on SQLite)."""
        conn = self._conn
        if (
            e.sqlstate is None
            and conn is not None
            and not (conn.closed or conn.broken)
            and conn.info.transaction_status == TransactionStatus.INTRANS
        ):
            return
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
