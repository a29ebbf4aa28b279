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

#: The kernel's eight tables, plus ``downstream``: a key-value space fenced
#: sink bodies may write in the sink's transaction.
TABLES: tuple[str, ...] = (
    "snapshots",
    "outcomes",
    "actions",
    "resources",
    "sinks",
    "tasks",
    "indexes",
    "meta",
    "downstream",
)
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


def prefix_end(prefix: str) -> Optional[str]:
    """The smallest string above every string starting with ``prefix``, for a
    range read ``prefix <= key < end``; ``None`` when there is none (the empty
    prefix, or one made only of U+10FFFF). Code point order is UTF-8 byte
    order, so this bounds the same keys in every binding."""
    chars = list(prefix)
    while chars:
        last = ord(chars.pop())
        if last == 0xD7FF:
            chars.append("\ue000")
            return "".join(chars)
        if last < 0x10FFFF:
            chars.append(chr(last + 1))
            return "".join(chars)
    return None


class Session(Protocol):
    """One worker's connection. At most one transaction is open at a time."""

    def begin(self) -> None:
        """Open a transaction, taking what it needs to write up front."""

    def get(self, table: str, key: str) -> Optional[str]:
        """Read a key."""

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[Optional[str]]:
        """Read several keys, answers in the order asked."""

    def put(self, table: str, key: str, value: str) -> None:
        """Insert or overwrite."""

    def delete(self, table: str, key: str) -> None:
        """Remove if present."""

    def scan(self, table: str, prefix: str, after: Optional[str], limit: int) -> list[tuple[str, str]]:
        """At most ``limit`` entries whose key starts with ``prefix`` and sorts
        strictly after ``after``, in key byte order, from the key index."""

    def commit(self) -> None:
        """Make the transaction's writes durable and visible."""

    def rollback(self) -> None:
        """Discard the transaction's writes. Never raises."""

    def now(self) -> Optional[int]:
        """The database's clock in ms when the binding judges expiry by it."""

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


class Backend(Protocol):
    """A database (or map) the kernel can run against."""

    def session(self) -> Session:
        """A new session for one worker."""

    def describe(self) -> str:
        """A human description without secrets."""

    def close(self) -> None:
        """Release shared resources."""
