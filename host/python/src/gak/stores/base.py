"""What a store binding must provide: sessions with one transaction at a time.

The contract every binding keeps (the Rust host's ``store/mod.rs`` states the
same one):

- **Atomicity**: a transaction's writes become visible all at once at
  ``commit``, or never.
- **Isolation**: transactions touching the same keys are serializable,
  including keys that do not exist yet (two claimers of a fresh key).
- **Own writes**: reads inside a transaction see its earlier writes.
- **Conflicts** (busy database, serialization failure, deadlock) raise
  :class:`StoreConflict`; the kernel re-runs the whole call. Any other
  failure raises :class:`StoreFailure`.
- **Data is never SQL**: table names come from :data:`TABLES`, keys and
  values are bound parameters.
"""

from __future__ import annotations

from typing import Any, Optional, Protocol, Sequence

#: A point read: ``(table, key)``.
Key = tuple[str, str]
#: A range read: ``(table, prefix, after, limit)``: at most ``limit``
#: entries whose key starts with ``prefix`` and sorts strictly after
#: ``after`` (``None``: from the first), in key byte order.
Range = tuple[str, str, Optional[str], int]
#: One entry of a write set: ``(table, key, value)``; ``value`` ``None``
#: removes the key.
Change = tuple[str, str, Optional[str]]
#: What :meth:`Session.read` answers: a value per key, a page of
#: ``(key, value)`` per range, and the binding's clock reading (ms) when the
#: clock was asked for and the binding judges expiry by its database's clock.
Answers = tuple[list[Optional[str]], list[list[tuple[str, str]]], Optional[int]]

from ._facts import TABLES, prefix_end

#: The kernel's tables, plus ``downstream``: a key-value space fenced sink
#: bodies may write in the sink's transaction (:data:`TABLES` is generated
#: from the WIT and ``host/sql/store.json``).
TABLE_SET = frozenset(TABLES)


class StoreConflict(Exception):
    """A serialization conflict or busy database: re-run the whole call."""


class StoreFailure(Exception):
    """Any other store failure (I/O, lost connection, bad state)."""


def checked_table(table: str) -> str:
    """``table`` if it is one of :data:`TABLES` (so it may be spliced into SQL)."""
    if table not in TABLE_SET:
        raise StoreFailure(f"unknown table {table!r}")
    return table


class Session(Protocol):
    """One worker's connection. At most one transaction is open at a time.

    The component reaches a session through two operations per call (WIT
    ``store.read`` and ``store.write``); ``get`` / ``put`` and the other
    one-key helpers of :class:`Helpers` are for the ``downstream`` API and
    for tests, written over the same two."""

    def begin(self) -> None:
        """Open a transaction, taking what it needs to write up front."""

    def read(self, keys: Sequence[Key], ranges: Sequence[Range], clock: bool = False) -> Answers:
        """Point reads, each serialized against every transaction that
        writes the key (locked before it is read), and range reads (one
        consistent snapshot each, from the key index, O(limit) entries),
        both seeing this transaction's own writes; answered in order. With
        ``clock``, the database's clock read after them, when the binding
        has one (else ``None``: the kernel's clock counts)."""

    def try_read(self, keys: Sequence[Key]) -> list[tuple[bool, Optional[str]]]:
        """Point reads that pass over keys an overlapping transaction holds
        at this moment (WIT ``store.try-read``, SPEC 10's skip-locked
        claiming): ``(True, None)`` for such a key (neither read nor
        locked, answered without waiting), else ``(False, value)``, read
        and locked as :meth:`read` does. A binding whose transactions
        exclude each other (memory, SQLite) never holds one
        (:meth:`Helpers.try_read`)."""

    def write(self, changes: Sequence[Change]) -> None:
        """Apply a write set (every key at most once) inside the
        transaction, taking the locks a read of its keys would. A binding
        MAY defer the statements until the next read or the commit; reads
        MUST still see them."""

    def get(self, table: str, key: str) -> Optional[str]:
        """One point read (:meth:`Helpers.get`)."""

    def put(self, table: str, key: str, value: str) -> None:
        """A one-entry write set (:meth:`Helpers.put`)."""

    def commit(self) -> None:
        """Make the transaction's writes durable and visible."""

    def rollback(self) -> None:
        """Discard the transaction's writes. Never raises."""

    def close(self) -> None:
        """Release the connection."""

    def lend(self) -> None:
        """A body (caller code) is about to run inside the open transaction:
        from now on :attr:`raw` refuses transaction control (``BEGIN``,
        ``COMMIT``, ``ROLLBACK``, ``SAVEPOINT``, ``RELEASE``, ``END``,
        ``ABORT``, ``PREPARE TRANSACTION``) with an error the body sees."""

    def reclaim(self) -> Optional[Exception]:
        """The body returned (or raised). A :class:`StoreConflict` /
        :class:`StoreFailure` when the body met a store error through
        :attr:`raw` — even one it caught — or the transaction is no longer
        open and healthy; ``None`` when the call may go on."""

    @property
    def raw(self) -> Any:
        """The open transaction's driver handle (``sqlite3.Connection`` or a
        guarded psycopg cursor) for a fenced sink body's own tables, else
        ``None``."""


class Helpers:
    """One-key reads and writes over :meth:`Session.read` /
    :meth:`Session.write`, so every binding (and the scripted store, which
    counts operations) sees them as the one operation each is."""

    def read(self, keys: Sequence[Key], ranges: Sequence[Range], clock: bool = False) -> Answers:
        raise NotImplementedError

    def write(self, changes: Sequence[Change]) -> None:
        raise NotImplementedError

    def try_read(self, keys: Sequence[Key]) -> list[tuple[bool, Optional[str]]]:
        """Every key read (and locked) as :meth:`read` reads it: a binding
        whose transactions exclude each other never meets a held key."""
        return [(False, v) for v in self.read(keys, ())[0]]

    def get(self, table: str, key: str) -> Optional[str]:
        """Read a key."""
        return self.read(((table, key),), ())[0][0]

    def get_many(self, keys: Sequence[Key]) -> list[Optional[str]]:
        """Read several keys, answers in the order asked."""
        return self.read(keys, ())[0]

    def scan(self, table: str, prefix: str, after: Optional[str], limit: int) -> list[tuple[str, str]]:
        """One range read."""
        return self.read((), ((table, prefix, after, limit),))[1][0]

    def put(self, table: str, key: str, value: str) -> None:
        """Insert or overwrite (a one-entry write set)."""
        self.write(((table, key, value),))

    def delete(self, table: str, key: str) -> None:
        """Remove if present (a one-entry write set)."""
        self.write(((table, key, None),))


class Backend(Protocol):
    """A database (or map) the kernel can run against."""

    def session(self) -> Session:
        """A new session for one worker."""

    def describe(self) -> str:
        """A human description without secrets."""

    def close(self) -> None:
        """Release shared resources."""
